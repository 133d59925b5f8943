/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvtd: the per-node agent of one job (docs/design.md part 1). It opens the
 * device and PD, serves the attach socket, and runs the data path (the
 * engine: shared RC QPs to every peer agent, posting for its clients,
 * routing what arrives); it exits a linger time after its last client has
 * gone. The loop spins while there is work and for --spin-us after, then
 * sleeps in poll() on the attach sockets, the completion channel and the
 * clients' doorbell eventfd.
 *
 *   rvtd [--OPTION=VALUE ...]      see rvtd --help and rvtd(8), both
 *                                  generated from the settings table,
 *                                  tools/rvtd_settings.h
 *
 * Exit status: 0 after the linger time or SIGTERM/SIGINT; 1 when it cannot
 * start (another agent holds the key, no device, ...); 2 on a bad option.
 */
#include "uct/ib/rvt/agent/attach/attach_server.h"
#include "uct/ib/rvt/agent/attach/instance_lock.h"
#include "uct/ib/rvt/agent/attach/locate.h"
#include "uct/ib/rvt/agent/device/device.h"
#include "uct/ib/rvt/agent/device/verbs_nic.h"
#include "uct/ib/rvt/agent/engine/engine.h"
#include "uct/ib/rvt/agent/serve/assemble.h"
#include "uct/ib/rvt/agent/serve/cpu_policy.h"
#include "uct/ib/rvt/agent/serve/serve_loop.h"
#include "uct/ib/rvt/agent/serve/status_header.h"
#include "uct/ib/rvt/tools/capped_log.h"
#include "uct/ib/rvt/tools/daemon.h"
#include "uct/ib/rvt/tools/rvtd_settings.h"
#include "uct/ib/rvt/tools/usage.h"
#include "uct/ib/rvt/common/conn_wire.h"
#include "uct/ib/rvt/common/shm_layout.h"
#include "uct/ib/rvt/common/unique_fd.h"
#include "uct/ib/rvt/common/uverbs_cmd.h"

#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using namespace rvt;
using tools::rvtd_config;

const tools::program_doc doc = {
        .name     = "rvtd",
        .section  = 8,
        .summary  = "the rvt node agent of one job",
        .synopsis = "[--OPTION=VALUE ...] [--daemon | --notify-fd=N]",
        .description =
                "The node agent of rvt, a UCX transport that shares a few RC "
                "QPs per remote node among all processes of a job on a node. "
                "rvtd owns the RDMA device, the protection domain and the "
                "shared QPs; the processes of the job (UCX's rvt module) "
                "attach to it over a Unix socket in the runtime directory and "
                "hand it their work through shared-memory rings.\n\n"
                "It runs in the foreground, started by a launcher or by hand, "
                "or (with --daemon, as the first client starts it) in the "
                "background, logging to <runtime dir>/<dev>-<port>.<key>.log; "
                "with --notify-fd it logs there too but stays its starter's "
                "child (Slurm's extern step, through spank_rvt.so). "
                "One agent serves one job key on one device port; a second "
                "one for the same key refuses to start. It exits --linger "
                "seconds after its last client has left, or on SIGTERM or "
                "SIGINT.\n\n"
                "rvt-status(1) shows what a running agent is doing.",
        .exit_status = "0 after the linger time, or on SIGTERM or SIGINT; 1 "
                       "when it cannot start (another agent holds the key, no "
                       "device, ...); 2 on a bad option.",
        .see_also    = "rvt-status(1), ucx_info(1)",
};

volatile std::sig_atomic_t g_stop = 0;

/* A log line as rvtd writes it: when, who, the message. */
std::string framed(std::string_view message)
{
    /* a daemon's stderr is its log file: say when */
    char when[32]   = "";
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    if (localtime_r(&now, &tm) != nullptr) {
        std::strftime(when, sizeof(when), "%F %T ", &tm);
    }
    return when + std::string("rvtd[") + std::to_string(getpid()) +
           "]: " + std::string(message) + "\n";
}

/* stderr, which --daemon points at the log file, under --max-log-size
 * (tools/capped_log.h) once run() has set it */
std::optional<tools::capped_log> g_log;

void log_line(std::string_view line)
{
    if (g_log) {
        g_log->write(line);
        return;
    }
    const std::string l = framed(line);
    std::fwrite(l.data(), 1, l.size(), stderr);
    std::fflush(stderr);
}

