/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine's data path (agent/engine/engine.h), driven through real client
 * sessions and the loopback nic (engine_fixture.h): order per endpoint
 * across lanes, credits and back-pressure, and completions that stay in
 * order when an op fails.
 */
#include "test/gtest/unit/engine_fixture.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

namespace engine_test {
namespace {

class data_path : public engine_fixture {
protected:
    /* The peer index of `to`'s agent for `from`, asked once. */
    uint32_t peer_for(test_client &from, const test_client &to)
    {
        auto key = std::make_pair(&from, to.home);
        auto it  = m_peers.find(key);
        if (it == m_peers.end()) {
            it = m_peers.emplace(key, peer(from, *to.home)).first;
        }
        return it->second;
    }

    /* One request from `from` to `to`: an AM if `as_am`, else a WRITE.
     * False when it could not be posted. */
    [[nodiscard]] bool send(test_client &from, test_client &to, bool as_am)
    {
        const uint32_t p            = peer_for(from, to);
        const uint64_t wr_id        = m_next_wr[&from]++;
        m_endpoint_of[&from][wr_id] = endpoint(p, to.index());
        uint32_t &seq               = m_seq[{from.id, to.id}];
        return as_am ? post_when_possible(from, from.am(p, to, wr_id, seq++)) :
                       post_when_possible(from, from.write(p, to, wr_id));
    }

    /* Every client sends `rounds` requests to every client (itself
     * included), AMs and WRITEs in turn. */
    [[nodiscard]] bool
    all_to_all(const std::vector<test_client *> &all, int rounds)
    {
        for (int r = 0; r < rounds; ++r) {
            for (test_client *from : all) {
                for (test_client *to : all) {
                    if (!send(*from, *to, r % 2 == 0)) {
                        return false;
                    }
                }
            }
        }
        return true;
    }

    /* Waits for every completion, then checks them and the AMs. */
    void expect_all_done_in_order(const std::vector<test_client *> &all)
    {
        auto finished = [&] {
            for (test_client *c : all) {
                if (c->done.size() < m_next_wr[c]) {
                    return false;
                }
            }
            return true;
        };
        ASSERT_TRUE(run_until(finished, 20s)) << "ops lost: " << summary(all);
        run_for(20ms); /* AMs still on the way, and anything extra */
        for (test_client *c : all) {
            EXPECT_EQ(c->done.size(), m_next_wr[c]) << "client " << c->id;
            EXPECT_EQ(c->count(completion_status::success), c->done.size())
                    << "client " << c->id;
            expect_endpoint_order(*c, m_endpoint_of[c]);
            const auto got = c->ams_by_sender();
            for (test_client *from : all) {
                const uint32_t sent = m_seq[{from->id, c->id}];
                auto it             = got.find(from->id);
                ASSERT_EQ(it == got.end() ? 0 : it->second.size(), sent)
                        << "AMs from client " << from->id << " to " << c->id;
                for (uint32_t i = 0; i < sent; ++i) {
                    ASSERT_EQ(it->second[i], i)
                            << "AMs from client " << from->id << " to " << c->id
                            << " out of order";
                }
            }
        }
    }

    std::string summary(const std::vector<test_client *> &all)
    {
        std::string s;
        for (test_client *c : all) {
            s += "client " + std::to_string(c->id) + ": " +
                 std::to_string(c->done.size()) + " of " +
                 std::to_string(m_next_wr[c]) + "; ";
        }
        return s + agents.front()->status();
    }

    std::map<std::pair<test_client *, agent_node *>, uint32_t> m_peers;
    std::map<test_client *, uint64_t> m_next_wr;
    std::map<test_client *, std::map<uint64_t, uint64_t>> m_endpoint_of;
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> m_seq; /* ids */
};

TEST_F(data_path, each_endpoint_keeps_its_order_across_lanes)
{
    agent_options o;
    o.nic.execute_on_post = false; /* every QP's WRs run interleaved */
    agent_node &a         = add_agent(o);
    agent_node &b         = add_agent(o);
    std::vector<test_client *> all;
    for (agent_node *n : {&a, &b}) {
        for (int i = 0; i < 3; ++i) {
            all.push_back(&attach(*n));
        }
    }
    /* the endpoints of node a's own clients do spread over its K lanes:
     * with the QPs held, one request each shows which QPs they use */
    const auto qps = a.loopback_qps();
    ASSERT_EQ(qps.size(), a.engine->num_qps());
    a.hold(qps, true);
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) {
            ASSERT_TRUE(send(*all[i], *all[j], true));
        }
    }
    pump();
    std::set<uint32_t> used;
    for (uint32_t q : qps) {
        if (a.nic->queued(q) > 0) {
            used.insert(q);
        }
    }
    EXPECT_GE(used.size(), 2u) << "9 endpoints on one of K lanes";
    a.hold(qps, false);

