/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's front door: a Unix stream socket where processes of the
 * job attach (attach_wire.h has the messages).
 *
 * Connection states, per accepted socket:
 *   awaiting_request  bytes are collected until a whole message is there
 *                     (an attach request, or a status request: a
 *                     status_request event, whose answer_status() text
 *                     is sent: answering)
 *                     (or the request timeout passes, or it is malformed:
 *                     then a refusal with the reason, and close)
 *   answering         the status answer goes out as the reader takes it;
 *                     nothing more is read; closed once it is all sent
 *   attached          the client holds an index, the command fd and its
 *                     shm segment; the socket stays open as the client's
 *                     lifeline: EOF or an error on it means the client is
 *                     gone (exit, crash, SIGKILL): a detached event, and
 *                     its index is free. On the socket the client
 *                     announces the MRs it registers in the agent's PD
 *                     and asks the agent to deregister them (mr_release):
 *                     both are mr_notice events, whose owner
 *                     (mr_registry) decides, and who answers a release
 *                     through answer_release() (an announcement that
 *                     asks for it, answer_announce()); it asks for peer
 *                     indices (a peer_request event, answered through
 *                     answer_peer()); it may retire its address (a
 *                     retired event: nobody reads its rings any more,
 *                     its address must reach nobody, and it stays
 *                     attached for its MRs and its siblings; answered
 *                     through answer_retired()); a malformed message
 *                     ends the attachment as if the client had died.
 *   attached sibling  as attached, for an attach request that named a
 *                     leader (attach_wire.h, "Siblings"): accepted only
 *                     if the leader is attached now with the generation
 *                     named, is no sibling itself and has the sibling's
 *                     SO_PEERCRED pid (else refused, bad_sibling, naming
 *                     the value); when the leader's attachment ends, for
 *                     any reason, each of its siblings' ends in the same
 *                     run_once() (logged "its leader ... is gone"), its
 *                     detached event after the leader's. Its MRs are the
 *                     leader's (mr_registry.h, "Groups").
 *
 * Who may ask (SO_PEERCRED's uid, never the message's): an attach
 * request, only the agent's own uid (attach_config::uid); any other,
 * root included, is refused (wrong_uid), naming both uids. A status
 * request, that uid and root (uid 0): reading the status changes nothing,
 * and root's rvt-status --all lists every agent of the node
 * (docs/operations.md); another user is refused the same way.
 *
 * Attachments of one process: at most 1 + attach_config::max_siblings
 * attachments with one SO_PEERCRED pid at once (rvtd
 * --max-client-siblings), its leaders and their siblings alike; the next
 * is refused (agent_full), naming the bound and the value, so that no
 * process can take the indices the job's other processes need.
 *
 * Log lines: each line a client or an outsider can cause (a refusal, by
 * its status; an attach; a departure; a malformed message; a reader that
 * is slow, gone or holds too much output; an accept or epoll failure) is
 * logged at the 1st, 2nd, 4th, ... time of its kind (format.h,
 * worth_logging), its count at the end ("(12 so far)"); rvt-status shows
 * who is attached now.
 *
 * Bounded intake (docs/reliability.md, "Hostile input"): at most
 * max_unattached connections are accepted and not attached at once, and
 * an accept that finds no descriptor stops accepting until a connection
 * closes or the accept retry time passes (accept_gate.h: without it the
 * listener stays readable and the loop spins); and at most
 * max_socket_read bytes are read from one socket per pass (between two
 * run_once() calls, the data path's take_pending() included): the rest
 * waits in the socket for the next pass.
 *
 * Output never waits: every reply (status answer, peer and MR
 * replies) is written as far as the socket takes it, and the rest waits in
 * the connection's output buffer until poll() says the socket is writable
 * (POLLOUT). A reader that takes none of its pending output for the reply
 * timeout, or output pending beyond max_pending_output bytes, loses its
 * connection (an attached client is detached), with the reason logged:
 * one slow reader never holds the agent's loop, so every other client's
 * data keeps moving.
 *
 * Indices and generations: a new client gets the lowest free index that
 * has been free for at least attach_config::index_quarantine, and that
 * index's next generation (imm.h: the agent's count of attaches of the
 * index, whose low bits the immediates carry; the reply tells the client,
 * which publishes it in its UCT address). Peers name (index, generation),
 * and the agent drops whatever names a generation that is not attached
 * (engine.h, "Departed clients"). The quarantine is what keeps the 8-bit
 * generation from wrapping quickly: 256 attaches of one index take at
 * least 255 quarantines, far longer than the first stale message needs
 * to fail its sender's endpoint. With every free index still in
 * quarantine, an attach is refused (agent_full) rather than hurried.
 *
 * Invariants: an index belongs to at most one attached client; a refused
 * or dead connection never changes any other client's state; nothing a
 * peer sends is used before parse_* has accepted it; SO_PEERCRED, not the
 * message, says who the peer is. Which client holds which MR is not kept
 * here (mr_registry.h).
 *
 * Events: the listener and every connection are registered with one
 * epoll descriptor, and run_once() waits on it, so that a pass costs
 * nothing per quiet connection (a node of 512 attached ranks: poll() over
 * every socket cost the busy agent 60 us per call). Each socket is
 * watched for what it is waited for: input unless answering, output while
 * output is pending, the listener while the accept gate accepts.
 *
 * Events to the owner: the server calls nobody. What needs the rest of
 * the agent (a client attached or gone, its MR notices and peer requests,
 * a status request) comes back from run_once() and take_pending() as an
 * attach_event, in the order it happened; the owner acts on each, and
 * answers what asks for an answer through answer_*(), whose replies go
 * out in the order they are given. rvtd's owner is the engine
 * (engine::serve_clients), which hands status requests up to rvtd.
 *
 * Single-threaded: the owner calls run_once() from the agent's loop.
 */
