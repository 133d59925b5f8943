/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sched_yield, counted on the threads that ask: the UCX module's objects
 * are linked into the binaries that include this (the uct host tests, the
 * progress bench), so the module's calls resolve to the definition here.
 * Include it in one file of a binary only.
 */
#ifndef RVT_TEST_COUNT_YIELDS_H
#define RVT_TEST_COUNT_YIELDS_H

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace rvt::test {

/* set by a thread to count its own calls in yields */
inline thread_local bool count_yields = false;
inline thread_local uint64_t yields   = 0;

} // namespace rvt::test

extern "C" int sched_yield() noexcept
{
    if (rvt::test::count_yields) {
        ++rvt::test::yields;
    }
    return static_cast<int>(::syscall(SYS_sched_yield));
}

#endif
