/*
 * The agent's check of a client's work request before it may touch a
 * shared QP (agent/work_check.h): everything the device would turn into a
 * QP error, breaking the connection every client shares, is refused here
 * with a reason naming the value.
 */
#include "uct/ib/rvt/agent/work_check.h"

#include "uct/ib/rvt/common/imm.h"

#include <gtest/gtest.h>

using namespace rvt;

namespace {

const std::unordered_map<uint32_t, agent::client_mr> mrs = {
        {0x100, {7, 0x100, 0x200, 0x10000, 0x1000}},
};
const agent::work_limits limits{3, 8192, 1u << 30, true};

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
    expect_refused(w, "operation 5");
    w       = good_write();
    w.flags = 0x80;
    expect_refused(w, "flags 0x80");
    w              = good_write();
    w.reserved1[3] = 1;
    expect_refused(w, "reserved bytes");
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
    EXPECT_EQ(agent::check_work(w, mrs, {3, 0x1000, 1u << 30, true}), "");
    expect_refused(w, "active message of 4096 bytes",
                   {3, 2048, 1u << 30, true});
    w.am_id = 64;
    expect_refused(w, "AM id 64", {3, 0x1000, 1u << 30, true});
}

TEST(work_check, reads_need_a_device_that_reads)
{
    auto w = good_write();
    w.op   = static_cast<uint8_t>(work_op::rdma_read);
    EXPECT_EQ(agent::check_work(w, mrs, limits), "");
    expect_refused(w, "RDMA READ", {3, 8192, 1u << 30, false});
}
