/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the bound on failed credentials per sending host
 * (agent/peers/sender_gate.h), one or more per row of its table. Time is a
 * number the test advances.
 */
#include "uct/ib/rvt/agent/peers/sender_gate.h"

#include <gtest/gtest.h>

using rvt::agent::sender_gate;
using rvt::agent::sender_gate_config;
using namespace std::chrono_literals;

namespace {

const sender_gate::time_point t0 = sender_gate::time_point{} + 1h;

sender_gate::gid host(uint8_t last)
{
    sender_gate::gid g{};
    g[10] = 0xff;
    g[11] = 0xff;
    g[15] = last;
    return g;
}

sender_gate_config three_in_10s_hold_5s()
{
    return {.max_failures = 3, .window = 10s, .hold = 5s, .capacity = 8};
}

TEST(sender_gate, a_sender_is_admitted_until_max_failures_then_held)
{
    sender_gate g(three_in_10s_hold_5s());
    EXPECT_TRUE(g.admit(host(1), t0));
    EXPECT_FALSE(g.failed(host(1), t0));
    EXPECT_TRUE(g.admit(host(1), t0 + 1ms));
    EXPECT_FALSE(g.failed(host(1), t0 + 1ms));
    EXPECT_TRUE(g.admit(host(1), t0 + 2ms));
    EXPECT_TRUE(g.failed(host(1), t0 + 2ms)) << "the first hold is logged";
    EXPECT_EQ(g.holds(), 1u);
    for (int i = 0; i < 1000; ++i) {
        EXPECT_FALSE(g.admit(host(1), t0 + 3ms));
    }
    EXPECT_EQ(g.held_back(), 1000u);
    /* another host is not held for it */
    EXPECT_TRUE(g.admit(host(2), t0 + 3ms));
}

TEST(sender_gate, a_hold_ends_after_hold_and_the_count_starts_again)
{
    sender_gate g(three_in_10s_hold_5s());
    for (int i = 0; i < 3; ++i) {
        (void)g.failed(host(1), t0);
    }
    EXPECT_FALSE(g.admit(host(1), t0 + 5s - 1ms));
    EXPECT_TRUE(g.admit(host(1), t0 + 5s));
    EXPECT_EQ(g.remembered(), 0u) << "served its hold: forgotten";
    EXPECT_FALSE(g.failed(host(1), t0 + 5s));
    EXPECT_TRUE(g.admit(host(1), t0 + 5s)) << "one failure is not a hold";
}

TEST(sender_gate, failures_further_apart_than_the_window_never_hold)
{
    sender_gate g(three_in_10s_hold_5s());
    EXPECT_FALSE(g.failed(host(1), t0));
    EXPECT_FALSE(g.failed(host(1), t0 + 6s));
    /* the first is more than 10 s old: the count starts at this one */
    EXPECT_FALSE(g.failed(host(1), t0 + 10s + 1ms));
    EXPECT_TRUE(g.admit(host(1), t0 + 10s + 2ms));
    EXPECT_FALSE(g.failed(host(1), t0 + 11s));
    EXPECT_TRUE(g.failed(host(1), t0 + 12s)) << "three within 10 s";
    EXPECT_FALSE(g.admit(host(1), t0 + 12s));
}

TEST(sender_gate, a_credential_that_passes_forgets_the_senders_failures)
{
    sender_gate g(three_in_10s_hold_5s());
    (void)g.failed(host(1), t0);
    (void)g.failed(host(1), t0);
    g.passed(host(1));
    EXPECT_EQ(g.remembered(), 0u);
    EXPECT_FALSE(g.failed(host(1), t0));
    EXPECT_FALSE(g.failed(host(1), t0));
    EXPECT_TRUE(g.admit(host(1), t0));
}

TEST(sender_gate, a_failure_while_held_neither_extends_nor_counts)
{
    sender_gate g(three_in_10s_hold_5s());
    for (int i = 0; i < 3; ++i) {
        (void)g.failed(host(1), t0);
    }
    /* a known peer's datagram is checked while its host is held */
    EXPECT_FALSE(g.failed(host(1), t0 + 4s));
    EXPECT_EQ(g.holds(), 1u);
    EXPECT_TRUE(g.admit(host(1), t0 + 5s)) << "the hold was not extended";
}

TEST(sender_gate, at_capacity_the_sender_failed_longest_ago_is_forgotten)
{
    sender_gate_config c = three_in_10s_hold_5s();
    c.capacity           = 2;
    sender_gate g(c);
    (void)g.failed(host(1), t0);
    (void)g.failed(host(2), t0 + 1ms);
    (void)g.failed(host(1), t0 + 2ms); /* host 1 failed last now */
    (void)g.failed(host(3), t0 + 3ms);
    EXPECT_EQ(g.remembered(), 2u);
    EXPECT_EQ(g.evicted(), 1u);
    /* host 2 was forgotten, host 1 kept its two failures */
    EXPECT_TRUE(g.failed(host(1), t0 + 4ms));
    EXPECT_FALSE(g.admit(host(1), t0 + 4ms));
    EXPECT_FALSE(g.failed(host(2), t0 + 5ms));
    EXPECT_FALSE(g.failed(host(2), t0 + 5ms));
    EXPECT_TRUE(g.admit(host(2), t0 + 5ms)) << "its first failure was lost";
}

TEST(sender_gate, holds_are_logged_at_the_1st_2nd_4th_8th)
{
    sender_gate_config c = three_in_10s_hold_5s();
    c.max_failures       = 1;
    c.capacity           = 100;
    sender_gate g(c);
    std::vector<int> logged;
    for (int i = 1; i <= 9; ++i) {
        if (g.failed(host(static_cast<uint8_t>(i)), t0)) {
            logged.push_back(i);
        }
    }
    EXPECT_EQ(logged, (std::vector<int>{1, 2, 4, 8}));
}

} // namespace
