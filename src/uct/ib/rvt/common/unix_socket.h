/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's socket address, checked once: a path must fit sockaddr_un
 * (runtime_dir.h's max_socket_path), and the reason says how long it was.
 */
#ifndef RVT_COMMON_UNIX_SOCKET_H
#define RVT_COMMON_UNIX_SOCKET_H

#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/common/unique_fd.h"

#include <sys/un.h>

#include <string>

namespace rvt {

result<sockaddr_un> unix_address(const std::string &path);

/* A blocking stream socket connected to `path`. */
result<unique_fd> connect_unix(const std::string &path);

} // namespace rvt

#endif
