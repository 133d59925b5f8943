/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hostile input to an agent, on the host (engine_fixture.h): handshake
 * datagrams that are garbage or come from another job's agent, sent to an
 * agent's UD QP by a third node, an RDMA WRITE to an rkey its owner has
 * deregistered; strangers without the job's credential, replays, and
 * agents with another K or AM size; forged MR announcements; and a client
 * that floods its agent (ops beyond its budget, lkeys, peers, its socket,
 * the agent's own ring index). Each is refused or fails for its sender
 * alone, the memory it aimed at is untouched, what the agent holds for it
 * stays within its share (client_share.h), and the agent keeps serving.
 * docs/reliability.md's "Hostile input" table points here.
 */
#include "test/gtest/unit/engine_fixture.h"
#include "test/gtest/unit/munged_fixture.h"

#include "uct/ib/rvt/common/conn_wire.h"

#include <algorithm>
#include <thread>

namespace engine_test {
namespace {

namespace conn = wire::conn;

agent_options quick_peers()
{
    agent_options o;
    agent::peer_config &p = o.engine.peers;
    p.retry_interval      = 10ms;
    p.max_retry_interval  = 20ms;
    p.reconnect_delay     = 10ms;
    return o;
}

/* What arrived at `nic` (a node that runs no agent), parsed. */
std::vector<conn::message> received(loopback_nic &nic)
{
    std::vector<conn::message> out;
    nic.poll_datagrams(
            [&](std::span<const std::byte> b, const auto &) {
                auto m = conn::parse(b);
                EXPECT_TRUE(m.ok()) << m.error();
                if (m.ok()) {
                    out.push_back(m.value());
                }
            },
            SIZE_MAX);
    return out;
}

/* The agent's one remote peer is connected again after a loss. */
bool reconnected(const agent_node &n)
{
    const auto status = n.engine->status_json();
    for (const auto &p : status["peers"]) {
        if (!p["loopback"].get<bool>()) {
            return p["state"] == "connected" &&
                   p["reconnects"].get<uint64_t>() >= 1;
        }
    }
    return false;
}

/* Two agents, one client on each, each client connected to the other's
 * agent. */
struct two_nodes {
    agent_node &a, &b;
    test_client &ca, &cb;
    uint32_t to_b, to_a; /* ca's peer index for b, cb's for a */
};

class hostile : public engine_fixture {
protected:
    /* What arrives at `member` (a node that runs no agent) once something
     * does; empty if nothing came within run_until's limit. */
    std::vector<conn::message> answers_at(loopback_nic &member)
    {
        std::vector<conn::message> answers;
        (void)run_until([&] {
            auto got = received(member);
            answers.insert(answers.end(), got.begin(), got.end());
            return !answers.empty();
        });
        return answers;
    }

    /* `a` with `a_options`, b as quick_peers() */
    two_nodes connect_two(const agent_options &a_options = quick_peers())
    {
        agent_node &a       = add_agent(a_options);
        agent_node &b       = add_agent(quick_peers());
        test_client &ca     = attach(a);
        test_client &cb     = attach(b);
        const uint32_t to_b = peer(ca, b);
        return {a, b, ca, cb, to_b, peer(cb, a)};
    }
    /* a's and b's clients trade one AM each way, and both succeed. */
    void expect_serving(test_client &ca, test_client &cb, uint32_t to_b,
                        uint32_t to_a, uint64_t wr_id);
    /* `thief` (its own agent's peer index: `me`) names the lkey of
     * `mine`, a client of the same agent whose memory holds 0x5e bytes,
     * to SEND that memory to itself and to READ into it: both complete
     * invalid, nothing arrives, the memory is unchanged; then the thief's
     * own AM goes. */
    void expect_neighbours_memory_kept(test_client &thief, test_client &mine,
                                       uint32_t me);
    /* ca posts one AM to cb; true when it arrived. */
    bool
    am_arrives(test_client &ca, test_client &cb, uint32_t to_b, uint64_t wr_id);
};

void hostile::expect_neighbours_memory_kept(test_client &thief,
                                            test_client &mine, uint32_t me)
{
    const size_t done = thief.done.size();
    work_request wr   = thief.am(me, thief, 1, 0);
    wr.local_addr     = mine.addr();
    wr.lkey           = mine.mr.lkey;
    thief.post(wr);
    work_request rd = thief.write(me, thief, 2);
    rd.op           = static_cast<uint8_t>(work_op::rdma_read);
    rd.lkey         = mine.mr.lkey; /* into the neighbour's memory */
    rd.local_addr   = mine.addr();
    thief.post(rd);
    ASSERT_TRUE(run_until([&] { return thief.done.size() == done + 2; }))
            << thief.home->status();
    for (size_t i = done; i < thief.done.size(); ++i) {
        EXPECT_EQ(thief.done[i].status,
                  static_cast<uint32_t>(completion_status::invalid))
                << "wr_id " << thief.done[i].wr_id;
    }
    run_for(20ms);
    EXPECT_TRUE(thief.inbound.empty()) << "the neighbour's bytes were sent";
    EXPECT_TRUE(std::all_of(mine.memory.begin(), mine.memory.end(),
                            [](uint8_t v) { return v == 0x5e; }));

    /* the thief's own work still goes */
    thief.post(thief.am(me, thief, 3, 1));
    ASSERT_TRUE(run_until([&] { return thief.inbound.size() == 1; }));
    EXPECT_EQ(thief.done.back().status,
              static_cast<uint32_t>(completion_status::success));
}

void hostile::expect_serving(test_client &ca, test_client &cb, uint32_t to_b,
                             uint32_t to_a, uint64_t wr_id)
{
    const size_t da = ca.done.size(), db = cb.done.size();
    const size_t ia = ca.inbound.size(), ib = cb.inbound.size();
    ca.post(ca.am(to_b, cb, wr_id, static_cast<uint32_t>(wr_id)));
    cb.post(cb.am(to_a, ca, wr_id, static_cast<uint32_t>(wr_id)));
    ASSERT_TRUE(run_until([&] {
        return ca.done.size() == da + 1 && cb.done.size() == db + 1 &&
               ca.inbound.size() == ia + 1 && cb.inbound.size() == ib + 1;
    })) << ca.home->status()
        << cb.home->status();
    EXPECT_EQ(ca.done.back().status,
              static_cast<uint32_t>(completion_status::success));
    EXPECT_EQ(cb.done.back().status,
              static_cast<uint32_t>(completion_status::success));
}

TEST_F(hostile, garbage_and_foreign_handshakes_are_refused_and_serving_goes_on)
{
    auto [a, b, ca, cb, to_b, to_a] = connect_two();
    expect_serving(ca, cb, to_b, to_a, 1);

    /* a third node that runs no agent, only a UD QP */
    loopback_nic intruder(fabric);
    const agent::gid_bytes a_gid = a.nic->gid();
    const uint32_t a_ud          = a.nic->ud_qpn();
    const uint32_t a_qkey        = a.nic->ud_qkey();

    /* 256 bytes of garbage */
    conn::message junk;
    std::memset(&junk, 0xa5, sizeof(junk));
    ASSERT_TRUE(intruder.send_datagram(junk, a_gid, a_ud, a_qkey).ok());
    /* the intruder's own address */
    conn::sender self{};
    const agent::gid_bytes i_gid = intruder.gid();
    std::memcpy(self.gid, i_gid.data(), conn::gid_size);
    self.instance_id = 0x1badd00d;
    self.ud_qpn      = intruder.ud_qpn();
    self.uid         = getuid();
    self.ud_qkey     = intruder.ud_qkey();
    std::vector<conn::qp_info> qps(a.engine->num_qps(), {0x1234, 1});
    /* a reply to a request a never sent, from a node it does not know yet */
    const uint32_t am = agent_options{}.caps.slot_size;
    const conn::terms terms{static_cast<uint16_t>(qps.size()), am};
    conn::message asked =
            conn::make_request({{}, 100, a_ud, getuid(), a_qkey, 0}, job_key,
                               self.instance_id, 1, qps, am);
    std::memcpy(asked.src.gid, a_gid.data(), conn::gid_size);
    ASSERT_TRUE(intruder.send_datagram(
                                sealed_by_member(
                                        conn::make_reply(self, asked, 0,
                                                         conn::status::accepted,
                                                         terms, qps),
                                        a_gid),
                                a_gid, a_ud, a_qkey)
                        .ok());

    /* then a well-formed request from another job's agent (of the same
     * user, with the same secret: its credential is good) */
    self.uid = 4242;
    ASSERT_TRUE(
            intruder.send_datagram(sealed_by_member(
                                           conn::make_request(self, "other.job",
                                                              0, 1, qps, am),
                                           a_gid),
                                   a_gid, a_ud, a_qkey)
                    .ok());
    std::vector<conn::message> answers;
    ASSERT_TRUE(run_until([&] {
        auto got = received(intruder);
        answers.insert(answers.end(), got.begin(), got.end());
        return !answers.empty() && a.logged("handshake datagram refused") > 0;
    })) << a.status();
    run_for(50ms);
    for (const auto &m : received(intruder)) {
        answers.push_back(m);
    }
    EXPECT_EQ(a.logged("handshake datagram refused: bad magic 0xa5a5a5a5"), 1u);
    /* the reply from a node that is no peer is dropped, counted, logged */
    EXPECT_EQ(json_number(a.status(), "unknown_sender"), 1u);
    EXPECT_EQ(a.logged("which is no peer: dropped (1 so far)"), 1u);
    /* the other job's request is refused, naming why, and only that one is
     * answered */
    ASSERT_EQ(answers.size(), 1u);
    EXPECT_EQ(answers[0].hdr.type,
              static_cast<uint16_t>(conn::msg_type::reply));
    EXPECT_EQ(answers[0].status,
              static_cast<uint16_t>(conn::status::wrong_job_key));
    EXPECT_EQ(answers[0].num_qps, 0u) << "a refusal hands out no QPs";
    /* and teaches nothing: the key and uid it names are the requester's */
    EXPECT_STREQ(answers[0].job_key, "other.job");
    EXPECT_EQ(answers[0].src.uid, 4242u);
    EXPECT_TRUE(intruder.qps_to(a_gid).empty());
    EXPECT_TRUE(a.nic->qps_to(i_gid).empty()) << "QPs made for the intruder";

    /* the real connection never noticed */
    expect_serving(ca, cb, to_b, to_a, 2);
    EXPECT_EQ(ca.count(completion_status::success), 2u);
    EXPECT_EQ(cb.count(completion_status::success), 2u);
}

/* The sender a datagram names (GID, UD QPN, instance id) travels in the
 * clear: a third node copies b's into a disconnect and into a request
 * for a new connection, either of which a would have believed, breaking
 * the live connection. The packet's source GID is not b's: both are
 * dropped and counted, and the connection never noticed. */
TEST_F(hostile, a_datagram_naming_a_real_peer_from_another_node_is_dropped)
{
    auto [a, b, ca, cb, to_b, to_a] = connect_two();
    expect_serving(ca, cb, to_b, to_a, 1);

    loopback_nic intruder(fabric);
    const agent::gid_bytes a_gid = a.nic->gid();
    const uint32_t a_ud          = a.nic->ud_qpn();
    const uint32_t a_qkey        = a.nic->ud_qkey();
    const uint64_t a_id          = a.engine->address().agent_id;
    conn::sender as_b{};
    const agent::gid_bytes b_gid = b.nic->gid();
    std::memcpy(as_b.gid, b_gid.data(), conn::gid_size);
    as_b.instance_id = b.engine->address().agent_id;
    as_b.ud_qpn      = b.nic->ud_qpn();
    as_b.uid         = getuid();
    as_b.ud_qkey     = b.nic->ud_qkey();
    ASSERT_TRUE(
            intruder.send_datagram(conn::make_disconnect(as_b, job_key, a_id),
                                   a_gid, a_ud, a_qkey)
                    .ok());
    std::vector<conn::qp_info> qps(a.engine->num_qps(), {0x1234, 1});
    ASSERT_TRUE(intruder.send_datagram(conn::make_request(as_b, job_key, a_id,
                                                          1000000, qps, 256),
                                       a_gid, a_ud, a_qkey)
                        .ok());
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "forged") == 2;
    })) << a.status();
    EXPECT_EQ(a.logged("names its sender"), 2u) << "logged at 1, 2, 4, ...";
    EXPECT_TRUE(received(intruder).empty()) << "the intruder was answered";
    run_for(50ms);
    expect_serving(ca, cb, to_b, to_a, 2);
    const auto status = a.engine->status_json();
    for (const auto &p : status["peers"]) {
        EXPECT_EQ(p["reconnects"], 0u) << "peer " << p["index"];
        EXPECT_EQ(p["state"], "connected") << "peer " << p["index"];
    }
    EXPECT_EQ(json_number(a.status(), "forged"), 2u);
}

