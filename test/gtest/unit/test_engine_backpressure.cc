/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Back-pressure (engine.h): a client that stops reading its inbound ring
 * makes its agent pause the senders' agents, so the agent's memory stays
 * bounded, nothing is lost, other destinations keep flowing, and each
 * endpoint keeps its order across the pause.
 */
#include "engine_fixture.h"

#include <algorithm>

namespace engine_test {
namespace {

constexpr uint32_t pause_at = 24; /* messages waiting: small, to pause soon */

class backpressure : public engine_fixture {
protected:
    static agent_options options()
    {
        agent_options o;
        o.engine.pause_messages = pause_at;
        o.engine.peers.num_qps  = 1; /* every endpoint on one shared QP */
        return o;
    }

    /* What `a`'s status says of its one attached client. */
    static uint64_t waiting(const agent_node &a)
    {
        return json_number(a.engine->status(false), "inbound_waiting");
    }

    /* Posts AMs numbered from `seq` from `from` to `to` (over peer index
     * `p`) while the client may, pumping between tries, for `d` and at
     * least min_passes passes; returns how many were posted and keeps the
     * largest number of entries that waited in `to`'s agent. The engines
     * run in this thread (pump): what they do depends on the passes, not
     * on the time, and a host that starves this process (make check at
     * nice 19 beside the testbed) must not make too few passes look like
     * a stall. */
    static constexpr uint32_t min_passes = 5000;
    uint32_t post_for(test_client &from, test_client &to, uint32_t p,
                      uint32_t &seq, steady::duration d, uint64_t &most)
    {
        uint32_t n       = 0;
        const auto until = steady::now() + d;
        for (uint32_t pass = 0; pass < min_passes || steady::now() < until;
             ++pass) {
            const uint64_t wr_id = m_next_wr[&from];
            if (from.session->post(from.am(p, to, wr_id, seq)) ==
                client::post_status::posted) {
                ++m_next_wr[&from];
                ++seq;
                ++n;
            }
            pump();
            poll_clients();
            most = std::max(most, waiting(*to.home));
        }
        return n;
    }

    /* Every AM of `from` reached `to` once, in order, payload intact. */
    static void expect_all_arrived(const test_client &from,
                                   const test_client &to, uint32_t count)
    {
        const auto got = to.ams_by_sender();
        auto it        = got.find(from.id);
        ASSERT_NE(it, got.end()) << "nothing from client " << from.id;
        ASSERT_EQ(it->second.size(), count);
        for (uint32_t k = 0; k < count; ++k) {
            ASSERT_EQ(it->second[k], k) << "AM " << k << " out of order";
        }
    }

    /* Two agents, a sender on the first, and a receiver on the second
     * that does not read its inbound ring. */
    struct pair_of_clients {
        agent_node *a, *b;
        test_client *from, *to;
        uint32_t p; /* the sender's peer index for b */
        uint32_t seq  = 0; /* AMs posted */
        uint64_t most = 0; /* most entries waiting at b */
    };
    pair_of_clients non_reading_pair(const agent_options &o = options())
    {
        pair_of_clients x{};
        x.a                 = &add_agent(o);
        x.b                 = &add_agent(o);
        x.from              = &attach(*x.a);
        x.to                = &attach(*x.b);
        x.to->reads_inbound = false;
        x.p                 = peer(*x.from, *x.b);
        return x;
    }
    /* Posts AMs from the sender of `x` for `d`; how many. */
    uint32_t post_for(pair_of_clients &x, steady::duration d)
    {
        return post_for(*x.from, *x.to, x.p, x.seq, d, x.most);
    }

