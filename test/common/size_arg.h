/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sizes on the command lines of the MPI and SHMEM programs (test/mpi,
 * test/shmem): "4096", "64K", "1M", "1G" (binary multiples). Header-only,
 * as check_pattern.h, for the same reason.
 */
#ifndef RVT_TEST_SIZE_ARG_H
#define RVT_TEST_SIZE_ARG_H

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace rvt::check {

/* One size into out; false if v is none. */
inline bool parse_size(std::string_view v, size_t &out)
{
    size_t unit = 1;
    if (!v.empty()) {
        switch (v.back()) {
        case 'k':
        case 'K':
            unit = size_t{1} << 10;
            break;
        case 'm':
        case 'M':
            unit = size_t{1} << 20;
            break;
        case 'g':
        case 'G':
            unit = size_t{1} << 30;
            break;
        default:
            break;
        }
    }
    if (unit != 1) {
        v.remove_suffix(1);
    }
    size_t n               = 0;
    const char *end        = v.data() + v.size();
    const auto [ptr, fail] = std::from_chars(v.data(), end, n);
    if (v.empty() || fail != std::errc() || ptr != end || n > SIZE_MAX / unit) {
        return false;
    }
    out = n * unit;
    return true;
}

/* "8,1K,4M" into out, each within [min, max] and a multiple of
 * multiple_of; false (out unchanged) if any is not. */
inline bool parse_size_list(std::string_view v, size_t min, size_t max,
                            size_t multiple_of, std::vector<size_t> &out)
{
    std::vector<size_t> sizes;
    while (true) {
        const size_t comma = v.find(',');
        size_t n           = 0;
        if (!parse_size(v.substr(0, comma), n) || n < min || n > max ||
            n % multiple_of != 0) {
            return false;
        }
        sizes.push_back(n);
        if (comma == std::string_view::npos) {
            break;
        }
        v.remove_prefix(comma + 1);
    }
    out = std::move(sizes);
    return true;
}

} // namespace rvt::check

#endif
