/*
 * Work in, verbs out: taking clients' requests from their rings, checking
 * them, queueing them on their endpoint's lane, and posting them within
 * the send-queue and CQ credits.
 */
#include "uct/ib/rvt/agent/engine.h"

#include "uct/ib/rvt/agent/engine_tags.h"
#include "uct/ib/rvt/agent/work_check.h"
#include "uct/ib/rvt/common/imm.h"

#include <algorithm>
#include <array>
#include <span>

namespace rvt::agent {

namespace {

/* One endpoint (source, destination client) always takes the same lane. */
uint16_t lane_of(uint32_t src_client, uint32_t dst_client, uint32_t lanes)
{
    uint32_t h = src_client * 0x9e3779b1u ^ dst_client * 0x85ebca6bu;
    h ^= h >> 15;
    return static_cast<uint16_t>(h % lanes);
}

/* How many work requests one client may move per pass: fairness. */
constexpr int work_batch = 32;

/* A long stream of WRs on one QP asks for a completion this often. */
constexpr uint32_t signal_interval = 16;

/* Largest single operation: UCX splits larger ones (its max_zcopy). */
constexpr uint32_t max_message = 1u << 30;

} // namespace

uint32_t engine::alloc_op()
{
    if (m_free_ops.empty()) {
        m_ops.emplace_back();
        m_op_uses.push_back(0);
        return static_cast<uint32_t>(m_ops.size() - 1);
    }
    uint32_t i = m_free_ops.back();
    m_free_ops.pop_back();
    ++m_op_uses[i];
    return i;
}

void engine::free_op(uint32_t op_index)
{
    op_record &op = m_ops[op_index];
    if (op.client != no_client &&
        m_clients[op.client].generation == op.generation) {
        m_mrs.op_done(op.client, op.wr);
        if (op.stripe.of == no_op) { /* a part is its op's */
            m_share.op_done(op.client);
        }
    }
    op.in_use = false;
    m_free_ops.push_back(op_index);
}

void engine::complete_op(uint32_t op_index, completion_status status,
                         uint32_t detail, uint64_t value)
{
    op_record &op = m_ops[op_index];
    if (op.stripe.of != no_op) {
        part_done(op_index, status, detail); /* its op completes once */
        return;
    }
    if (op.stripe.split) {
        op.stripe.note(status, detail);
        if (op.stripe.pending > 0) {
            op.stripe.ended = true; /* part_done completes it */
            return;
        }
        /* the first failure of its parts is the op's */
        status = op.stripe.status;
        detail = op.stripe.detail;
    }
    if (op.client != no_client) {
        client_state &c = m_clients[op.client];
        if (c.attached && c.generation == op.generation) {
            completion done{};
            done.wr_id  = op.wr.wr_id;
            done.status = static_cast<uint32_t>(status);
            done.detail = detail;
            done.length = status != completion_status::success ? 0 :
                          op.stripe.split ? op.stripe.whole_length :
                                            op.wr.length;
            done.peer   = op.wr.peer;
            done.value  = value;
            deliver_completion(op.client, c, done);
        }
        if (status != completion_status::success &&
            status != completion_status::invalid) {
            ++m_peers[op.peer]->n.ops_failed;
        }
    }
    free_op(op_index);
}

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
        if (!why.empty()) {
            ++c.invalid;
            if (c.invalid <= 8) {
                m_log("client index " + std::to_string(index) +
                      ": request refused: " + why);
            }
            refuse_work(index, c, wr, completion_status::invalid, 0);
            continue;
        }
        /* its share (client_share.h); over the lkeys bound, the entries
         * no op names are dropped first */
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
            continue;
        }
        const uint32_t op_index = alloc_op();
        op_record &op           = m_ops[op_index];
        /* an inline payload (checked: at most a slot) becomes the op's
         * own before the client may reuse the slot */
        c.channel->release_work(
                std::span(op.inline_data.data(),
                          (wr.flags & work_inline) != 0 ? wr.length : 0));
        op.wr         = wr;
        op.client     = index;
        op.generation = c.generation;
        op.peer       = wr.peer;
        op.in_use     = true;
        op.stripe     = {};
        m_mrs.op_queued(index, wr); /* until free_op */
        peer &p = *m_peers[wr.peer];
        if (p.is(peer_state::failed)) {
            complete_op(op_index, completion_status::peer_failed, 0);
            continue;
        }
        if (destination_is_gone(op)) {
            ++m_totals.gone_ops_failed;
            complete_op(op_index, completion_status::peer_failed, 0);
            continue;
        }
        op.lane = lane_of(index, wr.dst_client,
                          static_cast<uint32_t>(p.lanes.size()));
        if (p.paused_dst.test(wr.dst_client) || p.parked.count(wr.dst_client)) {
            park(p, op_index); /* behind the destination's pause */
            continue;
        }
        p.lanes[op.lane].backlog.push_back(op_index);
        mark(p, op.lane);
    }
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