/* What rvt-status shows: who this agent is, its clients, its data path
 * (agent/serve/status_header.h renders it). */
std::string status_text(const agent::agent_location &loc,
                        const agent::device &d, uint64_t agent_id,
                        const agent::attach_server &srv,
                        const agent::engine &eng, bool human)
{
    agent::status_header h = {.pid                 = getpid(),
                              .agent_id            = agent_id,
                              .job_key             = loc.job_key,
                              .job_key_source      = loc.job_key_source,
                              .device              = loc.device,
                              .port                = loc.port,
                              .driver_id           = d.driver_id(),
                              .pd_handle           = d.pd()->handle,
                              .registration        = d.reg_mode(),
                              .registration_reason = d.reg_mode_reason(),
                              .socket              = loc.paths.socket,
                              .clients             = {}};
    for (const auto *c : srv.clients()) {
        h.clients.push_back(
                {c->index, c->pid, eng.mrs().held_by(c->index), c->leader});
    }
    return agent::agent_status(h, eng, human);
}

/* Asks the kernel for --priority; true if the agent now runs SCHED_FIFO
 * (cpu_policy's real-time steps). Without the permission it runs normal,
 * and says why. */
bool run_at(const agent::priority &p)
{
    const std::string asked = "--priority=" + agent::to_string(p);
    switch (p.what) {
    case agent::priority::kind::normal:
        return false;
    case agent::priority::kind::nice:
        if (setpriority(PRIO_PROCESS, 0, p.level) != 0) {
            log_line(asked + ": " + std::strerror(errno) +
                     " (below 0 needs CAP_SYS_NICE or RLIMIT_NICE): "
                     "running at normal priority");
            return false;
        }
        log_line(asked + ": running at nice " + std::to_string(p.level));
        return false;
    case agent::priority::kind::fifo: {
        sched_param sp{};
        sp.sched_priority = p.level;
        /* a child (--daemon's helper, none today) would not inherit it */
        if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) != 0) {
            log_line(asked + ": " + std::strerror(errno) +
                     " (needs CAP_SYS_NICE or RLIMIT_RTPRIO): running at "
                     "normal priority");
            return false;
        }
        log_line(asked + ": running SCHED_FIFO " + std::to_string(p.level));
        return true;
    }
    }
    return false;
}

/* The soft RLIMIT_NOFILE up to what the agent's bounds need
 * (attach_server.h, descriptors_needed), as far as the hard one allows. */
void raise_descriptor_limit(uint64_t needed)
{
    rlimit r{};
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) {
        log_line(std::string("descriptors: getrlimit failed: ") +
                 std::strerror(errno));
        return;
    }
    const auto plan = agent::plan_descriptors(r.rlim_cur, r.rlim_max, needed);
    if (!plan.warning.empty()) {
        log_line("WARNING: " + plan.warning);
    }
    if (plan.soft != r.rlim_cur) {
        r.rlim_cur = plan.soft;
        if (setrlimit(RLIMIT_NOFILE, &r) != 0) {
            log_line(std::string("descriptors: setrlimit failed: ") +
                     std::strerror(errno));
        }
    }
}

/* --daemon: detach after the instance lock (a losing racer fails before
 * this, in the foreground, where its starter reads why) and before verbs
 * (fork and verbs contexts do not mix). The lock is an flock: the
 * daemon's inherited descriptor keeps it after its starter exits. Without
 * --daemon: no notifier. */
result<std::optional<tools::daemon_notifier>>
daemonize_if_asked(const rvtd_config &cfg, const std::string &log_path,
                   agent::instance_lock &lock)
{
    if (cfg.notify.fd >= 0) {
        auto n = tools::notify_in_foreground(cfg.notify.fd, log_path);
        if (!n) {
            return failure{n.error()};
        }
        return std::optional<tools::daemon_notifier>(std::move(n).value());
    }
    if (!cfg.daemon) {
        return std::optional<tools::daemon_notifier>();
    }
    auto d = tools::daemonize(log_path);
    if (!d) {
        return failure{d.error()};
    }
    (void)lock.record_pid();
    return std::optional<tools::daemon_notifier>(std::move(d).value());
}

/* A random id of this agent instance, never 0. */
uint64_t new_agent_id()
{
    uint64_t agent_id = 0;
    while (agent_id == 0) {
        if (getrandom(&agent_id, sizeof(agent_id), 0) != sizeof(agent_id)) {
            agent_id = static_cast<uint64_t>(std::time(nullptr)) ^ getpid();
        }
    }
    return agent_id;
}

