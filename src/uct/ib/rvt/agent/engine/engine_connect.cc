/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peers: creating them, running their connection state machines'
 * actions against verbs, the handshake datagrams, and loopback.
 */
#include "uct/ib/rvt/agent/engine/engine.h"

#include "uct/ib/rvt/common/conn_wire.h"
#include "uct/ib/rvt/common/imm.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace rvt::agent {

namespace {

uint32_t random_psn()
{
    uint32_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != sizeof(v)) {
        v = static_cast<uint32_t>(getpid()) * 2654435761u;
    }
    return v & wire::conn::psn_mask;
}

gid_bytes gid_key(const uint8_t (&gid)[16])
{
    gid_bytes k;
    std::memcpy(k.data(), gid, 16);
    return k;
}

/* A datagram's source, for the log. */
std::string sender_text(const datagram_source &from)
{
    return gid_text(from.gid) + " UD QP " + std::to_string(from.qpn);
}

} // namespace

/* How this agent names itself in its datagrams. */
wire::conn::sender engine::self_sender() const
{
    wire::conn::sender self{};
    const gid_bytes gid = m_nic.gid();
    std::memcpy(self.gid, gid.data(), 16);
    self.instance_id = m_agent_id;
    self.ud_qpn      = m_nic.ud_qpn();
    self.uid         = getuid();
    self.ud_qkey     = m_nic.ud_qkey();
    return self;
}

engine::peer &engine::add_peer(peer_table::placement where,
                               const wire::agent_address &addr, bool loopback)
{
    std::unique_ptr<peer_connection> conn;
    if (loopback) {
        conn = std::make_unique<peer_connection>(
                peer_connection::loopback(m_cfg.peers));
    } else {
        local_agent self{};
        self.self    = self_sender();
        self.job_key = m_job_key;
        peer_address at{};
        std::memcpy(at.gid.data(), addr.gid, 16);
        at.ud_qpn      = addr.ud_qpn;
        at.ud_qkey     = addr.ud_qkey;
        at.instance_id = addr.agent_id;
        conn = std::make_unique<peer_connection>(m_cfg.peers, self, at);
    }
    if (where.kind == peer_table::place_kind::recycle) {
        /* nothing of the old peer is left but its index and what we told
         * it of our departed clients */
        m_departures.peer_connected(where.index);
    }
    peer &p = m_peers.add(where, addr, loopback, std::move(conn));
    m_lanes.add_peer(p.index);
    if (loopback) { /* always wanted: its clients are this node's */
        const time_point now = std::chrono::steady_clock::now();
        run(p, p.conn->connect(now), now);
    }
    return p;
}

/* A QP of the node's own peer, connected to itself at once: processes of
 * one node reach each other through the same code path as remote ones,
 * and a QP that cannot connect to itself fails the attempt (qps_failed),
 * not the connection, so the rebuild cannot loop. */
result<uint32_t> engine::create_loopback_qp(peer &p, uint32_t psn)
{
    auto qp = m_nic.create_qp(m_peers.sq_depth_for(p));
    if (!qp) {
        return failure{qp.error()};
    }
    const uint32_t qpn = qp.value();
    m_peers.add_qp(p, qpn);
    auto c = m_nic.connect_qp(qpn, m_nic.gid(), qpn, psn, psn);
    if (!c) {
        return failure{c.error()};
    }
    return qpn;
}

void engine::send_sealed(wire::conn::message msg, const gid_bytes &to,
                         uint32_t ud_qpn, uint32_t ud_qkey)
{
    if (auto s = m_auth->seal(msg, to); !s) {
        if (worth_logging(++m_totals.unsealed)) {
            m_log("handshake datagram to " + gid_text(to) +
                  " not sent: " + s.error() + " (" +
                  std::to_string(m_totals.unsealed) + " so far)");
        }
        return;
    }
    if (auto r = m_nic.send_datagram(msg, to, ud_qpn, ud_qkey); !r) {
        m_log("handshake datagram to " + gid_text(to) + ": " + r.error());
    }
}

void engine::run(peer &p, actions acts, time_point now)
{
    for (const action &a : acts) {
        run_one(p, a, now);
    }
    /* what it did may have moved its timer (peer_timers.h) */
    note_timer(p);
}

