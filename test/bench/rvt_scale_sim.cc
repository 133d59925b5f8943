/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvt_scale_sim: many nodes, in one process, with the real engine.
 *
 * N agents (the real engine and attach server, each over its own
 * loopback nic on one loopback fabric: separate nodes as far as the
 * engine can tell, test/loopback/loopback_nic.h), each with C clients
 * attached (real client sessions). Then a connection storm: every node's
 * first client asks its agent for every other node, in a random order of
 * its own, one more each round, as the ranks of a job reaching each other
 * for an alltoall at start-up do; all agents run one pass each round, on
 * one thread. Printed, for each N of --nodes:
 *
 *   storm      until every pair of agents is connected both ways: seconds
 *              of this one core running all N agents, and rounds (a pass
 *              of every agent each; the first N - 1 also ask for a peer)
 *   datagrams  handshake datagrams sent, received and lost (a full UD
 *              queue loses them, as UD does), and answered busy
 *   bad pairs  pairs not connected both ways at the end (lost or left
 *              half-open) and peers an agent holds twice: all must be 0
 *   memory     the process's heap and mappings in use (mallinfo2) per
 *              node, per client and per peer, measured as each is added;
 *              the loopback nic's model of QPs and buffers is in them, as
 *              the driver's would be in rvtd's
 *   idle       with every pair connected and nothing to send: one pass of
 *              one agent over its N - 1 idle peers (us), and the
 *              handshake datagrams and control sends (keepalives) per
 *              agent per second
 *
 * With --star, the storm is on one agent instead (a job's first
 * collective, whose root every rank reaches at once, or an alltoall's
 * start as one rank sees it): in the first round every other node's
 * first client asks its agent for node 0 (the hub), and the hub's first
 * client asks the hub for every other node (a spoke), all at once; then
 * every agent passes until each spoke and the hub are connected both
 * ways. Printed, for each N:
 *
 *   storm      seconds and rounds until then (looked at every 8 rounds
 *              once every spoke's nic has QPs connected to the hub's, and
 *              else in at most a tenth of the time),
 *              or until every pair left is failed at both ends (a
 *              failed peer has no timer: nothing starts it again but a
 *              client asking anew, which this one does not); the CPU
 *              time that took, and the hub's passes' share of it (what a
 *              loaded host's scheduling does not change)
 *   datagrams  handshake datagrams sent per spoke-hub pair, lost, and
 *              answered busy
 *   bad pairs  spokes and the hub not connected both ways, and peers held
 *              twice: both must be 0
 *   per peer   the heap the storm added per peer (the hub's N - 1 and
 *              each spoke's one)
 *   hub        every refusal the hub counted (its status's handshake and
 *              share counters; "-": this engine has no such counter), and
 *              the spokes' refusals, summed
 *
 * Figures are printed, never judged, except the bad pairs, which make the
 * program exit 1. Usage:
 *   rvt_scale_sim [--nodes=N,N,...] [--clients=C] [--qps=K] [--idle=S]
 *                 [--seed=X] [--star] [--limit=S] [--ud-slots=D]
 * --limit: the seconds a storm may take before its bad pairs are counted
 * (600). --ud-slots: the datagrams that may wait at a nic, more are lost
 * (as many as rvtd's UD QP has receive buffers: nic.h, ud_receive_depth).
 */
#include "test/bench/sim_common.h"
#include "test/loopback/loopback_agent.h"
#include "uct/ib/rvt/client/attach.h"
#include "uct/ib/rvt/client/session.h"

#include <malloc.h>
#include <sys/resource.h>
#include <time.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace rvt;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using agent::testing::loopback_agent;
using bench::counter;
using bench::cpu_seconds;
using bench::die;
using bench::heap_in_use;
using bench::num_refusals;
using bench::number;
using bench::numbers;
using bench::refusals;

constexpr const char *job_key = "bench.scale";

struct options {
    std::vector<unsigned> nodes{16, 64, 256, 512};
    unsigned clients = 2;
    unsigned qps     = 4;
    double idle      = 2.0; /* seconds of the idle measurement */
    unsigned seed    = 1;
    bool star        = false; /* the storm on one agent (see the top) */
    unsigned limit   = 600; /* seconds a storm may take */
    /* datagrams waiting at a nic, more are lost: as many as rvtd's UD QP
     * has receive buffers (nic.h, ud_receive_depth) */
    unsigned ud_slots = agent::ud_receive_depth;
};

options parse(int argc, char **argv)
{
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value          = [&](const char *name) {
            return bench::value_of(argv[i], name);
        };
        if (const char *v = value("nodes")) {
            o.nodes = numbers(v, "nodes", 2, 4096);
        } else if (const char *v2 = value("clients")) {
            o.clients = number(v2, "clients", 1, 64);
        } else if (const char *v3 = value("qps")) {
            o.qps = number(v3, "qps", 1, 16);
        } else if (const char *v4 = value("idle")) {
            o.idle = std::strtod(v4, nullptr);
        } else if (const char *v5 = value("seed")) {
            o.seed = number(v5, "seed", 0, ~0u);
        } else if (const char *v6 = value("limit")) {
            o.limit = number(v6, "limit", 1, 86400);
        } else if (const char *v7 = value("ud-slots")) {
            o.ud_slots = number(v7, "ud-slots", 1, 65536);
        } else if (a == "--star") {
            o.star = true;
        } else {
            die("unknown argument '" + a +
                "' (--nodes=N,N,... --clients=C --qps=K --idle=S --seed=X "
                "--star --limit=S --ud-slots=D)");
        }
    }
    return o;
}

struct node : loopback_agent {
    std::string socket;
    std::vector<std::unique_ptr<client::session>> clients;
};

/* WRs the nics ran (control messages and keepalives, with no data) */
uint64_t fabric_ops(const std::vector<std::unique_ptr<node>> &nodes)
{
    uint64_t n = 0;
    for (const auto &nd : nodes) {
        n += nd->nic->stats().ops_executed;
    }
    return n;
}

struct row {
    unsigned nodes;
    double storm_s;
    uint64_t rounds; /* of the storm: one pass of every agent each */
    uint64_t sent, received, lost, busy;
    uint64_t bad_pairs, doubled;
    double per_node, per_client, per_peer; /* bytes */
    double pass_us, datagrams_per_s, controls_per_s;
};

uint64_t at(const nlohmann::ordered_json &j, const char *a, const char *b)
{
    return j.at(a).at(b).get<uint64_t>();
}

/* N agents on one fabric, C clients attached to each, and the heap each
 * node and client added. The fabric outlives the nodes (declared first). */
struct cluster {
    agent::testing::loopback_fabric fabric;
    std::vector<std::unique_ptr<node>> nodes;
    double per_node = 0, per_client = 0; /* bytes */

    cluster(unsigned n, const options &o, const std::string &dir);
    ~cluster()
    {
        for (auto &nd : nodes) {
            nd->clients.clear();
        }
    }
    /* one pass of every agent */
    void pump()
    {
        const auto now = clock_type::now();
        for (auto &nd : nodes) {
            nd->pump(now);
        }
    }
};

cluster::cluster(unsigned n, const options &o, const std::string &dir)
{
    const shm_capacities caps{64, 64, 16, 256, 64};
    agent::testing::loopback_options nopt;
    nopt.receive_buffers = 1024; /* rvtd's --srq-size */
    nopt.receive_size    = caps.slot_size;
    nopt.memory          = agent::testing::memory_mode::none;
    nopt.max_inline      = caps.inline_size;
    nopt.datagram_slots  = o.ud_slots;
    agent::engine_config cfg;
    cfg.peers.num_qps = o.qps;
    cfg.max_peers     = std::max<uint32_t>(cfg.max_peers, n + 16);
    /* one process is every node's first client, and makes each node's
     * every peer: its share is the table (client_share.h, "peers") */
    cfg.share.peers = cfg.max_peers;

    const uint64_t heap0 = heap_in_use();
    for (unsigned i = 0; i < n; ++i) {
        auto nd    = std::make_unique<node>();
        nd->socket = dir + "/agent" + std::to_string(i) + ".sock";
        auto auth  = agent::secret_auth("the simulated job's secret");
        if (!auth) {
            die(auth.error());
        }
        auto made = agent::testing::make_loopback_agent(
                fabric, {.socket   = nd->socket,
                         .job_key  = job_key,
                         .agent_id = 1000 + i,
                         .caps     = caps,
                         .nic      = nopt,
                         .engine   = cfg,
                         .auth     = std::move(auth).value()});
        if (!made) {
            die(made.error());
        }
        static_cast<loopback_agent &>(*nd) = std::move(made).value();
        nodes.push_back(std::move(nd));
    }
    const uint64_t heap1 = heap_in_use();
    per_node             = static_cast<double>(heap1 - heap0) / n;

    /* a call that waits for an agent's answer, beside the pump */
    auto serving = [&](auto call) {
        auto f = std::async(std::launch::async, call);
        while (f.wait_for(0s) != std::future_status::ready) {
            pump();
        }
        return f.get();
    };
    for (auto &nd : nodes) {
        for (unsigned c = 0; c < o.clients; ++c) {
            auto at = serving(
                    [&] { return client::attach(nd->socket, job_key); });
            if (!at) {
                die("attach: " + at.error());
            }
            auto s = client::session::open(std::move(at).value());
            if (!s) {
                die(s.error());
            }
            nd->clients.push_back(std::move(s).value());
        }
    }
    const uint64_t heap2 = heap_in_use();
    per_client           = static_cast<double>(heap2 - heap1) / (n * o.clients);
}

row simulate(unsigned n, const options &o, const std::string &dir)
{
    row r{};
    r.nodes = n;
    cluster cl(n, o, dir);
    auto &nodes          = cl.nodes;
    auto pump            = [&] { cl.pump(); };
    r.per_node           = cl.per_node;
    r.per_client         = cl.per_client;
    const uint64_t heap2 = heap_in_use();

    /* the storm: each node's first client wants every other node, in an
     * order of its own, one more per round */
    std::mt19937 rng(o.seed + n);
    std::vector<std::vector<unsigned>> order(n);
    for (unsigned i = 0; i < n; ++i) {
        for (unsigned j = 0; j < n; ++j) {
            if (j != i) {
                order[i].push_back(j);
            }
        }
        std::shuffle(order[i].begin(), order[i].end(), rng);
    }
    std::vector<const agent::attached_client *> first(n);
    for (unsigned i = 0; i < n; ++i) {
        first[i] = nodes[i]->server->client(
                nodes[i]->clients[0]->client_index());
    }
    auto all_connected = [&] {
        for (auto &nd : nodes) {
            const auto s       = nd->engine->status_json();
            unsigned connected = 0;
            for (const auto &p : s.at("peers")) {
                connected += p.at("state") == "connected";
            }
            if (connected != n) { /* its N - 1 and its own node */
                return false;
            }
        }
        return true;
    };
    const auto started = clock_type::now();
    for (unsigned round = 0; round + 1 < n; ++round) {
        for (unsigned i = 0; i < n; ++i) {
            auto p = nodes[i]->engine->resolve_peer(
                    *first[i], nodes[order[i][round]]->engine->address());
            if (!p) {
                die("node " + std::to_string(i) + ": " + p.error());
            }
        }
        pump();
    }
    r.rounds         = n - 1;
    const auto limit = started + std::chrono::seconds(o.limit);
    while (clock_type::now() < limit) {
        pump();
        if (++r.rounds % 64 == 0 && all_connected()) {
            break;
        }
    }
    r.storm_s =
            std::chrono::duration<double>(clock_type::now() - started).count();
    const uint64_t heap3 = heap_in_use();
    r.per_peer = static_cast<double>(heap3 - heap2) / (double(n) * (n - 1));

    /* the verdict: every pair connected both ways, no address twice */
    std::vector<std::set<std::string>> connected_to(n);
    std::map<std::string, unsigned> index_of;
    for (unsigned i = 0; i < n; ++i) {
        index_of[agent::gid_text(nodes[i]->nic->gid())] = i;
    }
    for (unsigned i = 0; i < n; ++i) {
        const auto s = nodes[i]->engine->status_json();
        std::set<std::string> seen;
        for (const auto &p : s.at("peers")) {
            if (p.at("loopback").get<bool>()) {
                continue;
            }
            const std::string gid = p.at("gid").get<std::string>();
            if (!seen.insert(gid).second) {
                ++r.doubled;
            }
            if (p.at("state") == "connected") {
                connected_to[i].insert(gid);
            }
        }
        r.sent += at(s, "handshake", "sent");
        r.received += at(s, "handshake", "received");
        r.lost += at(s, "handshake", "dropped");
        r.busy += at(s, "handshake", "half_open_refused");
    }
    for (unsigned i = 0; i < n; ++i) {
        for (unsigned j = i + 1; j < n; ++j) {
            const bool ij = connected_to[i].count(
                    agent::gid_text(nodes[j]->nic->gid()));
            const bool ji = connected_to[j].count(
                    agent::gid_text(nodes[i]->nic->gid()));
            r.bad_pairs += !(ij && ji);
        }
    }

    /* idle: every pair connected, nothing to send */
    uint64_t sent0 = 0;
    for (auto &nd : nodes) {
        sent0 += at(nd->engine->status_json(), "handshake", "sent");
    }
    const uint64_t ops0 = fabric_ops(nodes);
    uint64_t passes     = 0;
    const auto t0       = clock_type::now();
    const auto until    = t0 + std::chrono::duration_cast<clock_type::duration>(
                                    std::chrono::duration<double>(o.idle));
    while (clock_type::now() < until) {
        const auto now = clock_type::now();
        for (auto &nd : nodes) {
            nd->engine->progress(now);
        }
        ++passes;
    }
    const double spent =
            std::chrono::duration<double>(clock_type::now() - t0).count();
    uint64_t sent1 = 0;
    for (auto &nd : nodes) {
        sent1 += at(nd->engine->status_json(), "handshake", "sent");
    }
    r.pass_us         = spent * 1e6 / (double(passes) * n);
    r.datagrams_per_s = double(sent1 - sent0) / spent / n;
    r.controls_per_s  = double(fabric_ops(nodes) - ops0) / spent / n;
    return r;
}

struct star_row {
    unsigned nodes;
    double storm_s;
    uint64_t rounds;
    /* the CPU time the storm took (this whole process, the checks
     * between rounds too), and the hub's passes' share of it */
    double cpu_s, hub_cpu_s;
    uint64_t sent, lost, busy; /* all agents' */
    uint64_t bad_pairs, doubled;
    double per_peer; /* bytes */
    std::array<std::optional<uint64_t>, num_refusals> hub; /* refusals[] */
    uint64_t spokes_refused; /* refusals[] but passes_cut, summed */
    /* the bad pairs: "the hub's peer's state/the spoke's" -> how many,
     * and a last error of each side's peers */
    std::map<std::string, unsigned> bad_states;
    std::string hub_error, spoke_error;
};

/* The storm on one agent (--star, see the top): node 0 is the hub. */
star_row star(unsigned n, const options &o, const std::string &dir)
{
    star_row r{};
    r.nodes = n;
    cluster cl(n, o, dir);
    auto &nodes          = cl.nodes;
    const uint64_t heap0 = heap_in_use();
    std::vector<std::string> gid(n);
    for (unsigned i = 0; i < n; ++i) {
        gid[i] = agent::gid_text(nodes[i]->nic->gid());
    }
    auto first = [&](unsigned i) -> const agent::attached_client & {
        return *nodes[i]->server->client(nodes[i]->clients[0]->client_index());
    };
    /* agent i's peers (not its own node): GID -> state and last error;
     * a GID seen twice counts in *doubled */
    struct seen {
        std::string state, error;
    };
    auto peers_of = [&](unsigned i, uint64_t *doubled) {
        const auto s = nodes[i]->engine->status_json();
        std::map<std::string, seen> to;
        for (const auto &p : s.at("peers")) {
            if (p.at("loopback").get<bool>()) {
                continue;
            }
            const bool again =
                    !to.emplace(p.at("gid").get<std::string>(),
                                seen{p.at("state").get<std::string>(),
                                     p.at("last_error").get<std::string>()})
                             .second;
            if (again && doubled != nullptr) {
                ++*doubled;
            }
        }
        return to;
    };
    auto state_of = [](const std::map<std::string, seen> &peers,
                       const std::string &g) {
        const auto it = peers.find(g);
        return it == peers.end() ? seen{"none", ""} : it->second;
    };
    /* Where the storm is: every pair connected both ways (done); every
     * pair connected both ways or failed at both ends, which nothing
     * starts again but a new request for the peer (settled); else
     * running. Spokes seen connected both ways are not looked at again
     * (the verdict below looks at every one). */
    enum class storm {
        running,
        done,
        settled
    };
    std::vector<unsigned> waiting; /* spokes not seen connected yet */
    for (unsigned i = 1; i < n; ++i) {
        waiting.push_back(i);
    }
    auto where = [&] {
        const auto at_hub = peers_of(0, nullptr);
        bool settled      = true;
        std::erase_if(waiting, [&](unsigned i) {
            const std::string h = state_of(at_hub, gid[i]).state;
            if (h != "connected" && h != "failed") {
                settled = false;
                return false;
            }
            const std::string sp = state_of(peers_of(i, nullptr), gid[0]).state;
            settled &= sp == h;
            return h == "connected" && sp == "connected";
        });
        return waiting.empty() ? storm::done :
               settled         ? storm::settled :
                                 storm::running;
    };

    const auto started = clock_type::now();
    for (unsigned i = 1; i < n; ++i) {
        auto p = nodes[i]->engine->resolve_peer(first(i),
                                                nodes[0]->engine->address());
        if (!p) {
            die("spoke " + std::to_string(i) + ": " + p.error());
        }
    }
    for (unsigned i = 1; i < n; ++i) {
        auto p = nodes[0]->engine->resolve_peer(first(0),
                                                nodes[i]->engine->address());
        if (!p) {
            die("the hub, for spoke " + std::to_string(i) + ": " + p.error());
        }
    }
    const auto limit    = started + std::chrono::seconds(o.limit);
    const double cpu0   = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
    const auto hub_pass = [&](clock_type::time_point now) {
        const double t0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
        nodes[0]->pump(now);
        r.hub_cpu_s += cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - t0;
    };
    /* A look takes the hub's status (milliseconds at 1000 peers), while
     * no agent passes: it is taken when every spoke's nic has its QPs
     * connected to the hub's (which a spoke does once the hub answered
     * it: cheap to see), and else in at most a tenth of the time (for a
     * storm that settles with pairs failed). */
    const auto hub_gid = nodes[0]->nic->gid();
    auto next_look     = started;
    auto nics_ready    = [&] {
        for (unsigned i = 1; i < n; ++i) {
            if (nodes[i]->nic->qps_to(hub_gid).size() < o.qps) {
                return false;
            }
        }
        return true;
    };
    while (clock_type::now() < limit) {
        const auto now = clock_type::now();
        hub_pass(now);
        for (unsigned i = 1; i < n; ++i) {
            nodes[i]->pump(now);
        }
        if (++r.rounds % 8 != 0 ||
            (clock_type::now() < next_look && !nics_ready())) {
            continue;
        }
        const auto looked = clock_type::now();
        if (where() != storm::running) {
            break;
        }
        next_look = clock_type::now() + 9 * (clock_type::now() - looked);
    }
    r.storm_s =
            std::chrono::duration<double>(clock_type::now() - started).count();
    r.cpu_s    = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    r.per_peer = static_cast<double>(heap_in_use() - heap0) / (2.0 * (n - 1));

    /* the verdict: every spoke and the hub connected both ways, no
     * address twice */
    const auto at_hub = peers_of(0, &r.doubled);
    for (unsigned i = 1; i < n; ++i) {
        const seen h  = state_of(at_hub, gid[i]);
        const seen sp = state_of(peers_of(i, &r.doubled), gid[0]);
        if (h.state == "connected" && sp.state == "connected") {
            continue;
        }
        ++r.bad_pairs;
        ++r.bad_states[h.state + "/" + sp.state];
        if (r.hub_error.empty()) {
            r.hub_error = h.error;
        }
        if (r.spoke_error.empty()) {
            r.spoke_error = sp.error;
        }
    }
    for (unsigned i = 0; i < n; ++i) {
        const auto s = nodes[i]->engine->status_json();
        r.sent += at(s, "handshake", "sent");
        r.lost += at(s, "handshake", "dropped");
        r.busy += at(s, "handshake", "half_open_refused");
        for (size_t k = 0; k < num_refusals; ++k) {
            const auto v = counter(s, refusals[k].first, refusals[k].second);
            if (i == 0) {
                r.hub[k] = v;
            } else if (v &&
                       std::strcmp(refusals[k].second, "passes_cut") != 0) {
                r.spokes_refused += *v;
            }
        }
    }
    return r;
}

void print_star(const star_row &r)
{
    char storm[48], dg[32], lb[48], bad[32], mem[32];
    std::snprintf(storm, sizeof(storm), "%.2f, %llu", r.storm_s,
                  (unsigned long long)r.rounds);
    char cpu[48];
    std::snprintf(cpu, sizeof(cpu), "%.2f, %.0f ms", r.cpu_s,
                  r.hub_cpu_s * 1e3);
    std::snprintf(dg, sizeof(dg), "%.2f", double(r.sent) / (r.nodes - 1));
    std::snprintf(lb, sizeof(lb), "%llu, %llu", (unsigned long long)r.lost,
                  (unsigned long long)r.busy);
    std::snprintf(bad, sizeof(bad), "%llu+%llu",
                  (unsigned long long)r.bad_pairs,
                  (unsigned long long)r.doubled);
    std::snprintf(mem, sizeof(mem), "%.1f K", r.per_peer / 1024);
    std::printf("  %-6u %-16s %-18s %-18s %-12s %-10s %-9s\n", r.nodes, storm,
                cpu, dg, lb, bad, mem);
    std::string hub;
    for (size_t k = 0; k < num_refusals; ++k) {
        hub += std::string(k == 0 ? "" : " ") + refusals[k].second + "=" +
               (r.hub[k] ? std::to_string(*r.hub[k]) : "-");
    }
    std::printf("         hub refused: %s\n", hub.c_str());
    std::printf("         spokes refused, summed: %llu\n",
                (unsigned long long)r.spokes_refused);
    if (r.bad_pairs > 0) {
        std::string states;
        for (const auto &[k, v] : r.bad_states) {
            states += " " + k + "=" + std::to_string(v);
        }
        std::printf("         bad pairs, the hub's peer/the spoke's:%s; "
                    "last errors: the hub's '%s', a spoke's '%s'\n",
                    states.c_str(), r.hub_error.c_str(), r.spoke_error.c_str());
    }
    std::fflush(stdout);
}

} // namespace

int main(int argc, char **argv)
{
    const options o = parse(argc, argv);
    /* every client holds a few descriptors here and at its agent */
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &lim);
    }
    char tmpl[] = "/tmp/rvt-scale.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
        die(std::string("mkdtemp: ") + std::strerror(errno));
    }
    const std::string dir = tmpl;
    if (o.star) {
        std::printf("rvt_scale_sim: N agents on one loopback fabric (the real "
                    "engine and attach server), %u clients each, K = %u; "
                    "every agent's first client and agent 0's at once "
                    "(--star)\n",
                    o.clients, o.qps);
        std::printf("  %-6s %-16s %-18s %-18s %-12s %-10s %-9s\n", "nodes",
                    "storm s, rounds", "CPU s, the hub's", "datagrams per pair",
                    "lost, busy", "bad pairs", "per peer");
        bool bad = false;
        for (unsigned n : o.nodes) {
            const star_row r = star(n, o, dir);
            print_star(r);
            bad |= r.bad_pairs != 0 || r.doubled != 0;
        }
        std::filesystem::remove_all(dir);
        if (bad) {
            std::printf("FAIL: spokes and the hub not connected both ways, "
                        "or a peer held twice\n");
            return 1;
        }
        return 0;
    }
    std::printf("rvt_scale_sim: N agents on one loopback fabric (the real "
                "engine and attach server), %u clients each, K = %u; an "
                "all-to-all connection storm, then %.1f s idle\n",
                o.clients, o.qps, o.idle);
    std::printf("  %-6s %-16s %-30s %-10s %-26s %-22s\n", "nodes",
                "storm s, rounds", "datagrams sent/recv/lost/busy", "bad pairs",
                "memory per node/client/peer", "idle: pass us, dg/s, ops/s");
    bool bad = false;
    for (unsigned n : o.nodes) {
        const row r = simulate(n, o, dir);
        char mem[64], dg[64], idle[64];
        std::snprintf(dg, sizeof(dg), "%llu/%llu/%llu/%llu",
                      (unsigned long long)r.sent,
                      (unsigned long long)r.received,
                      (unsigned long long)r.lost, (unsigned long long)r.busy);
        std::snprintf(mem, sizeof(mem), "%.0f K / %.0f K / %.1f K",
                      r.per_node / 1024, r.per_client / 1024,
                      r.per_peer / 1024);
        std::snprintf(idle, sizeof(idle), "%.2f, %.2f, %.2f", r.pass_us,
                      r.datagrams_per_s, r.controls_per_s);
        char storm[48];
        std::snprintf(storm, sizeof(storm), "%.2f, %llu", r.storm_s,
                      (unsigned long long)r.rounds);
        std::printf("  %-6u %-16s %-30s %-10s %-26s %-22s\n", n, storm, dg,
                    (std::to_string(r.bad_pairs) + "+" +
                     std::to_string(r.doubled))
                            .c_str(),
                    mem, idle);
        std::fflush(stdout);
        bad |= r.bad_pairs != 0 || r.doubled != 0;
    }
    std::filesystem::remove_all(dir);
    if (bad) {
        std::printf("FAIL: pairs lost, half-open or doubled\n");
        return 1;
    }
    return 0;
}
