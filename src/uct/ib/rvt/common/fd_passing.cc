/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/common/fd_passing.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace rvt {

result<size_t> send_with_fds(int sock, std::span<const std::byte> bytes,
                             std::span<const int> fds)
{
    if (fds.size() > max_passed_fds) {
        return failure{"cannot pass " + std::to_string(fds.size()) +
                       " descriptors: at most " +
                       std::to_string(max_passed_fds)};
    }
    alignas(cmsghdr) char cbuf[CMSG_SPACE(max_passed_fds * sizeof(int))] = {};
    iovec iov{const_cast<std::byte *>(bytes.data()), bytes.size()};
    msghdr m{};
    m.msg_iov    = &iov;
    m.msg_iovlen = 1;
    if (!fds.empty()) {
        m.msg_control    = cbuf;
        m.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
        cmsghdr *c       = CMSG_FIRSTHDR(&m);
        c->cmsg_level    = SOL_SOCKET;
        c->cmsg_type     = SCM_RIGHTS;
        c->cmsg_len      = CMSG_LEN(fds.size() * sizeof(int));
        std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
    }
    ssize_t n;
    do {
        n = sendmsg(sock, &m, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        return failure{std::string("sendmsg failed: ") + std::strerror(errno)};
    }
    if (static_cast<size_t>(n) != bytes.size()) {
        return failure{"sendmsg sent " + std::to_string(n) + " of " +
                       std::to_string(bytes.size()) + " bytes"};
    }
    return static_cast<size_t>(n);
}

result<received> recv_with_fds(int sock, std::span<std::byte> buf)
{
    alignas(cmsghdr) char cbuf[CMSG_SPACE(max_passed_fds * sizeof(int))] = {};
    iovec iov{buf.data(), buf.size()};
    msghdr m{};
    m.msg_iov        = &iov;
    m.msg_iovlen     = 1;
    m.msg_control    = cbuf;
    m.msg_controllen = sizeof(cbuf);
    ssize_t n;
    do {
        n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        return failure{std::string("recvmsg failed: ") + std::strerror(errno)};
    }
    received r{static_cast<size_t>(n), {}};
    for (cmsghdr *c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            r.fds.emplace_back(fd);
        }
    }
    if (m.msg_flags & MSG_CTRUNC) {
        return failure{"recvmsg: more descriptors than the " +
                       std::to_string(max_passed_fds) + " expected"};
    }
    return r;
}

} // namespace rvt
