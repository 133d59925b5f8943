/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the per-peer connection state machine
 * (agent/peers/peer_connection.h). A `node` plays the agent around one
 * peer_connection: it executes the actions (fake QPs with distinct QPNs,
 * a counted set of posted ops that a flush fails, datagrams serialized and
 * re-parsed with the real parser) and two nodes are wired back to back,
 * with a hand on every datagram to drop, delay or reorder it. Time is a
 * number the test advances.
 */
#include "uct/ib/rvt/agent/peers/peer_connection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <set>
#include <string>
#include <vector>

namespace conn = rvt::wire::conn;
using rvt::agent::action;
using rvt::agent::action_kind;
using rvt::agent::actions;
using rvt::agent::msec;
using rvt::agent::peer_config;
using rvt::agent::peer_connection;
using rvt::agent::peer_state;
using rvt::agent::time_point;

namespace {

const time_point t0 = time_point{} + std::chrono::hours(1);

conn::sender
make_sender(uint8_t last_gid_byte, uint32_t ud_qpn, uint64_t instance)
{
    conn::sender s{};
    s.gid[0]      = 0xfe;
    s.gid[1]      = 0x80;
    s.gid[15]     = last_gid_byte;
    s.instance_id = instance;
    s.ud_qpn      = ud_qpn;
    s.uid         = 1000;
    /* a Q_Key of each agent run's own */
    s.ud_qkey = 0x50000000u | uint32_t{last_gid_byte} << 16 |
                static_cast<uint32_t>(instance & 0xffff);
    return s;
}

rvt::agent::peer_address address_of(const conn::sender &s)
{
    rvt::agent::peer_address a;
    std::copy(std::begin(s.gid), std::end(s.gid), a.gid.begin());
    a.ud_qpn      = s.ud_qpn;
    a.ud_qkey     = s.ud_qkey;
    a.instance_id = s.instance_id;
    return a;
}

struct datagram {
    rvt::agent::peer_address dest;
    conn::message msg;
};

/* One agent, as far as one peer is concerned. */
struct node {
    node(const char *name_, conn::sender self_, conn::sender peer,
         peer_config cfg = {}, std::string job_key = "job.1") :
        name(name_),
        self(self_),
        pc(with_am_size(cfg), {self_, std::move(job_key)},
           address_of_unknown(peer)),
        next_qpn(self_.ud_qpn + 0x100)
    {
    }

    /* as the engine does: the AM size from its layout; and no spread,
     * so that the tests below count the waits exactly ("Spread" has its
     * own tests) */
    static peer_config with_am_size(peer_config cfg)
    {
        if (cfg.am_size == 0) {
            cfg.am_size = 8192;
        }
        cfg.retry_jitter = 0;
        return cfg;
    }

    static rvt::agent::peer_address address_of_unknown(conn::sender peer)
    {
        auto a        = address_of(peer);
        a.instance_id = 0; /* learnt from the handshake */
        return a;
    }

    std::string name;
    conn::sender self;
    peer_connection pc;

    uint32_t next_qpn;
    uint32_t next_psn = 0x10;
    std::vector<conn::qp_info> live; /* created, not yet destroyed */
    std::vector<conn::qp_info> connected_local, connected_peer;
    rvt::agent::peer_address connected_dest{};

    int posted_ops    = 0; /* ops on the QPs, failed by a flush */
    int failed_ops    = 0;
    bool auto_drain   = true;
    bool create_fails = false;

    int creates = 0, connects = 0, flushes = 0, destroys = 0;
    int keepalives = 0, reported_connected = 0, reported_failed = 0;
    std::string flush_reason, failed_reason;
    std::deque<datagram> outbox;

    void run(time_point now, actions todo)
    {
        std::deque<action> queue(todo.begin(), todo.end());
        while (!queue.empty()) {
            action a = queue.front();
            queue.pop_front();
            actions more = execute(now, a);
            queue.insert(queue.end(), more.begin(), more.end());
        }
    }

    actions execute(time_point now, const action &a)
    {
        switch (a.kind) {
        case action_kind::create_qps: {
            ++creates;
            if (create_fails) {
                return pc.qps_failed(now, "ENOMEM");
            }
            std::vector<conn::qp_info> qps;
            for (uint32_t i = 0; i < a.num_qps; ++i) {
                qps.push_back({next_qpn++, (next_psn += 0x1111) & 0xffffff});
            }
            live.insert(live.end(), qps.begin(), qps.end());
            return pc.qps_created(now, qps);
        }
        case action_kind::connect_qps:
            ++connects;
            connected_local.assign(a.local_qps.begin(),
                                   a.local_qps.begin() + a.num_qps);
            connected_peer.assign(a.peer_qps.begin(),
                                  a.peer_qps.begin() + a.num_qps);
            connected_dest = a.dest;
            for (const auto &qp : connected_local) {
                EXPECT_NE(std::find(live.begin(), live.end(), qp), live.end())
                        << name << " connects a QP it does not have";
            }
            return {};
        case action_kind::destroy_qps:
            ++destroys;
            for (uint32_t i = 0; i < a.num_qps; ++i) {
                auto it = std::find(live.begin(), live.end(), a.local_qps[i]);
                EXPECT_NE(it, live.end())
                        << name << " destroys QPN " << a.local_qps[i].qpn
                        << " twice or never created it";
                if (it != live.end()) {
                    live.erase(it);
                }
            }
            return {};
        case action_kind::flush_qps:
            ++flushes;
            flush_reason = a.reason;
            failed_ops += posted_ops;
            posted_ops = 0;
            return auto_drain ? pc.drained(now) : actions{};
        case action_kind::send_message: {
            /* through the real wire format and parser */
            std::vector<std::byte> bytes(sizeof(a.msg));
            std::memcpy(bytes.data(), &a.msg, sizeof(a.msg));
            auto parsed = conn::parse(bytes);
            EXPECT_TRUE(parsed.ok()) << name << " sent: " << parsed.error();
            if (parsed.ok()) {
                outbox.push_back({a.dest, parsed.value()});
            }
            return {};
        }
        case action_kind::send_keepalive:
            ++keepalives;
            return {};
        case action_kind::report_connected:
            ++reported_connected;
            return {};
        case action_kind::report_peer_failed:
            ++reported_failed;
            failed_reason = a.reason;
            return {};
        }
        ADD_FAILURE() << "unknown action";
        return {};
    }

