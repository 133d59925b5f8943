/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Striping (agent/engine/lanes.h, "Striping"): a write with immediate flagged
 * work_stripe is split over the peer's K lanes, completes once, and its
 * target hears of it only after every part has landed. Driven through
 * real sessions and the loopback nic (engine_fixture.h); the nic's hold
 * stands in for a slow lane, its fail_next and break_silently for a part
 * that fails. After every pass the engine's books must add up
 * (engine::check_books: each peer's posted ops are its lanes' posted
 * WRs, a split op counts its live parts).
 */
#include "test/gtest/unit/engine_fixture.h"

#include <algorithm>
#include <numeric>

namespace engine_test {
namespace {

/* Large enough for K parts of several pages each, and not a multiple of
 * a page: the last part takes the rest. */
constexpr uint32_t big = 5 * 65536 + 1234;

agent_options striped_agent(uint32_t num_qps = 4)
{
    agent_options o;
    o.engine.peers.num_qps = num_qps;
    /* the watchdog looks rarely unless a test wants it */
    o.engine.lane_watch_period = 300ms;
    return o;
}

/* A client's extra registered, announced memory: a source and a target
 * of `big` bytes. */
struct big_buffers {
    std::vector<uint8_t> src = std::vector<uint8_t>(big);
    std::vector<uint8_t> dst = std::vector<uint8_t>(big);
    loopback_mr src_mr{};
    loopback_mr dst_mr{};
};

class striping : public engine_fixture {
protected:
    /* Registers and announces `b`'s source with `from`'s agent and its
     * target with `to`'s, and fills the source with a pattern. */
    void prepare(big_buffers &b, test_client &from, test_client &to)
    {
        for (size_t i = 0; i < b.src.size(); ++i) {
            b.src[i] = static_cast<uint8_t>(i * 7 + i / 4096 + 1);
        }
        b.src_mr = from.home->nic->register_memory(b.src.data(), b.src.size(),
                                                   remote_rw);
        from.announce(b.src_mr, b.src.data(), b.src.size());
        b.dst_mr = to.home->nic->register_memory(b.dst.data(), b.dst.size(),
                                                 remote_rw);
        to.announce(b.dst_mr, b.dst.data(), b.dst.size());
        to.session->set_write_notices(true);
    }

    /* A write with immediate of `length` bytes of b's source to its
     * target, flagged for striping unless `flags` says otherwise. */
    static work_request big_write(const big_buffers &b, uint32_t peer,
                                  const test_client &to, uint64_t wr_id,
                                  uint32_t length = big,
                                  uint8_t flags   = work_signaled | work_stripe)
    {
        work_request wr{};
        wr.wr_id          = wr_id;
        wr.op             = static_cast<uint8_t>(work_op::rdma_write_imm);
        wr.flags          = flags;
        wr.peer           = peer;
        wr.dst_client     = to.index();
        wr.dst_generation = to.generation();
        wr.length         = length;
        wr.local_addr     = reinterpret_cast<uintptr_t>(b.src.data());
        wr.lkey           = b.src_mr.lkey;
        wr.rkey           = b.dst_mr.rkey;
        wr.remote_addr    = reinterpret_cast<uintptr_t>(b.dst.data());
        return wr;
    }

    /* run_until, with the books checked after every pass. */
    template<class Pred>
    bool run_checked(Pred pred, steady::duration limit = 5s)
    {
        return run_until(
                [&] {
                    for (const auto &a : agents) {
                        const std::string bad = a->engine->check_books();
                        EXPECT_EQ(bad, "") << "the engine's books";
                        if (!bad.empty()) {
                            return true; /* stop: already failed */
                        }
                    }
                    return pred();
                },
                limit);
    }
    void run_checked_for(steady::duration d)
    {
        run_checked([] { return false; }, d);
    }

    static size_t notices(const test_client &c)
    {
        return static_cast<size_t>(std::count_if(
                c.inbound.begin(), c.inbound.end(), [](const received &r) {
                    return r.msg.kind ==
                           static_cast<uint8_t>(inbound_kind::write);
                }));
    }
    static uint64_t counter(const agent_node &a, std::string_view key)
    {
        return json_number(a.engine->status(false), key);
    }

