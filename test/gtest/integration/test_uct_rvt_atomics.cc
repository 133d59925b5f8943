/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device atomics over rvt (uct/ep_atomic.cc), through UCT's public API
 * with real agents on a real device (the testbed), over each route of
 * uct_rvt_route.h: the interface advertises 64-bit add, fetch-add and
 * compare-swap (and nothing else), each fetched value is the word as it
 * was, in host order, operations of an endpoint run in order, and
 * concurrent adds from several endpoints (of two processes' interfaces
 * where the route has two) each see a distinct word and sum correctly.
 */
#include "uct_rvt_route.h"

#include <gtest/gtest.h>
#include <uct/api/uct.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

using namespace rvt::test;

namespace {

class uct_rvt_atomics : public uct_rvt_each_route {
protected:
    static uint64_t word(const buffer &b, size_t offset)
    {
        uint64_t w;
        std::memcpy(&w, b.bytes() + offset, sizeof(w));
        return w;
    }
    static void set_word(buffer &b, size_t offset, uint64_t w)
    {
        std::memcpy(b.bytes() + offset, &w, sizeof(w));
    }

    /* A fetching atomic to completion: its status, *result filled. */
    ucs_status_t
    fetch(const std::function<ucs_status_t(uct_completion_t *)> &op)
    {
        call_counter c;
        ucs_status_t status = retry([&] { return op(&c.comp); });
        if (status == UCS_INPROGRESS) {
            EXPECT_TRUE(progress_until([&] { return c.calls > 0; }));
            EXPECT_EQ(c.calls, 1);
            status = c.status;
        }
        return status;
    }
};

constexpr size_t word_at = 64;

} // namespace

TEST_P(uct_rvt_atomics, the_interface_offers_64_bit_add_fetch_add_and_cswap)
{
    EXPECT_TRUE(m_attr.cap.flags & UCT_IFACE_FLAG_ATOMIC_DEVICE);
    EXPECT_EQ(m_attr.cap.atomic64.op_flags, UCS_BIT(UCT_ATOMIC_OP_ADD));
    EXPECT_EQ(m_attr.cap.atomic64.fop_flags,
              UCS_BIT(UCT_ATOMIC_OP_ADD) | UCS_BIT(UCT_ATOMIC_OP_CSWAP));
    EXPECT_EQ(m_attr.cap.atomic32.op_flags, 0u);
    EXPECT_EQ(m_attr.cap.atomic32.fop_flags, 0u);

    buffer target(m_to_md, 4096);
    ASSERT_NE(target.memh, nullptr);
    const uct_rkey_t rkey = rkey_of(target);
    const auto remote = reinterpret_cast<uint64_t>(target.bytes()) + word_at;
    uint64_t result   = 0;
    uint32_t result32 = 0;
    call_counter c;
    for (unsigned op : {UCT_ATOMIC_OP_AND, UCT_ATOMIC_OP_OR, UCT_ATOMIC_OP_XOR,
                        UCT_ATOMIC_OP_SWAP}) {
        EXPECT_EQ(uct_ep_atomic64_post(m_ep, static_cast<uct_atomic_op_t>(op),
                                       1, remote, rkey),
                  UCS_ERR_UNSUPPORTED)
                << "op " << op;
        EXPECT_EQ(uct_ep_atomic64_fetch(m_ep, static_cast<uct_atomic_op_t>(op),
                                        1, &result, remote, rkey, &c.comp),
                  UCS_ERR_UNSUPPORTED)
                << "op " << op;
    }
    EXPECT_EQ(uct_ep_atomic32_post(m_ep, UCT_ATOMIC_OP_ADD, 1, remote, rkey),
              UCS_ERR_UNSUPPORTED);
    EXPECT_EQ(uct_ep_atomic32_fetch(m_ep, UCT_ATOMIC_OP_ADD, 1, &result32,
                                    remote, rkey, &c.comp),
              UCS_ERR_UNSUPPORTED);
    EXPECT_EQ(uct_ep_atomic_cswap32(m_ep, 0, 1, remote, rkey, &result32,
                                    &c.comp),
              UCS_ERR_UNSUPPORTED);
    EXPECT_EQ(uct_ep_atomic64_post(m_ep, UCT_ATOMIC_OP_ADD, 1, remote + 4,
                                   rkey),
              UCS_ERR_INVALID_PARAM)
            << "a misaligned word";
    EXPECT_EQ(c.calls, 0);
    EXPECT_EQ(word(target, word_at), 0u);
}

