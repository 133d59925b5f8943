/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A bounded share for every client, on real verbs: each bound of a
 * client's share holds under a flood from a real rvtd's client, and the
 * agent keeps serving its other clients, its descriptors and memory
 * bounded (docs/reliability.md, "Trust model: who may become a peer").
 * The rules themselves are tested on the loopback nic
 * (test_engine_hostile.cc, client_share_test, accept_gate_test); here the
 * agent is the daemon a site runs.
 *
 * Environment: RXE_DEV (device); skips without one.
 */
#include "uct/ib/rvt/agent/device/device.h"
#include "uct/ib/rvt/agent/device/ud_channel.h"
#include "uct/ib/rvt/agent/engine/client_share.h"
#include "uct/ib/rvt/client/attach.h"
#include "uct/ib/rvt/client/session.h"
#include "uct/ib/rvt/client/status.h"
#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/ring.h"
#include "uct/ib/rvt/common/unique_fd.h"
#include "uct/ib/rvt/common/uverbs_cmd.h"
#include "uct/ib/rvt/common/work.h"

#include "rvtd_fixture.h"

#include <nlohmann/json.hpp>

#include <infiniband/verbs.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>

using namespace rvt;
using namespace std::chrono_literals;
using test::eventually;
using test::slurp;

namespace {

constexpr int remote_rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                          IBV_ACCESS_REMOTE_WRITE;

/* What the agent holds of the node: its descriptors and resident memory. */
struct footprint {
    size_t fds;
    size_t rss_kib;
};

footprint footprint_of(pid_t pid)
{
    const std::string proc = "/proc/" + std::to_string(pid);
    footprint f{0, 0};
    for ([[maybe_unused]] const auto &e :
         std::filesystem::directory_iterator(proc + "/fd")) {
        ++f.fds;
    }
    std::istringstream status(slurp(proc + "/status"));
    for (std::string line; std::getline(status, line);) {
        if (line.rfind("VmRSS:", 0) == 0) {
            f.rss_kib = std::stoul(line.substr(6));
        }
    }
    return f;
}

/* CPU time the process has used, in clock ticks (utime + stime). */
uint64_t cpu_ticks(pid_t pid)
{
    const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string skip;
    for (int i = 3; i < 14; ++i) { /* state .. cmajflt */
        fields >> skip;
    }
    uint64_t user = 0, sys = 0;
    fields >> user >> sys;
    return user + sys;
}

/* An active message of `length` bytes at `addr` (lkey `lkey`), from
 * session `s` to itself through peer `to`. */
work_request am_to_self(const client::session &s, uint64_t wr_id, uint32_t to,
                        const void *addr = nullptr, uint32_t lkey = 0,
                        uint32_t length = 0)
{
    work_request wr{};
    wr.wr_id          = wr_id;
    wr.op             = static_cast<uint8_t>(work_op::send_am);
    wr.flags          = work_signaled;
    wr.am_id          = 9;
    wr.peer           = to;
    wr.dst_client     = s.client_index();
    wr.dst_generation = s.attached().client_generation;
    wr.length         = length;
    wr.local_addr     = reinterpret_cast<uintptr_t>(addr);
    wr.lkey           = lkey;
    return wr;
}

/* Nodes that run no agent, as a client would name them: UD QPs of the
 * test's own that never answer, so a peer made for one stays connecting
 * and the ops sent to it wait. */
class silent_nodes {
public:
    explicit silent_nodes(const std::string &dev, size_t count)
    {
        auto d = agent::device::open(dev, 1);
        EXPECT_TRUE(d.ok()) << d.error();
        m_dev = std::move(d).value();
        for (size_t i = 0; i < count; ++i) {
            auto ch = agent::ud_channel::create(*m_dev, nullptr,
                                                wire::conn::random_qkey());
            EXPECT_TRUE(ch.ok()) << ch.error();
            m_channels.push_back(std::move(ch).value());
        }
    }

