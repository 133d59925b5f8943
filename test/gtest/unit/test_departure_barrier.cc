/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the departure barrier (src/uct/ib/rvt/agent/engine/
 * departure_barrier.h): a test per rule of its table, with made-up times.
 */
#include "uct/ib/rvt/agent/engine/departure_barrier.h"

#include <gtest/gtest.h>

namespace {

using namespace std::chrono_literals;
using rvt::agent::departure_barrier;
using rvt::agent::time_point;
using dues = departure_barrier::dues;

constexpr auto wait = 500ms;
const time_point t0 = time_point{} + 1h;

TEST(departure_barrier, a_retirement_nobody_was_told_of_is_due_at_once)
{
    departure_barrier b(wait);
    EXPECT_EQ(b.begin(5, 7, {}, t0), (dues{{5, 0}}));
    EXPECT_EQ(b.waiting(), 0u);
    EXPECT_FALSE(b.next_timer());
}

TEST(departure_barrier, a_retirement_is_due_once_every_peer_told_has_heard)
{
    departure_barrier b(wait);
    EXPECT_TRUE(b.begin(5, 7, {1, 2}, t0).empty());
    EXPECT_EQ(b.waiting(), 1u);
    EXPECT_EQ(b.next_timer(), t0 + wait);
    EXPECT_TRUE(b.heard(1, 5, 7).empty()) << "peer 2 has not heard";
    EXPECT_EQ(b.heard(2, 5, 7), (dues{{5, 0}}));
    EXPECT_EQ(b.waiting(), 0u);
    EXPECT_FALSE(b.next_timer());
}

TEST(departure_barrier, an_answer_not_awaited_changes_nothing)
{
    departure_barrier b(wait);
    ASSERT_TRUE(b.begin(5, 7, {1, 2}, t0).empty());
    EXPECT_TRUE(b.heard(3, 5, 7).empty()) << "a peer not told";
    EXPECT_TRUE(b.heard(1, 5, 8).empty()) << "another generation";
    EXPECT_TRUE(b.heard(1, 6, 7).empty()) << "another client";
    ASSERT_TRUE(b.heard(1, 5, 7).empty());
    EXPECT_TRUE(b.heard(1, 5, 7).empty()) << "a repeat";
    EXPECT_EQ(b.waiting(), 1u) << "peer 2 is still awaited";
    EXPECT_EQ(b.heard(2, 5, 7), (dues{{5, 0}}));
    EXPECT_TRUE(b.heard(2, 5, 7).empty()) << "late: nothing waits";
}

TEST(departure_barrier, a_lost_peer_is_awaited_no_more)
{
    departure_barrier b(wait);
    ASSERT_TRUE(b.begin(5, 7, {1}, t0).empty());
    ASSERT_TRUE(b.begin(6, 3, {1, 2}, t0).empty());
    ASSERT_TRUE(b.begin(8, 0, {2}, t0).empty());
    EXPECT_EQ(b.peer_lost(1), (dues{{5, 0}})) << "6 still awaits peer 2";
    EXPECT_EQ(b.peer_lost(2), (dues{{6, 0}, {8, 0}}));
    EXPECT_TRUE(b.peer_lost(3).empty());
    EXPECT_EQ(b.waiting(), 0u);
}

TEST(departure_barrier, a_client_that_detaches_is_answered_by_nobody)
{
    departure_barrier b(wait);
    ASSERT_TRUE(b.begin(5, 7, {1}, t0).empty());
    b.client_gone(5);
    EXPECT_EQ(b.waiting(), 0u);
    EXPECT_TRUE(b.heard(1, 5, 7).empty());
    EXPECT_TRUE(b.tick(t0 + wait).empty());
    b.client_gone(9); /* nothing waits for it */
}

TEST(departure_barrier, the_wait_ends_naming_the_peers_that_had_not_heard)
{
    departure_barrier b(wait);
    ASSERT_TRUE(b.begin(5, 7, {1, 2, 3}, t0).empty());
    ASSERT_TRUE(b.begin(6, 0, {1}, t0 + 100ms).empty());
    ASSERT_TRUE(b.heard(1, 5, 7).empty());
    EXPECT_TRUE(b.tick(t0 + wait - 1ms).empty());
    EXPECT_EQ(b.tick(t0 + wait), (dues{{5, 2}}));
    EXPECT_EQ(b.next_timer(), t0 + 100ms + wait);
    EXPECT_EQ(b.tick(t0 + 100ms + wait), (dues{{6, 1}}));
    EXPECT_FALSE(b.next_timer());
}

TEST(departure_barrier, a_second_retirement_of_an_index_answers_the_first)
{
    departure_barrier b(wait);
    ASSERT_TRUE(b.begin(5, 7, {1, 2}, t0).empty());
    EXPECT_EQ(b.begin(5, 8, {1}, t0 + 1ms), (dues{{5, 2}}))
            << "the first, due, with its two peers unheard";
    EXPECT_TRUE(b.heard(2, 5, 7).empty()) << "the old generation's";
    EXPECT_EQ(b.heard(1, 5, 8), (dues{{5, 0}}));
}

} // namespace
