/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine's one door to the device. Everything the data path asks of
 * RDMA hardware goes through this interface: RC QPs by number (create,
 * connect, flush, destroy, query), a chain of send work requests posted
 * with one doorbell, completions polled in batches, the node's receive
 * buffers (the SRQ) re-posted in batches, the handshake datagrams (the UD
 * QP), the completion event fd for sleeping, and deregistering a client's
 * MR by handle.
 *
 * Two implementations:
 *   verbs_nic     (verbs_nic.h) libibverbs on a real device: the product,
 *                 the only one rvtd can ever use.
 *   loopback_nic  (test/loopback/loopback_nic.h) in memory, for the engine's
 *                 host tests and the host benchmark; it is not linked into
 *                 rvtd.
 *
 * Every call is made from the engine's one thread. Nothing here knows
 * clients, peers or lanes: QPs are numbers, work requests carry the
 * engine's wr_id, and completions come back with it.
 */
#ifndef RVT_AGENT_NIC_H
#define RVT_AGENT_NIC_H

#include "uct/ib/rvt/common/conn_wire.h"
#include "uct/ib/rvt/common/result.h"

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

namespace rvt::agent {

using gid_bytes = std::array<uint8_t, 16>;

/* One gather entry: memory registered in the agent's PD. */
struct nic_sge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
};

enum class nic_opcode : uint8_t {
    rdma_write,
    rdma_write_imm,
    send_imm,
    rdma_read,
    /* 64-bit atomics on the word at remote_addr (8-byte aligned): no
     * SGEs, always signaled; the nic gives the device a result buffer of
     * its own and returns the word's old value in the completion
     * (nic_completion::fetched) */
    atomic_fetch_add,
    atomic_cmp_swp,
};

/* Whether op is one of the atomics above (common/work.h's is_atomic is
 * the same question of a client's work_op). */
inline constexpr bool is_atomic(nic_opcode op)
{
    return op == nic_opcode::atomic_fetch_add ||
           op == nic_opcode::atomic_cmp_swp;
}

/*
 * A send work request as the engine builds it.
 *
 * Inline: with `inline_payload` set, the SGEs name bytes in the agent's
 * own memory (their lkeys are ignored), at most max_inline() of them in
 * all, and the nic copies them before post() returns: the engine may
 * reuse that memory at once, whatever becomes of the WR. That is what a
 * device's inline send is (the CPU writes the bytes into the WQE, and the
 * device reads no payload by DMA); a nic whose device carries fewer
 * inline bytes copies them into registered memory of its own instead,
 * which stays unchanged until the WR completes.
 */
struct nic_send {
    uint64_t wr_id; /* below 2^63: the top bit is the nic's own */
    nic_opcode opcode;
    bool signaled; /* a completion is generated; an unsignaled WR that
                      succeeds completes silently, with the next completion
                      of its QP, and holds its send queue slot until then;
                      a WR that fails or is flushed always completes */
    bool fence; /* wait for earlier RDMA READs of the QP */
    bool inline_payload; /* see above; not for rdma_read */
    uint8_t num_sge;
    std::array<nic_sge, 2> sge;
    uint64_t remote_addr; /* rdma ops */
    uint32_t rkey; /* rdma ops */
    uint32_t imm; /* _imm ops, host order (imm.h) */
    uint64_t compare_add; /* atomic_fetch_add: added; atomic_cmp_swp:
                             the value compared with */
    uint64_t swap; /* atomic_cmp_swp: the value swapped in */
};

enum class nic_status : uint8_t {
    success,
    flushed, /* the QP was in the error state: the WR never ran */
    error, /* anything else; `vendor` says what */
};

/* The device's status code of a WR that never ran (IBV_WC_WR_FLUSH_ERR,
 * checked in verbs_nic.cc), for completions the engine makes itself. */
inline constexpr uint32_t flushed_vendor_status = 5;
/* The device's word for one of its status codes (ibv_wc_status_str). */
std::string vendor_status_text(uint32_t vendor);

struct nic_completion {
    uint64_t wr_id; /* sends: the engine's; receives: the buffer index */
    uint32_t qpn;
    uint32_t byte_len; /* receives */
    uint32_t imm; /* host order, when has_imm */
    bool has_imm;
    bool receive; /* a receive from the SRQ (else a send's completion) */
    nic_status status;
    uint32_t vendor; /* the device's status code (ibv_wc_status) */
    /* a successful atomic: the remote word before the operation, host
     * order; zero otherwise */
    uint64_t fetched;
};

