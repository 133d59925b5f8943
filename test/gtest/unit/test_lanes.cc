/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The lanes' rules (agent/engine/lanes.h), one test each, with no nic at all:
 * ops go in, chains and ends come out.
 */
#include "uct/ib/rvt/agent/engine/engine_tags.h"
#include "uct/ib/rvt/agent/engine/lanes.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace rvt::agent {
namespace {

class lanes_test : public ::testing::Test {
protected:
    static constexpr uint32_t peer = 1;

    /* an end as the engine sees it, read before the record is freed */
    struct ended {
        lanes::op_end end;
        lanes::op_record op;
        completion done;
    };

    lanes::limits lim{4, 8, 64, {0x1000, 0, 7}};
    std::unique_ptr<lanes> l;

    void SetUp() override
    {
        make();
    }

    void make()
    {
        l = std::make_unique<lanes>(lim);
        l->add_peer(0);
        l->add_peer(peer);
    }

    static work_request
    write(uint32_t dst, uint32_t length = 64, uint32_t flags = 0)
    {
        work_request wr{};
        wr.op         = static_cast<uint8_t>(work_op::rdma_write_imm);
        wr.peer       = peer;
        wr.dst_client = dst;
        wr.length     = length;
        wr.local_addr = 0x100000;
        wr.lkey       = 5;
        wr.flags      = flags;
        wr.wr_id      = 1000 + dst;
        return wr;
    }

    uint32_t
    queue(uint32_t client, const work_request &wr, uint32_t generation = 3)
    {
        const uint32_t i = l->alloc(wr, client, generation);
        l->queue(i);
        return i;
    }

    /* a striped write split at the front of its lane, its parts queued
     * at the front of the others, none posted */
    uint32_t queue_split(uint32_t client)
    {
        const uint32_t i = queue(client,
                                 write(9, 4 * stripe_align, work_stripe));
        lanes::chain c;
        EXPECT_FALSE(l->next_chain(peer, l->op(i).lane, 4, c));
        EXPECT_TRUE(c.held);
        EXPECT_EQ(l->op(i).stripe.pending, 3u);
        return i;
    }

    /* every marked or waiting lane's chains, posted whole */
    std::vector<lanes::chain> post_all(size_t active = 4)
    {
        std::vector<lanes::chain> out;
        uint32_t p  = 0;
        uint16_t ln = 0;
        while (l->next_lane(p, ln)) {
            lanes::chain c;
            while (l->next_chain(p, ln, active, c)) {
                l->posted(c, c.n);
                out.push_back(c);
                if (c.held) {
                    break;
                }
            }
        }
        return out;
    }

    static std::vector<uint32_t> ops_of(const std::vector<lanes::chain> &cs)
    {
        std::vector<uint32_t> ops;
        for (const auto &c : cs) {
            ops.insert(ops.end(), c.ops.begin(), c.ops.begin() + c.n);
        }
        return ops;
    }

    /* the completion of the chain's last (signaled) WR */
    lanes::retire_result
    complete(const lanes::chain &c,
             completion_status s = completion_status::success)
    {
        return l->retire(c.sends[c.n - 1].wr_id, s, 0, 0);
    }

    std::vector<ended> told()
    {
        std::vector<ended> out;
        for (const auto &e : take_ends()) {
            if (e.end.told) {
                out.push_back(e);
            }
        }
        return out;
    }

    std::vector<ended> take_ends()
    {
        std::vector<ended> out;
        for (const auto &e : l->ends()) {
            out.push_back({e, l->op(e.op), l->completion_of(e)});
        }
        l->clear_ends();
        return out;
    }