    void connect(time_point now)
    {
        run(now, pc.connect(now));
    }
    void tick(time_point now)
    {
        run(now, pc.tick(now));
    }
    void receive(time_point now, const datagram &d)
    {
        EXPECT_EQ(d.dest.ud_qpn, self.ud_qpn)
                << name << " got a datagram for another UD QPN";
        /* a device drops what names another Q_Key: nothing may */
        EXPECT_EQ(d.dest.ud_qkey, self.ud_qkey)
                << name << " got a datagram naming another Q_Key";
        run(now, pc.on_message(now, d.msg));
    }
    datagram take()
    {
        EXPECT_FALSE(outbox.empty()) << name << " sent nothing";
        if (outbox.empty()) {
            return {};
        }
        datagram d = outbox.front();
        outbox.pop_front();
        return d;
    }
    uint16_t type_of_next() const
    {
        return outbox.empty() ? 0 : outbox.front().msg.hdr.type;
    }
};

constexpr uint16_t request_type = static_cast<uint16_t>(
        conn::msg_type::request);
constexpr uint16_t reply_type = static_cast<uint16_t>(conn::msg_type::reply);

/* Deliver everything both ways until quiet. */
void exchange(node &a, node &b, time_point now)
{
    for (int round = 0; round < 50; ++round) {
        if (a.outbox.empty() && b.outbox.empty()) {
            return;
        }
        auto from_a = std::move(a.outbox);
        auto from_b = std::move(b.outbox);
        a.outbox.clear();
        b.outbox.clear();
        for (auto &d : from_a) {
            b.receive(now, d);
        }
        for (auto &d : from_b) {
            a.receive(now, d);
        }
    }
    ADD_FAILURE() << "messages still flowing after 50 rounds";
}

/* Both connected to each other over the same K QP pairs. */
void expect_paired(const node &a, const node &b)
{
    ASSERT_EQ(a.pc.state(), peer_state::connected) << a.name;
    ASSERT_EQ(b.pc.state(), peer_state::connected) << b.name;
    auto a_local = a.pc.local_qps(), b_local = b.pc.local_qps();
    auto a_peer = a.pc.peer_qps(), b_peer = b.pc.peer_qps();
    ASSERT_EQ(a_local.size(), 4u);
    ASSERT_EQ(b_local.size(), 4u);
    EXPECT_TRUE(std::equal(a_local.begin(), a_local.end(), b_peer.begin()));
    EXPECT_TRUE(std::equal(b_local.begin(), b_local.end(), a_peer.begin()));
    /* ... and that is what the QPs were actually moved to RTR/RTS with */
    EXPECT_TRUE(std::equal(a_local.begin(), a_local.end(),
                           a.connected_local.begin(), a.connected_local.end()));
    EXPECT_TRUE(std::equal(a_peer.begin(), a_peer.end(),
                           a.connected_peer.begin(), a.connected_peer.end()));
    EXPECT_TRUE(std::equal(b_peer.begin(), b_peer.end(),
                           b.connected_peer.begin(), b.connected_peer.end()));
    EXPECT_EQ(a.connected_dest.ud_qpn, b.self.ud_qpn);
    EXPECT_EQ(b.connected_dest.ud_qpn, a.self.ud_qpn);
    EXPECT_EQ(a.pc.peer().instance_id, b.self.instance_id);
    EXPECT_EQ(b.pc.peer().instance_id, a.self.instance_id);
    /* no QP is left over on either side */
    EXPECT_EQ(a.live.size(), 4u) << a.name;
    EXPECT_EQ(b.live.size(), 4u) << b.name;
}

/* A (GID ...0a) orders below B (GID ...0b). */
conn::sender sender_a()
{
    return make_sender(0x0a, 0x40, 0xaaaa);
}
conn::sender sender_b()
{
    return make_sender(0x0b, 0x50, 0xbbbb);
}

struct pair_fixture : ::testing::Test {
    node a{"A", sender_a(), sender_b()};
    node b{"B", sender_b(), sender_a()};

    void connect_a_to_b(time_point now)
    {
        a.connect(now);
        exchange(a, b, now);
        expect_paired(a, b);
    }
};

} // namespace

/* ---- configuration -------------------------------------------------- */

TEST(peer_config, defaults_are_valid)
{
    peer_config cfg;
    EXPECT_EQ(rvt::agent::config_error(cfg), "");
    EXPECT_EQ(cfg.num_qps, 4u);
}

