/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory registration in another process's protection domain, through the
 * kernel's generic uverbs ABI (docs/design.md part 3, the path for providers
 * without ibv_import_pd, such as rxe).
 *
 * The agent owns the verbs context and PD and passes its command fd to
 * each client. A client cannot use ibv_reg_mr on it (no ibv_context of its
 * own for that fd), and the legacy write() command path refuses a file
 * opened by another process (EACCES: "changed security contexts"). The
 * ioctl path, RDMA_VERBS_IOCTL with UVERBS_METHOD_INVOKE_WRITE, carries the
 * same REG_MR command and is accepted: the MR then belongs to the agent's
 * PD and maps the CLIENT's pages, so the agent's QPs can send from it and
 * remote agents can write into it.
 *
 * The ioctl header's driver_id must equal the device's own (the kernel
 * checks it); the agent reads it over RDMA netlink and passes it on in the
 * attach reply. Both sides use these calls: clients to register and
 * deregister, the agent to deregister what a dead client left behind, and
 * to look up, by handle, an MR a dead client registered and never
 * announced (query_mr: UVERBS_METHOD_QUERY_MR, which ibv_import_mr uses;
 * generic in the kernel, so it works where the provider has no import).
 */
#ifndef RVT_COMMON_UVERBS_CMD_H
#define RVT_COMMON_UVERBS_CMD_H

#include "uct/ib/rvt/common/result.h"

#include <cstddef>
#include <cstdint>

namespace rvt::uverbs {

struct mr_keys {
    uint32_t handle; /* the MR in the command fd's object table */
    uint32_t lkey;
    uint32_t rkey;
};

struct reg_args {
    int cmd_fd;
    uint32_t driver_id;
    uint32_t pd_handle;
    void *addr;
    size_t length;
    uint64_t iova; /* the address remote peers use; usually addr */
    int access; /* IBV_ACCESS_* */
};

/* REG_MR on the shared fd; the reason names the errno and the arguments. */
result<mr_keys> reg_mr(const reg_args &args);

/* DEREG_MR of an MR handle on the shared fd. */
result<uint32_t> dereg_mr(int cmd_fd, uint32_t driver_id, uint32_t mr_handle);

/* What QUERY_MR tells of an MR. */
struct mr_info {
    mr_keys keys;
    uint64_t iova; /* the address REG_MR was given (hca_va) */
    uint64_t length;
};

/* QUERY_MR of a handle in the fd's object table: fails (naming the handle
 * and errno) when no MR has that handle; ENOENT or EINVAL then, EINVAL
 * also for a handle of another kind of object. */
result<mr_info> query_mr(int cmd_fd, uint32_t driver_id, uint32_t mr_handle);

} // namespace rvt::uverbs

#endif
