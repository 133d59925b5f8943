/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the in-memory NIC's data path (test/loopback/loopback_nic.h).
 * The engine's host tests trust it to behave as verbs does, so each rule
 * it promises is pinned here: bytes really move (copy mode), completions
 * go to the right CQ in the right order, send-queue slots are held until
 * polled, receiver-not-ready waits without reordering, datagrams and
 * sleeping work. Errors and injected faults: test_loopback_faults.cc.
 */
#include "test/gtest/unit/loopback_fixture.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

using namespace loopback_test;
namespace conn = rvt::wire::conn;

namespace {

bool readable(int fd)
{
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
}

conn::message datagram(uint32_t seq)
{
    conn::message m{};
    m.hdr.magic = conn::magic;
    m.hdr.seq   = seq;
    return m;
}

} // namespace

TEST(loopback_fabric, gives_each_nic_its_own_gid_and_handshake_qpn)
{
    loopback_fabric fabric;
    loopback_options options;
    options.receive_buffers = 5;
    loopback_nic a(fabric, options), b(fabric, options);
    EXPECT_NE(a.gid(), b.gid());
    EXPECT_NE(a.ud_qpn(), b.ud_qpn());
    EXPECT_GE(a.ud_qpn(), conn::min_qpn);
    /* and its own random Q_Key, as each rvtd run has */
    EXPECT_TRUE(rvt::wire::qkey_valid(a.ud_qkey())) << a.ud_qkey();
    EXPECT_TRUE(rvt::wire::qkey_valid(b.ud_qkey())) << b.ud_qkey();
    EXPECT_NE(a.ud_qkey(), b.ud_qkey());
    /* the device's UD receive queue */
    EXPECT_EQ(loopback_options{}.datagram_slots, rvt::agent::ud_receive_depth);
    EXPECT_EQ(rvt::agent::ud_receive_depth, 512u);
    EXPECT_NE(a.gid(), rvt::agent::gid_bytes{});
    EXPECT_EQ(a.counters().receive_buffers, 5u);
    EXPECT_EQ(a.counters().receives_posted, 5u);
    const uint32_t q = a.create_qp(a.sq_depth()).value();
    EXPECT_EQ(a.query_qp(q), nic_qp_state::init);
    EXPECT_EQ(a.query_qp(q + 1000), nic_qp_state::other);
}

TEST_F(loopback_pair, write_moves_the_bytes_and_completes_to_the_sender_only)
{
    start();
    region src(*a, 64, 0, 0xab), dst(*b, 64, remote_rw, 0);
    post_ok(*a, qa, {rdma(nic_opcode::rdma_write, 7, src.sge(0, 64), dst)});
    EXPECT_EQ(dst.bytes, src.bytes);
    auto got = drain(*a);
    ASSERT_EQ(got.size(), 1u);
    expect_send(got[0], 7, qa, nic_status::success, IBV_WC_SUCCESS);
    EXPECT_TRUE(drain(*b).empty()) << "a plain write consumes no receive";
    EXPECT_EQ(b->counters().receives_posted, 64u);
    EXPECT_EQ(a->stats().ops_executed, 1u);
}

TEST_F(loopback_pair, write_imm_puts_imm_and_length_into_the_target_cq)
{
    start();
    region src(*a, 32, 0, 0x5a), dst(*b, 64, remote_rw, 0);
    nic_send w = rdma(nic_opcode::rdma_write_imm, 1, src.sge(0, 32), dst, 8);
    w.imm      = 0x00a01800;
    post_ok(*a, qa, {w});
    EXPECT_EQ(dst.bytes[8], 0x5a);
    EXPECT_EQ(dst.bytes[7], 0);
    EXPECT_EQ(dst.bytes[40], 0);
    auto got = drain(*b);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].receive);
    EXPECT_EQ(got[0].wr_id, 0u) << "the oldest posted buffer";
    EXPECT_EQ(got[0].qpn, qb);
    EXPECT_EQ(got[0].byte_len, 32u);
    EXPECT_TRUE(got[0].has_imm);
    EXPECT_EQ(got[0].imm, 0x00a01800u);
    EXPECT_EQ(got[0].status, nic_status::success);
    EXPECT_EQ(b->counters().receives_posted, 63u);
    ASSERT_EQ(drain(*a).size(), 1u);
}