/* A flood of well-formed requests from new addresses (one node, every
 * datagram from a UD QP of its own): at most max_half_open of them hold a
 * peer at once, the rest are answered busy and counted; the half-open
 * peers that fail give their entries to the next new addresses; and a
 * real peer connects and is served all along. */
TEST_F(hostile, a_flood_of_new_addresses_cannot_fill_the_peer_table)
{
    agent_options o          = quick_peers();
    o.engine.max_half_open   = 4;
    o.engine.max_peers       = 8;
    agent::peer_config &pc   = o.engine.peers;
    pc.keepalive_interval    = 20ms;
    pc.keepalive_timeout     = 40ms;
    pc.give_up_timeout       = 200ms;
    pc.max_handshake_retries = 2;
    agent_node &a            = add_agent(o);
    agent_node &b            = add_agent(quick_peers());

    loopback_nic intruder(fabric);
    const agent::gid_bytes a_gid = a.nic->gid();
    const uint32_t a_ud          = a.nic->ud_qpn();
    const uint32_t a_qkey        = a.nic->ud_qkey();
    std::vector<conn::qp_info> qps(a.engine->num_qps(), {0x1234, 1});
    /* n requests, each from a new address: a UD QP of its own (whose
     * answers are lost: the loopback nic keeps none) */
    auto flood = [&](int n) {
        for (int i = 0; i < n; ++i) {
            conn::sender s{};
            const agent::gid_bytes i_gid = intruder.gid();
            std::memcpy(s.gid, i_gid.data(), conn::gid_size);
            s.instance_id = 0x1badd00d;
            s.ud_qpn      = intruder.open_ud_qp();
            s.uid         = getuid();
            s.ud_qkey     = intruder.ud_qkey();
            EXPECT_TRUE(intruder.send_datagram_from(
                                        s.ud_qpn,
                                        sealed_by_member(conn::make_request(
                                                                 s, job_key, 0,
                                                                 1, qps, 256),
                                                         a_gid),
                                        a_gid, a_ud, a_qkey)
                                .ok());
        }
        a.pump();
    };

    flood(6);
    EXPECT_EQ(json_number(a.status(), "half_open"), 4u) << a.status();
    EXPECT_EQ(json_number(a.status(), "half_open_refused"), 2u);
    EXPECT_EQ(a.logged("answered busy: 4 peers are half-open"), 2u);

    /* their keepalives go unanswered: they fail, and hold nothing */
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "half_open") == 0;
    })) << a.status();
    flood(6);
    EXPECT_EQ(json_number(a.status(), "half_open"), 4u) << a.status();
    EXPECT_EQ(json_number(a.status(), "half_open_refused"), 4u);
    EXPECT_EQ(json_number(a.status(), "recycled"), 4u);
    EXPECT_EQ(a.engine->status_json()["peers"].size(), 5u)
            << "the node's own peer and 4 entries, reused";

    /* a real peer, meanwhile, is served: its request comes while the
     * half-open ones hold their entries, so it waits behind a busy
     * answer, or finds an entry once they fail */
    test_client &ca     = attach(a);
    test_client &cb     = attach(b);
    const uint32_t to_a = peer(cb, a);
    cb.post(cb.am(to_a, ca, 1, 1));
    ASSERT_TRUE(run_until([&] { return ca.inbound.size() == 1; }, 10s))
            << a.status() << b.status();
    ASSERT_TRUE(run_until([&] { return cb.done.size() == 1; }));
    EXPECT_EQ(cb.done[0].status,
              static_cast<uint32_t>(completion_status::success));
    EXPECT_EQ(json_number(a.status(), "table_full"), 0u);
    EXPECT_GT(json_number(a.status(), "half_open_refused"), 4u)
            << "b's first request came while 4 were half-open: it was "
               "answered busy, and retried";
    /* that answer went where b's request said b is reached */
    EXPECT_EQ(b.nic->stats().datagrams_qkey_dropped, 0u);
}

TEST_F(hostile, a_write_to_a_deregistered_rkey_fails_its_sender_only)
{
    auto [a, b, ca, cb, to_b, to_a] = connect_two();
    expect_serving(ca, cb, to_b, to_a, 1);

    /* cb registers a buffer, tells ca its rkey (as UCP would), and then
     * deregisters it */
    std::vector<uint8_t> gone(4096, 0x11);
    const loopback_mr m2 = b.nic->register_memory(gone.data(), gone.size(),
                                                  remote_rw);
    cb.announce(m2, gone.data(), gone.size());
    const client::memory_region region{m2.handle, m2.lkey, m2.rkey, gone.data(),
                                       gone.size()};
    auto r = while_serving(
            [&] { return cb.session->deregister_memory(region, 5000ms); });
    ASSERT_TRUE(r.ok()) << r.error();
    ASSERT_FALSE(b.nic->has_mr(m2.handle));

    std::fill(ca.memory.begin(), ca.memory.end(), 0xee);
    work_request wr = ca.write(to_b, cb, 10, 64);
    wr.rkey         = m2.rkey;
    wr.remote_addr  = reinterpret_cast<uintptr_t>(gone.data());
    ca.post(wr);
    ASSERT_TRUE(run_until([&] { return ca.done.size() == 2; })) << a.status();
    EXPECT_EQ(ca.done[1].wr_id, 10u);
    EXPECT_EQ(ca.done[1].status,
              static_cast<uint32_t>(completion_status::failed));
    EXPECT_EQ(ca.done[1].detail, IBV_WC_REM_ACCESS_ERR);
    EXPECT_TRUE(std::all_of(gone.begin(), gone.end(), [](uint8_t v) {
        return v == 0x11;
    })) << "the deregistered buffer was written";
    EXPECT_TRUE(std::none_of(cb.memory.begin(), cb.memory.end(), [](uint8_t v) {
        return v == 0xee;
    })) << "the write landed in cb's live memory";

    /* the shared connection broke (what was in flight on it, either way,
     * failed too); it is made again, and both keep working */
    ASSERT_TRUE(run_until([&] { return reconnected(a) && reconnected(b); }))
            << a.status() << b.status();
    expect_serving(ca, cb, to_b, to_a, 11);
}

/* Two clients of one agent: one names the other's lkey (a real MR of the
 * agent's PD, only not its own) to send the other's memory away. */
