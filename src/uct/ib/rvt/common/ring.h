/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Single-producer, single-consumer rings in shared memory: the data path
 * between a client and its agent (work requests one way, completions and
 * inbound messages the other).
 *
 * Layout in the segment (common/shm_layout.h places them):
 *
 *   ring_indices   two cache lines: head (written only by the producer),
 *                  tail (written only by the consumer)
 *   Entry[capacity]  the slots, capacity a power of two
 *
 * Indices are free-running 32-bit counters (wrapping is fine: only their
 * difference is used); slot = index & (capacity - 1).
 *
 * Ordering: the producer fills a slot (and any data stored alongside it:
 * shm_layout.h's work-data and inbound slots of the same position), then
 * publishes it with a release store of head; the consumer loads head with
 * acquire, copies the slot (and that data) out, then frees it with a
 * release store of tail, after which the producer may reuse both. Each side caches the other's
 * index and re-reads it only when its cached view says full/empty, so the
 * fast path touches no line the other side writes.
 *
 * Trust: the agent shares rings with processes it does not trust. Neither
 * side ever reads the capacity or slot addresses from shared memory (each
 * keeps its own copy from attach time), the consumer copies an entry out
 * before it validates it, and an index pair that claims more than
 * `capacity` entries is reported as corrupt, never used to index memory.
 */
#ifndef RVT_COMMON_RING_H
#define RVT_COMMON_RING_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace rvt {

inline constexpr size_t cache_line = 64;

struct ring_indices {
    alignas(cache_line) std::atomic<uint32_t> head; /* producer only */
    alignas(cache_line) std::atomic<uint32_t> tail; /* consumer only */
};
static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "ring indices are shared between processes: must be lock-free");
static_assert(sizeof(ring_indices) == 2 * cache_line);
static_assert(offsetof(ring_indices, tail) == cache_line,
              "head and tail must not share a cache line");
static_assert(std::is_standard_layout_v<ring_indices>);

constexpr bool is_ring_capacity(size_t capacity)
{
    return capacity >= 2 && capacity <= (size_t{1} << 24) &&
           (capacity & (capacity - 1)) == 0;
}

/* Formats fresh indices; the agent does it once, before sharing. */
inline void ring_init(ring_indices &idx)
{
    idx.head.store(0, std::memory_order_relaxed);
    idx.tail.store(0, std::memory_order_relaxed);
}

enum class ring_pop {
    item, /* an entry was copied out */
    empty, /* nothing to take now */
    corrupt, /* the producer's index is impossible: stop trusting it */
};

template<class Entry> class ring_producer {
    static_assert(std::is_trivially_copyable_v<Entry>);

public:
    /* slots.size() must satisfy is_ring_capacity (checked by the caller
     * that computed the layout; an assertion here would be too late). */
    ring_producer(ring_indices &idx, std::span<Entry> slots) noexcept :
        m_idx(&idx),
        m_slots(slots),
        m_mask(static_cast<uint32_t>(slots.size() - 1)),
        m_head(idx.head.load(std::memory_order_relaxed)),
        m_tail_cache(idx.tail.load(std::memory_order_acquire))
    {
    }

    /* Ring position the next try_push() fills (to write data stored
     * alongside the entry first). */
    uint32_t position() const noexcept
    {
        return m_head & m_mask;
    }

    /* Returns false when the ring is full: the caller reports "busy". */
    bool try_push(const Entry &entry) noexcept
    {
        if (!stage(entry)) {
            return false;
        }
        publish();
        return true;
    }

    /* Fills the next slot without showing it to the consumer: a batch of
     * entries staged and then published once moves the head's cache line
     * between the cores once, not once per entry. False when full. */
    bool stage(const Entry &entry) noexcept
    {
        if (free_slots() == 0) {
            return false;
        }
        m_slots[m_head & m_mask] = entry;
        ++m_head;
        return true;
    }

    /* Shows every staged entry to the consumer. */
    void publish() noexcept
    {
        if (m_published != m_head) {
            m_published = m_head;
            m_idx->head.store(m_head, std::memory_order_release);
        }
    }

    /* Free slots; looks at the consumer's index only when the cached view
     * says the ring is full. */
    uint32_t free_slots() noexcept
    {
        if (m_head - m_tail_cache > m_mask) {
            m_tail_cache = m_idx->tail.load(std::memory_order_acquire);
        }
        uint32_t used = m_head - m_tail_cache;
        return used > m_mask + 1 ? 0 : m_mask + 1 - used;
    }

    size_t capacity() const noexcept
    {
        return m_slots.size();
    }

private:
    ring_indices *m_idx;
    std::span<Entry> m_slots;
    uint32_t m_mask;
    uint32_t m_head; /* ours: the truth, staged entries included */
    uint32_t m_published = m_head; /* the head the consumer can see */
    uint32_t m_tail_cache; /* theirs: a possibly stale view */
};

template<class Entry> class ring_consumer {
    static_assert(std::is_trivially_copyable_v<Entry>);

public:
    ring_consumer(ring_indices &idx, std::span<Entry> slots) noexcept :
        m_idx(&idx),
        m_slots(slots),
        m_mask(static_cast<uint32_t>(slots.size() - 1)),
        m_tail(idx.tail.load(std::memory_order_relaxed)),
        m_head_cache(m_tail)
    {
    }

    ring_pop try_pop(Entry &out) noexcept
    {
        ring_pop r = try_peek(out);
        if (r == ring_pop::item) {
            release();
        }
        return r;
    }

    /* Copies the oldest entry out but keeps its slot (and anything stored
     * alongside it, such as an inbound message's data slot) owned by the
     * consumer until release(). */
    ring_pop try_peek(Entry &out) noexcept
    {
        if (m_head_cache == m_tail) {
            m_head_cache = m_idx->head.load(std::memory_order_acquire);
            if (m_head_cache - m_tail > m_mask + 1) {
                m_head_cache = m_tail;
                return ring_pop::corrupt;
            }
            if (m_head_cache == m_tail) {
                return ring_pop::empty;
            }
        }
        out = m_slots[m_tail & m_mask];
        return ring_pop::item;
    }

    /* Frees the entry the last successful try_peek() returned. */
    void release() noexcept
    {
        ++m_tail;
        m_idx->tail.store(m_tail, std::memory_order_release);
    }

    /* Ring position of the entry try_peek() returns next. */
    uint32_t position() const noexcept
    {
        return m_tail & m_mask;
    }

    /* Whether the producer's head says there is an entry to take (or is
     * impossible: try_peek says which): a look for a sleep decision. It
     * compares with our own copy of the tail, never with the shared one,
     * which the producer can write too. */
    bool has_more() const noexcept
    {
        return m_idx->head.load(std::memory_order_acquire) != m_tail;
    }

    size_t capacity() const noexcept
    {
        return m_slots.size();
    }

private:
    ring_indices *m_idx;
    std::span<Entry> m_slots;
    uint32_t m_mask;
    uint32_t m_tail; /* ours: the truth, whatever the shared copy says */
    uint32_t m_head_cache; /* theirs */
};

} // namespace rvt

#endif
