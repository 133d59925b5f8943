#include "uct/ib/rvt/agent/work_check.h"

#include "uct/ib/rvt/common/format.h"
#include "uct/ib/rvt/common/imm.h"

namespace rvt::agent {

std::string check_work(const work_request &wr,
                       const std::unordered_map<uint32_t, client_mr> &mrs,
                       const work_limits &limits)
{
    if (wr.op == 0 || wr.op >= work_op_limit) {
        return format("operation %u: expected 1 to %u", wr.op,
                      work_op_limit - 1);
    }
    if ((wr.flags & ~(work_signaled | work_fence)) != 0 || wr.reserved0 != 0) {
        return format("flags 0x%x, reserved 0x%x: expected only signaled and "
                      "fence, and 0",
                      wr.flags, wr.reserved0);
    }
    for (uint8_t b : wr.reserved1) {
        if (b != 0) {
            return "reserved bytes of the request are not zero";
        }
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
    if (op == work_op::send_am) {
        if (wr.length > limits.max_am_size) {
            return format("active message of %u bytes: the largest is %u",
                          wr.length, limits.max_am_size);
        }
        if (wr.am_id >= imm::max_am_ids) {
            return format("AM id %u: expected below %u", wr.am_id,
                          imm::max_am_ids);
        }
    } else if (wr.am_id != 0) {
        return format("AM id %u on a non-AM operation: expected 0", wr.am_id);
    }
    if (op == work_op::rdma_read && !limits.can_read) {
        return "RDMA READ: this device does not do it";
    }
    if (wr.length > limits.max_message) {
        return format("length %u: the device's largest message is %u",
                      wr.length, limits.max_message);
    }
    if (wr.length == 0) {
        return {}; /* no local memory is touched */
    }
    auto mr = mrs.find(wr.lkey);
    if (mr == mrs.end()) {
        return format("lkey 0x%x: not an MR this client announced", wr.lkey);
    }
    const client_mr &m = mr->second;
    if (wr.local_addr < m.addr ||
        wr.local_addr + wr.length > m.addr + m.length ||
        wr.local_addr + wr.length < wr.local_addr) {
        return format("local range 0x%llx+%u: outside the MR (0x%llx+%llu) "
                      "of lkey 0x%x",
                      static_cast<unsigned long long>(wr.local_addr), wr.length,
                      static_cast<unsigned long long>(m.addr),
                      static_cast<unsigned long long>(m.length), wr.lkey);
    }
    return {};
}

} // namespace rvt::agent
