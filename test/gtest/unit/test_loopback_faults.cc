/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the in-memory NIC's failures (test/loopback/loopback_nic.h):
 * key and length errors complete as RC's do and take the right QPs to
 * ERROR, everything behind a failed WR flushes, a peer that would not
 * answer fails with retry exceeded, and each injected fault (hold,
 * fail_next, break_silently) and the CQ overflow count does what it says.
 */
#include "test/gtest/unit/loopback_fixture.h"

#include <string>

using namespace loopback_test;

TEST_F(loopback_pair, a_bad_lkey_fails_locally_and_flushes_the_rest)
{
    start();
    region src(*a, 8, 0, 1), dst(*b, 8, remote_rw, 0);
    nic_sge wrong_key = src.sge(0, 8);
    wrong_key.lkey    = src.mr.rkey;
    nic_sge too_long  = src.sge(4, 8);
    for (nic_sge bad : {wrong_key, too_long}) {
        auto [x, y] = connect(*a, *b);
        post_ok(*a, x,
                {rdma(nic_opcode::rdma_write, 1, bad, dst),
                 rdma(nic_opcode::rdma_write, 2, src.sge(0, 8), dst),
                 unsignaled(
                         rdma(nic_opcode::rdma_write, 3, src.sge(0, 8), dst))});
        auto got = drain(*a);
        ASSERT_EQ(got.size(), 3u);
        expect_send(got[0], 1, x, nic_status::error, IBV_WC_LOC_PROT_ERR);
        expect_send(got[1], 2, x, nic_status::flushed, IBV_WC_WR_FLUSH_ERR);
        expect_send(got[2], 3, x, nic_status::flushed, IBV_WC_WR_FLUSH_ERR);
        EXPECT_EQ(a->query_qp(x), nic_qp_state::error);
        EXPECT_EQ(b->query_qp(y), nic_qp_state::rts) << "a local error";
    }
    EXPECT_EQ(dst.bytes[0], 0);
}

TEST_F(loopback_pair, a_bad_rkey_fails_remotely_and_takes_the_peer_down)
{
    start();
    region src(*a, 8, 0, 1), dst(*b, 8, remote_rw, 0);
    region read_only(*b, 8, IBV_ACCESS_REMOTE_READ, 0);
    nic_send wrong_key = rdma(nic_opcode::rdma_write, 1, src.sge(0, 8), dst);
    wrong_key.rkey     = dst.mr.lkey;
    for (nic_send bad :
         {wrong_key, rdma(nic_opcode::rdma_write, 1, src.sge(0, 8), dst, 4),
          rdma(nic_opcode::rdma_write, 1, src.sge(0, 8), read_only)}) {
        auto [x, y] = connect(*a, *b);
        ASSERT_TRUE(b->hold(y, true).ok());
        post_ok(*b, y, {send_imm(50, {}, 0)});
        post_ok(*a, x, {bad});
        auto got = drain(*a);
        ASSERT_EQ(got.size(), 1u);
        expect_send(got[0], 1, x, nic_status::error, IBV_WC_REM_ACCESS_ERR);
        EXPECT_EQ(a->query_qp(x), nic_qp_state::error);
        EXPECT_EQ(b->query_qp(y), nic_qp_state::error);
        auto flushed = drain(*b);
        ASSERT_EQ(flushed.size(), 1u) << "the peer's queued WR flushes";
        expect_send(flushed[0], 50, y, nic_status::flushed,
                    IBV_WC_WR_FLUSH_ERR);
    }
    EXPECT_EQ(dst.bytes, std::vector<uint8_t>(8, 0));
    EXPECT_EQ(read_only.bytes, std::vector<uint8_t>(8, 0));
}

