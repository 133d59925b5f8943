/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Departed clients (departures.h): the two tables and their transitions.
 */
#include "uct/ib/rvt/agent/engine/departures.h"

#include <algorithm>

namespace rvt::agent {

bool departures::table::insert(uint64_t k, time_point now)
{
    if (!since.emplace(k, now).second) {
        return false;
    }
    order.emplace_back(k, now);
    return true;
}

void departures::table::expire(time_point before)
{
    while (!order.empty() && order.front().second <= before) {
        const auto [k, when] = order.front();
        order.pop_front();
        auto it = since.find(k);
        if (it != since.end() && it->second == when) {
            since.erase(it);
        }
    }
}

bool departures::stale(uint32_t peer, uint32_t index, uint8_t generation,
                       time_point now)
{
    return m_told.insert(key(peer, index, generation), now);
}

void departures::reattached(uint32_t index, uint8_t generation)
{
    const uint32_t low = index_and_generation(key(0, index, generation));
    std::erase_if(m_told.since, [low](const auto &entry) {
        return index_and_generation(entry.first) == low;
    });
}

void departures::peer_connected(uint32_t peer)
{
    std::erase_if(m_told.since, [peer](const auto &entry) {
        return peer_of(entry.first) == peer;
    });
}

bool departures::gone(uint32_t peer, uint32_t index, uint8_t generation,
                      time_point now)
{
    return m_gone.insert(key(peer, index, generation), now);
}

void departures::tick(time_point now)
{
    m_told.expire(now - m_memory);
    m_gone.expire(now - m_memory);
}

std::optional<time_point> departures::next_timer() const
{
    std::optional<time_point> t;
    for (const table *tb : {&m_told, &m_gone}) {
        if (!tb->order.empty()) {
            const time_point due = tb->order.front().second + m_memory;
            t                    = t ? std::min(*t, due) : due;
        }
    }
    return t;
}

} // namespace rvt::agent
