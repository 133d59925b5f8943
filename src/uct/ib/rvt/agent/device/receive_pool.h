/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The node's receive buffers: one shared receive queue for every RC QP of
 * the agent, so the receive memory does not grow with the number of peers
 * or QPs. A buffer goes back to the SRQ as soon as the message in it has
 * been routed (copied into the destination client's inbound area).
 */
#ifndef RVT_AGENT_RECEIVE_POOL_H
#define RVT_AGENT_RECEIVE_POOL_H

#include "uct/ib/rvt/agent/device/device.h"
#include "uct/ib/rvt/agent/device/srq_ledger.h"
#include "uct/ib/rvt/agent/device/verbs_ptr.h"
#include "uct/ib/rvt/common/result.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace rvt::agent {

class receive_pool {
public:
    /* A receive's wr_id: this flag | its buffer's index. */
    static constexpr uint64_t wr_id_flag = uint64_t{1} << 63;

    /* `count` buffers of `buffer_size` bytes. */
    static result<std::unique_ptr<receive_pool>>
    create(const device &dev, uint32_t count, uint32_t buffer_size);

    ibv_srq *srq() const
    {
        return m_srq.get();
    }
    /* its MR's handle in the agent's PD */
    uint32_t mr_handle() const
    {
        return m_mr->handle;
    }
    uint32_t count() const
    {
        return m_count;
    }
    uint32_t posted() const
    {
        return m_ledger.posted();
    }
    /* completions dropped: their buffer was not on the SRQ (srq_ledger.h) */
    uint64_t extra_completions() const
    {
        return m_ledger.extra_completions();
    }
    /* reposts skipped: the buffer was on the SRQ already */
    uint64_t refused_reposts() const
    {
        return m_ledger.refused_reposts();
    }
    /* The bytes a completed receive left in buffer `index`. */
    std::span<const std::byte> data(uint32_t index, uint32_t length) const;
    /* Gives buffers back to the SRQ, one doorbell for all; one that is
     * on the SRQ already is skipped (and counted). */
    result<done> repost(std::span<const uint32_t> indices);
    /* A receive completed on buffer `index`: true if the buffer was on
     * the SRQ; false for a completion to drop (srq_ledger.h). */
    bool consumed(uint32_t index)
    {
        return m_ledger.completed(index);
    }

private:
    receive_pool() = default;

    std::vector<std::byte> m_memory;
    uint32_t m_count       = 0;
    uint32_t m_buffer_size = 0;
    srq_ledger m_ledger{0};
    verbs::mr_ptr m_mr;
    verbs::srq_ptr m_srq;
};

} // namespace rvt::agent

#endif
