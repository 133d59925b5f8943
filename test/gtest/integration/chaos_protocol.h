/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the chaos clients (rvt_chaos_client.cc) write into each other and
 * send each other: the card each publishes, the header of every write, the
 * active messages, and the bytes that fill writes and messages, computed
 * from all that names them so that every arrival is checked on its own.
 * chaos_runner.h says how they are used.
 */
#ifndef RVT_TEST_CHAOS_PROTOCOL_H
#define RVT_TEST_CHAOS_PROTOCOL_H

#include "traffic_common.h"

#include <cstddef>
#include <cstdint>

namespace rvt::test::chaos {

/* What each chaos client publishes, as DIR/card.ID.INC. */
struct card : traffic::card {
    uint32_t id;
    uint32_t incarnation;
    uint32_t pid;
};

/* The first bytes of every write: who wrote it, to whom, which round. */
struct slot_header {
    uint32_t magic;
    uint32_t src;
    uint32_t dst;
    uint32_t src_inc;
    uint32_t dst_inc;
    uint32_t reserved;
    uint64_t round;
};
static_assert(sizeof(slot_header) == 32);
constexpr uint32_t slot_magic  = 0x53534843; /* "CHSS" */
constexpr uint32_t length_step = 64;

enum class kind : uint32_t {
    write = 0,
    data  = 1,
    ping  = 2,
    ack   = 3,
    fin   = 4
};
inline const char *name_of(kind k)
{
    switch (k) {
    case kind::write:
        return "write";
    case kind::data:
        return "data AM";
    case kind::ping:
        return "ping";
    case kind::ack:
        return "ack";
    case kind::fin:
        return "fin";
    }
    return "?";
}

/* An AM, sent inline (it fits the work-data slot). */
struct message {
    uint32_t magic;
    uint32_t type; /* kind, not write */
    uint32_t src;
    uint32_t dst;
    uint32_t src_inc;
    uint32_t dst_inc;
    uint64_t round; /* data, ping, ack */
    /* fin: the sender's ops to this incarnation of the destination */
    uint64_t posted_writes;
    uint64_t ok_writes;
    uint64_t posted_ams;
    uint64_t ok_ams;
    uint8_t fill[24];
};
static_assert(sizeof(message) == 88);
constexpr uint32_t message_magic = 0x4d414843; /* "CHAM" */
constexpr uint8_t message_am_id  = 10;

inline uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The seed of a write's body or an AM's fill: everything that names it. */
inline uint64_t seed_of(uint32_t src, uint32_t dst, uint32_t src_inc,
                        uint32_t dst_inc, uint64_t round, kind what)
{
    return mix(mix(mix((uint64_t{src} << 32) | dst) ^
                   ((uint64_t{src_inc} << 32) | dst_inc)) ^
               round ^ (static_cast<uint64_t>(what) << 56));
}

inline uint8_t byte_of(uint64_t seed, size_t k)
{
    return static_cast<uint8_t>((seed >> ((k & 7) * 8)) + k * 13 + (k >> 8));
}

inline void fill_message(message &m)
{
    const uint64_t seed = seed_of(m.src, m.dst, m.src_inc, m.dst_inc, m.round,
                                  static_cast<kind>(m.type));
    for (size_t k = 0; k < sizeof(m.fill); ++k) {
        m.fill[k] = byte_of(seed, k);
    }
}

} // namespace rvt::test::chaos

#endif
