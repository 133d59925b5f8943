/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvt_hub_sim: one real agent against N remote nodes.
 *
 * The hub is what rvtd assembles (the real engine and attach server, on a
 * loopback nic: test/loopback/loopback_agent.h) with real clients
 * attached; the N remote nodes are far agents (test/loopback/far_agent.h):
 * each its own nic on the hub's fabric, the real handshake, credential
 * and keepalives towards the hub, and nothing else, so that ten thousand
 * fit beside it in one process. One thread runs everything, a round being
 * one pass of every far agent with a pass of the hub before every 256 of
 * them; the hub's passes are timed on their own (the thread's CPU clock
 * around them). For each N of
 * --peers, in order:
 *
 *   storm     every far agent asks for the hub, and the hub's first
 *             client asks the hub for every far agent, at once (an
 *             alltoall's start, as the node sees it): seconds and rounds
 *             until every pair is connected at both ends, the hub's CPU,
 *             the handshake datagrams per pair (both ends' sent), lost at
 *             the hub (its UD queue full), and every refusal the hub
 *             counted; the pairs left unconnected (the program exits 1 if
 *             any)
 *   memory    the heap the storm added, per peer: the hub's peer state and
 *             its nic's model of the K QPs (the far agents made theirs
 *             before; their replay windows, two MACs each, are in it);
 *             and the hub's RC QPs, which docs/performance.md turns into
 *             device memory with the per-QP sizes the testbed measures
 *   idle      --idle seconds (by default two of the hub's keepalive
 *             intervals at N, engine_config::keepalive_rate, and at least
 *             12) with everything connected and nothing to
 *             send, a round every millisecond: the hub's CPU per second
 *             (its share of a core), its keepalives sent per second, and
 *             the receive completions it took (the far agents')
 *   fail      --fail far nodes die at once (their nics leave the fabric;
 *             nothing is said): seconds until the hub has failed every
 *             one (the moment it tells its clients), its CPU in that
 *             time and in its busiest second, the RC QPs it still holds
 *             for them (0 unless it leaks) and the heap it gave back
 *   restart   --restart other far nodes restart at once (new instances,
 *             new QPs, the old ones gone without a word): seconds until
 *             each is connected again at both ends, the hub's CPU, the
 *             datagrams per restarted pair
 *
 * Timings are the hub's defaults (peer_config: keepalive after 5 s idle,
 * unanswered for 10 s is lost, a peer given up 30 s after it was wanted).
 * Figures are printed, never judged, except what makes a PASS or FAIL line
 * per N: every pair connected, every dead node failed with no QP held for
 * it, every restarted one connected again.
 * Usage:
 *   rvt_hub_sim [--peers=N,N,...] [--qps=K] [--idle=S] [--fail=M]
 *               [--restart=M] [--limit=S] [--jitter-percent=P]
 * --limit: the seconds each phase may take (300). --jitter-percent: the
 * spread of every agent's handshake resends (peer_config::retry_jitter,
 * 50 by default; 0: the waits of before it was spread).
 */
#include "test/bench/sim_common.h"
#include "test/loopback/far_agent.h"
#include "test/loopback/loopback_agent.h"
#include "uct/ib/rvt/client/attach.h"
#include "uct/ib/rvt/client/session.h"

#include <poll.h>
#include <sys/resource.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace rvt;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using agent::testing::far_agent;
using agent::testing::loopback_agent;
using bench::counter;
using bench::cpu_seconds;
using bench::die;
using bench::heap_in_use;
using bench::number;
using bench::numbers;

constexpr const char *job_key = "bench.hub";
constexpr const char *secret  = "the simulated job's secret";

struct options {
    std::vector<unsigned> peers{1000, 4096, 10000};
    unsigned qps     = 4;
    double idle      = 0; /* 0: two keepalive intervals at N, 12 s or more */
    unsigned fail    = 1000;
    unsigned restart = 1000;
    unsigned limit   = 300;
    /* peer_config::retry_jitter, the hub's and the far agents' */
    double jitter = agent::peer_config{}.retry_jitter;
};

