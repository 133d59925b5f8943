/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of each client's share of its agent (agent/engine/client_share.h),
 * one or more per row of its table: events in, verdicts out (a client is
 * its index, a process its pid, a peer record its index in the table).
 * And the
 * count the lkeys bound applies to (mr_registry.h, lkey_uses): what an op
 * would add, and the entries no op names, dropped.
 */
#include "uct/ib/rvt/agent/engine/client_share.h"
#include "uct/ib/rvt/agent/engine/mr_registry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using rvt::work_request;
using rvt::agent::client_share;
using rvt::agent::config_error;
using rvt::agent::lkey_uses;
using rvt::agent::resolve;
using rvt::agent::share_bound;
using rvt::agent::share_limits;
using rvt::agent::share_verdict;

namespace {

constexpr share_limits small{4, 3, 2}; /* ops, lkeys, peers */

class client_share_test : public ::testing::Test {
protected:
    client_share share{small, 8};

    void SetUp() override
    {
        share.attached(0);
        share.attached(1);
    }

    /* Fills client `index`'s ops to the bound. */
    void fill_ops(uint32_t index)
    {
        for (uint32_t i = 0; i < small.ops; ++i) {
            ASSERT_TRUE(share.take_op(index, 1).admitted()) << "op " << i;
        }
    }

    /* A peer's address (its UD QPN names it here). */
    static rvt::wire::agent_address at(uint32_t n)
    {
        rvt::wire::agent_address a{};
        a.gid[15]  = 1;
        a.ud_qpn   = n;
        a.ud_qkey  = 0x1234;
        a.agent_id = 0x5eed;
        return a;
    }
    /* two processes (SO_PEERCRED pids) */
    static constexpr pid_t me    = 100;
    static constexpr pid_t other = 200;

