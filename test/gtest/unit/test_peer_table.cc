/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The peer table's rules (agent/peers/peer_table.h), one test each, with
 * no nic: addresses go in, placements and QP routes come out.
 */
#include "uct/ib/rvt/agent/peers/peer_table.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

namespace rvt::agent {
namespace {

using kind = peer_table::place_kind;

class peer_table_test : public ::testing::Test {
protected:
    peer_table::limits lim{8, 2};
    std::set<uint32_t> holding; /* peers the lanes still hold ops of */
    std::unique_ptr<peer_table> t;
    peer_config cfg;

    void SetUp() override
    {
        make();
    }

    void make()
    {
        t = std::make_unique<peer_table>(lim, [this](uint32_t index) {
            return !holding.contains(index);
        });
        /* the node's own, as the engine adds it first */
        add(address(0), true);
    }

    static wire::agent_address address(uint8_t last, uint32_t ud_qpn = 0x40)
    {
        wire::agent_address a{};
        a.gid[0]   = 0xfe;
        a.gid[15]  = last;
        a.ud_qpn   = ud_qpn;
        a.ud_qkey  = 0x1000 + last;
        a.agent_id = 100 + last;
        return a;
    }

    std::unique_ptr<peer_connection>
    connection(bool loopback, const peer_address &at = {})
    {
        cfg.am_size = 8192;
        if (loopback) {
            return std::make_unique<peer_connection>(
                    peer_connection::loopback(cfg));
        }
        local_agent self{};
        self.self.instance_id = 1;
        self.self.ud_qpn      = 0x40;
        self.self.ud_qkey     = 0x5eed;
        self.job_key          = "job.1";
        return std::make_unique<peer_connection>(cfg, self, at);
    }

    /* a peer a client resolved, as the engine makes it (client 1) */
    peer_table::peer &add(const wire::agent_address &a, bool loopback = false)
    {
        const auto where = t->place_client(a);
        EXPECT_TRUE(where.kind == kind::fresh || where.kind == kind::recycle);
        auto &p = t->add(where, a, loopback, connection(loopback));
        t->use(p, 1);
        return p;
    }

    /* a client's peer connected on QPs 0x200 and 0x201, its lanes */
    peer_table::peer &connected(const wire::agent_address &a)
    {
        auto &p = add(a);
        t->add_qp(p, 0x200);
        t->add_qp(p, 0x201);
        EXPECT_TRUE(t->set_lanes(p, both));
        return p;
    }
    const std::vector<uint32_t> both{0x200, 0x201};