#ifndef RVT_AGENT_ATTACH_SERVER_H
#define RVT_AGENT_ATTACH_SERVER_H

#include "uct/ib/rvt/agent/attach/accept_gate.h"
#include "uct/ib/rvt/agent/attach/client_indices.h"
#include "uct/ib/rvt/agent/device/device_grant.h"
#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/format.h"
#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/common/shm_layout.h"
#include "uct/ib/rvt/common/shm_mapping.h"
#include "uct/ib/rvt/common/unique_fd.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

namespace rvt::agent {

/* attach_config::index_quarantine's default (engine.h checks it against
 * the departure memory) */
inline constexpr std::chrono::milliseconds default_index_quarantine{1000};
/* attach_config::max_siblings's default (rvtd --max-client-siblings): no
 * process more than a quarter of the 512 indices (128 attachments), and
 * room for what UCX itself opens: its test_uct_peer_failure_multiple
 * holds 65 interfaces in one process, each on a memory domain of its own
 * (a leader each), and a rank with many UCP workers an interface each
 * (the first on its memory domain's attachment, the others siblings). */
inline constexpr uint32_t default_max_client_siblings = 127;

struct attach_config {
    std::string socket_path;
    std::string job_key;
    uid_t uid;
    uint32_t max_clients = imm::max_clients; /* client processes at once */
    shm_layout layout;
    std::chrono::milliseconds request_timeout{5000};
    /* How long pending output may go without the reader taking any of it
     * before the connection is dropped. */
    std::chrono::milliseconds reply_timeout{5000};
    /* Most bytes of output kept for one connection: a status answer of the
     * largest size the protocol allows fits. */
    size_t max_pending_output = wire::max_status_size;
    /* How long a detached index stays unused ("Indices and generations"
     * above); 0: reused at once. */
    std::chrono::milliseconds index_quarantine = default_index_quarantine;
    /* Connections accepted and not attached yet (waiting for their
     * request, or sending a status answer) at once; more wait in the
     * listen backlog ("Bounded intake" above). */
    uint32_t max_unattached = 64;
    /* Bytes read from one connection's socket per pass: at least one
     * message of the largest size. */
    size_t max_socket_read = 64 * 1024;
    /* With no descriptor to accept with: how long before trying again if
     * none of the server's connections closes first. */
    std::chrono::milliseconds accept_retry{100};
    /* Attachments one process may hold beyond its first ("Attachments of
     * one process" above). */
    uint32_t max_siblings = default_max_client_siblings;
};

/* Descriptors: an attached client holds two of the agent's (its socket
 * and its wake eventfd), a connection not attached yet one, and the agent
 * itself some (its device, CQ channel, epoll, log, listener, memfds);
 * a site's usual soft limit of 1024 is too few for 512 clients. rvtd
 * raises its soft limit to what its bounds need, as far as the hard limit
 * allows; beyond that the accept gate makes attaches wait ("Bounded
 * intake" above). */
inline constexpr uint64_t agent_own_descriptors = 64;
constexpr uint64_t
descriptors_needed(uint32_t max_clients, uint32_t max_unattached)
{
    return 2 * uint64_t{max_clients} + max_unattached + agent_own_descriptors;
}

struct descriptor_plan {
    uint64_t soft; /* the soft limit to set (unchanged: the same) */
    std::string warning; /* empty unless the hard limit is too low */
};
/* What soft limit to ask for, from the current limits and the need. */
descriptor_plan plan_descriptors(uint64_t soft, uint64_t hard, uint64_t needed);

/* What the server's bounds did, for the status. */
struct intake_counters {
    uint32_t unattached     = 0; /* now */
    uint32_t max_unattached = 0;
    uint64_t times_full     = 0; /* max_unattached reached */
    uint64_t fd_shortages   = 0; /* accepts that found no descriptor */
    /* take_pending() calls that left bytes for the next pass */
    uint64_t reads_deferred = 0;
};

/* When a busy loop should call run_once(0): every `passes` passes, and
 * at least every `period`. A count alone is not enough: a pass that
 * yields can take tens of milliseconds when the node's processes
 * outnumber its cores, and 256 of them left the socket unread for
 * seconds (a process's close, which waits for the agent to let it go,
 * and rvt-status timed out). */
struct serve_pacer {
    using time_point                = std::chrono::steady_clock::time_point;
    unsigned passes                 = 256;
    std::chrono::nanoseconds period = std::chrono::milliseconds(1);
    unsigned counter                = 0;
    time_point served{};

