/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The product's nic (nic.h): libibverbs on the agent's device. It owns the
 * verbs objects of the data path, created in this order and destroyed in
 * reverse: the completion channel, the shared CQ of every RC QP, the SRQ
 * and its buffers (receive_pool), the handshake's UD QP and CQ
 * (ud_channel), the engine's control buffer, and the RC QPs by number.
 */
#ifndef RVT_AGENT_VERBS_NIC_H
#define RVT_AGENT_VERBS_NIC_H

#include "uct/ib/rvt/agent/device/device.h"
#include "uct/ib/rvt/agent/device/nic.h"
#include "uct/ib/rvt/agent/device/receive_pool.h"
#include "uct/ib/rvt/agent/device/ud_channel.h"
#include "uct/ib/rvt/agent/device/verbs_ptr.h"
#include "uct/ib/rvt/common/defaults.h"

#include <array>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace rvt::agent {

struct verbs_nic_config {
    rc_qp_params qp;
    uint32_t srq_size    = 1024; /* receive buffers of the node */
    uint32_t buffer_size = defaults::am_size; /* each: the largest AM */
    uint32_t cq_size     = 8192; /* clamped to the device's */
    /* the most bytes an inline WR carries (nic::max_inline): the work-data
     * slot size. Each QP asks the device for that much (qp.max_inline is
     * set from it); a QP that got less stages the payloads it cannot
     * carry inline in registered memory of its own. */
    uint32_t inline_size = defaults::inline_size;
    /* Fault injection, for tests only (rvtd --fault-silent-qps; 0, off,
     * by default): the first this many RC QPs that get a WR posted go to
     * the error state just before it, and no completion of theirs is
     * ever delivered, not even the flushes: a QP that fails silently, as
     * Debian 12's rxe can (engine.h, "Silent QPs"). */
    uint32_t fault_silent_qps = 0;
    /* the handshake UD QP's Q_Key (wire::qkey_valid; create() refuses
     * another): rvtd's is random, once per run (wire::conn::random_qkey) */
    uint32_t ud_qkey = 0;
};

class verbs_nic final : public nic {
public:
    static result<std::unique_ptr<verbs_nic>>
    create(device &dev, const verbs_nic_config &cfg);
    ~verbs_nic() override;

    gid_bytes gid() const override;
    uint32_t ud_qpn() const override
    {
        return m_ud->qpn();
    }
    uint32_t ud_qkey() const override
    {
        return m_ud->qkey();
    }
    bool can_read() const override
    {
        return m_dev.can_read();
    }
    bool can_atomic() const override
    {
        return m_dev.can_atomic();
    }
    uint32_t sq_depth() const override
    {
        return m_cfg.qp.sq_depth;
    }
    uint32_t send_budget() const override
    {
        return m_send_budget;
    }
    nic_sge control_buffer() const override;
    uint32_t max_inline() const override
    {
        return m_cfg.inline_size;
    }

    result<uint32_t> create_qp(uint32_t sq_depth) override;
    result<done> connect_qp(uint32_t qpn, const gid_bytes &gid,
                            uint32_t remote_qpn, uint32_t remote_psn,
                            uint32_t local_psn) override;
    result<done> flush_qp(uint32_t qpn) override;
    void destroy_qp(uint32_t qpn) override;
    nic_qp_state query_qp(uint32_t qpn) override;

    result<done> post(uint32_t qpn, std::span<const nic_send> chain,
                      size_t &posted) override;
    size_t poll(std::span<nic_completion> out) override;

    std::span<const std::byte>
    receive_data(uint32_t index, uint32_t length) const override
    {
        return m_pool->data(index, length);
    }
    result<done> repost(std::span<const uint32_t> buffers) override
    {
        return m_pool->repost(buffers);
    }

    result<done> send_datagram(const wire::conn::message &msg,
                               const gid_bytes &gid, uint32_t qpn,
                               uint32_t qkey) override;
    size_t poll_datagrams(const datagram_fn &deliver, size_t max) override
    {
        return m_ud->poll(deliver, max);
    }

    int event_fd() const override
    {
        return m_channel->fd;
    }
    bool arm() override;
    void disarm() override;

