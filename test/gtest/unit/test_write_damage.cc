/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The chaos client's account of a damaged write (test/gtest/integration/
 * write_damage.h): each kind of damage is named, with its byte range.
 */
#include "test/gtest/integration/write_damage.h"

#include <gtest/gtest.h>

#include <vector>

using rvt::test::damage_of;

namespace {

constexpr uint32_t window = 4;
constexpr size_t length   = 4096;

uint8_t expected(uint64_t round, size_t k)
{
    return static_cast<uint8_t>(round * 101 + k * 13 + (k >> 8));
}

std::vector<uint8_t> write_of(uint64_t round)
{
    std::vector<uint8_t> w(length);
    for (size_t k = 0; k < length; ++k) {
        w[k] = expected(round, k);
    }
    return w;
}

std::string damage(const std::vector<uint8_t> &w, size_t first_wrong)
{
    return damage_of(w.data(), w.size(), first_wrong, 9, window, expected);
}

} // namespace

TEST(write_damage, a_packet_with_another_packets_data_and_a_short_end)
{
    /* packet 2 (1024 bytes each) carries packet 3's data, packet 3 was
     * never written: the slot still holds round 5's */
    std::vector<uint8_t> w    = write_of(9);
    std::vector<uint8_t> next = write_of(9);
    std::vector<uint8_t> old  = write_of(5);
    std::copy(next.begin() + 3072, next.end(), w.begin() + 2048);
    std::copy(old.begin() + 3072, old.end(), w.begin() + 3072);
    EXPECT_EQ(damage(w, 2048),
              "bytes 2048-3071: this write's bytes from 1024 away; "
              "bytes 3072-4095: round 5's (earlier)");
}

TEST(write_damage, a_later_round_over_the_tail)
{
    std::vector<uint8_t> w    = write_of(9);
    std::vector<uint8_t> late = write_of(13);
    std::copy(late.begin() + 1000, late.end(), w.begin() + 1000);
    /* the granule holding byte 1000 is partly right: unknown */
    EXPECT_EQ(damage(w, 1000), "bytes 960-1023: unknown; "
                               "bytes 1024-4095: round 13's (later)");
}

TEST(write_damage, right_granules_between_damage_are_named)
{
    std::vector<uint8_t> w = write_of(9);
    w[100] ^= 0xff;
    w[4000] ^= 0xff;
    EXPECT_EQ(damage(w, 100), "bytes 64-127: unknown; bytes 128-3967: right; "
                              "bytes 3968-4031: unknown; "
                              "bytes 4032-4095: right");
}
