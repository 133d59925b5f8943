/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's client indices (client_indices.h).
 */
#include "uct/ib/rvt/agent/attach/client_indices.h"

namespace rvt::agent {

client_indices::client_indices(uint32_t count,
                               std::chrono::milliseconds quarantine) :
    m_quarantine(quarantine), m_slots(count)
{
}

client_indices::pick_result client_indices::pick(time_point now) const
{
    pick_result r;
    for (uint32_t i = 0; i < m_slots.size(); ++i) {
        const slot &s = m_slots[i];
        if (s.held) {
            continue;
        }
        if (s.generation == 0 || now - s.freed_at >= m_quarantine) {
            r.index = i;
            return r;
        }
        ++r.quarantined;
    }
    return r;
}

uint32_t client_indices::give(uint32_t index)
{
    slot &s      = m_slots[index];
    s.held       = true;
    s.generation = next_generation(index);
    return s.generation;
}

void client_indices::free(uint32_t index, time_point now)
{
    slot &s = m_slots[index];
    if (s.held) {
        s.held     = false;
        s.freed_at = now;
    }
}

} // namespace rvt::agent
