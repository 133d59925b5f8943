/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rvt memory domain (md.h): configuration, registration through the
 * UCS registration cache (or directly), rkey packing.
 */
#include "uct/ib/rvt/uct/md.h"

#include "uct/ib/rvt/client/devices.h"
#include "uct/ib/rvt/client/launch.h"
#include "uct/ib/rvt/common/defaults.h"
#include "uct/ib/rvt/uct/ucx.h"

extern "C" {
#include <ucm/api/ucm.h>
#include <ucs/sys/sys.h>
}

#include <infiniband/verbs.h>
#include <sys/mman.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string_view>

namespace rvt::uct {

ucs_config_field_t md_config_table[] = {
        {"", "", nullptr, offsetof(md_config, super),
         UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

        {"REG_METHODS", "rcache,direct",
         "How memory is registered into the agent's protection domain, in "
         "order of\n"
         "preference (the first that can be set up is used):\n"
         "  rcache - through the UCS registration cache: a buffer is "
         "registered once\n"
         "           and deregistered when it is evicted or unmapped\n"
         "  direct - every registration goes to the kernel and the agent",
         offsetof(md_config, reg_methods), UCS_CONFIG_TYPE_STRING_ARRAY},

        {"", "", nullptr, offsetof(md_config, rcache),
         UCS_CONFIG_TYPE_TABLE(RVT_UCX_RCACHE_CONFIG_TABLE)},

        {"MEM_REG_OVERHEAD", "25us",
         "Cost of one registration without the cache (REG_MR on the "
         "agent's command\n"
         "fd plus a notice to the agent), for protocol selection",
         offsetof(md_config, direct_reg_cost) + offsetof(ucs_linear_func_t, c),
         UCS_CONFIG_TYPE_TIME},

        {"MEM_REG_GROWTH", "0.06ns",
         "Registration cost per byte (page pinning), for protocol selection",
         offsetof(md_config, direct_reg_cost) + offsetof(ucs_linear_func_t, m),
         UCS_CONFIG_TYPE_TIME},

        {"JOB_KEY", "",
         "The job this process belongs to: it names the agent to attach to "
         "(and to\n"
         "start). Empty: from the environment, in this order: RVT_JOB_KEY, "
         "Slurm's\n"
         "SLURM_JOB_ID (not the step), PMIX_NAMESPACE, Open MPI's "
         "OMPI_MCA_ess_base_jobid,\n"
         "else user.<uid>. 1 to 63 characters of [A-Za-z0-9._:+-]",
         offsetof(md_config, job_key), UCS_CONFIG_TYPE_STRING},

        {"AGENT", "",
         "The rvtd program to start when no agent listens. Empty: $RVT_RVTD, "
         "else rvtd\n"
         "in rvt's configured bindir, else rvtd from PATH",
         offsetof(md_config, agent), UCS_CONFIG_TYPE_STRING},

        {"AGENT_ARGS", "",
         "Options for the rvtd this process starts (as the job's first on "
         "the node),\n"
         "separated by spaces, e.g. \"--priority=fifo:10 --spin-us=20\" "
         "(rvtd --help lists\n"
         "them; --daemon, --device, --port and --job-key are the launcher's)",
         offsetof(md_config, agent_args), UCS_CONFIG_TYPE_STRING},

        {"START_AGENT", "y",
         "Start rvtd for this job, device and port when no agent listens "
         "(the first\n"
         "process of the job on the node does). With 'n' the agent must be "
         "running\n"
         "already (started by an administrator or a launcher)",
         offsetof(md_config, start_agent), UCS_CONFIG_TYPE_BOOL},

        {"CONNECT_TIMEOUT", RVT_QUOTE(RVT_DEFAULT_CONNECT_TIMEOUT_S) "s",
         "How long to wait for the agent: starting it, attaching, and each "
         "request\n"
         "for a remote node's peer index",
         offsetof(md_config, connect_timeout), UCS_CONFIG_TYPE_TIME},

        {"NUM_QPS", "auto",
         "K, the RC QPs the agent shares with each remote node (rvtd "
         "--num-qps), for the\n"
         "agent this process starts; every agent of a job must have the same. "
         "An agent\n"
         "running already keeps its own, and UCX warns of the difference. "
         "auto: the\n"
         "agent's own (rvtd's default, or what UCX_RVT_AGENT_ARGS gives it)",
         offsetof(md_config, num_qps), UCS_CONFIG_TYPE_ULUNITS},

        {}};

namespace {

/* The agent's K, from its attach reply. */
uint32_t agent_num_qps(const client::attachment &a)
{
    return a.num_qps;
}

/* The rows of md_config_table that the agent must know (md.h): each
 * reaches the rvtd this process starts as --OPTION=VALUE, and a running
 * agent's other value is said in UCX's log. A new one: its row above
 * (ULUNITS, default auto), its member in md_config, a row here. */
constexpr md_agent_setting agent_settings[] = {
        {"NUM_QPS", "num-qps", offsetof(md_config, num_qps), agent_num_qps},
};

} // namespace

std::span<const md_agent_setting> md_agent_settings()
{
    return agent_settings;
}

namespace {

/* Own memory may be read and written by the local agent's QPs and by
 * remote agents' (RDMA WRITE, RDMA READ), and be the target of their
 * atomics where the agent's device does them (a device without atomics
 * may refuse an MR that asks for them). */
constexpr int reg_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ;

int reg_access_of(agent_link &link)
{
    auto s = link.session();
    return s && (s.value()->attached().features &
                 wire::agent_feature_atomic64) != 0 ?
                   reg_access | IBV_ACCESS_REMOTE_ATOMIC :
                   reg_access;
}

struct rcache_region {
    ucs_rcache_region_t super;
    memh handle;
};
static_assert(std::is_standard_layout_v<rcache_region>);

rcache_region &region_of(uct_mem_h handle)
{
    return *reinterpret_cast<rcache_region *>(static_cast<char *>(handle) -
                                              offsetof(rcache_region, handle));
}

ucs_log_level_t reg_log_level(bool hide)
{
    return hide ? UCS_LOG_LEVEL_DIAG : UCS_LOG_LEVEL_ERROR;
}

ucs_status_t register_region(md &m, void *addr, size_t length, bool hide,
                             client::memory_region &out) noexcept
{
    try {
        auto mr = m.link->register_memory(addr, length, reg_access_of(*m.link));
        if (!mr) {
            ucs_log(reg_log_level(hide),
                    "rvt %s: registering %p length %zu failed: %s",
                    m.port.device.c_str(), addr, length, mr.error().c_str());
            return UCS_ERR_IO_ERROR;
        }
        out = mr.value();
        ucs_trace("rvt %s: registered %p length %zu: lkey 0x%x rkey 0x%x",
                  m.port.device.c_str(), addr, length, out.lkey, out.rkey);
        return UCS_OK;
    } catch (const std::exception &e) {
        ucs_error("rvt %s: registering %p length %zu: %s",
                  m.port.device.c_str(), addr, length, e.what());
        return UCS_ERR_NO_MEMORY;
    }
}

/* False only when an invalidating deregistration could not be confirmed. */
bool deregister_region(md &m, const memh &mh) noexcept
{
    const client::memory_region &mr = mh.mr;
    try {
        auto gone = m.link->deregister_memory(mr, mh.invalidate);
        if (!gone) {
            ucs_warn("rvt %s: deregistering %p length %zu (handle %u) "
                     "failed: %s",
                     m.port.device.c_str(), mr.addr, mr.length, mr.handle,
                     gone.error().c_str());
        }
        return gone.ok() || !mh.invalidate;
    } catch (const std::exception &e) {
        ucs_warn("rvt %s: deregistering handle %u: %s", m.port.device.c_str(),
                 mr.handle, e.what());
        return !mh.invalidate;
    }
}

/* One invalidating deregistration through the registration cache: the
 * cache calls its callback after rcache_mem_dereg and before it frees the
 * region, so the callback can read what the agent answered. */
struct invalidation {
    uct_completion_t *comp;
    const rcache_region *region;
};

/* The registration cache has destroyed an invalidated region (after
 * rcache_mem_dereg, which waited for the agent): the completion says
 * whether the agent confirmed that the MR is gone. */
void region_invalidated(void *arg) noexcept
{
    auto *inv = static_cast<invalidation *>(arg);
    uct_invoke_completion(inv->comp, inv->region->handle.unconfirmed ?
                                             UCS_ERR_IO_ERROR :
                                             UCS_OK);
    delete inv;
}

/* ---- the registration cache's callbacks -------------------------------- */

ucs_status_t rcache_mem_reg(void *context, ucs_rcache_t *, void *arg,
                            ucs_rcache_region_t *rregion,
                            uint16_t rcache_flags) noexcept
{
    auto &m              = *static_cast<md *>(context);
    auto &region         = *reinterpret_cast<rcache_region *>(rregion);
    const unsigned flags = *static_cast<const unsigned *>(arg);
    const bool hide      = (rcache_flags & UCS_RCACHE_MEM_REG_HIDE_ERRORS) ||
                      (flags & UCT_MD_MEM_FLAG_HIDE_ERRORS);
    const auto start = rregion->super.start;
    return register_region(m, reinterpret_cast<void *>(start),
                           rregion->super.end - start, hide, region.handle.mr);
}

void rcache_mem_dereg(void *context, ucs_rcache_t *,
                      ucs_rcache_region_t *rregion) noexcept
{
    auto &m            = *static_cast<md *>(context);
    memh &handle       = reinterpret_cast<rcache_region *>(rregion)->handle;
    handle.unconfirmed = !deregister_region(m, handle);
}

void rcache_dump_region(void *, ucs_rcache_t *, ucs_rcache_region_t *rregion,
                        char *buf, size_t max) noexcept
{
    const auto &mr = reinterpret_cast<rcache_region *>(rregion)->handle.mr;
    std::snprintf(buf, max, "handle %u lkey 0x%x rkey 0x%x", mr.handle, mr.lkey,
                  mr.rkey);
}

constinit ucs_rcache_ops_t rcache_ops = make_rcache_ops(rcache_mem_reg,
                                                        rcache_mem_dereg,
                                                        rcache_dump_region);

/* ---- MD operations ------------------------------------------------------ */

void md_close(uct_md_h handle) noexcept
{
    delete &to_md(handle);
}

md_caps md_query(uct_md_h handle) noexcept
{
    const md &m = to_md(handle);
    /* NEED_MEMH: every zcopy op needs the lkey of a registration (ep.cc
     * refuses UCT_MEM_HANDLE_NULL); without the flag UCP skips registering
     * local buffers, e.g. a rendezvous receiver's for get_zcopy */
    return {
            .flags = UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_RKEY |
                     UCT_MD_FLAG_NEED_MEMH | UCT_MD_FLAG_INVALIDATE |
                     UCT_MD_FLAG_ADVISE,
            .reg_mem_types   = UCS_BIT(UCS_MEMORY_TYPE_HOST),
            .cache_mem_types = m.rcache ? UCS_BIT(UCS_MEMORY_TYPE_HOST) : 0,
            /* no UCT_MD_FLAG_ALLOC, so no allocation limit of ours; as the
             * IB MD says, since UCX's own UCT tests size their buffers by
             * it */
            .max_alloc        = ULONG_MAX,
            .rkey_packed_size = sizeof(packed_rkey),
            .reg_cost         = m.reg_cost,
    };
}

bool invalidating(const uct_md_mem_dereg_params_t *params)
{
    return (params->field_mask & UCT_MD_MEM_DEREG_FIELD_FLAGS) &&
           (params->flags & UCT_MD_MEM_DEREG_FLAG_INVALIDATE);
}

ucs_status_t check_dereg_params(const uct_md_mem_dereg_params_t *params)
{
    if (!(params->field_mask & UCT_MD_MEM_DEREG_FIELD_MEMH) ||
        params->memh == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (invalidating(params) &&
        (!(params->field_mask & UCT_MD_MEM_DEREG_FIELD_COMPLETION) ||
         params->comp == nullptr)) {
        /* the status says it, quietly, as UCX's own MDs do */
        ucs_debug("rvt: deregistering with invalidate needs a completion");
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

ucs_status_t md_mem_reg_rcache(uct_md_h handle, void *addr, size_t length,
                               unsigned flags, uct_mem_h *memh_p) noexcept
{
    md &m = to_md(handle);
    ucs_rcache_region_t *rregion;
    ucs_status_t status = rcache_get(m.rcache.get(), addr, length,
                                     PROT_READ | PROT_WRITE, &flags, &rregion);
    if (status != UCS_OK) {
        return status;
    }
    *memh_p = &reinterpret_cast<rcache_region *>(rregion)->handle;
    return UCS_OK;
}

ucs_status_t
md_mem_dereg_rcache(uct_md_h handle,
                    const uct_md_mem_dereg_params_t *params) noexcept
{
    ucs_status_t status = check_dereg_params(params);
    if (status != UCS_OK) {
        return status;
    }
    ucs_rcache_t *rcache  = to_md(handle).rcache.get();
    rcache_region &region = region_of(params->memh);
    if (invalidating(params)) {
        auto *inv = new (std::nothrow) invalidation{params->comp, &region};
        if (inv == nullptr) {
            return UCS_ERR_NO_MEMORY; /* nothing changed: the caller may retry */
        }
        /* the cache deregisters it (rcache_mem_dereg, waiting for the
         * agent) once its last user lets go, then calls back */
        region.handle.invalidate = true;
        ucs_rcache_region_invalidate(rcache, &region.super, region_invalidated,
                                     inv);
    }
    ucs_rcache_region_put(rcache, &region.super);
    return UCS_OK;
}

ucs_status_t md_mem_reg_direct(uct_md_h handle, void *addr, size_t length,
                               unsigned flags, uct_mem_h *memh_p) noexcept
{
    md &m    = to_md(handle);
    auto *mh = new (std::nothrow) memh{};
    if (mh == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    ucs_status_t status = register_region(m, addr, length,
                                          flags & UCT_MD_MEM_FLAG_HIDE_ERRORS,
                                          mh->mr);
    if (status != UCS_OK) {
        delete mh;
        return status;
    }
    *memh_p = mh;
    return UCS_OK;
}

ucs_status_t
md_mem_dereg_direct(uct_md_h handle,
                    const uct_md_mem_dereg_params_t *params) noexcept
{
    ucs_status_t status = check_dereg_params(params);
    if (status != UCS_OK) {
        return status;
    }
    auto *mh       = static_cast<memh *>(params->memh);
    mh->invalidate = invalidating(params);
    const bool ok  = deregister_region(to_md(handle), *mh);
    delete mh;
    if (!ok) {
        return UCS_ERR_IO_ERROR; /* the MR may still be reachable */
    }
    if (invalidating(params)) {
        uct_invoke_completion(params->comp, UCS_OK);
    }
    return UCS_OK;
}

ucs_status_t md_mkey_pack(uct_mem_h handle, void *buffer) noexcept
{
    const packed_rkey packed{static_cast<const memh *>(handle)->mr.rkey};
    std::memcpy(buffer, &packed, sizeof(packed));
    return UCS_OK;
}

/* Advice on registered memory. The agent's MRs are pinned (no on-demand
 * paging): every page of a registration is resident while it lasts, so
 * UCT_MADV_WILLNEED asks for what is true already, and UCT_MADV_NORMAL
 * for nothing (the IB MD answers the same for memory registered without
 * ODP). What is checked is what the caller got wrong: the range must lie
 * in the registration, and the advice be one of UCT's. */
ucs_status_t md_mem_advise(uct_md_h, uct_mem_h handle, void *addr,
                           size_t length, unsigned advice) noexcept
{
    if (handle == UCT_MEM_HANDLE_NULL) {
        ucs_error("rvt: mem_advise: no memory handle");
        return UCS_ERR_INVALID_PARAM;
    }
    const client::memory_region &mr = static_cast<const memh *>(handle)->mr;
    const auto begin                = reinterpret_cast<uintptr_t>(addr);
    const auto first                = reinterpret_cast<uintptr_t>(mr.addr);
    if (begin < first || begin - first > mr.length ||
        length > mr.length - (begin - first)) {
        ucs_error("rvt: mem_advise: %p..+%zu is not inside the registration "
                  "%p..+%zu",
                  addr, length, mr.addr, mr.length);
        return UCS_ERR_INVALID_PARAM;
    }
    if (advice != UCT_MADV_NORMAL && advice != UCT_MADV_WILLNEED) {
        ucs_error("rvt: mem_advise: advice %u is not UCT_MADV_NORMAL (%d) or "
                  "UCT_MADV_WILLNEED (%d)",
                  advice, UCT_MADV_NORMAL, UCT_MADV_WILLNEED);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

/* The two tables differ in mem_reg and mem_dereg. */
constinit uct_md_ops_t md_rcache_ops =
        make_md_ops<md_query, md_mem_reg_rcache, md_mkey_pack>(
                md_close, md_mem_dereg_rcache, md_mem_advise);
constinit uct_md_ops_t md_direct_ops =
        make_md_ops<md_query, md_mem_reg_direct, md_mkey_pack>(
                md_close, md_mem_dereg_direct, md_mem_advise);

/* Sets up the first registration method of REG_METHODS that works. */
ucs_status_t choose_reg_method(md &m, const md_config &config)
{
    for (unsigned i = 0; i < config.reg_methods.count; ++i) {
        const std::string_view method = config.reg_methods.names[i];
        if (method == "rcache") {
            ucs_rcache_params_t params{};
            set_rcache_params(&params, config.rcache);
            params.region_struct_size = sizeof(rcache_region);
            params.ucm_events         = UCM_EVENT_VM_UNMAPPED;
            params.context            = &m;
            params.ops                = &rcache_ops;
            ucs_rcache_t *rcache      = nullptr;
            const std::string name    = "rvt_" + m.port.device;
            ucs_status_t status       = ucs_rcache_create(&params, name.c_str(),
                                                          nullptr, &rcache);
            if (status != UCS_OK) {
                ucs_debug("rvt %s: no registration cache: %s",
                          m.port.device.c_str(), ucs_status_string(status));
                continue;
            }
            m.rcache.reset(rcache);
            m.super.ops = &md_rcache_ops;
            m.reg_cost  = ucs_linear_func_make(rcache_overhead(config.rcache),
                                               0);
            return UCS_OK;
        }
        if (method == "direct") {
            m.super.ops = &md_direct_ops;
            m.reg_cost  = config.direct_reg_cost;
            return UCS_OK;
        }
        ucs_error("rvt: UCX_RVT_REG_METHODS: unknown method '%s': expected "
                  "rcache or direct",
                  config.reg_methods.names[i]);
        return UCS_ERR_INVALID_PARAM;
    }
    ucs_error("rvt %s: UCX_RVT_REG_METHODS left no usable registration "
              "method",
              m.port.device.c_str());
    return UCS_ERR_INVALID_PARAM;
}

/* The settings the agent must know that this process gives (not auto), as
 * rvtd's options after UCX_RVT_AGENT_ARGS's `args`, which must not name
 * them too; and as what the attach compares. */
result<done> add_agent_settings(const md_config &config, link_settings &s)
{
    for (const md_agent_setting &a : agent_settings) {
        const std::string variable = std::string("UCX_RVT_") + a.name;
        unsigned long value;
        std::memcpy(&value, reinterpret_cast<const char *>(&config) + a.offset,
                    sizeof(value));
        if (value == UCS_ULUNITS_AUTO) {
            continue;
        }
        if (value == UCS_ULUNITS_INF) {
            return failure{variable + "=inf: expected a number, or auto"};
        }
        const std::string option = std::string("--") + a.option;
        for (const auto &arg : s.agent_args) {
            if (arg.substr(0, arg.find('=')) == option) {
                return failure{"UCX_RVT_AGENT_ARGS: '" + arg +
                               "': " + variable + " gives " + option +
                               "; expected one of them"};
            }
        }
        s.agent_args.push_back(option + "=" + std::to_string(value));
        s.agent_settings.push_back({variable, value, a.agent_value});
    }
    return done{};
}

result<link_settings>
settings_of(const md_config &config, const client::port_info &port)
{
    auto args = client::parse_agent_args(
            config.agent_args != nullptr ? config.agent_args : "");
    if (!args) {
        return failure{"UCX_RVT_AGENT_ARGS: " + args.error()};
    }
    link_settings s;
    s.agent_args = std::move(args).value();
    auto given   = add_agent_settings(config, s);
    if (!given) {
        return failure{given.error()};
    }
    s.device      = port.device;
    s.port        = static_cast<uint8_t>(port.port);
    s.job_key     = config.job_key != nullptr ? config.job_key : "";
    s.rvtd_path   = config.agent != nullptr ? config.agent : "";
    s.start_agent = config.start_agent != 0;
    s.timeout     = std::chrono::milliseconds(
                static_cast<int64_t>(config.connect_timeout * 1000.0));
    return s;
}

} // namespace

ucs_status_t md_open(uct_component_t *component, const char *name,
                     const uct_md_config_t *uct_config, uct_md_h *md_p) noexcept
{
    const auto &config = *reinterpret_cast<const md_config *>(uct_config);
    try {
        auto port = client::first_active_port(name);
        if (!port) {
            ucs_debug("rvt: device %s has no active port", name);
            return UCS_ERR_NO_DEVICE;
        }
        if (config.job_key != nullptr && *config.job_key != '\0') {
            std::string err = wire::job_key_error(config.job_key);
            if (!err.empty()) {
                ucs_error("rvt: UCX_RVT_JOB_KEY: %s", err.c_str());
                return UCS_ERR_INVALID_PARAM;
            }
        }
        auto m             = std::make_unique<md>();
        m->super.component = component;
        m->port            = *port;
        auto settings      = settings_of(config, *port);
        if (!settings) {
            ucs_error("rvt: opening md %s: %s", name, settings.error().c_str());
            return UCS_ERR_INVALID_PARAM;
        }
        m->link = std::make_shared<agent_link>(std::move(settings).value());
        ucs_status_t status = choose_reg_method(*m, config);
        if (status != UCS_OK) {
            return status;
        }
        ucs_debug("rvt: opened md %s (port %d, %s registration)", name,
                  m->port.port, m->rcache ? "cached" : "direct");
        *md_p = &m.release()->super;
        return UCS_OK;
    } catch (const std::exception &e) {
        ucs_error("rvt: opening md %s: %s", name, e.what());
        return UCS_ERR_NO_MEMORY;
    }
}

} // namespace rvt::uct
