/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvt endpoints (ep.h): creation, the operations, pending, flush, fence.
 *
 * Every operation is one work request, so one message or one RDMA
 * operation on the wire (but a striped put_zcopy, which the agent splits):
 *   am_short, am_short_iov            SEND of the bytes the handler gets
 *                                     (am_short: the 8-byte header, then
 *                                     the payload): in the work ring's
 *                                     data slot (work_inline, posted
 *                                     inline by the agent) when they fit
 *                                     it, else from a bounce buffer
 *   am_bcopy                          SEND from a bounce buffer
 *   am_zcopy                          SEND gathering the header (copied
 *                                     to a bounce buffer) and the caller's
 *                                     registered buffer
 *   put_short                         RDMA WRITE: inline when it fits
 *                                     the slot, as am_short
 *   put_bcopy                         RDMA WRITE from a bounce buffer
 *   put_zcopy                         RDMA WRITE WITH IMM from the caller's
 *                                     buffer: the target's agent sees it
 *                                     and tells the target process; at
 *                                     UCX_RVT_STRIPE_MIN bytes or more
 *                                     the agent splits it over its K QPs
 *                                     (RDMA WRITEs, then the WITH IMM
 *                                     part once they have landed; one
 *                                     completion: lanes.h, "Striping")
 *   get_bcopy                         RDMA READ into a bounce buffer,
 *                                     unpacked at its completion
 *   get_zcopy                         RDMA READ into the caller's buffer
 *   ep_check                          a probe: RDMA WRITE WITH IMM of no
 *                                     bytes (below, "Keepalive")
 */
#include "uct/ib/rvt/uct/ep.h"

#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/common/work.h"
#include "uct/ib/rvt/uct/md.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <span>

