/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The departure barrier: a client's retirement of its address
 * (attach_server.h, retired: a UCT interface closes while its process and
 * its registrations stay) is answered only once every peer agent told of
 * it has said that it heard (imm.h, control_op::gone_heard), or has been
 * lost, or the wait is over. A peer agent says it after it has marked the
 * destination gone (departures.h, sending end), so once the client's
 * close returns, nothing its senders post afterwards is posted to it:
 * their work fails unposted, as it does over rc_verbs, whose QP to the
 * closed interface is gone. Without the barrier a put posted right after
 * the close could still land in the process's registered memory and
 * complete well (UCX's test_ucp_peer_failure, docs/reliability.md).
 *
 * Pure state, as departures is: no clock reads, no I/O. Every event
 * answers with the retirements now due, which the engine answers
 * (attach_server::answer_retired).
 *
 * Per client index i (at most one retirement waits per index):
 *
 *   begin(i, g, told, now)  told: the peers that were sent the news
 *                             told empty -> due now (nobody to wait for)
 *                             otherwise  -> waiting: told, until now + wait
 *                           (a retirement already waiting for i is
 *                           replaced, and due now: nobody reads its
 *                           answer after the new one's)
 *   heard(p, i, g)          p is in i's waiting set and g its generation
 *                             -> p removed; the set empty -> due, all heard
 *                           otherwise -> nothing (a late, repeated or
 *                           forged answer: it changes no other state)
 *   peer_lost(p)            p's connection is gone: what was sent to it
 *                           may be lost, and its senders fail anyway
 *                             -> p removed from every waiting set; each
 *                                emptied -> due, all heard
 *   client_gone(i)          i detached: nobody waits for the answer
 *                             -> i's retirement dropped, not due
 *   tick(now)               each waiting past its time -> due, with the
 *                           number of peers that had not answered
 *
 * Bounded: one retirement per client index, each with at most the peers
 * that were connected when it began.
 */
#ifndef RVT_AGENT_DEPARTURE_BARRIER_H
#define RVT_AGENT_DEPARTURE_BARRIER_H

#include "uct/ib/rvt/agent/peers/peer_connection.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace rvt::agent {

class departure_barrier {
public:
    /* A retirement due: answer client `index`. unheard: how many of the
     * peers told had not said they heard (0: all had, or were lost). */
    struct due {
        uint32_t index;
        uint32_t unheard;

        friend bool operator==(const due &, const due &) = default;
    };
    using dues = std::vector<due>;

    explicit departure_barrier(std::chrono::milliseconds wait) : m_wait(wait)
    {
    }

    dues begin(uint32_t index, uint8_t generation,
               const std::vector<uint32_t> &told, time_point now);
    dues heard(uint32_t peer, uint32_t index, uint8_t generation);
    dues peer_lost(uint32_t peer);
    void client_gone(uint32_t index);
    dues tick(time_point now);
    std::optional<time_point> next_timer() const;

    /* Retirements waiting now. */
    size_t waiting() const
    {
        return m_waiting.size();
    }

private:
    struct retirement {
        uint8_t generation;
        std::unordered_set<uint32_t> peers; /* told, not yet heard */
        time_point until;
    };

    std::chrono::milliseconds m_wait;
    std::unordered_map<uint32_t, retirement> m_waiting; /* by client index */
};

} // namespace rvt::agent

#endif
