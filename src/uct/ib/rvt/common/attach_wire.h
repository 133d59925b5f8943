/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The attach protocol: what a client and its agent say over the agent's
 * Unix stream socket before any shared memory exists.
 *
 *   client                                   agent
 *     |  attach_request (job key, pid)   -->   |  uid from SO_PEERCRED,
 *     |    [+ leader index, generation]        |  job key compared,
 *     |                                        |  [the leader checked]
 *     |  <-- attach_reply (+ SCM_RIGHTS:       |
 *     |      verbs command fd, shm memfd)      |
 *
 * Every message starts with msg_header; `length` counts the whole message
 * and is checked against the type's size before anything else is read, so
 * a short, long or garbage message is refused with a reason and never
 * reaches a struct. All fields are fixed-width little-endian (both ends
 * are on one host); reserved fields must be zero. A refusal always carries
 * a NUL-terminated reason for the client's log.
 *
 * Siblings (attach_sibling): a process may hold several attachments, one
 * per UCT interface (so that worker threads share no ring). It registers
 * memory through one of them, its leader; a sibling names the leader
 * (index and generation as the leader's reply gave them), and its work is
 * checked against the leader's MRs. The agent accepts a sibling only if
 * that leader is attached now, with that generation, is no sibling
 * itself, and its SO_PEERCRED pid is the sibling's (never the message's
 * pid); uid and job key are checked as for any attach. A sibling ends
 * when its leader does (attach_server.h).
 */
#ifndef RVT_COMMON_ATTACH_WIRE_H
#define RVT_COMMON_ATTACH_WIRE_H

#include "uct/ib/rvt/common/result.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace rvt::wire {

inline constexpr uint32_t magic = 0x41545652; /* "RVTA" */
/* 4: the reply carries the client's generation; inline work requests and
 * the segment's work-data area (shm_layout.h version 4); 5: the reply
 * carries the agent's features, and work requests may be atomics (work.h);
 * 6: an attach request may name a leader (attach_sibling); 7: a client
 * announces each registration before it makes it (mr_intent); 8: a write
 * with immediate may ask to be striped (work_stripe, work.h), which an
 * older agent would refuse op by op; 9: an mr_registered may ask for an
 * answer (mr_registered_reply_wanted), which an older agent would take for
 * a malformed notice; 10: the reply carries a fifth descriptor, the
 * agent's work summary (work_summary.h); 11: the reply's reserved word is the
 * path MTU; 12: a client may retire its address (retire_address); 13:
 * the reply's features say when the agent does not authenticate its
 * peers (agent_feature_unauthenticated); 14: the agent address carries
 * the handshake UD QP's Q_Key (agent_address::ud_qkey) where it had a
 * reserved zero word */
inline constexpr uint16_t protocol_version = 14;
/* Upper bound on any message, so a reader can size its buffer. */
inline constexpr uint32_t max_message_size = 4096;
inline constexpr size_t job_key_size       = 64; /* incl. terminating NUL */
inline constexpr size_t reason_size        = 128;