/* Posted once every ring was read: one chain per lane and pass. */
void engine::mark(peer &p, uint16_t lane_index)
{
    lane &l = p.lanes[lane_index];
    if (!l.marked) {
        l.marked = true;
        m_marked.push_back({p.index, lane_index});
    }
}

/* ---- back-pressure (engine.h) ---------------------------------------- */

void engine::park(peer &p, uint32_t op_index)
{
    p.parked[m_ops[op_index].wr.dst_client].push_back(op_index);
    ++m_totals.ops_parked;
}

void engine::release_parked(peer &p, uint32_t dst_client)
{
    auto it = p.parked.find(dst_client);
    if (it == p.parked.end()) {
        return;
    }
    for (uint32_t op_index : it->second) {
        p.lanes[m_ops[op_index].lane].backlog.push_back(op_index);
        mark(p, m_ops[op_index].lane);
    }
    p.parked.erase(it);
}

/* An op record for the agent's own message to `p` on lane 0. */
uint32_t engine::alloc_control(peer &p, uint32_t immediate)
{
    const uint32_t op_index = alloc_op();
    op_record &op           = m_ops[op_index];
    op                      = {};
    op.client               = no_client;
    op.peer                 = p.index;
    op.lane                 = 0;
    op.in_use               = true;
    op.control              = immediate;
    return op_index;
}

void engine::queue_control(peer &p, uint32_t immediate)
{
    p.lanes[0].backlog.push_back(alloc_control(p, immediate));
    mark(p, 0);
}

void engine::set_paused(uint32_t index, bool paused)
{
    client_state &c = m_clients[index];
    c.paused        = paused;
    ++(paused ? m_totals.pauses : m_totals.resumes);
    if (paused) {
        m_log("client index " + std::to_string(index) + ": " +
              std::to_string(c.channel ? c.channel->inbound_waiting() : 0) +
              " inbound entries wait for room in its ring: peers told to "
              "pause sending to it");
    }
    const uint32_t immediate =
            imm::encode_control(paused ? imm::control_op::pause :
                                         imm::control_op::resume,
                                index)
                    .value_or(0);
    for (auto &p : m_peers) {
        if (p->loopback) { /* this node's own clients: no message */
            p->paused_dst.set(index, paused);
            if (!paused) {
                release_parked(*p, index);
            }
        } else if (p->is(peer_state::connected)) {
            queue_control(*p, immediate);
        }
    }
}