TEST(peer_config, bad_values_are_named)
{
    auto expect_error = [](peer_config cfg, const std::string &needle) {
        std::string err = rvt::agent::config_error(cfg);
        EXPECT_NE(err.find(needle), std::string::npos)
                << "error \"" << err << "\" lacks \"" << needle << "\"";
    };
    peer_config cfg;
    cfg.num_qps = 0;
    expect_error(cfg, "num_qps 0: expected 1 to 16");
    cfg.num_qps = 17;
    expect_error(cfg, "num_qps 17");

    cfg                = {};
    cfg.retry_interval = msec{0};
    expect_error(cfg, "retry_interval 0 ms");

    cfg                    = {};
    cfg.max_retry_interval = msec{100};
    expect_error(cfg, "max_retry_interval 100 ms");

    cfg                       = {};
    cfg.max_handshake_retries = 101;
    expect_error(cfg, "max_handshake_retries 101");

    cfg                 = {};
    cfg.reconnect_delay = msec{-1};
    expect_error(cfg, "reconnect_delay -1 ms");

    cfg              = {};
    cfg.retry_jitter = 1.5;
    expect_error(cfg, "retry_jitter 1.5: expected 0 to 1");
    cfg.retry_jitter = std::nan("");
    expect_error(cfg, "retry_jitter nan: expected 0 to 1");

    cfg                 = {};
    cfg.give_up_timeout = msec{0};
    expect_error(cfg, "give_up_timeout 0 ms");

    cfg                    = {};
    cfg.keepalive_interval = msec{-5};
    expect_error(cfg, "keepalive_interval -5 ms");

    cfg                   = {};
    cfg.keepalive_timeout = msec{0};
    expect_error(cfg, "keepalive_timeout 0 ms");
}

TEST(peer_config, constructor_refuses_bad_config_and_identity)
{
    peer_config cfg;
    cfg.num_qps = 20;
    EXPECT_THROW(peer_connection(cfg, {sender_a(), "job.1"},
                                 address_of(sender_b())),
                 std::invalid_argument);
    EXPECT_THROW(peer_connection({}, {sender_a(), "bad key"},
                                 address_of(sender_b())),
                 std::invalid_argument);
    auto zero        = sender_a();
    zero.instance_id = 0;
    EXPECT_THROW(peer_connection({}, {zero, "job.1"}, address_of(sender_b())),
                 std::invalid_argument);
    conn::sender controlled = sender_a();
    controlled.ud_qkey      = 0x80000000;
    EXPECT_THROW(peer_connection({}, {controlled, "job.1"},
                                 address_of(sender_b())),
                 std::invalid_argument);
    EXPECT_NO_THROW(
            peer_connection({}, {sender_a(), "job.1"}, address_of(sender_b())));
}

TEST(peer_order, is_strict_and_uses_gid_then_qpn_then_instance)
{
    auto a = sender_a(), b = sender_b();
    EXPECT_TRUE(rvt::agent::agent_is_lower(a, b));
    EXPECT_FALSE(rvt::agent::agent_is_lower(b, a));
    EXPECT_FALSE(rvt::agent::agent_is_lower(a, a));

    auto a2   = a; /* same GID: the UD QPN decides, even against instance */
    a2.ud_qpn = a.ud_qpn + 1;
    a2.instance_id = 1;
    EXPECT_TRUE(rvt::agent::agent_is_lower(a, a2));
    auto a3        = a; /* same GID and QPN: the instance decides */
    a3.instance_id = a.instance_id + 1;
    EXPECT_TRUE(rvt::agent::agent_is_lower(a, a3));
    EXPECT_FALSE(rvt::agent::agent_is_lower(a3, a));
    /* the GID's first differing byte decides, not its last */
    auto hi   = a;
    hi.gid[2] = 1;
    auto lo   = b;
    EXPECT_TRUE(rvt::agent::agent_is_lower(lo, hi));
}

/* ---- handshake ------------------------------------------------------ */

TEST_F(pair_fixture, normal_connect)
{
    EXPECT_EQ(a.pc.state(), peer_state::idle);
    EXPECT_FALSE(a.pc.next_timer());

    a.connect(t0);
    EXPECT_EQ(a.creates, 1);
    EXPECT_EQ(a.pc.state(), peer_state::connecting);
    ASSERT_EQ(a.type_of_next(), request_type);
    const conn::message &req = a.outbox.front().msg;
    EXPECT_EQ(req.hdr.seq, 1u);
    EXPECT_EQ(req.dst_instance_id, 0u); /* not known yet */
    EXPECT_EQ(req.num_qps, 4u);
    EXPECT_EQ(a.outbox.front().dest.ud_qpn, sender_b().ud_qpn);
    EXPECT_EQ(a.outbox.front().dest.ud_qkey, sender_b().ud_qkey);
    EXPECT_EQ(req.src.ud_qkey, sender_a().ud_qkey);

    b.receive(t0, a.take()); /* passive: creates, connects, replies */
    EXPECT_EQ(b.pc.state(), peer_state::connected);
    EXPECT_EQ(b.creates, 1);
    EXPECT_EQ(b.reported_connected, 1);
    ASSERT_EQ(b.type_of_next(), reply_type);
    EXPECT_EQ(b.outbox.front().msg.ack_seq, 1u);
    EXPECT_EQ(b.outbox.front().msg.status, 0u);

    a.receive(t0, b.take());
    expect_paired(a, b);
    EXPECT_EQ(a.connects, 1);
    EXPECT_EQ(b.connects, 1);
    EXPECT_EQ(a.reported_connected, 1);
    EXPECT_EQ(a.pc.counters().requests_sent, 1u);
    EXPECT_EQ(b.pc.counters().replies_sent, 1u);
    /* a second connect() while connected changes nothing */
    EXPECT_TRUE(a.pc.connect(t0).empty());
}