TEST_F(loopback_pair, send_gathers_both_sges_into_a_receive_buffer)
{
    start();
    region head(*a, 4, 0, 0x11), body(*a, 12, 0, 0x22);
    post_ok(*a, qa, {send_imm(3, {head.sge(0, 4), body.sge(0, 12)}, 42)});
    auto got = drain(*b);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].byte_len, 16u);
    EXPECT_EQ(got[0].imm, 42u);
    auto data = b->receive_data(static_cast<uint32_t>(got[0].wr_id), 16);
    ASSERT_EQ(data.size(), 16u);
    std::vector<uint8_t> expected(4, 0x11);
    expected.resize(16, 0x22);
    EXPECT_EQ(std::memcmp(data.data(), expected.data(), 16), 0);
    EXPECT_TRUE(b->receive_data(64, 16).empty()) << "outside the pool";
}

TEST_F(loopback_pair, read_copies_remote_bytes_into_local_memory)
{
    start();
    region local(*a, 16, IBV_ACCESS_LOCAL_WRITE, 0);
    region remote(*b, 16, remote_rw, 0x77);
    post_ok(*a, qa, {rdma(nic_opcode::rdma_read, 9, local.sge(0, 16), remote)});
    EXPECT_EQ(local.bytes, remote.bytes);
    auto got = drain(*a);
    ASSERT_EQ(got.size(), 1u);
    expect_send(got[0], 9, qa, nic_status::success, IBV_WC_SUCCESS);
}

TEST_F(loopback_pair, atomics_change_the_remote_word_and_fetch_its_old_value)
{
    start();
    region word(*b, 16, remote_rw | IBV_ACCESS_REMOTE_ATOMIC, 0);
    const uint64_t start_value = 40;
    std::memcpy(word.bytes.data() + 8, &start_value, 8);
    post_ok(*a, qa,
            {atomic(nic_opcode::atomic_fetch_add, 1, word, 8, 2),
             atomic(nic_opcode::atomic_cmp_swp, 2, word, 8, 42, 7),
             atomic(nic_opcode::atomic_cmp_swp, 3, word, 8, 42, 9)});
    auto got = drain(*a);
    ASSERT_EQ(got.size(), 3u);
    const uint64_t fetched[] = {40, 42, 7};
    for (size_t i = 0; i < 3; ++i) {
        expect_send(got[i], i + 1, qa, nic_status::success, IBV_WC_SUCCESS);
        EXPECT_EQ(got[i].fetched, fetched[i]) << "wr_id " << i + 1;
    }
    uint64_t now;
    std::memcpy(&now, word.bytes.data() + 8, 8);
    EXPECT_EQ(now, 7u) << "the second compare failed: no swap";
    EXPECT_EQ(word.bytes[0], 0) << "the word beside it is untouched";
}

TEST_F(loopback_pair, an_atomic_with_sges_inline_or_unsignaled_is_refused)
{
    start();
    region word(*b, 8, remote_rw | IBV_ACCESS_REMOTE_ATOMIC, 0);
    region local(*a, 8, IBV_ACCESS_LOCAL_WRITE, 0);
    nic_send with_sge = atomic(nic_opcode::atomic_fetch_add, 1, word, 0, 1);
    with_sge.sge[with_sge.num_sge++] = local.sge(0, 8);
    nic_send in_line = atomic(nic_opcode::atomic_cmp_swp, 2, word, 0, 0, 1);
    in_line.inline_payload = true;
    for (const nic_send &bad :
         {with_sge, in_line,
          unsignaled(atomic(nic_opcode::atomic_fetch_add, 3, word, 0, 1))}) {
        size_t posted = 99;
        auto r        = a->post(qa, {&bad, 1}, posted);
        ASSERT_FALSE(r.ok()) << "wr_id " << bad.wr_id;
        EXPECT_EQ(posted, 0u);
        EXPECT_NE(r.error().find("expected no SGEs, not inline, signaled"),
                  std::string::npos)
                << r.error();
    }
    EXPECT_EQ(word.bytes, std::vector<uint8_t>(8, 0));
}

