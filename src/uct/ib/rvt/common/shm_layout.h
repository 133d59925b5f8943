/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared-memory segment an agent gives each client at attach time (a
 * memfd, passed with SCM_RIGHTS):
 *
 *   offset 0            shm_header (two cache lines; written by the agent
 *                       before it passes the fd, read-only afterwards)
 *   doorbell_offset     shm_doorbells: who is asleep (see below)
 *   work_offset         ring_indices + work_request[work_capacity]
 *                       (client produces, agent consumes)
 *   work_data_offset    work_capacity slots of work_inline_size bytes:
 *                       slot i holds the payload of the work request at
 *                       ring position i when it has work_inline (work.h)
 *   completion_offset   ring_indices + completion[completion_capacity]
 *                       (agent produces, client consumes)
 *   inbound_offset      ring_indices + inbound_message[inbound_capacity]
 *                       (agent produces, client consumes)
 *   inbound_data_offset inbound_capacity slots of inbound_slot_size bytes:
 *                       slot i holds the active message of ring position i
 *
 * Why a per-client inbound area and not the node's receive buffers mapped
 * into every client: the agent's SRQ buffers go back to the device as soon
 * as a message is routed (one copy of at most inbound_slot_size bytes), so
 * a client that stops polling can fill only its own area and never starves
 * the node's receive queue; and no client can read messages meant for
 * another.
 *
 * Why inline payloads in the segment: the agent has it mapped, so it can
 * copy a short payload into the WQE itself (an inline send) and the
 * device reads no payload by DMA; a client buffer is mapped only in the
 * client, so the device would have to. The client writes the slot before
 * it publishes the entry; the agent copies the slot out when it pops the
 * entry, before it frees the ring position (the client may then reuse
 * it), so an op that waits in the agent afterwards owns its own copy.
 *
 * Both sides compute the layout with shm_layout::make() from the
 * capacities; the client checks that the header agrees and that the
 * segment is as large as the layout says, and the agent never re-reads the
 * header (the client could have scribbled on it).
 *
 * Doorbells: each side spins for a while, then sleeps in poll(). Before
 * sleeping it sets its own `asleep` flag (seq_cst), looks at its rings once
 * more, and only then sleeps; the other side, after publishing an entry,
 * issues a seq_cst fence and writes the sleeper's eventfd if the flag is
 * set. Either the sleeper sees the entry or the producer sees the flag,
 * so no wake-up is lost, and a busy peer never pays for a syscall.
 */
#ifndef RVT_COMMON_SHM_LAYOUT_H
#define RVT_COMMON_SHM_LAYOUT_H

#include "uct/ib/rvt/common/defaults.h"
#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/common/ring.h"
#include "uct/ib/rvt/common/work.h"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <utility>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

namespace rvt {

inline constexpr uint32_t shm_magic   = 0x4d485352; /* "RSHM" */
inline constexpr uint32_t shm_version = 4; /* 4: the work-data area */

struct shm_header {
    uint32_t magic;
    uint32_t version;
    uint32_t client_index;
    uint32_t work_capacity;
    uint32_t completion_capacity;
    uint32_t inbound_capacity;
    uint32_t inbound_slot_size;
    uint32_t work_inline_size; /* bytes per work-data slot */
    uint64_t doorbell_offset;
    uint64_t work_offset;
    uint64_t work_data_offset;
    uint64_t completion_offset;
    uint64_t inbound_offset;
    uint64_t inbound_data_offset;
    uint64_t size; /* the whole segment */
    uint8_t reserved1[40]; /* zero */
};
static_assert(sizeof(shm_header) == 2 * cache_line);
static_assert(std::is_trivially_copyable_v<shm_header> &&
              std::is_standard_layout_v<shm_header>);

inline bool operator==(const shm_header &a, const shm_header &b)
{
    return std::memcmp(&a, &b, sizeof(a)) == 0;
}

struct shm_doorbells {
    alignas(cache_line) std::atomic<uint32_t> agent_asleep; /* agent only */
    alignas(cache_line) std::atomic<uint32_t> client_asleep; /* client only */
    /* client only, any time: non-zero asks for an inbound `write` entry
     * per RDMA WRITE WITH IMM into this client. Off by default: UCT
     * learns of a rendezvous write from the sender's own message, so a
     * notice would cost it a progress pass that only bumps a counter (the
     * agent counts the writes either way). */
    std::atomic<uint32_t> write_notices;
};
static_assert(sizeof(shm_doorbells) == 2 * cache_line);
static_assert(std::is_standard_layout_v<shm_doorbells>);

/* An active message must fit one inbound slot: 64 B up to 64 KiB. */
inline constexpr uint32_t min_inbound_slot = 64;
inline constexpr uint32_t max_inbound_slot = 65536;

/* An inline payload fits one work-data slot: 64 B up to 256 B (the agent
 * keeps a copy of that size in each op it holds, and devices carry a few
 * hundred bytes inline at most). */
inline constexpr uint32_t min_work_inline = 64;
inline constexpr uint32_t max_work_inline = 256;

static_assert(is_ring_capacity(defaults::work_ring));
static_assert(is_ring_capacity(defaults::completion_ring));
static_assert(is_ring_capacity(defaults::inbound_ring));
static_assert(defaults::am_size >= min_inbound_slot &&
              defaults::am_size <= max_inbound_slot &&
              defaults::am_size % 64 == 0);
static_assert(defaults::inline_size >= min_work_inline &&
              defaults::inline_size <= max_work_inline &&
              defaults::inline_size % 64 == 0);

struct shm_capacities {
    uint32_t work        = defaults::work_ring;
    uint32_t completion  = defaults::completion_ring;
    uint32_t inbound     = defaults::inbound_ring;
    uint32_t slot_size   = defaults::am_size; /* largest active message */
    uint32_t inline_size = defaults::inline_size; /* largest inline payload
                                                     (work_inline) */

