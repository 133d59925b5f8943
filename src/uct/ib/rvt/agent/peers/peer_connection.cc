/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The per-peer connection state machine (peer_connection.h). Each event
 * method checks the state, changes it, and appends the actions that make
 * the world match; helpers named after transitions keep the invariants
 * listed in the header in one place each.
 */
#include "uct/ib/rvt/agent/peers/peer_connection.h"

#include "uct/ib/rvt/common/format.h"

#include <algorithm>
#include <cmath>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace rvt::agent {

namespace conn = wire::conn;

namespace {

long long ms(msec d)
{
    return static_cast<long long>(d.count());
}

peer_address address_of(const conn::sender &s)
{
    peer_address a;
    std::copy(std::begin(s.gid), std::end(s.gid), a.gid.begin());
    a.ud_qpn      = s.ud_qpn;
    a.ud_qkey     = s.ud_qkey;
    a.instance_id = s.instance_id;
    return a;
}

bool same_gid(const peer_address &peer, const conn::sender &s)
{
    return std::equal(peer.gid.begin(), peer.gid.end(), std::begin(s.gid));
}

action make_action(action_kind kind)
{
    action a{};
    a.kind = kind;
    return a;
}

} // namespace

std::string config_error(const peer_config &cfg)
{
    if (cfg.num_qps < 1 || cfg.num_qps > conn::max_qps) {
        return format("num_qps %u: expected 1 to %u", cfg.num_qps,
                      conn::max_qps);
    }
    if (cfg.retry_interval <= msec{0}) {
        return format("retry_interval %lld ms: expected more than 0",
                      ms(cfg.retry_interval));
    }
    if (cfg.max_retry_interval < cfg.retry_interval) {
        return format("max_retry_interval %lld ms: expected at least "
                      "retry_interval (%lld ms)",
                      ms(cfg.max_retry_interval), ms(cfg.retry_interval));
    }
    if (cfg.max_handshake_retries > 100) {
        return format("max_handshake_retries %u: expected at most 100",
                      cfg.max_handshake_retries);
    }
    if (cfg.reconnect_delay < msec{0}) {
        return format("reconnect_delay %lld ms: expected 0 or more",
                      ms(cfg.reconnect_delay));
    }
    if (!(cfg.retry_jitter >= 0 && cfg.retry_jitter <= 1)) {
        return format("retry_jitter %g: expected 0 to 1", cfg.retry_jitter);
    }
    if (cfg.give_up_timeout <= msec{0}) {
        return format("give_up_timeout %lld ms: expected more than 0",
                      ms(cfg.give_up_timeout));
    }
    if (cfg.keepalive_interval <= msec{0}) {
        return format("keepalive_interval %lld ms: expected more than 0",
                      ms(cfg.keepalive_interval));
    }
    if (cfg.keepalive_timeout <= msec{0}) {
        return format("keepalive_timeout %lld ms: expected more than 0",
                      ms(cfg.keepalive_timeout));
    }
    return {};
}

bool agent_is_lower(const conn::sender &a, const conn::sender &b)
{
    int c = std::memcmp(a.gid, b.gid, conn::gid_size);
    if (c != 0) {
        return c < 0;
    }
    if (a.ud_qpn != b.ud_qpn) {
        return a.ud_qpn < b.ud_qpn;
    }
    return a.instance_id < b.instance_id;
}

std::string_view to_string(peer_state s)
{
    switch (s) {
    case peer_state::idle:
        return "idle";
    case peer_state::creating:
        return "creating";
    case peer_state::connecting:
        return "connecting";
    case peer_state::connected:
        return "connected";
    case peer_state::draining:
        return "draining";
    case peer_state::waiting:
        return "waiting";
    case peer_state::failed:
        return "failed";
    }
    return "unknown state";
}

std::string_view to_string(action_kind k)
{
    switch (k) {
    case action_kind::create_qps:
        return "create_qps";
    case action_kind::connect_qps:
        return "connect_qps";
    case action_kind::destroy_qps:
        return "destroy_qps";
    case action_kind::flush_qps:
        return "flush_qps";
    case action_kind::send_message:
        return "send_message";
    case action_kind::send_keepalive:
        return "send_keepalive";
    case action_kind::report_connected:
        return "report_connected";
    case action_kind::report_peer_failed:
        return "report_peer_failed";
    }
    return "unknown action";
}

