/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Latency, bandwidth and alltoall by message size, as OSU's benchmarks
 * measure them, in one launch: the "large job as UCP sees it" section of
 * the perf suite (test/testbed/perf_guest.py's LargeJob) runs it under mpirun
 * once per transport setting and round, and compares the figures; this
 * program only measures, prints and verifies.
 *
 *   lat   ranks 0 and n/2 (on another node: --map-by ppr:K:node puts it
 *         first on the second node) bounce one message back and forth;
 *         each round trip is timed on rank 0, and its line gives half the
 *         median round trip
 *   bw    rank 0 sends rank n/2 a window of messages (isend, distinct
 *         buffers) and waits for its 4-byte answer; each window is
 *         timed, and its line gives the window's bytes over the median
 *         window's time
 *   a2a   every rank: MPI_Alltoall of SIZE bytes to every other rank; each
 *         repetition starts after a barrier and takes the slowest rank's
 *         time; its line gives the median repetition
 *
 * Ranks other than the pair wait in a barrier during lat and bw (run
 * them with 2 ranks to measure the pair alone).
 *
 * Verified: for lat and bw, one exchange of each size before the timed
 * ones, with buffers filled for it and the receiver's poisoned, and the
 * last timed message of each size, against the pattern every timed
 * message of that size carries (filling and checking are never timed);
 * for a2a, every repetition (each filled for its iteration). A wrong
 * value prints "FAIL: ..." naming rank, test, size and index, and the
 * program exits 1. Rank 0 prints one line per test and size:
 *
 *   lat 8 us 12.345 iters 100
 *   bw 4194304 MBps 123.4 window 4 windows 3
 *   a2a 1048576 us 45678.9 reps 5
 *
 * then "OK: rvt_mpi_sweep". MBps is 10^6 bytes per second.
 *
 *   rvt_mpi_sweep [--sizes=LIST] [--a2a-sizes=LIST] [--iters=N]
 *                 [--windows=N] [--reps=N] [--only=lat,bw,a2a]
 *                 [--one-host] [--help]
 */
#include "../common/check_pattern.h"
#include "../common/mpi_util.h"
#include "../common/size_arg.h"

#include <mpi.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

// What a buffer was filled for; part of every word's seed.
enum class what : uint64_t {
    lat_ping = 31,
    lat_pong = 32,
    bw       = 33,
    a2a      = 34,
};

using pattern = rvt::check::pattern<what>;
using rvt::check::count_of;
using rvt::check::exit_parse;
using rvt::check::median;
using rvt::check::poison;

[[noreturn]] void bad_argument(const std::string &msg)
{
    rvt::check::bad_argument("rvt_mpi_sweep", msg);
}

int my_rank;
int n_ranks;
uint64_t mismatches; // wrong values this rank found
int reports;
constexpr int max_reports = 5;

void verify(const char *test, std::span<const uint64_t> buf, const pattern &p)
{
    rvt::check::compare(buf, p, [&](size_t i, uint64_t got, uint64_t want) {
        if (++reports <= max_reports) {
            std::fprintf(stderr,
                         "FAIL: rank %d: %s %zu B from rank %d, iteration %u "
                         "slot %u, word %zu: got 0x%016" PRIx64
                         ", expected 0x%016" PRIx64 "\n",
                         my_rank, test, p.size, p.src, p.iteration, p.slot, i,
                         got, want);
        }
        ++mismatches;
    });
}

void fill(std::span<uint64_t> buf, const pattern &p)
{
    rvt::check::fill(buf, p);
}

struct options {
    std::vector<size_t> sizes{8,         64,        512,       4u << 10,
                              16u << 10, 32u << 10, 64u << 10, 256u << 10,
                              1u << 20,  4u << 20};
    std::vector<size_t> a2a_sizes{1u << 10, 32u << 10, 256u << 10, 1u << 20};
    size_t iters   = 50;
    size_t windows = 10;
    size_t reps    = 5;
    bool lat = true, bw = true, a2a = true;
    bool one_host = false;
};

/* Fewer iterations for large messages: about the bytes of `iters`
 * messages of 64 KiB, at least 3. */
size_t iterations_for(size_t size, size_t iters)
{
    const size_t budget = iters * (64u << 10);
    return std::max<size_t>(3, std::min(iters, budget / size));
}

/* Messages in flight per bw window: 64, or 8 MiB of them, at least 1. */
size_t window_for(size_t size)
{
    return std::clamp<size_t>((8u << 20) / size, 1, 64);
}

/* Timed windows: `windows`, or about 32 MiB of them, at least 3. */
size_t windows_for(size_t size, size_t window, size_t windows)
{
    return std::max<size_t>(3,
                            std::min(windows, (32u << 20) / (window * size)));
}

/* One round trip of `words` words between 0 and peer. */
void bounce(int peer, std::span<uint64_t> out, std::span<uint64_t> in)
{
    const int n = count_of(out.size());
    if (my_rank == 0) {
        MPI_CHECK(MPI_Send(out.data(), n, MPI_UINT64_T, peer, 31,
                           MPI_COMM_WORLD));
        MPI_CHECK(MPI_Recv(in.data(), n, MPI_UINT64_T, peer, 32, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
    } else {
        MPI_CHECK(MPI_Recv(in.data(), n, MPI_UINT64_T, 0, 31, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
        MPI_CHECK(MPI_Send(out.data(), n, MPI_UINT64_T, 0, 32, MPI_COMM_WORLD));
    }
}

void run_lat(const options &o, int peer, size_t size)
{
    const size_t words = size / sizeof(uint64_t);
    std::vector<uint64_t> out(words), in(words);
    const bool pinger = my_rank == 0;
    const int other   = pinger ? peer : 0;
    const what mine   = pinger ? what::lat_ping : what::lat_pong;
    const what theirs = pinger ? what::lat_pong : what::lat_ping;
    /* the verified exchange, iteration 0 */
    fill(out, {mine, my_rank, other, size, 0});
    poison(in);
    bounce(peer, out, in);
    verify("lat", in, {theirs, other, my_rank, size, 0});
    /* the timed ones all carry iteration 1's pattern */
    fill(out, {mine, my_rank, other, size, 1});
    poison(in);
    const size_t iters = iterations_for(size, o.iters);
    std::vector<double> round_trips(iters);
    for (size_t i = 0; i < iters; ++i) {
        const double t0 = MPI_Wtime();
        bounce(peer, out, in);
        round_trips[i] = MPI_Wtime() - t0;
    }
    verify("lat", in, {theirs, other, my_rank, size, 1});
    if (pinger) {
        std::printf("lat %zu us %.3f iters %zu\n", size,
                    median(round_trips) / 2 * 1e6, iters);
        std::fflush(stdout);
    }
}

/* One window: rank 0 sends, peer receives and answers. */
void window(int peer, std::vector<std::vector<uint64_t>> &bufs)
{
    std::vector<MPI_Request> reqs(bufs.size());
    uint32_t answer = 0;
    for (size_t k = 0; k < bufs.size(); ++k) {
        const int n = count_of(bufs[k].size());
        if (my_rank == 0) {
            MPI_CHECK(MPI_Isend(bufs[k].data(), n, MPI_UINT64_T, peer, 33,
                                MPI_COMM_WORLD, &reqs[k]));
        } else {
            MPI_CHECK(MPI_Irecv(bufs[k].data(), n, MPI_UINT64_T, 0, 33,
                                MPI_COMM_WORLD, &reqs[k]));
        }
    }
    MPI_CHECK(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(),
                          MPI_STATUSES_IGNORE));
    if (my_rank == 0) {
        MPI_CHECK(MPI_Recv(&answer, 1, MPI_UINT32_T, peer, 34, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
    } else {
        MPI_CHECK(MPI_Send(&answer, 1, MPI_UINT32_T, 0, 34, MPI_COMM_WORLD));
    }
}

/* Each buffer of the window filled (sender) or poisoned (receiver) for
 * `iteration`; the receiver checks them with check_window. */
void prepare_window(std::vector<std::vector<uint64_t>> &bufs, int peer,
                    size_t size, unsigned iteration)
{
    for (unsigned k = 0; k < bufs.size(); ++k) {
        if (my_rank == 0) {
            fill(bufs[k], {what::bw, 0, peer, size, iteration, k});
        } else {
            poison(bufs[k]);
        }
    }
}

void check_window(const std::vector<std::vector<uint64_t>> &bufs, size_t size,
                  unsigned iteration)
{
    if (my_rank == 0) {
        return;
    }
    for (unsigned k = 0; k < bufs.size(); ++k) {
        verify("bw", bufs[k], {what::bw, 0, my_rank, size, iteration, k});
    }
}

void run_bw(const options &o, int peer, size_t size)
{
    const size_t n = window_for(size);
    std::vector<std::vector<uint64_t>> bufs(n,
                                            std::vector<uint64_t>(
                                                    size / sizeof(uint64_t)));
    prepare_window(bufs, peer, size, 0);
    window(peer, bufs);
    check_window(bufs, size, 0);
    prepare_window(bufs, peer, size, 1);
    const size_t windows = windows_for(size, n, o.windows);
    std::vector<double> times(windows);
    for (size_t w = 0; w < windows; ++w) {
        const double t0 = MPI_Wtime();
        window(peer, bufs);
        times[w] = MPI_Wtime() - t0;
    }
    check_window(bufs, size, 1);
    if (my_rank == 0) {
        const double t = median(times);
        std::printf("bw %zu MBps %.4g window %zu windows %zu\n", size,
                    t > 0 ? static_cast<double>(n * size) / t / 1e6 : 0, n,
                    windows);
        std::fflush(stdout);
    }
}

void run_a2a(const options &o, size_t size)
{
    const size_t words = size / sizeof(uint64_t);
    std::vector<uint64_t> out(words * n_ranks), in(out.size());
    std::vector<double> mine(o.reps), slowest(o.reps);
    for (unsigned it = 0; it < o.reps; ++it) {
        for (int d = 0; d < n_ranks; ++d) {
            fill(std::span(out).subspan(d * words, words),
                 {what::a2a, my_rank, d, size, it});
        }
        poison(in);
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        const double t0 = MPI_Wtime();
        MPI_CHECK(MPI_Alltoall(out.data(), count_of(words), MPI_UINT64_T,
                               in.data(), count_of(words), MPI_UINT64_T,
                               MPI_COMM_WORLD));
        mine[it] = MPI_Wtime() - t0;
        for (int s = 0; s < n_ranks; ++s) {
            verify("a2a", std::span(in).subspan(s * words, words),
                   {what::a2a, s, my_rank, size, it});
        }
    }
    MPI_CHECK(MPI_Reduce(mine.data(), slowest.data(), count_of(o.reps),
                         MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    if (my_rank == 0) {
        std::printf("a2a %zu us %.1f reps %zu\n", size, median(slowest) * 1e6,
                    o.reps);
        std::fflush(stdout);
    }
}

constexpr const char *usage =
        "usage: rvt_mpi_sweep [options]  (under mpirun, ranks on 2+ nodes)\n"
        "  --sizes=LIST       lat and bw message sizes (8,64,512,4K,16K,32K,\n"
        "                     64K,256K,1M,4M)\n"
        "  --a2a-sizes=LIST   a2a bytes per pair of ranks (1K,32K,256K,1M)\n"
        "  --iters=N          lat round trips per size up to 64 KiB, fewer\n"
        "                     above (50)\n"
        "  --windows=N        bw windows per size, fewer for large ones (10)\n"
        "  --reps=N           a2a repetitions per size (5)\n"
        "  --only=T[,T...]    only these of lat, bw, a2a (all)\n"
        "  --one-host         allow all ranks on one host\n"
        "  --help             this text\n"
        "Sizes are multiples of 8 from 8 to 64M and take the binary suffixes\n"
        "K, M and G; defaults in ().\n";

size_t count_arg(std::string_view key, std::string_view v, size_t max)
{
    size_t n = 0;
    if (!rvt::check::parse_size(v, n) || n < 1 || n > max) {
        bad_argument("bad value '" + std::string(v) + "' for " +
                     std::string(key) + ": expected a number from 1 to " +
                     std::to_string(max));
    }
    return n;
}

void sizes_arg(std::string_view key, std::string_view v,
               std::vector<size_t> &out)
{
    if (!rvt::check::parse_size_list(v, 8, 64u << 20, 8, out)) {
        bad_argument("bad value '" + std::string(v) + "' for " +
                     std::string(key) +
                     ": expected sizes separated by commas, each a multiple "
                     "of 8 from 8 to 64M");
    }
}

void only_arg(std::string_view list, options &o)
{
    o.lat = o.bw = o.a2a = false;
    while (true) {
        const size_t comma          = list.find(',');
        const std::string_view name = list.substr(0, comma);
        if (name == "lat") {
            o.lat = true;
        } else if (name == "bw") {
            o.bw = true;
        } else if (name == "a2a") {
            o.a2a = true;
        } else {
            bad_argument("bad test '" + std::string(name) +
                         "' in --only: expected lat, bw or a2a, separated "
                         "by commas");
        }
        if (comma == std::string_view::npos) {
            return;
        }
        list.remove_prefix(comma + 1);
    }
}

options parse(int argc, char **argv)
{
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        const size_t eq          = a.find('=');
        const std::string_view k = a.substr(0, eq);
        const std::string_view v = eq == std::string_view::npos ?
                                           "" :
                                           a.substr(eq + 1);
        if (k == "--sizes") {
            sizes_arg(k, v, o.sizes);
        } else if (k == "--a2a-sizes") {
            sizes_arg(k, v, o.a2a_sizes);
        } else if (k == "--iters") {
            o.iters = count_arg(k, v, 1000000);
        } else if (k == "--windows") {
            o.windows = count_arg(k, v, 1000000);
        } else if (k == "--reps") {
            o.reps = count_arg(k, v, 1000);
        } else if (k == "--only") {
            only_arg(v, o);
        } else if (a == "--one-host") {
            o.one_host = true;
        } else if (a == "--help") {
            if (my_rank == 0) {
                std::fputs(usage, stdout);
            }
            exit_parse(0);
        } else {
            bad_argument("unknown argument '" + std::string(a) + "'");
        }
    }
    return o;
}

/* The host each rank runs on, on rank 0's side; the pair must cross
 * between nodes unless one_host. */
void check_pair(int peer, bool one_host)
{
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len                           = 0;
    MPI_CHECK(MPI_Get_processor_name(name, &len));
    std::vector<char> all(static_cast<size_t>(n_ranks) *
                          MPI_MAX_PROCESSOR_NAME);
    MPI_CHECK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(),
                            MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD));
    const std::string first = &all[0];
    const std::string other =
            &all[static_cast<size_t>(peer) * MPI_MAX_PROCESSOR_NAME];
    if (my_rank == 0) {
        std::printf("%d ranks; lat and bw between rank 0 (%s) and rank %d "
                    "(%s)\n",
                    n_ranks, first.c_str(), peer, other.c_str());
        std::fflush(stdout);
    }
    if (first == other && !one_host) {
        if (my_rank == 0) {
            std::fprintf(stderr,
                         "FAIL: ranks 0 and %d run on one host: nothing "
                         "would cross between nodes (--map-by ppr:K:node)\n",
                         peer);
        }
        exit_parse(1);
    }
}

} // namespace

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const options o = parse(argc, argv);
    if (n_ranks < 2) {
        bad_argument("needs 2 ranks or more, has " + std::to_string(n_ranks));
    }
    const int peer = n_ranks / 2;
    check_pair(peer, o.one_host);
    const bool in_pair = my_rank == 0 || my_rank == peer;
    for (size_t size : o.sizes) {
        if (in_pair && o.lat) {
            run_lat(o, peer, size);
        }
        if (in_pair && o.bw) {
            run_bw(o, peer, size);
        }
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    }
    if (o.a2a) {
        for (size_t size : o.a2a_sizes) {
            run_a2a(o, size);
        }
    }
    uint64_t bad = 0;
    MPI_CHECK(MPI_Allreduce(&mismatches, &bad, 1, MPI_UINT64_T, MPI_SUM,
                            MPI_COMM_WORLD));
    if (my_rank == 0) {
        if (bad) {
            std::printf("FAIL: rvt_mpi_sweep: %" PRIu64
                        " values differed (lines above name them)\n",
                        bad);
        } else {
            std::printf("OK: rvt_mpi_sweep: %d ranks, every checked value "
                        "verified\n",
                        n_ranks);
        }
    }
    MPI_Finalize();
    return bad ? 1 : 0;
}