    friend bool
    operator==(const shm_capacities &, const shm_capacities &) = default;
};

struct shm_layout {
    shm_capacities caps;
    uint64_t doorbell_offset;
    uint64_t work_offset;
    uint64_t work_data_offset;
    uint64_t completion_offset;
    uint64_t inbound_offset;
    uint64_t inbound_data_offset;
    uint64_t size;

    static constexpr uint64_t page = 4096;

    static constexpr uint64_t round_up(uint64_t v, uint64_t to)
    {
        return (v + to - 1) / to * to;
    }

    /* Ring capacities must be powers of two (ring.h); the slot sizes
     * multiples of 64, from min_inbound_slot to max_inbound_slot and from
     * min_work_inline to max_work_inline. */
    static result<shm_layout> make(const shm_capacities &caps)
    {
        const std::pair<const char *, uint32_t> rings[] = {{"work", caps.work},
                                                           {"completion",
                                                            caps.completion},
                                                           {"inbound",
                                                            caps.inbound}};
        for (const auto &[name, capacity] : rings) {
            if (!is_ring_capacity(capacity)) {
                return failure{std::string(name) + " ring capacity " +
                               std::to_string(capacity) +
                               ": expected a power of two from 2 to 2^24"};
            }
        }
        const std::tuple<const char *, uint32_t, uint32_t, uint32_t> slots[] = {
                {"inbound slot size", caps.slot_size, min_inbound_slot,
                 max_inbound_slot},
                {"work inline size", caps.inline_size, min_work_inline,
                 max_work_inline}};
        for (const auto &[name, size, low, high] : slots) {
            if (size < low || size > high || size % cache_line != 0) {
                return failure{std::string(name) + " " + std::to_string(size) +
                               ": expected a multiple of 64 from " +
                               std::to_string(low) + " to " +
                               std::to_string(high)};
            }
        }
        shm_layout l{caps, 0, 0, 0, 0, 0, 0, 0};
        l.doorbell_offset   = sizeof(shm_header);
        l.work_offset       = l.doorbell_offset + sizeof(shm_doorbells);
        l.work_data_offset  = ring_end(l.work_offset, caps.work,
                                       sizeof(work_request));
        l.completion_offset = l.work_data_offset +
                              uint64_t{caps.work} * caps.inline_size;
        l.inbound_offset      = ring_end(l.completion_offset, caps.completion,
                                         sizeof(completion));
        l.inbound_data_offset = round_up(ring_end(l.inbound_offset,
                                                  caps.inbound,
                                                  sizeof(inbound_message)),
                                         page);
        l.size                = round_up(l.inbound_data_offset +
                                                 uint64_t{caps.inbound} * caps.slot_size,
                                         page);
        return l;
    }

    /* Recomputes the layout a header describes and checks that it is
     * exactly that: the client's defence against a stale or foreign
     * segment. */
    static result<shm_layout> from_header(const shm_header &h)
    {
        if (h.magic != shm_magic || h.version != shm_version) {
            return failure{"shared segment magic/version " +
                           std::to_string(h.magic) + "/" +
                           std::to_string(h.version) + ": expected " +
                           std::to_string(shm_magic) + "/" +
                           std::to_string(shm_version)};
        }
        auto l = make({h.work_capacity, h.completion_capacity,
                       h.inbound_capacity, h.inbound_slot_size,
                       h.work_inline_size});
        if (!l) {
            return failure{"shared segment header: " + l.error()};
        }
        if (l.value().header(h.client_index) != h) {
            return failure{"shared segment header: offsets or size differ "
                           "from the layout its capacities give"};
        }
        return l;
    }

    shm_header header(uint32_t client_index) const
    {
        shm_header h{};
        h.magic               = shm_magic;
        h.version             = shm_version;
        h.client_index        = client_index;
        h.work_capacity       = caps.work;
        h.completion_capacity = caps.completion;
        h.inbound_capacity    = caps.inbound;
        h.inbound_slot_size   = caps.slot_size;
        h.work_inline_size    = caps.inline_size;
        h.doorbell_offset     = doorbell_offset;
        h.work_offset         = work_offset;
        h.work_data_offset    = work_data_offset;
        h.completion_offset   = completion_offset;
        h.inbound_offset      = inbound_offset;
        h.inbound_data_offset = inbound_data_offset;
        h.size                = size;
        return h;
    }

private:
    static constexpr uint64_t
    ring_end(uint64_t offset, uint32_t capacity, size_t entry_size)
    {
        return round_up(offset + sizeof(ring_indices) +
                                uint64_t{capacity} * entry_size,
                        cache_line);
    }
};


} // namespace rvt

#endif
