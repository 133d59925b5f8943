/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CQ: completions of posted ops go back to their clients; receives
 * are routed to the client the immediate names, and their buffer goes
 * straight back to the SRQ.
 */
#include "uct/ib/rvt/agent/engine/engine.h"

#include "uct/ib/rvt/agent/engine/engine_tags.h"
#include "uct/ib/rvt/common/imm.h"

#include <algorithm>
#include <array>
#include <span>

namespace rvt::agent {

size_t engine::poll_cq(time_point now)
{
    std::array<nic_completion, 32> wc;
    size_t total = 0;
    for (int round = 0; round < 8; ++round) {
        const size_t n = m_nic.poll(wc);
        if (n == 0) {
            /* the CQ is empty: no receive of a QP destroyed before this
             * poll is left in it */
            m_peers.cq_empty();
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
        m_clients.publish_given();
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
    const bool ok = wc.status == nic_status::success;
    const auto r  = m_lanes.retire(wc.wr_id,
                                  ok ? completion_status::success :
                                        completion_status::failed,
                                  ok ? 0 : wc.vendor, wc.fetched);
    if (r.verdict == lanes::retire_verdict::unknown) {
        m_log("completion for unknown op " + std::to_string(r.op));
        return;
    }
    if (r.verdict == lanes::retire_verdict::late) {
        /* its op was given up (watch_lanes) and the record freed, maybe
         * taken by another op since: this is not that op's completion */
        ++m_totals.late_completions;
        if (worth_logging(m_totals.late_completions)) {
            m_log("completion (" + vendor_status_text(wc.vendor) + ") on QP " +
                  std::to_string(wc.qpn) + " for an op given up on before " +
                  "(record " + std::to_string(r.op) + "): dropped; " +
                  std::to_string(m_totals.late_completions) + " so far");
        }
        return;
    }
    if (r.verdict == lanes::retire_verdict::stray) {
        m_log("completion for op " + std::to_string(r.op) +
              ", which its lane has not posted");
        return;
    }
    run_ends();
    peer &p = m_peers.at(r.peer);
    if (r.succeeded) { /* the peer answered */
        heard_from(p, now);
    }
    if (!ok && !p.is(peer_state::draining)) {
        /* a flushed WR outside our own drain: the QP went to the error
         * state by itself (its error completion, if any, was lost) */
        qp_failed(p,
                  "QP " + std::to_string(wc.qpn) + ": " +
                          vendor_status_text(wc.vendor) +
                          (wc.status == nic_status::flushed ?
                                   " without a flush of ours" :
                                   ""),
                  now);
    }
    /* a drain's last op may be one that ran before the flush: it ends the
     * drain as a flushed one would */
    check_drained(p, now);
}

/* The watchdog of silent QPs (engine.h, "Silent QPs"). */
void engine::watch_lanes(time_point now)
{
    for (auto &pp : m_peers) {
        peer &p = *pp;
        for (uint16_t i : m_lanes.watch(p.index)) {
            if (i >= p.lanes().size()) {
                continue;
            }
            const uint32_t qpn = p.lanes()[i];
            if (p.is(peer_state::connected) &&
                m_nic.query_qp(qpn) == nic_qp_state::error) {
                qp_failed(p,
                          "QP " + std::to_string(qpn) + " (lane " +
                                  std::to_string(i) +
                                  ") is in the error state with " +
                                  std::to_string(
                                          m_lanes.in_flight(p.index, i)) +
                                  " WRs posted and no completion",
                          now);
            } else if (p.is(peer_state::draining)) {
                /* no completion, not even the flush: its WRs never will
                 * complete, so they complete here as flushed */
                m_log("QP " + std::to_string(qpn) + " (lane " +
                      std::to_string(i) + "): no completion for " +
                      std::to_string(m_lanes.in_flight(p.index, i)) +
                      " WRs since the flush; completing them as flushed");
                m_lanes.give_up(p.index, i, flushed_vendor_status);
                run_ends();
                check_drained(p, now);
            }
        }
    }
}

void engine::on_receive(const nic_completion &wc, time_point now)
{
    const auto buffer = static_cast<uint32_t>(wc.wr_id);
    peer *p           = m_peers.owner_of(wc.qpn);
    if (wc.status == nic_status::success && p != nullptr) {
        heard_from(*p, now);
        ++p->traffic.recv_msgs;
        p->traffic.recv_bytes += wc.byte_len;
        auto d = wc.has_imm ? imm::decode(wc.imm) : std::nullopt;
        if (!d) {
            ++m_totals.bad_immediates;
        } else if (d->what == imm::kind::control) {
            /* a keepalive: the activity above is all it is for; pause and
             * resume: back-pressure for one of the peer's clients;
             * client_gone: one of its clients left, which it waits to hear
             * we know (gone_heard); gone_heard: the answer to ours */
            const bool departure = d->op == imm::control_op::client_gone ||
                                   d->op == imm::control_op::gone_heard;
            if (d->op == imm::control_op::pause) {
                m_lanes.pause(p->index, d->subject);
            } else if (d->op == imm::control_op::resume) {
                m_lanes.resume(p->index, d->subject);
            } else if (departure && p->loopback) {
                /* never sent on loopback QPs: forged or confused */
                log_counted(m_totals.bad_controls, [&] {
                    return std::string(d->op == imm::control_op::client_gone ?
                                               "client_gone" :
                                               "gone_heard") +
                           " for client " + std::to_string(d->subject) +
                           " generation " + std::to_string(d->generation) +
                           " on a loopback QP, where this agent sends "
                           "none: dropped";
                });
            } else if (d->op == imm::control_op::client_gone) {
                /* answered once, when it is news: a repeat comes only
                 * after the barrier stopped waiting for it (a new
                 * connection, or the departure memory) */
                if (destination_gone(*p, d->subject, d->generation, now)) {
                    m_lanes.queue_control(
                            p->index,
                            imm::encode_control(imm::control_op::gone_heard,
                                                d->subject, d->generation)
                                    .value_or(0));
                }
            } else if (d->op == imm::control_op::gone_heard) {
                /* one not awaited (late, repeated, forged) changes nothing */
                answer_retirements(
                        m_barrier.heard(p->index, d->subject, d->generation));
            }
        } else if (!m_clients[d->dst_client].attached ||
                   m_clients[d->dst_client].retired) {
            on_stale(*p, d->dst_client, d->generation, true, now);
        } else if (imm::wire_generation(m_clients.generation(d->dst_client)) !=
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
                                std::to_string(wc.qpn) + ": " +
                                vendor_status_text(wc.vendor);
        m_log(why);
        /* an error of a QP already destroyed says nothing of the peer's
         * connection now */
        if (p != nullptr && !p->is(peer_state::draining) && p->owns(wc.qpn)) {
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
bool engine::tell_gone(peer &p, uint32_t index, uint8_t generation,
                       time_point now)
{
    if (!m_departures.stale(p.index, index, generation, now)) {
        return false; /* told already */
    }
    ++m_totals.gone_told;
    if (p.loopback) { /* this node's own senders: no message */
        destination_gone(p, index, generation, now);
        return false;
    }
    m_lanes.queue_control(p.index,
                          imm::encode_control(imm::control_op::client_gone,
                                              index, generation)
                                  .value_or(0));
    return true;
}

/* Peer p's client (index, generation) is gone: our clients that use p
 * hear of it, then the work for it that waits in the lanes fails
 * (lanes::fail_destination), and later work fails as it is taken
 * (queue_work). */
bool engine::destination_gone(peer &p, uint32_t index, uint8_t generation,
                              time_point now)
{
    if (!m_departures.gone(p.index, index, generation, now)) {
        return false; /* a repeat */
    }
    /* a remote client's departure: its process can attach and leave
     * without end */
    log_counted(m_totals.gone_heard, [&] {
        return "peer " + std::to_string(p.index) + ": its client " +
               std::to_string(index) + " generation " +
               std::to_string(generation) + " is gone: endpoints to it fail";
    });
    inbound_message m{};
    m.kind       = static_cast<uint8_t>(inbound_kind::client_gone);
    m.peer       = p.index;
    m.src_client = index;
    m.generation = generation;
    for (uint32_t i : m_clients.attached()) {
        if (p.users().test(i)) {
            m_clients[i].channel->deliver(m, {});
        }
    }
    m_totals.gone_ops_failed += m_lanes.fail_destination(p.index, index,
                                                         generation);
    run_ends();
    return true;
}

} // namespace rvt::agent
