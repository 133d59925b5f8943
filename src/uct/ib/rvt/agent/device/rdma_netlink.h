/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Facts about RDMA devices that only the kernel's RDMA netlink interface
 * tells: the uverbs driver id, which the ioctl command header must carry
 * (libibverbs reads it the same way, and keeps it private).
 */
#ifndef RVT_AGENT_RDMA_NETLINK_H
#define RVT_AGENT_RDMA_NETLINK_H

#include "uct/ib/rvt/common/result.h"

#include <cstdint>
#include <string_view>

namespace rvt::agent {

/* The driver id (enum rdma_driver_id) of the named device, e.g. "rxe1". */
result<uint32_t> uverbs_driver_id(std::string_view ibdev_name);

} // namespace rvt::agent

#endif
