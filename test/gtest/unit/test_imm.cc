/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the immediate encoding (src/uct/ib/rvt/common/imm.h):
 * the layout is a wire contract between agents, so it is pinned by known
 * values, and every field is round-tripped at its limits.
 */
#include "uct/ib/rvt/common/imm.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>

namespace imm = rvt::imm;

TEST(imm, layout_is_pinned_by_known_values)
{
    /* client 1, kind am (1), am id 2, generation 0x81:
     * 1<<23 | 1<<20 | 2<<14 | 0x81<<6 */
    EXPECT_EQ(imm::encode_am(1, 0x81, 2), 0x00908000u | 0x2040u);
    /* highest client, kind write (2), source client 3, generation 0xff:
     * 3<<11 | 0xff<<3 */
    EXPECT_EQ(imm::encode_write(511, 0xff, 3), 0xffa01800u | 0x7f8u);
    /* control keepalive: kind 3, opcode 1 at bit 17 */
    EXPECT_EQ(imm::encode_control(imm::control_op::keepalive), 0x00320000u);
    /* client_gone (4) of client 5, generation 0x42 */
    EXPECT_EQ(imm::encode_control(imm::control_op::client_gone, 5, 0x42),
              0x00300000u | 4u << 17 | 5u << 8 | 0x42u);
}

TEST(imm, am_round_trips_at_every_limit)
{
    for (uint32_t client :
         {0u, 1u, imm::max_clients / 2, imm::max_clients - 1}) {
        for (uint32_t id : {0u, 1u, imm::max_am_ids - 1}) {
            for (uint32_t gen : {0u, 1u, 0x5au, imm::max_generations - 1}) {
                auto v = imm::encode_am(client, gen, id);
                ASSERT_TRUE(v.has_value()) << client << " " << id;
                auto d = imm::decode(*v);
                ASSERT_TRUE(d.has_value()) << std::hex << *v;
                EXPECT_EQ(d->what, imm::kind::am);
                EXPECT_EQ(d->dst_client, client);
                EXPECT_EQ(d->am_id, id);
                EXPECT_EQ(d->generation, gen);
            }
        }
    }
}

TEST(imm, write_round_trips_every_source_and_destination)
{
    for (uint32_t dst = 0; dst < imm::max_clients; ++dst) {
        uint32_t src = imm::max_clients - 1 - dst;
        uint32_t gen = (dst * 37) % imm::max_generations;
        auto v       = imm::encode_write(dst, gen, src);
        ASSERT_TRUE(v.has_value());
        auto d = imm::decode(*v);
        ASSERT_TRUE(d.has_value()) << std::hex << *v;
        EXPECT_EQ(d->what, imm::kind::write);
        EXPECT_EQ(d->dst_client, dst);
        EXPECT_EQ(d->src_client, src);
        EXPECT_EQ(d->generation, gen);
    }
}

TEST(imm, control_round_trips)
{
    auto v = imm::encode_control(imm::control_op::keepalive);
    ASSERT_TRUE(v.has_value());
    auto d = imm::decode(*v);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->what, imm::kind::control);
    EXPECT_EQ(d->op, imm::control_op::keepalive);
}

TEST(imm, pause_and_resume_carry_their_subject_to_the_limits)
{
    for (auto op : {imm::control_op::pause, imm::control_op::resume}) {
        for (uint32_t subject : {0u, 1u, imm::max_clients - 1}) {
            auto v = imm::encode_control(op, subject);
            ASSERT_TRUE(v.has_value()) << subject;
            auto d = imm::decode(*v);
            ASSERT_TRUE(d.has_value()) << subject;
            EXPECT_EQ(d->what, imm::kind::control);
            EXPECT_EQ(d->op, op);
            EXPECT_EQ(d->subject, subject);
            EXPECT_EQ(d->dst_client, 0u);
        }
        EXPECT_FALSE(imm::encode_control(op, imm::max_clients));
        EXPECT_FALSE(imm::encode_control(op, 1, 1)) << "with a generation";
        const uint32_t v = *imm::encode_control(op, imm::max_clients - 1);
        for (unsigned bit = 0; bit < imm::subject_shift; ++bit) {
            EXPECT_FALSE(imm::decode(v | (1u << bit)).has_value())
                    << "pause/resume generation bit " << bit;
        }
    }
    /* pause (2) at bit 17 with subject 5 at bit 8 */
    EXPECT_EQ(imm::encode_control(imm::control_op::pause, 5),
              0x00300000u | 2u << 17 | 5u << 8);
    /* a keepalive names no subject */
    EXPECT_FALSE(imm::encode_control(imm::control_op::keepalive, 1));
    const uint32_t ka = *imm::encode_control(imm::control_op::keepalive);
    EXPECT_FALSE(imm::decode(ka | (1u << imm::subject_shift)).has_value())
            << "keepalive with a subject";
}

