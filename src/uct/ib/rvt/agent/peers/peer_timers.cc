/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/agent/peers/peer_timers.h"

#include <algorithm>

namespace rvt::agent {

void peer_timers::note(uint32_t peer, std::optional<time_point> t)
{
    if (!t) {
        return;
    }
    if (peer >= m_slots.size()) {
        m_slots.resize(peer + 1);
    }
    slot &s = m_slots[peer];
    if (s.live && s.due <= *t) {
        return;
    }
    s.live = true;
    s.due  = *t;
    ++s.epoch;
    m_heap.push_back({*t, peer, s.epoch});
    std::push_heap(m_heap.begin(), m_heap.end(), later);
}

void peer_timers::pop()
{
    std::pop_heap(m_heap.begin(), m_heap.end(), later);
    m_heap.pop_back();
}

const std::vector<uint32_t> &peer_timers::take_due(time_point now)
{
    m_due.clear();
    /* stale entries on top go too, so that next() names a live one */
    while (!m_heap.empty()) {
        const entry e    = m_heap.front();
        slot &s          = m_slots[e.peer];
        const bool stale = !s.live || s.epoch != e.epoch;
        if (!stale && e.due > now) {
            break;
        }
        pop();
        if (!stale) {
            s.live = false;
            m_due.push_back(e.peer);
        }
    }
    return m_due;
}

std::optional<peer_timers::time_point> peer_timers::next() const
{
    if (m_heap.empty()) {
        return std::nullopt;
    }
    return m_heap.front().due;
}

} // namespace rvt::agent