TEST_F(hostile, a_neighbours_lkey_is_refused_naming_it)
{
    agent_node &a      = add_agent();
    test_client &mine  = attach(a);
    test_client &thief = attach(a);
    const uint32_t me  = peer(thief, a);
    std::fill(mine.memory.begin(), mine.memory.end(), 0x5e);

    expect_neighbours_memory_kept(thief, mine, me);
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%x", mine.mr.lkey);
    EXPECT_EQ(a.logged(std::string("local lkey ") + hex +
                       ": not an MR this client announced"),
              2u);
}

/* A client announces MRs that are not its own, or values its MR does not
 * have: a neighbour's MR as it is, its own handle with a neighbour's
 * lkey, rkey or address, a length beyond its MR, the agent's own receive
 * pool, a handle no MR has, and its own MR without having said it would
 * register it. Each is refused, the reason naming the values, in the
 * agent's log and in the answer the client library returns; the
 * neighbour's bytes never leave, nor is anything read into them; the
 * pool stays registered; the thief's true announcement is then accepted
 * and its work goes. */
TEST_F(hostile, a_forged_announcement_is_refused_naming_the_values)
{
    agent_node &a      = add_agent();
    test_client &mine  = attach(a);
    test_client &thief = attach_as(a, {}); /* registered, not announced */
    const uint32_t me  = peer(thief, a);
    std::fill(mine.memory.begin(), mine.memory.end(), 0x5e);
    const auto hex = [](uint64_t v) {
        char text[24];
        std::snprintf(text, sizeof(text), "0x%llx",
                      static_cast<unsigned long long>(v));
        return std::string(text);
    };
    const loopback_mr own  = thief.mr;
    const loopback_mr pool = a.nic->receive_pool_mr();
    const uint32_t huge    = 0xfffffff0;
    struct forgery {
        loopback_mr mr;
        void *addr;
        size_t length;
        std::string why;
    };
    void *const thief_at      = thief.memory.data();
    void *const mine_at       = mine.memory.data();
    const size_t size         = thief.memory.size();
    const std::string thief_a = hex(thief.addr());
    const std::vector<forgery> forgeries{
            {mine.mr, mine_at, size,
             "client index " + std::to_string(mine.index()) + " holds it"},
            {{own.handle, mine.mr.lkey, own.rkey},
             thief_at,
             size,
             "lkey " + hex(mine.mr.lkey) + " announced, the device's is " +
                     hex(own.lkey)},
            {{own.handle, own.lkey, mine.mr.rkey},
             thief_at,
             size,
             "rkey " + hex(mine.mr.rkey) + " announced, the device's is " +
                     hex(own.rkey)},
            {own, mine_at, size,
             "address " + hex(mine.addr()) + " announced, the device's is " +
                     thief_a},
            {own, thief_at, size + (1 << 20),
             "length " + std::to_string(size + (1 << 20)) +
                     " announced, the device's is " + std::to_string(size)},
            {pool, thief_at, size, "it is one of the agent's own MRs"},
            {{huge, own.lkey, own.rkey},
             thief_at,
             size,
             "no MR in the agent's PD has that handle"},
    };
    /* its own MR, truly, but it never said it would register it */
    auto r = thief.announce_raw(own, thief_at, size);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(std::string(r.value().reason),
              "this client never said it would register " +
                      std::to_string(size) + " bytes at " + thief_a +
                      " (no mr_intent)");
    uint64_t refusals = 1; /* the agent's so far: the one above */
    for (const forgery &f : forgeries) {
        thief.intend(f.addr, f.length); /* so that only the lie is refused */
        r = thief.announce_raw(f.mr, f.addr, f.length);
        ASSERT_TRUE(r.ok()) << r.error();
        EXPECT_EQ(r.value().status,
                  static_cast<uint32_t>(wire::announce_status::refused))
                << f.why;
        EXPECT_EQ(std::string(r.value().reason), f.why);
        /* logged at the agent's 1st, 2nd, 4th, ... refused announcement
         * (engine.h, "Log lines"); the answer names it every time */
        ++refusals;
        EXPECT_EQ(a.logged("client index " + std::to_string(thief.index()) +
                           " announced MR handle " +
                           std::to_string(f.mr.handle) + ": " + f.why +
                           ": refused (" + std::to_string(refusals) +
                           " so far)"),
                  worth_logging(refusals) ? 1u : 0u)
                << f.why;
    }
    /* the agent's pool cannot be released by it either */
    auto released = while_serving([&] {
        return thief.session->deregister_memory({pool.handle, pool.lkey,
                                                 pool.rkey, thief_at, size},
                                                5000ms);
    });
    EXPECT_FALSE(released.ok());
    EXPECT_TRUE(a.nic->has_mr(pool.handle));
    EXPECT_TRUE(a.nic->has_mr(mine.mr.handle));
    EXPECT_EQ(json_number(a.status(), "mrs_leaked"), 0u);

    /* the truth is accepted; what the forgeries were for, sending the
     * neighbour's memory away and reading into it, is refused all the
     * same, and the thief's own work goes */
    thief.announce(own, thief_at, size);
    expect_neighbours_memory_kept(thief, mine, me);
}

/* The sweep for MRs of dead clients never announced looks up handles up to
 * the highest one announced (engine.cc, find_unannounced): a made-up
 * handle near 2^32 would make it ask the device four billion times in the
 * agent's one loop. It is refused, and the sweep that follows a client's
 * death asks about a few handles and still finds that client's MR. */
TEST_F(hostile, a_gigantic_announced_handle_costs_the_sweep_nothing)
{
    agent_node &a      = add_agent();
    test_client &thief = attach(a);
    const loopback_mr huge{0xfffffff0, thief.mr.lkey, thief.mr.rkey};
    thief.intend(thief.memory.data(), thief.memory.size());
    auto r = thief.announce_raw(huge, thief.memory.data(), thief.memory.size());
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(std::string(r.value().reason),
              "no MR in the agent's PD has that handle");

    test_client &x = attach_as(a, {}); /* registers, dies unannounced */
    x.intend(x.memory.data(), x.memory.size());
    pump();
    const uint64_t asked = a.nic->stats().mr_queries;
    kill(x);
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "clients_gone") == 1 &&
               json_number(a.status(), "gone_waiting") == 0;
    })) << a.status();
    EXPECT_EQ(json_number(a.status(), "mrs_unannounced"), 1u)
            << "the sweep no longer finds what it is for";
    const uint64_t sweep = a.nic->stats().mr_queries - asked;
    EXPECT_GT(sweep, 0u);
    EXPECT_LT(sweep, 1000u) << "the sweep looked that far";
    EXPECT_EQ(a.logged("looked up "), 1u) << "one sweep";
}

/* ---- each client's bounded share (client_share.h) --------------------- */

/* Where a node that runs no agent would be reached: requests to it go
 * unanswered, so its peer stays connecting. */
wire::agent_address address_of(const loopback_nic &silent)
{
    wire::agent_address where{};
    const agent::gid_bytes gid = silent.gid();
    std::memcpy(where.gid, gid.data(), sizeof(where.gid));
    where.ud_qpn   = silent.ud_qpn();
    where.ud_qkey  = silent.ud_qkey();
    where.agent_id = 0x5eed;
    return where;
}

/* The client's work ring, written as a process that ignores its budget
 * would (the session admits no more than its completion ring holds). */
ring_producer<work_request> raw_work_ring(test_client &c)
{
    const auto &at      = c.session->attached();
    const shm_layout &l = at.layout;
    return {*at.shm.at<ring_indices>(l.work_offset),
            {at.shm.at<work_request>(l.work_offset + sizeof(ring_indices)),
             l.caps.work}};
}

/* A member of the status's entry for client `c`. */
nlohmann::ordered_json
client_status(const agent_node &a, const test_client &c, const char *key)
{
    const auto status = a.engine->status_json();
    for (const auto &e : status["client_traffic"]) {
        if (e["index"] == c.index()) {
            return e[key];
        }
    }
    ADD_FAILURE() << "client " << c.index() << " not in the status";
    return {};
}

/* A client that ignores its completion budget and sends to a peer that
 * never connects: the agent holds at most max-client-ops of its ops (here
 * waiting for the connection); the rest complete no_resource at once,
 * counted and logged at the 1st, 2nd, 4th, ..., and another client is
 * served meanwhile. */
TEST_F(hostile, a_client_over_its_share_of_ops_is_refused_and_others_served)
{
    agent_options o;
    o.engine.share.ops = 8;
    o.caps             = {64, 128, 16, 256};
    agent_node &a      = add_agent(o);
    test_client &flood = attach(a);
    test_client &other = attach(a);
    loopback_nic silent(fabric);
    const wire::agent_address nowhere = address_of(silent);
    auto to                           = while_serving(
            [&] { return flood.session->connect_peer(nowhere); });
    ASSERT_TRUE(to.ok()) << to.error();
    auto ring = raw_work_ring(flood);
    for (uint32_t i = 0; i < 64; ++i) {
        ASSERT_TRUE(ring.try_push(flood.am(to.value(), 0, 1, i, i)));
    }
    ASSERT_TRUE(run_until([&] { return flood.done.size() == 56; }))
            << a.status();
    for (uint32_t i = 0; i < 64; ++i) { /* a second ring's worth */
        ASSERT_TRUE(ring.try_push(flood.am(to.value(), 0, 1, 64 + i, i)));
    }
    ASSERT_TRUE(run_until([&] { return flood.done.size() == 120; }))
            << a.status();
    for (const completion &c : flood.done) {
        ASSERT_EQ(c.status,
                  static_cast<uint32_t>(completion_status::no_resource))
                << "wr_id " << c.wr_id;
        EXPECT_EQ(c.detail, static_cast<uint32_t>(agent::share_bound::ops));
        EXPECT_GE(c.wr_id, 8u) << "the first 8 are held, waiting";
    }
    EXPECT_EQ(client_status(a, flood, "held"), 8u);
    EXPECT_EQ(json_number(a.status(), "refused_ops"), 120u);
    EXPECT_EQ(a.logged("expected fewer than max-client-ops (8)"), 7u)
            << "the 1st, 2nd, 4th, ... 64th";
    EXPECT_EQ(a.engine->check_books(), "");

    const uint32_t me = peer(other, a);
    other.post(other.am(me, other, 1, 1));
    ASSERT_TRUE(run_until([&] {
        return other.done.size() == 1 && other.inbound.size() == 1;
    })) << a.status();
    EXPECT_EQ(other.done[0].status,
              static_cast<uint32_t>(completion_status::success));
}