    wire::agent_address operator[](size_t i) const
    {
        wire::agent_address where{};
        std::memcpy(where.gid, m_dev->gid().raw, sizeof(where.gid));
        where.ud_qpn   = m_channels.at(i)->qpn();
        where.ud_qkey  = m_channels.at(i)->qkey();
        where.agent_id = 0x5eed0 + i;
        return where;
    }

private:
    std::unique_ptr<agent::device> m_dev;
    std::vector<std::unique_ptr<agent::ud_channel>> m_channels;
};

class rvtd_flood : public test::rvtd_test {
protected:
    std::unique_ptr<client::session> open_session()
    {
        auto at = client::attach(m_socket, test::job_key, 30s);
        EXPECT_TRUE(at.ok()) << (at.ok() ? "" : at.error()) << "\nrvtd log:\n"
                             << slurp(m_log);
        if (!at.ok()) {
            return nullptr;
        }
        auto s = client::session::open(std::move(at).value());
        EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error());
        return s.ok() ? std::move(s).value() : nullptr;
    }

    /* The agent's status, its data path part. */
    nlohmann::json data_path()
    {
        auto st = client::query_status(m_socket, false);
        EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error());
        return st.ok() ? nlohmann::json::parse(st.value())["data_path"] :
                         nlohmann::json::object();
    }

    /* A member of the status's entry for session `s`. */
    nlohmann::json client_entry(const client::session &s, const char *key)
    {
        const nlohmann::json traffic = data_path()["client_traffic"];
        for (const auto &e : traffic) {
            if (e["index"] == s.client_index()) {
                return e[key];
            }
        }
        ADD_FAILURE() << "client " << s.client_index()
                      << " not in the status: " << traffic.dump();
        return {};
    }

    /* The peer index of the session's own node. */
    uint32_t own_node(client::session &s)
    {
        auto p = s.connect_peer(s.agent_address());
        EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error());
        return p.ok() ? p.value() : ~0u;
    }

    /* An active message from `s` to itself through its node's agent: it
     * completes `success` and arrives, carrying `tag`. */
    ::testing::AssertionResult
    served(client::session &s, uint32_t self, uint64_t tag)
    {
        const work_request wr = am_to_self(s, tag, self);
        const auto bytes      = std::as_bytes(std::span(&tag, 1));
        if (s.post_inline(wr, bytes) != client::post_status::posted) {
            return ::testing::AssertionFailure() << "post " << tag;
        }
        bool done = false, arrived = false;
        uint32_t status = ~0u;
        eventually(
                [&] {
                    completion c[4];
                    for (size_t i = 0, n = s.poll_completions(c); i < n; ++i) {
                        done   = done || c[i].wr_id == tag;
                        status = c[i].wr_id == tag ? c[i].status : status;
                    }
                    client::inbound_view v;
                    while (s.peek_inbound(v)) {
                        uint64_t got = 0;
                        if (v.data.size() == sizeof(got)) {
                            std::memcpy(&got, v.data.data(), sizeof(got));
                        }
                        arrived = arrived || got == tag;
                        s.release_inbound();
                    }
                    return done && arrived;
                },
                20s);
        if (!done || !arrived ||
            status != static_cast<uint32_t>(completion_status::success)) {
            return ::testing::AssertionFailure()
                   << "message " << tag << ": completed " << done << " (status "
                   << status << "), arrived " << arrived << "\nrvtd log:\n"
                   << slurp(m_log);
        }
        return ::testing::AssertionSuccess();
    }

    /* Its descriptors as before; its memory at most `slack_kib` more. */
    static void expect_bounded(const footprint &before, const footprint &after,
                               size_t slack_kib = 8192)
    {
        EXPECT_EQ(after.fds, before.fds) << "descriptors held";
        EXPECT_LE(after.rss_kib, before.rss_kib + slack_kib)
                << "resident memory grew from " << before.rss_kib << " KiB";
    }
};

/* The client's work ring, written as a process that ignores its budget
 * would (the session admits no more than its completion ring holds). */
ring_producer<work_request> raw_work_ring(client::session &s)
{
    const auto &at      = s.attached();
    const shm_layout &l = at.layout;
    return {*at.shm.at<ring_indices>(l.work_offset),
            {at.shm.at<work_request>(l.work_offset + sizeof(ring_indices)),
             l.caps.work}};
}

std::vector<completion> reap(client::session &s)
{
    completion c[64];
    const size_t n = s.poll_completions(c);
    return {c, c + n};
}

/* What completes first, waiting at most `limit`; empty if nothing did. */
std::vector<completion>
first_completions(client::session &s, std::chrono::milliseconds limit)
{
    std::vector<completion> done;
    eventually(
            [&] {
                done = reap(s);
                return !done.empty();
            },
            limit);
    return done;
}

} // namespace

