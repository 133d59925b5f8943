/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An rvt endpoint: this process's side of the endpoint (peer, destination
 * client) in the agent's sense, so its operations complete in the order
 * they were posted (common/work.h). That order is what flush relies on:
 * an endpoint counts what it posted and what completed, and a flush waits
 * until the count completed reaches the count posted at the flush.
 *
 * Pending requests queue per endpoint, linked through the requests' own
 * priv space; while an endpoint has queued requests, its operations answer
 * UCS_ERR_NO_RESOURCE (except from inside its own pending dispatch), so
 * nothing overtakes them. A request is taken off the queue before its
 * callback runs: a callback that answers UCS_OK may free it (UCP's do), so
 * nothing reads it afterwards; one that answers otherwise is put back at
 * the front.
 */
#ifndef RVT_UCT_EP_H
#define RVT_UCT_EP_H

#include "uct/ib/rvt/uct/base.h"
#include "uct/ib/rvt/uct/iface.h"
#include "uct/ib/rvt/uct/ucx.h"

#include <cstdint>
#include <type_traits>
#include <vector>

namespace rvt::uct {

struct flush_waiter {
    uint64_t target; /* `posted` when the flush was asked */
    uct_completion_t *comp;
};

struct ep {
    base_ep base; /* first: the uct_ep_h */
    iface *owner;
    uint32_t peer; /* the remote node, as the local agent numbers it */
    uint32_t dst_client; /* the remote process, as its agent numbers it */
    uint8_t dst_generation; /* ... and which attachment of that index */
    iface_address remote; /* the address it was created for */

    uint64_t posted;
    uint64_t completed;
    std::vector<flush_waiter> flushes;

    uct_pending_req_t *pending_head;
    uct_pending_req_t *pending_tail;
    bool in_pending_list;
    bool dispatching; /* running one of its own pending requests */

    bool fence_next; /* the next operation waits for earlier reads */
    /* ep_check was called: the departure of the destination process fails
     * this endpoint as soon as the agent reports it ("Keepalive" in ep.cc) */
    bool checked;
    /* failed by a departure, unchecked (iface::watches_departure) */
    bool failed_unasked;
    uint32_t fence_generation; /* the iface's, when last fenced */

    ucs_status_t error; /* UCS_OK until the endpoint failed */
    bool error_reported;
    bool dead; /* destroyed during progress, freed at its end */

    bool has_pending() const
    {
        return pending_head != nullptr;
    }
    /* UCS_OK when an operation may be posted now, else why not. */
    ucs_status_t can_send() const
    {
        if (error != UCS_OK) {
            return error;
        }
        if ((has_pending() && !dispatching) || !owner->tx_room()) {
            return UCS_ERR_NO_RESOURCE;
        }
        return UCS_OK;
    }
    void push_pending(uct_pending_req_t *req);
    uct_pending_req_t *pop_pending();
    /* Puts back at the front a request pop_pending() took. */
    void unpop_pending(uct_pending_req_t *req);
    /* Completes the flushes this endpoint's progress satisfied. */
    void complete_flushes();
};
static_assert(std::is_standard_layout_v<ep> && offsetof(ep, base) == 0);

inline ep &to_ep(uct_ep_h handle)
{
    return *reinterpret_cast<ep *>(handle);
}

inline uct_ep_h handle_of(ep &e)
{
    return &e.base.super.super;
}

/* The ops of iface.cc's table that act on one endpoint. */
ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p) noexcept;
void ep_destroy(uct_ep_h ep) noexcept;
/* Whether `ep` was created for the interface address `iface_addr`. */
bool ep_is_connected_to(uct_ep_h ep,
                        const uct_iface_addr_t *iface_addr) noexcept;

ucs_status_t ep_put_short(uct_ep_h ep, const void *buffer, unsigned length,
                          uint64_t remote_addr, uct_rkey_t rkey) noexcept;
ssize_t ep_put_bcopy(uct_ep_h ep, uct_pack_callback_t pack_cb, void *arg,
                     uint64_t remote_addr, uct_rkey_t rkey) noexcept;
ucs_status_t ep_put_zcopy(uct_ep_h ep, const uct_iov_t *iov, size_t iovcnt,
                          uint64_t remote_addr, uct_rkey_t rkey,
                          uct_completion_t *comp) noexcept;
ucs_status_t ep_get_bcopy(uct_ep_h ep, uct_unpack_callback_t unpack_cb,
                          void *arg, size_t length, uint64_t remote_addr,
                          uct_rkey_t rkey, uct_completion_t *comp) noexcept;
ucs_status_t ep_get_zcopy(uct_ep_h ep, const uct_iov_t *iov, size_t iovcnt,
                          uint64_t remote_addr, uct_rkey_t rkey,
                          uct_completion_t *comp) noexcept;
ucs_status_t ep_am_short(uct_ep_h ep, uint8_t id, uint64_t header,
                         const void *payload, unsigned length) noexcept;
ucs_status_t ep_am_short_iov(uct_ep_h ep, uint8_t id, const uct_iov_t *iov,
                             size_t iovcnt) noexcept;
ssize_t ep_am_bcopy(uct_ep_h ep, uint8_t id, uct_pack_callback_t pack_cb,
                    void *arg, unsigned flags) noexcept;
ucs_status_t ep_am_zcopy(uct_ep_h ep, uint8_t id, const void *header,
                         unsigned header_length, const uct_iov_t *iov,
                         size_t iovcnt, unsigned flags,
                         uct_completion_t *comp) noexcept;
/* ep_atomic.cc */
ucs_status_t ep_atomic64_post(uct_ep_h ep, unsigned opcode, uint64_t value,
                              uint64_t remote_addr, uct_rkey_t rkey) noexcept;
ucs_status_t ep_atomic64_fetch(uct_ep_h ep, unsigned opcode, uint64_t value,
                               uint64_t *result, uint64_t remote_addr,
                               uct_rkey_t rkey,
                               uct_completion_t *comp) noexcept;
ucs_status_t ep_atomic_cswap64(uct_ep_h ep, uint64_t compare, uint64_t swap,
                               uint64_t remote_addr, uct_rkey_t rkey,
                               uint64_t *result,
                               uct_completion_t *comp) noexcept;
ucs_status_t
ep_pending_add(uct_ep_h ep, uct_pending_req_t *req, unsigned flags) noexcept;
void ep_pending_purge(uct_ep_h ep, uct_pending_purge_callback_t cb,
                      void *arg) noexcept;
ucs_status_t
ep_flush(uct_ep_h ep, unsigned flags, uct_completion_t *comp) noexcept;
ucs_status_t ep_fence(uct_ep_h ep, unsigned flags) noexcept;
ucs_status_t
ep_check(uct_ep_h ep, unsigned flags, uct_completion_t *comp) noexcept;

} // namespace rvt::uct

#endif
