/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine on the host, as rvtd runs it: each agent is the real engine
 * over a loopback_nic (test/loopback) on one shared fabric, with the real
 * attach server on a socket in a temporary directory; each client is a
 * real client::session attached through that socket. All of it lives in
 * this process, and the test drives it: pump() runs one pass of every
 * agent (engine progress, then the attach server), run_until() pumps and
 * reads every client until a condition holds. The one thread is for the
 * client library's calls that wait on the socket for an answer the agent
 * gives in run_once() (attach, connect_peer, a release with reply):
 * while_serving() runs such a call beside the pump.
 *
 * A client's memory is registered with its agent's nic (copy mode: keys
 * are checked and bytes move) and announced to the agent as the client
 * library does it, on the socket; the shared-PD registration itself
 * needs a device.
 *
 * Used by test_engine_*.cc.
 */
#ifndef RVT_TEST_GTEST_UNIT_ENGINE_FIXTURE_H
#define RVT_TEST_GTEST_UNIT_ENGINE_FIXTURE_H

#include "test/loopback/loopback_agent.h"
#include "uct/ib/rvt/client/attach.h"
#include "uct/ib/rvt/client/session.h"
#include "uct/ib/rvt/common/fd_passing.h"
#include "uct/ib/rvt/common/status_json.h"

#include <infiniband/verbs.h>
#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace engine_test {

using namespace rvt;
using namespace std::chrono_literals;
using agent::testing::loopback_agent;
using agent::testing::loopback_fabric;
using agent::testing::loopback_mr;
using agent::testing::loopback_nic;
using agent::testing::loopback_options;
using steady = std::chrono::steady_clock;

inline constexpr const char *job_key = "engine.test";
/* what the UCT MD registers with where the agent does atomics */
inline constexpr int remote_rw = IBV_ACCESS_LOCAL_WRITE |
                                 IBV_ACCESS_REMOTE_WRITE |
                                 IBV_ACCESS_REMOTE_READ |
                                 IBV_ACCESS_REMOTE_ATOMIC;

/* What an agent is built with; the defaults are small, so that rings and
 * queues fill in a few operations. */
inline const std::string fixture_secret = "the fixture's job secret";

/* A handshake datagram sealed as the fixture's agents seal theirs (with
 * the job secret, to the agent at `to`): what a member of the job sends. */
inline wire::conn::message
sealed_by_member(wire::conn::message m, const agent::gid_bytes &to)
{
    auto auth = agent::secret_auth(fixture_secret);
    EXPECT_TRUE(auth.value()->seal(m, to).ok());
    return m;
}

struct agent_options {
    loopback_options nic{};
    agent::engine_config engine{};
    shm_capacities caps{64, 32, 16, 256}; /* work, completion, inbound, AM */
    /* attach_config::index_quarantine: none, so that tests can have an
     * index reused at once */
    std::chrono::milliseconds index_quarantine{0};
    /* the handshake's credentials: by default the job secret every agent
     * of the fixture shares, as a site without MUNGE runs */
    std::function<std::unique_ptr<agent::peer_auth>()> auth = [] {
        return agent::secret_auth(fixture_secret).value();
    };
    /* attach_config::max_socket_read */
    size_t max_socket_read = agent::attach_config{}.max_socket_read;

    agent_options()
    {
        engine.dead_client_grace = 20ms;
        nic.receive_size         = caps.slot_size;
    }
};

/* One rvtd: an agent on the loopback nic (its nic, engine and server,
 * and pump()) and what it logged. */
struct agent_node : loopback_agent {
    std::string socket;
    std::vector<std::string> log;

    /* Log lines that contain `needle`. */
    size_t logged(std::string_view needle) const
    {
        size_t n = 0;
        for (const auto &line : log) {
            n += line.find(needle) != std::string::npos;
        }
        return n;
    }
    std::string status() const
    {
        return engine->status(false);
    }
    /* This node's own peer's QPs, and those towards `other`. */
    std::vector<uint32_t> loopback_qps() const
    {
        return nic->qps_to(nic->gid());
    }
    std::vector<uint32_t> qps_to(const agent_node &other) const
    {
        return nic->qps_to(other.nic->gid());
    }
    void hold(const std::vector<uint32_t> &qps, bool on)
    {
        for (uint32_t q : qps) {
            ASSERT_TRUE(nic->hold(q, on).ok());
        }
    }
};

/* An inbound entry as the client read it, AM bytes copied out. */
struct received {
    inbound_message msg;
    std::vector<std::byte> data;
};

/* What the tests' AMs carry: who sent it (test_client::id: client
 * indices repeat across agents) and its number on its endpoint. */
