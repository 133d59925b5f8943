/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The entries of a client's rings (ring.h): work requests from a client to
 * its agent, completions from the agent back, and inbound messages (active
 * messages, write notifications, peer and client departures) from the
 * agent. Both cross a trust boundary:
 * the agent copies a work request out of the ring, then validates every
 * field before it touches a QP; the immediate value is never taken from
 * the client but encoded by the agent (imm.h), so a client cannot claim to
 * be another.
 */
#ifndef RVT_COMMON_WORK_H
#define RVT_COMMON_WORK_H

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace rvt {

enum class work_op : uint8_t {
    rdma_write     = 1, /* local -> remote memory, no notification */
    rdma_write_imm = 2, /* ... and the remote agent is told (imm kind write) */
    send_am        = 3, /* SEND WITH IMM into the remote node's receive pool */
    rdma_read      = 4, /* remote -> local memory, where the device reads */
    /* RDMA atomics on the 8-byte word at remote_addr (8-byte aligned),
     * where the agent's device does them (wire::agent_feature_atomic64).
     * length is 8; operand (and compare) carry the values, the result
     * comes back in the completion's `value`: no local memory (local_addr
     * and head_addr hold the operands; lkey, head_lkey and head_length
     * are zero), and never work_inline. The word is changed atomically
     * with respect to every other device atomic on it, not to the CPU
     * or to RDMA WRITEs. */
    atomic_fetch_add = 5, /* word += operand */
    atomic_cswap     = 6, /* if word == compare: word = operand */
};
inline constexpr uint8_t work_op_limit = 7;

inline constexpr bool is_atomic(work_op op)
{
    return op == work_op::atomic_fetch_add || op == work_op::atomic_cswap;
}

/* The size of the word atomics work on. */
inline constexpr uint32_t atomic_size = 8;

enum work_flags : uint8_t {
    work_signaled = 1u << 0, /* the client wants a completion */
    work_fence    = 1u << 1, /* wait for earlier reads on this endpoint */
    /* the payload is the first `length` bytes of the work-data slot of
     * this entry's ring position (shm_layout.h), not client memory:
     * local_addr, lkey and the head segment are zero. For send_am,
     * rdma_write and rdma_write_imm; length at most the slot size (and
     * the largest AM for send_am). The agent posts it as an inline send. */
    work_inline = 1u << 2,
    /* rdma_write_imm from client memory only (never inline): the agent
     * may split it over the K lanes of its peer, as parts of at least
     * stripe_align bytes (lanes.h, "Striping"). The client still gets
     * one completion, and the target's notice (the immediate) comes with
     * the last part, once every other part has landed. The UCT module
     * sets it on a put_zcopy of UCX_RVT_STRIPE_MIN bytes or more. */
    work_stripe = 1u << 3,
};

/* Striped parts are multiples of this many bytes (the last one takes the
 * rest): whole pages of the source and the target buffer per part where
 * they are page-aligned. */
inline constexpr uint32_t stripe_align = 4096;

/*
 * Client to agent. The client fills the entry (and, for work_inline, its
 * work-data slot) and then publishes it (ring.h: a release store of the
 * head); the agent copies the entry out, and the slot's payload into the
 * op it keeps, before it frees the position (a release store of the
 * tail), so the client may reuse both as soon as the tail moves.
 *
 * Every work request gets exactly one completion, in ring order per
 * endpoint (source client, peer, destination client) for the requests the
 * agent posts (an `invalid` or not-yet-posted `peer_failed` one completes
 * at once, possibly before earlier ones still in flight): that is what lets
 * the client bound its outstanding requests by its completion ring's
 * capacity, so the agent never has to hold a completion it cannot deliver.
 */
struct work_request {
    uint64_t wr_id; /* the client's cookie, echoed in its completion */
    uint8_t op; /* work_op */
    uint8_t flags; /* work_flags */
    uint8_t am_id; /* send_am: UCT AM id */
    /* which attachment of dst_client the request is for (imm.h: the
     * generation from its UCT address); the remote agent delivers an AM
     * or a write's notice only to that one */
    uint8_t dst_generation;
    uint32_t peer; /* remote node, as numbered by this agent */
    uint32_t dst_client; /* client index on the remote agent */
    uint32_t length; /* bytes */
    union {
        uint64_t local_addr; /* the client's address, inside its MR; 0 inline */
        uint64_t operand; /* atomics: the value added, or swapped in */
    };
    uint32_t lkey; /* of that MR (registered in the agent's PD); 0 inline */
    uint32_t rkey; /* rdma ops: the remote MR */
    uint64_t remote_addr; /* rdma ops */
    /* send_am only: an optional first gather segment, sent before
     * local_addr..+length in the same SEND (UCT's am_zcopy header, copied
     * by the client into its own registered memory); all zero: none. The
     * message (head_length + length) is at most the agent's max AM size. */
    union {
        uint64_t head_addr;
        uint64_t compare; /* atomic_cswap: the value expected */
    };
    uint32_t head_lkey;
    uint32_t head_length;
};
static_assert(sizeof(work_request) == 64, "one cache line per request");
static_assert(offsetof(work_request, local_addr) == 24);
static_assert(offsetof(work_request, remote_addr) == 40);
static_assert(offsetof(work_request, head_addr) == 48);
static_assert(offsetof(work_request, head_length) == 60);
static_assert(offsetof(work_request, operand) == 24);
static_assert(offsetof(work_request, compare) == 48);
static_assert(std::is_trivially_copyable_v<work_request> &&
              std::is_standard_layout_v<work_request>);

enum class completion_status : uint32_t {
    success     = 0,
    invalid     = 1, /* the request failed validation; not posted */
    failed      = 2, /* posted, and the device reported an error */
    peer_failed = 3, /* the connection to the peer was lost for good */
    /* refused, not posted: the client's share of its agent is used up
     * (detail: which bound, agent/engine/client_share.h share_bound) */
    no_resource = 4,
};

struct completion {
    uint64_t wr_id; /* from the request */
    uint32_t status; /* completion_status */
    uint32_t detail; /* ibv_wc_status when failed; the bound when
                        no_resource; else zero */
    uint32_t length; /* bytes moved */
    uint32_t peer; /* from the request */
    /* atomics that succeeded: the remote word before the operation (what
     * the device fetched, in host order); zero otherwise. The client's
     * result buffer is its own, unregistered memory, which the agent
     * cannot write, so the value travels here. */
    uint64_t value;
};
static_assert(sizeof(completion) == 32);
static_assert(offsetof(completion, value) == 24);
static_assert(std::is_trivially_copyable_v<completion> &&
              std::is_standard_layout_v<completion>);

enum class inbound_kind : uint8_t {
    am          = 1, /* an active message; its bytes are in the entry's slot */
    write       = 2, /* an RDMA WRITE WITH IMM landed in our memory */
    peer_failed = 3, /* the agent gave up on `peer`: its endpoints are dead */
    /* one client of `peer` is gone: src_client (its index there) in
     * `generation`; endpoints to it are dead, and work for it completes
     * as peer_failed (engine.h, "Departed clients") */
    client_gone = 4,
};
inline constexpr uint8_t inbound_kind_limit = 5;

/*
 * Agent to client. An active message's bytes are in the data slot with the
 * same ring position as the entry (shm_layout: inbound_data_offset +
 * position * inbound_slot_size); they stay valid until the client releases
 * the entry (ring_consumer::release), so the client reads them in place.
 */
struct inbound_message {
    uint8_t kind; /* inbound_kind */
    uint8_t am_id; /* am */
    uint8_t generation; /* client_gone: of the departed client */
    uint8_t reserved0; /* zero */
    uint32_t peer; /* the sending node, as numbered by this agent */
    /* write: the sender's client index on its agent; client_gone: the
     * departed client's index on its agent */
    uint32_t src_client;
    uint32_t length; /* am: bytes in the slot; write: bytes written */
    uint32_t imm; /* the immediate as received, host order (imm.h) */
    uint32_t reserved[3];
};
static_assert(sizeof(inbound_message) == 32);
static_assert(std::is_trivially_copyable_v<inbound_message> &&
              std::is_standard_layout_v<inbound_message>);

} // namespace rvt

#endif
