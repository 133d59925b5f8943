/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The attach server (see attach_server.h for the states and invariants).
 */
#include "uct/ib/rvt/agent/attach/attach_server.h"

#include "uct/ib/rvt/common/fd_passing.h"
#include "uct/ib/rvt/common/format.h"
#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/common/unix_socket.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

namespace rvt::agent {

using clock = std::chrono::steady_clock;

struct attach_server::connection {
    unique_fd sock;
    ucred peer{};
    clock::time_point accepted;
    std::vector<std::byte> buf; /* request bytes so far */
    bool attached    = false;
    bool answering   = false; /* a status answer is going out: then close */
    bool status_owed = false; /* answering: its text is not given yet */
    uint64_t ticket  = 0; /* its status_request event's */
    bool broken      = false; /* found malformed outside run_once: close it */
    size_t read_in_pass = 0; /* bytes read since the last run_once() */
    attached_client client{};
    std::vector<std::byte> out; /* output the socket has not taken yet */
    size_t out_sent = 0; /* of out, already sent */
    clock::time_point out_since; /* when output became pending, or the
                                    reader last took some */
    /* its attach request waits for descriptors (answer(), out of them) */
    bool deferred    = false;
    uint32_t watched = 0; /* the epoll events registered for sock */
    uint32_t ready   = 0; /* the events the last wait reported */

    size_t pending() const
    {
        return out.size() - out_sent;
    }
};

namespace {

std::string errno_text()
{
    return std::strerror(errno);
}

/* Where the socket is bound before it is renamed to path: "x.sock" is
 * staged as "x.new", no longer than the path, so that it fits wherever the
 * path does; only the holder of the agent lock binds there. */
std::string staging_path(std::string path)
{
    constexpr std::string_view ext = ".sock";
    if (path.ends_with(ext)) {
        path.resize(path.size() - ext.size());
    }
    return path + ".new";
}

/* Out of descriptors, or of the kernel memory a socket takes: the
 * connection stays in the backlog, and the listener readable. */
bool out_of_fds(int err)
{
    return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

} // namespace

descriptor_plan plan_descriptors(uint64_t soft, uint64_t hard, uint64_t needed)
{
    if (soft >= needed) {
        return {soft, {}};
    }
    if (hard >= needed) {
        return {needed, {}};
    }
    return {hard, "descriptors: the agent's bounds (max-clients, "
                  "max-unattached) need " +
                          std::to_string(needed) + " and the hard limit is " +
                          std::to_string(hard) +
                          " (ulimit -Hn, LimitNOFILE=): clients beyond what it "
                          "allows wait to attach"};
}

result<std::unique_ptr<attach_server>>
attach_server::create(attach_config config, device_grant grant, log_fn log)
{
    std::string key_error = wire::job_key_error(config.job_key);
    if (!key_error.empty()) {
        return failure{"attach server: " + key_error};
    }
    if (config.max_clients == 0 || config.max_clients > imm::max_clients) {
        return failure{"attach server: max clients " +
                       std::to_string(config.max_clients) + ": expected 1 to " +
                       std::to_string(imm::max_clients)};
    }
    if (config.max_unattached == 0) {
        return failure{"attach server: max-unattached 0: expected at least 1"};
    }
    if (grant.agent_wake_fd < 0 || grant.work_summary_fd < 0) {
        return failure{"attach server: the grant lacks the agent's wake "
                       "eventfd or its work summary"};
    }
    if (config.max_socket_read < wire::max_message_size) {
        return failure{"attach server: max-socket-read " +
                       std::to_string(config.max_socket_read) +
                       ": expected at least " +
                       std::to_string(wire::max_message_size) +
                       ", the largest message"};
    }
    auto addr = unix_address(config.socket_path);
    if (!addr) {
        return failure{"attach server: " + addr.error()};
    }

    unique_fd sock(
            socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!sock) {
        return failure{"attach server: socket failed: " + errno_text()};
    }
    const std::string staging = staging_path(config.socket_path);
    auto staged               = unix_address(staging);
    if (!staged) {
        return failure{"attach server: " + staged.error()};
    }
    ::unlink(staging.c_str());
    if (bind(sock.get(), reinterpret_cast<const sockaddr *>(&staged.value()),
             sizeof(sockaddr_un)) != 0 ||
        listen(sock.get(), 128) != 0 ||
        ::rename(staging.c_str(), config.socket_path.c_str()) != 0) {
        const std::string why = errno_text();
        ::unlink(staging.c_str());
        return failure{"attach server: cannot listen on " + config.socket_path +
                       ": " + why};
    }
    /* the sockets are watched with epoll, so that a pass costs nothing
     * per idle client (attach_server.h, "Events") */
    unique_fd ep(epoll_create1(EPOLL_CLOEXEC));
    if (!ep) {
        return failure{"attach server: epoll_create1 failed: " + errno_text()};
    }
    epoll_event ev{};
    ev.events   = EPOLLIN;
    ev.data.ptr = nullptr; /* the listener */
    if (epoll_ctl(ep.get(), EPOLL_CTL_ADD, sock.get(), &ev) != 0) {
        return failure{"attach server: epoll_ctl failed: " + errno_text()};
    }
    auto srv = std::unique_ptr<attach_server>(
            new attach_server(std::move(config), grant, std::move(log),
                              std::move(sock)));
    srv->m_epoll = std::move(ep);
    return srv;
}

attach_server::attach_server(attach_config config, device_grant grant,
                             log_fn log, unique_fd listener) :
    m_config(std::move(config)),
    m_grant(grant),
    m_log(std::move(log)),
    m_listener(std::move(listener)),
    m_gate(m_config.max_unattached, m_config.accept_retry),
    m_indices(m_config.max_clients, m_config.index_quarantine)
{
}

attach_server::~attach_server()
{
    ::unlink(m_config.socket_path.c_str());
}

intake_counters attach_server::intake() const
{
    return {m_gate.unattached(), m_gate.max_unattached(), m_gate.times_full(),
            m_gate.fd_shortages(), m_reads_deferred};
}

size_t attach_server::attached_count() const
{
    size_t n = 0;
    for (const auto &c : m_conns) {
        n += c->attached;
    }
    return n;
}

const attached_client *attach_server::client(uint32_t index) const
{
    for (const auto &c : m_conns) {
        if (c->attached && c->client.index == index) {
            return &c->client;
        }
    }
    return nullptr;
}

std::string attach_server::who(const connection &conn) const
{
    return "client pid " + std::to_string(conn.peer.pid) + " uid " +
           std::to_string(conn.peer.uid);
}

attach_events attach_server::run_once(int timeout_ms)
{
    m_departed.clear(); /* their detached events are acted on */
    m_gate.tick(clock::now());
    watch_all();
    const bool listener_ready = wait_events(wait_for(timeout_ms));

    /* Service every connection first and only then drop the closed ones:
     * a leader's siblings are found among all of them. */
    std::vector<bool> closed(m_conns.size(), false);
    for (size_t i = 0; i < m_conns.size(); ++i) {
        closed[i] = !serve(*m_conns[i]);
    }
    close_siblings_of_closed(closed);
    drop_closed(closed);
    if (listener_ready) {
        accept_all();
    }
    return std::exchange(m_events, {});
}

int attach_server::wait_for(int timeout_ms) const
{
    /* wake in time for the earliest request or reply timeout, and the
     * accept gate's retry */
    if (auto retry = m_gate.next_timer()) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                *retry - clock::now());
        timeout_ms = std::max(0, std::min<int>(timeout_ms, left.count() + 1));
    }
    for (const auto &c : m_conns) {
        std::optional<clock::time_point> until;
        if (c->pending() > 0) {
            until = c->out_since + m_config.reply_timeout;
        } else if (!c->attached && !c->answering) {
            until = c->accepted + m_config.request_timeout;
        }
        if (until) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    *until - clock::now());
            timeout_ms = std::max(0, std::min<int>(timeout_ms, left.count()));
        }
    }
    return timeout_ms;
}

