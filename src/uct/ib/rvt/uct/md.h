/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rvt memory domain: one per RDMA device with an active port (the
 * first active port; an agent serves one device:port). It registers
 * memory into the node agent's protection domain through the MD's agent
 * link, behind a UCS registration cache, so a buffer is registered once
 * and deregistered when the cache evicts it or the application unmaps it
 * (UCS memory hooks).
 *
 * Packed rkey (rkey_packed_size = 4): the MR's 32-bit rkey, little-endian
 * (both ends run this module; the remote agent posts with it as is). An
 * unpacked uct_rkey_t holds the same value.
 */
#ifndef RVT_UCT_MD_H
#define RVT_UCT_MD_H

#include "uct/ib/rvt/client/devices.h"
#include "uct/ib/rvt/client/registration.h"
#include "uct/ib/rvt/uct/agent_link.h"
#include "uct/ib/rvt/uct/ucx.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>

namespace rvt::uct {

/* UCX_RVT_* settings of the MD (md.cc has the table and the meanings). */
struct md_config {
    uct_md_config_t super;
    ucs_config_names_array_t reg_methods;
    rcache_config rcache;
    ucs_linear_func_t direct_reg_cost; /* without the cache: seconds */
    char *job_key;
    char *agent;
    char *agent_args;
    int start_agent;
    double connect_timeout; /* seconds */
    /* settings the agent must know (md_agent_settings); UCS_ULUNITS_AUTO:
     * the agent's own */
    unsigned long num_qps;
};
static_assert(std::is_standard_layout_v<md_config>);

extern ucs_config_field_t md_config_table[];

/* A UCX_RVT_* setting the agent must know, marked so by a row of
 * md_agent_settings (md.cc, beside md_config_table): when the process
 * gives it (anything but auto), it is passed to the rvtd the process
 * starts as --OPTION=VALUE, and compared with what the agent the process
 * attaches to says it uses; an agent that was running already keeps its
 * own, and UCX's log says so (agent_link.h, agent_setting_value). */
struct md_agent_setting {
    const char *name; /* its md_config_table row, without UCX_RVT_ */
    const char *option; /* rvtd's option, without the dashes */
    size_t offset; /* of its unsigned long (UCS_CONFIG_TYPE_ULUNITS) */
    /* what an attached agent uses, from its attach reply */
    uint32_t (*agent_value)(const client::attachment &a);
};
std::span<const md_agent_setting> md_agent_settings();

/* What uct_mem_h points at. */
struct memh {
    client::memory_region mr;
    /* deregistering waits until the agent says the MR is gone (set by a
     * dereg with UCT_MD_MEM_DEREG_FLAG_INVALIDATE) */
    bool invalidate = false;
    /* an invalidating deregistration the agent did not confirm (refused,
     * or no answer in time): the region's invalidation completions then
     * report an error, since a peer may still reach the memory */
    bool unconfirmed = false;
};

struct packed_rkey {
    uint32_t rkey;
};

struct rcache_deleter {
    void operator()(ucs_rcache_t *rcache) const noexcept
    {
        ucs_rcache_destroy(rcache);
    }
};

struct md {
    uct_md_t super;
    client::port_info port; /* the device and the port its agent serves */
    /* declared before the cache: the cache deregisters through it when it
     * is destroyed */
    std::shared_ptr<agent_link> link;
    std::unique_ptr<ucs_rcache_t, rcache_deleter> rcache;
    ucs_linear_func_t reg_cost;
};
static_assert(std::is_standard_layout_v<md> && offsetof(md, super) == 0);

inline md &to_md(uct_md_h handle)
{
    return *reinterpret_cast<md *>(handle);
}

/* The component's md_open: `name` is a device from query_md_resources. */
ucs_status_t md_open(uct_component_t *component, const char *name,
                     const uct_md_config_t *config, uct_md_h *md_p) noexcept;

} // namespace rvt::uct

#endif
