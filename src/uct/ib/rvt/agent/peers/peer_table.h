/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's peers: a record for each remote agent that one of its
 * clients named or whose handshake request it took, and one for its own
 * node (index 0, loopback), with the maps that find a peer by its address
 * and by one of its QPs (engine.h: "Peers and lanes", "Hostile
 * handshakes").
 *
 * This is a pure table, as lanes is a pure state machine: no nic, no
 * clock. The engine asks it where a new address goes (place_request,
 * place_client), adds the peer there with the connection it built (add),
 * tells it of the QPs it makes, connects and destroys (add_qp, set_lanes,
 * remove_qp, remove_all_qps) and asks it whose QP a completion came from
 * (owner_of). The engine runs each peer's connection and does the verbs;
 * whether the lanes still hold anything of a peer, which only they know,
 * is asked through holds_nothing.
 *
 * Half-open: a peer made for a handshake request is half-open until it
 * is confirmed (RC traffic with it succeeded) or used (one of our clients
 * resolved it), and unless it holds nothing any more. Holding nothing
 * ("recyclable"): not the node's own, neither confirmed nor used, its
 * connection idle or failed, no QPs, and nothing of it in the lanes. No
 * client knows a recyclable peer's index, so its record is reused for the
 * next new address: a flood of requests from made-up addresses cannot
 * fill the table for real peers.
 *
 * What holds:
 *   - an index names one record for the agent's life; index 0 is the
 *     node's own; a recycled record keeps its index;
 *   - an address (GID, UD QPN) names at most one peer;
 *   - a peer's lanes (its connected QPs, in lane order) are among its QPs;
 *   - a QP routes to the peer that made it, from add_qp until the first
 *     empty CQ after its removal (a receive that landed before the QP was
 *     destroyed may still wait in the CQ, and its data is a client's);
 *   - place_request answers busy while max_half_open peers are half-open;
 *   - at most deep_peers peers other than the node's own hold deep QPs.
 *
 * Send depths: a QP's send queue is device memory (rxe: 68 KiB at 127
 * WRs, 12 KiB at 15), and at 10,000 peers 40,000 deep QPs would take
 * 5 GiB a node. A peer's QPs are made deep (deep_sq_depth) while fewer
 * than deep_peers other peers hold deep ones, else shallow
 * (shallow_sq_depth); the node's own are always deep. Its depth is
 * recorded at its first QP and kept until its last QP is removed, which
 * gives the deep place back.
 *
 * Events -> what happens (a: an address, p: a peer, q: a QPN, c: a
 * client index):
 *
 *   place_request(a)  a known -> known (its index); max_half_open peers
 *                     half-open -> busy; a recyclable record -> recycle
 *                     (its index); fewer than max_peers -> fresh (the next
 *                     index); else -> full
 *   place_client(a)   the same without the half-open bound: a client
 *                     wants the peer, so it is not half-open
 *   add(place, a, ..) fresh -> a new record; recycle -> the record is
 *                     replaced, its old address forgotten (recycled + 1);
 *                     the new one confirmed if it is the node's own
 *   add_qp(p, q)      q is p's, and routes to p (a number the device
 *                     reused stops waiting for the empty CQ); p's first
 *                     QP: p's depth is sq_depth_for(p), a deep place
 *                     taken if deep and not the node's own
 *   sq_depth_for(p)   p has QPs -> its depth; the node's own, or fewer
 *                     than deep_peers others deep -> deep_sq_depth; else
 *                     -> shallow_sq_depth
 *   set_lanes(p, qs)  lane i is qs[i]; a q not p's -> refused, no lanes
 *   remove_qp(p, q)   q not p's -> refused, nothing changes (never another
 *                     peer's QP); else out of p's QPs and lanes, still
 *                     routed until cq_empty; p's last: its depth is
 *                     forgotten, a deep place given back
 *   remove_all_qps(p) every QP of p removed, as remove_qp; returned
 *   cq_empty()        the removed QPs stop routing
 *   confirm(p)        p confirmed
 *   use(p, c)         c is one of p's users
 *   client_gone(c)    c is no peer's user any more
 *
 * Lookups: find(a) is the peer at a's GID and UD QPN. find_sender(a),
 * whom a handshake datagram naming sender a speaks for: that peer only if
 * it is not the node's own and the peer instance its connection knows
 * (peer_connection::peer) is a's, or none yet; a new instance at a known
 * address is a new sender (the engine gates it as one, and takes its
 * request to that peer's connection once its credential is believed).
 */
#ifndef RVT_AGENT_PEER_TABLE_H
#define RVT_AGENT_PEER_TABLE_H

#include "uct/ib/rvt/agent/device/nic.h"
#include "uct/ib/rvt/agent/peers/peer_connection.h"
#include "uct/ib/rvt/common/attach_wire.h"

#include <bitset>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rvt::agent {

/* peer_table::limits' defaults ("Send depths"; rvtd's --deep-peers and
 * --shallow-sq-depth): a job of up to 1,024 nodes has every peer deep;
 * a shallow QP's 15 WRs are one rxe queue page (12 KiB with its
 * overhead, docs/performance.md), and its peer still has K x 15 in
 * flight. */
inline constexpr uint32_t default_deep_peers       = 1024;
inline constexpr uint32_t default_shallow_sq_depth = 15;

class peer_table {
public:
    /* whether the lanes hold nothing of peer `index` (lanes::holds_nothing) */
    using holds_nothing_fn = std::function<bool(uint32_t index)>;

    struct limits {
        uint32_t max_peers; /* records, the node's own included */
        uint32_t max_half_open; /* place_request's bound */
        /* peers besides the node's own whose QPs are deep ("Send depths") */
        uint32_t deep_peers       = default_deep_peers;
        uint32_t deep_sq_depth    = 1; /* send WRs of a deep QP */
        uint32_t shallow_sq_depth = 1; /* and of a shallow one */
    };

    struct traffic { /* what went through a peer's QPs */
        uint64_t ops_posted   = 0;
        uint64_t bytes_posted = 0;
        uint64_t ops_failed   = 0;
        uint64_t recv_msgs    = 0;
        uint64_t recv_bytes   = 0;
        uint64_t qp_errors    = 0;
    };

    class peer {
    public:
        uint32_t index = 0;
        wire::agent_address addr{};
        bool loopback = false;
        /* the one owner of the connection's state, loopback included */
        std::unique_ptr<peer_connection> conn;
        struct traffic traffic;
        std::string last_error;

        bool is(peer_state s) const
        {
            return conn->state() == s;
        }
        /* every local QP of this peer (QPNs), in the order made */
        const std::vector<uint32_t> &qps() const
        {
            return m_qps;
        }
        /* lane -> QPN, once connected */
        const std::vector<uint32_t> &lanes() const
        {
            return m_lanes;
        }
        bool owns(uint32_t qpn) const;
        /* RC traffic with it succeeded; the node's own: always */
        bool confirmed() const
        {
            return m_confirmed;
        }
        /* send WRs each of its QPs holds; 0 while it has none */
        uint32_t sq_depth() const
        {
            return m_sq_depth;
        }
        /* the client indices that resolved it */
        const std::bitset<512> &users() const
        {
            return m_users;
        }

    private:
        friend class peer_table;
        std::vector<uint32_t> m_qps;
        std::vector<uint32_t> m_lanes;
        std::bitset<512> m_users;
        uint32_t m_sq_depth = 0;
        bool m_deep_place   = false; /* counted in m_deep_held */
        bool m_confirmed    = false;
    };

    enum class place_kind {
        known,
        fresh,
        recycle,
        busy,
        full
    };
    struct placement {
        place_kind kind;
        uint32_t index; /* known, fresh, recycle: the peer's */
    };

    peer_table(limits l, holds_nothing_fn holds_nothing);

    placement place_request(const wire::agent_address &a) const;
    placement place_client(const wire::agent_address &a) const;
    /* `where` is a fresh or recycle placement from the calls above,
     * with nothing added since */
    peer &add(placement where, const wire::agent_address &a, bool loopback,
              std::unique_ptr<peer_connection> conn);

    /* the depth p's next QP is made with ("Send depths") */
    uint32_t sq_depth_for(const peer &p) const;
    void add_qp(peer &p, uint32_t qpn);
    bool set_lanes(peer &p, std::span<const uint32_t> qpns);
    bool remove_qp(peer &p, uint32_t qpn);
    std::vector<uint32_t> remove_all_qps(peer &p);
    void cq_empty();
    /* the peer q routes to, or nullptr */
    peer *owner_of(uint32_t qpn);

    void confirm(peer &p)
    {
        p.m_confirmed = true;
    }
    void use(peer &p, uint32_t client)
    {
        p.m_users.set(client);
    }
    void client_gone(uint32_t client);

    /* the peer at `a`, or nullptr */
    peer *find(const wire::agent_address &a);
    /* the peer a datagram from sender `a` speaks for ("Lookups" above), or
     * nullptr */
    peer *find_sender(const wire::agent_address &a);
    peer &at(uint32_t index)
    {
        return *m_peers[index];
    }
    const peer &at(uint32_t index) const
    {
        return *m_peers[index];
    }
    size_t size() const
    {
        return m_peers.size();
    }
    auto begin()
    {
        return m_peers.begin();
    }
    auto end()
    {
        return m_peers.end();
    }
    auto begin() const
    {
        return m_peers.cbegin();
    }
    auto end() const
    {
        return m_peers.cend();
    }

    bool recyclable(const peer &p) const;
    size_t half_open() const;
    /* records reused for a new address */
    uint64_t recycled() const
    {
        return m_recycled;
    }
    /* peers besides the node's own holding a deep place */
    uint32_t deep_held() const
    {
        return m_deep_held;
    }
    const limits &bounds() const
    {
        return m_limits;
    }

private:
    using address_key = std::pair<gid_bytes, uint32_t>; /* GID, UD QPN */
    static address_key key_of(const wire::agent_address &a);
    /* "Half-open" above: neither confirmed nor used */
    static bool unconfirmed(const peer &p)
    {
        return !p.m_confirmed && p.m_users.none();
    }
    /* place_client's answer, and place_request's past the bound */
    placement place() const;

    limits m_limits;
    holds_nothing_fn m_holds_nothing;
    std::vector<std::unique_ptr<peer>> m_peers;
    std::map<address_key, uint32_t> m_by_addr;
    /* QP -> peer, the removed included until cq_empty */
    std::unordered_map<uint32_t, uint32_t> m_by_qpn;
    std::vector<uint32_t> m_removed; /* still routed */
    uint64_t m_recycled  = 0;
    uint32_t m_deep_held = 0;

    /* p's last QP went: its depth forgotten, a deep place given back */
    void forget_depth(peer &p);
};

} // namespace rvt::agent

#endif
