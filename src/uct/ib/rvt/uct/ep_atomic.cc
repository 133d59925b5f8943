/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvt endpoints' atomic operations: 64-bit add, fetch-and-add and
 * compare-and-swap, each one work request the agent posts as an RDMA
 * atomic on the endpoint's shared QP (common/work.h, atomic_*), so they
 * are ordered with the endpoint's other operations as RC orders them, and
 * atomic with respect to every other device atomic on the word.
 *
 * The fetched value comes back in the completion (the caller's `result`
 * is its own memory, which the agent cannot write): the interface stores
 * it at `result` before it calls the caller's completion.
 *
 * Only where the agent's device does atomics (wire::agent_feature_atomic64;
 * iface_query advertises them then). The other operations (and, or, xor,
 * swap; 32-bit) answer UCS_ERR_UNSUPPORTED and are not advertised.
 */
#include "uct/ib/rvt/common/work.h"
#include "uct/ib/rvt/uct/ep.h"

namespace rvt::uct {

namespace {

ucs_status_t post_atomic(ep &e, work_op op, uint64_t operand, uint64_t compare,
                         uint64_t remote_addr, uct_rkey_t rkey,
                         uint64_t *result, uct_completion_t *comp)
{
    iface &i = *e.owner;
    if (!i.atomic64) {
        return UCS_ERR_UNSUPPORTED;
    }
    if (remote_addr % atomic_size != 0) {
        ucs_error("rvt %s: atomic on remote address 0x%llx: expected a "
                  "multiple of %u",
                  i.owner_md->port.device.c_str(),
                  static_cast<unsigned long long>(remote_addr), atomic_size);
        return UCS_ERR_INVALID_PARAM;
    }
    ucs_status_t status = e.can_send();
    if (status != UCS_OK) {
        return status;
    }
    work_request wr{};
    wr.op          = static_cast<uint8_t>(op);
    wr.length      = atomic_size;
    wr.operand     = operand;
    wr.compare     = compare;
    wr.rkey        = static_cast<uint32_t>(rkey);
    wr.remote_addr = remote_addr;
    status         = i.post(e, wr, comp, -1);
    if (status != UCS_OK) {
        return status;
    }
    if (result == nullptr) {
        return UCS_OK; /* a flush waits for it */
    }
    /* the slot is ours until its completion, which comes in progress */
    i.ops.set_result(wr.wr_id, result);
    return UCS_INPROGRESS;
}

} // namespace

ucs_status_t ep_atomic64_post(uct_ep_h handle, unsigned opcode, uint64_t value,
                              uint64_t remote_addr, uct_rkey_t rkey) noexcept
{
    if (opcode != UCT_ATOMIC_OP_ADD) {
        return UCS_ERR_UNSUPPORTED;
    }
    return post_atomic(to_ep(handle), work_op::atomic_fetch_add, value, 0,
                       remote_addr, rkey, nullptr, nullptr);
}

ucs_status_t ep_atomic64_fetch(uct_ep_h handle, unsigned opcode, uint64_t value,
                               uint64_t *result, uint64_t remote_addr,
                               uct_rkey_t rkey, uct_completion_t *comp) noexcept
{
    if (opcode != UCT_ATOMIC_OP_ADD) {
        return UCS_ERR_UNSUPPORTED;
    }
    return post_atomic(to_ep(handle), work_op::atomic_fetch_add, value, 0,
                       remote_addr, rkey, result, comp);
}

ucs_status_t ep_atomic_cswap64(uct_ep_h handle, uint64_t compare, uint64_t swap,
                               uint64_t remote_addr, uct_rkey_t rkey,
                               uint64_t *result,
                               uct_completion_t *comp) noexcept
{
    return post_atomic(to_ep(handle), work_op::atomic_cswap, swap, compare,
                       remote_addr, rkey, result, comp);
}

} // namespace rvt::uct
