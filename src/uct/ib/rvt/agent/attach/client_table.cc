/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's clients (client_table.h).
 */
#include "uct/ib/rvt/agent/attach/client_table.h"

#include "uct/ib/rvt/agent/attach/attach_server.h"
#include "uct/ib/rvt/common/imm.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace rvt::agent {

client_table::client_table(const shm_layout &layout,
                           std::chrono::microseconds full_scan_period) :
    m_layout(layout),
    m_full_scan_period(full_scan_period),
    m_clients(imm::max_clients)
{
}

client_table::client_state &client_table::attach(const attached_client &a)
{
    client_state &c = m_clients[a.index];
    /* fresh counters; generation(index), the attach server's count, tells
     * completions of an earlier holder of this index apart, and what
     * peers send to one */
    assert(m_indices && m_indices->held(a.index) &&
           m_indices->generation(a.index) == a.generation);
    c         = client_state{};
    c.channel = std::make_unique<client_channel>(a.shm, m_layout,
                                                 a.wake_fd.get(), &m_given,
                                                 a.index);
    /* what it posted before it was attached here: at the next pass */
    m_again.insert(a.index);
    c.attached = true;
    c.who      = &a;
    m_attached.insert(std::upper_bound(m_attached.begin(), m_attached.end(),
                                       a.index),
                      a.index);
    if (m_asleep) {
        c.channel->set_agent_asleep(true);
    }
    return c;
}

void client_table::retire(uint32_t index)
{
    client_state &c = m_clients[index];
    if (c.attached) {
        c.retired = true;
    }
}

void client_table::detach(uint32_t index)
{
    client_state &c = m_clients[index];
    c.attached = false;
    c.who      = nullptr;
    c.channel.reset();
    std::erase(m_attached, index);
    m_again.erase(index);
    m_given.erase(index);
}

client_set client_table::to_visit(time_point now, work_summary_line *summary)
{
    client_set visit = std::exchange(m_again, {});
    if (now >= m_next_scan) { /* before the summary: its bits count here */
        for (uint32_t i : m_attached) {
            if (!visit.contains(i) && m_clients[i].channel->has_work()) {
                if (!has_note(summary, i)) {
                    ++m_totals.scan_found;
                }
                visit.insert(i);
            }
        }
        m_next_scan = now + m_full_scan_period;
    }
    take_summary(summary, [&](uint32_t i) {
        if (m_clients[i].attached) { /* a bit for an index not in use */
            visit.insert(i);
        }
    });
    return visit;
}

void client_table::publish_given()
{
    each_attached(m_given,
                  [](uint32_t, client_state &c) { c.channel->publish(); });
}

client_set client_table::flush_given()
{
    client_set given = std::exchange(m_given, {});
    each_attached(given, [](uint32_t, client_state &c) {
        c.channel->flush_backlog();
    });
    return given;
}

void client_table::wake_given(client_set given)
{
    given.merge(std::exchange(m_given, {}));
    each_attached(given, [&](uint32_t i, client_state &c) {
        c.channel->publish_and_wake();
        if (c.channel->backlog() > 0 || c.paused) {
            m_given.insert(i);
        }
    });
}

bool client_table::fall_asleep()
{
    m_asleep = true;
    for (uint32_t i : m_attached) {
        m_clients[i].channel->set_agent_asleep(true);
    }
    /* after announcing sleep, look once more (shm_layout.h, Doorbells) */
    bool work = false;
    for (uint32_t i : m_attached) {
        const client_channel &ch = *m_clients[i].channel;
        if (ch.has_work()) { /* its bit may be unset: take it next pass */
            m_again.insert(i);
            work = true;
        }
        if (ch.backlog() > 0) {
            m_given.insert(i);
            work = true;
        }
    }
    return work;
}

bool client_table::wake_up()
{
    if (!m_asleep) {
        return false;
    }
    m_asleep = false;
    for (uint32_t i : m_attached) {
        m_clients[i].channel->set_agent_asleep(false);
    }
    return true;
}

} // namespace rvt::agent