peer_connection::peer_connection(const peer_config &cfg, local_agent self,
                                 const peer_address &peer) :
    m_cfg(cfg), m_self(std::move(self)), m_peer(peer)
{
    std::string err = config_error(cfg);
    if (err.empty()) {
        err = wire::job_key_error(m_self.job_key);
    }
    if (err.empty() && m_self.self.instance_id == 0) {
        err = "local instance id 0: expected a non-zero random id";
    }
    if (err.empty() && (m_self.self.ud_qpn < conn::min_qpn ||
                        m_self.self.ud_qpn > conn::qpn_mask)) {
        err = format("local UD QPN 0x%x: expected a 24-bit QPN",
                     m_self.self.ud_qpn);
    }
    if (err.empty() && !wire::qkey_valid(m_self.self.ud_qkey)) {
        err = format("local Q_Key 0x%x: expected 1 to 0x7fffffff",
                     m_self.self.ud_qkey);
    }
    if (!err.empty()) {
        throw std::invalid_argument("peer_connection: " + err);
    }
}

peer_connection::peer_connection(const peer_config &cfg, loopback_tag) :
    m_cfg(cfg), m_loopback(true)
{
    std::string err = config_error(cfg);
    if (!err.empty()) {
        throw std::invalid_argument("peer_connection: loopback: " + err);
    }
}

peer_connection peer_connection::loopback(const peer_config &cfg)
{
    return peer_connection(cfg, loopback_tag{});
}

/* ---- events ---------------------------------------------------------- */

actions peer_connection::connect(time_point now)
{
    actions out;
    m_wanted = true;
    if (m_loopback) {
        if (m_state == peer_state::idle || m_state == peer_state::failed) {
            start_attempt(now, out);
        } else if (m_state == peer_state::draining) {
            m_closing = false; /* rebuild after the drain */
        }
        return out;
    }
    switch (m_state) {
    case peer_state::idle:
    case peer_state::failed:
        m_deadline = now + m_cfg.give_up_timeout;
        start_attempt(now, out);
        return out;
    case peer_state::draining:
        /* wanted again while closing: reconnect after the drain */
        m_closing = m_peer_closed = false;
        if (!m_deadline) {
            m_deadline = now + m_cfg.give_up_timeout;
        }
        return out;
    default:
        return out; /* already on its way */
    }
}

actions
peer_connection::qps_created(time_point now, std::span<const conn::qp_info> qps)
{
    actions out;
    auto give_back = [&] {
        action a  = make_action(action_kind::destroy_qps);
        a.num_qps = static_cast<uint32_t>(
                std::min<size_t>(qps.size(), conn::max_qps));
        std::copy_n(qps.begin(), a.num_qps, a.local_qps.begin());
        out.push_back(a);
    };
    if (m_state != peer_state::creating) {
        give_back();
        m_last_ignored = format("QPs created in state %s: destroyed",
                                to_string(m_state).data());
        return out;
    }
    bool valid = qps.size() == m_cfg.num_qps;
    for (const auto &qp : qps) {
        valid = valid && qp.qpn >= conn::min_qpn && qp.qpn <= conn::qpn_mask &&
                qp.psn <= conn::psn_mask;
    }
    if (!valid) {
        give_back();
        actions more = qps_failed(
                now, format("created %zu QPs with bad QPNs or PSNs, or "
                            "not %u",
                            qps.size(), m_cfg.num_qps));
        out.insert(out.end(), more.begin(), more.end());
        return out;
    }
    std::copy(qps.begin(), qps.end(), m_local_qps.begin());
    m_have_qps = true;
    if (m_loopback) {
        /* each QP is its own peer: its PSN is both send and receive PSN */
        m_peer_qps = m_local_qps;
        action a   = qp_action(action_kind::connect_qps);
        a.peer_qps = m_peer_qps;
        out.push_back(a);
        enter_connected(now, out);
        return out;
    }
    if (m_pending) {
        message req = *m_pending;
        answer(now, req, out);
    } else {
        send_request(now, out);
    }
    return out;
}