bool attach_server::serve(connection &conn)
{
    const uint32_t ev = std::exchange(conn.ready, 0);
    bool open         = !conn.broken;
    conn.read_in_pass = 0; /* a new pass */
    if (open && conn.pending() > 0 && (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        open = flush(conn);
    }
    if (open && !conn.answering && (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))) {
        open = service(conn, m_config.max_socket_read);
    } else if (open && conn.deferred && m_gate.accepting()) {
        /* a descriptor may have freed: its request again */
        conn.deferred = false;
        open          = answer(conn, conn.buf);
    }
    if (!open) {
        return false;
    }
    if (conn.pending() > 0) {
        return !timed_out(conn);
    }
    if (conn.answering) {
        /* all of the answer is sent (or the owner has yet to give it:
         * its status_request event is out) */
        return conn.status_owed;
    }
    if (!conn.attached && conn.deferred &&
        clock::now() >= conn.accepted + m_config.request_timeout) {
        return refuse(conn, wire::attach_status::agent_error,
                      "the agent has been out of descriptors for " +
                              std::to_string(m_config.request_timeout.count()) +
                              " ms (RLIMIT_NOFILE)");
    }
    if (!conn.attached &&
        clock::now() >= conn.accepted + m_config.request_timeout) {
        return refuse(conn, wire::attach_status::bad_message,
                      "incomplete attach request after " +
                              std::to_string(m_config.request_timeout.count()) +
                              " ms (" + std::to_string(conn.buf.size()) +
                              " bytes received)");
    }
    return true;
}

