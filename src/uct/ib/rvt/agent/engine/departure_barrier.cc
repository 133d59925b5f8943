/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The departure barrier (departure_barrier.h): its transitions.
 */
#include "uct/ib/rvt/agent/engine/departure_barrier.h"

#include <algorithm>

namespace rvt::agent {

departure_barrier::dues
departure_barrier::begin(uint32_t index, uint8_t generation,
                         const std::vector<uint32_t> &told, time_point now)
{
    dues out;
    if (auto old = m_waiting.find(index); old != m_waiting.end()) {
        out.push_back({index, static_cast<uint32_t>(old->second.peers.size())});
        m_waiting.erase(old);
    }
    if (told.empty()) {
        out.push_back({index, 0});
        return out;
    }
    m_waiting[index] = {generation,
                        std::unordered_set<uint32_t>(told.begin(), told.end()),
                        now + m_wait};
    return out;
}

departure_barrier::dues
departure_barrier::heard(uint32_t peer, uint32_t index, uint8_t generation)
{
    auto it = m_waiting.find(index);
    if (it == m_waiting.end() || it->second.generation != generation ||
        it->second.peers.erase(peer) == 0 || !it->second.peers.empty()) {
        return {};
    }
    m_waiting.erase(it);
    return {{index, 0}};
}

departure_barrier::dues departure_barrier::peer_lost(uint32_t peer)
{
    dues out;
    for (auto it = m_waiting.begin(); it != m_waiting.end();) {
        if (it->second.peers.erase(peer) != 0 && it->second.peers.empty()) {
            out.push_back({it->first, 0});
            it = m_waiting.erase(it);
        } else {
            ++it;
        }
    }
    std::ranges::sort(out, {}, &due::index);
    return out;
}

void departure_barrier::client_gone(uint32_t index)
{
    m_waiting.erase(index);
}

departure_barrier::dues departure_barrier::tick(time_point now)
{
    dues out;
    for (auto it = m_waiting.begin(); it != m_waiting.end();) {
        if (it->second.until <= now) {
            out.push_back({it->first,
                           static_cast<uint32_t>(it->second.peers.size())});
            it = m_waiting.erase(it);
        } else {
            ++it;
        }
    }
    std::ranges::sort(out, {}, &due::index);
    return out;
}

std::optional<time_point> departure_barrier::next_timer() const
{
    std::optional<time_point> t;
    for (const auto &[index, r] : m_waiting) {
        t = t ? std::min(*t, r.until) : r.until;
    }
    return t;
}

} // namespace rvt::agent
