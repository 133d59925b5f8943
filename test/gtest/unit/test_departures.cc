/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the departed-clients tables (src/uct/ib/rvt/agent/
 * departures.h): every transition of its two tables, with made-up times.
 */
#include "uct/ib/rvt/agent/engine/departures.h"

#include <gtest/gtest.h>

namespace {

using namespace std::chrono_literals;
using rvt::agent::departures;
using rvt::agent::time_point;

constexpr auto memory = 60s;
const time_point t0   = time_point{} + 1h;

TEST(departures, a_stale_destination_is_told_once_per_peer)
{
    departures d(memory);
    EXPECT_TRUE(d.stale(1, 5, 7, t0));
    EXPECT_FALSE(d.stale(1, 5, 7, t0 + 1s)) << "told already";
    EXPECT_TRUE(d.stale(2, 5, 7, t0)) << "another peer is told too";
    EXPECT_TRUE(d.stale(1, 5, 8, t0)) << "another generation is news";
    EXPECT_TRUE(d.stale(1, 6, 7, t0)) << "another index is news";
    EXPECT_EQ(d.told_count(), 4u);
}

TEST(departures, a_reconnected_peer_is_told_again)
{
    departures d(memory);
    ASSERT_TRUE(d.stale(1, 5, 7, t0));
    ASSERT_TRUE(d.stale(2, 5, 7, t0));
    d.peer_connected(1);
    EXPECT_TRUE(d.stale(1, 5, 7, t0 + 1s));
    EXPECT_FALSE(d.stale(2, 5, 7, t0 + 1s)) << "only that peer forgot";
}

TEST(departures, an_attachment_live_again_departs_anew)
{
    departures d(memory);
    ASSERT_TRUE(d.stale(1, 5, 7, t0));
    ASSERT_TRUE(d.stale(2, 5, 7, t0));
    ASSERT_TRUE(d.stale(1, 5, 8, t0));
    d.reattached(5, 7); /* the generation wrapped: (5, 7) is live again */
    EXPECT_TRUE(d.stale(1, 5, 7, t0 + 1s));
    EXPECT_TRUE(d.stale(2, 5, 7, t0 + 1s));
    EXPECT_FALSE(d.stale(1, 5, 8, t0 + 1s)) << "another generation stays";
}

TEST(departures, a_departure_heard_fails_that_destination_only)
{
    departures d(memory);
    EXPECT_FALSE(d.is_gone(1, 5, 7));
    EXPECT_TRUE(d.gone(1, 5, 7, t0));
    EXPECT_FALSE(d.gone(1, 5, 7, t0 + 1s)) << "a repeat is no news";
    EXPECT_TRUE(d.is_gone(1, 5, 7));
    EXPECT_FALSE(d.is_gone(1, 5, 8)) << "the index's next holder";
    EXPECT_FALSE(d.is_gone(2, 5, 7)) << "another peer's client";
    EXPECT_FALSE(d.is_gone(1, 4, 7));
}

TEST(departures, both_tables_forget_after_their_memory)
{
    departures d(memory);
    EXPECT_FALSE(d.next_timer());
    ASSERT_TRUE(d.stale(1, 5, 7, t0));
    ASSERT_TRUE(d.gone(2, 3, 4, t0 + 10s));
    EXPECT_EQ(d.next_timer(), t0 + memory);
    d.tick(t0 + memory - 1ms);
    EXPECT_TRUE(d.is_gone(2, 3, 4));
    EXPECT_FALSE(d.stale(1, 5, 7, t0 + memory - 1ms));
    d.tick(t0 + memory);
    EXPECT_EQ(d.told_count(), 0u);
    EXPECT_TRUE(d.is_gone(2, 3, 4));
    EXPECT_EQ(d.next_timer(), t0 + 10s + memory);
    d.tick(t0 + 10s + memory);
    EXPECT_FALSE(d.is_gone(2, 3, 4));
    EXPECT_FALSE(d.next_timer());
    EXPECT_TRUE(d.stale(1, 5, 7, t0 + 2 * memory)) << "told again";
}

TEST(departures, a_key_told_again_is_kept_for_its_new_time)
{
    departures d(memory);
    ASSERT_TRUE(d.stale(1, 5, 7, t0));
    d.peer_connected(1);
    ASSERT_TRUE(d.stale(1, 5, 7, t0 + 30s));
    /* the first entry's time passes: the second one stays */
    d.tick(t0 + memory);
    EXPECT_FALSE(d.stale(1, 5, 7, t0 + memory));
    d.tick(t0 + 30s + memory);
    EXPECT_TRUE(d.stale(1, 5, 7, t0 + 30s + memory));
}

} // namespace