void attach_server::close_siblings_of_closed(std::vector<bool> &closed)
{
    /* a leader's siblings end with it (attach_server.h) */
    for (size_t i = 0; i < m_conns.size(); ++i) {
        const connection &leader = *m_conns[i];
        if (!closed[i] || !leader.attached || leader.client.leader) {
            continue;
        }
        for (size_t j = 0; j < m_conns.size(); ++j) {
            const connection &sib = *m_conns[j];
            if (!closed[j] && sib.attached &&
                sib.client.leader == leader.client.index) {
                log_counted(lines_of(line_kind::leader_gone), [&] {
                    return "attach server: " + who(sib) + " (index " +
                           std::to_string(sib.client.index) +
                           "): its leader index " +
                           std::to_string(leader.client.index) +
                           " is gone: detaching it";
                });
                closed[j] = true;
            }
        }
    }
}

void attach_server::drop_closed(const std::vector<bool> &closed)
{
    std::vector<std::unique_ptr<connection>> keep;
    for (size_t i = 0; i < m_conns.size(); ++i) {
        connection &conn = *m_conns[i];
        if (!closed[i]) {
            keep.push_back(std::move(m_conns[i]));
            continue;
        }
        m_gate.fd_freed();
        if (!conn.attached) {
            m_gate.settled();
            continue;
        }
        log_counted(lines_of(line_kind::gone), [&] {
            return "attach server: " + who(conn) + " (index " +
                   std::to_string(conn.client.index) + ") is gone";
        });
        m_events.push_back({attach_event_kind::detached, &conn.client});
        m_indices.free(conn.client.index, clock::now());
        conn.attached = false;
        /* its client, for its detached event: its socket closes now, so
         * that its process sees it go */
        conn.sock.reset();
        m_departed.push_back(std::move(m_conns[i]));
    }
    m_conns = std::move(keep);
}

void attach_server::watch(connection &conn)
{
    /* an answering connection is only written to; once all its answer is
     * sent, EPOLLOUT wakes the loop to close it */
    const bool answered = conn.answering && !conn.status_owed;
    const uint32_t want = (conn.answering ? 0u : uint32_t{EPOLLIN}) |
                          (conn.pending() > 0 || answered ? uint32_t{EPOLLOUT} :
                                                            0u);
    if (want == conn.watched) {
        return;
    }
    epoll_event ev{};
    ev.events   = want;
    ev.data.ptr = &conn;
    if (epoll_ctl(m_epoll.get(), EPOLL_CTL_MOD, conn.sock.get(), &ev) != 0) {
        log_counted(lines_of(line_kind::epoll), [&] {
            return "attach server: epoll_ctl MOD for " + who(conn) +
                   " failed: " + errno_text();
        });
        conn.broken = true; /* unwatched: close it rather than lose it */
        return;
    }
    conn.watched = want;
}

void attach_server::watch_all()
{
    /* while the gate is closed, no event: a loop sleeping on the epoll fd
     * must not wake for a connection it will not accept (accept_gate.h) */
    const uint32_t want = m_gate.accepting() ? uint32_t{EPOLLIN} : 0u;
    if (want != m_listener_watched) {
        epoll_event ev{};
        ev.events   = want;
        ev.data.ptr = nullptr;
        if (epoll_ctl(m_epoll.get(), EPOLL_CTL_MOD, m_listener.get(), &ev) ==
            0) {
            m_listener_watched = want;
        } else {
            log_counted(lines_of(line_kind::epoll), [&] {
                return "attach server: epoll_ctl MOD for the listener "
                       "failed: " +
                       errno_text();
            });
        }
    }
    for (const auto &c : m_conns) {
        watch(*c);
    }
}

bool attach_server::wait_events(int timeout_ms)
{
    bool listener_ready = false;
    std::array<epoll_event, 64> events;
    for (;;) {
        const int n = epoll_wait(m_epoll.get(), events.data(),
                                 static_cast<int>(events.size()), timeout_ms);
        if (n < 0) {
            if (errno != EINTR) {
                log_counted(lines_of(line_kind::epoll), [&] {
                    return "attach server: epoll_wait failed: " + errno_text();
                });
            }
            return listener_ready;
        }
        bool news = false; /* a descriptor, or a bit, not seen before */
        for (int i = 0; i < n; ++i) {
            if (events[i].data.ptr == nullptr) {
                news |= !listener_ready;
                listener_ready = true;
            } else {
                auto *c = static_cast<connection *>(events[i].data.ptr);
                news |= (c->ready | events[i].events) != c->ready;
                c->ready |= events[i].events;
            }
        }
        /* A full batch: more may be ready, taken without waiting. The
         * descriptors stay ready until they are served (level-triggered),
         * and epoll hands them out in turn, so a full batch of nothing
         * new means every ready one has been seen: serve them now (64
         * clients hanging up at once made this loop forever). */
        if (static_cast<size_t>(n) < events.size() || !news) {
            return listener_ready;
        }
        timeout_ms = 0;
    }
}

