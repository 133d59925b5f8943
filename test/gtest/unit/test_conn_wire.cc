/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the agents' handshake datagrams (common/conn_wire.h):
 * round trips of each type, and for every way a datagram can be wrong, a
 * refusal whose reason names the bad value.
 */
#include "uct/ib/rvt/common/conn_wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace conn = rvt::wire::conn;

namespace {

std::vector<std::byte> bytes_of(const conn::message &msg)
{
    std::vector<std::byte> out(sizeof(msg));
    std::memcpy(out.data(), &msg, sizeof(msg));
    return out;
}

conn::sender sender_a()
{
    conn::sender s{};
    s.gid[0]      = 0xfe;
    s.gid[1]      = 0x80;
    s.gid[15]     = 0x0a;
    s.instance_id = 0x1122334455667788;
    s.ud_qpn      = 0x11;
    s.uid         = 1000;
    s.ud_qkey     = 0x1234abcd;
    return s;
}

conn::sender sender_b()
{
    conn::sender s = sender_a();
    s.gid[15]      = 0x0b;
    s.instance_id  = 0x99;
    s.ud_qpn       = 0xabcdef;
    s.ud_qkey      = 0x7fffffff; /* the largest an agent may have */
    return s;
}

const std::vector<conn::qp_info> four_qps = {{0x12, 0x000001},
                                             {0x13, 0xffffff},
                                             {0xfffffe, 0},
                                             {0xffffff, 0x42}};

conn::message good_request()
{
    return conn::make_request(sender_a(), "slurm.77.0", 0, 3, four_qps, 8192);
}

conn::message good_reply()
{
    std::vector<conn::qp_info> qps = {{0x20, 5},
                                      {0x21, 6},
                                      {0x22, 7},
                                      {0x23, 8}};
    return conn::make_reply(sender_b(), good_request(), 9,
                            conn::status::accepted, {4, 8192}, qps);
}

template<class Result>
void expect_refused(const Result &r, const std::string &needle)
{
    ASSERT_FALSE(r.ok()) << "accepted, expected a reason with: " << needle;
    EXPECT_NE(r.error().find(needle), std::string::npos)
            << "reason: \"" << r.error() << "\" lacks \"" << needle << "\"";
}

void expect_refused(const conn::message &msg, const std::string &needle)
{
    expect_refused(conn::parse(bytes_of(msg)), needle);
}

} // namespace

TEST(conn_wire, request_round_trips)
{
    auto r = conn::parse(bytes_of(good_request()));
    ASSERT_TRUE(r.ok()) << r.error();
    const conn::message &m = r.value();
    EXPECT_EQ(m.hdr.type, static_cast<uint16_t>(conn::msg_type::request));
    EXPECT_EQ(m.hdr.seq, 3u);
    EXPECT_EQ(m.src.instance_id, 0x1122334455667788u);
    EXPECT_EQ(m.src.ud_qpn, 0x11u);
    EXPECT_EQ(m.src.uid, 1000u);
    EXPECT_EQ(m.src.ud_qkey, 0x1234abcdu);
    EXPECT_EQ(m.src.reserved, 0u);
    EXPECT_EQ(std::memcmp(m.src.gid, sender_a().gid, conn::gid_size), 0);
    EXPECT_STREQ(m.job_key, "slurm.77.0");
    ASSERT_EQ(m.num_qps, 4u);
    for (size_t i = 0; i < four_qps.size(); ++i) {
        EXPECT_EQ(m.qps[i], four_qps[i]) << i;
    }
    EXPECT_EQ(m.qps[4], (conn::qp_info{0, 0}));
}

TEST(conn_wire, sixteen_qps_fit)
{
    std::vector<conn::qp_info> qps;
    for (uint32_t i = 0; i < conn::max_qps; ++i) {
        qps.push_back({100 + i, i});
    }
    auto r = conn::parse(
            bytes_of(conn::make_request(sender_a(), "k", 0, 1, qps, 64)));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value().num_qps, 16u);
    EXPECT_EQ(r.value().qps[15], (conn::qp_info{115, 15}));
}

