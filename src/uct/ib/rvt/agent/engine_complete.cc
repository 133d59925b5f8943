/*
 * The CQ: completions of posted ops go back to their clients; receives
 * are routed to the client the immediate names, and their buffer goes
 * straight back to the SRQ.
 */
#include "uct/ib/rvt/agent/engine.h"

#include "uct/ib/rvt/agent/engine_tags.h"
#include "uct/ib/rvt/common/imm.h"

#include <infiniband/verbs.h>

#include <algorithm>
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
            /* the CQ is empty: no receive of a QP destroyed before this
             * poll is left in it */
            for (uint32_t qpn : m_destroyed_qpns) {
                m_peer_by_qpn.erase(qpn);
            }
            m_destroyed_qpns.clear();
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
        /* what this batch gave the clients is shown to them before
         * anything else is done: that is their latency */
        m_given.for_each([&](uint32_t i) {
            if (m_clients[i].attached) {
                m_clients[i].channel->publish();
            }
        });
        /* the routed receives' buffers go back with one doorbell */
        auto r = m_nic.repost(m_repost);
        if (!r) {
            m_log(r.error());
        }
        m_repost.clear();
    }
    return total;
}

void engine::on_send_completion(const nic_completion &wc, time_point now)
{
    const uint32_t op_index = tag::index_of(wc.wr_id);
    if (op_index >= m_ops.size()) {
        m_log("completion for unknown op " + std::to_string(op_index));
        return;
    }
    if (!m_ops[op_index].in_use ||
        tag::use_of(wc.wr_id) != (m_op_uses[op_index] & tag::use_mask)) {
        /* its op was given up (watch_lanes) and the record freed, maybe
         * taken by another op since: this is not that op's completion */
        ++m_totals.late_completions;
        if (worth_logging(m_totals.late_completions)) {
            m_log("completion (" + status_text(wc) + ") on QP " +
                  std::to_string(wc.qpn) + " for an op given up on before " +
                  "(record " + std::to_string(op_index) + "): dropped; " +
                  std::to_string(m_totals.late_completions) + " so far");
        }
        return;
    }
    peer &p   = *m_peers[m_ops[op_index].peer];
    lane &l   = p.lanes[m_ops[op_index].lane];
    auto mine = std::find(l.inflight.begin(), l.inflight.end(), op_index);
    if (mine == l.inflight.end()) {
        m_log("completion for op " + std::to_string(op_index) +
              ", which its lane has not posted");
        return;
    }
    /* RC completes a QP's WRs in order: those posted before this one,
     * unsignaled, are done, and well (a failed WR always completes) */
    nic_completion ok{};
    ok.status = nic_status::success;
    while (l.inflight.front() != op_index) {
        const uint32_t earlier = l.inflight.front();
        l.inflight.pop_front();
        retire(p, earlier, ok, now);
    }
    l.inflight.pop_front();
    retire(p, op_index, wc, now);
}

/* One posted op is done: credits back, its client told, the lane moves. */
void engine::retire(peer &p, uint32_t op_index, const nic_completion &wc,
                    time_point now)
{
    op_record &op = m_ops[op_index];
    if (op.stripe.of == no_op) { /* a striped write's parts: its own */
        traced(trace_stage::sent, op.client, op.wr.wr_id);
    }
    --p.posted;
    --m_cq_used;
    if (op.client != no_client) {
        client_state &c = m_clients[op.client];
        if (!c.attached || c.generation != op.generation) {
            m_mrs.gone_op_retired(op.client, op.generation);
        } else if (c.posted > 0) {
            --c.posted;
        }
    }
    const uint16_t lane_index = op.lane;
    ++p.lanes[lane_index].retired;
    if (wc.status == nic_status::success) {
        p.conn->activity(now);
        p.confirmed = true;
        complete_op(op_index, completion_status::success, 0, wc.fetched);
        if (m_cq_waiting.empty()) {
            post_lane(p, lane_index);
        } else if (!p.lanes[lane_index].backlog.empty()) {
            wait_for_cq(p, lane_index); /* behind the lanes waiting */
        }
        /* a drain's last op may be one that ran before the flush: it
         * ends the drain as a flushed one would */
        check_drained(p, now);
        return;
    }
    complete_op(op_index, completion_status::failed, wc.vendor);
    if (!p.is(peer_state::draining)) {
        /* a flushed WR outside our own drain: the QP went to the error
         * state by itself (its error completion, if any, was lost) */
        qp_failed(p,
                  "QP " + std::to_string(wc.qpn) + ": " + status_text(wc) +
                          (wc.status == nic_status::flushed ?
                                   " without a flush of ours" :
                                   ""),
                  now);
    }
    check_drained(p, now);
}

