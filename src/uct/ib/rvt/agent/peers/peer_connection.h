/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The connection from this agent to ONE remote agent (one remote node of
 * the job): K shared RC QPs, set up on demand over the UD handshake
 * (common/conn_wire.h), kept alive, torn down and re-established on
 * errors, and given up after a bounded time (docs/design.md part 6). The
 * agent's own node is a peer too (loopback, below): the same states, a
 * subset of the events, no handshake.
 *
 * This is a pure state machine: no verbs calls, no clock reads, no I/O.
 * Every input is an event method taking `now`; every effect comes back as
 * a list of `action`s that the caller executes in order (post a datagram,
 * create or modify QPs, report to clients). So every path, including the
 * rare ones (lost replies, crossed requests, a peer that restarts), runs in
 * unit tests without hardware, and the agent's event loop stays a thin
 * executor. The caller arms one timer at next_timer() and calls tick().
 *
 * States, and what holds in each (as Intel's rv documents its states):
 *
 *   idle        Nobody wants the connection. No local QPs, no timer.
 *               A valid request from the peer is answered (passive side).
 *   creating    create_qps was emitted; waiting for qps_created() or
 *               qps_failed(). No local QPs yet. If `pending` holds a
 *               request we are the passive side and will answer it; else
 *               we will send our own request. The give-up deadline runs.
 *   connecting  Our request (seq m_seq, our K QPs in INIT) is out; waiting
 *               for the reply. Resent unchanged at retry_interval, doubling
 *               up to max_retry_interval; after max_handshake_retries
 *               resends with no reply at all the peer is failed. The
 *               give-up deadline runs.
 *   connected   Local QPs are RTR/RTS against the peer's K QPs; ops flow.
 *               No deadline; a keepalive is sent after keepalive_interval
 *               without activity(), and an unanswered one (no activity for
 *               keepalive_timeout after it) counts as a lost connection.
 *   draining    The connection was lost (QP error, keepalive, the peer
 *               reconnecting or restarting) or is being closed. flush_qps
 *               was emitted: every posted op completes as flushed and is
 *               reported failed to its client; the caller calls drained()
 *               after the last one. QPs still exist; nothing is sent. A
 *               request that arrives is kept in `pending` and answered
 *               once drained. The deadline is set but not enforced here
 *               (flushes always complete; failing clients' ops is owed).
 *   waiting     (waiting_to_reconnect) After a lost connection, a failed
 *               attempt, or a `busy` refusal: reconnect_delay passes before
 *               the next attempt. May keep INIT QPs from the last attempt.
 *               A request from the peer ends the wait (answered at once).
 *   failed      Gave up: give_up_timeout passed since the connection was
 *               first wanted or lost, the peer never replied, or it
 *               refused for good (wrong job key, uid, K, stale instance).
 *               report_peer_failed was emitted; no QPs, no timer. connect()
 *               or a request from the peer starts over.
 *
 * Events -> transitions (anything else is ignored; last_ignored() says why):
 *
 *   connect()        idle|failed -> creating (or connecting if QPs exist)
 *   qps_created()    creating -> connecting (send request)
 *                              | connected (passive: answer `pending`)
 *   qps_failed()     creating -> waiting (refuse `pending` as busy), or
 *                    idle if we were only answering
 *   request          refused (another job key, uid, K or AM size, or an
 *                    earlier instance of ours): a refusal is sent, the
 *                    state is untouched
 *                    idle|waiting|failed -> connected (answer) or creating
 *                    connecting -> connected if we are the LOWER agent,
 *                              else ignored (see "crossed requests")
 *                    connected, same seq we answered -> resend our reply
 *                    connected, newer seq or new instance -> draining
 *                    creating|draining -> kept in `pending`
 *   reply accepted   connecting -> connected
 *   reply refused    connecting -> failed (permanent) | waiting (busy);
 *                    a refusal about K or the AM size names both values
 *   reply accepted with another K or AM size: connecting -> failed
 *   tick()           connecting: resend | failed (retries, deadline)
 *                    waiting: -> creating|connecting at reconnect time,
 *                             failed at the deadline
 *                    connected: keepalive due -> send_keepalive;
 *                               keepalive unanswered -> draining
 *   keepalive_every(i)  the idle time before a keepalive is i from now
 *                    on (the engine's, which grows with its peers: no
 *                    state change; next_timer moves)
 *   qp_error()       connected -> draining
 *   disconnect       connected -> draining, then idle
 *   drained()        draining -> creating (pending) | waiting | idle
 *                             | failed (deadline passed)
 *   close()          any -> idle (connected: disconnect + draining first)
 *
 * Crossed requests (both agents connect at once): agents are ordered by
 * (GID bytes, UD QPN, instance id), compared lexicographically; the
 * GID is compared as bytes in wire order. When a request arrives while
 * ours is out, the LOWER agent becomes passive: it drops its own attempt
 * and answers the peer's request with the QPs it had created for its own.
 * The HIGHER agent ignores the peer's request and waits for the reply to
 * its own. Both sides compute the same order, so exactly one request is
 * answered and both end with the same K QP pairs. The passive reply
 * carries the passive agent's own attempt seq, so the active side knows
 * that request and its retransmissions are superseded and ignores them
 * after it connects. (Exception: if our request named an instance of the
 * peer other than the one now asking, ours went to a dead agent: answer.)
 *
 * Spread: agents that asked at once (an alltoall's start, a thousand
 * nodes losing one at once) would resend at once, every time, and a
 * receiver's UD queue holds 512 datagrams. So each resend wait and each
 * reconnect delay is stretched or shortened by up to retry_jitter / 2 of
 * itself, by a number drawn from both agents' identities, the attempt and
 * the resend (a hash: no randomness, no clock; the same inputs give the
 * same waits, which the tests count on). The first request of an attempt
 * is never delayed.
 *
 * Sequence numbers: m_seq numbers our attempts (never reused within this
 * agent's run); per peer instance we remember the highest request seq we
 * answered and the peer's superseded seq; requests at or below are stale.
 * A request from a different instance id means the peer agent restarted:
 * its old QPs are gone, so ours are flushed and the new request answered.
 * The replaced instance is remembered as dead (one agent per uid, job and
 * port at a time), so a late datagram of it cannot undo the switch.
 *
 * Loopback (peer_connection::loopback()): the agent's own node. K RC QPs,
 * each connected to ITSELF (its PSN is both the send and the receive
 * PSN), so processes on one node reach each other through the same code
 * path as remote ones. No handshake, so no connecting or waiting state,
 * no peer address, no job key, no deadline, no keepalive: next_timer() is
 * always empty. A loss is repaired at once (the QPs are local; nothing
 * to wait for). Its table, complete:
 *
 *   connect()        idle|failed -> creating (create_qps)
 *                    draining -> rebuild after the drain (cancels close)
 *   qps_created()    creating -> connected: connect_qps with peer_qps ==
 *                    local_qps and an empty dest (the caller's own GID),
 *                    then report_connected
 *   qps_failed()     creating -> failed (report_peer_failed)
 *   qp_error()       connected -> draining (flush_qps)
 *   drained()        draining -> creating (destroy_qps, create_qps)
 *                             | idle (destroy_qps) if close() was called
 *   close()          connected -> draining (flush_qps; no datagram), then
 *                    idle at drained(); creating|failed -> idle
 *   tick()           nothing, in every state
 *   on_message()     ignored, in every state
 *   activity()       nothing
 * A QP that fails to connect to itself is a qp_error like any other: if
 * that persists, connected -> draining -> creating repeats without end
 * (nothing here counts it); the caller must not let it spin.
 *
 * Not modelled here: which QP an op uses (the caller's hash).
 */
#ifndef RVT_AGENT_PEER_CONNECTION_H
#define RVT_AGENT_PEER_CONNECTION_H

#include "uct/ib/rvt/common/conn_wire.h"
#include "uct/ib/rvt/common/defaults.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rvt::agent {

using time_point = std::chrono::steady_clock::time_point;
using msec       = std::chrono::milliseconds;

/* Knobs of every peer connection of one agent. */
struct peer_config {
    uint32_t num_qps               = defaults::num_qps; /* K <= conn::max_qps */
    msec retry_interval            = msec{250}; /* first handshake resend */
    msec max_retry_interval        = msec{2000}; /* backoff doubles up to */
    uint32_t max_handshake_retries = 8; /* resends before the peer fails */
    msec reconnect_delay           = msec{1000}; /* after a loss or refusal */
    /* each resend wait and reconnect delay is spread over this fraction
     * of itself around it ("Spread"): 0.5 is 0.75 to 1.25 times */
    double retry_jitter            = 0.5;
    msec give_up_timeout           = msec{30000}; /* want-to-connected bound */
    msec keepalive_interval        = msec{5000}; /* idle time before one */
    msec keepalive_timeout         = msec{10000}; /* unanswered: lost */
    /* the largest active message, which both agents of a connection must
     * share (it sizes the receive buffers); the engine sets it from its
     * layout. Compared, never interpreted: loopback ignores it */
    uint32_t am_size = 0;
};

/* Empty when valid, else a sentence naming the bad value. */
std::string config_error(const peer_config &cfg);

/* This agent, as it presents itself in every datagram. */
struct local_agent {
    wire::conn::sender self;
    std::string job_key; /* must pass wire::job_key_error */
};

/* Where the peer agent is; instance_id 0 until it is known. ud_qkey is
 * what a datagram to its UD QP must name (from its address, then from
 * what its datagrams say of their sender): how it is reached, never who
 * it is. */
struct peer_address {
    std::array<uint8_t, wire::conn::gid_size> gid{};
    uint32_t ud_qpn      = 0;
    uint32_t ud_qkey     = 0;
    uint64_t instance_id = 0;

    friend bool
    operator==(const peer_address &, const peer_address &) = default;
};

/* True when agent `a` orders below agent `b` (see "Crossed requests"). */
bool agent_is_lower(const wire::conn::sender &a, const wire::conn::sender &b);

enum class peer_state : uint8_t {
    idle,
    creating,
    connecting,
    connected,
    draining,
    waiting,
    failed,
};
std::string_view to_string(peer_state s);

enum class action_kind : uint8_t {
    create_qps, /* create num_qps RC QPs in INIT, each with a random 24-bit
                   initial PSN; then qps_created() or qps_failed(), before
                   any other event for this peer (ibv_create_qp is
                   synchronous, so this is natural) */
    connect_qps, /* local QP i -> RTR/RTS towards peer_qps[i] at dest.gid;
                    our send PSN is ours, the receive PSN is the peer's.
                    Loopback: peer_qps == local_qps, dest is empty (use
                    this node's own GID) */
    destroy_qps, /* destroy the local QPs (drained or never connected) */
    flush_qps, /* local QPs -> ERROR: every posted op completes flushed and
                  is reported to its client as failed (reason); call
                  drained() after the last one */
    send_message, /* post msg on the UD QP to (dest.gid, dest.ud_qpn),
                     naming dest.ud_qkey */
    send_keepalive, /* post a control SEND (imm::control_op::keepalive) on
                       local QP 0 */
    report_connected, /* post the ops queued while not connected */
    report_peer_failed, /* fail the queued ops and tell every client that
                           talks to this peer that it failed (reason) */
};
std::string_view to_string(action_kind k);

struct action {
    action_kind kind;
    uint32_t num_qps = 0; /* create, connect, destroy, flush */
    /* connect, destroy, flush: WHICH local QPs (so a late or duplicate
     * QP set can never make the caller destroy the live one) */
    std::array<wire::conn::qp_info, wire::conn::max_qps> local_qps{};
    std::array<wire::conn::qp_info, wire::conn::max_qps> peer_qps{};
    peer_address dest{}; /* send_message, connect_qps */
    wire::conn::message msg{}; /* send_message */
    /* flush_qps, report_peer_failed; send_message of a refusal: what was
     * refused and why, naming both values where they differ */
    std::string reason;
};
using actions = std::vector<action>;

/* For the status tool. */
struct peer_counters {
    uint64_t requests_sent    = 0; /* including resends */
    uint64_t replies_sent     = 0; /* accepts, resent accepts, refusals */
    uint64_t connects         = 0; /* times connected */
    uint64_t connection_lost  = 0; /* connected -> draining, any reason */
    uint64_t keepalives_sent  = 0;
    uint64_t ignored_messages = 0;
};

class peer_connection {
public:
    /* Throws std::invalid_argument on a config that config_error refuses
     * or a bad local identity: both are the agent's startup errors. */
    peer_connection(const peer_config &cfg, local_agent self,
                    const peer_address &peer);
    /* The agent's own node (see "Loopback"): only cfg.num_qps matters,
     * but the whole config must pass config_error (else it throws
     * std::invalid_argument, like the constructor). */
    static peer_connection loopback(const peer_config &cfg);

    /* A client wants this peer (first use, or again after failure). */
    actions connect(time_point now);
    /* The answer to create_qps: exactly num_qps QPs. QP sets that arrive
     * when none is wanted (the attempt was abandoned meanwhile) are
     * handed back in a destroy_qps naming them. */
    actions
    qps_created(time_point now, std::span<const wire::conn::qp_info> qps);
    actions qps_failed(time_point now, std::string_view reason);
    /* A datagram that wire::conn::parse accepted and whose sender GID the
     * caller matched to this peer. */
    actions on_message(time_point now, const wire::conn::message &msg);
    /* Timer: call at (or after) next_timer(). */
    actions tick(time_point now);
    /* A completion with error status, or an async QP event, on one of this
     * peer's QPs while connected (flush completions while draining are
     * expected and must not be reported here). */
    actions qp_error(time_point now, std::string_view reason);
    /* A successful completion on this peer's QPs (a receive from it, or
     * an acknowledged send, keepalives included): the peer is alive. */
    void activity(time_point now);
    /* The idle time before a keepalive, from now on (the config's
     * keepalive_interval until then). */
    void keepalive_every(msec interval)
    {
        m_cfg.keepalive_interval = interval;
    }
    /* The last flushed op of flush_qps has been reported. */
    actions drained(time_point now);
    /* This agent stops using the peer (it is exiting). */
    actions close(time_point now);

    std::optional<time_point> next_timer() const;

    peer_state state() const
    {
        return m_state;
    }
    bool is_loopback() const
    {
        return m_loopback;
    }
    /* All zeros for loopback. */
    const peer_address &peer() const
    {
        return m_peer;
    }
    /* The K local and peer QPs while connected (else what the last
     * handshake used). Loopback: the same QPs twice. */
    std::span<const wire::conn::qp_info> local_qps() const
    {
        return {m_local_qps.data(), m_have_qps ? m_cfg.num_qps : 0};
    }
    std::span<const wire::conn::qp_info> peer_qps() const
    {
        return {m_peer_qps.data(), m_cfg.num_qps};
    }
    const peer_counters &counters() const
    {
        return m_counters;
    }
    /* Why the last message or event was ignored (for logs and tests). */
    const std::string &last_ignored() const
    {
        return m_last_ignored;
    }

private:
    using message = wire::conn::message;

    struct loopback_tag {};
    peer_connection(const peer_config &cfg, loopback_tag);

    actions on_request(time_point now, const message &req);
    actions on_reply(time_point now, const message &rep);
    actions on_disconnect(time_point now, const message &msg);
    std::optional<wire::conn::status> refusal(const message &req) const;
    wire::conn::terms own_terms() const;
    std::string
    refusal_reason(const message &req, wire::conn::status verdict) const;

    void start_attempt(time_point now, actions &out);
    void send_request(time_point now, actions &out);
    void answer(time_point now, const message &req, actions &out);
    void enter_connected(time_point now, actions &out);
    void lose_connection(time_point now, std::string reason, actions &out);
    void enter_waiting(time_point now, actions &out);
    void enter_failed(std::string reason, actions &out);
    void drop_qps(actions &out);
    void forget_peer_instance(uint64_t instance_id);
    void send(const message &msg, actions &out);
    action qp_action(action_kind kind) const;
    bool deadline_passed(time_point now) const;
    msec backoff(uint32_t sent) const;
    /* `wait` spread ("Spread"); `salt` tells apart the waits of one
     * attempt */
    msec spread(msec wait, uint32_t salt) const;
    actions ignore(std::string why);

    peer_config m_cfg;
    local_agent m_self;
    peer_address m_peer;
    bool m_loopback    = false;
    peer_state m_state = peer_state::idle;

    std::array<wire::conn::qp_info, wire::conn::max_qps> m_local_qps{};
    std::array<wire::conn::qp_info, wire::conn::max_qps> m_peer_qps{};
    bool m_have_qps = false;

    /* our attempts */
    uint32_t m_seq = 0; /* last attempt's seq; never reused */
    message m_request{}; /* the request out while connecting */
    uint32_t m_sent = 0; /* sends of m_request, first included */
    time_point m_next_retry{};

    /* the peer's attempts, for its current instance */
    uint64_t m_retired_instance = 0; /* the peer's previous run: dead */
    uint32_t m_answered_seq     = 0; /* highest request seq we answered */
    uint32_t m_superseded_seq   = 0; /* from its reply: its own attempts */
    std::optional<message> m_last_reply; /* our accept, resent on dups */
    std::optional<message> m_pending; /* request to answer once QPs exist */

    std::optional<time_point> m_deadline; /* give-up */
    time_point m_reconnect_at{};
    bool m_wanted      = false; /* connect() called, or was connected */
    bool m_closing     = false; /* draining to idle: local close */
    bool m_peer_closed = false; /* draining to idle: peer's disconnect */

    time_point m_last_activity{};
    std::optional<time_point> m_keepalive_sent;

    peer_counters m_counters;
    std::string m_last_ignored;
};

} // namespace rvt::agent

#endif
