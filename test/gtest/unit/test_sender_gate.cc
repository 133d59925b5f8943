/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of whom the handshake spends credential checks on
 * (agent/peers/sender_gate.h), one or more per row of its table. Time is
 * a number the test advances.
 */
#include "uct/ib/rvt/agent/peers/sender_gate.h"

#include <gtest/gtest.h>

#include <vector>

using rvt::agent::sender_gate;
using rvt::agent::sender_gate_config;
using verdict = sender_gate::verdict;
using namespace std::chrono_literals;

namespace {

const sender_gate::time_point t0 = sender_gate::time_point{} + 1h;

/* UD QP `qp` on host `host` */
sender_gate::sender sender(uint8_t host, uint32_t qp = 0x100)
{
    sender_gate::sender s{};
    s.gid[10] = 0xff;
    s.gid[11] = 0xff;
    s.gid[15] = host;
    s.qpn     = qp;
    return s;
}

sender_gate_config three_in_10s_hold_5s()
{
    return {.max_failures = 3,
            .window       = 10s,
            .hold         = 5s,
            .capacity     = 8,
            .burst        = 100,
            .refill       = 10ms,
            .pass_time    = 1000us};
}

/* admit, then fail: a datagram whose check failed */
bool fails(sender_gate &g, const sender_gate::sender &s,
           sender_gate::time_point now)
{
    EXPECT_EQ(g.admit(s, false, now), verdict::check);
    return g.failed(s, now);
}

TEST(sender_gate, a_sender_is_admitted_until_max_failures_then_held)
{
    sender_gate g(three_in_10s_hold_5s());
    EXPECT_FALSE(fails(g, sender(1), t0));
    EXPECT_FALSE(fails(g, sender(1), t0 + 1ms));
    EXPECT_TRUE(fails(g, sender(1), t0 + 2ms)) << "the first hold is logged";
    EXPECT_EQ(g.holds(), 1u);
    for (int i = 0; i < 1000; ++i) {
        EXPECT_EQ(g.admit(sender(1), false, t0 + 3ms), verdict::held);
    }
    EXPECT_EQ(g.held_back(), 1000u);
    /* another host is not held for it */
    EXPECT_EQ(g.admit(sender(2), false, t0 + 3ms), verdict::check);
}

/* A sender is a UD QP, not its host: a user's wrong keys hold that user's
 * QP, and the agent on the same host (another QP) is still checked. */
TEST(sender_gate, another_qp_on_the_held_senders_host_is_not_held)
{
    sender_gate g(three_in_10s_hold_5s());
    for (int i = 0; i < 3; ++i) {
        (void)fails(g, sender(1, 0x999), t0);
    }
    EXPECT_EQ(g.admit(sender(1, 0x999), false, t0 + 1ms), verdict::held);
    EXPECT_EQ(g.admit(sender(1, 0x100), false, t0 + 1ms), verdict::check);
    EXPECT_EQ(g.admit(sender(1, 0x100), true, t0 + 1ms), verdict::check);
}

TEST(sender_gate, a_hold_ends_after_hold_and_the_count_starts_again)
{
    sender_gate g(three_in_10s_hold_5s());
    for (int i = 0; i < 3; ++i) {
        (void)fails(g, sender(1), t0);
    }
    EXPECT_EQ(g.admit(sender(1), false, t0 + 5s - 1ms), verdict::held);
    EXPECT_EQ(g.admit(sender(1), false, t0 + 5s), verdict::check);
    EXPECT_FALSE(g.failed(sender(1), t0 + 5s));
    EXPECT_EQ(g.admit(sender(1), false, t0 + 5s), verdict::check)
            << "one failure is not a hold";
    EXPECT_FALSE(fails(g, sender(1), t0 + 5s));
    EXPECT_TRUE(fails(g, sender(1), t0 + 5s)) << "three again: held again";
}

TEST(sender_gate, failures_further_apart_than_the_window_never_hold)
{
    sender_gate g(three_in_10s_hold_5s());
    EXPECT_FALSE(fails(g, sender(1), t0));
    EXPECT_FALSE(fails(g, sender(1), t0 + 6s));
    /* the first is more than 10 s old: the count starts at this one */
    EXPECT_FALSE(fails(g, sender(1), t0 + 10s + 1ms));
    EXPECT_EQ(g.admit(sender(1), false, t0 + 10s + 2ms), verdict::check);
    EXPECT_FALSE(fails(g, sender(1), t0 + 11s));
    EXPECT_TRUE(fails(g, sender(1), t0 + 12s)) << "three within 10 s";
    EXPECT_EQ(g.admit(sender(1), false, t0 + 12s), verdict::held);
}

TEST(sender_gate, a_credential_that_passes_forgets_the_failures_not_the_bucket)
{
    sender_gate_config c = three_in_10s_hold_5s();
    c.burst              = 4;
    sender_gate g(c);
    (void)fails(g, sender(1), t0);
    (void)fails(g, sender(1), t0);
    EXPECT_EQ(g.admit(sender(1), true, t0), verdict::check);
    g.passed(sender(1));
    EXPECT_EQ(g.admit(sender(1), true, t0), verdict::check);
    g.passed(sender(1));
    EXPECT_EQ(g.admit(sender(1), true, t0), verdict::throttled)
            << "4 checks taken: a believed sender is bounded too";
    EXPECT_FALSE(g.failed(sender(1), t0));
    EXPECT_FALSE(g.failed(sender(1), t0)) << "the count started again";
    EXPECT_EQ(g.holds(), 0u);
}

TEST(sender_gate, a_failure_while_held_neither_extends_nor_counts)
{
    sender_gate g(three_in_10s_hold_5s());
    for (int i = 0; i < 3; ++i) {
        (void)fails(g, sender(1), t0);
    }
    EXPECT_FALSE(g.failed(sender(1), t0 + 4s));
    EXPECT_EQ(g.holds(), 1u);
    EXPECT_EQ(g.admit(sender(1), false, t0 + 5s), verdict::check)
            << "the hold was not extended";
}

TEST(sender_gate, a_failure_of_a_sender_not_remembered_remembers_it)
{
    sender_gate g(three_in_10s_hold_5s());
    EXPECT_FALSE(g.failed(sender(1), t0));
    EXPECT_EQ(g.remembered(), 1u);
    EXPECT_FALSE(g.failed(sender(1), t0));
    EXPECT_TRUE(g.failed(sender(1), t0));
    EXPECT_EQ(g.admit(sender(1), false, t0), verdict::held);
}

/* ---- the bucket ----------------------------------------------------- */

TEST(sender_gate, a_sender_gets_burst_checks_then_one_a_refill)
{
    sender_gate_config c = three_in_10s_hold_5s();
    c.burst              = 4;
    c.refill             = 250ms;
    sender_gate g(c);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(g.admit(sender(1), true, t0), verdict::check) << i;
    }
    EXPECT_EQ(g.admit(sender(1), true, t0), verdict::throttled);
    EXPECT_EQ(g.admit(sender(1), true, t0 + 249ms), verdict::throttled);
    EXPECT_EQ(g.admit(sender(1), true, t0 + 250ms), verdict::check);
    EXPECT_EQ(g.admit(sender(1), true, t0 + 250ms), verdict::throttled);
    EXPECT_EQ(g.throttled(), 3u);
    /* known or not, alike; another sender has a bucket of its own */
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(g.admit(sender(1, 0x200), false, t0), verdict::check) << i;
    }
    EXPECT_EQ(g.admit(sender(1, 0x200), false, t0), verdict::throttled);
}

