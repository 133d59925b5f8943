/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvtd's loop (agent/serve/serve_loop.h) hands its owner a turn and the
 * owner decides: a status request comes in a turn and the owner's answer
 * reaches the client, and an idle pass says whether the agent is idle
 * (rvtd's --linger). The agent is the real engine and attach server on
 * the loopback nic (engine_fixture.h), driven by the loop itself.
 */
#include "test/gtest/unit/engine_fixture.h"

#include "uct/ib/rvt/agent/serve/serve_loop.h"
#include "uct/ib/rvt/client/status.h"

namespace engine_test {
namespace {

using agent::serve_loop;

/* The loop never spins: it sleeps at the first pass without work. */
agent::cpu_policy::settings sleepy()
{
    agent::cpu_policy::settings s;
    s.spin = 0us;
    return s;
}

class serve_loop_test : public engine_fixture {
protected:
    /* Turns until an idle pass's (the status requests answered "{}");
     * nullopt after 5 s. */
    std::optional<serve_loop::turn> until_idle_pass(serve_loop &loop)
    {
        const auto until = steady::now() + 5s;
        while (steady::now() < until) {
            serve_loop::turn t = loop.next();
            for (const auto &r : t.status_requests) {
                loop.answer(r.ticket, "{}");
            }
            if (t.idle_pass) {
                return t;
            }
        }
        return std::nullopt;
    }
};

TEST_F(serve_loop_test,
       a_status_request_comes_in_a_turn_and_the_answer_reaches_its_client)
{
    agent_node &a = add_agent();
    serve_loop loop(*a.engine, *a.server, sleepy());
    /* asleep when it is asked: the socket wakes it */
    ASSERT_TRUE(until_idle_pass(loop).has_value());
    auto asked = std::async(std::launch::async, [&a] {
        return client::query_status(a.socket, true, 5000ms);
    });

    std::vector<serve_loop::status_request> requests;
    const auto until = steady::now() + 5s;
    while (requests.empty() && steady::now() < until) {
        const serve_loop::turn t = loop.next();
        requests                 = t.status_requests;
    }
    ASSERT_EQ(requests.size(), 1u) << "no turn brought the request";
    EXPECT_TRUE(requests[0].human);
    /* the answer goes out when the owner gives it: the loop is not run
     * again before the client has it */
    loop.answer(requests[0].ticket, "the owner's answer");
    ASSERT_EQ(asked.wait_for(5s), std::future_status::ready);
    auto text = asked.get();
    ASSERT_TRUE(text.ok()) << text.error();
    EXPECT_EQ(text.value(), "the owner's answer");
}

TEST_F(serve_loop_test, an_idle_pass_says_whether_a_client_is_attached)
{
    agent_node &a = add_agent();
    serve_loop loop(*a.engine, *a.server, sleepy());
    const serve_loop::turn first = loop.next();
    EXPECT_FALSE(first.idle_pass) << "a pass comes first";
    EXPECT_TRUE(first.status_requests.empty());

    auto t = until_idle_pass(loop);
    ASSERT_TRUE(t.has_value()) << "no idle pass";
    EXPECT_TRUE(t->idle) << "no client, nothing in flight";
    EXPECT_GE(t->now, first.now);

    test_client &c = attach(a);
    t              = until_idle_pass(loop);
    ASSERT_TRUE(t.has_value()) << "no idle pass";
    EXPECT_FALSE(t->idle) << "a client is attached";

    kill(c);
    bool idle        = false;
    const auto until = steady::now() + 5s;
    while (!idle && steady::now() < until) {
        t = until_idle_pass(loop);
        ASSERT_TRUE(t.has_value()) << "no idle pass";
        idle = t->idle;
    }
    EXPECT_TRUE(idle) << "the client is gone, but the agent is not idle";
}

} // namespace
} // namespace engine_test
