/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What every attached client is given: the agent's verbs resources
 * (device.h fills the device's part, agent/serve/assemble.cc the
 * engine's: its address, K, features, wake-up and work-summary fds)
 * that the attach server passes in its attach reply (attach_wire.h,
 * attach_reply).
 */
#ifndef RVT_AGENT_DEVICE_GRANT_H
#define RVT_AGENT_DEVICE_GRANT_H

#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/defaults.h"

#include <cstdint>

namespace rvt::agent {

struct device_grant {
    int cmd_fd; /* the agent's context's command fd */
    uint32_t pd_handle; /* the agent's PD */
    uint32_t driver_id; /* for the uverbs ioctl header */
    wire::reg_mode mode;
    uint64_t agent_id; /* random per agent instance */
    wire::agent_address address{}; /* where peers reach this agent */
    uint32_t num_qps  = defaults::num_qps; /* K (assemble.cc: the engine's) */
    uint32_t features = 0; /* wire::agent_feature_* bits */
    uint32_t path_mtu = 1024; /* bytes: the port's active MTU */
    int agent_wake_fd = -1; /* eventfd every client may write */
    /* the engine's work summary (common/work_summary.h), every client maps */
    int work_summary_fd = -1;
};

} // namespace rvt::agent

#endif