TEST(sender_gate, a_bucket_fills_up_to_burst_and_no_further)
{
    sender_gate_config c = three_in_10s_hold_5s();
    c.burst              = 4;
    c.refill             = 250ms;
    sender_gate g(c);
    EXPECT_EQ(g.admit(sender(1), true, t0), verdict::check);
    /* an hour of silence is worth 4, not 14,400 */
    const auto later = t0 + 1h;
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(g.admit(sender(1), true, later), verdict::check) << i;
    }
    EXPECT_EQ(g.admit(sender(1), true, later), verdict::throttled);
}

/* The defaults against one peer reconnecting as fast as the handshake
 * lets it (peer_connection.h, peer_config's defaults): a lost connection
 * every second, each attempt a request resent at 250, 500, 1000 ms and
 * every one answered, the peer's own request crossing ours. Nothing of
 * it is throttled. */
TEST(sender_gate, a_peers_reconnect_storm_at_the_handshakes_pace_goes_through)
{
    sender_gate g(sender_gate_config{});
    auto now = t0;
    for (int attempt = 0; attempt < 60; ++attempt) {
        for (auto resend : {0ms, 250ms, 750ms}) {
            /* its request, and its reply to ours */
            EXPECT_EQ(g.admit(sender(1), true, now + resend), verdict::check)
                    << "attempt " << attempt;
            g.passed(sender(1));
            EXPECT_EQ(g.admit(sender(1), true, now + resend), verdict::check)
                    << "attempt " << attempt;
            g.passed(sender(1));
        }
        now += 1750ms; /* the last resend, then reconnect_delay */
    }
    EXPECT_EQ(g.throttled(), 0u);
}

