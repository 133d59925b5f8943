/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verified-data pattern of the MPI and SHMEM checks (test/mpi,
 * test/shmem): every 64-bit word a program sends is a function of what the
 * buffer is for, its source, destination, size, iteration, slot and the
 * word's index, and the receiver computes it itself. Stale, misrouted or
 * truncated data cannot pass. Header-only: each program is built by its
 * own wrapper (mpicxx, oshcxx), and only this header is shared.
 */
#ifndef RVT_TEST_CHECK_PATTERN_H
#define RVT_TEST_CHECK_PATTERN_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

namespace rvt::check {

constexpr uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The seed of one buffer: every field changes every word of it. Kind is
 * the program's own enum of what buffers are for. */
template<class Kind> struct pattern {
    Kind kind;
    int src;
    int dst;
    size_t size;
    unsigned iteration;
    unsigned slot = 0;

    uint64_t seed() const
    {
        uint64_t h = splitmix(static_cast<uint64_t>(kind));
        for (uint64_t v :
             {static_cast<uint64_t>(src), static_cast<uint64_t>(dst),
              static_cast<uint64_t>(size), static_cast<uint64_t>(iteration),
              static_cast<uint64_t>(slot)}) {
            h = splitmix(h ^ v);
        }
        return h;
    }

    /* word `index` of the buffer whose seed() is `seed` */
    static uint64_t word(uint64_t seed, size_t index)
    {
        return splitmix(seed + index);
    }
};

template<class Kind> void fill(std::span<uint64_t> buf, const pattern<Kind> &p)
{
    const uint64_t s = p.seed();
    for (size_t i = 0; i < buf.size(); ++i) {
        buf[i] = pattern<Kind>::word(s, i);
    }
}

/* Calls on_mismatch(index, got, expected) for every word that differs
 * from what p says the buffer must hold. */
template<class Kind, class OnMismatch>
void compare(std::span<const uint64_t> buf, const pattern<Kind> &p,
             OnMismatch on_mismatch)
{
    const uint64_t s = p.seed();
    for (size_t i = 0; i < buf.size(); ++i) {
        const uint64_t want = pattern<Kind>::word(s, i);
        if (buf[i] != want) {
            on_mismatch(i, buf[i], want);
        }
    }
}

/* A receive buffer is poisoned first, so data from an earlier iteration or
 * no data at all cannot pass for the expected contents. */
inline void poison(std::span<uint64_t> buf)
{
    std::fill(buf.begin(), buf.end(), 0xdeadbeefdeadbeefULL);
}

/* "4 MiB", "16 KiB", "8 B": sizes for the programs' tables. */
inline std::string human(size_t bytes)
{
    char b[32];
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) {
        std::snprintf(b, sizeof(b), "%zu MiB", bytes >> 20);
    } else if (bytes >= 1024 && bytes % 1024 == 0) {
        std::snprintf(b, sizeof(b), "%zu KiB", bytes >> 10);
    } else {
        std::snprintf(b, sizeof(b), "%zu B", bytes);
    }
    return b;
}

} // namespace rvt::check

#endif