struct am_payload {
    uint32_t sender;
    uint32_t seq;
};

/* One client process. */
struct test_client {
    uint32_t id      = 0; /* the fixture's number for it, unique */
    agent_node *home = nullptr;
    /* its address on its agent (what its UCT iface address carries),
     * kept after it dies */
    uint32_t attached_index     = 0;
    uint8_t attached_generation = 0;
    std::unique_ptr<client::session> session;
    std::vector<uint8_t> memory = std::vector<uint8_t>(64 * 1024);
    loopback_mr mr{};
    bool reads_inbound = true; /* false: never looks at its inbound ring */
    std::vector<completion> done; /* every completion, in arrival order */
    std::vector<received> inbound; /* every inbound entry, in order */

    uint32_t index() const
    {
        return attached_index;
    }
    uint8_t generation() const
    {
        return attached_generation;
    }
    uint64_t addr(size_t offset = 0) const
    {
        return reinterpret_cast<uintptr_t>(memory.data() + offset);
    }
    int sock() const
    {
        return session->attached().sock.get();
    }
    /* What UCT's check_agent sees when the agent has let the client go:
     * the agent closed its end of the socket. */
    bool agent_closed_socket() const
    {
        pollfd p{sock(), POLLRDHUP, 0};
        return ::poll(&p, 1, 0) > 0 &&
               (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
    }
    /* Tells the agent about an MR of its nic, as registration.cc does
     * (intent, then the announcement, whose answer it waits for, pumping
     * its agent): the agent must accept it. */
    void announce(const loopback_mr &m, void *at, size_t length)
    {
        intend(at, length);
        auto r = announce_raw(m, at, length);
        ASSERT_TRUE(r.ok()) << r.error();
        EXPECT_EQ(r.value().status,
                  static_cast<uint32_t>(wire::announce_status::accepted))
                << "client " << id << ": " << r.value().reason;
    }
    /* The announcement alone (client::announce_memory), with whatever
     * values, and the agent's answer. */
    result<wire::mr_registered_reply>
    announce_raw(const loopback_mr &m, void *at, size_t length)
    {
        const client::memory_region region{m.handle, m.lkey, m.rkey, at,
                                           length};
        auto answer = std::async(std::launch::async, [&] {
            return session->announce_memory(region, 5000ms);
        });
        while (answer.wait_for(0s) != std::future_status::ready) {
            home->pump();
            std::this_thread::sleep_for(100us);
        }
        return answer.get();
    }
    /* Tells the agent it is about to register (at, length), as
     * registration.cc does before its REG_MR. */
    void intend(const void *at, size_t length) const
    {
        auto n = wire::make_mr_intent(reinterpret_cast<uintptr_t>(at), length);
        auto sent = send_with_fds(sock(), std::as_bytes(std::span(&n, 1)), {});
        ASSERT_TRUE(sent.ok()) << sent.error();
    }
    void post(const work_request &wr)
    {
        ASSERT_EQ(session->post(wr), client::post_status::posted)
                << "client " << index() << ": wr_id " << wr.wr_id;
    }
    void poll()
    {
        if (!session) {
            return; /* dead */
        }
        std::array<completion, 16> batch;
        for (size_t n; (n = session->poll_completions(batch)) > 0;) {
            done.insert(done.end(), batch.begin(), batch.begin() + n);
        }
        client::inbound_view v;
        while (reads_inbound && session->peek_inbound(v)) {
            inbound.push_back({v.msg, {v.data.begin(), v.data.end()}});
            session->release_inbound();
        }
    }
    /* Completions with that status. */
    size_t count(completion_status s) const
    {
        size_t n = 0;
        for (const auto &c : done) {
            n += c.status == static_cast<uint32_t>(s);
        }
        return n;
    }
    /* The AMs received, by sender: their sequence numbers in arrival
     * order. */
    std::map<uint32_t, std::vector<uint32_t>> ams_by_sender() const
    {
        std::map<uint32_t, std::vector<uint32_t>> out;
        for (const auto &r : inbound) {
            if (r.msg.kind == static_cast<uint8_t>(inbound_kind::am) &&
                r.data.size() >= sizeof(am_payload)) {
                am_payload p;
                std::memcpy(&p, r.data.data(), sizeof(p));
                out[p.sender].push_back(p.seq);
            }
        }
        return out;
    }

    /* Work requests. Each reads 16 bytes of the first half of memory of
     * its own, by wr_id (an AM's payload is read when the WR runs, maybe
     * after later posts); WRITEs land in the second half. */
    static constexpr size_t landing = 32 * 1024;
    static size_t slot(uint64_t wr_id)
    {
        return (wr_id % (landing / 16)) * 16;
    }
    work_request
    am(uint32_t peer, const test_client &dst, uint64_t wr_id, uint32_t seq)
    {
        return am(peer, dst.index(), dst.generation(), wr_id, seq);
    }
    /* to an address, live or not */
    work_request am(uint32_t peer, uint32_t dst_client, uint8_t dst_generation,
                    uint64_t wr_id, uint32_t seq)
    {
        const size_t offset = slot(wr_id);
        const am_payload p{id, seq};
        std::memcpy(memory.data() + offset, &p, sizeof(p));
        work_request wr{};
        wr.wr_id          = wr_id;
        wr.op             = static_cast<uint8_t>(work_op::send_am);
        wr.flags          = work_signaled;
        wr.am_id          = 7;
        wr.peer           = peer;
        wr.dst_client     = dst_client;
        wr.length         = sizeof(p);
        wr.dst_generation = dst_generation;
        wr.local_addr     = addr(offset);
        wr.lkey           = mr.lkey;
        return wr;
    }
    work_request write(uint32_t peer, const test_client &dst, uint64_t wr_id,
                       uint32_t length = 8)
    {
        const size_t offset = slot(wr_id);
        work_request wr{};
        wr.wr_id          = wr_id;
        wr.op             = static_cast<uint8_t>(work_op::rdma_write);
        wr.flags          = work_signaled;
        wr.peer           = peer;
        wr.dst_client     = dst.index();
        wr.dst_generation = dst.generation();
        wr.length         = length;
        wr.local_addr     = addr(offset);
        wr.lkey           = mr.lkey;
        wr.rkey           = dst.mr.rkey;
        wr.remote_addr    = dst.addr(landing + offset);
        return wr;
    }
};

/* The first member named `key` in `j`, depth first in document order. */
inline const nlohmann::ordered_json *
json_find(const nlohmann::ordered_json &j, std::string_view key)
{
    if (!j.is_structured()) {
        return nullptr;
    }
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (j.is_object() && it.key() == key) {
            return &it.value();
        }
        if (const auto *found = json_find(it.value(), key)) {
            return found;
        }
    }
    return nullptr;
}