    void books()
    {
        EXPECT_EQ(l->check_books(), "");
    }
};

TEST_F(lanes_test, an_endpoint_always_takes_the_same_lane)
{
    const uint32_t a = queue(2, write(9));
    const uint32_t b = queue(2, write(9));
    EXPECT_EQ(l->op(a).lane, l->op(b).lane);
    std::set<uint16_t> used;
    for (uint32_t dst = 0; dst < 64; ++dst) {
        used.insert(l->op(queue(2, write(dst))).lane);
    }
    EXPECT_EQ(used.size(), 4u) << "endpoints spread over the K lanes";
}

TEST_F(lanes_test, queued_ops_post_in_order_as_one_chain)
{
    std::vector<uint32_t> in;
    for (int i = 0; i < 5; ++i) {
        in.push_back(queue(2, write(9)));
    }
    auto cs = post_all();
    ASSERT_EQ(cs.size(), 1u);
    EXPECT_EQ(ops_of(cs), in);
    EXPECT_EQ(l->posted(peer), 5u);
    books();
}

TEST_F(lanes_test, nothing_posts_on_a_lane_not_connected)
{
    queue(2, write(9));
    EXPECT_TRUE(post_all(0).empty());
    EXPECT_EQ(l->queued(peer), 1u) << "it waits in the backlog";
    l->mark_all(peer);
    EXPECT_EQ(post_all(4).size(), 1u);
}

TEST_F(lanes_test, a_lane_posts_at_most_sq_depth)
{
    for (int i = 0; i < 12; ++i) {
        queue(2, write(9));
    }
    auto cs = post_all();
    EXPECT_EQ(ops_of(cs).size(), lim.sq_depth);
    EXPECT_EQ(l->queued(peer), 12u - lim.sq_depth);
    /* a completion gives the credit back and the lane goes on */
    complete(cs.back());
    EXPECT_EQ(ops_of(post_all()).size(), 4u);
    books();
}

TEST_F(lanes_test, a_shallow_peers_lanes_post_at_most_its_depth)
{
    l->set_sq_depth(peer, 3);
    EXPECT_EQ(l->sq_depth(peer), 3u);
    for (int i = 0; i < 12; ++i) {
        queue(2, write(9));
    }
    auto cs = post_all();
    EXPECT_EQ(ops_of(cs).size(), 3u);
    EXPECT_EQ(l->queued(peer), 9u);
    complete(cs.back());
    EXPECT_EQ(ops_of(post_all()).size(), 3u);
    /* never deeper than the limits */
    l->set_sq_depth(peer, 1000);
    EXPECT_EQ(l->sq_depth(peer), lim.sq_depth);
    books();
}

TEST_F(lanes_test, lanes_out_of_cq_credit_wait_in_line_and_go_first)
{
    lim.cq_budget = 3;
    lim.sq_depth  = 64;
    make();
    /* two endpoints on two different lanes */
    uint32_t d2 = 0;
    while (l->op(queue(3, write(d2))).lane == l->op(queue(2, write(9))).lane) {
        ++d2;
    }
    take_ends();
    make();
    for (int i = 0; i < 3; ++i) {
        queue(2, write(9));
    }
    auto first = post_all();
    ASSERT_EQ(ops_of(first).size(), 3u);
    const uint32_t waiting = queue(3, write(d2)); /* finds no credit */
    EXPECT_TRUE(post_all().empty());
    queue(2, write(9)); /* behind the waiting lane */
    complete(first.back()); /* 3 credits back */
    auto next = post_all();
    ASSERT_FALSE(next.empty());
    EXPECT_EQ(next.front().ops[0], waiting)
            << "the lane that waited goes first";
    books();
}

TEST_F(lanes_test, signalled_last_every_interval_and_atomics)
{
    lim.sq_depth = 64;
    make();
    for (int i = 0; i < 20; ++i) {
        queue(2, write(9));
    }
    work_request fadd = write(9);
    fadd.op           = static_cast<uint8_t>(work_op::atomic_fetch_add);
    fadd.length       = 8;
    queue(2, fadd);
    queue(2, write(9));
    auto cs = post_all();
    std::vector<size_t> signaled;
    size_t k = 0;
    for (const auto &c : cs) {
        for (size_t i = 0; i < c.n; ++i, ++k) {
            if (c.sends[i].signaled) {
                signaled.push_back(k);
            }
        }
    }
    /* the 16th WR, the atomic (21st), and the last */
    EXPECT_EQ(signaled, (std::vector<size_t>{15, 20, 21}));
}

TEST_F(lanes_test, unsignaled_wrs_retire_with_the_next_signaled_one)
{
    for (int i = 0; i < 3; ++i) {
        queue(2, write(9));
    }
    auto cs = post_all();
    ASSERT_EQ(cs.size(), 1u);
    EXPECT_FALSE(cs[0].sends[0].signaled);
    complete(cs[0]);
    auto ends = told();
    ASSERT_EQ(ends.size(), 3u);
    for (const auto &e : ends) {
        EXPECT_EQ(e.done.status, uint32_t(completion_status::success));
        EXPECT_TRUE(e.end.retired);
    }
    EXPECT_EQ(l->posted(peer), 0u);
    EXPECT_TRUE(l->idle());
}

TEST_F(lanes_test, wrs_the_qp_refused_go_back_to_the_front_in_order)
{
    std::vector<uint32_t> in;
    for (int i = 0; i < 4; ++i) {
        in.push_back(queue(2, write(9)));
    }
    uint32_t p  = 0;
    uint16_t ln = 0;
    ASSERT_TRUE(l->next_lane(p, ln));
    lanes::chain c;
    ASSERT_TRUE(l->next_chain(p, ln, 4, c));
    l->posted(c, 1); /* the device took one */
    EXPECT_EQ(l->posted(peer), 1u);
    EXPECT_EQ(l->queued(peer), 3u);
    l->mark_all(peer);
    auto again = post_all();
    EXPECT_EQ(ops_of(again), (std::vector<uint32_t>(in.begin() + 1, in.end())));
    books();
}

TEST_F(lanes_test, a_completion_for_a_reused_record_is_late)
{
    const uint32_t i         = queue(2, write(9));
    auto cs                  = post_all();
    const uint64_t old_wr_id = cs[0].sends[0].wr_id;
    complete(cs[0]);
    take_ends();
    EXPECT_EQ(l->retire(old_wr_id, completion_status::success, 0, 0).verdict,
              lanes::retire_verdict::late);
    EXPECT_EQ(queue(2, write(9)), i) << "the record is reused";
    EXPECT_EQ(l->retire(old_wr_id, completion_status::success, 0, 0).verdict,
              lanes::retire_verdict::late)
            << "the old use is not the new op's";
    EXPECT_EQ(l->retire(tag::of_op(i, tag::use_of(old_wr_id) + 1),
                        completion_status::success, 0, 0)
                      .verdict,
              lanes::retire_verdict::stray)
            << "queued, not posted";
}

TEST_F(lanes_test, a_record_is_reused_only_once_its_end_was_read)
{
    const uint32_t i = queue(2, write(9));
    l->fail_backlog(peer, completion_status::peer_failed);
    ASSERT_EQ(l->ends().size(), 1u);
    EXPECT_NE(queue(2, write(8)), i) << "its end is still to be read";
    EXPECT_EQ(l->op(i).wr.dst_client, 9u);
    l->clear_ends();
    EXPECT_EQ(queue(2, write(7)), i);
}

TEST_F(lanes_test, a_failure_after_unsignaled_successes_says_some_succeeded)
{
    queue(2, write(9));
    queue(2, write(9));
    auto cs = post_all();
    ASSERT_EQ(cs.size(), 1u);
    const auto r = complete(cs[0], completion_status::failed);
    EXPECT_TRUE(r.succeeded) << "the first WR retired well: the peer answered";
    auto ends = told();
    ASSERT_EQ(ends.size(), 2u);
    EXPECT_EQ(ends[0].done.status, uint32_t(completion_status::success));
    EXPECT_EQ(ends[1].done.status, uint32_t(completion_status::failed));
    queue(2, write(9));
    auto alone = post_all();
    EXPECT_FALSE(complete(alone[0], completion_status::failed).succeeded);
    EXPECT_EQ(l->retire(tag::of_op(999, 0), completion_status::success, 0, 0)
                      .verdict,
              lanes::retire_verdict::unknown);
}

TEST_F(lanes_test, a_failed_completion_ends_its_op_failed_with_the_detail)
{
    queue(2, write(9));
    auto cs = post_all();
    l->retire(cs[0].sends[0].wr_id, completion_status::failed, 12, 0);
    auto ends = told();
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_EQ(ends[0].done.status, uint32_t(completion_status::failed));
    EXPECT_EQ(ends[0].done.detail, 12u);
    EXPECT_EQ(ends[0].done.length, 0u);
}

TEST_F(lanes_test, an_atomic_ends_with_the_value_it_fetched)
{
    work_request fadd = write(9);
    fadd.op           = static_cast<uint8_t>(work_op::atomic_fetch_add);
    fadd.length       = 8;
    queue(2, fadd);
    auto cs = post_all();
    l->retire(cs[0].sends[0].wr_id, completion_status::success, 0, 77);
    auto ends = told();
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_EQ(ends[0].done.value, 77u);
}

TEST_F(lanes_test, a_departed_clients_queued_ops_are_dropped_untold)
{
    const uint32_t posted = queue(2, write(9));
    auto cs               = post_all();
    ASSERT_EQ(cs.size(), 1u);
    queue(2, write(9));
    queue(2, write(8));
    l->drop_client(2, 3);
    auto ends = take_ends();
    ASSERT_EQ(ends.size(), 2u);
    for (const auto &e : ends) {
        EXPECT_FALSE(e.end.told);
        EXPECT_FALSE(e.end.retired);
        EXPECT_EQ(e.op.wr.lkey, 5u) << "what it held is released";
    }
    EXPECT_EQ(l->queued(peer), 0u);
    EXPECT_TRUE(post_all().empty());
    complete(cs[0]); /* the posted one completes as it would have */
    auto done = told();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].end.op, posted);
    EXPECT_TRUE(done[0].end.retired);
    EXPECT_TRUE(l->holds_nothing(peer));
    books();
}

