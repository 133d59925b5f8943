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
        if (n < 0 && errno != EINTR && errno != EAGAIN) {
            return std::string("recv failed: ") + std::strerror(errno);
        }
        done += n > 0 ? static_cast<size_t>(n) : 0;
    }
    return {};
}

/* One status request on a connected socket, and its answer. */
agent_answer exchange(int fd, bool human, std::chrono::milliseconds timeout)
{
    agent_answer out;
    auto req = wire::make_status_request(human ? wire::status_text : 0);
    if (send(fd, &req, sizeof(req), MSG_NOSIGNAL) != sizeof(req)) {
        out.kind = answer_kind::silent;
        out.why  = std::string("send failed: ") + std::strerror(errno);
        return out;
    }
    auto until = std::chrono::steady_clock::now() + timeout;
    wire::msg_header hdr;
    std::string err = read_all(fd, std::as_writable_bytes(std::span(&hdr, 1)),
                               until);
    if (!err.empty()) {
        out.kind = answer_kind::silent;
        out.why  = err;
        return out;
    }
    if (hdr.type == static_cast<uint16_t>(wire::msg_type::attach_reply) &&
        hdr.length == sizeof(wire::attach_reply)) {
        wire::attach_reply rep;
        std::memcpy(&rep, &hdr, sizeof(hdr));
        auto rest =
                std::as_writable_bytes(std::span(&rep, 1)).subspan(sizeof(hdr));
        err         = read_all(fd, rest, until);
        auto parsed = wire::parse_attach_reply(
                std::as_bytes(std::span(&rep, 1)));
        if (!err.empty() || !parsed) {
            out.kind = answer_kind::unreadable;
            out.why  = "refused, and the refusal was unreadable";
            return out;
        }
        out.kind = answer_kind::refused;
        out.why  = std::string("refused: ") + rep.reason;
        return out;
    }
    auto len = wire::parse_status_reply_header(
            std::as_bytes(std::span(&hdr, 1)));
    if (!len) {
        out.kind = answer_kind::unreadable;
        out.why  = len.error();
        return out;
    }
    std::vector<std::byte> text(len.value());
    err = read_all(fd, text, until);
    if (!err.empty()) {
        out.kind = answer_kind::silent;
        out.why  = err;
        return out;
    }
    out.kind = answer_kind::answered;
    out.text.assign(reinterpret_cast<const char *>(text.data()), text.size());
    return out;
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
    agent_answer a = exchange(connected.value().get(), human, timeout);
    if (a.kind != answer_kind::answered) {
        return failure{who + a.why};
    }
    return std::move(a.text);
}

std::string_view to_string(answer_kind k)
{
    switch (k) {
    case answer_kind::answered:
        return "serving";
    case answer_kind::refused:
        return "refused";
    case answer_kind::silent:
        return "silent";
    case answer_kind::gone:
        return "gone";
    case answer_kind::busy:
        return "busy";
    case answer_kind::foreign:
        return "foreign";
    case answer_kind::unreadable:
        return "unreadable";
    }
    return "unknown";
}

agent_answer ask_agent(const std::string &socket_path,
                       std::optional<uid_t> expect_uid, bool human,
                       std::chrono::milliseconds timeout)
{
    agent_answer out;
    auto addr = unix_address(socket_path);
    if (!addr) {
        out.why = addr.error();
        return out;
    }
    unique_fd sock(
            socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!sock) {
        out.kind = answer_kind::unreadable;
        out.why  = std::string("socket failed: ") + std::strerror(errno);
        return out;
    }
    if (connect(sock.get(), reinterpret_cast<const sockaddr *>(&addr.value()),
                sizeof(sockaddr_un)) != 0) {
        out.kind = errno == EAGAIN ? answer_kind::busy : answer_kind::gone;
        out.why  = std::string("cannot connect: ") + std::strerror(errno);
        return out;
    }
    ucred who{};
    socklen_t len = sizeof(who);
    if (getsockopt(sock.get(), SOL_SOCKET, SO_PEERCRED, &who, &len) != 0) {
        out.kind = answer_kind::unreadable;
        out.why  = std::string("SO_PEERCRED failed: ") + std::strerror(errno);
        return out;
    }
    out.pid = who.pid;
    out.uid = who.uid;
    if (expect_uid && who.uid != *expect_uid) {
        out.kind = answer_kind::foreign;
        out.why  = "the process listening (pid " + std::to_string(who.pid) +
                  ") runs as uid " + std::to_string(who.uid) +
                  ", not the directory's uid " + std::to_string(*expect_uid) +
                  ": not asked";
        return out;
    }
    agent_answer asked = exchange(sock.get(), human, timeout);
    asked.pid          = out.pid;
    asked.uid          = out.uid;
    return asked;
}

} // namespace rvt::client
