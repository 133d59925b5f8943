/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvt's own MPI check: runs under mpirun across testbed nodes
 * (test/testbed/mpi-guest.sh, with pml ucx over UCX_TLS=rvt,sm,self) and
 * verifies every byte that MPI moves. For each message size from 8 B to
 * --max-size (8 B, then 16 B x4 up to 16 MiB):
 *
 *   pingpong   rank 0 and the first rank on another host trade a message,
 *              each iteration with fresh contents; half the round trip
 *              is the latency
 *   bandwidth  rank 0 sends a window of MPI_Isends to that rank, which
 *              acknowledges the whole window
 *   alltoall   MPI_Alltoall over all ranks; SIZE is what each rank sends
 *              in all (one block of SIZE / ranks bytes to each rank)
 *   allreduce  MPI_Allreduce (sum) of SIZE bytes of 64-bit integers
 *
 * Every word that arrives is compared with a value the receiver computes
 * itself from (what, source rank, destination rank, size, iteration, index),
 * so stale, misrouted or truncated data cannot pass. Any mismatch prints a
 * line naming rank, test, size, iteration and word index, and the program
 * exits 1 once all ranks have finished that size. Times are printed, never
 * judged.
 *
 *   rvt_mpi_check [--min-size=BYTES] [--max-size=BYTES] [--iterations=N]
 *                 [--volume=BYTES] [--coll-max-size=BYTES] [--one-host]
 *
 * --iterations caps the iterations per size (default 10); --volume (default
 * 1 MiB) caps the bytes one test moves per size, so large sizes run once;
 * the bandwidth window holds at most 4 MiB. --coll-max-size (default: all)
 * leaves the collectives out above that size ("-" in the table), for slow
 * test beds. Ranks with nothing to do while the pair works wait in a
 * sleeping barrier, so that on a machine with fewer cores than ranks the
 * pair's figures are not those of the scheduler.
 * Without --one-host (for trying it out on one machine), all ranks on one
 * host is a failure: nothing would cross between nodes.
 */
#include "../common/check_pattern.h"
#include "../common/mpi_util.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

// What a buffer was filled for; part of every word's seed.
enum class what : uint64_t {
    pingpong  = 1,
    bandwidth = 2,
    alltoall  = 3,
    allreduce = 4,
};

using pattern = rvt::check::pattern<what>;
using rvt::check::count_of;
using rvt::check::human;
using rvt::check::median;
using rvt::check::poison;

// (not a template: the callers' braced patterns need the type spelled)
void fill(std::span<uint64_t> buf, const pattern &p)
{
    rvt::check::fill(buf, p);
}

const char *name_of(what kind)
{
    switch (kind) {
    case what::pingpong:
        return "pingpong";
    case what::bandwidth:
        return "bandwidth";
    case what::alltoall:
        return "alltoall";
    case what::allreduce:
        return "allreduce";
    }
    return "?";
}

int my_rank;
int n_ranks;
// mismatching words this rank found in the current size
uint64_t mismatches;
constexpr int max_reports = 5;
int reports;

// Compares a received buffer with what p says it must hold; a few
// mismatches are printed, all are counted.
void verify(std::span<const uint64_t> buf, const pattern &p)
{
    rvt::check::compare(buf, p, [&](size_t i, uint64_t got, uint64_t want) {
        if (++reports <= max_reports) {
            std::fprintf(stderr,
                         "FAIL: rank %d: %s size %zu iteration %u: word %zu "
                         "(byte offset %zu) from rank %d slot %u: got "
                         "0x%016" PRIx64 ", expected 0x%016" PRIx64 "\n",
                         my_rank, name_of(p.kind), p.size, p.iteration, i,
                         i * sizeof(uint64_t), p.src, p.slot, got, want);
        }
        ++mismatches;
    });
}

struct options {
    size_t min_size     = 8;
    size_t max_size     = 16u << 20;
    unsigned iterations = 10;
    size_t volume       = 1u << 20;
    size_t coll_max     = SIZE_MAX;
    bool one_host       = false;
};

