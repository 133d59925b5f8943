/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * agent::srq_ledger: a receive buffer is on the SRQ once at most, and a
 * completion for one that is not is told apart (counted, to be dropped).
 */
#include "uct/ib/rvt/agent/device/srq_ledger.h"

#include <gtest/gtest.h>

using rvt::agent::srq_ledger;

TEST(srq_ledger, a_buffer_completes_once_per_post)
{
    srq_ledger l(4);
    for (uint32_t i = 0; i < 4; ++i) {
        EXPECT_TRUE(l.reposted(i));
    }
    EXPECT_EQ(l.posted(), 4u);
    EXPECT_TRUE(l.completed(2));
    EXPECT_EQ(l.posted(), 3u);
    /* the device says so again (an error, then a flush of its QP) */
    EXPECT_FALSE(l.completed(2));
    EXPECT_EQ(l.extra_completions(), 1u);
    EXPECT_EQ(l.posted(), 3u);
    /* it goes back once */
    EXPECT_TRUE(l.reposted(2));
    EXPECT_FALSE(l.reposted(2)) << "on the SRQ twice";
    EXPECT_EQ(l.refused_reposts(), 1u);
    EXPECT_EQ(l.posted(), 4u);
}

TEST(srq_ledger, no_buffer_of_the_pool_is_refused_both_ways)
{
    srq_ledger l(2);
    EXPECT_FALSE(l.completed(2));
    EXPECT_FALSE(l.reposted(7));
    EXPECT_EQ(l.extra_completions(), 1u);
    EXPECT_EQ(l.refused_reposts(), 1u);
    EXPECT_EQ(l.posted(), 0u);
}

TEST(srq_ledger, a_repost_the_device_refused_leaves_the_buffer_off)
{
    srq_ledger l(2);
    EXPECT_TRUE(l.reposted(0));
    l.not_reposted(0);
    EXPECT_EQ(l.posted(), 0u);
    EXPECT_FALSE(l.completed(0)) << "it is not on the SRQ";
    EXPECT_TRUE(l.reposted(0));
}
