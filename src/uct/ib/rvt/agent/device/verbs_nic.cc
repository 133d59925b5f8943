/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/agent/device/verbs_nic.h"

#include "uct/ib/rvt/agent/device/chain_taken.h"
#include "uct/ib/rvt/agent/device/rc_qp.h"
#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/common/uverbs_cmd.h"

#include <fcntl.h>
#include <rdma/ib_user_ioctl_verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rvt::agent {

static_assert(flushed_vendor_status == IBV_WC_WR_FLUSH_ERR);

std::string vendor_status_text(uint32_t vendor)
{
    return ibv_wc_status_str(static_cast<ibv_wc_status>(vendor));
}

namespace {

ibv_wr_opcode verbs_opcode(nic_opcode op)
{
    switch (op) {
    case nic_opcode::rdma_write:
        return IBV_WR_RDMA_WRITE;
    case nic_opcode::rdma_write_imm:
        return IBV_WR_RDMA_WRITE_WITH_IMM;
    case nic_opcode::send_imm:
        return IBV_WR_SEND_WITH_IMM;
    case nic_opcode::rdma_read:
        return IBV_WR_RDMA_READ;
    case nic_opcode::atomic_fetch_add:
        return IBV_WR_ATOMIC_FETCH_AND_ADD;
    case nic_opcode::atomic_cmp_swp:
        return IBV_WR_ATOMIC_CMP_AND_SWP;
    }
    return IBV_WR_SEND_WITH_IMM;
}

nic_qp_state nic_state(ibv_qp_state s)
{
    switch (s) {
    case IBV_QPS_RESET:
        return nic_qp_state::reset;
    case IBV_QPS_INIT:
        return nic_qp_state::init;
    case IBV_QPS_RTR:
        return nic_qp_state::rtr;
    case IBV_QPS_RTS:
        return nic_qp_state::rts;
    case IBV_QPS_ERR:
        return nic_qp_state::error;
    default:
        return nic_qp_state::other;
    }
}

} // namespace