TEST_F(pair_fixture, lost_request_is_resent_with_backoff)
{
    a.connect(t0);
    conn::message first = a.take().msg; /* lost */
    ASSERT_EQ(a.pc.next_timer(), t0 + msec{250});
    a.tick(t0 + msec{249});
    EXPECT_TRUE(a.outbox.empty()) << "resent early";

    /* waits double from 250 ms up to the 2 s cap */
    const int waits[] = {250, 500, 1000, 2000, 2000};
    auto now          = t0;
    for (int w : waits) {
        ASSERT_EQ(a.pc.next_timer(), now + msec{w});
        now += msec{w};
        a.tick(now);
        ASSERT_EQ(a.type_of_next(), request_type);
        conn::message again = a.outbox.back().msg;
        /* a retransmission: same attempt, same QPs */
        EXPECT_EQ(std::memcmp(&again, &first, sizeof(again)), 0);
        if (w != waits[std::size(waits) - 1]) {
            a.outbox.clear(); /* lost again */
        }
    }
    EXPECT_EQ(a.pc.counters().requests_sent, 6u);
    exchange(a, b, now);
    expect_paired(a, b);
}

/* Spread: a thousand agents that asked one peer at once resend over
 * 0.75 to 1.25 times the wait, not all at its end; the same agent and
 * attempt always wait the same. */
TEST(peer_spread, agents_that_asked_at_once_resend_spread_out)
{
    peer_config cfg;
    cfg.am_size = 8192;
    /* agent i's first resend and the wait after it */
    const auto waits = [&](uint32_t i) {
        conn::sender s = sender_a();
        s.ud_qpn       = 0x1000 + i;
        s.instance_id  = 0x7000 + i;
        s.gid[14]      = static_cast<uint8_t>(i >> 8);
        s.gid[15]      = static_cast<uint8_t>(i);
        peer_connection pc(cfg, {s, "job.1"}, address_of(sender_b()));
        const auto only = [](const actions &acts) {
            return acts.size() == 1 ? acts[0].kind : action_kind::destroy_qps;
        };
        EXPECT_EQ(only(pc.connect(t0)), action_kind::create_qps);
        const std::vector<conn::qp_info> qps = {{0x100, 1},
                                                {0x101, 2},
                                                {0x102, 3},
                                                {0x103, 4}};
        EXPECT_EQ(only(pc.qps_created(t0, qps)), action_kind::send_message)
                << "the first request at once";
        const time_point first = *pc.next_timer();
        EXPECT_EQ(only(pc.tick(first)), action_kind::send_message);
        return std::make_pair(first - t0, *pc.next_timer() - first);
    };
    std::set<int64_t> firsts;
    for (uint32_t i = 0; i < 1000; ++i) {
        const auto [first, second] = waits(i);
        EXPECT_GE(first, msec{187});
        EXPECT_LE(first, msec{313});
        EXPECT_GE(second, msec{375});
        EXPECT_LE(second, msec{625});
        firsts.insert(std::chrono::duration_cast<msec>(first).count());
        if (i % 100 == 0) {
            EXPECT_EQ(waits(i), std::make_pair(first, second))
                    << "the same agent and attempt, another wait";
        }
    }
    EXPECT_GE(firsts.size(), 120u) << "of the 127 milliseconds possible";
    EXPECT_LE(*firsts.begin(), 192);
    EXPECT_GE(*firsts.rbegin(), 308);
}

TEST_F(pair_fixture, lost_reply_is_resent_for_the_duplicate_request)
{
    a.connect(t0);
    b.receive(t0, a.take());
    ASSERT_EQ(b.pc.state(), peer_state::connected);
    b.outbox.clear(); /* the accept is lost */

    a.tick(t0 + msec{250}); /* A resends the same request */
    b.receive(t0 + msec{250}, a.take());
    /* B answers again, without tearing anything down */
    EXPECT_EQ(b.flushes, 0);
    EXPECT_EQ(b.connects, 1);
    EXPECT_EQ(b.creates, 1);
    ASSERT_EQ(b.type_of_next(), reply_type);
    a.receive(t0 + msec{250}, b.take());
    expect_paired(a, b);
    EXPECT_EQ(b.pc.counters().replies_sent, 2u);
}

TEST_F(pair_fixture, exhausted_retries_fail_the_peer)
{
    a.connect(t0);
    auto now = t0;
    int sent = 0;
    while (a.pc.state() == peer_state::connecting) {
        sent += static_cast<int>(a.outbox.size());
        a.outbox.clear(); /* B is unreachable */
        auto next = a.pc.next_timer();
        ASSERT_TRUE(next);
        now = *next;
        a.tick(now);
    }
    /* 1 + max_handshake_retries requests: 0, .25, .75, 1.75, 3.75, 5.75,
     * 7.75, 9.75, 11.75 s; failed when the last one's 2 s ran out */
    EXPECT_EQ(sent, 9);
    EXPECT_EQ(now, t0 + msec{13750});
    EXPECT_EQ(a.pc.state(), peer_state::failed);
    EXPECT_EQ(a.reported_failed, 1);
    EXPECT_NE(a.failed_reason.find("no reply to 9 connection requests"),
              std::string::npos)
            << a.failed_reason;
    EXPECT_TRUE(a.live.empty()) << "QPs leaked";
    EXPECT_FALSE(a.pc.next_timer());

    /* a later connect() starts over */
    a.connect(now);
    exchange(a, b, now);
    expect_paired(a, b);
}

