/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The connection handshake between agents: the UD datagrams with which two
 * rvtd instances (one per node, same uid and job key) agree on K shared RC
 * queue pairs (docs/design.md part 6).
 *
 *   agent A (active)                          agent B (passive)
 *     | request: seq, A's K (QPN, PSN),  -->   |  checks the credential,
 *     |   A's AM size, a credential            |  job key, uid, K, AM size;
 *     |   (resent with backoff, same seq)      |  B's QPs to RTR/RTS
 *     |   <-- reply: ack_seq = A's seq,        |
 *     |       accepted + B's K (QPN, PSN)      |
 *     |       or refused with a status code,   |
 *     |       and B's credential               |
 *   A's QPs to RTR/RTS; both connected.
 *
 *     | disconnect  -->                        |  (agent closing on purpose)
 *
 * One fixed-size message serves all three types, so every datagram is
 * exactly `message_size` (1024) bytes, the smallest RoCE path MTU; the
 * parser refuses any other length.
 * Which fields mean something depends on the type (see `message`); the
 * ones that do not must be zero, so a peer speaking another layout is
 * refused with a reason rather than misread.
 *
 * Sequence numbers: `seq` numbers the sender's connection attempts within
 * its instance (its agent run); a retransmission reuses the seq and the
 * same QPs, so a receiver can tell a duplicate (answer it again: the reply
 * was lost) from a new attempt (the peer lost its connection) from a stale
 * datagram (ignore). A reply carries the request's seq in `ack_seq` and the
 * replier's own latest attempt in `seq`: when both agents sent requests at
 * once, that tells the requester which of the replier's requests are now
 * superseded (agent/peers/peer_connection.h).
 *
 * A reply names the requester's uid and job key, not the replier's: they
 * are equal when it accepts, and a refused requester learns nothing it
 * did not send. Only the refusals about K and the AM size carry the
 * replier's value, so that both logs name both values.
 *
 * Credentials (`auth`): every datagram carries one of the sender's auth
 * kind (agent/peers/peer_auth.h). It vouches for binding_digest(): the whole
 * message but the credential itself, and the GID it is sent to, so it
 * cannot be moved to another message or another node. `none` carries no
 * credential; `munge` a MUNGE credential (text) whose payload is that
 * digest (agent/peers/peer_auth.h: binding_digest); `secret` an HMAC-SHA256 of it under the job's secret, fresh by
 * `issued` (the sender's clock) and a random `nonce`.
 *
 * Byte order: the datagram crosses nodes, but rvt is built for and run on
 * little-endian hosts only (asserted below), so fields are little-endian
 * host order on the wire. A big-endian port would add conversions here.
 * QPNs and PSNs are 24-bit quantities in 32-bit fields, top byte zero.
 */
#ifndef RVT_COMMON_CONN_WIRE_H
#define RVT_COMMON_CONN_WIRE_H

#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/result.h"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

namespace rvt::wire::conn {

static_assert(std::endian::native == std::endian::little,
              "the connection datagrams are little-endian host order");

inline constexpr uint32_t magic = 0x43545652; /* "RVTC" */
/* 2: the immediates carry the destination's generation (imm.h);
 * 3: 1024 bytes, with the AM size and a credential;
 * 4: the sender says its handshake Q_Key (sender::ud_qkey), and the
 * credential has 8 bytes fewer for it */
inline constexpr uint16_t protocol_version = 4;
inline constexpr size_t message_size       = 1024;
inline constexpr size_t gid_size           = 16;
/* K, the number of shared RC QPs per pair of agents: 1..max_qps. */
inline constexpr uint32_t max_qps = 16;
/* QPNs and PSNs are 24 bits; QPNs 0 and 1 are the special QP0/QP1. */
inline constexpr uint32_t qpn_mask = 0xffffff;
inline constexpr uint32_t psn_mask = 0xffffff;
inline constexpr uint32_t min_qpn  = 2;

enum class msg_type : uint16_t {
    request    = 1,
    reply      = 2,
    disconnect = 3,
};
inline constexpr uint16_t msg_type_limit = 4; /* first unused type */

/* A reply's verdict. Permanent refusals end the attempt for good (the
 * peer is reported failed); `busy` is worth retrying after a delay. */
enum class status : uint16_t {
    accepted         = 0,
    wrong_job_key    = 1, /* the request reached another job's agent */
    wrong_uid        = 2, /* ... or another user's */
    num_qps_mismatch = 3, /* both agents must run with the same K */
    stale_instance   = 4, /* the request named an earlier run of the replier */
    busy             = 5, /* the replier could not create its QPs now */
    am_size_mismatch = 6, /* both agents must run with the same --am-size */
};
inline constexpr uint16_t status_limit = 7;

/* How a datagram's sender proves who it is (agent/peers/peer_auth.h). */
enum class auth_kind : uint16_t {
    none   = 0, /* no credential: anyone may claim anything */
    munge  = 1, /* a MUNGE credential: munged vouches for uid and gid */
    secret = 2, /* HMAC-SHA256 under a secret every rank of the job has */
};
inline constexpr uint16_t auth_kind_limit = 3;
inline constexpr size_t nonce_size        = 16;
inline constexpr size_t hmac_size         = 32; /* SHA-256 */
inline constexpr size_t digest_size       = 32; /* SHA-256 */

constexpr bool is_permanent(status s)
{
    return s != status::accepted && s != status::busy;
}

struct header {
    uint32_t magic;
    uint16_t version;
    uint16_t type; /* msg_type */
    uint32_t length; /* whole datagram: always message_size */
    uint32_t seq; /* request: this attempt (>= 1); reply: the replier's
                     latest own attempt (0 if none); disconnect: 0 */
};

/* Who sent the datagram: enough to send back and to order two agents. */
struct sender {
    uint8_t gid[gid_size]; /* the sender's port GID, never all zero */
    uint64_t instance_id; /* random per agent run, never 0 */
    uint32_t ud_qpn; /* the sender's handshake UD QP, 24 bits */
    uint32_t uid; /* the user the agent serves */
    /* that UD QP's Q_Key (wire::qkey_valid: not 0, high bit clear), which
     * an answer must name to reach it; an address, not an identity: a
     * peer is still its GID, UD QPN and instance id */
    uint32_t ud_qkey;
    uint32_t reserved; /* 0 */
};

struct qp_info {
    uint32_t qpn; /* 24 bits, >= min_qpn */
    uint32_t psn; /* 24 bits: the initial PSN of the QP's send queue */

    friend bool operator==(const qp_info &, const qp_info &) = default;
};

/* A datagram's credential; fields a kind does not use are zero. */
struct auth_block {
    uint16_t kind; /* auth_kind */
    uint16_t length; /* bytes of credential used; the rest zero */
    uint32_t reserved; /* 0 */
    uint64_t issued_us; /* secret: sender's CLOCK_REALTIME, microseconds */
    uint8_t nonce[nonce_size]; /* secret: random per datagram */
    /* munge: its text (about 190 bytes for the 32-byte digest, MUNGE's
     * defaults); secret: the HMAC */
    uint8_t credential[720];
};
inline constexpr size_t max_credential = sizeof(auth_block::credential);

/* What an agent says of itself in a request or a reply. */
struct terms {
    uint16_t num_qps; /* K */
    uint32_t am_size; /* largest active message, bytes (--am-size) */
};

struct message {
    header hdr;
    sender src;
    /* request: the receiver's instance as the sender knows it, 0 when
     * unknown; reply and disconnect: the addressee's instance (never 0) */
    uint64_t dst_instance_id;
    char job_key[job_key_size]; /* NUL-terminated, zero after the NUL */
    uint32_t ack_seq; /* reply: the seq of the request answered; else 0 */
    uint16_t num_qps; /* request, accepted reply: K; else 0 */
    uint16_t status; /* reply: status; else 0 */
    qp_info qps[max_qps]; /* the sender's K QPs; entries >= num_qps zero */
    /* request, accepted reply, am_size_mismatch refusal: the sender's
     * largest active message (never 0); else 0 */
    uint32_t am_size;
    uint32_t reserved; /* 0 */
    auth_block auth;
};

/* The layout is a contract between agents built separately. */
static_assert(sizeof(header) == 16 && alignof(header) == 4);
static_assert(sizeof(sender) == 40 && offsetof(sender, instance_id) == 16 &&
              offsetof(sender, ud_qpn) == 24 && offsetof(sender, uid) == 28 &&
              offsetof(sender, ud_qkey) == 32 &&
              offsetof(sender, reserved) == 36);
static_assert(sizeof(qp_info) == 8);
static_assert(offsetof(message, src) == 16);
static_assert(offsetof(message, dst_instance_id) == 56);
static_assert(offsetof(message, job_key) == 64);
static_assert(offsetof(message, ack_seq) == 128);
static_assert(offsetof(message, num_qps) == 132);
static_assert(offsetof(message, status) == 134);
static_assert(offsetof(message, qps) == 136);
static_assert(offsetof(message, am_size) == 264);
static_assert(offsetof(message, auth) == 272);
static_assert(sizeof(auth_block) == 32 + max_credential &&
              offsetof(auth_block, credential) == 32);
static_assert(sizeof(message) == message_size && alignof(message) == 8);
static_assert(std::is_trivially_copyable_v<message> &&
              std::is_standard_layout_v<message>);
/* no hidden padding: every byte on the wire is a named field */
static_assert(std::has_unique_object_representations_v<message>);

/*
 * Checks a whole datagram: exact length, header, sender, job key and every
 * type-specific rule above. Whether the job key, uid and K are the ones
 * this agent wants is the connection's question, not the parser's.
 */
result<message> parse(std::span<const std::byte> bytes);

/* Builders for well-formed messages, with no credential (`auth` zero:
 * the caller seals them); callers pass validated values (a job key that
 * passes job_key_error, QPNs and PSNs within 24 bits, am_size > 0). */
message make_request(const sender &self, std::string_view job_key,
                     uint64_t dst_instance_id, uint32_t seq,
                     std::span<const qp_info> qps, uint32_t am_size);
/* Answers `request` with the request's uid and job key. `qps` (the
 * replier's K QPs, as many as mine.num_qps) are sent only when `verdict`
 * is accepted; mine.num_qps goes in an accepted reply and a
 * num_qps_mismatch refusal, mine.am_size in an accepted reply and an
 * am_size_mismatch refusal. */
message make_reply(const sender &self, const message &request, uint32_t own_seq,
                   status verdict, const terms &mine,
                   std::span<const qp_info> qps);
message make_disconnect(const sender &self, std::string_view job_key,
                        uint64_t dst_instance_id);

/* A handshake Q_Key for this agent run: 31 random bits, never 0
 * (wire::qkey_valid), from getrandom. */
uint32_t random_qkey();

std::string_view to_string(status s);
std::string_view to_string(auth_kind k);
std::string_view to_string(msg_type t);

} // namespace rvt::wire::conn

#endif