    ASSERT_TRUE(all_to_all(all, 40));
    expect_all_done_in_order(all);
}

TEST_F(data_path, small_credits_keep_ops_in_lane_backlogs_and_lose_none)
{
    agent_options o;
    o.nic.sq_depth        = 2; /* WRs per QP */
    o.nic.send_budget     = 3; /* sends outstanding on the whole CQ */
    o.nic.receive_buffers = 8;
    agent_node &a         = add_agent(o);
    std::vector<test_client *> all;
    for (int i = 0; i < 4; ++i) {
        all.push_back(&attach(a));
    }
    /* posted in bursts that the credits cannot take at once: some wait */
    uint64_t most_queued = 0;
    for (int burst = 0; burst < 10; ++burst) {
        ASSERT_TRUE(all_to_all(all, 4));
        pump();
        most_queued = std::max(most_queued, json_number(a.status(), "queued"));
    }
    expect_all_done_in_order(all);
    EXPECT_GT(most_queued, 0u) << "no op ever waited in a lane backlog";
    EXPECT_TRUE(a.engine->idle()) << a.status();
}

/* A client that ignores its completion budget (it writes its work ring
 * itself) has its excess completions held in the agent; meanwhile the
 * agent takes none of its work, and resumes once it has read them. */
TEST_F(data_path, a_client_over_its_completion_budget_gets_no_work_taken)
{
    agent_options o;
    o.caps              = {128, 16, 16, 256}; /* 128 requests, 16 completions */
    agent_node &a       = add_agent(o);
    test_client &c      = attach(a);
    const uint32_t me   = peer(c, a);
    const shm_layout &l = c.session->attached().layout;
    auto &idx = *c.session->attached().shm.at<ring_indices>(l.work_offset);
    ring_producer<work_request> raw(
            idx, {c.session->attached().shm.at<work_request>(
                          l.work_offset + sizeof(ring_indices)),
                  l.caps.work});
    for (uint64_t i = 0; i < l.caps.work; ++i) {
        ASSERT_TRUE(raw.try_push(c.write(me, c, i)));
    }
    /* as session::post does after it publishes (work_summary.h) */
    note_work(c.session->attached().summary.at<work_summary_line>(0),
              c.session->client_index());
    for (int i = 0; i < 50; ++i) {
        pump();
    }
    const uint32_t left = idx.head.load() - idx.tail.load();
    EXPECT_GT(left, 0u) << "the agent took all the work of a client that "
                           "reads no completions";
    EXPECT_GT(json_number(a.status(), "held_back"), 0u) << a.status();
    const uint32_t taken = l.caps.work - left;
    EXPECT_LE(taken, l.caps.completion + 32u)
            << "more taken than one pass (32) after the ring filled";

    /* reading its completions lets the rest through: each completes
     * once, those taken beyond the ops it may have held (its completion
     * ring's size: client_share.h) refused, the others in order */
    ASSERT_TRUE(run_until([&] { return c.done.size() == l.caps.work; }))
            << c.done.size() << " of " << l.caps.work << "; " << a.status();
    std::vector<bool> seen(l.caps.work);
    uint64_t last_ok = 0, refused = 0;
    for (const completion &d : c.done) {
        ASSERT_LT(d.wr_id, l.caps.work);
        EXPECT_FALSE(seen[d.wr_id]) << "wr_id " << d.wr_id << " twice";
        seen[d.wr_id] = true;
        if (d.status == static_cast<uint32_t>(completion_status::success)) {
            EXPECT_TRUE(last_ok == 0 || d.wr_id > last_ok) << d.wr_id;
            last_ok = d.wr_id;
            continue;
        }
        ASSERT_EQ(d.status,
                  static_cast<uint32_t>(completion_status::no_resource));
        EXPECT_EQ(d.detail, static_cast<uint32_t>(agent::share_bound::ops));
        ++refused;
    }
    EXPECT_GT(refused, 0u);
    EXPECT_EQ(json_number(a.status(), "refused_ops"), refused);
    EXPECT_EQ(a.engine->check_books(), "");
}