namespace rvt::uct {

namespace {

/* A pending request's link to the next one, kept in its priv space. */
uct_pending_req_t *next_of(const uct_pending_req_t *req)
{
    uct_pending_req_t *next;
    std::memcpy(&next, req->priv, sizeof(next));
    return next;
}

void set_next(uct_pending_req_t *req, uct_pending_req_t *next)
{
    static_assert(sizeof(next) <= UCT_PENDING_REQ_PRIV_LEN);
    std::memcpy(req->priv, &next, sizeof(next));
}

ucs_status_t
bad_length(const ep &e, const char *what, size_t length, size_t max)
{
    /* UCX's own words (uct_iface.h, UCT_CHECK_LENGTH) */
    ucs_error("rvt %s: Invalid %s length: %zu (expected: <= %zu)",
              e.owner->owner_md->port.device.c_str(), what, length, max);
    return UCS_ERR_INVALID_PARAM;
}

ucs_status_t bad_am_id(const ep &e, uint8_t id)
{
    ucs_error("rvt %s: active message id %u: expected 0 to %u",
              e.owner->owner_md->port.device.c_str(), id,
              static_cast<unsigned>(UCT_AM_ID_MAX) - 1);
    return UCS_ERR_INVALID_PARAM;
}

void trace_am_send(iface &i, uint8_t id, const void *data, size_t length,
                   const char *what)
{
    if (ucs_log_is_enabled(UCS_LOG_LEVEL_TRACE_DATA)) {
        char dump[256] = {};
        uct_iface_dump_am(&i.base.super, UCT_AM_TRACE_TYPE_SEND, id,
                          const_cast<void *>(data), length, dump,
                          sizeof(dump) - 1);
        ucs_trace_data("rvt TX: %s id %u len %zu %s", what, id, length, dump);
    }
}

/* A bounce buffer holding a copy of bytes (at most seg_size of them). */
uint32_t copy_to_bounce(iface &i, std::span<const std::byte> bytes)
{
    const uint32_t b = i.bounce->get();
    std::memcpy(i.bounce->at(b), bytes.data(), bytes.size());
    return b;
}

/* A request moving `length` bytes between bounce buffer b and the peer. */
work_request bounce_request(const iface &i, work_op op, uint8_t am_id,
                            uint32_t b, size_t length, uint64_t remote_addr,
                            uct_rkey_t rkey)
{
    work_request wr{};
    wr.op          = static_cast<uint8_t>(op);
    wr.am_id       = am_id;
    wr.length      = static_cast<uint32_t>(length);
    wr.local_addr  = reinterpret_cast<uintptr_t>(i.bounce->at(b));
    wr.lkey        = i.bounce->lkey();
    wr.rkey        = static_cast<uint32_t>(rkey);
    wr.remote_addr = remote_addr;
    return wr;
}

/* Posts `length` bytes the caller already wrote into bounce buffer b. */
ucs_status_t post_bounce(ep &e, work_op op, uint8_t am_id, uint32_t b,
                         size_t length, uint64_t remote_addr, uct_rkey_t rkey)
{
    iface &i        = *e.owner;
    work_request wr = bounce_request(i, op, am_id, b, length, remote_addr,
                                     rkey);
    return i.post(e, wr, nullptr, static_cast<int32_t>(b));
}

/* Posts `length` bytes (at most the session's max_inline()) in the work
 * ring's data slot: fill(slot) writes them there. No bounce buffer: the
 * agent copies the slot when it takes the request. */
template<class Fill>
ucs_status_t post_inline(ep &e, work_op op, uint8_t am_id, size_t length,
                         uint64_t remote_addr, uct_rkey_t rkey, Fill &&fill)
{
    iface &i        = *e.owner;
    std::byte *slot = i.session->inline_slot();
    if (slot == nullptr) { /* as a refused post() */
        i.tx_blocked = true;
        return UCS_ERR_NO_RESOURCE;
    }
    fill(slot);
    work_request wr{};
    wr.op          = static_cast<uint8_t>(op);
    wr.flags       = work_inline;
    wr.am_id       = am_id;
    wr.length      = static_cast<uint32_t>(length);
    wr.rkey        = static_cast<uint32_t>(rkey);
    wr.remote_addr = remote_addr;
    return i.post(e, wr, nullptr, -1);
}

size_t iov_length(const uct_iov_t *iov, size_t iovcnt)
{
    size_t total = 0;
    for (size_t k = 0; k < iovcnt; ++k) {
        total += iov[k].length * std::max(1u, iov[k].count);
    }
    return total;
}

/* Copies the iov entries (each `count` elements `stride` apart) to dst. */
void gather(const uct_iov_t *iov, size_t iovcnt, std::byte *dst)
{
    for (size_t k = 0; k < iovcnt; ++k) {
        const auto *src     = static_cast<const std::byte *>(iov[k].buffer);
        const size_t stride = iov[k].stride != 0 ? iov[k].stride :
                                                   iov[k].length;
        for (unsigned c = 0; c < std::max(1u, iov[k].count); ++c) {
            std::memcpy(dst, src + size_t{c} * stride, iov[k].length);
            dst += iov[k].length;
        }
    }
}

/* One registered, contiguous buffer from the caller's iov, or why not. */
ucs_status_t single_buffer(const ep &e, const char *what, const uct_iov_t *iov,
                           size_t iovcnt, size_t max, void *&addr,
                           size_t &length, uint32_t &lkey)
{
    if (iovcnt == 0) {
        addr   = nullptr;
        length = 0;
        lkey   = 0;
        return UCS_OK;
    }
    if (iovcnt > 1 || (iov[0].count > 1 && iov[0].stride != iov[0].length)) {
        ucs_error("rvt %s: %s with %zu iov entries (count %u): rvt takes one "
                  "contiguous buffer",
                  e.owner->owner_md->port.device.c_str(), what, iovcnt,
                  iov[0].count);
        return UCS_ERR_INVALID_PARAM;
    }
    length = iov[0].length * std::max(1u, iov[0].count);
    if (length > max) {
        return bad_length(e, what, length, max);
    }
    if (length > 0 && iov[0].memh == UCT_MEM_HANDLE_NULL) {
        ucs_error("rvt %s: %s from %p without a memory handle: zcopy needs "
                  "memory registered with the rvt memory domain",
                  e.owner->owner_md->port.device.c_str(), what, iov[0].buffer);
        return UCS_ERR_INVALID_PARAM;
    }
    addr = iov[0].buffer;
    lkey = length > 0 ? static_cast<const memh *>(iov[0].memh)->mr.lkey : 0;
    return UCS_OK;
}

/* header: am_zcopy's, sent first in the same message; empty otherwise */
ucs_status_t zcopy(ep &e, const char *what, work_op op, uint8_t am_id,
                   std::span<const std::byte> header, const uct_iov_t *iov,
                   size_t iovcnt, size_t max, uint64_t remote_addr,
                   uct_rkey_t rkey, uct_completion_t *comp)
{
    void *addr;
    size_t length;
    uint32_t lkey;
    ucs_status_t status = single_buffer(e, what, iov, iovcnt, max, addr, length,
                                        lkey);
    if (status != UCS_OK) {
        return status;
    }
    if (length == 0 && op != work_op::send_am) {
        return UCS_OK; /* no bytes to move: done */
    }
    status = e.can_send();
    if (status != UCS_OK) {
        return status;
    }
    iface &i = *e.owner;
    if (length == 0) {
        /* the header alone (or nothing): nothing of the caller's is used,
         * so it is complete once posted */
        return post_bounce(e, op, am_id, copy_to_bounce(i, header),
                           header.size(), 0, 0);
    }
    int32_t head = -1; /* the bounce buffer holding the header */
    work_request wr{};
    if (!header.empty()) {
        const uint32_t b = copy_to_bounce(i, header);
        wr.head_addr     = reinterpret_cast<uintptr_t>(i.bounce->at(b));
        wr.head_lkey     = i.bounce->lkey();
        wr.head_length   = static_cast<uint32_t>(header.size());
        head             = static_cast<int32_t>(b);
    }
    wr.op          = static_cast<uint8_t>(op);
    wr.am_id       = am_id;
    wr.length      = static_cast<uint32_t>(length);
    wr.local_addr  = reinterpret_cast<uintptr_t>(addr);
    wr.lkey        = lkey;
    wr.rkey        = static_cast<uint32_t>(rkey);
    wr.remote_addr = remote_addr;
    if (op == work_op::rdma_write_imm && length >= i.stripe_min) {
        wr.flags = work_stripe;
    }
    status = i.post(e, wr, comp, head);
    return status == UCS_OK ? UCS_INPROGRESS : status;
}

/* am_bcopy and put_bcopy: the caller packs into a bounce buffer, which
 * is posted; the packed length, or the error */
ssize_t bcopy(ep &e, const char *what, work_op op, uint8_t am_id,
              uct_pack_callback_t pack_cb, void *arg, uint64_t remote_addr,
              uct_rkey_t rkey)
{
    iface &i            = *e.owner;
    ucs_status_t status = e.can_send();
    if (status != UCS_OK) {
        return status;
    }
    const uint32_t b    = i.bounce->get();
    const size_t length = pack_cb(i.bounce->at(b), arg);
    if (length > i.seg_size) {
        i.bounce->put(b);
        return bad_length(e, what, length, i.seg_size);
    }
    if (op == work_op::send_am) {
        trace_am_send(i, am_id, i.bounce->at(b), length, "AM_BCOPY");
    }
    status = post_bounce(e, op, am_id, b, length, remote_addr, rkey);
    return status == UCS_OK ? static_cast<ssize_t>(length) :
                              static_cast<ssize_t>(status);
}

} // namespace

/* ---- ep state ------------------------------------------------------------ */

void ep::push_pending(uct_pending_req_t *req)
{
    set_next(req, nullptr);
    if (pending_tail != nullptr) {
        set_next(pending_tail, req);
    } else {
        pending_head = req;
    }
    pending_tail = req;
}

void ep::unpop_pending(uct_pending_req_t *req)
{
    set_next(req, pending_head);
    pending_head = req;
    if (pending_tail == nullptr) {
        pending_tail = req;
    }
}

uct_pending_req_t *ep::pop_pending()
{
    uct_pending_req_t *req = pending_head;
    if (req != nullptr) {
        pending_head = next_of(req);
        if (pending_head == nullptr) {
            pending_tail = nullptr;
        }
    }
    return req;
}

void ep::complete_flushes()
{
    /* targets never decrease: the ready ones are at the front. A callback
     * may flush again (appending) or destroy this endpoint (which cancels
     * the rest), so take one at a time. */
    while (!dead && !flushes.empty() && flushes.front().target <= completed) {
        uct_completion_t *comp = flushes.front().comp;
        flushes.erase(flushes.begin());
        uct_invoke_completion(comp, error);
    }
}

/* ---- creation -------------------------------------------------------------- */

ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p) noexcept
{
    if (!(params->field_mask & UCT_EP_PARAM_FIELD_IFACE) ||
        !(params->field_mask & UCT_EP_PARAM_FIELD_IFACE_ADDR) ||
        params->iface_addr == nullptr) {
        ucs_error("rvt: an endpoint connects to an interface address "
                  "(CONNECT_TO_IFACE): iface and iface_addr are required");
        return UCS_ERR_INVALID_PARAM;
    }
    iface &i        = to_iface(params->iface);
    const char *dev = i.owner_md->port.device.c_str();
    try {
        iface_address a;
        std::memcpy(&a, params->iface_addr, sizeof(a));
        const std::string err = iface_address_error(a);
        if (!err.empty()) {
            ucs_error("rvt %s: bad interface address: %s", dev, err.c_str());
            return UCS_ERR_INVALID_ADDR;
        }
        auto peer = i.peer_index(a.agent);
        if (!peer) {
            ucs_error("rvt %s: no way to agent %016llx: %s", dev,
                      static_cast<unsigned long long>(a.agent.agent_id),
                      peer.error().c_str());
            return UCS_ERR_UNREACHABLE;
        }

        auto e              = std::make_unique<ep>();
        ucs_status_t status = e->base.init(&i.base.super);
        if (status != UCS_OK) {
            return status;
        }
        e->owner            = &i;
        e->peer             = peer.value();
        e->dst_client       = a.client_index;
        e->dst_generation   = a.client_generation;
        e->remote           = a;
        e->fence_generation = i.fence_generation;
        e->error            = UCS_OK;
        i.adopt_ep(*e);
        ucs_debug("rvt %s: endpoint %p to agent %016llx (peer %u) client %u "
                  "generation %u",
                  dev, static_cast<void *>(e.get()),
                  static_cast<unsigned long long>(a.agent.agent_id), e->peer,
                  e->dst_client, e->dst_generation);
        *ep_p = handle_of(*e.release());
        return UCS_OK;
    } catch (const std::exception &ex) {
        ucs_error("rvt %s: creating an endpoint: %s", dev, ex.what());
        return UCS_ERR_NO_MEMORY;
    }
}

