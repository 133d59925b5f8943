/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvt's own OpenSHMEM check: runs under oshrun/mpirun with
 * spml ucx across testbed nodes (test/testbed/mpi-guest.sh) and verifies
 * every byte that SHMEM moves:
 *
 *   put to all   every PE puts a block into its own slot on every PE (its
 *                own included), shmem_barrier_all, and every PE checks every
 *                slot; blocks from 8 B to 128 KiB, x4
 *   get          every PE fills its own source block, barrier, then gets the
 *                block of every other PE and checks it
 *   barrier      rounds of: every PE writes the round number (shmem_long_p)
 *                into its flag on every PE, shmem_barrier_all, every PE
 *                checks all flags hold this round: the barrier must complete
 *                all puts before anyone leaves it
 *   atomics      every PE adds 1 to a counter on the last PE N times with
 *                shmem_long_atomic_fetch_add; the counter must end at
 *                PEs x N and the values fetched must be 0..PEs x N - 1,
 *                each once
 *   large        PE 0 and the first PE on another host each put --large
 *                bytes (default 16 MiB) into the other, barrier, check; and
 *                get them back
 *
 * Every word is compared with a value computed from (what, source PE,
 * destination PE, size, round, index) by the PE that checks it. Mismatches
 * print a line naming PE, test, size and word index; PE 0 prints the total
 * and every PE exits 1 when there was any. Times are printed, never judged.
 *
 *   rvt_shmem_check [--large=BYTES] [--rounds=N] [--one-host]
 *
 * Without --one-host (for trying it out on one machine), all PEs on one
 * host is a failure: nothing would cross between nodes.
 */
#include "../common/check_pattern.h"

#include <shmem.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

enum class what : uint64_t {
    put_all = 1,
    get     = 2,
    large   = 3,
};

const char *name_of(what kind)
{
    switch (kind) {
    case what::put_all:
        return "put-to-all";
    case what::get:
        return "get";
    case what::large:
        return "large put";
    }
    return "?";
}

using pattern = rvt::check::pattern<what>;
using rvt::check::human;
using rvt::check::poison;

// (not a template: the callers' braced patterns need the type spelled)
void fill(std::span<uint64_t> buf, const pattern &p)
{
    rvt::check::fill(buf, p);
}

int me;
int npes;
uint64_t mismatches;
constexpr int max_reports = 5;
int reports;

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0)
{
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

void verify(std::span<const uint64_t> buf, const pattern &p)
{
    rvt::check::compare(buf, p, [&](size_t i, uint64_t got, uint64_t want) {
        if (++reports <= max_reports) {
            std::fprintf(stderr,
                         "FAIL: PE %d: %s size %zu round %u: word %zu (byte "
                         "offset %zu) from PE %d: got 0x%016" PRIx64
                         ", expected 0x%016" PRIx64 "\n",
                         me, name_of(p.kind), p.size, p.iteration, i,
                         i * sizeof(uint64_t), p.src, got, want);
        }
        ++mismatches;
    });
}

// Counts a mismatch; prints the first few.
__attribute__((format(printf, 1, 2))) void report(const char *fmt, ...)
{
    if (++reports <= max_reports) {
        std::va_list args;
        va_start(args, fmt);
        std::vfprintf(stderr, fmt, args);
        va_end(args);
    }
    ++mismatches;
}

// Symmetric memory, freed (collectively) when it goes out of scope.
template<typename T> class symmetric {
public:
    explicit symmetric(size_t count) :
        ptr_(static_cast<T *>(shmem_malloc(count * sizeof(T)))), count_(count)
    {
        if (ptr_ == nullptr && count > 0) {
            std::fprintf(stderr,
                         "FAIL: PE %d: shmem_malloc(%zu) failed (symmetric "
                         "heap too small? SHMEM_SYMMETRIC_SIZE)\n",
                         me, count * sizeof(T));
            shmem_global_exit(2);
        }
    }
    ~symmetric()
    {
        shmem_free(ptr_);
    }
    symmetric(const symmetric &)            = delete;
    symmetric &operator=(const symmetric &) = delete;

    T *data() const
    {
        return ptr_;
    }
    std::span<T> span() const
    {
        return {ptr_, count_};
    }
    std::span<T> block(size_t index, size_t words) const
    {
        return span().subspan(index * words, words);
    }

private:
    T *ptr_;
    size_t count_;
};

struct options {
    size_t large    = 16u << 20;
    unsigned rounds = 20;
    bool one_host   = false;
};

options parse(int argc, char **argv)
{
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a.starts_with("--large=")) {
            o.large = std::strtoull(argv[i] + 8, nullptr, 0) & ~size_t{7};
        } else if (a.starts_with("--rounds=")) {
            o.rounds = static_cast<unsigned>(
                    std::strtoul(argv[i] + 9, nullptr, 0));
        } else if (a == "--one-host") {
            o.one_host = true;
        } else {
            if (me == 0) {
                std::fprintf(stderr, "FAIL: unknown argument '%s'\n", argv[i]);
            }
            shmem_global_exit(2);
        }
    }
    if (o.large < 8 || o.rounds < 1) {
        if (me == 0) {
            std::fprintf(stderr, "FAIL: --large must be >= 8 and --rounds "
                                 ">= 1\n");
        }
        shmem_global_exit(2);
    }
    return o;
}

