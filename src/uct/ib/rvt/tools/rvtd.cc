/*
 * rvtd: the per-node agent of one job (DESIGN.md part 1). For now it opens
 * the device and PD, serves the attach socket, and deregisters the memory
 * a client leaves behind when it dies; it exits a linger time after its
 * last client has gone. Connections between agents and the data path are
 * not served yet.
 *
 *   rvtd [--OPTION=VALUE ...]      see rvtd --help (generated from the
 *                                  option table below)
 *
 * Exit status: 0 after the linger time or SIGTERM/SIGINT; 1 when it cannot
 * start (another agent holds the key, no device, ...); 2 on a bad option.
 */
#include "uct/ib/rvt/agent/attach_server.h"
#include "uct/ib/rvt/agent/device.h"
#include "uct/ib/rvt/agent/instance_lock.h"
#include "uct/ib/rvt/agent/locate.h"
#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/common/unique_fd.h"
#include "uct/ib/rvt/common/uverbs_cmd.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace rvt;

struct options {
    std::string device;
    long port = 1;
    std::string job_key;
    long linger      = 10;
    long max_clients = 256;
    long work_ring   = 256;
    long compl_ring  = 1024;
};

/* One row per option: the only place its name, default and meaning are
 * written; parsing and --help both come from here. */
struct option_row {
    const char *name;
    const char *dflt;
    const char *help;
    std::function<std::string(options &, std::string_view)> set;
};

std::string
set_long(long &out, std::string_view v, long lo, long hi, const char *name)
{
    std::string s(v);
    char *end = nullptr;
    long x    = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || x < lo || x > hi) {
        return "--" + std::string(name) + "=" + s + ": expected a whole " +
               "number from " + std::to_string(lo) + " to " +
               std::to_string(hi);
    }
    out = x;
    return {};
}

const std::vector<option_row> &option_table()
{
    static const std::vector<option_row> rows = {
            {"device", "(the first device)", "RDMA device to serve, e.g. rxe1",
             [](options &o, std::string_view v) {
                 o.device = v;
                 return std::string();
             }},
            {"port", "1", "port of that device (1-255)",
             [](options &o, std::string_view v) {
                 return set_long(o.port, v, 1, 255, "port");
             }},
            {"job-key", "(from the environment)",
             "job this agent serves; else RVT_JOB_KEY, Slurm, PMIx, Open MPI, "
             "or user.<uid>",
             [](options &o, std::string_view v) {
                 o.job_key = v;
                 return std::string();
             }},
            {"linger", "10",
             "seconds to stay after the last client leaves; 0: forever",
             [](options &o, std::string_view v) {
                 return set_long(o.linger, v, 0, 86400, "linger");
             }},
            {"max-clients", "256", "client processes at once (1-512)",
             [](options &o, std::string_view v) {
                 return set_long(o.max_clients, v, 1, imm::max_clients,
                                 "max-clients");
             }},
            {"work-ring", "256", "work requests per client ring (power of two)",
             [](options &o, std::string_view v) {
                 return set_long(o.work_ring, v, 2, 1 << 24, "work-ring");
             }},
            {"completion-ring", "1024",
             "completions per client ring (power of two)",
             [](options &o, std::string_view v) {
                 return set_long(o.compl_ring, v, 2, 1 << 24,
                                 "completion-ring");
             }},
    };
    return rows;
}

void usage(FILE *out)
{
    std::fprintf(out, "usage: rvtd [--OPTION=VALUE ...]\n\n"
                      "The rvt node agent of one job. It runs in the "
                      "foreground, started\n"
                      "by a launcher or by hand (the first client does not "
                      "start it yet).\n\n");
    for (const auto &r : option_table()) {
        std::fprintf(out, "  --%-16s %s (default: %s)\n", r.name, r.help,
                     r.dflt);
    }
}

volatile std::sig_atomic_t g_stop = 0;