TEST_F(loopback_pair,
       unsignaled_wrs_are_silent_and_keep_their_slots_until_a_poll)
{
    loopback_options options;
    options.sq_depth = 4;
    start(options);
    region src(*a, 4, 0, 9), dst(*b, 16, remote_rw, 0);
    auto w = [&](uint64_t id) {
        return rdma(nic_opcode::rdma_write, id, src.sge(0, 4), dst,
                    4 * (id - 1));
    };
    post_ok(*a, qa,
            {unsignaled(w(1)), unsignaled(w(2)), unsignaled(w(3)), w(4)});
    EXPECT_EQ(dst.bytes, std::vector<uint8_t>(16, 9)) << "all four ran";
    size_t posted = 99;
    nic_send more = w(5);
    EXPECT_FALSE(a->post(qa, {&more, 1}, posted).ok())
            << "the completion that retires them is not polled yet";
    auto got = drain(*a);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].wr_id, 4u);
    post_ok(*a, qa, {w(1), w(2), w(3), w(4)});
    EXPECT_EQ(drain(*a).size(), 4u);
}

TEST_F(loopback_pair, post_beyond_sq_depth_fails_after_accepting_what_fits)
{
    loopback_options options;
    options.sq_depth = 2;
    start(options);
    region src(*a, 4, 0, 1), dst(*b, 4, remote_rw, 0);
    const nic_send w = rdma(nic_opcode::rdma_write, 1, src.sge(0, 4), dst);
    std::vector<nic_send> chain{w, w, w};
    size_t posted = 99;
    auto r        = a->post(qa, chain, posted);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(posted, 2u);
    EXPECT_NE(r.error().find("sq_depth 2"), std::string::npos) << r.error();
    EXPECT_EQ(drain(*a).size(), 2u) << "the accepted ones ran";
}

TEST_F(loopback_pair, wrs_of_a_qp_run_in_post_order)
{
    start();
    region src(*a, 5, 0, 0), dst(*b, 1, remote_rw, 0);
    std::vector<nic_send> chain;
    for (uint8_t i = 0; i < 5; ++i) {
        src.bytes[i] = i + 1;
        chain.push_back(send_imm(10 + i, {}, 100 + i));
        chain.push_back(
                rdma(nic_opcode::rdma_write, 20 + i, src.sge(i, 1), dst));
    }
    ASSERT_TRUE(a->hold(qa, true).ok());
    post_ok(*a, qa, chain);
    EXPECT_EQ(a->queued(qa), 10u);
    ASSERT_TRUE(a->hold(qa, false).ok());
    EXPECT_EQ(dst.bytes[0], 5) << "the last write wins";
    auto sent = drain(*a);
    ASSERT_EQ(sent.size(), 10u);
    for (size_t i = 0; i < sent.size(); ++i) {
        EXPECT_EQ(sent[i].wr_id, chain[i].wr_id);
    }
    auto received = drain(*b);
    ASSERT_EQ(received.size(), 5u);
    for (uint32_t i = 0; i < 5; ++i) {
        EXPECT_EQ(received[i].imm, 100 + i);
        EXPECT_EQ(received[i].wr_id, i) << "buffers in posting order";
    }
}

TEST_F(loopback_pair, send_without_a_receive_buffer_waits_and_keeps_order)
{
    loopback_options options;
    options.receive_buffers = 1;
    start(options);
    region src(*a, 4, 0, 0x33), dst(*b, 4, remote_rw, 0);
    post_ok(*a, qa,
            {send_imm(1, {}, 1), send_imm(2, {}, 2),
             rdma(nic_opcode::rdma_write, 3, src.sge(0, 4), dst)});
    auto first = drain(*a);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].wr_id, 1u);
    EXPECT_EQ(a->queued(qa), 2u);
    EXPECT_EQ(dst.bytes[0], 0) << "the write waits behind the send";
    auto got = drain(*b);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].imm, 1u);
    EXPECT_TRUE(drain(*a).empty()) << "still no buffer";
    EXPECT_GT(a->stats().rnr_waits, 0u);

    const uint32_t buffer = static_cast<uint32_t>(got[0].wr_id);
    ASSERT_TRUE(b->repost({&buffer, 1}).ok());
    auto rest = drain(*a);
    ASSERT_EQ(rest.size(), 2u);
    EXPECT_EQ(rest[0].wr_id, 2u);
    EXPECT_EQ(rest[1].wr_id, 3u);
    EXPECT_EQ(dst.bytes[0], 0x33);
    got = drain(*b);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].imm, 2u);
    EXPECT_EQ(a->queued(qa), 0u);
}