TEST_F(pair_fixture, stale_and_foreign_replies_are_ignored)
{
    a.connect(t0);
    conn::message req              = a.take().msg;
    std::vector<conn::qp_info> qps = {{0x900, 1},
                                      {0x901, 2},
                                      {0x902, 3},
                                      {0x903, 4}};
    auto reply    = conn::make_reply(sender_b(), req, 0, conn::status::accepted,
                                     {4, 8192}, qps);
    reply.ack_seq = 7; /* not our attempt */
    a.run(t0, a.pc.on_message(t0, reply));
    EXPECT_EQ(a.pc.state(), peer_state::connecting);
    EXPECT_NE(a.pc.last_ignored().find("seq 7"), std::string::npos)
            << a.pc.last_ignored();

    reply = conn::make_reply(make_sender(0x0c, 0x50, 0xbbbb), req, 0,
                             conn::status::accepted, {4, 8192}, qps);
    a.run(t0, a.pc.on_message(t0, reply)); /* another node's GID */
    EXPECT_EQ(a.pc.state(), peer_state::connecting);
    EXPECT_EQ(a.pc.counters().ignored_messages, 2u);

    reply = conn::make_reply(sender_b(), req, 0, conn::status::accepted,
                             {4, 8192}, qps);
    a.run(t0, a.pc.on_message(t0, reply));
    EXPECT_EQ(a.pc.state(), peer_state::connected);
    EXPECT_EQ(a.connected_peer, qps);
}

/* ---- crossed requests ----------------------------------------------- */

/* param: (A orders lower, deliver to the lower side first) */
class crossed : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(crossed, end_with_exactly_one_connection)
{
    auto [a_lower, lower_first] = GetParam();
    conn::sender sa = sender_a(), sb = sender_b();
    if (!a_lower) {
        std::swap(sa.gid, sb.gid);
    }
    node a{"A", sa, sb};
    node b{"B", sb, sa};
    ASSERT_EQ(rvt::agent::agent_is_lower(sa, sb), a_lower);
    node &lower  = a_lower ? a : b;
    node &higher = a_lower ? b : a;

    a.connect(t0);
    b.connect(t0);
    ASSERT_EQ(a.type_of_next(), request_type);
    ASSERT_EQ(b.type_of_next(), request_type);
    datagram to_lower = higher.take(), to_higher = lower.take();
    conn::message lower_request = to_higher.msg;

    if (lower_first) {
        lower.receive(t0, to_lower);
        higher.receive(t0, to_higher);
    } else {
        higher.receive(t0, to_higher);
        lower.receive(t0, to_lower);
    }
    /* the higher one ignored the lower's request ... */
    EXPECT_NE(higher.pc.last_ignored().find("crossed"), std::string::npos)
            << higher.pc.last_ignored();
    EXPECT_TRUE(higher.outbox.empty());
    /* ... and the lower one answered the higher's, with the QPs it had */
    EXPECT_EQ(lower.pc.state(), peer_state::connected);
    ASSERT_EQ(lower.type_of_next(), reply_type);
    EXPECT_EQ(lower.outbox.front().msg.hdr.seq, lower_request.hdr.seq);
    higher.receive(t0, lower.take());

    expect_paired(a, b);
    EXPECT_EQ(a.connects, 1);
    EXPECT_EQ(b.connects, 1);
    EXPECT_EQ(a.creates, 1);
    EXPECT_EQ(b.creates, 1);

    /* a late copy of the lower's request is superseded, not a new
     * connection */
    higher.receive(t0 + msec{1}, {address_of(higher.self), lower_request});
    EXPECT_EQ(higher.pc.state(), peer_state::connected);
    EXPECT_EQ(higher.flushes, 0);
    EXPECT_NE(higher.pc.last_ignored().find("stale"), std::string::npos)
            << higher.pc.last_ignored();

    /* and nothing more happens when the timers run */
    higher.tick(t0 + msec{300});
    lower.tick(t0 + msec{300});
    EXPECT_TRUE(a.outbox.empty() && b.outbox.empty());
    expect_paired(a, b);
}

INSTANTIATE_TEST_SUITE_P(peer_connection, crossed,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Bool()));

TEST(crossed_requests, request_during_qp_creation_is_answered_instead)
{
    node a{"A", sender_a(), sender_b()};
    node b{"B", sender_b(), sender_a()};
    b.connect(t0);
    actions create = a.pc.connect(t0); /* A's QPs do not exist yet */
    ASSERT_EQ(create.size(), 1u);
    ASSERT_EQ(create[0].kind, action_kind::create_qps);
    a.receive(t0, b.take());
    EXPECT_EQ(a.pc.state(), peer_state::creating);
    EXPECT_TRUE(a.outbox.empty());
    a.run(t0, create); /* QPs ready: A answers B instead of asking */
    ASSERT_EQ(a.outbox.size(), 1u);
    EXPECT_EQ(a.type_of_next(), reply_type);
    exchange(a, b, t0);
    expect_paired(a, b);
    EXPECT_EQ(a.pc.counters().requests_sent, 0u);
}

/* B (the higher) knew A by an address with a stale Q_Key: its requests
 * are lost at A's device. A's request, which B ignores as crossed, still
 * tells B where A is reached, so B's next resend reaches A, which answers:
 * connected at the first retry, not after B's give-up time. */
TEST(crossed_requests, the_higher_learns_the_q_key_from_a_request_it_ignores)
{
    conn::sender stale = sender_a();
    stale.ud_qkey ^= 0x100;
    node a{"A", sender_a(), sender_b()};
    node b{"B", sender_b(), stale};
    a.connect(t0);
    b.connect(t0);
    ASSERT_EQ(b.type_of_next(), request_type);
    EXPECT_EQ(b.take().dest.ud_qkey, stale.ud_qkey) << "A's device drops it";
    b.receive(t0, a.take());
    EXPECT_NE(b.pc.last_ignored().find("crossed"), std::string::npos)
            << b.pc.last_ignored();
    EXPECT_EQ(b.pc.peer().ud_qkey, sender_a().ud_qkey);

    const time_point t1 = t0 + msec{300}; /* past the first retry */
    b.tick(t1);
    ASSERT_EQ(b.type_of_next(), request_type);
    EXPECT_EQ(b.outbox.front().dest.ud_qkey, sender_a().ud_qkey);
    a.tick(t1);
    exchange(a, b, t1);
    expect_paired(a, b);
}

