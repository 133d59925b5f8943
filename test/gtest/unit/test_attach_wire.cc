/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the attach protocol's messages (common/attach_wire.h):
 * round trips, and for every way a message can be wrong, a refusal whose
 * reason names the bad value.
 */
#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/imm.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace wire = rvt::wire;

namespace {

template<class Msg> std::vector<std::byte> bytes_of(const Msg &msg)
{
    std::vector<std::byte> out(sizeof(msg));
    std::memcpy(out.data(), &msg, sizeof(msg));
    return out;
}

wire::agent_address good_address()
{
    wire::agent_address a{};
    a.gid[10]  = 0xff;
    a.gid[11]  = 0xff;
    a.gid[12]  = 198;
    a.gid[15]  = 1;
    a.ud_qpn   = 0x11;
    a.ud_qkey  = 0x5eed1234;
    a.agent_id = 0x1234;
    return a;
}

wire::attach_reply accepted_reply()
{
    wire::attach_reply rep = wire::make_refusal(wire::attach_status::accepted,
                                                "");
    rep.client_index       = 7;
    rep.pd_handle          = 3;
    rep.reg_mode    = static_cast<uint32_t>(wire::reg_mode::uverbs_ioctl);
    rep.driver_id   = 11;
    rep.shm_size    = 1 << 20;
    rep.agent_id    = 0x1234;
    rep.address     = good_address();
    rep.num_qps     = 4;
    rep.max_am_size = 8192;
    rep.path_mtu    = 1024;
    return rep;
}

/* parse must fail, and its reason must contain `needle` */
template<class Result>
void expect_refused(const Result &r, const std::string &needle)
{
    ASSERT_FALSE(r.ok()) << "accepted, expected a reason with: " << needle;
    EXPECT_NE(r.error().find(needle), std::string::npos)
            << "reason: \"" << r.error() << "\" lacks \"" << needle << "\"";
}

} // namespace

TEST(attach_wire, request_round_trips)
{
    auto req = wire::make_attach_request("slurm.1234.0", 4242);
    auto r   = wire::parse_attach_request(bytes_of(req));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_STREQ(r.value().job_key, "slurm.1234.0");
    EXPECT_EQ(r.value().pid, 4242u);
}

TEST(attach_wire, replies_round_trip)
{
    auto r = wire::parse_attach_reply(bytes_of(accepted_reply()));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value().client_index, 7u);
    EXPECT_EQ(r.value().shm_size, 1u << 20);
    EXPECT_EQ(r.value().address, good_address());
    EXPECT_EQ(r.value().address.ud_qkey, 0x5eed1234u);

    auto refusal = wire::make_refusal(wire::attach_status::wrong_job_key,
                                      "job key 'a' is not this agent's 'b'");
    auto f       = wire::parse_attach_reply(bytes_of(refusal));
    ASSERT_TRUE(f.ok()) << f.error();
    EXPECT_EQ(f.value().status,
              static_cast<uint32_t>(wire::attach_status::wrong_job_key));
    EXPECT_STREQ(f.value().reason, "job key 'a' is not this agent's 'b'");
}

TEST(attach_wire, header_errors_name_the_value)
{
    auto good = bytes_of(wire::make_attach_request("k", 1));
    expect_refused(wire::parse_attach_request({}), "0 bytes");
    expect_refused(wire::parse_attach_request(
                           std::span(good).first(sizeof(wire::msg_header) - 1)),
                   "15 bytes");

    auto bad      = wire::make_attach_request("k", 1);
    bad.hdr.magic = 0xdeadbeef;
    expect_refused(wire::parse_attach_request(bytes_of(bad)), "0xdeadbeef");

    bad             = wire::make_attach_request("k", 1);
    bad.hdr.version = wire::protocol_version + 1;
    expect_refused(wire::parse_attach_request(bytes_of(bad)),
                   "version " + std::to_string(wire::protocol_version + 1));

    bad            = wire::make_attach_request("k", 1);
    bad.hdr.length = wire::max_message_size + 1;
    expect_refused(wire::parse_attach_request(bytes_of(bad)), "4097");
    bad.hdr.length = 15;
    expect_refused(wire::parse_attach_request(bytes_of(bad)), "length 15");

    bad              = wire::make_attach_request("k", 1);
    bad.hdr.reserved = 5;
    expect_refused(wire::parse_attach_request(bytes_of(bad)), "0x5");
}

