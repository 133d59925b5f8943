#include "uct/ib/rvt/agent/receive_pool.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace rvt::agent {

result<std::unique_ptr<receive_pool>>
receive_pool::create(const device &dev, uint32_t count, uint32_t buffer_size,
                     uint64_t tag)
{
    if (count == 0 || count > static_cast<uint32_t>(dev.attr().max_srq_wr)) {
        return failure{"receive pool of " + std::to_string(count) +
                       " buffers: expected 1 to the device's " +
                       std::to_string(dev.attr().max_srq_wr)};
    }
    std::unique_ptr<receive_pool> pool(new receive_pool);
    pool->m_count       = count;
    pool->m_buffer_size = buffer_size;
    pool->m_tag         = tag;
    pool->m_memory.resize(size_t{count} * buffer_size);
    pool->m_mr.reset(ibv_reg_mr(dev.pd(), pool->m_memory.data(),
                                pool->m_memory.size(), IBV_ACCESS_LOCAL_WRITE));
    if (!pool->m_mr) {
        return failure{std::string("receive pool: ibv_reg_mr failed: ") +
                       std::strerror(errno)};
    }
    ibv_srq_init_attr init{};
    init.attr.max_wr  = count;
    init.attr.max_sge = 1;
    pool->m_srq.reset(ibv_create_srq(dev.pd(), &init));
    if (!pool->m_srq) {
        return failure{std::string("receive pool: ibv_create_srq failed: ") +
                       std::strerror(errno)};
    }
    for (uint32_t i = 0; i < count; ++i) {
        auto r = pool->repost(i);
        if (!r) {
            return failure{r.error()};
        }
    }
    return pool;
}

std::span<const std::byte>
receive_pool::data(uint32_t index, uint32_t length) const
{
    return {m_memory.data() + size_t{index} * m_buffer_size,
            std::min(length, m_buffer_size)};
}

result<done> receive_pool::repost(uint32_t index)
{
    ibv_sge sge{reinterpret_cast<uint64_t>(m_memory.data() +
                                           size_t{index} * m_buffer_size),
                m_buffer_size, m_mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id         = m_tag | index;
    wr.sg_list       = &sge;
    wr.num_sge       = 1;
    ibv_recv_wr *bad = nullptr;
    int err          = ibv_post_srq_recv(m_srq.get(), &wr, &bad);
    if (err != 0) {
        return failure{"receive pool: ibv_post_srq_recv failed: " +
                       std::string(std::strerror(err))};
    }
    ++m_posted;
    return done{};
}

} // namespace rvt::agent
