/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the peers' timer heap (src/uct/ib/rvt/agent/peers/
 * peer_timers.h): a test per rule of its table, with made-up times.
 */
#include "uct/ib/rvt/agent/peers/peer_timers.h"

#include <gtest/gtest.h>

#include <random>

namespace {

using namespace std::chrono_literals;
using rvt::agent::peer_timers;
using time_point = peer_timers::time_point;
using peers      = std::vector<uint32_t>;

const time_point t0 = time_point{} + 1h;

TEST(peer_timers, nothing_noted_is_nothing_due)
{
    peer_timers h;
    EXPECT_FALSE(h.next());
    EXPECT_TRUE(h.take_due(t0 + 1h).empty());
    h.note(3, std::nullopt);
    EXPECT_FALSE(h.next()) << "a peer without a timer has no entry";
}

TEST(peer_timers, peers_come_due_in_order_and_only_when_due)
{
    peer_timers h;
    h.note(1, t0 + 30ms);
    h.note(2, t0 + 10ms);
    h.note(7, t0 + 20ms);
    EXPECT_EQ(h.next(), t0 + 10ms);
    EXPECT_TRUE(h.take_due(t0 + 5ms).empty());
    EXPECT_EQ(h.take_due(t0 + 20ms), (peers{2, 7}));
    EXPECT_EQ(h.next(), t0 + 30ms);
    EXPECT_EQ(h.take_due(t0 + 1h), (peers{1}));
    EXPECT_FALSE(h.next());
}

TEST(peer_timers, a_timer_that_moves_later_keeps_its_early_entry)
{
    peer_timers h;
    h.note(4, t0 + 10ms);
    h.note(4, t0 + 50ms); /* traffic put its keepalive off */
    EXPECT_EQ(h.entries(), 1u) << "no entry for a later time";
    EXPECT_EQ(h.next(), t0 + 10ms);
    EXPECT_EQ(h.take_due(t0 + 10ms), (peers{4}))
            << "the engine asks it and notes its real time";
    h.note(4, t0 + 50ms);
    EXPECT_EQ(h.next(), t0 + 50ms);
}

TEST(peer_timers, a_timer_that_moves_earlier_is_due_then_and_once)
{
    peer_timers h;
    h.note(4, t0 + 50ms);
    h.note(4, t0 + 10ms);
    EXPECT_EQ(h.next(), t0 + 10ms);
    EXPECT_EQ(h.take_due(t0 + 10ms), (peers{4}));
    EXPECT_FALSE(h.next()) << "the stale entry went with it";
    EXPECT_EQ(h.entries(), 0u);
    EXPECT_TRUE(h.take_due(t0 + 1h).empty()) << "never due twice";
}

TEST(peer_timers, a_peer_taken_is_due_again_only_once_noted)
{
    peer_timers h;
    h.note(9, t0);
    EXPECT_EQ(h.take_due(t0), (peers{9}));
    EXPECT_TRUE(h.take_due(t0 + 1h).empty());
    h.note(9, t0 + 1s);
    EXPECT_EQ(h.take_due(t0 + 1h), (peers{9}));
}

/* What holds: next() is never later than the earliest timer, whatever
 * the order of notes; checked against the timers themselves. */
TEST(peer_timers, next_is_never_later_than_the_earliest_timer)
{
    std::mt19937 rng(12345);
    peer_timers h;
    std::vector<std::optional<time_point>> timer(64);
    time_point now = t0;
    for (int step = 0; step < 20000; ++step) {
        const uint32_t p = rng() % timer.size();
        if (rng() % 8 == 0) {
            timer[p].reset();
        } else {
            timer[p] = now + std::chrono::milliseconds(rng() % 100);
        }
        h.note(p, timer[p]);
        if (rng() % 4 == 0) {
            now += std::chrono::milliseconds(rng() % 20);
            for (uint32_t q : h.take_due(now)) {
                if (timer[q] && *timer[q] <= now) {
                    timer[q].reset(); /* ticked: no timer */
                }
                h.note(q, timer[q]);
            }
        }
        std::optional<time_point> earliest;
        for (const auto &t : timer) {
            if (t && (!earliest || *t < *earliest)) {
                earliest = t;
            }
        }
        if (earliest) {
            ASSERT_TRUE(h.next()) << "step " << step;
            ASSERT_LE(*h.next(), std::max(*earliest, now)) << "step " << step;
        }
    }
}

} // namespace