bool ep_is_connected_to(uct_ep_h handle,
                        const uct_iface_addr_t *iface_addr) noexcept
{
    return iface_addr != nullptr &&
           std::memcmp(&to_ep(handle).remote, iface_addr,
                       sizeof(iface_address)) == 0;
}

void ep_destroy(uct_ep_h handle) noexcept
{
    ep &e = to_ep(handle);
    e.owner->destroy_ep(e);
}

/* ---- active messages ---------------------------------------------------- */

ucs_status_t ep_am_short(uct_ep_h handle, uint8_t id, uint64_t header,
                         const void *payload, unsigned length) noexcept
{
    ep &e              = to_ep(handle);
    iface &i           = *e.owner;
    const size_t total = sizeof(header) + length;
    if (id >= UCT_AM_ID_MAX) {
        return bad_am_id(e, id);
    }
    if (total > i.seg_size) {
        return bad_length(e, "am_short", total, i.seg_size);
    }
    ucs_status_t status = e.can_send();
    if (status != UCS_OK) {
        return status;
    }
    auto fill = [&](std::byte *buf) {
        std::memcpy(buf, &header, sizeof(header));
        std::memcpy(buf + sizeof(header), payload, length);
        trace_am_send(i, id, buf, total, "AM_SHORT");
    };
    if (total <= i.session->max_inline()) {
        return post_inline(e, work_op::send_am, id, total, 0, 0, fill);
    }
    const uint32_t b = i.bounce->get();
    fill(i.bounce->at(b));
    return post_bounce(e, work_op::send_am, id, b, total, 0, 0);
}