/* An op that fails in the middle of a chain (its MR was deregistered at
 * the device behind the agent's back, as a process sharing the command fd
 * can: a local protection error) completes after the unsignaled ops
 * before it, which its error completion retires, and before the flushed
 * ones behind it; the node's own peer rebuilds its QPs and later ops
 * succeed. */
TEST_F(data_path, a_failed_op_completes_after_the_earlier_unsignaled_ones)
{
    agent_node &a     = add_agent();
    test_client &c    = attach(a);
    const uint32_t me = peer(c, a);
    std::vector<uint8_t> extra(8192);
    const loopback_mr short_mr = a.nic->register_memory(extra.data(),
                                                        extra.size(),
                                                        remote_rw);
    c.announce(short_mr, extra.data(), extra.size());
    ASSERT_TRUE(a.nic->deregister(short_mr.handle).ok());
    pump();

    /* posted together: one chain on one lane, only the last signaled */
    c.post(c.write(me, c, 1));
    c.post(c.write(me, c, 2));
    work_request bad = c.write(me, c, 3);
    bad.local_addr   = reinterpret_cast<uintptr_t>(extra.data() + 5000);
    bad.lkey         = short_mr.lkey;
    c.post(bad);
    c.post(c.write(me, c, 4));
    c.post(c.write(me, c, 5));
    ASSERT_TRUE(run_until([&] { return c.done.size() == 5; })) << a.status();
    const std::vector<std::pair<completion_status, uint32_t>> want = {
            {completion_status::success, 0},
            {completion_status::success, 0},
            {completion_status::failed, IBV_WC_LOC_PROT_ERR},
            {completion_status::failed, IBV_WC_WR_FLUSH_ERR},
            {completion_status::failed, IBV_WC_WR_FLUSH_ERR},
    };
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(c.done[i].wr_id, i + 1);
        EXPECT_EQ(c.done[i].status, static_cast<uint32_t>(want[i].first))
                << "wr_id " << c.done[i].wr_id;
        EXPECT_EQ(c.done[i].detail, want[i].second)
                << "wr_id " << c.done[i].wr_id;
    }

    for (uint64_t i = 6; i <= 40; ++i) { /* longer than signal_interval */
        ASSERT_TRUE(post_when_possible(c, c.write(me, c, i)));
    }
    ASSERT_TRUE(run_until([&] { return c.done.size() == 40; })) << a.status();
    for (uint64_t i = 5; i < 40; ++i) {
        EXPECT_EQ(c.done[i].wr_id, i + 1);
        EXPECT_EQ(c.done[i].status,
                  static_cast<uint32_t>(completion_status::success))
                << "wr_id " << i + 1;
    }
    EXPECT_EQ(json_number(a.status(), "reconnects"), 1u);
}

/* A QP that breaks (its next WR fails) with more ops waiting behind the
 * posted ones: the posted ones fail in order, the waiting ones go out on
 * the rebuilt QPs afterwards, and none overtakes another. */
TEST_F(data_path, ops_waiting_behind_a_broken_qp_complete_after_its_failures)
{
    agent_options o;
    o.nic.sq_depth    = 4;
    agent_node &a     = add_agent(o);
    test_client &c    = attach(a);
    test_client &d    = attach(a);
    const uint32_t me = peer(c, a);
    for (uint32_t q : a.loopback_qps()) {
        ASSERT_TRUE(a.nic->fail_next(q, IBV_WC_REM_OP_ERR).ok());
    }
    for (uint64_t i = 1; i <= 10; ++i) {
        c.post(c.write(me, d, i));
    }
    ASSERT_TRUE(run_until([&] { return c.done.size() == 10; })) << a.status();
    for (uint64_t i = 0; i < 10; ++i) {
        EXPECT_EQ(c.done[i].wr_id, i + 1);
        const bool posted = i < 4; /* sq_depth: the rest waited */
        EXPECT_EQ(c.done[i].status,
                  static_cast<uint32_t>(posted ? completion_status::failed :
                                                 completion_status::success))
                << "wr_id " << i + 1;
        const uint32_t detail = i == 0 ? IBV_WC_REM_OP_ERR :
                                posted ? IBV_WC_WR_FLUSH_ERR :
                                         IBV_WC_SUCCESS;
        EXPECT_EQ(c.done[i].detail, detail) << "wr_id " << i + 1;
    }
}