TEST_F(loopback_pair, an_atomic_needs_remote_atomic_access_and_an_aligned_word)
{
    start();
    region no_atomic(*b, 16, remote_rw, 0);
    region word(*b, 16, remote_rw | IBV_ACCESS_REMOTE_ATOMIC, 0);
    loopback_options without;
    without.can_atomic = false;
    loopback_nic c(fabric, without);
    region on_c(c, 8, remote_rw | IBV_ACCESS_REMOTE_ATOMIC, 0);
    struct bad_case {
        nic_send wr;
        uint32_t vendor;
        loopback_nic *target;
    };
    for (const bad_case &bad :
         {bad_case{atomic(nic_opcode::atomic_fetch_add, 1, no_atomic, 0, 1),
                   IBV_WC_REM_ACCESS_ERR, b.get()},
          bad_case{atomic(nic_opcode::atomic_cmp_swp, 2, word, 4, 0, 1),
                   IBV_WC_REM_INV_REQ_ERR, b.get()},
          bad_case{atomic(nic_opcode::atomic_fetch_add, 3, on_c, 0, 1),
                   IBV_WC_REM_INV_REQ_ERR, &c}}) {
        auto [x, y] = connect(*a, *bad.target);
        post_ok(*a, x, {bad.wr});
        auto got = drain(*a);
        ASSERT_EQ(got.size(), 1u);
        expect_send(got[0], bad.wr.wr_id, x, nic_status::error, bad.vendor);
        EXPECT_EQ(got[0].fetched, 0u);
        EXPECT_EQ(a->query_qp(x), nic_qp_state::error);
        EXPECT_EQ(bad.target->query_qp(y), nic_qp_state::error);
    }
    EXPECT_EQ(no_atomic.bytes, std::vector<uint8_t>(16, 0));
    EXPECT_EQ(word.bytes, std::vector<uint8_t>(16, 0));
    EXPECT_EQ(on_c.bytes, std::vector<uint8_t>(8, 0));
    std::ignore = drain(*b);
    std::ignore = drain(c);
}

TEST_F(loopback_pair, read_needs_remote_read_and_local_write_access)
{
    start();
    region into(*a, 8, IBV_ACCESS_LOCAL_WRITE, 0);
    region gather_only(*a, 8, 0, 0);
    region no_read(*b, 8, IBV_ACCESS_REMOTE_WRITE, 5);
    region readable_mem(*b, 8, remote_rw, 5);

    auto [x1, y1] = connect(*a, *b);
    post_ok(*a, x1, {rdma(nic_opcode::rdma_read, 1, into.sge(0, 8), no_read)});
    expect_send(drain(*a).at(0), 1, x1, nic_status::error,
                IBV_WC_REM_ACCESS_ERR);
    EXPECT_EQ(b->query_qp(y1), nic_qp_state::error);

    auto [x2, y2] = connect(*a, *b);
    post_ok(*a, x2,
            {rdma(nic_opcode::rdma_read, 2, gather_only.sge(0, 8),
                  readable_mem)});
    expect_send(drain(*a).at(0), 2, x2, nic_status::error, IBV_WC_LOC_PROT_ERR);
    EXPECT_EQ(b->query_qp(y2), nic_qp_state::rts);
    EXPECT_EQ(into.bytes, std::vector<uint8_t>(8, 0));
    EXPECT_EQ(gather_only.bytes, std::vector<uint8_t>(8, 0));
}

TEST_F(loopback_pair, a_send_larger_than_a_receive_buffer_fails_both_sides)
{
    loopback_options options;
    options.receive_size = 16;
    start(options);
    region src(*a, 17, 0, 1);
    post_ok(*a, qa, {send_imm(1, {src.sge(0, 17)}, 5)});
    expect_send(drain(*a).at(0), 1, qa, nic_status::error,
                IBV_WC_REM_INV_REQ_ERR);
    auto got = drain(*b);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].receive);
    EXPECT_EQ(got[0].status, nic_status::error);
    EXPECT_EQ(got[0].vendor, uint32_t{IBV_WC_LOC_LEN_ERR});
    EXPECT_EQ(b->query_qp(qb), nic_qp_state::error);
}

