/* SPDX-License-Identifier: BSD-3-Clause */
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
 * rvt-status --help and rvt-status(1) come from the option table below.
 */
#include "uct/ib/rvt/agent/attach/locate.h"
#include "uct/ib/rvt/agent/device/device.h"
#include "uct/ib/rvt/client/status.h"
#include "uct/ib/rvt/tools/usage.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct options {
    bool json = false;
    std::string socket, device, job_key;
    long port = 1;
};

/* parsing, --help and rvt-status(1) all come from this table
 * (tools/usage.h) */
std::vector<rvt::tools::option> option_table(options &o)
{
    auto text = [](const char *name, const char *value, const char *dflt,
                   const char *help, std::string &out) {
        return rvt::tools::option{name, value, dflt, help,
                                  [&out](std::string_view v) {
                                      out = v;
                                      return std::string();
                                  }};
    };
    return {
            {"json", "", "", "print the status as one JSON object",
             [&o](std::string_view) {
                 o.json = true;
                 return std::string();
             }},
            text("socket", "PATH", "",
                 "ask the agent listening on this attach socket; the options "
                 "below are then not used",
                 o.socket),
            text("device", "NAME", "the first device",
                 "the device the agent serves", o.device),
            {"port", "N", "1", "the port of that device (1-255)",
             [&o](std::string_view v) {
                 std::string s(v);
                 char *end = nullptr;
                 o.port    = std::strtol(s.c_str(), &end, 10);
                 if (s.empty() || *end != '\0' || o.port < 1 || o.port > 255) {
                     return "--port=" + s +
                            ": expected a whole number from 1 to 255";
                 }
                 return std::string();
             }},
            text("job-key", "KEY", "from the environment",
                 "the job the agent serves; else RVT_JOB_KEY, Slurm, PMIx, "
                 "Open MPI, or user.<uid>, as rvtd finds it",
                 o.job_key),
    };
}

const rvt::tools::program_doc doc = {
        .name     = "rvt-status",
        .section  = 1,
        .summary  = "show what a running rvt agent is doing",
        .synopsis = "[--json] [--socket=PATH | --device=NAME --port=N "
                    "--job-key=KEY]",
        .description =
                "Asks a running rvtd(8) what it is doing: the job and device "
                "it serves, its attached clients and their memory "
                "registrations, the registration mode, its peers and shared "
                "QPs, and what it cleaned up after clients that died; as "
                "text, or with --json as one JSON object.\n\n"
                "Without --socket the agent is found as rvtd finds its own "
                "place: the job key from --job-key or the environment, the "
                "first device, port 1.",
        .exit_status = "0 when the agent answered; 1 when none did (no agent, "
                       "refused); 2 on a bad option.",
        .see_also    = "rvtd(8)",
};

} // namespace

int main(int argc, char **argv)
{
    options opt;
    const auto table = option_table(opt);
    if (auto code = rvt::tools::parse_or_exit(argc, argv, doc, table)) {
        return *code;
    }
    auto &socket = opt.socket;
    if (socket.empty()) {
        auto loc = rvt::agent::locate(rvt::agent::named_or_first_device(
                                              opt.device),
                                      static_cast<int>(opt.port), opt.job_key);
        if (!loc) {
            std::fprintf(stderr, "rvt-status: %s\n", loc.error().c_str());
            return 1;
        }
        socket = loc.value().paths.socket;
    }
    auto status = rvt::client::query_status(socket, !opt.json);
    if (!status) {
        std::fprintf(stderr, "rvt-status: %s\n", status.error().c_str());
        return 1;
    }
    std::fputs(status.value().c_str(), stdout);
    return 0;
}
