/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine and its clients' lives (agent/engine/engine.h, "Dead clients"),
 * through real sessions and the loopback nic (engine_fixture.h): a client
 * that dies with ops posted and queued, an index reused meanwhile, and an
 * MR released while an op still uses it.
 */
#include "test/gtest/unit/engine_fixture.h"

#include <future>

namespace engine_test {
namespace {

class dead_clients : public engine_fixture {
protected:
    /* A client died with ops held on `qps`: five grace times later its MR
     * must still be there; once the QPs run, `survivor`'s `n` ops all
     * succeed, in order, and the dead client's cleanup finishes. */
    void expect_mr_outlives_the_held_ops(agent_node &a,
                                         const std::vector<uint32_t> &qps,
                                         uint32_t dead_mr,
                                         test_client &survivor, size_t n)
    {
        run_for(100ms);
        EXPECT_TRUE(a.nic->has_mr(dead_mr))
                << "the dead client's MR was deregistered under its posted "
                   "ops";
        a.hold(qps, false);
        ASSERT_TRUE(run_until([&] {
            return survivor.done.size() == n &&
                   json_number(a.status(), "gone_waiting") == 0;
        })) << a.status();
        EXPECT_EQ(survivor.count(completion_status::success), n);
        for (uint64_t i = 0; i < n; ++i) {
            EXPECT_EQ(survivor.done[i].wr_id, i + 1);
        }
        EXPECT_EQ(json_number(a.status(), "qp_errors"), 0u)
                << "the shared QPs broke under the dead client's ops";
        EXPECT_FALSE(a.nic->has_mr(dead_mr));
    }
};

/* A client dies with ops on a QP (held there) and more behind them in the
 * lane's backlog: the queued ones never reach the device, the posted ones
 * finish, and only then (and a grace time) is its MR deregistered; a
 * neighbour's ops on the same QPs all succeed. */
TEST_F(dead_clients, a_dead_clients_ops_are_dropped_and_its_mr_freed_after)
{
    agent_options o;
    o.nic.sq_depth      = 4;
    agent_node &a       = add_agent(o);
    test_client &x      = attach(a);
    test_client &y      = attach(a);
    const uint32_t px   = peer(x, a);
    const uint32_t py   = peer(y, a);
    const uint32_t x_mr = x.mr.handle;
    const auto qps      = a.loopback_qps();
    a.hold(qps, true);
    for (uint64_t i = 1; i <= 12; ++i) { /* one lane: 4 posted, 8 queued */
        x.post(x.write(px, x, i));
    }
    for (uint64_t i = 1; i <= 6; ++i) {
        y.post(y.write(py, y, i));
    }
    pump();
    ASSERT_EQ(a.nic->stats().ops_executed, 0u);

    kill(x);
    expect_mr_outlives_the_held_ops(a, qps, x_mr, y, 6);
    EXPECT_EQ(json_number(a.status(), "clients_gone"), 1u);
    EXPECT_EQ(a.nic->stats().ops_executed, 4u + 6u)
            << "only the dead client's posted ops may run, not its queued";
    EXPECT_TRUE(a.nic->has_mr(y.mr.handle));
    EXPECT_EQ(json_number(a.status(), "mrs_cleaned"), 1u);
    EXPECT_TRUE(a.engine->idle()) << a.status();
}

/* A client registers, dies before it announces the MR (only its intent
 * reached the agent): the agent finds the MR by that intent and
 * deregisters it with the client's other MRs. A neighbour that meant to
 * register the very same region keeps its MR: the agent cannot tell whose
 * it is. */
TEST_F(dead_clients, an_mr_registered_and_never_announced_goes_with_its_client)
{
    agent_node &a       = add_agent();
    test_client &y      = attach(a);
    test_client &x      = attach_as(a, {}); /* registered, not announced */
    const uint32_t x_mr = x.mr.handle;
    const uint32_t y_mr = y.mr.handle;
    /* the agent has seen n clients go and finished with their MRs */
    const auto cleaned_up = [&](uint64_t n) {
        return run_until([&] {
            return json_number(a.status(), "clients_gone") == n &&
                   json_number(a.status(), "gone_waiting") == 0;
        });
    };
    x.intend(x.memory.data(), x.memory.size());
    pump();
    kill(x);
    ASSERT_TRUE(cleaned_up(1)) << a.status();
    EXPECT_FALSE(a.nic->has_mr(x_mr)) << "the unannounced MR stays pinned";
    EXPECT_TRUE(a.nic->has_mr(y_mr));
    EXPECT_EQ(json_number(a.status(), "mrs_unannounced"), 1u);
    EXPECT_EQ(json_number(a.status(), "mrs_cleaned"), 1u);

    /* the same, with y meaning to register z's region too */
    test_client &z      = attach_as(a, {});
    const uint32_t z_mr = z.mr.handle;
    z.intend(z.memory.data(), z.memory.size());
    y.intend(z.memory.data(), z.memory.size());
    pump();
    kill(z);
    ASSERT_TRUE(cleaned_up(2)) << a.status();
    EXPECT_TRUE(a.nic->has_mr(z_mr))
            << "an MR a live client may own was deregistered";
    EXPECT_EQ(json_number(a.status(), "mrs_unannounced"), 1u);
    EXPECT_TRUE(a.nic->has_mr(y_mr));
}

/* The same, but a new client takes the dead one's index while its ops are
 * still posted: the new holder of the index must not make the agent think
 * the old one's ops are done. */
TEST_F(dead_clients, a_reused_index_does_not_free_the_dead_clients_mr_early)
{
    agent_node &a          = add_agent();
    test_client &x         = attach(a);
    test_client &y         = attach(a);
    const uint32_t px      = peer(x, a);
    const uint32_t py      = peer(y, a);
    const uint32_t x_mr    = x.mr.handle;
    const uint32_t x_index = x.index();
    const auto qps         = a.loopback_qps();
    a.hold(qps, true);
    for (uint64_t i = 1; i <= 4; ++i) {
        x.post(x.write(px, x, i));
        y.post(y.write(py, y, i));
    }
    pump();

    kill(x);
    run_for(10ms);
    test_client &z = attach(a);
    ASSERT_EQ(z.index(), x_index) << "the test needs the index reused";
    expect_mr_outlives_the_held_ops(a, qps, x_mr, y, 4);
}

/* A client releases an MR that one of its posted ops still reads: the
 * agent deregisters it only once that op is done, and answers the
 * client's release then. */
TEST_F(engine_fixture, an_mr_released_while_an_op_uses_it_goes_after_the_op)
{
    agent_node &a     = add_agent();
    test_client &c    = attach(a);
    const uint32_t me = peer(c, a);
    std::vector<uint8_t> extra(4096);
    const loopback_mr m2 = a.nic->register_memory(extra.data(), extra.size(),
                                                  remote_rw);
    c.announce(m2, extra.data(), extra.size());
    const auto qps = a.loopback_qps();
    a.hold(qps, true);
    work_request wr = c.write(me, c, 1);
    wr.local_addr   = reinterpret_cast<uintptr_t>(extra.data());
    wr.lkey         = m2.lkey;
    c.post(wr);
    pump();

    const client::memory_region region{m2.handle, m2.lkey, m2.rkey,
                                       extra.data(), extra.size()};
    auto released = std::async(std::launch::async, [&] {
        return c.session->deregister_memory(region, 5000ms);
    });
    for (int i = 0; i < 200; ++i) {
        pump();
        std::this_thread::sleep_for(100us);
    }
    EXPECT_TRUE(a.nic->has_mr(m2.handle)) << "deregistered under its op";
    EXPECT_EQ(json_number(a.status(), "mrs_deferred"), 1u);
    EXPECT_EQ(released.wait_for(0s), std::future_status::timeout)
            << "the release was answered before the MR was gone";

    a.hold(qps, false);
    while (released.wait_for(0s) != std::future_status::ready) {
        pump();
    }
    auto r = released.get();
    EXPECT_TRUE(r.ok()) << r.error();
    EXPECT_FALSE(a.nic->has_mr(m2.handle));
    EXPECT_TRUE(a.nic->has_mr(c.mr.handle));
    ASSERT_TRUE(run_until([&] { return c.done.size() == 1; }));
    EXPECT_EQ(c.done[0].status,
              static_cast<uint32_t>(completion_status::success));
    EXPECT_EQ(json_number(a.status(), "mrs_released"), 1u);
}

/* A client whose shared memory claims a work-ring head no ring can have
 * (corrupt, or hostile) is detached with a log line saying why, so that
 * its process sees the agent's socket close instead of waiting for work
 * that can never be read; another client of the agent keeps working. */
TEST_F(engine_fixture, a_client_that_corrupts_its_work_ring_is_detached)
{
    agent_node &a     = add_agent();
    test_client &bad  = attach(a);
    test_client &good = attach(a);
    const uint32_t me = peer(good, a);
    const auto &at    = bad.session->attached();
    at.shm.at<ring_indices>(at.layout.work_offset)
            ->head.store(1u << 30, std::memory_order_release);
    EXPECT_TRUE(run_until([&] { return a.server->attached_count() == 1; }))
            << "the client with the corrupt ring is still attached";
    EXPECT_EQ(a.logged("work ring's head index is beyond the ring"), 1u);
    EXPECT_EQ(json_number(a.status(), "corrupt_detached"), 1u);
    good.post(good.write(me, good, 1));
    ASSERT_TRUE(run_until([&] { return good.done.size() == 1; }));
    EXPECT_EQ(good.done[0].status,
              static_cast<uint32_t>(completion_status::success));
}

} // namespace
} // namespace engine_test

