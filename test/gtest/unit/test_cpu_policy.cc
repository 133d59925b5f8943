/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of how rvtd's loop shares a core (agent/serve/cpu_policy.h), one
 * or more per row of its table, and of --priority's values. Time is a
 * number the test advances.
 */
#include "uct/ib/rvt/agent/serve/cpu_policy.h"

#include <gtest/gtest.h>

using rvt::agent::cpu_policy;
using rvt::agent::parse_priority;
using rvt::agent::priority;
using step = cpu_policy::step;
using namespace std::chrono_literals;

namespace {

const cpu_policy::time_point t0 = cpu_policy::time_point{} + 1h;

cpu_policy::settings normal()
{
    cpu_policy::settings s;
    s.spin = 100us;
    return s;
}

cpu_policy::settings realtime()
{
    cpu_policy::settings s;
    s.realtime   = true;
    s.spin       = 20us;
    s.busy_limit = 1000us;
    s.pause      = 100us;
    return s;
}

TEST(cpu_policy, work_polls_again)
{
    cpu_policy p(normal(), t0);
    EXPECT_EQ(p.passed(t0 + 500us, true), step::poll);
    EXPECT_EQ(p.passed(t0 + 5000us, true), step::poll)
            << "a normal agent is never paused however long it works";
    EXPECT_EQ(p.pauses(), 0u);
}

TEST(cpu_policy, normal_spins_yielding_then_sleeps)
{
    cpu_policy p(normal(), t0);
    (void)p.passed(t0 + 1000us, true);
    EXPECT_EQ(p.passed(t0 + 1050us, false), step::yield);
    EXPECT_EQ(p.passed(t0 + 1099us, false), step::yield);
    EXPECT_EQ(p.passed(t0 + 1100us, false), step::sleep)
            << "spin is counted from the last work";
}

TEST(cpu_policy, normal_without_yield_polls_while_it_spins)
{
    auto s            = normal();
    s.yield_when_idle = false;
    cpu_policy p(s, t0);
    EXPECT_EQ(p.passed(t0 + 50us, false), step::poll);
    EXPECT_EQ(p.passed(t0 + 100us, false), step::sleep);
}

TEST(cpu_policy, realtime_never_yields)
{
    cpu_policy p(realtime(), t0);
    EXPECT_EQ(p.passed(t0 + 10us, false), step::poll)
            << "a real-time task's yield would let only its equals run";
    EXPECT_EQ(p.passed(t0 + 20us, false), step::sleep);
}

TEST(cpu_policy, realtime_pauses_once_awake_for_the_busy_limit)
{
    cpu_policy p(realtime(), t0);
    for (auto t = 0us; t < 1000us; t += 10us) {
        ASSERT_EQ(p.passed(t0 + t, true), step::poll) << t.count();
    }
    EXPECT_EQ(p.passed(t0 + 1000us, true), step::pause);
    EXPECT_EQ(p.pauses(), 1u);
    EXPECT_EQ(p.passed(t0 + 1001us, true), step::pause)
            << "until it has paused and says so";
    p.resumed(t0 + 1100us);
    EXPECT_EQ(p.passed(t0 + 1110us, true), step::poll);
    EXPECT_EQ(p.passed(t0 + 2100us, true), step::pause)
            << "the busy limit counts from the end of the pause";
}

/* The Slurm prolog sets SCHED_FIFO on the agent from outside (root's
 * chrt), after rvtd started at normal priority: the busy limit must hold
 * from then on, or the agent could keep a core from the ranks. */
TEST(cpu_policy, a_class_given_from_outside_takes_the_realtime_rows)
{
    cpu_policy::settings s = realtime();
    s.realtime             = false;
    cpu_policy p(s, t0);
    EXPECT_EQ(p.passed(t0 + 1000us, true), step::poll) << "normal: no limit";
    p.class_is(true);
    EXPECT_EQ(p.passed(t0 + 1010us, true), step::pause)
            << "SCHED_FIFO now: awake past the busy limit, it pauses";
    p.resumed(t0 + 1100us);
    p.class_is(false);
    EXPECT_EQ(p.passed(t0 + 2200us, true), step::poll)
            << "taken away: the normal rows again";
    EXPECT_EQ(p.passed(t0 + 2210us, false), step::yield);
}

TEST(cpu_policy, a_sleep_starts_the_busy_limit_again)
{
    cpu_policy p(realtime(), t0);
    (void)p.passed(t0 + 900us, true);
    EXPECT_EQ(p.passed(t0 + 950us, false), step::sleep);
    p.woke(t0 + 5000us, true);
    EXPECT_EQ(p.passed(t0 + 5900us, true), step::poll);
    EXPECT_EQ(p.passed(t0 + 6000us, true), step::pause);
}

TEST(cpu_policy, a_wake_up_that_finds_no_work_sleeps_again)
{
    cpu_policy p(normal(), t0);
    EXPECT_EQ(p.passed(t0 + 200us, false), step::sleep);
    p.woke(t0 + 300us, false);
    EXPECT_EQ(p.passed(t0 + 350us, false), step::sleep)
            << "a wake-up is no work (a timer, a keepalive): no spin";
}

TEST(cpu_policy, a_wake_up_that_finds_work_spins)
{
    cpu_policy p(normal(), t0);
    EXPECT_EQ(p.passed(t0 + 200us, false), step::sleep);
    p.woke(t0 + 300us, false);
    EXPECT_EQ(p.passed(t0 + 310us, true), step::poll);
    EXPECT_EQ(p.passed(t0 + 350us, false), step::yield)
            << "the spin follows the client's work";
    EXPECT_EQ(p.passed(t0 + 410us, false), step::sleep);
}

TEST(cpu_policy, a_wake_up_by_a_client_spins)
{
    cpu_policy p(normal(), t0);
    EXPECT_EQ(p.passed(t0 + 200us, false), step::sleep);
    p.woke(t0 + 300us, true);
    EXPECT_EQ(p.passed(t0 + 350us, false), step::yield)
            << "a client's socket or doorbell is a client's work";
    EXPECT_EQ(p.passed(t0 + 400us, false), step::sleep);
}

TEST(cpu_policy, a_pause_keeps_the_last_work_so_a_long_spin_still_ends)
{
    auto s = realtime();
    s.spin = 5000us; /* longer than the busy limit */
    cpu_policy p(s, t0);
    EXPECT_EQ(p.passed(t0 + 1000us, false), step::pause);
    p.resumed(t0 + 1100us);
    EXPECT_EQ(p.passed(t0 + 2100us, false), step::pause);
    p.resumed(t0 + 2200us);
    EXPECT_EQ(p.passed(t0 + 5000us, false), step::sleep)
            << "paused while spinning, it still sleeps when the spin is "
               "over";
}

TEST(cpu_policy, priority_values)
{
    auto n = parse_priority("normal");
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(n.value().what, priority::kind::normal);
    auto f = parse_priority("fifo:10");
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f.value().what, priority::kind::fifo);
    EXPECT_EQ(f.value().level, 10);
    EXPECT_EQ(to_string(f.value()), "fifo:10");
    auto m = parse_priority("nice:-5");
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m.value().what, priority::kind::nice);
    EXPECT_EQ(m.value().level, -5);
    EXPECT_EQ(to_string(m.value()), "nice:-5");
}

TEST(cpu_policy, bad_priority_values_name_the_value_and_what_was_expected)
{
    for (const char *bad :
         {"", "fifo", "fifo:", "fifo:0", "fifo:100", "fifo:1x", "nice:-21",
          "nice:20", "rr:5", "FIFO:10", "normal:1"}) {
        auto r = parse_priority(bad);
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_EQ(r.error(), "--priority=" + std::string(bad) +
                                     ": expected normal, nice:N (N from -20 "
                                     "to 19) or fifo:N (N from 1 to 99)");
    }
}

} // namespace