    /* One busy pass at `now`: true if the socket is due (then it counts
     * as served now). */
    bool due(time_point now)
    {
        if (++counter % passes == 0 || now - served >= period) {
            served = now;
            return true;
        }
        return false;
    }
    /* The loop served it anyway (an idle pass). */
    void served_at(time_point now)
    {
        served = now;
    }
};

struct attached_client {
    uint32_t index;
    pid_t pid;
    shm_mapping shm; /* the agent's own mapping of the client's segment */
    unique_fd wake_fd; /* the client's eventfd: written to wake it */
    /* attaches of this index so far, this one included (imm.h sends its
     * low bits: imm::wire_generation) */
    uint32_t generation = 0;
    /* a sibling: its leader's index (attached while this one is) */
    std::optional<uint32_t> leader;
};

/* What the server tells its owner, in the order it happened ("Events
 * to the owner" above). The server calls nobody: run_once() and
 * take_pending() return these, and the owner acts on each in turn. */
enum class attach_event_kind : uint8_t {
    attached, /* `client` is attached (its segment formatted) */
    detached, /* `client` is gone (its leader's siblings after it): clean
                 up after it. Its segment and wake fd stay mapped and open
                 until the next run_once(); its socket is closed. */
    peer_request, /* `client` asks which peer index names `peer`: answer
                     with answer_peer(), or the client waits for ever */
    mr_notice, /* `client` sent `notice` (wire::mr_notice, parsed: an
                  announcement, intent or release): answer a release,
                  and an announcement that asks for it, with
                  answer_release() / answer_announce() */
    status_request, /* a connection (rvt-status) asks for the status text,
                       `human` or JSON: answer with answer_status(ticket) */
    retired, /* `client` retired its address (wire::msg_type::
                retire_address): handle it as its departure, then answer
                with answer_retired(); it stays attached */
};

struct attach_event {
    attach_event_kind kind;
    /* attached, detached, peer_request, mr_notice: valid until the next
     * run_once() after its detached event */
    const attached_client *client = nullptr;
    wire::agent_address peer{}; /* peer_request */
    wire::mr_notice notice{}; /* mr_notice */
    uint64_t ticket = 0; /* status_request: its connection */
    bool human      = false; /* status_request */
};
using attach_events = std::vector<attach_event>;

class attach_server {
public:
    /* Validates the config and binds the socket (an existing socket file
     * is replaced: the caller holds the agent lock, so it is stale). The
     * socket is bound and listening under a staging name and then renamed
     * to its path, so that a socket file at the path always accepts: a
     * client that finds it and is refused knows its agent is gone. */
    static result<std::unique_ptr<attach_server>>
    create(attach_config config, device_grant grant, log_fn log);

