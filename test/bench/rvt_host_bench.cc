/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvt_host_bench: what the agent's software path costs on real cores.
 *
 * One agent process (the real engine, attach server, memfd rings and
 * doorbells; the in-memory loopback nic at the device end, moving no
 * payload: a NIC's DMA costs the agent no CPU) pinned to one core, and
 * client processes (the real client library: attach, session, rings)
 * pinned to the other. Nothing is simulated between them: a client's
 * request crosses its work ring, the agent polls, checks and posts it to
 * the nic, routes the completion and the message back through the
 * client's rings, as rvtd does between a process and its device.
 *
 *   1. Latency: one client sends 8-byte active messages to itself, one at
 *      a time. From the traces of both processes (common/trace.h), for
 *      every message: client -> agent (submit to pop), the agent's work
 *      (pop to post, receive to deliver), agent -> client (deliver to
 *      read, complete to reap), and the round trip (submit to read).
 *      min / median / p99 in ns.
 *   2. Throughput: 1, 2, 4 and 8 clients each keep their rings full of
 *      8-byte RDMA WRITEs to the node's own peer for a while: posts per
 *      second through the one agent core, all clients together.
 *   3. Attached: the same with N clients attached (--attached, default
 *      1,8,64,128,256,512), all but the active ones idle (attached, with
 *      a peer, blocked in read()): the agent's time per loop pass with
 *      nothing to do, the hop medians and round trip of one latency
 *      client, and the posts per second of min(N, 8) streaming clients;
 *      each beside the smallest N's figure as a ratio; with --csv=FILE
 *      also as CSV rows in FILE (test/testbed/plot.py draws them).
 *   4. Wake-up: the latency client of 1 with a pause after each message
 *      (--wake-gap-us), so that each finds rvtd's loop asleep
 *      (agent/serve/cpu_policy.h; the fair class or SCHED_FIFO), beside the
 *      polling agent; then with a rank polling on the agent's core, as
 *      on a full node, asleep and back to back: client -> agent (submit
 *      to pop, a sleeping agent's wake-up in it), pop to post and the
 *      round trip.
 *
 * The 8 bytes travel inline (in the work ring's data slot, as UCT's short
 * operations send them), or with --sge from the client's registered
 * memory (as its bcopy and zcopy operations do, and short ones did before
 * inline requests).
 *
 * Figures are printed, never judged (no timed test). Usage:
 *   rvt_host_bench [--messages=N] [--seconds=S] [--agent-cpu=C]
 *                  [--client-cpu=C] [--sge] [--attached=N,N,...|none]
 *                  [--wake-messages=N] [--wake-gap-us=U] [--csv=FILE]
 */
#include "test/loopback/loopback_agent.h"
#include "uct/ib/rvt/agent/serve/cpu_policy.h"
#include "uct/ib/rvt/agent/serve/serve_loop.h"
#include "uct/ib/rvt/client/attach.h"
#include "uct/ib/rvt/client/session.h"
#include "uct/ib/rvt/common/fd_passing.h"
#include "uct/ib/rvt/common/trace.h"

#include <infiniband/verbs.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using namespace rvt;
using clock_type = std::chrono::steady_clock;

struct options {
    unsigned messages = 20000;
    double seconds    = 2.0;
    int agent_cpu     = 0;
    int client_cpu    = 1;
    bool sge          = false; /* payloads from memory, not inline */
    std::vector<unsigned> attached{1, 8, 64, 128, 256, 512}; /* section 3 */
    unsigned wake_messages = 1000; /* section 4, 0: none */
    unsigned wake_gap_us   = 3000; /* section 4: the pause between them */
    FILE *csv = nullptr; /* section 3's rows as CSV, opened at parse */
};

[[noreturn]] void die(const std::string &why)
{
    std::fprintf(stderr, "rvt_host_bench: %s\n", why.c_str());
    std::exit(1);
}

options parse(int argc, char **argv)
{
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value    = [&](const char *name) -> const char    *{
            const std::string p = std::string("--") + name + "=";
            return a.rfind(p, 0) == 0 ? argv[i] + p.size() : nullptr;
        };
        if (const char *v1 = value("messages")) {
            o.messages = static_cast<unsigned>(std::strtoul(v1, nullptr, 10));
        } else if (const char *v2 = value("seconds")) {
            o.seconds = std::strtod(v2, nullptr);
        } else if (const char *v3 = value("agent-cpu")) {
            o.agent_cpu = std::atoi(v3);
        } else if (const char *v4 = value("client-cpu")) {
            o.client_cpu = std::atoi(v4);
        } else if (a == "--sge") {
            o.sge = true;
        } else if (const char *v6 = value("wake-messages")) {
            o.wake_messages = static_cast<unsigned>(
                    std::strtoul(v6, nullptr, 10));
        } else if (const char *v7 = value("wake-gap-us")) {
            o.wake_gap_us = static_cast<unsigned>(
                    std::strtoul(v7, nullptr, 10));
        } else if (const char *v8 = value("csv")) {
            if (o.csv != nullptr) {
                std::fclose(o.csv); /* the last --csv counts */
            }
            o.csv = std::fopen(v8, "w");
            if (o.csv == nullptr) {
                die("--csv=" + std::string(v8) +
                    ": cannot write it: " + std::strerror(errno));
            }
        } else if (const char *v5 = value("attached")) {
            o.attached.clear();
            for (const char *q = v5; std::strcmp(v5, "none") != 0 && *q;) {
                char *end             = nullptr;
                const unsigned long n = std::strtoul(q, &end, 10);
                if (end == q || n == 0 || n > imm::max_clients ||
                    (*end != ',' && *end != '\0')) {
                    die("--attached=" + std::string(v5) +
                        ": expected 'none' or counts from 1 to " +
                        std::to_string(imm::max_clients) + ", comma-separated");
                }
                o.attached.push_back(static_cast<unsigned>(n));
                q = *end == ',' ? end + 1 : end;
            }
        } else {
            die("unknown argument '" + a +
                "' (--messages=N --seconds=S --agent-cpu=C --client-cpu=C "
                "--sge --attached=N,N,...|none --wake-messages=N "
                "--wake-gap-us=U --csv=FILE)");
        }
    }
    if (o.messages == 0 || o.seconds <= 0) {
        die("--messages and --seconds must be positive");
    }
    return o;
}

void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        std::fprintf(stderr, "rvt_host_bench: cannot pin to CPU %d: %s\n", cpu,
                     std::strerror(errno));
    }
}

