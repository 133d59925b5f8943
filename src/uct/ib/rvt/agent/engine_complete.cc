/*
 * The CQ: completions of posted ops go back to their clients; receives
 * are routed to the client the immediate names, and their buffer goes
 * straight back to the SRQ.
 */
#include "uct/ib/rvt/agent/engine.h"

#include "uct/ib/rvt/agent/engine_tags.h"
#include "uct/ib/rvt/common/imm.h"

#include <infiniband/verbs.h>

#include <array>
#include <span>

namespace rvt::agent {

namespace {

/* The device's word for a failed completion. */
std::string status_text(const nic_completion &wc)
{
    return ibv_wc_status_str(static_cast<ibv_wc_status>(wc.vendor));
}

} // namespace

size_t engine::poll_cq(time_point now)
{
    std::array<nic_completion, 32> wc;
    size_t total = 0;
    for (int round = 0; round < 8; ++round) {
        const size_t n = m_nic.poll(wc);
        if (n == 0) {
            break;
        }
        total += n;
        for (size_t i = 0; i < n; ++i) {
            if (wc[i].receive) {
                on_receive(wc[i], now);
            } else {
                on_send_completion(wc[i], now);
            }
        }
    }
    return total;
}

void engine::on_send_completion(const nic_completion &wc, time_point now)
{
    const uint32_t op_index = tag::index_of(wc.wr_id);
    if (op_index >= m_ops.size() || !m_ops[op_index].in_use) {
        m_log("completion for unknown op " + std::to_string(op_index));
        return;
    }
    op_record &op = m_ops[op_index];
    peer &p       = *m_peers[op.peer];
    --p.lanes[op.lane].posted;
    --p.posted;
    --m_cq_used;
    if (op.client != no_client) {
        client_state &c = m_clients[op.client];
        if (c.generation == op.generation && c.posted > 0) {
            --c.posted;
        }
    }
    const uint16_t lane_index = op.lane;
    if (wc.status == nic_status::success) {
        if (p.conn) {
            p.conn->activity(now);
        }
        complete_op(op_index, completion_status::success, 0);
        post_lane(p, lane_index);
        return;
    }
    complete_op(op_index, completion_status::failed, wc.vendor);
    if (wc.status != nic_status::flushed && !p.draining) {
        qp_failed(p,
                  "QP " + std::to_string(wc.qpn) + ": " + status_text(wc),
                  now);
    }
    check_drained(p, now);
}

void engine::on_receive(const nic_completion &wc, time_point now)
{
    const auto buffer = static_cast<uint32_t>(wc.wr_id);
    auto owner        = m_peer_by_qpn.find(wc.qpn);
    peer *p    = owner != m_peer_by_qpn.end() ? m_peers[owner->second].get() :
                                                nullptr;
    if (wc.status == nic_status::success && p != nullptr) {
        if (p->conn) {
            p->conn->activity(now);
        }
        ++p->n.recv_msgs;
        p->n.recv_bytes += wc.byte_len;
        auto d = wc.has_imm ? imm::decode(wc.imm) : std::nullopt;
        if (!d) {
            ++m_totals.bad_immediates;
        } else if (d->what == imm::kind::control) {
            /* keepalive: the activity above is all it is for */
        } else if (!m_clients[d->dst_client].attached) {
            ++m_totals.misrouted;
        } else {
            client_state &c = m_clients[d->dst_client];
            inbound_message m{};
            m.peer = p->index;
            m.imm  = wc.imm;
            if (d->what == imm::kind::am) {
                m.kind   = static_cast<uint8_t>(inbound_kind::am);
                m.am_id  = d->am_id;
                m.length = wc.byte_len;
                ++c.am_in;
                ++m_totals.am_in;
                c.channel->deliver(m, m_nic.receive_data(buffer, wc.byte_len));
            } else {
                m.kind       = static_cast<uint8_t>(inbound_kind::write);
                m.src_client = d->src_client;
                m.length     = wc.byte_len;
                ++c.writes_in;
                c.write_bytes_in += wc.byte_len;
                ++m_totals.writes_in;
                m_totals.write_bytes_in += wc.byte_len;
                c.channel->deliver(m, {});
            }
        }
    } else if (wc.status == nic_status::error) {
        const std::string why = "receive error on QP " +
                                std::to_string(wc.qpn) + ": " +
                                status_text(wc);
        m_log(why);
        if (p != nullptr && !p->draining) {
            qp_failed(*p, why, now);
        }
    }
    auto r = m_nic.repost(std::span(&buffer, 1));
    if (!r) {
        m_log(r.error());
    }
}

} // namespace rvt::agent