/* A client writes its work ring without end, 16 rings' worth of active
 * messages to a node that never answers: the agent holds 8
 * (--max-client-ops) and completes every other one no_resource at once;
 * a neighbour's messages go through all along; the agent's descriptors
 * and memory stay as they were. */
TEST_F(rvtd_flood, ops_over_a_clients_share_are_refused_and_the_others_served)
{
    const pid_t agent = start_serving({"--max-client-ops=8"});
    auto good         = open_session();
    auto flood        = open_session();
    ASSERT_TRUE(good && flood);
    const uint32_t good_self = own_node(*good);
    ASSERT_TRUE(served(*good, good_self, 1));
    silent_nodes nowhere(m_dev, 1);
    auto to = flood->connect_peer(nowhere[0]);
    ASSERT_TRUE(to.ok()) << to.error();
    const footprint before = footprint_of(agent);

    auto ring        = raw_work_ring(*flood);
    const uint32_t n = 16 * static_cast<uint32_t>(ring.capacity());
    std::vector<completion> done;
    uint32_t pushed  = 0;
    const auto until = std::chrono::steady_clock::now() + 120s;
    while ((pushed < n || done.size() < n - 8) &&
           std::chrono::steady_clock::now() < until) {
        if (pushed < n &&
            ring.try_push(am_to_self(*flood, pushed, to.value()))) {
            if (++pushed % 1024 == 0) { /* the neighbour, meanwhile */
                ASSERT_TRUE(served(*good, good_self, 1 + pushed));
            }
            continue;
        }
        const auto got = reap(*flood);
        done.insert(done.end(), got.begin(), got.end());
    }
    ASSERT_EQ(done.size(), n - 8) << "of " << pushed << " pushed\nrvtd log:\n"
                                  << slurp(m_log);
    for (const completion &c : done) {
        ASSERT_EQ(c.status,
                  static_cast<uint32_t>(completion_status::no_resource))
                << "wr_id " << c.wr_id;
        ASSERT_EQ(c.detail, static_cast<uint32_t>(agent::share_bound::ops));
        ASSERT_GE(c.wr_id, 8u) << "the first 8 are held, waiting";
    }
    EXPECT_EQ(client_entry(*flood, "held"), 8u);
    EXPECT_EQ(data_path()["share"]["refused_ops"], n - 8);
    EXPECT_NE(slurp(m_log).find("expected fewer than max-client-ops (8)"),
              std::string::npos)
            << slurp(m_log);
    EXPECT_TRUE(served(*good, good_self, 2));
    expect_bounded(before, footprint_of(agent));
}

/* A client's ops name more distinct lkeys at once than its share
 * (--max-client-lkeys=4): the fifth is refused no_resource, naming the
 * bound; then 2,000 requests naming lkeys that are no MR of its own are
 * refused invalid and tracked nowhere; a neighbour is served. */