constexpr const char *job_key = "bench.host";

volatile sig_atomic_t g_stop = 0;

/* A client's memory and its MR. The agent checks every MR a client
 * announces against the device's MR table (mr_registry.h,
 * "Announcements"), the kernel's, which every process shares; the
 * loopback nic's lives in the agent's process. So the parent maps every
 * client's buffer shared before it forks, the agent registers each slot
 * in its nic before it answers an attach and writes the keys beside it,
 * and a client announces its slot's MR as registration.cc would. One slot
 * per client of the run: a slot's handle is still held by its client's
 * agent while the client's MR waits out the dead-client grace. */
struct client_slot {
    uint32_t handle, lkey, rkey;
    uint64_t buffer[8];
};
constexpr int max_slots = 128;
client_slot *g_slots    = nullptr; /* max_slots of them, shared */

/* What the parent tells a running agent and reads from it (shared). */
struct agent_shared {
    std::atomic<uint64_t> passes{0}; /* loop passes so far */
    std::atomic<bool> untrace{false}; /* stop recording (the trace is kept) */
};
agent_shared *g_agent = nullptr;

/* How the agent runs (section 4): the bench's own loop, always polling,
 * or rvtd's (agent/serve/serve_loop.h), which spins for a while after its last
 * work, then sleeps until a doorbell, a completion or its socket wakes it
 * (agent/serve/cpu_policy.h), in the fair class or SCHED_FIFO. */
struct agent_mode {
    bool sleeps = false; /* rvtd's loop */
    agent::cpu_policy::settings cpu;
    int fifo = 0; /* SCHED_FIFO priority; 0: the fair class */
};

/* The agent: as rvtd, over the loopback nic, always spinning unless
 * `mode` says otherwise. Writes its trace (if any) to trace_path when
 * told to stop. */
