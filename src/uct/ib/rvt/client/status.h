/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Asking an agent what it is doing (the rvt-status tool, and tests): one
 * status request on the agent's socket, answered with JSON or text.
 */
#ifndef RVT_CLIENT_STATUS_H
#define RVT_CLIENT_STATUS_H

#include "uct/ib/rvt/common/result.h"

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace rvt::client {

result<std::string> query_status(
        const std::string &socket_path, bool human,
        std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

/* What became of a status request to an agent found on the node
 * (rvt-status --all). */
enum class answer_kind : uint8_t {
    answered, /* `text` is its status */
    refused, /* it answered with a refusal (`why`: its reason) */
    silent, /* no whole answer in time, or the connection closed */
    gone, /* nothing listens on the socket (a stale socket file) */
    busy, /* its listen backlog is full: not waited for */
    foreign, /* the process listening is not of the uid expected */
    unreadable, /* not an answer of the protocol */
};
std::string_view to_string(answer_kind k);

struct agent_answer {
    answer_kind kind = answer_kind::gone;
    /* the process listening (SO_PEERCRED), once connected */
    std::optional<pid_t> pid;
    std::optional<uid_t> uid;
    std::string text; /* answered: the status */
    std::string why; /* otherwise: what happened */
};

/* query_status for a socket found in a user's directory: the connect
 * does not wait (a full backlog is `busy`), and nothing is sent unless
 * the process listening runs as `expect_uid` (when given): the
 * directory is that user's, and a link there may lead to anyone's
 * socket (`foreign`, naming who listens). */
agent_answer ask_agent(const std::string &socket_path,
                       std::optional<uid_t> expect_uid, bool human,
                       std::chrono::milliseconds timeout);

} // namespace rvt::client

#endif