actions peer_connection::qps_failed(time_point now, std::string_view reason)
{
    if (m_state != peer_state::creating) {
        return ignore(format("QP creation failure in state %s",
                             to_string(m_state).data()));
    }
    actions out;
    if (m_loopback) {
        /* nobody to wait for: retrying is the next connect()'s business */
        enter_failed(format("could not create QPs: %.*s",
                            static_cast<int>(reason.size()), reason.data()),
                     out);
        return out;
    }
    if (m_pending) {
        action a = make_action(action_kind::send_message);
        a.dest   = address_of(m_pending->src);
        a.msg    = conn::make_reply(m_self.self, *m_pending, m_seq,
                                    conn::status::busy, own_terms(), {});
        out.push_back(a);
        m_pending.reset();
        ++m_counters.replies_sent;
    }
    m_last_ignored = format("could not create QPs: %.*s",
                            static_cast<int>(reason.size()), reason.data());
    if (!m_wanted) {
        /* we were only answering: the peer retries, we need nothing */
        m_state = peer_state::idle;
        m_deadline.reset();
        return out;
    }
    enter_waiting(now, out);
    return out;
}

actions peer_connection::on_message(time_point now, const message &msg)
{
    if (m_loopback) {
        return ignore(format("message type %u to the loopback peer, which "
                             "has no handshake",
                             msg.hdr.type));
    }
    if (!same_gid(m_peer, msg.src)) {
        return ignore("message from another GID than this peer's");
    }
    if (m_retired_instance != 0 && msg.src.instance_id == m_retired_instance) {
        return ignore(format("message from instance 0x%" PRIx64
                             ", which the peer's restart replaced",
                             msg.src.instance_id));
    }
    switch (static_cast<conn::msg_type>(msg.hdr.type)) {
    case conn::msg_type::request:
        return on_request(now, msg);
    case conn::msg_type::reply:
        return on_reply(now, msg);
    case conn::msg_type::disconnect:
        return on_disconnect(now, msg);
    }
    return ignore(format("message type %u", msg.hdr.type));
}

actions peer_connection::tick(time_point now)
{
    actions out;
    if (m_loopback) {
        return out; /* no handshake, deadline or keepalive */
    }
    switch (m_state) {
    case peer_state::creating:
        if (deadline_passed(now)) {
            enter_failed(format("no QPs within the give-up timeout of "
                                "%lld ms",
                                ms(m_cfg.give_up_timeout)),
                         out);
        }
        return out;
    case peer_state::connecting:
        if (deadline_passed(now)) {
            enter_failed(format("not connected within the give-up timeout "
                                "of %lld ms",
                                ms(m_cfg.give_up_timeout)),
                         out);
        } else if (now >= m_next_retry) {
            if (m_sent > m_cfg.max_handshake_retries) {
                enter_failed(format("no reply to %u connection requests",
                                    m_sent),
                             out);
            } else {
                send(m_request, out);
                ++m_counters.requests_sent;
                ++m_sent;
                m_next_retry = now + backoff(m_sent);
            }
        }
        return out;
    case peer_state::waiting:
        if (deadline_passed(now)) {
            enter_failed(format("not connected within the give-up timeout "
                                "of %lld ms",
                                ms(m_cfg.give_up_timeout)),
                         out);
        } else if (now >= m_reconnect_at) {
            start_attempt(now, out);
        }
        return out;
    case peer_state::connected:
        if (m_keepalive_sent) {
            if (now >= *m_keepalive_sent + m_cfg.keepalive_timeout) {
                lose_connection(now,
                                format("no answer to a keepalive for %lld ms",
                                       ms(m_cfg.keepalive_timeout)),
                                out);
            }
        } else if (now >= m_last_activity + m_cfg.keepalive_interval) {
            out.push_back(make_action(action_kind::send_keepalive));
            m_keepalive_sent = now;
            ++m_counters.keepalives_sent;
        }
        return out;
    default:
        return out;
    }
}

actions peer_connection::qp_error(time_point now, std::string_view reason)
{
    if (m_state != peer_state::connected) {
        return ignore(
                format("QP error in state %s", to_string(m_state).data()));
    }
    actions out;
    lose_connection(now,
                    format("QP error: %.*s", static_cast<int>(reason.size()),
                           reason.data()),
                    out);
    return out;
}