namespace engine_test {
namespace {

/* client_table.h, "Which clients a pass visits" */
class visits : public engine_fixture {
protected:
    /* head - tail of c's work ring: requests the agent has not taken */
    static uint32_t untaken(test_client &c)
    {
        const shm_layout &l = c.session->attached().layout;
        auto &idx = *c.session->attached().shm.at<ring_indices>(l.work_offset);
        return idx.head.load() - idx.tail.load();
    }
};

/* More than a pass takes from one client (work_batch) is posted with one
 * summary bit: the rest is taken in the passes after, with no new bit and
 * no full scan. */
TEST_F(visits, work_left_in_a_ring_is_taken_in_the_next_passes)
{
    agent_options o;
    o.caps                    = {128, 128, 16, 256};
    o.engine.full_scan_period = std::chrono::hours(1);
    agent_node &a             = add_agent(o);
    test_client &c            = attach(a);
    const uint32_t me         = peer(c, a);
    constexpr uint64_t n      = 100;
    for (uint64_t i = 1; i <= n; ++i) {
        ASSERT_EQ(c.session->post(c.write(me, c, i)),
                  client::post_status::posted);
    }
    for (int i = 0; i < 8 && untaken(c) > 0; ++i) {
        pump();
    }
    EXPECT_EQ(untaken(c), 0u) << "work left in the ring after a pass waited "
                                 "for a new bit";
    ASSERT_TRUE(run_until([&] { return c.done.size() == n; })) << a.status();
    EXPECT_EQ(c.count(completion_status::success), n);
    EXPECT_EQ(json_number(a.status(), "scan_found"), 0u);
}

/* Any client can write the summary: one that clears another's bit delays
 * its work until the full scan, which finds it, and loses nothing. */
TEST_F(visits, a_cleared_summary_bit_delays_work_until_the_full_scan)
{
    agent_options o;
    o.engine.full_scan_period = 300ms;
    agent_node &a             = add_agent(o);
    test_client &victim       = attach(a);
    test_client &vandal       = attach(a);
    const uint32_t me         = peer(victim, a);
    auto *summary = vandal.session->attached().summary.at<work_summary_line>(0);
    /* every bit set: the indices no client holds are passed over */
    for (uint32_t w = 0; w < work_summary_words; ++w) {
        summary[w].bits.store(~uint64_t{0});
    }
    ASSERT_EQ(victim.session->post(victim.write(me, victim, 1)),
              client::post_status::posted);
    ASSERT_TRUE(run_until([&] { return victim.done.size() == 1; }))
            << a.status();
    /* every bit cleared after the victim's post */
    ASSERT_EQ(victim.session->post(victim.write(me, victim, 2)),
              client::post_status::posted);
    for (uint32_t w = 0; w < work_summary_words; ++w) {
        summary[w].bits.store(0);
    }
    ASSERT_TRUE(run_until([&] { return victim.done.size() == 2; }))
            << "the full scan never found the work; " << a.status();
    EXPECT_EQ(victim.count(completion_status::success), 2u);
    /* found by the scan, not by a bit: the clearing did take effect */
    EXPECT_EQ(json_number(a.status(), "scan_found"), 1u);
}

} // namespace
} // namespace engine_test
