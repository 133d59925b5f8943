/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's client indices: which are held, and each one's generation
 * (how many times it has been given, imm.h: the immediates carry its low
 * bits). The one record of them: the attach server gives and frees
 * indices ("Indices and generations" in attach_server.h), and the engine
 * reads an index's generation here (client_table::generation) to tell an
 * op of the client that holds the index from one of an earlier holder.
 *
 * A state machine, as client_table is: no clock (`now` comes in), no
 * socket.
 *
 * What holds:
 *   - held(i) from give(i) until free(i);
 *   - generation(i) is the number of give(i) calls: 0 for an index never
 *     given, and it stays after free(i), until the next give(i);
 *   - pick() never names a held index, nor one freed less than
 *     `quarantine` ago.
 *
 * Events -> what happens (i: an index):
 *   pick(now)   the lowest index that is not held and was never given or
 *               freed at least `quarantine` before now; none when there is
 *               none, with how many free ones are still in quarantine
 *   give(i)     i held, its generation next_generation(i) (returned)
 *   free(i, t)  i not held, freed at t; not held -> nothing
 */
#ifndef RVT_AGENT_CLIENT_INDICES_H
#define RVT_AGENT_CLIENT_INDICES_H

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace rvt::agent {

class client_indices {
public:
    using time_point = std::chrono::steady_clock::time_point;

    client_indices(uint32_t count, std::chrono::milliseconds quarantine);

    struct pick_result {
        std::optional<uint32_t> index;
        uint32_t quarantined = 0; /* free, still in quarantine */
    };
    pick_result pick(time_point now) const;
    uint32_t give(uint32_t index);
    void free(uint32_t index, time_point now);

    bool held(uint32_t index) const
    {
        return m_slots[index].held;
    }
    uint32_t generation(uint32_t index) const
    {
        return m_slots[index].generation;
    }
    /* what give(index) will make its generation (the attach reply says
     * it before the give) */
    uint32_t next_generation(uint32_t index) const
    {
        return m_slots[index].generation + 1;
    }
    uint32_t count() const
    {
        return static_cast<uint32_t>(m_slots.size());
    }

private:
    struct slot {
        bool held           = false;
        uint32_t generation = 0; /* times given */
        time_point freed_at{};
    };
    std::chrono::milliseconds m_quarantine;
    std::vector<slot> m_slots;
};

} // namespace rvt::agent

#endif