/* peer_table.h, "Send depths": past deep_peers, a peer's QPs are made
 * shallow and its lanes post no more than those hold (the loopback nic
 * refuses a WR past a QP's depth, as a full send queue would). */
TEST_F(data_path, a_peer_past_deep_peers_gets_shallow_qps_and_posts_within_them)
{
    agent_options o;
    o.nic.sq_depth            = 8;
    o.engine.deep_peers       = 1;
    o.engine.shallow_sq_depth = 2;
    agent_node &a             = add_agent(o);
    agent_node &b             = add_agent(o);
    agent_node &c             = add_agent(o);
    test_client &ca           = attach(a);
    test_client &cb           = attach(b);
    test_client &cc           = attach(c);
    const uint32_t to_b       = peer(ca, b);
    const uint32_t to_c       = peer(ca, c);
    for (uint64_t i = 1; i <= 20; ++i) {
        ASSERT_TRUE(post_when_possible(ca, ca.write(to_b, cb, i)));
        ASSERT_TRUE(post_when_possible(ca, ca.write(to_c, cc, 100 + i)));
    }
    ASSERT_TRUE(run_until([&] { return ca.done.size() == 40; })) << a.status();
    for (const auto &d : ca.done) {
        EXPECT_EQ(d.status, static_cast<uint32_t>(completion_status::success))
                << "wr_id " << d.wr_id << ": " << a.status();
    }
    ASSERT_EQ(a.qps_to(b).size(), 4u);
    ASSERT_EQ(a.qps_to(c).size(), 4u);
    for (uint32_t q : a.qps_to(b)) {
        EXPECT_EQ(a.nic->sq_depth_of(q), 8u) << "the first peer is deep";
    }
    for (uint32_t q : a.qps_to(c)) {
        EXPECT_EQ(a.nic->sq_depth_of(q), 2u) << "the second is shallow";
    }
    for (uint32_t q : a.loopback_qps()) {
        EXPECT_EQ(a.nic->sq_depth_of(q), 8u) << "the node's own is deep";
    }
    const auto s = a.engine->status_json();
    EXPECT_EQ(s["deep_peers"].get<uint32_t>(), 1u);
    EXPECT_EQ(s["peers"][to_c]["sq_depth"].get<uint32_t>(), 2u);
    EXPECT_EQ(s["peers"][to_b]["sq_depth"].get<uint32_t>(), 8u);
}

/* The payload of an inline request (n bytes, all derived from its
 * number). */
std::vector<std::byte> inline_payload(uint64_t n)
{
    std::vector<std::byte> p(24 + n % 97);
    for (size_t k = 0; k < p.size(); ++k) {
        p[k] = static_cast<std::byte>(n * 31 + k);
    }
    return p;
}

/* Inline AMs and writes: the agent copies each payload out of the
 * client's work-data slot when it takes the request, so the client may
 * reuse the slot at once, even while the op waits in a lane backlog for
 * send-queue room; every byte delivered is the one posted. */
TEST_F(data_path, inline_payloads_are_the_agents_own_once_taken)
{
    agent_options o;
    o.caps              = {8, 32, 32, 256}; /* the 8 slots are reused 4 times */
    o.nic.sq_depth      = 2;
    agent_node &a       = add_agent(o);
    test_client &c      = attach(a);
    test_client &d      = attach(a);
    const uint32_t me   = peer(c, a);
    const shm_layout &l = c.session->attached().layout;
    std::byte *slots    = c.session->attached().shm.at<std::byte>(
            l.work_data_offset);
    a.hold(a.loopback_qps(), true); /* 2 WRs per QP, the rest wait */
    constexpr uint64_t total = 32;
    uint64_t most_queued     = 0;
    for (uint64_t i = 0; i < total; ++i) {
        work_request wr{};
        wr.wr_id          = i;
        wr.flags          = work_signaled;
        wr.peer           = me;
        wr.dst_client     = d.index();
        wr.dst_generation = d.generation();
        if (i % 2 == 0) {
            wr.op    = static_cast<uint8_t>(work_op::send_am);
            wr.am_id = 7;
        } else {
            wr.op          = static_cast<uint8_t>(work_op::rdma_write);
            wr.rkey        = d.mr.rkey;
            wr.remote_addr = d.addr(test_client::landing + i * 128);
        }
        ASSERT_EQ(c.session->post_inline(wr, inline_payload(i)),
                  client::post_status::posted)
                << i;
        if (i % l.caps.work == l.caps.work - 1) {
            pump(); /* the agent takes the ring's 8 */
            most_queued = std::max(most_queued,
                                   json_number(a.status(), "queued"));
            /* a client reusing its slots: nothing it writes now may
             * reach the wire */
            std::memset(slots, 0xee, size_t{l.caps.work} * l.caps.inline_size);
        }
    }
    EXPECT_GE(most_queued, total - 2 * a.engine->num_qps() - l.caps.work)
            << "the ops did not wait in the lane backlogs";
    a.hold(a.loopback_qps(), false);
    ASSERT_TRUE(run_until([&] {
        return c.done.size() == total && d.inbound.size() == total / 2;
    })) << c.done.size()
        << " done, " << d.inbound.size() << " AMs; " << a.status();
    EXPECT_EQ(c.count(completion_status::success), total);
    for (uint64_t i = 0; i < total; ++i) {
        const auto want = inline_payload(i);
        if (i % 2 == 0) {
            const received &r = d.inbound[i / 2];
            EXPECT_EQ(r.msg.am_id, 7);
            EXPECT_EQ(r.data, want) << "AM " << i;
        } else {
            const auto *at = reinterpret_cast<const std::byte *>(
                    d.memory.data() + test_client::landing + i * 128);
            EXPECT_TRUE(std::equal(want.begin(), want.end(), at))
                    << "write " << i;
        }
    }
}

