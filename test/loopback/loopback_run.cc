/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The in-memory NIC, its device side: how a posted WR runs. It finds the
 * QP at the other end, checks keys and moves bytes (copy mode), takes a
 * receive buffer from the target's SRQ or waits for one, and puts the
 * completions into the CQs, flushing a QP that went to ERROR.
 */
#include "test/loopback/loopback_nic.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstring>

namespace rvt::agent::testing {

namespace {

/* MR keys name their handle, so a key is found without a second table;
 * the low byte tells an lkey from an rkey, so one is never taken for the
 * other. */
constexpr uint32_t lkey_tag = 0x4c; /* 'L' */
constexpr uint32_t rkey_tag = 0x52; /* 'R' */

uint32_t key_of(uint32_t handle, uint32_t tag)
{
    return handle << 8 | tag;
}

std::byte *pointer(uint64_t addr)
{
    return reinterpret_cast<std::byte *>(static_cast<uintptr_t>(addr));
}

/* [addr, addr + length) lies within the MR */
bool covers(uintptr_t mr_addr, size_t mr_length, uint64_t addr, uint64_t length)
{
    return addr >= mr_addr && length <= mr_length &&
           addr - mr_addr <= mr_length - length;
}

} // namespace

uint64_t loopback_nic::payload_length(const nic_send &wr)
{
    uint64_t total = 0;
    for (size_t i = 0; i < std::min<size_t>(wr.num_sge, wr.sge.size()); ++i) {
        total += wr.sge[i].length;
    }
    return total;
}

/* ---- running WRs ----------------------------------------------------- */

void loopback_nic::kick(rc_qp &qp)
{
    if (m_options.execute_on_post) {
        run(qp);
    } else {
        mark_waiting(qp);
    }
}

void loopback_nic::mark_waiting(rc_qp &qp)
{
    if (!qp.waiting) {
        qp.waiting = true;
        if (m_waiting.empty()) {
            m_fabric.has_waiting(this);
        }
        m_waiting.push_back(qp.qpn);
    }
}

void loopback_nic::progress_waiting()
{
    std::vector<uint32_t> list;
    list.swap(m_waiting);
    for (uint32_t qpn : list) {
        if (rc_qp *qp = find_qp(qpn)) {
            qp->waiting = false;
            run(*qp);
        }
    }
}

/* Runs the QP's WRs in order until one must wait or the queue is empty. */
void loopback_nic::run(rc_qp &qp)
{
    while (!qp.queue.empty()) {
        if (qp.state == nic_qp_state::error) {
            to_error(qp);
            return;
        }
        if (qp.held) {
            return;
        }
        const outcome o = execute(qp, qp.queue.front());
        if (o.what == outcome::wait) {
            mark_waiting(qp);
            return;
        }
        const nic_send wr = qp.queue.front().wr;
        qp.queue.pop_front();
        ++m_stats.ops_executed;
        if (o.what == outcome::success) {
            retire(qp, wr, o.fetched);
            continue;
        }
        /* fail_next(qpn, IBV_WC_WR_FLUSH_ERR): the error completion is
         * lost and the failed WR flushes with the rest (rxe's way) */
        complete(qp, wr,
                 o.vendor == IBV_WC_WR_FLUSH_ERR ? nic_status::flushed :
                                                   nic_status::error,
                 o.vendor);
        to_error(qp);
        if (o.peer.qp != nullptr && o.peer.qp != &qp) {
            o.peer.nic->to_error(*o.peer.qp);
        }
        return;
    }
}

loopback_nic::outcome loopback_nic::execute(rc_qp &qp, const queued_wr &q)
{
    if (qp.fail_next) {
        const uint32_t vendor = *qp.fail_next;
        qp.fail_next.reset();
        return {outcome::error, vendor};
    }
    const peer_ref peer = connected_peer(qp);
    if (peer.qp == nullptr) {
        return {outcome::error, IBV_WC_RETRY_EXC_ERR};
    }
    const nic_send &wr   = q.wr;
    const bool copy      = m_options.memory == memory_mode::copy;
    const uint64_t bytes = payload_length(wr);
    loopback_nic &target = *peer.nic;
    if (copy && !local_ok(wr)) {
        return {outcome::error, IBV_WC_LOC_PROT_ERR};
    }
    switch (wr.opcode) {
    case nic_opcode::rdma_read:
        if (!target.m_options.can_read) {
            return {outcome::error, IBV_WC_REM_INV_REQ_ERR, peer};
        }
        if (copy && !target.remote_ok(wr, bytes, IBV_ACCESS_REMOTE_READ)) {
            return {outcome::error, IBV_WC_REM_ACCESS_ERR, peer};
        }
        if (copy) {
            scatter(wr, pointer(wr.remote_addr));
        }
        return {outcome::success};
    case nic_opcode::rdma_write:
    case nic_opcode::rdma_write_imm: {
        const bool imm = wr.opcode == nic_opcode::rdma_write_imm;
        if (copy && !target.remote_ok(wr, bytes, IBV_ACCESS_REMOTE_WRITE)) {
            return {outcome::error, IBV_WC_REM_ACCESS_ERR, peer};
        }
        if (imm && target.m_srq.empty()) {
            ++m_stats.rnr_waits;
            return {outcome::wait};
        }
        if (copy) {
            payload_to(qp, q, pointer(wr.remote_addr));
        }
        if (imm) {
            const uint32_t index = *target.take_receive_buffer();
            target.receive_completion(peer.qp->qpn, index,
                                      static_cast<uint32_t>(bytes), wr.imm,
                                      IBV_WC_SUCCESS);
        }
        return {outcome::success};
    }
    case nic_opcode::send_imm: {
        if (target.m_srq.empty()) {
            ++m_stats.rnr_waits;
            return {outcome::wait};
        }
        const uint32_t index = *target.take_receive_buffer();
        if (bytes > target.m_options.receive_size) {
            target.receive_completion(peer.qp->qpn, index, 0, 0,
                                      IBV_WC_LOC_LEN_ERR);
            return {outcome::error, IBV_WC_REM_INV_REQ_ERR, peer};
        }
        if (copy) {
            payload_to(qp, q, target.buffer(index));
        }
        target.receive_completion(peer.qp->qpn, index,
                                  static_cast<uint32_t>(bytes), wr.imm,
                                  IBV_WC_SUCCESS);
        return {outcome::success};
    }
    case nic_opcode::atomic_fetch_add:
    case nic_opcode::atomic_cmp_swp:
        return atomic(wr, peer);
    }
    return {outcome::error, IBV_WC_LOC_QP_OP_ERR}; /* check_post refused it */
}

/* An atomic on the target's word, which nothing else touches meanwhile:
 * WRs run one at a time. */
loopback_nic::outcome
loopback_nic::atomic(const nic_send &wr, const peer_ref &peer) const
{
    const loopback_nic &target = *peer.nic;
    if (!target.m_options.can_atomic ||
        wr.remote_addr % sizeof(uint64_t) != 0) {
        return {outcome::error, IBV_WC_REM_INV_REQ_ERR, peer};
    }
    if (m_options.memory != memory_mode::copy) {
        return {outcome::success};
    }
    if (!target.remote_ok(wr, sizeof(uint64_t), IBV_ACCESS_REMOTE_ATOMIC)) {
        return {outcome::error, IBV_WC_REM_ACCESS_ERR, peer};
    }
    uint64_t word;
    std::memcpy(&word, pointer(wr.remote_addr), sizeof(word));
    const uint64_t old = word;
    if (wr.opcode == nic_opcode::atomic_fetch_add) {
        word += wr.compare_add;
    } else if (word == wr.compare_add) {
        word = wr.swap;
    }
    std::memcpy(pointer(wr.remote_addr), &word, sizeof(word));
    outcome o{outcome::success};
    o.fetched = old;
    return o;
}

/* The QP at the other end, if it would answer: in RTS, connected back to
 * this one, expecting the PSN this one sends with. */
loopback_nic::peer_ref loopback_nic::connected_peer(const rc_qp &qp) const
{
    loopback_nic *other = m_fabric.find(qp.remote_gid);
    if (other == nullptr) {
        return {};
    }
    rc_qp *p = other->find_qp(qp.remote_qpn);
    if (p == nullptr || p->state != nic_qp_state::rts ||
        p->remote_gid != gid() || p->remote_qpn != qp.qpn ||
        p->recv_psn != qp.send_psn) {
        return {};
    }
    return {other, p};
}

/* ---- memory ---------------------------------------------------------- */

loopback_mr loopback_nic::register_memory(void *addr, size_t length, int access)
{
    const uint32_t handle = m_fabric.next_mr();
    m_mrs[handle]         = {reinterpret_cast<uintptr_t>(addr), length, access};
    return {handle, key_of(handle, lkey_tag), key_of(handle, rkey_tag)};
}

result<uint32_t> loopback_nic::deregister(uint32_t handle)
{
    if (m_mrs.erase(handle) == 0) {
        return failure{"loopback nic " + std::to_string(m_node) +
                       ": deregister: no MR with handle " +
                       std::to_string(handle)};
    }
    return handle;
}

std::optional<nic_mr> loopback_nic::query_client_mr(uint32_t handle)
{
    ++m_stats.mr_queries;
    auto it = m_mrs.find(handle);
    if (it == m_mrs.end() || owns_mr(handle)) {
        return std::nullopt;
    }
    return nic_mr{handle, key_of(handle, lkey_tag), key_of(handle, rkey_tag),
                  it->second.addr, it->second.length};
}

bool loopback_nic::owns_mr(uint32_t handle) const
{
    return handle == m_control_mr.handle || handle == m_pool_mr.handle;
}

const loopback_nic::memory_region *
loopback_nic::find_mr(uint32_t key, bool remote) const
{
    if ((key & 0xff) != (remote ? rkey_tag : lkey_tag)) {
        return nullptr;
    }
    auto it = m_mrs.find(key >> 8);
    return it == m_mrs.end() ? nullptr : &it->second;
}

/* Every local SGE lies in an MR of its lkey; a READ writes into them. */
bool loopback_nic::local_ok(const nic_send &wr) const
{
    const bool read = wr.opcode == nic_opcode::rdma_read;
    if (wr.inline_payload) {
        return true; /* copied at post: no lkey */
    }
    for (size_t i = 0; i < wr.num_sge; ++i) {
        const nic_sge &sge = wr.sge[i];
        if (sge.length == 0) {
            continue;
        }
        const memory_region *mr = find_mr(sge.lkey, false);
        if (mr == nullptr ||
            !covers(mr->addr, mr->length, sge.addr, sge.length) ||
            (read && !(mr->access & IBV_ACCESS_LOCAL_WRITE))) {
            return false;
        }
    }
    return true;
}

/* The remote range lies in an MR of this nic with that rkey and access;
 * a zero-length op checks no key (as the IB spec says). */
bool loopback_nic::remote_ok(const nic_send &wr, uint64_t length,
                             int access) const
{
    if (length == 0) {
        return true;
    }
    const memory_region *mr = find_mr(wr.rkey, true);
    return mr != nullptr && (mr->access & access) &&
           covers(mr->addr, mr->length, wr.remote_addr, length);
}

/* The bytes the SGEs name, one after the other. */
void loopback_nic::gather(const nic_send &wr, std::byte *to) const
{
    for (size_t i = 0; i < wr.num_sge; ++i) {
        std::memmove(to, pointer(wr.sge[i].addr), wr.sge[i].length);
        to += wr.sge[i].length;
    }
}

/* What the WR carries: its inline copy, or what its SGEs name now. */
void loopback_nic::payload_to(const rc_qp &qp, const queued_wr &q,
                              std::byte *to) const
{
    if (q.wr.inline_payload) {
        std::memcpy(to, qp.inline_store.data() + q.inline_at,
                    payload_length(q.wr));
    } else {
        gather(q.wr, to);
    }
}

void loopback_nic::scatter(const nic_send &wr, const std::byte *from) const
{
    for (size_t i = 0; i < wr.num_sge; ++i) {
        std::memmove(pointer(wr.sge[i].addr), from, wr.sge[i].length);
        from += wr.sge[i].length;
    }
}

/* ---- receive buffers (the SRQ) --------------------------------------- */

std::optional<uint32_t> loopback_nic::take_receive_buffer()
{
    if (m_srq.empty()) {
        return std::nullopt;
    }
    const uint32_t index = m_srq.front();
    m_srq.pop_front();
    m_on_srq.completed(index);
    return index;
}

std::byte *loopback_nic::buffer(uint32_t index)
{
    return m_receive_memory.data() + size_t{index} * m_options.receive_size;
}

/* ---- completions ----------------------------------------------------- */

/* To ERROR: every queued WR completes as flushed, unless the QP was
 * broken silently, when they vanish (or, broken late, wait for
 * speak_late()). */
void loopback_nic::to_error(rc_qp &qp)
{
    qp.state = nic_qp_state::error;
    while (!qp.queue.empty()) {
        const nic_send wr = qp.queue.front().wr;
        qp.queue.pop_front();
        complete(qp, wr, nic_status::flushed, IBV_WC_WR_FLUSH_ERR);
    }
}

void loopback_nic::complete(rc_qp &qp, const nic_send &wr, nic_status status,
                            uint32_t vendor, uint64_t fetched)
{
    if (qp.silent && !qp.late) {
        return;
    }
    nic_completion c{};
    c.wr_id   = wr.wr_id;
    c.qpn     = qp.qpn;
    c.status  = status;
    c.vendor  = vendor;
    c.fetched = fetched;
    const cq_entry e{c, 1 + qp.retired_silently};
    qp.retired_silently = 0;
    if (qp.silent) {
        m_late.push_back(e); /* until speak_late() */
    } else {
        push(e);
    }
}

/* A WR that ran: signaled ones complete, the others wait in the send
 * queue for the next completion of their QP. */
void loopback_nic::retire(rc_qp &qp, const nic_send &wr, uint64_t fetched)
{
    if (wr.signaled) {
        complete(qp, wr, nic_status::success, IBV_WC_SUCCESS, fetched);
    } else {
        ++qp.retired_silently;
    }
}

void loopback_nic::receive_completion(uint32_t qpn, uint32_t index,
                                      uint32_t byte_len, uint32_t imm,
                                      uint32_t vendor)
{
    nic_completion c{};
    c.wr_id    = index;
    c.qpn      = qpn;
    c.byte_len = byte_len;
    c.imm      = imm;
    c.has_imm  = vendor == IBV_WC_SUCCESS;
    c.receive  = true;
    c.status   = vendor == IBV_WC_SUCCESS ? nic_status::success :
                                            nic_status::error;
    c.vendor   = vendor;
    push({c, 0});
}

void loopback_nic::push(const cq_entry &e)
{
    m_cq.push_back(e);
    const size_t capacity = size_t{m_options.send_budget} +
                            m_options.receive_buffers;
    if (m_cq.size() > capacity) {
        ++m_stats.cq_overflows;
    }
    m_stats.cq_high_water = std::max(m_stats.cq_high_water, m_cq.size());
    notify();
}

} // namespace rvt::agent::testing
