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
 *   peers  the peer records the agent made at a process's requests (a
 *          request for a peer that exists costs nothing), charged to the
 *          process: its SO_PEERCRED pid (attached_client::pid). A
 *          sibling's pid is its leader's (attach_server.h checks it), so
 *          every attachment of a process, siblings and further leaders
 *          alike, draws on one share; and a process that detaches and
 *          attaches again finds its share as it left it. A charge lasts
 *          as long as its record, which ends only when the peer table
 *          recycles it for another address (peer_table.h, "Half-open":
 *          never confirmed, used by no client, idle or failed, holding
 *          nothing): a peer that connected stays charged for the agent's
 *          life, as its record and its QPs stay. A job's process asks for
 *          one per node it talks to, and the node's other processes find
 *          most of theirs made. 0, the default, means half of the
 *          agent's max_peers (resolve()): one process can fill at most
 *          half of the table, the rest stays for the job's other
 *          processes, and a job of up to that many other nodes is served
 *          even when one process (a root talking to every node) makes all
 *          of its peers; a larger one needs it raised (and --max-peers).
 *          Refused: the peer reply says why (attach_wire.h, peer_reply).
 *          (A pid the kernel reuses for a later process of the user finds
 *          the old one's charges while their records stand: a process
 *          the agent cannot tell from the first.)
 *
 * This is a pure state machine, as mr_registry is: no I/O, no clock. The
 * engine feeds it and acts on its verdicts: a verdict names the bound
 * refused (or none), the value and the bound's limit, and says whether
 * the refusal is worth a log line: the 1st, 2nd, 4th, ... refusal of that
 * bound by the agent (format.h, worth_logging), whichever client asks, so
 * that neither another client nor one that attaches again buys more lines.
 *
 * Events -> transitions and verdicts (i: a client index, p: a process,
 * k: a peer record's index, a: an address):
 *
 *   attached(i)          i's ops and lkeys, and its refusals, start at
 *                        zero (a new holder of the index); its process's
 *                        peers do not
 *   take_op(i, lkeys)    a request of i that passed check_work; lkeys:
 *                        the lkeys i's uses would track with it
 *                          held(i) == ops      -> refused (ops, held(i))
 *                          lkeys > lkeys bound -> refused (lkeys, lkeys)
 *                          otherwise           -> admitted, held(i) + 1
 *   op_done(i)           an admitted op freed (completed, failed or
 *                        dropped): held(i) - 1
 *   make_peer(i, p, k, a)
 *                        client i of process p asks for a peer the agent
 *                        does not have, at a; the table would put it in
 *                        record k (a new record, or one it recycles; n:
 *                        charged(p), less one if k is charged to p)
 *                          n == peers          -> refused (peers, n)
 *                          otherwise           -> admitted: k charged to
 *                                                 p for a, its old charge
 *                                                 (if any) released
 *   peer_is(k, a)        record k holds the peer at a now (the engine
 *                        asks of every record once the table has
 *                        recycled any since it last asked): k charged
 *                        for another address -> the charge released (its
 *                        record was recycled)
 *   every refusal        refusals(i, bound) + 1, and the agent's total
 *                        for the bound + 1 (the status shows it); a log
 *                        line when that total is 1, 2, 4, ...
 */
#ifndef RVT_AGENT_CLIENT_SHARE_H
#define RVT_AGENT_CLIENT_SHARE_H

#include "uct/ib/rvt/common/attach_wire.h"

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
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

/* Peers (remote nodes) an agent connects to: a job of up to 4,097 nodes by
 * default (docs/performance.md, "Many nodes, simulated with the real
 * engine": some 13 KiB of the agent's memory and K QPs each); rvtd
 * --max-peers. One process may have half of them made ("peers" above). */
inline constexpr uint32_t default_max_peers = 4096;

struct share_limits {
    uint32_t ops   = 0; /* 0: the completion ring's capacity (resolve) */
    uint32_t lkeys = 1024;
    uint32_t peers = 0; /* 0: half of the agent's max_peers (resolve) */
};

/* The limits as the agent applies them: ops 0 becomes the capacity of a
 * client's completion ring, peers 0 half of max_peers (at least 1). */
share_limits
resolve(share_limits limits, uint32_t completion_capacity, uint32_t max_peers);
/* Empty if the (resolved) limits can be applied, else why not, naming the
 * value and what was expected. */
std::string config_error(const share_limits &limits);

struct share_verdict {
    share_bound refused = share_bound::none;
    uint64_t value      = 0; /* what the client has, or would have */
    uint32_t limit      = 0;
    /* refusals of the bound by the agent so far, this one included */
    uint64_t count = 0;
    bool log       = false; /* worth a log line */
    pid_t pid      = 0; /* peers: the process charged */

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
    share_verdict make_peer(uint32_t index, pid_t pid, uint32_t record,
                            const wire::agent_address &addr);
    void peer_is(uint32_t record, const wire::agent_address &addr);

    const share_limits &limits() const
    {
        return m_limits;
    }
    /* Ops held for the client now. */
    uint32_t held(uint32_t index) const
    {
        return m_clients[index].held;
    }
    /* Peer records charged to the process now. */
    uint32_t peers_charged(pid_t pid) const
    {
        auto it = m_charged.find(pid);
        return it != m_charged.end() ? it->second : 0;
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
        uint32_t held = 0;
        std::array<uint64_t, num_share_bounds> refused{};
    };
    /* a peer record made at a process's request */
    struct charge {
        pid_t pid;
        wire::agent_address addr;
    };

    static size_t slot(share_bound b)
    {
        return static_cast<size_t>(b) - 1;
    }
    share_verdict
    refuse(uint32_t index, share_bound b, uint64_t value, uint32_t limit);
    void release(uint32_t record);

    share_limits m_limits;
    std::vector<client> m_clients; /* by index */
    std::unordered_map<uint32_t, charge> m_charges; /* by record */
    /* records charged, by process; a process with none has no entry */
    std::unordered_map<pid_t, uint32_t> m_charged;
    std::array<uint64_t, num_share_bounds> m_refused{};
};

} // namespace rvt::agent

#endif
