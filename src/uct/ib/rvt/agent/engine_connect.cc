/*
 * Peers: creating them, running their connection state machines'
 * actions against verbs, the handshake datagrams, and loopback.
 */
#include "uct/ib/rvt/agent/engine.h"

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

} // namespace

engine::peer &engine::add_peer(const wire::agent_address &addr, bool loopback)
{
    auto p      = std::make_unique<peer>();
    p->index    = static_cast<uint32_t>(m_peers.size());
    p->addr     = addr;
    p->loopback = loopback;
    p->lanes.resize(m_cfg.peers.num_qps);
    if (loopback) {
        p->conn = std::make_unique<peer_connection>(
                peer_connection::loopback(m_cfg.peers));
    } else {
        local_agent self{};
        const gid_bytes gid = m_nic.gid();
        std::memcpy(self.self.gid, gid.data(), 16);
        self.self.instance_id = m_agent_id;
        self.self.ud_qpn      = m_nic.ud_qpn();
        self.self.uid         = getuid();
        self.job_key          = m_job_key;
        peer_address where{};
        std::memcpy(where.gid.data(), addr.gid, 16);
        where.ud_qpn      = addr.ud_qpn;
        where.instance_id = addr.agent_id;
        p->conn = std::make_unique<peer_connection>(m_cfg.peers, self, where);
    }
    m_peer_by_addr[{gid_key(addr.gid), addr.ud_qpn}] = p->index;
    m_peers.push_back(std::move(p));
    peer &ref = *m_peers.back();
    if (loopback) { /* always wanted: its clients are this node's */
        const time_point now = std::chrono::steady_clock::now();
        run(ref, ref.conn->connect(now), now);
    }
    return ref;
}

/* A QP of the node's own peer, connected to itself at once: processes of
 * one node reach each other through the same code path as remote ones,
 * and a QP that cannot connect to itself fails the attempt (qps_failed),
 * not the connection, so the rebuild cannot loop. */
result<uint32_t> engine::create_loopback_qp(peer &p, uint32_t psn)
{
    auto qp = m_nic.create_qp();
    if (!qp) {
        return failure{qp.error()};
    }
    const uint32_t qpn = qp.value();
    p.qps.push_back(qpn);
    m_peer_by_qpn[qpn] = p.index;
    auto c             = m_nic.connect_qp(qpn, m_nic.gid(), qpn, psn, psn);
    if (!c) {
        return failure{c.error()};
    }
    return qpn;
}

void engine::run(peer &p, actions acts, time_point now)
{
    for (const action &a : acts) {
        run_one(p, a, now);
    }
}

