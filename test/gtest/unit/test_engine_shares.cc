/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What one process may take of its agent, on the host (engine_fixture.h),
 * and the log lines a client can cause:
 *
 *   process_share  the peers made at a process's requests are charged to
 *                  the process (its SO_PEERCRED pid), whichever of its
 *                  attachments asks, and stay charged until their
 *                  record is recycled: attaching again buys nothing, and
 *                  another process has a share of its own
 *                  (client_share.h, "peers");
 *   client_lines   whatever a client sends on its ring and socket, the
 *                  log gets a line at the 1st, 2nd, 4th, ... time of
 *                  each kind (format.h, worth_logging).
 *
 * docs/reliability.md's "Hostile input" table points here.
 */
#include "test/gtest/unit/engine_fixture.h"

#include "uct/ib/rvt/common/conn_wire.h"

#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

namespace engine_test {
namespace {

namespace conn = wire::conn;

/* Where a node that runs no agent would be reached: requests to it go
 * unanswered, so its peer stays connecting until it gives up. */
wire::agent_address silent_address(const loopback_nic &silent)
{
    wire::agent_address where{};
    const agent::gid_bytes gid = silent.gid();
    std::memcpy(where.gid, gid.data(), sizeof(where.gid));
    where.ud_qpn   = silent.ud_qpn();
    where.ud_qkey  = silent.ud_qkey();
    where.agent_id = 0x5eed;
    return where;
}

class process_share : public engine_fixture {
protected:
    /* Nodes that run no agent. */
    void add_silent_nodes(size_t n)
    {
        for (size_t i = 0; i < n; ++i) {
            nodes.push_back(std::make_unique<loopback_nic>(fabric));
        }
    }

    /* `who` asks its agent for the peer at silent node `i`. */
    result<uint32_t> ask(test_client &who, size_t i)
    {
        const wire::agent_address where = silent_address(*nodes[i]);
        return while_serving([&] { return who.session->connect_peer(where); });
    }

    /* Another process of the job (a child: another SO_PEERCRED pid)
     * attaches to `a` and asks for the peer at silent node `i`, while
     * this one serves the agents: "peer N", or why not. */
    std::string ask_from_another_process(agent_node &a, size_t i)
    {
        const wire::agent_address where = silent_address(*nodes[i]);
        const std::string socket        = a.socket;
        return while_serving([&] {
            int pfd[2];
            if (pipe(pfd) != 0) {
                return std::string("pipe failed");
            }
            const pid_t child = fork();
            if (child == 0) {
                close(pfd[0]);
                std::string said;
                auto at = client::attach(socket, job_key, 10000ms);
                if (!at) {
                    said = "attach: " + at.error();
                } else if (auto s = client::session::open(
                                   std::move(at).value());
                           !s) {
                    said = "session: " + s.error();
                } else {
                    auto p = s.value()->connect_peer(where);
                    said = p ? "peer " + std::to_string(p.value()) : p.error();
                }
                (void)!write(pfd[1], said.data(), said.size());
                _exit(0);
            }
            close(pfd[1]);
            std::string said;
            char buf[512];
            for (ssize_t n; (n = read(pfd[0], buf, sizeof(buf))) > 0;) {
                said.append(buf, static_cast<size_t>(n));
            }
            close(pfd[0]);
            waitpid(child, nullptr, 0);
            return said;
        });
    }

    /* Peers of `a` in `state` ("failed", "connecting", ...). */
    static size_t peers_in(const agent_node &a, const std::string &state)
    {
        size_t n          = 0;
        const auto status = a.engine->status_json();
        for (const auto &p : status["peers"]) {
            n += p["state"] == state;
        }
        return n;
    }

    /* What the refusal of a process's next peer says. */
    static std::string made_for_this_process(uint32_t made)
    {
        return std::to_string(made) + " peers made for this process (pid " +
               std::to_string(getpid()) +
               "): expected fewer than max-client-peers (" +
               std::to_string(made) + ") to make another";
    }

    std::vector<std::unique_ptr<loopback_nic>> nodes;
};

/* A process asks for peers without end: at most max-client-peers are made
 * for it, whichever of its attachments asks (a second one, as a second
 * memory domain or UCT interface has, draws on the same share); one it
 * has costs nothing, and another process still gets its own. */
TEST_F(process_share, a_processs_attachments_draw_on_one_peer_share)
{
    agent_options o;
    o.engine.share.peers = 3;
    agent_node &a        = add_agent(o);
    test_client &c       = attach(a);
    test_client &second  = attach(a); /* the same process again */
    test_client &sibling = attach_sibling(c);
    add_silent_nodes(4);
    for (size_t i = 0; i < 3; ++i) {
        auto r = ask(i == 1 ? second : c, i);
        ASSERT_TRUE(r.ok()) << r.error();
    }
    for (test_client *who : {&c, &second, &sibling}) {
        auto refused = ask(*who, 3);
        ASSERT_FALSE(refused.ok()) << "client " << who->id << " made a 4th";
        EXPECT_NE(refused.error().find(made_for_this_process(3)),
                  std::string::npos)
                << refused.error();
    }
    EXPECT_TRUE(ask(sibling, 0).ok()) << "one it has costs nothing";
    EXPECT_NE(peer(c, a), ~0u) << "the node's own";
    const std::string theirs = ask_from_another_process(a, 3);
    EXPECT_EQ(theirs.rfind("peer ", 0), 0u) << theirs;
    EXPECT_EQ(json_number(a.status(), "refused_peers"), 3u);
    EXPECT_EQ(a.logged("peer request refused"), 2u) << "the 1st and 2nd";
    EXPECT_EQ(a.engine->status_json()["peers"].size(), 5u)
            << "the node's own and 4";
}

/* A process that detaches and attaches again finds its share as it left
 * it: the peers made for it are still there, and still its own. */
TEST_F(process_share, attaching_again_does_not_buy_a_fresh_peer_share)
{
    agent_options o;
    o.engine.share.peers = 2;
    agent_node &a        = add_agent(o);
    add_silent_nodes(3);
    test_client &c = attach(a);
    ASSERT_TRUE(ask(c, 0).ok());
    ASSERT_TRUE(ask(c, 1).ok());
    kill(c);
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "clients_gone") == 1;
    })) << a.status();
    test_client &again = attach(a);
    auto refused       = ask(again, 2);
    ASSERT_FALSE(refused.ok()) << "attaching again reset the share";
    EXPECT_NE(refused.error().find(made_for_this_process(2)), std::string::npos)
            << refused.error();
    EXPECT_TRUE(ask(again, 0).ok()) << "one it has costs nothing";
    EXPECT_EQ(json_number(a.status(), "peers_made"), 2u) << a.status();
}