TEST_F(lanes_test, a_departed_clients_parked_ops_are_dropped_untold)
{
    l->pause(peer, 9);
    queue(2, write(9));
    queue(2, write(9));
    l->drop_client(2, 3);
    auto ends = take_ends();
    ASSERT_EQ(ends.size(), 2u);
    for (const auto &e : ends) {
        EXPECT_FALSE(e.end.told);
    }
    EXPECT_EQ(l->parked(peer), 0u);
    EXPECT_TRUE(l->holds_nothing(peer));
    l->resume(peer, 9);
    EXPECT_TRUE(post_all().empty());
}

TEST_F(lanes_test, a_departed_clients_queued_part_fails_its_op)
{
    const uint32_t i = queue_split(2);
    l->drop_client(2, 3);
    auto ends = take_ends();
    ASSERT_EQ(ends.size(), 4u) << "three parts, then their op";
    for (size_t k = 0; k < 3; ++k) {
        EXPECT_EQ(ends[k].op.stripe.of, i);
        EXPECT_FALSE(ends[k].end.told) << "a part tells its op";
    }
    EXPECT_EQ(ends[3].end.op, i);
    EXPECT_TRUE(ends[3].end.told);
    EXPECT_EQ(ends[3].done.status, uint32_t(completion_status::peer_failed));
    EXPECT_TRUE(post_all().empty()) << "the held part is never posted";
    EXPECT_TRUE(l->holds_nothing(peer));
    books();
}