/* The watchdog of silent QPs (engine.h, "Silent QPs"). */
void engine::watch_lanes(time_point now)
{
    for (auto &pp : m_peers) {
        peer &p = *pp;
        for (uint16_t i = 0; i < p.lanes.size(); ++i) {
            lane &l          = p.lanes[i];
            const bool busy  = !l.inflight.empty();
            const bool stuck = busy && l.seen_busy &&
                               l.retired == l.seen_retired;
            l.seen_busy    = busy;
            l.seen_retired = l.retired;
            if (!stuck || i >= p.active.size()) {
                continue;
            }
            const uint32_t qpn = p.active[i];
            if (p.is(peer_state::connected) &&
                m_nic.query_qp(qpn) == nic_qp_state::error) {
                qp_failed(p,
                          "QP " + std::to_string(qpn) + " (lane " +
                                  std::to_string(i) +
                                  ") is in the error state with " +
                                  std::to_string(l.inflight.size()) +
                                  " WRs posted and no completion",
                          now);
            } else if (p.is(peer_state::draining)) {
                give_up_lane(p, i, now);
            }
        }
    }
}

/* A draining lane whose QP reports nothing, not even the flush: its WRs
 * will never complete, so they complete here as flushed. */
void engine::give_up_lane(peer &p, uint16_t lane_index, time_point now)
{
    lane &l = p.lanes[lane_index];
    m_log("QP " + std::to_string(p.active[lane_index]) + " (lane " +
          std::to_string(lane_index) + "): no completion for " +
          std::to_string(l.inflight.size()) +
          " WRs since the flush; completing them as flushed");
    nic_completion flushed{};
    flushed.status = nic_status::flushed;
    flushed.vendor = IBV_WC_WR_FLUSH_ERR;
    flushed.qpn    = p.active[lane_index];
    while (!l.inflight.empty() && p.is(peer_state::draining)) {
        const uint32_t op_index = l.inflight.front();
        l.inflight.pop_front();
        retire(p, op_index, flushed, now);
    }
}