TEST_F(loopback_pair, flush_completes_every_queued_wr_signaled_or_not)
{
    start();
    ASSERT_TRUE(a->hold(qa, true).ok());
    post_ok(*a, qa, {send_imm(1, {}, 1), unsignaled(send_imm(2, {}, 2))});
    EXPECT_TRUE(drain(*a).empty());
    ASSERT_TRUE(a->flush_qp(qa).ok());
    EXPECT_EQ(a->query_qp(qa), nic_qp_state::error);
    post_ok(*a, qa, {unsignaled(send_imm(3, {}, 3))});
    auto got = drain(*a);
    ASSERT_EQ(got.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
        expect_send(got[i], i + 1, qa, nic_status::flushed,
                    IBV_WC_WR_FLUSH_ERR);
    }
    EXPECT_TRUE(drain(*b).empty()) << "nothing reached the peer";
    EXPECT_EQ(b->query_qp(qb), nic_qp_state::rts);
    EXPECT_FALSE(a->flush_qp(qa + 1000).ok());
}

TEST_F(loopback_pair, post_on_an_unconnected_qp_fails_with_nothing_posted)
{
    start();
    const uint32_t q = a->create_qp(a->sq_depth()).value();
    nic_send s       = send_imm(1, {}, 1);
    size_t posted    = 99;
    auto r           = a->post(q, {&s, 1}, posted);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(posted, 0u);
    EXPECT_NE(r.error().find("INIT"), std::string::npos) << r.error();
    EXPECT_FALSE(a->connect_qp(qa, b->gid(), qb, 0, 0).ok())
            << "an RTS QP cannot be connected again";
}

TEST_F(loopback_pair, break_silently_generates_no_completion_ever)
{
    start();
    region src(*a, 4, 0, 1), dst(*b, 4, remote_rw, 0);
    ASSERT_TRUE(a->hold(qa, true).ok());
    post_ok(*a, qa, {rdma(nic_opcode::rdma_write, 1, src.sge(0, 4), dst)});
    ASSERT_TRUE(a->break_silently(qa).ok());
    EXPECT_EQ(a->query_qp(qa), nic_qp_state::error);
    post_ok(*a, qa, {send_imm(2, {}, 2)});
    ASSERT_TRUE(a->hold(qa, false).ok());
    ASSERT_TRUE(a->flush_qp(qa).ok());
    EXPECT_TRUE(drain(*a).empty());
    EXPECT_TRUE(drain(*b).empty());
    EXPECT_EQ(dst.bytes[0], 0);
    EXPECT_EQ(b->query_qp(qb), nic_qp_state::rts) << "the peer never knows";
}

TEST_F(loopback_pair, hold_keeps_wrs_unexecuted_until_released)
{
    start();
    region src(*a, 4, 0, 1), dst(*b, 4, remote_rw, 0);
    ASSERT_TRUE(a->hold(qa, true).ok());
    post_ok(*a, qa, {rdma(nic_opcode::rdma_write_imm, 1, src.sge(0, 4), dst)});
    EXPECT_TRUE(drain(*a).empty());
    EXPECT_TRUE(drain(*b).empty());
    EXPECT_EQ(dst.bytes[0], 0);
    EXPECT_EQ(a->queued(qa), 1u);
    ASSERT_TRUE(a->hold(qa, false).ok());
    EXPECT_EQ(dst.bytes[0], 1);
    EXPECT_EQ(drain(*a).size(), 1u);
    EXPECT_EQ(drain(*b).size(), 1u);
    EXPECT_FALSE(a->hold(qa + 1000, true).ok());
}

TEST_F(loopback_pair,
       fail_next_fails_one_wr_with_its_status_and_flushes_the_rest)
{
    start();
    ASSERT_TRUE(a->fail_next(qa, IBV_WC_RETRY_EXC_ERR).ok());
    post_ok(*a, qa, {unsignaled(send_imm(1, {}, 1)), send_imm(2, {}, 2)});
    auto got = drain(*a);
    ASSERT_EQ(got.size(), 2u);
    expect_send(got[0], 1, qa, nic_status::error, IBV_WC_RETRY_EXC_ERR);
    expect_send(got[1], 2, qa, nic_status::flushed, IBV_WC_WR_FLUSH_ERR);
    EXPECT_TRUE(drain(*b).empty());
    EXPECT_EQ(b->query_qp(qb), nic_qp_state::rts);
}