/* A busy refusal tells the Q_Key the peer is reached at, as an
 * acceptance does: the retry after it goes there. */
TEST(peer_q_key, a_reply_tells_where_the_peer_is_reached)
{
    conn::sender stale = sender_b();
    stale.ud_qkey ^= 0x100;
    node a{"A", sender_a(), stale};
    node b{"B", sender_b(), sender_a()};
    a.connect(t0);
    datagram req = a.take();
    EXPECT_EQ(req.dest.ud_qkey, stale.ud_qkey);
    const conn::message busy = conn::make_reply(sender_b(), req.msg, 0,
                                                conn::status::busy, {4, 8192},
                                                {});
    a.run(t0, a.pc.on_message(t0, busy));
    EXPECT_EQ(a.pc.state(), peer_state::waiting);
    EXPECT_EQ(a.pc.peer().ud_qkey, sender_b().ud_qkey);
    const time_point t1 = t0 + msec{2000}; /* past the reconnect delay */
    a.tick(t1);
    ASSERT_EQ(a.type_of_next(), request_type);
    EXPECT_EQ(a.outbox.front().dest.ud_qkey, sender_b().ud_qkey);
    exchange(a, b, t1);
    expect_paired(a, b);
}

/* ---- failures and recovery ------------------------------------------ */

TEST_F(pair_fixture, qp_error_flushes_fails_ops_and_reconnects)
{
    connect_a_to_b(t0);
    auto old_a = a.live, old_b = b.live;
    a.posted_ops = 3;
    b.posted_ops = 2;

    auto t1 = t0 + msec{100};
    a.run(t1, a.pc.qp_error(t1, "IBV_WC_RETRY_EXC_ERR on QP 0"));
    EXPECT_EQ(a.flushes, 1);
    EXPECT_NE(a.flush_reason.find("IBV_WC_RETRY_EXC_ERR"), std::string::npos);
    EXPECT_EQ(a.failed_ops, 3); /* every posted op reported failed */
    EXPECT_EQ(a.destroys, 1);
    EXPECT_TRUE(a.live.empty()); /* the errored QPs are gone */
    EXPECT_EQ(a.pc.state(), peer_state::waiting);
    EXPECT_EQ(a.pc.next_timer(), t1 + msec{1000});
    EXPECT_EQ(a.reported_failed, 0);

    a.tick(t1 + msec{999});
    EXPECT_EQ(a.creates, 1) << "reconnected before the delay";
    a.tick(t1 + msec{1000});
    EXPECT_EQ(a.creates, 2);
    ASSERT_EQ(a.type_of_next(), request_type);
    EXPECT_EQ(a.outbox.front().msg.hdr.seq, 2u);
    EXPECT_EQ(a.outbox.front().msg.dst_instance_id, sender_b().instance_id);

    /* B sees a newer attempt from the same instance: its side of the old
     * connection is dead too, so it flushes and answers on new QPs */
    exchange(a, b, t1 + msec{1000});
    EXPECT_EQ(b.flushes, 1);
    EXPECT_NE(b.flush_reason.find("new connection"), std::string::npos)
            << b.flush_reason;
    EXPECT_EQ(b.failed_ops, 2);
    expect_paired(a, b);
    for (const auto &qp : a.live) {
        EXPECT_EQ(std::count(old_a.begin(), old_a.end(), qp), 0);
    }
    for (const auto &qp : b.live) {
        EXPECT_EQ(std::count(old_b.begin(), old_b.end(), qp), 0);
    }
    EXPECT_EQ(a.pc.counters().connects, 2u);
    EXPECT_EQ(a.pc.counters().connection_lost, 1u);
}

TEST_F(pair_fixture, drain_waits_for_the_flushed_ops)
{
    connect_a_to_b(t0);
    a.auto_drain = false;
    a.run(t0, a.pc.qp_error(t0, "async event QP_FATAL"));
    EXPECT_EQ(a.pc.state(), peer_state::draining);
    EXPECT_EQ(a.destroys, 0) << "destroyed before the flush completed";
    EXPECT_FALSE(a.pc.next_timer());
    a.run(t0, a.pc.qp_error(t0, "flush completion")); /* expected: ignored */
    EXPECT_EQ(a.flushes, 1);
    a.run(t0 + msec{5}, a.pc.drained(t0 + msec{5}));
    EXPECT_EQ(a.destroys, 1);
    EXPECT_EQ(a.pc.state(), peer_state::waiting);
    EXPECT_EQ(a.pc.next_timer(), t0 + msec{1005});
}

TEST_F(pair_fixture, short_link_outage_recovers)
{
    connect_a_to_b(t0);
    auto t1 = t0 + msec{50};
    a.run(t1, a.pc.qp_error(t1, "retry exceeded"));
    /* link down for 3 s: everything A sends is lost */
    auto now = t1;
    while (now < t1 + msec{3000}) {
        a.outbox.clear();
        now = *a.pc.next_timer();
        a.tick(now);
    }
    EXPECT_EQ(a.pc.state(), peer_state::connecting);
    exchange(a, b, now); /* link up: the next resend gets through */
    expect_paired(a, b);
    EXPECT_EQ(a.reported_failed + b.reported_failed, 0);
}