TEST(loopback_nic, a_qp_connected_to_itself_delivers_to_its_own_cq)
{
    loopback_fabric fabric;
    loopback_nic n(fabric);
    region src(n, 8, 0, 4), dst(n, 8, remote_rw, 0);
    const uint32_t q = n.create_qp(n.sq_depth()).value();
    ASSERT_TRUE(n.connect_qp(q, n.gid(), q, 0x42, 0x42).ok());
    nic_send w = rdma(nic_opcode::rdma_write_imm, 1, src.sge(0, 8), dst);
    w.imm      = 77;
    post_ok(n, q, {w});
    EXPECT_EQ(dst.bytes, src.bytes);
    auto got = drain(n);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_TRUE(got[0].receive) << "the receive happened first";
    EXPECT_EQ(got[0].qpn, q);
    EXPECT_EQ(got[0].imm, 77u);
    expect_send(got[1], 1, q, nic_status::success, IBV_WC_SUCCESS);

    /* the keepalive's buffer is registered memory */
    post_ok(n, q, {send_imm(2, {n.control_buffer()}, 3)});
    got = drain(n);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].byte_len, n.control_buffer().length);
    EXPECT_EQ(got[1].status, nic_status::success);
}

/* QUERY_MR as the kernel answers it: a client's MR with what it was
 * registered with (no access flags: QUERY_MR tells none), nothing for a
 * handle with no MR, and nothing for the nic's own MRs (its receive pool
 * here), which owns_mr() names; every call counted. */
TEST(loopback_nic, query_mr_answers_for_client_mrs_only)
{
    loopback_fabric fabric;
    loopback_nic n(fabric);
    std::vector<uint8_t> memory(4096);
    const loopback_mr m = n.register_memory(memory.data(), memory.size(),
                                            remote_rw);
    auto q              = n.query_client_mr(m.handle);
    ASSERT_TRUE(q.has_value());
    EXPECT_EQ(q->handle, m.handle);
    EXPECT_EQ(q->lkey, m.lkey);
    EXPECT_EQ(q->rkey, m.rkey);
    EXPECT_EQ(q->addr, reinterpret_cast<uintptr_t>(memory.data()));
    EXPECT_EQ(q->length, memory.size());
    EXPECT_FALSE(n.owns_mr(m.handle));

    const loopback_mr pool = n.receive_pool_mr();
    EXPECT_TRUE(n.has_mr(pool.handle));
    EXPECT_TRUE(n.owns_mr(pool.handle));
    EXPECT_FALSE(n.query_client_mr(pool.handle).has_value());
    EXPECT_FALSE(n.query_client_mr(0xfffffff0).has_value());
    EXPECT_EQ(n.stats().mr_queries, 3u);
}

TEST(loopback_fabric, three_nodes_keep_their_traffic_apart)
{
    loopback_fabric fabric;
    loopback_nic a(fabric), b(fabric), c(fabric);
    auto join = [](loopback_nic &x, loopback_nic &y) {
        const uint32_t qx = x.create_qp(x.sq_depth()).value();
        const uint32_t qy = y.create_qp(y.sq_depth()).value();
        EXPECT_TRUE(x.connect_qp(qx, y.gid(), qy, 1, 2).ok());
        EXPECT_TRUE(y.connect_qp(qy, x.gid(), qx, 2, 1).ok());
        return std::pair{qx, qy};
    };
    auto [ab, ba] = join(a, b);
    auto [ac, ca] = join(a, c);
    auto [bc, cb] = join(b, c);
    post_ok(a, ab, {send_imm(1, {}, 0xab)});
    post_ok(a, ac, {send_imm(2, {}, 0xac), send_imm(3, {}, 0xac)});
    post_ok(c, ca, {send_imm(4, {}, 0xca)});
    post_ok(c, cb, {send_imm(5, {}, 0xcb)});
    auto at_a = drain(a), at_b = drain(b), at_c = drain(c);

    ASSERT_EQ(at_a.size(), 4u);
    expect_send(at_a[0], 1, ab, nic_status::success, IBV_WC_SUCCESS);
    expect_send(at_a[1], 2, ac, nic_status::success, IBV_WC_SUCCESS);
    expect_send(at_a[2], 3, ac, nic_status::success, IBV_WC_SUCCESS);
    EXPECT_TRUE(at_a[3].receive);
    EXPECT_EQ(at_a[3].qpn, ac);
    EXPECT_EQ(at_a[3].imm, 0xcau);

    ASSERT_EQ(at_b.size(), 2u);
    EXPECT_EQ(at_b[0].qpn, ba);
    EXPECT_EQ(at_b[0].imm, 0xabu);
    EXPECT_EQ(at_b[1].qpn, bc);
    EXPECT_EQ(at_b[1].imm, 0xcbu);

    ASSERT_EQ(at_c.size(), 4u);
    for (int i = 0; i < 2; ++i) {
        EXPECT_TRUE(at_c[i].receive);
        EXPECT_EQ(at_c[i].qpn, ca);
        EXPECT_EQ(at_c[i].imm, 0xacu);
    }
    expect_send(at_c[2], 4, ca, nic_status::success, IBV_WC_SUCCESS);
    expect_send(at_c[3], 5, cb, nic_status::success, IBV_WC_SUCCESS);
}