/* A number from the engine's status JSON: the first member `key`. */
inline uint64_t json_number(const std::string &json, std::string_view key)
{
    const auto j    = nlohmann::ordered_json::parse(json);
    const auto *one = json_find(j, key);
    if (one == nullptr || !one->is_number_unsigned()) {
        ADD_FAILURE() << "no number \"" << key << "\" in " << json;
        return 0;
    }
    return one->get<uint64_t>();
}

/* An endpoint as the tests name it: the peer index and the client there. */
inline uint64_t endpoint(uint32_t peer, uint32_t dst_client)
{
    return uint64_t{peer} << 32 | dst_client;
}

/* Fails the test unless each endpoint's completions came in the order its
 * requests were posted (the tests number a client's requests upwards);
 * endpoint_of: the endpoint of each wr_id. */
inline void
expect_endpoint_order(const test_client &c,
                      const std::map<uint64_t, uint64_t> &endpoint_of)
{
    std::map<uint64_t, uint64_t> last; /* endpoint -> wr_id */
    for (const auto &d : c.done) {
        auto ep = endpoint_of.find(d.wr_id);
        ASSERT_NE(ep, endpoint_of.end())
                << "client " << c.id << ": completion for wr_id " << d.wr_id
                << ", which it never posted";
        auto prev = last.find(ep->second);
        if (prev != last.end()) {
            EXPECT_LT(prev->second, d.wr_id)
                    << "client " << c.id << ": wr_id " << d.wr_id
                    << " completed after wr_id " << prev->second
                    << " of the same endpoint";
        }
        last[ep->second] = d.wr_id;
    }
}

