/*
 * Hostile input to an agent, on the host (engine_fixture.h): handshake
 * datagrams that are garbage or come from another job's agent, sent to an
 * agent's UD QP by a third node, and an RDMA WRITE to an rkey its owner
 * has deregistered; strangers without the job's credential, replays, and
 * agents with another K or AM size. Each is refused or fails for its
 * sender alone, the memory it aimed at is untouched, and the agent keeps
 * serving. The
 * README's "Hostile input" table points here.
 */
#include "test/gtest/unit/engine_fixture.h"
#include "test/gtest/unit/munged_fixture.h"

#include "uct/ib/rvt/common/conn_wire.h"

#include <algorithm>

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
    nic.poll_datagrams([&](std::span<const std::byte> b, const auto &) {
        auto m = conn::parse(b);
        EXPECT_TRUE(m.ok()) << m.error();
        if (m.ok()) {
            out.push_back(m.value());
        }
    });
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
    two_nodes connect_two()
    {
        agent_node &a       = add_agent(quick_peers());
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

    /* 256 bytes of garbage */
    conn::message junk;
    std::memset(&junk, 0xa5, sizeof(junk));
    ASSERT_TRUE(intruder.send_datagram(junk, a_gid, a_ud).ok());
    /* the intruder's own address */
    conn::sender self{};
    const agent::gid_bytes i_gid = intruder.gid();
    std::memcpy(self.gid, i_gid.data(), conn::gid_size);
    self.instance_id = 0x1badd00d;
    self.ud_qpn      = intruder.ud_qpn();
    self.uid         = getuid();
    std::vector<conn::qp_info> qps(a.engine->num_qps(), {0x1234, 1});
    /* a reply to a request a never sent, from a node it does not know yet */
    const uint32_t am = agent_options{}.caps.slot_size;
    const conn::terms terms{static_cast<uint16_t>(qps.size()), am};
    conn::message asked = conn::make_request({{}, 100, a_ud, getuid()}, job_key,
                                             self.instance_id, 1, qps, am);
    std::memcpy(asked.src.gid, a_gid.data(), conn::gid_size);
    ASSERT_TRUE(intruder.send_datagram(
                                sealed_by_member(
                                        conn::make_reply(self, asked, 0,
                                                         conn::status::accepted,
                                                         terms, qps),
                                        a_gid),
                                a_gid, a_ud)
                        .ok());

    /* then a well-formed request from another job's agent (of the same
     * user, with the same secret: its credential is good) */
    self.uid = 4242;
    ASSERT_TRUE(
            intruder.send_datagram(sealed_by_member(
                                           conn::make_request(self, "other.job",
                                                              0, 1, qps, am),
                                           a_gid),
                                   a_gid, a_ud)
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
    const uint64_t a_id          = a.engine->address().agent_id;
    conn::sender as_b{};
    const agent::gid_bytes b_gid = b.nic->gid();
    std::memcpy(as_b.gid, b_gid.data(), conn::gid_size);
    as_b.instance_id = b.engine->address().agent_id;
    as_b.ud_qpn      = b.nic->ud_qpn();
    as_b.uid         = getuid();
    ASSERT_TRUE(
            intruder.send_datagram(conn::make_disconnect(as_b, job_key, a_id),
                                   a_gid, a_ud)
                    .ok());
    std::vector<conn::qp_info> qps(a.engine->num_qps(), {0x1234, 1});
    ASSERT_TRUE(intruder.send_datagram(conn::make_request(as_b, job_key, a_id,
                                                          1000000, qps, 256),
                                       a_gid, a_ud)
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
 * datagram with its own UD QPN): at most max_half_open of them hold a
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
    std::vector<conn::qp_info> qps(a.engine->num_qps(), {0x1234, 1});
    uint32_t next_qpn = 0x100;
    /* n requests, each from a new address (whose answers are lost: no QP
     * has that number) */
    auto flood = [&](int n) {
        for (int i = 0; i < n; ++i) {
            conn::sender s{};
            const agent::gid_bytes i_gid = intruder.gid();
            std::memcpy(s.gid, i_gid.data(), conn::gid_size);
            s.instance_id = 0x1badd00d;
            s.ud_qpn      = next_qpn++;
            s.uid         = getuid();
            EXPECT_TRUE(
                    intruder.send_datagram(sealed_by_member(conn::make_request(
                                                                    s, job_key,
                                                                    0, 1, qps,
                                                                    256),
                                                            a_gid),
                                           a_gid, a_ud)
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
    for (const forgery &f : forgeries) {
        thief.intend(f.addr, f.length); /* so that only the lie is refused */
        r = thief.announce_raw(f.mr, f.addr, f.length);
        ASSERT_TRUE(r.ok()) << r.error();
        EXPECT_EQ(r.value().status,
                  static_cast<uint32_t>(wire::announce_status::refused))
                << f.why;
        EXPECT_EQ(std::string(r.value().reason), f.why);
        EXPECT_EQ(a.logged("client index " + std::to_string(thief.index()) +
                           " announced MR handle " +
                           std::to_string(f.mr.handle) + ": " + f.why +
                           ": refused"),
                  1u)
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
    ASSERT_TRUE(intruder.send_datagram(bare, a_gid, a.nic->ud_qpn()).ok());
    conn::message guessed = stranger_request(intruder, a);
    auto guess            = agent::secret_auth("a guessed secret, long enough");
    ASSERT_TRUE(guess.value()->seal(guessed, a_gid).ok());
    ASSERT_TRUE(intruder.send_datagram(guessed, a_gid, a.nic->ud_qpn()).ok());

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

TEST_F(hostile, a_replayed_request_is_refused)
{
    agent_node &a = add_agent(quick_peers());
    loopback_nic member(fabric);
    const agent::gid_bytes a_gid = a.nic->gid();
    /* a good request, as a member of the job sends it, sent twice: the
     * second is what an eavesdropper would replay */
    conn::message req = sealed_by_member(stranger_request(member, a), a_gid);
    ASSERT_TRUE(member.send_datagram(req, a_gid, a.nic->ud_qpn()).ok());
    std::vector<conn::message> answers;
    ASSERT_TRUE(run_until([&] {
        auto got = received(member);
        answers.insert(answers.end(), got.begin(), got.end());
        return !answers.empty();
    })) << a.status();
    EXPECT_EQ(answers[0].status, static_cast<uint16_t>(conn::status::accepted));

    ASSERT_TRUE(member.send_datagram(req, a_gid, a.nic->ud_qpn()).ok());
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "unauthenticated") == 1;
    })) << a.status();
    EXPECT_EQ(a.logged("replayed: this credential was seen before"), 1u);
    run_for(30ms);
    EXPECT_TRUE(received(member).empty()) << "the replay was answered";
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
                                    a_gid, a.nic->ud_qpn())
                        .ok());
    ASSERT_TRUE(run_until([&] {
        return json_number(a.status(), "unauthenticated") == 1;
    })) << a.status();
    EXPECT_EQ(a.logged("its credential is of kind secret: this agent "
                       "demands munge"),
              1u);
}

} // namespace
} // namespace engine_test
