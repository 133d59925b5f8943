/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rvt interface's data path (iface.h): posting work to the agent,
 * progress (completions, inbound messages, the pending queue, the agent's
 * liveness), and the endpoints' lists. iface.cc has the rest: the
 * configuration, attributes, addresses, open and close, and UCT's ops
 * table.
 */
#include "uct/ib/rvt/uct/iface.h"

#include "uct/ib/rvt/uct/ep.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <span>
#include <string>

namespace rvt::uct {

namespace {


/* Time between two looks at the agent's socket from progress. */
constexpr double liveness_interval_ms = 100.0;
/* how many progress calls pass between two looks at the clock for it */
constexpr unsigned liveness_poll_calls = 64;

ucs_status_t to_status(uint32_t status)
{
    switch (static_cast<completion_status>(status)) {
    case completion_status::success:
        return UCS_OK;
    case completion_status::peer_failed:
        return UCS_ERR_ENDPOINT_TIMEOUT;
    case completion_status::no_resource:
        return UCS_ERR_NO_RESOURCE;
    case completion_status::invalid:
    case completion_status::failed:
    default:
        return UCS_ERR_IO_ERROR;
    }
}

const char *completion_status_name(uint32_t status)
{
    switch (static_cast<completion_status>(status)) {
    case completion_status::success:
        return "success";
    case completion_status::invalid:
        return "refused by the agent as invalid";
    case completion_status::failed:
        return "failed on the device";
    case completion_status::peer_failed:
        return "lost with its peer";
    case completion_status::no_resource:
        return "refused by the agent: this process's share of it is used "
               "up (see the agent's log)";
    default:
        return "of unknown status";
    }
}

} // namespace

/* ---- the data path ------------------------------------------------------ */

ucs_status_t
iface::post(ep &e, work_request &wr, uct_completion_t *comp, int32_t b)
{
    const bool fence = e.fence_next || e.fence_generation != fence_generation;
    wr.flags = (wr.flags & (work_inline | work_stripe)) | work_signaled |
               (fence ? work_fence : 0);
    wr.peer           = e.peer;
    wr.dst_client     = e.dst_client;
    wr.dst_generation = e.dst_generation;
    wr.wr_id          = ops.take(&e, comp, b);
    if (session->post(wr) != client::post_status::posted) {
        ops.untake(wr.wr_id);
        if (b >= 0) {
            bounce->put(static_cast<uint32_t>(b));
        }
        tx_blocked = true;
        return UCS_ERR_NO_RESOURCE;
    }
    e.fence_next       = false;
    e.fence_generation = fence_generation;
    ++e.posted;
    return UCS_OK;
}

bool iface::watches_departure(const ep &e) const
{
    return e.checked || (e.posted > 0 && base.super.err_handler != nullptr);
}

void iface::fail_ep(ep &e, ucs_status_t status)
{
    if (e.error != UCS_OK) {
        return;
    }
    e.error = status;
    /* capacity for every endpoint is reserved at ep_create */
    failed_eps.push_back(&e);
}

namespace {

/* Ends the operation wr_id names: its bounce buffer back, its
 * endpoint's count, the caller's completion, the flushes it satisfied. */
void finish_op(iface &i, uint64_t wr_id, ucs_status_t status, uint64_t value)
{
    auto op = i.ops.finish(wr_id);
    if (!op) {
        ucs_error("rvt %s: completion for no request in flight (wr_id "
                  "0x%llx): dropped",
                  i.owner_md->port.device.c_str(),
                  static_cast<unsigned long long>(wr_id));
        return;
    }
    if (op->bounce >= 0) {
        if (op->unpack != nullptr && status == UCS_OK) {
            op->unpack(op->unpack_arg,
                       i.bounce->at(static_cast<uint32_t>(op->bounce)),
                       op->unpack_length);
        }
        i.bounce->put(static_cast<uint32_t>(op->bounce));
    }
    if (op->result != nullptr && status == UCS_OK) {
        *op->result = value; /* an atomic's fetched word */
    }
    ep *e = op->owner;
    if (e != nullptr) {
        ++e->completed;
        if (status != UCS_OK) {
            i.fail_ep(*e, status);
        }
    }
    if (op->comp != nullptr) {
        uct_invoke_completion(op->comp, status);
    }
    if (e != nullptr && !e->dead) {
        e->complete_flushes();
    }
}

void on_completion(iface &i, const completion &c)
{
    const ucs_status_t status = to_status(c.status);
    if (status != UCS_OK) {
        /* refused by the agent: this process sent what it should not */
        const auto why     = static_cast<completion_status>(c.status);
        const bool refused = why == completion_status::invalid ||
                             why == completion_status::no_resource;
        ucs_log(refused ? UCS_LOG_LEVEL_ERROR : UCS_LOG_LEVEL_DEBUG,
                "rvt %s: request 0x%llx to peer %u %s (detail %u)",
                i.owner_md->port.device.c_str(),
                static_cast<unsigned long long>(c.wr_id), c.peer,
                completion_status_name(c.status), c.detail);
    }
    finish_op(i, c.wr_id, status, c.value);
}

void deliver_am(iface &i, const client::inbound_view &v)
{
    const uint8_t id = v.msg.am_id;
    if (id >= UCT_AM_ID_MAX || v.data.size() != v.msg.length) {
        ucs_error("rvt %s: active message id %u of %u bytes (%zu in the "
                  "slot) from peer %u: dropped",
                  i.owner_md->port.device.c_str(), id, v.msg.length,
                  v.data.size(), v.msg.peer);
        return;
    }
    ++i.rx_am;
    i.rx_am_bytes += v.msg.length;
    /* the slot is ours (mapped writable) until release_inbound */
    void *data = const_cast<std::byte *>(v.data.data());
    if (ucs_log_is_enabled(UCS_LOG_LEVEL_TRACE_DATA)) {
        char dump[256] = {};
        uct_iface_dump_am(&i.base.super, UCT_AM_TRACE_TYPE_RECV, id, data,
                          v.msg.length, dump, sizeof(dump) - 1);
        ucs_trace_data("rvt RX: AM id %u len %u %s", id, v.msg.length, dump);
    }
    (void)uct_iface_invoke_am(&i.base.super, id, data, v.msg.length, 0);
}

unsigned poll_inbound(iface &i)
{
    unsigned n = 0;
    client::inbound_view v;
    while (n < i.max_poll && i.session->peek_inbound(v)) {
        switch (static_cast<inbound_kind>(v.msg.kind)) {
        case inbound_kind::am:
            deliver_am(i, v);
            break;
        case inbound_kind::write:
            ++i.rx_writes;
            i.rx_write_bytes += v.msg.length;
            ucs_trace_data("rvt RX: %u bytes written by client %u of peer %u",
                           v.msg.length, v.msg.src_client, v.msg.peer);
            break;
        case inbound_kind::peer_failed:
            ucs_debug("rvt %s: the agent gave up on peer %u",
                      i.owner_md->port.device.c_str(), v.msg.peer);
            i.forget_peer(v.msg.peer);
            for (ep *e : i.eps) {
                if (e->peer == v.msg.peer) {
                    i.fail_ep(*e, UCS_ERR_ENDPOINT_TIMEOUT);
                }
            }
            break;
        case inbound_kind::client_gone:
            /* the process behind some endpoints went away: those that
             * watch it fail now (watches_departure, ep.h); the others at
             * their next operation, which the agent completes as
             * peer_failed, as an RC endpoint fails at an operation to a
             * peer that is gone. Ops in flight complete from the agent. */
            ucs_debug("rvt %s: client %u generation %u of peer %u is gone",
                      i.owner_md->port.device.c_str(), v.msg.src_client,
                      v.msg.generation, v.msg.peer);
            for (ep *e : i.eps) {
                if (e->peer == v.msg.peer &&
                    e->dst_client == v.msg.src_client &&
                    e->dst_generation == v.msg.generation &&
                    i.watches_departure(*e)) {
                    e->failed_unasked = !e->checked;
                    i.fail_ep(*e, UCS_ERR_ENDPOINT_TIMEOUT);
                }
            }
            break;
        default:
            ucs_error("rvt %s: inbound entry of unknown kind %u: dropped",
                      i.owner_md->port.device.c_str(), v.msg.kind);
            break;
        }
        i.session->release_inbound();
        ++n;
    }
    return n;
}

/* Pending requests run per progress call, at most: a request may answer
 * UCS_INPROGRESS without taking any resource. */
constexpr unsigned pending_budget = 256;

void dispatch_pending(iface &i)
{
    for (unsigned calls = 0;
         calls < pending_budget && !i.pending_eps.empty() && i.tx_room();
         ++calls) {
        if (i.pending_cursor >= i.pending_eps.size()) {
            i.pending_cursor = 0;
        }
        ep &e = *i.pending_eps[i.pending_cursor];
        /* off the queue before the call: on UCS_OK the callback may have
         * freed it (ep.h) */
        uct_pending_req_t *req    = e.pop_pending();
        e.dispatching             = true;
        const ucs_status_t status = req->func(req);
        e.dispatching             = false;
        if (e.dead) {
            continue; /* destroyed by the callback: already unlisted */
        }
        if (status == UCS_OK) {
            if (!e.has_pending()) {
                i.pending_eps.erase(i.pending_eps.begin() +
                                    static_cast<ptrdiff_t>(i.pending_cursor));
                e.in_pending_list = false;
                continue;
            }
        } else {
            e.unpop_pending(req); /* still queued, at the front */
            if (status != UCS_INPROGRESS) {
                break; /* no progress possible now */
            }
        }
        ++i.pending_cursor;
    }
}

void report_failures(iface &i)
{
    while (!i.failed_eps.empty()) {
        ep *e = i.failed_eps.back();
        i.failed_eps.pop_back();
        if (e->dead || e->error_reported) {
            continue;
        }
        e->error_reported         = true;
        const ucs_status_t status = uct_iface_handle_ep_err(handle_of(i),
                                                            handle_of(*e),
                                                            e->error);
        /* a departure nobody asked about that the user does not handle
         * (UCP without error handling) is no reason to abort: the
         * endpoint's next operation fails all the same */
        const ucs_log_level_t level =
                e->failed_unasked && status != UCS_OK ?
                        UCS_LOG_LEVEL_DIAG :
                        uct_base_iface_failure_log_level(&i.base.super, status,
                                                         e->error);
        ucs_log(level, "rvt %s: endpoint %p to peer %u client %u failed: %s",
                i.owner_md->port.device.c_str(), static_cast<void *>(e),
                e->peer, e->dst_client, ucs_status_string(e->error));
    }
}

/* Every operation in flight fails: nothing will complete it. */
void abandon_in_flight(iface &i, ucs_status_t status)
{
    i.ops.for_each_in_flight([&](const tx_op &, uint64_t wr_id) {
        finish_op(i, wr_id, status, 0);
    });
}

/* Looks, at most every liveness_interval_ms, whether the agent is still
 * there: it never closes a client's socket while it serves it. The clock
 * is read only every liveness_poll_calls progress calls: where the CPU has
 * no invariant TSC (a VM, the testbed's emulator) ucs_get_time() is a
 * gettimeofday system call, which was 10% of the CPU of an am_lat in the
 * testbed when it ran on every call. */
void check_agent(iface &i)
{
    if (--i.liveness_countdown > 0) {
        return;
    }
    i.liveness_countdown = liveness_poll_calls;
    const ucs_time_t now = ucs_get_time();
    if (now < i.next_liveness_check) {
        return;
    }
    i.next_liveness_check = now + ucs_time_from_msec(liveness_interval_ms);
    pollfd p{i.session->attached().sock.get(), POLLRDHUP, 0};
    const bool gone = (::poll(&p, 1, 0) > 0 &&
                       (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) ||
                      !i.session->healthy();
    if (!gone) {
        return;
    }
    ucs_error("rvt %s: lost the agent (%s): every endpoint fails",
              i.owner_md->port.device.c_str(),
              i.session->healthy() ? "it closed its socket" :
                                     "its rings are corrupt");
    i.agent_lost = true;
    /* our hold on its verbs context would keep its QPs acking its peers */
    i.link->agent_lost();
    if (i.own_session) {
        i.own_session->release_agent_context();
    }
    abandon_in_flight(i, UCS_ERR_IO_ERROR);
    for (ep *e : i.eps) {
        i.fail_ep(*e, UCS_ERR_IO_ERROR);
    }
}

} // namespace

unsigned iface::progress()
{
    in_progress = true;
    if (armed) {
        session->disarm();
        armed = false;
    }
    tx_blocked = false;

    std::array<completion, 64> batch;
    const size_t want = std::min<size_t>(max_poll, batch.size());
    const size_t n = session->poll_completions(std::span(batch.data(), want));
    for (size_t k = 0; k < n; ++k) {
        on_completion(*this, batch[k]);
    }
    unsigned count = static_cast<unsigned>(n) + poll_inbound(*this);
    if (!pending_eps.empty()) {
        dispatch_pending(*this);
    }
    if (!agent_lost) {
        check_agent(*this);
    }
    report_failures(*this);

    in_progress = false;
    for (ep *e : graveyard) {
        delete e;
    }
    graveyard.clear();
    if (count == 0 && idle_yield && waits_on_agent()) {
        sched_yield();
    }
    return count;
}

void iface::forget_ep(ep &e)
{
    if (e.has_pending()) {
        ucs_debug("rvt: destroying endpoint %p with pending requests: "
                  "dropped",
                  static_cast<void *>(&e));
        while (e.pop_pending() != nullptr) {
        }
    }
    /* what it started and nobody will hear of: cancelled now; the slots
     * and bounce buffers stay taken until the agent completes them */
    ops.for_each_in_flight([&](tx_op &op, uint64_t) {
        if (op.owner != &e) {
            return;
        }
        op.owner = nullptr;
        if (op.comp != nullptr) {
            uct_completion_t *comp = op.comp;
            op.comp                = nullptr;
            uct_invoke_completion(comp, UCS_ERR_CANCELED);
        }
    });
    while (!e.flushes.empty()) {
        uct_completion_t *comp = e.flushes.back().comp;
        e.flushes.pop_back();
        uct_invoke_completion(comp, UCS_ERR_CANCELED);
    }
    std::erase(eps, &e);
    std::erase(failed_eps, &e);
    unlist_pending(e);
    e.dead = true;
}

void iface::adopt_ep(ep &e)
{
    /* so that progress never allocates to list an endpoint */
    const size_t n = eps.size() + 1;
    pending_eps.reserve(n);
    failed_eps.reserve(n);
    graveyard.reserve(n);
    eps.push_back(&e);
}

void iface::destroy_ep(ep &e)
{
    forget_ep(e);
    if (in_progress) {
        /* a callback of this progress call may still hold it */
        graveyard.push_back(&e);
        return;
    }
    delete &e;
}

void iface::list_pending(ep &e)
{
    if (!e.in_pending_list) {
        /* capacity reserved at adopt_ep */
        pending_eps.push_back(&e);
        e.in_pending_list = true;
    }
}

void iface::unlist_pending(ep &e)
{
    if (!e.in_pending_list) {
        return;
    }
    auto it = std::find(pending_eps.begin(), pending_eps.end(), &e);
    if (it != pending_eps.end()) {
        if (static_cast<size_t>(it - pending_eps.begin()) < pending_cursor) {
            --pending_cursor;
        }
        pending_eps.erase(it);
    }
    e.in_pending_list = false;
}

} // namespace rvt::uct
