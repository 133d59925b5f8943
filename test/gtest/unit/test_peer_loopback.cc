/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the loopback mode of the per-peer connection state
 * machine (agent/peers/peer_connection.h, "Loopback"): the agent's own node,
 * K QPs each connected to itself, no handshake. Most tests look at the
 * exact actions an event returns; the cycles run them through `lb_node`,
 * which executes them as the engine would (fake QPs with distinct QPNs,
 * a count of posted ops that a flush fails).
 */
#include "uct/ib/rvt/agent/peers/peer_connection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace conn = rvt::wire::conn;
using rvt::agent::action;
using rvt::agent::action_kind;
using rvt::agent::actions;
using rvt::agent::msec;
using rvt::agent::peer_config;
using rvt::agent::peer_connection;
using rvt::agent::peer_state;
using rvt::agent::time_point;

namespace {

const time_point t0 = time_point{} + std::chrono::hours(1);

/* "create_qps, connect_qps": readable when a sequence is wrong */
std::string kinds(const actions &acts)
{
    std::string s;
    for (const auto &a : acts) {
        s += (s.empty() ? "" : ", ") + std::string(to_string(a.kind));
    }
    return s;
}

std::vector<conn::qp_info> qps_of(const action &a)
{
    return {a.local_qps.begin(), a.local_qps.begin() + a.num_qps};
}

std::vector<conn::qp_info> peer_qps_of(const action &a)
{
    return {a.peer_qps.begin(), a.peer_qps.begin() + a.num_qps};
}

std::vector<conn::qp_info> qp_set(uint32_t first_qpn, uint32_t n)
{
    std::vector<conn::qp_info> qps;
    for (uint32_t i = 0; i < n; ++i) {
        qps.push_back(
                {first_qpn + i, (0x1000 * (i + 1) + first_qpn) & 0xffffff});
    }
    return qps;
}

bool is_empty(const rvt::agent::peer_address &a)
{
    return a == rvt::agent::peer_address{};
}

/* Any well-formed handshake datagram. */
conn::message some_request()
{
    conn::sender s{};
    s.gid[0]      = 0xfe;
    s.gid[1]      = 0x80;
    s.instance_id = 0x1234;
    s.ud_qpn      = 0x40;
    s.uid         = 1000;
    s.ud_qkey     = 0x1234;
    auto qps      = qp_set(0x500, 4);
    return conn::make_request(s, "job.1", 0, 1, qps, 8192);
}

/* The agent around its loopback peer. */
struct lb_node {
    explicit lb_node(peer_config cfg = {}) : pc(peer_connection::loopback(cfg))
    {
    }

    peer_connection pc;

    uint32_t next_qpn = 0x200;
    std::vector<conn::qp_info> live; /* created, not yet destroyed */
    std::vector<conn::qp_info> last_created;
    std::vector<action> done; /* every action executed, in order */

    int posted_ops    = 0; /* ops on the QPs, failed by a flush */
    int failed_ops    = 0;
    bool auto_drain   = true;
    bool create_fails = false;

    void run(time_point now, actions todo)
    {
        std::deque<action> queue(todo.begin(), todo.end());
        while (!queue.empty()) {
            action a = queue.front();
            queue.pop_front();
            done.push_back(a);
            actions more = execute(now, a);
            queue.insert(queue.end(), more.begin(), more.end());
        }
    }

