/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCT's base interface and base endpoint as members of C++ objects.
 *
 * UCX builds its objects with UCS classes: UCS_CLASS_INIT runs the
 * constructor chain and, when one fails, the destructors of the parts
 * already built; UCS_CLASS_CLEANUP runs them all. Those macros are GNU C,
 * so here the same class functions are called directly, and the result is
 * a member that an rvt object declares FIRST: its address is the object's
 * (what UCX hands back as uct_iface_h / uct_ep_h), and, being first, it is
 * destroyed last, after everything the object built on top of it.
 */
#ifndef RVT_UCT_BASE_H
#define RVT_UCT_BASE_H

#include "uct/ib/rvt/uct/ucx.h"

#include <type_traits>

namespace rvt::uct {

struct base_iface {
    uct_base_iface_t super{};
    bool live = false;

    ucs_status_t init(uct_iface_ops_t *ops,
                      uct_iface_internal_ops_t *internal_ops, uct_md_h md,
                      uct_worker_h worker, const uct_iface_params_t *params,
                      const uct_iface_config_t *config) noexcept
    {
        int built           = 1;
        ucs_status_t status = uct_base_iface_t_init(
                &super, &uct_base_iface_t_class, &built, ops, internal_ops, md,
                worker, params,
                config UCS_STATS_ARG(nullptr) UCS_STATS_ARG("rvt"));
        if (status != UCS_OK) {
            ucs_class_call_cleanup_chain(&uct_base_iface_t_class, &super,
                                         built);
            return status;
        }
        live = true;
        return UCS_OK;
    }

    ~base_iface()
    {
        if (live) {
            ucs_class_call_cleanup_chain(&uct_base_iface_t_class, &super, -1);
        }
    }
};

struct base_ep {
    uct_base_ep_t super{};
    bool live = false;

    ucs_status_t init(uct_base_iface_t *iface) noexcept
    {
        int built           = 1;
        ucs_status_t status = uct_base_ep_t_init(&super, &uct_base_ep_t_class,
                                                 &built, iface);
        if (status != UCS_OK) {
            ucs_class_call_cleanup_chain(&uct_base_ep_t_class, &super, built);
            return status;
        }
        live = true;
        return UCS_OK;
    }

    ~base_ep()
    {
        if (live) {
            ucs_class_call_cleanup_chain(&uct_base_ep_t_class, &super, -1);
        }
    }
};

static_assert(std::is_standard_layout_v<base_iface> &&
              std::is_standard_layout_v<base_ep>);

} // namespace rvt::uct

#endif
