/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvt's MPI_THREAD_MULTIPLE check: runs under mpirun with one
 * rank per node (test/testbed/mpi-guest.sh, pml ucx and osc ucx over
 * UCX_TLS=rvt,sm,self) and verifies every word. Each rank pairs with the
 * rank half the job away (on another host), and --threads threads per
 * rank work at once, each on its own duplicate of MPI_COMM_WORLD:
 *
 *   sendrecv  thread t trades a message of each size (8 B, then x4 up to
 *             --size) with thread t of the partner, MPI_Isend/MPI_Irecv
 *   put/get   in one passive-target epoch (MPI_Win_lock_all), thread t
 *             puts into slot t of the partner's window and flushes, then,
 *             after a barrier, gets slot t of its own data back from the
 *             partner; each rank also checks what landed in its window
 *
 * How many UCP workers (rvt interfaces) Open MPI opens for this is its
 * choice: Open MPI 4.1.4 opened one per context (pml's, osc's) in the
 * testbed. With --hold=SECONDS the ranks keep their windows (and
 * workers) open that long after the work, so that the agents' status can
 * be read meanwhile (mpi-guest.sh prints the attachments it saw). Every word that arrives is compared with a value the receiver
 * computes itself from (what, source, destination, size, round, thread,
 * index); any mismatch prints a line naming it, and the program exits 1.
 *
 *   rvt_mpi_threads [--threads=N] [--size=BYTES] [--rounds=N]
 *                   [--hold=SECONDS] [--one-host]
 */
#include "../common/check_pattern.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

enum class what : uint64_t {
    sendrecv = 11,
    put      = 12,
};

using pattern = rvt::check::pattern<what>;

#define MPI_CHECK(call)                                                        \
    do {                                                                       \
        int rc_ = (call);                                                      \
        if (rc_ != MPI_SUCCESS) {                                              \
            std::fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, \
                         #call, rc_);                                          \
            MPI_Abort(MPI_COMM_WORLD, 2);                                      \
        }                                                                      \
    } while (0)

struct options {
    unsigned threads = 4;
    size_t size      = 1 << 20;
    unsigned rounds  = 2;
    unsigned hold    = 0;
    bool one_host    = false;
};

bool parse_size(std::string_view v, size_t &out)
{
    char *end            = nullptr;
    std::string s        = std::string(v);
    unsigned long long n = std::strtoull(s.c_str(), &end, 10);
    if (end == s.c_str() || *end != '\0') {
        return false;
    }
    out = n;
    return true;
}

bool parse(int argc, char **argv, options &o)
{
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        size_t n           = 0;
        auto value         = [&](std::string_view key) {
            return a.substr(0, key.size()) == key &&
                   parse_size(a.substr(key.size()), n);
        };
        if (value("--threads=") && n >= 1 && n <= 64) {
            o.threads = static_cast<unsigned>(n);
        } else if (value("--size=") && n >= 8 && n % 8 == 0) {
            o.size = n;
        } else if (value("--rounds=") && n >= 1) {
            o.rounds = static_cast<unsigned>(n);
        } else if (value("--hold=")) {
            o.hold = static_cast<unsigned>(n);
        } else if (a == "--one-host") {
            o.one_host = true;
        } else {
            std::fprintf(stderr,
                         "rvt_mpi_threads: bad argument '%s': expected "
                         "--threads=1..64, --size=BYTES (a multiple of 8), "
                         "--rounds=N, --hold=SECONDS or --one-host\n",
                         argv[i]);
            return false;
        }
    }
    return true;
}

std::vector<size_t> sizes_up_to(size_t max)
{
    std::vector<size_t> out{8};
    for (size_t s = 16; s <= max; s *= 4) {
        out.push_back(s);
    }
    if (out.back() != max) {
        out.push_back(max);
    }
    return out;
}

/* What one thread does; returns the words that did not match. */
struct thread_work {
    const options &o;
    int rank, partner;
    unsigned t;
    MPI_Comm comm;
    MPI_Win win;
    uint64_t *win_base; /* this rank's window: o.threads slots of o.size */

