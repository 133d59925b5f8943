/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Parsing and building of attach messages (attach_wire.h). The parser is
 * the agent's first contact with untrusted input: it copies bytes into a
 * struct only after the length is proven right, and every refusal names
 * the value it disliked and what it expected.
 */
#include "uct/ib/rvt/common/attach_wire.h"

#include "uct/ib/rvt/common/format.h"
#include "uct/ib/rvt/common/imm.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace rvt::wire {

namespace {

/* A fixed char field must hold a NUL; returns its string length or -1. */
template<size_t N> int terminated_length(const char (&field)[N])
{
    const void *nul = std::memchr(field, '\0', N);
    return nul ? static_cast<int>(static_cast<const char *>(nul) - field) : -1;
}

template<class Msg>
result<Msg>
parse_fixed(std::span<const std::byte> bytes, msg_type type, const char *name)
{
    auto hdr = parse_header(bytes);
    if (!hdr) {
        return failure{hdr.error()};
    }
    if (hdr.value().type != static_cast<uint16_t>(type)) {
        return failure{format("message type %u where %s (%u) was expected",
                              hdr.value().type, name,
                              static_cast<unsigned>(type))};
    }
    if (hdr.value().length != sizeof(Msg) || bytes.size() != sizeof(Msg)) {
        return failure{format("%s of %u bytes (header says %u): expected %zu",
                              name, static_cast<unsigned>(bytes.size()),
                              hdr.value().length, sizeof(Msg))};
    }
    Msg msg;
    std::memcpy(&msg, bytes.data(), sizeof(msg));
    return msg;
}

/* A reply to a client's request: status 0 (done) or 1 (refused, with a
 * reason); the reason is NUL-terminated either way. */
template<class Reply>
std::string reply_error(const Reply &rep, const char *name)
{
    if (terminated_length(rep.reason) < 0) {
        return format("%s reason is not NUL-terminated", name);
    }
    if (rep.status > 1) {
        return format("%s status %u: expected 0 or 1", name, rep.status);
    }
    return {};
}

msg_header make_header(msg_type type, uint32_t length)
{
    return {magic, protocol_version, static_cast<uint16_t>(type), length, 0};
}

} // namespace

std::string job_key_error(std::string_view key)
{
    if (key.empty() || key.size() >= job_key_size) {
        return format("job key of %zu characters: expected 1 to %zu",
                      key.size(), job_key_size - 1);
    }
    for (char c : key) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' ||
                  c == '+' || c == '-';
        if (!ok) {
            return format("job key has character 0x%02x: expected only "
                          "letters, digits and . _ : + -",
                          static_cast<unsigned char>(c));
        }
    }
    return {};
}

result<msg_header> parse_header(std::span<const std::byte> bytes)
{
    msg_header hdr;
    if (bytes.size() < sizeof(hdr)) {
        return failure{format("truncated message: %zu bytes, a header needs "
                              "%zu",
                              bytes.size(), sizeof(hdr))};
    }
    std::memcpy(&hdr, bytes.data(), sizeof(hdr));
    if (hdr.magic != magic) {
        return failure{format("bad magic 0x%08x: expected 0x%08x (not an rvt "
                              "client?)",
                              hdr.magic, magic)};
    }
    if (hdr.version != protocol_version) {
        return failure{format("protocol version %u: this side speaks %u",
                              hdr.version, protocol_version)};
    }
    if (hdr.length < sizeof(hdr) || hdr.length > max_message_size) {
        return failure{format("message length %u: expected %zu to %u",
                              hdr.length, sizeof(hdr), max_message_size)};
    }
    if (hdr.reserved != 0) {
        return failure{format("reserved header field is 0x%x: expected 0",
                              hdr.reserved)};
    }
    return hdr;
}

result<attach_request> parse_attach_request(std::span<const std::byte> bytes)
{
    auto msg = parse_fixed<attach_request>(bytes, msg_type::attach_request,
                                           "attach_request");
    if (!msg) {
        return msg;
    }
    const attach_request &req = msg.value();
    int key_len               = terminated_length(req.job_key);
    if (key_len < 0) {
        return failure{format("job key is not NUL-terminated within %zu "
                              "bytes",
                              job_key_size)};
    }
    std::string err = job_key_error({req.job_key, size_t(key_len)});
    if (!err.empty()) {
        return failure{err};
    }
    if ((req.flags & ~attach_flags_known) != 0) {
        return failure{format("attach flags 0x%x: version %u defines only "
                              "0x%x (attach_sibling)",
                              req.flags, protocol_version, attach_flags_known)};
    }
    if ((req.flags & attach_sibling) == 0) {
        if (req.leader_index != 0 || req.leader_generation != 0) {
            return failure{format("leader index %u generation %u without "
                                  "attach_sibling: expected both 0",
                                  req.leader_index, req.leader_generation)};
        }
        return msg;
    }
    if (req.leader_index >= imm::max_clients) {
        return failure{format("leader index %u: expected below %u",
                              req.leader_index, imm::max_clients)};
    }
    if (req.leader_generation >= imm::max_generations) {
        return failure{format("leader generation %u: expected below %u",
                              req.leader_generation, imm::max_generations)};
    }
    return msg;
}

