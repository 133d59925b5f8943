/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared RC queue pairs' life cycle in verbs terms: create in INIT,
 * connect (RTR then RTS) to a peer's QP, and force into ERROR to flush.
 * Every QP of an agent shares one CQ and the agent's SRQ, so a receive
 * is routed by its immediate, never by the QP it arrived on.
 */
#ifndef RVT_AGENT_RC_QP_H
#define RVT_AGENT_RC_QP_H

#include "uct/ib/rvt/agent/device/device.h"
#include "uct/ib/rvt/agent/device/nic.h"
#include "uct/ib/rvt/agent/device/verbs_ptr.h"
#include "uct/ib/rvt/common/result.h"

#include <cstdint>

namespace rvt::agent {

/* A QP in INIT, with remote write and read access, asking for
 * params.max_inline inline bytes; a device that refuses that gets asked
 * again without. `max_inline` is what the QP has (the device may give
 * more than asked, or nothing). */
result<verbs::qp_ptr> create_rc_qp(const device &dev, ibv_cq *cq, ibv_srq *srq,
                                   const rc_qp_params &params,
                                   uint32_t &max_inline);

/* INIT -> RTR -> RTS towards (gid, remote_qpn); the receive PSN is the
 * peer's send PSN. */
result<done> connect_rc_qp(ibv_qp *qp, const device &dev,
                           const uint8_t (&remote_gid)[16], uint32_t remote_qpn,
                           uint32_t remote_psn, uint32_t local_psn,
                           const rc_qp_params &params);

/* Any state -> ERROR: posted work completes with IBV_WC_WR_FLUSH_ERR. */
result<done> flush_rc_qp(ibv_qp *qp);

} // namespace rvt::agent

#endif