TEST_F(lanes_test, a_departed_clients_held_op_is_never_posted)
{
    const uint32_t i = queue(2, write(9, 4 * stripe_align, work_stripe));
    auto cs          = post_all();
    ASSERT_EQ(cs.size(), 3u) << "the parts are posted, the op held";
    l->drop_client(2, 3);
    EXPECT_TRUE(take_ends().empty()) << "its parts are still posted";
    EXPECT_EQ(l->queued(peer), 1u) << "held at the front of its lane";
    for (const auto &c : cs) {
        complete(c);
    }
    EXPECT_TRUE(post_all().empty()) << "the held part is never posted";
    auto ends = take_ends();
    ASSERT_EQ(ends.size(), 4u);
    EXPECT_EQ(ends[3].end.op, i);
    EXPECT_FALSE(ends[3].end.told) << "freed untold, as its client is gone";
    EXPECT_FALSE(ends[3].end.retired);
    EXPECT_TRUE(l->holds_nothing(peer));
    books();
}

TEST_F(lanes_test, a_departed_destination_fails_its_queued_and_parked_ops)
{
    queue(2, write(9));
    l->pause(peer, 9);
    queue(3, write(9));
    EXPECT_EQ(l->parked(peer), 1u);
    EXPECT_EQ(l->fail_destination(peer, 9, 0), 2u);
    auto ends = told();
    ASSERT_EQ(ends.size(), 2u);
    for (const auto &e : ends) {
        EXPECT_EQ(e.done.status, uint32_t(completion_status::peer_failed));
        EXPECT_EQ(e.done.wr_id, 1009u);
        EXPECT_FALSE(e.end.retired);
    }
    EXPECT_TRUE(l->holds_nothing(peer));
    EXPECT_TRUE(post_all().empty());
}

