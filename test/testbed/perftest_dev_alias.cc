/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * LD_PRELOAD shim for the server side of a UCT-level ucx_perftest between
 * two testbed nodes (test/testbed/perftest-guest.sh).
 *
 * Why: ucx_perftest's server takes every test parameter from its client,
 * the UCT device name included ("-d rxe1:1" on node 1). In the testbed all
 * nodes share one kernel, so node 2 sees node 1's rxe1 as well as its own
 * rxe2, and would open the client's device instead of its own: the test
 * would then loop back through rxe1 and never cross the bridge.
 *
 * With RVT_PERFTEST_DEV_ALIAS=NAME=REAL (e.g. rxe1:1=rxe2:1) the server's
 * uct_md_query_tl_resources() lists device REAL under the name NAME and
 * hides any device really named NAME, and uct_iface_open() on NAME opens
 * REAL. Nothing else changes: the transport, memory domain and data path
 * are those of REAL. Without the variable the shim does nothing.
 */
#include <uct/api/uct.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace {

struct alias {
    std::string name; /* what the peer asks for */
    std::string real; /* the device this node opens instead */
};

std::optional<alias> alias_from_env()
{
    const char *env = std::getenv("RVT_PERFTEST_DEV_ALIAS");
    if (env == nullptr) {
        return std::nullopt;
    }
    const std::string_view text(env);
    const auto eq = text.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size()) {
        std::fprintf(stderr,
                     "perftest_dev_alias: RVT_PERFTEST_DEV_ALIAS=%s is not "
                     "NAME=REAL; ignored\n",
                     env);
        return std::nullopt;
    }
    return alias{std::string(text.substr(0, eq)),
                 std::string(text.substr(eq + 1))};
}

template<typename Fn> Fn next_symbol(const char *name)
{
    void *sym = dlsym(RTLD_NEXT, name);
    if (sym == nullptr) {
        std::fprintf(stderr, "perftest_dev_alias: %s not found: %s\n", name,
                     dlerror());
        std::abort();
    }
    return reinterpret_cast<Fn>(sym);
}

} // namespace

extern "C" {

ucs_status_t uct_md_query_tl_resources(uct_md_h md,
                                       uct_tl_resource_desc_t **resources_p,
                                       unsigned *num_resources_p)
{
    using fn             = ucs_status_t (*)(uct_md_h, uct_tl_resource_desc_t **,
                                unsigned *);
    static const fn next = next_symbol<fn>("uct_md_query_tl_resources");
    const ucs_status_t status = next(md, resources_p, num_resources_p);
    const auto a              = alias_from_env();
    if (status != UCS_OK || !a) {
        return status;
    }
    /* rename REAL to NAME and drop what is really NAME, in place: the
     * list stays UCX's allocation, released by UCX */
    uct_tl_resource_desc_t *list = *resources_p;
    unsigned kept                = 0;
    for (unsigned k = 0; k < *num_resources_p; ++k) {
        uct_tl_resource_desc_t r = list[k];
        if (a->name == r.dev_name) {
            continue;
        }
        if (a->real == r.dev_name) {
            std::snprintf(r.dev_name, sizeof(r.dev_name), "%s",
                          a->name.c_str());
        }
        list[kept++] = r;
    }
    *num_resources_p = kept;
    return status;
}

ucs_status_t uct_iface_open(uct_md_h md, uct_worker_h worker,
                            const uct_iface_params_t *params,
                            const uct_iface_config_t *config,
                            uct_iface_h *iface_p)
{
    using fn             = ucs_status_t (*)(uct_md_h, uct_worker_h,
                                const uct_iface_params_t *,
                                const uct_iface_config_t *, uct_iface_h *);
    static const fn next = next_symbol<fn>("uct_iface_open");
    const auto a         = alias_from_env();
    if (!a || params == nullptr ||
        !(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE) ||
        !(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE) ||
        params->mode.device.dev_name == nullptr ||
        a->name != params->mode.device.dev_name) {
        return next(md, worker, params, config, iface_p);
    }
    uct_iface_params_t mine   = *params;
    mine.mode.device.dev_name = a->real.c_str();
    std::fprintf(stderr, "perftest_dev_alias: %s opens %s\n", a->name.c_str(),
                 a->real.c_str());
    return next(md, worker, &mine, config, iface_p);
}

} // extern "C"