[[noreturn]] void run_agent(const std::string &socket_path,
                            const std::string &trace_path, size_t events,
                            const agent_mode &mode = {})
{
    if (mode.fifo > 0) {
        sched_param sp{};
        sp.sched_priority = mode.fifo;
        if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
            die(std::string("SCHED_FIFO for the agent: ") +
                std::strerror(errno) + " (needs CAP_SYS_NICE)");
        }
    }
    struct sigaction sa {};
    sa.sa_handler = [](int) { g_stop = 1; };
    sigaction(SIGTERM, &sa, nullptr);
    auto log = [](std::string_view line) {
        std::fprintf(stderr, "agent: %.*s\n", static_cast<int>(line.size()),
                     line.data());
    };
    std::optional<trace> tr; /* outlives the engine */
    agent::testing::loopback_fabric fabric;
    agent::testing::loopback_options nopt;
    nopt.receive_buffers = 1024;
    nopt.receive_size    = shm_capacities{}.slot_size;
    nopt.send_budget     = 8192;
    nopt.memory          = agent::testing::memory_mode::none;
    /* one node: no peer ever asks, so no credential is ever checked */
    auto made = agent::testing::make_loopback_agent(
            fabric, {.socket      = socket_path,
                     .job_key     = job_key,
                     .agent_id    = 42,
                     .nic         = nopt,
                     .log         = log,
                     .max_clients = imm::max_clients});
    if (!made) {
        die(made.error());
    }
    agent::testing::loopback_agent &node = made.value();
    /* before the loop answers a client's attach, so before any announces
     * its slot */
    for (int i = 0; i < max_slots; ++i) {
        client_slot &slot = g_slots[i];
        const auto mr     = node.nic->register_memory(slot.buffer,
                                                      sizeof(slot.buffer),
                                                      IBV_ACCESS_LOCAL_WRITE);
        slot.handle       = mr.handle;
        slot.lkey         = mr.lkey;
        slot.rkey         = mr.rkey;
    }
    agent::engine &e          = *node.engine;
    agent::attach_server &srv = *node.server;
    if (events > 0) {
        tr.emplace(events, "agent");
        e.set_trace(&*tr);
    }
    uint64_t passes      = 0;
    bool traced          = tr.has_value();
    const auto each_pass = [&] {
        g_agent->passes.store(++passes, std::memory_order_relaxed);
        if (traced && g_agent->untrace.load(std::memory_order_relaxed)) {
            e.set_trace(nullptr);
            traced = false;
        }
    };
    if (mode.sleeps) {
        agent::serve_loop loop(e, srv, mode.cpu);
        for (;;) {
            const agent::serve_loop::turn t = loop.next();
            for (const auto &r : t.status_requests) {
                loop.answer(r.ticket, e.status(r.human));
            }
            each_pass();
            if (g_stop) {
                break;
            }
        }
    }
    agent::serve_pacer pacer; /* as rvtd's busy loop serves its socket */
    while (!g_stop) {
        const auto now = clock_type::now();
        e.progress(now);
        if (pacer.due(now)) {
            node.serve_clients();
        }
        each_pass();
    }
    if (tr) {
        std::FILE *f = std::fopen(trace_path.c_str(), "w");
        if (f == nullptr) {
            die("cannot write " + trace_path);
        }
        tr->write(f);
        std::fclose(f);
    }
    std::_Exit(0);
}

/* A session of the agent at socket_path (tried for up to `tries` x 10 ms
 * while it starts or takes others first), and its node's own peer. */
std::pair<std::unique_ptr<client::session>, uint32_t>
open_session(const std::string &socket_path, int tries)
{
    auto at = client::attach(socket_path, job_key);
    for (int i = 0; !at && i < tries; ++i) {
        usleep(10000);
        at = client::attach(socket_path, job_key);
    }
    if (!at) {
        die("attach: " + at.error());
    }
    auto s = client::session::open(std::move(at).value());
    if (!s) {
        die(s.error());
    }
    auto peer = s.value()->connect_peer(s.value()->agent_address());
    if (!peer) {
        die(peer.error());
    }
    return {std::move(s).value(), peer.value()};
}

struct client_side {
    std::unique_ptr<client::session> session;
    uint32_t peer       = 0;
    client_slot *memory = nullptr;
};

/* Attaches, finds the node's own peer and announces the MR of its slot
 * (the agent registered it); the loopback nic (memory none) neither
 * checks nor moves its bytes. */
client_side open_client(const std::string &socket_path, int slot)
{
    if (slot >= max_slots) {
        die("more clients than the " + std::to_string(max_slots) +
            " MR slots the agent registered");
    }
    client_side c;
    /* the agent may still start */
    std::tie(c.session, c.peer) = open_session(socket_path, 200);
    c.memory                    = &g_slots[slot];
    const uintptr_t addr        = reinterpret_cast<uintptr_t>(c.memory->buffer);
    auto intent = wire::make_mr_intent(addr, sizeof(c.memory->buffer));
    auto sent   = send_with_fds(c.session->attached().sock.get(),
                                std::as_bytes(std::span(&intent, 1)), {});
    if (!sent) {
        die(sent.error());
    }
    auto answer = c.session->announce_memory({c.memory->handle, c.memory->lkey,
                                              c.memory->rkey, c.memory->buffer,
                                              sizeof(c.memory->buffer)});
    if (!answer) {
        die(answer.error());
    }
    if (answer.value().status !=
        static_cast<uint32_t>(wire::announce_status::accepted)) {
        die(std::string("the agent refused the slot's MR: ") +
            answer.value().reason);
    }
    return c;
}

work_request request(const client_side &c, work_op op)
{
    work_request wr{};
    wr.op             = static_cast<uint8_t>(op);
    wr.flags          = work_signaled;
    wr.peer           = c.peer;
    wr.dst_client     = c.session->client_index();
    wr.dst_generation = c.session->attached().client_generation;
    wr.length         = 8;
    wr.local_addr     = reinterpret_cast<uintptr_t>(c.memory->buffer);
    wr.lkey           = c.memory->lkey;
    wr.rkey           = c.memory->rkey;
    wr.remote_addr    = wr.local_addr;
    return wr;
}