void attach_server::accept_all()
{
    while (m_gate.accepting()) {
        unique_fd sock(accept4(m_listener.get(), nullptr, nullptr,
                               SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!sock) {
            if (out_of_fds(errno)) {
                const std::string note = m_gate.out_of_fds(clock::now(),
                                                           errno_text());
                if (!note.empty()) {
                    m_log(note);
                }
            } else if (errno != EAGAIN && errno != EWOULDBLOCK &&
                       errno != EINTR) {
                log_counted(lines_of(line_kind::accept), [&] {
                    return "attach server: accept failed: " + errno_text();
                });
            }
            return;
        }
        auto conn     = std::make_unique<connection>();
        socklen_t len = sizeof(conn->peer);
        if (getsockopt(sock.get(), SOL_SOCKET, SO_PEERCRED, &conn->peer,
                       &len) != 0) {
            log_counted(lines_of(line_kind::accept), [&] {
                return "attach server: SO_PEERCRED failed: " + errno_text();
            });
            continue;
        }
        conn->sock     = std::move(sock);
        conn->accepted = clock::now();
        epoll_event ev{};
        ev.events   = EPOLLIN;
        ev.data.ptr = conn.get();
        if (epoll_ctl(m_epoll.get(), EPOLL_CTL_ADD, conn->sock.get(), &ev) !=
            0) {
            log_counted(lines_of(line_kind::accept), [&] {
                return "attach server: epoll_ctl ADD failed: " + errno_text();
            });
            continue; /* closed: its client sees the connection end */
        }
        conn->watched = EPOLLIN;
        m_conns.push_back(std::move(conn));
        const std::string note = m_gate.accepted();
        if (!note.empty()) {
            m_log(note);
        }
    }
}

/* Returns false when the connection is to be closed. */
bool attach_server::service(connection &conn, size_t most)
{
    std::byte chunk[wire::max_message_size];
    ssize_t n = recv(conn.sock.get(), chunk, std::min(sizeof(chunk), most), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return true;
    }
    if (n <= 0) {
        if (!conn.attached && !conn.buf.empty()) {
            log_counted(lines_of(line_kind::hung_up), [&] {
                return "attach server: " + who(conn) + " hung up after " +
                       std::to_string(conn.buf.size()) +
                       " bytes of an attach request";
            });
        }
        return false; /* EOF or error: gone */
    }
    conn.read_in_pass += static_cast<size_t>(n);
    conn.buf.insert(conn.buf.end(), chunk, chunk + n);
    if (conn.attached) {
        return take_notices(conn);
    }
    if (conn.buf.size() < sizeof(wire::msg_header)) {
        return true;
    }
    auto hdr = wire::parse_header(conn.buf);
    if (!hdr) {
        wire::msg_header raw;
        std::memcpy(&raw, conn.buf.data(), sizeof(raw));
        auto status = (raw.magic == wire::magic &&
                       raw.version != wire::protocol_version) ?
                              wire::attach_status::bad_version :
                              wire::attach_status::bad_message;
        return refuse(conn, status, hdr.error());
    }
    if (conn.buf.size() < hdr.value().length) {
        return true;
    }
    if (conn.buf.size() > hdr.value().length) {
        return refuse(conn, wire::attach_status::bad_message,
                      std::to_string(conn.buf.size() - hdr.value().length) +
                              " bytes after the attach request: expected "
                              "one message, then a reply");
    }
    if (hdr.value().type ==
        static_cast<uint16_t>(wire::msg_type::status_request)) {
        return take_status_request(conn, conn.buf);
    }
    return answer(conn, conn.buf);
}

bool attach_server::take_status_request(connection &conn,
                                        std::span<const std::byte> msg)
{
    auto req = wire::parse_status_request(msg);
    if (!req) {
        return refuse(conn, wire::attach_status::bad_message, req.error());
    }
    /* its own user, and root ("Who may ask" in attach_server.h) */
    if (conn.peer.uid != m_config.uid && conn.peer.uid != 0) {
        return refuse(conn, wire::attach_status::wrong_uid,
                      "uid " + std::to_string(conn.peer.uid) +
                              ": this agent answers uid " +
                              std::to_string(m_config.uid) +
                              (m_config.uid != 0 ? " and root" : ""));
    }
    /* one answer (answer_status), then close (run_once, once it is all
     * sent) */
    conn.answering   = true;
    conn.status_owed = true;
    conn.ticket      = m_next_ticket++;
    m_events.push_back({.kind   = attach_event_kind::status_request,
                        .ticket = conn.ticket,
                        .human = (req.value().flags & wire::status_text) != 0});
    return true;
}

void attach_server::answer_status(uint64_t ticket, const std::string &answer)
{
    for (auto &c : m_conns) {
        if (!c->status_owed || c->ticket != ticket) {
            continue;
        }
        std::string text = answer;
        if (text.size() + sizeof(wire::msg_header) > wire::max_status_size) {
            text = "{\"error\": \"status larger than the protocol allows\"}";
        }
        std::vector<std::byte> out(sizeof(wire::msg_header) + text.size());
        auto hdr = wire::make_status_reply_header(text.size());
        std::memcpy(out.data(), &hdr, sizeof(hdr));
        std::memcpy(out.data() + sizeof(hdr), text.data(), text.size());
        c->status_owed = false;
        c->broken      = !send_reply(*c, out, "its status answer");
        return;
    }
}

std::vector<const attached_client *> attach_server::clients() const
{
    std::vector<const attached_client *> out;
    for (const auto &c : m_conns) {
        if (c->attached) {
            out.push_back(&c->client);
        }
    }
    return out;
}

std::optional<attach_server::attach_refusal>
attach_server::refusal_of(const connection &conn,
                          const wire::attach_request &req) const
{
    if (conn.peer.uid != m_config.uid) {
        return attach_refusal{wire::attach_status::wrong_uid,
                              "uid " + std::to_string(conn.peer.uid) +
                                      ": this agent serves uid " +
                                      std::to_string(m_config.uid)};
    }
    if (m_config.job_key != req.job_key) {
        return attach_refusal{wire::attach_status::wrong_job_key,
                              std::string("job key '") + req.job_key +
                                      "': this agent serves job '" +
                                      m_config.job_key + "'"};
    }
    if (req.flags & wire::attach_sibling) {
        std::string why = sibling_error(conn, req);
        if (!why.empty()) {
            return attach_refusal{wire::attach_status::bad_sibling, why};
        }
    }
    if (std::string why = attachments_error(conn); !why.empty()) {
        return attach_refusal{wire::attach_status::agent_full, why};
    }
    return std::nullopt;
}

std::string attach_server::attachments_error(const connection &conn) const
{
    /* "Attachments of one process": by SO_PEERCRED, as siblings are */
    const auto held = static_cast<uint64_t>(
            std::count_if(m_conns.begin(), m_conns.end(), [&](const auto &c) {
                return c->attached && c->peer.pid == conn.peer.pid;
            }));
    if (held <= m_config.max_siblings) {
        return {};
    }
    return "pid " + std::to_string(conn.peer.pid) + " holds " +
           std::to_string(held) +
           " attachments of this agent: expected at most 1 + "
           "max-client-siblings (" +
           std::to_string(m_config.max_siblings) + ")";
}

namespace {

/* a new client's segment: its header, empty rings, doorbells down */
void format_segment(shm_mapping &map, const shm_layout &l, uint32_t index)
{
    *map.at<shm_header>(0) = l.header(index);
    ring_init(*map.at<ring_indices>(l.work_offset));
    ring_init(*map.at<ring_indices>(l.completion_offset));
    ring_init(*map.at<ring_indices>(l.inbound_offset));
    auto *bells = map.at<shm_doorbells>(l.doorbell_offset);
    bells->agent_asleep.store(0, std::memory_order_relaxed);
    bells->client_asleep.store(0, std::memory_order_relaxed);
    bells->write_notices.store(0, std::memory_order_relaxed);
}

} // namespace

wire::attach_reply
attach_server::accepting_reply(uint32_t index, uint32_t generation) const
{
    wire::attach_reply rep = wire::make_refusal(wire::attach_status::accepted,
                                                "");
    rep.client_index       = index;
    rep.client_generation  = imm::wire_generation(generation);
    rep.pd_handle          = m_grant.pd_handle;
    rep.reg_mode           = static_cast<uint32_t>(m_grant.mode);
    rep.driver_id          = m_grant.driver_id;
    rep.shm_size           = m_config.layout.size;
    rep.agent_id           = m_grant.agent_id;
    rep.address            = m_grant.address;
    rep.num_qps            = m_grant.num_qps;
    rep.max_am_size        = m_config.layout.caps.slot_size;
    rep.features           = m_grant.features;
    rep.path_mtu           = m_grant.path_mtu;
    return rep;
}

bool attach_server::answer(connection &conn, std::span<const std::byte> msg)
{
    auto req = wire::parse_attach_request(msg);
    if (!req) {
        return refuse(conn, wire::attach_status::bad_message, req.error());
    }
    if (auto no = refusal_of(conn, req.value())) {
        return refuse(conn, no->status, no->reason);
    }
    std::optional<uint32_t> leader;
    if (req.value().flags & wire::attach_sibling) {
        leader = req.value().leader_index;
    }
    const auto free = m_indices.pick(clock::now());
    if (!free.index) {
        return refuse(conn, wire::attach_status::agent_full,
                      "all " + std::to_string(m_config.max_clients) +
                              " client indices are in use (" +
                              std::to_string(free.quarantined) +
                              " of them detached less than " +
                              std::to_string(
                                      m_config.index_quarantine.count()) +
                              " ms ago, in quarantine)");
    }
    const uint32_t index      = *free.index;
    const uint32_t generation = m_indices.next_generation(index);
    /* out of descriptors (the accept took the last one): the request
     * waits, as connections do in the backlog, until one frees ("Bounded
     * intake") */
    const auto short_of_fds = [&] {
        const std::string note = m_gate.out_of_fds(clock::now(), errno_text());
        if (!note.empty()) {
            m_log(note);
        }
        conn.deferred = true;
        return true;
    };
    auto seg = create_shm_segment("rvt-client-" + std::to_string(index),
                                  m_config.layout.size);
    if (!seg) {
        if (out_of_fds(errno)) {
            return short_of_fds();
        }
        return refuse(conn, wire::attach_status::agent_error, seg.error());
    }
    unique_fd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake) {
        if (out_of_fds(errno)) {
            return short_of_fds();
        }
        return refuse(conn, wire::attach_status::agent_error,
                      "eventfd failed: " + errno_text());
    }
    shm_segment segment = std::move(seg).value();
    format_segment(segment.map, m_config.layout, index);
    const wire::attach_reply rep = accepting_reply(index, generation);
    const int fds[] = {m_grant.cmd_fd, segment.fd.get(), m_grant.agent_wake_fd,
                       wake.get(), m_grant.work_summary_fd};
    auto sent       = send_with_fds(conn.sock.get(),
                                    std::as_bytes(std::span(&rep, 1)), fds);
    if (!sent) {
        log_counted(lines_of(line_kind::reply_failed), [&] {
            return "attach server: reply to " + who(conn) +
                   " failed: " + sent.error();
        });
        return false;
    }
    m_indices.give(index); /* generation, as the reply said */
    conn.attached = true;
    m_gate.settled();
    conn.client = {index,           conn.peer.pid, std::move(segment.map),
                   std::move(wake), generation,    leader};
    conn.buf.clear();
    log_counted(lines_of(line_kind::attached), [&] {
        return "attach server: " + who(conn) + " attached as index " +
               std::to_string(index) + " generation " +
               std::to_string(imm::wire_generation(generation)) +
               (leader ? ", a sibling of index " + std::to_string(*leader) :
                         "");
    });
    m_events.push_back({attach_event_kind::attached, &conn.client});
    return true;
}