    actions execute(time_point now, const action &a)
    {
        switch (a.kind) {
        case action_kind::create_qps:
            if (create_fails) {
                return pc.qps_failed(now, "ENOMEM");
            }
            last_created = qp_set(next_qpn, a.num_qps);
            next_qpn += 0x10;
            live.insert(live.end(), last_created.begin(), last_created.end());
            return pc.qps_created(now, last_created);
        case action_kind::connect_qps:
            for (const auto &qp : qps_of(a)) {
                EXPECT_NE(std::find(live.begin(), live.end(), qp), live.end())
                        << "connects QPN " << qp.qpn << " it does not have";
            }
            return {};
        case action_kind::destroy_qps:
            for (const auto &qp : qps_of(a)) {
                auto it = std::find(live.begin(), live.end(), qp);
                EXPECT_NE(it, live.end()) << "destroys QPN " << qp.qpn
                                          << " twice or never created it";
                if (it != live.end()) {
                    live.erase(it);
                }
            }
            return {};
        case action_kind::flush_qps:
            failed_ops += posted_ops;
            posted_ops = 0;
            return auto_drain ? pc.drained(now) : actions{};
        case action_kind::send_message:
        case action_kind::send_keepalive:
            ADD_FAILURE() << "loopback " << to_string(a.kind);
            return {};
        case action_kind::report_connected:
        case action_kind::report_peer_failed:
            return {};
        }
        ADD_FAILURE() << "unknown action";
        return {};
    }

    int count(action_kind k) const
    {
        return static_cast<int>(
                std::count_if(done.begin(), done.end(),
                              [k](const action &a) { return a.kind == k; }));
    }

    void connect(time_point now)
    {
        run(now, pc.connect(now));
    }
};

} // namespace

TEST(peer_loopback, factory_makes_an_idle_loopback_peer)
{
    auto pc = peer_connection::loopback({});
    EXPECT_TRUE(pc.is_loopback());
    EXPECT_EQ(pc.state(), peer_state::idle);
    EXPECT_FALSE(pc.next_timer());
    EXPECT_TRUE(is_empty(pc.peer()));
    EXPECT_TRUE(pc.local_qps().empty());

    conn::sender self{};
    self.instance_id = 1;
    self.ud_qpn      = 0x40;
    self.ud_qkey     = 0x1234;
    peer_connection remote({}, {self, "job.1"}, {});
    EXPECT_FALSE(remote.is_loopback());

    peer_config bad;
    bad.num_qps = 0;
    EXPECT_THROW(peer_connection::loopback(bad), std::invalid_argument);
}

/* Every step of connect, loss, flush, rebuild, by its exact actions. */
TEST(peer_loopback, whole_cycle_names_exactly_the_given_qps)
{
    auto pc = peer_connection::loopback({});

    auto acts = pc.connect(t0);
    ASSERT_EQ(kinds(acts), "create_qps");
    EXPECT_EQ(acts[0].num_qps, 4u);
    EXPECT_EQ(pc.state(), peer_state::creating);

    const auto first = qp_set(0x200, 4);
    acts             = pc.qps_created(t0, first);
    ASSERT_EQ(kinds(acts), "connect_qps, report_connected");
    EXPECT_EQ(qps_of(acts[0]), first);
    EXPECT_EQ(peer_qps_of(acts[0]), first) << "each QP is its own peer";
    EXPECT_TRUE(is_empty(acts[0].dest));
    EXPECT_EQ(pc.state(), peer_state::connected);
    EXPECT_EQ(pc.counters().connects, 1u);
    EXPECT_TRUE(std::ranges::equal(pc.local_qps(), first));
    EXPECT_TRUE(std::ranges::equal(pc.peer_qps(), first));

    auto t1 = t0 + msec{100};
    acts    = pc.qp_error(t1, "IBV_WC_RETRY_EXC_ERR on QP 0");
    ASSERT_EQ(kinds(acts), "flush_qps");
    EXPECT_EQ(qps_of(acts[0]), first);
    EXPECT_NE(acts[0].reason.find("IBV_WC_RETRY_EXC_ERR"), std::string::npos)
            << acts[0].reason;
    EXPECT_EQ(pc.state(), peer_state::draining);
    EXPECT_EQ(pc.counters().connection_lost, 1u);
    /* flush completions while draining are not errors of a connection */
    EXPECT_TRUE(pc.qp_error(t1, "flush").empty());
    EXPECT_EQ(pc.counters().connection_lost, 1u);

    acts = pc.drained(t1);
    ASSERT_EQ(kinds(acts), "destroy_qps, create_qps");
    EXPECT_EQ(qps_of(acts[0]), first);
    EXPECT_EQ(acts[1].num_qps, 4u);
    EXPECT_EQ(pc.state(), peer_state::creating);

    const auto second = qp_set(0x300, 4);
    acts              = pc.qps_created(t1, second);
    ASSERT_EQ(kinds(acts), "connect_qps, report_connected");
    EXPECT_EQ(qps_of(acts[0]), second);
    EXPECT_EQ(peer_qps_of(acts[0]), second);
    EXPECT_EQ(pc.state(), peer_state::connected);
    EXPECT_EQ(pc.counters().connects, 2u);
    EXPECT_EQ(pc.counters().connection_lost, 1u);
    EXPECT_EQ(pc.counters().requests_sent, 0u);
    EXPECT_EQ(pc.counters().replies_sent, 0u);
    EXPECT_EQ(pc.counters().keepalives_sent, 0u);
}

