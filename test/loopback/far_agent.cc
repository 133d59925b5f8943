/* SPDX-License-Identifier: BSD-3-Clause */
#include "test/loopback/far_agent.h"

#include "uct/ib/rvt/common/imm.h"

#include <unistd.h>

#include <array>
#include <cstring>
#include <stdexcept>

namespace rvt::agent::testing {

namespace {

/* See the top of far_agent.h: the hub sends a peer control messages only,
 * each its 16-byte control buffer. */
loopback_options far_nic_options()
{
    loopback_options o;
    o.receive_buffers = 16;
    o.receive_size    = 64;
    o.sq_depth        = 16;
    o.send_budget     = 64;
    o.memory          = memory_mode::none;
    o.datagram_slots  = 16;
    return o;
}

/* Deterministic per QP and cheap: the harness makes tens of thousands. */
uint32_t psn_of(uint32_t qpn, uint64_t instance)
{
    return static_cast<uint32_t>((qpn * 2654435761u) ^ instance) &
           wire::conn::psn_mask;
}

local_agent identity(const loopback_nic &nic, const far_agent_options &o)
{
    local_agent self{};
    const gid_bytes gid = nic.gid();
    std::memcpy(self.self.gid, gid.data(), gid.size());
    self.self.instance_id = o.instance_id;
    self.self.ud_qpn      = nic.ud_qpn();
    self.self.uid         = getuid();
    self.self.ud_qkey     = nic.ud_qkey();
    self.job_key          = o.job_key;
    return self;
}

peer_address hub_address(const wire::agent_address &hub)
{
    peer_address a;
    std::memcpy(a.gid.data(), hub.gid, a.gid.size());
    a.ud_qpn      = hub.ud_qpn;
    a.ud_qkey     = hub.ud_qkey;
    a.instance_id = hub.agent_id;
    return a;
}

} // namespace

far_agent::far_agent(loopback_fabric &fabric, const wire::agent_address &hub,
                     far_agent_options o) :
    m_fabric(fabric),
    m_hub(hub),
    m_o(std::move(o)),
    m_nic(std::make_unique<loopback_nic>(fabric, far_nic_options()))
{
    if (!m_o.auth) {
        throw std::invalid_argument("far_agent: no peer_auth");
    }
    m_conn = std::make_unique<peer_connection>(m_o.peers, identity(*m_nic, m_o),
                                               hub_address(m_hub));
    make_qps();
    note_address();
}

void far_agent::note_address()
{
    const gid_bytes gid = m_nic->gid();
    std::memcpy(m_address.gid, gid.data(), gid.size());
    m_address.ud_qpn   = m_nic->ud_qpn();
    m_address.ud_qkey  = m_nic->ud_qkey();
    m_address.agent_id = m_o.instance_id;
}

void far_agent::make_qps()
{
    m_qps.clear();
    for (uint32_t i = 0; i < m_o.peers.num_qps; ++i) {
        auto qp = m_nic->create_qp(m_nic->sq_depth());
        if (!qp) {
            throw std::runtime_error("far_agent: " + qp.error());
        }
        m_qps.push_back({qp.value(), psn_of(qp.value(), m_o.instance_id)});
    }
}

void far_agent::connect(time_point now)
{
    if (alive()) {
        run(m_conn->connect(now), now);
    }
}

std::optional<time_point> far_agent::next_timer() const
{
    return alive() ? m_conn->next_timer() : std::nullopt;
}

void far_agent::pump(time_point now)
{
    if (!alive()) {
        return;
    }
    m_nic->poll_datagrams(
            [&](std::span<const std::byte> b, const datagram_source &from) {
                take_datagram(b, from, now);
            },
            m_nic->options().datagram_slots);
    take_completions(now);
    if (auto t = m_conn->next_timer(); t && *t <= now) {
        run(m_conn->tick(now), now);
    }
}

void far_agent::die()
{
    m_nic.reset();
}

void far_agent::restart(time_point now)
{
    if (!alive()) {
        m_nic = std::make_unique<loopback_nic>(m_fabric, far_nic_options());
    } else {
        for (const auto &q : m_conn->local_qps()) {
            m_nic->destroy_qp(q.qpn);
        }
        for (const auto &q : m_qps) {
            m_nic->destroy_qp(q.qpn);
        }
    }
    ++m_o.instance_id;
    m_conn = std::make_unique<peer_connection>(m_o.peers, identity(*m_nic, m_o),
                                               hub_address(m_hub));
    make_qps();
    note_address();
    m_failed_why.clear();
    connect(now);
}

void far_agent::run(const actions &acts, time_point now)
{
    for (const action &a : acts) {
        switch (a.kind) {
        case action_kind::create_qps: {
            if (m_qps.size() != a.num_qps) {
                make_qps(); /* a second connection: made now */
            }
            std::vector<wire::conn::qp_info> qps;
            qps.swap(m_qps);
            run(m_conn->qps_created(now, qps), now);
            break;
        }
        case action_kind::connect_qps:
            for (uint32_t i = 0; i < a.num_qps; ++i) {
                auto r = m_nic->connect_qp(a.local_qps[i].qpn, a.dest.gid,
                                           a.peer_qps[i].qpn, a.peer_qps[i].psn,
                                           a.local_qps[i].psn);
                if (!r) {
                    run(m_conn->qp_error(now, r.error()), now);
                    return;
                }
            }
            break;
        case action_kind::destroy_qps:
            for (uint32_t i = 0; i < a.num_qps; ++i) {
                m_nic->destroy_qp(a.local_qps[i].qpn);
            }
            break;
        case action_kind::flush_qps:
            for (uint32_t i = 0; i < a.num_qps; ++i) {
                (void)m_nic->flush_qp(a.local_qps[i].qpn);
            }
            run(m_conn->drained(now), now); /* no client op to report */
            break;
        case action_kind::send_message: {
            wire::conn::message msg = a.msg;
            const uint64_t lost     = m_nic->counters().datagrams_dropped;
            if (m_o.auth->seal(msg, a.dest.gid) &&
                m_nic->send_datagram(msg, a.dest.gid, a.dest.ud_qpn,
                                     a.dest.ud_qkey)) {
                ++m_counters.datagrams_sent;
                m_counters.datagrams_lost +=
                        m_nic->counters().datagrams_dropped - lost;
            }
            break;
        }
        case action_kind::send_keepalive:
            post_keepalive();
            break;
        case action_kind::report_connected:
            break;
        case action_kind::report_peer_failed:
            m_failed_why = a.reason;
            break;
        }
    }
}

void far_agent::take_datagram(std::span<const std::byte> bytes,
                              const datagram_source &from, time_point now)
{
    if (std::memcmp(from.gid.data(), m_hub.gid, from.gid.size()) != 0 ||
        from.qpn != m_hub.ud_qpn) {
        ++m_counters.datagrams_foreign;
        return;
    }
    auto msg = wire::conn::parse(bytes);
    if (!msg || !check_datagram(*m_o.auth, msg.value(), m_nic->gid())) {
        ++m_counters.datagrams_refused;
        return;
    }
    run(m_conn->on_message(now, msg.value()), now);
}

void far_agent::take_completions(time_point now)
{
    std::array<nic_completion, 16> done;
    for (size_t n; (n = m_nic->poll(done)) > 0;) {
        for (size_t i = 0; i < n; ++i) {
            const nic_completion &c = done[i];
            if (c.receive) {
                const uint32_t buffer = static_cast<uint32_t>(c.wr_id);
                (void)m_nic->repost({&buffer, 1});
                if (c.status == nic_status::success) {
                    ++m_counters.keepalives_received;
                    m_conn->activity(now);
                }
                continue;
            }
            if (c.status == nic_status::success) {
                m_conn->activity(now);
            } else if (c.status != nic_status::flushed) {
                ++m_counters.send_errors;
                if (m_conn->state() == peer_state::connected) {
                    run(m_conn->qp_error(now, "a keepalive failed"), now);
                }
            }
        }
    }
}

void far_agent::post_keepalive()
{
    const auto qps = m_conn->local_qps();
    if (qps.empty()) {
        return;
    }
    nic_send s{};
    s.wr_id       = m_next_wr++;
    s.opcode      = nic_opcode::send_imm;
    s.signaled    = true;
    s.num_sge     = 1;
    s.sge[0]      = m_nic->control_buffer();
    s.imm         = imm::encode_control(imm::control_op::keepalive).value_or(0);
    size_t posted = 0;
    if (m_nic->post(qps[0].qpn, {&s, 1}, posted)) {
        ++m_counters.keepalives_sent;
    }
}

} // namespace rvt::agent::testing