/* lkeys tracked for a client: the ones no op names are dropped at the
 * bound, so a client that uses many MRs one after the other is served;
 * more distinct lkeys than the bound held at once are refused; and a
 * request refused as invalid (lkeys that are no MR of its own) is
 * tracked nowhere. */
TEST_F(hostile, a_client_naming_lkeys_beyond_its_share_is_refused)
{
    agent_options o;
    o.engine.share.lkeys = 4;
    agent_node &a        = add_agent(o);
    test_client &c       = attach(a);
    std::vector<std::vector<uint8_t>> bufs(8, std::vector<uint8_t>(256));
    std::vector<loopback_mr> mrs;
    for (auto &b : bufs) {
        mrs.push_back(a.nic->register_memory(b.data(), b.size(), remote_rw));
        c.announce(mrs.back(), b.data(), b.size());
    }
    const uint32_t me = peer(c, a);
    auto on           = [&](size_t k, uint64_t wr_id, uint32_t to) {
        work_request wr = c.am(to, c, wr_id, static_cast<uint32_t>(wr_id));
        wr.local_addr   = reinterpret_cast<uintptr_t>(bufs[k].data());
        wr.lkey         = mrs[k].lkey;
        return wr;
    };
    for (size_t k = 0; k < mrs.size(); ++k) {
        c.post(on(k, k + 1, me));
        ASSERT_TRUE(run_until([&] { return c.done.size() == k + 1; }));
        EXPECT_EQ(c.done[k].status,
                  static_cast<uint32_t>(completion_status::success))
                << "MR " << k;
    }
    EXPECT_LE(client_status(a, c, "lkeys").get<uint32_t>(), 4u);

    /* held at once, towards a peer that never connects */
    loopback_nic silent(fabric);
    const wire::agent_address nowhere = address_of(silent);
    auto far = while_serving([&] { return c.session->connect_peer(nowhere); });
    ASSERT_TRUE(far.ok()) << far.error();
    for (size_t k = 0; k < 5; ++k) {
        c.post(on(k, 100 + k, far.value()));
    }
    ASSERT_TRUE(run_until([&] { return c.done.size() == 9; })) << a.status();
    EXPECT_EQ(c.done[8].wr_id, 104u);
    EXPECT_EQ(c.done[8].status,
              static_cast<uint32_t>(completion_status::no_resource));
    EXPECT_EQ(c.done[8].detail,
              static_cast<uint32_t>(agent::share_bound::lkeys));
    EXPECT_EQ(a.logged("5 distinct lkeys named by this client's ops with this "
                       "one: expected at most max-client-lkeys (4)"),
              1u);

    /* invalid: refused, and not tracked */
    for (uint32_t i = 0; i < 200; ++i) {
        work_request bad = on(0, 1000 + i, me);
        bad.lkey         = 0x70000 + i;
        ASSERT_TRUE(post_when_possible(c, bad));
    }
    ASSERT_TRUE(run_until([&] { return c.done.size() == 209; })) << a.status();
    EXPECT_EQ(c.count(completion_status::invalid), 200u);
    EXPECT_EQ(client_status(a, c, "lkeys"), 4u) << "the 4 held";
    EXPECT_EQ(json_number(a.status(), "refused_lkeys"), 1u);
    EXPECT_EQ(a.engine->check_books(), "");
}

/* peer_table.h, "Send depths": a process that names addresses nobody
 * answers takes deep places only until those peers fail (the handshake's
 * give-up time), then they are free for real peers again; meanwhile real
 * peers get shallow QPs, which costs speed, never data. */
TEST_F(hostile, made_up_peers_hold_deep_places_only_until_they_fail)
{
    agent_options o;
    o.nic.sq_depth                       = 8;
    o.engine.deep_peers                  = 2;
    o.engine.shallow_sq_depth            = 2;
    o.engine.peers.retry_interval        = 5ms;
    o.engine.peers.max_retry_interval    = 5ms;
    o.engine.peers.max_handshake_retries = 2;
    o.engine.peers.give_up_timeout       = 100ms;
    agent_node &a                        = add_agent(o);
    agent_node &b                        = add_agent(o);
    test_client &liar                    = attach(a);
    test_client &c                       = attach(a);
    attach(b);
    loopback_nic silent1(fabric);
    loopback_nic silent2(fabric);
    for (loopback_nic *n : {&silent1, &silent2}) {
        const wire::agent_address nowhere = address_of(*n);
        auto r                            = while_serving(
                [&] { return liar.session->connect_peer(nowhere); });
        ASSERT_TRUE(r.ok()) << r.error();
    }
    EXPECT_EQ(json_number(a.status(), "deep_peers"), 2u) << a.status();
    const uint32_t to_b = peer(c, b);
    ASSERT_TRUE(run_until([&] { return a.qps_to(b).size() == 4; }))
            << a.status();
    for (uint32_t q : a.qps_to(b)) {
        EXPECT_EQ(a.nic->sq_depth_of(q), 2u) << "no deep place was free";
    }
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "deep_peers") == 0;
    })) << "the made-up peers failed and gave their places back: "
        << a.status();
    EXPECT_EQ(a.engine->status_json()["peers"][to_b]["sq_depth"], 2u)
            << "b keeps the QPs it has";
}

/* A job on more nodes than the agent's peer table holds: the request for
 * one more is refused, naming the setting that raises it. */
TEST_F(hostile, a_peer_beyond_the_table_is_refused_naming_max_peers)
{
    agent_options o    = quick_peers();
    o.engine.max_peers = 2; /* its own node and one more */
    agent_node &a      = add_agent(o);
    agent_node &b      = add_agent(quick_peers());
    agent_node &c      = add_agent(quick_peers());
    test_client &ca    = attach(a);
    peer(ca, b);
    const wire::agent_address to_c = c.engine->address();
    auto r = while_serving([&] { return ca.session->connect_peer(to_c); });
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("2 peers, its maximum (rvtd --max-peers)"),
              std::string::npos)
            << r.error();
}

/* A client that asks for peers without end: the agent makes at most
 * max-client-peers for its process (asking for one it has costs nothing),
 * and refuses the next naming the bound, whichever attachment of the
 * process asks. */
TEST_F(hostile, a_client_asking_for_peers_beyond_its_share_is_refused)
{
    agent_options o;
    o.engine.share.peers = 3;
    agent_node &a        = add_agent(o);
    test_client &c       = attach(a);
    test_client &other   = attach(a);
    std::vector<std::unique_ptr<loopback_nic>> nodes;
    for (int i = 0; i < 4; ++i) {
        nodes.push_back(std::make_unique<loopback_nic>(fabric));
    }
    auto ask = [&](test_client &who, const loopback_nic &n) {
        const wire::agent_address where = address_of(n);
        return while_serving([&] { return who.session->connect_peer(where); });
    };
    for (int i = 0; i < 3; ++i) {
        auto r = ask(c, *nodes[i]);
        ASSERT_TRUE(r.ok()) << r.error();
    }
    auto refused = ask(c, *nodes[3]);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().find("3 peers made for this process (pid " +
                                   std::to_string(getpid()) +
                                   "): expected fewer than max-client-peers "
                                   "(3) to make another"),
              std::string::npos)
            << refused.error();
    EXPECT_TRUE(ask(c, *nodes[0]).ok()) << "one it has";
    EXPECT_NE(peer(c, a), ~0u) << "the node's own";
    /* `other` is this process's too: the share is the process's
     * (client_share.h, "peers"); another process has its own
     * (test_engine_shares.cc, process_share.*) */
    auto theirs = ask(other, *nodes[3]);
    EXPECT_FALSE(theirs.ok()) << "another attachment of the process made one";
    EXPECT_EQ(json_number(a.status(), "refused_peers"), 2u);
    EXPECT_EQ(a.logged("peer request refused"), 2u);
    EXPECT_EQ(a.engine->status_json()["peers"].size(), 4u)
            << "the node's own and 3";
}

/* The work ring's tail is the agent's index, in memory the client can
 * write: a client that moves it away from the head must not keep the
 * agent from sleeping, and its work is still taken by the agent's own
 * count. */
TEST_F(hostile, a_client_writing_the_agents_ring_index_cannot_keep_it_awake)
{
    agent_node &a     = add_agent();
    test_client &c    = attach(a);
    const uint32_t me = peer(c, a);
    c.post(c.am(me, c, 1, 1));
    ASSERT_TRUE(run_until([&] { return c.done.size() == 1; })) << a.status();
    const auto &at = c.session->attached();
    auto &idx      = *at.shm.at<ring_indices>(at.layout.work_offset);
    idx.tail.store(idx.tail.load() + 5); /* after the agent's last store */
    run_for(10ms);
    EXPECT_TRUE(a.engine->prepare_sleep())
            << "a tail the client wrote kept the agent awake";
    a.engine->end_sleep();
    /* the agent counts by its own index: the next request is taken */
    c.post(c.am(me, c, 2, 2));
    ASSERT_TRUE(run_until([&] { return c.done.size() == 2; })) << a.status();
    EXPECT_EQ(c.count(completion_status::success), 2u);
}