void peer_connection::activity(time_point now)
{
    if (m_state == peer_state::connected && !m_loopback) {
        m_last_activity = std::max(m_last_activity, now);
        m_keepalive_sent.reset();
    }
}

actions peer_connection::drained(time_point now)
{
    if (m_state != peer_state::draining) {
        return ignore(format("drained in state %s", to_string(m_state).data()));
    }
    actions out;
    drop_qps(out);
    if (m_closing) {
        m_pending.reset();
    }
    if (m_pending) {
        /* the peer is asking already: answer as soon as QPs exist */
        m_state   = peer_state::creating;
        action a  = make_action(action_kind::create_qps);
        a.num_qps = m_cfg.num_qps;
        out.push_back(a);
    } else if (m_closing || m_peer_closed) {
        m_wanted  = false;
        m_state   = peer_state::idle;
        m_closing = m_peer_closed = false;
        m_deadline.reset();
    } else if (m_loopback) {
        start_attempt(now, out); /* local QPs: rebuild at once */
    } else {
        enter_waiting(now, out);
    }
    return out;
}

actions peer_connection::close(time_point now)
{
    actions out;
    switch (m_state) {
    case peer_state::idle:
        return out;
    case peer_state::connected: {
        if (!m_loopback) {
            message bye = conn::make_disconnect(m_self.self, m_self.job_key,
                                                m_peer.instance_id);
            send(bye, out);
        }
        m_closing = true;
        lose_connection(now, "this agent is closing the connection", out);
        return out;
    }
    case peer_state::draining:
        m_closing = true;
        m_pending.reset();
        return out;
    case peer_state::creating:
        break; /* the QPs are handed back when they arrive */
    case peer_state::connecting:
    case peer_state::waiting:
        drop_qps(out);
        break;
    case peer_state::failed:
        break;
    }
    m_pending.reset();
    m_deadline.reset();
    m_wanted = false;
    m_state  = peer_state::idle;
    return out;
}

std::optional<time_point> peer_connection::next_timer() const
{
    if (m_loopback) {
        return std::nullopt;
    }
    switch (m_state) {
    case peer_state::creating:
        return m_deadline;
    case peer_state::connecting:
        return m_deadline ? std::min(m_next_retry, *m_deadline) : m_next_retry;
    case peer_state::waiting:
        return m_deadline ? std::min(m_reconnect_at, *m_deadline) :
                            m_reconnect_at;
    case peer_state::connected:
        return m_keepalive_sent ? *m_keepalive_sent + m_cfg.keepalive_timeout :
                                  m_last_activity + m_cfg.keepalive_interval;
    default:
        return std::nullopt;
    }
}

/* ---- messages -------------------------------------------------------- */

std::string
peer_connection::refusal_reason(const message &req, conn::status verdict) const
{
    switch (verdict) {
    case conn::status::num_qps_mismatch:
        return format("refused a connection request: it uses %u QPs per "
                      "peer (--num-qps), this agent %u",
                      req.num_qps, m_cfg.num_qps);
    case conn::status::am_size_mismatch:
        return format("refused a connection request: its largest active "
                      "message is %u bytes (--am-size), this agent's %u",
                      req.am_size, m_cfg.am_size);
    default:
        return format("refused a connection request: %s",
                      conn::to_string(verdict).data());
    }
}

conn::terms peer_connection::own_terms() const
{
    return {static_cast<uint16_t>(m_cfg.num_qps), m_cfg.am_size};
}

std::optional<conn::status> peer_connection::refusal(const message &req) const
{
    if (m_self.job_key != req.job_key) {
        return conn::status::wrong_job_key;
    }
    if (req.src.uid != m_self.self.uid) {
        return conn::status::wrong_uid;
    }
    if (req.num_qps != m_cfg.num_qps) {
        return conn::status::num_qps_mismatch;
    }
    if (req.am_size != m_cfg.am_size) {
        return conn::status::am_size_mismatch;
    }
    if (req.dst_instance_id != 0 &&
        req.dst_instance_id != m_self.self.instance_id) {
        return conn::status::stale_instance;
    }
    return std::nullopt;
}

