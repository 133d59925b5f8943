/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The interface's registered bounce buffers (bounce_pool.h).
 */
#include "uct/ib/rvt/uct/bounce_pool.h"

#include "uct/ib/rvt/uct/ucx.h"

#include <infiniband/verbs.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <string>

namespace rvt::uct {

bounce_pool::bounce_pool(agent_link &link, std::byte *base, size_t mapped,
                         uint32_t size) :
    m_link(link), m_base(base), m_mapped(mapped), m_size(size)
{
}

result<std::unique_ptr<bounce_pool>>
bounce_pool::create(agent_link &link, uint32_t count, uint32_t size)
{
    if (count == 0 || size == 0 || size % 64 != 0) {
        return failure{"bounce buffers: " + std::to_string(count) + " of " +
                       std::to_string(size) +
                       " bytes: expected at least one, of a multiple of 64"};
    }
    const size_t page   = static_cast<size_t>(ucs_get_page_size());
    const size_t bytes  = size_t{count} * size;
    const size_t mapped = (bytes + page - 1) / page * page;
    void *base          = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        return failure{"bounce buffers: mmap of " + std::to_string(mapped) +
                       " bytes failed: " + std::strerror(errno)};
    }
    /* owns the mapping from here on, whatever happens next */
    std::unique_ptr<bounce_pool> pool(
            new bounce_pool(link, static_cast<std::byte *>(base), mapped,
                            size));
    /* the agent reads them (SEND, WRITE); nothing writes into them */
    auto mr = link.register_memory(base, mapped, IBV_ACCESS_LOCAL_WRITE);
    if (!mr) {
        return failure{"bounce buffers: " + mr.error()};
    }
    pool->m_mr         = mr.value();
    pool->m_registered = true;
    pool->m_free.reserve(count);
    for (uint32_t i = count; i > 0; --i) {
        pool->m_free.push_back(i - 1);
    }
    return pool;
}

bounce_pool::~bounce_pool()
{
    if (m_registered) {
        try {
            auto gone = m_link.deregister_memory(m_mr);
            if (!gone) {
                ucs_warn("rvt: deregistering the bounce buffers failed: %s",
                         gone.error().c_str());
            }
        } catch (const std::exception &e) {
            ucs_warn("rvt: deregistering the bounce buffers: %s", e.what());
        }
    }
    munmap(m_base, m_mapped);
}

} // namespace rvt::uct
