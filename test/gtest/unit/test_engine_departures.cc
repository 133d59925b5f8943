/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Departed clients (engine.h, "Departed clients"), through the real engine
 * and real sessions (engine_fixture.h): a process detaches, another takes
 * its index, and a sender that still uses the old address (index and
 * generation) reaches nobody: the new holder gets nothing, the receiving
 * agent counts the drops and tells the sending agent once, the sender's
 * client gets a client_gone entry, and its further work to that address
 * fails unposted. Forged control messages are counted and dropped. A
 * client that retires its address (a UCT interface closed while its
 * memory domain's attachment stays) is gone in the same way while it
 * stays attached.
 */
#include "test/gtest/unit/engine_fixture.h"

#include "uct/ib/rvt/agent/engine/engine_tags.h"
#include "uct/ib/rvt/common/imm.h"

namespace engine_test {
namespace {

using agent::nic_opcode;
using agent::nic_send;
using json = nlohmann::ordered_json;

uint64_t stat(const agent_node &a, const char *group, const char *name)
{
    const json s = json::parse(a.status());
    if (!s.contains(group) || !s[group].contains(name)) {
        ADD_FAILURE() << "no " << group << "." << name << " in " << s;
        return 0;
    }
    return s[group][name].get<uint64_t>();
}

size_t inbound_of(const test_client &c, inbound_kind k)
{
    size_t n = 0;
    for (const auto &r : c.inbound) {
        n += r.msg.kind == static_cast<uint8_t>(k);
    }
    return n;
}

class departures_fixture : public engine_fixture {
protected:
    /* y (attached to `at`) dies, and z takes its index: returns z. */
    test_client &replace(agent_node &at, test_client &y)
    {
        const uint32_t index = y.index();
        const auto gone      = json_number(at.status(), "clients_gone");
        kill(y);
        EXPECT_TRUE(run_until([&] {
            return json_number(at.status(), "clients_gone") == gone + 1;
        }));
        test_client &z = attach(at);
        EXPECT_EQ(z.index(), index) << "the test needs the index reused";
        EXPECT_NE(z.generation(), y.generation());
        /* a write notice delivered to z would show */
        z.session->set_write_notices(true);
        return z;
    }

    /* A write with immediate to `y`'s address whose bytes land in a
     * buffer of the receiving agent's nic that no client owns: what the
     * generation guards is the notice (engine.h). */
    work_request stale_write(test_client &from, uint32_t peer,
                             const test_client &y, uint64_t wr_id)
    {
        work_request wr = from.write(peer, y, wr_id);
        wr.op           = static_cast<uint8_t>(work_op::rdma_write_imm);
        wr.rkey         = m_scratch_mr.rkey;
        wr.remote_addr  = reinterpret_cast<uintptr_t>(m_scratch.data());
        return wr;
    }
    void make_scratch(agent_node &at)
    {
        m_scratch_mr = at.nic->register_memory(m_scratch.data(),
                                               m_scratch.size(), remote_rw);
    }

    /* d's peer index for agent `at`, once an AM of d's has reached l
     * there: both agents' peers connected */
    uint32_t reach(test_client &d, agent_node &at, test_client &l)
    {
        const uint32_t to = peer(d, at);
        const size_t had  = l.inbound.size();
        d.post(d.am(to, l, 1, 1));
        EXPECT_TRUE(run_until([&] {
            return l.inbound.size() == had + 1 && !d.done.empty();
        }));
        return to;
    }

    std::vector<uint8_t> m_scratch = std::vector<uint8_t>(4096);
    loopback_mr m_scratch_mr{};
};

/* Messages already on their way when the process leaves (held in a's QPs
 * here) reach the receiving agent after the departure: they are dropped
 * and never reach the index's next holder; the sender has been told at
 * the departure, once, and its further work fails unposted. */
TEST_F(departures_fixture, an_old_address_reaches_nobody_and_fails_its_sender)
{
    agent_node &a     = add_agent();
    agent_node &b     = add_agent();
    test_client &x    = attach(a);
    test_client &y    = attach(b);
    const uint32_t to = peer(x, b);
    make_scratch(b);

    /* the address works while y lives */
    x.post(x.am(to, y, 1, 0));
    ASSERT_TRUE(run_until([&] { return y.inbound.size() == 1; }));

    /* x still uses y's address: an AM and a write with immediate, on the
     * wire (held) while y goes and z takes its index */
    a.hold(a.qps_to(b), true);
    x.post(x.am(to, y, 2, 1));
    x.post(stale_write(x, to, y, 3));
    run_for(5ms);
    test_client &z = replace(b, y);
    ASSERT_TRUE(run_until([&] {
        return inbound_of(x, inbound_kind::client_gone) == 1;
    })) << "the departure was not announced\n"
        << a.status() << b.status();
    a.hold(a.qps_to(b), false);
    ASSERT_TRUE(run_until([&] { return x.done.size() == 3; })) << a.status();
    run_for(20ms);
    EXPECT_TRUE(z.inbound.empty())
            << "the index's new holder got " << z.inbound.size() << " entries";
    const uint64_t dropped = stat(b, "stale", "generation");
    EXPECT_EQ(dropped, 2u) << b.status();
    EXPECT_EQ(json_number(b.status(), "misrouted"), dropped);
    EXPECT_EQ(stat(b, "stale", "detached"), 0u);
    /* told once per connected peer: a, and b's own node */
    EXPECT_EQ(stat(b, "stale", "told"), 2u) << "told once each";
    EXPECT_EQ(stat(a, "departed", "heard"), 1u);
    EXPECT_EQ(inbound_of(x, inbound_kind::client_gone), 1u);

    /* the entry names the destination */
    for (const auto &r : x.inbound) {
        if (r.msg.kind == static_cast<uint8_t>(inbound_kind::client_gone)) {
            EXPECT_EQ(r.msg.peer, to);
            EXPECT_EQ(r.msg.src_client, y.index());
            EXPECT_EQ(r.msg.generation, y.generation());
        }
    }
    /* ops that went out before the news complete normally (RC acked
     * them); those after it fail unposted */
    const uint64_t failed_before = stat(a, "departed", "ops_failed");
    x.post(x.am(to, y, 4, 2));
    ASSERT_TRUE(run_until([&] { return x.done.size() == 4; }));
    EXPECT_EQ(x.done.back().wr_id, 4u);
    EXPECT_EQ(x.done.back().status,
              static_cast<uint32_t>(completion_status::peer_failed));
    EXPECT_EQ(stat(a, "departed", "ops_failed"), failed_before + 1);
    EXPECT_EQ(stat(b, "stale", "generation"), dropped) << "never posted";

    /* the new holder's address works, from the same sender */
    x.post(x.am(to, z, 5, 3));
    ASSERT_TRUE(run_until(
            [&] { return z.inbound.size() == 1 && x.done.size() == 5; }));
    EXPECT_EQ(z.inbound[0].msg.kind, static_cast<uint8_t>(inbound_kind::am));
    EXPECT_EQ(x.done.back().status,
              static_cast<uint32_t>(completion_status::success));
}

/* A sender that sends nothing after the departure learns of it all the
 * same: the receiving agent tells every connected peer when the process
 * goes, not only the peers whose messages arrive afterwards. */
TEST_F(departures_fixture, a_departure_is_announced_to_a_sender_that_is_silent)
{
    agent_node &a     = add_agent();
    agent_node &b     = add_agent();
    test_client &x    = attach(a);
    test_client &y    = attach(b);
    const uint32_t to = peer(x, b);
    x.post(x.am(to, y, 1, 0));
    ASSERT_TRUE(run_until([&] { return y.inbound.size() == 1; }));

    kill(y);
    ASSERT_TRUE(run_until([&] {
        return inbound_of(x, inbound_kind::client_gone) == 1;
    })) << a.status()
        << b.status();
    EXPECT_EQ(stat(b, "stale", "told"), 2u) << "a, and b's own node";
    EXPECT_EQ(json_number(b.status(), "misrouted"), 0u) << "nothing was sent";
    x.post(x.am(to, y, 2, 1));
    ASSERT_TRUE(run_until([&] { return x.done.size() == 2; }));
    EXPECT_EQ(x.done.back().status,
              static_cast<uint32_t>(completion_status::peer_failed));
}

/* The agent's own node: its senders hear of a local departure at once,
 * and their work for it fails without being posted. */
TEST_F(departures_fixture, a_detached_index_fails_its_senders_on_this_node_too)
{
    agent_node &a       = add_agent();
    test_client &x      = attach(a);
    test_client &y      = attach(a);
    const uint32_t self = peer(x, a);
    x.post(x.am(self, y, 1, 0));
    ASSERT_TRUE(run_until([&] { return y.inbound.size() == 1; }));
    kill(y);
    ASSERT_TRUE(run_until([&] {
        return inbound_of(x, inbound_kind::client_gone) == 1;
    })) << a.status();
    EXPECT_EQ(stat(a, "stale", "told"), 1u);
    EXPECT_EQ(stat(a, "departed", "heard"), 1u);
    x.post(x.am(self, y, 2, 1));
    ASSERT_TRUE(run_until([&] { return x.done.size() == 2; }));
    EXPECT_EQ(x.done.back().status,
              static_cast<uint32_t>(completion_status::peer_failed));
    EXPECT_EQ(stat(a, "stale", "detached"), 0u) << "never posted";
}

TEST_F(departures_fixture,
       forged_and_misplaced_controls_are_counted_and_dropped)
{
    agent_node &a     = add_agent();
    agent_node &b     = add_agent();
    test_client &x    = attach(a);
    test_client &y    = attach(b);
    const uint32_t to = peer(x, b);
    (void)peer(y, a);
    (void)peer(y, b);
    x.post(x.am(to, y, 1, 0));
    ASSERT_TRUE(run_until([&] { return y.inbound.size() == 1; }));
    const uint64_t bad = json_number(b.status(), "bad_immediates");

    auto forge = [&](agent_node &from, uint32_t qpn, uint32_t immediate) {
        nic_send s{};
        s.wr_id       = agent::tag::op | 0xfffff0; /* no op of the engine */
        s.opcode      = nic_opcode::send_imm;
        s.signaled    = true;
        s.sge[0]      = from.nic->control_buffer();
        s.num_sge     = 1;
        s.imm         = immediate;
        size_t posted = 0;
        ASSERT_TRUE(from.nic->post(qpn, std::span(&s, 1), posted).ok());
        ASSERT_EQ(posted, 1u);
    };
    const uint32_t gone_y = *imm::encode_control(imm::control_op::client_gone,
                                                 y.index(), y.generation());
    /* a control naming a destination client, and an unknown opcode */
    forge(a, a.qps_to(b).at(0), gone_y | (1u << imm::client_shift));
    forge(a, a.qps_to(b).at(0),
          (3u << imm::kind_shift) | (7u << imm::control_op_shift));
    /* a well-formed client_gone on b's own loopback QP, which b never
     * sends: it must not fail b's own senders to y; nor its answer */
    forge(b, b.loopback_qps().at(0), gone_y);
    forge(b, b.loopback_qps().at(0),
          *imm::encode_control(imm::control_op::gone_heard, y.index(),
                               y.generation()));
    /* an answer to a departure b never announced (y is attached) */
    forge(a, a.qps_to(b).at(0),
          *imm::encode_control(imm::control_op::gone_heard, y.index(),
                               y.generation()));
    ASSERT_TRUE(run_until([&] {
        return json_number(b.status(), "bad_immediates") == bad + 2 &&
               stat(b, "departed", "bad_controls") == 2;
    })) << b.status();
    run_for(20ms);
    EXPECT_EQ(stat(b, "departed", "heard"), 0u);
    EXPECT_EQ(inbound_of(y, inbound_kind::client_gone), 0u);
    EXPECT_EQ(inbound_of(x, inbound_kind::client_gone), 0u);
    /* y still reaches itself, x still reaches y */
    const uint32_t self = peer(y, b);
    y.post(y.am(self, y, 1, 0));
    x.post(x.am(to, y, 2, 1));
    ASSERT_TRUE(run_until([&] { return y.inbound.size() == 3; }));
    EXPECT_EQ(y.count(completion_status::success), 1u);
}

/* A client that leaves (client::leave, as UCT does when it closes an
 * interface or a memory domain) is gone at the agent once leave()
 * returns: nothing sent to it afterwards reaches it, and its senders
 * fail. Without the wait, a message posted right after the close could
 * still be delivered to the closed interface's index (UCX's
 * test_uct_peer_failure). */
TEST_F(departures_fixture, a_client_that_leaves_is_gone_when_leave_returns)
{
    agent_node &a       = add_agent();
    test_client &x      = attach(a);
    test_client &y      = attach(a);
    const uint32_t self = peer(x, a);
    EXPECT_TRUE(while_serving([&] { return y.session->leave(5000ms); }));
    EXPECT_EQ(json_number(a.status(), "clients_gone"), 1u)
            << "leave() returned before the agent let the client go";
    x.post(x.am(self, y, 1, 0));
    ASSERT_TRUE(run_until([&] { return x.done.size() == 1; }));
    EXPECT_EQ(x.done.back().status,
              static_cast<uint32_t>(completion_status::peer_failed));
    EXPECT_TRUE(y.inbound.empty());

    /* an agent that never answers: leave() gives up after its wait */
    test_client &z = attach(a);
    const auto t0  = std::chrono::steady_clock::now();
    EXPECT_FALSE(z.session->leave(50ms)) << "nobody served the socket";
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 50ms);
}

/* A memory domain's leader whose interface closes while the MD stays (UCP
 * destroys a worker and keeps its context: UCX's test_ucp_peer_failure)
 * retires its address: once retire_address() returns, its senders on
 * this node and on another hear client_gone, what they send to it (an
 * AM, an RDMA WRITE into its still registered memory) fails unposted,
 * and nothing more reaches its rings; the attachment stays, with its MRs
 * and its sibling, which still posts on them and is reached. */
TEST_F(departures_fixture, a_retired_address_is_gone_while_its_client_stays)
{
    agent_node &a       = add_agent();
    agent_node &b       = add_agent();
    test_client &l      = attach(a);
    test_client &s      = attach_sibling(l);
    test_client &x      = attach(a);
    test_client &d      = attach(b);
    const uint32_t x_to = peer(x, a);
    const uint32_t d_to = peer(d, a);
    const uint32_t s_to = peer(s, a);
    x.post(x.am(x_to, l, 1, 1));
    d.post(d.am(d_to, l, 1, 2));
    ASSERT_TRUE(run_until([&] {
        return l.inbound.size() == 2 && x.done.size() == 1 &&
               d.done.size() == 1;
    }));

    /* an AM on the wire (held in b's QPs) while l retires */
    b.hold(b.qps_to(a), true);
    d.post(d.am(d_to, l, 9, 9));
    run_for(5ms);
    auto retired = while_serving(
            [&] { return l.session->retire_address(5000ms); });
    ASSERT_TRUE(retired.ok()) << retired.error();
    /* posted as soon as it returns: this node knows already */
    x.post(x.am(x_to, l, 2, 3));
    x.post(x.write(x_to, l, 3));
    ASSERT_TRUE(run_until([&] {
        return inbound_of(x, inbound_kind::client_gone) == 1 &&
               inbound_of(d, inbound_kind::client_gone) == 1;
    })) << "the departure was not announced\n"
        << a.status() << b.status();
    b.hold(b.qps_to(a), false);
    d.post(d.am(d_to, l, 2, 4));
    d.post(d.write(d_to, l, 3));
    /* the held AM completes at its sender (RC acked it), and is dropped */
    ASSERT_TRUE(run_until(
            [&] { return x.done.size() == 3 && d.done.size() == 4; }));
    EXPECT_EQ(stat(a, "stale", "detached"), 1u) << a.status();
    for (test_client *c : {&x, &d}) {
        EXPECT_EQ(c->count(completion_status::peer_failed), 2u)
                << "client " << c->id;
    }
    run_for(20ms);
    EXPECT_EQ(l.inbound.size(), 2u) << "a retired address was reached";

    /* the attachment, its MRs and its sibling stay */
    EXPECT_NE(a.server->client(l.index()), nullptr);
    EXPECT_FALSE(l.agent_closed_socket());
    EXPECT_FALSE(s.agent_closed_socket());
    s.post(s.write(s_to, x, 4));
    x.post(x.am(x_to, s, 5, 5));
    ASSERT_TRUE(run_until([&] {
        return s.done.size() == 1 && x.done.size() == 4 &&
               s.ams_by_sender()[x.id].size() == 1;
    }));
    EXPECT_EQ(s.done[0].status,
              static_cast<uint32_t>(completion_status::success));
    EXPECT_EQ(x.done.back().status,
              static_cast<uint32_t>(completion_status::success));
    EXPECT_EQ(json_number(a.status(), "clients_gone"), 0u);
}

/* The departure barrier (departure_barrier.h): a retirement is answered
 * only once every peer agent told of it has said it heard, so that a
 * sender elsewhere that posts to the retired address after the client's
 * call returns fails, as it would over rc_verbs, instead of writing into
 * the memory the process still has registered. Here b's answer is held
 * in b's QPs: the retirement waits until it arrives. */
TEST_F(departures_fixture, a_retirement_is_answered_once_the_peers_told_heard)
{
    agent_node &a       = add_agent();
    agent_node &b       = add_agent();
    test_client &l      = attach(a);
    test_client &d      = attach(b);
    const uint32_t d_to = reach(d, a, l);

    b.hold(b.qps_to(a), true);
    auto retired = std::async(std::launch::async, [&] {
        return l.session->retire_address(5000ms);
    });
    ASSERT_TRUE(run_until([&] {
        return inbound_of(d, inbound_kind::client_gone) == 1;
    })) << "b was not told\n"
        << a.status() << b.status();
    run_for(50ms);
    EXPECT_EQ(retired.wait_for(0s), std::future_status::timeout)
            << "answered before b said it heard";
    EXPECT_EQ(stat(a, "departed", "retiring"), 1u);
    b.hold(b.qps_to(a), false);
    ASSERT_TRUE(run_until([&] {
        return retired.wait_for(0s) == std::future_status::ready;
    })) << a.status();
    auto r = retired.get();
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(stat(a, "departed", "retiring"), 0u);
    EXPECT_EQ(stat(a, "departed", "unheard"), 0u);

    /* posted as soon as it returns: b knows already */
    d.post(d.write(d_to, l, 2));
    ASSERT_TRUE(run_until([&] { return d.done.size() == 2; }));
    EXPECT_EQ(d.done.back().status,
              static_cast<uint32_t>(completion_status::peer_failed));
}

/* A peer that never answers holds a retirement for the barrier's wait
 * only (engine_config::departure_wait): then it is answered, counted and
 * logged, well within the client's own wait. */
TEST_F(departures_fixture, a_peer_that_never_answers_holds_a_retirement_briefly)
{
    agent_options o;
    o.engine.departure_wait = 100ms;
    agent_node &a           = add_agent(o);
    agent_node &b           = add_agent();
    test_client &l          = attach(a);
    test_client &d          = attach(b);
    (void)reach(d, a, l);

    b.hold(b.qps_to(a), true);
    const auto t0 = std::chrono::steady_clock::now();
    auto r = while_serving([&] { return l.session->retire_address(5000ms); });
    const auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_GE(took, 100ms);
    EXPECT_LT(took, 2000ms);
    EXPECT_EQ(stat(a, "departed", "unheard"), 1u);
    EXPECT_EQ(a.logged("its retirement answered at the end of its 100 ms wait: "
                       "1 peer told of it had not said they heard"),
              1u);
    /* the late answer changes nothing */
    b.hold(b.qps_to(a), false);
    run_for(20ms);
    EXPECT_EQ(stat(a, "departed", "unheard"), 1u);
    EXPECT_EQ(stat(a, "departed", "retiring"), 0u);
}

} // namespace
} // namespace engine_test