/* Posts wr: its 8 bytes inline, or (sge) from the client's memory. */
client::post_status post(client_side &c, const work_request &wr, bool sge)
{
    if (sge) {
        return c.session->post(wr);
    }
    return c.session->post_inline(wr, std::as_bytes(
                                              std::span(c.memory->buffer, 1)));
}

/* Latency client: one 8-byte AM to itself at a time, `gap_us` asleep
 * after each. */
[[noreturn]] void run_pingpong(const std::string &socket_path, int slot,
                               unsigned messages, bool sge, unsigned gap_us = 0)
{
    client_side c      = open_client(socket_path, slot);
    client::session &s = *c.session;
    work_request wr    = request(c, work_op::send_am);
    std::array<completion, 16> done;
    for (unsigned i = 0; i < messages + 100; ++i) {
        wr.wr_id = i;
        while (post(c, wr, sge) != client::post_status::posted) {
            (void)s.poll_completions(done);
        }
        client::inbound_view v;
        while (!s.peek_inbound(v)) {
            (void)s.poll_completions(done);
        }
        s.release_inbound();
        if (gap_us > 0) {
            usleep(gap_us);
        }
    }
    while (s.outstanding() > 0) {
        (void)s.poll_completions(done);
    }
    c.session.reset(); /* writes the client's trace */
    std::_Exit(0);
}

/* Throughput client: its rings full of 8-byte writes until `until`;
 * prints its completions to `out_fd`. */
[[noreturn]] void run_stream(const std::string &socket_path, int slot,
                             int out_fd, clock_type::time_point start,
                             clock_type::time_point until, bool sge)
{
    client_side c      = open_client(socket_path, slot);
    client::session &s = *c.session;
    work_request wr    = request(c, work_op::rdma_write);
    std::array<completion, 64> done;
    while (clock_type::now() < start) {
    }
    uint64_t completed = 0;
    uint64_t posted    = 0;
    while (clock_type::now() < until) {
        for (int k = 0; k < 32; ++k) {
            wr.wr_id = posted;
            if (post(c, wr, sge) != client::post_status::posted) {
                break;
            }
            ++posted;
        }
        completed += s.poll_completions(done);
    }
    const std::string line = std::to_string(completed) + "\n";
    (void)!write(out_fd, line.data(), line.size());
    while (s.outstanding() > 0) {
        (void)s.poll_completions(done);
    }
    std::_Exit(0);
}

/* An idle rank: attached, with its peer, blocked in read() until the
 * parent closes `release_fd`'s other end; says it is ready on ready_fd. */
[[noreturn]] void
run_idle(const std::string &socket_path, int ready_fd, int release_fd)
{
    /* the agent takes one at a time */
    auto session = open_session(socket_path, 3000).first;
    (void)!write(ready_fd, "r", 1);
    char b;
    while (read(release_fd, &b, 1) > 0) {
    }
    session.reset();
    std::_Exit(0);
}