/* A client that writes its socket without pause: the agent reads at
 * most max_socket_read bytes of it a pass; a request naming an MR whose
 * notice is behind the flood waits in the ring for it (it is not refused
 * as naming an unknown MR), and another client is served meanwhile. */
TEST_F(hostile, a_client_flooding_its_socket_is_read_a_budget_a_pass)
{
    agent_options o;
    o.max_socket_read    = 4096;
    agent_node &a        = add_agent(o);
    test_client &c       = attach(a);
    test_client &other   = attach(a);
    const uint32_t me    = peer(c, a);
    const uint32_t to_me = peer(other, a);
    std::vector<uint8_t> late(256);
    const loopback_mr m = a.nic->register_memory(late.data(), late.size(),
                                                 remote_rw);
    /* 400 harmless notices (an intent withdrawn), in one send */
    const std::vector<wire::mr_notice> burst(
            400, wire::make_mr_intent(0x1000, 4096, wire::mr_intent_withdrawn));
    const size_t bytes = burst.size() * sizeof(wire::mr_notice);
    ASSERT_EQ(send(c.sock(), burst.data(), bytes, MSG_NOSIGNAL),
              (ssize_t)bytes);
    /* then the MR's intent and announcement, asking no answer (a client
     * that waited for one would have let the agent read the burst first):
     * the request naming it must wait for the rest of the socket, not be
     * refused as naming an MR the agent has not heard of */
    c.intend(late.data(), late.size());
    const auto notice = wire::make_mr_notice(
            wire::msg_type::mr_registered, m.handle, m.lkey, m.rkey,
            reinterpret_cast<uintptr_t>(late.data()), late.size());
    ASSERT_EQ(send(c.sock(), &notice, sizeof(notice), MSG_NOSIGNAL),
              (ssize_t)sizeof(notice));
    work_request wr = c.am(me, c, 1, 1);
    wr.local_addr   = reinterpret_cast<uintptr_t>(late.data());
    wr.lkey         = m.lkey;
    c.post(wr);
    other.post(other.am(to_me, other, 1, 1));
    ASSERT_TRUE(run_until([&] {
        return c.done.size() == 1 && other.done.size() == 1;
    })) << a.status();
    EXPECT_EQ(c.done[0].status,
              static_cast<uint32_t>(completion_status::success))
            << "refused before its notice was read";
    EXPECT_EQ(other.done[0].status,
              static_cast<uint32_t>(completion_status::success));
    EXPECT_GE(json_number(a.status(), "reads_deferred"), 1u);
    EXPECT_GE(a.logged("max-socket-read (4096)"), 1u);
}

/* Zero bytes name no memory: an empty active message and an empty write
 * with immediate arrive, with no MR named, the write's sender named by
 * the agent. */
TEST_F(hostile, zero_length_operations_complete_and_arrive_empty)
{
    auto [a, b, ca, cb, to_b, to_a] = connect_two();
    (void)to_a;
    cb.session->set_write_notices(true);
    work_request am = ca.am(to_b, cb, 1, 0);
    am.length       = 0;
    am.local_addr   = 0;
    am.lkey         = 0;
    ca.post(am);
    work_request w = ca.write(to_b, cb, 2, 0);
    w.op           = static_cast<uint8_t>(work_op::rdma_write_imm);
    w.local_addr   = 0;
    w.lkey         = 0;
    ca.post(w);
    ASSERT_TRUE(run_until([&] {
        return ca.done.size() == 2 && cb.inbound.size() == 2;
    })) << a.status()
        << b.status();
    for (const completion &c : ca.done) {
        EXPECT_EQ(c.status, static_cast<uint32_t>(completion_status::success))
                << "wr_id " << c.wr_id;
        EXPECT_EQ(c.length, 0u);
    }
    EXPECT_EQ(cb.inbound[0].msg.kind, static_cast<uint8_t>(inbound_kind::am));
    EXPECT_TRUE(cb.inbound[0].data.empty());
    EXPECT_EQ(cb.inbound[1].msg.kind,
              static_cast<uint8_t>(inbound_kind::write));
    /* who sent it is the agent's word (a request has no field for it) */
    EXPECT_EQ(cb.inbound[1].msg.src_client, ca.index());
}


/* ---- who may become a peer (peer_auth.h; the fixture's agents share a
 * job secret) ---------------------------------------------------------- */

bool hostile::am_arrives(test_client &ca, test_client &cb, uint32_t to_b,
                         uint64_t wr_id)
{
    const size_t in = cb.inbound.size();
    ca.post(ca.am(to_b, cb, wr_id, static_cast<uint32_t>(wr_id)));
    return run_until([&] { return cb.inbound.size() == in + 1; });
}

/* A request as a node with the job's key and this uid would send. */
/* (`to` runs with the fixture's default capacities) */
conn::message stranger_request(loopback_nic &from, agent_node &to)
{
    conn::sender self{};
    const agent::gid_bytes g = from.gid();
    std::memcpy(self.gid, g.data(), conn::gid_size);
    self.instance_id = 0x5157;
    self.ud_qpn      = from.ud_qpn();
    self.uid         = getuid();
    self.ud_qkey     = from.ud_qkey();
    std::vector<conn::qp_info> qps(to.engine->num_qps(), {0x1234, 1});
    return conn::make_request(self, job_key, 0, 1, qps,
                              agent_options{}.caps.slot_size);
}

TEST_F(hostile, a_stranger_with_the_key_and_uid_but_no_credential_gets_nothing)
{
    agent_node &a       = add_agent(quick_peers());
    agent_node &b       = add_agent(quick_peers());
    test_client &ca     = attach(a);
    test_client &cb     = attach(b);
    const uint32_t to_b = peer(ca, b);
    ASSERT_TRUE(am_arrives(ca, cb, to_b, 1)) << a.status();

    loopback_nic intruder(fabric);
    const agent::gid_bytes a_gid = a.nic->gid();
    /* no credential at all, then one made with a guessed secret */
    conn::message bare = stranger_request(intruder, a);
    ASSERT_TRUE(intruder.send_datagram(bare, a_gid, a.nic->ud_qpn(),
                                       a.nic->ud_qkey())
                        .ok());
    conn::message guessed = stranger_request(intruder, a);
    auto guess            = agent::secret_auth("a guessed secret, long enough");
    ASSERT_TRUE(guess.value()->seal(guessed, a_gid).ok());
    ASSERT_TRUE(intruder.send_datagram(guessed, a_gid, a.nic->ud_qpn(),
                                       a.nic->ud_qkey())
                        .ok());

    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "unauthenticated") == 2;
    })) << a.status();
    run_for(30ms);
    EXPECT_TRUE(received(intruder).empty()) << "the stranger was answered";
    EXPECT_TRUE(a.nic->qps_to(intruder.gid()).empty())
            << "QPs made for the stranger";
    EXPECT_EQ(a.logged("its credential is of kind none: this agent demands "
                       "secret"),
              1u);
    EXPECT_EQ(a.logged("its HMAC does not match"), 1u);
    EXPECT_EQ(a.engine->status_json()["auth"], "secret");
    /* the job's own connection never noticed */
    EXPECT_TRUE(am_arrives(ca, cb, to_b, 2));
}

/* The agent's UD QP has a Q_Key of its run's own, which only its address
 * tells: a datagram naming another (the fixed one every agent had before,
 * "RVTQ", or a guess) is dropped by the device before it takes a receive
 * slot, so the engine never sees it, and a flood of them, twice the
 * receive queue's depth, leaves room for the request that names it, which
 * is believed and answered at the Q_Key it names. */
TEST_F(hostile, a_datagram_naming_another_q_key_never_reaches_the_agent)
{
    agent_node &a = add_agent(quick_peers());
    loopback_nic member(fabric);
    const agent::gid_bytes a_gid = a.nic->gid();
    const uint32_t a_ud          = a.nic->ud_qpn();
    const uint32_t a_qkey        = a.nic->ud_qkey();
    constexpr uint32_t old_qkey  = 0x52565451; /* "RVTQ" */
    ASSERT_NE(a_qkey, old_qkey) << "a 1 in 2^31 draw: run again";
    const conn::message req = sealed_by_member(stranger_request(member, a),
                                               a_gid);
    ASSERT_TRUE(member.send_datagram(req, a_gid, a_ud, old_qkey).ok());
    constexpr uint32_t flood = 2 * agent::ud_receive_depth;
    for (uint32_t i = 0; i < flood; ++i) {
        const uint32_t guess = a_qkey ^ (1 + i % 0x7fff);
        ASSERT_TRUE(member.send_datagram(req, a_gid, a_ud, guess).ok());
    }
    run_for(30ms);
    EXPECT_EQ(a.nic->stats().datagrams_qkey_dropped, 1 + flood);
    EXPECT_EQ(a.nic->counters().datagrams_received, 0u);
    EXPECT_EQ(a.engine->status_json()["handshake"]["received"], 0u)
            << a.status();
    EXPECT_EQ(a.logged("handshake datagram"), 0u) << "the agent saw one";
    EXPECT_TRUE(received(member).empty());

    ASSERT_TRUE(member.send_datagram(req, a_gid, a_ud, a_qkey).ok());
    const std::vector<conn::message> answers = answers_at(member);
    ASSERT_EQ(answers.size(), 1u) << a.status();
    EXPECT_EQ(answers[0].status, static_cast<uint16_t>(conn::status::accepted));
    EXPECT_EQ(answers[0].src.ud_qkey, a_qkey);
    EXPECT_EQ(a.engine->status_json()["handshake"]["received"], 1u);
    EXPECT_EQ(member.stats().datagrams_qkey_dropped, 0u)
            << "the answer named another Q_Key than the request's";
}