TEST_F(lanes_test, a_departed_destinations_queued_part_fails_its_op)
{
    const uint32_t i = queue_split(2);
    EXPECT_EQ(l->fail_destination(peer, 9, 0), 3u) << "the three parts";
    auto ends = told();
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_EQ(ends[0].end.op, i);
    EXPECT_EQ(ends[0].done.status, uint32_t(completion_status::peer_failed));
    EXPECT_TRUE(post_all().empty()) << "the held part is never posted";
    EXPECT_TRUE(l->holds_nothing(peer));
    books();
}

TEST_F(lanes_test, a_departed_destinations_held_op_fails_after_its_parts)
{
    const uint32_t i = queue(2, write(9, 4 * stripe_align, work_stripe));
    auto cs          = post_all();
    ASSERT_EQ(cs.size(), 3u);
    EXPECT_EQ(l->fail_destination(peer, 9, 0), 1u) << "the held op";
    EXPECT_TRUE(told().empty()) << "its parts are still posted";
    for (const auto &c : cs) {
        complete(c);
    }
    EXPECT_TRUE(post_all().empty()) << "the held part is never posted";
    auto ends = told();
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_EQ(ends[0].end.op, i);
    EXPECT_EQ(ends[0].done.status, uint32_t(completion_status::peer_failed));
    EXPECT_TRUE(l->holds_nothing(peer));
    books();
}

TEST_F(lanes_test, departures_leave_other_clients_and_destinations_alone)
{
    work_request newer   = write(9);
    newer.dst_generation = 1;
    work_request there   = write(9);
    there.peer           = 0;
    std::set<uint32_t> kept{
            queue(3, write(8)), /* another client */
            queue(2, write(8), 4), /* another generation of the client */
            queue(3, newer), /* another generation of the destination */
            queue(3, there), /* the same destination at another peer */
    };
    const uint32_t gone_client = queue(2, write(8));
    const uint32_t gone_dst    = queue(3, write(9));
    l->pause(peer, 9);
    kept.insert(queue(3, newer)); /* parked */
    const uint32_t gone_parked = queue(3, write(9));
    l->queue_control(peer, 0xabc); /* the agent's own: dst (0, 0) */
    l->drop_client(2, 3);
    auto ends = take_ends();
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_EQ(ends[0].end.op, gone_client);
    EXPECT_EQ(l->fail_destination(peer, 9, 0), 2u);
    ends = take_ends();
    ASSERT_EQ(ends.size(), 2u);
    EXPECT_EQ(std::set<uint32_t>({ends[0].end.op, ends[1].end.op}),
              std::set<uint32_t>({gone_dst, gone_parked}));
    EXPECT_EQ(l->fail_destination(peer, 0, 0), 0u) << "not the agent's own";
    EXPECT_EQ(l->parked(peer), 1u);
    l->resume(peer, 9);
    std::set<uint32_t> posted;
    size_t control = 0;
    for (uint32_t i : ops_of(post_all())) {
        if (l->op(i).client == lanes::no_client) {
            ++control;
        } else {
            posted.insert(i);
        }
    }
    EXPECT_EQ(posted, kept);
    EXPECT_EQ(control, 1u);
    books();
}

