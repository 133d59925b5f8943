/*
 * Waiting for the agent's answer on the attach socket. The agent answers
 * a client's requests (peer_request, mr_release with a reply wanted) in
 * the order they came, and sends nothing unasked, so the next bytes on
 * the socket after a request are its reply. The caller keeps one request
 * in flight at a time (session is single-threaded; agent_link locks).
 */
#ifndef RVT_CLIENT_AGENT_REPLY_H
#define RVT_CLIENT_AGENT_REPLY_H

#include "uct/ib/rvt/common/result.h"

#include <chrono>
#include <cstddef>
#include <span>
#include <string_view>

namespace rvt::client {

/* Reads exactly out.size() bytes from `sock` within `timeout`; the failure
 * names `what` (e.g. "connect to peer") and whether the agent was silent
 * or closed the socket. */
result<done> receive_reply(int sock, std::span<std::byte> out,
                           std::chrono::milliseconds timeout,
                           std::string_view what);

} // namespace rvt::client

#endif