TEST_F(hostile, a_replayed_request_is_refused)
{
    agent_node &a = add_agent(quick_peers());
    loopback_nic member(fabric);
    const agent::gid_bytes a_gid = a.nic->gid();
    /* a good request, as a member of the job sends it, sent twice: the
     * second is what an eavesdropper would replay */
    conn::message req = sealed_by_member(stranger_request(member, a), a_gid);
    ASSERT_TRUE(
            member.send_datagram(req, a_gid, a.nic->ud_qpn(), a.nic->ud_qkey())
                    .ok());
    std::vector<conn::message> answers = answers_at(member);
    ASSERT_FALSE(answers.empty()) << a.status();
    EXPECT_EQ(answers[0].status, static_cast<uint16_t>(conn::status::accepted));

    ASSERT_TRUE(
            member.send_datagram(req, a_gid, a.nic->ud_qpn(), a.nic->ud_qkey())
                    .ok());
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "unauthenticated") == 1;
    })) << a.status();
    EXPECT_EQ(a.logged("replayed: this credential was seen before"), 1u);
    run_for(30ms);
    EXPECT_TRUE(received(member).empty()) << "the replay was answered";
}

/* A peer_auth that counts the credential checks it is asked for, and
 * asks the real one. */
class counted_auth final : public agent::peer_auth {
public:
    counted_auth(std::unique_ptr<agent::peer_auth> real, size_t &checks) :
        m_real(std::move(real)), m_checks(checks)
    {
    }
    conn::auth_kind kind() const override
    {
        return m_real->kind();
    }
    std::string describe() const override
    {
        return m_real->describe();
    }
    result<done> seal(conn::message &m, const agent::gid_array &to) override
    {
        return m_real->seal(m, to);
    }
    result<done>
    check(const conn::message &m, const agent::gid_array &self) override
    {
        ++m_checks;
        return m_real->check(m, self);
    }

private:
    std::unique_ptr<agent::peer_auth> m_real;
    size_t &m_checks;
};

/* quick_peers() (or `o`), its credential checks counted in `checks` */
agent_options counted(size_t &checks, agent_options o = quick_peers())
{
    o.auth = [&checks] {
        return std::make_unique<counted_auth>(
                agent::secret_auth(fixture_secret).value(), checks);
    };
    return o;
}

/* Garbage faster than the agent takes it: a pass handles one budget of
 * datagrams (engine_config::datagrams_per_pass), so the clients' work
 * goes on while the flood is drained; every one is counted, and the log
 * gets a line at the 1st, 2nd, 4th, ... */
TEST_F(hostile, a_flood_of_garbage_is_taken_a_budget_a_pass_and_work_goes_on)
{
    agent_options o      = quick_peers();
    o.nic.datagram_slots = 4096; /* a device queue deep enough to flood */
    auto [a, b, ca, cb, to_b, to_a] = connect_two(o);
    (void)to_a;
    const uint32_t budget = agent::engine_config{}.datagrams_per_pass;
    ASSERT_TRUE(am_arrives(ca, cb, to_b, 1)) << a.status();

    loopback_nic intruder(fabric);
    conn::message junk;
    std::memset(&junk, 0xa5, sizeof(junk));
    constexpr uint64_t flood = 4000;
    for (uint64_t i = 0; i < flood; ++i) {
        ASSERT_TRUE(intruder.send_datagram(junk, a.nic->gid(), a.nic->ud_qpn(),
                                           a.nic->ud_qkey())
                            .ok());
    }
    const uint64_t before = a.nic->counters().datagrams_received;
    a.pump();
    EXPECT_EQ(a.nic->counters().datagrams_received - before, budget)
            << "one pass took more than its budget";
    EXPECT_EQ(json_number(a.status(), "malformed"), budget);

    /* the job's traffic is served while the flood waits */
    const size_t done = ca.done.size();
    ca.post(ca.am(to_b, cb, 2, 2));
    ASSERT_TRUE(run_until([&] {
        return ca.done.size() == done + 1 && cb.inbound.size() == 2;
    })) << a.status();
    EXPECT_LT(json_number(a.status(), "malformed"), flood)
            << "the AM waited for the whole flood";

    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "malformed") == flood;
    })) << a.status();
    /* 1, 2, 4, ..., 2048: 12 lines for 4000 */
    EXPECT_EQ(a.logged("handshake datagram refused: bad magic 0xa5a5a5a5"),
              12u);
    EXPECT_EQ(a.logged(", 2048 so far)"), 1u);
    EXPECT_TRUE(am_arrives(ca, cb, to_b, 3));
}

/* Datagrams of the right shape that fail: another job's key (with a good
 * credential), a guessed secret, each from a UD QP of its sender's own.
 * Each sender gets max_failures credential checks, then its datagrams are
 * dropped unchecked for the hold; the job's own peers are served, and a
 * new one connects. */
TEST_F(hostile, right_shaped_floods_cost_a_few_credential_checks_per_sender)
{
    size_t checks                   = 0;
    agent_options o                 = counted(checks);
    o.nic.datagram_slots            = 4096;
    o.engine.senders.hold           = 60s;
    o.engine.senders.window         = 60s;
    auto [a, b, ca, cb, to_b, to_a] = connect_two(o);
    (void)to_a;
    const uint32_t max_f = agent::sender_gate_config{}.max_failures;
    ASSERT_TRUE(am_arrives(ca, cb, to_b, 1)) << a.status();
    const size_t checked_before = checks;

    loopback_nic other_job(fabric), guesser(fabric);
    const agent::gid_bytes a_gid = a.nic->gid();
    auto guess = agent::secret_auth("a guessed secret, long enough");
    constexpr uint64_t flood = 500;
    for (uint64_t i = 0; i < flood; ++i) {
        conn::message wrong_key = stranger_request(other_job, a);
        std::memset(wrong_key.job_key, 0, sizeof(wrong_key.job_key));
        std::strcpy(wrong_key.job_key, "other.job");
        wrong_key.src.instance_id = 0x100 + i; /* minted */
        ASSERT_TRUE(other_job
                            .send_datagram(sealed_by_member(wrong_key, a_gid),
                                           a_gid, a.nic->ud_qpn(),
                                           a.nic->ud_qkey())
                            .ok());
        conn::message guessed   = stranger_request(guesser, a);
        guessed.src.instance_id = 0x100 + i;
        ASSERT_TRUE(guess.value()->seal(guessed, a_gid).ok());
        ASSERT_TRUE(guesser.send_datagram(guessed, a_gid, a.nic->ud_qpn(),
                                          a.nic->ud_qkey())
                            .ok());
    }
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "unchecked") == 2 * (flood - max_f);
    })) << a.status();
    EXPECT_EQ(checks - checked_before, 2 * max_f)
            << "credential checks spent on the two senders";
    EXPECT_EQ(json_number(a.status(), "holds"), 2u);
    EXPECT_EQ(a.logged("failed " + std::to_string(max_f) +
                       " checks within 60000 ms: its datagrams go unchecked "
                       "for 60000 ms"),
              2u);
    EXPECT_EQ(json_number(a.status(), "unauthenticated"), max_f);

    /* the job's peer was never held, and a new one connects */
    EXPECT_TRUE(am_arrives(ca, cb, to_b, 2));
    agent_node &c         = add_agent(quick_peers());
    test_client &cc       = attach(c);
    const uint32_t c_to_a = peer(cc, a);
    const size_t in       = ca.inbound.size();
    cc.post(cc.am(c_to_a, ca, 1, 1));
    ASSERT_TRUE(run_until([&] { return ca.inbound.size() == in + 1; }))
            << a.status() << c.status();
}

TEST_F(hostile, agents_with_another_am_size_refuse_each_other_naming_both)
{
    agent_options small    = quick_peers();
    small.caps.slot_size   = 512;
    small.nic.receive_size = 512;
    agent_node &a          = add_agent(quick_peers()); /* 256 */
    agent_node &b          = add_agent(small);
    test_client &ca        = attach(a);
    const uint32_t to_b    = peer(ca, b);
    (void)to_b;
    ASSERT_TRUE(run_until([&] {
        return a.logged("its largest active message is 512 bytes "
                        "(--am-size), this agent's 256") > 0 &&
               b.logged("its largest active message is 256 bytes "
                        "(--am-size), this agent's 512") > 0;
    })) << a.status()
        << b.status();
    EXPECT_TRUE(a.nic->qps_to(b.nic->gid()).empty() ||
                b.nic->qps_to(a.nic->gid()).empty());
}

TEST_F(hostile, agents_with_another_k_refuse_each_other_naming_both)
{
    agent_options two        = quick_peers();
    two.engine.peers.num_qps = 2;
    agent_node &a            = add_agent(quick_peers()); /* 4 */
    agent_node &b            = add_agent(two);
    test_client &ca          = attach(a);
    (void)peer(ca, b);
    ASSERT_TRUE(run_until([&] {
        return a.logged("it uses 2 QPs per peer (--num-qps), this agent 4") >
                       0 &&
               b.logged("it uses 4 QPs per peer (--num-qps), this agent 2") > 0;
    })) << a.status()
        << b.status();
}

