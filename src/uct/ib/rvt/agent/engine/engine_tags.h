/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How the engine's verbs wr_ids say what completed:
 *
 *   63      56 55          32 31                 0
 *   +---------+--------------+--------------------+
 *   |  kind   |     use      |       index        |
 *   +---------+--------------+--------------------+
 *
 * kind: a receive buffer or an op record; index: which one. For an op,
 * use counts the record's allocations (modulo 2^24): a completion that
 * comes after the engine gave its op up (watch_lanes, "Silent QPs" in
 * engine.h) and freed the record is told from a completion of the op
 * that has the record now, and dropped, instead of retiring that op and
 * every op posted before it on its lane.
 */
#ifndef RVT_AGENT_ENGINE_TAGS_H
#define RVT_AGENT_ENGINE_TAGS_H

#include <cstdint>

namespace rvt::agent::tag {

inline constexpr unsigned shift     = 56;
inline constexpr uint64_t receive   = uint64_t{1} << shift;
inline constexpr uint64_t op        = uint64_t{2} << shift;
inline constexpr uint64_t kind_mask = uint64_t{0xff} << shift;

inline constexpr unsigned use_shift = 32;
inline constexpr uint32_t use_mask  = (uint32_t{1} << (shift - use_shift)) - 1;
static_assert(use_shift + 24 == shift, "kind, use and index fill 64 bits");

constexpr uint64_t of_op(uint32_t index, uint32_t use)
{
    return op | uint64_t{use & use_mask} << use_shift | index;
}

constexpr uint32_t index_of(uint64_t wr_id)
{
    return static_cast<uint32_t>(wr_id);
}

constexpr uint32_t use_of(uint64_t wr_id)
{
    return static_cast<uint32_t>(wr_id >> use_shift) & use_mask;
}

static_assert(index_of(of_op(7, 5)) == 7 && use_of(of_op(7, 5)) == 5);
static_assert(use_of(of_op(0xffffffff, use_mask + 1)) == 0,
              "use wraps without touching kind or index");
static_assert((of_op(0xffffffff, 0xffffffff) & kind_mask) == op);

} // namespace rvt::agent::tag

#endif
