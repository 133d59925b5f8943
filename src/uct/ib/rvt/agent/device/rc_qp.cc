/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/agent/device/rc_qp.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace rvt::agent {

namespace {

failure verbs_failure(const char *what, uint32_t qpn, int err)
{
    return failure{std::string(what) + " of QP " + std::to_string(qpn) +
                   " failed: " + std::strerror(err)};
}

} // namespace

result<verbs::qp_ptr> create_rc_qp(const device &dev, ibv_cq *cq, ibv_srq *srq,
                                   const rc_qp_params &params,
                                   uint32_t &max_inline)
{
    ibv_qp_init_attr init{};
    init.send_cq             = cq;
    init.recv_cq             = cq;
    init.srq                 = srq;
    init.qp_type             = IBV_QPT_RC;
    init.cap.max_send_wr     = params.sq_depth;
    init.cap.max_send_sge    = 2; /* an AM's head, then its payload */
    init.sq_sig_all          = 0;
    init.cap.max_inline_data = params.max_inline;
    verbs::qp_ptr qp(ibv_create_qp(dev.pd(), &init));
    if (!qp && params.max_inline > 0) {
        /* more inline bytes than the device does: none (the nic stages
         * inline payloads in registered memory instead) */
        init.cap.max_inline_data = 0;
        qp.reset(ibv_create_qp(dev.pd(), &init));
    }
    /* ibv_create_qp wrote back what the QP has */
    max_inline = qp ? init.cap.max_inline_data : 0;
    if (!qp) {
        return failure{"ibv_create_qp (RC, " + std::to_string(params.sq_depth) +
                       " send WRs) failed: " + std::strerror(errno)};
    }
    ibv_qp_attr attr{};
    attr.qp_state        = IBV_QPS_INIT;
    attr.pkey_index      = 0;
    attr.port_num        = dev.port();
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_LOCAL_WRITE |
                           (dev.can_atomic() ? IBV_ACCESS_REMOTE_ATOMIC : 0);
    int err = ibv_modify_qp(qp.get(), &attr,
                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                    IBV_QP_ACCESS_FLAGS);
    if (err != 0) {
        return verbs_failure("INIT", qp->qp_num, err);
    }
    return qp;
}

result<done> connect_rc_qp(ibv_qp *qp, const device &dev,
                           const uint8_t (&remote_gid)[16], uint32_t remote_qpn,
                           uint32_t remote_psn, uint32_t local_psn,
                           const rc_qp_params &params)
{
    ibv_qp_attr attr{};
    attr.qp_state               = IBV_QPS_RTR;
    attr.path_mtu               = dev.mtu();
    attr.dest_qp_num            = remote_qpn;
    attr.rq_psn                 = remote_psn;
    attr.max_dest_rd_atomic     = dev.can_read() ? params.rd_atomic : 0;
    attr.min_rnr_timer          = params.min_rnr;
    attr.ah_attr.is_global      = 1;
    attr.ah_attr.port_num       = dev.port();
    attr.ah_attr.grh.hop_limit  = 64;
    attr.ah_attr.grh.sgid_index = dev.gid_index();
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote_gid, 16);
    int err = ibv_modify_qp(qp, &attr,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                    IBV_QP_MAX_DEST_RD_ATOMIC |
                                    IBV_QP_MIN_RNR_TIMER);
    if (err != 0) {
        return verbs_failure("RTR", qp->qp_num, err);
    }
    attr               = {};
    attr.qp_state      = IBV_QPS_RTS;
    attr.timeout       = params.timeout;
    attr.retry_cnt     = params.retry_count;
    attr.rnr_retry     = params.rnr_retry;
    attr.sq_psn        = local_psn;
    attr.max_rd_atomic = dev.can_read() ? params.rd_atomic : 0;
    err                = ibv_modify_qp(qp, &attr,
                                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                               IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                               IBV_QP_MAX_QP_RD_ATOMIC);
    if (err != 0) {
        return verbs_failure("RTS", qp->qp_num, err);
    }
    return done{};
}

result<done> flush_rc_qp(ibv_qp *qp)
{
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    int err       = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
    if (err != 0) {
        return verbs_failure("ERROR", qp->qp_num, err);
    }
    return done{};
}

} // namespace rvt::agent
