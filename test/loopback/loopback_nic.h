/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * loopback_nic: the engine's NIC (agent/device/nic.h) in memory, so the engine
 * runs in host unit tests and in a host benchmark without RDMA hardware.
 * Only those link it (test/loopback/librvt_loopback.la); rvtd never does.
 *
 * A loopback_fabric is the wire. Every loopback_nic registers with one and
 * gets a GID and a handshake (UD) QPN from it, so several engines in one
 * process talk as separate nodes; a QP may also be connected to itself
 * (remote QPN = its own), as the engine's loopback peer does.
 *
 * It behaves as verbs does wherever the engine could tell the difference:
 *
 *   QPs      create_qp: INIT; connect_qp: RTS; flush_qp: ERROR. post() on
 *            INIT fails with posted = 0 (ibv_post_send's bad_wr); on ERROR
 *            it is accepted and every WR completes as flushed. A QP holds at
 *            most the sq_depth it was made with (create_qp(d), d at most
 *            options' sq_depth), from post until the completion that retires
 *            them is POLLED (an unsignaled WR is retired by the next
 *            completion of its QP, as on a real send queue); one more fails.
 *   Order    WRs run one after the other per QP. By default a WR runs in
 *            post() (rxe runs sends inline too); with execute_on_post false
 *            it waits for the next poll() of any nic on the fabric.
 *   Peers    looked up when a WR runs, by GID and remote QPN. The remote QP
 *            must be in RTS, connected back to this QP, with the receive
 *            PSN this QP sends with; otherwise (or if the nic or QP is
 *            gone) the WR fails with IBV_WC_RETRY_EXC_ERR, as a real
 *            requester whose packets nobody answers does.
 *   SRQ      SEND_IMM and WRITE_IMM consume the target nic's oldest posted
 *            receive buffer and put a receive completion (wr_id = buffer
 *            index, byte_len, imm) into the TARGET nic's CQ. With no buffer
 *            posted the WR waits (receiver not ready, as with rnr_retry 7)
 *            and is tried again on every poll() and arm() of any nic; the
 *            WRs behind it wait too.
 *   Atomics  fetch-and-add and compare-and-swap run on the 8-byte word at
 *            remote_addr, in memory (copy mode), one WR at a time as
 *            everything here, so they are atomic with respect to each
 *            other; the completion carries the old word (fetched). post()
 *            refuses one with SGEs, inline or unsignaled (verbs_nic does).
 *            A misaligned word, or a target with can_atomic false:
 *            IBV_WC_REM_INV_REQ_ERR; a bad rkey, or one without
 *            IBV_ACCESS_REMOTE_ATOMIC: IBV_WC_REM_ACCESS_ERR (both QPs to
 *            ERROR, as any remote error). In `none` mode fetched is 0.
 *   Inline   an inline_payload WR's bytes are copied in post() (the caller
 *            may overwrite them as soon as it returns) into a store of the
 *            QP's, allocated once (a WQE's room); they check no lkey. One longer than max_inline, or an
 *            inline RDMA READ, is refused by post() (ibv_post_send's
 *            EINVAL).
 *   Errors   a bad lkey, or one that does not cover the SGE:
 *            IBV_WC_LOC_PROT_ERR, this QP to ERROR. A bad rkey, one that
 *            does not cover the range or lacks the access:
 *            IBV_WC_REM_ACCESS_ERR, this QP and its peer to ERROR. A SEND
 *            larger than a receive buffer: IBV_WC_REM_INV_REQ_ERR here,
 *            IBV_WC_LOC_LEN_ERR on the consumed receive, both QPs to ERROR.
 *            A zero-length SGE or RDMA op checks no key (as the IB spec
 *            says).
 *            Every WR behind a failed one completes as flushed. Error and
 *            flush completions are generated signaled or not.
 *   CQ       one FIFO per nic, sends and receives in the order they
 *            happened. Its capacity is send_budget + receive buffers; an
 *            entry beyond it is kept but counted as an overflow (on a real
 *            device the CQ would be lost), and tests assert there is none.
 *   UD       send_datagram puts the message's bytes on the queue of the nic
 *            with that GID and UD QPN; a wrong GID or QPN, or a full queue
 *            (datagram_slots waiting), loses it silently, as UD does.
 *            Each nic's UD QP has a random Q_Key of its own
 *            (wire::conn::random_qkey, as rvtd's): a datagram naming
 *            another is lost BEFORE it takes a slot, as a device drops
 *            it before it takes a receive buffer, and counted in the
 *            receiver's stats().datagrams_qkey_dropped (a test's view:
 *            the agent never sees a device's). A Q_Key with the high bit
 *            set means the sending QP's own (IBA: a "controlled" Q_Key):
 *            the nic's own UD QP's, none for open_ud_qp's QPs. A
 *            datagram arrives with the sending nic's GID and UD QPN as its
 *            source (what a GRH and the completion's src_qp say),
 *            whatever the message claims. open_ud_qp() gives the node
 *            another UD QP, as any process may create one:
 *            send_datagram_from sends from it, and what is sent to it is
 *            lost.
 *   Sleep    event_fd() is an eventfd; arm() is one-shot, like
 *            ibv_req_notify_cq: the first completion or datagram after it
 *            writes the fd.
 *
 * MRs. register_memory puts an MR in the nic's table, as REG_MR in the
 * agent's PD does (the test plays the client). The nic registers two of
 * its own at creation, as verbs_nic does: its control buffer and its
 * receive pool (receive_pool_mr()); owns_mr() names those. For any other
 * handle query_client_mr answers as QUERY_MR does: what the MR was
 * registered with (keys, address, length), and no access flags, which
 * QUERY_MR does not tell; nullopt for its own and for a handle with no
 * MR. Each call is counted (stats().mr_queries).
 *
 * Memory. In `copy` mode the addresses in SGEs and remote_addr are pointers
 * in this process: keys are checked against the nic's MR table
 * (register_memory) and the bytes really move. In `none` mode no WR
 * moves a byte or checks a key (datagrams still carry theirs): that is for
 * the host benchmark, whose clients live in other processes, so their
 * addresses mean nothing here. It is an honest model of the agent's cost:
 * on a real NIC the DMA is done by the device and costs the agent's CPU
 * nothing either.
 *
 * Fault injection, for the engine's failure paths:
 *   hold(qpn, true)       the QP's WRs stay queued, unexecuted, until
 *                         hold(qpn, false): a slow link or a busy peer.
 *                         A flush still completes them at once.
 *   fail_next(qpn, s)     the next WR to run completes with error status
 *                         s (an ibv_wc_status), the QP goes to ERROR and
 *                         the WRs behind it flush; the peer is not told.
 *                         s = IBV_WC_WR_FLUSH_ERR: the error completion is
 *                         lost, the WR completes as flushed with the rest
 *                         (a QP that went to ERROR by itself).
 *   break_silently(qpn)   the QP goes to ERROR and never generates another
 *                         completion, not even for a flush, for WRs queued
 *                         or posted later: rxe's lost completions (issue
 *                         11), which the engine must survive by timeout.
 *   break_late(qpn)       as break_silently, but the completions are only
 *                         late: the flushes of the WRs it held and of
 *                         those posted later are kept, and speak_late()
 *                         puts every kept one into the CQ, whether the QP
 *                         still exists or not: a device that answers after
 *                         the engine gave its WRs up.
 *   drop_datagrams(n)     the next n datagrams this nic sends are lost.
 *   open_ud_qp()          another UD QP on this node (a process's own):
 *                         a fresh QPN of the fabric's.
 *   send_datagram_from(q) a datagram from that QP, not the nic's: a
 *                         process that forges what a datagram says of its
 *                         sender, but cannot forge the source QP; it
 *                         names a Q_Key of its choice, which must be the
 *                         receiver's for it to arrive.
 *
 * Single-threaded, as the engine is. The fabric must outlive its nics (its
 * destructor aborts, naming the mistake, if any is left).
 */
#ifndef RVT_TEST_LOOPBACK_NIC_H
#define RVT_TEST_LOOPBACK_NIC_H

#include "uct/ib/rvt/agent/device/nic.h"
#include "uct/ib/rvt/agent/device/srq_ledger.h"
#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/common/unique_fd.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <map>
#include <vector>

namespace rvt::agent::testing {

enum class memory_mode : uint8_t {
    copy, /* real pointers: keys checked, bytes moved */
    none, /* nothing moved, nothing checked: the benchmark */
};

struct loopback_options {
    uint32_t receive_buffers = 64; /* the SRQ: all posted at creation */
    uint32_t receive_size    = 4096; /* bytes per receive buffer */
    uint32_t sq_depth        = 128; /* WRs per QP, posted and not retired */
    uint32_t send_budget     = 1024; /* CQ capacity minus receive_buffers */
    bool can_read            = true;
    bool can_atomic          = true; /* 64-bit atomics */
    memory_mode memory       = memory_mode::copy;
    bool execute_on_post     = true; /* false: WRs run at the next poll() */
    /* datagrams waiting; more are lost: the device's UD receive queue */
    uint32_t datagram_slots = ud_receive_depth;
    uint32_t max_inline     = 256; /* bytes an inline WR may carry */
};

/* What register_memory returns: verbs' MR handle and keys. */
struct loopback_mr {
    uint32_t handle;
    uint32_t lkey;
    uint32_t rkey;
};

/* For tests to assert on; nic_counters has the rest. */
struct loopback_stats {
    uint64_t ops_executed = 0; /* WRs that ran, successfully or not */
    size_t cq_high_water  = 0; /* most completions waiting at once */
    uint64_t cq_overflows = 0; /* completions beyond the CQ's capacity */
    uint64_t rnr_waits    = 0; /* times a WR found no receive buffer */
    uint64_t mr_queries   = 0; /* query_client_mr calls (QUERY_MRs) */
    /* datagrams to this nic's UD QP that named another Q_Key: lost
     * before they took a slot */
    uint64_t datagrams_qkey_dropped = 0;
};

class loopback_nic;

class loopback_fabric {
public:
    loopback_fabric() = default;
    ~loopback_fabric();
    loopback_fabric(const loopback_fabric &)            = delete;
    loopback_fabric &operator=(const loopback_fabric &) = delete;

    /* Runs every queued WR of every nic that can run now (what poll()
     * and arm() do first). */
    void progress();

private:
    friend class loopback_nic;

    uint32_t next_node();
    void attach(loopback_nic *nic);
    void detach(loopback_nic *nic);
    loopback_nic *find(const gid_bytes &gid) const;
    uint32_t next_qpn();
    uint32_t next_mr();
    /* `nic` has QPs with WRs that may run later (progress() visits only
     * those nics: a fabric of hundreds of nics, rvt_scale_sim's, must not
     * cost every poll a look at each) */
    void has_waiting(loopback_nic *nic);

    std::vector<loopback_nic *> m_nics;
    std::map<gid_bytes, loopback_nic *> m_by_gid;
    std::vector<loopback_nic *> m_with_waiting;
    uint32_t m_next_node = 1;
    uint32_t m_next_qpn  = 0x100; /* never 0 or 1 (QP0, QP1) */
    uint32_t m_next_mr   = 1;
};

class loopback_nic final : public nic {
public:
    explicit loopback_nic(loopback_fabric &fabric,
                          const loopback_options &options = {});
    ~loopback_nic() override;
    loopback_nic(const loopback_nic &)            = delete;
    loopback_nic &operator=(const loopback_nic &) = delete;

    /* nic.h */
    gid_bytes gid() const override;
    uint32_t ud_qpn() const override;
    uint32_t ud_qkey() const override;
    bool can_read() const override;
    bool can_atomic() const override;
    uint32_t sq_depth() const override;
    /* what create_qp made QP `qpn` to hold; none if it has no such QP */
    std::optional<uint32_t> sq_depth_of(uint32_t qpn) const;
    uint32_t send_budget() const override;
    nic_sge control_buffer() const override;
    uint32_t max_inline() const override;
    result<uint32_t> create_qp(uint32_t sq_depth) override;
    result<done> connect_qp(uint32_t qpn, const gid_bytes &gid,
                            uint32_t remote_qpn, uint32_t remote_psn,
                            uint32_t local_psn) override;
    result<done> flush_qp(uint32_t qpn) override;
    void destroy_qp(uint32_t qpn) override;
    /* nic_qp_state::other for a QPN this nic does not have. */
    nic_qp_state query_qp(uint32_t qpn) override;
    result<done> post(uint32_t qpn, std::span<const nic_send> chain,
                      size_t &posted) override;
    size_t poll(std::span<nic_completion> out) override;
    /* Empty for an index outside the pool. */
    std::span<const std::byte>
    receive_data(uint32_t index, uint32_t length) const override;
    /* Fails on an index outside the pool or one already on the SRQ; the
     * indices before it were posted. */
    result<done> repost(std::span<const uint32_t> buffers) override;
    /* A datagram that is lost counts as dropped, not sent. */
    result<done> send_datagram(const wire::conn::message &msg,
                               const gid_bytes &gid, uint32_t qpn,
                               uint32_t qkey) override;
    size_t poll_datagrams(const datagram_fn &deliver, size_t max) override;
    int event_fd() const override;
    bool arm() override;
    void disarm() override;
    /* Returns the handle; fails for a handle that is not registered. */
    result<uint32_t> deregister(uint32_t handle) override;
    /* Counted in stats().mr_queries. */
    std::optional<nic_mr> query_client_mr(uint32_t handle) override;
    bool owns_mr(uint32_t handle) const override;
    nic_counters counters() const override;

    /* The MR table (copy mode). access: IBV_ACCESS_* flags; an RDMA READ
     * needs IBV_ACCESS_LOCAL_WRITE on its local SGEs, remote ops need
     * IBV_ACCESS_REMOTE_WRITE, _READ or _ATOMIC; a gather needs none. */
    loopback_mr register_memory(void *addr, size_t length, int access);

    /* Fault injection (see the header comment); each fails for a QPN this
     * nic does not have. */
    result<done> hold(uint32_t qpn, bool on);
    result<done> fail_next(uint32_t qpn, uint32_t vendor_status);
    result<done> break_silently(uint32_t qpn);
    result<done> break_late(uint32_t qpn);
    size_t speak_late(); /* how many completions it released */
    void drop_datagrams(uint32_t n);
    /* Another UD QP on this node (see the header comment): its QPN. */
    uint32_t open_ud_qp();
    /* As send_datagram, from `src_qpn`: a QP open_ud_qp() gave, or the
     * nic's own; any other QPN fails, as a process cannot send from a QP
     * it does not have. */
    result<done>
    send_datagram_from(uint32_t src_qpn, const wire::conn::message &msg,
                       const gid_bytes &gid, uint32_t qpn, uint32_t qkey);

    /* WRs posted on the QP and not run yet (held, waiting for a receive
     * buffer, or deferred); 0 for an unknown QPN. */
    size_t queued(uint32_t qpn) const;
    /* The QPs connected towards the nic with that GID, in QPN order (this
     * nic's own GID: those connected to themselves): an engine's QPs are
     * its own business, and a test aiming a fault at one peer finds them
     * here. */
    std::vector<uint32_t> qps_to(const gid_bytes &gid) const;
    /* Whether an MR with that handle is registered (not deregistered). */
    bool has_mr(uint32_t handle) const;
    /* The nic's own MR over its receive buffers (the SRQ's memory). */
    loopback_mr receive_pool_mr() const
    {
        return m_pool_mr;
    }
    loopback_stats stats() const;
    const loopback_options &options() const
    {
        return m_options;
    }

private:
    friend class loopback_fabric;

    struct memory_region {
        uintptr_t addr;
        size_t length;
        int access;
    };

    struct queued_wr {
        nic_send wr;
        /* an inline WR's payload: at this offset of its QP's inline_store */
        size_t inline_at = 0;
    };

    struct rc_qp {
        uint32_t qpn;
        uint32_t sq_depth; /* what create_qp made it to hold */
        nic_qp_state state = nic_qp_state::init;
        gid_bytes remote_gid{};
        uint32_t remote_qpn = 0;
        uint32_t send_psn   = 0; /* what this QP sends with */
        uint32_t recv_psn   = 0; /* what it expects from its peer */
        std::deque<queued_wr> queue{}; /* posted, not run yet */
        /* inline payloads, copied at post: sq_depth slots of max_inline
         * bytes used in turn (a slot comes round again only after
         * sq_depth more posts, and the QP holds at most sq_depth WRs, so
         * its last user has run); allocated at the first inline post */
        std::vector<std::byte> inline_store{};
        uint32_t inline_next      = 0;
        uint32_t outstanding      = 0; /* toward sq_depth */
        uint32_t retired_silently = 0; /* freed by the next completion */
        bool held                 = false;
        bool silent               = false; /* break_silently, break_late */
        bool late                 = false; /* break_late: keep completions */
        bool waiting              = false; /* in m_waiting */
        std::optional<uint32_t> fail_next{};
    };

    /* The QP at the other end of a connection. */
    struct peer_ref {
        loopback_nic *nic = nullptr;
        rc_qp *qp         = nullptr;
    };

    /* How one WR ended when it was tried. */
    struct outcome {
        enum {
            success,
            wait,
            error
        } what;
        uint32_t vendor = 0; /* ibv_wc_status */
        peer_ref peer{}; /* set: a remote error, the peer goes to ERROR */
        uint64_t fetched = 0; /* a successful atomic: the old word */
    };

    /* A CQ entry and the send-queue slots polling it frees. */
    struct cq_entry {
        nic_completion c;
        uint32_t frees;
    };

    static uint64_t payload_length(const nic_send &wr);
    rc_qp *find_qp(uint32_t qpn);
    const rc_qp *find_qp(uint32_t qpn) const;
    std::optional<std::string>
    check_post(const rc_qp &qp, const nic_send &wr) const;
    void kick(rc_qp &qp);
    void mark_waiting(rc_qp &qp);
    void run(rc_qp &qp);
    void progress_waiting();
    outcome execute(rc_qp &qp, const queued_wr &q);
    peer_ref connected_peer(const rc_qp &qp) const;
    bool local_ok(const nic_send &wr) const;
    bool remote_ok(const nic_send &wr, uint64_t length, int access) const;
    const memory_region *find_mr(uint32_t key, bool remote) const;
    void gather(const nic_send &wr, std::byte *to) const;
    void payload_to(const rc_qp &qp, const queued_wr &q, std::byte *to) const;
    void scatter(const nic_send &wr, const std::byte *from) const;
    std::optional<uint32_t> take_receive_buffer();
    std::byte *buffer(uint32_t index);
    void to_error(rc_qp &qp);
    void complete(rc_qp &qp, const nic_send &wr, nic_status status,
                  uint32_t vendor, uint64_t fetched = 0);
    void retire(rc_qp &qp, const nic_send &wr, uint64_t fetched);
    outcome atomic(const nic_send &wr, const peer_ref &peer) const;
    void receive_completion(uint32_t qpn, uint32_t index, uint32_t byte_len,
                            uint32_t imm, uint32_t vendor);
    std::string name(uint32_t qpn) const;
    void push(const cq_entry &e);
    void notify();

    loopback_fabric &m_fabric;
    const loopback_options m_options;
    const uint32_t m_node;
    const uint32_t m_ud_qpn;
    const uint32_t m_ud_qkey;
    unique_fd m_event_fd;
    bool m_armed = false;

    std::unordered_map<uint32_t, rc_qp> m_qps;
    std::vector<uint32_t> m_waiting; /* QPs with WRs that may run later */
    std::deque<cq_entry> m_cq;
    std::vector<cq_entry> m_late; /* break_late's, until speak_late() */

    std::vector<std::byte> m_receive_memory;
    std::deque<uint32_t> m_srq; /* posted buffers, oldest first */
    srq_ledger m_on_srq; /* which buffers are in m_srq */

    std::unordered_map<uint32_t, memory_region> m_mrs; /* by handle */
    std::array<std::byte, 16> m_control{};
    loopback_mr m_control_mr{};
    loopback_mr m_pool_mr{};

    struct datagram {
        std::array<std::byte, wire::conn::message_size> bytes;
        datagram_source source; /* the sending nic's GID, its QP */
    };
    std::deque<datagram> m_datagrams;
    uint32_t m_drop_datagrams = 0;
    std::vector<uint32_t> m_other_ud_qps; /* open_ud_qp's */

    nic_counters m_counters;
    loopback_stats m_stats;
};

} // namespace rvt::agent::testing

#endif
