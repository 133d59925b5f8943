/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The far agent (test/loopback/far_agent.h) against a real engine: what
 * the ten-thousand-node harness (test/bench/rvt_hub_sim.cc) counts on.
 * Each side connects to the other, the connection lives on keepalives
 * alone, a far node that dies is failed by the hub, and one that restarts
 * is connected again as a new instance.
 */
#include "test/gtest/unit/engine_fixture.h"
#include "test/loopback/far_agent.h"

#include <gtest/gtest.h>

namespace engine_test {

using agent::peer_state;
using agent::testing::far_agent;

namespace {

class far_fixture : public engine_fixture {
protected:
    /* The hub: a keepalive after 50 ms idle, lost after 2 s unanswered
     * (a loaded CI host may not run this process for a while), a peer
     * given up 1 s after it was wanted or lost. */
    agent_node &add_hub()
    {
        agent_options o;
        o.engine.peers.keepalive_interval = 50ms;
        o.engine.peers.keepalive_timeout  = 2000ms;
        o.engine.peers.retry_interval     = 20ms;
        o.engine.peers.max_retry_interval = 100ms;
        o.engine.peers.reconnect_delay    = 50ms;
        o.engine.peers.give_up_timeout    = 1000ms;
        m_peers                           = o.engine.peers;
        m_peers.am_size                   = o.caps.slot_size;
        return add_agent(o);
    }

    far_agent &add_far(agent_node &hub)
    {
        far.push_back(std::make_unique<far_agent>(
                fabric, hub.engine->address(),
                agent::testing::far_agent_options{
                        .job_key     = job_key,
                        .instance_id = 0xfa0000 + far.size() * 16,
                        .peers       = m_peers,
                        .auth = agent::secret_auth(fixture_secret).value()}));
        return *far.back();
    }

    /* Pumps the agents and the far ones, until pred() holds. */
    template<class Pred> bool both_until(Pred pred, steady::duration limit)
    {
        const auto until = steady::now() + limit;
        while (!pred()) {
            if (steady::now() > until) {
                return false;
            }
            pump();
            for (auto &f : far) {
                f->pump(steady::now());
            }
            poll_clients();
        }
        return true;
    }

    /* The hub's peer at f's address: its state and reconnects. */
    std::pair<std::string, uint64_t> at_hub(agent_node &hub, const far_agent &f)
    {
        const std::string g = agent::gid_text(f.address().gid);
        const auto status   = hub.engine->status_json();
        for (const auto &p : status.at("peers")) {
            if (p.at("gid") == g) {
                return {p.at("state").get<std::string>(),
                        p.at("reconnects").get<uint64_t>()};
            }
        }
        return {"none", 0};
    }

    agent::peer_config m_peers;
    std::vector<std::unique_ptr<far_agent>> far; /* before the fabric goes */
};

} // namespace

TEST_F(far_fixture, the_hub_reaches_a_far_agent_that_asks_nothing)
{
    agent_node &hub                 = add_hub();
    test_client &c                  = attach(hub);
    far_agent &f                    = add_far(hub);
    const wire::agent_address where = f.address();
    auto asked                      = std::async(std::launch::async,
                                                 [&] { return c.session->connect_peer(where); });
    ASSERT_TRUE(both_until(
            [&] { return asked.wait_for(0s) == std::future_status::ready; },
            5s));
    ASSERT_TRUE(asked.get().ok());
    EXPECT_TRUE(both_until(
            [&] {
                return f.state() == peer_state::connected &&
                       at_hub(hub, f).first == "connected";
            },
            5s))
            << at_hub(hub, f).first << " at the hub, " << to_string(f.state())
            << " far";
    EXPECT_EQ(f.counters().datagrams_refused, 0u);
}

TEST_F(far_fixture, a_far_agent_that_asks_is_answered_and_kept_alive)
{
    agent_node &hub = add_hub();
    far_agent &f    = add_far(hub);
    f.connect(steady::now());
    ASSERT_TRUE(both_until(
            [&] {
                return f.state() == peer_state::connected &&
                       at_hub(hub, f).first == "connected";
            },
            5s))
            << at_hub(hub, f).first << " at the hub, " << to_string(f.state())
            << " far: " << f.failed_why() << "\n"
            << testing::PrintToString(hub.log);
    /* nothing but keepalives, each way, until the far agent took 4 */
    EXPECT_TRUE(
            both_until([&] { return f.counters().keepalives_received >= 4; },
                       20s));
    EXPECT_EQ(f.state(), peer_state::connected);
    EXPECT_EQ(at_hub(hub, f),
              std::make_pair(std::string("connected"), uint64_t{0}));
    EXPECT_EQ(f.counters().send_errors, 0u);
}

TEST_F(far_fixture, a_far_node_that_dies_is_failed_by_the_hub)
{
    agent_node &hub = add_hub();
    far_agent &f    = add_far(hub);
    f.connect(steady::now());
    ASSERT_TRUE(both_until([&] { return at_hub(hub, f).first == "connected"; },
                           5s));
    f.die();
    EXPECT_TRUE(
            both_until([&] { return at_hub(hub, f).first == "failed"; }, 20s))
            << at_hub(hub, f).first;
}

TEST_F(far_fixture, a_far_node_that_restarts_is_connected_as_a_new_instance)
{
    agent_node &hub = add_hub();
    far_agent &f    = add_far(hub);
    f.connect(steady::now());
    ASSERT_TRUE(both_until([&] { return at_hub(hub, f).first == "connected"; },
                           5s));
    const uint64_t before = f.address().agent_id;
    f.restart(steady::now());
    EXPECT_NE(f.address().agent_id, before);
    EXPECT_TRUE(both_until(
            [&] {
                const auto h = at_hub(hub, f);
                return f.state() == peer_state::connected &&
                       h.first == "connected" && h.second >= 1;
            },
            5s))
            << at_hub(hub, f).first << ", " << at_hub(hub, f).second
            << " reconnects at the hub, " << to_string(f.state()) << " far";
}

} // namespace engine_test