void log_line(std::string_view line)
{
    std::fprintf(stderr, "rvtd[%d]: %.*s\n", getpid(), (int)line.size(),
                 line.data());
    std::fflush(stderr);
}

/* Minimal JSON string escaping: our strings are names and paths. */
std::string quoted(std::string_view v)
{
    std::string out = "\"";
    for (char c : v) {
        if (c == '"' || c == '\\') {
            out += '\\';
        }
        out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
    }
    return out + "\"";
}

/* What rvt-status shows: who this agent is and who its clients are. */
struct status_counters {
    uint64_t clients_gone = 0;
    uint64_t mrs_cleaned  = 0; /* deregistered for clients that died */
    uint64_t mrs_leaked   = 0; /* ... and failed to */
};

std::string status_text(const agent::agent_location &loc,
                        const agent::device &d, uint64_t agent_id,
                        const agent::attach_server &srv,
                        const status_counters &n, bool human)
{
    auto clients = srv.clients();
    std::string out;
    if (human) {
        out += "agent     pid " + std::to_string(getpid()) + ", id " +
               std::to_string(agent_id) + "\n";
        out += "job       " + loc.job_key + " (from " + loc.job_key_source +
               ")\n";
        out += "device    " + loc.device + ":" + std::to_string(loc.port) +
               ", uverbs driver id " + std::to_string(d.driver_id()) +
               ", PD handle " + std::to_string(d.pd()->handle) + "\n";
        out += "memory    registration by uverbs ioctl on the shared fd\n";
        out += "socket    " + loc.paths.socket + "\n";
        out += "clients   " + std::to_string(clients.size()) + " attached, " +
               std::to_string(n.clients_gone) + " gone; MRs of gone " +
               "clients deregistered " + std::to_string(n.mrs_cleaned) +
               ", failed " + std::to_string(n.mrs_leaked) + "\n";
        for (const auto *c : clients) {
            out += "  index " + std::to_string(c->index) + "  pid " +
                   std::to_string(c->pid) + "  MRs " +
                   std::to_string(c->mr_handles.size()) + "\n";
        }
        out += "peers     none: connections between agents are not served "
               "yet\n";
        return out;
    }
    out += "{\"pid\": " + std::to_string(getpid()) +
           ", \"agent_id\": " + std::to_string(agent_id) +
           ", \"job_key\": " + quoted(loc.job_key) +
           ", \"job_key_source\": " + quoted(loc.job_key_source) +
           ", \"device\": " + quoted(loc.device) +
           ", \"port\": " + std::to_string(loc.port) +
           ", \"driver_id\": " + std::to_string(d.driver_id()) +
           ", \"pd_handle\": " + std::to_string(d.pd()->handle) +
           ", \"registration\": \"uverbs_ioctl\"" +
           ", \"socket\": " + quoted(loc.paths.socket) +
           ", \"clients_gone\": " + std::to_string(n.clients_gone) +
           ", \"mrs_cleaned\": " + std::to_string(n.mrs_cleaned) +
           ", \"mrs_leaked\": " + std::to_string(n.mrs_leaked) +
           ", \"peers\": []" + ", \"clients\": [";
    for (size_t i = 0; i < clients.size(); ++i) {
        out += std::string(i ? ", " : "") +
               "{\"index\": " + std::to_string(clients[i]->index) +
               ", \"pid\": " + std::to_string(clients[i]->pid) +
               ", \"mrs\": " + std::to_string(clients[i]->mr_handles.size()) +
               "}";
    }
    return out + "]}\n";
}