result<attach_reply> parse_attach_reply(std::span<const std::byte> bytes)
{
    auto msg = parse_fixed<attach_reply>(bytes, msg_type::attach_reply,
                                         "attach_reply");
    if (!msg) {
        return msg;
    }
    const attach_reply &rep = msg.value();
    if (terminated_length(rep.reason) < 0) {
        return failure{"attach reply reason is not NUL-terminated"};
    }
    if (rep.status >= attach_status_limit) {
        return failure{format("attach status %u: expected below %u", rep.status,
                              attach_status_limit)};
    }
    if (rep.status != static_cast<uint32_t>(attach_status::accepted)) {
        return msg; /* a refusal: only status and reason mean anything */
    }
    if (rep.client_index >= imm::max_clients) {
        return failure{format("client index %u: expected below %u",
                              rep.client_index, imm::max_clients)};
    }
    if (rep.client_generation >= imm::max_generations) {
        return failure{format("client generation %u: expected below %u",
                              rep.client_generation, imm::max_generations)};
    }
    if (rep.reg_mode != static_cast<uint32_t>(reg_mode::import_pd) &&
        rep.reg_mode != static_cast<uint32_t>(reg_mode::uverbs_ioctl) &&
        rep.reg_mode != static_cast<uint32_t>(reg_mode::in_process)) {
        return failure{format("registration mode %u: expected 1 (import), "
                              "2 (ioctl) or 3 (in process)",
                              rep.reg_mode)};
    }
    if (rep.shm_size == 0) {
        return failure{"shared segment size 0: expected a segment"};
    }
    if (std::string e = agent_address_error(rep.address); !e.empty()) {
        return failure{"attach reply: " + e};
    }
    if (rep.num_qps == 0 || rep.num_qps > 16 || rep.max_am_size == 0) {
        return failure{format("attach reply: %u QPs per node, largest active "
                              "message %u: expected 1 to 16, and above 0",
                              rep.num_qps, rep.max_am_size)};
    }
    if ((rep.features & ~agent_features_known) != 0) {
        return failure{format("attach reply: features 0x%x: expected only 0x%x",
                              rep.features, agent_features_known)};
    }
    if (!path_mtu_valid(rep.path_mtu)) {
        return failure{format("attach reply: path MTU %u: expected a power "
                              "of two from 256 to 4096",
                              rep.path_mtu)};
    }
    return msg;
}

std::string agent_address_error(const agent_address &a)
{
    static constexpr uint8_t zero_gid[sizeof(a.gid)] = {};
    if (std::memcmp(a.gid, zero_gid, sizeof(a.gid)) == 0) {
        return "agent address with an all-zero GID: expected the agent's "
               "port GID";
    }
    if (a.ud_qpn < 2 || a.ud_qpn > 0xffffff) {
        return format("agent address UD QPN %u: expected 2 to 16777215",
                      a.ud_qpn);
    }
    if (a.agent_id == 0) {
        return "agent address with agent id 0: expected the agent's id";
    }
    if (!qkey_valid(a.ud_qkey)) {
        return format("agent address Q_Key 0x%x: expected 1 to 0x7fffffff "
                      "(not 0, high bit clear)",
                      a.ud_qkey);
    }
    return {};
}

result<peer_request> parse_peer_request(std::span<const std::byte> bytes)
{
    auto msg = parse_fixed<peer_request>(bytes, msg_type::peer_request,
                                         "peer_request");
    if (!msg) {
        return msg;
    }
    if (std::string e = agent_address_error(msg.value().peer); !e.empty()) {
        return failure{"peer request: " + e};
    }
    return msg;
}

peer_request make_peer_request(const agent_address &peer)
{
    peer_request req{};
    req.hdr  = make_header(msg_type::peer_request, sizeof(req));
    req.peer = peer;
    return req;
}

