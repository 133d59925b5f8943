/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The interface's operations in flight: one slot per posted work request,
 * found again from the completion's wr_id.
 *
 *   wr_id = generation (high 32 bits) | slot index (low 32 bits)
 *
 * The generation changes each time a slot is reused, so a completion that
 * does not name a slot in use (an agent bug, a corrupt ring) is detected
 * and dropped instead of completing someone else's operation.
 *
 * There are at most as many slots as the session admits requests in
 * flight (its completion ring), and each holds at most one bounce buffer,
 * so TX_QUEUE_LEN bounds both.
 */
#ifndef RVT_UCT_TX_OPS_H
#define RVT_UCT_TX_OPS_H

#include "uct/ib/rvt/uct/ucx.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace rvt::uct {

struct ep;

struct tx_op {
    ep *owner; /* null once its endpoint is destroyed */
    uct_completion_t *comp; /* the caller's, may be null */
    int32_t bounce; /* bounce buffer index, or -1 */
    uint32_t generation;
    bool in_use;
    /* get_bcopy: hands the bounce buffer's bytes to the caller on success */
    uct_unpack_callback_t unpack;
    void *unpack_arg;
    uint32_t unpack_length;
    /* atomics with a fetch: where the fetched value goes on success */
    uint64_t *result;
};

class tx_ops {
public:
    void init(uint32_t count)
    {
        m_slots.assign(count, tx_op{});
        m_free.clear();
        m_free.reserve(count);
        for (uint32_t i = count; i > 0; --i) {
            m_free.push_back(i - 1);
        }
    }

    bool full() const
    {
        return m_free.empty();
    }
    uint32_t in_flight() const
    {
        return static_cast<uint32_t>(m_slots.size() - m_free.size());
    }

    /* Takes a free slot (there must be one); returns its wr_id. */
    uint64_t take(ep *owner, uct_completion_t *comp, int32_t bounce)
    {
        const uint32_t i = m_free.back();
        m_free.pop_back();
        tx_op &op = m_slots[i];
        op        = {owner,   comp, bounce, op.generation + 1, true, nullptr,
                     nullptr, 0,    nullptr};
        return (uint64_t{op.generation} << 32) | i;
    }

    /* Makes the operation wr_id (taken, in flight) a get_bcopy. */
    void set_unpack(uint64_t wr_id, uct_unpack_callback_t cb, void *arg,
                    uint32_t length)
    {
        tx_op &op        = m_slots[static_cast<uint32_t>(wr_id)];
        op.unpack        = cb;
        op.unpack_arg    = arg;
        op.unpack_length = length;
    }

    /* Makes the operation wr_id (taken, in flight) an atomic whose
     * fetched value goes to *result. */
    void set_result(uint64_t wr_id, uint64_t *result)
    {
        m_slots[static_cast<uint32_t>(wr_id)].result = result;
    }

    /* Returns a slot taken but never posted (the post was refused). */
    void untake(uint64_t wr_id)
    {
        m_slots[static_cast<uint32_t>(wr_id)].in_use = false;
        m_free.push_back(static_cast<uint32_t>(wr_id));
    }

    /* The operation wr_id names, freeing its slot; nullopt if wr_id names
     * no operation in flight. */
    std::optional<tx_op> finish(uint64_t wr_id)
    {
        const auto i = static_cast<uint32_t>(wr_id);
        if (i >= m_slots.size() || !m_slots[i].in_use ||
            m_slots[i].generation != static_cast<uint32_t>(wr_id >> 32)) {
            return std::nullopt;
        }
        m_slots[i].in_use = false;
        m_free.push_back(i);
        return m_slots[i];
    }

    /* fn(op, wr_id) for each operation in flight; fn may finish() the
     * one it is given. */
    template<class Fn> void for_each_in_flight(Fn &&fn)
    {
        for (uint32_t i = 0; i < m_slots.size(); ++i) {
            if (m_slots[i].in_use) {
                fn(m_slots[i], (uint64_t{m_slots[i].generation} << 32) | i);
            }
        }
    }

private:
    std::vector<tx_op> m_slots;
    std::vector<uint32_t> m_free;
};

} // namespace rvt::uct

#endif