void engine::note_timer(const peer &p)
{
    m_peer_timers.note(p.index, p.conn->next_timer());
}

void engine::heard_from(peer &p, time_point now)
{
    p.conn->activity(now);
    m_peers.confirm(p);
    note_timer(p);
}

void engine::run_one(peer &p, const action &a, time_point now)
{
    switch (a.kind) {
    case action_kind::create_qps:
        create_qps(p, a.num_qps, now);
        return;
    case action_kind::connect_qps:
        connect_qps(p, a, now);
        return;
    case action_kind::destroy_qps:
        for (uint32_t i = 0; i < a.num_qps; ++i) {
            const uint32_t qpn = a.local_qps[i].qpn;
            if (m_peers.remove_qp(p, qpn)) { /* never another peer's */
                m_nic.destroy_qp(qpn);
            }
        }
        return;
    case action_kind::flush_qps:
        flush_qps(p, a, now);
        return;
    case action_kind::send_message:
        if (!a.reason.empty()) { /* a refusal, and why */
            m_log("peer " + std::to_string(p.index) + ": " + a.reason);
        }
        send_sealed(a.msg, a.dest.gid, a.dest.ud_qpn, a.dest.ud_qkey);
        return;
    case action_kind::send_keepalive:
        post_keepalive(p);
        return;
    case action_kind::report_connected:
        peer_connected(p);
        return;
    case action_kind::report_peer_failed:
        peer_failed(p, a.reason);
        return;
    }
}

/* peer_connection's create_qps: K QPs (loopback ones connected to
 * themselves at once), all as deep as the peer table says, or the attempt
 * fails and what was made goes. */
void engine::create_qps(peer &p, uint32_t num_qps, time_point now)
{
    std::vector<wire::conn::qp_info> infos;
    const uint32_t depth = m_peers.sq_depth_for(p);
    for (uint32_t i = 0; i < num_qps; ++i) {
        const uint32_t psn = random_psn();
        auto qp            = p.loopback ? create_loopback_qp(p, psn) :
                                          m_nic.create_qp(depth);
        if (!qp) {
            p.last_error = qp.error();
            m_log("peer " + std::to_string(p.index) + ": " + qp.error());
            destroy_all_qps(p);
            run(p, p.conn->qps_failed(now, qp.error()), now);
            return;
        }
        if (!p.loopback) {
            m_peers.add_qp(p, qp.value());
        }
        infos.push_back({qp.value(), psn});
    }
    run(p, p.conn->qps_created(now, infos), now);
}

/* peer_connection's connect_qps: each local QP to its remote one, in lane
 * order. */
void engine::connect_qps(peer &p, const action &a, time_point now)
{
    m_lanes.set_sq_depth(p.index, p.sq_depth());
    if (p.loopback) { /* connected to themselves as they were made */
        m_peers.set_lanes(p, std::span(p.qps()).first(a.num_qps));
        return;
    }
    std::vector<uint32_t> lanes(a.num_qps);
    for (uint32_t i = 0; i < a.num_qps; ++i) {
        lanes[i] = a.local_qps[i].qpn;
    }
    if (!m_peers.set_lanes(p, lanes)) {
        std::string qpns;
        for (uint32_t q : lanes) {
            qpns += " " + std::to_string(q);
        }
        qp_failed(p, "connect: a local QP of" + qpns + " is not this peer's",
                  now);
        return;
    }
    gid_bytes gid;
    std::memcpy(gid.data(), p.addr.gid, gid.size());
    for (uint32_t i = 0; i < a.num_qps; ++i) {
        auto r = m_nic.connect_qp(lanes[i], gid, a.peer_qps[i].qpn,
                                  a.peer_qps[i].psn, a.local_qps[i].psn);
        if (!r) {
            qp_failed(p, r.error(), now);
            return;
        }
    }
}

/* peer_connection's flush_qps: every posted op completes as flushed. */
void engine::flush_qps(peer &p, const action &a, time_point now)
{
    p.last_error = a.reason;
    m_log("peer " + std::to_string(p.index) + ": connection lost (" + a.reason +
          "): flushing");
    /* the watchdog judges a draining lane from the flush on: what it saw
     * before (a lane quiet during an outage) says nothing of the flush,
     * whose completions may be on their way */
    m_lanes.flush_started(p.index);
    /* a departure it was told of may be lost with the connection, and its
     * senders fail with it: no retirement waits for its answer */
    answer_retirements(m_barrier.peer_lost(p.index));
    for (uint32_t i = 0; i < a.num_qps; ++i) {
        const uint32_t qpn = a.local_qps[i].qpn;
        if (p.owns(qpn)) {
            (void)m_nic.flush_qp(qpn);
        }
    }
    check_drained(p, now);
}

