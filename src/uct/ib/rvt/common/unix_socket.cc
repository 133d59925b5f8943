/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/common/unix_socket.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace rvt {

result<sockaddr_un> unix_address(const std::string &path)
{
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
        return failure{"socket path '" + path + "' of " +
                       std::to_string(path.size()) +
                       " characters: expected 1 to " +
                       std::to_string(sizeof(addr.sun_path) - 1)};
    }
    path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    return addr;
}

result<unique_fd> connect_unix(const std::string &path)
{
    auto addr = unix_address(path);
    if (!addr) {
        return failure{addr.error()};
    }
    unique_fd sock(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!sock ||
        connect(sock.get(), reinterpret_cast<const sockaddr *>(&addr.value()),
                sizeof(sockaddr_un)) != 0) {
        return failure{std::string("cannot connect: ") + std::strerror(errno)};
    }
    return sock;
}

} // namespace rvt