options parse(int argc, char **argv)
{
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        const char *v            = nullptr; // the value after "key="
        auto is                  = [&](std::string_view key) {
            v = a.starts_with(key) ? argv[i] + key.size() : nullptr;
            return v != nullptr;
        };
        if (is("--min-size=")) {
            o.min_size = std::strtoull(v, nullptr, 0);
        } else if (is("--max-size=")) {
            o.max_size = std::strtoull(v, nullptr, 0);
        } else if (is("--iterations=")) {
            o.iterations = static_cast<unsigned>(std::strtoul(v, nullptr, 0));
        } else if (is("--volume=")) {
            o.volume = std::strtoull(v, nullptr, 0);
        } else if (is("--coll-max-size=")) {
            o.coll_max = std::strtoull(v, nullptr, 0);
        } else if (a == "--one-host") {
            o.one_host = true;
        } else {
            if (my_rank == 0) {
                std::fprintf(stderr, "FAIL: unknown argument '%s'\n", argv[i]);
            }
            MPI_Finalize();
            std::exit(2);
        }
    }
    if (o.max_size < 8 || o.iterations < 1) {
        if (my_rank == 0) {
            std::fprintf(stderr, "FAIL: --max-size must be >= 8 and "
                                 "--iterations >= 1\n");
        }
        MPI_Finalize();
        std::exit(2);
    }
    return o;
}

// 8 B, then 16 B x4 up to max (and max itself if it is off that grid)
std::vector<size_t> sizes_up_to(size_t max)
{
    std::vector<size_t> sizes{8};
    for (size_t s = 16; s <= max; s *= 4) {
        sizes.push_back(s);
    }
    if (sizes.back() != (max & ~size_t{7})) {
        sizes.push_back(max & ~size_t{7});
    }
    return sizes;
}

unsigned iterations_for(const options &o, size_t size)
{
    return static_cast<unsigned>(
            std::clamp<size_t>(o.volume / size, 1, o.iterations));
}

struct pair_ranks {
    int a; // rank 0
    int b; // the first rank on another host
};