TEST(attach_wire, type_and_length_must_match)
{
    expect_refused(wire::parse_attach_request(bytes_of(accepted_reply())),
                   "type 2");
    auto req   = wire::make_attach_request("k", 1);
    auto bytes = bytes_of(req);
    expect_refused(wire::parse_attach_request(std::span(bytes).first(95)),
                   "95 bytes");
    bytes.push_back(std::byte{0});
    expect_refused(wire::parse_attach_request(bytes), "97 bytes");
    req.hdr.length = 100;
    expect_refused(wire::parse_attach_request(bytes_of(req)),
                   "header says 100");
}

TEST(attach_wire, job_keys_are_checked)
{
    auto req = wire::make_attach_request("k", 1);
    std::memset(req.job_key, 'a', sizeof(req.job_key));
    expect_refused(wire::parse_attach_request(bytes_of(req)),
                   "not NUL-terminated");

    req = wire::make_attach_request("", 1);
    expect_refused(wire::parse_attach_request(bytes_of(req)), "0 characters");

    req = wire::make_attach_request("../etc", 1);
    expect_refused(wire::parse_attach_request(bytes_of(req)), "0x2f");

    std::string longest(wire::job_key_size - 1, 'x');
    EXPECT_EQ(wire::job_key_error(longest), "");
    EXPECT_NE(wire::job_key_error(longest + "x"), "");
    EXPECT_EQ(wire::job_key_error("ompi.12345:0+a-b_c"), "");
    EXPECT_NE(wire::job_key_error("a b"), "");
}

TEST(attach_wire, request_flags_must_be_known)
{
    auto req  = wire::make_attach_request("k", 1);
    req.flags = 4;
    expect_refused(wire::parse_attach_request(bytes_of(req)), "0x4");
}

/* A sibling's request carries its leader; the parser takes the leader
 * fields only with attach_sibling, and only in range. */
TEST(attach_wire, sibling_requests_round_trip_and_are_checked)
{
    auto req = wire::make_attach_request("k", 1, wire::leader_ref{5, 3});
    auto r   = wire::parse_attach_request(bytes_of(req));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value().flags, wire::attach_sibling);
    EXPECT_EQ(r.value().leader_index, 5u);
    EXPECT_EQ(r.value().leader_generation, 3u);

    auto plain = wire::make_attach_request("k", 1);
    EXPECT_EQ(plain.flags, 0u);
    EXPECT_EQ(plain.leader_index, 0u);
    plain.leader_index = 2;
    expect_refused(wire::parse_attach_request(bytes_of(plain)),
                   "leader index 2 generation 0 without attach_sibling");
    plain                   = wire::make_attach_request("k", 1);
    plain.leader_generation = 7;
    expect_refused(wire::parse_attach_request(bytes_of(plain)),
                   "leader index 0 generation 7 without attach_sibling");

    req.leader_index = rvt::imm::max_clients;
    expect_refused(wire::parse_attach_request(bytes_of(req)),
                   "leader index " + std::to_string(rvt::imm::max_clients) +
                           ": expected below");
    req = wire::make_attach_request(
            "k", 1, wire::leader_ref{0, rvt::imm::max_generations});
    expect_refused(wire::parse_attach_request(bytes_of(req)),
                   "leader generation " +
                           std::to_string(rvt::imm::max_generations) +
                           ": expected below");
}

