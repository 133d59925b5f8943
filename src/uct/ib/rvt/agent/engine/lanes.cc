/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The lanes' rules (lanes.h): records, backlogs, credits, signalling,
 * striping and parking.
 */
#include "uct/ib/rvt/agent/engine/lanes.h"

#include "uct/ib/rvt/agent/engine/engine_tags.h"
#include "uct/ib/rvt/common/format.h"
#include "uct/ib/rvt/common/imm.h"

#include <algorithm>

namespace rvt::agent {

namespace {

/* One endpoint (source, destination client) always takes the same lane. */
uint16_t lane_of(uint32_t src_client, uint32_t dst_client, uint32_t lanes)
{
    uint32_t h = src_client * 0x9e3779b1u ^ dst_client * 0x85ebca6bu;
    h ^= h >> 15;
    return static_cast<uint16_t>(h % lanes);
}

/* Moves the ops of q that `take` names to `out`; the rest stay, in
 * order. */
template<typename Take>
void take_if(std::deque<uint32_t> &q, Take take, std::vector<uint32_t> &out)
{
    std::deque<uint32_t> keep;
    for (uint32_t i : q) {
        if (take(i)) {
            out.push_back(i);
        } else {
            keep.push_back(i);
        }
    }
    q.swap(keep);
}

} // namespace

lanes::lanes(const limits &lim) : m_lim(lim)
{
}

void lanes::add_peer(uint32_t peer)
{
    if (peer >= m_peers.size()) {
        m_peers.resize(peer + 1);
    }
    m_peers[peer]          = {};
    m_peers[peer].lanes    = std::vector<lane>(m_lim.num_lanes);
    m_peers[peer].sq_depth = m_lim.sq_depth;
}

void lanes::set_sq_depth(uint32_t peer, uint32_t sq_depth)
{
    m_peers[peer].sq_depth = std::min(sq_depth, m_lim.sq_depth);
}

/* ---- records ----------------------------------------------------------- */

uint32_t
lanes::alloc(const work_request &wr, uint32_t client, uint32_t generation)
{
    uint32_t i;
    if (m_free.empty()) {
        m_ops.emplace_back();
        m_uses.push_back(0);
        i = static_cast<uint32_t>(m_ops.size() - 1);
    } else {
        i = m_free.back();
        m_free.pop_back();
        ++m_uses[i];
    }
    op_record &op = m_ops[i];
    op.wr         = wr;
    op.client     = client;
    op.generation = generation;
    op.peer       = wr.peer;
    op.lane       = 0;
    op.in_use     = true;
    op.control    = 0;
    op.stripe     = {};
    return i;
}

/* The record is out of use now and free for alloc() once the engine has
 * read its end (clear_ends). */
void lanes::free_op(uint32_t i, bool retired, bool told,
                    completion_status status, uint32_t detail, uint64_t value)
{
    op_record &op = m_ops[i];
    op.in_use     = false;
    if (op.client == no_client) {
        m_free.push_back(i);
        return;
    }
    m_ends.push_back({i, retired, told, status, detail, value});
}

void lanes::clear_ends()
{
    for (const op_end &e : m_ends) {
        m_free.push_back(e.op);
    }
    m_ends.clear();
}

completion lanes::completion_of(const op_end &e) const
{
    const op_record &op = m_ops[e.op];
    completion done{};
    done.wr_id  = op.wr.wr_id;
    done.status = static_cast<uint32_t>(e.status);
    done.detail = e.detail;
    done.length = e.status != completion_status::success ? 0 :
                  op.stripe.split ? op.stripe.whole_length :
                                    op.wr.length;
    done.peer   = op.wr.peer;
    done.value  = e.value;
    return done;
}

/* The op's end: its client is told (a part tells its op instead). */
void lanes::end_op(uint32_t i, completion_status status, uint32_t detail,
                   uint64_t value, bool retired)
{
    op_record &op = m_ops[i];
    if (op.stripe.of != no_op) {
        part_ended(i, status, detail, retired);
        return;
    }
    if (op.stripe.split) {
        op.stripe.note(status, detail);
        if (op.stripe.pending > 0) {
            op.stripe.ended = true; /* its last part ends it */
            return;
        }
        /* the first failure of its parts is the op's */
        status = op.stripe.status;
        detail = op.stripe.detail;
    }
    free_op(i, retired, true, status, detail, value);
}

void lanes::part_ended(uint32_t part, completion_status status, uint32_t detail,
                       bool retired)
{
    const uint32_t i = m_ops[part].stripe.of;
    free_op(part, retired);
    op_record &op = m_ops[i];
    op.stripe.note(status, detail);
    if (--op.stripe.pending > 0) {
        return;
    }
    if (op.stripe.ended) {
        end_op(i, op.stripe.status, op.stripe.detail, 0, false);
    } else if (op.stripe.status != completion_status::success) {
        /* never posted: it leaves the front of its lane, failed */
        std::erase(m_peers[op.peer].lanes[op.lane].backlog, i);
        mark(op.peer, op.lane); /* what waited behind it */
        end_op(i, op.stripe.status, op.stripe.detail, 0, false);
    } else if (op.stripe.dropped) {
        /* its client is gone: never posted, nobody to tell */
        std::erase(m_peers[op.peer].lanes[op.lane].backlog, i);
        mark(op.peer, op.lane);
        free_op(i, false);
    } else {
        mark(op.peer, op.lane); /* its last part, the WRITE WITH IMM */
    }
}

/* ---- queueing ---------------------------------------------------------- */

void lanes::queue(uint32_t i)
{
    op_record &op = m_ops[i];
    peer_lanes &p = m_peers[op.peer];
    op.lane       = lane_of(op.client, op.wr.dst_client,
                            static_cast<uint32_t>(p.lanes.size()));
    if (p.paused.test(op.wr.dst_client) || p.parked.count(op.wr.dst_client)) {
        p.parked[op.wr.dst_client].push_back(i); /* behind the pause */
        ++m_totals.ops_parked;
        return;
    }
    p.lanes[op.lane].backlog.push_back(i);
    mark(op.peer, op.lane);
}

void lanes::end_unqueued(uint32_t i, completion_status why)
{
    end_op(i, why, 0, 0, false);
}

/* A record for the agent's own message to `peer` (on lane 0). */
uint32_t lanes::alloc_control(uint32_t peer, uint32_t immediate)
{
    work_request wr{};
    wr.peer          = peer;
    const uint32_t i = alloc(wr, no_client, 0);
    m_ops[i].control = immediate;
    return i;
}

void lanes::queue_control(uint32_t peer, uint32_t immediate)
{
    const uint32_t i = alloc_control(peer, immediate);
    m_peers[peer].lanes[0].backlog.push_back(i);
    mark(peer, 0);
}

/* ---- posting ----------------------------------------------------------- */

void lanes::mark(uint32_t peer, uint16_t lane_index)
{
    lane &l = m_peers[peer].lanes[lane_index];
    if (!l.marked) {
        l.marked = true;
        m_marked.push_back({peer, lane_index});
    }
}

void lanes::mark_all(uint32_t peer)
{
    for (uint16_t i = 0; i < m_peers[peer].lanes.size(); ++i) {
        if (!m_peers[peer].lanes[i].backlog.empty()) {
            mark(peer, i);
        }
    }
}

bool lanes::next_lane(uint32_t &peer, uint16_t &lane_index)
{
    if (!m_cq_waiting.empty() && m_cq_used < m_lim.cq_budget) {
        std::tie(peer, lane_index) = m_cq_waiting.front();
        m_cq_waiting.pop_front();
        m_peers[peer].lanes[lane_index].cq_waiting = false;
        return true;
    }
    if (m_marked_next < m_marked.size()) {
        /* by index: a lane that splits a write marks its parts' lanes */
        std::tie(peer, lane_index)             = m_marked[m_marked_next++];
        m_peers[peer].lanes[lane_index].marked = false;
        return true;
    }
    m_marked.clear();
    m_marked_next = 0;
    return false;
}

void lanes::wait_for_cq(uint32_t peer, uint16_t lane_index)
{
    lane &l = m_peers[peer].lanes[lane_index];
    if (!l.cq_waiting) {
        l.cq_waiting = true;
        m_cq_waiting.push_back({peer, lane_index});
    }
}

bool lanes::next_chain(uint32_t peer, uint16_t lane_index, size_t active,
                       chain &c)
{
    peer_lanes &p = m_peers[peer];
    lane &l       = p.lanes[lane_index];
    c.peer        = peer;
    c.lane        = lane_index;
    c.n           = 0;
    c.held        = false;
    c.requeue     = true;
    if (lane_index >= active) {
        return false; /* not connected: the backlog waits */
    }
    while (!l.backlog.empty() && c.n < max_chain &&
           l.inflight.size() + c.n < p.sq_depth &&
           m_cq_used + c.n < m_lim.cq_budget) {
        const uint32_t i = l.backlog.front();
        if (m_ops[i].stripe.pending > 0) {
            c.held = true; /* a split write waits for its other parts */
            break;
        }
        l.backlog.pop_front();
        if (wants_stripe(m_ops[i], active)) {
            l.backlog.push_front(i); /* held there */
            split(i);
            c.held = true;
            break;
        }
        c.sends[c.n] = make_send(i);
        c.ops[c.n++] = i;
    }
    if (c.n == 0) {
        /* out of credits, or held */
        if (!c.held && !l.backlog.empty() && m_cq_used >= m_lim.cq_budget) {
            wait_for_cq(peer, lane_index);
        }
        return false;
    }
    signal(l, std::span(c.sends.data(), c.n));
    return true;
}

void lanes::posted(const chain &c, size_t n)
{
    peer_lanes &p = m_peers[c.peer];
    lane &l       = p.lanes[c.lane];
    for (size_t i = 0; i < n; ++i) {
        l.inflight.push_back(c.ops[i]);
    }
    p.posted += static_cast<uint32_t>(n);
    m_cq_used += static_cast<uint32_t>(n);
    for (size_t i = c.n; i > n; --i) {
        if (c.requeue) {
            /* the QP refused them: they wait at the front, in order */
            l.backlog.push_front(c.ops[i - 1]);
        } else {
            free_op(c.ops[i - 1], false);
        }
    }
}

bool lanes::keepalive(uint32_t peer, uint32_t immediate, chain &c)
{
    peer_lanes &p = m_peers[peer];
    lane &l       = p.lanes[0];
    if (l.inflight.size() >= p.sq_depth || m_cq_used >= m_lim.cq_budget) {
        return false; /* busy lanes show the peer is alive anyway */
    }
    const uint32_t i    = alloc_control(peer, immediate);
    c.peer              = peer;
    c.lane              = 0;
    c.n                 = 1;
    c.held              = false;
    c.requeue           = false;
    c.sends[0]          = make_send(i);
    c.sends[0].signaled = true;
    c.ops[0]            = i;
    l.unsignaled        = 0;
    return true;
}

/* Selective signalling: the last WR of a chain asks for a completion, and
 * so does every signal_interval-th one of a long stream, so that the send
 * queue is reclaimed in time. The WRs before a signaled one complete with
 * it (retire). An atomic always asks: its completion carries the value it
 * fetched (nic.h); so does what make_send marked signaled already (a
 * striped write's parts: their op waits for each). */
void lanes::signal(lane &l, std::span<nic_send> sends)
{
    for (size_t i = 0; i < sends.size(); ++i) {
        const bool last   = i + 1 == sends.size();
        sends[i].signaled = sends[i].signaled || last ||
                            is_atomic(sends[i].opcode) ||
                            ++l.unsignaled >= signal_interval;
        if (sends[i].signaled) {
            l.unsignaled = 0;
        }
    }
}

nic_send lanes::make_send(uint32_t i) const
{
    const op_record &op    = m_ops[i];
    const work_request &wr = op.wr;
    nic_send s{};
    s.wr_id    = tag::of_op(i, m_uses[i]);
    s.fence    = (wr.flags & work_fence) != 0;
    s.signaled = op.stripe.of != no_op || op.stripe.split;
    if (op.client == no_client) { /* the agent's own: keepalive, pause */
        s.opcode  = nic_opcode::send_imm;
        s.sge[0]  = m_lim.control_buffer;
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

/* ---- striping (lanes.h, "Striping") ----------------------------------- */

bool lanes::wants_stripe(const op_record &op, size_t active) const
{
    const size_t k = m_peers[op.peer].lanes.size();
    return (op.wr.flags & work_stripe) != 0 && !op.stripe.split &&
           op.stripe.of == no_op && (op.wr.flags & work_fence) == 0 && k > 1 &&
           active == k && op.wr.length >= 2 * stripe_align;
}

/* The op at the front of its lane becomes its last part (and stays
 * there, held); the others go to the FRONT of the other lanes: behind
 * another lane's held write a part would wait for that write's parts,
 * which may wait for this write (a deadlock); ahead of other endpoints'
 * ops it breaks no order. */
void lanes::split(uint32_t i)
{
    const uint32_t peer = m_ops[i].peer;
    const auto k        = static_cast<uint32_t>(m_peers[peer].lanes.size());
    const work_request whole = m_ops[i].wr;
    const uint16_t own       = m_ops[i].lane;
    const uint32_t parts     = std::min(k, whole.length / stripe_align);
    const uint32_t chunk = whole.length / parts / stripe_align * stripe_align;
    for (uint32_t j = 0; j + 1 < parts; ++j) {
        work_request wr = whole;
        wr.op           = static_cast<uint8_t>(work_op::rdma_write);
        wr.flags        = work_signaled;
        wr.length       = chunk;
        wr.local_addr += uint64_t{j} * chunk;
        wr.remote_addr += uint64_t{j} * chunk;
        /* may move m_ops */
        const uint32_t part = alloc(wr, m_ops[i].client, m_ops[i].generation);
        op_record &p        = m_ops[part];
        p.lane              = static_cast<uint16_t>((own + 1 + j) % k);
        p.stripe.of         = i;
        m_peers[peer].lanes[p.lane].backlog.push_front(part);
        mark(peer, p.lane);
    }
    op_record &op          = m_ops[i];
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

/* ---- completions ------------------------------------------------------- */

lanes::retire_result lanes::retire(uint64_t wr_id, completion_status status,
                                   uint32_t detail, uint64_t value)
{
    retire_result r;
    r.op = tag::index_of(wr_id);
    if (r.op >= m_ops.size()) {
        r.verdict = retire_verdict::unknown;
        return r;
    }
    if (!m_ops[r.op].in_use ||
        tag::use_of(wr_id) != (m_uses[r.op] & tag::use_mask)) {
        /* its op was given up (give_up) and the record freed, maybe taken
         * by another op since: this is not that op's completion */
        r.verdict = retire_verdict::late;
        return r;
    }
    r.peer  = m_ops[r.op].peer;
    lane &l = m_peers[r.peer].lanes[m_ops[r.op].lane];
    if (std::find(l.inflight.begin(), l.inflight.end(), r.op) ==
        l.inflight.end()) {
        r.verdict = retire_verdict::stray;
        return r;
    }
    /* RC completes a QP's WRs in order: those posted before this one,
     * unsignaled, are done, and well (a failed WR always completes) */
    while (l.inflight.front() != r.op) {
        const uint32_t earlier = l.inflight.front();
        l.inflight.pop_front();
        retire_one(earlier, completion_status::success, 0, 0);
        r.succeeded = true;
    }
    l.inflight.pop_front();
    retire_one(r.op, status, detail, value);
    r.succeeded |= status == completion_status::success;
    return r;
}

void lanes::retire_one(uint32_t i, completion_status status, uint32_t detail,
                       uint64_t value)
{
    const uint32_t peer       = m_ops[i].peer;
    const uint16_t lane_index = m_ops[i].lane;
    peer_lanes &p             = m_peers[peer];
    --p.posted;
    --m_cq_used;
    ++p.lanes[lane_index].retired;
    end_op(i, status, detail, value, true);
    if (status != completion_status::success) {
        return;
    }
    if (m_cq_waiting.empty()) {
        mark(peer, lane_index);
    } else if (!p.lanes[lane_index].backlog.empty()) {
        wait_for_cq(peer, lane_index); /* behind the lanes waiting */
    }
}

size_t
lanes::give_up(uint32_t peer, uint16_t lane_index, uint32_t vendor_flushed)
{
    lane &l        = m_peers[peer].lanes[lane_index];
    const size_t n = l.inflight.size();
    while (!l.inflight.empty()) {
        const uint32_t i = l.inflight.front();
        l.inflight.pop_front();
        retire_one(i, completion_status::failed, vendor_flushed, 0);
    }
    return n;
}

void lanes::fail_backlog(uint32_t peer, completion_status why)
{
    peer_lanes &p = m_peers[peer];
    auto parked   = std::exchange(p.parked, {});
    for (auto &[dst, ops] : parked) {
        for (uint32_t i : ops) {
            end_op(i, why, 0, 0, false);
        }
    }
    for (auto &l : p.lanes) {
        while (!l.backlog.empty()) {
            const uint32_t i = l.backlog.front();
            l.backlog.pop_front();
            end_op(i, why, 0, 0, false);
        }
    }
}

/* ---- departures ------------------------------------------------------ */

/* The parked and queued ops of p that `of` names, taken out in order
 * into `out`; an op held at the front of its lane for its parts (which
 * next_chain does not take either) stays there and goes into `held`. */
template<typename Of>
void lanes::take_waiting(peer_lanes &p, Of of, std::vector<uint32_t> &out,
                         std::vector<uint32_t> &held)
{
    for (auto it = p.parked.begin(); it != p.parked.end();) {
        take_if(it->second, of, out);
        it = it->second.empty() ? p.parked.erase(it) : std::next(it);
    }
    for (lane &l : p.lanes) {
        for (uint32_t i : l.backlog) {
            if (of(i) && m_ops[i].stripe.pending > 0) {
                held.push_back(i);
            }
        }
        take_if(
                l.backlog,
                [&](uint32_t i) {
                    return of(i) && m_ops[i].stripe.pending == 0;
                },
                out);
    }
}

/* What next_chain did when it found such an op at the front, done at
 * once: a whole op is freed untold; a part ends peer_failed, since its op
 * would otherwise wait for it for ever, holding its lane. An op held for
 * its parts is not posted once they have ended (stripe.dropped). */
void lanes::drop_client(uint32_t client, uint32_t generation)
{
    const auto of = [&](uint32_t i) {
        return m_ops[i].client == client && m_ops[i].generation == generation;
    };
    std::vector<uint32_t> out;
    std::vector<uint32_t> held;
    for (peer_lanes &p : m_peers) {
        take_waiting(p, of, out, held);
    }
    for (uint32_t i : held) {
        m_ops[i].stripe.dropped = true;
    }
    for (uint32_t i : out) {
        if (m_ops[i].stripe.of == no_op) {
            free_op(i, false);
        } else {
            end_op(i, completion_status::peer_failed, 0, 0, false);
        }
    }
}

/* Ends peer_failed what waits for (dst_client, dst_generation) at peer;
 * an op held for its parts fails once they have ended. */
size_t lanes::fail_destination(uint32_t peer, uint32_t dst_client,
                               uint8_t dst_generation)
{
    const auto of = [&](uint32_t i) {
        const op_record &op = m_ops[i];
        return op.client != no_client && op.wr.dst_client == dst_client &&
               op.wr.dst_generation == dst_generation;
    };
    std::vector<uint32_t> out;
    std::vector<uint32_t> held;
    take_waiting(m_peers[peer], of, out, held);
    size_t n = out.size();
    for (uint32_t i : out) {
        end_op(i, completion_status::peer_failed, 0, 0, false);
    }
    for (uint32_t i : held) {
        stripe_state &s = m_ops[i].stripe;
        /* still held, and none of its parts failed it above */
        if (m_ops[i].in_use && s.pending > 0 &&
            s.status == completion_status::success) {
            s.note(completion_status::peer_failed, 0);
            ++n;
        }
    }
    return n;
}

/* ---- back-pressure ----------------------------------------------------- */

void lanes::pause(uint32_t peer, uint32_t dst)
{
    m_peers[peer].paused.set(dst);
}

void lanes::resume(uint32_t peer, uint32_t dst)
{
    peer_lanes &p = m_peers[peer];
    p.paused.reset(dst);
    auto it = p.parked.find(dst);
    if (it == p.parked.end()) {
        return;
    }
    for (uint32_t i : it->second) {
        p.lanes[m_ops[i].lane].backlog.push_back(i);
        mark(peer, m_ops[i].lane);
    }
    p.parked.erase(it);
}

void lanes::forget_pauses(uint32_t peer)
{
    peer_lanes &p = m_peers[peer];
    p.paused.reset();
    while (!p.parked.empty()) {
        resume(peer, p.parked.begin()->first);
    }
}

/* ---- the watchdog ------------------------------------------------------ */

std::vector<uint16_t> lanes::watch(uint32_t peer)
{
    std::vector<uint16_t> stuck;
    auto &ls = m_peers[peer].lanes;
    for (uint16_t i = 0; i < ls.size(); ++i) {
        lane &l         = ls[i];
        const bool busy = !l.inflight.empty();
        if (busy && l.seen_busy && l.retired == l.seen_retired) {
            stuck.push_back(i);
        }
        l.seen_busy    = busy;
        l.seen_retired = l.retired;
    }
    return stuck;
}

void lanes::flush_started(uint32_t peer)
{
    for (lane &l : m_peers[peer].lanes) {
        l.seen_busy    = false;
        l.seen_retired = l.retired;
    }
}

/* ---- looks ------------------------------------------------------------- */

size_t lanes::queued(uint32_t peer) const
{
    size_t n = 0;
    for (const auto &l : m_peers[peer].lanes) {
        n += l.backlog.size();
    }
    return n;
}

size_t lanes::parked(uint32_t peer) const
{
    size_t n = 0;
    for (const auto &[dst, ops] : m_peers[peer].parked) {
        n += ops.size();
    }
    return n;
}

bool lanes::holds_nothing(uint32_t peer) const
{
    const peer_lanes &p = m_peers[peer];
    return p.posted == 0 && p.parked.empty() && queued(peer) == 0;
}

bool lanes::idle() const
{
    if (m_cq_used != 0) {
        return false;
    }
    for (uint32_t i = 0; i < m_peers.size(); ++i) {
        if (queued(i) != 0) {
            return false;
        }
    }
    return true;
}

std::string lanes::check_books() const
{
    std::string out;
    uint64_t posted = 0;
    for (uint32_t i = 0; i < m_peers.size(); ++i) {
        const peer_lanes &p = m_peers[i];
        size_t inflight     = 0;
        for (const auto &l : p.lanes) {
            inflight += l.inflight.size();
        }
        if (inflight != p.posted) {
            out += format("peer %u: %u ops posted, its lanes have %zu; ", i,
                          p.posted, inflight);
        }
        posted += p.posted;
    }
    if (posted != m_cq_used) {
        out += format("%llu ops posted, %u CQ credits used; ",
                      static_cast<unsigned long long>(posted), m_cq_used);
    }
    std::vector<uint32_t> parts(m_ops.size(), 0); /* op -> parts in use */
    for (const auto &op : m_ops) {
        if (op.in_use && op.stripe.of != no_op) {
            ++parts[op.stripe.of];
        }
    }
    for (uint32_t i = 0; i < m_ops.size(); ++i) {
        const op_record &op = m_ops[i];
        if (parts[i] != (op.in_use ? op.stripe.pending : 0)) {
            out += format("op %u: %u parts pending, %u parts in use; ", i,
                          op.stripe.pending, parts[i]);
        }
    }
    return out;
}

} // namespace rvt::agent