/* The handshake's credentials (--auth and what it names). */
result<std::unique_ptr<agent::peer_auth>> make_auth(const rvtd_config &cfg)
{
    agent::auth_settings as = cfg.auth;
    agent::take_secret_env(as);
    return agent::make_peer_auth(as, log_line);
}

/* --trace-events: the engine's data-path trace, recorded from now on and
 * written out once, when the agent's loop has ended. */
class trace_recorder {
public:
    trace_recorder(const rvtd_config &cfg, const std::string &log_path,
                   agent::engine &e) :
        m_path(cfg.trace_file.empty() ? log_path + ".trace" : cfg.trace_file)
    {
        if (cfg.trace_events > 0) {
            m_trace.emplace(static_cast<size_t>(cfg.trace_events), "agent");
            e.set_trace(&*m_trace);
        }
    }
    ~trace_recorder()
    {
        if (!m_trace) {
            return;
        }
        std::FILE *f = std::fopen(m_path.c_str(), "w");
        if (f == nullptr) {
            log_line("trace: cannot write " + m_path);
            return;
        }
        m_trace->write(f);
        std::fclose(f);
        log_line("trace: " + std::to_string(m_trace->events().size()) +
                 " events written to " + m_path + ", " +
                 std::to_string(m_trace->dropped()) + " past the limit");
    }
    trace_recorder(const trace_recorder &)            = delete;
    trace_recorder &operator=(const trace_recorder &) = delete;

private:
    std::optional<rvt::trace> m_trace;
    std::string m_path;
};

/* The attach socket: where this agent lives, and the bounds the options
 * gave. */
agent::attach_config attach_settings(const rvtd_config &cfg,
                                     const agent::agent_location &loc,
                                     const shm_layout &layout)
{
    agent::attach_config acfg = cfg.attach;
    acfg.socket_path          = loc.paths.socket;
    acfg.job_key              = loc.job_key;
    acfg.uid                  = getuid();
    acfg.layout               = layout;
    return acfg;
}

void log_serving(const rvtd_config &cfg, const agent::agent_location &loc,
                 const agent::device &d, const agent::engine &e)
{
    /* kept: a log that restarts at its cap still names its agent */
    g_log->write_kept("serving job '" + loc.job_key + "' (from " +
                      loc.job_key_source + ") on " + loc.device + ":" +
                      std::to_string(cfg.port) + " at " + loc.paths.socket +
                      ", uverbs driver id " + std::to_string(d.driver_id()) +
                      ", PD handle " + std::to_string(d.pd()->handle) +
                      ", UD QPN " + std::to_string(e.address().ud_qpn) +
                      ", GID index " + std::to_string(d.gid_index()) + ", " +
                      std::to_string(e.num_qps()) + " RC QPs per peer");
}

/* What the agent's loop serves, and rvt-status describes. */
struct agent_parts {
    const agent::agent_location &loc;
    const agent::device &d;
    uint64_t agent_id;
    agent::attach_server &srv;
    agent::engine &e;
};

/* The agent's loop (agent/serve/serve_loop.h) with rvtd's scheduling options,
 * answering status requests with rvtd's whole status; until a signal, or
 * the linger time with no client and nothing to do. */
int serve_until_done(const rvtd_config &cfg, const agent_parts &a)
{
    using clock                     = std::chrono::steady_clock;
    agent::cpu_policy::settings cpu = cfg.cpu;
    cpu.realtime                    = run_at(cfg.priority);
    auto idle_since                 = clock::now();
    bool lingered                   = false;
    agent::serve_loop loop(a.e, a.srv, cpu);
    for (;;) {
        const agent::serve_loop::turn t = loop.next();
        for (const auto &r : t.status_requests) {
            loop.answer(r.ticket, status_text(a.loc, a.d, a.agent_id, a.srv,
                                              a.e, r.human));
        }
        if (g_stop) {
            break;
        }
        if (!t.idle_pass) {
            continue;
        }
        if (!t.idle) {
            idle_since = t.now;
        } else if (cfg.linger.count() > 0 && t.now - idle_since >= cfg.linger) {
            lingered = true;
            break;
        }
    }
    log_line(lingered ? "no clients for " + std::to_string(cfg.linger.count()) +
                                " s: exiting" :
                        "stopped by a signal");
    a.e.shut_down(clock::now());
    return 0;
}