enum class nic_qp_state : uint8_t {
    reset,
    init,
    rtr,
    rts,
    error,
    other
};

/* What an RC QP is configured with (rvtd's options). */
struct rc_qp_params {
    /* send WRs per QP, at most (nic::create_qp): 127, not 128, since rxe
     * rounds a queue up to a power of two of depth + 1 slots (127: 68 KiB,
     * 128: 132 KiB; docs/performance.md, "The device side") */
    uint32_t sq_depth = 127;
    /* 4.096 us * 2^18 = 1.07 s per try: UCX rc's own default
     * (UCX_RC_TIMEOUT=1.0s), so a shared QP retransmits no sooner than
     * rc_verbs' QPs do; the agents' keepalives, not the QPs' retries, find
     * a dead link (traffic.sh). A starved receiver (the emulated testbed,
     * any busy node) looks lost to a short timeout: the sender
     * retransmits, and rxe (6.1) sometimes ends a busy shared QP with
     * "remote invalid request" (a receive error at the responder) after
     * such retransmissions: 251 failed ops in one 3x4 run at 14 (67 ms),
     * and at 16 (268 ms) one connection lost in 4 pairs of 256 KiB puts
     * on a loaded host, of 2 such runs. In one boot, 4 pairs of 400 x 256
     * KiB puts (rxe hw_counters): 192 retransmissions and 18896
     * duplicates at 16, 34 and 2958 at 18 (2026-11-25). rvtd's --qp-timeout sets it. */
    uint8_t timeout     = 18;
    uint8_t retry_count = 7;
    uint8_t rnr_retry   = 7; /* 7: retry forever on receiver-not-ready */
    uint8_t min_rnr     = 12; /* 0.64 ms */
    uint8_t rd_atomic   = 4; /* outstanding RDMA READs each way */
    /* inline payload bytes asked of each QP (cap.max_inline_data); a
     * device that refuses gets a QP without, and the nic stages */
    uint32_t max_inline = 0;
};

/* An MR in the agent's PD, as the device tells of it. */
struct nic_mr {
    uint32_t handle;
    uint32_t lkey;
    uint32_t rkey;
    uint64_t addr; /* its iova: what REG_MR was given as the address */
    uint64_t length;
};

/* Where a handshake datagram came from, as the receiving device tells
 * it: the packet's source GID (the GRH's SGID; RoCE v2 over IPv4: the IP
 * source address, ud_channel.h, grh_source_gid) and the UD QP that sent
 * it (the completion's src_qp, which the sending device writes from the
 * QP the process posted on: a process can send only from QPs of its own,
 * and never from another process's, such as an agent's). */
struct datagram_source {
    gid_bytes gid{};
    uint32_t qpn = 0;

    friend auto
    operator<=>(const datagram_source &, const datagram_source &) = default;
};

/* Handshake datagrams that may wait in the UD QP's receive queue for the
 * engine to take them (a pass takes engine_config::datagrams_per_pass);
 * the device drops what comes while all are taken. 512 of 1064 bytes (the
 * GRH and the datagram) each: about 0.5 MiB registered. Only a sender who
 * knows the agent's address (its Q_Key) can fill them. */
inline constexpr uint32_t ud_receive_depth = 512;

struct nic_counters {
    uint32_t receive_buffers = 0; /* in the pool */
    uint32_t receives_posted = 0; /* of those, on the SRQ now */
    /* completions for a buffer not on the SRQ, dropped, and reposts of
     * one on it, skipped (srq_ledger.h): a device's fault, counted */
    uint64_t receives_extra     = 0;
    uint64_t reposts_refused    = 0;
    uint64_t datagrams_sent     = 0;
    uint64_t datagrams_received = 0;
    uint64_t datagrams_dropped  = 0;
};

class nic {
public:
    virtual ~nic() = default;

    /* Identity: where peers reach this agent (GID, handshake QPN, and
     * that QP's Q_Key: 31 random bits of this agent run,
     * wire::qkey_valid, which a datagram to it must name). */
    virtual gid_bytes gid() const    = 0;
    virtual uint32_t ud_qpn() const  = 0;
    virtual uint32_t ud_qkey() const = 0;
    /* Whether QPs may do RDMA READ (responder resources exist). */
    virtual bool can_read() const = 0;
    /* Whether QPs may do the atomic opcodes (the device's atomic_cap). */
    virtual bool can_atomic() const = 0;
    /* Send WRs an RC QP holds (posted and not yet completed), at most:
     * create_qp may make one shallower. */
    virtual uint32_t sq_depth() const = 0;
    /* Sends that may be outstanding (signaled or not) without the
     * completion queue overflowing, receives accounted for. */
    virtual uint32_t send_budget() const = 0;
    /* A few bytes of registered memory the engine's own sends (keepalives)
     * carry. */
    virtual nic_sge control_buffer() const = 0;
    /* The most payload bytes an inline_payload WR may carry (nic_send). */
    virtual uint32_t max_inline() const = 0;