TEST_F(loopback_pair, datagrams_reach_the_nic_with_that_gid_and_qpn_or_are_lost)
{
    start();
    std::vector<uint32_t> seen;
    std::vector<rvt::agent::datagram_source> sources;
    auto deliver = [&](std::span<const std::byte> bytes,
                       const rvt::agent::datagram_source &source) {
        sources.push_back(source);
        ASSERT_EQ(bytes.size(), conn::message_size);
        conn::message m;
        std::memcpy(&m, bytes.data(), sizeof(m));
        EXPECT_EQ(m.hdr.magic, conn::magic);
        seen.push_back(m.hdr.seq);
    };
    ASSERT_TRUE(
            a->send_datagram(datagram(1), b->gid(), b->ud_qpn(), b->ud_qkey())
                    .ok());
    ASSERT_TRUE(a->send_datagram(datagram(2), b->gid(), b->ud_qpn() + 1,
                                 b->ud_qkey())
                        .ok());
    rvt::agent::gid_bytes nowhere = b->gid();
    nowhere[15] ^= 0x80;
    ASSERT_TRUE(
            a->send_datagram(datagram(3), nowhere, b->ud_qpn(), b->ud_qkey())
                    .ok());
    a->drop_datagrams(2);
    ASSERT_TRUE(
            a->send_datagram(datagram(4), b->gid(), b->ud_qpn(), b->ud_qkey())
                    .ok());
    ASSERT_TRUE(
            a->send_datagram(datagram(5), b->gid(), b->ud_qpn(), b->ud_qkey())
                    .ok());
    ASSERT_TRUE(
            a->send_datagram(datagram(6), b->gid(), b->ud_qpn(), b->ud_qkey())
                    .ok());
    ASSERT_TRUE(
            a->send_datagram(datagram(7), a->gid(), a->ud_qpn(), a->ud_qkey())
                    .ok());

    EXPECT_EQ(a->poll_datagrams(deliver, 16), 1u);
    EXPECT_EQ(seen, std::vector<uint32_t>{7});
    seen.clear();
    /* at most `max` a call: the rest wait, in order */
    EXPECT_EQ(b->poll_datagrams(deliver, 1), 1u);
    EXPECT_EQ(seen, (std::vector<uint32_t>{1}));
    EXPECT_EQ(b->poll_datagrams(deliver, 16), 1u);
    EXPECT_EQ(seen, (std::vector<uint32_t>{1, 6}));
    /* each arrives from its sender's GID and UD QP, whatever it claims */
    const rvt::agent::datagram_source from_a{a->gid(), a->ud_qpn()};
    EXPECT_EQ(sources, (std::vector<rvt::agent::datagram_source>{from_a, from_a,
                                                                 from_a}));
    EXPECT_EQ(b->poll_datagrams(deliver, 16), 0u);
    EXPECT_EQ(a->counters().datagrams_sent, 3u);
    EXPECT_EQ(a->counters().datagrams_dropped, 4u);
    EXPECT_EQ(b->counters().datagrams_received, 2u);
    EXPECT_EQ(a->counters().datagrams_received, 1u);
}