ucs_status_t ep_am_short_iov(uct_ep_h handle, uint8_t id, const uct_iov_t *iov,
                             size_t iovcnt) noexcept
{
    ep &e    = to_ep(handle);
    iface &i = *e.owner;
    if (id >= UCT_AM_ID_MAX) {
        return bad_am_id(e, id);
    }
    const size_t total = iov_length(iov, iovcnt);
    if (total > i.seg_size) {
        return bad_length(e, "am_short_iov", total, i.seg_size);
    }
    ucs_status_t status = e.can_send();
    if (status != UCS_OK) {
        return status;
    }
    auto fill = [&](std::byte *buf) {
        gather(iov, iovcnt, buf);
        trace_am_send(i, id, buf, total, "AM_SHORT_IOV");
    };
    if (total <= i.session->max_inline()) {
        return post_inline(e, work_op::send_am, id, total, 0, 0, fill);
    }
    const uint32_t b = i.bounce->get();
    fill(i.bounce->at(b));
    return post_bounce(e, work_op::send_am, id, b, total, 0, 0);
}

ssize_t ep_am_bcopy(uct_ep_h handle, uint8_t id, uct_pack_callback_t pack_cb,
                    void *arg, unsigned) noexcept
{
    ep &e = to_ep(handle);
    if (id >= UCT_AM_ID_MAX) {
        return bad_am_id(e, id);
    }
    return bcopy(e, "am_bcopy", work_op::send_am, id, pack_cb, arg, 0, 0);
}