enum class msg_type : uint16_t {
    attach_request = 1,
    attach_reply   = 2,
    /* after attach, client to agent: the MRs it holds in the agent's PD,
     * so the agent can deregister what a dead client left behind. A
     * client registers its MRs itself but never deregisters one: it asks
     * the agent to (mr_release). The kernel can then hand an MR handle to
     * another client only after the agent has forgotten its old owner, so
     * the agent never sees one handle announced by two clients. */
    mr_registered = 3,
    mr_release    = 4,
    /* instead of attaching: what is the agent doing? (rvt-status) */
    status_request = 5,
    status_reply   = 6, /* header + UTF-8 JSON text, see max_status_size */
    /* after attach, client to agent: "I want to talk to the processes
     * behind this agent"; the agent answers with a peer_reply carrying the
     * peer index to put in work requests (connecting happens later, in the
     * background, and work queued meanwhile waits for it) */
    peer_request = 7,
    peer_reply   = 8,
    /* agent to client, for an mr_release with mr_release_reply_wanted:
     * sent after the MR is gone from the device (its rkey is dead) */
    mr_release_reply = 9,
    /* client to agent, before its REG_MR: "I am about to register
     * (addr, length)"; with mr_intent_withdrawn after a REG_MR that failed.
     * A client killed between its REG_MR and its mr_registered leaves an
     * MR the agent was never told of; the intent is how the agent finds
     * it and knows it was that client's (mr_registry.h, "Intents"). */
    mr_intent = 10,
    /* agent to client, for an mr_registered with
     * mr_registered_reply_wanted: the agent checked the MR against what
     * the device says of its handle and accepted it (the client's work
     * may use it), or refused it, the reason naming the values
     * (mr_registry.h, "Announcements") */
    mr_registered_reply = 11,
    /* client to agent: "nobody reads my rings any more: my address is
     * gone", while the attachment stays for what registers through it
     * (a memory domain's leader whose interface closed; its siblings
     * stay). The agent handles it as the departure of (index,
     * generation): every connected peer and this node's senders are
     * told, and what comes for it is dropped (engine.h, "Departed
     * clients"); then it answers with a retire_address_reply, so that
     * once the client has it, nothing sent to the address is delivered. */
    retire_address       = 12,
    retire_address_reply = 13,
};

struct msg_header {
    uint32_t magic;
    uint16_t version;
    uint16_t type; /* msg_type */
    uint32_t length; /* whole message, header included, bytes */
    uint32_t reserved; /* zero */
};

/* attach_request::flags: this attachment is a sibling of the one named
 * by leader_index and leader_generation (see "Siblings" above). */
inline constexpr uint32_t attach_sibling     = 1u << 0;
inline constexpr uint32_t attach_flags_known = attach_sibling;

struct attach_request {
    msg_header hdr;
    char job_key[job_key_size]; /* NUL-terminated, see job_key_error */
    uint32_t pid; /* for logs only: the agent trusts SO_PEERCRED */
    uint32_t flags; /* attach_sibling or 0 */
    /* attach_sibling: the leader's client index (< imm::max_clients) and
     * generation (attach_reply::client_generation); else both zero */
    uint32_t leader_index;
    uint32_t leader_generation;
};

/* Whom a sibling attachment names (attach_sibling). */
struct leader_ref {
    uint32_t index;
    uint32_t generation;
};

enum class attach_status : uint32_t {
    accepted      = 0,
    bad_message   = 1, /* malformed: see reason */
    bad_version   = 2, /* protocol version not spoken by this agent */
    wrong_uid     = 3, /* the agent serves one user */
    wrong_job_key = 4, /* the agent serves one job */
    agent_full    = 5, /* every client index is in use, or the process
                          holds all it may (max-client-siblings) */
    agent_error   = 6, /* the agent could not set the client up */
    bad_sibling   = 7, /* the named leader is not attached, has another
                          generation, is a sibling, or is another process */
};
inline constexpr uint32_t attach_status_limit = 8;

/* How clients register memory in the agent's PD (docs/design.md part 3). */
enum class reg_mode : uint32_t {
    import_pd    = 1, /* ibv_import_device + ibv_import_pd + ibv_reg_mr */
    uverbs_ioctl = 2, /* REG_MR through RDMA_VERBS_IOCTL on the shared fd */
    /* The agent runs inside the client's own process, on a nic no device
     * backs (the module's host tests, test/gtest/uct/): whoever started
     * it registers memory in that nic (client/registration.h,
     * in_process_registrar). rvtd never offers it (agent/device/device.h picks
     * one of the two above); a client with no registrar refuses it. */
    in_process = 3,
};

/*
 * Q_Keys (InfiniBand Architecture, 10.2.4): a UD QP takes a datagram only
 * when the Q_Key the sender's work request names is the QP's own; the
 * device drops any other before it takes a receive buffer, and the
 * process never sees it. A Q_Key with its high bit set is "controlled":
 * an unprivileged process may not give its QP one, and in a send work
 * request it means "my QP's own Q_Key". An agent's handshake UD QP has
 * 31 random bits, never 0, chosen once per agent run
 * (conn::random_qkey): only who knows the agent's address (below) can
 * put a datagram in its receive queue.
 */
