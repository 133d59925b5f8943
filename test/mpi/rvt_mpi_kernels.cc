/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * HPC kernels as an application-level benchmark, for comparing UCX
 * transports (rvt, ud_verbs with rvt, rc_verbs) by time and bandwidth:
 * a test script runs it under mpirun once per transport, fully subscribed
 * (2 nodes x 2 or more ranks), and compares the figures; this program only
 * prints them and verifies every value the kernels move. Each kernel runs
 * --reps times over all ranks, every time with fresh contents:
 *
 *   alltoall   MPI_Alltoall of --a2a-size bytes per pair of ranks
 *   transpose  a distributed transpose of an N x N matrix of doubles
 *              (N = --transpose-n, a multiple of the rank count), each rank
 *              holding a block of rows: pack one block per rank,
 *              MPI_Alltoall, transpose each block that arrived
 *   random     GUPS-like random updates of a table whose slice of
 *              --table-words 64-bit words each rank owns: per round each
 *              rank makes --updates pseudo-random (global index, value)
 *              pairs (from its rank and the round), buckets them by owner,
 *              exchanges the counts with MPI_Alltoall and the pairs with
 *              MPI_Alltoallv, and the owner XORs each value into its word
 *   ring       MPI_Sendrecv to rank + 1, from rank - 1, of 1 KiB, 16 KiB,
 *              128 KiB and 1 MiB (the sizes below --ring-max, then
 *              --ring-max itself), --reps times each
 *
 * What arrives is compared with what the receiver computes itself: for
 * alltoall and ring from (kernel, source, destination, size, iteration,
 * index) by ../common/check_pattern.h, for the matrix from (row, column,
 * iteration); random's slice is compared at the end with one each rank
 * computes by regenerating every rank's updates. A wrong value prints a
 * line naming rank, kernel, iteration, index, got and expected (the first
 * few per rank and kernel), the other kernels still run, and the program
 * exits 1. Rank 0 prints, per kernel,
 *
 *   kernel alltoall time_s 1.234 MBps 56.7 reps 10
 *
 * (random adds updates_per_s, over all ranks), then "total time_s" (the sum
 * of the kernels' times) and "OK: rvt_mpi_kernels". time_s is the slowest
 * rank's sum of its timed parts, each started after an MPI_Barrier: the
 * exchange itself, for transpose also the packing and the local
 * transposes, for random the whole round (making, bucketing, exchanging
 * and applying the updates); filling and verifying are not timed. MBps is
 * 10^6 bytes per second of time_s, counting each byte once, as sent by its
 * sender to another rank (a rank's block to itself is not counted; for
 * random the pairs and the counts).
 *
 *   rvt_mpi_kernels [--reps=N] [--only=KERNEL[,KERNEL...]]
 *                   [--a2a-size=BYTES] [--transpose-n=N] [--table-words=N]
 *                   [--updates=N] [--ring-max=BYTES] [--one-host] [--help]
 *
 * --reps (default 10) applies to every kernel. Numbers take the binary
 * suffixes K, M and G; a bad value exits 2, naming it. Without --one-host
 * (for trying it out on one machine), all ranks on one host is a failure:
 * nothing would cross between nodes.
 */
#include "../common/check_pattern.h"
#include "../common/mpi_util.h"
#include "../common/size_arg.h"

#include <mpi.h>

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

// What a buffer was filled for; part of every word's seed.
enum class what : uint64_t {
    alltoall     = 21,
    transpose    = 22,
    random       = 23, // one rank's updates in one round
    random_table = 24, // the table's contents before the first round
    ring         = 25,
};

using pattern = rvt::check::pattern<what>;
using rvt::check::count_of;
using rvt::check::exit_parse;
using rvt::check::human;
using rvt::check::poison;

// (not a template: the callers' braced patterns need the type spelled)
void fill(std::span<uint64_t> buf, const pattern &p)
{
    rvt::check::fill(buf, p);
}

int my_rank;
int n_ranks;
// wrong values this rank found in the current kernel
uint64_t mismatches;
constexpr int max_reports = 5;
int reports;

std::string hex(uint64_t v)
{
    char b[24];
    std::snprintf(b, sizeof(b), "0x%016" PRIx64, v);
    return b;
}

std::string num(double v)
{
    char b[32];
    std::snprintf(b, sizeof(b), "%.17g", v);
    return b;
}

// Counts one wrong value; the first few are printed. `where` says more
// about the index (what it is, where the value came from).
void mismatch(const char *kernel, unsigned iteration, size_t index,
              const std::string &where, const std::string &got,
              const std::string &want)
{
    if (++reports <= max_reports) {
        std::fprintf(stderr,
                     "FAIL: rank %d: %s iteration %u index %zu (%s): got %s, "
                     "expected %s\n",
                     my_rank, kernel, iteration, index, where.c_str(),
                     got.c_str(), want.c_str());
    }
    ++mismatches;
}

// Compares a received buffer with what p says it must hold.
void verify(const char *kernel, std::span<const uint64_t> buf, const pattern &p)
{
    rvt::check::compare(buf, p, [&](size_t i, uint64_t got, uint64_t want) {
        mismatch(kernel, p.iteration, i,
                 "word of " + human(p.size) + " from rank " +
                         std::to_string(p.src),
                 hex(got), hex(want));
    });
}

// Seconds f takes on this rank, all ranks starting together.
template<class F> double timed(F &&f)
{
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    const double t0 = MPI_Wtime();
    f();
    return MPI_Wtime() - t0;
}

struct options {
    size_t reps        = 10;
    size_t a2a_size    = 64u << 10;
    size_t transpose_n = 1024;
    size_t table_words = 1u << 16;
    size_t updates     = 4096;
    size_t ring_max    = 1u << 20;
    std::vector<std::string> only; // empty: all kernels
    bool one_host = false;

    bool wants(std::string_view kernel) const
    {
        return only.empty() ||
               std::find(only.begin(), only.end(), kernel) != only.end();
    }
};

// What one kernel did on this rank; main takes the slowest rank's seconds
// and the sums of the rest.
struct measured {
    double seconds = 0; // the timed parts
    double bytes   = 0; // sent to other ranks in them
    double updates = 0; // random's table updates
};

measured run_alltoall(const options &o)
{
    const size_t words = o.a2a_size / sizeof(uint64_t);
    std::vector<uint64_t> out(words * n_ranks), in(out.size());
    measured m;
    for (unsigned it = 0; it < o.reps; ++it) {
        for (int d = 0; d < n_ranks; ++d) {
            fill(std::span(out).subspan(d * words, words),
                 {what::alltoall, my_rank, d, o.a2a_size, it});
        }
        poison(in);
        m.seconds += timed([&] {
            MPI_CHECK(MPI_Alltoall(out.data(), count_of(words), MPI_UINT64_T,
                                   in.data(), count_of(words), MPI_UINT64_T,
                                   MPI_COMM_WORLD));
        });
        for (int s = 0; s < n_ranks; ++s) {
            verify("alltoall", std::span(in).subspan(s * words, words),
                   {what::alltoall, s, my_rank, o.a2a_size, it});
        }
    }
    m.bytes = static_cast<double>(o.a2a_size) * (n_ranks - 1) * o.reps;
    return m;
}

// Element (row, col) of the matrix in the iteration whose seed is `seed`:
// a whole number below 2^53, so a double holds it exactly.
double element(uint64_t seed, size_t n, size_t row, size_t col)
{
    return static_cast<double>(pattern::word(seed, row * n + col) >> 11);
}

measured run_transpose(const options &o)
{
    const size_t n    = o.transpose_n;
    const size_t rows = n / n_ranks; // a block is rows x rows
    const size_t blk  = rows * rows;
    const size_t row0 = my_rank * rows; // my first global row
    // mine: my rows of A; result: my rows of A's transpose
    std::vector<double> mine(rows * n), out(rows * n), in(rows * n),
            result(rows * n);
    measured m;
    for (unsigned it = 0; it < o.reps; ++it) {
        const uint64_t seed = pattern{what::transpose, -1, -1, n, it}.seed();
        for (size_t r = 0; r < rows; ++r) {
            for (size_t c = 0; c < n; ++c) {
                mine[r * n + c] = element(seed, n, row0 + r, c);
            }
        }
        std::fill(in.begin(), in.end(), -1.0);
        std::fill(result.begin(), result.end(), -1.0);
        m.seconds += timed([&] {
            // block d holds columns [d * rows, (d + 1) * rows) of my rows
            for (int d = 0; d < n_ranks; ++d) {
                for (size_t r = 0; r < rows; ++r) {
                    std::copy_n(&mine[r * n + d * rows], rows,
                                &out[d * blk + r * rows]);
                }
            }
            MPI_CHECK(MPI_Alltoall(out.data(), count_of(blk), MPI_DOUBLE,
                                   in.data(), count_of(blk), MPI_DOUBLE,
                                   MPI_COMM_WORLD));
            // block s: A[s * rows + r][row0 + c] goes to my row c, column
            // s * rows + r
            for (int s = 0; s < n_ranks; ++s) {
                for (size_t r = 0; r < rows; ++r) {
                    for (size_t c = 0; c < rows; ++c) {
                        result[c * n + s * rows + r] =
                                in[s * blk + r * rows + c];
                    }
                }
            }
        });
        // the transpose's (row, col) is A's (col, row)
        for (size_t r = 0; r < rows; ++r) {
            for (size_t c = 0; c < n; ++c) {
                const double want = element(seed, n, c, row0 + r);
                if (result[r * n + c] != want) {
                    mismatch("transpose", it, r * n + c,
                             "row " + std::to_string(row0 + r) + " column " +
                                     std::to_string(c),
                             num(result[r * n + c]), num(want));
                }
            }
        }
    }
    m.bytes = static_cast<double>(blk * sizeof(double)) * (n_ranks - 1) *
              o.reps;
    return m;
}

struct update {
    uint64_t index; // into the whole table
    uint64_t value;
};

// The seed of the updates rank src makes in round `round`.
uint64_t stream_seed(int src, unsigned round)
{
    return pattern{what::random, src, -1, 0, round}.seed();
}

// Update k of the stream whose seed is `seed`.
update nth_update(uint64_t seed, size_t k, uint64_t table_size)
{
    return {pattern::word(seed, 2 * k) % table_size,
            pattern::word(seed, 2 * k + 1)};
}

// My slice before the first round.
std::vector<uint64_t> initial_slice(const options &o)
{
    std::vector<uint64_t> slice(o.table_words);
    fill(slice, {what::random_table, my_rank, my_rank,
                 o.table_words * sizeof(uint64_t), 0});
    return slice;
}

// One round: my updates go to their owners, theirs come into my slice.
// Returns the bytes this rank sent to other ranks.
double random_round(const options &o, unsigned round, std::span<uint64_t> slice)
{
    const uint64_t table_size = o.table_words * n_ranks;
    const uint64_t base       = my_rank * o.table_words; // my first index
    std::vector<update> mine(o.updates);
    std::vector<int> counts(n_ranks), in_counts(n_ranks);
    const uint64_t seed = stream_seed(my_rank, round);
    for (size_t k = 0; k < o.updates; ++k) {
        mine[k] = nth_update(seed, k, table_size);
        ++counts[mine[k].index / o.table_words];
    }
    // bucket by owner, as (index, value) word pairs
    std::vector<int> words(n_ranks), displs(n_ranks);
    for (int d = 0, at = 0; d < n_ranks; at += words[d], ++d) {
        words[d]  = 2 * counts[d];
        displs[d] = at;
    }
    std::vector<uint64_t> out(2 * o.updates);
    std::vector<int> next = displs;
    for (const update &u : mine) {
        const size_t d = u.index / o.table_words;
        out[next[d]++] = u.index;
        out[next[d]++] = u.value;
    }
    MPI_CHECK(MPI_Alltoall(counts.data(), 1, MPI_INT, in_counts.data(), 1,
                           MPI_INT, MPI_COMM_WORLD));
    std::vector<int> in_words(n_ranks), in_displs(n_ranks);
    for (int s = 0, at = 0; s < n_ranks; at += in_words[s], ++s) {
        if (in_counts[s] < 0 || static_cast<size_t>(in_counts[s]) > o.updates) {
            // a wrong count would make MPI_Alltoallv itself fail
            std::fprintf(stderr,
                         "FAIL: rank %d: random iteration %u: rank %d "
                         "announces %d updates, at most %zu possible\n",
                         my_rank, round, s, in_counts[s], o.updates);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        in_words[s]  = 2 * in_counts[s];
        in_displs[s] = at;
    }
    std::vector<uint64_t> in(in_displs.back() + in_words.back());
    MPI_CHECK(MPI_Alltoallv(out.data(), words.data(), displs.data(),
                            MPI_UINT64_T, in.data(), in_words.data(),
                            in_displs.data(), MPI_UINT64_T, MPI_COMM_WORLD));
    for (size_t i = 0; i < in.size(); i += 2) {
        if (in[i] - base >= o.table_words) {
            mismatch("random", round, i / 2, "update's table index, not mine",
                     std::to_string(in[i]),
                     std::to_string(base) + ".." +
                             std::to_string(base + o.table_words - 1));
            continue;
        }
        slice[in[i] - base] ^= in[i + 1];
    }
    double bytes = 0;
    for (int d = 0; d < n_ranks; ++d) {
        if (d != my_rank) {
            bytes += sizeof(int) + words[d] * sizeof(uint64_t);
        }
    }
    return bytes;
}

measured run_random(const options &o)
{
    std::vector<uint64_t> slice = initial_slice(o);
    measured m;
    for (unsigned round = 0; round < o.reps; ++round) {
        double bytes = 0;
        m.seconds += timed([&] { bytes = random_round(o, round, slice); });
        m.bytes += bytes;
    }
    m.updates = static_cast<double>(o.updates) * o.reps;

    // my slice as every rank's updates must have left it
    const uint64_t table_size  = o.table_words * n_ranks;
    const uint64_t base        = my_rank * o.table_words;
    std::vector<uint64_t> want = initial_slice(o);
    for (int s = 0; s < n_ranks; ++s) {
        for (unsigned round = 0; round < o.reps; ++round) {
            const uint64_t seed = stream_seed(s, round);
            for (size_t k = 0; k < o.updates; ++k) {
                const update u = nth_update(seed, k, table_size);
                if (u.index - base < o.table_words) {
                    want[u.index - base] ^= u.value;
                }
            }
        }
    }
    for (size_t i = 0; i < want.size(); ++i) {
        if (slice[i] != want[i]) {
            mismatch("random", static_cast<unsigned>(o.reps - 1), i,
                     "table word " + std::to_string(base + i) +
                             " after the last round",
                     hex(slice[i]), hex(want[i]));
        }
    }
    return m;
}

// 1 KiB, 16 KiB, 128 KiB, 1 MiB below max, then max itself.
std::vector<size_t> ring_sizes(size_t max)
{
    std::vector<size_t> sizes;
    for (size_t s : {1u << 10, 16u << 10, 128u << 10, 1u << 20}) {
        if (s < max) {
            sizes.push_back(s);
        }
    }
    sizes.push_back(max);
    return sizes;
}

measured run_ring(const options &o)
{
    const int next = (my_rank + 1) % n_ranks;
    const int prev = (my_rank - 1 + n_ranks) % n_ranks;
    measured m;
    for (size_t size : ring_sizes(o.ring_max)) {
        const size_t words = size / sizeof(uint64_t);
        std::vector<uint64_t> out(words), in(words);
        for (unsigned it = 0; it < o.reps; ++it) {
            fill(out, {what::ring, my_rank, next, size, it});
            poison(in);
            m.seconds += timed([&] {
                MPI_CHECK(MPI_Sendrecv(out.data(), count_of(words),
                                       MPI_UINT64_T, next, 25, in.data(),
                                       count_of(words), MPI_UINT64_T, prev, 25,
                                       MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            });
            verify("ring", in, {what::ring, prev, my_rank, size, it});
        }
        if (next != my_rank) {
            m.bytes += static_cast<double>(size) * o.reps;
        }
    }
    return m;
}

struct kernel {
    const char *name;
    measured (*run)(const options &);
};

constexpr kernel kernels[] = {
        {"alltoall", run_alltoall},
        {"transpose", run_transpose},
        {"random", run_random},
        {"ring", run_ring},
};

constexpr const char *usage =
        "usage: rvt_mpi_kernels [options]  (under mpirun, 2 nodes x 2+)\n"
        "  --reps=N          repetitions of every kernel (10)\n"
        "  --only=K[,K...]   only these of alltoall, transpose, random,\n"
        "                    ring (all)\n"
        "  --a2a-size=BYTES  alltoall: bytes per pair of ranks (64K)\n"
        "  --transpose-n=N   transpose: matrix order, a multiple of the\n"
        "                    rank count (1024)\n"
        "  --table-words=N   random: 64-bit table words per rank (64K)\n"
        "  --updates=N       random: updates per rank and round (4096)\n"
        "  --ring-max=BYTES  ring: largest message (1M)\n"
        "  --one-host        allow all ranks on one host\n"
        "  --help            this text\n"
        "Numbers take the binary suffixes K, M and G; defaults in ().\n";

[[noreturn]] void bad_argument(const std::string &msg)
{
    rvt::check::bad_argument("rvt_mpi_kernels", msg);
}

struct number_option {
    std::string_view key; // with its "="
    size_t options::*field;
    size_t min;
    size_t max;
    size_t multiple_of;
    const char *expected;
};

constexpr number_option number_options[] = {
        {"--reps=", &options::reps, 1, 1000000, 1,
         "a number of repetitions from 1 to 1000000"},
        {"--a2a-size=", &options::a2a_size, 8, 256u << 20, 8,
         "bytes per pair of ranks, a multiple of 8 from 8 to 256M"},
        {"--transpose-n=", &options::transpose_n, 1, 32768, 1,
         "a matrix order from 1 to 32768"},
        {"--table-words=", &options::table_words, 1, 1u << 30, 1,
         "64-bit words per rank from 1 to 1G"},
        {"--updates=", &options::updates, 1, 1u << 24, 1,
         "updates per rank and round from 1 to 16M"},
        {"--ring-max=", &options::ring_max, 8, 256u << 20, 8,
         "bytes, a multiple of 8 from 8 to 256M"},
};

// "--key=value": value into o's field; bad values exit.
bool parse_number_option(std::string_view arg, options &o)
{
    for (const number_option &opt : number_options) {
        if (!arg.starts_with(opt.key)) {
            continue;
        }
        const std::string_view v = arg.substr(opt.key.size());
        size_t n                 = 0;
        if (!rvt::check::parse_size(v, n) || n < opt.min || n > opt.max ||
            n % opt.multiple_of != 0) {
            bad_argument("bad value '" + std::string(v) + "' for " +
                         std::string(opt.key.substr(0, opt.key.size() - 1)) +
                         ": expected " + opt.expected);
        }
        o.*opt.field = n;
        return true;
    }
    return false;
}

// "--only=a,b": kernel names; unknown ones exit.
void parse_only(std::string_view list, options &o)
{
    const std::string expected = "expected kernels from alltoall, transpose, "
                                 "random, ring, separated by commas";
    if (list.empty()) {
        bad_argument("empty --only: " + expected);
    }
    while (true) {
        const size_t comma          = list.find(',');
        const std::string_view name = list.substr(0, comma);
        if (std::none_of(std::begin(kernels), std::end(kernels),
                         [&](const kernel &k) { return name == k.name; })) {
            bad_argument("bad kernel '" + std::string(name) +
                         "' in --only: " + expected);
        }
        o.only.emplace_back(name);
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
        if (parse_number_option(a, o)) {
            // done
        } else if (a.starts_with("--only=")) {
            parse_only(a.substr(7), o);
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
    // what depends on the rank count
    const std::string ranks = std::to_string(n_ranks);
    if (o.wants("transpose") && o.transpose_n % n_ranks != 0) {
        bad_argument("bad value '" + std::to_string(o.transpose_n) +
                     "' for --transpose-n: expected a multiple of the rank "
                     "count, " +
                     ranks);
    }
    if (o.wants("random") &&
        o.updates * 2 * static_cast<size_t>(n_ranks) > INT_MAX) {
        bad_argument("bad value '" + std::to_string(o.updates) +
                     "' for --updates: expected at most " +
                     std::to_string(INT_MAX / 2 / n_ranks) + " with " + ranks +
                     " ranks");
    }
    return o;
}

// Prints where the ranks run; all on one host is a failure unless
// one_host.
void check_hosts(bool one_host)
{
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len                           = 0;
    MPI_CHECK(MPI_Get_processor_name(name, &len));
    std::vector<char> all(static_cast<size_t>(n_ranks) *
                          MPI_MAX_PROCESSOR_NAME);
    MPI_CHECK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(),
                            MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD));
    std::map<std::string, int> ranks_on;
    for (int r = 0; r < n_ranks; ++r) {
        ++ranks_on[&all[static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME]];
    }
    if (my_rank == 0) {
        std::string hosts;
        for (const auto &[host, ranks] : ranks_on) {
            hosts += (hosts.empty() ? "" : ", ") + host + " (" +
                     std::to_string(ranks) + ")";
        }
        std::printf("%d ranks on %zu host%s: %s%s\n", n_ranks, ranks_on.size(),
                    ranks_on.size() == 1 ? "" : "s", hosts.c_str(),
                    ranks_on.size() == 1 && one_host ? " (--one-host)" : "");
        std::fflush(stdout);
    }
    if (ranks_on.size() == 1 && !one_host) {
        if (my_rank == 0) {
            std::fprintf(stderr,
                         "FAIL: all %d ranks run on one host: nothing would "
                         "cross between nodes\n",
                         n_ranks);
        }
        MPI_Finalize();
        std::exit(1);
    }
}

// Runs one kernel and prints its line; returns its time (rank 0's figure,
// the slowest rank's) and adds its wrong values, all ranks', to bad.
double run_kernel(const kernel &k, const options &o, uint64_t &bad)
{
    mismatches           = 0;
    reports              = 0;
    const measured m     = k.run(o);
    double seconds       = 0;
    const double sums[2] = {m.bytes, m.updates};
    double totals[2]     = {};
    uint64_t kern_bad    = 0;
    MPI_CHECK(MPI_Reduce(&m.seconds, &seconds, 1, MPI_DOUBLE, MPI_MAX, 0,
                         MPI_COMM_WORLD));
    MPI_CHECK(MPI_Reduce(sums, totals, 2, MPI_DOUBLE, MPI_SUM, 0,
                         MPI_COMM_WORLD));
    MPI_CHECK(MPI_Allreduce(&mismatches, &kern_bad, 1, MPI_UINT64_T, MPI_SUM,
                            MPI_COMM_WORLD));
    bad += kern_bad;
    if (my_rank == 0) {
        const double per_s = seconds > 0 ? 1 / seconds : 0;
        std::printf("kernel %s time_s %.3f MBps %.1f reps %zu", k.name, seconds,
                    totals[0] * per_s / 1e6, o.reps);
        if (totals[1] > 0) {
            std::printf(" updates_per_s %.0f", totals[1] * per_s);
        }
        std::printf("\n");
        if (kern_bad) {
            std::printf("FAIL: rvt_mpi_kernels: %s: %" PRIu64
                        " values differed\n",
                        k.name, kern_bad);
        }
        std::fflush(stdout);
    }
    return seconds;
}

} // namespace

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    // errors come back as codes, so check_mpi can name the call
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const options o = parse(argc, argv);
    check_hosts(o.one_host);

    double total       = 0;
    uint64_t total_bad = 0;
    std::string ran;
    for (const kernel &k : kernels) {
        if (o.wants(k.name)) {
            total += run_kernel(k, o, total_bad);
            ran += (ran.empty() ? "" : ", ") + std::string(k.name);
        }
    }
    if (my_rank == 0) {
        std::printf("total time_s %.3f\n", total);
        if (total_bad) {
            std::printf("FAIL: rvt_mpi_kernels: %" PRIu64
                        " values differed (lines above name rank, kernel, "
                        "iteration and index)\n",
                        total_bad);
        } else {
            std::printf("OK: rvt_mpi_kernels: %d ranks, every value of %s "
                        "verified\n",
                        n_ranks, ran.c_str());
        }
    }
    MPI_Finalize();
    return total_bad ? 1 : 0;
}
