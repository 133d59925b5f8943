/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two agents on one loopback fabric (engine_fixture.h): a connection that
 * is lost and cannot be made again within the give-up time fails its
 * ops and tells its clients, and a later connection works.
 */
#include "test/gtest/unit/engine_fixture.h"

#include <numeric>
#include <thread>

namespace engine_test {
namespace {

agent_options quick_peers()
{
    agent_options o;
    agent::peer_config &p   = o.engine.peers;
    p.retry_interval        = 10ms;
    p.max_retry_interval    = 20ms;
    p.max_handshake_retries = 3;
    p.reconnect_delay       = 10ms;
    p.give_up_timeout       = 200ms;
    return o;
}

bool has_peer_failed(const test_client &c, uint32_t peer)
{
    for (const auto &r : c.inbound) {
        if (r.msg.kind == static_cast<uint8_t>(inbound_kind::peer_failed) &&
            r.msg.peer == peer) {
            return true;
        }
    }
    return false;
}

TEST_F(engine_fixture, a_lost_peer_fails_ops_tells_clients_and_connects_again)
{
    agent_node &a       = add_agent(quick_peers());
    agent_node &b       = add_agent(quick_peers());
    test_client &ca     = attach(a);
    test_client &cb     = attach(b);
    const uint32_t to_b = peer(ca, b);
    const uint32_t to_a = peer(cb, a);
    ca.post(ca.am(to_b, cb, 1, 0));
    ASSERT_TRUE(run_until([&] {
        return ca.done.size() == 1 && cb.inbound.size() == 1;
    })) << a.status();
    ASSERT_EQ(ca.count(completion_status::success), 1u);

    /* a's QPs to b break, and from now on a's handshake datagrams are
     * lost: it cannot connect again */
    for (uint32_t q : a.qps_to(b)) {
        ASSERT_TRUE(a.nic->fail_next(q, IBV_WC_RETRY_EXC_ERR).ok());
    }
    a.nic->drop_datagrams(1000000);
    ca.post(ca.am(to_b, cb, 2, 1));
    ASSERT_TRUE(run_until([&] { return ca.done.size() == 2; }));
    EXPECT_EQ(ca.done[1].status,
              static_cast<uint32_t>(completion_status::failed));
    EXPECT_EQ(ca.done[1].detail, IBV_WC_RETRY_EXC_ERR);

    /* ops posted while it tries wait, and fail as peer_failed when it
     * gives up; its client is told */
    ca.post(ca.am(to_b, cb, 3, 2));
    ca.post(ca.write(to_b, cb, 4));
    ASSERT_TRUE(run_until([&] {
        return ca.done.size() == 4 && has_peer_failed(ca, to_b);
    })) << a.status();
    for (size_t i = 2; i < 4; ++i) {
        EXPECT_EQ(ca.done[i].wr_id, i + 1);
        EXPECT_EQ(ca.done[i].status,
                  static_cast<uint32_t>(completion_status::peer_failed));
    }
    const auto peers = a.engine->status_json()["peers"];
    EXPECT_TRUE(std::any_of(peers.begin(), peers.end(), [](const auto &p) {
        return p["state"] == "failed";
    })) << a.status();
    EXPECT_FALSE(has_peer_failed(cb, to_a)) << "b gave up on a as well";

    /* a new op for a failed peer fails at once */
    ca.post(ca.am(to_b, cb, 5, 3));
    ASSERT_TRUE(run_until([&] { return ca.done.size() == 5; }));
    EXPECT_EQ(ca.done[4].status,
              static_cast<uint32_t>(completion_status::peer_failed));

    /* the network is back and the client asks for the peer again: the
     * same index, connected anew, both ways */
    a.nic->drop_datagrams(0);
    EXPECT_EQ(peer(ca, b), to_b);
    ca.post(ca.am(to_b, cb, 6, 4));
    cb.post(cb.am(to_a, ca, 1, 0));
    ASSERT_TRUE(run_until([&] {
        return ca.done.size() == 6 && cb.done.size() == 1 &&
               ca.ams_by_sender().count(cb.id) == 1 &&
               cb.ams_by_sender()[ca.id].size() == 2;
    })) << a.status()
        << b.status();
    EXPECT_EQ(ca.done[5].status,
              static_cast<uint32_t>(completion_status::success));
    EXPECT_EQ(cb.done[0].status,
              static_cast<uint32_t>(completion_status::success));
    EXPECT_EQ(cb.ams_by_sender()[ca.id], (std::vector<uint32_t>{0, 4}));
}

/* Each agent's handshake UD QP has a random Q_Key of its own, carried in
 * its address (what a client is given at attach, and its UCT address
 * names) and in every datagram it sends. a's client names b by b's
 * address: a's request names b's Q_Key. b has no client that wants a: it
 * knows a from that request alone, and answers at the Q_Key the request
 * names. c's client names a by an address with a stale Q_Key: c's
 * requests are lost at a's device and c gives up; a's request to c still
 * connects them, c answering where the request says, and c's client is
 * served on that connection. */
TEST_F(engine_fixture, agents_connect_at_the_q_keys_of_address_and_request)
{
    agent_node &a   = add_agent(quick_peers());
    agent_node &b   = add_agent(quick_peers());
    agent_node &c   = add_agent(quick_peers());
    test_client &ca = attach(a);
    test_client &cb = attach(b);
    test_client &cc = attach(c);
    EXPECT_NE(a.nic->ud_qkey(), b.nic->ud_qkey());
    EXPECT_EQ(a.engine->address().ud_qkey, a.nic->ud_qkey());
    EXPECT_EQ(ca.session->agent_address().ud_qkey, a.nic->ud_qkey());

    const uint32_t to_b = peer(ca, b);
    ca.post(ca.am(to_b, cb, 1, 0));
    ASSERT_TRUE(run_until([&] {
        return ca.done.size() == 1 && cb.inbound.size() == 1;
    })) << a.status()
        << b.status();
    EXPECT_EQ(ca.count(completion_status::success), 1u);
    EXPECT_EQ(a.nic->stats().datagrams_qkey_dropped, 0u);
    EXPECT_EQ(b.nic->stats().datagrams_qkey_dropped, 0u);

    wire::agent_address stale = a.engine->address();
    stale.ud_qkey ^= 0x5a5a;
    auto r = while_serving([&] { return cc.session->connect_peer(stale); });
    ASSERT_TRUE(r.ok()) << r.error();
    const uint32_t c_to_a = r.value();
    ASSERT_TRUE(run_until([&] {
        return a.nic->stats().datagrams_qkey_dropped > 0;
    })) << "c's request to the stale Q_Key was not dropped at a's device";

    /* unanswered, c gives up (its client is told) ... */
    ASSERT_TRUE(run_until([&] { return has_peer_failed(cc, c_to_a); }))
            << c.status();
    const size_t told = cc.inbound.size();
    /* ... and a's request makes the connection: c answers it where it
     * says, a connects at the reply */
    const uint32_t a_to_c = peer(ca, c);
    ca.post(ca.am(a_to_c, cc, 2, 1));
    ASSERT_TRUE(run_until([&] {
        return ca.done.size() == 2 && cc.inbound.size() == told + 1;
    })) << a.status()
        << c.status();
    EXPECT_EQ(ca.count(completion_status::success), 2u);
    cc.post(cc.am(c_to_a, ca, 3, 2));
    ASSERT_TRUE(run_until([&] {
        return cc.done.size() == 1 && ca.ams_by_sender().count(cc.id) == 1;
    })) << a.status()
        << c.status();
    EXPECT_EQ(cc.count(completion_status::success), 1u);
    EXPECT_EQ(c.nic->stats().datagrams_qkey_dropped, 0u)
            << "c was answered at another Q_Key than its own";
}

/* A connection lost while another lane's op has run but not yet been
 * polled: the flush finds nothing left on that lane, and the op comes back
 * done, not flushed. The drain must end there, as it does at a flushed
 * one (the chaos run's agents stayed draining, 0 posted, for minutes). */
TEST_F(engine_fixture, a_drain_whose_last_op_completes_well_ends)
{
    agent_node &a  = add_agent(quick_peers());
    agent_node &b  = add_agent(quick_peers());
    test_client &d = attach(b);
    std::vector<test_client *> cs;
    for (int i = 0; i < 4; ++i) {
        cs.push_back(&attach(a));
    }
    const uint32_t to_b = peer(*cs[0], b);
    for (test_client *c : cs) {
        ASSERT_EQ(peer(*c, b), to_b);
    }
    ASSERT_TRUE(run_until([&] { return a.qps_to(b).size() == 4; }))
            << a.status();

    /* which QP each client's endpoint to d takes: its one held WR shows */
    const std::vector<uint32_t> qps = a.qps_to(b);
    std::vector<uint32_t> qp_of(cs.size());
    a.hold(qps, true);
    for (size_t i = 0; i < cs.size(); ++i) {
        cs[i]->post(cs[i]->am(to_b, d, 1, 1));
        run_for(20ms);
        for (uint32_t q : qps) {
            if (a.nic->queued(q) > 0) {
                qp_of[i] = q;
            }
        }
        a.hold(qps, false);
        ASSERT_TRUE(run_until([&] { return cs[i]->done.size() == 1; }));
        a.hold(qps, true);
    }
    a.hold(qps, false);
    size_t second = 1;
    while (second < cs.size() && qp_of[second] == qp_of[0]) {
        ++second;
    }
    ASSERT_LT(second, cs.size()) << "every endpoint took one lane";
    test_client &c1 = *cs[0];
    test_client &c2 = *cs[second];

    /* in one pass: c1's op fails on its QP, then c2's runs well on
     * another; the engine sees the failure first and flushes */
    ASSERT_TRUE(a.nic->fail_next(qp_of[0], IBV_WC_REM_INV_REQ_ERR).ok());
    c1.post(c1.am(to_b, d, 2, 2));
    c2.post(c2.am(to_b, d, 2, 2));
    ASSERT_TRUE(run_until([&] {
        return c1.done.size() == 2 && c2.done.size() == 2;
    })) << a.status();
    EXPECT_EQ(c1.done[1].status,
              static_cast<uint32_t>(completion_status::failed));
    EXPECT_EQ(c2.done[1].status,
              static_cast<uint32_t>(completion_status::success));

    /* the drain ended and the connection came back: the next op goes */
    c2.post(c2.am(to_b, d, 3, 3));
    ASSERT_TRUE(run_until([&] { return c2.done.size() == 3; }))
            << "stuck in the drain: " << a.status();
    EXPECT_EQ(c2.done[2].status,
              static_cast<uint32_t>(completion_status::success));
}

/* A receive that landed before its QP was destroyed can still be in the
 * CQ afterwards (rxe, like the loopback nic, leaves it there): its data is
 * a client's and must be delivered, from the peer the QP belonged to, and
 * a receive error of that QP must not fail the connection made since.
 * Here b has more receives waiting than one pass of its loop polls (8 x
 * 32), the last one an error (an AM larger than b's receive buffers), when
 * a's new connection request comes: b, with nothing of its own posted,
 * drains at once and destroys its QPs in that pass, and polls the rest
 * after (the chaos run's ops "completed ok at their sender" that never
 * arrived). */
TEST_F(engine_fixture, a_receive_polled_after_its_qp_was_destroyed_is_delivered)
{
    agent_options b_options       = quick_peers();
    b_options.nic.receive_buffers = 400;
    b_options.nic.receive_size    = 128;
    agent_node &a                 = add_agent(quick_peers());
    agent_node &b                 = add_agent(b_options);
    test_client &ca               = attach(a);
    test_client &cb               = attach(b);
    const uint32_t to_b           = peer(ca, b);
    ca.post(ca.am(to_b, cb, 1, 0));
    ASSERT_TRUE(run_until([&] {
        return ca.done.size() == 1 && cb.inbound.size() == 1;
    })) << b.status();

    /* only a runs: its AMs land in b's memory, their receives wait in b's
     * CQ; the last one is too large for b's receive buffer: both QPs go to
     * the error state, and a asks b for a new connection */
    constexpr uint32_t waiting = 300;
    for (uint32_t seq = 1; seq <= waiting + 1;) {
        work_request wr = ca.am(to_b, cb, 1 + seq, seq);
        if (seq == waiting + 1) {
            wr.length = 200;
        }
        if (ca.session->post(wr) == client::post_status::posted) {
            ++seq;
        } else {
            a.pump();
            ca.poll();
        }
    }
    const auto until = steady::now() + 5s;
    while (a.logged("connection lost") == 0 && steady::now() < until) {
        a.pump();
        ca.poll();
    }
    ASSERT_EQ(ca.count(completion_status::success), 1 + waiting);
    const auto old_qps = b.qps_to(a);
    const auto later   = steady::now() + 50ms;
    while (steady::now() < later) {
        a.pump(); /* past the reconnect delay: its request goes out */
    }

    /* b's next pass: 256 receives, then the request: b's old QPs go */
    b.pump();
    EXPECT_NE(b.qps_to(a), old_qps) << "b did not reconnect in that pass";
    ASSERT_TRUE(run_until([&] {
        return cb.ams_by_sender()[ca.id].size() >= 1 + waiting;
    })) << b.status();
    std::vector<uint32_t> want(1 + waiting);
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(cb.ams_by_sender()[ca.id], want);
    EXPECT_EQ(b.logged("receive error"), 1u);
    run_for(50ms);
    const auto peers = b.engine->status_json()["peers"];
    EXPECT_EQ(peers[1]["reconnects"], 1) << "the old QP's error broke the new "
                                            "connection: "
                                         << b.status();
    EXPECT_EQ(peers[1]["state"], "connected") << b.status();
}

/* rvtd's loop spins after a client's work only (cpu_policy.h): the agents'
 * own keepalives keep them busy now and then, but serve no client; a
 * client's message serves its sender's agent (work taken) and its
 * receiver's (a message given). */
TEST_F(engine_fixture, keepalives_serve_no_client_and_a_message_serves_both)
{
    agent_options o;
    o.engine.peers.keepalive_interval = 2ms;
    agent_node &a                     = add_agent(o);
    agent_node &b                     = add_agent(o);
    test_client &c                    = attach(a);
    test_client &d                    = attach(b);
    const uint32_t to_b               = peer(c, b);
    ASSERT_TRUE(run_until([&] { return a.qps_to(b).size() == 4; }))
            << a.status();

    /* passes 5 ms apart on the agents' clock: a keepalive is due at
     * every other one */
    size_t busy = 0, served = 0;
    auto t = std::chrono::steady_clock::now();
    for (int pass = 0; pass < 20; ++pass) {
        t += 5ms;
        for (agent_node *n : {&a, &b}) {
            busy += n->engine->progress(t);
            served += n->engine->served_clients();
        }
    }
    EXPECT_GT(busy, 0u) << "no keepalive went either way";
    EXPECT_EQ(served, 0u) << "keepalives counted as a client's work";

    c.post(c.am(to_b, d, 1, 1));
    bool a_served = false, b_served = false;
    ASSERT_TRUE(run_until([&] {
        t += 1ms;
        a.engine->progress(t);
        a_served |= a.engine->served_clients();
        b.engine->progress(t);
        b_served |= b.engine->served_clients();
        poll_clients();
        return c.done.size() == 1 && d.inbound.size() == 1;
    }));
    EXPECT_TRUE(a_served) << "taking the client's message";
    EXPECT_TRUE(b_served) << "giving the message to its client";
}

/* Two agents a and b, connected and idle, their keepalives after 10 ms
 * of silence (1,000 ms to answer); then keepalives_in_a_second() runs a
 * second on their clock, a pass each millisecond, and counts the
 * keepalives both sent. */
class idle_pair : public engine_fixture {
protected:
    agent_node *a = nullptr;
    agent_node *b = nullptr;