TEST_F(loopback_pair, a_peer_that_would_not_answer_fails_with_retry_exceeded)
{
    start();
    auto expect_retry_exceeded = [&](uint32_t x, const char *why) {
        post_ok(*a, x, {send_imm(1, {}, 1)});
        auto got = drain(*a);
        ASSERT_EQ(got.size(), 1u) << why;
        expect_send(got[0], 1, x, nic_status::error, IBV_WC_RETRY_EXC_ERR);
        EXPECT_EQ(a->query_qp(x), nic_qp_state::error) << why;
    };
    {
        auto [x, y] = connect(*a, *b);
        b->destroy_qp(y);
        expect_retry_exceeded(x, "the peer QP is gone");
    }
    {
        const uint32_t x = a->create_qp(a->sq_depth()).value();
        const uint32_t y = b->create_qp(b->sq_depth()).value();
        ASSERT_TRUE(a->connect_qp(x, b->gid(), y, 0x20, 0x10).ok());
        ASSERT_TRUE(b->connect_qp(y, a->gid(), qa, 0x10, 0x20).ok());
        expect_retry_exceeded(x, "the peer is connected to another QP");
    }
    {
        const uint32_t x = a->create_qp(a->sq_depth()).value();
        const uint32_t y = b->create_qp(b->sq_depth()).value();
        ASSERT_TRUE(a->connect_qp(x, b->gid(), y, 0x20, 0x10).ok());
        ASSERT_TRUE(b->connect_qp(y, a->gid(), x, 0x11, 0x20).ok());
        expect_retry_exceeded(x, "the peer expects another PSN");
    }
    {
        auto [x, y] = connect(*a, *b);
        ASSERT_TRUE(b->flush_qp(y).ok());
        expect_retry_exceeded(x, "the peer QP is in ERROR");
    }
    auto [x, y] = connect(*a, *b);
    (void)y;
    b.reset();
    expect_retry_exceeded(x, "the peer nic is gone");
}

TEST_F(loopback_pair, deregister_removes_the_mr_and_refuses_an_unknown_handle)
{
    start();
    region src(*a, 4, 0, 1), dst(*b, 4, remote_rw, 0);
    auto r = a->deregister(src.mr.handle);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value(), src.mr.handle);
    post_ok(*a, qa, {rdma(nic_opcode::rdma_write, 1, src.sge(0, 4), dst)});
    expect_send(drain(*a).at(0), 1, qa, nic_status::error, IBV_WC_LOC_PROT_ERR);
    auto again = a->deregister(src.mr.handle);
    ASSERT_FALSE(again.ok());
    EXPECT_NE(again.error().find(std::to_string(src.mr.handle)),
              std::string::npos)
            << again.error();
    EXPECT_FALSE(b->deregister(src.mr.handle).ok()) << "another nic's MR";
}

TEST_F(loopback_pair, completions_beyond_the_cq_capacity_count_as_overflow)
{
    loopback_options options;
    options.send_budget     = 2;
    options.receive_buffers = 1;
    start(options); /* a CQ of 3 */
    const nic_send empty = make(nic_opcode::rdma_write, 1, {});
    post_ok(*a, qa, {empty, empty, empty});
    EXPECT_EQ(a->stats().cq_high_water, 3u);
    EXPECT_EQ(a->stats().cq_overflows, 0u);
    drain(*a);
    post_ok(*a, qa, std::vector<nic_send>(10, unsignaled(empty)));
    EXPECT_EQ(a->stats().cq_overflows, 0u) << "unsignaled: no entries";

    overflow_expected = true;
    ASSERT_TRUE(a->hold(qa, true).ok());
    post_ok(*a, qa, {empty, empty, empty, unsignaled(empty)});
    ASSERT_TRUE(a->flush_qp(qa).ok());
    EXPECT_EQ(a->stats().cq_overflows, 1u) << "4 flushes in a CQ of 3";
    EXPECT_EQ(a->stats().cq_high_water, 4u);
    EXPECT_EQ(drain(*a).size(), 4u);
}
