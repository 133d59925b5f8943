/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/agent/device/receive_pool.h"

#include "uct/ib/rvt/agent/device/chain_taken.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

namespace rvt::agent {

result<std::unique_ptr<receive_pool>>
receive_pool::create(const device &dev, uint32_t count, uint32_t buffer_size)
{
    if (count == 0 || count > static_cast<uint32_t>(dev.attr().max_srq_wr)) {
        return failure{"receive pool of " + std::to_string(count) +
                       " buffers: expected 1 to the device's " +
                       std::to_string(dev.attr().max_srq_wr)};
    }
    std::unique_ptr<receive_pool> pool(new receive_pool);
    pool->m_count       = count;
    pool->m_buffer_size = buffer_size;
    pool->m_ledger      = srq_ledger(count);
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
    std::vector<uint32_t> all(count);
    for (uint32_t i = 0; i < count; ++i) {
        all[i] = i;
    }
    auto r = pool->repost(all);
    if (!r) {
        return failure{r.error()};
    }
    return pool;
}

std::span<const std::byte>
receive_pool::data(uint32_t index, uint32_t length) const
{
    return {m_memory.data() + size_t{index} * m_buffer_size,
            std::min(length, m_buffer_size)};
}

result<done> receive_pool::repost(std::span<const uint32_t> indices)
{
    constexpr size_t chain = 32;
    std::array<ibv_sge, chain> sges;
    std::array<ibv_recv_wr, chain> wrs;
    std::array<uint32_t, chain> batch;
    while (!indices.empty()) {
        size_t n = 0;
        while (n < chain && !indices.empty()) {
            if (m_ledger.reposted(indices.front())) {
                batch[n++] = indices.front();
            }
            indices = indices.subspan(1);
        }
        if (n == 0) {
            break;
        }
        for (size_t i = 0; i < n; ++i) {
            const uint32_t index    = batch[i];
            const std::byte *buffer = m_memory.data() +
                                      size_t{index} * m_buffer_size;
            sges[i]        = {reinterpret_cast<uint64_t>(buffer), m_buffer_size,
                              m_mr->lkey};
            wrs[i]         = {};
            wrs[i].wr_id   = wr_id_flag | index;
            wrs[i].sg_list = &sges[i];
            wrs[i].num_sge = 1;
            wrs[i].next    = i + 1 < n ? &wrs[i + 1] : nullptr;
        }
        ibv_recv_wr *bad = nullptr;
        const int err    = ibv_post_srq_recv(m_srq.get(), wrs.data(), &bad);
        const size_t ok  = err == 0 ?
                                   n :
                                   chain_taken<ibv_recv_wr>(wrs.data(), n, bad);
        for (size_t i = ok; i < n; ++i) {
            m_ledger.not_reposted(batch[i]);
        }
        if (err != 0) {
            return failure{"receive pool: ibv_post_srq_recv failed: " +
                           std::string(std::strerror(err))};
        }
    }
    return done{};
}

} // namespace rvt::agent
