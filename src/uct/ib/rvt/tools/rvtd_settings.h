/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvtd's settings, each declared once: the table at the end of this file.
 * A row names the option, what it does, its bounds (the constants that
 * bound it, never a literal that repeats one) and the member it fills, by
 * a path of member pointers into rvtd_config, whose parts are the config
 * structs the agent is built from:
 *
 *   row ─► parse (--NAME=VALUE into the member, checked against bounds)
 *       ─► --help and rvtd(8): the help, its range made from the bounds,
 *          its default read from the member of a default-made rvtd_config
 *          (so from the struct's own initializer, or common/defaults.h)
 *       ─► the agent: rvtd.cc hands rvtd_config's parts as they are to
 *          agent/serve/assemble.h (engine_config, verbs_nic_config,
 *          attach_config, shm_capacities), cpu_policy and peer_auth
 *
 * What no single option states (a CQ sized from three of them, the
 * keepalive timeout twice its interval) is derive()'s, which sets no
 * member a row names; where the agent lives (socket, job key, layout) and
 * this run's Q_Key are rvtd.cc's.
 *
 * A new setting: its default as the member's initializer, a row here,
 * a row in the README's "rvtd options" table (docs/hacking.md, "Recipe: a
 * new rvtd setting"). test/gtest/unit/test_rvtd_settings.cc holds the
 * table to this (each default within its bounds and parsed back to itself,
 * each bound reaching its member unchanged, each row its own member, kept
 * by derive(), no range written into a help text, --help and the page
 * listing the rows).
 */
#ifndef RVT_TOOLS_RVTD_SETTINGS_H
#define RVT_TOOLS_RVTD_SETTINGS_H

#include "uct/ib/rvt/agent/attach/attach_server.h"
#include "uct/ib/rvt/agent/device/verbs_nic.h"
#include "uct/ib/rvt/agent/engine/engine.h"
#include "uct/ib/rvt/agent/peers/peer_auth.h"
#include "uct/ib/rvt/agent/serve/cpu_policy.h"
#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/conn_wire.h"
#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/common/shm_layout.h"
#include "uct/ib/rvt/tools/capped_log.h"
#include "uct/ib/rvt/tools/usage.h"

#include <chrono>
#include <cstdint>
#include <span>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace rvt::tools {

/* --notify-fd: the descriptor on which a starter that keeps rvtd as its
 * child (Slurm's extern step, spank_rvt.so) reads how start-up went; -1,
 * "none": no such starter. 0-2 are never one: they are the standard
 * streams. */
struct notify_descriptor {
    int fd                       = -1;
    static constexpr long lowest = 3;
};
result<notify_descriptor> parse_notify_fd(std::string_view v);
std::string to_string(notify_descriptor d);

/* Everything rvtd's options set: the parts the agent is made of, and
 * rvtd's own (where it serves, its log, its scheduling). */
struct rvtd_config {
    /* rvtd's own */
    bool daemon = false;
    notify_descriptor notify{};
    std::string device; /* empty: the first device */
    uint8_t port = 1;
    std::string job_key; /* empty: from the environment */
    std::chrono::seconds linger{10}; /* 0: forever */
    uint64_t max_log_size = default_max_log_size;
    int gid_index         = -1; /* -1: the first RoCE v2 IPv4 GID */
    agent::priority priority{};
    uint64_t trace_events = 0;
    std::string trace_file; /* empty: the log file's name + .trace */
    /* the agent's parts */
    agent::engine_config engine{};
    agent::verbs_nic_config nic{};
    agent::attach_config attach{};
    shm_capacities caps{};
    agent::cpu_policy::settings cpu{};
    agent::auth_settings auth{};
};

/* What no single option states, from the ones that do (see above): sets
 * only members that no row names. */
void derive(rvtd_config &c);

/* Options that contradict each other, and why; none when they agree. */
std::optional<std::string> conflict(const rvtd_config &c);

struct setting {
    enum class kind : uint8_t {
        flag, /* --NAME: sets a bool */
        number, /* --NAME=N: a whole number from lo to hi */
        text, /* --NAME=VALUE: a string as given */
        mode /* --NAME=MODE: a value its own parser reads */
    };
    kind what              = kind::flag;
    std::string_view name  = {}; /* without the dashes: "num-qps" */
    std::string_view value = {}; /* what the value is called: "N", "PATH" */
    /* what it does; a number's range is added from lo and hi, so none is
     * written here */
    std::string_view help = {};
    long lo = 0, hi = 0; /* a number's bounds */
    /* `v` into `c`; empty, or what is wrong (naming --NAME=v and what was
     * expected) */
    std::string (*set)(const setting &s, rvtd_config &c,
                       std::string_view v) = nullptr;
    /* the value `c` holds, as --NAME= would give it; a flag's: "" when
     * off */
    std::string (*show)(const rvtd_config &c) = nullptr;
    /* a text's default, what its empty value means ("the first device") */
    std::string_view none = {};
};

/* "1-16", "-1 to 255": a number's bounds as its help shows them. */
std::string range_text(long lo, long hi);
/* The help as --help and the page show it: a number's with its range. */
std::string help_text(const setting &s);
/* The default --help shows: the member of a default-made rvtd_config (a
 * text's `none` when it is empty); "" for a flag. */
std::string default_text(const setting &s);
/* `v` as a whole number within s's bounds, or the error naming --NAME=v
 * and the bounds. */
result<long> whole_number(const setting &s, std::string_view v);

/* The settings as usage.h's options, each filling `c`. */
std::vector<option> options_of(std::span<const setting> table, rvtd_config &c);

namespace settings_detail {

/* The member at the end of a path of member pointers. */
template<auto M, auto... Ms, class S> constexpr auto &member_of(S &s)
{
    if constexpr (sizeof...(Ms) == 0) {
        return s.*M;
    } else {
        return member_of<Ms...>(s.*M);
    }
}

template<auto... M>
using member_t = std::remove_cvref_t<decltype(member_of<M...>(
        std::declval<rvtd_config &>()))>;

template<auto... M>
std::string set_number(const setting &s, rvtd_config &c, std::string_view v)
{
    static_assert(std::is_integral_v<member_t<M...>>);
    auto x = whole_number(s, v);
    if (!x) {
        return x.error();
    }
    member_of<M...>(c) = static_cast<member_t<M...>>(x.value());
    return {};
}

template<auto... M> std::string show_number(const rvtd_config &c)
{
    return std::to_string(static_cast<long long>(member_of<M...>(c)));
}

/* A duration, given in Unit (the unit the option's name says). */
template<class Unit, auto... M>
std::string set_time(const setting &s, rvtd_config &c, std::string_view v)
{
    auto x = whole_number(s, v);
    if (!x) {
        return x.error();
    }
    member_of<M...>(c) = std::chrono::duration_cast<member_t<M...>>(
            Unit(x.value()));
    return {};
}

template<class Unit, auto... M> std::string show_time(const rvtd_config &c)
{
    return std::to_string(
            std::chrono::duration_cast<Unit>(member_of<M...>(c)).count());
}

template<auto... M>
std::string set_text(const setting &, rvtd_config &c, std::string_view v)
{
    member_of<M...>(c) = std::string(v);
    return {};
}

template<auto... M> std::string show_text(const rvtd_config &c)
{
    return member_of<M...>(c);
}

template<auto... M>
std::string set_flag(const setting &, rvtd_config &c, std::string_view)
{
    member_of<M...>(c) = true;
    return {};
}

/* a flag shows no default (it is off): "set" once given */
template<auto... M> std::string show_flag(const rvtd_config &c)
{
    return member_of<M...>(c) ? "set" : "";
}

template<auto Parse, auto... M>
std::string set_mode(const setting &, rvtd_config &c, std::string_view v)
{
    auto r = Parse(v);
    if (!r) {
        return r.error();
    }
    member_of<M...>(c) = r.value();
    return {};
}

template<auto... M> std::string show_mode(const rvtd_config &c)
{
    return std::string(to_string(member_of<M...>(c))); /* the type's own */
}

/* The rows' makers: the member path M... is the template's arguments. */
template<auto... M>
constexpr setting
number(std::string_view name, std::string_view help, long lo, long hi)
{
    return {.what  = setting::kind::number,
            .name  = name,
            .value = "N",
            .help  = help,
            .lo    = lo,
            .hi    = hi,
            .set   = set_number<M...>,
            .show  = show_number<M...>};
}

/* A duration given in Unit, the unit its name says ("-ms", "-us"). */
template<class Unit, auto... M>
constexpr setting
time_in(std::string_view name, std::string_view help, long lo, long hi)
{
    return {.what  = setting::kind::number,
            .name  = name,
            .value = "N",
            .help  = help,
            .lo    = lo,
            .hi    = hi,
            .set   = set_time<Unit, M...>,
            .show  = show_time<Unit, M...>};
}

template<auto... M>
constexpr setting text(std::string_view name, std::string_view value,
                       std::string_view help, std::string_view none)
{
    return {.what  = setting::kind::text,
            .name  = name,
            .value = value,
            .help  = help,
            .set   = set_text<M...>,
            .show  = show_text<M...>,
            .none  = none};
}

template<auto... M>
constexpr setting flag(std::string_view name, std::string_view help)
{
    return {.what = setting::kind::flag,
            .name = name,
            .help = help,
            .set  = set_flag<M...>,
            .show = show_flag<M...>};
}

/* MODE: what Parse makes of it; shown by the type's to_string(). */
template<auto Parse, auto... M>
constexpr setting mode(std::string_view name, std::string_view help,
                       std::string_view value = "MODE")
{
    return {.what  = setting::kind::mode,
            .name  = name,
            .value = value,
            .help  = help,
            .set   = set_mode<Parse, M...>,
            .show  = show_mode<M...>};
}

/* The structs a path goes through, by short names. */
using cfg   = rvtd_config;
using eng   = agent::engine_config;
using peer  = agent::peer_config;
using share = agent::share_limits;
using nic   = agent::verbs_nic_config;
using qp    = agent::rc_qp_params;
using att   = agent::attach_config;
using caps  = shm_capacities;
using cpu   = agent::cpu_policy::settings;
using auth  = agent::auth_settings;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

/* clang-format off */
inline constexpr setting table[] = {
    flag<&cfg::daemon>("daemon",
        "detach; exit 0 once the agent serves, 1 if it cannot"),
    mode<parse_notify_fd, &cfg::notify>("notify-fd",
        "stay in the foreground, logging as --daemon does, and tell the Unix "
        "socket on descriptor N (3 or more) how start-up went: 'R' once the "
        "agent serves, 'F' and the reason if it cannot (for a starter that "
        "keeps rvtd as its child: Slurm's extern step, spank_rvt.so); none: "
        "no such starter", "N"),
    text<&cfg::device>("device", "NAME",
        "RDMA device to serve, e.g. rxe1", "the first device"),
    number<&cfg::port>("port",
        "port of that device", 1, 255),
    text<&cfg::job_key>("job-key", "KEY",
        "job this agent serves; else RVT_JOB_KEY, Slurm, PMIx, Open MPI, or "
        "user.<uid>", "from the environment"),
    time_in<seconds, &cfg::linger>("linger",
        "seconds to stay after the last client leaves; 0: forever",
        0, 86400),
    number<&cfg::attach, &att::max_clients>("max-clients",
        "client processes at once", 1, imm::max_clients),
    number<&cfg::engine, &eng::share, &share::ops>("max-client-ops",
        "ops the agent holds for one client (queued, waiting for a peer, "
        "parked or posted); more complete with no_resource, unposted; 0: its "
        "completion ring's size, what the client library admits",
        0, 1 << 24),
    number<&cfg::engine, &eng::share, &share::lkeys>("max-client-lkeys",
        "distinct lkeys one client's ops may name at once; more complete "
        "with no_resource", 2, 1 << 24),
    number<&cfg::engine, &eng::share, &share::peers>("max-client-peers",
        "peers the agent makes at one process's requests (all its "
        "attachments), each counted until its record is reused for another "
        "address; more are refused; 0: half of --max-peers, the rest left "
        "for the job's other processes", 0, 1 << 24),
    number<&cfg::attach, &att::max_siblings>("max-client-siblings",
        "attachments one process may hold beyond its first (a sibling for "
        "each UCT interface after a memory domain's first, a leader for each "
        "further memory domain); one more is refused, naming this bound",
        0, imm::max_clients - 1),
    number<&cfg::engine, &eng::pause_messages>("pause-messages",
        "inbound messages waiting for room in one client's ring at which "
        "the peer agents are asked to hold their ops for it, until half "
        "have gone", 1, 1 << 20),
    number<&cfg::engine, &eng::max_peers>("max-peers",
        "remote nodes this agent connects to at once; a client's request for "
        "one more is refused, naming this bound", 1, 65536),
    number<&cfg::attach, &att::max_unattached>("max-unattached",
        "connections accepted and not attached yet, at once; more wait in "
        "the listen backlog", 1, 65536),
    number<&cfg::attach, &att::max_socket_read>("max-socket-read",
        "bytes read from one client's socket per pass of the loop; the rest "
        "waits for the next pass", wire::max_message_size, 1 << 24),
    number<&cfg::max_log_size>("max-log-size",
        "bytes the log file may reach; a line that would take it past them "
        "truncates it, and it starts again with a line saying so and what "
        "the agent serves", 65536, 1L << 40),
    number<&cfg::caps, &caps::work>("work-ring",
        "work requests per client ring (power of two)", 2, 1 << 24),
    number<&cfg::caps, &caps::completion>("completion-ring",
        "completions per client ring (power of two): a client's requests in "
        "flight", 2, 1 << 24),
    number<&cfg::caps, &caps::inbound>("inbound-ring",
        "inbound messages per client ring (power of two)", 2, 1 << 16),
    number<&cfg::caps, &caps::slot_size>("am-size",
        "largest active message, bytes, a multiple of 64",
        min_inbound_slot, max_inbound_slot),
    number<&cfg::caps, &caps::inline_size>("inline-size",
        "largest payload a request carries in the work ring (UCT's short "
        "operations), posted inline, bytes, a multiple of 64",
        min_work_inline, max_work_inline),
    number<&cfg::engine, &eng::peers, &peer::num_qps>("num-qps",
        "K: shared RC QPs per remote node", 1, wire::conn::max_qps),
    number<&cfg::gid_index>("gid-index",
        "GID table index; -1: the first RoCE v2 IPv4 GID", -1, 255),
    number<&cfg::nic, &nic::srq_size>("srq-size",
        "receive buffers of the node", 16, 65536),
    number<&cfg::nic, &nic::qp, &qp::sq_depth>("sq-depth",
        "send WRs per RC QP of the first --deep-peers remote nodes and of "
        "this node's own", 1, 16384),
    number<&cfg::engine, &eng::deep_peers>("deep-peers",
        "remote nodes whose RC QPs get --sq-depth send WRs, first come; the "
        "others' get --shallow-sq-depth, until a deep one's QPs are gone",
        0, 65536),
    number<&cfg::engine, &eng::shallow_sq_depth>("shallow-sq-depth",
        "send WRs per RC QP of the remote nodes past --deep-peers (at most "
        "--sq-depth)", 1, 16384),
    time_in<microseconds, &cfg::cpu, &cpu::spin>("spin-us",
        "microseconds to keep polling after a client's last work, before "
        "sleeping", 0, 1000000),
    number<&cfg::cpu, &cpu::yield_when_idle>("idle-yield",
        "1: give the CPU away (sched_yield) on each idle poll while spinning, "
        "so clients polling on the same core run at once; 0: pure busy "
        "polling", 0, 1),
    mode<agent::parse_priority, &cfg::priority>("priority",
        "how the agent is scheduled among the job's ranks: normal (the fair "
        "class), nice:N (the fair class at nice N, -20 to 19; below 0 needs "
        "CAP_SYS_NICE or RLIMIT_NICE), fifo:N (SCHED_FIFO at N, 1 to 99: a "
        "woken agent preempts the rank on its core at once; needs "
        "CAP_SYS_NICE or RLIMIT_RTPRIO; give it a short --spin-us). Without "
        "the permission the agent runs normal and logs why"),
    time_in<microseconds, &cfg::cpu, &cpu::busy_limit>("busy-limit-us",
        "with fifo: microseconds the agent may stay awake (working or "
        "spinning) before it pauses for --busy-pause-us, so the ranks on its "
        "core progress whatever the load", 10, 1000000),
    time_in<microseconds, &cfg::cpu, &cpu::pause>("busy-pause-us",
        "with fifo: the length of that pause: the agent holds at most limit "
        "/ (limit + pause) of a core", 1, 1000000),
    time_in<milliseconds, &cfg::engine, &eng::peers,
            &peer::keepalive_interval>("keepalive-ms",
        "idle time before a keepalive; twice it unanswered: lost",
        100, 3600000),
    number<&cfg::engine, &eng::keepalive_rate>("keepalive-rate",
        "keepalives a second the agent plans for at most: with more remote "
        "nodes than this rate covers at --keepalive-ms, an idle node's "
        "keepalive comes every nodes / rate seconds", 1, 1000000),
    time_in<milliseconds, &cfg::engine, &eng::peers,
            &peer::reconnect_delay>("reconnect-ms",
        "delay before reconnecting a lost peer", 10, 600000),
    time_in<milliseconds, &cfg::engine, &eng::peers,
            &peer::give_up_timeout>("give-up-ms",
        "time to connect (or reconnect) before the peer is failed",
        100, 3600000),
    number<&cfg::trace_events>("trace-events",
        "trace the data path: keep the first N events of its messages "
        "(trace.h) and write them to --trace-file at exit; 0: off (no cost)",
        0, 100000000),
    text<&cfg::trace_file>("trace-file", "PATH",
        "where --trace-events writes its events",
        "the log file's name + .trace"),
    number<&cfg::nic, &nic::qp, &qp::timeout>("qp-timeout",
        "RC ack timeout exponent: 4.096 us * 2^N per try (18: 1.07 s, UCX "
        "rc's default), 7 tries", 1, 31),
    mode<agent::parse_auth_choice, &cfg::auth, &auth::choice>("auth",
        "how peer agents prove they belong to this job: munge (a MUNGE "
        "credential from munged, checked for this uid and gid), secret (HMAC "
        "under the job's secret: --secret-file, $RVT_JOB_SECRET_FILE or "
        "$RVT_JOB_SECRET), none (UNAUTHENTICATED: anyone who sends the job "
        "key), auto (munge if munged answers, else secret if one is given, "
        "else refuse to start); every agent of a job must use the same"),
    text<&cfg::auth, &auth::munge_socket>("munge-socket", "PATH",
        "munged's socket, for --auth=munge and auto", "MUNGE's default"),
    text<&cfg::auth, &auth::secret_file>("secret-file", "PATH",
        "file holding the job's secret (at least 16 bytes; owned by this "
        "user, mode 600), for --auth=secret and auto",
        "$RVT_JOB_SECRET_FILE"),
    number<&cfg::nic, &nic::fault_silent_qps>("fault-silent-qps",
        "fault injection, for tests only: the first N RC QPs that get work "
        "go to the error state and never complete anything, not even "
        "flushes (as Debian 12's rxe can); 0: off", 0, 1024),
};
/* clang-format on */

} // namespace settings_detail

/* rvtd's settings, in the order --help lists them. */
inline constexpr std::span<const setting> rvtd_settings{settings_detail::table};

} // namespace rvt::tools

#endif
