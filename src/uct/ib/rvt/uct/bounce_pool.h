/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Bounce buffers for short and bcopy operations: a work request names one
 * registered local buffer, and the caller's data (an am_short payload, a
 * pack callback's output) lives in no registered memory, so it is copied
 * into one of these first.
 *
 * One anonymous mapping of count * size bytes, registered once into the
 * agent's PD through the interface's agent link (the attachment the
 * interface posts on: the agent accepts only lkeys its posting client
 * registered). A buffer is taken when an operation is posted and returned
 * when that operation's completion arrives, never earlier: until then the
 * agent or the device may still read it.
 */
#ifndef RVT_UCT_BOUNCE_POOL_H
#define RVT_UCT_BOUNCE_POOL_H

#include "uct/ib/rvt/client/registration.h"
#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/uct/agent_link.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace rvt::uct {

class bounce_pool {
public:
    /* count buffers of size bytes (size a multiple of 64). */
    static result<std::unique_ptr<bounce_pool>>
    create(agent_link &link, uint32_t count, uint32_t size);
    ~bounce_pool();

    bounce_pool(const bounce_pool &)            = delete;
    bounce_pool &operator=(const bounce_pool &) = delete;

    bool empty() const
    {
        return m_free.empty();
    }
    /* A free buffer's index; the pool must not be empty. */
    uint32_t get()
    {
        uint32_t i = m_free.back();
        m_free.pop_back();
        return i;
    }
    void put(uint32_t index)
    {
        m_free.push_back(index);
    }
    std::byte *at(uint32_t index) const
    {
        return m_base + size_t{index} * m_size;
    }
    uint32_t lkey() const
    {
        return m_mr.lkey;
    }
    uint32_t buffer_size() const
    {
        return m_size;
    }

private:
    bounce_pool(agent_link &link, std::byte *base, size_t mapped,
                uint32_t size);

    agent_link &m_link;
    std::byte *m_base;
    size_t m_mapped;
    uint32_t m_size;
    client::memory_region m_mr{};
    bool m_registered = false;
    std::vector<uint32_t> m_free;
};

} // namespace rvt::uct

#endif
