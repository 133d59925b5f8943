/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which of the agent's receive buffers are on the SRQ (receive_pool.h).
 *
 * The device hands a buffer back once, with the completion of the receive
 * it was posted for. A second completion for the same buffer (rxe has
 * been seen to end a receive in error and then flush it again with its
 * QP) names a buffer the agent has already read and queued for reposting:
 * taken as a message it would deliver what is in the buffer now, and
 * reposted again it would put the buffer on the SRQ twice, where two
 * messages would land in one buffer, one of them read twice and the other
 * lost. The ledger tells such completions apart so that the pool drops
 * them and counts them, and refuses a repost of a buffer that is on the
 * SRQ already.
 */
#ifndef RVT_AGENT_SRQ_LEDGER_H
#define RVT_AGENT_SRQ_LEDGER_H

#include <cstdint>
#include <vector>

namespace rvt::agent {

class srq_ledger {
public:
    explicit srq_ledger(uint32_t count) : m_on(count, false)
    {
    }

    /* A completion for buffer `index`: true if it was on the SRQ (it is
     * off now, the agent's to read); false for a buffer the device had
     * handed back already, or no buffer of the pool (counted). */
    bool completed(uint32_t index)
    {
        if (index >= m_on.size() || !m_on[index]) {
            ++m_extra;
            return false;
        }
        m_on[index] = false;
        --m_posted;
        return true;
    }
    /* Buffer `index` goes back to the SRQ: true if it was off (it is on
     * now); false if it is on the SRQ already, or no buffer of the pool. */
    bool reposted(uint32_t index)
    {
        if (index >= m_on.size() || m_on[index]) {
            ++m_refused;
            return false;
        }
        m_on[index] = true;
        ++m_posted;
        return true;
    }
    /* A repost that the device refused after all (ibv_post_srq_recv). */
    void not_reposted(uint32_t index)
    {
        if (index < m_on.size() && m_on[index]) {
            m_on[index] = false;
            --m_posted;
        }
    }

    uint32_t posted() const
    {
        return m_posted;
    }
    /* completions for a buffer that was not on the SRQ */
    uint64_t extra_completions() const
    {
        return m_extra;
    }
    /* reposts of a buffer that was on the SRQ already */
    uint64_t refused_reposts() const
    {
        return m_refused;
    }

private:
    std::vector<bool> m_on;
    uint32_t m_posted  = 0;
    uint64_t m_extra   = 0;
    uint64_t m_refused = 0;
};

} // namespace rvt::agent

#endif