TEST_F(rvtd_flood, lkeys_over_a_clients_share_are_refused_and_the_others_served)
{
    const pid_t agent = start_serving({"--max-client-lkeys=4"});
    auto good         = open_session();
    auto flood        = open_session();
    ASSERT_TRUE(good && flood);
    const uint32_t good_self = own_node(*good);
    ASSERT_TRUE(served(*good, good_self, 1));
    std::vector<std::vector<uint8_t>> bufs(5, std::vector<uint8_t>(4096, 7));
    std::vector<client::memory_region> mrs;
    for (auto &b : bufs) {
        auto mr = flood->register_memory(b.data(), b.size(), remote_rw);
        ASSERT_TRUE(mr.ok()) << mr.error();
        mrs.push_back(mr.value());
    }
    silent_nodes nowhere(m_dev, 1);
    auto far = flood->connect_peer(nowhere[0]);
    ASSERT_TRUE(far.ok()) << far.error();
    const uint32_t flood_self = own_node(*flood);
    const footprint before    = footprint_of(agent);

    auto am = [&](uint64_t wr_id, uint32_t to, const client::memory_region &mr,
                  uint32_t lkey) {
        return am_to_self(*flood, wr_id, to, mr.addr, lkey, 64);
    };
    for (size_t k = 0; k < mrs.size(); ++k) { /* held: its peer never answers */
        ASSERT_EQ(flood->post(am(100 + k, far.value(), mrs[k], mrs[k].lkey)),
                  client::post_status::posted);
    }
    const std::vector<completion> done = first_completions(*flood, 10s);
    ASSERT_FALSE(done.empty()) << slurp(m_log);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].wr_id, 104u);
    EXPECT_EQ(done[0].status,
              static_cast<uint32_t>(completion_status::no_resource));
    EXPECT_EQ(done[0].detail, static_cast<uint32_t>(agent::share_bound::lkeys));
    EXPECT_NE(slurp(m_log).find("expected at most max-client-lkeys (4)"),
              std::string::npos)
            << slurp(m_log);

    /* lkeys of no MR of its own, to its own node */
    constexpr uint32_t bogus = 2000;
    uint32_t posted = 0, invalid = 0;
    ASSERT_TRUE(eventually(
            [&] {
                while (posted < bogus &&
                       flood->post(am(1000 + posted, flood_self, mrs[0],
                                      0x70000 + posted)) ==
                               client::post_status::posted) {
                    ++posted;
                }
                for (const completion &c : reap(*flood)) {
                    invalid += c.status == static_cast<uint32_t>(
                                                   completion_status::invalid);
                }
                return invalid == bogus;
            },
            60s))
            << posted << " posted, " << invalid << " invalid\n"
            << slurp(m_log);
    EXPECT_EQ(client_entry(*flood, "lkeys"), 4u) << "the 4 held";
    EXPECT_EQ(data_path()["share"]["refused_lkeys"], 1u);
    EXPECT_TRUE(served(*good, good_self, 2));
    expect_bounded(before, footprint_of(agent));
}

/* A process asks for peers without end (--max-client-peers=3): the fourth
 * is refused naming the bound, whichever of its attachments asks (the
 * share is the process's), one it has costs nothing, and a neighbour (a
 * process of its own) still gets the one refused to it. */
TEST_F(rvtd_flood, peers_over_a_clients_share_are_refused_and_the_others_made)
{
    start_serving({"--max-client-peers=3"});
    auto flood  = open_session();
    auto second = open_session(); /* the same process again */
    ASSERT_TRUE(flood && second);
    silent_nodes nodes(m_dev, 4);
    for (size_t i = 0; i < 3; ++i) {
        auto r = flood->connect_peer(nodes[i]);
        ASSERT_TRUE(r.ok()) << r.error();
    }
    const std::string bound = "3 peers made for this process (pid " +
                              std::to_string(getpid()) +
                              "): expected fewer than max-client-peers (3) "
                              "to make another";
    for (client::session *s : {flood.get(), second.get()}) {
        auto refused = s->connect_peer(nodes[3]);
        ASSERT_FALSE(refused.ok());
        EXPECT_NE(refused.error().find(bound), std::string::npos)
                << refused.error();
    }
    EXPECT_TRUE(flood->connect_peer(nodes[0]).ok()) << "one it has";
    /* a neighbour: another process attaches and asks (no verbs in it) */
    const wire::agent_address fourth = nodes[3];
    int pfd[2];
    ASSERT_EQ(pipe(pfd), 0);
    const pid_t child = fork();
    if (child == 0) {
        close(pfd[0]);
        std::string said;
        auto at = client::attach(m_socket, test::job_key, 30s);
        if (!at.ok()) {
            said = "attach: " + at.error();
        } else if (auto s = client::session::open(std::move(at).value());
                   !s.ok()) {
            said = "session: " + s.error();
        } else {
            auto p = s.value()->connect_peer(fourth);
            said   = p.ok() ? "made" : p.error();
        }
        (void)!write(pfd[1], said.data(), said.size());
        _exit(0);
    }
    close(pfd[1]);
    std::string theirs;
    char buf[512];
    for (ssize_t n; (n = read(pfd[0], buf, sizeof(buf))) > 0;) {
        theirs.append(buf, static_cast<size_t>(n));
    }
    close(pfd[0]);
    waitpid(child, nullptr, 0);
    EXPECT_EQ(theirs, "made");
    EXPECT_EQ(data_path()["share"]["refused_peers"], 2u);
    const uint32_t self = own_node(*second);
    EXPECT_TRUE(served(*second, self, 1));
}

