/*
 * rvt-status: what a running rvtd is doing (its clients, their memory
 * registrations, the registration mode, and what it cleaned up after
 * clients that died), as text or JSON.
 *
 *   rvt-status [--json] [--socket=PATH]
 *   rvt-status [--json] [--device=NAME] [--port=N] [--job-key=KEY]
 *
 * Without --socket the agent is found as rvtd finds its own place: the
 * job key from the option or the environment, the first device, port 1.
 * Exit status: 0 answered, 1 no answer (no agent, refused), 2 bad option.
 */
#include "uct/ib/rvt/agent/locate.h"
#include "uct/ib/rvt/client/status.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

int main(int argc, char **argv)
{
    bool json = false;
    std::string socket, device, job_key;
    long port = 1;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        auto value         = [&](std::string_view name, std::string &out) {
            if (a.substr(0, name.size()) != name) {
                return false;
            }
            out = a.substr(name.size());
            return true;
        };
        std::string port_text;
        if (a == "--json") {
            json = true;
        } else if (a == "--help" || a == "-h") {
            std::printf("usage: rvt-status [--json] [--socket=PATH]\n"
                        "       rvt-status [--json] [--device=NAME] "
                        "[--port=N] [--job-key=KEY]\n");
            return 0;
        } else if (value("--socket=", socket) || value("--device=", device) ||
                   value("--job-key=", job_key)) {
        } else if (value("--port=", port_text)) {
            char *end = nullptr;
            port      = std::strtol(port_text.c_str(), &end, 10);
            if (port_text.empty() || *end != '\0' || port < 1 || port > 255) {
                std::fprintf(stderr,
                             "rvt-status: --port=%s: expected a whole "
                             "number from 1 to 255\n",
                             port_text.c_str());
                return 2;
            }
        } else {
            std::fprintf(stderr,
                         "rvt-status: unknown argument '%s' (see "
                         "rvt-status --help)\n",
                         argv[i]);
            return 2;
        }
    }
    if (socket.empty()) {
        auto loc = rvt::agent::locate(device, static_cast<int>(port), job_key);
        if (!loc) {
            std::fprintf(stderr, "rvt-status: %s\n", loc.error().c_str());
            return 1;
        }
        socket = loc.value().paths.socket;
    }
    auto status = rvt::client::query_status(socket, !json);
    if (!status) {
        std::fprintf(stderr, "rvt-status: %s\n", status.error().c_str());
        return 1;
    }
    std::fputs(status.value().c_str(), stdout);
    return 0;
}
