/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Silent QPs (engine.h): a QP that goes to the error state without the
 * completion that says so, or without any completion at all, must not
 * leave its lane's ops waiting for ever. Driven on the host through real
 * sessions (engine_fixture.h), with the loopback nic's fault injection.
 */
#include "test/gtest/unit/engine_fixture.h"

namespace engine_test {
namespace {

agent_options watched()
{
    agent_options o;
    o.engine.lane_watch_period = 50ms;
    return o;
}

class watchdog : public engine_fixture {
protected:
    /* An AM from `c` to itself, completed and received. */
    void expect_round(test_client &c, uint32_t self, uint64_t wr_id)
    {
        const size_t done = c.done.size(), got = c.inbound.size();
        c.post(c.am(self, c, wr_id, static_cast<uint32_t>(wr_id)));
        ASSERT_TRUE(run_until([&] {
            return c.done.size() == done + 1 && c.inbound.size() == got + 1;
        })) << c.home->status();
        EXPECT_EQ(c.done.back().wr_id, wr_id);
        EXPECT_EQ(c.done.back().status,
                  static_cast<uint32_t>(completion_status::success));
    }
};

TEST_F(watchdog, a_flush_that_is_not_ours_fails_the_peer_and_it_recovers)
{
    agent_node &a       = add_agent(watched());
    test_client &c      = attach(a);
    const uint32_t self = peer(c, a);
    expect_round(c, self, 1);

    /* every loopback QP goes to ERROR at its next WR, and says so only
     * with flushed completions (Debian 12's rxe) */
    for (uint32_t q : a.loopback_qps()) {
        ASSERT_TRUE(a.nic->fail_next(q, IBV_WC_WR_FLUSH_ERR).ok());
    }
    c.post(c.am(self, c, 2, 2));
    ASSERT_TRUE(run_until([&] { return c.done.size() == 2; })) << a.status();
    EXPECT_EQ(c.done[1].status,
              static_cast<uint32_t>(completion_status::failed));
    EXPECT_EQ(c.done[1].detail, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(a.logged("without a flush of ours"), 1u);

    /* the agent rebuilt the QPs: the next message goes through */
    expect_round(c, self, 3);
}

TEST_F(watchdog, a_qp_in_error_without_any_completion_is_found_and_given_up)
{
    agent_node &a       = add_agent(watched());
    test_client &c      = attach(a);
    const uint32_t self = peer(c, a);
    expect_round(c, self, 1);

    /* the QPs go to ERROR and never complete anything again, not even
     * the flush the engine asks for */
    for (uint32_t q : a.loopback_qps()) {
        ASSERT_TRUE(a.nic->break_silently(q).ok());
    }
    c.post(c.am(self, c, 2, 2));
    c.post(c.am(self, c, 3, 3));
    ASSERT_TRUE(run_until([&] { return c.done.size() == 3; }, 5s))
            << "the ops of a silent QP never completed: " << a.status();
    for (size_t i = 1; i < 3; ++i) {
        EXPECT_EQ(c.done[i].wr_id, i + 1) << "in order";
        EXPECT_EQ(c.done[i].status,
                  static_cast<uint32_t>(completion_status::failed));
        EXPECT_EQ(c.done[i].detail, IBV_WC_WR_FLUSH_ERR);
    }
    EXPECT_GE(a.logged("is in the error state with"), 1u);
    EXPECT_GE(a.logged("completing them as flushed"), 1u);

    /* new QPs: the next message goes through */
    expect_round(c, self, 4);
}

TEST_F(watchdog, a_completion_after_its_op_was_given_up_touches_no_other_op)
{
    agent_node &a       = add_agent(watched());
    test_client &c      = attach(a);
    const uint32_t self = peer(c, a);
    expect_round(c, self, 1);

    /* the QPs go silent; the watchdog gives their ops up */
    for (uint32_t q : a.loopback_qps()) {
        ASSERT_TRUE(a.nic->break_late(q).ok());
    }
    c.post(c.am(self, c, 2, 2));
    ASSERT_TRUE(run_until([&] { return c.done.size() == 2; }, 5s))
            << a.status();
    EXPECT_EQ(a.logged("completing them as flushed"), 1u);

    /* on the rebuilt QPs an op waits in flight, in the record op 2 had */
    a.hold(a.loopback_qps(), true);
    c.post(c.am(self, c, 3, 3));
    run_for(100ms);
    ASSERT_EQ(c.done.size(), 2u) << "a held op completed";

    /* now the old QPs' device answers, very late */
    EXPECT_EQ(a.nic->speak_late(), 1u);
    run_for(100ms);
    EXPECT_EQ(c.done.size(), 2u)
            << "op 2's late flush completed op 3: " << a.status();
    EXPECT_EQ(a.logged("for an op given up on before"), 1u);
    EXPECT_NE(a.status().find("\"late_completions\":1,"), std::string::npos)
            << a.status();

    a.hold(a.loopback_qps(), false);
    ASSERT_TRUE(run_until([&] { return c.done.size() == 3; })) << a.status();
    EXPECT_EQ(c.done[2].wr_id, 3u);
    EXPECT_EQ(c.done[2].status,
              static_cast<uint32_t>(completion_status::success));
    EXPECT_EQ(a.logged("connection lost"), 1u) << "only the first loss";
}

/* The watchdog judges a draining lane by what it did since the flush: a
 * lane held for a long time before the connection was lost must get its
 * flush completions, not be given up at the first look after the flush
 * (which freed op records whose WRs the device still held: the chaos
 * run's "completing them as flushed" at once, then every real flush
 * dropped as late). */
TEST_F(watchdog, a_lane_busy_before_the_flush_gets_its_flush_completions)
{
    agent_options o;
    o.engine.lane_watch_period        = 1ms; /* a look every pass */
    o.engine.peers.keepalive_interval = 20ms;
    o.engine.peers.keepalive_timeout  = 60ms;
    o.engine.peers.reconnect_delay    = 10ms;
    agent_node &a                     = add_agent(o);
    /* b keeps rvtd's keepalive times: its own timeout (a's keepalives
     * wait on a's held QPs) must not end the connection first, which a
     * slow pass on a busy host let it do (the loss came to a as "peer
     * started a new connection") */
    agent_node &b       = add_agent();
    test_client &c      = attach(a);
    test_client &d      = attach(b);
    const uint32_t to_b = peer(c, b);
    ASSERT_TRUE(run_until([&] { return a.qps_to(b).size() == 4; }))
            << a.status();
    c.post(c.am(to_b, d, 1, 1));
    ASSERT_TRUE(run_until([&] { return c.done.size() == 1; }));

    /* nothing moves either way: ops wait, then the keepalive times out */
    a.hold(a.qps_to(b), true);
    b.hold(b.qps_to(a), true);
    for (uint64_t i = 2; i < 6; ++i) {
        c.post(c.am(to_b, d, i, static_cast<uint32_t>(i)));
    }
    run_for(20ms); /* the watchdog has seen the lane busy, nothing retired */
    ASSERT_EQ(c.done.size(), 1u) << a.status();
    /* one pass where the keepalive's timeout and the watchdog's next
     * look fall together, as they do when a pass is slow (under TCG a
     * pass takes tens of ms): the flush is asked for, and its
     * completions are in the CQ for the next pass to read */
    a.engine->progress(std::chrono::steady_clock::now() + 1s);
    ASSERT_TRUE(run_until([&] { return c.done.size() == 5; }, 5s))
            << a.status();
    for (size_t i = 1; i < 5; ++i) {
        EXPECT_EQ(c.done[i].status,
                  static_cast<uint32_t>(completion_status::failed));
        EXPECT_EQ(c.done[i].detail, IBV_WC_WR_FLUSH_ERR);
    }
    EXPECT_EQ(a.logged("no answer to a keepalive"), 1u);
    EXPECT_EQ(a.logged("completing them as flushed"), 0u)
            << "given up although its flush had come";
    EXPECT_NE(a.status().find("\"late_completions\":0,"), std::string::npos)
            << a.status();
}

TEST_F(watchdog, a_slow_lane_whose_qp_is_fine_is_left_alone)
{
    agent_node &a       = add_agent(watched());
    test_client &c      = attach(a);
    const uint32_t self = peer(c, a);
    expect_round(c, self, 1);

    /* no completion for many watch periods, but the QPs are in RTS: a
     * slow link or a busy peer, not a failure */
    a.hold(a.loopback_qps(), true);
    c.post(c.am(self, c, 2, 2));
    run_for(400ms);
    EXPECT_EQ(c.done.size(), 1u) << "a held op completed";
    a.hold(a.loopback_qps(), false);
    ASSERT_TRUE(run_until([&] { return c.done.size() == 2; })) << a.status();
    EXPECT_EQ(c.done[1].status,
              static_cast<uint32_t>(completion_status::success));
    EXPECT_EQ(a.logged("error state"), 0u);
}

} // namespace
} // namespace engine_test