TEST(attach_wire, accepted_reply_fields_are_checked)
{
    auto rep         = accepted_reply();
    rep.client_index = 512;
    expect_refused(wire::parse_attach_reply(bytes_of(rep)), "client index 512");

    rep                   = accepted_reply();
    rep.client_generation = 256;
    expect_refused(wire::parse_attach_reply(bytes_of(rep)),
                   "client generation 256: expected below 256");
    rep.client_generation = 255;
    EXPECT_TRUE(wire::parse_attach_reply(bytes_of(rep)).ok());

    rep          = accepted_reply();
    rep.reg_mode = 4;
    expect_refused(wire::parse_attach_reply(bytes_of(rep)), "mode 4");
    rep.reg_mode = static_cast<uint32_t>(wire::reg_mode::in_process);
    EXPECT_TRUE(wire::parse_attach_reply(bytes_of(rep)).ok());

    rep        = accepted_reply();
    rep.status = 8;
    expect_refused(wire::parse_attach_reply(bytes_of(rep)), "status 8");

    rep = accepted_reply();
    std::memset(rep.reason, 'r', sizeof(rep.reason));
    expect_refused(wire::parse_attach_reply(bytes_of(rep)),
                   "not NUL-terminated");

    rep          = accepted_reply();
    rep.shm_size = 0;
    expect_refused(wire::parse_attach_reply(bytes_of(rep)), "size 0");

    rep         = accepted_reply();
    rep.num_qps = 17;
    expect_refused(wire::parse_attach_reply(bytes_of(rep)), "17 QPs");

    rep                = accepted_reply();
    rep.address.ud_qpn = 1;
    expect_refused(wire::parse_attach_reply(bytes_of(rep)), "UD QPN 1");

    rep                 = accepted_reply();
    rep.address.ud_qkey = 0;
    expect_refused(wire::parse_attach_reply(bytes_of(rep)), "Q_Key 0x0");

    rep          = accepted_reply();
    rep.features = wire::agent_feature_atomic64;
    EXPECT_TRUE(wire::parse_attach_reply(bytes_of(rep)).ok());
    rep.features = wire::agent_feature_atomic64 |
                   wire::agent_feature_unauthenticated;
    EXPECT_TRUE(wire::parse_attach_reply(bytes_of(rep)).ok());
    rep.features = 0x6;
    expect_refused(wire::parse_attach_reply(bytes_of(rep)),
                   "features 0x6: expected only 0x3");
    for (uint32_t mtu : {0u, 128u, 1000u, 8192u}) {
        rep          = accepted_reply();
        rep.path_mtu = mtu;
        expect_refused(wire::parse_attach_reply(bytes_of(rep)),
                       "path MTU " + std::to_string(mtu));
    }
    for (uint32_t mtu : {256u, 4096u}) {
        rep          = accepted_reply();
        rep.path_mtu = mtu;
        EXPECT_TRUE(wire::parse_attach_reply(bytes_of(rep)).ok()) << mtu;
    }
}

TEST(attach_wire, agent_addresses_are_checked)
{
    EXPECT_EQ(wire::agent_address_error(good_address()), "");
    auto a = good_address();
    std::memset(a.gid, 0, sizeof(a.gid));
    EXPECT_NE(wire::agent_address_error(a).find("all-zero GID"),
              std::string::npos);
    a        = good_address();
    a.ud_qpn = 0x1000000;
    EXPECT_NE(wire::agent_address_error(a).find("UD QPN 16777216"),
              std::string::npos);
    a          = good_address();
    a.agent_id = 0;
    EXPECT_NE(wire::agent_address_error(a).find("agent id 0"),
              std::string::npos);
    /* the Q_Key where the reserved word was: 0 and a controlled one
     * (high bit set) are no agent's */
    a         = good_address();
    a.ud_qkey = 0;
    EXPECT_NE(wire::agent_address_error(a).find("Q_Key 0x0: expected 1 to "
                                                "0x7fffffff"),
              std::string::npos)
            << wire::agent_address_error(a);
    a.ud_qkey = 0x80000001;
    EXPECT_NE(wire::agent_address_error(a).find("Q_Key 0x80000001"),
              std::string::npos)
            << wire::agent_address_error(a);
    a.ud_qkey = 0x7fffffff;
    EXPECT_EQ(wire::agent_address_error(a), "");
    EXPECT_EQ(offsetof(wire::agent_address, ud_qkey), 20u);
}

