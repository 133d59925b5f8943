/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shm_mapping: owner of one shared mapping of a memfd segment (unmapped on
 * destruction), and the two ways to get one: create a new segment (the
 * agent) or map a received one after checking its size (the client).
 */
#ifndef RVT_COMMON_SHM_MAPPING_H
#define RVT_COMMON_SHM_MAPPING_H

#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/common/unique_fd.h"

#include <sys/mman.h>

#include <cstddef>
#include <string>
#include <utility>

namespace rvt {

class shm_mapping {
public:
    shm_mapping() = default;
    shm_mapping(void *addr, size_t size) : m_addr(addr), m_size(size)
    {
    }
    shm_mapping(shm_mapping &&o) noexcept :
        m_addr(std::exchange(o.m_addr, nullptr)), m_size(o.m_size)
    {
    }
    shm_mapping &operator=(shm_mapping &&o) noexcept
    {
        reset();
        m_addr = std::exchange(o.m_addr, nullptr);
        m_size = o.m_size;
        return *this;
    }
    shm_mapping(const shm_mapping &)            = delete;
    shm_mapping &operator=(const shm_mapping &) = delete;
    ~shm_mapping()
    {
        reset();
    }

    void *data() const noexcept
    {
        return m_addr;
    }
    size_t size() const noexcept
    {
        return m_size;
    }
    template<class T> T *at(size_t offset) const noexcept
    {
        return reinterpret_cast<T *>(static_cast<char *>(m_addr) + offset);
    }

private:
    void reset() noexcept
    {
        if (m_addr != nullptr) {
            ::munmap(m_addr, m_size);
            m_addr = nullptr;
        }
    }

    void *m_addr  = nullptr;
    size_t m_size = 0;
};

struct shm_segment {
    unique_fd fd;
    shm_mapping map;
};

/* A new zeroed memfd segment of `size` bytes, mapped shared. */
result<shm_segment> create_shm_segment(const std::string &name, size_t size);

/* Maps a received segment; its size must be exactly `expected_size`. */
result<shm_mapping> map_shm_segment(int fd, size_t expected_size);

} // namespace rvt

#endif