/* Another UD QP on a's node, as any process may open one: what it sends
 * arrives from its own QPN, and it cannot send from a QP it does not
 * have (the nic's own is a's, any other node's is not). */
TEST_F(loopback_pair, a_datagram_arrives_from_the_ud_qp_that_sent_it)
{
    start();
    const uint32_t mine = a->open_ud_qp();
    EXPECT_NE(mine, a->ud_qpn());
    EXPECT_NE(mine, b->ud_qpn());
    std::vector<rvt::agent::datagram_source> sources;
    auto deliver = [&](std::span<const std::byte>,
                       const rvt::agent::datagram_source &source) {
        sources.push_back(source);
    };
    ASSERT_TRUE(a->send_datagram_from(mine, datagram(1), b->gid(), b->ud_qpn(),
                                      b->ud_qkey())
                        .ok());
    ASSERT_TRUE(a->send_datagram_from(a->ud_qpn(), datagram(2), b->gid(),
                                      b->ud_qpn(), b->ud_qkey())
                        .ok());
    auto r = a->send_datagram_from(b->ud_qpn(), datagram(3), b->gid(),
                                   b->ud_qpn(), b->ud_qkey());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error(), "loopback nic: no UD QP " +
                                 std::to_string(b->ud_qpn()) +
                                 " on this node to send from");
    EXPECT_EQ(b->poll_datagrams(deliver, 16), 2u);
    EXPECT_EQ(sources,
              (std::vector<rvt::agent::datagram_source>{{a->gid(), mine},
                                                        {a->gid(),
                                                         a->ud_qpn()}}));
    /* what is sent to it is lost */
    ASSERT_TRUE(
            b->send_datagram(datagram(4), a->gid(), mine, a->ud_qkey()).ok());
    EXPECT_EQ(a->poll_datagrams(deliver, 16), 0u);
    EXPECT_EQ(b->counters().datagrams_dropped, 1u);
}

/* A UD QP takes only datagrams that name its Q_Key: any other is lost
 * before it takes one of the receiver's datagram slots, as a device
 * drops it before it takes a receive buffer, so a flood of them, however
 * long, leaves every slot to a sender that knows the Q_Key. A controlled
 * Q_Key (high bit set) means the sending QP's own: a process's QP cannot
 * borrow the agent's. */
TEST_F(loopback_pair, a_datagram_naming_another_q_key_never_takes_a_slot)
{
    loopback_options o;
    o.datagram_slots = 4;
    start(o);
    const uint32_t right = b->ud_qkey();
    const uint32_t mine  = a->open_ud_qp();
    uint32_t wrong       = right ^ 1;
    uint32_t sent_wrong  = 0;
    ASSERT_TRUE(b->arm());
    for (uint32_t i = 0; i < 3 * o.datagram_slots; ++i, ++sent_wrong) {
        ASSERT_TRUE(a->send_datagram(datagram(100 + i), b->gid(), b->ud_qpn(),
                                     wrong)
                            .ok());
        wrong = (wrong + 0x10001) & 0x7fffffff;
        wrong = wrong == right ? 1 : wrong;
    }
    /* the Q_Key every agent had before they were random ("RVTQ") */
    if (right != 0x52565451) {
        ASSERT_TRUE(a->send_datagram(datagram(200), b->gid(), b->ud_qpn(),
                                     0x52565451)
                            .ok());
        ++sent_wrong;
    }
    /* controlled: a's QP's own, and a process's QP has no agent's */
    ASSERT_TRUE(a->send_datagram(datagram(201), b->gid(), b->ud_qpn(),
                                 rvt::wire::qkey_controlled)
                        .ok());
    ASSERT_TRUE(a->send_datagram_from(mine, datagram(202), b->gid(),
                                      b->ud_qpn(),
                                      rvt::wire::qkey_controlled | right)
                        .ok());
    sent_wrong += 2;
    EXPECT_EQ(b->stats().datagrams_qkey_dropped, sent_wrong);
    EXPECT_EQ(a->counters().datagrams_dropped, sent_wrong);
    EXPECT_EQ(a->counters().datagrams_sent, 0u);
    EXPECT_FALSE(readable(b->event_fd())) << "a datagram that was lost woke b";
    b->disarm();

    /* every slot is still free for those that name it */
    for (uint32_t i = 0; i < o.datagram_slots; ++i) {
        ASSERT_TRUE(a->send_datagram_from(i % 2 == 0 ? mine : a->ud_qpn(),
                                          datagram(1 + i), b->gid(),
                                          b->ud_qpn(), right)
                            .ok());
    }
    std::vector<uint32_t> seen;
    const auto deliver = [&](std::span<const std::byte> bytes, const auto &) {
        conn::message m;
        std::memcpy(&m, bytes.data(), sizeof(m));
        seen.push_back(m.hdr.seq);
    };
    EXPECT_EQ(b->poll_datagrams(deliver, 64), o.datagram_slots);
    EXPECT_EQ(seen, (std::vector<uint32_t>{1, 2, 3, 4}));
    EXPECT_EQ(b->counters().datagrams_received, o.datagram_slots);
    EXPECT_EQ(b->stats().datagrams_qkey_dropped, sent_wrong);
    EXPECT_EQ(a->stats().datagrams_qkey_dropped, 0u);

    /* a controlled Q_Key from the nic's own QP is its own Q_Key */
    ASSERT_TRUE(a->send_datagram(datagram(9), a->gid(), a->ud_qpn(),
                                 rvt::wire::qkey_controlled)
                        .ok());
    seen.clear();
    EXPECT_EQ(a->poll_datagrams(deliver, 64), 1u);
    EXPECT_EQ(seen, std::vector<uint32_t>{9});
}