TEST(conn_wire, replies_round_trip)
{
    auto r = conn::parse(bytes_of(good_reply()));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value().hdr.seq, 9u);
    EXPECT_EQ(r.value().ack_seq, 3u);
    EXPECT_EQ(r.value().dst_instance_id, sender_a().instance_id);
    /* the replier's own Q_Key, where an answer to it must go */
    EXPECT_EQ(r.value().src.ud_qkey, 0x7fffffffu);
    EXPECT_EQ(r.value().status, 0u);
    EXPECT_EQ(r.value().num_qps, 4u);
    EXPECT_EQ(r.value().qps[3], (conn::qp_info{0x23, 8}));

    /* a refusal carries no QPs even if the caller passes some */
    auto refusal = conn::make_reply(sender_b(), good_request(), 0,
                                    conn::status::wrong_uid, {4, 8192},
                                    four_qps);
    auto f       = conn::parse(bytes_of(refusal));
    ASSERT_TRUE(f.ok()) << f.error();
    EXPECT_EQ(f.value().status, static_cast<uint16_t>(conn::status::wrong_uid));
    EXPECT_EQ(f.value().num_qps, 0u);
    EXPECT_EQ(f.value().am_size, 0u);
    EXPECT_EQ(f.value().qps[0], (conn::qp_info{0, 0}));
}

TEST(conn_wire, a_reply_tells_the_requester_nothing_it_did_not_send)
{
    conn::message req = good_request();
    std::strcpy(req.job_key, "guessing.1");
    req.src.uid = 4242;
    for (auto verdict : {conn::status::wrong_job_key, conn::status::wrong_uid,
                         conn::status::busy, conn::status::accepted}) {
        auto rep = conn::make_reply(sender_b(), req, 0, verdict, {4, 8192},
                                    four_qps);
        EXPECT_STREQ(rep.job_key, "guessing.1");
        EXPECT_EQ(rep.src.uid, 4242u);
        ASSERT_TRUE(conn::parse(bytes_of(rep)).ok());
    }
}

TEST(conn_wire, the_refusals_about_k_and_the_am_size_name_the_repliers_value)
{
    auto k = conn::parse(bytes_of(
            conn::make_reply(sender_b(), good_request(), 0,
                             conn::status::num_qps_mismatch, {2, 4096}, {})));
    ASSERT_TRUE(k.ok()) << k.error();
    EXPECT_EQ(k.value().num_qps, 2u);
    EXPECT_EQ(k.value().am_size, 0u);
    auto am = conn::parse(bytes_of(
            conn::make_reply(sender_b(), good_request(), 0,
                             conn::status::am_size_mismatch, {2, 4096}, {})));
    ASSERT_TRUE(am.ok()) << am.error();
    EXPECT_EQ(am.value().num_qps, 0u);
    EXPECT_EQ(am.value().am_size, 4096u);
    EXPECT_EQ(good_request().am_size, 8192u);

    conn::message bad = good_request();
    bad.am_size       = 0;
    expect_refused(bad, "am_size 0");
    bad        = good_reply();
    bad.status = static_cast<uint16_t>(conn::status::wrong_uid);
    std::memset(bad.qps, 0, sizeof(bad.qps));
    bad.num_qps = 0;
    expect_refused(bad, "am_size of this refusal");
}

TEST(conn_wire, credentials_are_checked_for_shape)
{
    conn::message m = good_request();
    ASSERT_TRUE(conn::parse(bytes_of(m)).ok());
    m.auth.kind = 3;
    expect_refused(m, "auth kind 3: expected below 3");

    m             = good_request();
    m.auth.length = 1;
    expect_refused(m, "credential of 1 bytes with auth kind none");

    m           = good_request();
    m.auth.kind = static_cast<uint16_t>(conn::auth_kind::munge);
    expect_refused(m, "auth kind munge with an empty credential");
    m.auth.length        = 3;
    m.auth.credential[0] = 'M';
    ASSERT_TRUE(conn::parse(bytes_of(m)).ok());
    m.auth.credential[5] = 'x';
    expect_refused(m, "bytes after the 3-byte credential");
    m.auth.credential[5] = 0;
    m.auth.issued_us     = 1;
    expect_refused(m, "auth kind munge with an issue time or nonce");

    m             = good_request();
    m.auth.kind   = static_cast<uint16_t>(conn::auth_kind::secret);
    m.auth.length = 31;
    expect_refused(m, "auth kind secret with a 31-byte credential: expected "
                      "the 32-byte HMAC");
    m.auth.length = conn::hmac_size;
    expect_refused(m, "without its issue time or nonce");
    m.auth.issued_us = 1;
    m.auth.nonce[3]  = 1;
    ASSERT_TRUE(conn::parse(bytes_of(m)).ok());
    m.auth.length = 0xffff;
    expect_refused(m, "credential of 65535 bytes: at most 720 fit");
    m.auth.length   = conn::hmac_size;
    m.auth.reserved = 2;
    expect_refused(m, "auth reserved field 0x2");
}