inline constexpr uint32_t qkey_controlled = 1u << 31;

/* Whether `qkey` can be an agent's handshake Q_Key (not 0, not
 * controlled). */
constexpr bool qkey_valid(uint32_t qkey)
{
    return qkey != 0 && (qkey & qkey_controlled) == 0;
}

/* Where other agents reach an agent: what a UCT iface address names. */
struct agent_address {
    uint8_t gid[16]; /* the agent's port GID (RoCE: IPv4-mapped) */
    uint32_t ud_qpn; /* its handshake UD QP */
    /* that QP's Q_Key (qkey_valid): what a datagram to it must name, so
     * the address is what lets a sender reach the agent at all */
    uint32_t ud_qkey;
    uint64_t agent_id; /* random per agent run, never 0 */

    friend bool
    operator==(const agent_address &, const agent_address &) = default;
};
static_assert(sizeof(agent_address) == 32 &&
              offsetof(agent_address, ud_qkey) == 20);

/* attach_reply::features: what the agent's device does beyond the data
 * path every agent has. */
/* 64-bit RDMA atomics, fetch-and-add and compare-and-swap (work.h,
 * atomic_*): the device's atomic_cap is not IBV_ATOMIC_NONE and its QPs
 * have responder resources */
inline constexpr uint32_t agent_feature_atomic64 = 1u << 0;
/* Not a feature but a warning: the agent runs with --auth=none, so any
 * host on the fabric that sends the job key gets QPs that reach this
 * process's registered memory (docs/reliability.md, trust model). The
 * module logs it at WARN through UCX. */
inline constexpr uint32_t agent_feature_unauthenticated = 1u << 1;
inline constexpr uint32_t agent_features_known = agent_feature_atomic64 |
                                                 agent_feature_unauthenticated;

/* attach_reply::path_mtu: an IB MTU, 256 to 4096 bytes, a power of two */
constexpr bool path_mtu_valid(uint32_t bytes)
{
    return bytes >= 256 && bytes <= 4096 && (bytes & (bytes - 1)) == 0;
}

struct attach_reply {
    msg_header hdr;
    uint32_t status; /* attach_status */
    uint32_t client_index; /* < imm::max_clients when accepted */
    uint32_t pd_handle; /* the agent's PD, in the shared fd's table */
    uint32_t reg_mode; /* reg_mode */
    uint32_t driver_id; /* rdma driver id for the ioctl header */
    /* which attachment of client_index this is (imm.h: the generation
     * bits of its immediates), < imm::max_generations; zero in a refusal */
    uint32_t client_generation;
    uint64_t shm_size; /* bytes of the memfd segment */
    uint64_t agent_id; /* random per agent instance */
    char reason[reason_size]; /* NUL-terminated; empty if accepted */
    agent_address address; /* this agent, for the client's peers */
    uint32_t num_qps; /* K: shared RC QPs per remote node */
    uint32_t max_am_size; /* bytes: the inbound slot size */
    uint32_t features; /* agent_feature_* bits */
    /* bytes: the agent's port's active MTU (path_mtu_valid), which the
     * client's bandwidth estimate takes */
    uint32_t path_mtu;
};

/* The layout is a contract between separately built programs. */
static_assert(sizeof(msg_header) == 16 && alignof(msg_header) == 4);
static_assert(offsetof(msg_header, length) == 8);
static_assert(sizeof(attach_request) == 96);
static_assert(offsetof(attach_request, leader_index) == 88);
static_assert(offsetof(attach_request, job_key) == 16);
static_assert(offsetof(attach_request, pid) == 80);
static_assert(sizeof(attach_reply) == 232);
static_assert(offsetof(attach_reply, features) == 224);
static_assert(offsetof(attach_reply, address) == 184);
static_assert(offsetof(attach_reply, shm_size) == 40);
static_assert(offsetof(attach_reply, reason) == 56);
static_assert(std::is_trivially_copyable_v<attach_request> &&
              std::is_standard_layout_v<attach_request>);