/* ---- memory: capacity ------------------------------------------------ */

TEST(sender_gate, at_capacity_entries_that_carry_nothing_go_first)
{
    sender_gate_config c = three_in_10s_hold_5s();
    c.capacity           = 2;
    c.burst              = 2;
    c.refill             = 100ms;
    sender_gate g(c);
    (void)fails(g, sender(1), t0); /* a failure: 10 s */
    EXPECT_EQ(g.admit(sender(2), false, t0), verdict::check); /* 100 ms */
    EXPECT_EQ(g.admit(sender(3), false, t0 + 100ms), verdict::check);
    EXPECT_EQ(g.evicted(), 0u) << "sender 2's bucket was full again";
    EXPECT_EQ(g.remembered(), 2u);
    /* sender 1 kept its failure */
    (void)fails(g, sender(1), t0 + 200ms);
    EXPECT_TRUE(fails(g, sender(1), t0 + 200ms));
}

TEST(sender_gate, at_capacity_the_sender_seen_longest_ago_and_not_held_goes)
{
    sender_gate_config c = three_in_10s_hold_5s();
    c.capacity           = 2;
    sender_gate g(c);
    (void)fails(g, sender(1), t0);
    (void)fails(g, sender(2), t0 + 1ms);
    (void)fails(g, sender(1), t0 + 2ms); /* sender 1 seen last now */
    EXPECT_EQ(g.admit(sender(3), false, t0 + 3ms), verdict::check);
    EXPECT_EQ(g.remembered(), 2u);
    EXPECT_EQ(g.evicted(), 1u);
    /* sender 2 was forgotten, sender 1 kept its two failures */
    EXPECT_TRUE(g.failed(sender(1), t0 + 4ms));
    EXPECT_FALSE(fails(g, sender(2), t0 + 5ms));
    EXPECT_FALSE(fails(g, sender(2), t0 + 5ms));
    EXPECT_EQ(g.admit(sender(2), false, t0 + 5ms), verdict::check)
            << "its first failure was lost";
}

/* Every sender remembered held: a flood of new senders cannot end a hold
 * before its time (each is refused unchecked, crowded); a peer the
 * engine has (known) takes the place of the hold that ends first; what
 * holds nothing goes before a hold, a stranger's before a peer's; when
 * the holds end, new senders are checked again. */
