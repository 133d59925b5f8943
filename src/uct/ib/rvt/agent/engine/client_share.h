/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Each client's bounded share of its agent: whatever one process puts in
 * its rings or asks on its socket, what the agent holds for it stays
 * within these bounds, so that no client can bloat the agent or stall it
 * for the others (docs/reliability.md, "Hostile input"). The client
 * library never reaches them; a client that does has its request refused,
 * naming the bound and the value, and is served within them as before.
 *
 * Bounds (share_limits: engine_config::share, rvtd --max-client-*):
 *   ops    its ops the agent holds: taken from its work ring and not
 *          completed yet, wherever they wait (a lane's backlog, a peer
 *          that is not connected yet, parked behind a destination's
 *          pause, posted). A striped write's parts are its one op. The
 *          client library admits as many requests as its completion ring
 *          holds (client/session.h), so 0 means that (resolve()), the
 *          default. A refused request completes `no_resource` (work.h)
 *          to the client, unposted.
 *   lkeys  the lkeys its ops' uses track (mr_registry.h, lkey_uses): one
 *          entry per distinct lkey its ops have named, kept at zero
 *          between ops. The engine asks the registry to drop the entries
 *          no op names before it asks take_op() about more than the
 *          bound, so only the lkeys its ops name at once count; an op
 *          names two at most. Refused: as ops.
 *   peers  the peers the agent made for its peer requests while it has
 *          been attached (a request for a peer that exists costs
 *          nothing). A job's process asks for one per node it talks to.
 *          Refused: the peer reply says why (attach_wire.h, peer_reply).
 *
 * This is a pure state machine, as mr_registry is: no I/O, no clock. The
 * engine feeds it and acts on its verdicts: a verdict names the bound
 * refused (or none), the value and the bound's limit, and says whether
 * the refusal is worth a log line (the 1st, 2nd, 4th, ... of that bound
 * for that client: format.h, worth_logging).
 *
 * Events -> transitions and verdicts (i: a client index):
 *
 *   attached(i)          i's counts, its refusals too, start at zero (a
 *                        new holder of the index)
 *   take_op(i, lkeys)    a request of i that passed check_work; lkeys:
 *                        the lkeys i's uses would track with it
 *                          held(i) == ops      -> refused (ops, held(i))
 *                          lkeys > lkeys bound -> refused (lkeys, lkeys)
 *                          otherwise           -> admitted, held(i) + 1
 *   op_done(i)           an admitted op freed (completed, failed or
 *                        dropped): held(i) - 1
 *   make_peer(i)         i asks for a peer the agent does not have
 *                          made(i) == peers    -> refused (peers, made(i))
 *                          otherwise           -> admitted, made(i) + 1
 *   every refusal        refusals(i, bound) + 1, and the agent's total
 *                        for the bound + 1 (the status shows them)
 */
#ifndef RVT_AGENT_CLIENT_SHARE_H
#define RVT_AGENT_CLIENT_SHARE_H

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rvt::agent {

/* A completion's `detail` when its status is no_resource: the bound. */
enum class share_bound : uint32_t {
    none  = 0, /* admitted */
    ops   = 1,
    lkeys = 2,
    peers = 3,
};
inline constexpr size_t num_share_bounds = 3;

/* "ops", "lkeys", "peers" (the status's names), "none". */
std::string_view to_string(share_bound b);
/* The setting that sets it: "max-client-ops" (rvtd's option). */
std::string_view setting_of(share_bound b);

/* Peers (remote nodes) an agent connects to, and one client may make: a
 * job of up to 4,097 nodes by default (docs/performance.md, "Many nodes,
 * simulated with the real engine": some 13 KiB of the
 * agent's memory and K QPs each); rvtd --max-peers, --max-client-peers. */
inline constexpr uint32_t default_max_peers = 4096;

struct share_limits {
    uint32_t ops   = 0; /* 0: the completion ring's capacity (resolve) */
    uint32_t lkeys = 1024;
    /* a rank of an alltoall makes one per other node */
    uint32_t peers = default_max_peers;
};

/* The limits as the agent applies them: ops 0 becomes the capacity of a
 * client's completion ring. */
share_limits resolve(share_limits limits, uint32_t completion_capacity);
/* Empty if the (resolved) limits can be applied, else why not, naming the
 * value and what was expected. */
std::string config_error(const share_limits &limits);

struct share_verdict {
    share_bound refused = share_bound::none;
    uint64_t value      = 0; /* what the client has, or would have */
    uint32_t limit      = 0;
    uint64_t count      = 0; /* refusals of the bound for the client */
    bool log            = false; /* worth a log line */

    bool admitted() const
    {
        return refused == share_bound::none;
    }
    /* What was refused, naming the value and the bound, e.g. "12 ops
     * held for this client: expected fewer than max-client-ops (12)". */
    std::string text() const;
};

class client_share {
public:
    client_share(const share_limits &resolved, uint32_t max_clients);

    void attached(uint32_t index);
    share_verdict take_op(uint32_t index, uint64_t lkeys);
    void op_done(uint32_t index);
    share_verdict make_peer(uint32_t index);

    const share_limits &limits() const
    {
        return m_limits;
    }
    /* Ops held for the client now. */
    uint32_t held(uint32_t index) const
    {
        return m_clients[index].held;
    }
    /* Peers made for it since it attached. */
    uint32_t peers_made(uint32_t index) const
    {
        return m_clients[index].peers;
    }
    /* Refusals of `b`: of the client since it attached, of every client
     * over the agent's life. */
    uint64_t refused(uint32_t index, share_bound b) const
    {
        return m_clients[index].refused[slot(b)];
    }
    uint64_t refused(share_bound b) const
    {
        return m_refused[slot(b)];
    }

private:
    struct client {
        uint32_t held  = 0;
        uint32_t peers = 0;
        std::array<uint64_t, num_share_bounds> refused{};
    };

    static size_t slot(share_bound b)
    {
        return static_cast<size_t>(b) - 1;
    }
    share_verdict
    refuse(uint32_t index, share_bound b, uint64_t value, uint32_t limit);

    share_limits m_limits;
    std::vector<client> m_clients; /* by index */
    std::array<uint64_t, num_share_bounds> m_refused{};
};

} // namespace rvt::agent

#endif
