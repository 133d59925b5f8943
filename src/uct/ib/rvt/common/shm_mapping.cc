/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/common/shm_mapping.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rvt {

result<shm_segment> create_shm_segment(const std::string &name, size_t size)
{
    unique_fd fd(memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd) {
        return failure{"memfd_create(" + name +
                       ") failed: " + std::strerror(errno)};
    }
    if (ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
        return failure{"ftruncate of segment " + name + " to " +
                       std::to_string(size) +
                       " bytes failed: " + std::strerror(errno)};
    }
    /* The client must not be able to shrink the segment under the agent's
     * mapping (a SIGBUS in the agent): seal its size. */
    if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
        return failure{"sealing segment " + name +
                       " failed: " + std::strerror(errno)};
    }
    void *addr = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED,
                      fd.get(), 0);
    if (addr == MAP_FAILED) {
        return failure{"mmap of segment " + name +
                       " failed: " + std::strerror(errno)};
    }
    return shm_segment{std::move(fd), shm_mapping(addr, size)};
}

result<shm_mapping> map_shm_segment(int fd, size_t expected_size)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        return failure{std::string("fstat of the shared segment failed: ") +
                       std::strerror(errno)};
    }
    if (static_cast<size_t>(st.st_size) != expected_size) {
        return failure{"shared segment of " + std::to_string(st.st_size) +
                       " bytes: expected " + std::to_string(expected_size)};
    }
    void *addr = mmap(nullptr, expected_size, PROT_READ | PROT_WRITE,
                      MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        return failure{std::string("mmap of the shared segment failed: ") +
                       std::strerror(errno)};
    }
    return shm_mapping(addr, expected_size);
}

} // namespace rvt