/* A peer's charge lasts as long as its record: once the record is
 * recycled for another address (peer_table.h, "Half-open": its peer
 * never connected, nobody uses it, it holds nothing), here by handshake
 * requests from new addresses, the process that had it made may make
 * another. Until then, detaching changes nothing. */
TEST_F(process_share, a_peers_charge_ends_when_its_record_is_recycled)
{
    agent_options o = [] {
        agent_options q;
        agent::peer_config &p   = q.engine.peers;
        p.retry_interval        = 10ms;
        p.max_retry_interval    = 20ms;
        p.reconnect_delay       = 10ms;
        p.keepalive_interval    = 20ms;
        p.keepalive_timeout     = 40ms;
        p.give_up_timeout       = 200ms;
        p.max_handshake_retries = 2;
        return q;
    }();
    o.engine.share.peers = 2;
    agent_node &a        = add_agent(o);
    add_silent_nodes(3);
    test_client &c = attach(a);
    ASSERT_TRUE(ask(c, 0).ok());
    ASSERT_TRUE(ask(c, 1).ok());
    kill(c);
    test_client &again = attach(a);
    /* Not asked by a request: its peers may have failed by now, and a
     * request would recycle one of its own records, its charge moving to
     * the new address (client_share.h, make_peer) */
    ASSERT_EQ(json_number(a.status(), "peers_made"), 2u)
            << "its records are still there: " << a.status();

    /* its two peers give up; nobody uses them: recyclable */
    ASSERT_TRUE(run_until([&] { return peers_in(a, "failed") == 2; }, 10s))
            << a.status();
    /* two handshake requests, each from a new address, take both records */
    loopback_nic intruder(fabric);
    const agent::gid_bytes a_gid = a.nic->gid();
    std::vector<conn::qp_info> qps(a.engine->num_qps(), {0x1234, 1});
    for (int i = 0; i < 2; ++i) {
        conn::sender s{};
        const agent::gid_bytes i_gid = intruder.gid();
        std::memcpy(s.gid, i_gid.data(), conn::gid_size);
        s.instance_id = 0x1badd00d;
        s.ud_qpn      = intruder.open_ud_qp();
        s.uid         = getuid();
        s.ud_qkey     = intruder.ud_qkey();
        ASSERT_TRUE(
                intruder.send_datagram_from(
                                s.ud_qpn,
                                sealed_by_member(conn::make_request(s, job_key,
                                                                    0, 1, qps,
                                                                    256),
                                                 a_gid),
                                a_gid, a.nic->ud_qpn(), a.nic->ud_qkey())
                        .ok());
    }
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "recycled") == 2;
    })) << a.status();
    auto made = ask(again, 2);
    EXPECT_TRUE(made.ok()) << made.error();
    EXPECT_EQ(json_number(a.status(), "peers_made"), 1u) << a.status();
}

/* ---- the log lines a client can cause ----------------------------------- */

class client_lines : public engine_fixture {};

/* Invalid requests, and announcements the agent refuses: each kind is
 * logged at its 1st, 2nd, 4th, 8th, ... time, the count in the line; the
 * client learns of each in its completion or answer all the same. */
TEST_F(client_lines, each_kind_is_logged_at_the_1st_2nd_4th)
{
    agent_node &a     = add_agent();
    test_client &c    = attach(a);
    const uint32_t me = peer(c, a);
    for (uint64_t i = 1; i <= 20; ++i) {
        work_request wr = c.am(me, c, i, static_cast<uint32_t>(i));
        wr.lkey         = 0xbad0000 + static_cast<uint32_t>(i);
        ASSERT_TRUE(post_when_possible(c, wr));
    }
    ASSERT_TRUE(run_until([&] { return c.done.size() == 20; })) << a.status();
    EXPECT_EQ(c.count(completion_status::invalid), 20u);
    EXPECT_EQ(a.logged("request refused"), 5u)
            << "20: the 1st, 2nd, 4th, 8th and 16th";
    EXPECT_EQ(a.logged("(16 so far)"), 1u);

    for (uint32_t i = 0; i < 20; ++i) {
        loopback_mr forged = c.mr;
        forged.handle      = 5000 + i; /* no MR of the nic */
        auto r = c.announce_raw(forged, c.memory.data(), c.memory.size());
        ASSERT_TRUE(r.ok()) << r.error();
        EXPECT_EQ(r.value().status,
                  static_cast<uint32_t>(wire::announce_status::refused));
    }
    EXPECT_EQ(a.logged(": refused"), 5u);
    /* the agent serves on */
    c.post(c.am(me, c, 100, 100));
    ASSERT_TRUE(run_until([&] { return c.done.size() == 21; }));
    EXPECT_EQ(c.done.back().status,
              static_cast<uint32_t>(completion_status::success));
}

} // namespace
} // namespace engine_test