TEST(peer_outage, link_down_beyond_give_up_timeout_fails_the_peer)
{
    peer_config cfg;
    cfg.give_up_timeout       = msec{5000};
    cfg.max_handshake_retries = 100; /* only the timeout can end it */
    node a{"A", sender_a(), sender_b(), cfg};
    node b{"B", sender_b(), sender_a(), cfg};
    a.connect(t0);
    exchange(a, b, t0);
    expect_paired(a, b);

    auto t1 = t0 + msec{10};
    a.run(t1, a.pc.qp_error(t1, "retry exceeded"));
    auto now     = t1;
    int attempts = 0;
    while (a.pc.state() != peer_state::failed) {
        attempts += static_cast<int>(a.outbox.size());
        a.outbox.clear(); /* the link stays down */
        auto next = a.pc.next_timer();
        ASSERT_TRUE(next);
        ASSERT_LE(*next, t1 + msec{5000});
        now = *next;
        a.tick(now);
    }
    EXPECT_EQ(now, t1 + msec{5000});
    EXPECT_GT(attempts, 3);
    EXPECT_EQ(a.reported_failed, 1);
    EXPECT_NE(a.failed_reason.find("give-up timeout of 5000 ms"),
              std::string::npos)
            << a.failed_reason;
    EXPECT_TRUE(a.live.empty());
    EXPECT_FALSE(a.pc.next_timer());
}

TEST_F(pair_fixture, peer_restart_tears_down_and_reconnects)
{
    connect_a_to_b(t0);
    a.posted_ops = 4;
    /* B's agent restarts: new instance id, new UD QP, same port GID */
    node b2{"B2", make_sender(0x0b, 0x77, 0xb2b2), sender_a()};
    auto t1 = t0 + msec{500};
    b2.connect(t1);
    ASSERT_EQ(b2.type_of_next(), request_type);
    a.receive(t1, b2.take());
    EXPECT_EQ(a.flushes, 1);
    EXPECT_NE(a.flush_reason.find("restarted (instance 0xbbbb -> 0xb2b2)"),
              std::string::npos)
            << a.flush_reason;
    EXPECT_EQ(a.failed_ops, 4);
    EXPECT_EQ(a.pc.peer().instance_id, 0xb2b2u);
    ASSERT_EQ(a.type_of_next(), reply_type);
    EXPECT_EQ(a.outbox.front().dest.ud_qpn, 0x77u); /* the new UD QP */
    /* ... and its Q_Key, which the request named: the old one's would be
     * dropped by B2's device */
    EXPECT_NE(b2.self.ud_qkey, sender_b().ud_qkey);
    EXPECT_EQ(a.outbox.front().dest.ud_qkey, b2.self.ud_qkey);
    exchange(a, b2, t1);
    expect_paired(a, b2);
    EXPECT_EQ(a.creates, 2);
    EXPECT_EQ(a.reported_failed, 0);

    /* a late datagram of the dead instance changes nothing */
    auto req = conn::make_request(sender_b(), "job.1", 0, 9, b.pc.local_qps(),
                                  8192);
    a.run(t1, a.pc.on_message(t1, req));
    EXPECT_EQ(a.flushes, 1);
    EXPECT_EQ(a.type_of_next(), 0);
    EXPECT_NE(a.pc.last_ignored().find("restart replaced"), std::string::npos)
            << a.pc.last_ignored();
    expect_paired(a, b2);
}

TEST_F(pair_fixture, request_naming_an_earlier_instance_is_refused)
{
    connect_a_to_b(t0);
    /* B restarted as B2; a request still naming B's instance is refused,
     * so the requester learns its address is stale */
    node b2{"B2", make_sender(0x0b, 0x50, 0xcccc), sender_a()};
    auto req = conn::make_request(sender_a(), "job.1", 0xbbbb, 1,
                                  a.pc.local_qps(), 8192);
    b2.run(t0, b2.pc.on_message(t0, req));
    ASSERT_EQ(b2.type_of_next(), reply_type);
    EXPECT_EQ(b2.outbox.front().msg.status,
              static_cast<uint16_t>(conn::status::stale_instance));
    EXPECT_EQ(b2.pc.state(), peer_state::idle);
}

/* ---- keepalive ------------------------------------------------------ */

TEST_F(pair_fixture, keepalive_on_idle_connections)
{
    connect_a_to_b(t0);
    EXPECT_EQ(a.pc.next_timer(), t0 + msec{5000});
    a.pc.activity(t0 + msec{3000}); /* traffic defers it */
    EXPECT_EQ(a.pc.next_timer(), t0 + msec{8000});
    a.tick(t0 + msec{7999});
    EXPECT_EQ(a.keepalives, 0);
    a.tick(t0 + msec{8000});
    EXPECT_EQ(a.keepalives, 1);
    a.tick(t0 + msec{8001});
    EXPECT_EQ(a.keepalives, 1) << "second keepalive while one is out";

    /* its completion is activity: the connection stays */
    a.pc.activity(t0 + msec{8100});
    EXPECT_EQ(a.pc.next_timer(), t0 + msec{13100});
    a.tick(t0 + msec{13100});
    EXPECT_EQ(a.keepalives, 2);

    /* no answer for keepalive_timeout: the connection is lost */
    EXPECT_EQ(a.pc.next_timer(), t0 + msec{23100});
    a.tick(t0 + msec{23099});
    EXPECT_EQ(a.flushes, 0);
    a.tick(t0 + msec{23100});
    EXPECT_EQ(a.flushes, 1);
    EXPECT_NE(a.flush_reason.find("keepalive"), std::string::npos)
            << a.flush_reason;
    EXPECT_EQ(a.pc.state(), peer_state::waiting);
}

/* ---- refusals -------------------------------------------------------- */