actions peer_connection::on_request(time_point now, const message &req)
{
    actions out;
    if (auto verdict = refusal(req)) {
        /* answered to the sender, whoever it is; our state is untouched */
        action a = make_action(action_kind::send_message);
        a.dest   = address_of(req.src);
        a.msg = conn::make_reply(m_self.self, req, m_seq, *verdict, own_terms(),
                                 {});
        a.reason = refusal_reason(req, *verdict);
        out.push_back(a);
        ++m_counters.replies_sent;
        return out;
    }

    const uint64_t old_instance = m_peer.instance_id;
    const bool restarted        = old_instance != 0 &&
                           req.src.instance_id != old_instance;
    /* our request went to an agent that is not the one now asking */
    const bool ours_misaddressed = m_state == peer_state::connecting &&
                                   m_request.dst_instance_id != 0 &&
                                   m_request.dst_instance_id !=
                                           req.src.instance_id;
    if (restarted) {
        forget_peer_instance(req.src.instance_id);
    } else {
        if (m_state == peer_state::connected && m_last_reply &&
            req.hdr.seq == m_answered_seq) {
            send(*m_last_reply, out); /* our reply was lost */
            ++m_counters.replies_sent;
            return out;
        }
        uint32_t floor = std::max(m_answered_seq, m_superseded_seq);
        if (req.hdr.seq <= floor) {
            return ignore(format("stale request seq %u: requests up to %u "
                                 "are answered or superseded",
                                 req.hdr.seq, floor));
        }
    }

    /* the Q_Key its request names is where it is reached now (an address
     * from a client may have been stale), even while we ignore this one
     * and our own requests, resent, are what connects us */
    m_peer.ud_qkey = req.src.ud_qkey;

    switch (m_state) {
    case peer_state::idle:
    case peer_state::failed:
    case peer_state::waiting:
        if (!m_deadline) {
            m_deadline = now + m_cfg.give_up_timeout;
        }
        if (m_have_qps) {
            answer(now, req, out);
        } else {
            m_pending = req;
            m_state   = peer_state::creating;
            action a  = make_action(action_kind::create_qps);
            a.num_qps = m_cfg.num_qps;
            out.push_back(a);
        }
        return out;
    case peer_state::creating:
        m_pending = req; /* answered when the QPs exist */
        return out;
    case peer_state::connecting:
        if (ours_misaddressed || agent_is_lower(m_self.self, req.src)) {
            answer(now, req, out); /* we are the passive side */
            return out;
        }
        return ignore(format("crossed request seq %u: this agent orders "
                             "above the peer, which will answer ours",
                             req.hdr.seq));
    case peer_state::connected:
        m_pending = req;
        lose_connection(now,
                        restarted ? format("peer agent restarted (instance "
                                           "0x%" PRIx64 " -> 0x%" PRIx64 ")",
                                           old_instance, req.src.instance_id) :
                                    format("peer started a new connection "
                                           "(request seq %u)",
                                           req.hdr.seq),
                        out);
        return out;
    case peer_state::draining:
        if (m_closing) {
            return ignore("request while this agent closes the connection");
        }
        m_pending = req;
        return out;
    }
    return out;
}