/* Inline requests that break the rules complete `invalid`, naming the
 * value; the client's other requests go on. */
TEST_F(data_path, a_bad_inline_request_completes_invalid_naming_the_value)
{
    agent_node &a       = add_agent();
    test_client &c      = attach(a);
    const uint32_t me   = peer(c, a);
    const uint32_t slot = c.session->max_inline();
    auto inl            = [&](uint64_t id, uint32_t length) {
        work_request wr{};
        wr.wr_id      = id;
        wr.op         = static_cast<uint8_t>(work_op::send_am);
        wr.flags      = work_signaled | work_inline;
        wr.peer       = me;
        wr.dst_client = c.index();
        wr.length     = length;
        return wr;
    };
    c.post(inl(1, slot + 1));
    work_request keyed = inl(2, 8);
    keyed.lkey         = c.mr.lkey; /* a real MR of the client's, even */
    c.post(keyed);
    work_request read = inl(3, 8);
    read.op           = static_cast<uint8_t>(work_op::rdma_read);
    read.rkey         = c.mr.rkey;
    read.remote_addr  = c.addr();
    c.post(read);
    c.post(inl(4, slot)); /* the largest that fits */
    ASSERT_TRUE(run_until([&] {
        return c.done.size() == 4 && c.inbound.size() == 1;
    })) << a.status();
    const completion_status want[] = {completion_status::invalid,
                                      completion_status::invalid,
                                      completion_status::invalid,
                                      completion_status::success};
    for (size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(c.done[i].wr_id, i + 1);
        EXPECT_EQ(c.done[i].status, static_cast<uint32_t>(want[i]))
                << "wr_id " << i + 1;
    }
    EXPECT_EQ(a.logged("inline length " + std::to_string(slot + 1) +
                       ": the work-data slot holds " + std::to_string(slot)),
              1u);
    EXPECT_EQ(a.logged("lkey 0x" +
                       [&] {
                           char hex[16];
                           std::snprintf(hex, sizeof(hex), "%x", c.mr.lkey);
                           return std::string(hex);
                       }()),
              1u);
    /* the agent's 3rd invalid request: counted, not logged (engine.h,
     * "Log lines"); work_check.* names its value */
    EXPECT_EQ(a.logged("inline operation 4"), 0u);
    EXPECT_EQ(json_number(a.status(), "invalid"), 3u);
}

TEST(engine_inline, a_nic_that_carries_less_than_the_slot_is_refused)
{
    agent::testing::loopback_fabric fabric;
    agent::testing::loopback_options o;
    o.max_inline = 64;
    agent::testing::loopback_nic nic(fabric, o);
    auto layout = shm_layout::make({64, 32, 16, 256, 128}).value();
    auto e      = agent::engine::create(nic, {}, layout, job_key, 1,
                                        agent::no_auth(), [](std::string_view) {});
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.error().find("the work-data slot is 128 bytes and the nic "
                             "carries at most 64 inline"),
              std::string::npos)
            << e.error();
}

} // namespace
} // namespace engine_test