pid_t spawn(int cpu, const std::function<void()> &body)
{
    const pid_t pid = fork();
    if (pid < 0) {
        die(std::string("fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
        pin(cpu);
        body();
        std::_Exit(0);
    }
    return pid;
}

void reap(pid_t pid, const char *what)
{
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        die(std::string(what) + " failed");
    }
}

struct event {
    uint64_t ns;
    std::string stage;
    uint64_t key;
};

std::vector<event> read_trace(const std::string &path)
{
    std::vector<event> out;
    std::ifstream in(path);
    uint64_t ns, key;
    unsigned client;
    std::string source, stage;
    while (in >> ns >> source >> stage >> client >> key) {
        out.push_back({ns, stage, key});
    }
    return out;
}

/* The n-th event of each stage belongs to the n-th message. */
std::map<std::string, std::vector<uint64_t>>
by_stage(const std::vector<event> &events)
{
    std::map<std::string, std::vector<uint64_t>> m;
    for (const event &e : events) {
        m[e.stage].push_back(e.ns);
    }
    return m;
}

/* to[i] - from[i] for every message past the first `skip`, sorted. */
std::vector<int64_t> hop_times(const std::vector<uint64_t> &from,
                               const std::vector<uint64_t> &to, size_t skip)
{
    std::vector<int64_t> d;
    for (size_t i = skip; i < std::min(from.size(), to.size()); ++i) {
        d.push_back(static_cast<int64_t>(to[i]) -
                    static_cast<int64_t>(from[i]));
    }
    std::sort(d.begin(), d.end());
    return d;
}

/* The median of to[i] - from[i] past the first `skip` messages, or -1. */
int64_t median_hop(const std::vector<uint64_t> &from,
                   const std::vector<uint64_t> &to, size_t skip)
{
    const std::vector<int64_t> d = hop_times(from, to, skip);
    if (d.empty()) {
        return -1;
    }
    return d[d.size() / 2];
}

void print_hop(const char *name, const std::vector<uint64_t> &from,
               const std::vector<uint64_t> &to, size_t skip)
{
    const std::vector<int64_t> d = hop_times(from, to, skip);
    if (d.empty()) {
        std::printf("  %-34s (no events)\n", name);
        return;
    }
    auto at = [&](double q) {
        return d[std::min(d.size() - 1, static_cast<size_t>(q * d.size()))];
    };
    std::printf("  %-34s %8lld %8lld %8lld\n", name,
                static_cast<long long>(d.front()),
                static_cast<long long>(at(0.5)),
                static_cast<long long>(at(0.99)));
}

/* n clients keep their rings full of 8-byte writes for o.seconds (each
 * its own slot from next_slot on): their completions, all together. */
uint64_t
stream(const std::string &socket_path, int n, int &next_slot, const options &o)
{
    int fds[2];
    if (pipe(fds) != 0) {
        die("pipe failed");
    }
    const auto start = clock_type::now() + std::chrono::milliseconds(500);
    const auto until = start +
                       std::chrono::duration_cast<clock_type::duration>(
                               std::chrono::duration<double>(o.seconds));
    std::vector<pid_t> kids;
    for (int k = 0; k < n; ++k) {
        const int slot = next_slot++;
        kids.push_back(spawn(o.client_cpu, [&] {
            close(fds[0]);
            run_stream(socket_path, slot, fds[1], start, until, o.sge);
        }));
    }
    close(fds[1]);
    for (pid_t k : kids) {
        reap(k, "a throughput client");
    }
    uint64_t total = 0;
    char buf[4096];
    std::string text;
    ssize_t got;
    while ((got = read(fds[0], buf, sizeof(buf))) > 0) {
        text.append(buf, static_cast<size_t>(got));
    }
    close(fds[0]);
    for (size_t pos = 0; pos < text.size();) {
        size_t end = text.find('\n', pos);
        total += std::strtoull(text.substr(pos, end - pos).c_str(), nullptr,
                               10);
        pos = end == std::string::npos ? text.size() : end + 1;
    }
    return total;
}

std::vector<uint64_t>
stage(const std::map<std::string, std::vector<uint64_t>> &m, const char *name)
{
    auto it = m.find(name);
    return it == m.end() ? std::vector<uint64_t>{} : it->second;
}

/* What one attached count measured (section 3). */
struct attached_row {
    unsigned attached;
    double pass_ns; /* the agent's loop, nothing to do */
    int64_t hops[4]; /* medians: submit->pop, pop->post,
                             deliver->read, complete->reap */
    int64_t round_trip; /* median submit -> read */
    double posts; /* per second, min(n, 8) streaming */
};

/* n clients attached to one agent: n - 1 idle and a latency client, then
 * n - min(n, 8) idle and min(n, 8) streaming. */
attached_row measure_attached(unsigned n, const std::string &dir,
                              int &next_slot, const options &o)
{
    const std::string socket_path  = dir + "/sweep.sock";
    const std::string agent_trace  = dir + "/sweep-agent.trace";
    const std::string client_trace = dir + "/sweep-client.trace";
    const size_t events            = (o.messages + 100) * 6;
    attached_row row{};
    row.attached = n;
    g_agent->passes.store(0);
    g_agent->untrace.store(false);
    const pid_t agent = spawn(o.agent_cpu, [&] {
        run_agent(socket_path, agent_trace, events);
    });

    /* two groups of idle clients, each released by closing its pipe:
     * `first` makes room for the streaming clients */
    const unsigned active = std::min(n, 8u);
    int ready[2], first[2], rest[2];
    if (pipe(ready) != 0 || pipe(first) != 0 || pipe(rest) != 0) {
        die("pipe failed");
    }
    std::vector<pid_t> first_pids;
    auto add_idle = [&](unsigned count, int release_fd) {
        std::vector<pid_t> pids;
        for (unsigned k = 0; k < count; ++k) {
            pids.push_back(spawn(o.client_cpu, [&] {
                close(first[1]);
                close(rest[1]);
                close(ready[0]);
                run_idle(socket_path, ready[1], release_fd);
            }));
        }
        for (unsigned k = 0; k < count; ++k) {
            char b;
            if (read(ready[0], &b, 1) != 1) {
                die("an idle client did not attach");
            }
        }
        return pids;
    };
    first_pids                         = add_idle(active - 1, first[0]);
    const std::vector<pid_t> rest_pids = add_idle(n - active, rest[0]);

    /* the latency client beside n - 1 idle ones */
    setenv("RVT_TRACE", (client_trace + ":" + std::to_string(events)).c_str(),
           1);
    const int slot     = next_slot++;
    const pid_t client = spawn(o.client_cpu, [&] {
        run_pingpong(socket_path, slot, o.messages, o.sge);
    });
    reap(client, "the latency client");
    unsetenv("RVT_TRACE");
    g_agent->untrace.store(true);

    /* the loop with nothing to do: n - 1 idle clients attached */
    usleep(200000);
    const auto t0     = clock_type::now();
    const uint64_t p0 = g_agent->passes.load();
    usleep(500000);
    const uint64_t p1  = g_agent->passes.load();
    const double spent = std::chrono::duration<double, std::nano>(
                                 clock_type::now() - t0)
                                 .count();
    row.pass_ns = p1 > p0 ? spent / static_cast<double>(p1 - p0) : -1;

    /* min(n, 8) streaming: the latency client's index and the first
     * group's make room, once their indices are out of quarantine */
    close(first[1]);
    for (pid_t p : first_pids) {
        reap(p, "an idle client");
    }
    usleep(static_cast<useconds_t>(
            (agent::default_index_quarantine.count() + 300) * 1000));
    row.posts = static_cast<double>(stream(socket_path,
                                           static_cast<int>(active), next_slot,
                                           o)) /
                o.seconds;
    close(rest[1]);
    for (pid_t p : rest_pids) {
        reap(p, "an idle client");
    }
    close(first[0]);
    close(rest[0]);
    close(ready[0]);
    close(ready[1]);
    kill(agent, SIGTERM);
    reap(agent, "the agent");

    const auto a = by_stage(read_trace(agent_trace));
    const auto c = by_stage(
            read_trace(client_trace + "." + std::to_string(client)));
    const size_t warm = 100;
    row.hops[0]       = median_hop(stage(c, "submit"), stage(a, "pop"), warm);
    row.hops[1]       = median_hop(stage(a, "pop"), stage(a, "post"), warm);
    row.hops[2]       = median_hop(stage(a, "deliver"), stage(c, "read"), warm);
    row.hops[3]    = median_hop(stage(a, "complete"), stage(c, "reap"), warm);
    row.round_trip = median_hop(stage(c, "submit"), stage(c, "read"), warm);
    return row;
}

/* One row of section 4: how the agent runs and what shares its core. */
struct wake_case {
    const char *name;
    agent_mode mode;
    bool rank_beside; /* a rank polls on the agent's core */
    bool gaps; /* o.wake_gap_us between messages (the agent asleep) */
};

struct wake_row {
    std::vector<int64_t> to_pop, round_trip; /* sorted, ns */
    int64_t pop_to_post; /* median, ns */
};

/* A rank with nothing but its own work: polls on `cpu` until killed. */
pid_t spawn_busy_rank(int cpu)
{
    return spawn(cpu, [] {
        for (uint64_t n = 0;; ++n) {
            asm volatile("" : : "r"(n)); /* the loop stays */
        }
    });
}

/* The traces of one latency run: the agent's (empty unless agent_traced)
 * and the client's, each by stage. */
struct latency_traces {
    std::map<std::string, std::vector<uint64_t>> agent, client;
};

/* One latency client of `messages` (gap_us asleep after each) through an
 * agent run as `mode`, with a rank polling on the agent's core if
 * rank_beside; the files in dir, named after `name`. */
latency_traces
traced_pingpong(const std::string &dir, const char *name, unsigned messages,
                bool agent_traced, const agent_mode &mode, bool rank_beside,
                unsigned gap_us, int &next_slot, const options &o)
{
    const std::string base         = dir + "/" + name;
    const std::string socket_path  = base + ".sock";
    const std::string agent_trace  = base + "-agent.trace";
    const std::string client_trace = base + "-client.trace";
    const size_t events            = (messages + 100) * 6;
    /* an attached-clients run before this one left its agent told to
     * stop tracing: this agent records from the start */
    g_agent->untrace.store(false);
    const pid_t agent = spawn(o.agent_cpu, [&] {
        run_agent(socket_path, agent_trace, agent_traced ? events : 0, mode);
    });
    const pid_t rank  = rank_beside ? spawn_busy_rank(o.agent_cpu) : -1;
    setenv("RVT_TRACE", (client_trace + ":" + std::to_string(events)).c_str(),
           1);
    const int slot     = next_slot++;
    const pid_t client = spawn(o.client_cpu, [&] {
        run_pingpong(socket_path, slot, messages, o.sge, gap_us);
    });
    reap(client, "the latency client");
    unsetenv("RVT_TRACE");
    if (rank > 0) {
        kill(rank, SIGKILL);
        (void)waitpid(rank, nullptr, 0);
    }
    kill(agent, SIGTERM);
    reap(agent, "the agent");
    latency_traces t;
    if (agent_traced) {
        t.agent = by_stage(read_trace(agent_trace));
    }
    t.client = by_stage(
            read_trace(client_trace + "." + std::to_string(client)));
    return t;
}

wake_row measure_wake(const wake_case &w, const std::string &dir,
                      int &next_slot, const options &o)
{
    const latency_traces t = traced_pingpong(dir, "wake", o.wake_messages, true,
                                             w.mode, w.rank_beside,
                                             w.gaps ? o.wake_gap_us : 0,
                                             next_slot, o);
    const auto &a = t.agent, &c = t.client;
    const size_t warm = 100;
    return {hop_times(stage(c, "submit"), stage(a, "pop"), warm),
            hop_times(stage(c, "submit"), stage(c, "read"), warm),
            median_hop(stage(a, "pop"), stage(a, "post"), warm)};
}

/* Section 4: a message that finds the agent asleep, beside one that finds
 * it polling; and with a rank on the agent's core, as on a full node. */
void print_wake(const std::string &dir, int &next_slot, const options &o)
{
    agent_mode normal;
    normal.sleeps     = true; /* rvtd's defaults: spin 2 ms, yielding */
    agent_mode fifo   = normal;
    fifo.cpu.realtime = true;
    fifo.cpu.spin     = std::chrono::microseconds(20);
    fifo.fifo         = 10;
    if (std::chrono::microseconds(o.wake_gap_us) <= normal.cpu.spin) {
        die("--wake-gap-us=" + std::to_string(o.wake_gap_us) +
            ": expected more than the agent's spin, 2000 us, so that it "
            "sleeps between messages");
    }
    const wake_case cases[] = {
            {"polling, core free", agent_mode{}, false, true},
            {"normal, asleep, core free", normal, false, true},
            {"normal, asleep, a rank on its core", normal, true, true},
            {"fifo:10 spin 20us, asleep, a rank", fifo, true, true},
            {"normal, back to back, a rank", normal, true, false},
            {"fifo:10 spin 20us, back to back, rank", fifo, true, false},
    };
    std::printf("\nwake-up: %u 8-byte active messages, one client to "
                "itself, %u us apart (the agent asleep when one comes) or "
                "back to back; rvtd's loop normal (spin 2000 us, "
                "yielding) or fifo:10 (spin 20 us); a rank polling on the "
                "agent's core or not (ns; (x) the ratio to the first "
                "row)\n",
                o.wake_messages, o.wake_gap_us);
    std::printf("  %-40s %-26s %10s %-25s\n", "", "submit -> pop (wake-up)", "",
                "round trip");
    std::printf("  %-40s %8s %8s %8s %10s %16s %8s\n", "agent", "min", "median",
                "p99", "pop->post", "median", "p99");
    int64_t base = -1;
    for (const wake_case &w : cases) {
        const wake_row r = measure_wake(w, dir, next_slot, o);
        if (r.to_pop.empty() || r.round_trip.empty()) {
            std::printf("  %-40s (no events)\n", w.name);
            continue;
        }
        auto at = [](const std::vector<int64_t> &d, double q) {
            return static_cast<long long>(
                    d[std::min(d.size() - 1,
                               static_cast<size_t>(q * d.size()))]);
        };
        const int64_t rt = at(r.round_trip, 0.5);
        if (base < 0) {
            base = rt;
        }
        char cell[32];
        std::snprintf(cell, sizeof(cell), "%lld (%.2f)",
                      static_cast<long long>(rt),
                      base > 0 ? static_cast<double>(rt) / base : 0.0);
        std::printf("  %-40s %8lld %8lld %8lld %10lld %16s %8lld\n", w.name,
                    at(r.to_pop, 0), at(r.to_pop, 0.5), at(r.to_pop, 0.99),
                    static_cast<long long>(r.pop_to_post), cell,
                    at(r.round_trip, 0.99));
        std::fflush(stdout);
    }
}

} // namespace

