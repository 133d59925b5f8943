/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What test_shared_pd and its client process say to each other over their
 * control socketpair (test code only; the attach itself goes through the
 * agent's real attach socket).
 */
#ifndef RVT_TEST_SHARED_PD_PROTOCOL_H
#define RVT_TEST_SHARED_PD_PROTOCOL_H

#include <cstddef>
#include <cstdint>

namespace rvt::test {

inline constexpr size_t buffer_size = 64 * 1024;
inline constexpr char job_key[]     = "shared-pd-test";

struct client_report {
    uint32_t registered; /* 1 if reg_mr succeeded */
    uint32_t bad_pd_refused;
    uint32_t client_index;
    uint32_t handle, lkey, rkey, pid;
    uint64_t addr;
    /* with the "unannounced" argument: a second buffer's MR, registered
     * after its intent and never announced (as if killed in between) */
    uint32_t unannounced_handle;
    uint64_t unannounced_addr;
    char error[512];
};

struct check_request {
    uint32_t length; /* 0: exit */
    uint32_t seed;
};

/* Bytes that depend on the seed (a pid, say) so that data from the wrong
 * source cannot pass for the right one. */
inline void fill_pattern(unsigned char *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; ++i) {
        x    = x * 1103515245u + 12345u;
        p[i] = static_cast<unsigned char>(x >> 16);
    }
}

} // namespace rvt::test

#endif