TEST(attach_wire, peer_messages_round_trip_and_are_checked)
{
    auto req = wire::make_peer_request(good_address());
    auto r   = wire::parse_peer_request(bytes_of(req));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value().peer, good_address());
    EXPECT_EQ(r.value().peer.ud_qkey, 0x5eed1234u);

    req.peer.agent_id = 0;
    expect_refused(wire::parse_peer_request(bytes_of(req)), "agent id 0");

    auto rep = wire::make_peer_reply(wire::peer_status::accepted, 3, "");
    auto p   = wire::parse_peer_reply(bytes_of(rep));
    ASSERT_TRUE(p.ok()) << p.error();
    EXPECT_EQ(p.value().peer, 3u);

    rep = wire::make_peer_reply(wire::peer_status::refused, 0, "too many");
    p   = wire::parse_peer_reply(bytes_of(rep));
    ASSERT_TRUE(p.ok()) << p.error();
    EXPECT_STREQ(p.value().reason, "too many");

    rep.status = 2;
    expect_refused(wire::parse_peer_reply(bytes_of(rep)), "status 2");
    rep = wire::make_peer_reply(wire::peer_status::refused, 0, "x");
    std::memset(rep.reason, 'x', sizeof(rep.reason));
    expect_refused(wire::parse_peer_reply(bytes_of(rep)), "NUL");

    /* a peer request is not an MR notice, nor the other way round */
    expect_refused(wire::parse_mr_notice(bytes_of(req)), "type 7");
}

TEST(attach_wire, retire_notices_round_trip_and_are_checked)
{
    using wire::msg_type;
    auto req = wire::make_retire_notice(msg_type::retire_address);
    ASSERT_TRUE(
            wire::parse_retire_notice(bytes_of(req), msg_type::retire_address)
                    .ok());
    auto rep = wire::make_retire_notice(msg_type::retire_address_reply);
    ASSERT_TRUE(wire::parse_retire_notice(bytes_of(rep),
                                          msg_type::retire_address_reply)
                        .ok());
    /* a request is not its reply */
    expect_refused(wire::parse_retire_notice(bytes_of(req),
                                             msg_type::retire_address_reply),
                   "type 12");
    req.reserved[1] = 5;
    expect_refused(wire::parse_retire_notice(bytes_of(req),
                                             msg_type::retire_address),
                   "reserved word 0x5");
    /* nor an MR notice */
    expect_refused(wire::parse_mr_notice(bytes_of(rep)), "type 13");
}

TEST(attach_wire, every_status_has_a_name)
{
    for (uint32_t s = 0; s < wire::attach_status_limit; ++s) {
        EXPECT_NE(wire::to_string(static_cast<wire::attach_status>(s)),
                  "unknown status")
                << s;
    }
}

TEST(attach_wire, mr_notices_round_trip_and_are_checked)
{
    auto n = wire::make_mr_notice(wire::msg_type::mr_registered, 3, 4, 5,
                                  0x1000, 8192);
    auto r = wire::parse_mr_notice(bytes_of(n));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value().handle, 3u);
    EXPECT_EQ(r.value().length, 8192u);

    n = wire::make_mr_notice(wire::msg_type::mr_registered, 3, 4, 5, 0x1000, 0);
    expect_refused(wire::parse_mr_notice(bytes_of(n)), "length 0");
    n = wire::make_mr_notice(wire::msg_type::mr_release, 3, 0, 0, 0, 0);
    EXPECT_TRUE(wire::parse_mr_notice(bytes_of(n)).ok());
    n.flags = wire::mr_release_reply_wanted;
    r       = wire::parse_mr_notice(bytes_of(n));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value().flags, wire::mr_release_reply_wanted);
    n.flags = 2;
    expect_refused(wire::parse_mr_notice(bytes_of(n)), "flags 0x2");
    /* a registration may ask for an answer, and nothing else */
    n = wire::make_mr_notice(wire::msg_type::mr_registered, 3, 4, 5, 0x1000,
                             8192, wire::mr_registered_reply_wanted);
    r = wire::parse_mr_notice(bytes_of(n));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value().flags, wire::mr_registered_reply_wanted);
    n.flags = 2;
    expect_refused(wire::parse_mr_notice(bytes_of(n)), "flags 0x2");
    expect_refused(wire::parse_mr_notice(
                           bytes_of(wire::make_attach_request("k", 1))),
                   "type 1");
}

