/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the loopback_nic tests share (test_loopback_nic.cc: the data path;
 * test_loopback_faults.cc: errors and injected faults): memory registered
 * with a nic, builders for work requests, polling every completion, and a
 * fixture of two nodes with one connected pair of QPs.
 */
#ifndef RVT_TEST_GTEST_UNIT_LOOPBACK_FIXTURE_H
#define RVT_TEST_GTEST_UNIT_LOOPBACK_FIXTURE_H

#include "test/loopback/loopback_nic.h"

#include <infiniband/verbs.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

namespace loopback_test {

using rvt::agent::nic_completion;
using rvt::agent::nic_opcode;
using rvt::agent::nic_qp_state;
using rvt::agent::nic_send;
using rvt::agent::nic_sge;
using rvt::agent::nic_status;
using rvt::agent::testing::loopback_fabric;
using rvt::agent::testing::loopback_mr;
using rvt::agent::testing::loopback_nic;
using rvt::agent::testing::loopback_options;
using rvt::agent::testing::memory_mode;

constexpr int remote_rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                          IBV_ACCESS_REMOTE_READ;

/* Memory registered with one nic, filled with one byte value. */
struct region {
    std::vector<uint8_t> bytes;
    loopback_mr mr;

    region(loopback_nic &nic, size_t size, int access, uint8_t fill) :
        bytes(size, fill), mr(nic.register_memory(bytes.data(), size, access))
    {
    }
    uint64_t addr(size_t offset = 0) const
    {
        return reinterpret_cast<uintptr_t>(bytes.data() + offset);
    }
    nic_sge sge(size_t offset, uint32_t length) const
    {
        return {addr(offset), length, mr.lkey};
    }
};

inline nic_send
make(nic_opcode code, uint64_t wr_id, std::initializer_list<nic_sge> sges)
{
    nic_send s{};
    s.wr_id    = wr_id;
    s.opcode   = code;
    s.signaled = true;
    for (const nic_sge &g : sges) {
        s.sge[s.num_sge++] = g;
    }
    return s;
}

inline nic_send rdma(nic_opcode code, uint64_t wr_id, nic_sge local,
                     const region &remote, size_t offset = 0)
{
    nic_send s    = make(code, wr_id, {local});
    s.remote_addr = remote.addr(offset);
    s.rkey        = remote.mr.rkey;
    return s;
}

/* A device atomic on the word at remote's offset: no SGEs, signaled. */
inline nic_send atomic(nic_opcode code, uint64_t wr_id, const region &remote,
                       size_t offset, uint64_t compare_add, uint64_t swap = 0)
{
    nic_send s    = make(code, wr_id, {});
    s.remote_addr = remote.addr(offset);
    s.rkey        = remote.mr.rkey;
    s.compare_add = compare_add;
    s.swap        = swap;
    return s;
}

inline nic_send
send_imm(uint64_t wr_id, std::initializer_list<nic_sge> sges, uint32_t imm)
{
    nic_send s = make(nic_opcode::send_imm, wr_id, sges);
    s.imm      = imm;
    return s;
}

inline nic_send unsignaled(nic_send s)
{
    s.signaled = false;
    return s;
}

inline void
post_ok(loopback_nic &nic, uint32_t qpn, std::vector<nic_send> chain)
{
    size_t posted = 99;
    auto r        = nic.post(qpn, chain, posted);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(posted, chain.size());
}

/* Every completion waiting, polled in small batches. */
inline std::vector<nic_completion> drain(loopback_nic &nic)
{
    std::vector<nic_completion> all;
    std::array<nic_completion, 3> batch;
    for (size_t n; (n = nic.poll(batch)) > 0;) {
        all.insert(all.end(), batch.begin(), batch.begin() + n);
    }
    return all;
}

inline void expect_send(const nic_completion &c, uint64_t wr_id, uint32_t qpn,
                        nic_status status, uint32_t vendor)
{
    EXPECT_FALSE(c.receive) << "wr_id " << c.wr_id;
    EXPECT_EQ(c.wr_id, wr_id);
    EXPECT_EQ(c.qpn, qpn);
    EXPECT_EQ(c.status, status) << "wr_id " << c.wr_id;
    EXPECT_EQ(c.vendor, vendor) << "wr_id " << c.wr_id;
}


/* Two nodes, a and b, with QP qa on a connected to qb on b. */
class loopback_pair : public ::testing::Test {
protected:
    void start(const loopback_options &options = {})
    {
        a                = std::make_unique<loopback_nic>(fabric, options);
        b                = std::make_unique<loopback_nic>(fabric, options);
        std::tie(qa, qb) = connect(*a, *b);
    }

    static std::pair<uint32_t, uint32_t>
    connect(loopback_nic &x, loopback_nic &y, uint32_t psn_x = 0x111,
            uint32_t psn_y = 0x222)
    {
        const uint32_t qx = x.create_qp(x.sq_depth()).value();
        const uint32_t qy = y.create_qp(y.sq_depth()).value();
        EXPECT_TRUE(x.connect_qp(qx, y.gid(), qy, psn_y, psn_x).ok());
        EXPECT_TRUE(y.connect_qp(qy, x.gid(), qx, psn_x, psn_y).ok());
        return {qx, qy};
    }

    void TearDown() override
    {
        for (loopback_nic *n : {a.get(), b.get()}) {
            if (n != nullptr && !overflow_expected) {
                EXPECT_EQ(n->stats().cq_overflows, 0u);
            }
        }
    }

    loopback_fabric fabric; /* first: outlives the nics */
    std::unique_ptr<loopback_nic> a, b;
    uint32_t qa = 0, qb = 0;
    bool overflow_expected = false;
};

} // namespace loopback_test

#endif