TEST(peer_refusal, wrong_job_key_fails_the_requester_for_good)
{
    node a{"A", sender_a(), sender_b(), {}, "job.1"};
    node b{"B", sender_b(), sender_a(), {}, "job.2"};
    a.connect(t0);
    exchange(a, b, t0);
    EXPECT_EQ(b.pc.state(), peer_state::idle); /* untouched */
    EXPECT_EQ(b.creates, 0);
    EXPECT_EQ(a.pc.state(), peer_state::failed);
    EXPECT_NE(a.failed_reason.find("wrong job key"), std::string::npos)
            << a.failed_reason;
    EXPECT_TRUE(a.live.empty());
}

TEST(peer_refusal, different_k_fails_the_requester)
{
    peer_config two;
    two.num_qps = 2;
    node a{"A", sender_a(), sender_b()};
    node b{"B", sender_b(), sender_a(), two};
    a.connect(t0);
    exchange(a, b, t0);
    EXPECT_EQ(a.pc.state(), peer_state::failed);
    EXPECT_NE(a.failed_reason.find(
                      "it uses 2 QPs per peer (--num-qps), this agent 4"),
              std::string::npos)
            << a.failed_reason;
}

TEST(peer_refusal, a_different_am_size_fails_the_requester_naming_both)
{
    peer_config small;
    small.am_size = 4096;
    node a{"A", sender_a(), sender_b()};
    node b{"B", sender_b(), sender_a(), small};
    a.connect(t0);
    exchange(a, b, t0);
    EXPECT_EQ(a.pc.state(), peer_state::failed);
    EXPECT_NE(a.failed_reason.find("its largest active message is 4096 "
                                   "bytes (--am-size), this agent's 8192"),
              std::string::npos)
            << a.failed_reason;
    EXPECT_EQ(b.pc.state(), peer_state::idle) << "a refusal changes nothing";
}

TEST(peer_refusal, wrong_uid_is_refused)
{
    node a{"A", sender_a(), sender_b()};
    auto other_user = sender_b();
    other_user.uid  = 0;
    node b{"B", other_user, sender_a()};
    a.connect(t0);
    exchange(a, b, t0);
    EXPECT_EQ(a.pc.state(), peer_state::failed);
    EXPECT_NE(a.failed_reason.find("wrong user"), std::string::npos)
            << a.failed_reason;
}

TEST(peer_refusal, busy_peer_is_retried_after_the_delay)
{
    node a{"A", sender_a(), sender_b()};
    node b{"B", sender_b(), sender_a()};
    b.create_fails = true;
    a.connect(t0);
    exchange(a, b, t0);
    EXPECT_EQ(a.pc.state(), peer_state::waiting);
    EXPECT_EQ(b.pc.state(), peer_state::idle); /* B only answered */
    EXPECT_FALSE(b.pc.next_timer());
    EXPECT_EQ(a.reported_failed, 0);
    EXPECT_EQ(a.live.size(), 4u); /* INIT QPs kept for the next attempt */

    b.create_fails = false;
    auto t1        = t0 + msec{1000};
    a.tick(t1);
    exchange(a, b, t1);
    expect_paired(a, b);
    EXPECT_EQ(a.creates, 1); /* the same QPs, a new attempt */
    EXPECT_EQ(a.pc.counters().requests_sent, 2u);
}

/* ---- closing ---------------------------------------------------------- */

TEST_F(pair_fixture, close_disconnects_both_sides_without_reconnect)
{
    connect_a_to_b(t0);
    b.posted_ops = 1;
    a.run(t0, a.pc.close(t0));
    EXPECT_EQ(a.flushes, 1);
    EXPECT_EQ(a.pc.state(), peer_state::idle);
    EXPECT_TRUE(a.live.empty());
    EXPECT_FALSE(a.pc.next_timer());
    ASSERT_EQ(a.type_of_next(),
              static_cast<uint16_t>(conn::msg_type::disconnect));

    b.receive(t0, a.take());
    EXPECT_EQ(b.flushes, 1);
    EXPECT_EQ(b.failed_ops, 1);
    EXPECT_EQ(b.pc.state(), peer_state::idle);
    EXPECT_TRUE(b.live.empty());
    EXPECT_FALSE(b.pc.next_timer()) << "B would reconnect to a closed peer";
    EXPECT_EQ(a.reported_failed + b.reported_failed, 0);

    /* either side can connect again later */
    b.connect(t0 + msec{10});
    exchange(a, b, t0 + msec{10});
    expect_paired(a, b);
}

TEST_F(pair_fixture, close_while_connecting_releases_the_qps)
{
    a.connect(t0);
    ASSERT_EQ(a.live.size(), 4u);
    a.run(t0, a.pc.close(t0));
    EXPECT_EQ(a.pc.state(), peer_state::idle);
    EXPECT_TRUE(a.live.empty());
    EXPECT_FALSE(a.pc.next_timer());
    /* B's late reply to the abandoned request is ignored */
    b.receive(t0, a.take());
    a.receive(t0, b.take());
    EXPECT_EQ(a.pc.state(), peer_state::idle);
    EXPECT_EQ(a.connects, 0);
}

TEST_F(pair_fixture, late_qp_set_is_handed_back)
{
    auto acts = a.pc.connect(t0);
    ASSERT_EQ(acts.size(), 1u);
    ASSERT_EQ(acts[0].kind, action_kind::create_qps);
    a.run(t0, a.pc.close(t0)); /* before the QPs exist */
    std::vector<conn::qp_info> late = {{0x300, 1},
                                       {0x301, 2},
                                       {0x302, 3},
                                       {0x303, 4}};
    auto back                       = a.pc.qps_created(t0, late);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0].kind, action_kind::destroy_qps);
    ASSERT_EQ(back[0].num_qps, 4u);
    EXPECT_EQ(back[0].local_qps[3], late[3]);
    EXPECT_EQ(a.pc.state(), peer_state::idle);
}