TEST_F(lanes_test, a_paused_destination_parks_in_order_and_resumes)
{
    l->pause(peer, 9);
    const uint32_t a = queue(2, write(9));
    const uint32_t b = queue(2, write(9));
    queue(2, write(8)); /* another destination goes on */
    EXPECT_EQ(ops_of(post_all()).size(), 1u);
    EXPECT_EQ(l->parked(peer), 2u);
    EXPECT_EQ(l->totals().ops_parked, 2u);
    l->resume(peer, 9);
    EXPECT_EQ(ops_of(post_all()), (std::vector<uint32_t>{a, b}));
}

TEST_F(lanes_test, a_new_connection_forgets_the_pauses)
{
    l->pause(peer, 9);
    queue(2, write(9));
    /* a new connection forgets the pauses: what was parked goes */
    l->forget_pauses(peer);
    EXPECT_EQ(l->parked(peer), 0u);
    EXPECT_EQ(ops_of(post_all()).size(), 1u);
}

TEST_F(lanes_test, a_failed_peer_ends_its_queued_and_parked_ops)
{
    l->pause(peer, 9);
    queue(2, write(9));
    queue(2, write(8));
    l->fail_backlog(peer, completion_status::peer_failed);
    auto ends = told();
    ASSERT_EQ(ends.size(), 2u);
    for (const auto &e : ends) {
        EXPECT_EQ(e.done.status, uint32_t(completion_status::peer_failed));
    }
    EXPECT_TRUE(l->holds_nothing(peer));
}

TEST_F(lanes_test, control_messages_go_on_lane_0_and_end_silently)
{
    l->queue_control(peer, 0xabc);
    auto cs = post_all();
    ASSERT_EQ(cs.size(), 1u);
    EXPECT_EQ(cs[0].lane, 0);
    EXPECT_EQ(cs[0].sends[0].imm, 0xabcu);
    EXPECT_EQ(cs[0].sends[0].sge[0].lkey, 7u) << "the control buffer";
    complete(cs[0]);
    EXPECT_TRUE(take_ends().empty());
    EXPECT_TRUE(l->idle());
}

TEST_F(lanes_test, a_keepalive_needs_credit_and_is_freed_if_refused)
{
    lanes::chain c;
    ASSERT_TRUE(l->keepalive(peer, 0x1, c));
    EXPECT_TRUE(c.sends[0].signaled);
    l->posted(c, 0); /* the QP refused it: not queued for later */
    EXPECT_TRUE(l->idle());
    lim.cq_budget = 0;
    make();
    EXPECT_FALSE(l->keepalive(peer, 0x1, c));
}

TEST_F(lanes_test, a_large_flagged_write_is_striped_over_the_lanes)
{
    const uint32_t len = 4 * stripe_align + 100;
    const uint32_t i   = queue(2, write(9, len, work_stripe));
    const uint16_t own = l->op(i).lane;
    auto cs            = post_all();
    /* three parts, each on another lane, the op held at the front */
    ASSERT_EQ(cs.size(), 3u);
    EXPECT_EQ(l->totals().striped_ops, 1u);
    EXPECT_EQ(l->totals().stripe_parts, 4u);
    uint64_t sum = 0;
    for (const auto &c : cs) {
        EXPECT_NE(c.lane, own);
        EXPECT_EQ(c.sends[0].opcode, nic_opcode::rdma_write);
        EXPECT_TRUE(c.sends[0].signaled);
        sum += c.sends[0].sge[0].length;
    }
    EXPECT_EQ(sum, 3u * stripe_align);
    books();
    complete(cs[0]);
    complete(cs[1]);
    EXPECT_TRUE(told().empty()) << "one part still out";
    EXPECT_TRUE(post_all().empty()) << "the op is held";
    complete(cs[2]);
    auto last = post_all();
    ASSERT_EQ(last.size(), 1u);
    EXPECT_EQ(last[0].lane, own);
    EXPECT_EQ(last[0].sends[0].opcode, nic_opcode::rdma_write_imm);
    EXPECT_EQ(last[0].sends[0].sge[0].length, stripe_align + 100);
    complete(last[0]);
    auto ends = told();
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_EQ(ends[0].done.length, len) << "one completion, the whole length";
    EXPECT_TRUE(l->idle());
    books();
}