options parse(int argc, char **argv)
{
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value          = [&](const char *name) {
            return bench::value_of(argv[i], name);
        };
        if (const char *v = value("peers")) {
            o.peers = numbers(v, "peers", 1, 16384);
        } else if (const char *v2 = value("qps")) {
            o.qps = number(v2, "qps", 1, 16);
        } else if (const char *v3 = value("idle")) {
            o.idle = number(v3, "idle", 1, 3600);
        } else if (const char *v4 = value("fail")) {
            o.fail = number(v4, "fail", 0, 16384);
        } else if (const char *v5 = value("restart")) {
            o.restart = number(v5, "restart", 0, 16384);
        } else if (const char *v6 = value("limit")) {
            o.limit = number(v6, "limit", 1, 86400);
        } else if (const char *v7 = value("jitter-percent")) {
            o.jitter = number(v7, "jitter-percent", 0, 100) / 100.0;
        } else {
            die("unknown argument '" + a +
                "' (--peers=N,N,... --qps=K --idle=S --fail=M --restart=M "
                "--limit=S --jitter-percent=P)");
        }
    }
    return o;
}

/* The hub's view of its remote peers, from its status (milliseconds at
 * ten thousand peers: looked at now and then). */
struct hub_view {
    nlohmann::ordered_json status;
    std::map<std::string, const nlohmann::ordered_json *> by_gid;

    explicit hub_view(const agent::engine &e) : status(e.status_json())
    {
        for (const auto &p : status.at("peers")) {
            if (!p.at("loopback").get<bool>()) {
                by_gid[p.at("gid").get<std::string>()] = &p;
            }
        }
    }
    const nlohmann::ordered_json *peer(const far_agent &f) const
    {
        const auto it = by_gid.find(agent::gid_text(f.address().gid));
        return it == by_gid.end() ? nullptr : it->second;
    }
    std::string state(const far_agent &f) const
    {
        const auto *p = peer(f);
        return p == nullptr ? "none" : p->at("state").get<std::string>();
    }
    uint64_t sum(const char *field) const
    {
        uint64_t n = 0;
        for (const auto &[g, p] : by_gid) {
            n += p->at(field).get<uint64_t>();
        }
        return n;
    }
    /* QPs by send depth, the hub's own node's included */
    std::map<uint32_t, uint64_t> qps_by_depth() const
    {
        std::map<uint32_t, uint64_t> n;
        for (const auto &p : status.at("peers")) {
            n[p.at("sq_depth").get<uint32_t>()] += p.at("qps").get<uint64_t>();
        }
        return n;
    }
    uint64_t handshake(const char *field) const
    {
        return counter(status, "handshake", field).value_or(0);
    }
};

/* The hub, its clients and the far agents, on one fabric (declared
 * first: it outlives them; the clients go before the hub). */
struct world {
    agent::testing::loopback_fabric fabric;
    loopback_agent hub;
    std::vector<std::unique_ptr<far_agent>> far;
    std::vector<std::unique_ptr<client::session>> clients;
    double hub_cpu  = 0; /* seconds of the hub's passes */
    uint64_t rounds = 0;