/* Whole messages from an attached client; false ends the attachment. */
bool attach_server::take_notices(connection &conn)
{
    while (conn.buf.size() >= sizeof(wire::msg_header)) {
        auto hdr = wire::parse_header(conn.buf);
        if (!hdr) {
            log_counted(lines_of(line_kind::malformed), [&] {
                return "attach server: " + who(conn) + ": " + hdr.error() +
                       ": detaching it";
            });
            return false;
        }
        const size_t len = hdr.value().length;
        if (conn.buf.size() < len) {
            return true;
        }
        if (hdr.value().type ==
            static_cast<uint16_t>(wire::msg_type::peer_request)) {
            if (!take_peer_request(conn, std::span(conn.buf).first(len))) {
                return false;
            }
            conn.buf.erase(conn.buf.begin(), conn.buf.begin() + len);
            continue;
        }
        if (hdr.value().type ==
            static_cast<uint16_t>(wire::msg_type::retire_address)) {
            auto retire =
                    wire::parse_retire_notice(std::span(conn.buf).first(len),
                                              wire::msg_type::retire_address);
            if (!retire) {
                log_counted(lines_of(line_kind::malformed), [&] {
                    return "attach server: " + who(conn) + ": " +
                           retire.error() + ": detaching it";
                });
                return false;
            }
            m_events.push_back({.kind   = attach_event_kind::retired,
                                .client = &conn.client});
            conn.buf.erase(conn.buf.begin(), conn.buf.begin() + len);
            continue;
        }
        auto notice = wire::parse_mr_notice(std::span(conn.buf).first(len));
        if (!notice) {
            log_counted(lines_of(line_kind::malformed), [&] {
                return "attach server: " + who(conn) + ": " + notice.error() +
                       ": detaching it";
            });
            return false;
        }
        m_events.push_back({.kind   = attach_event_kind::mr_notice,
                            .client = &conn.client,
                            .notice = notice.value()});
        conn.buf.erase(conn.buf.begin(), conn.buf.begin() + len);
    }
    return true;
}

