/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/client/attach.h"

#include "uct/ib/rvt/client/registration.h"

#include "uct/ib/rvt/common/fd_passing.h"
#include "uct/ib/rvt/common/unix_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rvt::client {

namespace {

failure fail(const std::string &path, const std::string &what)
{
    return failure{"attach to agent at " + path + ": " + what};
}

/* the agent's accepting reply and the five descriptors it carried */
struct accepted {
    wire::attach_reply rep;
    std::vector<unique_fd> fds; /* command fd, segment, two eventfds,
                                 * work summary */
};

/* The attach request out on `sock`, the reply in: well formed, accepted,
 * with its five descriptors; else why not. */
result<accepted>
ask(int sock, const std::string &path, std::string_view job_key,
    std::chrono::milliseconds timeout, std::optional<wire::leader_ref> leader)
{
    auto req  = wire::make_attach_request(job_key,
                                          static_cast<uint32_t>(getpid()),
                                          leader);
    auto sent = send_with_fds(sock, std::as_bytes(std::span(&req, 1)), {});
    if (!sent) {
        return fail(path, sent.error());
    }
    pollfd pfd{sock, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(timeout.count())) != 1) {
        return fail(path, "no reply within " + std::to_string(timeout.count()) +
                                  " ms");
    }
    accepted out;
    auto got = recv_with_fds(sock,
                             std::as_writable_bytes(std::span(&out.rep, 1)));
    if (!got) {
        return fail(path, got.error());
    }
    auto parsed = wire::parse_attach_reply(
            std::as_bytes(std::span(&out.rep, 1)).first(got.value().length));
    if (!parsed) {
        return fail(path, "bad reply: " + parsed.error());
    }
    const auto status = static_cast<wire::attach_status>(out.rep.status);
    if (status != wire::attach_status::accepted) {
        return fail(path, "refused (" + std::string(wire::to_string(status)) +
                                  "): " + out.rep.reason);
    }
    out.fds = std::move(got).value().fds;
    if (out.fds.size() != 5) {
        return fail(path, "reply carried " + std::to_string(out.fds.size()) +
                                  " descriptors: expected 5 (command fd, "
                                  "segment, two eventfds, work summary)");
    }
    return out;
}

/* the shared segment and the work summary, mapped and checked against
 * the reply */
struct mapped {
    shm_mapping segment;
    shm_mapping summary;
    shm_layout layout;
};

result<mapped> map_segments(const std::string &path,
                            const wire::attach_reply &rep, int segment_fd,
                            int summary_fd)
{
    auto segment = map_shm_segment(segment_fd, rep.shm_size);
    if (!segment) {
        return fail(path, segment.error());
    }
    auto summary = map_shm_segment(summary_fd, work_summary_size);
    if (!summary) {
        return fail(path, "work summary: " + summary.error());
    }
    const shm_header hdr = *segment.value().at<shm_header>(0);
    auto layout          = shm_layout::from_header(hdr);
    if (!layout) {
        return fail(path, layout.error());
    }
    if (hdr.client_index != rep.client_index ||
        layout.value().size != rep.shm_size ||
        layout.value().caps.slot_size != rep.max_am_size) {
        return fail(path, "the shared segment's header does not match the "
                          "reply (client index, size or slot size)");
    }
    return mapped{std::move(segment).value(), std::move(summary).value(),
                  layout.value()};
}

/* how this process registers memory, as the agent chose */
struct registration_path {
    wire::reg_mode mode;
    std::shared_ptr<imported_pd> imported;
    std::shared_ptr<const in_process_registrar> registrar;
};

result<registration_path> registration_for(const std::string &path,
                                           const wire::attach_reply &rep,
                                           int cmd_fd)
{
    registration_path out{static_cast<wire::reg_mode>(rep.reg_mode), {}, {}};
    if (out.mode == wire::reg_mode::in_process) {
        /* only an agent this process runs itself can register for it */
        out.registrar = in_process_registrar_installed();
        if (!out.registrar) {
            return fail(path, "the agent registers memory in this process "
                              "(in-process mode), but no agent runs here");
        }
    } else if (out.mode == wire::reg_mode::import_pd) {
        /* the agent chose import for its provider; if it fails here
         * anyway, the uverbs ioctl path (which works on every provider)
         * serves */
        auto imp = import_agent_pd(cmd_fd, rep.pd_handle);
        if (imp) {
            out.imported = std::move(imp).value();
        } else {
            out.mode = wire::reg_mode::uverbs_ioctl;
        }
    }
    return out;
}

} // namespace

result<attachment> attach(const std::string &socket_path,
                          std::string_view job_key,
                          std::chrono::milliseconds timeout,
                          std::optional<wire::leader_ref> leader)
{
    std::string key_error = wire::job_key_error(job_key);
    if (!key_error.empty()) {
        return fail(socket_path, key_error);
    }
    auto connected = connect_unix(socket_path);
    if (!connected) {
        return fail(socket_path, connected.error());
    }
    unique_fd sock = std::move(connected).value();
    auto reply     = ask(sock.get(), socket_path, job_key, timeout, leader);
    if (!reply) {
        return failure{reply.error()};
    }
    auto &[rep, fds] = reply.value();
    auto maps = map_segments(socket_path, rep, fds[1].get(), fds[4].get());
    if (!maps) {
        return failure{maps.error()};
    }
    auto reg = registration_for(socket_path, rep, fds[0].get());
    if (!reg) {
        return failure{reg.error()};
    }
    return attachment{rep.client_index,
                      rep.pd_handle,
                      rep.driver_id,
                      reg.value().mode,
                      rep.agent_id,
                      rep.address,
                      rep.num_qps,
                      rep.max_am_size,
                      rep.path_mtu,
                      maps.value().layout,
                      std::move(sock),
                      std::move(fds[0]),
                      std::move(maps.value().segment),
                      std::move(fds[2]),
                      std::move(fds[3]),
                      std::move(reg.value().imported),
                      static_cast<uint8_t>(rep.client_generation),
                      rep.features,
                      {},
                      std::move(maps.value().summary),
                      std::move(reg.value().registrar)};
}

bool leave(attachment &at, std::chrono::milliseconds wait)
{
    if (!at.sock || ::shutdown(at.sock.get(), SHUT_WR) != 0) {
        return false;
    }
    const auto until = std::chrono::steady_clock::now() + wait;
    for (;;) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(
                until - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            return false;
        }
        pollfd p{at.sock.get(), POLLIN, 0};
        const int r = ::poll(&p, 1, static_cast<int>(left.count()));
        if (r < 0 && errno != EINTR) {
            return false;
        }
        if (r <= 0) {
            continue;
        }
        std::byte drop[512];
        const ssize_t n = ::recv(at.sock.get(), drop, sizeof(drop),
                                 MSG_DONTWAIT);
        if (n == 0) {
            return true; /* the agent closed its end */
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
            errno != EINTR) {
            return errno == ECONNRESET; /* closed with our data unread */
        }
    }
}

} // namespace rvt::client