/* peer_connection's report_connected: the lanes post again. */
void engine::peer_connected(peer &p)
{
    m_log("peer " + std::to_string(p.index) + ": connected with " +
          std::to_string(p.lanes().size()) + " RC QPs");
    if (!p.loopback) {
        /* what we told it of our departed clients may have been lost with
         * the last connection: told again when it comes up */
        m_departures.peer_connected(p.index);
        /* back-pressure starts afresh: the peer tells us its paused
         * clients again, and we tell it ours */
        m_lanes.forget_pauses(p.index);
        for (uint32_t i : m_clients.attached()) {
            if (m_clients[i].paused) {
                m_lanes.queue_control(
                        p.index, imm::encode_control(imm::control_op::pause, i)
                                         .value_or(0));
            }
        }
    }
    m_lanes.mark_all(p.index);
    post_ready();
}

/* peer_connection's report_peer_failed: what waits fails, and the
 * peer's users hear of it. */
void engine::peer_failed(peer &p, const std::string &reason)
{
    p.last_error = reason;
    m_log("peer " + std::to_string(p.index) + ": failed: " + reason);
    answer_retirements(m_barrier.peer_lost(p.index));
    fail_backlog(p, completion_status::peer_failed);
    inbound_message m{};
    m.kind = static_cast<uint8_t>(inbound_kind::peer_failed);
    m.peer = p.index;
    for (uint32_t i : m_clients.attached()) {
        if (p.users().test(i)) {
            m_clients[i].channel->deliver(m, {});
        }
    }
}

void engine::qp_failed(peer &p, const std::string &reason, time_point now)
{
    ++p.traffic.qp_errors;
    ++m_totals.qp_errors;
    if (p.is(peer_state::connected)) {
        run(p, p.conn->qp_error(now, reason), now);
    } else if (!p.is(peer_state::draining)) {
        p.last_error = reason;
    }
}

void engine::check_drained(peer &p, time_point now)
{
    if (p.is(peer_state::draining) && m_lanes.posted(p.index) == 0) {
        run(p, p.conn->drained(now), now);
    }
}

/* After a failed attempt: whatever QPs it made go (the state machine has
 * not seen them). */
void engine::destroy_all_qps(peer &p)
{
    for (uint32_t qpn : m_peers.remove_all_qps(p)) {
        m_nic.destroy_qp(qpn);
    }
}

void engine::fail_backlog(peer &p, completion_status why)
{
    m_lanes.fail_backlog(p.index, why);
    run_ends();
}

/* A request from an address with no peer here ("Hostile handshakes",
 * engine.h): a new peer, a recycled record, or a refusal. */
engine::peer *engine::admit(const wire::conn::message &request,
                            const wire::agent_address &from)
{
    const std::string who = gid_text(from.gid) + " UD QPN " +
                            std::to_string(from.ud_qpn);
    const peer_table::placement where = m_peers.place_request(from);
    switch (where.kind) {
    case peer_table::place_kind::known:
        return &m_peers.at(where.index);
    case peer_table::place_kind::fresh:
    case peer_table::place_kind::recycle:
        return &add_peer(where, from, false);
    case peer_table::place_kind::busy:
        if (worth_logging(++m_totals.half_open_refused)) {
            m_log("handshake request from " + who +
                  " answered busy: " + std::to_string(m_cfg.max_half_open) +
                  " peers are half-open (" +
                  std::to_string(m_totals.half_open_refused) + " so far)");
        }
        send_sealed(wire::conn::make_reply(self_sender(), request, 0,
                                           wire::conn::status::busy, {}, {}),
                    gid_key(from.gid), from.ud_qpn, from.ud_qkey);
        return nullptr;
    case peer_table::place_kind::full:
        if (worth_logging(++m_totals.table_full)) {
            m_log("handshake request from " + who +
                  " dropped: this agent has " + std::to_string(m_peers.size()) +
                  " peers, its maximum (rvtd --max-peers; " +
                  std::to_string(m_totals.table_full) + " so far)");
        }
        return nullptr;
    }
    return nullptr;
}

