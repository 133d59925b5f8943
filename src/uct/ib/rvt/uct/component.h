/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rvt component's methods (component.cc); rvt_module.cc puts them in
 * the component that it registers with UCX.
 */
#ifndef RVT_UCT_COMPONENT_H
#define RVT_UCT_COMPONENT_H

#include "uct/ib/rvt/uct/ucx.h"

namespace rvt::uct {

/* One memory domain per RDMA device with an ACTIVE port, named after the
 * device (sysfs only: no agent is contacted). */
ucs_status_t query_md_resources(uct_component_t *component,
                                uct_md_resource_desc_t **resources_p,
                                unsigned *num_resources_p) noexcept;

/* A packed rkey (md.h) to a uct_rkey_t holding the 32-bit rkey. */
ucs_status_t
rkey_unpack(const void *buffer, uct_rkey_t *rkey_p, void **handle_p) noexcept;
ucs_status_t rkey_release(uct_component_t *component, uct_rkey_t rkey,
                          void *handle) noexcept;

void md_vfs_init(uct_md_h md) noexcept;

} // namespace rvt::uct

#endif
