/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The source GID of a received handshake datagram (ud_channel.h,
 * grh_source_gid): what the engine compares with the sender a datagram
 * names (engine.h, "Hostile handshakes"). A GRH (IB, RoCE v1, RoCE v2
 * over IPv6) gives its SGID; RoCE v2 over IPv4 gives the IPv4 header's
 * source as an IPv4-mapped GID, as rdma-core reads them.
 */
#include "uct/ib/rvt/agent/device/ud_channel.h"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace {

using rvt::agent::grh_size;
using gid    = std::array<uint8_t, 16>;
using header = std::array<std::byte, grh_size>;

constexpr gid link_local{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 7};
constexpr gid mapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 2, 15};

/* A GRH (IPv6 header) whose SGID is `sgid`. */
header grh(const gid &sgid)
{
    header h{};
    h[0] = std::byte{0x60};
    for (size_t i = 0; i < 16; ++i) {
        h[8 + i]  = std::byte{sgid[i]};
        h[24 + i] = std::byte{0xaa}; /* the DGID: ours */
    }
    return h;
}

/* RoCE v2 over IPv4: 20 bytes the device leaves as they were (`filler`),
 * then an IPv4 header from 10.0.2.15 to 10.0.2.16, its checksum right
 * unless `bad_sum`. */
header ipv4(std::byte filler, bool bad_sum = false)
{
    header h{};
    h.fill(filler);
    const uint8_t ip[20] = {0x45, 0, 0,  0x54, 0x12, 0x34, 0x40, 0, 64, 17,
                            0,    0, 10, 0,    2,    15,   10,   0, 2,  16};
    uint32_t sum         = 0;
    for (size_t i = 0; i < 20; i += 2) {
        sum += uint32_t{ip[i]} << 8 | ip[i + 1];
    }
    while (sum > 0xffff) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    const auto check = static_cast<uint16_t>(~sum ^ (bad_sum ? 1 : 0));
    for (size_t i = 0; i < 20; ++i) {
        h[20 + i] = std::byte{ip[i]};
    }
    h[30] = std::byte(check >> 8);
    h[31] = std::byte(check & 0xff);
    return h;
}

gid source(const header &h)
{
    return rvt::agent::grh_source_gid(h);
}

TEST(ud_channel, a_grh_gives_its_sgid)
{
    EXPECT_EQ(source(grh(link_local)), link_local);
    EXPECT_EQ(source(grh(mapped)), mapped) << "RoCE v1 with an IPv4 GID";
}

TEST(ud_channel, roce_v2_over_ipv4_gives_the_mapped_source_address)
{
    EXPECT_EQ(source(ipv4(std::byte{0})), mapped);
    /* the unset bytes may look like an IPv6 header: the checksum decides */
    EXPECT_EQ(source(ipv4(std::byte{0x60})), mapped);
}

TEST(ud_channel, an_ipv6_header_whose_bytes_only_look_like_ipv4_stays_a_grh)
{
    /* version 6, and at byte 20 a 0x45 without a valid checksum: a GRH
     * whose SGID happens to hold those bytes */
    header h = ipv4(std::byte{0x60}, true);
    gid expected;
    for (size_t i = 0; i < 16; ++i) {
        expected[i] = std::to_integer<uint8_t>(h[8 + i]);
    }
    EXPECT_EQ(source(h), expected);
}

} // namespace