void engine::on_receive(const nic_completion &wc, time_point now)
{
    const auto buffer = static_cast<uint32_t>(wc.wr_id);
    auto owner        = m_peer_by_qpn.find(wc.qpn);
    peer *p = owner != m_peer_by_qpn.end() ? m_peers[owner->second].get() :
                                             nullptr;
    if (wc.status == nic_status::success && p != nullptr) {
        p->conn->activity(now);
        p->confirmed = true;
        ++p->n.recv_msgs;
        p->n.recv_bytes += wc.byte_len;
        auto d = wc.has_imm ? imm::decode(wc.imm) : std::nullopt;
        if (!d) {
            ++m_totals.bad_immediates;
        } else if (d->what == imm::kind::control) {
            /* a keepalive: the activity above is all it is for; pause and
             * resume: back-pressure for one of the peer's clients;
             * client_gone: one of its clients left */
            if (d->op == imm::control_op::pause) {
                p->paused_dst.set(d->subject);
            } else if (d->op == imm::control_op::resume) {
                p->paused_dst.reset(d->subject);
                release_parked(*p, d->subject);
            } else if (d->op == imm::control_op::client_gone) {
                if (p->loopback) {
                    /* never sent on loopback QPs: forged or confused */
                    ++m_totals.bad_controls;
                    m_log("client_gone for client " +
                          std::to_string(d->subject) + " generation " +
                          std::to_string(d->generation) +
                          " on a loopback QP, where this agent sends "
                          "none: dropped");
                } else {
                    destination_gone(*p, d->subject, d->generation, now);
                }
            }
        } else if (!m_clients[d->dst_client].attached) {
            on_stale(*p, d->dst_client, d->generation, true, now);
        } else if (imm::wire_generation(m_clients[d->dst_client].generation) !=
                   d->generation) {
            on_stale(*p, d->dst_client, d->generation, false, now);
        } else {
            traced(trace_stage::receive, d->dst_client, wc.imm);
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
                const uint64_t at = stamp();
                c.channel->deliver(m, m_nic.receive_data(buffer, wc.byte_len));
                traced(trace_stage::deliver, d->dst_client, wc.imm, at);
            } else {
                m.kind       = static_cast<uint8_t>(inbound_kind::write);
                m.src_client = d->src_client;
                m.length     = wc.byte_len;
                ++c.writes_in;
                c.write_bytes_in += wc.byte_len;
                ++m_totals.writes_in;
                m_totals.write_bytes_in += wc.byte_len;
                if (c.channel->wants_write_notices()) {
                    const uint64_t at = stamp();
                    c.channel->deliver(m, {});
                    traced(trace_stage::deliver, d->dst_client, wc.imm, at);
                }
            }
        }
    } else if (wc.status == nic_status::error) {
        const std::string why = "receive error on QP " +
                                std::to_string(wc.qpn) + ": " + status_text(wc);
        m_log(why);
        /* an error of a QP already destroyed says nothing of the peer's
         * connection now */
        if (p != nullptr && !p->is(peer_state::draining) &&
            std::find(p->qps.begin(), p->qps.end(), wc.qpn) != p->qps.end()) {
            qp_failed(*p, why, now);
        }
    }
    m_repost.push_back(buffer);
}

/* A receive named (index, generation), which is not attached here: it is
 * dropped, and its sender told (engine.h, "Departed clients"). */
void engine::on_stale(peer &p, uint32_t index, uint8_t generation,
                      bool detached, time_point now)
{
    ++m_totals.misrouted;
    ++(detached ? m_totals.stale_detached : m_totals.stale_generation);
    tell_gone(p, index, generation, now);
}

/* Tells peer p, once, that our client (index, generation) is gone: at
 * its departure (client_gone), and again when p sends it something
 * (on_stale) after a reconnection or the departure memory. */
void engine::tell_gone(peer &p, uint32_t index, uint8_t generation,
                       time_point now)
{
    if (!m_departures.stale(p.index, index, generation, now)) {
        return; /* told already */
    }
    ++m_totals.gone_told;
    if (p.loopback) { /* this node's own senders: no message */
        destination_gone(p, index, generation, now);
        return;
    }
    queue_control(p, imm::encode_control(imm::control_op::client_gone, index,
                                         generation)
                             .value_or(0));
}

/* Peer p's client (index, generation) is gone: our clients that use p
 * hear of it, and work for it fails from now on (post_lane, take_work). */
void engine::destination_gone(peer &p, uint32_t index, uint8_t generation,
                              time_point now)
{
    if (!m_departures.gone(p.index, index, generation, now)) {
        return; /* a repeat */
    }
    ++m_totals.gone_heard;
    m_log("peer " + std::to_string(p.index) + ": its client " +
          std::to_string(index) + " generation " + std::to_string(generation) +
          " is gone: endpoints to it fail");
    inbound_message m{};
    m.kind       = static_cast<uint8_t>(inbound_kind::client_gone);
    m.peer       = p.index;
    m.src_client = index;
    m.generation = generation;
    for (uint32_t i : m_attached) {
        if (p.users.test(i)) {
            m_clients[i].channel->deliver(m, {});
        }
    }
    /* what waits in the lanes for it fails as it comes to the front */
    for (uint16_t i = 0; i < p.lanes.size(); ++i) {
        if (!p.lanes[i].backlog.empty()) {
            mark(p, i);
        }
    }
}

} // namespace rvt::agent