static_assert(std::is_trivially_copyable_v<attach_reply> &&
              std::is_standard_layout_v<attach_reply>);
static_assert(sizeof(attach_reply) <= max_message_size);

/* mr_notice.flags of an mr_release: answer with an mr_release_reply once
 * the MR is deregistered (UCT's "deregister with invalidate"). Without it
 * the release is not answered, and the client goes on at once. */
inline constexpr uint32_t mr_release_reply_wanted = 1;

/* mr_notice.flags of an mr_intent: the REG_MR it announced failed. */
inline constexpr uint32_t mr_intent_withdrawn = 1;

/* mr_notice.flags of an mr_registered: answer with an mr_registered_reply
 * once the MR is checked. Without it a refusal is only logged, and work
 * naming the MR completes invalid. */
inline constexpr uint32_t mr_registered_reply_wanted = 1;

/* mr_registered / mr_release: one MR of the client's, by the handle
 * REG_MR gave it in the shared fd's table. mr_intent: the registration
 * about to be made, by addr (its iova) and length; handle and keys zero. */
struct mr_notice {
    msg_header hdr;
    uint32_t handle;
    uint32_t lkey;
    uint32_t rkey;
    uint32_t flags; /* mr_release: mr_release_reply_wanted or 0;
                       mr_intent: mr_intent_withdrawn or 0;
                       mr_registered: mr_registered_reply_wanted or 0 */
    uint64_t addr;
    uint64_t length; /* > 0 for mr_registered and mr_intent */
};
static_assert(sizeof(mr_notice) == 48 && offsetof(mr_notice, addr) == 32);
static_assert(offsetof(mr_notice, flags) == 28);
static_assert(std::is_trivially_copyable_v<mr_notice> &&
              std::is_standard_layout_v<mr_notice>);

enum class release_status : uint32_t {
    released = 0, /* deregistered: no peer can reach it any more */
    refused  = 1, /* see reason (not this client's MR, or the device
                     refused: then it may still be registered) */
};

enum class announce_status : uint32_t {
    accepted = 0, /* the client's work may use the MR */
    refused  = 1, /* see reason: the values that disagree, or the handle is
                     another client's or the agent's own */
};

/* mr_release_reply and mr_registered_reply: one layout. */
struct mr_reply {
    msg_header hdr;
    uint32_t handle; /* the released or announced MR */
    uint32_t status; /* release_status or announce_status */
    char reason[reason_size]; /* NUL-terminated; empty if done */
};
using mr_release_reply    = mr_reply;
using mr_registered_reply = mr_reply;
static_assert(sizeof(mr_reply) == 152);
static_assert(std::is_trivially_copyable_v<mr_reply> &&
              std::is_standard_layout_v<mr_reply>);

/* peer_request: the remote agent, as its client's address named it. */
struct peer_request {
    msg_header hdr;
    agent_address peer;
};
static_assert(sizeof(peer_request) == 48);
static_assert(std::is_trivially_copyable_v<peer_request> &&
              std::is_standard_layout_v<peer_request>);

enum class peer_status : uint32_t {
    accepted = 0, /* `peer` is the index to use */
    refused  = 1, /* see reason (bad address, too many peers) */
};

struct peer_reply {
    msg_header hdr;
    uint32_t status; /* peer_status */
    uint32_t peer; /* accepted: the peer index */
    char reason[reason_size]; /* NUL-terminated; empty if accepted */
};
static_assert(sizeof(peer_reply) == 152);
/* Replies share one check: 0 done, 1 refused (attach_wire.cc). */
static_assert(static_cast<uint32_t>(peer_status::refused) == 1 &&
              static_cast<uint32_t>(release_status::refused) == 1 &&
              static_cast<uint32_t>(announce_status::refused) == 1);
