/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's instance lock (instance_lock.h).
 */
#include "uct/ib/rvt/agent/attach/instance_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace rvt::agent {

namespace {

std::string errno_text()
{
    return std::strerror(errno);
}

/* "pid N" from the holder's file, or a note that it has not written it
 * yet (it writes right after locking). */
std::string holder_of(int fd)
{
    char buf[32];
    ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0) {
        return "pid not recorded yet";
    }
    std::string_view text(buf, size_t(n));
    size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
        ++digits;
    }
    if (digits == 0) {
        return "pid not recorded yet";
    }
    return "pid " + std::string(text.substr(0, digits));
}

} // namespace

result<instance_lock> instance_lock::acquire(const std::string &path)
{
    /* O_NONBLOCK: a FIFO planted at path must not hang us in open(). */
    unique_fd fd(::open(path.c_str(),
                        O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                        0600));
    if (!fd) {
        return failure{"agent lock " + path + ": open failed: " + errno_text()};
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) {
        return failure{"agent lock " + path +
                       ": fstat failed: " + errno_text()};
    }
    if (!S_ISREG(st.st_mode)) {
        return failure{"agent lock " + path +
                       " is not a regular file: expected a lock file"};
    }
    int rc;
    do {
        rc = ::flock(fd.get(), LOCK_EX | LOCK_NB);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        if (errno == EWOULDBLOCK) {
            return failure{"agent lock " + path + ": another agent holds it (" +
                           holder_of(fd.get()) +
                           "): expected at most one agent per job key, "
                           "device and port"};
        }
        return failure{"agent lock " + path +
                       ": flock failed: " + errno_text()};
    }
    instance_lock lock(path, std::move(fd));
    auto recorded = lock.record_pid();
    if (!recorded) {
        return failure{recorded.error()};
    }
    return lock;
}

result<done> instance_lock::record_pid() const
{
    std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(m_fd.get(), 0) != 0 ||
        ::pwrite(m_fd.get(), pid.data(), pid.size(), 0) !=
                static_cast<ssize_t>(pid.size())) {
        return failure{"agent lock " + m_path +
                       ": cannot record our pid: " + errno_text()};
    }
    return done{};
}

instance_lock::instance_lock(std::string path, unique_fd fd) noexcept :
    m_path(std::move(path)), m_fd(std::move(fd))
{
}

instance_lock &instance_lock::operator=(instance_lock &&other) noexcept
{
    if (this != &other) {
        release();
        m_path = std::move(other.m_path);
        m_fd   = std::move(other.m_fd);
    }
    return *this;
}

instance_lock::~instance_lock()
{
    release();
}

void instance_lock::release() noexcept
{
    if (!m_fd) {
        return;
    }
    /* Forget our pid, so a contender never names a holder that is gone;
     * if this fails, closing still releases the lock. */
    [[maybe_unused]] int rc = ::ftruncate(m_fd.get(), 0);
    m_fd.reset();
}

} // namespace rvt::agent