void engine::sender_failed(const datagram_source &from, time_point now)
{
    if (m_senders.failed(from, now)) {
        const sender_gate_config &c = m_senders.config();
        m_log("handshake: sender " + sender_text(from) + " failed " +
              std::to_string(c.max_failures) + " checks within " +
              std::to_string(c.window.count()) +
              " ms: its datagrams go unchecked for " +
              std::to_string(c.hold.count()) + " ms (" +
              std::to_string(m_senders.holds()) + " holds so far)");
    }
}

bool engine::gate_admits(const datagram_source &from, bool known,
                         time_point now)
{
    const sender_gate_config &c = m_senders.config();
    switch (m_senders.admit(from, known, now)) {
    case sender_gate::verdict::check:
        return true;
    case sender_gate::verdict::held: /* counted; its hold was logged */
        return false;
    case sender_gate::verdict::throttled:
        if (worth_logging(m_senders.throttled())) {
            m_log("handshake datagram from " + sender_text(from) +
                  " dropped unchecked: its sender used its " +
                  std::to_string(c.burst) +
                  " credential checks (one more each " +
                  std::to_string(c.refill.count()) + " ms; " +
                  std::to_string(m_senders.throttled()) + " so far)");
        }
        return false;
    case sender_gate::verdict::crowded:
        if (worth_logging(m_senders.crowded())) {
            m_log("handshake datagram from " + sender_text(from) +
                  " dropped unchecked: it is no peer's, and every one of the " +
                  std::to_string(m_senders.remembered()) +
                  " senders this agent remembers is held (" +
                  std::to_string(m_senders.crowded()) + " so far)");
        }
        return false;
    }
    return false;
}

/* The cheap checks, then the credential ("Bounded intake", engine.h). */
void engine::on_datagram(std::span<const std::byte> bytes,
                         const datagram_source &from, time_point now)
{
    auto msg = wire::conn::parse(bytes);
    if (!msg) {
        if (worth_logging(++m_totals.malformed)) {
            m_log("handshake datagram refused: " + msg.error() + " (from " +
                  gid_text(from.gid) + ", " +
                  std::to_string(m_totals.malformed) + " so far)");
        }
        return;
    }
    const auto &src = msg.value().src;
    if (std::memcmp(src.gid, from.gid.data(), from.gid.size()) != 0) {
        /* a node speaks for itself only */
        if (worth_logging(++m_totals.forged_datagrams)) {
            m_log("handshake datagram from " + gid_text(from.gid) +
                  " names its sender " + gid_text(src.gid) + ": dropped (" +
                  std::to_string(m_totals.forged_datagrams) + " so far)");
        }
        return;
    }
    if (src.ud_qpn == m_nic.ud_qpn() && gid_key(src.gid) == m_nic.gid()) {
        /* this agent never sends to itself: its own peer is loopback */
        if (worth_logging(++m_totals.own_address)) {
            m_log("handshake datagram from " + sender_text(from) +
                  " names this agent as its sender: dropped (" +
                  std::to_string(m_totals.own_address) + " so far)");
        }
        return;
    }
    if (src.ud_qpn != from.qpn) {
        /* ... and a UD QP for itself only: not for the agent beside it */
        if (worth_logging(++m_totals.forged_datagrams)) {
            m_log("handshake datagram from " + sender_text(from) +
                  " names its sender's UD QPN " + std::to_string(src.ud_qpn) +
                  ": dropped (" + std::to_string(m_totals.forged_datagrams) +
                  " so far)");
        }
        return;
    }
    /* how to answer it, should it become a peer: its Q_Key is what it
     * says (its device took the datagram whatever its own is), and no
     * part of which peer it is */
    wire::agent_address sender{};
    std::memcpy(sender.gid, src.gid, 16);
    sender.ud_qpn      = src.ud_qpn;
    sender.ud_qkey     = src.ud_qkey;
    sender.agent_id    = src.instance_id;
    peer *p            = m_peers.find_sender(sender);
    const bool request = msg.value().hdr.type ==
                         static_cast<uint16_t>(wire::conn::msg_type::request);
    if (p == nullptr && !request) {
        if (worth_logging(++m_totals.unknown_datagrams)) {
            m_log("handshake datagram (type " +
                  std::to_string(msg.value().hdr.type) + ") from " +
                  sender_text(from) + ", which is no peer: dropped (" +
                  std::to_string(m_totals.unknown_datagrams) + " so far)");
        }
        return;
    }
    /* every sender, our peers too, within its bucket and while it is not
     * held; a stranger on a peer's node is a sender of its own (its own
     * UD QP), so it cannot cut that peer off */
    if (!gate_admits(from, p != nullptr, now)) {
        return;
    }
    const bool our_job = std::strncmp(msg.value().job_key, m_job_key.c_str(),
                                      sizeof(msg.value().job_key)) == 0;
    if (!our_job) {
        sender_failed(from, now); /* before the credential costs anything */
    }
    const auto started = std::chrono::steady_clock::now();
    auto ok            = check_datagram(*m_auth, msg.value(), m_nic.gid());
    m_senders.checked(std::chrono::steady_clock::now() - started);
    if (!ok) {
        /* no answer: it would teach a stranger something, and could be
         * forged as easily */
        if (our_job) {
            sender_failed(from, now);
        }
        if (worth_logging(++m_totals.unauthenticated)) {
            m_log("handshake datagram (" +
                  std::string(wire::conn::to_string(
                          static_cast<wire::conn::msg_type>(
                                  msg.value().hdr.type))) +
                  ") from " + sender_text(from) + " dropped: " + ok.error() +
                  " (" + std::to_string(m_totals.unauthenticated) + " so far)");
        }
        return;
    }
    if (our_job) {
        m_senders.passed(from);
    }
    if (p == nullptr) { /* new, or a new instance at a peer's address */
        p = admit(msg.value(), sender);
        if (p == nullptr) {
            return;
        }
    }
    run(*p, p->conn->on_message(now, msg.value()), now);
}

