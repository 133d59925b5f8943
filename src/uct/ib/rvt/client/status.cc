/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/client/status.h"

#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/unique_fd.h"
#include "uct/ib/rvt/common/unix_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace rvt::client {

namespace {

/* Reads exactly buf.size() bytes before the deadline. */
std::string read_all(int fd, std::span<std::byte> buf,
                     std::chrono::steady_clock::time_point until)
{
    size_t done = 0;
    while (done < buf.size()) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                until - std::chrono::steady_clock::now());
        pollfd p{fd, POLLIN, 0};
        if (left.count() <= 0 ||
            poll(&p, 1, static_cast<int>(left.count())) != 1) {
            return "no complete answer in time (" + std::to_string(done) +
                   " of " + std::to_string(buf.size()) + " bytes)";
        }
        ssize_t n = recv(fd, buf.data() + done, buf.size() - done, 0);
        if (n == 0) {
            return "the agent closed the connection after " +
                   std::to_string(done) + " of " + std::to_string(buf.size()) +
                   " bytes";
        }
        if (n < 0 && errno != EINTR) {
            return std::string("recv failed: ") + std::strerror(errno);
        }
        done += n > 0 ? static_cast<size_t>(n) : 0;
    }
    return {};
}

} // namespace

result<std::string> query_status(const std::string &socket_path, bool human,
                                 std::chrono::milliseconds timeout)
{
    const std::string who = "status of agent at " + socket_path + ": ";
    auto connected        = connect_unix(socket_path);
    if (!connected) {
        return failure{who + connected.error()};
    }
    unique_fd sock = std::move(connected).value();
    auto req       = wire::make_status_request(human ? wire::status_text : 0);
    if (send(sock.get(), &req, sizeof(req), MSG_NOSIGNAL) != sizeof(req)) {
        return failure{who + "send failed: " + std::strerror(errno)};
    }
    auto until = std::chrono::steady_clock::now() + timeout;
    wire::msg_header hdr;
    std::string err = read_all(sock.get(),
                               std::as_writable_bytes(std::span(&hdr, 1)),
                               until);
    if (!err.empty()) {
        return failure{who + err};
    }
    if (hdr.type == static_cast<uint16_t>(wire::msg_type::attach_reply) &&
        hdr.length == sizeof(wire::attach_reply)) {
        wire::attach_reply rep;
        std::memcpy(&rep, &hdr, sizeof(hdr));
        auto rest =
                std::as_writable_bytes(std::span(&rep, 1)).subspan(sizeof(hdr));
        err         = read_all(sock.get(), rest, until);
        auto parsed = wire::parse_attach_reply(
                std::as_bytes(std::span(&rep, 1)));
        if (!err.empty() || !parsed) {
            return failure{who + "refused, and the refusal was unreadable"};
        }
        return failure{who + "refused: " + rep.reason};
    }
    auto len = wire::parse_status_reply_header(
            std::as_bytes(std::span(&hdr, 1)));
    if (!len) {
        return failure{who + len.error()};
    }
    std::vector<std::byte> text(len.value());
    err = read_all(sock.get(), text, until);
    if (!err.empty()) {
        return failure{who + err};
    }
    return std::string(reinterpret_cast<const char *>(text.data()),
                       text.size());
}

} // namespace rvt::client