TEST_P(uct_rvt_atomics, each_operation_fetches_the_word_as_it_was_in_order)
{
    buffer target(m_to_md, 4096);
    ASSERT_NE(target.memh, nullptr);
    const uct_rkey_t rkey = rkey_of(target);
    const auto remote = reinterpret_cast<uint64_t>(target.bytes()) + word_at;
    /* distinct bytes: a value the device wrote byte-swapped shows */
    const uint64_t first = 0x0102030405060708ull;
    set_word(target, word_at, first);

    /* an add without a fetch, then a fetch-add behind it on the endpoint */
    ASSERT_EQ(retry([&] {
                  return uct_ep_atomic64_post(m_ep, UCT_ATOMIC_OP_ADD, 0x10,
                                              remote, rkey);
              }),
              UCS_OK);
    uint64_t result = 0;
    ASSERT_EQ(fetch([&](uct_completion_t *comp) {
                  return uct_ep_atomic64_fetch(m_ep, UCT_ATOMIC_OP_ADD, 0x100,
                                               &result, remote, rkey, comp);
              }),
              UCS_OK);
    EXPECT_EQ(result, first + 0x10);
    ASSERT_EQ(fetch([&](uct_completion_t *comp) {
                  return uct_ep_atomic_cswap64(m_ep, first + 0x110, 42, remote,
                                               rkey, &result, comp);
              }),
              UCS_OK);
    EXPECT_EQ(result, first + 0x110) << "the compare matched";
    ASSERT_EQ(fetch([&](uct_completion_t *comp) {
                  return uct_ep_atomic_cswap64(m_ep, 7, 9, remote, rkey,
                                               &result, comp);
              }),
              UCS_OK);
    EXPECT_EQ(result, 42u) << "the compare failed: no swap";
    ASSERT_EQ(fetch([&](uct_completion_t *comp) {
                  return uct_ep_atomic64_fetch(m_ep, UCT_ATOMIC_OP_ADD,
                                               ~uint64_t{0}, &result, remote,
                                               rkey, comp);
              }),
              UCS_OK);
    EXPECT_EQ(result, 42u);
    EXPECT_EQ(flush_ep(m_ep), UCS_OK);
    EXPECT_EQ(word(target, word_at), 41u) << "adding 2^64 - 1 subtracts 1";
    EXPECT_EQ(word(target, word_at + 8), 0u) << "the next word is untouched";
    EXPECT_TRUE(m_errors.calls.empty());
}

TEST_P(uct_rvt_atomics, concurrent_adds_from_several_endpoints_sum_correctly)
{
    buffer target(m_to_md, 4096);
    ASSERT_NE(target.memh, nullptr);
    const uct_rkey_t rkey = rkey_of(target);
    const auto remote = reinterpret_cast<uint64_t>(target.bytes()) + word_at;
    set_word(target, word_at, 0);

    /* four endpoints of ours, and where the target is another process's
     * interface, two of its own to itself: its agent's loopback QPs act
     * on the word beside our agent's QPs */
    std::vector<uct_ep_h> eps{m_ep};
    for (int k = 0; k < 3; ++k) {
        eps.push_back(new_ep(m_to->iface));
        ASSERT_NE(eps.back(), nullptr);
    }
    if (m_to != &m_oi) {
        for (int k = 0; k < 2; ++k) {
            eps.push_back(new_ep(m_to->iface, m_to->iface));
            ASSERT_NE(eps.back(), nullptr);
        }
    }
    constexpr size_t per_ep = 64;
    std::vector<uint64_t> results(eps.size() * per_ep, ~uint64_t{0});
    std::vector<call_counter> comps(results.size());
    for (size_t n = 0; n < per_ep; ++n) {
        for (size_t e = 0; e < eps.size(); ++e) {
            const size_t k      = n * eps.size() + e;
            ucs_status_t status = retry([&] {
                return uct_ep_atomic64_fetch(eps[e], UCT_ATOMIC_OP_ADD, 1,
                                             &results[k], remote, rkey,
                                             &comps[k].comp);
            });
            ASSERT_TRUE(status == UCS_INPROGRESS || status == UCS_OK)
                    << ucs_status_string(status);
            if (status == UCS_OK) {
                comps[k].calls = 1; /* done at once: no callback */
            }
        }
    }
    ASSERT_TRUE(progress_until([&] {
        for (const auto &c : comps) {
            if (c.calls == 0) {
                return false;
            }
        }
        return true;
    })) << "not every add completed";
    std::set<uint64_t> seen;
    for (size_t k = 0; k < results.size(); ++k) {
        EXPECT_EQ(comps[k].calls, 1) << "add " << k;
        EXPECT_EQ(comps[k].status, UCS_OK) << "add " << k;
        seen.insert(results[k]);
    }
    EXPECT_EQ(word(target, word_at), results.size());
    EXPECT_EQ(seen.size(), results.size()) << "two adds fetched one word";
    EXPECT_EQ(*seen.rbegin(), results.size() - 1);
    std::printf("[ INFO     ] %zu fetch-adds from %zu endpoints\n",
                results.size(), eps.size());
}

INSTANTIATE_TEST_SUITE_P(route, uct_rvt_atomics,
                         ::testing::Values(route_kind::self,
                                           route_kind::other_agent,
                                           route_kind::other_node),
                         route_name);
