/*
 * What test_shared_pd and its client process say to each other over their
 * socketpair (test code only).
 */
#ifndef RVT_TEST_SHARED_PD_PROTOCOL_H
#define RVT_TEST_SHARED_PD_PROTOCOL_H

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rvt::test {

inline constexpr size_t buffer_size = 64 * 1024;

struct setup_message {
    uint32_t pd_handle;
    uint32_t driver_id;
};

struct client_report {
    uint32_t registered; /* 1 if reg_mr succeeded */
    uint32_t bad_pd_refused;
    uint32_t handle, lkey, rkey, pid;
    uint64_t addr;
    char error[256];
};

struct check_request {
    uint32_t length; /* 0: exit */
    uint32_t seed;
};

/* Bytes that depend on the seed (a pid, say) so that data from the wrong
 * source cannot pass for the right one. */
inline void fill_pattern(unsigned char *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; ++i) {
        x    = x * 1103515245u + 12345u;
        p[i] = static_cast<unsigned char>(x >> 16);
    }
}

inline int send_with_fd(int sock, int fd, const void *data, size_t len)
{
    char cbuf[CMSG_SPACE(sizeof(int))] = {};
    iovec iov{const_cast<void *>(data), len};
    msghdr m{};
    m.msg_iov        = &iov;
    m.msg_iovlen     = 1;
    m.msg_control    = cbuf;
    m.msg_controllen = sizeof(cbuf);
    cmsghdr *c       = CMSG_FIRSTHDR(&m);
    c->cmsg_level    = SOL_SOCKET;
    c->cmsg_type     = SCM_RIGHTS;
    c->cmsg_len      = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    return sendmsg(sock, &m, 0) == static_cast<ssize_t>(len) ? 0 : -1;
}

/* Returns the received fd, or -1. */
inline int recv_with_fd(int sock, void *data, size_t len)
{
    char cbuf[CMSG_SPACE(sizeof(int))] = {};
    iovec iov{data, len};
    msghdr m{};
    m.msg_iov        = &iov;
    m.msg_iovlen     = 1;
    m.msg_control    = cbuf;
    m.msg_controllen = sizeof(cbuf);
    if (recvmsg(sock, &m, 0) != static_cast<ssize_t>(len)) {
        return -1;
    }
    cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (c == nullptr || c->cmsg_type != SCM_RIGHTS) {
        return -1;
    }
    int fd;
    std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
    return fd;
}

} // namespace rvt::test

#endif