TEST_F(lanes_test, parts_go_ahead_of_what_waits_on_the_other_lanes)
{
    const uint32_t i   = queue(2, write(9, 4 * stripe_align, work_stripe));
    const uint16_t own = l->op(i).lane;
    /* another endpoint's op waits on another lane */
    uint32_t dst = 0;
    uint32_t other;
    while (l->op(other = queue(3, write(dst))).lane == own) {
        ++dst;
    }
    const uint16_t there = l->op(other).lane;
    lanes::chain c;
    EXPECT_FALSE(l->next_chain(peer, own, 4, c)) << "split, and held";
    EXPECT_TRUE(c.held);
    ASSERT_TRUE(l->next_chain(peer, there, 4, c));
    EXPECT_EQ(l->op(c.ops[0]).stripe.of, i) << "the part first";
    EXPECT_EQ(c.ops[c.n - 1], other);
}

TEST_F(lanes_test, a_part_that_fails_fails_its_op_unposted)
{
    queue(2, write(9, 4 * stripe_align, work_stripe));
    auto cs = post_all();
    ASSERT_EQ(cs.size(), 3u);
    complete(cs[0]);
    complete(cs[1], completion_status::failed);
    complete(cs[2]);
    EXPECT_TRUE(post_all().empty()) << "the held part is never posted";
    auto ends = told();
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_EQ(ends[0].done.status, uint32_t(completion_status::failed));
    EXPECT_TRUE(l->holds_nothing(peer));
    books();
}

TEST_F(lanes_test, a_held_op_failed_with_its_peer_ends_after_its_parts)
{
    queue(2, write(9, 4 * stripe_align, work_stripe));
    auto cs = post_all();
    l->fail_backlog(peer, completion_status::peer_failed);
    EXPECT_TRUE(told().empty()) << "its parts are still posted";
    l->give_up(peer, cs[0].lane, 5);
    l->give_up(peer, cs[1].lane, 5);
    l->give_up(peer, cs[2].lane, 5);
    auto ends = told();
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_EQ(ends[0].done.status, uint32_t(completion_status::peer_failed));
    books();
}

TEST_F(lanes_test, fenced_short_or_partly_connected_writes_are_not_striped)
{
    queue(2, write(9, 4 * stripe_align, work_stripe | work_fence));
    queue(3, write(9, stripe_align, work_stripe));
    EXPECT_EQ(ops_of(post_all()).size(), 2u) << "each whole";
    queue(4, write(9, 4 * stripe_align, work_stripe));
    l->mark_all(peer);
    EXPECT_TRUE(post_all(3).size() <= 1u);
    EXPECT_EQ(l->totals().striped_ops, 0u);
    lim.num_lanes = 1;
    make();
    queue(2, write(9, 4 * stripe_align, work_stripe));
    EXPECT_EQ(post_all(1).size(), 1u);
    EXPECT_EQ(l->totals().striped_ops, 0u);
}

TEST_F(lanes_test, the_watchdog_names_a_lane_busy_and_silent_for_a_period)
{
    queue(2, write(9));
    auto cs = post_all();
    EXPECT_TRUE(l->watch(peer).empty()) << "first look: busy, not yet silent";
    EXPECT_EQ(l->watch(peer), (std::vector<uint16_t>{cs[0].lane}));
    l->flush_started(peer);
    EXPECT_TRUE(l->watch(peer).empty()) << "the flush starts a new period";
    EXPECT_EQ(l->give_up(peer, cs[0].lane, 5), 1u);
    auto ends = told();
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_EQ(ends[0].done.detail, 5u);
    EXPECT_TRUE(l->watch(peer).empty());
}

TEST_F(lanes_test, an_inline_op_posts_from_its_own_copy)
{
    work_request wr         = write(9, 16, work_inline);
    const uint32_t i        = l->alloc(wr, 2, 3);
    l->op(i).inline_data[0] = std::byte{0x5a};
    l->queue(i);
    auto cs = post_all();
    ASSERT_EQ(cs.size(), 1u);
    EXPECT_TRUE(cs[0].sends[0].inline_payload);
    EXPECT_EQ(cs[0].sends[0].sge[0].addr,
              reinterpret_cast<uintptr_t>(l->op(i).inline_data.data()));
}

} // namespace
} // namespace rvt::agent