    /* With every QP from a to b held and a striped write posted: the QPs
     * that hold a part (one WR queued), and the one whose lane holds the
     * write's last part in the engine (nothing queued). */
    void find_lanes(agent_node &a, agent_node &b,
                    std::vector<uint32_t> &with_parts, uint32_t &own)
    {
        with_parts.clear();
        own = 0;
        for (uint32_t q : a.qps_to(b)) {
            if (a.nic->queued(q) == 1) {
                with_parts.push_back(q);
            } else {
                EXPECT_EQ(a.nic->queued(q), 0u);
                own = q;
            }
        }
        EXPECT_EQ(with_parts.size(), a.qps_to(b).size() - 1)
                << "a part on every other lane: " << a.status();
        EXPECT_NE(own, 0u);
    }

    /* Two agents and a client on each; ca reaches cb's agent as `to_b`. */
    void two_nodes(const agent_options &o = striped_agent())
    {
        a_    = &add_agent(o);
        b_    = &add_agent(o);
        ca_   = &attach(*a_);
        cb_   = &attach(*b_);
        to_b_ = peer(*ca_, *b_);
        prepare(buffers_, *ca_, *cb_);
        /* an AM there and back: a is connected to b (its QPs exist) */
        ca_->post(ca_->am(to_b_, *cb_, 100, 0));
        ASSERT_TRUE(run_until([&] {
            return ca_->done.size() == 1 && cb_->inbound.size() == 1;
        })) << a_->status();
        ca_->done.clear();
        cb_->inbound.clear();
    }

    /* Every QP from a to b held, a striped write (wr_id 1) posted, and
     * with_am: an AM of the same endpoint (wr_id 2), once the write is
     * split (its lane is posted to again); parts_ and own_ say where the
     * write's parts wait (find_lanes). */
    void post_held(bool with_am = false)
    {
        a_->hold(a_->qps_to(*b_), true);
        ca_->post(big_write(buffers_, to_b_, *cb_, 1));
        run_checked_for(30ms);
        if (with_am) {
            ca_->post(ca_->am(to_b_, *cb_, 2, 0));
            run_checked_for(30ms);
        }
        find_lanes(*a_, *b_, parts_, own_);
    }

