/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Asking an agent what it is doing (the rvt-status tool, and tests): one
 * status request on the agent's socket, answered with JSON or text.
 */
#ifndef RVT_CLIENT_STATUS_H
#define RVT_CLIENT_STATUS_H

#include "uct/ib/rvt/common/result.h"

#include <chrono>
#include <string>

namespace rvt::client {

result<std::string> query_status(
        const std::string &socket_path, bool human,
        std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

} // namespace rvt::client

#endif
