/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * When each peer's connection next wants its tick (peer_connection's
 * next_timer), kept so that a pass finds the due ones without asking
 * every peer. An agent with 10,000 idle peers has one keepalive due
 * every few hundred microseconds; a pass that walked all of them each
 * time one was due spent 6.8% of a core idle (docs/performance.md, "One
 * agent against ten thousand nodes").
 *
 * A min-heap of entries (due, peer, epoch). Each peer has at most one
 * live entry, the one whose epoch is the peer's current one; the others
 * are stale and skipped when they reach the top. A live entry's time is
 * at or before the peer's timer, never after: a timer that moves later
 * (a keepalive put off by traffic, which happens at every receive) costs
 * nothing until the old entry comes due, and is then noted again at its
 * real time; a timer that moves earlier gets a new entry at once.
 *
 * This is a pure state machine: no clock, no peers, only their indices.
 * The engine notes a peer's timer after everything that may have
 * changed it, and at each pass takes the due peers and asks each of
 * them again.
 *
 * What holds: a peer whose timer is at t has a live entry at or before
 * t, so next() is never later than the earliest peer timer.
 *
 * Events -> what happens (p: a peer index, t: its timer or none):
 *
 *   note(p, none)  nothing (a live entry stays: it comes due and the
 *                  engine finds no timer then)
 *   note(p, t)     p has a live entry at or before t -> nothing;
 *                  else -> a new live entry (t, p, epoch + 1), any
 *                  older one stale
 *   take_due(now)  every live entry at or before now leaves the heap,
 *                  its peer listed once (p has no live entry then: the
 *                  engine notes it again); stale entries before the
 *                  first live one not due are dropped
 *   next()         the earliest entry's time, or none (a stale one's
 *                  only if a note made it stale since the last
 *                  take_due: a wake-up that finds nothing due is
 *                  harmless)
 */
#ifndef RVT_AGENT_PEER_TIMERS_H
#define RVT_AGENT_PEER_TIMERS_H

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace rvt::agent {

class peer_timers {
public:
    using time_point = std::chrono::steady_clock::time_point;

    void note(uint32_t peer, std::optional<time_point> t);
    /* the peers due at `now`, each once, in the order due; valid until
     * the next call */
    const std::vector<uint32_t> &take_due(time_point now);
    std::optional<time_point> next() const;

    /* entries in the heap, stale ones included (for tests and status) */
    size_t entries() const
    {
        return m_heap.size();
    }

private:
    struct entry {
        time_point due;
        uint32_t peer;
        uint32_t epoch;
    };
    struct slot {
        uint32_t epoch = 0;
        bool live      = false;
        time_point due{}; /* the live entry's, while live */
    };
    static bool later(const entry &a, const entry &b)
    {
        return a.due > b.due;
    }
    void pop();

    std::vector<entry> m_heap; /* std::push_heap with later(): min on top */
    std::vector<slot> m_slots; /* by peer index */
    std::vector<uint32_t> m_due;
};

} // namespace rvt::agent

#endif