constexpr size_t name_len = 64;

// The first PE whose host differs from PE 0's, or -1.
int find_partner(bool one_host)
{
    symmetric<char> names(static_cast<size_t>(npes) * name_len);
    char mine[name_len] = {};
    gethostname(mine, sizeof(mine) - 1);
    // every PE writes its host name into its slot on every PE
    for (int pe = 0; pe < npes; ++pe) {
        shmem_putmem(names.data() + static_cast<size_t>(me) * name_len, mine,
                     name_len, pe);
    }
    shmem_barrier_all();
    auto host = [&](int pe) {
        return std::string(names.data() + static_cast<size_t>(pe) * name_len);
    };
    int partner = -1;
    for (int pe = 1; pe < npes && partner < 0; ++pe) {
        if (host(pe) != host(0)) {
            partner = pe;
        }
    }
    if (me == 0) {
        if (partner >= 0) {
            std::printf("%d PEs; large transfers between PE 0 (%s) and PE %d "
                        "(%s)\n",
                        npes, host(0).c_str(), partner, host(partner).c_str());
        } else if (!one_host) {
            std::fprintf(stderr,
                         "FAIL: all %d PEs run on %s: nothing would cross "
                         "between nodes\n",
                         npes, host(0).c_str());
        }
    }
    if (partner < 0 && one_host && npes > 1) {
        partner = 1;
    }
    shmem_barrier_all(); // names is freed collectively
    return partner;
}

// Put to all and get from all, one block size; returns the seconds of the
// put phase (puts + barrier) and of the get phase.
std::pair<double, double> put_get_all(size_t size, unsigned round)
{
    const size_t words = size / sizeof(uint64_t);
    symmetric<uint64_t> slots(words * static_cast<size_t>(npes));
    symmetric<uint64_t> source(words);
    std::vector<uint64_t> out(words), in(words);

    poison(slots.span());
    shmem_barrier_all(); // nobody puts before every PE poisoned
    auto t0 = clock_type::now();
    for (int d = 0; d < npes; ++d) {
        fill(out, {what::put_all, me, d, size, round});
        shmem_putmem(slots.block(static_cast<size_t>(me), words).data(),
                     out.data(), size, d);
    }
    shmem_barrier_all();
    const double put_s = seconds_since(t0);
    for (int s = 0; s < npes; ++s) {
        verify(slots.block(static_cast<size_t>(s), words),
               {what::put_all, s, me, size, round});
    }

    fill(source.span(), {what::get, me, -1, size, round});
    shmem_barrier_all(); // every source is filled
    double get_s = 0;
    for (int k = 1; k < npes; ++k) {
        const int from = (me + k) % npes;
        poison(in);
        auto t1 = clock_type::now();
        shmem_getmem(in.data(), source.data(), size, from);
        get_s += seconds_since(t1);
        verify(in, {what::get, from, -1, size, round});
    }
    shmem_barrier_all(); // nobody frees a source still being read
    return {put_s, npes > 1 ? get_s / (npes - 1) : 0};
}

// Barrier rounds; returns the mean seconds per round.
double barrier_rounds(unsigned rounds)
{
    symmetric<long> flags(static_cast<size_t>(npes));
    std::fill(flags.span().begin(), flags.span().end(), -1L);
    shmem_barrier_all();
    auto t0 = clock_type::now();
    for (unsigned r = 0; r < rounds; ++r) {
        for (int d = 0; d < npes; ++d) {
            shmem_long_p(flags.data() + me, static_cast<long>(r), d);
        }
        shmem_barrier_all();
        for (int s = 0; s < npes; ++s) {
            if (flags.data()[s] != static_cast<long>(r)) {
                report("FAIL: PE %d: barrier round %u: the flag of PE %d "
                       "does not hold this round after shmem_barrier_all\n",
                       me, r, s);
            }
        }
        // nobody writes round r + 1 before everyone checked round r
        shmem_barrier_all();
    }
    return seconds_since(t0) / rounds;
}