TEST(conn_wire, disconnect_round_trips)
{
    auto d = conn::make_disconnect(sender_a(), "k", 0x99);
    auto r = conn::parse(bytes_of(d));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value().hdr.type,
              static_cast<uint16_t>(conn::msg_type::disconnect));
    EXPECT_EQ(r.value().dst_instance_id, 0x99u);
}

TEST(conn_wire, header_errors_name_the_value)
{
    auto good = bytes_of(good_request());
    expect_refused(conn::parse({}), "0 bytes");
    expect_refused(conn::parse(std::span(good).first(15)), "15 bytes");

    auto bad      = good_request();
    bad.hdr.magic = 0x41545652; /* an attach message's magic */
    expect_refused(bad, "0x41545652");

    bad             = good_request();
    bad.hdr.version = 7;
    expect_refused(bad, "version 7");

    bad          = good_request();
    bad.hdr.type = 4;
    expect_refused(bad, "type 4");
    bad.hdr.type = 0;
    expect_refused(bad, "type 0");
}

TEST(conn_wire, length_must_be_exact)
{
    auto bytes = bytes_of(good_request());
    expect_refused(conn::parse(std::span(bytes).first(255)), "255 bytes");
    bytes.push_back(std::byte{0});
    expect_refused(conn::parse(bytes), "1025 bytes");

    auto bad       = good_request();
    bad.hdr.length = 200;
    expect_refused(bad, "header says 200");
}

TEST(conn_wire, sender_is_checked)
{
    auto bad = good_request();
    std::memset(bad.src.gid, 0, sizeof(bad.src.gid));
    expect_refused(bad, "GID is all zero");

    bad                 = good_request();
    bad.src.instance_id = 0;
    expect_refused(bad, "instance id 0");

    bad            = good_request();
    bad.src.ud_qpn = 0x1000000;
    expect_refused(bad, "UD QPN 0x1000000");
    bad.src.ud_qpn = 1; /* QP1, the GSI QP */
    expect_refused(bad, "UD QPN 0x1");
}

/* The sender's Q_Key is where an answer goes: a controlled one (high bit
 * set) would make the answering device use its own QP's Q_Key, and is no
 * agent's; 0 is no agent's either; the word after it is reserved. */
TEST(conn_wire, sender_q_key_is_checked)
{
    auto bad        = good_request();
    bad.src.ud_qkey = 0x80000000;
    expect_refused(bad, "sender Q_Key 0x80000000: expected 1 to 0x7fffffff");
    bad.src.ud_qkey = 0xd2565451;
    expect_refused(bad, "sender Q_Key 0xd2565451");
    bad.src.ud_qkey = 0;
    expect_refused(bad, "sender Q_Key 0x0");

    bad              = good_request();
    bad.src.reserved = 0x10;
    expect_refused(bad, "sender reserved field 0x10: expected 0");

    /* the same in a reply and a disconnect */
    auto reply = good_reply();
    reply.src.ud_qkey |= 0x80000000;
    expect_refused(reply, "sender Q_Key 0xffffffff");
    auto bye         = conn::make_disconnect(sender_a(), "k", 0x99);
    bye.src.reserved = 1;
    expect_refused(bye, "sender reserved field 0x1");
}

/* The credential gave the sender its 8 bytes: a datagram is still 1024. */
TEST(conn_wire, the_q_key_fits_in_the_same_datagram)
{
    EXPECT_EQ(sizeof(conn::sender), 40u);
    EXPECT_EQ(conn::max_credential, 720u);
    EXPECT_EQ(sizeof(conn::message), conn::message_size);
    EXPECT_EQ(conn::protocol_version, 4u);
}

TEST(conn_wire, random_q_keys_are_valid_and_differ)
{
    uint32_t first = conn::random_qkey();
    bool differ    = false;
    for (int i = 0; i < 1000; ++i) {
        const uint32_t k = conn::random_qkey();
        ASSERT_TRUE(rvt::wire::qkey_valid(k)) << std::hex << k;
        differ = differ || k != first;
    }
    EXPECT_TRUE(differ) << "1000 Q_Keys, all 0x" << std::hex << first;
}

