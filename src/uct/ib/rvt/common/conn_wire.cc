/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Parsing and building of the agents' handshake datagrams (conn_wire.h).
 * Datagrams arrive from the network on a UD QP that anyone on the fabric
 * can address, so the parser trusts nothing: it copies bytes into a
 * struct only after the length is proven right, and every refusal names
 * the value it disliked and what it expected.
 */
#include "uct/ib/rvt/common/conn_wire.h"

#include "uct/ib/rvt/common/format.h"

#include <sys/random.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

namespace rvt::wire::conn {

namespace {

std::string check_qpn(const char *what, uint32_t qpn)
{
    if (qpn > qpn_mask || qpn < min_qpn) {
        return format("%s 0x%x: expected a 24-bit QPN from %u", what, qpn,
                      min_qpn);
    }
    return {};
}

std::string check_header(const header &hdr, size_t size)
{
    if (hdr.magic != magic) {
        return format("bad magic 0x%08x: expected 0x%08x (not an rvt "
                      "agent?)",
                      hdr.magic, magic);
    }
    if (hdr.version != protocol_version) {
        return format("protocol version %u: this agent speaks %u", hdr.version,
                      protocol_version);
    }
    if (hdr.type == 0 || hdr.type >= msg_type_limit) {
        return format("message type %u: expected 1 to %u", hdr.type,
                      msg_type_limit - 1);
    }
    if (hdr.length != message_size || size != message_size) {
        return format("datagram of %zu bytes (header says %u): expected %zu",
                      size, hdr.length, message_size);
    }
    return {};
}

std::string check_sender(const sender &src)
{
    if (std::all_of(std::begin(src.gid), std::end(src.gid),
                    [](uint8_t b) { return b == 0; })) {
        return "sender GID is all zero: expected the sender's port GID";
    }
    if (src.instance_id == 0) {
        return "sender instance id 0: expected a non-zero random id";
    }
    if (!qkey_valid(src.ud_qkey)) {
        return format("sender Q_Key 0x%x: expected 1 to 0x7fffffff (not 0, "
                      "high bit clear: a controlled Q_Key is no agent's)",
                      src.ud_qkey);
    }
    if (src.reserved != 0) {
        return format("sender reserved field 0x%x: expected 0", src.reserved);
    }
    return check_qpn("sender UD QPN", src.ud_qpn);
}

std::string check_job_key(const char (&key)[job_key_size])
{
    const void *nul = std::memchr(key, '\0', job_key_size);
    if (nul == nullptr) {
        return format("job key is not NUL-terminated within %zu bytes",
                      job_key_size);
    }
    size_t len = static_cast<size_t>(static_cast<const char *>(nul) - key);
    for (size_t i = len; i < job_key_size; ++i) {
        if (key[i] != '\0') {
            return format("job key byte %zu after the NUL is 0x%02x: "
                          "expected 0",
                          i, static_cast<unsigned char>(key[i]));
        }
    }
    return job_key_error({key, len});
}

/* The first `count` QPs valid, the rest all zero. */
std::string check_qps(const message &msg, unsigned count)
{
    for (unsigned i = 0; i < max_qps; ++i) {
        const qp_info &qp = msg.qps[i];
        if (i >= count) {
            if (qp.qpn != 0 || qp.psn != 0) {
                return format("QP entry %u (qpn 0x%x, psn 0x%x) beyond "
                              "num_qps %u: expected zero",
                              i, qp.qpn, qp.psn, count);
            }
            continue;
        }
        char what[32];
        std::snprintf(what, sizeof(what), "QP %u: qpn", i);
        std::string err = check_qpn(what, qp.qpn);
        if (!err.empty()) {
            return err;
        }
        if (qp.psn > psn_mask) {
            return format("QP %u: psn 0x%x: expected 24 bits", i, qp.psn);
        }
    }
    return {};
}

std::string check_num_qps(const message &msg)
{
    if (msg.num_qps < 1 || msg.num_qps > max_qps) {
        return format("num_qps %u: expected 1 to %u", msg.num_qps, max_qps);
    }
    return check_qps(msg, msg.num_qps);
}

std::string check_zero(const char *what, uint64_t value)
{
    if (value != 0) {
        return format("%s is 0x%" PRIx64 ": expected 0 in this message type",
                      what, value);
    }
    return {};
}

std::string check_am_size(const message &msg)
{
    if (msg.am_size == 0) {
        return "am_size 0: expected the sender's largest active message";
    }
    return {};
}

bool all_zero(std::span<const uint8_t> bytes)
{
    return std::all_of(bytes.begin(), bytes.end(),
                       [](uint8_t b) { return b == 0; });
}

/* The credential's shape; whether it is valid is peer_auth's question. */
std::string check_auth(const auth_block &a)
{
    if (a.kind >= auth_kind_limit) {
        return format("auth kind %u: expected below %u", a.kind,
                      auth_kind_limit);
    }
    if (a.reserved != 0) {
        return format("auth reserved field 0x%x: expected 0", a.reserved);
    }
    if (a.length > max_credential) {
        return format("credential of %u bytes: at most %zu fit", a.length,
                      max_credential);
    }
    if (!all_zero({a.credential + a.length, max_credential - a.length})) {
        return format("bytes after the %u-byte credential: expected zero",
                      a.length);
    }
    const auto kind       = static_cast<auth_kind>(a.kind);
    const bool has_nonce  = !all_zero(a.nonce);
    const char *kind_name = to_string(kind).data();
    switch (kind) {
    case auth_kind::none:
        if (a.length != 0) {
            return format("credential of %u bytes with auth kind none: "
                          "expected none",
                          a.length);
        }
        break;
    case auth_kind::munge:
        if (a.length == 0) {
            return "auth kind munge with an empty credential";
        }
        break;
    case auth_kind::secret:
        if (a.length != hmac_size) {
            return format("auth kind secret with a %u-byte credential: "
                          "expected the %zu-byte HMAC",
                          a.length, hmac_size);
        }
        if (a.issued_us == 0 || !has_nonce) {
            return "auth kind secret without its issue time or nonce";
        }
        return {};
    }
    if (a.issued_us != 0 || has_nonce) {
        return format("auth kind %s with an issue time or nonce: expected "
                      "zero",
                      kind_name);
    }
    return {};
}

std::string check_body(const message &msg)
{
    if (msg.reserved != 0) {
        return format("reserved field 0x%x: expected 0", msg.reserved);
    }
    std::string err;
    switch (static_cast<msg_type>(msg.hdr.type)) {
    case msg_type::request:
        if (msg.hdr.seq == 0) {
            return "request seq 0: expected 1 or more";
        }
        if (!(err = check_zero("ack_seq", msg.ack_seq)).empty() ||
            !(err = check_zero("status", msg.status)).empty() ||
            !(err = check_am_size(msg)).empty()) {
            return err;
        }
        return check_num_qps(msg);
    case msg_type::reply:
        if (msg.ack_seq == 0) {
            return "reply ack_seq 0: expected the seq of a request";
        }
        if (msg.dst_instance_id == 0) {
            return "reply addressed to instance 0: expected the "
                   "requester's instance id";
        }
        if (msg.status >= status_limit) {
            return format("reply status %u: expected below %u", msg.status,
                          status_limit);
        }
        if (msg.status == static_cast<uint16_t>(status::accepted)) {
            if (!(err = check_am_size(msg)).empty()) {
                return err;
            }
            return check_num_qps(msg);
        }
        /* a refusal: only the one about K names a K, only the one about
         * the AM size an AM size, and none carries QPs */
        if (msg.status == static_cast<uint16_t>(status::num_qps_mismatch)) {
            if (msg.num_qps < 1 || msg.num_qps > max_qps) {
                return format("num_qps %u in a num_qps_mismatch refusal: "
                              "expected 1 to %u",
                              msg.num_qps, max_qps);
            }
        } else if (!(err = check_zero("num_qps of this refusal", msg.num_qps))
                            .empty()) {
            return err;
        }
        if (msg.status == static_cast<uint16_t>(status::am_size_mismatch)) {
            if (!(err = check_am_size(msg)).empty()) {
                return err;
            }
        } else if (!(err = check_zero("am_size of this refusal", msg.am_size))
                            .empty()) {
            return err;
        }
        return check_qps(msg, 0);
    case msg_type::disconnect:
        if (msg.dst_instance_id == 0) {
            return "disconnect addressed to instance 0: expected the "
                   "peer's instance id";
        }
        if (!(err = check_zero("seq", msg.hdr.seq)).empty() ||
            !(err = check_zero("ack_seq", msg.ack_seq)).empty() ||
            !(err = check_zero("status", msg.status)).empty() ||
            !(err = check_zero("num_qps", msg.num_qps)).empty() ||
            !(err = check_zero("am_size", msg.am_size)).empty()) {
            return err;
        }
        return check_qps(msg, 0);
    }
    return format("message type %u: expected 1 to %u", msg.hdr.type,
                  msg_type_limit - 1);
}

message make_base(msg_type type, const sender &self, std::string_view job_key,
                  uint64_t dst_instance_id, uint32_t seq)
{
    message msg{};
    msg.hdr             = {magic, protocol_version, static_cast<uint16_t>(type),
                           static_cast<uint32_t>(message_size), seq};
    msg.src             = self;
    msg.dst_instance_id = dst_instance_id;
    job_key.copy(msg.job_key, job_key_size - 1);
    return msg;
}

void put_qps(message &msg, std::span<const qp_info> qps)
{
    size_t n    = std::min<size_t>(qps.size(), max_qps);
    msg.num_qps = static_cast<uint16_t>(n);
    std::copy_n(qps.begin(), n, msg.qps);
}

} // namespace

result<message> parse(std::span<const std::byte> bytes)
{
    header hdr;
    if (bytes.size() < sizeof(hdr)) {
        return failure{format("truncated datagram: %zu bytes, a header needs "
                              "%zu",
                              bytes.size(), sizeof(hdr))};
    }
    std::memcpy(&hdr, bytes.data(), sizeof(hdr));
    std::string err = check_header(hdr, bytes.size());
    if (!err.empty()) {
        return failure{err};
    }
    message msg;
    std::memcpy(&msg, bytes.data(), sizeof(msg));
    if (!(err = check_sender(msg.src)).empty() ||
        !(err = check_job_key(msg.job_key)).empty() ||
        !(err = check_body(msg)).empty() ||
        !(err = check_auth(msg.auth)).empty()) {
        return failure{err};
    }
    return msg;
}

message make_request(const sender &self, std::string_view job_key,
                     uint64_t dst_instance_id, uint32_t seq,
                     std::span<const qp_info> qps, uint32_t am_size)
{
    message msg = make_base(msg_type::request, self, job_key, dst_instance_id,
                            seq);
    put_qps(msg, qps);
    msg.am_size = am_size;
    return msg;
}

message make_reply(const sender &self, const message &request, uint32_t own_seq,
                   status verdict, const terms &mine,
                   std::span<const qp_info> qps)
{
    message msg = make_base(msg_type::reply, self, {}, request.src.instance_id,
                            own_seq);
    /* the requester's own words back: nothing it did not send */
    msg.src.uid = request.src.uid;
    std::memcpy(msg.job_key, request.job_key, job_key_size);
    msg.ack_seq = request.hdr.seq;
    msg.status  = static_cast<uint16_t>(verdict);
    switch (verdict) {
    case status::accepted:
        put_qps(msg, qps.first(std::min<size_t>(qps.size(), mine.num_qps)));
        msg.am_size = mine.am_size;
        break;
    case status::num_qps_mismatch:
        msg.num_qps = mine.num_qps;
        break;
    case status::am_size_mismatch:
        msg.am_size = mine.am_size;
        break;
    default:
        break;
    }
    return msg;
}

message make_disconnect(const sender &self, std::string_view job_key,
                        uint64_t dst_instance_id)
{
    return make_base(msg_type::disconnect, self, job_key, dst_instance_id, 0);
}

uint32_t random_qkey()
{
    uint32_t v = 0;
    while (!qkey_valid(v)) {
        if (getrandom(&v, sizeof(v), 0) != sizeof(v)) {
            v = std::random_device{}();
        }
        v &= ~qkey_controlled;
    }
    return v;
}

std::string_view to_string(status s)
{
    switch (s) {
    case status::accepted:
        return "accepted";
    case status::wrong_job_key:
        return "wrong job key";
    case status::wrong_uid:
        return "wrong user";
    case status::num_qps_mismatch:
        return "different number of QPs";
    case status::stale_instance:
        return "request names an earlier agent instance";
    case status::busy:
        return "busy";
    case status::am_size_mismatch:
        return "different largest active message (--am-size)";
    }
    return "unknown status";
}

std::string_view to_string(auth_kind k)
{
    switch (k) {
    case auth_kind::none:
        return "none";
    case auth_kind::munge:
        return "munge";
    case auth_kind::secret:
        return "secret";
    }
    return "unknown";
}

std::string_view to_string(msg_type t)
{
    switch (t) {
    case msg_type::request:
        return "request";
    case msg_type::reply:
        return "reply";
    case msg_type::disconnect:
        return "disconnect";
    }
    return "unknown type";
}

} // namespace rvt::wire::conn
