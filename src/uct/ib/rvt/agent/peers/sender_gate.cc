/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Whom the handshake channel still spends a credential check on
 * (sender_gate.h).
 */
#include "uct/ib/rvt/agent/peers/sender_gate.h"

#include "uct/ib/rvt/common/format.h"

#include <algorithm>

namespace rvt::agent {

sender_gate::sender_gate(sender_gate_config cfg) : m_cfg(cfg)
{
    m_cfg.max_failures = std::max<uint32_t>(m_cfg.max_failures, 1);
    m_cfg.capacity     = std::max<uint32_t>(m_cfg.capacity, 1);
    m_cfg.burst        = std::max<uint32_t>(m_cfg.burst, 1);
    m_cfg.refill       = std::max(m_cfg.refill, std::chrono::milliseconds{1});
}

bool sender_gate::age(entry &e, time_point now) const
{
    if (e.tokens < m_cfg.burst && now > e.refilled) {
        const auto more = (now - e.refilled) / m_cfg.refill;
        if (more >= m_cfg.burst - e.tokens) {
            e.tokens   = m_cfg.burst;
            e.refilled = now;
        } else if (more > 0) {
            e.tokens += static_cast<uint32_t>(more);
            e.refilled += more * m_cfg.refill;
        }
    }
    if (e.held_until && now >= *e.held_until) {
        e.held_until.reset(); /* served its hold: a fresh count */
        e.failures = 0;
    }
    if (!e.held_until && e.failures > 0 && now - e.since > m_cfg.window) {
        e.failures = 0;
    }
    return e.tokens == m_cfg.burst && e.failures == 0 && !e.held_until;
}

sender_gate::table::iterator
sender_gate::remember(const sender &s, bool known, time_point now)
{
    if (auto it = m_senders.find(s); it != m_senders.end()) {
        return it;
    }
    const auto make = [&] {
        m_crowded_until.reset();
        return m_senders
                .emplace(s, entry{known, m_cfg.burst, now, 0, now, {}, now})
                .first;
    };
    if (m_senders.size() < m_cfg.capacity) {
        return make();
    }
    if (!known && m_crowded_until && now < *m_crowded_until) {
        ++m_crowded; /* nothing has changed since the last look */
        return m_senders.end();
    }
    for (auto it = m_senders.begin(); it != m_senders.end();) {
        it = age(it->second, now) ? m_senders.erase(it) : std::next(it);
    }
    if (m_senders.size() < m_cfg.capacity) {
        return make();
    }
    const auto none = m_senders.end();
    auto stranger   = none; /* seen longest ago, not held, not known */
    auto peer       = none; /* ... known */
    auto ending     = none; /* the hold that ends first */
    for (auto it = m_senders.begin(); it != none; ++it) {
        const entry &e = it->second;
        auto &oldest   = e.known ? peer : stranger;
        if (e.held_until) {
            if (ending == none || *e.held_until < *ending->second.held_until) {
                ending = it;
            }
        } else if (oldest == none || e.seen < oldest->second.seen) {
            oldest = it;
        }
    }
    const auto victim = stranger != none ? stranger :
                        peer != none     ? peer :
                        known            ? ending :
                                           none;
    if (victim == none) {
        /* every one is held: a stranger waits for the first to end */
        m_crowded_until = *ending->second.held_until;
        ++m_crowded;
        return none;
    }
    m_senders.erase(victim);
    ++m_evicted;
    return make();
}

sender_gate::verdict
sender_gate::admit(const sender &from, bool known, time_point now)
{
    auto it = remember(from, known, now);
    if (it == m_senders.end()) {
        return verdict::crowded;
    }
    entry &e = it->second;
    e.known  = known;
    (void)age(e, now);
    if (e.held_until) {
        ++m_held_back;
        return verdict::held;
    }
    e.seen = now;
    if (e.tokens == 0) {
        ++m_throttled;
        return verdict::throttled;
    }
    if (e.tokens == m_cfg.burst) {
        e.refilled = now; /* a full bucket fills no further */
    }
    --e.tokens;
    return verdict::check;
}

bool sender_gate::failed(const sender &from, time_point now)
{
    auto it = m_senders.find(from);
    if (it == m_senders.end()) {
        it = remember(from, false, now);
        if (it == m_senders.end()) {
            return false;
        }
    }
    entry &e = it->second;
    (void)age(e, now);
    if (e.held_until) {
        return false; /* checked while held: neither counts nor extends */
    }
    e.seen = now;
    if (e.failures == 0) {
        e.since = now;
    }
    ++e.failures;
    if (e.failures < m_cfg.max_failures) {
        return false;
    }
    e.held_until = now + m_cfg.hold;
    return worth_logging(++m_holds);
}

void sender_gate::passed(const sender &from)
{
    if (auto it = m_senders.find(from); it != m_senders.end()) {
        it->second.failures = 0;
    }
}

void sender_gate::checked(std::chrono::nanoseconds took)
{
    const bool was_open = pass_open();
    m_pass_spent += took;
    if (was_open && !pass_open()) {
        ++m_passes_cut;
    }
}

std::string_view to_string(sender_gate::verdict v)
{
    switch (v) {
    case sender_gate::verdict::check:
        return "check";
    case sender_gate::verdict::held:
        return "held";
    case sender_gate::verdict::throttled:
        return "throttled";
    case sender_gate::verdict::crowded:
        return "crowded";
    }
    return "?";
}

} // namespace rvt::agent