static_assert(std::is_trivially_copyable_v<peer_reply> &&
              std::is_standard_layout_v<peer_reply>);

/* retire_address and retire_address_reply: one layout, nothing to say
 * but the type. */
struct retire_notice {
    msg_header hdr;
    uint32_t reserved[2]; /* zero */
};
static_assert(sizeof(retire_notice) == 24);
static_assert(std::is_trivially_copyable_v<retire_notice> &&
              std::is_standard_layout_v<retire_notice>);

inline constexpr uint32_t status_text = 1; /* human-readable, not JSON */

struct status_request {
    msg_header hdr;
    uint32_t flags; /* none defined: zero */
    uint32_t reserved; /* zero */
};
static_assert(sizeof(status_request) == 24);
static_assert(std::is_trivially_copyable_v<status_request> &&
              std::is_standard_layout_v<status_request>);

/* A status reply may be longer than any request (an agent with hundreds
 * of clients); the agent never reads one. */
inline constexpr uint32_t max_status_size = 1u << 20;

/* Job keys: 1..63 characters of [A-Za-z0-9._:+-] (they also name the
 * agent's socket and lock files). Empty string = valid. */
std::string job_key_error(std::string_view key);

/* Checks the header alone (the first sizeof(msg_header) bytes suffice):
 * magic, version, reserved, and 16 <= length <= max_message_size. */
result<msg_header> parse_header(std::span<const std::byte> bytes);

/* Check a whole message: header, type, exact length, every field. */
result<attach_request> parse_attach_request(std::span<const std::byte> bytes);
result<attach_reply> parse_attach_reply(std::span<const std::byte> bytes);

/* With `leader`: a sibling's request (attach_sibling). */
attach_request make_attach_request(std::string_view job_key, uint32_t pid,
                                   std::optional<leader_ref> leader = {});
attach_reply make_refusal(attach_status status, std::string_view reason);

/* Checks an mr_registered, mr_release or mr_intent message. */
result<mr_notice> parse_mr_notice(std::span<const std::byte> bytes);
mr_notice make_mr_notice(msg_type type, uint32_t handle, uint32_t lkey,
                         uint32_t rkey, uint64_t addr, uint64_t length,
                         uint32_t flags = 0);
mr_notice make_mr_intent(uint64_t addr, uint64_t length, uint32_t flags = 0);

result<mr_release_reply>
parse_mr_release_reply(std::span<const std::byte> bytes);
mr_release_reply make_mr_release_reply(release_status status, uint32_t handle,
                                       std::string_view reason);
result<mr_registered_reply>
parse_mr_registered_reply(std::span<const std::byte> bytes);
mr_registered_reply make_mr_registered_reply(announce_status status,
                                             uint32_t handle,
                                             std::string_view reason);

result<peer_request> parse_peer_request(std::span<const std::byte> bytes);
peer_request make_peer_request(const agent_address &peer);
result<peer_reply> parse_peer_reply(std::span<const std::byte> bytes);
peer_reply
make_peer_reply(peer_status status, uint32_t peer, std::string_view reason);

/* `type`: retire_address or retire_address_reply. */
result<retire_notice>
parse_retire_notice(std::span<const std::byte> bytes, msg_type type);
retire_notice make_retire_notice(msg_type type);

/* Empty when `a` can name an agent (non-zero GID, QPN in 2..2^24-1,
 * a Q_Key that qkey_valid takes, agent id set), else what is wrong with
 * it. */
std::string agent_address_error(const agent_address &a);

result<status_request> parse_status_request(std::span<const std::byte> bytes);
status_request make_status_request(uint32_t flags);
/* The header of a status reply; the JSON text of header.length - 16
 * bytes follows it. */
msg_header make_status_reply_header(size_t text_length);
/* Checks a status reply's header; returns the length of its text. */
result<uint32_t> parse_status_reply_header(std::span<const std::byte> bytes);

std::string_view to_string(attach_status status);

} // namespace rvt::wire

#endif