TEST(sender_gate, a_flood_of_new_senders_never_ends_a_hold_early)
{
    sender_gate_config c = three_in_10s_hold_5s();
    c.capacity           = 3;
    sender_gate g(c);
    for (uint8_t h = 1; h <= 3; ++h) {
        for (int i = 0; i < 3; ++i) {
            (void)fails(g, sender(h), t0 + h * 1ms);
        }
    }
    for (uint32_t q = 0; q < 5000; ++q) {
        ASSERT_EQ(g.admit(sender(9, 0x1000 + q), false, t0 + 1s),
                  verdict::crowded);
    }
    EXPECT_EQ(g.crowded(), 5000u);
    EXPECT_EQ(g.evicted(), 0u);
    for (uint8_t h = 1; h <= 3; ++h) {
        EXPECT_EQ(g.admit(sender(h), false, t0 + 1s), verdict::held);
    }
    /* a known peer is never crowded out: the hold ending first goes */
    EXPECT_EQ(g.admit(sender(7), true, t0 + 2s), verdict::check);
    EXPECT_EQ(g.evicted(), 1u);
    /* a new sender takes the peer's place (it holds nothing), the next
     * one that sender's, never a hold */
    EXPECT_EQ(g.admit(sender(9, 1), false, t0 + 2s), verdict::check);
    EXPECT_EQ(g.admit(sender(9, 2), false, t0 + 2s), verdict::check);
    EXPECT_EQ(g.evicted(), 3u);
    EXPECT_EQ(g.admit(sender(2), false, t0 + 2s), verdict::held);
    EXPECT_EQ(g.admit(sender(3), false, t0 + 2s), verdict::held);
    EXPECT_EQ(g.admit(sender(9, 1), false, t0 + 2s), verdict::check)
            << "forgotten: a new sender again";
    EXPECT_EQ(g.evicted(), 4u);
    EXPECT_EQ(g.remembered(), 3u);
    /* sender 2's hold ends at t0 + 2 ms + 5 s */
    EXPECT_EQ(g.admit(sender(2), false, t0 + 5s + 2ms), verdict::check);
}

TEST(sender_gate, at_capacity_a_strangers_entry_goes_before_a_peers)
{
    sender_gate_config c = three_in_10s_hold_5s();
    c.capacity           = 2;
    sender_gate g(c);
    EXPECT_EQ(g.admit(sender(1), true, t0), verdict::check);
    EXPECT_EQ(g.admit(sender(2), false, t0 + 1ms), verdict::check);
    /* sender 1 was seen longer ago, but it is a peer the engine has */
    EXPECT_EQ(g.admit(sender(3), false, t0 + 2ms), verdict::check);
    EXPECT_EQ(g.admit(sender(4), true, t0 + 3ms), verdict::check);
    EXPECT_EQ(g.evicted(), 2u);
    /* senders 2 and 3 went: 1 still has the token it took */
    for (int i = 0; i < 99; ++i) {
        EXPECT_EQ(g.admit(sender(1), true, t0 + 3ms), verdict::check) << i;
    }
    EXPECT_EQ(g.admit(sender(1), true, t0 + 3ms), verdict::throttled);
}

/* ---- the pass --------------------------------------------------------- */

TEST(sender_gate, a_pass_is_open_until_its_checks_took_pass_time)
{
    sender_gate g(three_in_10s_hold_5s()); /* 1000 us */
    g.pass_started();
    EXPECT_TRUE(g.pass_open());
    g.checked(600us);
    EXPECT_TRUE(g.pass_open());
    g.checked(400us);
    EXPECT_FALSE(g.pass_open());
    EXPECT_EQ(g.passes_cut(), 1u);
    g.checked(5ms);
    EXPECT_EQ(g.passes_cut(), 1u) << "one cut a pass";
    g.pass_started();
    EXPECT_TRUE(g.pass_open()) << "the next pass starts at 0";
    g.checked(999us);
    EXPECT_TRUE(g.pass_open());
    EXPECT_EQ(g.passes_cut(), 1u);
}

TEST(sender_gate, holds_are_logged_at_the_1st_2nd_4th_8th)
{
    sender_gate_config c = three_in_10s_hold_5s();
    c.max_failures       = 1;
    c.capacity           = 100;
    sender_gate g(c);
    std::vector<int> logged;
    for (int i = 1; i <= 9; ++i) {
        if (fails(g, sender(static_cast<uint8_t>(i)), t0)) {
            logged.push_back(i);
        }
    }
    EXPECT_EQ(logged, (std::vector<int>{1, 2, 4, 8}));
}

} // namespace