TEST(imm, client_gone_carries_subject_and_generation_to_the_limits)
{
    for (uint32_t subject : {0u, 1u, imm::max_clients - 1}) {
        for (uint32_t gen : {0u, 1u, imm::max_generations - 1}) {
            auto v = imm::encode_control(imm::control_op::client_gone, subject,
                                         gen);
            ASSERT_TRUE(v.has_value()) << subject << " " << gen;
            auto d = imm::decode(*v);
            ASSERT_TRUE(d.has_value()) << std::hex << *v;
            EXPECT_EQ(d->what, imm::kind::control);
            EXPECT_EQ(d->op, imm::control_op::client_gone);
            EXPECT_EQ(d->subject, subject);
            EXPECT_EQ(d->generation, gen);
            EXPECT_EQ(d->dst_client, 0u);
        }
    }
    EXPECT_FALSE(imm::encode_control(imm::control_op::client_gone,
                                     imm::max_clients, 0));
    EXPECT_FALSE(imm::encode_control(imm::control_op::client_gone, 0,
                                     imm::max_generations));
    /* a forged one naming a destination client is not a control */
    const uint32_t v = *imm::encode_control(imm::control_op::client_gone, 3, 4);
    EXPECT_FALSE(imm::decode(v | (1u << imm::client_shift)).has_value());
}

TEST(imm, encoders_refuse_values_that_do_not_fit)
{
    EXPECT_FALSE(imm::encode_am(imm::max_clients, 0, 0).has_value());
    EXPECT_FALSE(imm::encode_am(0, 0, imm::max_am_ids).has_value());
    EXPECT_FALSE(imm::encode_am(0, imm::max_generations, 0).has_value());
    EXPECT_FALSE(imm::encode_write(imm::max_clients, 0, 0).has_value());
    EXPECT_FALSE(imm::encode_write(0, 0, imm::max_clients).has_value());
    EXPECT_FALSE(imm::encode_write(0, imm::max_generations, 0).has_value());
    EXPECT_FALSE(imm::encode_control(static_cast<imm::control_op>(0)));
    EXPECT_FALSE(imm::encode_control(
            static_cast<imm::control_op>(imm::control_op_limit)));
}

TEST(imm, decode_rejects_zero_unknown_kinds_and_reserved_bits)
{
    EXPECT_FALSE(imm::decode(0).has_value()) << "all-zero immediate";

    for (uint32_t k = imm::kind_limit; k < (1u << imm::kind_bits); ++k) {
        EXPECT_FALSE(imm::decode(k << imm::kind_shift).has_value())
                << "unknown kind " << k;
    }

    const uint32_t am = *imm::encode_am(5, 9, 7);
    for (unsigned bit = 0; bit < imm::am_generation_shift; ++bit) {
        EXPECT_FALSE(imm::decode(am | (1u << bit)).has_value())
                << "am reserved bit " << bit;
    }

    const uint32_t wr = *imm::encode_write(5, 9, 7);
    for (unsigned bit = 0; bit < imm::write_generation_shift; ++bit) {
        EXPECT_FALSE(imm::decode(wr | (1u << bit)).has_value())
                << "write reserved bit " << bit;
    }

    const uint32_t ctl = *imm::encode_control(imm::control_op::keepalive);
    EXPECT_FALSE(imm::decode(ctl | (1u << imm::client_shift)).has_value())
            << "control with a client index";
    EXPECT_FALSE(imm::decode(ctl | 1u).has_value())
            << "keepalive with a generation";
    EXPECT_FALSE(imm::decode(3u << imm::kind_shift).has_value())
            << "control opcode 0";
    for (uint32_t op = imm::control_op_limit; op < (1u << imm::control_op_bits);
         ++op) {
        EXPECT_FALSE(imm::decode((3u << imm::kind_shift) |
                                 (op << imm::control_op_shift))
                             .has_value())
                << "control opcode " << op;
    }
}

TEST(imm, distinct_inputs_give_distinct_immediates)
{
    std::set<uint32_t> seen;
    size_t count = 0;
    for (uint32_t client = 0; client < imm::max_clients; client += 7) {
        for (uint32_t id = 0; id < imm::max_am_ids; ++id, ++count) {
            seen.insert(*imm::encode_am(client, (id * 5) % 256, id));
            seen.insert(*imm::encode_am(client, (id * 5 + 1) % 256, id));
            ++count;
        }
        for (uint32_t src = 0; src < imm::max_clients; src += 13, ++count) {
            seen.insert(*imm::encode_write(client, src % 256, src));
            seen.insert(*imm::encode_write(client, (src + 1) % 256, src));
            ++count;
        }
    }
    EXPECT_EQ(seen.size(), count);
}

TEST(imm, wire_order_is_big_endian)
{
    const uint32_t host = 0x00908000u;
    const uint32_t wire = imm::to_wire(host);
    const auto *bytes   = reinterpret_cast<const uint8_t *>(&wire);
    EXPECT_EQ(bytes[0], 0x00);
    EXPECT_EQ(bytes[1], 0x90);
    EXPECT_EQ(bytes[2], 0x80);
    EXPECT_EQ(bytes[3], 0x00);
    EXPECT_EQ(imm::from_wire(wire), host);
}