    ~attach_server();

    /* Accepts, reads, answers and reaps for at most timeout_ms; returns
     * what happened, in order. */
    attach_events run_once(int timeout_ms);

    /* Answers status request `ticket` with `text` (the connection closes
     * once the reader has it all). A ticket whose connection is gone is
     * ignored. */
    void answer_status(uint64_t ticket, const std::string &text);
    /* Answers client `index`'s peer request: the peer index, or why not. */
    void answer_peer(uint32_t index, const result<uint32_t> &peer);
    /* Answers client `index`'s retire_address: its address is gone. */
    void answer_retired(uint32_t index);
    /* Answers client `index`'s release of `handle` (an mr_release_reply):
     * released if `refusal` is empty, else refused with it as the reason.
     * A client that cannot be sent an answer (this one, or any above) is
     * detached at the next run_once(). */
    void
    answer_release(uint32_t index, uint32_t handle, const std::string &refusal);
    /* The same for an announcement of `handle` that asked for an answer
     * (an mr_registered_reply): accepted if `refusal` is empty. */
    void answer_announce(uint32_t index, uint32_t handle,
                         const std::string &refusal);

    /* How much of a socket take_pending() reads: what the pass's budget
     * (max_socket_read) leaves, or all that is queued, whatever the
     * budget (for a look that must see everything sent before it, and
     * is rare: the unannounced-MR sweep). */
    enum class read_limit : uint8_t {
        pass_budget,
        all_queued,
    };
    /* Reads what the client at `index` has sent so far (MR notices, peer
     * requests) without waiting, and nothing sent after the call: the
     * data path calls it before refusing work that names an MR it has
     * not heard of, since the client sends its notice before it posts.
     * `complete` when all of it was read; not when the budget left some
     * for the next pass (logged at the 1st, 2nd, 4th, ... time). `events`:
     * what it read (peer_request, mr_notice and retired only). A client
     * found broken here is detached at the next run_once(). */
    struct pending_read {
        bool complete = true;
        attach_events events;
    };
    pending_read
    take_pending(uint32_t index, read_limit limit = read_limit::pass_budget);

    /* Detaches the client at `index` at the next run_once(), logging
     * `why`: the data path found its shared memory broken (a ring index
     * no ring can have), so nothing it posts can be read any more. */
    void detach(uint32_t index, const std::string &why);

    /* What run_once() waits on, for callers that sleep in their own
     * poll(): its epoll descriptor, readable when a socket has an event
     * run_once() waits for ("Events" above). */
    void poll_fds(std::vector<pollfd> &out);

    /* When run_once() is next due without an event (the accept gate's
     * retry), if ever. */
    std::optional<std::chrono::steady_clock::time_point> next_timer() const
    {
        return m_gate.next_timer();
    }
    intake_counters intake() const;

    /* Which indices are held, and their generations: the server gives
     * and frees them, the engine reads generations (client_table). */
    const client_indices &indices() const
    {
        return m_indices;
    }

    size_t attached_count() const;
    std::vector<const attached_client *> clients() const;
    const attached_client *client(uint32_t index) const;

private:
    struct connection;