TEST_F(hostile, agents_with_munge_connect_and_serve)
{
    rvt::test::private_munged munged;
    ASSERT_EQ(munged.error(), "");
    agent_options o        = quick_peers();
    const std::string sock = munged.socket();
    o.auth                 = [sock] { return agent::munge_auth(sock).value(); };
    agent_node &a          = add_agent(o);
    agent_node &b          = add_agent(o);
    test_client &ca        = attach(a);
    test_client &cb        = attach(b);
    const uint32_t to_b    = peer(ca, b);
    ASSERT_TRUE(am_arrives(ca, cb, to_b, 1)) << a.status() << b.status();
    EXPECT_EQ(a.engine->status_json()["auth"], "munge");
    EXPECT_EQ(json_number(b.status(), "unauthenticated"), 0u);

    /* a node with the job's secret but not munge is a stranger here */
    loopback_nic other(fabric);
    const agent::gid_bytes a_gid = a.nic->gid();
    ASSERT_TRUE(other.send_datagram(sealed_by_member(stranger_request(other, a),
                                                     a_gid),
                                    a_gid, a.nic->ud_qpn(), a.nic->ud_qkey())
                        .ok());
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "unauthenticated") == 1;
    })) << a.status();
    EXPECT_EQ(a.logged("its credential is of kind secret: this agent "
                       "demands munge"),
              1u);
}

/* ---- whose datagrams cost a check (sender_gate.h) ------------------- */

/* Where the agent at `n` is, as a datagram names its sender. */
conn::sender sender_of(const agent_node &n)
{
    conn::sender s{};
    const agent::gid_bytes g = n.nic->gid();
    std::memcpy(s.gid, g.data(), conn::gid_size);
    s.instance_id = n.engine->address().agent_id;
    s.ud_qpn      = n.nic->ud_qpn();
    s.uid         = getuid();
    s.ud_qkey     = n.nic->ud_qkey();
    return s;
}

/* A process on b's node, with a UD QP of its own, a's address (its
 * Q_Key too: a process of a job that talks to a has it) and b's agent's
 * (it travels in the clear), names b's agent as the sender of a
 * disconnect and of a request for a new connection. The GID
 * is the packet's own, but the sending QP is not b's agent's: both are
 * dropped as forged before any credential check, and the connection
 * never noticed. */
TEST_F(hostile, a_datagram_naming_another_qp_of_its_node_is_dropped_unchecked)
{
    size_t checks                   = 0;
    auto [a, b, ca, cb, to_b, to_a] = connect_two(counted(checks));
    expect_serving(ca, cb, to_b, to_a, 1);
    const size_t before = checks;

    const agent::gid_bytes a_gid = a.nic->gid();
    const uint32_t a_ud          = a.nic->ud_qpn();
    const uint32_t a_qkey        = a.nic->ud_qkey();
    const uint64_t a_id          = a.engine->address().agent_id;
    const uint32_t mine          = b.nic->open_ud_qp();
    const conn::sender as_b      = sender_of(b);
    std::vector<conn::qp_info> qps(a.engine->num_qps(), {0x1234, 1});
    ASSERT_TRUE(b.nic->send_datagram_from(mine,
                                          conn::make_disconnect(as_b, job_key,
                                                                a_id),
                                          a_gid, a_ud, a_qkey)
                        .ok());
    ASSERT_TRUE(
            b.nic->send_datagram_from(mine,
                                      conn::make_request(as_b, job_key, a_id,
                                                         1000000, qps, 256),
                                      a_gid, a_ud, a_qkey)
                    .ok());
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "forged") == 2;
    })) << a.status();
    EXPECT_EQ(checks, before) << "a forged datagram cost a credential check";
    EXPECT_EQ(a.logged("UD QP " + std::to_string(mine) +
                       " names its sender's UD QPN " +
                       std::to_string(b.nic->ud_qpn()) + ": dropped"),
              2u);
    EXPECT_EQ(json_number(a.status(), "unauthenticated"), 0u);
    run_for(50ms);
    expect_serving(ca, cb, to_b, to_a, 2);
    const auto status = a.engine->status_json();
    for (const auto &p : status["peers"]) {
        EXPECT_EQ(p["reconnects"], 0u) << "peer " << p["index"];
        EXPECT_EQ(p["state"], "connected") << "peer " << p["index"];
    }
}

/* A datagram that names the agent itself as its sender (its GID and UD
 * QPN, as the agent's own QP would send it) is no peer's: the node's own
 * peer is loopback, and never handshakes. Dropped unchecked and counted;
 * the node's own peer goes on. */
TEST_F(hostile, a_datagram_naming_the_agent_itself_is_dropped_unchecked)
{
    size_t checks                = 0;
    agent_node &a                = add_agent(counted(checks));
    test_client &ca              = attach(a);
    const uint32_t me            = peer(ca, a);
    const size_t before          = checks;
    const agent::gid_bytes a_gid = a.nic->gid();
    const conn::sender as_a      = sender_of(a);
    std::vector<conn::qp_info> qps(a.engine->num_qps(), {0x1234, 1});
    ASSERT_TRUE(
            a.nic->send_datagram(sealed_by_member(
                                         conn::make_request(
                                                 as_a, job_key, 0, 1, qps,
                                                 agent_options{}.caps.slot_size),
                                         a_gid),
                                 a_gid, a.nic->ud_qpn(), a.nic->ud_qkey())
                    .ok());
    ASSERT_TRUE(a.nic->send_datagram(sealed_by_member(conn::make_disconnect(
                                                              as_a, job_key,
                                                              as_a.instance_id),
                                                      a_gid),
                                     a_gid, a.nic->ud_qpn(), a.nic->ud_qkey())
                        .ok());
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "own_address") == 2;
    })) << a.status();
    EXPECT_EQ(checks, before) << "checked";
    EXPECT_EQ(a.logged("names this agent as its sender: dropped"), 2u);
    EXPECT_EQ(json_number(a.status(), "forged"), 0u);
    EXPECT_EQ(a.engine->status_json()["peers"].size(), 1u);
    ca.post(ca.am(me, ca, 1, 1));
    ASSERT_TRUE(run_until([&] { return ca.inbound.size() == 1; }));
    EXPECT_EQ(ca.done[0].status,
              static_cast<uint32_t>(completion_status::success));
}

/* A user on b's node, with a UD QP of its own, sends a's agent requests
 * of another job (with a good credential) until it is held. What is held
 * is that QP, not b's node: b's agent, another sender on the same node,
 * connects and is served meanwhile. */
TEST_F(hostile, one_senders_wrong_keys_do_not_hold_another_sender_on_its_node)
{
    size_t checks           = 0;
    agent_options o         = counted(checks);
    o.engine.senders.hold   = 60s;
    o.engine.senders.window = 60s;
    agent_node &a           = add_agent(o);
    agent_node &b           = add_agent(quick_peers());
    const uint32_t max_f    = agent::sender_gate_config{}.max_failures;

    const uint32_t mine          = b.nic->open_ud_qp();
    const agent::gid_bytes a_gid = a.nic->gid();
    conn::sender user            = sender_of(b);
    user.ud_qpn                  = mine;
    user.instance_id             = 0xbad;
    std::vector<conn::qp_info> qps(a.engine->num_qps(), {0x1234, 1});
    for (uint32_t i = 0; i < 2 * max_f; ++i) {
        ASSERT_TRUE(
                b.nic->send_datagram_from(
                             mine,
                             sealed_by_member(
                                     conn::make_request(
                                             user, "other.job", 0, 1 + i, qps,
                                             agent_options{}.caps.slot_size),
                                     a_gid),
                             a_gid, a.nic->ud_qpn(), a.nic->ud_qkey())
                        .ok());
    }
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "unchecked") == max_f;
    })) << a.status();
    EXPECT_EQ(json_number(a.status(), "holds"), 1u);
    EXPECT_EQ(a.logged("sender " + agent::gid_text(b.nic->gid()) + " UD QP " +
                       std::to_string(mine) + " failed"),
              1u);

    /* b's agent, on the same node, connects to a and is served */
    test_client &ca     = attach(a);
    test_client &cb     = attach(b);
    const uint32_t to_a = peer(cb, a);
    cb.post(cb.am(to_a, ca, 1, 1));
    ASSERT_TRUE(run_until([&] { return ca.inbound.size() == 1; }))
            << a.status() << b.status();
    EXPECT_EQ(json_number(a.status(), "unchecked"), max_f)
            << "b's agent was refused unchecked";
    EXPECT_EQ(json_number(a.status(), "holds"), 1u);
}

/* A held sender's hold ends after its time: its requests are dropped
 * unchecked while it runs, and believed and answered after it. */