/* A client writes its socket as fast as the agent will take it, for 3 s,
 * notices that ask nothing (an intent withdrawn), the first 64 KiB while
 * the agent is stopped (so that a pass finds more than its budget however
 * the machine schedules the two: a writer slower than the agent's passes
 * never queued more than one); then, behind what is
 * still queued, it announces an MR without waiting for the verdict and
 * sends from it at once. The agent reads at most --max-socket-read bytes
 * of the socket a pass, its look for the MR's notice from the data path
 * included, serves a neighbour all along, and the send waits for the
 * notice instead of being refused as naming an unknown MR; the agent's
 * memory stays bounded. */
TEST_F(rvtd_flood, a_socket_flood_is_read_a_budget_a_pass_and_the_others_served)
{
    const pid_t agent = start_serving({"--max-socket-read=4096"});
    auto good         = open_session();
    auto flood        = open_session();
    ASSERT_TRUE(good && flood);
    const uint32_t good_self  = own_node(*good);
    const uint32_t flood_self = own_node(*flood);
    ASSERT_TRUE(served(*good, good_self, 1));
    const footprint before = footprint_of(agent);
    const int sock         = flood->attached().sock.get();

    std::atomic<bool> stop{false};
    std::atomic<uint64_t> sent{0};
    ASSERT_EQ(kill(agent, SIGSTOP), 0);
    std::thread writer([&] {
        const std::vector<wire::mr_notice> burst(
                64,
                wire::make_mr_intent(0x1000, 4096, wire::mr_intent_withdrawn));
        const auto *bytes = reinterpret_cast<const char *>(burst.data());
        const size_t len  = burst.size() * sizeof(wire::mr_notice);
        size_t at         = 0;
        while (!stop.load() || at != 0) { /* whole notices only */
            const ssize_t n = send(sock, bytes + at, len - at,
                                   MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0) {
                sent += static_cast<uint64_t>(n);
                at = (at + static_cast<size_t>(n)) % len;
            } else {
                std::this_thread::sleep_for(100us);
            }
        }
    });
    const auto queued = std::chrono::steady_clock::now() + 20s;
    while (sent.load() < 64u * 1024 &&
           std::chrono::steady_clock::now() < queued) {
        std::this_thread::sleep_for(1ms);
    }
    ASSERT_EQ(kill(agent, SIGCONT), 0);
    EXPECT_GE(sent.load(), 64u * 1024) << "the socket took less while stopped";
    const auto until = std::chrono::steady_clock::now() + 3s;
    uint64_t tag     = 2;
    while (std::chrono::steady_clock::now() < until &&
           served(*good, good_self, tag)) {
        ++tag;
    }
    stop = true;
    writer.join();
    EXPECT_GE(tag, 12u) << "the neighbour was served " << tag - 2 << " times";
    EXPECT_GT(sent.load(), 64u * 4096) << "not a flood";

    /* the MR, made on the shared command fd and announced behind the
     * flood without waiting for the verdict */
    std::vector<uint64_t> late(512, 0x1a7e);
    const auto &at = flood->attached();
    auto keys      = uverbs::reg_mr(
                 {at.cmd_fd.get(), at.driver_id, at.pd_handle, late.data(), 4096,
                  reinterpret_cast<uintptr_t>(late.data()), remote_rw});
    ASSERT_TRUE(keys.ok()) << keys.error();
    const std::array<wire::mr_notice, 2> notices = {
            wire::make_mr_intent(reinterpret_cast<uintptr_t>(late.data()),
                                 4096),
            wire::make_mr_notice(wire::msg_type::mr_registered,
                                 keys.value().handle, keys.value().lkey,
                                 keys.value().rkey,
                                 reinterpret_cast<uintptr_t>(late.data()),
                                 4096)};
    ASSERT_EQ(send(sock, notices.data(), sizeof(notices), MSG_NOSIGNAL),
              (ssize_t)sizeof(notices));
    const work_request wr = am_to_self(*flood, 77, flood_self, late.data(),
                                       keys.value().lkey, 64);
    ASSERT_EQ(flood->post(wr), client::post_status::posted);
    const std::vector<completion> done = first_completions(*flood, 60s);
    ASSERT_FALSE(done.empty()) << slurp(m_log);
    EXPECT_EQ(done[0].status, static_cast<uint32_t>(completion_status::success))
            << "refused before its notice was read";
    EXPECT_GE(data_path()["intake"]["reads_deferred"].get<uint64_t>(), 1u);
    EXPECT_NE(slurp(m_log).find("max-socket-read (4096)"), std::string::npos)
            << slurp(m_log);
    EXPECT_TRUE(served(*good, good_self, tag));
    expect_bounded(before, footprint_of(agent));
}

