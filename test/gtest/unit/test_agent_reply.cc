/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client::reply_reader: the agent answers requests in order, so an answer
 * that comes after its request was given up on is read and dropped, never
 * taken for the answer to the next request.
 */
#include "uct/ib/rvt/client/agent_reply.h"
#include "uct/ib/rvt/common/unique_fd.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstring>

using namespace rvt;
using namespace std::chrono_literals;

namespace {

using reply = std::array<std::byte, 152>; /* the size of both replies */

reply filled(uint8_t v)
{
    reply r;
    r.fill(std::byte{v});
    return r;
}

struct reply_fixture : testing::Test {
    void SetUp() override
    {
        int fds[2];
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
        client.reset(fds[0]);
        agent.reset(fds[1]);
    }

    void agent_sends(std::span<const std::byte> bytes)
    {
        ASSERT_EQ(write(agent.get(), bytes.data(), bytes.size()),
                  static_cast<ssize_t>(bytes.size()));
    }

    unique_fd client, agent;
    client::reply_reader reader;
};

} // namespace

TEST_F(reply_fixture, an_answer_in_time_is_read_whole)
{
    agent_sends(filled(1));
    reply got{};
    ASSERT_TRUE(reader.receive(client.get(), got, 1000ms, "connect to peer"));
    EXPECT_EQ(got, filled(1));
    EXPECT_EQ(reader.owed(), 0u);
}

TEST_F(reply_fixture, a_late_answer_is_dropped_before_the_next_one)
{
    reply got{};
    auto r = reader.receive(client.get(), got, 20ms, "connect to peer");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().find("connect to peer: no reply from the agent "
                             "within 20 ms"),
              std::string::npos)
            << r.error();
    EXPECT_EQ(reader.owed(), sizeof(reply));

    /* the first request's answer, then the second's */
    agent_sends(filled(1));
    agent_sends(filled(2));
    ASSERT_TRUE(reader.receive(client.get(), got, 1000ms, "connect to peer"));
    EXPECT_EQ(got, filled(2));
    EXPECT_EQ(reader.owed(), 0u);
}

TEST_F(reply_fixture, a_half_read_answer_owes_only_its_rest)
{
    const reply first = filled(1);
    agent_sends(std::span(first).first(100));
    reply got{};
    ASSERT_FALSE(reader.receive(client.get(), got, 20ms, "deregistering"));
    EXPECT_EQ(reader.owed(), sizeof(reply) - 100);

    agent_sends(std::span(first).subspan(100));
    agent_sends(filled(2));
    ASSERT_TRUE(reader.receive(client.get(), got, 1000ms, "deregistering"));
    EXPECT_EQ(got, filled(2));
}

TEST_F(reply_fixture, a_closed_socket_is_named)
{
    agent.reset();
    reply got{};
    auto r = reader.receive(client.get(), got, 1000ms, "connect to peer");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), "connect to peer: the agent closed its socket");
}
