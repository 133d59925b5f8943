/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's check of a client's work request before it may touch a
 * shared QP (agent/engine/work_check.h): everything the device would turn
 * into a QP error, breaking the connection every client shares, is refused
 * here with a reason naming the value.
 */
#include "uct/ib/rvt/agent/engine/work_check.h"

#include "uct/ib/rvt/common/imm.h"

#include <gtest/gtest.h>

using namespace rvt;

namespace {

const std::unordered_map<uint32_t, agent::client_mr> mrs = {
        {0x100, {7, 0x100, 0x200, 0x10000, 0x1000}},
};
const agent::work_limits limits{3, 8192, 1u << 30, true, true, 128};

work_request good_write()
{
    work_request w{};
    w.wr_id       = 1;
    w.op          = static_cast<uint8_t>(work_op::rdma_write_imm);
    w.flags       = work_signaled;
    w.peer        = 2;
    w.dst_client  = 5;
    w.length      = 0x800;
    w.local_addr  = 0x10800;
    w.lkey        = 0x100;
    w.rkey        = 0x999;
    w.remote_addr = 0x5000;
    return w;
}

void expect_refused(const work_request &w, const std::string &needle,
                    const agent::work_limits &l = limits)
{
    std::string why = agent::check_work(w, mrs, l);
    ASSERT_FALSE(why.empty()) << "accepted; expected: " << needle;
    EXPECT_NE(why.find(needle), std::string::npos) << why;
}

} // namespace

TEST(work_check, a_good_request_passes)
{
    EXPECT_EQ(agent::check_work(good_write(), mrs, limits), "");
    auto w   = good_write();
    w.length = 0; /* touches no local memory: no MR needed */
    w.lkey   = 0;
    EXPECT_EQ(agent::check_work(w, mrs, limits), "");
}

TEST(work_check, only_a_write_with_immediate_from_memory_may_be_striped)
{
    auto w  = good_write();
    w.flags = work_signaled | work_stripe;
    EXPECT_EQ(agent::check_work(w, mrs, limits), "");
    w.op = static_cast<uint8_t>(work_op::rdma_write);
    expect_refused(w, "stripe flag on operation 1");
    w.op = static_cast<uint8_t>(work_op::send_am);
    expect_refused(w, "stripe flag on operation 3");
    w            = good_write();
    w.flags      = work_signaled | work_stripe | work_inline;
    w.length     = 8;
    w.local_addr = 0;
    w.lkey       = 0;
    expect_refused(w, "stripe flag on operation 2 (inline)");
}

TEST(work_check, local_memory_must_be_the_clients_own)
{
    auto w = good_write();
    w.lkey = 0x101;
    expect_refused(w, "lkey 0x101");
    w            = good_write();
    w.local_addr = 0x10f00; /* runs 0x700 past the MR's end */
    expect_refused(w, "outside the MR");
    w            = good_write();
    w.local_addr = 0xffff; /* one byte before it */
    expect_refused(w, "outside the MR");
    w            = good_write();
    w.local_addr = ~uint64_t{0} - 0x10; /* wraps */
    expect_refused(w, "outside the MR");
}

TEST(work_check, fields_are_checked)
{
    auto w = good_write();
    w.op   = 0;
    expect_refused(w, "operation 0");
    w.op = work_op_limit;
    expect_refused(w, "operation 7");
    w       = good_write();
    w.flags = 0x80;
    expect_refused(w, "flags 0x80");
    w             = good_write();
    w.head_length = 8; /* a head segment is for active messages only */
    w.head_addr   = 0x10000;
    w.head_lkey   = 0x100;
    expect_refused(w, "head segment (length 8) on a non-AM");
    w      = good_write();
    w.peer = 3;
    expect_refused(w, "peer 3");
    w            = good_write();
    w.dst_client = imm::max_clients;
    expect_refused(w, "destination client 512");
    w       = good_write();
    w.am_id = 4;
    expect_refused(w, "AM id 4 on a non-AM");
}

TEST(work_check, active_messages_fit_the_receivers_slot)
{
    auto w       = good_write();
    w.op         = static_cast<uint8_t>(work_op::send_am);
    w.am_id      = 63;
    w.length     = 8192;
    w.local_addr = 0x10000;
    w.length     = 0x1000;
    EXPECT_EQ(agent::check_work(w, mrs, {3, 0x1000, 1u << 30, true, true, 128}),
              "");
    expect_refused(w, "active message of 4096 bytes",
                   {3, 2048, 1u << 30, true, true, 128});
    w.am_id = 64;
    expect_refused(w, "AM id 64", {3, 0x1000, 1u << 30, true, true, 128});
}

TEST(work_check, an_am_head_is_checked_like_the_payload)
{
    auto w        = good_write();
    w.op          = static_cast<uint8_t>(work_op::send_am);
    w.remote_addr = 0;
    w.rkey        = 0;
    w.length      = 0x800;
    w.head_addr   = 0x10000;
    w.head_lkey   = 0x100;
    w.head_length = 0x80;
    EXPECT_EQ(agent::check_work(w, mrs, limits), "");
    /* head and payload together must fit the receiver's slot */
    expect_refused(w, "active message of 2176 bytes (head 128 + 2048)",
                   {3, 0x800, 1u << 30, true, true, 128});
    auto h      = w;
    h.head_lkey = 0x101;
    expect_refused(h, "head lkey 0x101");
    h           = w;
    h.head_addr = 0x10ff0; /* 0x70 past the MR's end */
    expect_refused(h, "head range 0x10ff0+128: outside the MR");
    h             = w;
    h.head_length = 0; /* an address without a length is garbage */
    expect_refused(h, "without a head length");
    /* a head alone, with no payload, is a whole message */
    h        = w;
    h.length = 0;
    h.lkey   = 0;
    EXPECT_EQ(agent::check_work(h, mrs, limits), "");
}

