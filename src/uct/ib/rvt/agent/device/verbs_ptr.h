/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Owners for verbs objects: each pointer type destroys its object with
 * the matching ibv_ call. Declared in acquisition order in a class, they
 * are released in reverse (QPs before CQs before the PD before the
 * context), which is the order verbs requires.
 */
#ifndef RVT_AGENT_VERBS_PTR_H
#define RVT_AGENT_VERBS_PTR_H

#include <infiniband/verbs.h>

#include <memory>

namespace rvt::verbs {

template<class T, auto destroy> struct deleter {
    void operator()(T *obj) const noexcept
    {
        if (obj != nullptr) {
            (void)destroy(obj);
        }
    }
};

using context_ptr =
        std::unique_ptr<ibv_context, deleter<ibv_context, ibv_close_device>>;
using pd_ptr  = std::unique_ptr<ibv_pd, deleter<ibv_pd, ibv_dealloc_pd>>;
using cq_ptr  = std::unique_ptr<ibv_cq, deleter<ibv_cq, ibv_destroy_cq>>;
using qp_ptr  = std::unique_ptr<ibv_qp, deleter<ibv_qp, ibv_destroy_qp>>;
using mr_ptr  = std::unique_ptr<ibv_mr, deleter<ibv_mr, ibv_dereg_mr>>;
using srq_ptr = std::unique_ptr<ibv_srq, deleter<ibv_srq, ibv_destroy_srq>>;
using ah_ptr  = std::unique_ptr<ibv_ah, deleter<ibv_ah, ibv_destroy_ah>>;
using comp_channel_ptr = std::unique_ptr<
        ibv_comp_channel, deleter<ibv_comp_channel, ibv_destroy_comp_channel>>;

} // namespace rvt::verbs

#endif