ucs_status_t ep_am_zcopy(uct_ep_h handle, uint8_t id, const void *header,
                         unsigned header_length, const uct_iov_t *iov,
                         size_t iovcnt, unsigned,
                         uct_completion_t *comp) noexcept
{
    ep &e = to_ep(handle);
    if (id >= UCT_AM_ID_MAX) {
        return bad_am_id(e, id);
    }
    if (header_length > e.owner->am_max_header()) {
        return bad_length(e, "am_zcopy header", header_length,
                          e.owner->am_max_header());
    }
    /* header and payload are one message of at most seg_size bytes */
    return zcopy(e, "am_zcopy", work_op::send_am, id,
                 {static_cast<const std::byte *>(header), header_length}, iov,
                 iovcnt, e.owner->seg_size - header_length, 0, 0, comp);
}

/* ---- RDMA ---------------------------------------------------------------- */

ucs_status_t ep_put_short(uct_ep_h handle, const void *buffer, unsigned length,
                          uint64_t remote_addr, uct_rkey_t rkey) noexcept
{
    ep &e    = to_ep(handle);
    iface &i = *e.owner;
    if (length > i.seg_size) {
        return bad_length(e, "put_short", length, i.seg_size);
    }
    ucs_status_t status = e.can_send();
    if (status != UCS_OK) {
        return status;
    }
    const std::span bytes(static_cast<const std::byte *>(buffer), length);
    if (length <= i.session->max_inline()) {
        return post_inline(e, work_op::rdma_write, 0, length, remote_addr, rkey,
                           [&](std::byte *slot) {
                               std::memcpy(slot, bytes.data(), bytes.size());
                           });
    }
    const uint32_t b = copy_to_bounce(i, bytes);
    return post_bounce(e, work_op::rdma_write, 0, b, length, remote_addr, rkey);
}

ssize_t ep_put_bcopy(uct_ep_h handle, uct_pack_callback_t pack_cb, void *arg,
                     uint64_t remote_addr, uct_rkey_t rkey) noexcept
{
    return bcopy(to_ep(handle), "put_bcopy", work_op::rdma_write, 0, pack_cb,
                 arg, remote_addr, rkey);
}

ucs_status_t ep_put_zcopy(uct_ep_h handle, const uct_iov_t *iov, size_t iovcnt,
                          uint64_t remote_addr, uct_rkey_t rkey,
                          uct_completion_t *comp) noexcept
{
    ep &e = to_ep(handle);
    /* with immediate: the target's agent accounts rendezvous bytes per
     * client, and the target process hears of them */
    return zcopy(e, "put_zcopy", work_op::rdma_write_imm, 0, {}, iov, iovcnt,
                 e.owner->max_zcopy, remote_addr, rkey, comp);
}

ucs_status_t ep_get_bcopy(uct_ep_h handle, uct_unpack_callback_t unpack_cb,
                          void *arg, size_t length, uint64_t remote_addr,
                          uct_rkey_t rkey, uct_completion_t *comp) noexcept
{
    ep &e    = to_ep(handle);
    iface &i = *e.owner;
    if (length > i.seg_size) {
        return bad_length(e, "get_bcopy", length, i.seg_size);
    }
    if (length == 0) {
        unpack_cb(arg, nullptr, 0);
        return UCS_OK;
    }
    ucs_status_t status = e.can_send();
    if (status != UCS_OK) {
        return status;
    }
    const uint32_t b = i.bounce->get();
    work_request wr  = bounce_request(i, work_op::rdma_read, 0, b, length,
                                      remote_addr, rkey);
    status           = i.post(e, wr, comp, static_cast<int32_t>(b));
    if (status != UCS_OK) {
        return status;
    }
    /* the slot is ours until its completion, which comes in progress */
    i.ops.set_unpack(wr.wr_id, unpack_cb, arg, wr.length);
    return UCS_INPROGRESS;
}