int run(const rvtd_config &cfg)
{
    g_log.emplace(STDERR_FILENO, cfg.max_log_size, framed);
    /* before the notifier: the word for a --notify-fd starter too */
    auto early_failure = [&cfg](const std::string &why) {
        log_line(why);
        if (cfg.notify.fd >= 0) {
            tools::notify_failed(cfg.notify.fd, why);
        }
        return 1;
    };
    auto loc = agent::locate(agent::named_or_first_device(cfg.device), cfg.port,
                             cfg.job_key);
    if (!loc) {
        return early_failure(loc.error());
    }
    const auto &paths = loc.value().paths;
    /* Never two agents for one key: the lock comes before anything that
     * could disturb a running agent (such as replacing its socket). */
    auto lock = agent::instance_lock::acquire(paths.lock);
    if (!lock) {
        return early_failure(lock.error());
    }
    auto notify = daemonize_if_asked(cfg, paths.log, lock.value());
    if (!notify) {
        log_line(notify.error());
        return 1;
    }
    /* every start-up failure from here on also tells the starter */
    auto start_failed = [&notify](const std::string &why) {
        log_line(why);
        if (notify.value()) {
            notify.value()->failed(why);
        }
        return 1;
    };
    auto dev = agent::device::open(loc.value().device, cfg.port, cfg.gid_index);
    if (!dev) {
        return start_failed(dev.error());
    }
    auto layout = shm_layout::make(cfg.caps);
    if (!layout) {
        start_failed(layout.error());
        return 2;
    }
    /* this run: its id, and its handshake UD QP's Q_Key, which only its
     * address tells (common/attach_wire.h, "Q_Keys") */
    const uint64_t agent_id      = new_agent_id();
    const uint32_t ud_qkey       = wire::conn::random_qkey();
    agent::device &d             = *dev.value();
    agent::verbs_nic_config ncfg = cfg.nic;
    ncfg.ud_qkey                 = ud_qkey;
    auto nic                     = agent::verbs_nic::create(d, ncfg);
    if (!nic) {
        return start_failed(nic.error());
    }
    auto auth = make_auth(cfg);
    if (!auth) {
        return start_failed(auth.error());
    }
    /* --trace-events: from the engine's start; written once the server
     * and the engine are gone */
    std::optional<trace_recorder> trace;
    /* the engine, then the socket, granting clients the device's and the
     * engine's resources (agent/serve/assemble.h) */
    auto made = agent::assemble(
            *nic.value(),
            {.attach        = attach_settings(cfg, loc.value(), layout.value()),
             .engine        = cfg.engine,
             .auth          = std::move(auth).value(),
             .grant         = d.grant(agent_id),
             .log           = log_line,
             .before_attach = [&](agent::engine &e,
                                  const agent::attach_config &acfg) {
                 trace.emplace(cfg, paths.log, e);
                 /* the descriptor limit raised to fit the socket's bounds */
                 raise_descriptor_limit(
                         agent::descriptors_needed(acfg.max_clients,
                                                   acfg.max_unattached));
             }});
    if (!made) {
        return start_failed(made.error());
    }
    agent::engine &e          = *made.value().engine;
    agent::attach_server &srv = *made.value().server;
    log_serving(cfg, loc.value(), d, e);
    if (notify.value()) {
        notify.value()->ready();
    }
    return serve_until_done(cfg, {loc.value(), d, agent_id, srv, e});
}

} // namespace

int main(int argc, char **argv)
{
    /* No process of the user it runs as may trace it or read its memory
     * (ptrace, /proc/PID/mem): it holds the job's credentials and
     * registrations, and may run SCHED_FIFO, which the user may not
     * (docs/reliability.md, "Hostile input"). This also means no core
     * dump: docs/operations.md says how to debug it. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        std::fprintf(stderr, "rvtd: prctl(PR_SET_DUMPABLE, 0): %s\n",
                     std::strerror(errno));
        return 1;
    }
    tools::rvtd_config cfg;
    const auto table = tools::options_of(tools::rvtd_settings, cfg);
    if (auto code = tools::parse_or_exit(argc, argv, doc, table)) {
        return *code;
    }
    if (auto why = tools::conflict(cfg)) {
        std::fprintf(stderr, "rvtd: %s\n", why->c_str());
        return 2;
    }
    tools::derive(cfg);
    struct sigaction sa {};
    sa.sa_handler = [](int) { g_stop = 1; };
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
    return run(cfg);
}