result<peer_reply> parse_peer_reply(std::span<const std::byte> bytes)
{
    auto msg = parse_fixed<peer_reply>(bytes, msg_type::peer_reply,
                                       "peer_reply");
    if (!msg) {
        return msg;
    }
    if (std::string e = reply_error(msg.value(), "peer reply"); !e.empty()) {
        return failure{e};
    }
    return msg;
}

peer_reply
make_peer_reply(peer_status status, uint32_t peer, std::string_view reason)
{
    peer_reply rep{};
    rep.hdr    = make_header(msg_type::peer_reply, sizeof(rep));
    rep.status = static_cast<uint32_t>(status);
    rep.peer   = peer;
    reason.copy(rep.reason, sizeof(rep.reason) - 1);
    return rep;
}

result<retire_notice>
parse_retire_notice(std::span<const std::byte> bytes, msg_type type)
{
    const char *name = type == msg_type::retire_address ?
                               "retire_address" :
                               "retire_address_reply";
    auto msg         = parse_fixed<retire_notice>(bytes, type, name);
    if (!msg) {
        return msg;
    }
    for (uint32_t r : msg.value().reserved) {
        if (r != 0) {
            return failure{
                    format("%s reserved word 0x%x: expected 0", name, r)};
        }
    }
    return msg;
}

retire_notice make_retire_notice(msg_type type)
{
    retire_notice n{};
    n.hdr = make_header(type, sizeof(n));
    return n;
}

attach_request make_attach_request(std::string_view job_key, uint32_t pid,
                                   std::optional<leader_ref> leader)
{
    attach_request req{};
    req.hdr = make_header(msg_type::attach_request, sizeof(req));
    job_key.copy(req.job_key, sizeof(req.job_key) - 1);
    req.pid = pid;
    if (leader) {
        req.flags             = attach_sibling;
        req.leader_index      = leader->index;
        req.leader_generation = leader->generation;
    }
    return req;
}

result<mr_notice> parse_mr_notice(std::span<const std::byte> bytes)
{
    auto hdr = parse_header(bytes);
    if (!hdr) {
        return failure{hdr.error()};
    }
    const auto type = static_cast<msg_type>(hdr.value().type);
    if (type != msg_type::mr_registered && type != msg_type::mr_release &&
        type != msg_type::mr_intent) {
        return failure{format("message type %u where an MR notice (3, 4 or "
                              "10) was expected",
                              hdr.value().type)};
    }
    auto msg = parse_fixed<mr_notice>(bytes, type, "mr notice");
    if (!msg) {
        return msg;
    }
    const mr_notice &n     = msg.value();
    const uint32_t allowed = type == msg_type::mr_release ?
                                     mr_release_reply_wanted :
                             type == msg_type::mr_intent ?
                                     mr_intent_withdrawn :
                                     mr_registered_reply_wanted;
    if ((n.flags & ~allowed) != 0) {
        return failure{format("MR notice flags 0x%x: expected 0x%x or less",
                              n.flags, allowed)};
    }
    if (type == msg_type::mr_registered && n.length == 0) {
        return failure{format("MR handle %u registered with length 0: "
                              "expected a length",
                              n.handle)};
    }
    if (type == msg_type::mr_intent &&
        (n.handle != 0 || n.lkey != 0 || n.rkey != 0 || n.length == 0)) {
        return failure{format("MR intent with handle %u, lkey 0x%x, rkey 0x%x "
                              "and length %llu: expected zero handle and "
                              "keys and a length",
                              n.handle, n.lkey, n.rkey,
                              static_cast<unsigned long long>(n.length))};
    }
    return msg;
}

mr_notice make_mr_notice(msg_type type, uint32_t handle, uint32_t lkey,
                         uint32_t rkey, uint64_t addr, uint64_t length,
                         uint32_t flags)
{
    mr_notice n{};
    n.hdr    = make_header(type, sizeof(n));
    n.handle = handle;
    n.lkey   = lkey;
    n.rkey   = rkey;
    n.addr   = addr;
    n.length = length;
    n.flags  = flags;
    return n;
}

mr_notice make_mr_intent(uint64_t addr, uint64_t length, uint32_t flags)
{
    return make_mr_notice(msg_type::mr_intent, 0, 0, 0, addr, length, flags);
}

