/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The bound on failed credentials per sending host (sender_gate.h).
 */
#include "uct/ib/rvt/agent/peers/sender_gate.h"

#include "uct/ib/rvt/common/format.h"

#include <algorithm>

namespace rvt::agent {

sender_gate::sender_gate(sender_gate_config cfg) : m_cfg(cfg)
{
    m_cfg.max_failures = std::max<uint32_t>(m_cfg.max_failures, 1);
    m_cfg.capacity     = std::max<uint32_t>(m_cfg.capacity, 1);
}

bool sender_gate::admit(const gid &from, time_point now)
{
    auto it = m_senders.find(from);
    if (it == m_senders.end() || !it->second.held_until) {
        return true;
    }
    if (now < *it->second.held_until) {
        ++m_held_back;
        return false;
    }
    m_senders.erase(it); /* served its hold: a fresh start */
    return true;
}

bool sender_gate::failed(const gid &from, time_point now)
{
    auto it = m_senders.find(from);
    if (it == m_senders.end()) {
        if (m_senders.size() >= m_cfg.capacity) {
            auto oldest = std::min_element(m_senders.begin(), m_senders.end(),
                                           [](const auto &a, const auto &b) {
                                               return a.second.last <
                                                      b.second.last;
                                           });
            m_senders.erase(oldest);
            ++m_evicted;
        }
        it = m_senders.emplace(from, sender{0, now, now, {}}).first;
    }
    sender &s = it->second;
    if (s.held_until) {
        return false; /* checked while held: a known peer's datagram */
    }
    if (s.failures > 0 && now - s.since > m_cfg.window) {
        s.failures = 0;
        s.since    = now;
    }
    ++s.failures;
    s.last = now;
    if (s.failures < m_cfg.max_failures) {
        return false;
    }
    s.held_until = now + m_cfg.hold;
    return worth_logging(++m_holds);
}

void sender_gate::passed(const gid &from)
{
    m_senders.erase(from);
}

} // namespace rvt::agent