actions peer_connection::on_reply(time_point now, const message &rep)
{
    if (m_state != peer_state::connecting) {
        return ignore(format("reply to seq %u in state %s", rep.ack_seq,
                             to_string(m_state).data()));
    }
    if (rep.ack_seq != m_seq) {
        return ignore(format("reply to request seq %u: ours is %u", rep.ack_seq,
                             m_seq));
    }
    if (rep.dst_instance_id != m_self.self.instance_id) {
        return ignore(format("reply addressed to instance 0x%" PRIx64
                             ": this agent is 0x%" PRIx64,
                             rep.dst_instance_id, m_self.self.instance_id));
    }
    if (m_request.dst_instance_id != 0 &&
        rep.src.instance_id != m_request.dst_instance_id) {
        return ignore(format("reply from instance 0x%" PRIx64
                             ": our request named 0x%" PRIx64,
                             rep.src.instance_id, m_request.dst_instance_id));
    }

    actions out;
    m_peer.ud_qkey = rep.src.ud_qkey; /* where it is reached now */
    auto verdict   = static_cast<conn::status>(rep.status);
    if (verdict == conn::status::busy) {
        enter_waiting(now, out);
        return out;
    }
    if (verdict == conn::status::num_qps_mismatch) {
        enter_failed(format("peer refused the connection: it uses %u QPs "
                            "per peer (--num-qps), this agent %u",
                            rep.num_qps, m_cfg.num_qps),
                     out);
        return out;
    }
    if (verdict == conn::status::am_size_mismatch) {
        enter_failed(format("peer refused the connection: its largest "
                            "active message is %u bytes (--am-size), this "
                            "agent's %u",
                            rep.am_size, m_cfg.am_size),
                     out);
        return out;
    }
    if (verdict != conn::status::accepted) {
        enter_failed(format("peer refused the connection: %s",
                            conn::to_string(verdict).data()),
                     out);
        return out;
    }
    if (rep.num_qps != m_cfg.num_qps || rep.am_size != m_cfg.am_size) {
        enter_failed(format("peer accepted with %u QPs and %u-byte active "
                            "messages: this agent uses %u and %u",
                            rep.num_qps, rep.am_size, m_cfg.num_qps,
                            m_cfg.am_size),
                     out);
        return out;
    }
    if (rep.src.instance_id != m_peer.instance_id) {
        forget_peer_instance(rep.src.instance_id);
    }
    m_peer.ud_qpn    = rep.src.ud_qpn;
    m_superseded_seq = std::max(m_superseded_seq, rep.hdr.seq);
    m_last_reply.reset(); /* we were active: nothing to resend */
    std::copy_n(rep.qps, m_cfg.num_qps, m_peer_qps.begin());

    action a   = qp_action(action_kind::connect_qps);
    a.peer_qps = m_peer_qps;
    a.dest     = m_peer;
    out.push_back(a);
    enter_connected(now, out);
    return out;
}

actions peer_connection::on_disconnect(time_point now, const message &msg)
{
    if (msg.src.instance_id != m_peer.instance_id ||
        msg.dst_instance_id != m_self.self.instance_id) {
        return ignore(format("disconnect from instance 0x%" PRIx64
                             " to 0x%" PRIx64 ": not this connection",
                             msg.src.instance_id, msg.dst_instance_id));
    }
    if (m_state != peer_state::connected) {
        return ignore(
                format("disconnect in state %s", to_string(m_state).data()));
    }
    actions out;
    m_peer_closed = true;
    lose_connection(now, "peer agent closed the connection", out);
    return out;
}

/* ---- transitions ----------------------------------------------------- */

void peer_connection::start_attempt(time_point now, actions &out)
{
    m_closing = m_peer_closed = false;
    if (m_have_qps) {
        send_request(now, out);
        return;
    }
    m_state   = peer_state::creating;
    action a  = make_action(action_kind::create_qps);
    a.num_qps = m_cfg.num_qps;
    out.push_back(a);
}

void peer_connection::send_request(time_point now, actions &out)
{
    ++m_seq;
    m_request = conn::make_request(m_self.self, m_self.job_key,
                                   m_peer.instance_id, m_seq, local_qps(),
                                   m_cfg.am_size);
    send(m_request, out);
    ++m_counters.requests_sent;
    m_sent       = 1;
    m_next_retry = now + backoff(m_sent);
    m_state      = peer_state::connecting;
}

/* Precondition: local QPs exist and `req` passed refusal() and the seq
 * checks. The QPs go to RTR/RTS before the reply leaves, so the active
 * side's first packets never reach a QP still in INIT. */
void peer_connection::answer(time_point now, const message &req, actions &out)
{
    if (m_peer.instance_id != req.src.instance_id) {
        forget_peer_instance(req.src.instance_id);
    }
    m_peer.ud_qpn  = req.src.ud_qpn;
    m_peer.ud_qkey = req.src.ud_qkey;
    std::copy_n(req.qps, m_cfg.num_qps, m_peer_qps.begin());

    action a   = qp_action(action_kind::connect_qps);
    a.peer_qps = m_peer_qps;
    a.dest     = m_peer;
    out.push_back(a);

    message rep = conn::make_reply(m_self.self, req, m_seq,
                                   conn::status::accepted, own_terms(),
                                   local_qps());
    send(rep, out);
    ++m_counters.replies_sent;
    m_last_reply   = rep;
    m_answered_seq = req.hdr.seq;
    m_pending.reset();
    enter_connected(now, out);
}