int main(int argc, char **argv)
{
    const options o = parse(argc, argv);
    char dir[]      = "/tmp/rvt-bench.XXXXXX";
    if (mkdtemp(dir) == nullptr) {
        die(std::string("mkdtemp: ") + std::strerror(errno));
    }
    const std::string socket_path = std::string(dir) + "/agent.sock";
    std::printf("rvt_host_bench: agent on CPU %d, clients on CPU %d; the "
                "loopback nic at the device end; payloads %s\n",
                o.agent_cpu, o.client_cpu,
                o.sge ? "from registered memory (--sge)" :
                        "inline (the work ring's data slot)");

    void *shared = mmap(nullptr,
                        sizeof(client_slot) * max_slots + sizeof(agent_shared),
                        PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                        0);
    if (shared == MAP_FAILED) {
        die(std::string("mmap: ") + std::strerror(errno));
    }
    g_slots       = static_cast<client_slot *>(shared);
    g_agent       = new (g_slots + max_slots) agent_shared;
    int next_slot = 0; /* one per client */

    /* 1. latency */
    const latency_traces traced = traced_pingpong(dir, "latency", o.messages,
                                                  true, {}, false, 0, next_slot,
                                                  o);
    const auto &a = traced.agent, &c = traced.client;
    auto get = [](const auto &m, const char *k) {
        auto it = m.find(k);
        return it == m.end() ? std::vector<uint64_t>{} : it->second;
    };
    std::printf("\nlatency: %u 8-byte active messages, one client to itself "
                "through the agent (ns)\n",
                o.messages);
    std::printf("  %-34s %8s %8s %8s\n", "hop", "min", "median", "p99");
    const size_t warm = 100;
    print_hop("client -> agent (submit -> pop)", get(c, "submit"),
              get(a, "pop"), warm);
    print_hop("agent: check, post (pop -> post)", get(a, "pop"), get(a, "post"),
              warm);
    print_hop("agent: route AM (receive -> deliver)", get(a, "receive"),
              get(a, "deliver"), warm);
    print_hop("agent -> client (deliver -> read)", get(a, "deliver"),
              get(c, "read"), warm);
    print_hop("agent: completion (sent -> complete)", get(a, "sent"),
              get(a, "complete"), warm);
    print_hop("agent -> client (complete -> reap)", get(a, "complete"),
              get(c, "reap"), warm);
    print_hop("round trip (submit -> read)", get(c, "submit"), get(c, "read"),
              warm);

    /* the agent's own stamps cost a clock read each (tens of ns on a VM)
     * and sit between a staged entry and its publication: the round trip
     * a user gets is measured again with only the client's two stamps */
    const auto u = traced_pingpong(dir, "untraced", o.messages, false, {},
                                   false, 0, next_slot, o)
                           .client;
    print_hop("round trip, agent not traced", get(u, "submit"), get(u, "read"),
              warm);

    /* 2. throughput */
    std::printf("\nthroughput: 8-byte RDMA WRITEs, every client's rings kept "
                "full, %.1f s each\n",
                o.seconds);
    std::printf("  %-8s %14s\n", "clients", "posts/s");
    const pid_t agent = spawn(o.agent_cpu,
                              [&] { run_agent(socket_path, "", 0); });
    for (int n : {1, 2, 4, 8}) {
        const uint64_t total = stream(socket_path, n, next_slot, o);
        std::printf("  %-8d %14.0f\n", n,
                    static_cast<double>(total) / o.seconds);
    }
    kill(agent, SIGTERM);
    reap(agent, "the agent");

    /* 3. attached */
    if (!o.attached.empty()) {
        std::printf("\nattached: N clients on one agent, N - 1 idle beside the "
                    "latency client, N - min(N, 8) idle beside min(N, 8) "
                    "streaming; (x) the ratio to N = %u\n",
                    o.attached.front());
        std::printf("  %-8s %-14s %-14s %-14s %-14s %-14s %-14s %-16s\n",
                    "attached", "pass ns", "client->agent", "agent post",
                    "agent->client", "completion", "round trip", "posts/s");
        std::optional<attached_row> base;
        FILE *csv = o.csv;
        if (csv != nullptr) {
            std::fprintf(csv, "attached,pass_ns,client_agent_ns,"
                              "agent_post_ns,agent_client_ns,completion_ns,"
                              "round_trip_ns,posts_per_s\n");
            std::fflush(csv); /* before the clients fork */
        }
        for (unsigned n : o.attached) {
            const attached_row r = measure_attached(n, dir, next_slot, o);
            if (csv != nullptr) {
                std::fprintf(csv, "%u,%.1f,%lld,%lld,%lld,%lld,%lld,%.0f\n", n,
                             r.pass_ns, static_cast<long long>(r.hops[0]),
                             static_cast<long long>(r.hops[1]),
                             static_cast<long long>(r.hops[2]),
                             static_cast<long long>(r.hops[3]),
                             static_cast<long long>(r.round_trip), r.posts);
                std::fflush(csv);
            }
            if (!base) {
                base = r;
            }
            auto cell = [](double v, double b) {
                char text[32];
                std::snprintf(text, sizeof(text), "%.0f (%.2f)", v,
                              b > 0 ? v / b : 0.0);
                return std::string(text);
            };
            std::printf("  %-8u %-14s", n,
                        cell(r.pass_ns, base->pass_ns).c_str());
            for (int h = 0; h < 4; ++h) {
                std::printf(" %-14s", cell(static_cast<double>(r.hops[h]),
                                           static_cast<double>(base->hops[h]))
                                              .c_str());
            }
            std::printf(" %-14s %-16s\n",
                        cell(static_cast<double>(r.round_trip),
                             static_cast<double>(base->round_trip))
                                .c_str(),
                        cell(r.posts, base->posts).c_str());
            std::fflush(stdout);
        }
        if (csv != nullptr) {
            std::fclose(csv);
        }
    }
    /* 4. wake-up */
    if (o.wake_messages > 0) {
        print_wake(dir, next_slot, o);
    }
    std::string cleanup = std::string("rm -rf ") + dir;
    (void)!std::system(cleanup.c_str());
    return 0;
}