    /* RC QPs, on the shared CQ and SRQ. create: INIT, remote write and
     * read allowed, holding sq_depth send WRs (1 to sq_depth()); connect:
     * RTR then RTS towards (gid, remote_qpn), the receive PSN is the
     * peer's send PSN; flush: to ERROR, so posted work completes as
     * flushed. */
    virtual result<uint32_t> create_qp(uint32_t sq_depth) = 0;
    virtual result<done> connect_qp(uint32_t qpn, const gid_bytes &gid,
                                    uint32_t remote_qpn, uint32_t remote_psn,
                                    uint32_t local_psn) = 0;
    virtual result<done> flush_qp(uint32_t qpn)         = 0;
    /* Its WRs not yet completed vanish; completions already in the CQ
     * for it may still be polled. */
    virtual void destroy_qp(uint32_t qpn)       = 0;
    virtual nic_qp_state query_qp(uint32_t qpn) = 0;

    /* Posts `chain` on QP `qpn` with one doorbell. On failure, the first
     * `posted` WRs were accepted and the rest were not. The engine never
     * has more WRs of a QP outstanding (posted, and not yet retired by a
     * polled completion) than the QP was made to hold. */
    virtual result<done>
    post(uint32_t qpn, std::span<const nic_send> chain, size_t &posted) = 0;

    /* Up to out.size() completions, sends and receives mixed, in CQ
     * order; 0 only when the CQ is empty (the engine then forgets the
     * QPs it destroyed: engine.h, m_peer_by_qpn), so a nic that drops
     * some completions polls on while it kept none. */
    virtual size_t poll(std::span<nic_completion> out) = 0;

    /* The bytes a completed receive left in buffer `index`. A receive
     * completion of any status has taken its buffer off the SRQ: it goes
     * back only through repost(). */
    virtual std::span<const std::byte>
    receive_data(uint32_t index, uint32_t length) const = 0;
    /* Gives buffers back to the SRQ, with one doorbell. */
    virtual result<done> repost(std::span<const uint32_t> buffers) = 0;

    /* Handshake datagrams: one out to the UD QP (gid, qpn) whose Q_Key is
     * `qkey` (a datagram naming another is dropped by the receiving
     * device, unseen; a failure is for the log: the handshake retries),
     * and up to `max` of those that arrived (the rest wait for the next
     * call), still to be parsed, with where each came from
     * (datagram_source: what the network and the sending device set, not
     * what the datagram says of itself); returns how many. */
    using datagram_fn = std::function<void(std::span<const std::byte>,
                                           const datagram_source &source)>;
    virtual result<done> send_datagram(const wire::conn::message &msg,
                                       const gid_bytes &gid, uint32_t qpn,
                                       uint32_t qkey)                     = 0;
    virtual size_t poll_datagrams(const datagram_fn &deliver, size_t max) = 0;

    /* Sleeping: fd is readable once arm() was called and a completion or
     * datagram arrived; one event per arm(), as ibv_req_notify_cq. arm()
     * false: something may already be there (poll first). disarm() after
     * waking. */
    virtual int event_fd() const = 0;
    virtual bool arm()           = 0;
    virtual void disarm()        = 0;

    /* Deregisters a client's MR by its handle in the agent's PD; returns
     * the handle. */
    virtual result<uint32_t> deregister(uint32_t handle) = 0;
    /* A client's MR in the agent's PD, by its handle: nullopt when no MR
     * has that handle, or it is one of the agent's own. How the agent
     * checks an MR a client announces (mr_registry.h, "Announcements")
     * and finds one a dead client registered and never announced
     * ("Intents"). QUERY_MR on a device; it tells no access flags. */
    virtual std::optional<nic_mr> query_client_mr(uint32_t handle) = 0;
    /* Whether `handle` is one of the MRs the nic registered itself (the
     * receive pool, the UD channel's, control and staging buffers). */
    virtual bool owns_mr(uint32_t handle) const = 0;

    virtual nic_counters counters() const = 0;
};

} // namespace rvt::agent

#endif
