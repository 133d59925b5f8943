/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Each client's bounded share of its agent (see client_share.h for the
 * bounds and the table).
 */
#include "uct/ib/rvt/agent/engine/client_share.h"

#include "uct/ib/rvt/common/format.h"

#include <algorithm>

namespace rvt::agent {

std::string_view to_string(share_bound b)
{
    switch (b) {
    case share_bound::none:
        return "none";
    case share_bound::ops:
        return "ops";
    case share_bound::lkeys:
        return "lkeys";
    case share_bound::peers:
        return "peers";
    }
    return "unknown";
}

std::string_view setting_of(share_bound b)
{
    switch (b) {
    case share_bound::ops:
        return "max-client-ops";
    case share_bound::lkeys:
        return "max-client-lkeys";
    case share_bound::peers:
        return "max-client-peers";
    case share_bound::none:
        break;
    }
    return "none";
}

share_limits
resolve(share_limits limits, uint32_t completion_capacity, uint32_t max_peers)
{
    if (limits.ops == 0) {
        limits.ops = completion_capacity;
    }
    if (limits.peers == 0) {
        limits.peers = std::max(max_peers / 2, 1u);
    }
    return limits;
}

std::string config_error(const share_limits &limits)
{
    if (limits.ops == 0) {
        return "client share: max-client-ops 0: expected at least 1 (0 "
               "stands for the completion ring's capacity until resolved)";
    }
    /* an op names two lkeys at most: its data's and its AM header's */
    if (limits.lkeys < 2) {
        return format("client share: max-client-lkeys %u: expected at least "
                      "2, the lkeys one op may name",
                      limits.lkeys);
    }
    if (limits.peers == 0) {
        return "client share: max-client-peers 0: expected at least 1 (0 "
               "stands for half of max-peers until resolved)";
    }
    return {};
}

std::string share_verdict::text() const
{
    const std::string setting(setting_of(refused));
    const auto v = static_cast<unsigned long long>(value);
    switch (refused) {
    case share_bound::ops:
        return format("%llu ops held for this client (queued, waiting for a "
                      "peer, parked or posted): expected fewer than %s (%u)",
                      v, setting.c_str(), limit);
    case share_bound::lkeys:
        return format("%llu distinct lkeys named by this client's ops with "
                      "this one: expected at most %s (%u)",
                      v, setting.c_str(), limit);
    case share_bound::peers:
        return format("%llu peers made for this process (pid %d): expected "
                      "fewer than %s (%u) to make another",
                      v, static_cast<int>(pid), setting.c_str(), limit);
    case share_bound::none:
        break;
    }
    return "admitted";
}

client_share::client_share(const share_limits &resolved, uint32_t max_clients) :
    m_limits(resolved), m_clients(max_clients)
{
}

void client_share::attached(uint32_t index)
{
    m_clients[index] = client{};
}

share_verdict client_share::refuse(uint32_t index, share_bound b,
                                   uint64_t value, uint32_t limit)
{
    ++m_clients[index].refused[slot(b)];
    const uint64_t count = ++m_refused[slot(b)];
    share_verdict v;
    v.refused = b;
    v.value   = value;
    v.limit   = limit;
    v.count   = count;
    v.log     = worth_logging(count);
    return v;
}

share_verdict client_share::take_op(uint32_t index, uint64_t lkeys)
{
    client &c = m_clients[index];
    if (c.held >= m_limits.ops) {
        return refuse(index, share_bound::ops, c.held, m_limits.ops);
    }
    if (lkeys > m_limits.lkeys) {
        return refuse(index, share_bound::lkeys, lkeys, m_limits.lkeys);
    }
    ++c.held;
    return {};
}

void client_share::op_done(uint32_t index)
{
    client &c = m_clients[index];
    if (c.held > 0) {
        --c.held;
    }
}

void client_share::release(uint32_t record)
{
    auto it = m_charges.find(record);
    if (it == m_charges.end()) {
        return;
    }
    auto owner = m_charged.find(it->second.pid);
    if (owner != m_charged.end() && --owner->second == 0) {
        m_charged.erase(owner);
    }
    m_charges.erase(it);
}

share_verdict client_share::make_peer(uint32_t index, pid_t pid,
                                      uint32_t record,
                                      const wire::agent_address &addr)
{
    /* a record of its own that the new one replaces is no longer its */
    auto old            = m_charges.find(record);
    const bool replaces = old != m_charges.end() && old->second.pid == pid;
    const uint32_t n    = peers_charged(pid) - (replaces ? 1 : 0);
    if (n >= m_limits.peers) {
        share_verdict v = refuse(index, share_bound::peers, n, m_limits.peers);
        v.pid           = pid;
        return v;
    }
    release(record);
    m_charges[record] = {pid, addr};
    ++m_charged[pid];
    return {};
}

void client_share::peer_is(uint32_t record, const wire::agent_address &addr)
{
    auto it = m_charges.find(record);
    if (it != m_charges.end() && !(it->second.addr == addr)) {
        release(record);
    }
}

} // namespace rvt::agent
