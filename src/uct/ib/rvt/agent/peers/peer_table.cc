/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's peers (peer_table.h).
 */
#include "uct/ib/rvt/agent/peers/peer_table.h"

#include <algorithm>
#include <cstring>

namespace rvt::agent {

bool peer_table::peer::owns(uint32_t qpn) const
{
    return std::find(m_qps.begin(), m_qps.end(), qpn) != m_qps.end();
}

peer_table::peer_table(limits l, holds_nothing_fn holds_nothing) :
    m_limits(l), m_holds_nothing(std::move(holds_nothing))
{
}

peer_table::address_key peer_table::key_of(const wire::agent_address &a)
{
    address_key k;
    std::memcpy(k.first.data(), a.gid, k.first.size());
    k.second = a.ud_qpn;
    return k;
}

peer_table::placement
peer_table::place_request(const wire::agent_address &a) const
{
    if (auto it = m_by_addr.find(key_of(a)); it != m_by_addr.end()) {
        return {place_kind::known, it->second};
    }
    if (half_open() >= m_limits.max_half_open) {
        return {place_kind::busy, 0};
    }
    return place();
}

peer_table::placement
peer_table::place_client(const wire::agent_address &a) const
{
    if (auto it = m_by_addr.find(key_of(a)); it != m_by_addr.end()) {
        return {place_kind::known, it->second};
    }
    return place();
}

peer_table::placement peer_table::place() const
{
    auto old = std::find_if(m_peers.begin(), m_peers.end(),
                            [this](const auto &p) { return recyclable(*p); });
    if (old != m_peers.end()) {
        return {place_kind::recycle, (*old)->index};
    }
    if (m_peers.size() >= m_limits.max_peers) {
        return {place_kind::full, 0};
    }
    return {place_kind::fresh, static_cast<uint32_t>(m_peers.size())};
}

peer_table::peer &peer_table::add(placement where, const wire::agent_address &a,
                                  bool loopback,
                                  std::unique_ptr<peer_connection> conn)
{
    auto p         = std::make_unique<peer>();
    p->index       = where.index;
    p->addr        = a;
    p->loopback    = loopback;
    p->conn        = std::move(conn);
    p->m_confirmed = loopback;
    if (where.kind == place_kind::recycle) {
        /* nothing of the old peer is left but its index */
        m_by_addr.erase(key_of(m_peers[where.index]->addr));
        m_peers[where.index] = std::move(p);
        ++m_recycled;
    } else {
        m_peers.push_back(std::move(p));
    }
    m_by_addr[key_of(a)] = where.index;
    return *m_peers[where.index];
}

uint32_t peer_table::sq_depth_for(const peer &p) const
{
    if (p.m_sq_depth != 0) {
        return p.m_sq_depth;
    }
    if (p.loopback || m_deep_held < m_limits.deep_peers) {
        return m_limits.deep_sq_depth;
    }
    return m_limits.shallow_sq_depth;
}

void peer_table::add_qp(peer &p, uint32_t qpn)
{
    if (p.m_qps.empty()) {
        p.m_sq_depth   = sq_depth_for(p);
        p.m_deep_place = !p.loopback && m_deep_held < m_limits.deep_peers;
        m_deep_held += p.m_deep_place ? 1 : 0;
    }
    p.m_qps.push_back(qpn);
    m_by_qpn[qpn] = p.index;
    std::erase(m_removed, qpn); /* a number the device reused */
}

bool peer_table::set_lanes(peer &p, std::span<const uint32_t> qpns)
{
    p.m_lanes.clear();
    if (!std::all_of(qpns.begin(), qpns.end(),
                     [&p](uint32_t q) { return p.owns(q); })) {
        return false;
    }
    p.m_lanes.assign(qpns.begin(), qpns.end());
    return true;
}

bool peer_table::remove_qp(peer &p, uint32_t qpn)
{
    if (std::erase(p.m_qps, qpn) == 0) {
        return false;
    }
    std::erase(p.m_lanes, qpn);
    m_removed.push_back(qpn); /* still routed: m_by_qpn */
    if (p.m_qps.empty()) {
        forget_depth(p);
    }
    return true;
}

void peer_table::forget_depth(peer &p)
{
    m_deep_held -= p.m_deep_place ? 1 : 0;
    p.m_deep_place = false;
    p.m_sq_depth   = 0;
}

std::vector<uint32_t> peer_table::remove_all_qps(peer &p)
{
    std::vector<uint32_t> qps = std::exchange(p.m_qps, {});
    p.m_lanes.clear();
    if (!qps.empty()) {
        forget_depth(p);
    }
    m_removed.insert(m_removed.end(), qps.begin(), qps.end());
    return qps;
}

void peer_table::cq_empty()
{
    for (uint32_t qpn : m_removed) {
        m_by_qpn.erase(qpn);
    }
    m_removed.clear();
}

peer_table::peer *peer_table::owner_of(uint32_t qpn)
{
    auto it = m_by_qpn.find(qpn);
    return it != m_by_qpn.end() ? m_peers[it->second].get() : nullptr;
}

void peer_table::client_gone(uint32_t client)
{
    for (auto &p : m_peers) {
        p->m_users.reset(client);
    }
}

peer_table::peer *peer_table::find(const wire::agent_address &a)
{
    auto it = m_by_addr.find(key_of(a));
    return it != m_by_addr.end() ? m_peers[it->second].get() : nullptr;
}

peer_table::peer *peer_table::find_sender(const wire::agent_address &a)
{
    peer *p = find(a);
    if (p == nullptr || p->loopback) {
        return nullptr;
    }
    const uint64_t known = p->conn->peer().instance_id;
    return known == 0 || known == a.agent_id ? p : nullptr;
}

bool peer_table::recyclable(const peer &p) const
{
    return !p.loopback && unconfirmed(p) &&
           (p.is(peer_state::idle) || p.is(peer_state::failed)) &&
           p.m_qps.empty() && m_holds_nothing(p.index);
}

size_t peer_table::half_open() const
{
    return static_cast<size_t>(std::count_if(m_peers.begin(), m_peers.end(),
                                             [this](const auto &p) {
                                                 return !p->loopback &&
                                                        unconfirmed(*p) &&
                                                        !recyclable(*p);
                                             }));
}

} // namespace rvt::agent