void engine::run_one(peer &p, const action &a, time_point now)
{
    const std::string who = "peer " + std::to_string(p.index);
    switch (a.kind) {
    case action_kind::create_qps: {
        std::vector<wire::conn::qp_info> infos;
        for (uint32_t i = 0; i < a.num_qps; ++i) {
            const uint32_t psn = random_psn();
            auto qp            = p.loopback ? create_loopback_qp(p, psn) :
                                              m_nic.create_qp();
            if (!qp) {
                p.last_error = qp.error();
                m_log(who + ": " + qp.error());
                destroy_all_qps(p);
                run(p, p.conn->qps_failed(now, qp.error()), now);
                return;
            }
            if (!p.loopback) {
                m_peer_by_qpn[qp.value()] = p.index;
                p.qps.push_back(qp.value());
            }
            infos.push_back({qp.value(), psn});
        }
        run(p, p.conn->qps_created(now, infos), now);
        return;
    }
    case action_kind::connect_qps: {
        p.active.assign(a.num_qps, 0);
        if (p.loopback) { /* connected to themselves as they were made */
            std::copy_n(p.qps.begin(), a.num_qps, p.active.begin());
            return;
        }
        gid_bytes gid;
        std::memcpy(gid.data(), p.addr.gid, gid.size());
        for (uint32_t i = 0; i < a.num_qps; ++i) {
            const uint32_t qpn = a.local_qps[i].qpn;
            if (std::find(p.qps.begin(), p.qps.end(), qpn) == p.qps.end()) {
                qp_failed(p,
                          "connect: local QP " + std::to_string(qpn) +
                                  " is unknown",
                          now);
                return;
            }
            p.active[i] = qpn;
            auto r      = m_nic.connect_qp(qpn, gid, a.peer_qps[i].qpn,
                                           a.peer_qps[i].psn, a.local_qps[i].psn);
            if (!r) {
                qp_failed(p, r.error(), now);
                return;
            }
        }
        return;
    }
    case action_kind::destroy_qps:
        for (uint32_t i = 0; i < a.num_qps; ++i) {
            const uint32_t qpn = a.local_qps[i].qpn;
            if (std::erase(p.qps, qpn) == 0) {
                continue; /* not ours: never destroy another peer's QP */
            }
            m_peer_by_qpn.erase(qpn);
            std::erase(p.active, qpn);
            m_nic.destroy_qp(qpn);
        }
        return;
    case action_kind::flush_qps:
        p.last_error = a.reason;
        m_log(who + ": connection lost (" + a.reason + "): flushing");
        for (uint32_t i = 0; i < a.num_qps; ++i) {
            const uint32_t qpn = a.local_qps[i].qpn;
            if (std::find(p.qps.begin(), p.qps.end(), qpn) != p.qps.end()) {
                (void)m_nic.flush_qp(qpn);
            }
        }
        check_drained(p, now);
        return;
    case action_kind::send_message: {
        auto r = m_nic.send_datagram(a.msg, a.dest.gid, a.dest.ud_qpn);
        if (!r) {
            m_log(who + ": " + r.error());
        }
        return;
    }
    case action_kind::send_keepalive:
        post_keepalive(p);
        return;
    case action_kind::report_connected:
        m_log(who + ": connected with " + std::to_string(p.active.size()) +
              " RC QPs");
        if (!p.loopback) {
            /* what we told it of our departed clients may have been lost
             * with the last connection: told again when it comes up */
            m_departures.peer_connected(p.index);
            /* back-pressure starts afresh: the peer tells us its paused
             * clients again, and we tell it ours */
            p.paused_dst.reset();
            while (!p.parked.empty()) {
                release_parked(p, p.parked.begin()->first);
            }
            for (uint32_t i : m_attached) {
                if (m_clients[i].paused) {
                    queue_control(p,
                                  imm::encode_control(imm::control_op::pause, i)
                                          .value_or(0));
                }
            }
        }
        for (uint16_t i = 0; i < p.lanes.size(); ++i) {
            post_lane(p, i);
        }
        return;
    case action_kind::report_peer_failed: {
        p.last_error = a.reason;
        m_log(who + ": failed: " + a.reason);
        fail_backlog(p, completion_status::peer_failed);
        inbound_message m{};
        m.kind = static_cast<uint8_t>(inbound_kind::peer_failed);
        m.peer = p.index;
        for (uint32_t i = 0; i < m_clients.size(); ++i) {
            if (p.users.test(i) && m_clients[i].attached) {
                m_clients[i].channel->deliver(m, {});
            }
        }
        return;
    }
    }
}

void engine::qp_failed(peer &p, const std::string &reason, time_point now)
{
    ++p.n.qp_errors;
    if (p.is(peer_state::connected)) {
        run(p, p.conn->qp_error(now, reason), now);
    } else if (!p.is(peer_state::draining)) {
        p.last_error = reason;
    }
}

void engine::check_drained(peer &p, time_point now)
{
    if (p.is(peer_state::draining) && p.posted == 0) {
        run(p, p.conn->drained(now), now);
    }
}

/* After a failed attempt: whatever QPs it made go (the state machine has
 * not seen them). */
void engine::destroy_all_qps(peer &p)
{
    for (uint32_t qpn : p.qps) {
        m_peer_by_qpn.erase(qpn);
        m_nic.destroy_qp(qpn);
    }
    p.qps.clear();
    p.active.clear();
}

void engine::fail_backlog(peer &p, completion_status why)
{
    for (auto &[dst, ops] : p.parked) {
        for (uint32_t op : ops) {
            complete_op(op, why, 0);
        }
    }
    p.parked.clear();
    for (auto &l : p.lanes) {
        while (!l.backlog.empty()) {
            uint32_t op = l.backlog.front();
            l.backlog.pop_front();
            complete_op(op, why, 0);
        }
    }
}

void engine::on_datagram(std::span<const std::byte> bytes, time_point now)
{
    auto msg = wire::conn::parse(bytes);
    if (!msg) {
        m_log("handshake datagram refused: " + msg.error());
        return;
    }
    const auto &src = msg.value().src;
    auto it         = m_peer_by_addr.find({gid_key(src.gid), src.ud_qpn});
    peer *p         = nullptr;
    if (it != m_peer_by_addr.end()) {
        p = m_peers[it->second].get();
    } else if (msg.value().hdr.type ==
                       static_cast<uint16_t>(wire::conn::msg_type::request) &&
               m_peers.size() < m_cfg.max_peers) {
        wire::agent_address a{};
        std::memcpy(a.gid, src.gid, 16);
        a.ud_qpn   = src.ud_qpn;
        a.agent_id = src.instance_id;
        p          = &add_peer(a, false);
    } else {
        return;
    }
    run(*p, p->conn->on_message(now, msg.value()), now);
}

void engine::tick_peers(time_point now)
{
    for (auto &p : m_peers) {
        auto t = p->conn->next_timer();
        if (t && *t <= now) {
            run(*p, p->conn->tick(now), now);
        }
    }
}

} // namespace rvt::agent