    void connect(agent_options o)
    {
        o.engine.peers.keepalive_interval = 10ms;
        o.engine.peers.keepalive_timeout  = 1000ms;
        a                                 = &add_agent(o);
        b                                 = &add_agent(o);
        test_client &c                    = attach(*a);
        attach(*b);
        peer(c, *b);
        ASSERT_TRUE(run_until([&] { return a->qps_to(*b).size() == 4; }))
                << a->status();
    }
    uint64_t keepalives() const
    {
        uint64_t n = 0;
        for (agent_node *x : {a, b}) {
            const auto status = x->engine->status_json();
            for (const auto &p : status["peers"]) {
                n += p["keepalives"].get<uint64_t>();
            }
        }
        return n;
    }
    uint64_t keepalives_in_a_second()
    {
        const uint64_t before = keepalives();
        auto t                = std::chrono::steady_clock::now();
        for (int pass = 0; pass < 1000; ++pass) {
            t += 1ms;
            a->engine->progress(t);
            b->engine->progress(t);
        }
        return keepalives() - before;
    }
};

/* An answered keepalive moves the peer's next one to the interval after
 * the answer: the engine, which asks its peers only when the earliest
 * timer may be due, must hear of that earlier time, or an idle peer is
 * asked every keepalive_timeout instead of every keepalive_interval (and
 * a dead one is found that much later). A keepalive is answered at
 * once, so each agent sends one about every 10 ms (every 1,000 ms if
 * the engine does not hear that the answer moved the timer). */
TEST_F(idle_pair, an_answered_keepalive_brings_the_next_one_after_the_interval)
{
    connect({});
    EXPECT_GE(keepalives_in_a_second(), 20u)
            << "keepalives came keepalive_timeout apart: " << a->status();
}

/* engine_config::keepalive_rate: with more peers than the rate covers at
 * keepalive_interval, an idle peer's keepalive comes every peers / rate
 * seconds. Here a's 2 peers (b and its own node) at a rate of 20 a
 * second: every 100 ms instead of every 10 ms, about 10 a second from
 * each agent (100 or more at 10 ms). */
TEST_F(idle_pair, keepalives_slow_down_past_the_keepalive_rate)
{
    agent_options o;
    o.engine.keepalive_rate = 20;
    connect(o);
    EXPECT_EQ(json_number(a->status(), "keepalive_ms"), 100u);
    const uint64_t sent = keepalives_in_a_second();
    EXPECT_GE(sent, 5u) << a->status();
    EXPECT_LE(sent, 30u) << "keepalives came keepalive_interval apart: "
                         << a->status();
}

} // namespace
} // namespace engine_test
