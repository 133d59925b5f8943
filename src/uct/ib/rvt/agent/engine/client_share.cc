/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Each client's bounded share of its agent (see client_share.h for the
 * bounds and the table).
 */
#include "uct/ib/rvt/agent/engine/client_share.h"

#include "uct/ib/rvt/common/format.h"

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

share_limits resolve(share_limits limits, uint32_t completion_capacity)
{
    if (limits.ops == 0) {
        limits.ops = completion_capacity;
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
        return "client share: max-client-peers 0: expected at least 1";
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
        return format("%llu peers made for this client: expected fewer than "
                      "%s (%u) to make another",
                      v, setting.c_str(), limit);
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
    const uint64_t count = ++m_clients[index].refused[slot(b)];
    ++m_refused[slot(b)];
    return {b, value, limit, count, worth_logging(count)};
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

share_verdict client_share::make_peer(uint32_t index)
{
    client &c = m_clients[index];
    if (c.peers >= m_limits.peers) {
        return refuse(index, share_bound::peers, c.peers, m_limits.peers);
    }
    ++c.peers;
    return {};
}

} // namespace rvt::agent