result<std::unique_ptr<verbs_nic>>
verbs_nic::create(device &dev, const verbs_nic_config &cfg)
{
    std::unique_ptr<verbs_nic> n(new verbs_nic(dev, cfg));
    n->m_channel.reset(ibv_create_comp_channel(dev.context()));
    if (!n->m_channel) {
        return failure{std::string("ibv_create_comp_channel failed: ") +
                       std::strerror(errno)};
    }
    /* disarm() drains its events without blocking */
    const int fl = fcntl(n->m_channel->fd, F_GETFL);
    if (fl < 0 || fcntl(n->m_channel->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
        return failure{std::string("completion channel: fcntl failed: ") +
                       std::strerror(errno)};
    }
    const int cqe = std::min<int>(static_cast<int>(cfg.cq_size),
                                  dev.attr().max_cqe);
    if (cqe <= static_cast<int>(cfg.srq_size) + 16) {
        return failure{"CQ of " + std::to_string(cqe) +
                       " entries: expected more than the " +
                       std::to_string(cfg.srq_size) + " receive buffers"};
    }
    n->m_cq.reset(
            ibv_create_cq(dev.context(), cqe, nullptr, n->m_channel.get(), 0));
    if (!n->m_cq) {
        return failure{"ibv_create_cq (" + std::to_string(cqe) +
                       " entries) failed: " + std::strerror(errno)};
    }
    n->m_send_budget = static_cast<uint32_t>(cqe) - cfg.srq_size;
    /* Soft-RoCE (Linux 6.1, Debian 12) ends busy QPs with "remote invalid
     * request" within a second when several WRs come in one
     * ibv_post_send (measured: the 3-node traffic suite failed in each of
     * 4 runs with 32-WR chains and passed with one WR per call): there,
     * chains are posted one WR at a time. Every other device gets one
     * doorbell per chain. */
    if (dev.driver_id() == RDMA_DRIVER_RXE) {
        n->m_per_post = 1;
    }
    auto pool = receive_pool::create(dev, cfg.srq_size, cfg.buffer_size);
    if (!pool) {
        return failure{pool.error()};
    }
    n->m_pool = std::move(pool).value();
    auto ud   = ud_channel::create(dev, n->m_channel.get(), cfg.ud_qkey);
    if (!ud) {
        return failure{ud.error()};
    }
    n->m_ud = std::move(ud).value();
    n->m_control_mr.reset(ibv_reg_mr(dev.pd(), n->m_control_bytes.data(),
                                     sizeof(n->m_control_bytes), 0));
    if (!n->m_control_mr) {
        return failure{std::string("control buffer: ibv_reg_mr failed: ") +
                       std::strerror(errno)};
    }
    return n;
}

verbs_nic::~verbs_nic()
{
    /* QPs before the SRQ, CQ and MRs they use */
    m_qps.clear();
    m_control_mr.reset();
    m_ud.reset();
    m_pool.reset();
    m_cq.reset();
}

gid_bytes verbs_nic::gid() const
{
    gid_bytes g;
    std::memcpy(g.data(), m_dev.gid().raw, g.size());
    return g;
}

nic_sge verbs_nic::control_buffer() const
{
    return {reinterpret_cast<uint64_t>(m_control_bytes.data()),
            sizeof(m_control_bytes), m_control_mr->lkey};
}

verbs_nic::rc_entry *verbs_nic::entry_of(uint32_t qpn)
{
    auto it = m_qps.find(qpn);
    return it == m_qps.end() ? nullptr : &it->second;
}

ibv_qp *verbs_nic::qp_of(uint32_t qpn) const
{
    auto it = m_qps.find(qpn);
    return it == m_qps.end() ? nullptr : it->second.qp.get();
}

result<uint32_t> verbs_nic::create_qp(uint32_t sq_depth)
{
    if (sq_depth == 0 || sq_depth > m_cfg.qp.sq_depth) {
        return failure{"create_qp: a send queue of " +
                       std::to_string(sq_depth) + " WRs: expected 1 to " +
                       std::to_string(m_cfg.qp.sq_depth) + " (--sq-depth)"};
    }
    rc_qp_params params = m_cfg.qp;
    params.sq_depth     = sq_depth;
    params.max_inline   = m_cfg.inline_size;
    rc_entry e;
    e.sq_depth = sq_depth;
    auto qp = create_rc_qp(m_dev, m_cq.get(), m_pool->srq(), params,
                           e.max_inline);
    if (!qp) {
        return failure{qp.error()};
    }
    e.qp = std::move(qp).value();
    if (e.max_inline < m_cfg.inline_size) {
        e.staging.resize(size_t{sq_depth} * m_cfg.inline_size);
        e.staging_mr.reset(
                ibv_reg_mr(m_dev.pd(), e.staging.data(), e.staging.size(), 0));
        if (!e.staging_mr) {
            return failure{
                    "QP " + std::to_string(e.qp->qp_num) +
                    ": inline staging (" + std::to_string(e.staging.size()) +
                    " bytes): ibv_reg_mr failed: " + std::strerror(errno)};
        }
    }
    const uint32_t qpn = e.qp->qp_num;
    m_qps[qpn]         = std::move(e);
    m_silent.erase(qpn); /* a number the device reused */
    return qpn;
}

result<done> verbs_nic::connect_qp(uint32_t qpn, const gid_bytes &gid,
                                   uint32_t remote_qpn, uint32_t remote_psn,
                                   uint32_t local_psn)
{
    ibv_qp *qp = qp_of(qpn);
    if (qp == nullptr) {
        return failure{"connect: QP " + std::to_string(qpn) + " is unknown"};
    }
    uint8_t raw[16];
    std::memcpy(raw, gid.data(), sizeof(raw));
    return connect_rc_qp(qp, m_dev, raw, remote_qpn, remote_psn, local_psn,
                         m_cfg.qp);
}

result<done> verbs_nic::flush_qp(uint32_t qpn)
{
    ibv_qp *qp = qp_of(qpn);
    if (qp == nullptr) {
        return failure{"flush: QP " + std::to_string(qpn) + " is unknown"};
    }
    return flush_rc_qp(qp);
}

void verbs_nic::destroy_qp(uint32_t qpn)
{
    m_qps.erase(qpn);
}

nic_qp_state verbs_nic::query_qp(uint32_t qpn)
{
    ibv_qp *qp = qp_of(qpn);
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    if (qp == nullptr || ibv_query_qp(qp, &attr, IBV_QP_STATE, &init) != 0) {
        return nic_qp_state::other;
    }
    return nic_state(attr.qp_state);
}

result<done>
verbs_nic::post(uint32_t qpn, std::span<const nic_send> chain, size_t &posted)
{
    posted        = 0;
    rc_entry *qpe = entry_of(qpn);
    if (qpe == nullptr) {
        return failure{"post: QP " + std::to_string(qpn) + " is unknown"};
    }
    ibv_qp *qp = qpe->qp.get();
    if (m_silenced < m_cfg.fault_silent_qps) [[unlikely]] {
        if (auto r = silence(qpn, qp); !r) {
            return r;
        }
    }
    while (!chain.empty()) {
        size_t n = std::min(chain.size(), m_per_post);
        std::string refused;
        /* the atomics of this call: (index in m_wrs, wr_id, result slot),
         * remembered once the device took them */
        std::array<std::pair<size_t, std::pair<uint64_t, uint32_t>>, max_chain>
                atomics;
        size_t num_atomics = 0;
        for (size_t i = 0; i < n; ++i) {
            uint32_t slot = 0;
            if (!to_wr(*qpe, chain[i], i, slot, refused)) {
                n = i; /* post what came before it, then fail */
                break;
            }
            if (slot != no_slot) {
                atomics[num_atomics++] = {i, {chain[i].wr_id, slot}};
            }
            m_wrs[i].next = m_wrs.data() + i + 1; /* the last one: below */
        }
        if (n > 0) {
            m_wrs[n - 1].next = nullptr;
            ibv_send_wr *bad  = nullptr;
            const int err     = ibv_post_send(qp, m_wrs.data(), &bad);
            const size_t accepted =
                    err != 0 ? chain_taken<ibv_send_wr>(m_wrs.data(), n, bad) :
                               n;
            for (size_t k = 0; k < num_atomics; ++k) {
                if (atomics[k].first < accepted) {
                    qpe->atomics.push_back(atomics[k].second);
                }
            }
            if (err != 0) {
                posted += accepted;
                return failure{"ibv_post_send on QP " + std::to_string(qpn) +
                               " failed: " + std::strerror(err)};
            }
            posted += n;
        }
        if (!refused.empty()) {
            return failure{"post on QP " + std::to_string(qpn) + ": " +
                           refused};
        }
        chain = chain.subspan(n);
    }
    return done{};
}

bool verbs_nic::to_wr(rc_entry &qpe, const nic_send &s, size_t i,
                      uint32_t &slot, std::string &why)
{
    ibv_send_wr &w = m_wrs[i];
    w              = {};
    w.wr_id        = s.wr_id;
    w.opcode       = verbs_opcode(s.opcode);
    unsigned flags = 0;
    flags |= s.signaled ? unsigned{IBV_SEND_SIGNALED} : 0u;
    flags |= s.fence ? unsigned{IBV_SEND_FENCE} : 0u;
    w.send_flags = flags;
    slot         = no_slot;
    if (is_atomic(s.opcode)) {
        return atomic_wr(qpe, s, i, w, slot, why);
    }
    if (s.inline_payload) {
        if (!inline_sges(qpe, s, i, w, why)) {
            return false;
        }
    } else {
        for (uint8_t k = 0; k < s.num_sge; ++k) {
            m_sges[i][k] = {s.sge[k].addr, s.sge[k].length, s.sge[k].lkey};
        }
        w.sg_list = s.num_sge > 0 ? m_sges[i].data() : nullptr;
        w.num_sge = s.num_sge;
    }
    w.wr.rdma.remote_addr = s.remote_addr;
    w.wr.rdma.rkey        = s.rkey;
    if (s.opcode == nic_opcode::rdma_write_imm ||
        s.opcode == nic_opcode::send_imm) {
        w.imm_data = imm::to_wire(s.imm);
    }
    return true;
}

bool verbs_nic::inline_sges(rc_entry &qp, const nic_send &s, size_t i,
                            ibv_send_wr &w, std::string &why)
{
    uint64_t total = 0;
    for (uint8_t k = 0; k < s.num_sge; ++k) {
        total += s.sge[k].length;
    }
    if (s.opcode == nic_opcode::rdma_read || total > m_cfg.inline_size) {
        why = "inline WR (opcode " + std::to_string(int(s.opcode)) + ", " +
              std::to_string(total) +
              " bytes): expected a send or write of "
              "at most " +
              std::to_string(m_cfg.inline_size) + " bytes";
        return false;
    }
    if (total <= qp.max_inline) {
        /* the provider copies the bytes into the WQE in ibv_post_send:
         * the lkeys are not used */
        for (uint8_t k = 0; k < s.num_sge; ++k) {
            m_sges[i][k] = {s.sge[k].addr, s.sge[k].length, 0};
        }
        w.sg_list = s.num_sge > 0 ? m_sges[i].data() : nullptr;
        w.num_sge = s.num_sge;
        w.send_flags |= IBV_SEND_INLINE;
        return true;
    }
    /* the device carries fewer inline bytes: a staging slot of this QP's
     * (rc_entry), which the device reads by DMA as any payload */
    const uint32_t slot = qp.next_staging++ % qp.sq_depth;
    std::byte *to       = qp.staging.data() + size_t{slot} * m_cfg.inline_size;
    std::byte *at       = to;
    for (uint8_t k = 0; k < s.num_sge; ++k) {
        std::memcpy(at, reinterpret_cast<const void *>(s.sge[k].addr),
                    s.sge[k].length);
        at += s.sge[k].length;
    }
    m_sges[i][0] = {reinterpret_cast<uintptr_t>(to),
                    static_cast<uint32_t>(total), qp.staging_mr->lkey};
    w.sg_list    = total > 0 ? m_sges[i].data() : nullptr;
    w.num_sge    = total > 0 ? 1 : 0;
    return true;
}

bool verbs_nic::atomic_wr(rc_entry &qp, const nic_send &s, size_t i,
                          ibv_send_wr &w, uint32_t &slot, std::string &why)
{
    if (!can_atomic() || !s.signaled || s.num_sge != 0 || s.inline_payload ||
        s.remote_addr % sizeof(uint64_t) != 0) {
        why = "atomic WR (opcode " + std::to_string(int(s.opcode)) +
              ", remote address " + std::to_string(s.remote_addr) +
              "): expected a device that does atomics, a signaled WR "
              "without SGEs or inline payload, and an 8-byte aligned "
              "address";
        return false;
    }
    if (!qp.results_mr) {
        qp.results.assign(qp.sq_depth, 0);
        qp.results_mr.reset(ibv_reg_mr(m_dev.pd(), qp.results.data(),
                                       qp.results.size() * sizeof(uint64_t),
                                       IBV_ACCESS_LOCAL_WRITE));
        if (!qp.results_mr) {
            qp.results.clear();
            why = std::string("atomic results: ibv_reg_mr failed: ") +
                  std::strerror(errno);
            return false;
        }
    }
    slot                    = qp.next_result++ % qp.sq_depth;
    qp.results[slot]        = 0;
    m_sges[i][0]            = {reinterpret_cast<uintptr_t>(&qp.results[slot]),
                               sizeof(uint64_t), qp.results_mr->lkey};
    w.sg_list               = m_sges[i].data();
    w.num_sge               = 1;
    w.wr.atomic.remote_addr = s.remote_addr;
    w.wr.atomic.rkey        = s.rkey;
    w.wr.atomic.compare_add = s.compare_add;
    w.wr.atomic.swap        = s.swap;
    return true;
}

void verbs_nic::take_fetched(const ibv_wc &w, nic_completion &c)
{
    rc_entry *qp = entry_of(w.qp_num);
    if (qp == nullptr || qp->atomics.empty() ||
        qp->atomics.front().first != c.wr_id) {
        return;
    }
    /* the device wrote the old value there, in host order, before it
     * generated the completion (UCX's rc_verbs reads it so too) */
    if (w.status == IBV_WC_SUCCESS) {
        c.fetched = qp->results[qp->atomics.front().second];
    }
    qp->atomics.pop_front();
}

size_t verbs_nic::poll(std::span<nic_completion> out)
{
    std::array<ibv_wc, 64> wc;
    const int want = static_cast<int>(std::min(out.size(), wc.size()));
    size_t kept    = 0;
    /* 0 only when the CQ is empty (nic.h): a batch all dropped polls on */
    while (kept == 0) {
        const int n = ibv_poll_cq(m_cq.get(), want, wc.data());
        if (n <= 0) {
            return 0;
        }
        kept = keep(std::span(wc.data(), static_cast<size_t>(n)), out);
    }
    return kept;
}

/* The completions of `wc` the engine is to see, into `out`: all but a
 * receive whose buffer was not on the SRQ and a silenced QP's sends. */
size_t
verbs_nic::keep(std::span<const ibv_wc> wc, std::span<nic_completion> out)
{
    size_t kept = 0;
    for (size_t i = 0; i < wc.size(); ++i) {
        const ibv_wc &w   = wc[i];
        nic_completion &c = out[kept];
        /* the SRQ's receives say so in their wr_id (and only they: a
         * flushed WC's opcode is undefined) */
        c.receive  = (w.wr_id & receive_pool::wr_id_flag) != 0;
        c.wr_id    = w.wr_id & ~receive_pool::wr_id_flag;
        c.qpn      = w.qp_num;
        c.byte_len = w.byte_len;
        c.has_imm  = (w.wc_flags & IBV_WC_WITH_IMM) != 0;
        c.imm      = c.has_imm ? imm::from_wire(w.imm_data) : 0;
        c.status   = w.status == IBV_WC_SUCCESS      ? nic_status::success :
                     w.status == IBV_WC_WR_FLUSH_ERR ? nic_status::flushed :
                                                       nic_status::error;
        c.vendor   = w.status;
        c.fetched  = 0;
        if (c.receive) {
            if (!m_pool->consumed(static_cast<uint32_t>(c.wr_id))) {
                continue; /* its buffer was not on the SRQ: dropped */
            }
        } else {
            take_fetched(w, c);
            if (!m_silent.empty() && m_silent.contains(c.qpn)) [[unlikely]] {
                /* fault_silent_qps: a silenced QP's sends vanish (a
                 * receive has taken an SRQ buffer, which must go back:
                 * it is kept) */
                continue;
            }
        }
        ++kept;
    }
    return kept;
}

/* fault_silent_qps (verbs_nic_config): QP qpn, about to get its first WR,
 * goes to the error state, and its completions vanish from now on. */
result<done> verbs_nic::silence(uint32_t qpn, ibv_qp *qp)
{
    if (m_silent.contains(qpn)) {
        return done{};
    }
    auto r = flush_rc_qp(qp);
    if (!r) {
        return r;
    }
    m_silent.insert(qpn);
    ++m_silenced;
    return done{};
}

result<done> verbs_nic::send_datagram(const wire::conn::message &msg,
                                      const gid_bytes &gid, uint32_t qpn,
                                      uint32_t qkey)
{
    uint8_t raw[16];
    std::memcpy(raw, gid.data(), sizeof(raw));
    return m_ud->send(msg, raw, qpn, qkey);
}

bool verbs_nic::arm()
{
    return ibv_req_notify_cq(m_cq.get(), 0) == 0 &&
           ibv_req_notify_cq(m_ud->cq(), 0) == 0;
}

void verbs_nic::disarm()
{
    /* each event must be acknowledged before its CQ is destroyed */
    ibv_cq *cq = nullptr;
    void *ctx  = nullptr;
    while (ibv_get_cq_event(m_channel.get(), &cq, &ctx) == 0) {
        ibv_ack_cq_events(cq, 1);
    }
}

result<uint32_t> verbs_nic::deregister(uint32_t handle)
{
    return uverbs::dereg_mr(m_dev.context()->cmd_fd, m_dev.driver_id(), handle);
}

bool verbs_nic::owns_mr(uint32_t handle) const
{
    if (handle == m_pool->mr_handle() || handle == m_ud->mr_handle() ||
        handle == m_control_mr->handle) {
        return true;
    }
    return std::any_of(m_qps.begin(), m_qps.end(), [&](const auto &q) {
        const rc_entry &e = q.second;
        return (e.staging_mr && e.staging_mr->handle == handle) ||
               (e.results_mr && e.results_mr->handle == handle);
    });
}

std::optional<nic_mr> verbs_nic::query_client_mr(uint32_t handle)
{
    if (owns_mr(handle)) {
        return std::nullopt;
    }
    auto info = uverbs::query_mr(m_dev.context()->cmd_fd, m_dev.driver_id(),
                                 handle);
    if (!info) {
        return std::nullopt; /* no MR has that handle */
    }
    const uverbs::mr_info &i = info.value();
    return nic_mr{handle, i.keys.lkey, i.keys.rkey, i.iova, i.length};
}

nic_counters verbs_nic::counters() const
{
    nic_counters c;
    c.receive_buffers    = m_pool->count();
    c.receives_posted    = m_pool->posted();
    c.receives_extra     = m_pool->extra_completions();
    c.reposts_refused    = m_pool->refused_reposts();
    c.datagrams_sent     = m_ud->sent();
    c.datagrams_received = m_ud->received();
    c.datagrams_dropped  = m_ud->dropped();
    return c;
}

} // namespace rvt::agent
