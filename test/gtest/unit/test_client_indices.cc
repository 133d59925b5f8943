/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The client indices' rules (agent/attach/client_indices.h), one test
 * each.
 */
#include "uct/ib/rvt/agent/attach/client_indices.h"

#include <gtest/gtest.h>

namespace rvt::agent {
namespace {

using namespace std::chrono_literals;

const client_indices::time_point t0 = client_indices::time_point{} + 100s;

/* pick(now): the lowest index never given */
TEST(client_indices, pick_names_the_lowest_index_never_given)
{
    client_indices ix(4, 1000ms);
    auto p = ix.pick(t0);
    ASSERT_TRUE(p.index);
    EXPECT_EQ(*p.index, 0u);
    EXPECT_EQ(p.quarantined, 0u);
    ix.give(0);
    ix.give(1);
    p = ix.pick(t0);
    ASSERT_TRUE(p.index);
    EXPECT_EQ(*p.index, 2u);
}

/* give(i): held, its generation one more, returned */
TEST(client_indices, give_holds_the_index_and_counts_its_generation)
{
    client_indices ix(4, 0ms);
    EXPECT_EQ(ix.generation(3), 0u);
    EXPECT_EQ(ix.next_generation(3), 1u);
    EXPECT_FALSE(ix.held(3));
    EXPECT_EQ(ix.give(3), 1u);
    EXPECT_TRUE(ix.held(3));
    EXPECT_EQ(ix.generation(3), 1u);
    ix.free(3, t0);
    EXPECT_EQ(ix.give(3), 2u);
    EXPECT_EQ(ix.generation(3), 2u);
    EXPECT_EQ(ix.generation(2), 0u); /* the others untouched */
}

/* free(i, t): not held; the generation stays until the next give */
TEST(client_indices, free_keeps_the_generation_until_the_next_give)
{
    client_indices ix(2, 0ms);
    ix.give(1);
    ix.give(1 - 1);
    ix.free(1, t0);
    EXPECT_FALSE(ix.held(1));
    EXPECT_EQ(ix.generation(1), 1u);
    EXPECT_TRUE(ix.held(0));
    /* freeing an index not held changes nothing (not its free time) */
    ix.free(1, t0 + 5s);
    client_indices ref(2, 1000ms);
    ref.give(1);
    ref.free(1, t0);
    ref.free(1, t0 + 5s);
    EXPECT_TRUE(ref.pick(t0 + 1s).index); /* 1000 ms after t0, not t0+5s */
}

/* pick(now): a held index is never named; a freed one only after the
 * quarantine, and the ones still in it are counted */
TEST(client_indices, pick_skips_held_indices_and_waits_out_the_quarantine)
{
    client_indices ix(3, 1000ms);
    ix.give(0);
    ix.give(1);
    ix.give(2);
    EXPECT_FALSE(ix.pick(t0).index); /* all held */
    EXPECT_EQ(ix.pick(t0).quarantined, 0u);
    ix.free(1, t0);
    ix.free(2, t0 + 200ms);
    auto p = ix.pick(t0 + 999ms);
    EXPECT_FALSE(p.index);
    EXPECT_EQ(p.quarantined, 2u);
    p = ix.pick(t0 + 1000ms);
    ASSERT_TRUE(p.index);
    EXPECT_EQ(*p.index, 1u);
    EXPECT_EQ(p.quarantined, 0u); /* it stops at the first it can give */
    ix.give(1);
    p = ix.pick(t0 + 1000ms);
    EXPECT_FALSE(p.index);
    EXPECT_EQ(p.quarantined, 1u);
    EXPECT_EQ(*ix.pick(t0 + 1200ms).index, 2u);
}

/* a quarantine of 0: a freed index is given again at once */
TEST(client_indices, with_no_quarantine_a_freed_index_is_picked_at_once)
{
    client_indices ix(2, 0ms);
    ix.give(0);
    ix.free(0, t0);
    EXPECT_EQ(*ix.pick(t0).index, 0u);
}

} // namespace
} // namespace rvt::agent
