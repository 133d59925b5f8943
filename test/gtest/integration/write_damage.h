/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The chaos client's account of a write that arrived wrong (test/gtest/
 * integration/chaos_checks.cc): which bytes hold what.
 * It tells the ways a write can be damaged apart, so that one bad arrival
 * in a long run says where to look.
 */
#ifndef RVT_TEST_WRITE_DAMAGE_H
#define RVT_TEST_WRITE_DAMAGE_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

namespace rvt::test {

/*
 * What a damaged write holds, from its first wrong byte on: each 64-byte
 * granule (every packet boundary is one) is named by the first of
 *   - right;
 *   - this write's own bytes from another offset: a packet carried the
 *     data of another packet of the message (the device's retransmission
 *     state out of step);
 *   - an earlier round of this slot: never written (the message ended
 *     short at the receiver);
 *   - a later round of this slot: the sender's buffer was reused while the
 *     device still read it (a completion before the last retransmission);
 *   - unknown.
 * Granules alike are joined into runs, as "bytes A-B: what; ...". The
 * slot's rounds are `round` +- k * window; `expected(r, k)` is byte k of
 * round r's write.
 */
template<typename Expected>
std::string damage_of(const uint8_t *p, size_t length, size_t first_wrong,
                      uint64_t round, uint32_t window, Expected expected)
{
    constexpr size_t granule = 64;
    auto matches = [&](size_t at, size_t n, uint64_t r, int64_t shift) {
        for (size_t k = 0; k < n; ++k) {
            if (p[at + k] != expected(r, at + k + shift)) {
                return false;
            }
        }
        return true;
    };
    auto name = [&](size_t at, size_t n) -> std::string {
        if (matches(at, n, round, 0)) {
            return "right";
        }
        for (int64_t shift = -static_cast<int64_t>(at);
             shift + static_cast<int64_t>(at + n) <=
             static_cast<int64_t>(length);
             shift += granule) {
            if (shift != 0 && matches(at, n, round, shift)) {
                return "this write's bytes from " + std::to_string(shift) +
                       " away";
            }
        }
        for (uint64_t j = 1; j <= 8 && j * window <= round; ++j) {
            if (matches(at, n, round - j * window, 0)) {
                return "round " + std::to_string(round - j * window) +
                       "'s (earlier)";
            }
        }
        for (uint64_t j = 1; j <= 2; ++j) {
            if (matches(at, n, round + j * window, 0)) {
                return "round " + std::to_string(round + j * window) +
                       "'s (later)";
            }
        }
        return "unknown";
    };
    std::string out;
    size_t runs      = 0;
    size_t run_start = first_wrong / granule * granule;
    std::string run_name;
    for (size_t at = run_start; at <= length; at += granule) {
        std::string n;
        if (at < length) {
            n = name(at, std::min(granule, length - at));
        }
        if (at == run_start) {
            run_name = n;
            continue;
        }
        if (n != run_name || at >= length) {
            if (runs++ < 8) {
                out += (out.empty() ? "" : "; ") + std::string("bytes ") +
                       std::to_string(run_start) + "-" +
                       std::to_string(std::min(at, length) - 1) + ": " +
                       run_name;
            }
            run_start = at;
            run_name  = n;
        }
    }
    if (runs > 8) {
        out += "; and " + std::to_string(runs - 8) + " more runs";
    }
    return out;
}

} // namespace rvt::test

#endif
