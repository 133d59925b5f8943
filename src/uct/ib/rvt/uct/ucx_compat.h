/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The differences between the UCX versions rvt builds against (1.13.1,
 * 1.16.0, 1.18.1 and 1.22.0), in one place. Every other file of the
 * module writes its UCX operations in one shape, rvt's; the adapters here
 * fit them into this UCX's tables and structs.
 *
 * The RVT_UCX_* macros come from configure (config/m4/rvt_ucx.m4), which
 * compiles a probe of each feature against the UCX headers in use; they
 * are always defined, to 0 or 1, so a missing one is a -Wundef error.
 * Included by ucx.h only, after UCX's headers.
 *
 * Tables whose slots changed between versions are built by assignment
 * from a value-initialized table, and their size is checked against the
 * slots filled here: a UCX with a slot this file does not know fails to
 * compile rather than leaving the slot null.
 */
#ifndef RVT_UCT_UCX_COMPAT_H
#define RVT_UCT_UCX_COMPAT_H

#ifndef RVT_UCT_UCX_H
#error "include uct/ib/rvt/uct/ucx.h, not ucx_compat.h"
#endif

#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <cstring>

namespace rvt::uct {

/* ---- the registration cache ---------------------------------------------
 * 1.13: UCT's rcache config (uct_md_rcache_config_t, with an address
 * alignment setting) and an alignment in the cache's parameters.
 * 1.16 on: UCS's rcache config; 1.18 on, the alignment of each
 * ucs_rcache_get. The lookup cost: UCT's uct_md_rcache_overhead() of
 * either config until UCS's ucs_time_units_to_sec() (1.18). */
#if RVT_UCX_MD_RCACHE_CONFIG
using rcache_config = uct_md_rcache_config_t;
#define RVT_UCX_RCACHE_CONFIG_TABLE uct_md_config_rcache_table
#else
using rcache_config = ucs_rcache_config_t;
#define RVT_UCX_RCACHE_CONFIG_TABLE ucs_config_rcache_table
#endif
#if RVT_UCX_TIME_UNITS_TO_SEC
/* UCX_RVT_RCACHE_OVERHEAD=auto: what 1.13's uct_md_rcache_overhead()
 * answers on x86 and most ARM, so every version reports the same cost */
inline constexpr double rcache_auto_overhead = 180e-9;
#endif

inline void
set_rcache_params(ucs_rcache_params_t *params, const rcache_config &config)
{
#if RVT_UCX_MD_RCACHE_CONFIG
    uct_md_set_rcache_params(params, &config);
    params->max_alignment = ucs_get_page_size();
#else
    ucs_rcache_set_params(params, &config);
#endif
}

/* Seconds per lookup, for the MD's registration cost. */
inline double rcache_overhead(const rcache_config &config)
{
#if RVT_UCX_TIME_UNITS_TO_SEC
    return ucs_time_units_to_sec(config.overhead, rcache_auto_overhead);
#else
    return uct_md_rcache_overhead(&config);
#endif
}

inline ucs_status_t rcache_get(ucs_rcache_t *rcache, void *address,
                               size_t length, int prot, void *arg,
                               ucs_rcache_region_t **region_p)
{
#if RVT_UCX_RCACHE_GET_ALIGNMENT
    /* registrations are of whole pages anyway */
    return ucs_rcache_get(rcache, address, length, ucs_get_page_size(), prot,
                          arg, region_p);
#else
    return ucs_rcache_get(rcache, address, length, prot, arg, region_p);
#endif
}

/* The cache's callbacks: rvt has nothing to do when regions merge. */
template<class Reg, class Dereg, class Dump>
constexpr ucs_rcache_ops_t make_rcache_ops(Reg reg, Dereg dereg, Dump dump)
{
    ucs_rcache_ops_t ops{};
    ops.mem_reg     = reg;
    ops.mem_dereg   = dereg;
    ops.dump_region = dump;
#if RVT_UCX_RCACHE_OPS_MERGE
    ops.merge = [](void *, ucs_rcache_t *, void *,
                   ucs_rcache_region_t *) noexcept {};
#endif
    return ops;
}

/* ---- the memory domain's operations ------------------------------------- */

/* What the MD reports, whatever this UCX's attribute struct looks like. */
struct md_caps {
    uint64_t flags; /* UCT_MD_FLAG_* */
    uint64_t reg_mem_types; /* and access_mem_types */
    uint64_t cache_mem_types; /* registered through a cache (1.22) */
    size_t max_alloc;
    size_t rkey_packed_size;
    ucs_linear_func_t reg_cost;
};

#if RVT_UCX_MD_QUERY_V2
using md_attr = uct_md_attr_v2_t;

inline void fill_md_attr(md_attr *attr, const md_caps &caps)
{
#if RVT_UCX_MD_BASE_MD_QUERY
    uct_md_base_md_query(attr); /* every field, zero or "no limit" */
#else
    /* 1.16: what 1.18's uct_md_base_md_query() sets, in this struct; the
     * caller's field_mask (the fields it asks for) stays */
    const uint64_t asked = attr->field_mask;
    std::memset(attr, 0, sizeof(*attr));
    attr->field_mask = asked;
    std::memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
#endif
    attr->flags            = caps.flags;
    attr->reg_mem_types    = caps.reg_mem_types;
    attr->access_mem_types = caps.reg_mem_types;
    attr->cache_mem_types  = caps.cache_mem_types;
    attr->max_alloc        = caps.max_alloc;
    attr->max_reg          = SIZE_MAX;
    attr->rkey_packed_size = caps.rkey_packed_size;
    attr->reg_cost         = caps.reg_cost;
    /* base query: all CPUs are local (the agent drives the device) */
}
#else
using md_attr = uct_md_attr_t;

inline void fill_md_attr(md_attr *attr, const md_caps &caps)
{
    std::memset(attr, 0, sizeof(*attr));
    attr->cap.flags            = caps.flags;
    attr->cap.reg_mem_types    = caps.reg_mem_types;
    attr->cap.access_mem_types = caps.reg_mem_types;
    attr->cap.max_alloc        = caps.max_alloc;
    attr->cap.max_reg          = SIZE_MAX;
    attr->rkey_packed_size     = caps.rkey_packed_size;
    attr->reg_cost             = caps.reg_cost;
    /* the agent, not this process, drives the device: no locality */
    std::memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
}
#endif

/* rvt's shapes of the operations whose UCX signature changed. */
using md_query_fn  = md_caps (*)(uct_md_h md) noexcept;
using mem_reg_fn   = ucs_status_t (*)(uct_md_h md, void *address, size_t length,
                                    unsigned flags, uct_mem_h *memh_p) noexcept;
using mkey_pack_fn = ucs_status_t (*)(uct_mem_h memh, void *buffer) noexcept;

template<md_query_fn Query>
ucs_status_t md_query_slot(uct_md_h md, md_attr *attr) noexcept
{
    fill_md_attr(attr, Query(md));
    return UCS_OK;
}

#if RVT_UCX_MEM_REG_PARAMS
template<mem_reg_fn Reg>
ucs_status_t
mem_reg_slot(uct_md_h md, void *address, size_t length,
             const uct_md_mem_reg_params_t *params, uct_mem_h *memh_p) noexcept
{
    const uint64_t flags = (params->field_mask & UCT_MD_MEM_REG_FIELD_FLAGS) ?
                                   params->flags :
                                   0;
    /* UCT_MD_MEM_* flags are bits below 32 */
    return Reg(md, address, length, static_cast<unsigned>(flags), memh_p);
}
#else
template<mem_reg_fn Reg>
ucs_status_t mem_reg_slot(uct_md_h md, void *address, size_t length,
                          unsigned flags, uct_mem_h *memh_p) noexcept
{
    return Reg(md, address, length, flags, memh_p);
}
#endif

#if RVT_UCX_MKEY_PACK_ADDRESS
template<mkey_pack_fn Pack>
ucs_status_t
mkey_pack_slot(uct_md_h, uct_mem_h memh, void *, size_t,
               const uct_md_mkey_pack_params_t *, void *buffer) noexcept
{
    return Pack(memh, buffer);
}
#else
template<mkey_pack_fn Pack>
ucs_status_t
mkey_pack_slot(uct_md_h, uct_mem_h memh, const uct_md_mkey_pack_params_t *,
               void *buffer) noexcept
{
    return Pack(memh, buffer);
}
#endif

/* An MD table: rvt's close, query, registration, advice and packing;
 * every other slot unsupported (no sockaddr access, no allocation, no
 * attach). */
template<md_query_fn Query, mem_reg_fn Reg, mkey_pack_fn Pack>
constexpr uct_md_ops_t
make_md_ops(uct_md_close_func_t close, uct_md_mem_dereg_func_t dereg,
            uct_md_mem_advise_func_t advise)
{
    uct_md_ops_t ops{};
    size_t slots   = 0;
    ops.close      = close, ++slots;
    ops.query      = md_query_slot<Query>, ++slots;
    ops.mem_alloc  = unsupported<uct_md_mem_alloc_func_t>, ++slots;
    ops.mem_free   = unsupported<uct_md_mem_free_func_t>, ++slots;
    ops.mem_advise = advise, ++slots;
    ops.mem_reg    = mem_reg_slot<Reg>, ++slots;
    ops.mem_dereg  = dereg, ++slots;
    ops.mem_query  = unsupported<uct_md_mem_query_func_t>, ++slots;
    ops.mkey_pack  = mkey_pack_slot<Pack>, ++slots;
#if RVT_UCX_MD_OPS_IS_SOCKADDR_ACCESSIBLE
    ops.is_sockaddr_accessible = [](uct_md_h, const ucs_sock_addr_t *,
                                    uct_sockaddr_accessibility_t) noexcept {
        return 0;
    };
    ++slots;
#endif
#if RVT_UCX_MD_OPS_MEM_ATTACH
    ops.mem_attach = unsupported<uct_md_mem_attach_func_t>, ++slots;
#endif
    ops.detect_memory_type = unsupported<uct_md_detect_memory_type_func_t>;
    ++slots;
#if RVT_UCX_MD_OPS_MEM_ELEM_PACK
    ops.mem_elem_pack = unsupported<uct_md_mem_elem_pack_func_t>, ++slots;
#endif
    if (slots * sizeof(void *) != sizeof(uct_md_ops_t)) {
        throw "uct_md_ops_t has a slot that ucx_compat.h does not fill";
    }
    return ops;
}

/* ---- the component ------------------------------------------------------ */

using rkey_unpack_fn = ucs_status_t (*)(const void *buffer, uct_rkey_t *rkey_p,
                                        void **handle_p) noexcept;

#if RVT_UCX_RKEY_UNPACK_PARAMS
template<rkey_unpack_fn Unpack>
ucs_status_t rkey_unpack_slot(uct_component_t *, const void *buffer,
                              const uct_rkey_unpack_params_t *,
                              uct_rkey_t *rkey_p, void **handle_p) noexcept
{
    return Unpack(buffer, rkey_p, handle_p);
}
#else
template<rkey_unpack_fn Unpack>
ucs_status_t rkey_unpack_slot(uct_component_t *, const void *buffer,
                              uct_rkey_t *rkey_p, void **handle_p) noexcept
{
    return Unpack(buffer, rkey_p, handle_p);
}
#endif

/* The component's rkey_compare slot, where UCX has one: unpacked rkeys
 * are compared by value (an rvt uct_rkey_t is the MR's rkey). */
#if RVT_UCX_COMPONENT_RKEY_COMPARE
#define RVT_UCX_RKEY_COMPARE_SLOT                                             \
    .rkey_compare = [](uct_component_t *, uct_rkey_t rkey1, uct_rkey_t rkey2, \
                       const uct_rkey_compare_params_t *params,               \
                       int *result) noexcept -> ucs_status_t {                \
        if (params->field_mask != 0 || result == nullptr) {                   \
            return UCS_ERR_INVALID_PARAM;                                     \
        }                                                                     \
        *result = (rkey1 > rkey2) - (rkey1 < rkey2);                          \
        return UCS_OK;                                                        \
    },
#else
#define RVT_UCX_RKEY_COMPARE_SLOT
#endif

/* A configuration table's entry in UCX's global list. */
constexpr ucs_config_global_list_entry_t
config_entry(const char *name, const char *prefix, ucs_config_field_t *table,
             size_t size)
{
    ucs_config_global_list_entry_t entry{};
    entry.name   = name;
    entry.prefix = prefix;
    entry.table  = table;
    entry.size   = size;
    return entry;
}

/* ---- the interface's capability flags ------------------------------------
 * 1.22 marks a transport that reaches other nodes with
 * UCT_IFACE_FLAG_INTER_NODE. UCP packs only those into a worker's
 * network-only address (UCP_WORKER_ADDRESS_FLAG_NET_ONLY: what Open MPI
 * 4.1 publishes to the other nodes), and takes an endpoint none of whose
 * lanes has the flag for an intra-node one. 1.13 has no such flag: its
 * network-only address keeps the transports on network devices. */
#if RVT_UCX_IFACE_FLAG_INTER_NODE
inline constexpr uint64_t iface_flag_inter_node = UCT_IFACE_FLAG_INTER_NODE;
#else
inline constexpr uint64_t iface_flag_inter_node = 0;
#endif

/* ---- the interface's internal operations ---------------------------------
 * 1.13: UCT's base table serves. 1.22: a transport brings its own, and
 * UCP asks it whether an address is reachable and whether an endpoint is
 * connected to one (the v2 slots), and its protocols what each operation
 * costs (estimate_perf). */
using estimate_perf_fn = ucs_status_t (*)(uct_iface_h iface,
                                          uct_perf_attr_t *perf_attr) noexcept;

/* a bandwidth an operation gets, where the caller asked for it (1.22 asks
 * for the path's too) */
inline void set_perf_bandwidth(uct_perf_attr_t &perf, double shared)
{
    if (perf.field_mask & UCT_PERF_ATTR_FIELD_BANDWIDTH) {
        perf.bandwidth.shared = shared;
    }
#if RVT_UCX_PERF_ATTR_PATH_BANDWIDTH
    if (perf.field_mask & UCT_PERF_ATTR_FIELD_PATH_BANDWIDTH) {
        perf.path_bandwidth.shared = shared;
    }
#endif
}

using is_reachable_fn = bool (*)(uct_iface_h iface,
                                 const uct_iface_addr_t *iface_addr) noexcept;
using ep_is_connected_fn =
        bool (*)(uct_ep_h ep, const uct_iface_addr_t *iface_addr) noexcept;

#if RVT_UCX_BASE_IFACE_INTERNAL_OPS
template<is_reachable_fn, ep_is_connected_fn, estimate_perf_fn>
uct_iface_internal_ops_t *iface_internal_ops()
{
    return &uct_base_iface_internal_ops;
}
#else
/* Why an address is unreachable, into the caller's buffer if it gave one
 * (uct_iface_fill_info_str_buf from 1.18; 1.16 has none) */
inline void fill_reachable_info(const uct_iface_is_reachable_params_t *params,
                                const char *why) noexcept
{
#if RVT_UCX_IFACE_FILL_INFO_STR_BUF
    uct_iface_fill_info_str_buf(params, "%s", why);
#else
    constexpr uint64_t both = UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING |
                              UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING_LENGTH;
    if ((params->field_mask & both) == both && params->info_string != nullptr &&
        params->info_string_length > 0) {
        std::snprintf(params->info_string, params->info_string_length, "%s",
                      why);
    }
#endif
}

template<is_reachable_fn Reachable>
int is_reachable_v2_slot(const uct_iface_h iface,
                         const uct_iface_is_reachable_params_t *params) noexcept
{
    if (!uct_iface_is_reachable_params_addrs_valid(params)) {
        return 0;
    }
    if (!Reachable(iface, params->iface_addr)) {
        fill_reachable_info(params, "not an rvt interface address");
        return 0;
    }
    /* device scope: the same device, as UCT compares device addresses */
    return uct_iface_scope_is_reachable(iface, params);
}

template<ep_is_connected_fn Connected>
int ep_is_connected_slot(uct_ep_h ep,
                         const uct_ep_is_connected_params_t *params) noexcept
{
    if (!(params->field_mask & UCT_EP_IS_CONNECTED_FIELD_IFACE_ADDR)) {
        return 0; /* rvt endpoints connect to interfaces only */
    }
    return Connected(ep, params->iface_addr);
}

template<is_reachable_fn Reachable, ep_is_connected_fn Connected,
         estimate_perf_fn EstimatePerf>
constexpr uct_iface_internal_ops_t make_iface_internal_ops()
{
    uct_iface_internal_ops_t ops{};
    size_t slots            = 0;
#if RVT_UCX_IFACE_OPS_QUERY_V2
    ops.iface_query_v2      = uct_iface_base_query_v2, ++slots;
#endif
    ops.iface_estimate_perf = EstimatePerf, ++slots;
    ops.iface_vfs_refresh   = [](uct_iface_h) noexcept {}, ++slots;
    ops.ep_query            = unsupported<uct_ep_query_func_t>, ++slots;
    ops.ep_invalidate       = unsupported<uct_ep_invalidate_func_t>, ++slots;
#if RVT_UCX_IFACE_OPS_CONNECT_TO_EP_V2
    ops.ep_connect_to_ep_v2 = unsupported<uct_ep_connect_to_ep_v2_func_t>;
    ++slots;
#endif
#if RVT_UCX_IFACE_OPS_IS_REACHABLE_V2
    ops.iface_is_reachable_v2 = is_reachable_v2_slot<Reachable>, ++slots;
#endif
#if RVT_UCX_IFACE_OPS_EP_IS_CONNECTED
    ops.ep_is_connected       = ep_is_connected_slot<Connected>, ++slots;
#endif
#if RVT_UCX_IFACE_OPS_GET_DEVICE_EP
    ops.ep_get_device_ep = unsupported<uct_ep_get_device_ep_func_t>, ++slots;
#endif
#if RVT_UCX_IFACE_OPS_PUT_SGL_ZCOPY
    ops.ep_put_sgl_zcopy = unsupported<uct_ep_put_sgl_zcopy_func_t>, ++slots;
#endif
    if (slots * sizeof(void *) != sizeof(uct_iface_internal_ops_t)) {
        throw "uct_iface_internal_ops_t has a slot that ucx_compat.h does "
              "not fill";
    }
    return ops;
}

template<is_reachable_fn Reachable, ep_is_connected_fn Connected,
         estimate_perf_fn EstimatePerf>
uct_iface_internal_ops_t *iface_internal_ops()
{
    static constinit uct_iface_internal_ops_t ops =
            make_iface_internal_ops<Reachable, Connected, EstimatePerf>();
    return &ops;
}
#endif

} // namespace rvt::uct

#endif