    uint64_t report(const char *test, size_t size, unsigned round, size_t index,
                    uint64_t got, uint64_t want) const
    {
        std::printf("MISMATCH: rank %d thread %u %s size %zu round %u word "
                    "%zu: 0x%016llx, expected 0x%016llx\n",
                    rank, t, test, size, round, index,
                    static_cast<unsigned long long>(got),
                    static_cast<unsigned long long>(want));
        return 1;
    }

    uint64_t sendrecv() const
    {
        uint64_t bad = 0;
        for (unsigned round = 0; round < o.rounds; ++round) {
            for (size_t size : sizes_up_to(o.size)) {
                const size_t words = size / 8;
                std::vector<uint64_t> out(words), in(words);
                rvt::check::fill<what>(out, {what::sendrecv, rank, partner,
                                             size, round, t});
                rvt::check::poison(in);
                MPI_Request req[2];
                MPI_CHECK(MPI_Irecv(in.data(), static_cast<int>(words),
                                    MPI_UINT64_T, partner, 1, comm, &req[0]));
                MPI_CHECK(MPI_Isend(out.data(), static_cast<int>(words),
                                    MPI_UINT64_T, partner, 1, comm, &req[1]));
                MPI_CHECK(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
                rvt::check::compare<what>(
                        in, {what::sendrecv, partner, rank, size, round, t},
                        [&](size_t i, uint64_t got, uint64_t want) {
                            bad += report("sendrecv", size, round, i, got,
                                          want);
                        });
            }
        }
        return bad;
    }

    /* Puts this round's data into slot t of the partner's window. */
    void put(unsigned round) const
    {
        const size_t words = o.size / 8;
        std::vector<uint64_t> out(words);
        rvt::check::fill<what>(out,
                               {what::put, rank, partner, o.size, round, t});
        MPI_CHECK(MPI_Put(out.data(), static_cast<int>(words), MPI_UINT64_T,
                          partner, static_cast<MPI_Aint>(t * words),
                          static_cast<int>(words), MPI_UINT64_T, win));
        MPI_CHECK(MPI_Win_flush(partner, win));
    }

    /* Gets slot t back from the partner: what put() wrote there. */
    uint64_t get(unsigned round) const
    {
        const size_t words = o.size / 8;
        std::vector<uint64_t> in(words);
        rvt::check::poison(in);
        MPI_CHECK(MPI_Get(in.data(), static_cast<int>(words), MPI_UINT64_T,
                          partner, static_cast<MPI_Aint>(t * words),
                          static_cast<int>(words), MPI_UINT64_T, win));
        MPI_CHECK(MPI_Win_flush(partner, win));
        uint64_t bad = 0;
        rvt::check::compare<what>(in,
                                  {what::put, rank, partner, o.size, round, t},
                                  [&](size_t i, uint64_t got, uint64_t want) {
                                      bad += report("get", o.size, round, i,
                                                    got, want);
                                  });
        return bad;
    }
};

/* Runs fn(t) on o.threads threads at once; returns the sum of results. */
template<class Fn> uint64_t on_threads(const options &o, Fn fn)
{
    std::vector<uint64_t> bad(o.threads, 0);
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < o.threads; ++t) {
        threads.emplace_back([&, t] { bad[t] = fn(t); });
    }
    for (auto &th : threads) {
        th.join();
    }
    uint64_t sum = 0;
    for (uint64_t b : bad) {
        sum += b;
    }
    return sum;
}

} // namespace

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_CHECK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    int rank = 0, n_ranks = 0;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &n_ranks));
    options o;
    if (!parse(argc, argv, o)) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (provided != MPI_THREAD_MULTIPLE) {
        if (rank == 0) {
            std::printf("FAIL: rvt_mpi_threads: MPI_Init_thread provided "
                        "level %d, expected MPI_THREAD_MULTIPLE (%d)\n",
                        provided, MPI_THREAD_MULTIPLE);
        }
        MPI_Finalize();
        return 1;
    }
    if (n_ranks < 2 || n_ranks % 2 != 0) {
        if (rank == 0) {
            std::printf("FAIL: rvt_mpi_threads: %d ranks, expected an even "
                        "number, at least 2\n",
                        n_ranks);
        }
        MPI_Finalize();
        return 1;
    }
    const int partner = (rank + n_ranks / 2) % n_ranks;

    /* the partner must be on another host, or nothing crosses a node */
    char name[MPI_MAX_PROCESSOR_NAME] = {}, other[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_CHECK(MPI_Get_processor_name(name, &len));
    MPI_CHECK(MPI_Sendrecv(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, partner, 0,
                           other, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, partner, 0,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    int same_host = std::string(name) == other && !o.one_host, any_same = 0;
    MPI_CHECK(MPI_Allreduce(&same_host, &any_same, 1, MPI_INT, MPI_MAX,
                            MPI_COMM_WORLD));
    if (any_same) {
        if (rank == 0) {
            std::printf("FAIL: rvt_mpi_threads: a rank's partner is on its "
                        "own host (%s); map one rank per node, or pass "
                        "--one-host\n",
                        name);
        }
        MPI_Finalize();
        return 1;
    }
    if (rank == 0) {
        std::printf("rvt_mpi_threads: %d ranks, %u threads each "
                    "(MPI_THREAD_MULTIPLE), sizes 8 B to %s, %u rounds\n",
                    n_ranks, o.threads, rvt::check::human(o.size).c_str(),
                    o.rounds);
    }

    std::vector<MPI_Comm> comms(o.threads);
    for (auto &c : comms) {
        MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    }
    const size_t slot_words = o.size / 8;
    uint64_t *base          = nullptr;
    MPI_Win win;
    MPI_CHECK(MPI_Win_allocate(static_cast<MPI_Aint>(o.threads * o.size), 8,
                               MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    auto work = [&](unsigned t) {
        return thread_work{o, rank, partner, t, comms[t], win, base};
    };

    const auto t0 = std::chrono::steady_clock::now();
    uint64_t bad  = on_threads(o,
                               [&](unsigned t) { return work(t).sendrecv(); });
    const auto t1 = std::chrono::steady_clock::now();

    MPI_CHECK(MPI_Win_lock_all(0, win));
    for (unsigned round = 0; round < o.rounds; ++round) {
        rvt::check::poison({base, o.threads * slot_words});
        MPI_CHECK(MPI_Win_sync(win));
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        on_threads(o, [&](unsigned t) {
            work(t).put(round);
            return uint64_t{0};
        });
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        MPI_CHECK(MPI_Win_sync(win));
        for (unsigned t = 0; t < o.threads; ++t) {
            rvt::check::compare<what>(
                    std::span<const uint64_t>(base + t * slot_words,
                                              slot_words),
                    {what::put, partner, rank, o.size, round, t},
                    [&](size_t i, uint64_t got, uint64_t want) {
                        bad += work(t).report("put", o.size, round, i, got,
                                              want);
                    });
        }
        bad += on_threads(o, [&](unsigned t) { return work(t).get(round); });
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    }
    MPI_CHECK(MPI_Win_unlock_all(win));
    const auto t2 = std::chrono::steady_clock::now();

    if (o.hold > 0) {
        if (rank == 0) {
            std::printf("holding the windows open for %u s\n", o.hold);
            std::fflush(stdout);
        }
        std::this_thread::sleep_for(std::chrono::seconds(o.hold));
    }
    uint64_t all_bad = 0;
    MPI_CHECK(MPI_Allreduce(&bad, &all_bad, 1, MPI_UINT64_T, MPI_SUM,
                            MPI_COMM_WORLD));
    MPI_CHECK(MPI_Win_free(&win));
    for (auto &c : comms) {
        MPI_CHECK(MPI_Comm_free(&c));
    }
    if (rank == 0) {
        using ms = std::chrono::duration<double, std::milli>;
        std::printf("sendrecv %.0f ms, put/get %.0f ms\n", ms(t1 - t0).count(),
                    ms(t2 - t1).count());
        if (all_bad == 0) {
            std::printf("OK: rvt_mpi_threads: every word verified (%u threads "
                        "per rank, sendrecv and put/get)\n",
                        o.threads);
        } else {
            std::printf("FAIL: rvt_mpi_threads: %llu words wrong\n",
                        static_cast<unsigned long long>(all_bad));
        }
    }
    MPI_Finalize();
    return all_bad == 0 ? 0 : 1;
}
