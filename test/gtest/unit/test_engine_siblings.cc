/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Several attachments of one process (attach_wire.h, "Siblings"; what a
 * UCT MD with several interfaces holds), through real sessions and the
 * loopback nic (engine_fixture.h): a sibling posts on the MRs its leader
 * announced and reads its own rings; the leader's release waits for the
 * ops of its whole group, live or gone; the leader's end ends its
 * siblings, and its MRs outlive their posted ops.
 */
#include "test/gtest/unit/engine_fixture.h"

#include <future>

namespace engine_test {
namespace {

class siblings : public engine_fixture {
protected:
    /* A leader and its sibling on `a`, the sibling with a write from its
     * memory (announced by the leader) held on a loopback QP. */
    std::pair<test_client &, test_client &>
    sibling_with_a_held_write(agent_node &a)
    {
        test_client &l    = attach(a);
        test_client &s    = attach_sibling(l);
        const uint32_t me = peer(s, a);
        a.hold(a.loopback_qps(), true);
        s.post(s.write(me, l, 1));
        pump();
        return {l, s};
    }

    /* The leader releases the sibling's MR (as the MD's rcache does) while
     * the sibling's write from it is held on a QP: the MR must stay until
     * the QPs run, and the release is answered only after. */
    void expect_release_waits_for(agent_node &a, test_client &leader,
                                  const loopback_mr &mr, void *at,
                                  std::vector<uint32_t> qps)
    {
        const client::memory_region region{mr.handle, mr.lkey, mr.rkey, at,
                                           64 * 1024};
        auto released = std::async(std::launch::async, [&] {
            return leader.session->deregister_memory(region, 5000ms);
        });
        for (int i = 0; i < 200; ++i) {
            pump();
            std::this_thread::sleep_for(100us);
        }
        EXPECT_TRUE(a.nic->has_mr(mr.handle))
                << "the leader's MR was deregistered under its sibling's op";
        EXPECT_EQ(released.wait_for(0s), std::future_status::timeout)
                << "the release was answered before the MR was gone";
        a.hold(qps, false);
        while (released.wait_for(0s) != std::future_status::ready) {
            pump();
        }
        auto r = released.get();
        EXPECT_TRUE(r.ok()) << r.error();
        EXPECT_FALSE(a.nic->has_mr(mr.handle));
        EXPECT_EQ(json_number(a.status(), "qp_errors"), 0u);
    }
};

/* A sibling's work is checked against its leader's MRs (and not against
 * another client's of the same process), it gets its own completions, and
 * what is sent to it lands in its own inbound ring. */
TEST_F(siblings, a_sibling_posts_on_its_leaders_mrs_and_reads_its_own_rings)
{
    agent_node &a     = add_agent();
    agent_node &b     = add_agent();
    test_client &l    = attach(a);
    test_client &s    = attach_sibling(l);
    test_client &x    = attach(a); /* same process, not of the group */
    test_client &d    = attach(b);
    const uint32_t ps = peer(s, b);
    ASSERT_NE(s.index(), l.index());

    s.post(s.am(ps, d, 1, 1));
    s.post(s.write(ps, d, 2));
    work_request foreign = s.write(ps, d, 3);
    foreign.lkey         = x.mr.lkey; /* x announced it, not s's leader */
    foreign.local_addr   = x.addr(0);
    s.post(foreign);
    ASSERT_TRUE(run_until([&] { return s.done.size() == 3; }));
    /* a refused request completes at once, overtaking (session.h) */
    std::map<uint64_t, uint32_t> status_of;
    for (const auto &c : s.done) {
        status_of[c.wr_id] = c.status;
    }
    EXPECT_EQ(status_of[1], static_cast<uint32_t>(completion_status::success));
    EXPECT_EQ(status_of[2], static_cast<uint32_t>(completion_status::success));
    EXPECT_EQ(status_of[3], static_cast<uint32_t>(completion_status::invalid))
            << "a sibling posted on an MR of a client outside its group";
    EXPECT_TRUE(l.done.empty() && x.done.empty());
    ASSERT_TRUE(run_until([&] { return d.ams_by_sender()[s.id].size() == 1; }));

    /* and back: to the sibling's index, its ring alone */
    const uint32_t pd = peer(d, a);
    d.post(d.am(pd, s, 10, 1));
    d.post(d.am(pd, l, 11, 1));
    ASSERT_TRUE(run_until([&] {
        return s.ams_by_sender()[d.id].size() == 1 &&
               l.ams_by_sender()[d.id].size() == 1;
    }));
    run_for(20ms);
    EXPECT_EQ(s.ams_by_sender()[d.id].size(), 1u);
    EXPECT_EQ(l.ams_by_sender()[d.id].size(), 1u);
    EXPECT_TRUE(x.ams_by_sender().empty());
}

/* The leader's release of an MR waits for a live sibling's op on it. */
TEST_F(siblings, a_leaders_release_waits_for_a_siblings_op)
{
    agent_node &a = add_agent();
    auto [l, s]   = sibling_with_a_held_write(a);
    expect_release_waits_for(a, l, s.mr, s.memory.data(), a.loopback_qps());
    ASSERT_TRUE(run_until([&] { return s.done.size() == 1; }));
    EXPECT_EQ(s.done[0].status,
              static_cast<uint32_t>(completion_status::success));
}

/* ... and for a gone sibling's posted op (its process keeps going: the
 * interface closed with an op still on a QP). */
TEST_F(siblings, a_leaders_release_waits_for_a_gone_siblings_posted_op)
{
    agent_node &a = add_agent();
    auto [l, s]   = sibling_with_a_held_write(a);
    kill(s);
    run_for(10ms);
    ASSERT_EQ(a.server->client(s.index()), nullptr);
    expect_release_waits_for(a, l, s.mr, s.memory.data(), a.loopback_qps());
}

/* When the leader's attachment ends, its siblings' end too (their
 * sockets close), other clients stay; the leader's MRs are deregistered
 * only after its siblings' posted ops are done. */
TEST_F(siblings, a_leaders_end_ends_its_siblings_and_its_mrs_wait_for_them)
{
    agent_node &a        = add_agent();
    test_client &l       = attach(a);
    test_client &s1      = attach_sibling(l);
    test_client &s2      = attach_sibling(l);
    test_client &y       = attach(a);
    const uint32_t me    = peer(s1, a);
    const uint32_t s1_mr = s1.mr.handle;
    const auto qps       = a.loopback_qps();
    a.hold(qps, true);
    s1.post(s1.write(me, y, 1));
    pump();

    kill(l);
    ASSERT_TRUE(run_until([&] {
        return s1.agent_closed_socket() && s2.agent_closed_socket();
    })) << "the siblings outlived their leader";
    EXPECT_EQ(a.server->client(s1.index()), nullptr);
    EXPECT_EQ(a.server->client(s2.index()), nullptr);
    EXPECT_NE(a.server->client(y.index()), nullptr);
    EXPECT_FALSE(y.agent_closed_socket());
    EXPECT_EQ(a.logged("its leader index " + std::to_string(l.index()) +
                       " is gone"),
              2u);
    EXPECT_EQ(json_number(a.status(), "clients_gone"), 3u);

    run_for(100ms); /* five grace times */
    EXPECT_TRUE(a.nic->has_mr(s1_mr))
            << "the dead leader's MR was deregistered under its sibling's "
               "posted op";
    a.hold(qps, false);
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "gone_waiting") == 0;
    })) << a.status();
    EXPECT_FALSE(a.nic->has_mr(s1_mr));
    EXPECT_FALSE(a.nic->has_mr(l.mr.handle));
    EXPECT_EQ(json_number(a.status(), "qp_errors"), 0u);
    EXPECT_TRUE(a.nic->has_mr(y.mr.handle));
}

} // namespace
} // namespace engine_test