attach_server::connection *attach_server::attached_at(uint32_t index)
{
    for (auto &c : m_conns) {
        if (c->attached && !c->broken && c->client.index == index) {
            return c.get();
        }
    }
    return nullptr;
}

void attach_server::detach(uint32_t index, const std::string &why)
{
    if (connection *c = attached_at(index)) {
        log_counted(lines_of(line_kind::detached), [&] {
            return "attach server: " + who(*c) + ": " + why + ": detaching it";
        });
        c->broken = true;
    }
}

void attach_server::answer_release(uint32_t index, uint32_t handle,
                                   const std::string &refusal)
{
    answer_mr(index, wire::msg_type::mr_release_reply, handle, refusal);
}

void attach_server::answer_announce(uint32_t index, uint32_t handle,
                                    const std::string &refusal)
{
    answer_mr(index, wire::msg_type::mr_registered_reply, handle, refusal);
}

void attach_server::answer_mr(uint32_t index, wire::msg_type type,
                              uint32_t handle, const std::string &refusal)
{
    if (connection *c = attached_at(index)) {
        c->broken = !send_mr_reply(*c, type, handle, refusal);
    }
}

bool attach_server::send_mr_reply(connection &conn, wire::msg_type type,
                                  uint32_t handle, const std::string &refusal)
{
    const bool done = refusal.empty();
    auto rep        = type == wire::msg_type::mr_release_reply ?
                              wire::make_mr_release_reply(
                                      done ? wire::release_status::released :
                                             wire::release_status::refused,
                               handle, refusal) :
                              wire::make_mr_registered_reply(
                                      done ? wire::announce_status::accepted :
                                             wire::announce_status::refused,
                               handle, refusal);
    return send_reply(conn, std::as_bytes(std::span(&rep, 1)),
                      type == wire::msg_type::mr_release_reply ?
                              "an MR release reply" :
                              "an MR registered reply");
}