ucs_status_t ep_get_zcopy(uct_ep_h handle, const uct_iov_t *iov, size_t iovcnt,
                          uint64_t remote_addr, uct_rkey_t rkey,
                          uct_completion_t *comp) noexcept
{
    ep &e = to_ep(handle);
    return zcopy(e, "get_zcopy", work_op::rdma_read, 0, {}, iov, iovcnt,
                 e.owner->max_zcopy, remote_addr, rkey, comp);
}

/* ---- pending, flush, fence ------------------------------------------------- */

ucs_status_t
ep_pending_add(uct_ep_h handle, uct_pending_req_t *req, unsigned) noexcept
{
    ep &e    = to_ep(handle);
    iface &i = *e.owner;
    if (e.can_send() == UCS_OK) {
        return UCS_ERR_BUSY; /* room now: send instead */
    }
    e.push_pending(req);
    i.list_pending(e);
    return UCS_OK;
}

void ep_pending_purge(uct_ep_h handle, uct_pending_purge_callback_t cb,
                      void *arg) noexcept
{
    ep &e    = to_ep(handle);
    iface &i = *e.owner;
    while (uct_pending_req_t *req = e.pop_pending()) {
        if (cb != nullptr) {
            cb(req, arg);
        }
    }
    i.unlist_pending(e);
}

ucs_status_t
ep_flush(uct_ep_h handle, unsigned flags, uct_completion_t *comp) noexcept
{
    ep &e = to_ep(handle);
    if (e.has_pending() && !e.dispatching && !(flags & UCT_FLUSH_FLAG_CANCEL)) {
        return UCS_ERR_NO_RESOURCE; /* after what is queued: pend it */
    }
    if (e.completed == e.posted) {
        return UCS_OK;
    }
    if (comp != nullptr) {
        try {
            e.flushes.push_back({e.posted, comp});
        } catch (const std::exception &) {
            return UCS_ERR_NO_MEMORY;
        }
    }
    return UCS_INPROGRESS;
}

ucs_status_t ep_fence(uct_ep_h handle, unsigned) noexcept
{
    to_ep(handle).fence_next = true;
    return UCS_OK;
}

/* ---- keepalive ----------------------------------------------------------- */

/*
 * ep_check (UCT_IFACE_FLAG_EP_CHECK): is the process behind this endpoint
 * still there? Three things can be gone, and each fails the endpoint with
 * UCS_ERR_ENDPOINT_TIMEOUT through the interface's error handler:
 *   - our agent: the interface notices (check_agent in
 *     iface_progress.cc) and fails every endpoint;
 *   - the peer's agent or node: our agent's keepalives, or the probe's RC
 *     retries, give the connection up, and its endpoints fail;
 *   - the destination process alone: its agent tells ours (engine.h,
 *     "Departed clients").
 * The check posts a probe, a zero-length RDMA WRITE WITH IMM to the
 * destination, ordered after the endpoint's earlier operations. Where our
 * agent already knows the destination left, the probe completes
 * peer_failed without being sent; otherwise the destination's agent takes
 * it as a write nobody is told of (UCT asks for no write notices) if the
 * process is there, or as a stale message and tells ours that it is gone.
 * A check also arms the endpoint: from then on the news of its
 * destination's departure (an inbound client_gone) fails it at once.
 * Without a check, so does the news for an endpoint that has sent to the
 * destination, where the interface's user handles endpoint errors
 * (iface::watches_departure); others fail only at their next operation.
 * With no room in the work ring the check posts nothing: the operations
 * in flight complete first, and the caller checks again.
 */
ucs_status_t
ep_check(uct_ep_h handle, unsigned flags, uct_completion_t *comp) noexcept
{
    ep &e = to_ep(handle);
    if (flags != 0 || comp != nullptr) {
        ucs_error("rvt %s: ep_check with flags 0x%x and completion %p: "
                  "expected no flags and no completion",
                  e.owner->owner_md->port.device.c_str(), flags,
                  static_cast<void *>(comp));
        return UCS_ERR_INVALID_PARAM;
    }
    e.checked = true;
    if (e.can_send() != UCS_OK) {
        return UCS_OK; /* failed already, or busy: see above */
    }
    work_request wr{};
    wr.op = static_cast<uint8_t>(work_op::rdma_write_imm);
    (void)e.owner->post(e, wr, nullptr, -1);
    return UCS_OK;
}

} // namespace rvt::uct