namespace {

/* Connections to the agent's socket that never send an attach request. */
std::vector<unique_fd> silent_connections(const std::string &socket, int n)
{
    std::vector<unique_fd> fds;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof(addr.sun_path) - 1);
    for (int i = 0; i < n; ++i) {
        unique_fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        EXPECT_EQ(connect(fd.get(), reinterpret_cast<sockaddr *>(&addr),
                          sizeof(addr)),
                  0)
                << std::strerror(errno);
        fds.push_back(std::move(fd));
    }
    return fds;
}

} // namespace

/* 12 connections that never attach, against --max-unattached=4: the agent
 * holds at most 4 of them at once (each until its request timeout, 5 s),
 * the rest wait in the listen backlog; a real client queued behind them
 * attaches, and an attached one is served all along. */
TEST_F(rvtd_flood, connections_that_never_attach_are_held_four_at_a_time)
{
    const pid_t agent = start_serving({"--max-unattached=4"});
    auto good         = open_session();
    ASSERT_TRUE(good);
    const uint32_t good_self = own_node(*good);
    ASSERT_TRUE(served(*good, good_self, 1));
    const footprint before = footprint_of(agent);

    auto silent      = silent_connections(m_socket, 12);
    size_t most_fds  = 0;
    const auto until = std::chrono::steady_clock::now() + 2s;
    uint64_t tag     = 2;
    while (std::chrono::steady_clock::now() < until) {
        most_fds = std::max(most_fds, footprint_of(agent).fds);
        ASSERT_TRUE(served(*good, good_self, tag++));
    }
    EXPECT_LE(most_fds, before.fds + 4);
    EXPECT_GE(most_fds, before.fds + 4) << "the 4 were not accepted";

    auto late = open_session(); /* behind the 12 */
    EXPECT_TRUE(late);
    EXPECT_GE(data_path()["intake"]["times_full"].get<uint64_t>(), 1u);
    EXPECT_NE(slurp(m_log).find("max-unattached (4)"), std::string::npos)
            << slurp(m_log);
    silent.clear();
    EXPECT_TRUE(served(*good, good_self, tag));
}

/* Out of descriptors (RLIMIT_NOFILE 64, and --max-unattached above it):
 * the agent stops accepting instead of spinning on a listener that stays
 * readable, keeps serving its attached client, and attaches a new one
 * once the silent connections are gone. (The status cannot be asked
 * meanwhile: its connection would wait in the backlog with the rest.) */
TEST_F(rvtd_flood, out_of_descriptors_the_agent_waits_without_spinning)
{
    const pid_t agent = start_serving({"--max-unattached=1000"}, 64);
    auto good         = open_session();
    ASSERT_TRUE(good);
    const uint32_t good_self = own_node(*good);
    ASSERT_TRUE(served(*good, good_self, 1));

    auto silent = silent_connections(m_socket, 100);
    ASSERT_TRUE(eventually(
            [&] {
                return slurp(m_log).find("accept failed: Too many open "
                                         "files: accepting no more until a "
                                         "connection closes") !=
                       std::string::npos;
            },
            10s))
            << slurp(m_log);
    /* within the silent connections' request timeout (5 s) */
    const long hz       = sysconf(_SC_CLK_TCK);
    const uint64_t used = cpu_ticks(agent);
    std::this_thread::sleep_for(2s);
    const double cpu = double(cpu_ticks(agent) - used) / double(hz) / 2.0;
    EXPECT_LT(cpu, 0.3) << "the agent used " << cpu
                        << " of a CPU out of descriptors";
    EXPECT_LE(footprint_of(agent).fds, 64u);
    EXPECT_TRUE(served(*good, good_self, 2));

    silent.clear();
    auto late = open_session();
    EXPECT_TRUE(late);
    if (late) {
        EXPECT_TRUE(served(*late, own_node(*late), 3));
    }
    EXPECT_GE(data_path()["intake"]["fd_shortages"].get<uint64_t>(), 1u);
}