    static void expect_refused(const share_verdict &v, share_bound b,
                               uint64_t value, uint32_t limit)
    {
        EXPECT_FALSE(v.admitted());
        EXPECT_EQ(v.refused, b) << to_string(v.refused);
        EXPECT_EQ(v.value, value);
        EXPECT_EQ(v.limit, limit);
    }
};

TEST(client_share_limits, ops_zero_resolves_to_the_completion_rings_capacity)
{
    EXPECT_EQ(resolve({0, 1024, 512}, 128, 4096).ops, 128u);
    EXPECT_EQ(resolve({7, 1024, 512}, 128, 4096).ops, 7u)
            << "a value set stays";
    const share_limits d{};
    EXPECT_EQ(d.ops, 0u) << "the default is the ring's capacity";
    EXPECT_EQ(config_error(resolve(d, 1024, 4096)), "");
}

/* One process may have at most half of the agent's peer records made:
 * the rest stays for the job's other processes. */
TEST(client_share_limits, peers_zero_resolves_to_half_of_max_peers)
{
    const share_limits d{};
    EXPECT_EQ(d.peers, 0u) << "the default follows --max-peers";
    EXPECT_EQ(resolve(d, 128, rvt::agent::default_max_peers).peers, 2048u);
    EXPECT_LT(resolve(d, 128, rvt::agent::default_max_peers).peers,
              rvt::agent::default_max_peers);
    EXPECT_EQ(resolve(d, 128, 10).peers, 5u);
    EXPECT_EQ(resolve(d, 128, 1).peers, 1u) << "never 0";
    EXPECT_EQ(resolve({0, 8, 7}, 128, 10).peers, 7u) << "a value set stays";
}

TEST(client_share_limits, unusable_limits_are_refused_naming_the_value)
{
    EXPECT_NE(config_error({0, 8, 8}).find("max-client-ops 0: expected at "
                                           "least 1"),
              std::string::npos);
    EXPECT_NE(config_error({8, 1, 8}).find("max-client-lkeys 1: expected at "
                                           "least 2"),
              std::string::npos)
            << "an op names two lkeys: one would refuse every AM with a "
               "header of its own";
    EXPECT_NE(config_error({8, 8, 0}).find("max-client-peers 0: expected at "
                                           "least 1"),
              std::string::npos);
    EXPECT_EQ(config_error({1, 2, 1}), "");
}

TEST_F(client_share_test, ops_are_admitted_up_to_the_bound_then_refused)
{
    fill_ops(0);
    EXPECT_EQ(share.held(0), small.ops);
    expect_refused(share.take_op(0, 1), share_bound::ops, small.ops, small.ops);
    EXPECT_EQ(share.held(0), small.ops) << "a refused op is not held";
}

TEST_F(client_share_test, an_op_done_makes_room_for_one)
{
    fill_ops(0);
    share.op_done(0);
    EXPECT_EQ(share.held(0), small.ops - 1);
    EXPECT_TRUE(share.take_op(0, 1).admitted());
    EXPECT_FALSE(share.take_op(0, 1).admitted());
}

TEST_F(client_share_test, more_lkeys_than_the_bound_are_refused_at_it_admitted)
{
    EXPECT_TRUE(share.take_op(0, small.lkeys).admitted());
    expect_refused(share.take_op(0, small.lkeys + 1), share_bound::lkeys,
                   small.lkeys + 1, small.lkeys);
    EXPECT_EQ(share.held(0), 1u) << "an op refused for its lkeys is not held";
}

TEST_F(client_share_test, a_client_at_both_bounds_is_refused_for_its_ops)
{
    fill_ops(0);
    expect_refused(share.take_op(0, small.lkeys + 1), share_bound::ops,
                   small.ops, small.ops);
}

/* ---- peers: charged to the process, until the record is recycled ------- */

TEST_F(client_share_test, peers_are_made_up_to_the_bound_then_refused)
{
    for (uint32_t k = 1; k <= small.peers; ++k) {
        EXPECT_TRUE(share.make_peer(0, me, k, at(k)).admitted())
                << "peer " << k;
    }
    EXPECT_EQ(share.peers_charged(me), small.peers);
    const share_verdict v = share.make_peer(0, me, 9, at(9));
    expect_refused(v, share_bound::peers, small.peers, small.peers);
    EXPECT_EQ(v.pid, me);
    EXPECT_EQ(share.peers_charged(me), small.peers) << "a refused peer is made";
}

/* Every attachment of a process (a second leader, a sibling: their pid is
 * the leader's) draws on the process's one share. */
TEST_F(client_share_test, a_processs_attachments_draw_on_one_share)
{
    ASSERT_TRUE(share.make_peer(0, me, 1, at(1)).admitted());
    ASSERT_TRUE(share.make_peer(1, me, 2, at(2)).admitted());
    expect_refused(share.make_peer(1, me, 3, at(3)), share_bound::peers,
                   small.peers, small.peers);
    expect_refused(share.make_peer(0, me, 3, at(3)), share_bound::peers,
                   small.peers, small.peers);
    EXPECT_EQ(share.refused(0, share_bound::peers), 1u)
            << "a client's refusals are its own";
}

TEST_F(client_share_test, another_process_has_a_share_of_its_own)
{
    for (uint32_t k = 1; k <= small.peers; ++k) {
        ASSERT_TRUE(share.make_peer(0, me, k, at(k)).admitted());
    }
    ASSERT_FALSE(share.make_peer(0, me, 9, at(9)).admitted());
    EXPECT_TRUE(share.make_peer(1, other, 9, at(9)).admitted());
    EXPECT_EQ(share.peers_charged(other), 1u);
    EXPECT_EQ(share.peers_charged(me), small.peers);
}

/* attached(i) is a new holder of the index: its ops start at zero, its
 * process's peers do not (detaching and attaching again buys nothing). */
TEST_F(client_share_test, attaching_again_leaves_the_processs_peers_charged)
{
    for (uint32_t k = 1; k <= small.peers; ++k) {
        ASSERT_TRUE(share.make_peer(0, me, k, at(k)).admitted());
    }
    share.attached(0);
    share.attached(2);
    EXPECT_EQ(share.peers_charged(me), small.peers);
    expect_refused(share.make_peer(0, me, 9, at(9)), share_bound::peers,
                   small.peers, small.peers);
    expect_refused(share.make_peer(2, me, 9, at(9)), share_bound::peers,
                   small.peers, small.peers);
}

/* The table recycled a charged record for another address (a handshake
 * request): peer_is() says what the record holds now, and its charge goes;
 * a record still holding its address keeps it. */
TEST_F(client_share_test, a_charge_ends_when_its_record_holds_another_address)
{
    for (uint32_t k = 1; k <= small.peers; ++k) {
        ASSERT_TRUE(share.make_peer(0, me, k, at(k)).admitted());
    }
    share.peer_is(1, at(1));
    share.peer_is(7, at(7)); /* a record charged to nobody */
    EXPECT_EQ(share.peers_charged(me), small.peers);
    share.peer_is(1, at(100)); /* recycled */
    EXPECT_EQ(share.peers_charged(me), small.peers - 1);
    EXPECT_TRUE(share.make_peer(0, me, 9, at(9)).admitted());
    share.peer_is(1, at(1)); /* its old address, later: charged to nobody */
    EXPECT_EQ(share.peers_charged(me), small.peers);
}

/* A record the table recycles at another process's request: the new
 * process is charged, the old one released. */
TEST_F(client_share_test,
       a_record_recycled_for_another_process_moves_its_charge)
{
    for (uint32_t k = 1; k <= small.peers; ++k) {
        ASSERT_TRUE(share.make_peer(0, me, k, at(k)).admitted());
    }
    ASSERT_TRUE(share.make_peer(1, other, 2, at(50)).admitted());
    EXPECT_EQ(share.peers_charged(me), small.peers - 1);
    EXPECT_EQ(share.peers_charged(other), 1u);
    EXPECT_TRUE(share.make_peer(0, me, 9, at(9)).admitted());
}

/* A record of its own that the table recycles for its next request is
 * not one more. */
TEST_F(client_share_test, recycling_a_record_of_its_own_is_not_one_more)
{
    for (uint32_t k = 1; k <= small.peers; ++k) {
        ASSERT_TRUE(share.make_peer(0, me, k, at(k)).admitted());
    }
    EXPECT_TRUE(share.make_peer(0, me, 1, at(60)).admitted());
    EXPECT_EQ(share.peers_charged(me), small.peers);
    share.peer_is(1, at(60));
    EXPECT_EQ(share.peers_charged(me), small.peers) << "the new charge stands";
}

TEST_F(client_share_test, one_clients_share_is_its_own)
{
    fill_ops(0);
    for (uint32_t k = 1; k <= small.peers; ++k) {
        ASSERT_TRUE(share.make_peer(0, me, k, at(k)).admitted());
    }
    ASSERT_FALSE(share.take_op(0, 1).admitted());
    EXPECT_TRUE(share.take_op(1, 1).admitted());
    EXPECT_TRUE(share.make_peer(1, other, 9, at(9)).admitted());
    EXPECT_EQ(share.refused(1, share_bound::ops), 0u);
}

TEST_F(client_share_test, a_new_holder_of_an_index_starts_at_zero)
{
    fill_ops(0);
    ASSERT_FALSE(share.take_op(0, 1).admitted());
    share.attached(0);
    EXPECT_EQ(share.held(0), 0u);
    EXPECT_EQ(share.refused(0, share_bound::ops), 0u);
    EXPECT_EQ(share.refused(share_bound::ops), 1u)
            << "the agent's total is for its life";
    fill_ops(0);
}

/* A refusal is logged at the agent's 1st, 2nd, 4th, ... refusal of its
 * bound, whichever client it is: another client, or one that attaches
 * again, buys no line of its own. */
TEST_F(client_share_test, refusals_are_counted_and_logged_at_1_2_4_8)
{
    fill_ops(0);
    std::vector<uint64_t> logged;
    for (int i = 0; i < 20; ++i) {
        const share_verdict v = share.take_op(0, 1);
        ASSERT_FALSE(v.admitted());
        EXPECT_EQ(v.count, static_cast<uint64_t>(i + 1));
        if (v.log) {
            logged.push_back(v.count);
        }
    }
    EXPECT_EQ(logged, (std::vector<uint64_t>{1, 2, 4, 8, 16}));
    EXPECT_EQ(share.refused(0, share_bound::ops), 20u);
    for (uint32_t i = 0; i < small.ops; ++i) {
        ASSERT_TRUE(share.take_op(1, 1).admitted());
    }
    const share_verdict other_client = share.take_op(1, 1);
    EXPECT_FALSE(other_client.log) << "the agent's 21st";
    EXPECT_EQ(other_client.count, 21u);
    share.attached(0);
    fill_ops(0);
    EXPECT_FALSE(share.take_op(0, 1).log) << "attached again: the 22nd";
    EXPECT_EQ(share.refused(share_bound::ops), 22u);
    EXPECT_EQ(share.refused(share_bound::lkeys), 0u);
    /* each bound is a kind of its own */
    share.attached(1);
    EXPECT_TRUE(share.take_op(1, small.lkeys + 1).log) << "lkeys: the 1st";
}

TEST_F(client_share_test, a_refusal_names_the_value_and_the_bound)
{
    fill_ops(0);
    EXPECT_EQ(share.take_op(0, 1).text(),
              "4 ops held for this client (queued, waiting for a peer, "
              "parked or posted): expected fewer than max-client-ops (4)");
    share.attached(0);
    EXPECT_EQ(share.take_op(0, 9).text(),
              "9 distinct lkeys named by this client's ops with this one: "
              "expected at most max-client-lkeys (3)");
    ASSERT_TRUE(share.make_peer(0, 1234, 1, at(1)).admitted());
    ASSERT_TRUE(share.make_peer(0, 1234, 2, at(2)).admitted());
    EXPECT_EQ(share.make_peer(0, 1234, 3, at(3)).text(),
              "2 peers made for this process (pid 1234): expected fewer than "
              "max-client-peers (2) to make another");
}

/* ---- the count the lkeys bound applies to ------------------------------ */

work_request op_on(uint32_t lkey, uint32_t head_lkey = 0)
{
    work_request wr{};
    wr.length      = 8;
    wr.lkey        = lkey;
    wr.head_length = head_lkey != 0 ? 16 : 0;
    wr.head_lkey   = head_lkey;
    return wr;
}

TEST(lkey_uses_bound, an_op_adds_the_lkeys_not_tracked_yet)
{
    lkey_uses uses;
    EXPECT_EQ(uses.size_with(op_on(1)), 1u);
    EXPECT_EQ(uses.size_with(op_on(1, 2)), 2u);
    EXPECT_EQ(uses.size_with(op_on(1, 1)), 1u) << "one lkey named twice";
    uses.add(op_on(1));
    EXPECT_EQ(uses.size_with(op_on(1, 2)), 2u);
    work_request empty{};
    EXPECT_EQ(uses.size_with(empty), 1u) << "no bytes name no lkey";
}

TEST(lkey_uses_bound, entries_no_op_names_are_dropped_the_others_stay)
{
    lkey_uses uses;
    uses.add(op_on(1));
    uses.add(op_on(2));
    uses.add(op_on(3));
    uses.remove(op_on(1));
    uses.remove(op_on(2));
    EXPECT_EQ(uses.size_with(op_on(4)), 4u) << "kept at zero between ops";
    uses.drop_unused();
    EXPECT_EQ(uses.size_with(op_on(4)), 2u);
    EXPECT_TRUE(uses.in_use(3));
    EXPECT_FALSE(uses.in_use(1));
}

} // namespace
