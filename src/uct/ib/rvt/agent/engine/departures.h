/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Departed clients: what an agent knows about (peer, client index,
 * generation) destinations that are gone (engine.h, "Departed clients";
 * imm.h has the generation). One object per agent serves both ends:
 *
 *   receiving end   a message for one of OUR indices arrived naming a
 *                   generation that is not attached there (its holder
 *                   detached, maybe someone else holds the index now):
 *                   the message is dropped, and the peer that sent it is
 *                   told client_gone(index, generation), once.
 *   sending end     a peer told US that one of ITS clients is gone: the
 *                   clients of ours that use the peer are told (inbound
 *                   client_gone), and work for that destination fails at
 *                   once (peer_failed) instead of being posted.
 *
 * This is pure state: no clock reads, no I/O; every event takes `now` and
 * its answer says what the caller must do. Keys are (peer, index,
 * generation), each with its own state on each end.
 *
 * Receiving end, per key:
 *   unknown --stale()--> told          answer: tell the peer
 *   told    --stale()--> told          answer: nothing (already told)
 *   told    --reattached(index, gen)-> unknown  (that attachment is live
 *                                        again after the generation wrapped:
 *                                        its next departure is news)
 *   told    --peer_connected(peer)-> unknown  (a message queued to a lost
 *                                        connection may have been lost)
 *   told    --memory passes (tick)--> unknown  (told again if it goes on)
 *
 * Sending end, per key:
 *   live --gone()--> gone        answer: tell the users, fail queued work
 *   gone --gone()--> gone        answer: nothing (a repeat)
 *   gone --memory passes (tick)--> live
 *
 * Why entries are forgotten after `memory`: the 8-bit generation wraps,
 * and an index can be held again in the same generation after 256
 * attaches, which the remote agent's quarantine (attach_server.h) makes
 * take at least 255 quarantines. A sending end that remembered the old
 * departure forever would fail the new holder's traffic; `memory` must
 * be shorter than that (the defaults: 60 s here, 1 s quarantine there,
 * 255 s). By then the endpoints to the departed client have long failed
 * (their first message after the departure is answered within a round
 * trip); a sender that still posts to it is told again.
 *
 * Bounded: at most one entry per key on each end, and a key exists only
 * after a message or notice for it; every entry goes after `memory`.
 */
#ifndef RVT_AGENT_DEPARTURES_H
#define RVT_AGENT_DEPARTURES_H

#include "uct/ib/rvt/agent/peers/peer_connection.h"

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>

namespace rvt::agent {

class departures {
public:
    explicit departures(std::chrono::milliseconds memory) : m_memory(memory)
    {
    }

    /* Receiving end: a message from `peer` named (index, generation),
     * which is not attached here. True: send client_gone to `peer` (or,
     * for this node's own peer, apply it as gone()). */
    bool
    stale(uint32_t peer, uint32_t index, uint8_t generation, time_point now);
    /* Receiving end: (index, generation) is attached again. */
    void reattached(uint32_t index, uint8_t generation);
    /* Receiving end: the connection to `peer` is new. */
    void peer_connected(uint32_t peer);

    /* Sending end: `peer` says its client (index, generation) is gone.
     * True when that is news: tell the users of `peer`. */
    bool
    gone(uint32_t peer, uint32_t index, uint8_t generation, time_point now);
    /* Sending end: work for this destination must fail unposted. */
    bool is_gone(uint32_t peer, uint32_t index, uint8_t generation) const
    {
        return m_gone.count(key(peer, index, generation)) != 0;
    }

    /* Forgets what is older than `memory`. */
    void tick(time_point now);
    std::optional<time_point> next_timer() const;

    size_t told_count() const
    {
        return m_told.size();
    }
    size_t gone_count() const
    {
        return m_gone.size();
    }

private:
    static uint64_t key(uint32_t peer, uint32_t index, uint8_t generation)
    {
        return uint64_t{peer} << 32 | uint64_t{index} << 8 | generation;
    }
    static uint32_t peer_of(uint64_t k)
    {
        return static_cast<uint32_t>(k >> 32);
    }
    static uint32_t index_and_generation(uint64_t k)
    {
        return static_cast<uint32_t>(k);
    }

    struct table {
        std::unordered_map<uint64_t, time_point> since;
        /* (key, when) in insertion order, for tick(); an entry whose
         * key was erased or re-added since is skipped */
        std::deque<std::pair<uint64_t, time_point>> order;

        size_t size() const
        {
            return since.size();
        }
        size_t count(uint64_t k) const
        {
            return since.count(k);
        }
        bool insert(uint64_t k, time_point now);
        void expire(time_point before);
    };

    std::chrono::milliseconds m_memory;
    table m_told; /* receiving end */
    table m_gone; /* sending end */
};

} // namespace rvt::agent

#endif