TEST(peer_loopback, cycle_through_an_executor_leaves_one_qp_set)
{
    peer_config cfg;
    cfg.num_qps = 3;
    lb_node n(cfg);
    n.connect(t0);
    ASSERT_EQ(n.pc.state(), peer_state::connected);
    ASSERT_EQ(n.live.size(), 3u);
    auto old = n.live;

    n.posted_ops = 5;
    n.run(t0, n.pc.qp_error(t0, "async event QP_FATAL"));
    EXPECT_EQ(n.failed_ops, 5); /* every posted op reported failed */
    EXPECT_EQ(n.pc.state(), peer_state::connected); /* rebuilt at once */
    EXPECT_EQ(n.live, n.last_created);
    for (const auto &qp : n.live) {
        EXPECT_EQ(std::count(old.begin(), old.end(), qp), 0);
    }
    EXPECT_EQ(n.count(action_kind::report_connected), 2);
    EXPECT_EQ(n.count(action_kind::report_peer_failed), 0);
    EXPECT_EQ(n.pc.counters().connects, 2u);
}

TEST(peer_loopback, drain_waits_for_the_flushed_ops)
{
    lb_node n;
    n.connect(t0);
    n.auto_drain = false;
    n.run(t0, n.pc.qp_error(t0, "retry exceeded"));
    EXPECT_EQ(n.pc.state(), peer_state::draining);
    EXPECT_EQ(n.count(action_kind::destroy_qps), 0)
            << "destroyed before the flush completed";
    EXPECT_EQ(n.live.size(), 4u);
    /* a connect() while draining changes nothing: it rebuilds anyway */
    EXPECT_TRUE(n.pc.connect(t0).empty());
    n.run(t0, n.pc.drained(t0));
    EXPECT_EQ(n.pc.state(), peer_state::connected);
    EXPECT_EQ(n.live.size(), 4u);
}

TEST(peer_loopback, create_failure_fails_the_peer_until_connect)
{
    lb_node n;
    n.create_fails = true;
    auto acts      = n.pc.connect(t0);
    ASSERT_EQ(kinds(acts), "create_qps");
    acts = n.pc.qps_failed(t0, "ENOMEM");
    ASSERT_EQ(kinds(acts), "report_peer_failed");
    EXPECT_NE(acts[0].reason.find("ENOMEM"), std::string::npos)
            << acts[0].reason;
    EXPECT_EQ(n.pc.state(), peer_state::failed);
    EXPECT_FALSE(n.pc.next_timer()) << "a failed loopback retries by itself";
    EXPECT_TRUE(n.pc.tick(t0 + std::chrono::hours(1)).empty());
    EXPECT_EQ(n.pc.state(), peer_state::failed);

    n.create_fails = false;
    n.connect(t0 + msec{10});
    EXPECT_EQ(n.pc.state(), peer_state::connected);
    EXPECT_EQ(n.live.size(), 4u);
    EXPECT_EQ(n.pc.counters().connects, 1u);
}