int run(const options &opt)
{
    const uid_t uid = getuid();
    auto loc        = agent::locate(opt.device, static_cast<int>(opt.port),
                                    opt.job_key);
    if (!loc) {
        log_line(loc.error());
        return 1;
    }
    const auto &paths    = loc.value().paths;
    const auto &key      = loc.value().job_key;
    const auto &dev_name = loc.value().device;
    /* Never two agents for one key: the lock comes before anything that
     * could disturb a running agent (such as replacing its socket). */
    auto lock = agent::instance_lock::acquire(paths.lock);
    if (!lock) {
        log_line(lock.error());
        return 1;
    }
    auto dev = agent::device::open(dev_name, static_cast<uint8_t>(opt.port));
    if (!dev) {
        log_line(dev.error());
        return 1;
    }
    auto layout = shm_layout::make(static_cast<uint32_t>(opt.work_ring),
                                   static_cast<uint32_t>(opt.compl_ring));
    if (!layout) {
        log_line(layout.error());
        return 2;
    }
    uint64_t agent_id = 0;
    if (getrandom(&agent_id, sizeof(agent_id), 0) != sizeof(agent_id)) {
        agent_id = static_cast<uint64_t>(std::time(nullptr)) ^ getpid();
    }
    agent::device &d = *dev.value();
    status_counters counters;
    auto on_gone = [&d, &counters](const agent::attached_client &c) {
        size_t freed = 0;
        for (uint32_t h : c.mr_handles) {
            auto r = uverbs::dereg_mr(d.context()->cmd_fd, d.driver_id(), h);
            if (r) {
                ++freed;
                ++counters.mrs_cleaned;
            } else {
                ++counters.mrs_leaked;
                log_line("client index " + std::to_string(c.index) + ": " +
                         r.error());
            }
        }
        ++counters.clients_gone;
        log_line("client index " + std::to_string(c.index) + " (pid " +
                 std::to_string(c.pid) + ") gone: deregistered " +
                 std::to_string(freed) + " of its " +
                 std::to_string(c.mr_handles.size()) + " MRs");
    };
    auto server = agent::attach_server::create(
            {paths.socket, key, uid, static_cast<uint32_t>(opt.max_clients),
             layout.value(), std::chrono::milliseconds(5000)},
            d.grant(agent_id), log_line, on_gone);
    if (!server) {
        log_line(server.error());
        return 1;
    }
    server.value()->set_status_source([&](bool human) {
        return status_text(loc.value(), d, agent_id, *server.value(), counters,
                           human);
    });
    log_line("serving job '" + key + "' (from " + loc.value().job_key_source +
             ") on " + dev_name + ":" + std::to_string(opt.port) + " at " +
             paths.socket + ", uverbs driver id " +
             std::to_string(d.driver_id()) + ", PD handle " +
             std::to_string(d.pd()->handle));

    using clock     = std::chrono::steady_clock;
    auto idle_since = clock::now();
    while (!g_stop) {
        server.value()->run_once(200);
        if (server.value()->attached_count() > 0) {
            idle_since = clock::now();
        } else if (opt.linger > 0 && clock::now() - idle_since >=
                                             std::chrono::seconds(opt.linger)) {
            log_line("no clients for " + std::to_string(opt.linger) +
                     " s: exiting");
            return 0;
        }
    }
    log_line("stopped by a signal");
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    options opt;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            usage(stdout);
            return 0;
        }
        auto eq = arg.find('=');
        if (arg.substr(0, 2) != "--" || eq == std::string_view::npos) {
            std::fprintf(stderr,
                         "rvtd: '%s': expected --OPTION=VALUE (see "
                         "rvtd --help)\n",
                         argv[i]);
            return 2;
        }
        auto name = arg.substr(2, eq - 2);
        auto row  = std::find_if(option_table().begin(), option_table().end(),
                                 [&](const option_row &r) {
                                    return name == r.name;
                                });
        if (row == option_table().end()) {
            std::fprintf(stderr,
                         "rvtd: unknown option --%.*s (see rvtd "
                         "--help)\n",
                         (int)name.size(), name.data());
            return 2;
        }
        std::string err = row->set(opt, arg.substr(eq + 1));
        if (!err.empty()) {
            std::fprintf(stderr, "rvtd: %s\n", err.c_str());
            return 2;
        }
    }
    struct sigaction sa {};
    sa.sa_handler = [](int) { g_stop = 1; };
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
    return run(opt);
}