    result<uint32_t> deregister(uint32_t handle) override;
    std::optional<nic_mr> query_client_mr(uint32_t handle) override;
    bool owns_mr(uint32_t handle) const override;

    nic_counters counters() const override;

private:
    verbs_nic(device &dev, const verbs_nic_config &cfg) : m_dev(dev), m_cfg(cfg)
    {
    }
    /*
     * One RC QP. A QP whose device carries fewer inline bytes than
     * inline_size copies an inline WR's payload into `staging` instead:
     * sq_depth slots of inline_size bytes, registered, used in turn. A
     * slot is reused sq_depth staged WRs later, and the engine never has
     * more than sq_depth WRs of a QP outstanding (nic.h, post), so the WR
     * that used it before has completed: the device has read it.
     * Destroyed in reverse: the QP before the memory it may read.
     */
    struct rc_entry {
        uint32_t sq_depth = 0; /* what it was made to hold */
        std::vector<std::byte> staging;
        verbs::mr_ptr staging_mr;
        uint32_t next_staging = 0;
        uint32_t max_inline   = 0; /* what the QP carries inline */
        /* where the device writes atomics' results: sq_depth words,
         * registered at the first atomic and used in turn as the staging
         * slots are (an atomic is signaled, so its completion, which
         * reads the word, is polled before the engine may post sq_depth
         * more WRs on the QP) */
        std::vector<uint64_t> results;
        verbs::mr_ptr results_mr;
        uint32_t next_result = 0;
        /* atomics posted and not completed, in posting order: wr_id and
         * result slot */
        std::deque<std::pair<uint64_t, uint32_t>> atomics;
        verbs::qp_ptr qp;
    };
    rc_entry *entry_of(uint32_t qpn);
    ibv_qp *qp_of(uint32_t qpn) const;
    /* Fills m_wrs[i] (and m_sges[i]) for s: its atomic's result slot in
     * `slot`, else no_slot; false (with why) if s cannot be posted. */
    static constexpr uint32_t no_slot = ~uint32_t{0};
    bool to_wr(rc_entry &qpe, const nic_send &s, size_t i, uint32_t &slot,
               std::string &why);
    /* Fills m_sges[i] and w's gather list and flags for an inline WR;
     * false (with why) if s cannot be posted inline. */
    bool inline_sges(rc_entry &qp, const nic_send &s, size_t i, ibv_send_wr &w,
                     std::string &why);
    /* Fills w's atomic fields and the SGE of its result slot (m_sges[i]),
     * whose index it sets; false (with why) if s cannot be posted. */
    bool atomic_wr(rc_entry &qp, const nic_send &s, size_t i, ibv_send_wr &w,
                   uint32_t &slot, std::string &why);
    /* The completions of wc the engine sees, into out (poll). */
    size_t keep(std::span<const ibv_wc> wc, std::span<nic_completion> out);
    /* The old value of the atomic that completion w ends, if it is one. */
    void take_fetched(const ibv_wc &w, nic_completion &c);

    /* a chain is built here, at most this long per doorbell */
    static constexpr size_t max_chain = 64;
    /* WRs per ibv_post_send: max_chain, or 1 on Soft-RoCE (rxe), whose
     * 6.1 kernel side mishandles chains (see create()) */
    size_t m_per_post = max_chain;

    device &m_dev;
    verbs_nic_config m_cfg;
    uint32_t m_send_budget = 0;
    verbs::comp_channel_ptr m_channel;
    verbs::cq_ptr m_cq;
    std::unique_ptr<receive_pool> m_pool;
    std::unique_ptr<ud_channel> m_ud;
    /* what the engine's own sends carry: a few bytes (rxe mishandles
     * zero-length SEND WITH IMM into an SRQ) */
    std::array<uint64_t, 1> m_control_bytes{};
    verbs::mr_ptr m_control_mr;
    std::unordered_map<uint32_t, rc_entry> m_qps;
    /* fault_silent_qps: the QPs silenced, and how many so far */
    std::unordered_set<uint32_t> m_silent;
    uint32_t m_silenced = 0;
    result<done> silence(uint32_t qpn, ibv_qp *qp);
    std::array<ibv_send_wr, max_chain> m_wrs{};
    std::array<std::array<ibv_sge, 2>, max_chain> m_sges{};
};

} // namespace rvt::agent

#endif