/* One datagram at a time, so that what a pass has no time left for
 * stays in the UD QP's receive queue ("Bounded intake", engine.h). */
bool engine::take_datagrams(time_point now)
{
    const nic::datagram_fn deliver = [&](std::span<const std::byte> b,
                                         const datagram_source &from) {
        on_datagram(b, from, now);
    };
    const uint64_t cut_before = m_senders.passes_cut();
    m_senders.pass_started();
    uint32_t taken = 0;
    while (taken < m_cfg.datagrams_per_pass && m_senders.pass_open() &&
           m_nic.poll_datagrams(deliver, 1) > 0) {
        ++taken;
    }
    if (m_senders.passes_cut() > cut_before &&
        worth_logging(m_senders.passes_cut())) {
        m_log("handshake: credential checks took " +
              std::to_string(m_senders.config().pass_time.count()) +
              " us or more in one pass after " + std::to_string(taken) +
              " datagrams: the rest wait for the next pass (" +
              std::to_string(m_senders.passes_cut()) + " times so far)");
    }
    return taken > 0;
}

std::chrono::milliseconds
keepalive_interval_for(const engine_config &cfg, size_t peers)
{
    const uint64_t rate = std::max(cfg.keepalive_rate, 1u);
    return std::max(cfg.peers.keepalive_interval,
                    std::chrono::milliseconds(peers * 1000 / rate));
}

std::chrono::milliseconds engine::keepalive_interval() const
{
    return keepalive_interval_for(m_cfg, m_peers.size());
}

/* A pass asks only the peers whose timers may be due (peer_timers.h):
 * an agent with ten thousand idle peers has one due at almost every
 * pass. An entry may be early (the timer moved later since), so each
 * peer is asked again, and ticked only if its timer is due. */
void engine::tick_peers(time_point now)
{
    const auto every = keepalive_interval();
    for (uint32_t i : m_peer_timers.take_due(now)) {
        peer &p = m_peers.at(i);
        if (!p.conn) {
            continue;
        }
        /* a keepalive due by the old interval may not be by this one */
        p.conn->keepalive_every(every);
        if (auto t = p.conn->next_timer(); t && *t <= now) {
            run(p, p.conn->tick(now), now); /* notes it again */
        } else {
            note_timer(p);
        }
    }
}

} // namespace rvt::agent