    world(unsigned n, const options &o, const std::string &dir);
    ~world()
    {
        clients.clear();
        far.clear();
    }
    /* One pass of every far agent, with a pass of the hub before every
     * 256 of them: the hub runs on a core of its own, where one thread
     * pumping ten thousand far agents would otherwise give it one pass
     * in milliseconds, and a loaded host fewer still. */
    static constexpr size_t far_per_hub_pass = 256;
    void round()
    {
        for (size_t i = 0; i == 0 || i < far.size(); i += far_per_hub_pass) {
            const auto now = clock_type::now();
            hub_pass(now);
            const size_t end = std::min(far.size(), i + far_per_hub_pass);
            for (size_t k = i; k < end; ++k) {
                far[k]->pump(now);
            }
        }
        ++rounds;
    }
    void hub_pass(clock_type::time_point now)
    {
        if (sleepy && asleep && !woken(now)) {
            return;
        }
        const double t0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
        if (sleepy) {
            hub_pass_or_sleep(now);
        } else {
            hub.pump(now);
        }
        hub_cpu += cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - t0;
    }
    /* rvtd's loop, when it has nothing to do (serve_loop.cc): after a
     * pass that found nothing it announces sleep, looks once more, and
     * sleeps until a completion (its CQ's event fd), a client's doorbell
     * or its next timer, which it asks the engine for once a sleep.
     * Asleep, the hub costs nothing: the look at whether it is woken,
     * here a poll() before each of its passes, is rvtd's one blocking
     * poll() per sleep, and is not counted. */
    bool sleepy     = false;
    bool asleep     = false;
    uint64_t passes = 0;
    bool woken(clock_type::time_point now) const
    {
        const agent::engine &e = *hub.engine;
        pollfd fds[2]          = {{e.completion_fd(), POLLIN, 0},
                                  {e.wake_fd(), POLLIN, 0}};
        const auto t           = e.next_timer();
        return ::poll(fds, 2, 0) > 0 || (t && *t <= now);
    }
    void hub_pass_or_sleep(clock_type::time_point now)
    {
        agent::engine &e = *hub.engine;
        if (asleep) {
            e.end_sleep();
            asleep = false;
        }
        ++passes;
        if (e.progress(now)) {
            return;
        }
        hub.serve_clients();
        if (e.prepare_sleep()) {
            if (e.progress(now)) {
                e.end_sleep();
            } else {
                asleep = true;
                (void)e.next_timer(); /* rvtd's sleep asks it, once */
            }
        }
    }
    const agent::attached_client &first() const
    {
        return *hub.server->client(clients[0]->client_index());
    }
    /* the far agents' datagrams sent, or lost (far_counters) */
    uint64_t
    far_datagrams(uint64_t agent::testing::far_counters::*which =
                          &agent::testing::far_counters::datagrams_sent) const
    {
        uint64_t n = 0;
        for (const auto &f : far) {
            n += f->counters().*which;
        }
        return n;
    }
};

world::world(unsigned n, const options &o, const std::string &dir)
{
    const shm_capacities caps{64, 64, 16, 256, 64};
    agent::testing::loopback_options nopt;
    nopt.receive_buffers = 1024; /* rvtd's --srq-size */
    nopt.receive_size    = caps.slot_size;
    nopt.memory          = agent::testing::memory_mode::none;
    nopt.max_inline      = caps.inline_size;
    nopt.sq_depth        = agent::rc_qp_params{}.sq_depth; /* --sq-depth */
    agent::engine_config cfg;
    cfg.peers.num_qps      = o.qps;
    cfg.peers.retry_jitter = o.jitter;
    cfg.max_peers          = n + 16;
    cfg.share.peers        = cfg.max_peers; /* one process asks for them all */
    auto auth              = agent::secret_auth(secret);
    if (!auth) {
        die(auth.error());
    }
    auto made = agent::testing::make_loopback_agent(
            fabric, {.socket   = dir + "/hub.sock",
                     .job_key  = job_key,
                     .agent_id = 0x4b0b,
                     .caps     = caps,
                     .nic      = nopt,
                     .engine   = cfg,
                     .auth     = std::move(auth).value()});
    if (!made) {
        die(made.error());
    }
    hub = std::move(made).value();
    for (unsigned c = 0; c < 2; ++c) {
        auto f = std::async(std::launch::async, [&] {
            return client::attach(dir + "/hub.sock", job_key);
        });
        while (f.wait_for(0s) != std::future_status::ready) {
            hub.pump(clock_type::now());
        }
        auto at = f.get();
        if (!at) {
            die("attach: " + at.error());
        }
        auto s = client::session::open(std::move(at).value());
        if (!s) {
            die(s.error());
        }
        clients.push_back(std::move(s).value());
    }
    agent::peer_config far_peers = cfg.peers;
    far_peers.am_size            = caps.slot_size; /* as the engine's */
    /* each far node of an n-node job has n peers too, and keeps its
     * keepalives within the same rate as the hub */
    far_peers.keepalive_interval = agent::keepalive_interval_for(cfg, n + 1);
    for (unsigned i = 0; i < n; ++i) {
        auto a = agent::secret_auth(secret);
        if (!a) {
            die(a.error());
        }
        far.push_back(std::make_unique<far_agent>(
                fabric, hub.engine->address(),
                agent::testing::far_agent_options{
                        .job_key     = job_key,
                        .instance_id = 0x10000ull * (i + 1),
                        .peers       = far_peers,
                        .auth        = std::move(a).value()}));
    }
}

