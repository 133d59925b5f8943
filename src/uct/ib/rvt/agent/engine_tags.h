/*
 * How the engine's verbs wr_ids say what completed: the top byte is the
 * kind, the rest an index (a receive buffer, or an op record).
 */
#ifndef RVT_AGENT_ENGINE_TAGS_H
#define RVT_AGENT_ENGINE_TAGS_H

#include <cstdint>

namespace rvt::agent::tag {

inline constexpr unsigned shift     = 56;
inline constexpr uint64_t receive   = uint64_t{1} << shift;
inline constexpr uint64_t op        = uint64_t{2} << shift;
inline constexpr uint64_t kind_mask = uint64_t{0xff} << shift;

constexpr uint32_t index_of(uint64_t wr_id)
{
    return static_cast<uint32_t>(wr_id & ~kind_mask);
}

} // namespace rvt::agent::tag

#endif