TEST_F(loopback_pair, an_armed_nic_wakes_once_on_a_completion_or_datagram)
{
    start();
    const int fd = b->event_fd();
    ASSERT_GE(fd, 0);
    post_ok(*a, qa, {send_imm(1, {}, 1)});
    EXPECT_FALSE(readable(fd)) << "not armed: no event";
    EXPECT_FALSE(b->arm()) << "a completion is waiting";
    EXPECT_EQ(drain(*b).size(), 1u);
    const uint32_t buffer = 0;
    ASSERT_TRUE(b->repost({&buffer, 1}).ok());

    ASSERT_TRUE(b->arm());
    EXPECT_FALSE(readable(fd));
    post_ok(*a, qa, {send_imm(2, {}, 2)});
    EXPECT_TRUE(readable(fd));
    b->disarm();
    EXPECT_FALSE(readable(fd)) << "disarm drains the fd";
    EXPECT_EQ(drain(*b).size(), 1u);

    ASSERT_TRUE(b->arm());
    ASSERT_TRUE(
            a->send_datagram(datagram(1), b->gid(), b->ud_qpn(), b->ud_qkey())
                    .ok());
    EXPECT_TRUE(readable(fd)) << "a datagram wakes it too";
    post_ok(*a, qa, {send_imm(3, {}, 3)});
    uint64_t events = 0;
    ASSERT_EQ(::read(fd, &events, sizeof(events)), ssize_t{8});
    EXPECT_EQ(events, 1u) << "one event per arm()";
    b->disarm();
    EXPECT_FALSE(b->arm()) << "a datagram and a completion wait";
    EXPECT_EQ(b->poll_datagrams([](std::span<const std::byte>, const auto &) {},
                                16),
              1u);
    EXPECT_EQ(drain(*b).size(), 1u);
    EXPECT_TRUE(b->arm());
    b->disarm();
    drain(*a);
}

TEST_F(loopback_pair, none_mode_moves_no_bytes_and_checks_no_keys)
{
    loopback_options options;
    options.memory = memory_mode::none;
    start(options);
    std::vector<uint8_t> src(8, 1), dst(8, 0);
    nic_send w    = make(nic_opcode::rdma_write_imm, 1,
                         {{reinterpret_cast<uintptr_t>(src.data()), 8, 0xbad}});
    w.remote_addr = reinterpret_cast<uintptr_t>(dst.data());
    w.rkey        = 0xbad;
    post_ok(*a, qa, {w});
    expect_send(drain(*a).at(0), 1, qa, nic_status::success, IBV_WC_SUCCESS);
    auto got = drain(*b);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].byte_len, 8u) << "receives still count";
    EXPECT_EQ(dst, std::vector<uint8_t>(8, 0));
}