TEST(peer_loopback, create_failure_while_rebuilding_fails_the_peer)
{
    lb_node n;
    n.connect(t0);
    n.create_fails = true;
    n.run(t0, n.pc.qp_error(t0, "QP_FATAL"));
    EXPECT_EQ(n.pc.state(), peer_state::failed);
    EXPECT_TRUE(n.live.empty());
    EXPECT_EQ(n.count(action_kind::report_peer_failed), 1);
}

TEST(peer_loopback, bad_qp_set_is_handed_back_and_fails)
{
    auto pc = peer_connection::loopback({});
    (void)pc.connect(t0);
    const auto three = qp_set(0x200, 3); /* K is 4 */
    auto acts        = pc.qps_created(t0, three);
    ASSERT_EQ(kinds(acts), "destroy_qps, report_peer_failed");
    EXPECT_EQ(qps_of(acts[0]), three);
    EXPECT_EQ(pc.state(), peer_state::failed);
}

TEST(peer_loopback, messages_are_ignored_in_every_state)
{
    lb_node n;
    const auto msg      = some_request();
    uint64_t before     = 0;
    auto expect_ignored = [&](const char *where) {
        peer_state s = n.pc.state();
        EXPECT_TRUE(n.pc.on_message(t0, msg).empty()) << where;
        EXPECT_EQ(n.pc.state(), s) << where;
        EXPECT_NE(n.pc.last_ignored().find("loopback"), std::string::npos)
                << where << ": " << n.pc.last_ignored();
        EXPECT_EQ(n.pc.counters().ignored_messages, ++before) << where;
    };
    expect_ignored("idle");
    (void)n.pc.connect(t0);
    expect_ignored("creating");
    (void)n.pc.qps_created(t0, qp_set(0x200, 4));
    expect_ignored("connected");
    (void)n.pc.qp_error(t0, "QP_FATAL");
    expect_ignored("draining");
    (void)n.pc.drained(t0);
    (void)n.pc.qps_failed(t0, "ENOMEM");
    ASSERT_EQ(n.pc.state(), peer_state::failed);
    expect_ignored("failed");
    EXPECT_EQ(n.pc.counters().replies_sent, 0u);
}

TEST(peer_loopback, no_timer_in_any_state)
{
    auto pc        = peer_connection::loopback({});
    auto later     = t0 + std::chrono::hours(24);
    auto expect_no = [&](const char *where) {
        peer_state s = pc.state();
        EXPECT_FALSE(pc.next_timer()) << where;
        EXPECT_TRUE(pc.tick(later).empty()) << where;
        EXPECT_EQ(pc.state(), s) << where;
    };
    expect_no("idle");
    (void)pc.connect(t0);
    expect_no("creating"); /* no give-up deadline */
    (void)pc.qps_created(t0, qp_set(0x200, 4));
    expect_no("connected"); /* no keepalive */
    pc.activity(t0 + msec{1});
    expect_no("connected after activity");
    (void)pc.qp_error(t0, "QP_FATAL");
    expect_no("draining");
    (void)pc.drained(t0);
    (void)pc.qps_failed(t0, "ENOMEM");
    expect_no("failed");
    EXPECT_EQ(pc.counters().keepalives_sent, 0u);
}

/* ---- close() in each state ------------------------------------------ */

TEST(peer_loopback, close_when_idle_does_nothing)
{
    auto pc = peer_connection::loopback({});
    EXPECT_TRUE(pc.close(t0).empty());
    EXPECT_EQ(pc.state(), peer_state::idle);
}

TEST(peer_loopback, close_while_creating_hands_the_late_qps_back)
{
    auto pc = peer_connection::loopback({});
    (void)pc.connect(t0);
    EXPECT_TRUE(pc.close(t0).empty());
    EXPECT_EQ(pc.state(), peer_state::idle);
    const auto late = qp_set(0x200, 4);
    auto acts       = pc.qps_created(t0, late);
    ASSERT_EQ(kinds(acts), "destroy_qps");
    EXPECT_EQ(qps_of(acts[0]), late);
    EXPECT_EQ(pc.state(), peer_state::idle);
    /* and it can be connected again */
    ASSERT_EQ(kinds(pc.connect(t0)), "create_qps");
}

