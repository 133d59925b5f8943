/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the shared-memory SPSC ring (common/ring.h): FIFO order,
 * "busy" when full, index wrap-around, detection of a producer that
 * publishes impossible indices, and a two-thread run that checks every
 * entry arrives once and in order; and that the consumer's look for a
 * sleep decision trusts only its own index.
 */
#include "uct/ib/rvt/common/ring.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace {

struct entry {
    uint64_t seq;
    uint64_t check; /* ~seq: a torn copy would not match */
};

struct ring_fixture : ::testing::Test {
    static constexpr size_t capacity = 8;

    rvt::ring_indices idx;
    std::vector<entry> slots = std::vector<entry>(capacity);

    void SetUp() override
    {
        rvt::ring_init(idx);
    }

    void start_at(uint32_t index)
    {
        idx.head.store(index);
        idx.tail.store(index);
    }
};

} // namespace

TEST(ring_capacity, powers_of_two_in_range_only)
{
    EXPECT_FALSE(rvt::is_ring_capacity(0));
    EXPECT_FALSE(rvt::is_ring_capacity(1));
    EXPECT_TRUE(rvt::is_ring_capacity(2));
    EXPECT_FALSE(rvt::is_ring_capacity(3));
    EXPECT_TRUE(rvt::is_ring_capacity(1024));
    EXPECT_FALSE(rvt::is_ring_capacity(1000));
    EXPECT_TRUE(rvt::is_ring_capacity(size_t{1} << 24));
    EXPECT_FALSE(rvt::is_ring_capacity(size_t{1} << 25));
}

TEST_F(ring_fixture, fifo_and_busy_when_full)
{
    rvt::ring_producer<entry> prod(idx, slots);
    rvt::ring_consumer<entry> cons(idx, slots);
    entry e{};
    EXPECT_EQ(cons.try_pop(e), rvt::ring_pop::empty);
    EXPECT_EQ(prod.free_slots(), capacity);
    for (uint64_t i = 0; i < capacity; ++i) {
        ASSERT_TRUE(prod.try_push({i, ~i})) << i;
    }
    EXPECT_FALSE(prod.try_push({99, ~99ull})) << "a full ring must say busy";
    EXPECT_EQ(prod.free_slots(), 0u);
    for (uint64_t i = 0; i < capacity; ++i) {
        ASSERT_EQ(cons.try_pop(e), rvt::ring_pop::item);
        EXPECT_EQ(e.seq, i);
    }
    EXPECT_EQ(cons.try_pop(e), rvt::ring_pop::empty);
    EXPECT_TRUE(prod.try_push({100, ~100ull})) << "space again after pops";
}

TEST_F(ring_fixture, staged_entries_are_seen_only_once_published)
{
    rvt::ring_producer<entry> prod(idx, slots);
    rvt::ring_consumer<entry> cons(idx, slots);
    entry e{};
    ASSERT_TRUE(prod.stage({1, ~1ull}));
    ASSERT_TRUE(prod.stage({2, ~2ull}));
    EXPECT_EQ(cons.try_pop(e), rvt::ring_pop::empty) << "not yet published";
    EXPECT_EQ(idx.head.load(), 0u);
    prod.publish();
    EXPECT_EQ(idx.head.load(), 2u) << "one store shows the whole batch";
    ASSERT_EQ(cons.try_pop(e), rvt::ring_pop::item);
    EXPECT_EQ(e.seq, 1u);
    ASSERT_EQ(cons.try_pop(e), rvt::ring_pop::item);
    EXPECT_EQ(e.seq, 2u);
    /* staged entries count against the space like published ones */
    for (uint64_t i = 0; i < capacity; ++i) {
        ASSERT_TRUE(prod.stage({i, ~i})) << i;
    }
    EXPECT_FALSE(prod.stage({99, ~99ull})) << "a full ring must say busy";
}

TEST_F(ring_fixture, indices_wrap_around_2_to_the_32)
{
    start_at(UINT32_MAX - 3);
    rvt::ring_producer<entry> prod(idx, slots);
    rvt::ring_consumer<entry> cons(idx, slots);
    entry e{};
    for (uint64_t i = 0; i < 5 * capacity; ++i) {
        ASSERT_TRUE(prod.try_push({i, ~i}));
        ASSERT_EQ(cons.try_pop(e), rvt::ring_pop::item);
        EXPECT_EQ(e.seq, i);
    }
    EXPECT_LT(idx.head.load(), 100u) << "the head index did wrap";
}

TEST_F(ring_fixture, consumer_rejects_impossible_producer_index)
{
    rvt::ring_consumer<entry> cons(idx, slots);
    entry e{};
    idx.head.store(capacity + 1); /* claims more entries than slots */
    EXPECT_EQ(cons.try_pop(e), rvt::ring_pop::corrupt);
    idx.head.store(UINT32_MAX); /* behind the tail */
    EXPECT_EQ(cons.try_pop(e), rvt::ring_pop::corrupt);
    idx.head.store(capacity); /* exactly full is fine */
    EXPECT_EQ(cons.try_pop(e), rvt::ring_pop::item);
}

TEST_F(ring_fixture, producer_survives_impossible_consumer_index)
{
    rvt::ring_producer<entry> prod(idx, slots);
    idx.tail.store(12345); /* ahead of anything produced */
    size_t pushed = 0;
    while (pushed <= 4 * capacity && prod.try_push({pushed, ~pushed})) {
        ++pushed;
    }
    EXPECT_LE(pushed, capacity) << "never more than the slots it owns";
    EXPECT_EQ(prod.free_slots(), 0u);
}

/* The producer can write the shared tail too (it is in its memory): the
 * consumer's look for a sleep decision believes only its own. */
TEST_F(ring_fixture, consumer_has_more_by_its_own_tail)
{
    rvt::ring_producer<entry> prod(idx, slots);
    rvt::ring_consumer<entry> cons(idx, slots);
    EXPECT_FALSE(cons.has_more());
    idx.tail.store(idx.tail.load() + 3); /* the producer's scribble */
    EXPECT_FALSE(cons.has_more()) << "nothing was published";
    ASSERT_TRUE(prod.try_push({1, ~uint64_t{1}}));
    EXPECT_TRUE(cons.has_more());
    entry e{};
    ASSERT_EQ(cons.try_pop(e), rvt::ring_pop::item);
    EXPECT_EQ(e.seq, 1u);
    idx.tail.store(0);
    EXPECT_FALSE(cons.has_more());
}

TEST(ring_threads, every_entry_arrives_once_in_order)
{
    constexpr uint64_t count = 2'000'000;
    rvt::ring_indices idx;
    std::vector<entry> slots(64);
    rvt::ring_init(idx);

    std::thread producer([&] {
        rvt::ring_producer<entry> prod(idx, slots);
        for (uint64_t i = 0; i < count;) {
            /* alternately one entry at a time and batches of up to 7 */
            const uint64_t batch = (i / 64) % 2 == 0 ? 1 : 1 + i % 7;
            uint64_t n           = 0;
            while (n < batch && i < count && prod.stage({i, ~i})) {
                ++i;
                ++n;
            }
            prod.publish();
        }
    });
    rvt::ring_consumer<entry> cons(idx, slots);
    uint64_t expect = 0, bad = 0;
    entry e{};
    while (expect < count) {
        auto r = cons.try_pop(e);
        ASSERT_NE(r, rvt::ring_pop::corrupt);
        if (r == rvt::ring_pop::item) {
            bad += (e.seq != expect) || (e.check != ~expect);
            ++expect;
        }
    }
    producer.join();
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(cons.try_pop(e), rvt::ring_pop::empty);
}