class engine_fixture : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/rvt-engine-test.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        m_dir = tmpl;
    }

    void TearDown() override
    {
        for (const auto &a : agents) {
            EXPECT_EQ(a->nic->stats().cq_overflows, 0u)
                    << "the engine overran its CQ";
        }
        clients.clear(); /* sessions before the agents they attached to */
        agents.clear();
        std::filesystem::remove_all(m_dir);
    }

    agent_node &add_agent(const agent_options &o = {})
    {
        auto a    = std::make_unique<agent_node>();
        a->socket = m_dir + "/agent" + std::to_string(agents.size()) + ".sock";
        auto *lines = &a->log;
        auto log    = [lines](std::string_view line) {
            lines->emplace_back(line);
        };
        auto made = agent::testing::make_loopback_agent(
                fabric, {.socket           = a->socket,
                         .job_key          = job_key,
                         .agent_id         = 100 + agents.size(),
                         .caps             = o.caps,
                         .nic              = o.nic,
                         .engine           = o.engine,
                         .auth             = o.auth(),
                         .log              = log,
                         .index_quarantine = o.index_quarantine,
                         .max_socket_read  = o.max_socket_read});
        EXPECT_TRUE(made.ok()) << made.error();
        static_cast<loopback_agent &>(*a) = std::move(made).value();
        agents.push_back(std::move(a));
        return *agents.back();
    }

    /* Runs `call` (which waits for the agents) on a thread while this one
     * pumps them; returns what it returned. */
    template<class Call> auto while_serving(Call call)
    {
        auto f = std::async(std::launch::async, call);
        while (f.wait_for(0s) != std::future_status::ready) {
            pump();
            std::this_thread::sleep_for(100us);
        }
        return f.get();
    }

    /* A new client of `a`, with 64 KiB of registered, announced memory. */
    test_client &attach(agent_node &a)
    {
        test_client &c = attach_as(a, {});
        c.announce(c.mr, c.memory.data(), c.memory.size());
        return c;
    }

    /* A sibling attachment of `leader`'s process (attach_wire.h,
     * "Siblings"), as a second UCT interface of its MD gets one: its 64 KiB
     * of memory is registered and announced by the leader, on the
     * leader's socket, and it posts from it on its own rings. */
    test_client &attach_sibling(test_client &leader)
    {
        test_client &c = attach_as(*leader.home,
                                   wire::leader_ref{leader.index(),
                                                    leader.generation()});
        leader.announce(c.mr, c.memory.data(), c.memory.size());
        return c;
    }

    /* A client of `a` (a sibling of `leader` if given) with 64 KiB of
     * memory registered with the nic, not yet announced. */
    test_client &
    attach_as(agent_node &a, std::optional<wire::leader_ref> leader)
    {
        auto c  = std::make_unique<test_client>();
        c->id   = m_next_id++;
        c->home = &a;
        auto at = while_serving([&] {
            return client::attach(a.socket, job_key, 10000ms, leader);
        });
        EXPECT_TRUE(at.ok()) << at.error();
        auto s = client::session::open(std::move(at).value());
        EXPECT_TRUE(s.ok()) << s.error();
        c->session             = std::move(s).value();
        c->attached_index      = c->session->client_index();
        c->attached_generation = c->session->attached().client_generation;
        c->mr = a.nic->register_memory(c->memory.data(), c->memory.size(),
                                       remote_rw);
        clients.push_back(std::move(c));
        return *clients.back();
    }

    /* The peer index under which `c`'s agent reaches agent `to`. */
    uint32_t peer(test_client &c, const agent_node &to)
    {
        const wire::agent_address where = to.engine->address();
        auto r = while_serving([&] { return c.session->connect_peer(where); });
        EXPECT_TRUE(r.ok()) << r.error();
        return r.ok() ? r.value() : ~0u;
    }

    /* The client's process exits: its socket closes, its segment is
     * unmapped. Its memory stays, as a dead process's pages stay pinned
     * by its MRs until the agent deregisters them. */
    void kill(test_client &c)
    {
        c.session.reset();
    }

    void pump()
    {
        for (auto &a : agents) {
            a->pump();
        }
    }

    /* Posts as soon as the client may (its budget or ring may be full):
     * what a UCT endpoint does with a `busy`. False (a test failure)
     * after 5 s. */
    [[nodiscard]] bool
    post_when_possible(test_client &c, const work_request &wr)
    {
        const auto until = steady::now() + 5s;
        while (c.session->post(wr) != client::post_status::posted) {
            if (steady::now() > until) {
                ADD_FAILURE() << "client " << c.id << ": wr_id " << wr.wr_id
                              << " could not be posted for 5 s";
                return false;
            }
            pump();
            poll_clients();
        }
        return true;
    }

    void poll_clients()
    {
        for (auto &c : clients) {
            c->poll();
        }
    }

    /* Pumps and reads until pred() holds; false after `limit`. */
    template<class Pred> bool run_until(Pred pred, steady::duration limit = 5s)
    {
        const auto until = steady::now() + limit;
        while (!pred()) {
            if (steady::now() > until) {
                return false;
            }
            pump();
            poll_clients();
        }
        return true;
    }

    /* Pumps and reads for a while, whatever happens. */
    void run_for(steady::duration d)
    {
        run_until([] { return false; }, d);
    }

    loopback_fabric fabric; /* first: outlives the nics */
    std::vector<std::unique_ptr<agent_node>> agents;
    std::vector<std::unique_ptr<test_client>> clients;

private:
    std::string m_dir;
    uint32_t m_next_id = 1;
};

} // namespace engine_test

#endif
