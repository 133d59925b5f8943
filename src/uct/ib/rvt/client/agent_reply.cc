/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/client/agent_reply.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <string>

namespace rvt::client {

result<done> reply_reader::receive(int sock, std::span<std::byte> out,
                                   std::chrono::milliseconds timeout,
                                   std::string_view what)
{
    using clock   = std::chrono::steady_clock;
    auto deadline = clock::now() + timeout;
    std::array<std::byte, 256> dropped;
    size_t got = 0;
    while (got < out.size()) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - clock::now());
        pollfd p{sock, POLLIN, 0};
        int ready = left.count() > 0 ?
                            poll(&p, 1, static_cast<int>(left.count())) :
                            0;
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready <= 0) {
            m_owed += out.size() - got; /* comes later, ahead of the next */
            return failure{std::string(what) +
                           ": no reply from the agent within " +
                           std::to_string(timeout.count()) + " ms"};
        }
        /* an earlier request's late answer first: it is dropped */
        const std::span<std::byte> into =
                m_owed > 0 ? std::span(dropped).first(
                                     std::min(m_owed, dropped.size())) :
                             out.subspan(got);
        ssize_t n = recv(sock, into.data(), into.size(), 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return failure{std::string(what) + ": the agent closed its socket"};
        }
        if (m_owed > 0) {
            m_owed -= static_cast<size_t>(n);
        } else {
            got += static_cast<size_t>(n);
        }
    }
    return done{};
}

} // namespace rvt::client
