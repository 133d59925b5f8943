/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The work summary: one page, shared by an agent and all its clients (a
 * memfd passed at attach, next to the agent's wake eventfd), in which a
 * client that has published work sets its bit, so that the agent's loop
 * takes work from the clients that have some instead of looking at every
 * attached client's work ring on every pass. An idle client then costs
 * the agent nothing per pass, which is what lets one agent serve a node of
 * 512 ranks (docs/performance.md, "Scale: 512 ranks on one agent").
 *
 *   word w (w < max_clients / 64), at offset w * 64 (a cache line each):
 *       bit b set: client w * 64 + b has published work since the agent
 *       last took the word
 *
 * A client, after publishing a work request, issues a seq_cst fence (the
 * one its doorbell already needs: shm_layout.h, "Doorbells"), loads its
 * word and, only if its bit is clear, sets it. The agent exchanges each
 * non-zero word with zero, issues a seq_cst fence, and then reads the work
 * rings of the clients whose bits were set. Either the agent's exchange
 * comes after the client's bit is seen set, and the agent reads the ring
 * after the client published, or the client sees its bit cleared and sets
 * it again: no work is missed. A busy client whose bit is already set
 * pays one load, no store.
 *
 * The page is a hint, never trusted: every client can write all of it.
 * A client that sets other clients' bits costs the agent a look at their
 * rings (what every pass cost before the summary); one that clears them
 * delays their work until the agent's full scan, which looks at every
 * attached client's ring at least every engine_config::full_scan_period
 * whatever the page says. The segment's size is sealed (shm_mapping.cc),
 * so no client can shrink it under the agent's mapping.
 */
#ifndef RVT_COMMON_WORK_SUMMARY_H
#define RVT_COMMON_WORK_SUMMARY_H

#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/common/ring.h"

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace rvt {

struct work_summary_line {
    alignas(cache_line) std::atomic<uint64_t> bits;
};
static_assert(sizeof(work_summary_line) == cache_line);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

inline constexpr uint32_t work_summary_words = imm::max_clients / 64;
static_assert(imm::max_clients % 64 == 0);

/* The whole segment: a page, its first work_summary_words lines used. */
inline constexpr size_t work_summary_size = 4096;
static_assert(work_summary_words * sizeof(work_summary_line) <=
              work_summary_size);

/* The client's side: `index` has published work. Call after the seq_cst
 * fence that follows the publication. */
inline void note_work(work_summary_line *summary, uint32_t index)
{
    const uint64_t bit       = uint64_t{1} << (index % 64);
    std::atomic<uint64_t> &w = summary[index / 64].bits;
    if ((w.load(std::memory_order_relaxed) & bit) == 0) {
        w.fetch_or(bit, std::memory_order_relaxed);
    }
}

/* Whether `index`'s bit is set now (the agent's full scan asks). */
inline bool has_note(const work_summary_line *summary, uint32_t index)
{
    return (summary[index / 64].bits.load(std::memory_order_relaxed) &
            (uint64_t{1} << (index % 64))) != 0;
}

/* The agent's side: calls visit(index) for every bit set, clearing them.
 * The fence after a taken word orders the reads of the rings that
 * visit() makes after the exchange. */
template<class Visit>
void take_summary(work_summary_line *summary, Visit &&visit)
{
    for (uint32_t w = 0; w < work_summary_words; ++w) {
        if (summary[w].bits.load(std::memory_order_relaxed) == 0) {
            continue;
        }
        uint64_t bits = summary[w].bits.exchange(0, std::memory_order_seq_cst);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        while (bits != 0) {
            visit(w * 64 + static_cast<uint32_t>(std::countr_zero(bits)));
            bits &= bits - 1;
        }
    }
}

} // namespace rvt

#endif
