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

    auto req  = wire::make_attach_request(job_key,
                                          static_cast<uint32_t>(getpid()),
                                          leader);
    auto sent = send_with_fds(sock.get(), std::as_bytes(std::span(&req, 1)),
                              {});
    if (!sent) {
        return fail(socket_path, sent.error());
    }

    pollfd pfd{sock.get(), POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(timeout.count())) != 1) {
        return fail(socket_path, "no reply within " +
                                         std::to_string(timeout.count()) +
                                         " ms");
    }
    wire::attach_reply rep;
    auto got = recv_with_fds(sock.get(),
                             std::as_writable_bytes(std::span(&rep, 1)));
    if (!got) {
        return fail(socket_path, got.error());
    }
    auto parsed = wire::parse_attach_reply(
            std::as_bytes(std::span(&rep, 1)).first(got.value().length));
    if (!parsed) {
        return fail(socket_path, "bad reply: " + parsed.error());
    }
    if (rep.status != static_cast<uint32_t>(wire::attach_status::accepted)) {
        return fail(socket_path,
                    "refused (" +
                            std::string(wire::to_string(
                                    static_cast<wire::attach_status>(
                                            rep.status))) +
                            "): " + rep.reason);
    }
    auto fds = std::move(got).value().fds;
    if (fds.size() != 5) {
        return fail(socket_path, "reply carried " + std::to_string(fds.size()) +
                                         " descriptors: expected 5 (command "
                                         "fd, segment, two eventfds, work "
                                         "summary)");
    }
    auto map = map_shm_segment(fds[1].get(), rep.shm_size);
    if (!map) {
        return fail(socket_path, map.error());
    }
    auto summary = map_shm_segment(fds[4].get(), work_summary_size);
    if (!summary) {
        return fail(socket_path, "work summary: " + summary.error());
    }
    const shm_header hdr = *map.value().at<shm_header>(0);
    auto layout          = shm_layout::from_header(hdr);
    if (!layout) {
        return fail(socket_path, layout.error());
    }
    if (hdr.client_index != rep.client_index ||
        layout.value().size != rep.shm_size ||
        layout.value().caps.slot_size != rep.max_am_size) {
        return fail(socket_path,
                    "the shared segment's header does not match the reply "
                    "(client index, size or slot size)");
    }
    /* the agent chose import for its provider; if it fails here anyway,
     * the uverbs ioctl path (which works on every provider) serves */
    std::shared_ptr<imported_pd> imported;
    std::shared_ptr<const in_process_registrar> registrar;
    auto mode = static_cast<wire::reg_mode>(rep.reg_mode);
    if (mode == wire::reg_mode::in_process) {
        /* only an agent this process runs itself can register for it */
        registrar = in_process_registrar_installed();
        if (!registrar) {
            return fail(socket_path,
                        "the agent registers memory in this process "
                        "(in-process mode), but no agent runs here");
        }
    } else if (mode == wire::reg_mode::import_pd) {
        auto imp = import_agent_pd(fds[0].get(), rep.pd_handle);
        if (imp) {
            imported = std::move(imp).value();
        } else {
            mode = wire::reg_mode::uverbs_ioctl;
        }
    }
    return attachment{rep.client_index,
                      rep.pd_handle,
                      rep.driver_id,
                      mode,
                      rep.agent_id,
                      rep.address,
                      rep.num_qps,
                      rep.max_am_size,
                      rep.path_mtu,
                      layout.value(),
                      std::move(sock),
                      std::move(fds[0]),
                      std::move(map).value(),
                      std::move(fds[2]),
                      std::move(fds[3]),
                      std::move(imported),
                      static_cast<uint8_t>(rep.client_generation),
                      rep.features,
                      {},
                      std::move(summary).value(),
                      std::move(registrar)};
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