/* Queues a reply behind any pending output and writes what the socket
 * takes; false: the connection is to be closed (the reason is logged). */
bool attach_server::send_reply(connection &conn,
                               std::span<const std::byte> reply,
                               std::string_view what)
{
    if (conn.pending() == 0) {
        conn.out.clear();
        conn.out_sent  = 0;
        conn.out_since = clock::now();
    }
    conn.out.insert(conn.out.end(), reply.begin(), reply.end());
    if (!flush(conn)) {
        return false;
    }
    if (conn.pending() > m_config.max_pending_output) {
        log_counted(lines_of(line_kind::output_limit), [&] {
            return "attach server: " + who(conn) + ": " +
                   std::to_string(conn.pending()) +
                   " bytes of output pending (" + std::string(what) + " of " +
                   std::to_string(reply.size()) +
                   " bytes added), more than the limit of " +
                   std::to_string(m_config.max_pending_output) +
                   ": dropping the connection";
        });
        return false;
    }
    return true;
}

/* Writes pending output until the socket takes no more; false: the
 * connection is to be closed (the reason is logged). */
bool attach_server::flush(connection &conn)
{
    while (conn.pending() > 0) {
        ssize_t n = send(conn.sock.get(), conn.out.data() + conn.out_sent,
                         conn.pending(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            conn.out_sent += static_cast<size_t>(n);
            conn.out_since = clock::now(); /* the reader is reading */
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return true;
        } else if (n < 0 && errno != EINTR) {
            log_counted(lines_of(line_kind::send_failed), [&] {
                return "attach server: " + who(conn) + ": cannot send " +
                       output_what(conn) + ": " + errno_text() +
                       ": dropping the connection";
            });
            return false;
        }
    }
    conn.out.clear();
    conn.out_sent = 0;
    return true;
}

/* True (and logged) when the reader has taken none of its pending output
 * for the reply timeout. */
bool attach_server::timed_out(const connection &conn)
{
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
            clock::now() - conn.out_since);
    if (waited < m_config.reply_timeout) {
        return false;
    }
    log_counted(lines_of(line_kind::slow_reader), [&] {
        return "attach server: " + who(conn) +
               ": too slow a reader: " + output_what(conn) +
               " still pending after " + std::to_string(waited.count()) +
               " ms (limit " + std::to_string(m_config.reply_timeout.count()) +
               " ms): dropping the connection";
    });
    return true;
}

std::string attach_server::output_what(const connection &conn) const
{
    return std::to_string(conn.pending()) + " of " +
           std::to_string(conn.out.size()) + " bytes of " +
           (conn.answering ? "its status answer" : "replies");
}

bool attach_server::take_peer_request(connection &conn,
                                      std::span<const std::byte> msg)
{
    auto req = wire::parse_peer_request(msg);
    if (!req) {
        log_counted(lines_of(line_kind::malformed), [&] {
            return "attach server: " + who(conn) + ": " + req.error() +
                   ": detaching it";
        });
        return false;
    }
    m_events.push_back({.kind   = attach_event_kind::peer_request,
                        .client = &conn.client,
                        .peer   = req.value().peer});
    return true;
}