TEST(peer_loopback, close_when_connected_flushes_then_destroys)
{
    lb_node n;
    n.connect(t0);
    auto qps     = n.live;
    n.posted_ops = 2;
    n.auto_drain = false;
    auto acts    = n.pc.close(t0);
    ASSERT_EQ(kinds(acts), "flush_qps") << "no disconnect datagram";
    EXPECT_EQ(qps_of(acts[0]), qps);
    n.run(t0, acts);
    EXPECT_EQ(n.failed_ops, 2);
    EXPECT_EQ(n.pc.state(), peer_state::draining);

    acts = n.pc.drained(t0);
    ASSERT_EQ(kinds(acts), "destroy_qps") << "rebuilt after close";
    EXPECT_EQ(qps_of(acts[0]), qps);
    n.run(t0, acts);
    EXPECT_EQ(n.pc.state(), peer_state::idle);
    EXPECT_TRUE(n.live.empty());
    EXPECT_FALSE(n.pc.next_timer());
    EXPECT_EQ(n.count(action_kind::report_peer_failed), 0);

    n.connect(t0 + msec{10});
    EXPECT_EQ(n.pc.state(), peer_state::connected);
}

TEST(peer_loopback, close_while_draining_ends_idle)
{
    lb_node n;
    n.connect(t0);
    n.auto_drain = false;
    n.run(t0, n.pc.qp_error(t0, "QP_FATAL"));
    ASSERT_EQ(n.pc.state(), peer_state::draining);
    EXPECT_TRUE(n.pc.close(t0).empty());
    auto acts = n.pc.drained(t0);
    ASSERT_EQ(kinds(acts), "destroy_qps");
    n.run(t0, acts);
    EXPECT_EQ(n.pc.state(), peer_state::idle);
    EXPECT_TRUE(n.live.empty());
}

TEST(peer_loopback, connect_after_close_while_draining_rebuilds)
{
    lb_node n;
    n.connect(t0);
    n.auto_drain = false;
    n.run(t0, n.pc.close(t0));
    ASSERT_EQ(n.pc.state(), peer_state::draining);
    EXPECT_TRUE(n.pc.connect(t0).empty());
    n.run(t0, n.pc.drained(t0));
    EXPECT_EQ(n.pc.state(), peer_state::connected);
    EXPECT_EQ(n.live.size(), 4u);
}

TEST(peer_loopback, close_when_failed_goes_idle)
{
    auto pc = peer_connection::loopback({});
    (void)pc.connect(t0);
    (void)pc.qps_failed(t0, "ENOMEM");
    ASSERT_EQ(pc.state(), peer_state::failed);
    EXPECT_TRUE(pc.close(t0).empty());
    EXPECT_EQ(pc.state(), peer_state::idle);
}

TEST(peer_loopback, events_out_of_state_are_ignored)
{
    auto pc = peer_connection::loopback({});
    EXPECT_TRUE(pc.qp_error(t0, "QP_FATAL").empty());
    EXPECT_TRUE(pc.drained(t0).empty());
    EXPECT_TRUE(pc.qps_failed(t0, "ENOMEM").empty());
    EXPECT_EQ(pc.state(), peer_state::idle);
    (void)pc.connect(t0);
    (void)pc.qps_created(t0, qp_set(0x200, 4));
    EXPECT_TRUE(pc.connect(t0).empty()) << "connect while connected";
    EXPECT_TRUE(pc.drained(t0).empty());
    EXPECT_TRUE(pc.qps_failed(t0, "ENOMEM").empty());
    EXPECT_EQ(pc.state(), peer_state::connected);
    EXPECT_EQ(pc.counters().connects, 1u);
}
