/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Waiting for the agent's answer on the attach socket. The agent answers
 * a client's requests (peer_request, mr_release with a reply wanted) in
 * the order they came, and sends nothing unasked, so the next bytes on
 * the socket after a request are its reply. The caller keeps one request
 * in flight at a time (session is single-threaded; agent_link locks).
 *
 * A request given up on (its wait timed out) is still answered, later:
 * that answer is the next thing on the socket, ahead of the answer to
 * any later request. Read as the later request's answer it would be
 * wrong (a peer index for another peer, a release of another MR), so the
 * reader remembers how many bytes are owed by requests it stopped waiting
 * for, and drops that many before it reads the next answer.
 */
#ifndef RVT_CLIENT_AGENT_REPLY_H
#define RVT_CLIENT_AGENT_REPLY_H

#include "uct/ib/rvt/common/result.h"

#include <chrono>
#include <cstddef>
#include <span>
#include <string_view>

namespace rvt::client {

class reply_reader {
public:
    /* Reads the answer to the latest request, exactly out.size() bytes,
     * from `sock` within `timeout`, after the bytes still owed by earlier
     * requests; the failure names `what` (e.g. "connect to peer") and
     * whether the agent was silent or closed the socket. After a timeout
     * what did not come of this answer is owed in turn. */
    result<done> receive(int sock, std::span<std::byte> out,
                         std::chrono::milliseconds timeout,
                         std::string_view what);

    /* Bytes of answers to requests given up on, not read yet. */
    size_t owed() const
    {
        return m_owed;
    }

private:
    size_t m_owed = 0;
};

} // namespace rvt::client

#endif