    std::vector<uint32_t> parts_;
    uint32_t own_    = 0;
    agent_node *a_   = nullptr;
    agent_node *b_   = nullptr;
    test_client *ca_ = nullptr;
    test_client *cb_ = nullptr;
    uint32_t to_b_   = 0;
    big_buffers buffers_;
};

TEST_F(striping, a_large_write_is_split_lands_byte_exact_and_completes_once)
{
    ASSERT_NO_FATAL_FAILURE(two_nodes());
    ca_->post(big_write(buffers_, to_b_, *cb_, 1));
    ASSERT_TRUE(run_checked([&] {
        return ca_->done.size() == 1 && notices(*cb_) == 1;
    })) << a_->status();
    run_checked_for(20ms); /* anything extra */
    ASSERT_EQ(ca_->done.size(), 1u) << "one completion for the whole write";
    EXPECT_EQ(ca_->done[0].status,
              static_cast<uint32_t>(completion_status::success));
    EXPECT_EQ(ca_->done[0].length, big);
    EXPECT_EQ(notices(*cb_), 1u) << "one notice for the whole write";
    EXPECT_TRUE(buffers_.dst == buffers_.src) << "the bytes differ";
    EXPECT_EQ(counter(*a_, "striped_ops"), 1u);
    EXPECT_EQ(counter(*a_, "stripe_parts"), 4u);
    /* one op as the peer's counters say, all its bytes (and two_nodes'
     * AM) */
    const auto peers = a_->engine->status_json()["peers"];
    EXPECT_EQ(peers[to_b_]["ops"], 2u);
    EXPECT_EQ(peers[to_b_]["bytes"], big + sizeof(am_payload));
    /* every QP to b carried a part */
    EXPECT_GE(a_->nic->stats().ops_executed, 4u);
}

TEST_F(striping, the_target_hears_only_after_every_part_has_landed)
{
    ASSERT_NO_FATAL_FAILURE(two_nodes());
    /* an op behind it on its lane, so that the engine posts that lane
     * again while the parts are out */
    ASSERT_NO_FATAL_FAILURE(post_held(true));
    const auto &parts  = parts_;
    const uint32_t own = own_;
    ASSERT_TRUE(a_->nic->hold(own, false).ok());
    /* the parts land one lane at a time; until the last has, nothing is
     * heard and nothing completes */
    for (size_t i = 0; i < parts.size(); ++i) {
        run_checked_for(20ms);
        EXPECT_EQ(notices(*cb_), 0u)
                << "noticed with " << parts.size() - i << " parts not landed";
        EXPECT_TRUE(ca_->done.empty())
                << "completed with " << parts.size() - i << " parts not landed";
        ASSERT_TRUE(a_->nic->hold(parts[i], false).ok());
    }
    ASSERT_TRUE(run_checked([&] {
        return ca_->done.size() == 2 && notices(*cb_) == 1;
    })) << a_->status();
    EXPECT_EQ(ca_->count(completion_status::success), 2u);
    EXPECT_TRUE(buffers_.dst == buffers_.src) << "the bytes differ";
}

TEST_F(striping, a_later_op_of_the_endpoint_waits_for_the_striped_write)
{
    ASSERT_NO_FATAL_FAILURE(two_nodes());
    ASSERT_NO_FATAL_FAILURE(post_held(true)); /* an AM of the same endpoint */
    const auto &parts  = parts_;
    const uint32_t own = own_;
    /* the AM waits in the engine behind the write's last part, not on
     * the QP: the own lane may run, the parts may not */
    ASSERT_TRUE(a_->nic->hold(own, false).ok());
    run_checked_for(30ms);
    EXPECT_TRUE(cb_->inbound.empty()) << "the AM overtook the striped write";
    EXPECT_TRUE(ca_->done.empty());
    a_->hold(parts, false);
    ASSERT_TRUE(run_checked([&] {
        return ca_->done.size() == 2 && cb_->inbound.size() == 2;
    })) << a_->status();
    EXPECT_EQ(ca_->done[0].wr_id, 1u);
    EXPECT_EQ(ca_->done[1].wr_id, 2u);
    EXPECT_EQ(ca_->count(completion_status::success), 2u);
    EXPECT_EQ(cb_->inbound[0].msg.kind,
              static_cast<uint8_t>(inbound_kind::write));
    EXPECT_EQ(cb_->inbound[1].msg.kind, static_cast<uint8_t>(inbound_kind::am));
    EXPECT_TRUE(buffers_.dst == buffers_.src);
}

TEST_F(striping, a_failed_part_fails_the_write_once_after_every_part_retired)
{
    ASSERT_NO_FATAL_FAILURE(two_nodes());
    ASSERT_NO_FATAL_FAILURE(post_held());
    const auto &parts = parts_;
    /* one part fails; another's QP goes silent (its part retires only
     * when the watchdog gives its lane up); the rest are flushed */
    ASSERT_TRUE(a_->nic->fail_next(parts[0], IBV_WC_REM_ACCESS_ERR).ok());
    ASSERT_TRUE(a_->nic->break_silently(parts[1]).ok());
    a_->hold(a_->qps_to(*b_), false);
    run_checked_for(50ms);
    EXPECT_TRUE(ca_->done.empty())
            << "completed while a part was still posted: " << a_->status();
    ASSERT_TRUE(run_checked([&] { return ca_->done.size() == 1; }, 5s))
            << a_->status();
    run_checked_for(50ms);
    ASSERT_EQ(ca_->done.size(), 1u) << "one completion for the whole write";
    EXPECT_EQ(ca_->done[0].status,
              static_cast<uint32_t>(completion_status::failed));
    EXPECT_EQ(ca_->done[0].detail, IBV_WC_REM_ACCESS_ERR)
            << "the first failure's detail";
    EXPECT_EQ(notices(*cb_), 0u) << "the target heard of a failed write";
    EXPECT_GE(a_->logged("completing them as flushed"), 1u);
    const auto peers = a_->engine->status_json()["peers"];
    EXPECT_EQ(peers[to_b_]["failed"], 1u) << "counted once";
    EXPECT_EQ(peers[to_b_]["posted"], 0u);

    /* the QPs are rebuilt: the next striped write goes through */
    std::fill(buffers_.dst.begin(), buffers_.dst.end(), 0);
    ca_->post(big_write(buffers_, to_b_, *cb_, 2));
    ASSERT_TRUE(run_checked([&] {
        return ca_->done.size() == 2 && notices(*cb_) == 1;
    })) << a_->status();
    EXPECT_EQ(ca_->done[1].status,
              static_cast<uint32_t>(completion_status::success));
    EXPECT_TRUE(buffers_.dst == buffers_.src);
}

TEST_F(striping, a_peer_lost_with_parts_in_flight_fails_the_write_then_the_rest)
{
    agent_options o                   = striped_agent();
    o.engine.peers.retry_interval     = 10ms;
    o.engine.peers.max_retry_interval = 20ms;
    o.engine.peers.reconnect_delay    = 10ms;
    o.engine.peers.give_up_timeout    = 200ms;
    ASSERT_NO_FATAL_FAILURE(two_nodes(o));
    ASSERT_NO_FATAL_FAILURE(post_held(true)); /* the AM waits behind it */
    /* the connection breaks under the parts and cannot be made again */
    for (uint32_t q : a_->qps_to(*b_)) {
        ASSERT_TRUE(a_->nic->fail_next(q, IBV_WC_RETRY_EXC_ERR).ok());
    }
    a_->nic->drop_datagrams(1000000);
    a_->hold(a_->qps_to(*b_), false);
    ASSERT_TRUE(run_checked([&] { return ca_->done.size() == 2; }))
            << a_->status();
    EXPECT_EQ(ca_->done[0].wr_id, 1u);
    EXPECT_EQ(ca_->done[0].status,
              static_cast<uint32_t>(completion_status::failed));
    EXPECT_EQ(ca_->done[0].detail, IBV_WC_RETRY_EXC_ERR);
    EXPECT_EQ(ca_->done[1].wr_id, 2u);
    EXPECT_EQ(ca_->done[1].status,
              static_cast<uint32_t>(completion_status::peer_failed));
    EXPECT_EQ(notices(*cb_), 0u);
    EXPECT_TRUE(a_->engine->idle()) << a_->status();
}

TEST_F(striping, a_client_that_dies_with_a_part_still_queued_holds_no_lane)
{
    /* CQ credits for two sends: of the write's three other parts, one
     * waits in its lane's backlog while two are posted (and held) */
    agent_options o     = striped_agent();
    o.nic.send_budget   = 2;
    agent_node &a       = add_agent(o);
    test_client &c      = attach(a);
    test_client &other  = attach(a);
    const uint32_t self = peer(c, a);
    big_buffers b;
    prepare(b, c, other);
    other.post(other.am(peer(other, a), other, 1, 0)); /* connected */
    ASSERT_TRUE(run_checked([&] { return other.done.size() == 1; }));
    a.hold(a.loopback_qps(), true);
    c.post(big_write(b, self, other, 1));
    run_checked_for(30ms);
    EXPECT_EQ(counter(a, "striped_ops"), 1u);
    kill(c);
    ASSERT_TRUE(run_checked([&] { return counter(a, "clients_gone") == 1; }));
    a.hold(a.loopback_qps(), false);
    /* the queued part is dropped with its client, and its op with it:
     * nothing holds a lane, and other's work on every lane flows */
    ASSERT_TRUE(run_checked([&] { return a.engine->idle(); })) << a.status();
    for (uint64_t i = 2; i < 10; ++i) {
        ASSERT_TRUE(
                post_when_possible(other, other.am(self, other, i,
                                                   static_cast<uint32_t>(i))));
    }
    ASSERT_TRUE(run_checked([&] { return other.done.size() == 9; }))
            << a.status();
    EXPECT_EQ(other.count(completion_status::success), 9u);
}

TEST_F(striping, striped_writes_of_several_endpoints_split_at_once_all_finish)
{
    /* each client's write is held at the front of its own lane while its
     * parts go to the others, where other writes are held: the parts
     * must not wait behind them */
    agent_node &a = add_agent(striped_agent());
    std::vector<test_client *> cs;
    for (int i = 0; i < 4; ++i) {
        cs.push_back(&attach(a));
    }
    std::vector<big_buffers> bufs(cs.size());
    for (size_t i = 0; i < cs.size(); ++i) {
        prepare(bufs[i], *cs[i], *cs[(i + 1) % cs.size()]);
    }
    const uint32_t self = peer(*cs[0], a);
    for (test_client *c : cs) {
        c->post(c->am(self, *c, 100, 0)); /* every lane connected */
    }
    ASSERT_TRUE(run_checked([&] {
        return std::all_of(cs.begin(), cs.end(), [](const test_client *c) {
            return c->done.size() == 1;
        });
    }));
    for (size_t i = 0; i < cs.size(); ++i) { /* taken in one pass */
        cs[i]->post(big_write(bufs[i], self, *cs[(i + 1) % cs.size()], 1));
    }
    ASSERT_TRUE(run_checked([&] {
        return std::all_of(cs.begin(), cs.end(), [](const test_client *c) {
            return c->done.size() == 2;
        });
    })) << "striped writes wait for each other: "
        << a.status();
    for (size_t i = 0; i < cs.size(); ++i) {
        EXPECT_EQ(cs[i]->count(completion_status::success), 2u);
        EXPECT_TRUE(bufs[i].dst == bufs[i].src) << "client " << i;
    }
    EXPECT_EQ(counter(a, "striped_ops"), cs.size());
}

TEST_F(striping, unflagged_short_and_fenced_writes_are_not_split)
{
    ASSERT_NO_FATAL_FAILURE(two_nodes());
    /* not flagged (UCT flags from UCX_RVT_STRIPE_MIN up) */
    ca_->post(big_write(buffers_, to_b_, *cb_, 1, big, work_signaled));
    /* flagged, but under two pages: nothing to split */
    ca_->post(big_write(buffers_, to_b_, *cb_, 2, 2 * stripe_align - 1));
    /* flagged and fenced: the fence is its lane's */
    ca_->post(big_write(buffers_, to_b_, *cb_, 3, big,
                        work_signaled | work_stripe | work_fence));
    ASSERT_TRUE(run_checked([&] { return ca_->done.size() == 3; }))
            << a_->status();
    EXPECT_EQ(ca_->count(completion_status::success), 3u);
    EXPECT_EQ(counter(*a_, "striped_ops"), 0u);
    EXPECT_TRUE(buffers_.dst == buffers_.src);
}

TEST_F(striping, a_peer_with_one_lane_is_not_striped)
{
    agent_node &a  = add_agent(striped_agent(1));
    test_client &c = attach(a);
    big_buffers b;
    prepare(b, c, c);
    const uint32_t self = peer(c, a);
    c.post(big_write(b, self, c, 1));
    ASSERT_TRUE(run_checked([&] {
        return c.done.size() == 1 && notices(c) == 1;
    })) << a.status();
    EXPECT_EQ(c.done[0].status,
              static_cast<uint32_t>(completion_status::success));
    EXPECT_EQ(counter(a, "striped_ops"), 0u);
    EXPECT_TRUE(b.dst == b.src);
}

TEST_F(striping, many_striped_writes_and_ams_on_every_lane_keep_the_books)
{
    /* the node's own peer (loopback QPs), small send queues: parts wait
     * for credits behind other ops, and every lane is busy */
    agent_options o = striped_agent();
    o.nic.sq_depth  = 4;
    agent_node &a   = add_agent(o);
    std::vector<test_client *> cs;
    for (int i = 0; i < 4; ++i) {
        cs.push_back(&attach(a));
    }
    big_buffers b;
    prepare(b, *cs[0], *cs[1]);
    const uint32_t self = peer(*cs[0], a);
    for (test_client *c : cs) {
        c->session->set_write_notices(true);
    }
    std::map<uint64_t, uint64_t> endpoint_of;
    uint64_t wr_id = 1;
    for (int round = 0; round < 6; ++round) {
        endpoint_of[wr_id] = endpoint(self, cs[1]->index());
        ASSERT_TRUE(post_when_possible(*cs[0],
                                       big_write(b, self, *cs[1], wr_id++)));
        for (test_client *to : cs) {
            endpoint_of[wr_id] = endpoint(self, to->index());
            ASSERT_TRUE(post_when_possible(
                    *cs[0],
                    cs[0]->am(self, *to, wr_id, static_cast<uint32_t>(wr_id))));
            ++wr_id;
        }
    }
    ASSERT_TRUE(run_checked([&] { return cs[0]->done.size() == wr_id - 1; }))
            << a.status();
    EXPECT_EQ(cs[0]->count(completion_status::success), wr_id - 1);
    expect_endpoint_order(*cs[0], endpoint_of);
    EXPECT_EQ(counter(a, "striped_ops"), 6u);
    EXPECT_EQ(notices(*cs[1]), 6u);
    EXPECT_TRUE(b.dst == b.src);
    EXPECT_TRUE(a.engine->idle());
}

} // namespace
} // namespace engine_test
