/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/agent/engine/work_check.h"

#include "uct/ib/rvt/common/format.h"
#include "uct/ib/rvt/common/imm.h"

namespace rvt::agent {

namespace {

/* Empty when addr..+length lies inside an MR the client announced as lkey. */
std::string check_range(const char *what, uint64_t addr, uint32_t length,
                        uint32_t lkey,
                        const std::unordered_map<uint32_t, client_mr> &mrs)
{
    auto mr = mrs.find(lkey);
    if (mr == mrs.end()) {
        return format("%s lkey 0x%x: not an MR this client announced", what,
                      lkey);
    }
    const client_mr &m = mr->second;
    if (addr < m.addr || addr + length > m.addr + m.length ||
        addr + length < addr) {
        return format("%s range 0x%llx+%u: outside the MR (0x%llx+%llu) of "
                      "lkey 0x%x",
                      what, static_cast<unsigned long long>(addr), length,
                      static_cast<unsigned long long>(m.addr),
                      static_cast<unsigned long long>(m.length), lkey);
    }
    return {};
}

/* The rest of a work_inline request: its payload is in the work-data
 * slot, so it names no local memory. */
std::string check_inline(const work_request &wr, const work_limits &limits)
{
    const auto op = static_cast<work_op>(wr.op);
    if (op != work_op::send_am && op != work_op::rdma_write &&
        op != work_op::rdma_write_imm) {
        return format("inline operation %u: expected send_am (%u), "
                      "rdma_write (%u) or rdma_write_imm (%u)",
                      wr.op, static_cast<unsigned>(work_op::send_am),
                      static_cast<unsigned>(work_op::rdma_write),
                      static_cast<unsigned>(work_op::rdma_write_imm));
    }
    if (wr.length > limits.max_inline) {
        return format("inline length %u: the work-data slot holds %u",
                      wr.length, limits.max_inline);
    }
    if (wr.local_addr != 0 || wr.lkey != 0 || wr.head_length != 0) {
        return format("inline request with local address 0x%llx, lkey 0x%x, "
                      "head length %u: expected all zero (the payload is in "
                      "the work-data slot)",
                      static_cast<unsigned long long>(wr.local_addr), wr.lkey,
                      wr.head_length);
    }
    return {};
}

/* The rest of an atomic request (work.h, atomic_*): an aligned word, no
 * local memory, the operands in local_addr and head_addr. */
std::string check_atomic(const work_request &wr, const work_limits &limits)
{
    if (!limits.can_atomic) {
        return format("atomic operation %u: this device does no atomics",
                      wr.op);
    }
    if ((wr.flags & work_inline) != 0) {
        return format("atomic operation %u with the inline flag: an atomic "
                      "carries its operands in the request",
                      wr.op);
    }
    if (wr.length != atomic_size) {
        return format("atomic length %u: expected %u", wr.length, atomic_size);
    }
    if (wr.remote_addr % atomic_size != 0) {
        return format("atomic remote address 0x%llx: expected a multiple of "
                      "%u",
                      static_cast<unsigned long long>(wr.remote_addr),
                      atomic_size);
    }
    if (wr.lkey != 0 || wr.head_lkey != 0 || wr.head_length != 0) {
        return format("atomic with lkey 0x%x, head lkey 0x%x, head length %u: "
                      "expected all zero (the result comes back in the "
                      "completion)",
                      wr.lkey, wr.head_lkey, wr.head_length);
    }
    if (static_cast<work_op>(wr.op) != work_op::atomic_cswap &&
        wr.compare != 0) {
        return format("compare value 0x%llx on a fetch-and-add: expected 0",
                      static_cast<unsigned long long>(wr.compare));
    }
    return {};
}

} // namespace

std::string check_work(const work_request &wr,
                       const std::unordered_map<uint32_t, client_mr> &mrs,
                       const work_limits &limits)
{
    if (wr.op == 0 || wr.op >= work_op_limit) {
        return format("operation %u: expected 1 to %u", wr.op,
                      work_op_limit - 1);
    }
    if ((wr.flags &
         ~(work_signaled | work_fence | work_inline | work_stripe)) != 0) {
        return format("flags 0x%x: expected only signaled, fence, inline and "
                      "stripe",
                      wr.flags);
    }
    if ((wr.flags & work_stripe) != 0 &&
        (wr.op != static_cast<uint8_t>(work_op::rdma_write_imm) ||
         (wr.flags & work_inline) != 0)) {
        return format("stripe flag on operation %u%s: expected only on a "
                      "write with immediate from client memory",
                      wr.op, (wr.flags & work_inline) != 0 ? " (inline)" : "");
    }
    if (wr.peer >= limits.num_peers) {
        return format("peer %u: this client's agent knows %u peers", wr.peer,
                      limits.num_peers);
    }
    if (wr.dst_client >= imm::max_clients) {
        return format("destination client %u: expected below %u", wr.dst_client,
                      imm::max_clients);
    }
    const auto op = static_cast<work_op>(wr.op);
    if (is_atomic(op)) {
        if (wr.am_id != 0) {
            return format("AM id %u on an atomic: expected 0", wr.am_id);
        }
        return check_atomic(wr, limits);
    }
    if (op == work_op::send_am) {
        const uint64_t total = uint64_t{wr.head_length} + wr.length;
        if (total > limits.max_am_size) {
            return format("active message of %llu bytes (head %u + %u): the "
                          "largest is %u",
                          static_cast<unsigned long long>(total),
                          wr.head_length, wr.length, limits.max_am_size);
        }
        if (wr.am_id >= imm::max_am_ids) {
            return format("AM id %u: expected below %u", wr.am_id,
                          imm::max_am_ids);
        }
    } else if (wr.am_id != 0) {
        return format("AM id %u on a non-AM operation: expected 0", wr.am_id);
    } else if (wr.head_addr != 0 || wr.head_lkey != 0 || wr.head_length != 0) {
        return format("head segment (length %u) on a non-AM operation: "
                      "expected none",
                      wr.head_length);
    }
    if (wr.head_length == 0 && (wr.head_addr != 0 || wr.head_lkey != 0)) {
        return "head address or lkey without a head length: expected zero";
    }
    if (wr.head_length > 0) {
        auto bad = check_range("head", wr.head_addr, wr.head_length,
                               wr.head_lkey, mrs);
        if (!bad.empty()) {
            return bad;
        }
    }
    if (op == work_op::rdma_read && !limits.can_read) {
        return "RDMA READ: this device does not do it";
    }
    if (wr.length > limits.max_message) {
        return format("length %u: the device's largest message is %u",
                      wr.length, limits.max_message);
    }
    if ((wr.flags & work_inline) != 0) {
        return check_inline(wr, limits);
    }
    if (wr.length == 0) {
        return {}; /* no local memory is touched */
    }
    return check_range("local", wr.local_addr, wr.length, wr.lkey, mrs);
}

} // namespace rvt::agent