// Fetch-and-add on a counter of the last PE; returns the mean seconds per
// atomic.
double atomics(unsigned count)
{
    symmetric<long> counter(1);
    symmetric<long> fetched(static_cast<size_t>(npes) * count);
    counter.data()[0] = 0;
    shmem_barrier_all();
    const int owner = npes - 1;
    std::vector<long> mine(count);
    auto t0 = clock_type::now();
    for (unsigned i = 0; i < count; ++i) {
        mine[i] = shmem_long_atomic_fetch_add(counter.data(), 1, owner);
    }
    const double s = seconds_since(t0) / count;
    // everyone's fetched values to the owner, which checks them all
    shmem_putmem(fetched.data() + static_cast<size_t>(me) * count, mine.data(),
                 count * sizeof(long), owner);
    shmem_barrier_all();
    if (me == owner) {
        const long total = static_cast<long>(npes) * count;
        if (counter.data()[0] != total) {
            report("FAIL: PE %d: atomic counter is %ld, expected %ld\n", me,
                   counter.data()[0], total);
        }
        std::vector<long> all(fetched.span().begin(), fetched.span().end());
        std::sort(all.begin(), all.end());
        for (long i = 0; i < total; ++i) {
            if (all[static_cast<size_t>(i)] != i) {
                report("FAIL: PE %d: fetch-and-add returned %ld where the "
                       "sorted values should hold %ld (lost or duplicated "
                       "update)\n",
                       me, all[static_cast<size_t>(i)], i);
                break;
            }
        }
    }
    shmem_barrier_all();
    return s;
}

// PE 0 and its partner put `size` bytes into each other, then get the
// other's source back; returns {put MB/s, get MB/s} (PE 0's view).
std::pair<double, double> large(size_t size, int partner)
{
    const size_t words = size / sizeof(uint64_t);
    symmetric<uint64_t> target(words);
    symmetric<uint64_t> source(words);
    const bool active = partner >= 0 && (me == 0 || me == partner);
    const int peer    = me == 0 ? partner : 0;
    double put_s = 0, get_s = 0;
    poison(target.span());
    if (active) {
        fill(source.span(), {what::large, me, peer, size, 0});
    }
    shmem_barrier_all();
    if (active) {
        auto t0 = clock_type::now();
        shmem_putmem(target.data(), source.data(), size, peer);
        shmem_quiet(); // the put is complete at the target
        put_s = seconds_since(t0);
    }
    shmem_barrier_all();
    if (active) {
        verify(target.span(), {what::large, peer, me, size, 0});
        // get the peer's source back into our target
        poison(target.span());
        auto t1 = clock_type::now();
        shmem_getmem(target.data(), source.data(), size, peer);
        get_s = seconds_since(t1);
        verify(target.span(), {what::large, peer, me, size, 0});
    }
    shmem_barrier_all();
    return {put_s > 0 ? size / put_s / 1e6 : 0,
            get_s > 0 ? size / get_s / 1e6 : 0};
}

} // namespace

int main(int argc, char **argv)
{
    shmem_init();
    me                         = shmem_my_pe();
    npes                       = shmem_n_pes();
    const options o            = parse(argc, argv);
    const int partner          = find_partner(o.one_host);
    const bool all_on_one_host = partner < 0;

    if (!all_on_one_host) {
        if (me == 0) {
            std::printf("%9s | %15s | %13s\n", "block", "put-to-all us",
                        "get us");
        }
        for (size_t size = 8; size <= (128u << 10); size *= 4) {
            auto [put_s, get_s] = put_get_all(size, 0);
            if (me == 0) {
                std::printf("%9s | %15.1f | %13.1f\n", human(size).c_str(),
                            put_s * 1e6, get_s * 1e6);
            }
        }
        const double barrier_s  = barrier_rounds(o.rounds);
        const double atomic_s   = atomics(o.rounds);
        auto [put_mbs, get_mbs] = large(o.large, partner);
        if (me == 0) {
            std::printf("barrier: %u rounds, %.1f us per put-to-all + "
                        "barrier round\n",
                        o.rounds, barrier_s * 1e6);
            std::printf("atomics: %u fetch-and-adds per PE, %.1f us each\n",
                        o.rounds, atomic_s * 1e6);
            std::printf("large: %s put %.2f MB/s, get %.2f MB/s (PE 0 <-> "
                        "PE %d)\n",
                        human(o.large).c_str(), put_mbs, get_mbs, partner);
        }
    }
    // every PE's mismatch count to PE 0, and PE 0's verdict back, so that
    // every PE exits alike
    long total = 0;
    {
        symmetric<long> bad_of(static_cast<size_t>(npes));
        const long mine = static_cast<long>(mismatches);
        shmem_putmem(bad_of.data() + me, &mine, sizeof(mine), 0);
        shmem_barrier_all();
        if (me == 0) {
            for (int pe = 0; pe < npes; ++pe) {
                total += bad_of.data()[pe];
            }
            bad_of.data()[0] = total;
        }
        shmem_barrier_all();
        if (me != 0) {
            shmem_getmem(&total, bad_of.data(), sizeof(total), 0);
        }
        shmem_barrier_all(); // before bad_of is freed
    }
    if (me == 0) {
        if (all_on_one_host) {
            std::printf("FAIL: rvt_shmem_check: all PEs on one host\n");
        } else if (total) {
            std::printf("FAIL: rvt_shmem_check: %ld mismatches (lines above "
                        "name PE, test, size and index)\n",
                        total);
        } else {
            std::printf("OK: rvt_shmem_check: %d PEs, puts to all, gets, "
                        "barriers, atomics and %s each way verified\n",
                        npes, human(o.large).c_str());
        }
    }
    const int rc = all_on_one_host || total ? 1 : 0;
    shmem_finalize();
    return rc;
}