/* Pauses and resumes what the inbound backlogs of `clients` call for. */
void engine::check_pauses(const client_set &clients)
{
    clients.for_each([&](uint32_t i) {
        client_state &c = m_clients[i];
        if (!c.attached) {
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

void engine::post_marked()
{
    /* by index: a lane that splits a write marks the lanes of its parts */
    for (size_t i = 0; i < m_marked.size(); ++i) {
        const auto [peer_index, lane_index] = m_marked[i];
        peer &p                             = *m_peers[peer_index];
        p.lanes[lane_index].marked          = false;
        post_lane(p, lane_index);
    }
    m_marked.clear();
}

void engine::post_lane(peer &p, uint16_t lane_index)
{
    lane &l = p.lanes[lane_index];
    std::array<nic_send, max_chain> chain;
    std::array<uint32_t, max_chain> ops;
    while (!l.backlog.empty() && p.is(peer_state::connected) &&
           lane_index < p.active.size()) {
        size_t n  = 0;
        bool held = false; /* a split write waits for its other parts */
        while (!l.backlog.empty() && n < max_chain &&
               l.inflight.size() + n < m_sq_depth &&
               m_cq_used + n < m_cq_budget) {
            const uint32_t op_index = l.backlog.front();
            if (m_ops[op_index].stripe.pending > 0) {
                held = true;
                break;
            }
            l.backlog.pop_front();
            const op_record &op = m_ops[op_index];
            if (op.client != no_client &&
                (!m_clients[op.client].attached ||
                 m_clients[op.client].generation != op.generation)) {
                /* its client died: drop it (a part through its op,
                 * which would wait for it for ever, holding its lane) */
                if (op.stripe.of != no_op) {
                    complete_op(op_index, completion_status::peer_failed, 0);
                } else {
                    free_op(op_index);
                }
                continue;
            }
            if (destination_is_gone(op)) {
                ++m_totals.gone_ops_failed;
                complete_op(op_index, completion_status::peer_failed, 0);
                continue;
            }
            if (wants_stripe(p, op)) {
                l.backlog.push_front(op_index); /* held there */
                split(p, op_index);
                held = true;
                break;
            }
            chain[n] = make_send(op_index);
            ops[n++] = op_index;
        }
        if (n == 0) {
            /* out of credits, only dead clients' ops, or held */
            if (!held && !l.backlog.empty() && m_cq_used >= m_cq_budget) {
                wait_for_cq(p, lane_index);
            }
            return;
        }
        signal(l, std::span(chain.data(), n));
        size_t posted = 0;
        auto r = m_nic.post(p.active[lane_index], std::span(chain.data(), n),
                            posted);
        for (size_t i = 0; i < posted; ++i) {
            account_posted(p, lane_index, ops[i]);
            if (m_ops[ops[i]].stripe.of == no_op) { /* the op's, once */
                traced(trace_stage::post, m_ops[ops[i]].client,
                       m_ops[ops[i]].wr.wr_id);
            }
        }
        if (!r) {
            /* the QP refused the WRs (it is in error): they wait at the
             * front, in order, and the connection's error handling
             * flushes the QPs and retries the lane later */
            for (size_t i = n; i > posted; --i) {
                l.backlog.push_front(ops[i - 1]);
            }
            qp_failed(p, r.error(), std::chrono::steady_clock::now());
            return;
        }
        if (held) {
            return;
        }
    }
}

void engine::wait_for_cq(peer &p, uint16_t lane_index)
{
    lane &l = p.lanes[lane_index];
    if (!l.cq_waiting) {
        l.cq_waiting = true;
        m_cq_waiting.push_back({p.index, lane_index});
    }
}

/* Credits came back: the lanes that ran out go first, in turn; one that
 * runs out again waits at the end of the line. */
void engine::resume_cq_waiting()
{
    while (!m_cq_waiting.empty() && m_cq_used < m_cq_budget) {
        const auto [peer_index, lane_index] = m_cq_waiting.front();
        m_cq_waiting.pop_front();
        peer &p                        = *m_peers[peer_index];
        p.lanes[lane_index].cq_waiting = false;
        post_lane(p, lane_index);
    }
}

/* Selective signalling: the last WR of a chain asks for a completion, and
 * so does every signal_interval-th one of a long stream, so that the send
 * queue is reclaimed in time. The WRs before a signaled one complete with
 * it (on_send_completion). An atomic always asks: its completion carries
 * the value it fetched (nic.h); so does what make_send marked signaled
 * already (a striped write's parts: their op waits for each). */
void engine::signal(lane &l, std::span<nic_send> chain)
{
    for (size_t i = 0; i < chain.size(); ++i) {
        const bool last   = i + 1 == chain.size();
        const bool atomic = chain[i].opcode == nic_opcode::atomic_fetch_add ||
                            chain[i].opcode == nic_opcode::atomic_cmp_swp;
        chain[i].signaled = chain[i].signaled || last || atomic ||
                            ++l.unsignaled >= signal_interval;
        if (chain[i].signaled) {
            l.unsignaled = 0;
        }
    }
}

nic_send engine::make_send(uint32_t op_index) const
{
    const op_record &op    = m_ops[op_index];
    const work_request &wr = op.wr;
    nic_send s{};
    s.wr_id    = tag::of_op(op_index, m_op_uses[op_index]);
    s.fence    = (wr.flags & work_fence) != 0;
    s.signaled = op.stripe.of != no_op || op.stripe.split;
    if (op.client == no_client) { /* the agent's own: keepalive, pause */
        s.opcode  = nic_opcode::send_imm;
        s.sge[0]  = m_nic.control_buffer();
        s.num_sge = 1;
        s.imm     = op.control;
        return s;
    }
    /* an AM's head segment (checked like the rest) goes first */
    if (wr.head_length > 0) {
        s.sge[s.num_sge++] = {wr.head_addr, wr.head_length, wr.head_lkey};
    }
    if ((wr.flags & work_inline) != 0) {
        /* the op's copy of the client's work-data slot: the nic copies it
         * again into the WQE before post() returns (nic.h, inline) */
        s.inline_payload = true;
        if (wr.length > 0) {
            s.sge[s.num_sge++] = {reinterpret_cast<uintptr_t>(
                                          op.inline_data.data()),
                                  wr.length, 0};
        }
    } else if (wr.length > 0 && !is_atomic(static_cast<work_op>(wr.op))) {
        /* an atomic's operands are no addresses (work.h) */
        s.sge[s.num_sge++] = {wr.local_addr, wr.length, wr.lkey};
    }
    /* check_work vouched for the fields: the encoders accept them */
    switch (static_cast<work_op>(wr.op)) {
    case work_op::rdma_write:
        s.opcode = nic_opcode::rdma_write;
        break;
    case work_op::rdma_write_imm:
        s.opcode = nic_opcode::rdma_write_imm;
        s.imm = imm::encode_write(wr.dst_client, wr.dst_generation, op.client)
                        .value_or(0);
        break;
    case work_op::send_am:
        s.opcode = nic_opcode::send_imm;
        s.imm    = imm::encode_am(wr.dst_client, wr.dst_generation, wr.am_id)
                        .value_or(0);
        break;
    case work_op::rdma_read:
        s.opcode = nic_opcode::rdma_read;
        break;
    case work_op::atomic_fetch_add:
        s.opcode      = nic_opcode::atomic_fetch_add;
        s.compare_add = wr.operand;
        break;
    case work_op::atomic_cswap:
        s.opcode      = nic_opcode::atomic_cmp_swp;
        s.compare_add = wr.compare;
        s.swap        = wr.operand;
        break;
    }
    /* a request from client memory is never inline: an inline send is
     * copied by the CPU of the process that posts it, from its own address
     * space, and a client's buffers are mapped only in the client (the
     * device reads them via the MR); work_inline payloads come through
     * the segment, which the agent has mapped */
    s.remote_addr = wr.remote_addr;
    s.rkey        = wr.rkey;
    return s;
}

void engine::account_posted(peer &p, uint16_t lane_index, uint32_t op_index)
{
    const op_record &op = m_ops[op_index];
    p.lanes[lane_index].inflight.push_back(op_index);
    ++p.posted;
    ++m_cq_used;
    if (op.client != no_client) {
        client_state &c = m_clients[op.client];
        ++c.posted; /* a part too: a dead client's MRs wait for it */
        c.bytes += op.wr.length;
        p.n.bytes_posted += op.wr.length;
        if (op.stripe.of == no_op) { /* a striped write is one op */
            ++c.ops;
            ++p.n.ops_posted;
        }
    }
}

/* ---- striping (engine.h, "Striping") --------------------------------- */

bool engine::wants_stripe(const peer &p, const op_record &op) const
{
    return (op.wr.flags & work_stripe) != 0 && !op.stripe.split &&
           op.stripe.of == no_op && (op.wr.flags & work_fence) == 0 &&
           p.lanes.size() > 1 && p.active.size() == p.lanes.size() &&
           op.wr.length >= 2 * stripe_align;
}

/* The op at the front of its lane becomes its last part (and stays
 * there, held); the others go to the other lanes. */
void engine::split(peer &p, uint32_t op_index)
{
    const auto lanes         = static_cast<uint32_t>(p.lanes.size());
    const work_request whole = m_ops[op_index].wr;
    const uint16_t own       = m_ops[op_index].lane;
    const uint32_t parts     = std::min(lanes, whole.length / stripe_align);
    const uint32_t chunk = whole.length / parts / stripe_align * stripe_align;
    for (uint32_t j = 0; j + 1 < parts; ++j) {
        const uint32_t part_index = alloc_op(); /* may move m_ops */
        op_record &part           = m_ops[part_index];
        part.wr                   = whole;
        part.wr.op                = static_cast<uint8_t>(work_op::rdma_write);
        part.wr.flags             = work_signaled;
        part.wr.length            = chunk;
        part.wr.local_addr += uint64_t{j} * chunk;
        part.wr.remote_addr += uint64_t{j} * chunk;
        part.client     = m_ops[op_index].client;
        part.generation = m_ops[op_index].generation;
        part.peer       = p.index;
        part.lane       = static_cast<uint16_t>((own + 1 + j) % lanes);
        part.in_use     = true;
        part.control    = 0;
        part.stripe     = {};
        part.stripe.of  = op_index;
        m_mrs.op_queued(part.client, part.wr); /* until free_op */
        /* first in line: behind another lane's held write it would wait
         * for that write's parts, which may wait for this write: a
         * deadlock; ahead of other endpoints' ops it breaks no order */
        p.lanes[part.lane].backlog.push_front(part_index);
        mark(p, part.lane);
    }
    op_record &op          = m_ops[op_index];
    const uint64_t before  = uint64_t{parts - 1} * chunk;
    op.stripe.split        = true;
    op.stripe.pending      = static_cast<uint16_t>(parts - 1);
    op.stripe.whole_length = whole.length;
    op.wr.length -= static_cast<uint32_t>(before);
    op.wr.local_addr += before;
    op.wr.remote_addr += before;
    ++m_totals.striped_ops;
    m_totals.stripe_parts += parts;
}

/* A part retired (or failed unposted): once none is left, the op goes on
 * (its last part is posted) or fails with the first failure. */
void engine::part_done(uint32_t part_index, completion_status status,
                       uint32_t detail)
{
    const uint32_t op_index = m_ops[part_index].stripe.of;
    free_op(part_index);
    op_record &op = m_ops[op_index];
    op.stripe.note(status, detail);
    if (--op.stripe.pending > 0) {
        return;
    }
    peer &p = *m_peers[op.peer];
    if (op.stripe.ended) {
        complete_op(op_index, op.stripe.status, op.stripe.detail);
    } else if (op.stripe.status != completion_status::success) {
        /* never posted: it leaves the front of its lane, failed */
        std::erase(p.lanes[op.lane].backlog, op_index);
        mark(p, op.lane); /* what waited behind it */
        complete_op(op_index, op.stripe.status, op.stripe.detail);
    } else {
        mark(p, op.lane); /* its last part, the WRITE WITH IMM */
    }
}

void engine::post_keepalive(peer &p)
{
    if (!p.is(peer_state::connected) || p.active.empty() ||
        p.lanes[0].inflight.size() >= m_sq_depth || m_cq_used >= m_cq_budget) {
        return; /* busy lanes show the peer is alive anyway */
    }
    const uint32_t op_index = alloc_control(
            p, imm::encode_control(imm::control_op::keepalive).value_or(0));
    nic_send s            = make_send(op_index);
    s.signaled            = true;
    p.lanes[0].unsignaled = 0;
    size_t posted         = 0;
    auto r                = m_nic.post(p.active[0], std::span(&s, 1), posted);
    if (!r) {
        free_op(op_index);
        qp_failed(p, r.error(), std::chrono::steady_clock::now());
        return;
    }
    account_posted(p, 0, op_index);
}

} // namespace rvt::agent