TEST(conn_wire, job_key_is_checked)
{
    auto bad = good_request();
    std::memset(bad.job_key, 'a', sizeof(bad.job_key));
    expect_refused(bad, "not NUL-terminated");

    bad             = good_request();
    bad.job_key[40] = 'x'; /* after the NUL */
    expect_refused(bad, "byte 40 after the NUL is 0x78");

    bad = good_request();
    std::memset(bad.job_key, 0, sizeof(bad.job_key));
    expect_refused(bad, "0 characters");

    bad = conn::make_request(sender_a(), "a/b", 0, 1, four_qps, 64);
    expect_refused(bad, "0x2f");
}

TEST(conn_wire, request_fields_are_checked)
{
    auto bad    = good_request();
    bad.hdr.seq = 0;
    expect_refused(bad, "request seq 0");

    bad         = good_request();
    bad.ack_seq = 4;
    expect_refused(bad, "ack_seq is 0x4");

    bad        = good_request();
    bad.status = 2;
    expect_refused(bad, "status is 0x2");

    bad         = good_request();
    bad.num_qps = 0;
    expect_refused(bad, "num_qps 0: expected 1 to 16");
    bad.num_qps = 17;
    expect_refused(bad, "num_qps 17");

    /* num_qps 3 leaves the fourth entry, which must then be zero */
    bad         = good_request();
    bad.num_qps = 3;
    expect_refused(bad, "QP entry 3 (qpn 0xffffff, psn 0x42)");

    bad            = good_request();
    bad.qps[9].psn = 1;
    expect_refused(bad, "QP entry 9");
}

TEST(conn_wire, qpns_and_psns_are_24_bits)
{
    auto bad       = good_request();
    bad.qps[2].qpn = 0x1000000;
    expect_refused(bad, "QP 2: qpn 0x1000000");

    bad            = good_request();
    bad.qps[0].qpn = 0;
    expect_refused(bad, "QP 0: qpn 0x0");

    bad            = good_request();
    bad.qps[1].psn = 0x1000000;
    expect_refused(bad, "QP 1: psn 0x1000000");
}

TEST(conn_wire, reply_fields_are_checked)
{
    auto bad    = good_reply();
    bad.ack_seq = 0;
    expect_refused(bad, "ack_seq 0");

    bad                 = good_reply();
    bad.dst_instance_id = 0;
    expect_refused(bad, "reply addressed to instance 0");

    bad        = good_reply();
    bad.status = conn::status_limit;
    expect_refused(bad, "reply status 7: expected below 7");

    bad            = good_reply();
    bad.qps[0].psn = 0xff000000;
    expect_refused(bad, "psn 0xff000000");

    /* a refusal must not carry QPs */
    bad        = good_reply();
    bad.status = static_cast<uint16_t>(conn::status::busy);
    expect_refused(bad, "num_qps of this refusal is 0x4");
    bad.num_qps = 0;
    bad.am_size = 0;
    expect_refused(bad, "QP entry 0");
}

TEST(conn_wire, disconnect_fields_are_checked)
{
    auto bad            = conn::make_disconnect(sender_a(), "k", 0x99);
    bad.dst_instance_id = 0;
    expect_refused(bad, "disconnect addressed to instance 0");

    bad         = conn::make_disconnect(sender_a(), "k", 0x99);
    bad.hdr.seq = 5;
    expect_refused(bad, "seq is 0x5");

    bad         = conn::make_disconnect(sender_a(), "k", 0x99);
    bad.num_qps = 1;
    expect_refused(bad, "num_qps is 0x1");

    bad            = conn::make_disconnect(sender_a(), "k", 0x99);
    bad.qps[0].qpn = 7;
    expect_refused(bad, "QP entry 0");
}

TEST(conn_wire, permanence_and_names)
{
    EXPECT_FALSE(conn::is_permanent(conn::status::accepted));
    EXPECT_FALSE(conn::is_permanent(conn::status::busy));
    EXPECT_TRUE(conn::is_permanent(conn::status::wrong_job_key));
    EXPECT_TRUE(conn::is_permanent(conn::status::stale_instance));
    for (uint16_t s = 0; s < conn::status_limit; ++s) {
        EXPECT_NE(conn::to_string(static_cast<conn::status>(s)),
                  "unknown status")
                << s;
    }
    for (uint16_t t = 1; t < conn::msg_type_limit; ++t) {
        EXPECT_NE(conn::to_string(static_cast<conn::msg_type>(t)),
                  "unknown type")
                << t;
    }
}