void peer_connection::enter_connected(time_point now, actions &out)
{
    m_state  = peer_state::connected;
    m_wanted = true; /* clients may use it now: keep it up */
    m_deadline.reset();
    m_last_activity = now;
    m_keepalive_sent.reset();
    ++m_counters.connects;
    out.push_back(make_action(action_kind::report_connected));
}

void peer_connection::lose_connection(time_point now, std::string reason,
                                      actions &out)
{
    action a = qp_action(action_kind::flush_qps);
    a.reason = std::move(reason);
    out.push_back(a);
    ++m_counters.connection_lost;
    m_state = peer_state::draining;
    m_last_reply.reset(); /* it names QPs that are going away */
    if (!m_deadline && !m_loopback) {
        m_deadline = now + m_cfg.give_up_timeout;
    }
}

void peer_connection::enter_waiting(time_point now, actions &out)
{
    if (deadline_passed(now)) {
        enter_failed(format("not connected within the give-up timeout of "
                            "%lld ms",
                            ms(m_cfg.give_up_timeout)),
                     out);
        return;
    }
    m_state        = peer_state::waiting;
    m_reconnect_at = now + spread(m_cfg.reconnect_delay, 0xde1a);
}

void peer_connection::enter_failed(std::string reason, actions &out)
{
    drop_qps(out);
    m_pending.reset();
    m_deadline.reset();
    m_wanted = false;
    m_state  = peer_state::failed;
    action a = make_action(action_kind::report_peer_failed);
    a.reason = std::move(reason);
    out.push_back(a);
}

void peer_connection::drop_qps(actions &out)
{
    if (m_have_qps) {
        out.push_back(qp_action(action_kind::destroy_qps));
        m_have_qps = false;
    }
}

void peer_connection::forget_peer_instance(uint64_t instance_id)
{
    if (m_peer.instance_id != 0) {
        m_retired_instance = m_peer.instance_id;
    }
    m_peer.instance_id = instance_id;
    m_answered_seq     = 0;
    m_superseded_seq   = 0;
    m_last_reply.reset();
}

void peer_connection::send(const message &msg, actions &out)
{
    action a = make_action(action_kind::send_message);
    a.dest   = m_peer;
    a.msg    = msg;
    out.push_back(a);
}

action peer_connection::qp_action(action_kind kind) const
{
    action a    = make_action(kind);
    a.num_qps   = m_cfg.num_qps;
    a.local_qps = m_local_qps;
    return a;
}

bool peer_connection::deadline_passed(time_point now) const
{
    return m_deadline && now >= *m_deadline;
}

msec peer_connection::backoff(uint32_t sent) const
{
    msec wait = m_cfg.retry_interval;
    for (uint32_t i = 1; i < sent && wait < m_cfg.max_retry_interval; ++i) {
        wait *= 2;
    }
    return spread(std::min(wait, m_cfg.max_retry_interval), sent);
}

msec peer_connection::spread(msec wait, uint32_t salt) const
{
    if (m_cfg.retry_jitter == 0 || wait <= msec{0}) {
        return wait;
    }
    /* FNV-1a over who and which wait, then splitmix64's finalizer */
    uint64_t h      = 0xcbf29ce484222325ull;
    const auto feed = [&h](uint64_t v) {
        for (int i = 0; i < 8; ++i, v >>= 8) {
            h = (h ^ (v & 0xff)) * 0x100000001b3ull;
        }
    };
    feed(m_self.self.instance_id);
    feed(m_self.self.ud_qpn);
    for (uint8_t b : m_peer.gid) {
        feed(b);
    }
    feed(m_peer.ud_qpn);
    feed(m_seq);
    feed(salt);
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    const double u = static_cast<double>(h >> 11) * 0x1.0p-53; /* [0, 1) */
    const double f = 1.0 - m_cfg.retry_jitter / 2 + m_cfg.retry_jitter * u;
    return std::max(msec{1},
                    msec{std::llround(static_cast<double>(wait.count()) * f)});
}

actions peer_connection::ignore(std::string why)
{
    ++m_counters.ignored_messages;
    m_last_ignored = std::move(why);
    return {};
}

} // namespace rvt::agent
