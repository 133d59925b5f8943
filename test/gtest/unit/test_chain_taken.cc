/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * agent::chain_taken: what a device took of a refused chain of work
 * requests. Counting a queued request as refused posts it twice.
 */
#include "uct/ib/rvt/agent/device/chain_taken.h"

#include <gtest/gtest.h>

#include <array>

using rvt::agent::chain_taken;

namespace {
struct wr {
    int id;
};
} // namespace

TEST(chain_taken, the_requests_before_the_one_named)
{
    std::array<wr, 4> chain{};
    EXPECT_EQ(chain_taken<wr>(chain.data(), 4, &chain[0]), 0u);
    EXPECT_EQ(chain_taken<wr>(chain.data(), 4, &chain[2]), 2u);
    EXPECT_EQ(chain_taken<wr>(chain.data(), 4, &chain[3]), 3u);
}

TEST(chain_taken, all_of_it_when_none_is_named)
{
    /* rxe: queued in user space, then the kernel's doorbell failed */
    std::array<wr, 4> chain{};
    EXPECT_EQ(chain_taken<wr>(chain.data(), 4, nullptr), 4u);
}

TEST(chain_taken, all_of_it_when_the_one_named_is_not_in_the_chain)
{
    std::array<wr, 4> chain{};
    wr elsewhere{};
    EXPECT_EQ(chain_taken<wr>(chain.data(), 4, &elsewhere), 4u);
    /* past the posted part of a longer array: not one of this post's */
    EXPECT_EQ(chain_taken<wr>(chain.data(), 2, &chain[3]), 2u);
}
