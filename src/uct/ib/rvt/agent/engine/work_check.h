/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Validation of one work request before the agent posts it: the request
 * came out of shared memory a client can scribble on, and the QP it goes
 * to is shared with every other client, so anything the device would turn
 * into a QP error (an lkey that is not the client's, a range outside its
 * MR, an active message larger than the receiver's slot) is refused here
 * and completed as `invalid` to that client alone.
 *
 * An atomic names no local memory (its operands travel in the request,
 * its result in the completion), so it names no lkey, and its remote word
 * must be 8-byte aligned: a device refuses a misaligned atomic with a QP
 * error.
 *
 * What cannot be checked here: the remote key and address. A wrong one is
 * caught by the remote device, which breaks the shared connection (every
 * op in flight on it fails, then it reconnects): the price of sharing QPs,
 * as with Intel's rv.
 */
#ifndef RVT_AGENT_WORK_CHECK_H
#define RVT_AGENT_WORK_CHECK_H

#include "uct/ib/rvt/agent/engine/mr_registry.h"
#include "uct/ib/rvt/common/work.h"

#include <cstdint>
#include <string>
#include <unordered_map>

namespace rvt::agent {

struct work_limits {
    uint32_t num_peers; /* valid peer indices: 0 .. num_peers-1 */
    uint32_t max_am_size; /* the inbound slot size */
    uint32_t max_message; /* the device's largest message */
    bool can_read; /* the device does RDMA READ */
    bool can_atomic; /* the device does 64-bit RDMA atomics */
    uint32_t max_inline; /* the work-data slot size (work_inline) */
};

/* Empty when the request may be posted, else why not. */
std::string check_work(const work_request &wr,
                       const std::unordered_map<uint32_t, client_mr> &mrs,
                       const work_limits &limits);

} // namespace rvt::agent

#endif