TEST_F(hostile, a_held_senders_hold_ends_after_its_time)
{
    agent_options o         = quick_peers();
    o.engine.senders.hold   = 300ms;
    o.engine.senders.window = 60s;
    agent_node &a           = add_agent(o);
    const uint32_t max_f    = agent::sender_gate_config{}.max_failures;
    loopback_nic member(fabric);
    const agent::gid_bytes a_gid = a.nic->gid();
    /* a request of this job, or another's, attempt `seq` */
    const auto request = [&](uint32_t seq, const char *key) {
        conn::message m = stranger_request(member, a);
        std::memset(m.job_key, 0, sizeof(m.job_key));
        std::strcpy(m.job_key, key);
        m.hdr.seq = seq;
        return sealed_by_member(m, a_gid);
    };
    for (uint32_t i = 0; i < max_f; ++i) {
        ASSERT_TRUE(member.send_datagram(request(1 + i, "other.job"), a_gid,
                                         a.nic->ud_qpn(), a.nic->ud_qkey())
                            .ok());
    }
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "holds") == 1;
    })) << a.status();
    const auto held_at = steady::now();
    run_for(20ms);
    EXPECT_EQ(received(member).size(), max_f) << "each answered wrong_job_key";

    /* held: this job's request goes unchecked and unanswered */
    ASSERT_TRUE(member.send_datagram(request(100, job_key), a_gid,
                                     a.nic->ud_qpn(), a.nic->ud_qkey())
                        .ok());
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "unchecked") == 1;
    })) << a.status();
    ASSERT_LT(steady::now() - held_at, 300ms) << "too slow to see the hold";
    EXPECT_TRUE(received(member).empty());

    /* after it: believed and answered */
    run_for(300ms);
    ASSERT_TRUE(member.send_datagram(request(101, job_key), a_gid,
                                     a.nic->ud_qpn(), a.nic->ud_qkey())
                        .ok());
    std::vector<conn::message> answers = answers_at(member);
    ASSERT_FALSE(answers.empty()) << a.status();
    EXPECT_EQ(answers[0].status, static_cast<uint16_t>(conn::status::accepted));
    EXPECT_EQ(json_number(a.status(), "unchecked"), 1u);
}

/* A peer is gated as any sender: copies of the request that made it
 * (replays, each refused by the credential's replay check) cost
 * max_failures checks, then the sender is held; before, each copy cost
 * one. */
TEST_F(hostile, replays_of_the_datagram_that_made_a_peer_cost_a_few_checks)
{
    size_t checks        = 0;
    agent_options o      = counted(checks);
    o.nic.datagram_slots = 4096;
    agent_node &a        = add_agent(o);
    const uint32_t max_f = agent::sender_gate_config{}.max_failures;
    loopback_nic member(fabric);
    const agent::gid_bytes a_gid = a.nic->gid();
    const conn::message req      = sealed_by_member(stranger_request(member, a),
                                                    a_gid);
    ASSERT_TRUE(
            member.send_datagram(req, a_gid, a.nic->ud_qpn(), a.nic->ud_qkey())
                    .ok());
    std::vector<conn::message> answers = answers_at(member);
    ASSERT_FALSE(answers.empty()) << a.status();
    ASSERT_EQ(answers[0].status, static_cast<uint16_t>(conn::status::accepted));
    const size_t before = checks;

    constexpr uint64_t copies = 100;
    for (uint64_t i = 0; i < copies; ++i) {
        ASSERT_TRUE(member.send_datagram(req, a_gid, a.nic->ud_qpn(),
                                         a.nic->ud_qkey())
                            .ok());
    }
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "unchecked") == copies - max_f;
    })) << a.status();
    EXPECT_EQ(checks - before, max_f);
    EXPECT_EQ(json_number(a.status(), "unauthenticated"), max_f);
    EXPECT_EQ(a.logged("replayed: this credential was seen before"), 3u)
            << "logged at the 1st, 2nd and 4th";
}

/* A sender whose credentials are good (a member of the job, or an agent
 * gone wrong) still gets at most its bucket of checks: `burst` at once,
 * then one a refill; the rest are dropped unchecked, counted and logged. */
TEST_F(hostile, a_senders_checks_beyond_its_bucket_are_refused_unchecked)
{
    size_t checks        = 0;
    agent_options o      = counted(checks, agent_options{}); /* 250 ms */
    o.nic.datagram_slots = 4096;
    agent_node &a        = add_agent(o);
    const agent::sender_gate_config gate{};
    loopback_nic member(fabric);
    const agent::gid_bytes a_gid = a.nic->gid();
    constexpr uint64_t sent      = 64;
    const auto started           = steady::now();
    for (uint64_t i = 0; i < sent; ++i) { /* the same request, sealed anew */
        ASSERT_TRUE(member.send_datagram(
                                  sealed_by_member(stranger_request(member, a),
                                                   a_gid),
                                  a_gid, a.nic->ud_qpn(), a.nic->ud_qkey())
                            .ok());
    }
    ASSERT_TRUE(run_until([&] {
        return a.nic->counters().datagrams_received == sent;
    })) << a.status();
    const auto refills = (steady::now() - started) / gate.refill;
    EXPECT_GE(checks, gate.burst);
    EXPECT_LE(checks, gate.burst + static_cast<uint64_t>(refills));
    EXPECT_EQ(json_number(a.status(), "throttled"), sent - checks);
    EXPECT_EQ(json_number(a.status(), "unauthenticated"), 0u);
    EXPECT_GE(a.logged("dropped unchecked: its sender used its 16 credential "
                       "checks (one more each 250 ms"),
              1u);
}

/* A request from a new instance at a peer's address (GID and UD QPN) is a
 * new sender: a reply or disconnect from it is dropped unchecked as from
 * an unknown sender; its request is gated as a new sender's and, once
 * believed, goes to that peer's connection (a restarted agent). */
TEST_F(hostile, a_new_instance_at_a_peers_address_is_a_new_sender)
{
    size_t checks = 0;
    agent_node &a = add_agent(counted(checks));
    loopback_nic member(fabric);
    const agent::gid_bytes a_gid = a.nic->gid();
    const conn::message req      = sealed_by_member(stranger_request(member, a),
                                                    a_gid);
    ASSERT_TRUE(
            member.send_datagram(req, a_gid, a.nic->ud_qpn(), a.nic->ud_qkey())
                    .ok());
    std::vector<conn::message> answers = answers_at(member);
    ASSERT_FALSE(answers.empty()) << a.status();
    ASSERT_EQ(answers[0].status, static_cast<uint16_t>(conn::status::accepted));
    const size_t before = checks;

    conn::sender reborn = req.src;
    reborn.instance_id  = 0x6157;
    std::vector<conn::qp_info> qps(a.engine->num_qps(), {0x1234, 1});
    const conn::terms terms{static_cast<uint16_t>(qps.size()),
                            agent_options{}.caps.slot_size};
    conn::message ours   = req;
    ours.src             = sender_of(a);
    ours.dst_instance_id = reborn.instance_id;
    ASSERT_TRUE(
            member.send_datagram(sealed_by_member(
                                         conn::make_reply(reborn, ours, 0,
                                                          conn::status::accepted,
                                                          terms, qps),
                                         a_gid),
                                 a_gid, a.nic->ud_qpn(), a.nic->ud_qkey())
                    .ok());
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "unknown_sender") == 1;
    })) << a.status();
    EXPECT_EQ(checks, before) << "checked as the known peer's";

    /* its request: believed, and taken as the peer's restart */
    conn::message again = stranger_request(member, a);
    again.src           = reborn;
    ASSERT_TRUE(member.send_datagram(sealed_by_member(again, a_gid), a_gid,
                                     a.nic->ud_qpn(), a.nic->ud_qkey())
                        .ok());
    answers = answers_at(member);
    ASSERT_FALSE(answers.empty()) << a.status();
    EXPECT_EQ(answers[0].status, static_cast<uint16_t>(conn::status::accepted));
    EXPECT_EQ(answers[0].dst_instance_id, reborn.instance_id);
    EXPECT_EQ(checks, before + 1);
    EXPECT_EQ(a.engine->status_json()["peers"].size(), 2u)
            << "the node's own, and the restarted peer's record";
}

/* Credential checks that take long end the pass that makes them: with
 * pass_time 2 ms and a check of at least 1 ms, a pass takes at most 2 of
 * 10 datagrams, each from a sender of its own; the rest wait in the UD
 * QP's queue for the next passes, and the client's work goes on. */
TEST_F(hostile, slow_credential_checks_end_their_pass_early)
{
    class slow_auth final : public agent::peer_auth {
    public:
        explicit slow_auth(size_t &checks) : m_checks(checks)
        {
        }
        conn::auth_kind kind() const override
        {
            return conn::auth_kind::secret;
        }
        std::string describe() const override
        {
            return "slow";
        }
        result<done> seal(conn::message &, const agent::gid_array &) override
        {
            return done{};
        }
        result<done>
        check(const conn::message &, const agent::gid_array &) override
        {
            ++m_checks;
            std::this_thread::sleep_for(1ms);
            return failure{"slow and wrong"};
        }

    private:
        size_t &m_checks;
    };
    size_t checks              = 0;
    agent_options o            = quick_peers();
    o.engine.senders.pass_time = 2ms;
    o.auth        = [&checks] { return std::make_unique<slow_auth>(checks); };
    agent_node &a = add_agent(o);
    loopback_nic strangers(fabric);
    constexpr uint32_t sent = 10;
    auto guess = agent::secret_auth("a guessed secret, long enough");
    for (uint32_t i = 0; i < sent; ++i) {
        conn::message m = stranger_request(strangers, a);
        m.src.ud_qpn    = strangers.open_ud_qp();
        ASSERT_TRUE(guess.value()->seal(m, a.nic->gid()).ok());
        ASSERT_TRUE(strangers
                            .send_datagram_from(m.src.ud_qpn, m, a.nic->gid(),
                                                a.nic->ud_qpn(),
                                                a.nic->ud_qkey())
                            .ok());
    }
    a.pump();
    EXPECT_GE(checks, 1u);
    EXPECT_LE(checks, 2u) << "the pass went on past its time";
    EXPECT_EQ(a.nic->counters().datagrams_received, checks)
            << "what the pass had no time for was taken from the queue";
    EXPECT_EQ(json_number(a.status(), "passes_cut"), 1u);
    EXPECT_EQ(a.logged("credential checks took 2000 us or more in one pass"),
              1u);
    ASSERT_TRUE(run_until([&] { return checks == sent; })) << a.status();
    EXPECT_EQ(json_number(a.status(), "unauthenticated"), sent);
}

} // namespace
} // namespace engine_test