TEST_F(loopback_pair, deferred_execution_runs_wrs_at_the_next_poll)
{
    loopback_options options;
    options.execute_on_post = false;
    start(options);
    region src(*a, 4, 0, 6), dst(*b, 4, remote_rw, 0);
    post_ok(*a, qa, {rdma(nic_opcode::rdma_write_imm, 1, src.sge(0, 4), dst)});
    EXPECT_EQ(dst.bytes[0], 0);
    EXPECT_EQ(a->queued(qa), 1u);
    ASSERT_EQ(drain(*b).size(), 1u) << "polling any nic runs them";
    EXPECT_EQ(dst.bytes[0], 6);
    EXPECT_EQ(drain(*a).size(), 1u);
    post_ok(*a, qa, {send_imm(2, {}, 2)});
    EXPECT_FALSE(a->arm()) << "arm() runs them too";
}

TEST_F(loopback_pair, inline_bytes_are_copied_at_post_and_check_no_lkey)
{
    loopback_options options;
    options.execute_on_post = false; /* they run after the source changed */
    options.max_inline      = 32;
    start(options);
    std::vector<uint8_t> src(32, 0x3c); /* not registered anywhere */
    const uint64_t at = reinterpret_cast<uintptr_t>(src.data());
    region dst(*b, 64, remote_rw, 0);
    nic_send w       = rdma(nic_opcode::rdma_write_imm, 1, {at, 32, 0}, dst);
    w.inline_payload = true;
    nic_send s       = send_imm(2, {{at, 8, 0}, {at + 8, 8, 0}}, 5);
    s.inline_payload = true;
    post_ok(*a, qa, {w, s});
    std::fill(src.begin(), src.end(), 0xee); /* reused once post returned */
    EXPECT_EQ(a->queued(qa), 2u);
    auto got = drain(*b);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(std::vector<uint8_t>(dst.bytes.begin(), dst.bytes.begin() + 32),
              std::vector<uint8_t>(32, 0x3c));
    EXPECT_EQ(dst.bytes[32], 0);
    EXPECT_EQ(got[1].byte_len, 16u);
    auto data = b->receive_data(static_cast<uint32_t>(got[1].wr_id), 16);
    ASSERT_EQ(data.size(), 16u);
    for (std::byte x : data) {
        EXPECT_EQ(x, std::byte{0x3c});
    }
    auto sent = drain(*a);
    ASSERT_EQ(sent.size(), 2u);
    expect_send(sent[1], 2, qa, nic_status::success, IBV_WC_SUCCESS);
}

TEST_F(loopback_pair, inline_beyond_max_inline_or_on_a_read_is_refused)
{
    loopback_options options;
    options.max_inline = 32;
    start(options);
    std::vector<uint8_t> src(33, 1);
    const uint64_t at = reinterpret_cast<uintptr_t>(src.data());
    region dst(*b, 64, remote_rw, 0);
    nic_send ok         = rdma(nic_opcode::rdma_write, 1, {at, 32, 0}, dst);
    ok.inline_payload   = true;
    nic_send over       = rdma(nic_opcode::rdma_write, 2, {at, 33, 0}, dst);
    over.inline_payload = true;
    std::vector<nic_send> chain{ok, over};
    size_t posted = 99;
    auto r        = a->post(qa, chain, posted);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(posted, 1u);
    EXPECT_NE(r.error().find("inline payload of 33 bytes: max_inline is 32"),
              std::string::npos)
            << r.error();
    nic_send read       = rdma(nic_opcode::rdma_read, 3, {at, 8, 0}, dst);
    read.inline_payload = true;
    r                   = a->post(qa, {&read, 1}, posted);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(posted, 0u);
    EXPECT_NE(r.error().find("inline RDMA READ"), std::string::npos)
            << r.error();
}

TEST_F(loopback_pair, repost_refuses_a_buffer_on_the_srq_or_outside_the_pool)
{
    loopback_options options;
    options.receive_buffers = 2;
    start(options);
    post_ok(*a, qa, {send_imm(1, {}, 1)});
    auto got = drain(*b);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(b->counters().receives_posted, 1u);
    std::vector<uint32_t> twice{0, 0};
    auto r = b->repost(twice);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("already on the SRQ"), std::string::npos)
            << r.error();
    EXPECT_EQ(b->counters().receives_posted, 2u) << "the first one went";
    EXPECT_FALSE(b->repost(std::vector<uint32_t>{2}).ok());
    drain(*a);
}