    /* a peer made for a handshake request: idle until the request is
     * run (connect() stands in for it), and so recyclable till then */
    peer_table::peer &request(uint8_t last)
    {
        const auto where = t->place_request(address(last));
        EXPECT_TRUE(where.kind == kind::fresh || where.kind == kind::recycle);
        return t->add(where, address(last), false, connection(false));
    }
};

TEST_F(peer_table_test, indices_are_handed_out_in_order_from_the_nodes_own)
{
    EXPECT_TRUE(t->at(0).loopback);
    EXPECT_TRUE(t->at(0).confirmed());
    EXPECT_EQ(add(address(1)).index, 1u);
    EXPECT_EQ(add(address(2)).index, 2u);
    EXPECT_FALSE(t->at(2).confirmed());
    EXPECT_EQ(t->size(), 3u);
}

TEST_F(peer_table_test, a_known_address_is_placed_at_its_peer)
{
    add(address(1));
    add(address(2));
    for (auto where :
         {t->place_request(address(2)), t->place_client(address(2))}) {
        EXPECT_EQ(where.kind, kind::known);
        EXPECT_EQ(where.index, 2u);
    }
    EXPECT_EQ(t->find(address(1)), &t->at(1));
    /* the UD QPN is part of the address */
    EXPECT_EQ(t->find(address(1, 0x41)), nullptr);
    EXPECT_EQ(t->place_client(address(1, 0x41)).kind, kind::fresh);
}

/* Whom a handshake datagram speaks for (find_sender): a peer at its GID
 * and UD QPN whose connection knows its instance, or none yet; never the
 * node's own. */
TEST_F(peer_table_test, a_datagram_speaks_for_a_peer_of_its_instance_only)
{
    /* a client's peer, its instance not known yet: any instance */
    add(address(1));
    wire::agent_address reborn = address(1);
    reborn.agent_id            = 999;
    EXPECT_EQ(t->find_sender(address(1)), &t->at(1));
    EXPECT_EQ(t->find_sender(reborn), &t->at(1));

    /* one whose connection knows its instance */
    const wire::agent_address two = address(2);
    peer_address at{};
    std::memcpy(at.gid.data(), two.gid, at.gid.size());
    at.ud_qpn      = two.ud_qpn;
    at.instance_id = two.agent_id;
    t->add(t->place_request(two), two, false, connection(false, at));
    EXPECT_EQ(t->find_sender(two), &t->at(2));
    reborn          = two;
    reborn.agent_id = 999;
    EXPECT_EQ(t->find_sender(reborn), nullptr)
            << "a new instance is a new sender";
    EXPECT_EQ(t->find(reborn), &t->at(2)) << "at that peer's address";
    EXPECT_EQ(t->place_request(reborn).kind, kind::known);

    /* the node's own is no sender's */
    EXPECT_EQ(t->find(address(0)), &t->at(0));
    EXPECT_EQ(t->find_sender(address(0)), nullptr);
}

/* The Q_Key says how a peer is reached, not who it is: an address that
 * differs from a peer's in its Q_Key alone is that peer (the GID, UD QPN
 * and instance decide, as above). */
TEST_F(peer_table_test, the_q_key_is_no_part_of_a_peers_identity)
{
    const wire::agent_address two = address(2);
    peer_address at{};
    std::memcpy(at.gid.data(), two.gid, at.gid.size());
    at.ud_qpn      = two.ud_qpn;
    at.ud_qkey     = two.ud_qkey;
    at.instance_id = two.agent_id;
    t->add(t->place_request(two), two, false, connection(false, at));
    wire::agent_address other_key = two;
    other_key.ud_qkey             = two.ud_qkey + 1;
    EXPECT_EQ(t->find(other_key), &t->at(1));
    EXPECT_EQ(t->find_sender(other_key), &t->at(1));
    EXPECT_EQ(t->place_request(other_key).kind, kind::known);
    EXPECT_EQ(t->place_client(other_key).kind, kind::known);
}

TEST_F(peer_table_test, requests_are_answered_busy_at_the_half_open_bound)
{
    request(1).conn->connect(std::chrono::steady_clock::now());
    request(2).conn->connect(std::chrono::steady_clock::now());
    EXPECT_EQ(t->half_open(), 2u);
    EXPECT_EQ(t->place_request(address(3)).kind, kind::busy);
    /* a client's peer is wanted: no bound */
    EXPECT_EQ(t->place_client(address(3)).kind, kind::fresh);
}

TEST_F(peer_table_test, a_confirmed_or_used_peer_is_not_half_open)
{
    auto &a = request(1);
    a.conn->connect(std::chrono::steady_clock::now());
    auto &b = request(2);
    b.conn->connect(std::chrono::steady_clock::now());
    EXPECT_EQ(t->half_open(), 2u);
    t->confirm(a);
    EXPECT_EQ(t->half_open(), 1u);
    t->use(b, 7);
    EXPECT_EQ(t->half_open(), 0u);
    EXPECT_EQ(t->place_request(address(3)).kind, kind::fresh);
}

TEST_F(peer_table_test, a_record_that_holds_nothing_is_recycled)
{
    add(address(1));
    auto &old = request(2); /* idle, no QPs, nothing in the lanes */
    EXPECT_TRUE(t->recyclable(old));
    EXPECT_EQ(t->half_open(), 0u); /* holds nothing: not half-open */
    const auto where = t->place_request(address(3));
    ASSERT_EQ(where.kind, kind::recycle);
    EXPECT_EQ(where.index, 2u);
    auto &fresh = t->add(where, address(3), false, connection(false));
    EXPECT_EQ(fresh.index, 2u);
    EXPECT_EQ(t->size(), 3u);
    EXPECT_EQ(t->recycled(), 1u);
    /* the old address is forgotten, the new one found */
    EXPECT_EQ(t->find(address(2)), nullptr);
    EXPECT_EQ(t->find(address(3)), &t->at(2));
}

TEST_F(peer_table_test, a_record_that_holds_something_is_not_recycled)
{
    auto &p = request(1);
    ASSERT_TRUE(t->recyclable(p));
    holding.insert(p.index); /* ops of it in the lanes */
    EXPECT_FALSE(t->recyclable(p));
    holding.clear();
    t->add_qp(p, 0x200); /* a QP */
    EXPECT_FALSE(t->recyclable(p));
    t->remove_all_qps(p);
    ASSERT_TRUE(t->recyclable(p));
    p.conn->connect(std::chrono::steady_clock::now()); /* not idle */
    EXPECT_FALSE(t->recyclable(p));

    auto &q = request(2);
    ASSERT_TRUE(t->recyclable(q));
    t->use(q, 3); /* a client knows its index */
    EXPECT_FALSE(t->recyclable(q));
    auto &r = request(3);
    t->confirm(r);
    EXPECT_FALSE(t->recyclable(r));
    EXPECT_FALSE(t->recyclable(t->at(0))); /* the node's own */
}

TEST_F(peer_table_test, a_full_table_with_nothing_to_recycle_refuses)
{
    for (uint8_t i = 1; i < lim.max_peers; ++i) {
        t->use(add(address(i)), i);
    }
    EXPECT_EQ(t->size(), lim.max_peers);
    EXPECT_EQ(t->place_client(address(100)).kind, kind::full);
    EXPECT_EQ(t->place_request(address(100)).kind, kind::full);
    EXPECT_EQ(t->place_client(address(1)).kind, kind::known);
}

TEST_F(peer_table_test, a_qp_routes_to_the_peer_that_made_it)
{
    auto &a = add(address(1));
    auto &b = add(address(2));
    t->add_qp(a, 0x200);
    t->add_qp(b, 0x201);
    EXPECT_EQ(t->owner_of(0x200), &a);
    EXPECT_EQ(t->owner_of(0x201), &b);
    EXPECT_EQ(t->owner_of(0x202), nullptr);
    EXPECT_TRUE(a.owns(0x200));
    EXPECT_FALSE(a.owns(0x201));
}

TEST_F(peer_table_test, lanes_are_refused_a_qp_not_the_peers)
{
    auto &a = add(address(1));
    auto &b = add(address(2));
    t->add_qp(a, 0x200);
    t->add_qp(a, 0x202);
    t->add_qp(b, 0x201);
    const std::vector<uint32_t> mine{0x202, 0x200};
    ASSERT_TRUE(t->set_lanes(a, mine));
    EXPECT_EQ(a.lanes(), mine); /* in lane order, not the order made */
    const std::vector<uint32_t> theirs{0x200, 0x201};
    EXPECT_FALSE(t->set_lanes(a, theirs));
    EXPECT_TRUE(a.lanes().empty());
}

TEST_F(peer_table_test, another_peers_qp_is_never_removed)
{
    auto &a = add(address(1));
    auto &b = add(address(2));
    t->add_qp(a, 0x200);
    t->add_qp(b, 0x201);
    EXPECT_FALSE(t->remove_qp(a, 0x201));
    EXPECT_TRUE(b.owns(0x201));
    EXPECT_EQ(t->owner_of(0x201), &b);
    t->cq_empty();
    EXPECT_EQ(t->owner_of(0x201), &b);
}

TEST_F(peer_table_test, a_removed_qp_routes_until_the_cq_is_empty)
{
    auto &a = connected(address(1));
    ASSERT_TRUE(t->remove_qp(a, 0x200));
    EXPECT_FALSE(a.owns(0x200));
    EXPECT_EQ(a.lanes(), std::vector<uint32_t>{0x201});
    EXPECT_EQ(t->owner_of(0x200), &a); /* its receives may wait in the CQ */
    t->cq_empty();
    EXPECT_EQ(t->owner_of(0x200), nullptr);
    EXPECT_EQ(t->owner_of(0x201), &a);
}

TEST_F(peer_table_test, a_qpn_the_device_reuses_routes_to_its_new_peer)
{
    auto &a = add(address(1));
    auto &b = add(address(2));
    t->add_qp(a, 0x200);
    ASSERT_TRUE(t->remove_qp(a, 0x200));
    t->add_qp(b, 0x200); /* before the CQ was seen empty */
    t->cq_empty();
    EXPECT_EQ(t->owner_of(0x200), &b);
}

TEST_F(peer_table_test, all_qps_are_removed_at_once)
{
    auto &a = connected(address(1));
    EXPECT_EQ(t->remove_all_qps(a), both);
    EXPECT_TRUE(a.qps().empty());
    EXPECT_TRUE(a.lanes().empty());
    EXPECT_EQ(t->owner_of(0x201), &a);
    t->cq_empty();
    EXPECT_EQ(t->owner_of(0x201), nullptr);
}

/* "Send depths": deep while fewer than deep_peers others are, then
 * shallow; the node's own always deep and never counted. */
TEST_F(peer_table_test, peers_are_deep_up_to_deep_peers_then_shallow)
{
    lim.deep_peers       = 2;
    lim.deep_sq_depth    = 127;
    lim.shallow_sq_depth = 15;
    make();
    auto &own = t->at(0);
    EXPECT_EQ(t->sq_depth_for(own), 127u);
    t->add_qp(own, 0x100);
    EXPECT_EQ(own.sq_depth(), 127u);
    EXPECT_EQ(t->deep_held(), 0u) << "the node's own takes no deep place";
    uint32_t qpn = 0x200;
    std::vector<uint32_t> depths;
    for (uint8_t n = 1; n <= 4; ++n) {
        auto &p = add(address(n));
        EXPECT_EQ(p.sq_depth(), 0u) << "no QPs, no depth yet";
        depths.push_back(t->sq_depth_for(p));
        t->add_qp(p, qpn++);
        t->add_qp(p, qpn++);
        EXPECT_EQ(p.sq_depth(), depths.back()) << "its second QP as deep";
    }
    EXPECT_EQ(depths, (std::vector<uint32_t>{127, 127, 15, 15}));
    EXPECT_EQ(t->deep_held(), 2u);
}

TEST_F(peer_table_test, a_peers_last_qp_gives_its_deep_place_back)
{
    lim.deep_peers       = 1;
    lim.deep_sq_depth    = 127;
    lim.shallow_sq_depth = 15;
    make();
    auto &a = add(address(1));
    auto &b = add(address(2));
    t->add_qp(a, 0x200);
    t->add_qp(a, 0x201);
    EXPECT_EQ(t->sq_depth_for(b), 15u);
    EXPECT_TRUE(t->remove_qp(a, 0x200));
    EXPECT_EQ(a.sq_depth(), 127u) << "one QP left: still deep";
    EXPECT_EQ(t->sq_depth_for(b), 15u);
    EXPECT_TRUE(t->remove_qp(a, 0x201));
    EXPECT_EQ(a.sq_depth(), 0u);
    EXPECT_EQ(t->deep_held(), 0u);
    EXPECT_EQ(t->sq_depth_for(b), 127u) << "the place is free again";
    t->add_qp(b, 0x300);
    EXPECT_EQ(t->sq_depth_for(a), 15u) << "b took it";
    t->remove_all_qps(b);
    EXPECT_EQ(t->deep_held(), 0u) << "remove_all_qps gives it back too";
}

TEST_F(peer_table_test, a_client_that_goes_uses_no_peer)
{
    auto &a = add(address(1));
    auto &b = add(address(2));
    t->use(a, 5);
    t->use(b, 5);
    t->use(b, 6);
    t->client_gone(5);
    EXPECT_FALSE(a.users().test(5));
    EXPECT_TRUE(a.users().test(1));
    EXPECT_FALSE(b.users().test(5));
    EXPECT_TRUE(b.users().test(6));
}

} // namespace
} // namespace rvt::agent
