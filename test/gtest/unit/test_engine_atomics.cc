/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Atomics through the engine (common/work.h, atomic_*): a client's
 * fetch-and-add and compare-and-swap reach the loopback nic as device
 * atomics on the endpoint's lane, the fetched word comes back in the
 * completion, they keep their endpoint's order with the other operations,
 * and a bad one completes `invalid` naming the value.
 */
#include "test/gtest/unit/engine_fixture.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace engine_test {
namespace {

class atomics : public engine_fixture {
protected:
    static work_request
    atomic(work_op op, uint32_t peer, const test_client &dst, uint64_t wr_id,
           uint64_t word_offset, uint64_t operand, uint64_t compare = 0)
    {
        work_request wr{};
        wr.wr_id          = wr_id;
        wr.op             = static_cast<uint8_t>(op);
        wr.flags          = work_signaled;
        wr.peer           = peer;
        wr.dst_client     = dst.index();
        wr.dst_generation = dst.generation();
        wr.length         = atomic_size;
        wr.operand        = operand;
        wr.compare        = compare;
        wr.rkey           = dst.mr.rkey;
        wr.remote_addr    = dst.addr(word_offset);
        return wr;
    }
    static uint64_t word(const test_client &c, size_t offset)
    {
        uint64_t w;
        std::memcpy(&w, c.memory.data() + offset, sizeof(w));
        return w;
    }
    static void set_word(test_client &c, size_t offset, uint64_t w)
    {
        std::memcpy(c.memory.data() + offset, &w, sizeof(w));
    }
};

constexpr size_t word_at = test_client::landing + 4096;

/* fetch-and-add, then a compare-and-swap that matches, then one that
 * does not: each completion carries the word as it was. */
TEST_F(atomics,
       fetch_add_and_cswap_return_the_old_word_to_itself_and_another_agent)
{
    agent_node &a  = add_agent();
    agent_node &b  = add_agent();
    test_client &c = attach(a);
    test_client &d = attach(b);
    EXPECT_EQ(c.session->attached().features, wire::agent_feature_atomic64);
    struct target {
        test_client *dst;
        uint32_t peer;
    };
    for (const target t : {target{&c, peer(c, a)}, target{&d, peer(c, b)}}) {
        test_client &dst = *t.dst;
        c.done.clear();
        set_word(dst, word_at, 100);
        c.post(atomic(work_op::atomic_fetch_add, t.peer, dst, 1, word_at, 5));
        c.post(atomic(work_op::atomic_cswap, t.peer, dst, 2, word_at, 7, 105));
        c.post(atomic(work_op::atomic_cswap, t.peer, dst, 3, word_at, 9, 1));
        c.post(atomic(work_op::atomic_fetch_add, t.peer, dst, 4, word_at,
                      ~uint64_t{0})); /* -1: wraps like the device's */
        ASSERT_TRUE(run_until([&] { return c.done.size() == 4; }))
                << a.status();
        const uint64_t want[] = {100, 105, 7, 7};
        for (size_t i = 0; i < 4; ++i) {
            EXPECT_EQ(c.done[i].wr_id, i + 1);
            EXPECT_EQ(c.done[i].status,
                      static_cast<uint32_t>(completion_status::success));
            EXPECT_EQ(c.done[i].value, want[i]) << "wr_id " << i + 1;
            EXPECT_EQ(c.done[i].length, atomic_size);
        }
        EXPECT_EQ(word(dst, word_at), 6u);
    }
}

TEST_F(atomics, an_atomic_keeps_its_place_among_the_endpoints_other_operations)
{
    agent_node &a    = add_agent();
    agent_node &b    = add_agent();
    test_client &c   = attach(a);
    test_client &d   = attach(b);
    const uint32_t p = peer(c, b);
    /* hold the QPs so that everything queues, then let it run: a WRITE
     * of 1000 into the word, an add, a READ of the word, another add */
    ASSERT_TRUE(run_until([&] { return !a.qps_to(b).empty(); }));
    a.hold(a.qps_to(b), true);
    set_word(d, word_at, 0);
    const uint64_t thousand = 1000;
    std::memcpy(c.memory.data() + test_client::slot(1), &thousand, 8);
    work_request w = c.write(p, d, 1);
    w.remote_addr  = d.addr(word_at);
    c.post(w);
    c.post(atomic(work_op::atomic_fetch_add, p, d, 2, word_at, 1));
    work_request r = c.write(p, d, 3);
    r.op           = static_cast<uint8_t>(work_op::rdma_read);
    r.remote_addr  = d.addr(word_at);
    c.post(r);
    c.post(atomic(work_op::atomic_fetch_add, p, d, 4, word_at, 10));
    run_for(20ms);
    a.hold(a.qps_to(b), false);
    ASSERT_TRUE(run_until([&] { return c.done.size() == 4; })) << a.status();
    for (size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(c.done[i].wr_id, i + 1);
        EXPECT_EQ(c.done[i].status,
                  static_cast<uint32_t>(completion_status::success));
    }
    EXPECT_EQ(c.done[1].value, 1000u) << "the add ran after the WRITE";
    uint64_t read_back;
    std::memcpy(&read_back, c.memory.data() + test_client::slot(3), 8);
    EXPECT_EQ(read_back, 1001u) << "the READ ran after the add";
    EXPECT_EQ(c.done[3].value, 1001u);
    EXPECT_EQ(c.done[0].value, 0u) << "a WRITE fetches nothing";
    EXPECT_EQ(word(d, word_at), 1011u);
}

TEST_F(atomics, concurrent_adds_of_several_clients_each_fetch_a_distinct_sum)
{
    agent_node &a  = add_agent();
    agent_node &b  = add_agent();
    test_client &t = attach(b);
    std::vector<test_client *> senders{&attach(a), &attach(a), &attach(b)};
    set_word(t, word_at, 0);
    constexpr uint64_t per_client = 40;
    std::map<test_client *, uint32_t> peers;
    for (test_client *s : senders) {
        peers[s] = peer(*s, b);
    }
    for (uint64_t n = 0; n < per_client; ++n) {
        for (test_client *s : senders) {
            ASSERT_TRUE(post_when_possible(*s, atomic(work_op::atomic_fetch_add,
                                                      peers[s], t, n + 1,
                                                      word_at, 1)));
        }
    }
    ASSERT_TRUE(run_until([&] {
        return std::all_of(senders.begin(), senders.end(), [](test_client *s) {
            return s->done.size() == per_client;
        });
    })) << a.status();
    std::set<uint64_t> fetched;
    for (test_client *s : senders) {
        EXPECT_EQ(s->count(completion_status::success), per_client);
        for (const auto &d : s->done) {
            fetched.insert(d.value);
        }
    }
    const uint64_t total = per_client * senders.size();
    EXPECT_EQ(word(t, word_at), total);
    EXPECT_EQ(fetched.size(), total) << "every add saw a different word";
    EXPECT_EQ(*fetched.rbegin(), total - 1);
}

TEST_F(atomics, a_bad_atomic_completes_invalid_naming_the_value)
{
    agent_node &a     = add_agent();
    test_client &c    = attach(a);
    const uint32_t me = peer(c, a);
    work_request mis  = atomic(work_op::atomic_fetch_add, me, c, 1, word_at, 1);
    mis.remote_addr += 4;
    c.post(mis);
    work_request keyed = atomic(work_op::atomic_cswap, me, c, 2, word_at, 1);
    keyed.lkey         = c.mr.lkey;
    c.post(keyed);
    work_request len = atomic(work_op::atomic_cswap, me, c, 3, word_at, 1);
    len.length       = 4;
    c.post(len);
    c.post(atomic(work_op::atomic_fetch_add, me, c, 4, word_at, 1));
    ASSERT_TRUE(run_until([&] { return c.done.size() == 4; })) << a.status();
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(c.done[i].status,
                  static_cast<uint32_t>(completion_status::invalid))
                << "wr_id " << c.done[i].wr_id;
        EXPECT_EQ(c.done[i].value, 0u);
    }
    EXPECT_EQ(c.done[3].status,
              static_cast<uint32_t>(completion_status::success))
            << "the bad ones broke nothing";
    char hex[32];
    std::snprintf(hex, sizeof(hex), "0x%llx",
                  static_cast<unsigned long long>(mis.remote_addr));
    EXPECT_EQ(a.logged(std::string("atomic remote address ") + hex), 1u);
    std::snprintf(hex, sizeof(hex), "0x%x", c.mr.lkey);
    EXPECT_EQ(a.logged(std::string("atomic with lkey ") + hex), 1u);
    /* the agent's 3rd invalid request: counted (the client's `invalid`),
     * not logged (engine.h, "Log lines"); work_check.* names its value */
    EXPECT_EQ(a.logged("atomic length 4: expected 8"), 0u);
    EXPECT_EQ(json_number(a.status(), "invalid"), 3u);
}

TEST_F(atomics, a_device_without_atomics_refuses_them_and_says_so_at_attach)
{
    agent_options o;
    o.nic.can_atomic  = false;
    agent_node &a     = add_agent(o);
    test_client &c    = attach(a);
    const uint32_t me = peer(c, a);
    EXPECT_EQ(c.session->attached().features, 0u);
    c.post(atomic(work_op::atomic_fetch_add, me, c, 1, word_at, 1));
    ASSERT_TRUE(run_until([&] { return c.done.size() == 1; })) << a.status();
    EXPECT_EQ(c.done[0].status,
              static_cast<uint32_t>(completion_status::invalid));
    EXPECT_EQ(a.logged("this device does no atomics"), 1u);
}

} // namespace
} // namespace engine_test