    std::map<test_client *, uint64_t> m_next_wr;
};

TEST_F(backpressure, a_client_that_stops_reading_pauses_its_senders)
{
    auto x            = non_reading_pair();
    agent_node &a     = *x.a;
    agent_node &b     = *x.b;
    test_client &from = *x.from;
    test_client &to   = *x.to;
    post_for(x, 300ms);
    /* the sender is held: it stops getting completions, so its budget runs
     * out, and nothing more is taken */
    const size_t done_then = from.done.size();
    const uint32_t more    = post_for(x, 200ms);
    const uint64_t most    = x.most;
    EXPECT_EQ(more, 0u) << "the sender was never held back";
    EXPECT_EQ(from.done.size(), done_then);
    EXPECT_GE(json_number(b.engine->status(false), "pauses"), 1u);
    EXPECT_GE(json_number(a.engine->status(false), "ops_parked"), 1u);
    /* bounded: the pause mark, plus what the sender could have had posted
     * while the pause travelled (its completion budget) */
    const uint32_t budget = agent_options{}.caps.completion;
    EXPECT_LE(most, pause_at + budget);
    EXPECT_GE(most, pause_at);

    /* it reads again: everything arrives, once, in order */
    to.reads_inbound    = true;
    const uint32_t sent = x.seq;
    ASSERT_TRUE(run_until([&] {
        return from.done.size() >= sent && to.inbound.size() >= sent;
    })) << from.done.size()
        << " of " << sent << " done, " << to.inbound.size() << " received";
    run_for(20ms);
    EXPECT_EQ(from.count(completion_status::success), sent);
    expect_all_arrived(from, to, sent);
    EXPECT_GE(json_number(b.engine->status(false), "resumes"), 1u);
    EXPECT_EQ(waiting(b), 0u);
}

TEST_F(backpressure, other_destinations_keep_flowing_on_the_shared_qp)
{
    agent_node &a       = add_agent(options());
    agent_node &b       = add_agent(options());
    test_client &held   = attach(a);
    test_client &busy   = attach(a);
    test_client &stuck  = attach(b);
    test_client &reader = attach(b);
    stuck.reads_inbound = false;
    const uint32_t p    = peer(held, b);
    ASSERT_EQ(peer(busy, b), p);

    uint32_t seq_stuck = 0, seq_reader = 0;
    uint64_t most = 0;
    post_for(held, stuck, p, seq_stuck, 300ms, most);
    ASSERT_GE(json_number(b.engine->status(false), "pauses"), 1u);
    /* on the same single QP, another destination is not held */
    const uint32_t n = post_for(busy, reader, p, seq_reader, 300ms, most);
    EXPECT_GT(n, 3 * agent_options{}.caps.completion)
            << "traffic to a reading client stalled behind the paused one";
    ASSERT_TRUE(run_until([&] { return reader.inbound.size() >= n; }));
    expect_all_arrived(busy, reader, n);

    stuck.reads_inbound = true;
    ASSERT_TRUE(run_until([&] { return stuck.inbound.size() >= seq_stuck; }));
    expect_all_arrived(held, stuck, seq_stuck);
}

TEST_F(backpressure, each_endpoint_keeps_its_order_across_a_pause)
{
    auto x            = non_reading_pair();
    agent_node &a     = *x.a;
    test_client &from = *x.from;
    test_client &to   = *x.to;
    const uint32_t p  = x.p;

    /* AMs and WRITEs to the one endpoint, before and during the pause */
    uint32_t seq = 0;
    std::vector<uint64_t> posted;
    const auto until = steady::now() + 400ms;
    while (steady::now() < until) {
        const uint64_t wr_id  = m_next_wr[&from];
        const bool as_am      = wr_id % 3 != 2;
        const work_request wr = as_am ? from.am(p, to, wr_id, seq) :
                                        from.write(p, to, wr_id);
        if (from.session->post(wr) == client::post_status::posted) {
            ++m_next_wr[&from];
            seq += as_am;
            posted.push_back(wr_id);
        }
        pump();
        poll_clients();
    }
    ASSERT_GE(json_number(a.engine->status(false), "ops_parked"), 1u);
    to.reads_inbound = true;
    ASSERT_TRUE(run_until([&] {
        return from.done.size() >= posted.size() && to.inbound.size() >= seq;
    }));
    /* completions in posting order (RC order on the endpoint) */
    ASSERT_EQ(from.done.size(), posted.size());
    for (size_t k = 0; k < posted.size(); ++k) {
        EXPECT_EQ(from.done[k].wr_id, posted[k]) << "completion " << k;
        EXPECT_EQ(from.done[k].status,
                  static_cast<uint32_t>(completion_status::success));
    }
    expect_all_arrived(from, to, seq);
}

TEST_F(backpressure, a_paused_client_that_leaves_frees_its_senders)
{
    auto x             = non_reading_pair();
    agent_node &a      = *x.a;
    agent_node &b      = *x.b;
    test_client &from  = *x.from;
    const uint32_t seq = (post_for(x, 300ms), x.seq);
    ASSERT_GE(json_number(a.engine->status(false), "ops_parked"), 1u);
    ASSERT_LT(from.done.size(), seq);
    /* its process exits: what was parked for it goes out, and every op
     * of the sender completes (what reaches the receiving agent finds no
     * client and counts as misrouted; what had not gone out when the
     * departure was announced fails unposted) */
    kill(*x.to);
    ASSERT_TRUE(run_until([&] { return from.done.size() >= seq; }))
            << from.done.size() << " of " << seq;
    EXPECT_GE(json_number(b.engine->status(false), "misrouted") +
                      json_number(a.engine->status(false), "ops_failed"),
              1u);
    EXPECT_EQ(json_number(a.engine->status(false), "parked"), 0u);
}

/* The connection breaks while ops are parked: the agents connect again
 * (the peer re-sends its pauses then), the parked ops go to their lane
 * and meet the broken QP: every op completes, none stays parked. */
TEST_F(backpressure, a_lost_connection_leaves_nothing_parked)
{
    agent_options o                   = options();
    o.engine.peers.reconnect_delay    = 10ms;
    o.engine.peers.keepalive_interval = 20ms; /* meets the broken QP */
    o.engine.peers.keepalive_timeout  = 100ms;
    auto x                            = non_reading_pair(o);
    agent_node &a                     = *x.a;
    agent_node &b                     = *x.b;
    test_client &from                 = *x.from;
    const uint32_t seq                = (post_for(x, 300ms), x.seq);
    ASSERT_GE(json_number(a.engine->status(false), "ops_parked"), 1u);
    ASSERT_LT(from.done.size(), seq);
    for (uint32_t q : a.qps_to(b)) {
        ASSERT_TRUE(a.nic->fail_next(q, IBV_WC_RETRY_EXC_ERR).ok());
    }
    ASSERT_TRUE(run_until([&] { return from.done.size() >= seq; }, 10s))
            << from.done.size() << " of " << seq << "; " << a.status();
    EXPECT_EQ(from.count(completion_status::success) +
                      from.count(completion_status::failed),
              seq);
    EXPECT_GE(from.count(completion_status::failed), 1u);
    EXPECT_EQ(json_number(a.engine->status(false), "parked"), 0u);
    EXPECT_GE(a.logged("connection lost"), 1u);
}

} // namespace
} // namespace engine_test