// Rank 0 and the first rank whose processor name differs from rank 0's:
// the pair whose traffic must cross between nodes.
pair_ranks find_pair(bool one_host)
{
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len                           = 0;
    MPI_CHECK(MPI_Get_processor_name(name, &len));
    std::vector<char> all(static_cast<size_t>(n_ranks) *
                          MPI_MAX_PROCESSOR_NAME);
    MPI_CHECK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(),
                            MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD));
    auto host = [&](int r) {
        return std::string(
                &all[static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
    };
    for (int r = 1; r < n_ranks; ++r) {
        if (host(r) != host(0)) {
            if (my_rank == 0) {
                std::printf("%d ranks; pingpong and bandwidth between rank 0 "
                            "(%s) and rank %d (%s)\n",
                            n_ranks, host(0).c_str(), r, host(r).c_str());
            }
            return {0, r};
        }
    }
    if (one_host && n_ranks > 1) {
        if (my_rank == 0) {
            std::printf("%d ranks, all on %s (--one-host)\n", n_ranks,
                        host(0).c_str());
        }
        return {0, 1};
    }
    if (my_rank == 0) {
        std::fprintf(stderr,
                     "FAIL: all %d ranks run on %s: nothing would cross "
                     "between nodes\n",
                     n_ranks, host(0).c_str());
    }
    MPI_Finalize();
    std::exit(1);
}

// A barrier that sleeps between tests of its completion: ranks that wait
// here leave the CPU to those still working.
void sleeping_barrier()
{
    MPI_Request req;
    MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
    for (int done = 0;;) {
        MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done) {
            return;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
}

// A zero-byte exchange that lines the two ranks up before a timed part.
void sync_pair(int peer)
{
    MPI_CHECK(MPI_Sendrecv(nullptr, 0, MPI_BYTE, peer, 99, nullptr, 0, MPI_BYTE,
                           peer, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
}

// Median half round trip in seconds (rank a's view; 0 elsewhere).
double pingpong(const pair_ranks &p, size_t size, unsigned iters)
{
    if (my_rank != p.a && my_rank != p.b) {
        return 0;
    }
    const int peer     = my_rank == p.a ? p.b : p.a;
    const size_t words = size / sizeof(uint64_t);
    std::vector<uint64_t> out(words), in(words);
    std::vector<double> half_rtt;
    for (unsigned it = 0; it < iters; ++it) {
        fill(out, {what::pingpong, my_rank, peer, size, it});
        poison(in);
        sync_pair(peer);
        double t0 = MPI_Wtime();
        if (my_rank == p.a) {
            MPI_CHECK(MPI_Send(out.data(), count_of(words), MPI_UINT64_T, peer,
                               1, MPI_COMM_WORLD));
            MPI_CHECK(MPI_Recv(in.data(), count_of(words), MPI_UINT64_T, peer,
                               1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else {
            MPI_CHECK(MPI_Recv(in.data(), count_of(words), MPI_UINT64_T, peer,
                               1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            MPI_CHECK(MPI_Send(out.data(), count_of(words), MPI_UINT64_T, peer,
                               1, MPI_COMM_WORLD));
        }
        half_rtt.push_back((MPI_Wtime() - t0) / 2);
        verify(in, {what::pingpong, peer, my_rank, size, it});
    }
    return median(half_rtt);
}

// Bytes per second from a to b over all iterations (rank a's view).
double bandwidth(const pair_ranks &p, size_t size, unsigned iters)
{
    if (my_rank != p.a && my_rank != p.b) {
        return 0;
    }
    // a window of up to 16 messages, at most 4 MiB (or one message)
    const unsigned window = static_cast<unsigned>(
            std::clamp<size_t>((4u << 20) / size, 1, 16));
    const int peer     = my_rank == p.a ? p.b : p.a;
    const size_t words = size / sizeof(uint64_t);
    std::vector<std::vector<uint64_t>> bufs(window,
                                            std::vector<uint64_t>(words));
    std::vector<MPI_Request> reqs(window);
    double seconds = 0;
    for (unsigned it = 0; it < iters; ++it) {
        for (unsigned w = 0; w < window; ++w) {
            if (my_rank == p.a) {
                fill(bufs[w], {what::bandwidth, my_rank, peer, size, it, w});
            } else {
                poison(bufs[w]);
            }
        }
        sync_pair(peer);
        double t0 = MPI_Wtime();
        for (unsigned w = 0; w < window; ++w) {
            if (my_rank == p.a) {
                MPI_CHECK(MPI_Isend(bufs[w].data(), count_of(words),
                                    MPI_UINT64_T, peer, 2, MPI_COMM_WORLD,
                                    &reqs[w]));
            } else {
                MPI_CHECK(MPI_Irecv(bufs[w].data(), count_of(words),
                                    MPI_UINT64_T, peer, 2, MPI_COMM_WORLD,
                                    &reqs[w]));
            }
        }
        MPI_CHECK(MPI_Waitall(static_cast<int>(window), reqs.data(),
                              MPI_STATUSES_IGNORE));
        // the receiver acknowledges the whole window
        if (my_rank == p.a) {
            MPI_CHECK(MPI_Recv(nullptr, 0, MPI_BYTE, peer, 3, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
        } else {
            MPI_CHECK(MPI_Send(nullptr, 0, MPI_BYTE, peer, 3, MPI_COMM_WORLD));
        }
        seconds += MPI_Wtime() - t0;
        if (my_rank == p.b) {
            for (unsigned w = 0; w < window; ++w) {
                verify(bufs[w], {what::bandwidth, peer, my_rank, size, it, w});
            }
        }
    }
    return static_cast<double>(size) * window * iters / seconds;
}

// Mean seconds per MPI_Alltoall, the slowest rank's.
double alltoall(size_t size, unsigned iters)
{
    // one block to each rank, a whole number of words, at least one
    const size_t block_words = std::max<size_t>(
            1, size / static_cast<size_t>(n_ranks) / sizeof(uint64_t));
    const size_t block = block_words * sizeof(uint64_t);
    std::vector<uint64_t> out(block_words * n_ranks), in(out.size());
    double seconds = 0;
    for (unsigned it = 0; it < iters; ++it) {
        for (int d = 0; d < n_ranks; ++d) {
            fill(std::span(out).subspan(d * block_words, block_words),
                 {what::alltoall, my_rank, d, block, it});
        }
        poison(in);
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = MPI_Wtime();
        MPI_CHECK(MPI_Alltoall(out.data(), count_of(block_words), MPI_UINT64_T,
                               in.data(), count_of(block_words), MPI_UINT64_T,
                               MPI_COMM_WORLD));
        seconds += MPI_Wtime() - t0;
        for (int s = 0; s < n_ranks; ++s) {
            verify(std::span(in).subspan(s * block_words, block_words),
                   {what::alltoall, s, my_rank, block, it});
        }
    }
    double mean = seconds / iters, slowest = 0;
    MPI_CHECK(MPI_Reduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0,
                         MPI_COMM_WORLD));
    return slowest;
}

// Mean seconds per MPI_Allreduce, the slowest rank's. Each rank adds its
// own pattern; the expected sum (mod 2^64) is computed here from all
// ranks' patterns, never taken from MPI.
double allreduce(size_t size, unsigned iters)
{
    const size_t words = size / sizeof(uint64_t);
    std::vector<uint64_t> mine(words), sum(words), want(words);
    double seconds = 0;
    for (unsigned it = 0; it < iters; ++it) {
        fill(mine, {what::allreduce, my_rank, -1, size, it});
        poison(sum);
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = MPI_Wtime();
        MPI_CHECK(MPI_Allreduce(mine.data(), sum.data(), count_of(words),
                                MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
        seconds += MPI_Wtime() - t0;
        std::fill(want.begin(), want.end(), 0);
        for (int r = 0; r < n_ranks; ++r) {
            pattern p{what::allreduce, r, -1, size, it};
            uint64_t s = p.seed();
            for (size_t i = 0; i < words; ++i) {
                want[i] += p.word(s, i);
            }
        }
        for (size_t i = 0; i < words; ++i) {
            if (sum[i] == want[i]) {
                continue;
            }
            if (++reports <= max_reports) {
                std::fprintf(stderr,
                             "FAIL: rank %d: allreduce size %zu iteration %u: "
                             "word %zu (byte offset %zu): got 0x%016" PRIx64
                             ", expected sum 0x%016" PRIx64 "\n",
                             my_rank, size, it, i, i * sizeof(uint64_t), sum[i],
                             want[i]);
            }
            ++mismatches;
        }
    }
    double mean = seconds / iters, slowest = 0;
    MPI_CHECK(MPI_Reduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0,
                         MPI_COMM_WORLD));
    return slowest;
}

} // namespace

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    // errors come back as codes, so check_mpi can name the call
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const options o       = parse(argc, argv);
    const pair_ranks pair = find_pair(o.one_host);

    if (my_rank == 0) {
        std::printf("%9s %5s | %12s %11s | %11s | %12s | %12s | %6s\n", "size",
                    "iters", "pp lat us", "pp MB/s", "bw MB/s", "alltoall us",
                    "allreduce us", "wall s");
        std::fflush(stdout);
    }
    uint64_t total_bad = 0;
    for (size_t size : sizes_up_to(o.max_size)) {
        if (size < o.min_size) {
            continue;
        }
        const unsigned iters = iterations_for(o, size);
        const double start   = MPI_Wtime();
        mismatches           = 0;
        reports              = 0;
        double lat           = pingpong(pair, size, iters);
        double bw            = bandwidth(pair, size, iters);
        sleeping_barrier();
        const bool coll = size <= o.coll_max;
        double a2a      = coll ? alltoall(size, iters) : 0;
        double ared     = coll ? allreduce(size, iters) : 0;
        uint64_t bad    = 0;
        MPI_CHECK(MPI_Allreduce(&mismatches, &bad, 1, MPI_UINT64_T, MPI_SUM,
                                MPI_COMM_WORLD));
        if (my_rank == 0) {
            char a2a_us[32] = "-", ared_us[32] = "-";
            if (coll) {
                std::snprintf(a2a_us, sizeof(a2a_us), "%.1f", a2a * 1e6);
                std::snprintf(ared_us, sizeof(ared_us), "%.1f", ared * 1e6);
            }
            std::printf("%9s %5u | %12.1f %11.2f | %11.2f | %12s | %12s | "
                        "%6.1f%s\n",
                        human(size).c_str(), iters, lat * 1e6, size / lat / 1e6,
                        bw / 1e6, a2a_us, ared_us, MPI_Wtime() - start,
                        bad ? "  <- MISMATCH" : "");
            std::fflush(stdout);
        }
        total_bad += bad;
        if (bad) {
            break; // every rank saw the same sum
        }
    }
    if (my_rank == 0) {
        if (total_bad) {
            std::printf("FAIL: rvt_mpi_check: %" PRIu64
                        " words differed (lines above name rank, test, "
                        "size and index)\n",
                        total_bad);
        } else {
            std::printf("OK: rvt_mpi_check: %d ranks, every word of "
                        "pingpong, bandwidth, alltoall and allreduce "
                        "verified (collectives up to %s)\n",
                        n_ranks,
                        o.coll_max >= o.max_size ? human(o.max_size).c_str() :
                                                   human(o.coll_max).c_str());
        }
    }
    MPI_Finalize();
    return total_bad ? 1 : 0;
}