namespace {

result<mr_reply> parse_mr_reply(std::span<const std::byte> bytes, msg_type type,
                                const char *name)
{
    auto msg = parse_fixed<mr_reply>(bytes, type, name);
    if (!msg) {
        return msg;
    }
    if (std::string e = reply_error(msg.value(), name); !e.empty()) {
        return failure{e};
    }
    return msg;
}

mr_reply make_mr_reply(msg_type type, uint32_t status, uint32_t handle,
                       std::string_view reason)
{
    mr_reply rep{};
    rep.hdr    = make_header(type, sizeof(rep));
    rep.handle = handle;
    rep.status = status;
    reason.copy(rep.reason, sizeof(rep.reason) - 1);
    return rep;
}

} // namespace

result<mr_release_reply>
parse_mr_release_reply(std::span<const std::byte> bytes)
{
    return parse_mr_reply(bytes, msg_type::mr_release_reply,
                          "MR release reply");
}

mr_release_reply make_mr_release_reply(release_status status, uint32_t handle,
                                       std::string_view reason)
{
    return make_mr_reply(msg_type::mr_release_reply,
                         static_cast<uint32_t>(status), handle, reason);
}

result<mr_registered_reply>
parse_mr_registered_reply(std::span<const std::byte> bytes)
{
    return parse_mr_reply(bytes, msg_type::mr_registered_reply,
                          "MR registered reply");
}

mr_registered_reply make_mr_registered_reply(announce_status status,
                                             uint32_t handle,
                                             std::string_view reason)
{
    return make_mr_reply(msg_type::mr_registered_reply,
                         static_cast<uint32_t>(status), handle, reason);
}

result<status_request> parse_status_request(std::span<const std::byte> bytes)
{
    auto msg = parse_fixed<status_request>(bytes, msg_type::status_request,
                                           "status_request");
    if (!msg) {
        return msg;
    }
    if ((msg.value().flags & ~status_text) != 0 || msg.value().reserved != 0) {
        return failure{format("status request flags 0x%x, reserved 0x%x: "
                              "expected 0 or 0x1, and 0",
                              msg.value().flags, msg.value().reserved)};
    }
    return msg;
}

status_request make_status_request(uint32_t flags)
{
    status_request req{};
    req.hdr   = make_header(msg_type::status_request, sizeof(req));
    req.flags = flags;
    return req;
}

msg_header make_status_reply_header(size_t text_length)
{
    return make_header(msg_type::status_reply,
                       static_cast<uint32_t>(sizeof(msg_header) + text_length));
}

result<uint32_t> parse_status_reply_header(std::span<const std::byte> bytes)
{
    msg_header hdr;
    if (bytes.size() < sizeof(hdr)) {
        return failure{format("truncated status reply: %zu bytes, a header "
                              "needs %zu",
                              bytes.size(), sizeof(hdr))};
    }
    std::memcpy(&hdr, bytes.data(), sizeof(hdr));
    if (hdr.magic != magic || hdr.version != protocol_version ||
        hdr.reserved != 0) {
        return failure{format("status reply header magic 0x%08x version %u "
                              "reserved 0x%x: expected 0x%08x, %u, 0",
                              hdr.magic, hdr.version, hdr.reserved, magic,
                              protocol_version)};
    }
    if (hdr.type == static_cast<uint16_t>(msg_type::attach_reply)) {
        return failure{"the agent answered with an attach reply (a refusal)"};
    }
    if (hdr.type != static_cast<uint16_t>(msg_type::status_reply)) {
        return failure{format("message type %u where status_reply (6) was "
                              "expected",
                              hdr.type)};
    }
    if (hdr.length < sizeof(hdr) || hdr.length > max_status_size) {
        return failure{format("status reply length %u: expected %zu to %u",
                              hdr.length, sizeof(hdr), max_status_size)};
    }
    return hdr.length - static_cast<uint32_t>(sizeof(hdr));
}

attach_reply make_refusal(attach_status status, std::string_view reason)
{
    attach_reply rep{};
    rep.hdr    = make_header(msg_type::attach_reply, sizeof(rep));
    rep.status = static_cast<uint32_t>(status);
    reason.copy(rep.reason, sizeof(rep.reason) - 1);
    return rep;
}

std::string_view to_string(attach_status status)
{
    switch (status) {
    case attach_status::accepted:
        return "accepted";
    case attach_status::bad_message:
        return "malformed message";
    case attach_status::bad_version:
        return "unsupported protocol version";
    case attach_status::wrong_uid:
        return "wrong user";
    case attach_status::wrong_job_key:
        return "wrong job key";
    case attach_status::agent_full:
        return "agent full";
    case attach_status::agent_error:
        return "agent error";
    case attach_status::bad_sibling:
        return "bad sibling";
    }
    return "unknown status";
}

} // namespace rvt::wire
