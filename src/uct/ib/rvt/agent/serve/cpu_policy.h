/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How rvtd's loop shares a core with the job's ranks: after each pass,
 * whether it polls again, hands its core over for a moment, pauses or
 * sleeps (rvtd.cc runs the steps and sets the scheduling class,
 * --priority).
 *
 * On a full node every core runs a rank and the agent has none of its
 * own. Two ways to run:
 *
 *   normal    the kernel's fair class (optionally at another nice value).
 *             After its last work the agent keeps polling for `spin`, so
 *             that a burst's next op costs no wake-up, handing its core
 *             over on each empty pass (yield) so that a rank polling on
 *             the same core runs; then it sleeps until a client's
 *             doorbell, a completion or a socket wakes it. A woken agent
 *             waits for the scheduler to give it a slice.
 *   realtime  SCHED_FIFO: a woken agent preempts the rank on its core at
 *             once, as a kernel thread would. Its empty passes do not
 *             yield (a real-time task's yield lets only its equals run),
 *             so its spin holds the core from the ranks: give it a short
 *             one. And it must give the core back while work keeps
 *             coming: once it has been awake for `busy_limit` without a
 *             sleep, it pauses for `pause` (a timed sleep), so that it
 *             holds at most busy_limit / (busy_limit + pause) of a core
 *             and the ranks beside it progress whatever the load.
 *
 * Work is a client's (the engine's served_clients, or a wake-up by a
 * client's socket or doorbell): the agent's own keepalives, handshakes
 * and timers wake it but start no spin, so that an idle agent of a job
 * with many peers does not hold a core spinning after each of them.
 *
 * A pure state machine, as accept_gate is: no clock reads, no system
 * calls. State: awake_since (the end of the last sleep or pause) and
 * last_work (the last pass that found work).
 *
 * Events -> step:
 *   passed(now, worked), the first row that holds:
 *     worked                         last_work = now, and on below
 *     now - last_work >= spin        sleep
 *     realtime and now - awake_since >= busy_limit
 *                                    pause (pauses + 1)
 *     worked                         poll
 *     otherwise (spinning)           normal: yield if yield_when_idle,
 *                                    else poll; realtime: poll
 *   woke(now, client)
 *                 after a sleep: awake_since = now; woken by a client
 *                 (its socket or doorbell): last_work = now, it spins;
 *                 else (a completion, a timer) last_work kept: a pass
 *                 that finds no client's work sleeps again at once
 *   resumed(now)  after a pause: awake_since = now (last_work kept: an
 *                 agent that paused while spinning still sleeps when its
 *                 spin is over)
 *   class_is(realtime)
 *                 the scheduling class the kernel reports, read when the
 *                 loop starts and after each sleep: the realtime rows
 *                 apply while it is SCHED_FIFO, however it got there
 *                 (rvtd's own --priority, or root's chrt on the agent's
 *                 pid, as the Slurm prolog sets it without raising the
 *                 user's limits), and stop when it is taken away
 */
#ifndef RVT_AGENT_CPU_POLICY_H
#define RVT_AGENT_CPU_POLICY_H

#include "uct/ib/rvt/common/result.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace rvt::agent {

/* The scheduling class rvtd asks for (--priority). */
struct priority {
    enum class kind {
        normal,
        nice,
        fifo
    } what    = kind::normal;
    int level = 0; /* nice: -20..19; fifo: 1..99 */
};

/* "normal", "nice:N" (N from -20 to 19) or "fifo:N" (1 to 99). */
result<priority> parse_priority(std::string_view text);
std::string to_string(const priority &p);

class cpu_policy {
public:
    using time_point = std::chrono::steady_clock::time_point;
    using duration   = std::chrono::steady_clock::duration;

    enum class step {
        poll,
        yield,
        pause,
        sleep
    };

    struct settings {
        bool realtime = false;
        duration spin{std::chrono::microseconds(2000)};
        bool yield_when_idle = true; /* normal only */
        duration busy_limit{std::chrono::microseconds(2000)};
        duration pause{std::chrono::microseconds(200)};
    };

    cpu_policy(const settings &s, time_point now);

    step passed(time_point now, bool worked);
    void woke(time_point now, bool client);
    void resumed(time_point now);
    void class_is(bool realtime);

    const settings &config() const
    {
        return m_settings;
    }
    /* times the busy limit paused a real-time agent */
    uint64_t pauses() const
    {
        return m_pauses;
    }

private:
    settings m_settings;
    time_point m_awake_since;
    time_point m_last_work;
    uint64_t m_pauses = 0;
};

} // namespace rvt::agent

#endif
