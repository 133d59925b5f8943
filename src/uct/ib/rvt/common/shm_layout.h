/*
 * The shared-memory segment an agent gives each client at attach time (a
 * memfd, passed with SCM_RIGHTS):
 *
 *   offset 0          shm_header (one cache line; written by the agent
 *                     before it passes the fd, read-only afterwards)
 *   work_offset       ring_indices + work_request[work_capacity]
 *                     (client produces, agent consumes)
 *   completion_offset ring_indices + completion[completion_capacity]
 *                     (agent produces, client consumes)
 *
 * Both sides compute the layout with shm_layout::make() from the two
 * capacities; the client checks that the header agrees and that the
 * segment is as large as the layout says, and the agent never re-reads the
 * header (the client could have scribbled on it).
 */
#ifndef RVT_COMMON_SHM_LAYOUT_H
#define RVT_COMMON_SHM_LAYOUT_H

#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/common/ring.h"
#include "uct/ib/rvt/common/work.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace rvt {

inline constexpr uint32_t shm_magic   = 0x4d485352; /* "RSHM" */
inline constexpr uint32_t shm_version = 1;

struct shm_header {
    uint32_t magic;
    uint32_t version;
    uint32_t client_index;
    uint32_t work_capacity;
    uint32_t completion_capacity;
    uint32_t reserved0;
    uint64_t work_offset;
    uint64_t completion_offset;
    uint64_t size; /* the whole segment */
    uint8_t reserved1[16];
};
static_assert(sizeof(shm_header) == cache_line);
static_assert(std::is_trivially_copyable_v<shm_header> &&
              std::is_standard_layout_v<shm_header>);

struct shm_layout {
    uint32_t work_capacity;
    uint32_t completion_capacity;
    uint64_t work_offset;
    uint64_t completion_offset;
    uint64_t size;

    static constexpr uint64_t page = 4096;

    static constexpr uint64_t round_up(uint64_t v, uint64_t to)
    {
        return (v + to - 1) / to * to;
    }

    /* Capacities must be ring capacities (powers of two, see ring.h). */
    static result<shm_layout>
    make(uint32_t work_capacity, uint32_t completion_capacity)
    {
        if (!is_ring_capacity(work_capacity)) {
            return failure{"work ring capacity " +
                           std::to_string(work_capacity) +
                           ": expected a power of two from 2 to 2^24"};
        }
        if (!is_ring_capacity(completion_capacity)) {
            return failure{"completion ring capacity " +
                           std::to_string(completion_capacity) +
                           ": expected a power of two from 2 to 2^24"};
        }
        shm_layout l{work_capacity, completion_capacity, 0, 0, 0};
        l.work_offset       = cache_line;
        l.completion_offset = round_up(l.work_offset + sizeof(ring_indices) +
                                               uint64_t{work_capacity} *
                                                       sizeof(work_request),
                                       cache_line);
        l.size = round_up(l.completion_offset + sizeof(ring_indices) +
                                  uint64_t{completion_capacity} *
                                          sizeof(completion),
                          page);
        return l;
    }

    shm_header header(uint32_t client_index) const
    {
        shm_header h{};
        h.magic               = shm_magic;
        h.version             = shm_version;
        h.client_index        = client_index;
        h.work_capacity       = work_capacity;
        h.completion_capacity = completion_capacity;
        h.work_offset         = work_offset;
        h.completion_offset   = completion_offset;
        h.size                = size;
        return h;
    }
};

} // namespace rvt

#endif
