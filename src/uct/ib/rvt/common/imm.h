/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvt immediate encoding: the 32-bit immediate of every SEND WITH IMM and
 * RDMA WRITE WITH IMM that crosses a shared RC QP.
 *
 * Many processes share one QP, so the receiving agent cannot tell from the
 * QP alone whom an inbound message is for. The immediate says it: its top
 * bits are the destination client index on the receiving agent (as in
 * Intel's rv and PSM3), the next bits say what the message is for, and the
 * rest is owned by that kind. This header is the only place in rvt that
 * shifts or masks immediate bits.
 *
 *   31             23    20 19                                   0
 *  +----------------+-------+--------------------------------------+
 *  |   dst client   | kind  |         kind-specific payload        |
 *  |    (9 bits)    |(3 b.) |              (20 bits)               |
 *  +----------------+-------+--------------------------------------+
 *
 *  kind am      (SEND WITH IMM, an active message for dst client)
 *                   payload: [19:14] UCT AM id, [13:6] dst generation,
 *                   [5:0] zero
 *  kind write   (RDMA WRITE WITH IMM into dst client's registered memory)
 *                   payload: [19:11] source client index on the sending
 *                   agent, [10:3] dst generation, [2:0] zero
 *  kind control (agent to agent: keepalive, back-pressure, departures)
 *                   dst client is zero; payload: [19:17] control opcode,
 *                   [16:8] subject client (pause, resume, client_gone: a
 *                   client of the agent that sends it; gone_heard: one
 *                   of the agent that receives it; zero for keepalive),
 *                   [7:0] subject generation (client_gone, gone_heard;
 *                   zero for the others)
 *
 * A client index is reused once its holder has detached, so an index
 * alone does not name a process: each attachment of an index has a
 * generation (the agent counts attaches per index; the client learns its
 * generation when it attaches and publishes it in its UCT address), and
 * a message names the generation it was meant for. The receiving agent
 * delivers only to that generation; a message for another one is dropped
 * and its sender told, once, with client_gone (engine.h, "Departed
 * clients"). The field is the low generation_bits of the agent's count,
 * so it wraps after 256 attaches of one index: the agent's quarantine of
 * a detached index (attach_server.h) bounds how soon that can happen.

 * Kind 0 is never valid, so an all-zero immediate (a missing or forgotten
 * value) is rejected instead of being delivered to client 0. Reserved bits
 * must be zero on the wire and are checked on receipt, so a peer speaking a
 * different layout is detected rather than misrouted.
 *
 * On the wire the immediate is big-endian (verbs' __be32 imm_data):
 * to_wire()/from_wire() convert, everything else works in host order.
 */
#ifndef RVT_COMMON_IMM_H
#define RVT_COMMON_IMM_H

#include <arpa/inet.h>

#include <cstdint>
#include <optional>

namespace rvt::imm {

/* Field widths and positions; everything below is derived from these. */
inline constexpr unsigned client_bits  = 9;
inline constexpr unsigned kind_bits    = 3;
inline constexpr unsigned payload_bits = 20;

inline constexpr unsigned payload_shift = 0;
inline constexpr unsigned kind_shift    = payload_shift + payload_bits;
inline constexpr unsigned client_shift  = kind_shift + kind_bits;

static_assert(client_bits + kind_bits + payload_bits == 32,
              "the immediate fields must fill exactly 32 bits");

/* Largest number of clients one agent can route to (indices 0..N-1). */
inline constexpr uint32_t max_clients = 1u << client_bits;

/* UCT allows AM ids 0..63 (UCT_AM_ID_BITS = 6). */
inline constexpr unsigned am_id_bits  = 6;
inline constexpr uint32_t max_am_ids  = 1u << am_id_bits;
inline constexpr unsigned am_id_shift = payload_bits - am_id_bits;

/* Which attachment of the destination index a message is for. */
inline constexpr unsigned generation_bits = 8;
inline constexpr uint32_t max_generations = 1u << generation_bits;

/* An AM's generation follows its id. */
inline constexpr unsigned am_generation_shift = am_id_shift - generation_bits;

/* A write carries the sender's client index, for per-source accounting,
 * then the destination's generation. */
inline constexpr unsigned src_client_shift       = payload_bits - client_bits;
inline constexpr unsigned write_generation_shift = src_client_shift -
                                                   generation_bits;

inline constexpr unsigned control_op_bits  = 3;
inline constexpr unsigned control_op_shift = payload_bits - control_op_bits;
/* pause, resume and client_gone name a client of the agent that sends
 * them, gone_heard one of the agent that receives it (control_op);
 * client_gone and gone_heard with that client's generation */
inline constexpr unsigned subject_shift = control_op_shift - client_bits;
inline constexpr unsigned subject_generation_shift = subject_shift -
                                                     generation_bits;

static_assert(am_id_bits + generation_bits <= payload_bits,
              "an AM's id and generation must fit the payload");
static_assert(client_bits + generation_bits <= payload_bits,
              "a write's source and generation must fit the payload");
static_assert(control_op_bits + client_bits + generation_bits == payload_bits,
              "a control's opcode, subject and generation fill the payload");

enum class kind : uint8_t {
    invalid = 0, /* never sent: catches all-zero immediates */
    am      = 1,
    write   = 2,
    control = 3,
};
inline constexpr uint8_t kind_limit = 4; /* first unused kind value */
static_assert(kind_limit <= (1u << kind_bits), "kind values must fit");

enum class control_op : uint8_t {
    keepalive = 1,
    /* back-pressure (engine.h): stop / go on sending to the subject, a
     * client of the agent that sends the message */
    pause  = 2,
    resume = 3,
    /* the subject, a client of the agent that sends the message, in that
     * generation, is gone: a message for it arrived after it detached
     * (engine.h, "Departed clients") */
    client_gone = 4,
    /* the answer to client_gone: the agent that sends it has marked the
     * subject, a client of the agent that receives it, in that
     * generation, gone (departure_barrier.h) */
    gone_heard = 5,
};
inline constexpr uint16_t control_op_limit = 6;
/* Whether an opcode names a subject client. */
constexpr bool has_subject(control_op op)
{
    return op == control_op::pause || op == control_op::resume ||
           op == control_op::client_gone || op == control_op::gone_heard;
}
/* Whether an opcode names the subject's generation. */
constexpr bool has_generation(control_op op)
{
    return op == control_op::client_gone || op == control_op::gone_heard;
}
static_assert(control_op_limit <= (1u << control_op_bits),
              "control opcodes must fit");

namespace detail {
constexpr uint32_t mask(unsigned bits)
{
    return bits >= 32 ? ~0u : (1u << bits) - 1u;
}

constexpr uint32_t field(uint32_t value, unsigned shift, unsigned bits)
{
    return (value >> shift) & mask(bits);
}

constexpr uint32_t place(uint32_t value, unsigned shift, unsigned bits)
{
    return (value & mask(bits)) << shift;
}

constexpr uint32_t header(uint32_t dst_client, kind k)
{
    return place(dst_client, client_shift, client_bits) |
           place(static_cast<uint32_t>(k), kind_shift, kind_bits);
}
} // namespace detail

/* What a received immediate says, after validation. */
struct decoded {
    kind what;
    uint32_t dst_client; /* am, write */
    uint8_t am_id; /* am */
    uint32_t src_client; /* write */
    control_op op; /* control */
    uint32_t subject; /* control pause, resume, client_gone, gone_heard */
    /* am, write: the destination's; control client_gone, gone_heard: the
     * subject's */
    uint8_t generation;

    friend bool operator==(const decoded &, const decoded &) = default;
};

/*
 * Encoders return std::nullopt when an argument does not fit its field:
 * callers validate indices at attach/connect time, so a nullopt here is a
 * programming error they turn into a failed operation, never a wrapped
 * value that would reach the wrong process.
 */
constexpr std::optional<uint32_t>
encode_am(uint32_t dst_client, uint32_t dst_generation, uint32_t am_id)
{
    if (dst_client >= max_clients || dst_generation >= max_generations ||
        am_id >= max_am_ids) {
        return std::nullopt;
    }
    return detail::header(dst_client, kind::am) |
           detail::place(am_id, am_id_shift, am_id_bits) |
           detail::place(dst_generation, am_generation_shift, generation_bits);
}

constexpr std::optional<uint32_t>
encode_write(uint32_t dst_client, uint32_t dst_generation, uint32_t src_client)
{
    if (dst_client >= max_clients || dst_generation >= max_generations ||
        src_client >= max_clients) {
        return std::nullopt;
    }
    return detail::header(dst_client, kind::write) |
           detail::place(src_client, src_client_shift, client_bits) |
           detail::place(dst_generation, write_generation_shift,
                         generation_bits);
}

/* subject: for pause, resume, client_gone and gone_heard, a client index;
 * else it must be 0. generation: for client_gone and gone_heard, the
 * subject's; else 0. */
constexpr std::optional<uint32_t>
encode_control(control_op op, uint32_t subject = 0, uint32_t generation = 0)
{
    auto raw = static_cast<uint32_t>(op);
    if (raw == 0 || raw >= control_op_limit || subject >= max_clients ||
        generation >= max_generations || (!has_subject(op) && subject != 0) ||
        (!has_generation(op) && generation != 0)) {
        return std::nullopt;
    }
    return detail::header(0, kind::control) |
           detail::place(raw, control_op_shift, control_op_bits) |
           detail::place(subject, subject_shift, client_bits) |
           detail::place(generation, subject_generation_shift, generation_bits);
}

/* The generation field of an attachment: the low bits of the agent's
 * count of attaches of that index. */
constexpr uint8_t wire_generation(uint32_t attach_count)
{
    return static_cast<uint8_t>(attach_count & detail::mask(generation_bits));
}

/*
 * Validates everything a peer could get wrong: the kind, reserved bits,
 * and (for control) the opcode. Client indices are in range by
 * construction; whether the index names a live client is the router's
 * question, not the encoding's.
 */
constexpr std::optional<decoded> decode(uint32_t value)
{
    using detail::field;
    using detail::mask;

    const uint32_t k       = field(value, kind_shift, kind_bits);
    const uint32_t client  = field(value, client_shift, client_bits);
    const uint32_t payload = field(value, payload_shift, payload_bits);

    decoded d{};
    d.dst_client = client;
    switch (static_cast<kind>(k)) {
    case kind::am:
        if ((payload & mask(am_generation_shift)) != 0) {
            return std::nullopt;
        }
        d.what  = kind::am;
        d.am_id = static_cast<uint8_t>(field(payload, am_id_shift, am_id_bits));
        d.generation = static_cast<uint8_t>(
                field(payload, am_generation_shift, generation_bits));
        return d;
    case kind::write:
        if ((payload & mask(write_generation_shift)) != 0) {
            return std::nullopt;
        }
        d.what       = kind::write;
        d.src_client = field(payload, src_client_shift, client_bits);
        d.generation = static_cast<uint8_t>(
                field(payload, write_generation_shift, generation_bits));
        return d;
    case kind::control: {
        const uint32_t op = field(payload, control_op_shift, control_op_bits);
        const uint32_t subject    = field(payload, subject_shift, client_bits);
        const uint32_t generation = field(payload, subject_generation_shift,
                                          generation_bits);
        if (client != 0 || (payload & mask(subject_generation_shift)) != 0 ||
            op == 0 || op >= control_op_limit) {
            return std::nullopt;
        }
        const auto o = static_cast<control_op>(op);
        if ((!has_subject(o) && subject != 0) ||
            (!has_generation(o) && generation != 0)) {
            return std::nullopt;
        }
        d.what       = kind::control;
        d.op         = o;
        d.subject    = subject;
        d.generation = static_cast<uint8_t>(generation);
        return d;
    }
    default:
        return std::nullopt;
    }
}

/* verbs carries imm_data big-endian. */
inline uint32_t to_wire(uint32_t host_value)
{
    return htonl(host_value);
}
inline uint32_t from_wire(uint32_t wire_value)
{
    return ntohl(wire_value);
}

} // namespace rvt::imm

#endif