TEST(work_check, a_message_larger_than_the_device_carries_is_refused)
{
    auto w = good_write();
    EXPECT_EQ(agent::check_work(w, mrs, {3, 8192, 0x800, true, true, 128}), "")
            << "exactly the largest";
    expect_refused(w, "length 2048: the device's largest message is 2047",
                   {3, 8192, 0x7ff, true, true, 128});
    w.length = ~0u; /* checked before the MR range, which it also misses */
    expect_refused(w, "length 4294967295: the device's largest message is "
                      "1073741824");
}

TEST(work_check, reads_need_a_device_that_reads)
{
    auto w = good_write();
    w.op   = static_cast<uint8_t>(work_op::rdma_read);
    EXPECT_EQ(agent::check_work(w, mrs, limits), "");
    expect_refused(w, "RDMA READ", {3, 8192, 1u << 30, false, true, 128});
}

TEST(work_check, an_inline_request_names_no_memory_and_fits_the_slot)
{
    agent::work_limits l = limits;
    l.max_inline         = 128;
    auto inl             = [] {
        auto w       = good_write();
        w.flags      = work_signaled | work_inline;
        w.length     = 128;
        w.local_addr = 0;
        w.lkey       = 0;
        return w;
    };
    EXPECT_EQ(agent::check_work(inl(), mrs, l), "");
    auto w = inl();
    w.op   = static_cast<uint8_t>(work_op::rdma_write);
    EXPECT_EQ(agent::check_work(w, mrs, l), "");
    w       = inl();
    w.op    = static_cast<uint8_t>(work_op::send_am);
    w.rkey  = 0;
    w.am_id = 3;
    EXPECT_EQ(agent::check_work(w, mrs, l), "");
    w.length = 0;
    EXPECT_EQ(agent::check_work(w, mrs, l), "") << "an empty AM";

    w        = inl();
    w.length = 129;
    expect_refused(w, "inline length 129: the work-data slot holds 128", l);
    w      = inl();
    w.lkey = 0x100; /* an MR of the client's, but inline names none */
    expect_refused(w, "lkey 0x100", l);
    w            = inl();
    w.local_addr = 0x10800;
    expect_refused(w, "local address 0x10800", l);
    w    = inl();
    w.op = static_cast<uint8_t>(work_op::rdma_read);
    expect_refused(w, "inline operation 4", l);
    w             = inl();
    w.op          = static_cast<uint8_t>(work_op::send_am);
    w.head_addr   = 0x10000;
    w.head_lkey   = 0x100;
    w.head_length = 8;
    w.length      = 16;
    expect_refused(w, "head length 8", l);
    /* the AM limit still holds when it is below the slot */
    l.max_am_size = 64;
    w             = inl();
    w.op          = static_cast<uint8_t>(work_op::send_am);
    w.length      = 65;
    expect_refused(w, "active message of 65 bytes", l);
}

namespace {

work_request good_atomic(work_op op)
{
    work_request w{};
    w.wr_id       = 9;
    w.op          = static_cast<uint8_t>(op);
    w.flags       = work_signaled;
    w.peer        = 1;
    w.dst_client  = 4;
    w.length      = atomic_size;
    w.operand     = 0x1234567890abcdefull; /* not an address: no MR */
    w.compare     = op == work_op::atomic_cswap ? 0xfedcba0987654321ull : 0;
    w.rkey        = 0x999;
    w.remote_addr = 0x5008;
    return w;
}

} // namespace

TEST(work_check, an_atomic_names_an_aligned_word_and_no_local_memory)
{
    for (work_op op : {work_op::atomic_fetch_add, work_op::atomic_cswap}) {
        SCOPED_TRACE(static_cast<int>(op));
        EXPECT_EQ(agent::check_work(good_atomic(op), mrs, limits), "");
        auto w  = good_atomic(op);
        w.flags = work_signaled | work_fence;
        EXPECT_EQ(agent::check_work(w, mrs, limits), "") << "fenced";

        w             = good_atomic(op);
        w.remote_addr = 0x5004;
        expect_refused(w, "atomic remote address 0x5004: expected a multiple "
                          "of 8");
        w        = good_atomic(op);
        w.length = 4;
        expect_refused(w, "atomic length 4: expected 8");
        w      = good_atomic(op);
        w.lkey = 0x100; /* even an MR of the client's: atomics name none */
        expect_refused(w, "atomic with lkey 0x100");
        w           = good_atomic(op);
        w.head_lkey = 0x100;
        expect_refused(w, "head lkey 0x100");
        w             = good_atomic(op);
        w.head_length = 8;
        expect_refused(w, "head length 8");
        w       = good_atomic(op);
        w.flags = work_signaled | work_inline;
        expect_refused(w, "inline flag");
        w       = good_atomic(op);
        w.am_id = 2;
        expect_refused(w, "AM id 2 on an atomic");
        w      = good_atomic(op);
        w.peer = 3;
        expect_refused(w, "peer 3");
        expect_refused(good_atomic(op), "this device does no atomics",
                       {3, 8192, 1u << 30, true, false, 128});
    }
    auto w    = good_atomic(work_op::atomic_fetch_add);
    w.compare = 0x42;
    expect_refused(w, "compare value 0x42 on a fetch-and-add");
}