double since(clock_type::time_point t)
{
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

/* Rounds, one a millisecond at most, until done() (looked at every
 * `look`) or `limit` seconds; true if done. `busiest`: the hub's CPU in
 * its busiest whole second of the time. */
template<class Done>
bool run_until(world &w, Done done, double look, double limit,
               double *busiest = nullptr)
{
    const auto started = clock_type::now();
    auto next_look     = started;
    auto second        = started + 1s;
    double cpu_at      = w.hub_cpu;
    for (auto next = started;; next += 1ms) {
        const auto now = clock_type::now();
        w.round();
        if (busiest != nullptr && now >= second) {
            *busiest = std::max(*busiest, w.hub_cpu - cpu_at);
            cpu_at   = w.hub_cpu;
            second += 1s;
        }
        if (now >= next_look) {
            if (done()) {
                return true;
            }
            next_look = clock_type::now() +
                        std::chrono::duration_cast<clock_type::duration>(
                                std::chrono::duration<double>(look));
        }
        if (since(started) > limit) {
            return false;
        }
        std::this_thread::sleep_until(next);
    }
}

bool run_phase(unsigned n, const options &o, const std::string &dir)
{
    bool ok = true;
    world w(n, o, dir);
    const uint64_t heap_made = heap_in_use();

    /* ---- storm ---- */
    const auto started = clock_type::now();
    const double cpu0  = w.hub_cpu;
    const auto now0    = clock_type::now();
    for (auto &f : w.far) {
        f->connect(now0);
    }
    for (auto &f : w.far) {
        if (auto p = w.hub.engine->resolve_peer(w.first(), f->address()); !p) {
            die("the hub, for a far agent: " + p.error());
        }
    }
    /* rounds as fast as they go (no pacing): every far agent connected,
     * then the hub's view, looked at every 64 rounds once they are */
    const auto limit = started + std::chrono::seconds(o.limit);
    auto all_far     = [&] {
        return std::all_of(w.far.begin(), w.far.end(), [](const auto &f) {
            return f->state() == agent::peer_state::connected;
        });
    };
    bool storm_done = false;
    while (clock_type::now() < limit) {
        w.round();
        if (w.rounds % 64 == 0 && all_far()) {
            const hub_view v(*w.hub.engine);
            storm_done = std::all_of(w.far.begin(), w.far.end(),
                                     [&](const auto &f) {
                                         return v.state(*f) == "connected";
                                     });
            if (storm_done) {
                break;
            }
        }
    }
    const double storm_s        = since(started);
    const double storm_cpu      = w.hub_cpu - cpu0;
    const uint64_t storm_rounds = w.rounds;
    const uint64_t heap_storm   = heap_in_use();
    hub_view v(*w.hub.engine);
    unsigned bad = 0;
    std::map<std::string, unsigned> bad_states;
    for (const auto &f : w.far) {
        const std::string h = v.state(*f);
        if (h != "connected" || f->state() != agent::peer_state::connected) {
            ++bad;
            ++bad_states[h + "/" + std::string(to_string(f->state()))];
        }
    }
    std::string refused;
    for (const auto &[a, b] : bench::refusals) {
        const auto c = counter(v.status, a, b);
        if (c && *c > 0) {
            refused += std::string(refused.empty() ? "" : " ") + b + "=" +
                       std::to_string(*c);
        }
    }
    std::printf("%u peers, K = %u, retry jitter %.0f%%\n", n, o.qps,
                o.jitter * 100);
    std::printf("  storm: %.2f s, %llu rounds, the hub's CPU %.3f s; "
                "datagrams per pair %.2f (the hub %llu, far %llu), lost "
                "(a full queue) %llu of the hub's, %llu of theirs; refused: "
                "%s; pairs not connected: %u\n",
                storm_s, (unsigned long long)storm_rounds, storm_cpu,
                double(v.handshake("sent") + w.far_datagrams()) / n,
                (unsigned long long)v.handshake("sent"),
                (unsigned long long)w.far_datagrams(),
                (unsigned long long)v.handshake("dropped"),
                (unsigned long long)w.far_datagrams(
                        &agent::testing::far_counters::datagrams_lost),
                refused.empty() ? "none" : refused.c_str(), bad);
    for (const auto &[k, c] : bad_states) {
        std::printf("    the hub's/far state %s: %u\n", k.c_str(), c);
    }
    /* rxe's queue for d send WRs: a power of two of d + 1 slots of 512
     * bytes, and a page (the testbed's qp-table measures it) */
    const auto rxe_bytes = [](uint32_t d) {
        return double(std::bit_ceil(d + 1)) * 512 + 4096;
    };
    std::string depths;
    double device = 0;
    for (const auto &[d, q] : v.qps_by_depth()) {
        depths += (depths.empty() ? "" : ", ") + std::to_string(q) + " of " +
                  std::to_string(d) + " WRs";
        device += double(q) * rxe_bytes(d);
    }
    std::printf("  memory: %.1f KiB of heap per peer (%.0f MiB); the hub "
                "holds %llu RC QPs (its own node's K included): %s, %.0f MiB "
                "of send queues on rxe's accounting\n",
                double(heap_storm - heap_made) / 1024 / n,
                double(heap_storm - heap_made) / (1 << 20),
                (unsigned long long)(v.sum("qps") + o.qps), depths.c_str(),
                device / (1 << 20));
    std::fflush(stdout);
    ok &= storm_done && bad == 0;
    if (!ok) {
        return false;
    }

    /* ---- idle ---- */
    const double idle_cpu0 = w.hub_cpu;
    const uint64_t ka0     = v.sum("keepalives");
    const uint64_t rx0     = v.sum("received");
    const uint64_t passes0 = w.passes;
    const auto idle_from   = clock_type::now();
    w.sleepy               = true;
    const double idle_for =
            o.idle > 0 ?
                    o.idle :
                    std::max(12.0, 2e-3 * double(agent::keepalive_interval_for(
                                                         agent::engine_config{},
                                                         n + 1)
                                                         .count()));
    run_until(
            w, [] { return false; }, 1e9, idle_for);
    if (w.asleep) {
        w.hub.engine->end_sleep();
    }
    w.sleepy = w.asleep = false;
    const double idle_s = since(idle_from);
    const hub_view vi(*w.hub.engine);
    std::printf("  idle: the hub's CPU %.3f%% of a core (%.0f passes/s, "
                "sleeping between them as rvtd does); it sent %.0f "
                "keepalives/s and took %.0f receives/s\n",
                100.0 * (w.hub_cpu - idle_cpu0) / idle_s,
                double(w.passes - passes0) / idle_s,
                double(vi.sum("keepalives") - ka0) / idle_s,
                double(vi.sum("received") - rx0) / idle_s);
    std::fflush(stdout);

    /* ---- fail ---- */
    const unsigned m = std::min(o.fail, n);
    if (m > 0) {
        const uint64_t heap0 = heap_in_use();
        const double cpu1    = w.hub_cpu;
        const auto died      = clock_type::now();
        for (unsigned i = 0; i < m; ++i) {
            w.far[i]->die();
        }
        double busiest = 0;
        const bool all = run_until(
                w,
                [&] {
                    const hub_view hv(*w.hub.engine);
                    for (unsigned i = 0; i < m; ++i) {
                        if (hv.state(*w.far[i]) != "failed") {
                            return false;
                        }
                    }
                    return true;
                },
                0.25, o.limit, &busiest);
        const double fail_s = since(died);
        const hub_view vf(*w.hub.engine);
        uint64_t held   = 0;
        unsigned failed = 0;
        for (unsigned i = 0; i < m; ++i) {
            if (const auto *p = vf.peer(*w.far[i])) {
                held += p->at("qps").get<uint64_t>();
                failed += p->at("state") == "failed";
            }
        }
        std::printf("  fail %u at once: %s after %.1f s (%u failed); the "
                    "hub's CPU %.2f s, %.3f s in its busiest second; RC QPs "
                    "still held for them: %llu; heap given back: %.1f MiB\n",
                    m, all ? "all failed" : "NOT all failed", fail_s, failed,
                    w.hub_cpu - cpu1, busiest, (unsigned long long)held,
                    (double(heap0) - double(heap_in_use())) / (1 << 20));
        std::fflush(stdout);
        ok &= all && held == 0;
    }

    /* ---- restart ---- */
    const unsigned r = std::min(o.restart, n - m);
    if (r > 0) {
        const double cpu2 = w.hub_cpu;
        const hub_view before(*w.hub.engine);
        const uint64_t hub_sent0 = before.handshake("sent");
        const uint64_t far_sent0 = w.far_datagrams();
        const auto restarted     = clock_type::now();
        for (unsigned i = m; i < m + r; ++i) {
            w.far[i]->restart(restarted);
        }
        const bool all = run_until(
                w,
                [&] {
                    for (unsigned i = m; i < m + r; ++i) {
                        if (w.far[i]->state() != agent::peer_state::connected) {
                            return false;
                        }
                    }
                    const hub_view hv(*w.hub.engine);
                    for (unsigned i = m; i < m + r; ++i) {
                        const auto *p = hv.peer(*w.far[i]);
                        if (p == nullptr || p->at("state") != "connected" ||
                            p->at("reconnects").get<uint64_t>() == 0) {
                            return false;
                        }
                    }
                    return true;
                },
                0.1, o.limit);
        const double restart_s = since(restarted);
        const hub_view vr(*w.hub.engine);
        std::printf("  restart %u at once: %s after %.2f s; the hub's CPU "
                    "%.2f s; datagrams per restarted pair %.2f\n",
                    r, all ? "all connected again" : "NOT all connected",
                    restart_s, w.hub_cpu - cpu2,
                    double(vr.handshake("sent") - hub_sent0 +
                           w.far_datagrams() - far_sent0) /
                            r);
        std::fflush(stdout);
        ok &= all;
    }
    return ok;
}

} // namespace

int main(int argc, char **argv)
{
    const options o = parse(argc, argv);
    /* a far agent's nic holds an eventfd */
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &lim);
    }
    char tmpl[] = "/tmp/rvt-hub.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
        die(std::string("mkdtemp: ") + std::strerror(errno));
    }
    const std::string dir = tmpl;
    std::printf("rvt_hub_sim: one agent (the real engine and attach server, "
                "2 clients) against N far agents on one loopback fabric\n");
    std::fflush(stdout);
    bool ok = true;
    for (unsigned n : o.peers) {
        const bool done = run_phase(n, o, dir);
        std::printf("%s: %u peers: %s\n", done ? "PASS" : "FAIL", n,
                    done ? "every pair connected, the dead failed, the "
                           "restarted connected again, no QP held for the "
                           "dead" :
                           "a pair left unconnected, a dead peer not failed, "
                           "a restarted one not connected again, or QPs held "
                           "for the dead (above)");
        std::fflush(stdout);
        ok &= done;
    }
    std::filesystem::remove_all(dir);
    return ok ? 0 : 1;
}
