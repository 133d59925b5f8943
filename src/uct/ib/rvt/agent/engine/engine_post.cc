/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Work in, verbs out: taking clients' requests from their rings, checking
 * them, queueing them on their endpoint's lane, and posting them within
 * the send-queue and CQ credits (lanes.h).
 */
#include "uct/ib/rvt/agent/engine/engine.h"

#include "uct/ib/rvt/agent/engine/engine_tags.h"
#include "uct/ib/rvt/agent/engine/work_check.h"
#include "uct/ib/rvt/common/imm.h"

#include <algorithm>
#include <array>
#include <span>

namespace rvt::agent {

namespace {

/* How many work requests one client may move per pass: fairness. */
constexpr int work_batch = 32;

/* Largest single operation: UCX splits larger ones (its max_zcopy). */
constexpr uint32_t max_message = 1u << 30;

} // namespace

void engine::deliver_completion(uint32_t index, client_state &c,
                                const completion &done)
{
    const uint64_t at = stamp();
    c.channel->complete(done);
    traced(trace_stage::complete, index, done.wr_id, at);
}

/* The peeked request, refused: it completes at once, holding nothing (no
 * op record, no lkey use). */
void engine::refuse_work(uint32_t index, client_state &c,
                         const work_request &wr, completion_status status,
                         uint32_t detail)
{
    c.channel->release_work();
    completion done{};
    done.wr_id  = wr.wr_id;
    done.status = static_cast<uint32_t>(status);
    done.detail = detail;
    done.peer   = wr.peer;
    deliver_completion(index, c, done);
}

/* The peeked request against its checks (`why`: what check_work found)
 * and its client's share; false when refused (completed at once). */
bool engine::admit_work(uint32_t index, client_state &c, const work_request &wr,
                        const std::string &why)
{
    if (!why.empty()) {
        ++c.invalid;
        log_counted(m_totals.invalid_requests, [&] {
            return "client index " + std::to_string(index) +
                   ": request refused: " + why;
        });
        refuse_work(index, c, wr, completion_status::invalid, 0);
        return false;
    }
    /* its share (client_share.h); over the lkeys bound, the entries no op
     * names are dropped first */
    uint64_t lkeys = m_mrs.lkeys_with(index, wr);
    if (lkeys > m_share.limits().lkeys) {
        m_mrs.drop_unused_lkeys(index);
        lkeys = m_mrs.lkeys_with(index, wr);
    }
    const share_verdict share = m_share.take_op(index, lkeys);
    if (!share.admitted()) {
        if (share.log) {
            m_log("client index " + std::to_string(index) +
                  ": request refused: " + share.text() + " (" +
                  std::to_string(share.count) + " so far)");
        }
        refuse_work(index, c, wr, completion_status::no_resource,
                    static_cast<uint32_t>(share.refused));
        return false;
    }
    return true;
}

/* The admitted request becomes an op on its lane (or parked, or ended
 * at once when its peer or destination is gone), and leaves the ring. */
void engine::queue_work(uint32_t index, client_state &c, const work_request &wr)
{
    const uint32_t op_index = m_lanes.alloc(wr, index,
                                            m_clients.generation(index));
    op_record &op           = m_lanes.op(op_index);
    /* an inline payload (checked: at most a slot) becomes the op's own
     * before the client may reuse the slot */
    c.channel->release_work(
            std::span(op.inline_data.data(),
                      (wr.flags & work_inline) != 0 ? wr.length : 0));
    m_mrs.op_queued(index, wr); /* until its end (run_ends) */
    if (m_peers.at(wr.peer).is(peer_state::failed)) {
        m_lanes.end_unqueued(op_index, completion_status::peer_failed);
    } else if (destination_is_gone(op)) {
        ++m_totals.gone_ops_failed;
        m_lanes.end_unqueued(op_index, completion_status::peer_failed);
    } else {
        m_lanes.queue(op_index); /* or parked behind a pause */
    }
}

bool engine::take_work(uint32_t index, client_state &c)
{
    /* a client whose completions we are still holding gets no more work
     * taken: it broke its completion budget */
    if (c.channel->late_completions() > 0) {
        return false;
    }
    bool took = false;
    work_request wr;
    for (int n = 0; n < work_batch && c.channel->peek_work(wr); ++n) {
        if (c.who == nullptr) {
            c.channel->release_work();
            return true;
        }
        const work_limits limits{static_cast<uint32_t>(m_peers.size()),
                                 m_layout.caps.slot_size,
                                 max_message,
                                 m_nic.can_read(),
                                 m_nic.can_atomic(),
                                 m_layout.caps.inline_size};
        const auto &mrs = m_mrs.mrs_of(index);
        std::string why = check_work(wr, mrs, limits);
        if (!why.empty() && wr.length > 0 && (wr.flags & work_inline) == 0 &&
            !mrs.count(wr.lkey)) {
            /* the client announces an MR on its socket before it posts
             * from it (a sibling's leader on its own): read what it has
             * sent, then look again. When this pass may read no more of
             * its socket (attach_server.h, max_socket_read) the request
             * waits in the ring for the next pass: its notice may be in
             * the rest */
            auto read = m_server->take_pending(m_mrs.owner_of(index));
            act_on(std::move(read.events));
            if (!read.complete) {
                return took;
            }
            why = check_work(wr, mrs, limits);
        }
        took = true;
        traced(trace_stage::pop, index, wr.wr_id);
        if (admit_work(index, c, wr, why)) {
            queue_work(index, c, wr);
        }
    }
    run_ends();
    if (!c.channel->healthy() && !c.corrupt) {
        /* a ring index no ring can have: nothing more can be read from
         * this client, and work it waits for would never complete; so it
         * is detached (its process sees its agent's socket close and
         * fails its operations) and cleaned up as a departed client */
        c.corrupt = true;
        ++m_totals.corrupt_detached;
        m_server->detach(index, "its work ring's head index is beyond the "
                                "ring (corrupt shared memory)");
    }
    return took;
}

/* ---- what the lanes ended ---------------------------------------------- */

/* Each end: its client told (if it is still the one that sent the op),
 * and what the op held released (mr_registry, client_share). */
void engine::run_ends()
{
    if (m_lanes.ends().empty()) {
        return;
    }
    /* none of this calls the lanes: the list stays as it is */
    for (const lanes::op_end &e : m_lanes.ends()) {
        const op_record &op = m_lanes.op(e.op);
        const bool part     = op.stripe.of != lanes::no_op;
        client_state &c     = m_clients[op.client];
        const bool same     = m_clients.generation(op.client) == op.generation;
        if (e.retired) {
            if (!part) {
                traced(trace_stage::sent, op.client, op.wr.wr_id);
            }
            if (!c.attached || !same) {
                m_mrs.gone_op_retired(op.client, op.generation);
            } else if (c.posted > 0) {
                --c.posted;
            }
        }
        if (e.told) {
            if (c.attached && same) {
                deliver_completion(op.client, c, m_lanes.completion_of(e));
            }
            if (e.status != completion_status::success &&
                e.status != completion_status::invalid) {
                ++m_peers.at(op.peer).traffic.ops_failed;
            }
        }
        if (same) {
            m_mrs.op_done(op.client, op.wr);
            if (!part) { /* a part is its op's */
                m_share.op_done(op.client);
            }
        }
    }
    m_lanes.clear_ends();
}

/* ---- posting ------------------------------------------------------------ */

void engine::post_ready()
{
    uint32_t peer_index = 0;
    uint16_t lane_index = 0;
    while (m_lanes.next_lane(peer_index, lane_index)) {
        post_lane(m_peers.at(peer_index), lane_index);
    }
}

void engine::post_lane(peer &p, uint16_t lane_index)
{
    lanes::chain c;
    bool more = true;
    while (more) {
        const size_t active = p.is(peer_state::connected) ? p.lanes().size() :
                                                            0;
        more = m_lanes.next_chain(p.index, lane_index, active, c);
        run_ends();
        if (!more || !post_chain(p, c) || c.held) {
            return;
        }
    }
}

/* Posts `c` on its lane's QP; false if the QP refused it (it is in error:
 * the WRs wait at the front, in order, and the connection's error
 * handling flushes the QPs and retries the lane later). */
bool engine::post_chain(peer &p, const lanes::chain &c)
{
    size_t posted = 0;
    auto r = m_nic.post(p.lanes()[c.lane], std::span(c.sends.data(), c.n),
                        posted);
    m_lanes.posted(c, posted);
    for (size_t i = 0; i < posted; ++i) {
        const op_record &op = m_lanes.op(c.ops[i]);
        if (op.client == no_client) {
            continue;
        }
        client_state &cl = m_clients[op.client];
        ++cl.posted; /* a part too: a dead client's MRs wait for it */
        cl.bytes += op.wr.length;
        p.traffic.bytes_posted += op.wr.length;
        if (op.stripe.of == lanes::no_op) { /* a striped write is one op */
            ++cl.ops;
            ++p.traffic.ops_posted;
            traced(trace_stage::post, op.client, op.wr.wr_id);
        }
    }
    run_ends();
    if (!r) {
        qp_failed(p, r.error(), std::chrono::steady_clock::now());
        return false;
    }
    return true;
}

void engine::post_keepalive(peer &p)
{
    lanes::chain c;
    if (!p.is(peer_state::connected) || p.lanes().empty() ||
        !m_lanes.keepalive(
                p.index,
                imm::encode_control(imm::control_op::keepalive).value_or(0),
                c)) {
        return;
    }
    post_chain(p, c);
}

/* ---- back-pressure (engine.h) ------------------------------------------- */

void engine::set_paused(uint32_t index, bool paused)
{
    client_state &c = m_clients[index];
    c.paused        = paused;
    ++(paused ? m_totals.pauses : m_totals.resumes);
    if (paused && worth_logging(m_totals.pauses)) {
        m_log("client index " + std::to_string(index) + ": " +
              std::to_string(c.channel ? c.channel->inbound_waiting() : 0) +
              " inbound entries wait for room in its ring: peers told to "
              "pause sending to it (" +
              std::to_string(m_totals.pauses) + " pauses so far)");
    }
    const uint32_t immediate =
            imm::encode_control(paused ? imm::control_op::pause :
                                         imm::control_op::resume,
                                index)
                    .value_or(0);
    for (auto &p : m_peers) {
        if (p->loopback) { /* this node's own clients: no message */
            if (paused) {
                m_lanes.pause(p->index, index);
            } else {
                m_lanes.resume(p->index, index);
            }
        } else if (p->is(peer_state::connected)) {
            m_lanes.queue_control(p->index, immediate);
        }
    }
}

/* Pauses and resumes what the inbound backlogs of `clients` call for. */
void engine::check_pauses(const client_set &clients)
{
    clients.for_each([&](uint32_t i) {
        client_state &c = m_clients[i];
        if (!c.attached || c.retired) { /* nothing comes for a retired one */
            return;
        }
        const size_t n       = c.channel->inbound_waiting();
        const uint64_t bytes = c.channel->inbound_waiting_bytes();
        const bool over      = n >= m_cfg.pause_messages ||
                          bytes >= m_cfg.pause_bytes;
        const bool under = n <= m_cfg.pause_messages / 2 &&
                           bytes <= m_cfg.pause_bytes / 2;
        if (!c.paused && over) {
            set_paused(i, true);
        } else if (c.paused && under) {
            set_paused(i, false);
        }
    });
}

} // namespace rvt::agent
