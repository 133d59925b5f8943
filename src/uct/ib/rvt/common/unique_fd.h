/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * unique_fd: sole owner of a file descriptor, closed on destruction.
 */
#ifndef RVT_COMMON_UNIQUE_FD_H
#define RVT_COMMON_UNIQUE_FD_H

#include <unistd.h>

#include <utility>

namespace rvt {

class unique_fd {
public:
    unique_fd() noexcept = default;
    explicit unique_fd(int fd) noexcept : m_fd(fd)
    {
    }
    unique_fd(unique_fd &&other) noexcept : m_fd(other.release())
    {
    }
    unique_fd &operator=(unique_fd &&other) noexcept
    {
        reset(other.release());
        return *this;
    }
    unique_fd(const unique_fd &)            = delete;
    unique_fd &operator=(const unique_fd &) = delete;
    ~unique_fd()
    {
        reset();
    }

    int get() const noexcept
    {
        return m_fd;
    }
    explicit operator bool() const noexcept
    {
        return m_fd >= 0;
    }
    int release() noexcept
    {
        return std::exchange(m_fd, -1);
    }
    void reset(int fd = -1) noexcept
    {
        if (m_fd >= 0) {
            ::close(m_fd);
        }
        m_fd = fd;
    }

private:
    int m_fd = -1;
};

} // namespace rvt

#endif