void attach_server::answer_peer(uint32_t index, const result<uint32_t> &peer)
{
    connection *c = attached_at(index);
    if (c == nullptr) {
        return;
    }
    auto rep  = peer ? wire::make_peer_reply(wire::peer_status::accepted,
                                             peer.value(), "") :
                       wire::make_peer_reply(wire::peer_status::refused, 0,
                                             peer.error());
    c->broken = !send_reply(*c, std::as_bytes(std::span(&rep, 1)),
                            "a peer reply");
}

void attach_server::answer_retired(uint32_t index)
{
    connection *c = attached_at(index);
    if (c == nullptr) {
        return;
    }
    auto rep  = wire::make_retire_notice(wire::msg_type::retire_address_reply);
    c->broken = !send_reply(*c, std::as_bytes(std::span(&rep, 1)),
                            "a retire reply");
}

attach_server::pending_read
attach_server::take_pending(uint32_t index, read_limit limit)
{
    pending_read out;
    connection *c = attached_at(index);
    /* what was sent before this call, and no more: a client that keeps
     * writing cannot keep the data path here */
    int queued = 0;
    if (c == nullptr || ioctl(c->sock.get(), FIONREAD, &queued) != 0 ||
        queued <= 0) {
        return out;
    }
    /* each service() reads one chunk; a burst of notices may span a few */
    for (size_t left = static_cast<size_t>(queued); left > 0;) {
        const size_t most = limit == read_limit::all_queued ?
                                    left :
                                    std::min(left, budget_left(*c));
        if (most == 0) {
            read_deferred(*c, left);
            out.complete = false;
            break;
        }
        const size_t before = c->read_in_pass;
        c->broken           = !service(*c, most);
        const size_t got    = c->read_in_pass - before;
        if (c->broken || got == 0) {
            break; /* EOF, an error, or nothing after all */
        }
        left -= std::min(left, got);
    }
    out.events = std::exchange(m_events, {});
    return out;
}

size_t attach_server::budget_left(const connection &conn) const
{
    return m_config.max_socket_read -
           std::min(m_config.max_socket_read, conn.read_in_pass);
}

void attach_server::read_deferred(const connection &conn, size_t left)
{
    if (!worth_logging(++m_reads_deferred)) {
        return;
    }
    m_log("attach server: " + who(conn) + " (index " +
          std::to_string(conn.client.index) +
          "): " + std::to_string(conn.read_in_pass) +
          " bytes read from its socket this pass, max-socket-read (" +
          std::to_string(m_config.max_socket_read) +
          "): " + std::to_string(left) + " more wait for the next pass (" +
          std::to_string(m_reads_deferred) + " so far)");
}

void attach_server::poll_fds(std::vector<pollfd> &out)
{
    watch_all(); /* what it waits for is up to date */
    out.push_back({m_epoll.get(), POLLIN, 0});
}

std::string attach_server::sibling_error(const connection &conn,
                                         const wire::attach_request &req) const
{
    const std::string named = "leader index " +
                              std::to_string(req.leader_index);
    for (const auto &c : m_conns) {
        if (!c->attached || c->broken || c->client.index != req.leader_index) {
            continue;
        }
        const uint32_t gen = imm::wire_generation(c->client.generation);
        if (gen != req.leader_generation) {
            return named + " generation " +
                   std::to_string(req.leader_generation) +
                   ": that index is attached with generation " +
                   std::to_string(gen) + " (a later attachment)";
        }
        if (c->client.leader) {
            return named + " is itself a sibling of index " +
                   std::to_string(*c->client.leader) +
                   ": expected the leader's index";
        }
        /* SO_PEERCRED on both sockets, never the message's pid */
        if (c->peer.pid != conn.peer.pid || c->peer.uid != conn.peer.uid) {
            return named + " belongs to pid " + std::to_string(c->peer.pid) +
                   " uid " + std::to_string(c->peer.uid) +
                   ", not to this client (pid " +
                   std::to_string(conn.peer.pid) + " uid " +
                   std::to_string(conn.peer.uid) +
                   "): expected an attachment of the same process";
        }
        return {};
    }
    return named + " generation " + std::to_string(req.leader_generation) +
           " is not attached to this agent";
}

bool attach_server::refuse(connection &conn, wire::attach_status status,
                           const std::string &reason)
{
    /* each status a kind of its own ("Log lines") */
    const auto kind = std::min<size_t>(static_cast<size_t>(status),
                                       m_refusals.size() - 1);
    log_counted(m_refusals[kind], [&] {
        return "attach server: refused " + who(conn) + ": " +
               std::string(wire::to_string(status)) + ": " + reason;
    });
    wire::attach_reply rep = wire::make_refusal(status, reason);
    (void)send_with_fds(conn.sock.get(), std::as_bytes(std::span(&rep, 1)), {});
    return false;
}

} // namespace rvt::agent
