/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvt_progress_bench: what the UCX module's progress costs a rank when it
 * has nothing to do, on the host's real cores.
 *
 * UCP calls every transport's progress in each turn of every rank's
 * progress loop, whatever transport carries the work: in a large job
 * (UCX_TLS unset, more than 256 endpoints) the rank's eager traffic is on
 * UD and rvt only carries the rendezvous, so rvt's progress runs millions
 * of times for nothing. This bench opens the module's real interface on
 * the host (the uct host tests' set-up, uct_host_fixture.h: the real
 * agent on the loopback nic, in this process) and times, on one thread:
 *
 *   idle          uct_iface_progress with nothing outstanding
 *   idle, worker  uct_worker_progress, which UCP calls (the worker's
 *                 dispatch to the interface's progress included)
 *   waiting       uct_iface_progress with one active message in flight
 *                 that the paused agent does not take: the case in which
 *                 the interface yields (UCX_RVT_IDLE_YIELD), and what the
 *                 idle case cost before it stopped yielding
 *
 * Each: nanoseconds per call (the median of 5 runs of --calls calls), the
 * sched_yield calls per call (counted, see below), and the thread's system
 * CPU time and context switches per million calls (getrusage
 * RUSAGE_THREAD). Printed, never judged.
 *
 *   rvt_progress_bench [--calls=N] [--cpu=C]
 */
#include "test/gtest/uct/count_yields.h"
#include "test/gtest/uct/uct_host_fixture.h"

#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

using rvt::test::count_yields;
using rvt::test::yields;

struct figures {
    double ns_per_call;
    double yields_per_call;
    double system_us_per_million;
    double switches_per_million;
};

struct thread_usage {
    double system_us;
    long switches;
};

thread_usage usage_now()
{
    rusage u{};
    getrusage(RUSAGE_THREAD, &u);
    return {u.ru_stime.tv_sec * 1e6 + static_cast<double>(u.ru_stime.tv_usec),
            u.ru_nvcsw + u.ru_nivcsw};
}

template<class Call> figures measure(uint64_t calls, Call &&call)
{
    std::vector<double> ns;
    const thread_usage before = usage_now();
    yields                    = 0;
    count_yields              = true;
    for (int run = 0; run < 5; ++run) {
        const auto t0 = std::chrono::steady_clock::now();
        for (uint64_t k = 0; k < calls; ++k) {
            call();
        }
        const auto t1 = std::chrono::steady_clock::now();
        ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                     static_cast<double>(calls));
    }
    count_yields             = false;
    const thread_usage after = usage_now();
    std::sort(ns.begin(), ns.end());
    const double total = 5.0 * static_cast<double>(calls);
    return {ns[2], static_cast<double>(yields) / total,
            (after.system_us - before.system_us) / total * 1e6,
            static_cast<double>(after.switches - before.switches) / total *
                    1e6};
}

void print(const char *name, const figures &f)
{
    std::printf("%-14s %10.1f ns/call %10.3f yields/call %12.1f us system "
                "and %8.1f context switches per million calls\n",
                name, f.ns_per_call, f.yields_per_call, f.system_us_per_million,
                f.switches_per_million);
}

/* The uct host tests' fixture, run once outside GoogleTest's runner. */
class bench : public rvt::test::uct_host {
public:
    void TestBody() override
    {
    }

    int run(uint64_t calls)
    {
        SetUp();
        if (HasFatalFailure()) {
            std::fprintf(stderr, "rvt_progress_bench: set-up failed\n");
            return 1;
        }
        for (int k = 0; k < 1000; ++k) { /* warm */
            uct_iface_progress(m_iface);
        }
        std::printf("rvt_progress_bench: %llu calls x 5 per case, "
                    "UCX_RVT_IDLE_YIELD=y (the default)\n",
                    static_cast<unsigned long long>(calls));
        print("idle", measure(calls, [&] { uct_iface_progress(m_iface); }));
        print("idle, worker",
              measure(calls, [&] { uct_worker_progress(m_worker); }));
        {
            auto paused = m_agent->pause();
            if (am_short(1) != UCS_OK) {
                std::fprintf(stderr, "rvt_progress_bench: am_short failed\n");
                return 1;
            }
            /* a yield each: fewer calls */
            print("waiting", measure(std::max<uint64_t>(calls / 100, 1000),
                                     [&] { uct_iface_progress(m_iface); }));
        }
        progress_until([&] { return m_ams.size() == 1; });
        TearDown();
        return m_ams.size() == 1 ? 0 : 1;
    }
};

} // namespace

int main(int argc, char **argv)
{
    uint64_t calls = 2000000;
    int cpu        = -1;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a.starts_with("--calls=")) {
            calls = std::strtoull(argv[i] + 8, nullptr, 10);
        } else if (a.starts_with("--cpu=")) {
            cpu = std::atoi(argv[i] + 6);
        } else {
            std::fprintf(stderr,
                         "usage: rvt_progress_bench [--calls=N] [--cpu=C]\n");
            return 2;
        }
    }
    if (calls == 0) {
        std::fprintf(stderr, "rvt_progress_bench: --calls: expected a "
                             "number of calls from 1\n");
        return 2;
    }
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0) {
            std::perror("rvt_progress_bench: sched_setaffinity");
            return 2;
        }
    }
    bench b;
    return b.run(calls);
}
