/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the attach server's gate on accepting
 * (agent/attach/accept_gate.h), one or more per row of its table. Time is a
 * number the test advances.
 */
#include "uct/ib/rvt/agent/attach/accept_gate.h"

#include <gtest/gtest.h>

#include <string>

using rvt::agent::accept_gate;
using namespace std::chrono_literals;

namespace {

const accept_gate::time_point t0 = accept_gate::time_point{} + 1h;

TEST(accept_gate, open_until_max_unattached_then_full)
{
    accept_gate g(3, 100ms);
    EXPECT_TRUE(g.accepting());
    EXPECT_EQ(g.accepted(), "");
    EXPECT_EQ(g.accepted(), "");
    EXPECT_TRUE(g.accepting());
    const std::string note = g.accepted();
    EXPECT_FALSE(g.accepting());
    EXPECT_TRUE(g.full());
    EXPECT_EQ(g.unattached(), 3u);
    EXPECT_EQ(note, "attach server: 3 connections have not attached, "
                    "max-unattached (3): accepting no more until one "
                    "attaches or closes (1 so far)");
    EXPECT_FALSE(g.next_timer()) << "a full gate needs no timer";
}

TEST(accept_gate, settled_below_the_bound_opens_again)
{
    accept_gate g(2, 100ms);
    (void)g.accepted();
    (void)g.accepted();
    ASSERT_FALSE(g.accepting());
    g.settled();
    EXPECT_TRUE(g.accepting());
    EXPECT_EQ(g.unattached(), 1u);
    EXPECT_EQ(g.times_full(), 1u);
}

TEST(accept_gate, each_time_full_is_counted_logged_at_1_2_4)
{
    accept_gate g(1, 100ms);
    std::vector<uint64_t> logged;
    for (uint64_t i = 1; i <= 9; ++i) {
        if (!g.accepted().empty()) {
            logged.push_back(i);
        }
        g.settled();
    }
    EXPECT_EQ(g.times_full(), 9u);
    EXPECT_EQ(logged, (std::vector<uint64_t>{1, 2, 4, 8}));
}

TEST(accept_gate, out_of_fds_closes_until_the_retry_time)
{
    accept_gate g(8, 100ms);
    const std::string note = g.out_of_fds(t0, "Too many open files");
    EXPECT_EQ(note, "attach server: accept failed: Too many open files: "
                    "accepting no more until a connection closes, or for "
                    "100 ms (1 so far)");
    EXPECT_FALSE(g.accepting());
    ASSERT_TRUE(g.next_timer());
    EXPECT_EQ(*g.next_timer(), t0 + 100ms);
    g.tick(t0 + 99ms);
    EXPECT_FALSE(g.accepting());
    g.tick(t0 + 100ms);
    EXPECT_TRUE(g.accepting());
    EXPECT_FALSE(g.next_timer());
}

TEST(accept_gate, an_fd_freed_opens_at_once)
{
    accept_gate g(8, 100ms);
    (void)g.out_of_fds(t0, "Too many open files");
    g.fd_freed();
    EXPECT_TRUE(g.accepting());
    EXPECT_FALSE(g.next_timer());
}

TEST(accept_gate, fd_shortages_are_counted_logged_at_1_2_4)
{
    accept_gate g(8, 100ms);
    size_t lines = 0;
    for (int i = 0; i < 100; ++i) {
        lines += !g.out_of_fds(t0 + i * 100ms, "Too many open files").empty();
    }
    EXPECT_EQ(g.fd_shortages(), 100u);
    EXPECT_EQ(lines, 7u) << "1, 2, 4, 8, 16, 32, 64";
}

TEST(accept_gate, full_and_out_of_fds_both_must_end)
{
    accept_gate g(1, 100ms);
    (void)g.accepted();
    (void)g.out_of_fds(t0, "Too many open files");
    g.fd_freed();
    EXPECT_FALSE(g.accepting()) << "still full";
    g.settled();
    EXPECT_TRUE(g.accepting());
}

} // namespace