TEST(attach_wire, mr_intents_name_a_region_and_nothing_else)
{
    auto n = wire::make_mr_intent(0x7f0000001000, 65536);
    auto r = wire::parse_mr_notice(bytes_of(n));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value().hdr.type,
              static_cast<uint16_t>(wire::msg_type::mr_intent));
    EXPECT_EQ(r.value().addr, 0x7f0000001000u);
    EXPECT_EQ(r.value().length, 65536u);
    n = wire::make_mr_intent(0x1000, 8192, wire::mr_intent_withdrawn);
    r = wire::parse_mr_notice(bytes_of(n));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value().flags, wire::mr_intent_withdrawn);

    n.flags = 2;
    expect_refused(wire::parse_mr_notice(bytes_of(n)), "flags 0x2");
    expect_refused(wire::parse_mr_notice(
                           bytes_of(wire::make_mr_intent(0x1000, 0))),
                   "length 0");
    n        = wire::make_mr_intent(0x1000, 8192);
    n.handle = 3; /* an intent names no MR yet */
    expect_refused(wire::parse_mr_notice(bytes_of(n)), "handle 3");
    n      = wire::make_mr_intent(0x1000, 8192);
    n.rkey = 0x55;
    expect_refused(wire::parse_mr_notice(bytes_of(n)), "rkey 0x55");
}

TEST(attach_wire, mr_release_replies_round_trip_and_are_checked)
{
    auto rep = wire::make_mr_release_reply(wire::release_status::released, 9,
                                           "");
    auto p   = wire::parse_mr_release_reply(bytes_of(rep));
    ASSERT_TRUE(p.ok()) << p.error();
    EXPECT_EQ(p.value().handle, 9u);
    EXPECT_EQ(p.value().status,
              static_cast<uint32_t>(wire::release_status::released));

    rep = wire::make_mr_release_reply(wire::release_status::refused, 9,
                                      "not yours");
    p   = wire::parse_mr_release_reply(bytes_of(rep));
    ASSERT_TRUE(p.ok()) << p.error();
    EXPECT_STREQ(p.value().reason, "not yours");

    rep.status = 2;
    expect_refused(wire::parse_mr_release_reply(bytes_of(rep)), "status 2");
    rep = wire::make_mr_release_reply(wire::release_status::refused, 9, "x");
    std::memset(rep.reason, 'x', sizeof(rep.reason));
    expect_refused(wire::parse_mr_release_reply(bytes_of(rep)), "NUL");
    expect_refused(wire::parse_mr_release_reply(bytes_of(wire::make_peer_reply(
                           wire::peer_status::accepted, 1, ""))),
                   "type 8");
}

TEST(attach_wire, mr_registered_replies_round_trip_and_are_checked)
{
    auto rep = wire::make_mr_registered_reply(wire::announce_status::accepted,
                                              9, "");
    auto p   = wire::parse_mr_registered_reply(bytes_of(rep));
    ASSERT_TRUE(p.ok()) << p.error();
    EXPECT_EQ(p.value().handle, 9u);
    EXPECT_EQ(p.value().status,
              static_cast<uint32_t>(wire::announce_status::accepted));

    rep = wire::make_mr_registered_reply(wire::announce_status::refused, 9,
                                         "lkey 0x1 announced");
    p   = wire::parse_mr_registered_reply(bytes_of(rep));
    ASSERT_TRUE(p.ok()) << p.error();
    EXPECT_STREQ(p.value().reason, "lkey 0x1 announced");

    rep.status = 2;
    expect_refused(wire::parse_mr_registered_reply(bytes_of(rep)), "status 2");
    rep = wire::make_mr_registered_reply(wire::announce_status::refused, 9,
                                         std::string(500, 'x'));
    EXPECT_EQ(std::strlen(rep.reason), sizeof(rep.reason) - 1)
            << "a long reason is cut, still terminated";
    std::memset(rep.reason, 'x', sizeof(rep.reason));
    expect_refused(wire::parse_mr_registered_reply(bytes_of(rep)), "NUL");
    /* a release's answer is not an announcement's */
    expect_refused(wire::parse_mr_registered_reply(
                           bytes_of(wire::make_mr_release_reply(
                                   wire::release_status::released, 9, ""))),
                   "type 9");
}
