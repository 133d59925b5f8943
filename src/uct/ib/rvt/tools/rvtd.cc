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
 *                                  generated from the option table below
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
#include "uct/ib/rvt/tools/usage.h"
#include "uct/ib/rvt/common/defaults.h"
#include "uct/ib/rvt/common/imm.h"
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
#include <climits>
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

/* The agent's knobs, defaults where the agent's config structs keep them
 * (peer_config, rc_qp_params, verbs_nic_config, share_limits,
 * attach_config), so each is written once. */
namespace defaults {
inline const agent::peer_config peers{};
inline const agent::rc_qp_params qp{};
inline const agent::verbs_nic_config nic{};
inline const agent::share_limits share{};
inline const agent::attach_config attach{};
inline const agent::cpu_policy::settings cpu{};
inline const agent::engine_config engine{};
long ms(std::chrono::milliseconds d)
{
    return static_cast<long>(d.count());
}
long us(std::chrono::steady_clock::duration d)
{
    return static_cast<long>(
            std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}
} // namespace defaults

struct options {
    std::string device;
    long port = 1;
    std::string job_key;
    long linger           = 10;
    long max_clients      = imm::max_clients;
    long max_client_ops   = defaults::share.ops;
    long max_client_lkeys = defaults::share.lkeys;
    long max_client_peers = defaults::share.peers;
    long max_siblings     = defaults::attach.max_siblings;
    long max_peers        = defaults::engine.max_peers;
    long max_unattached   = defaults::attach.max_unattached;
    long max_socket_read  = static_cast<long>(defaults::attach.max_socket_read);
    long max_log_size     = static_cast<long>(tools::default_max_log_size);
    long work_ring        = rvt::defaults::work_ring;
    long compl_ring       = rvt::defaults::completion_ring;
    long inbound_ring     = rvt::defaults::inbound_ring;
    long am_size          = defaults::nic.buffer_size;
    long inline_size      = defaults::nic.inline_size;
    long num_qps          = defaults::peers.num_qps;
    long gid_index        = -1;
    long srq_size         = defaults::nic.srq_size;
    long sq_depth         = defaults::qp.sq_depth;
    long spin_us          = defaults::us(defaults::cpu.spin);
    agent::priority priority{};
    long busy_limit_us    = defaults::us(defaults::cpu.busy_limit);
    long busy_pause_us    = defaults::us(defaults::cpu.pause);
    long keepalive_ms     = defaults::ms(defaults::peers.keepalive_interval);
    long reconnect_ms     = defaults::ms(defaults::peers.reconnect_delay);
    long give_up_ms       = defaults::ms(defaults::peers.give_up_timeout);
    long qp_timeout       = defaults::qp.timeout;
    long idle_yield       = defaults::cpu.yield_when_idle ? 1 : 0;
    long fault_silent_qps = defaults::nic.fault_silent_qps;
    long trace_events     = 0;
    std::string trace_file;
    agent::auth_choice auth = agent::auth_choice::auto_;
    std::string munge_socket;
    std::string secret_file;
    bool daemon    = false;
    long notify_fd = -1;
};

/* `v` as a whole number from lo to hi into `out`; else the error that
 * names the option and the range. */
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

/* "64-256": the bounds of a range, for help texts that state them. */
std::string range_text(long lo, long hi)
{
    return std::to_string(lo) + "-" + std::to_string(hi);
}

/* A whole-number option: the name is written once, and the default only
 * in struct options, where --help reads it. */
tools::option number(options &o, const char *name, std::string help,
                     long options::*field, long lo, long hi)
{
    return {name, "N", std::to_string(options{}.*field), std::move(help),
            [&o, field, lo, hi, name](std::string_view v) {
                return set_long(o.*field, v, lo, hi, name);
            }};
}

/* A MODE option: `parse` turns its value into `out` or into the error
 * that names it. */
template<class T>
tools::option mode(const char *name, const char *dflt, const char *help,
                   result<T> (*parse)(std::string_view), T &out)
{
    return {name, "MODE", dflt, help, [parse, &out](std::string_view v) {
                auto r = parse(v);
                if (!r) {
                    return r.error();
                }
                out = r.value();
                return std::string();
            }};
}

/* A text option stored as given. */
tools::option text(const char *name, const char *value, const char *dflt,
                   const char *help, std::string &out)
{
    return {name, value, dflt, help, [&out](std::string_view v) {
                out = v;
                return std::string();
            }};
}

/* The one place each option's name and meaning are written, with its
 * default as --help shows it (a number's from struct options): parsing,
 * --help and the manual page rvtd(8) all come from here (tools/usage.h). */
std::vector<tools::option> option_table(options &o)
{
    return {
            {"daemon", "", "",
             "detach; exit 0 once the agent serves, 1 if it cannot",
             [&o](std::string_view) {
                 o.daemon = true;
                 return std::string();
             }},
            {"notify-fd", "N", "",
             "stay in the foreground, logging as --daemon does, and tell "
             "the Unix socket on descriptor N how start-up went: 'R' once "
             "the agent serves, 'F' and the reason if it cannot (for a "
             "starter that keeps rvtd as its child: Slurm's extern step, "
             "spank_rvt.so)",
             [&o](std::string_view v) {
                 return set_long(o.notify_fd, v, 3, INT_MAX, "notify-fd");
             }},
            text("device", "NAME", "the first device",
                 "RDMA device to serve, e.g. rxe1", o.device),
            number(o, "port", "port of that device (1-255)", &options::port, 1,
                   255),
            text("job-key", "KEY", "from the environment",
                 "job this agent serves; else RVT_JOB_KEY, Slurm, PMIx, Open "
                 "MPI, or user.<uid>",
                 o.job_key),
            number(o, "linger",
                   "seconds to stay after the last client leaves; 0: forever",
                   &options::linger, 0, 86400),
            number(o, "max-clients", "client processes at once (1-512)",
                   &options::max_clients, 1, imm::max_clients),
            number(o, "max-client-ops",
                   "ops the agent holds for one client (queued, waiting for "
                   "a peer, parked or posted); more complete with "
                   "no_resource, unposted; 0: its completion ring's size, "
                   "what the client library admits",
                   &options::max_client_ops, 0, 1 << 24),
            number(o, "max-client-lkeys",
                   "distinct lkeys one client's ops may name at once; more "
                   "complete with no_resource",
                   &options::max_client_lkeys, 2, 1 << 24),
            number(o, "max-client-peers",
                   "peers the agent makes at one process's requests (all its "
                   "attachments), each counted until its record is reused "
                   "for another address; more are refused; 0: half of "
                   "--max-peers, the rest left for the job's other processes",
                   &options::max_client_peers, 0, 1 << 24),
            number(o, "max-client-siblings",
                   "attachments one process may hold beyond its first (a "
                   "sibling for each UCT interface after a memory domain's "
                   "first, a leader for each further memory domain); one more "
                   "is refused, naming this bound",
                   &options::max_siblings, 0, imm::max_clients - 1),
            number(o, "max-peers",
                   "remote nodes this agent connects to at once; a client's "
                   "request for one more is refused, naming this bound",
                   &options::max_peers, 1, 65536),
            number(o, "max-unattached",
                   "connections accepted and not attached yet, at once; more "
                   "wait in the listen backlog",
                   &options::max_unattached, 1, 65536),
            number(o, "max-socket-read",
                   "bytes read from one client's socket per pass of the "
                   "loop; the rest waits for the next pass",
                   &options::max_socket_read, wire::max_message_size, 1 << 24),
            number(o, "max-log-size",
                   "bytes the log file may reach; a line that would take it "
                   "past them truncates it, and it starts again with a line "
                   "saying so and what the agent serves",
                   &options::max_log_size, 65536, 1L << 40),
            number(o, "work-ring",
                   "work requests per client ring (power of two)",
                   &options::work_ring, 2, 1 << 24),
            number(o, "completion-ring",
                   "completions per client ring (power of two): a client's "
                   "requests in flight",
                   &options::compl_ring, 2, 1 << 24),
            number(o, "inbound-ring",
                   "inbound messages per client ring (power of two)",
                   &options::inbound_ring, 2, 1 << 16),
            number(o, "am-size",
                   "largest active message, bytes (" +
                           range_text(min_inbound_slot, max_inbound_slot) +
                           ", multiple of 64)",
                   &options::am_size, min_inbound_slot, max_inbound_slot),
            number(o, "inline-size",
                   "largest payload a request carries in the work ring "
                   "(UCT's short operations), posted inline, bytes (" +
                           range_text(min_work_inline, max_work_inline) +
                           ", multiple of 64)",
                   &options::inline_size, min_work_inline, max_work_inline),
            number(o, "num-qps", "K: shared RC QPs per remote node (1-16)",
                   &options::num_qps, 1, 16),
            number(o, "gid-index",
                   "GID table index; -1: the first RoCE v2 IPv4 GID",
                   &options::gid_index, -1, 255),
            number(o, "srq-size", "receive buffers of the node (16-65536)",
                   &options::srq_size, 16, 65536),
            number(o, "sq-depth", "send WRs per RC QP (1-16384)",
                   &options::sq_depth, 1, 16384),
            number(o, "spin-us",
                   "microseconds to keep polling after a client's last work, "
                   "before sleeping",
                   &options::spin_us, 0, 1000000),
            number(o, "idle-yield",
                   "1: give the CPU away (sched_yield) on each idle poll while "
                   "spinning, so clients polling on the same core run at "
                   "once; 0: pure busy polling",
                   &options::idle_yield, 0, 1),
            mode("priority", "normal",
                 "how the agent is scheduled among the job's ranks: normal "
                 "(the "
                 "fair class), nice:N (the fair class at nice N, -20 to 19; "
                 "below 0 needs CAP_SYS_NICE or RLIMIT_NICE), fifo:N "
                 "(SCHED_FIFO at N, 1 to 99: a woken agent preempts the rank "
                 "on "
                 "its core at once; needs CAP_SYS_NICE or RLIMIT_RTPRIO; give "
                 "it a short --spin-us). Without the permission the agent runs "
                 "normal and logs why",
                 agent::parse_priority, o.priority),
            number(o, "busy-limit-us",
                   "with fifo: microseconds the agent may stay awake (working "
                   "or spinning) before it pauses for --busy-pause-us, so the "
                   "ranks on its core progress whatever the load",
                   &options::busy_limit_us, 10, 1000000),
            number(o, "busy-pause-us",
                   "with fifo: the length of that pause: the agent holds at "
                   "most limit / (limit + pause) of a core",
                   &options::busy_pause_us, 1, 1000000),
            number(o, "keepalive-ms",
                   "idle time before a keepalive; twice it unanswered: lost",
                   &options::keepalive_ms, 100, 3600000),
            number(o, "reconnect-ms", "delay before reconnecting a lost peer",
                   &options::reconnect_ms, 10, 600000),
            number(o, "give-up-ms",
                   "time to connect (or reconnect) before the peer is failed",
                   &options::give_up_ms, 100, 3600000),
            number(o, "trace-events",
                   "trace the data path: keep the first N events of its "
                   "messages (trace.h) and write them to --trace-file at "
                   "exit; 0: off (no cost)",
                   &options::trace_events, 0, 100000000),
            text("trace-file", "PATH", "the log file's name + .trace",
                 "where --trace-events writes its events", o.trace_file),
            number(o, "qp-timeout",
                   "RC ack timeout exponent: 4.096 us * 2^N per try "
                   "(18: 1.07 s, UCX rc's default), 7 tries",
                   &options::qp_timeout, 1, 31),
            mode("auth", "auto",
                 "how peer agents prove they belong to this job: munge (a "
                 "MUNGE "
                 "credential from munged, checked for this uid and gid), "
                 "secret "
                 "(HMAC under the job's secret: --secret-file, "
                 "$RVT_JOB_SECRET_FILE or $RVT_JOB_SECRET), none "
                 "(UNAUTHENTICATED: anyone who sends the job key), auto "
                 "(munge if munged answers, else secret if one is given, "
                 "else refuse to start); every agent of a job must use the "
                 "same",
                 agent::parse_auth_choice, o.auth),
            text("munge-socket", "PATH", "MUNGE's default",
                 "munged's socket, for --auth=munge and auto", o.munge_socket),
            text("secret-file", "PATH", "$RVT_JOB_SECRET_FILE",
                 "file holding the job's secret (at least 16 bytes; owned by "
                 "this user, mode 600), for --auth=secret and auto",
                 o.secret_file),
            number(o, "fault-silent-qps",
                   "fault injection, for tests only: the first N RC QPs "
                   "that get work go to the error state and never complete "
                   "anything, not even flushes (as Debian 12's rxe can); "
                   "0: off",
                   &options::fault_silent_qps, 0, 1024),
    };
}

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
daemonize_if_asked(const options &opt, const std::string &log_path,
                   agent::instance_lock &lock)
{
    if (opt.notify_fd >= 0) {
        auto n = tools::notify_in_foreground(static_cast<int>(opt.notify_fd),
                                             log_path);
        if (!n) {
            return failure{n.error()};
        }
        return std::optional<tools::daemon_notifier>(std::move(n).value());
    }
    if (!opt.daemon) {
        return std::optional<tools::daemon_notifier>();
    }
    auto d = tools::daemonize(log_path);
    if (!d) {
        return failure{d.error()};
    }
    (void)lock.record_pid();
    return std::optional<tools::daemon_notifier>(std::move(d).value());
}

/* The sizes of a client's shared memory (shm_layout.h). */
shm_capacities capacities(const options &opt)
{
    return {static_cast<uint32_t>(opt.work_ring),
            static_cast<uint32_t>(opt.compl_ring),
            static_cast<uint32_t>(opt.inbound_ring),
            static_cast<uint32_t>(opt.am_size),
            static_cast<uint32_t>(opt.inline_size)};
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

/* The device's QPs, SRQ and CQ, sized by the options. */
agent::verbs_nic_config
nic_config(const options &opt, const shm_capacities &caps)
{
    agent::verbs_nic_config ncfg;
    ncfg.qp.sq_depth      = static_cast<uint32_t>(opt.sq_depth);
    ncfg.qp.timeout       = static_cast<uint8_t>(opt.qp_timeout);
    ncfg.srq_size         = static_cast<uint32_t>(opt.srq_size);
    ncfg.buffer_size      = caps.slot_size;
    ncfg.inline_size      = caps.inline_size;
    ncfg.fault_silent_qps = static_cast<uint32_t>(opt.fault_silent_qps);
    ncfg.cq_size          = static_cast<uint32_t>(opt.srq_size +
                                         16 * opt.sq_depth * opt.num_qps);
    return ncfg;
}

/* The data path: the peers' timing and the clients' shares, from the
 * options. */
agent::engine_config engine_settings(const options &opt)
{
    agent::engine_config ecfg;
    ecfg.peers.num_qps            = static_cast<uint32_t>(opt.num_qps);
    ecfg.max_peers                = static_cast<uint32_t>(opt.max_peers);
    ecfg.peers.keepalive_interval = std::chrono::milliseconds(opt.keepalive_ms);
    ecfg.peers.keepalive_timeout  = std::chrono::milliseconds(2 *
                                                              opt.keepalive_ms);
    ecfg.peers.reconnect_delay    = std::chrono::milliseconds(opt.reconnect_ms);
    ecfg.peers.give_up_timeout    = std::chrono::milliseconds(opt.give_up_ms);

    ecfg.share = {static_cast<uint32_t>(opt.max_client_ops),
                  static_cast<uint32_t>(opt.max_client_lkeys),
                  static_cast<uint32_t>(opt.max_client_peers)};
    return ecfg;
}

/* The handshake's credentials (--auth and what it names). */
result<std::unique_ptr<agent::peer_auth>> make_auth(const options &opt)
{
    agent::auth_settings as;
    as.choice       = opt.auth;
    as.munge_socket = opt.munge_socket;
    as.secret_file  = opt.secret_file;
    agent::take_secret_env(as);
    return agent::make_peer_auth(as, log_line);
}

/* --trace-events: the engine's data-path trace, recorded from now on and
 * written out once, when the agent's loop has ended. */
class trace_recorder {
public:
    trace_recorder(const options &opt, const std::string &log_path,
                   agent::engine &e) :
        m_path(opt.trace_file.empty() ? log_path + ".trace" : opt.trace_file)
    {
        if (opt.trace_events > 0) {
            m_trace.emplace(static_cast<size_t>(opt.trace_events), "agent");
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

/* The attach socket and its bounds, from the options. */
agent::attach_config attach_settings(const options &opt,
                                     const agent::agent_location &loc,
                                     const shm_layout &layout)
{
    agent::attach_config acfg{loc.paths.socket,
                              loc.job_key,
                              getuid(),
                              static_cast<uint32_t>(opt.max_clients),
                              layout,
                              std::chrono::milliseconds(5000)};
    acfg.max_unattached  = static_cast<uint32_t>(opt.max_unattached);
    acfg.max_socket_read = static_cast<size_t>(opt.max_socket_read);
    acfg.max_siblings    = static_cast<uint32_t>(opt.max_siblings);
    return acfg;
}

void log_serving(const options &opt, const agent::agent_location &loc,
                 const agent::device &d, const agent::engine &e)
{
    /* kept: a log that restarts at its cap still names its agent */
    g_log->write_kept("serving job '" + loc.job_key + "' (from " +
                      loc.job_key_source + ") on " + loc.device + ":" +
                      std::to_string(opt.port) + " at " + loc.paths.socket +
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
int serve_until_done(const options &opt, const agent_parts &a)
{
    using clock = std::chrono::steady_clock;
    agent::cpu_policy::settings cpu;
    cpu.realtime        = run_at(opt.priority);
    cpu.spin            = std::chrono::microseconds(opt.spin_us);
    cpu.yield_when_idle = opt.idle_yield != 0;
    cpu.busy_limit      = std::chrono::microseconds(opt.busy_limit_us);
    cpu.pause           = std::chrono::microseconds(opt.busy_pause_us);
    auto idle_since     = clock::now();
    bool lingered       = false;
    agent::serve_loop_owner owner;
    owner.status = [&](bool human) {
        return status_text(a.loc, a.d, a.agent_id, a.srv, a.e, human);
    };
    owner.stop = [&](clock::time_point now, bool at_idle_pass, bool idle) {
        if (g_stop) {
            return true;
        }
        if (!at_idle_pass) {
            return false;
        }
        if (!idle) {
            idle_since = now;
        } else if (opt.linger > 0 &&
                   now - idle_since >= std::chrono::seconds(opt.linger)) {
            lingered = true;
        }
        return lingered;
    };
    agent::serve_loop(a.e, a.srv, cpu, owner);
    log_line(lingered ? "no clients for " + std::to_string(opt.linger) +
                                " s: exiting" :
                        "stopped by a signal");
    a.e.shut_down(clock::now());
    return 0;
}

int run(const options &opt)
{
    g_log.emplace(STDERR_FILENO, static_cast<uint64_t>(opt.max_log_size),
                  framed);
    /* before the notifier: the word for a --notify-fd starter too */
    auto early_failure = [&opt](const std::string &why) {
        log_line(why);
        if (opt.notify_fd >= 0) {
            tools::notify_failed(static_cast<int>(opt.notify_fd), why);
        }
        return 1;
    };
    auto loc = agent::locate(agent::named_or_first_device(opt.device),
                             static_cast<int>(opt.port), opt.job_key);
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
    auto notify = daemonize_if_asked(opt, paths.log, lock.value());
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
    auto dev = agent::device::open(loc.value().device,
                                   static_cast<uint8_t>(opt.port),
                                   static_cast<int>(opt.gid_index));
    if (!dev) {
        return start_failed(dev.error());
    }
    const shm_capacities caps = capacities(opt);
    auto layout               = shm_layout::make(caps);
    if (!layout) {
        start_failed(layout.error());
        return 2;
    }
    const uint64_t agent_id = new_agent_id();
    agent::device &d        = *dev.value();
    auto nic = agent::verbs_nic::create(d, nic_config(opt, caps));
    if (!nic) {
        return start_failed(nic.error());
    }
    auto auth = make_auth(opt);
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
            {.attach        = attach_settings(opt, loc.value(), layout.value()),
             .engine        = engine_settings(opt),
             .auth          = std::move(auth).value(),
             .grant         = d.grant(agent_id),
             .log           = log_line,
             .before_attach = [&](agent::engine &e,
                                  const agent::attach_config &acfg) {
                 trace.emplace(opt, paths.log, e);
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
    log_serving(opt, loc.value(), d, e);
    if (notify.value()) {
        notify.value()->ready();
    }
    return serve_until_done(opt, {loc.value(), d, agent_id, srv, e});
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
    options opt;
    const auto table = option_table(opt);
    if (auto code = tools::parse_or_exit(argc, argv, doc, table)) {
        return *code;
    }
    if (opt.daemon && opt.notify_fd >= 0) {
        std::fprintf(stderr, "rvtd: --daemon and --notify-fd exclude each "
                             "other: detach, or stay the starter's child\n");
        return 2;
    }
    struct sigaction sa {};
    sa.sa_handler = [](int) { g_stop = 1; };
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
    return run(opt);
}