    attach_server(attach_config config, device_grant grant, log_fn log,
                  unique_fd listener);
    void accept_all();
    /* run_once's parts: how long to wait (timeout_ms, or less for the
     * earliest request or reply timeout and the gate's retry); one
     * connection's turn (false: close it); the siblings of a closed
     * leader closed too; the closed dropped, the attached ones' detached
     * events out. */
    int wait_for(int timeout_ms) const;
    bool serve(connection &conn);
    void close_siblings_of_closed(std::vector<bool> &closed);
    void drop_closed(const std::vector<bool> &closed);
    /* Reads at most `most` bytes (and one chunk) and acts on whole
     * messages; false: close it. */
    bool service(connection &conn, size_t most);
    bool take_notices(connection &conn);
    /* What this pass may still read from `conn` (max_socket_read). */
    size_t budget_left(const connection &conn) const;
    /* take_pending() left `left` bytes for the next pass: counted, and
     * logged at the 1st, 2nd, 4th, ... time. */
    void read_deferred(const connection &conn, size_t left);
    bool take_peer_request(connection &conn, std::span<const std::byte> msg);
    bool take_status_request(connection &conn, std::span<const std::byte> msg);
    /* The attached, not broken, client at `index`, if any. */
    connection *attached_at(uint32_t index);
    /* An mr_release_reply or mr_registered_reply (`type`). */
    void answer_mr(uint32_t index, wire::msg_type type, uint32_t handle,
                   const std::string &refusal);
    bool send_mr_reply(connection &conn, wire::msg_type type, uint32_t handle,
                       const std::string &refusal);
    bool send_reply(connection &conn, std::span<const std::byte> reply,
                    std::string_view what);
    bool flush(connection &conn);
    bool timed_out(const connection &conn);
    std::string output_what(const connection &conn) const;
    bool answer(connection &conn, std::span<const std::byte> message);
    /* answer()'s parts: why a request may not attach (its uid, job key or
     * leader); the reply that accepts it */
    struct attach_refusal {
        wire::attach_status status;
        std::string reason;
    };
    std::optional<attach_refusal>
    refusal_of(const connection &conn, const wire::attach_request &req) const;
    wire::attach_reply
    accepting_reply(uint32_t index, uint32_t generation) const;
    bool refuse(connection &conn, wire::attach_status status,
                const std::string &reason);
    /* Empty if `req` may attach as a sibling of the leader it names. */
    std::string sibling_error(const connection &conn,
                              const wire::attach_request &req) const;
    /* Empty if conn's process may hold one attachment more ("Attachments
     * of one process"). */
    std::string attachments_error(const connection &conn) const;
    /* "Log lines": the kinds, and line() logged at the 1st, 2nd, 4th, ...
     * event of its kind (`count`), the count after it */
    enum class line_kind : uint8_t {
        attached,
        gone,
        leader_gone,
        hung_up,
        malformed,
        detached,
        reply_failed,
        output_limit,
        send_failed,
        slow_reader,
        accept,
        epoll,
    };
    static constexpr size_t num_line_kinds = 12;
    uint64_t &lines_of(line_kind k)
    {
        return m_lines[static_cast<size_t>(k)];
    }
    template<class Line> void log_counted(uint64_t &count, Line &&line)
    {
        if (worth_logging(++count)) {
            m_log(line() + " (" + std::to_string(count) + " so far)");
        }
    }
    std::string who(const connection &conn) const;
    /* "Events": what epoll watches follows what each socket is waited
     * for (EPOLLIN unless answering, EPOLLOUT while output is pending; the
     * listener while the gate accepts) */
    void watch(connection &conn);
    void watch_all();
    /* Waits up to timeout_ms for events and marks the connections that
     * have some; true if the listener has one. */
    bool wait_events(int timeout_ms);

    attach_config m_config;
    device_grant m_grant;
    log_fn m_log;
    unique_fd m_listener;
    unique_fd m_epoll; /* the listener and every connection ("Events") */
    uint32_t m_listener_watched = EPOLLIN;
    accept_gate m_gate;
    uint64_t m_reads_deferred = 0;
    std::vector<std::unique_ptr<connection>> m_conns;
    /* detached clients' connections, their sockets closed, kept until the
     * next run_once() for the detached events naming them */
    std::vector<std::unique_ptr<connection>> m_departed;
    uint64_t m_next_ticket = 1; /* status_request tickets */
    attach_events m_events; /* what the current call returns */
    client_indices m_indices;
    /* "Log lines": events of each kind so far, refusals by status */
    std::array<uint64_t, num_line_kinds> m_lines{};
    std::array<uint64_t, wire::attach_status_limit> m_refusals{};
};

} // namespace rvt::agent

#endif
