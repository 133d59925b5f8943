/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sending file descriptors with a message over a Unix stream socket
 * (SCM_RIGHTS): how the agent hands a client its verbs command fd and its
 * shared-memory segment.
 */
#ifndef RVT_COMMON_FD_PASSING_H
#define RVT_COMMON_FD_PASSING_H

#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/common/unique_fd.h"

#include <cstddef>
#include <span>
#include <vector>

namespace rvt {

/* the attach reply's: command fd, segment, two eventfds, work summary */
inline constexpr size_t max_passed_fds = 5;

/* Sends all of `bytes` with `fds` attached to the first byte. */
result<size_t> send_with_fds(int sock, std::span<const std::byte> bytes,
                             std::span<const int> fds);

struct received {
    size_t length; /* bytes read into the buffer */
    std::vector<unique_fd> fds; /* owned: closed unless kept */
};

/* One recvmsg into `buf`; descriptors beyond max_passed_fds or a
 * truncated control message are an error (all received fds are closed). */
result<received> recv_with_fds(int sock, std::span<std::byte> buf);

} // namespace rvt

#endif
