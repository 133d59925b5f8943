/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rvt interface (iface.h): configuration, attributes, addresses, open
 * and close, and UCT's ops table for the transport. The data path and
 * progress are in iface_progress.cc.
 */
#include "uct/ib/rvt/uct/iface.h"

#include "uct/ib/rvt/common/format.h"
#include "uct/ib/rvt/common/defaults.h"
#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/uct/ep.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

namespace rvt::uct {

ucs_config_field_t iface_config_table[] = {
        {"", "", nullptr, offsetof(iface_config, super),
         UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

        {"SEG_SIZE", RVT_QUOTE(RVT_DEFAULT_AM_SIZE),
         "Largest active message, its 8-byte header included, and largest "
         "put or am\n"
         "bcopy. Limited by the agent's inbound slot size (rvtd's max AM "
         "size): a\n"
         "larger value is lowered to it. Rounded up to a multiple of 64.",
         offsetof(iface_config, seg_size), UCS_CONFIG_TYPE_MEMUNITS},

        {"TX_QUEUE_LEN", "256",
         "Operations in flight per interface. Each short or bcopy operation "
         "holds a\n"
         "registered bounce buffer of SEG_SIZE bytes until its completion "
         "arrives.\n"
         "Limited by the agent's completion ring.",
         offsetof(iface_config, tx_queue_len), UCS_CONFIG_TYPE_UINT},

        {"MAX_POLL", "16",
         "Completions, and separately inbound messages, handled per progress "
         "call",
         offsetof(iface_config, max_poll), UCS_CONFIG_TYPE_UINT},

        {"IDLE_YIELD", "y",
         "Give the CPU away (sched_yield) when a progress call finds nothing "
         "while the\n"
         "agent holds work of this interface's (operations in flight, "
         "requests waiting\n"
         "for room). The node agent needs a core to move this process's "
         "data: when\n"
         "processes that poll outnumber the cores (one rank per core plus "
         "the agent),\n"
         "a handoff to a process that does not yield waits for the "
         "scheduler's tick.\n"
         "With nothing of its own outstanding an interface never yields: UCP "
         "calls\n"
         "rvt's progress in every turn of its loop, and traffic on other "
         "transports\n"
         "must not pay a system call for it.",
         offsetof(iface_config, idle_yield), UCS_CONFIG_TYPE_BOOL},

        {"MAX_ZCOPY", "1g",
         "Largest put or get zcopy: one RDMA WRITE or READ of the agent's",
         offsetof(iface_config, max_zcopy), UCS_CONFIG_TYPE_MEMUNITS},

        {"STRIPE_MIN", "inf",
         "A put zcopy of this many bytes or more is split by the agent over "
         "its K\n"
         "shared QPs to the peer's node, in parts of whole 4 KiB pages; it "
         "still\n"
         "completes once, and the target hears of it once every part has "
         "landed.\n"
         "At least 8k; inf (the default): never split. Off by default: on "
         "Soft-RoCE\n"
         "it moved no more than one QP (docs/performance.md, Striping).",
         offsetof(iface_config, stripe_min), UCS_CONFIG_TYPE_MEMUNITS},

        {}};

namespace {

std::string device_name(const md &m)
{
    return m.port.device + ":" + std::to_string(m.port.port);
}

} // namespace

namespace {

/* At close, nothing waits for work in flight: the agent defers the
 * bounce buffers' deregistration while any op of this process names
 * them (agent/engine/mr_registry.h), and their pages stay pinned by the
 * MR after the munmap. What must not happen is another interface taking this
 * one's completions or messages for its own, or this one's address
 * still reaching anyone: its senders must fail as they do when a
 * process dies, whether its MD stays open or not (UCP destroys a worker
 * and keeps its context: UCX's test_ucp_peer_failure):
 *   - its own attachment (a sibling): its address retired, then the
 *     attachment left, so the agent drops its queued work;
 *   - the MD's attachment: its address retired, and no interface claims
 *     it again (later ones attach siblings); the attachment stays for the
 *     MD's registrations, and its rings for the completions of work still
 *     in flight.
 * A retirement returns once the peer agents that were told have said they
 * heard (agent/engine/departure_barrier.h): from then on their senders'
 * work for this address fails unposted, even a put into the memory the
 * MD still has registered. */
/* A retirement the agent did not confirm: said once, for both ways. */
void warn_not_retired(const iface &i, uint32_t client, const std::string &why)
{
    ucs_warn("rvt %s: interface %p (client %u) closes, and its address may "
             "still reach it: %s",
             i.owner_md->port.device.c_str(), static_cast<const void *>(&i),
             client, why.c_str());
}

void end_data_path(iface &i)
{
    if (i.own_session) {
        if (i.agent_lost) {
            return;
        }
        if (auto retired = i.own_session->retire_address(leave_wait);
            !retired) {
            warn_not_retired(i, i.own_session->client_index(), retired.error());
        }
        if (!i.own_session->leave(leave_wait)) {
            ucs_warn("rvt %s: the agent did not let interface %p's "
                     "attachment (client %u) go within %lld ms",
                     i.owner_md->port.device.c_str(), static_cast<void *>(&i),
                     i.own_session->client_index(),
                     static_cast<long long>(leave_wait.count()));
        }
        return;
    }
    ucs_debug("rvt %s: interface %p closes with %u operations in flight: "
              "retiring its memory domain's attachment's address",
              i.owner_md->port.device.c_str(), static_cast<void *>(&i),
              i.ops.in_flight());
    auto retired = i.link->retire_data_path(&i);
    if (!retired && !i.agent_lost) {
        warn_not_retired(i, i.session->client_index(), retired.error());
    }
}

} // namespace

iface::~iface()
{
    if (base.live) {
        uct_base_iface_progress_disable(handle_of(*this),
                                        UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    }
    if (!eps.empty()) {
        ucs_warn("rvt: closing an interface with %zu endpoints still open",
                 eps.size());
    }
    if (data_path_claimed || own_session) {
        ucs_debug("rvt %s: interface %p received %llu active messages "
                  "(%llu bytes) and %llu write notices (%llu bytes)",
                  owner_md->port.device.c_str(), static_cast<void *>(this),
                  static_cast<unsigned long long>(rx_am),
                  static_cast<unsigned long long>(rx_am_bytes),
                  static_cast<unsigned long long>(rx_writes),
                  static_cast<unsigned long long>(rx_write_bytes));
        try {
            end_data_path(*this);
        } catch (const std::exception &ex) {
            ucs_warn("rvt: closing the interface's data path: %s", ex.what());
        }
    }
    for (ep *e : graveyard) {
        delete e;
    }
}

std::string iface_address_error(const iface_address &a)
{
    std::string err = wire::agent_address_error(a.agent);
    if (!err.empty()) {
        return err;
    }
    if (a.client_index >= imm::max_clients) {
        return "client index " + std::to_string(a.client_index) +
               ": expected below " + std::to_string(imm::max_clients);
    }
    if (a.reserved != 0) {
        return "reserved byte " + std::to_string(a.reserved) + ": expected 0";
    }
    return {};
}

namespace {

/* ---- interface operations ----------------------------------------------- */

struct perf_estimate {
    double latency;
    double bandwidth; /* any operation: rc_verbs' figure */
    double rdma_bandwidth; /* a zero-copy put or get: one RDMA stream */
};

/* The agent's part of a one-way message: the sender's agent takes the
 * request from its ring and posts it, the receiver's routes the message
 * into the process's ring. rvt_host_bench measures these hops at
 * 0.45-1.5 us in all, with agents that spin (docs/performance.md). */
constexpr double agent_hops_latency = 1e-6;

/* What the port's sysfs entry and the agent's path MTU let us say. The
 * device part is what rc_verbs reports for the same port, so UCP compares
 * like with like: rc_verbs adds 1 ns per endpoint (a QP each) and declares
 * 256 endpoints its most (UCX_RC_MAX_NUM_EPS), rvt adds its hops and no
 * limit. UCP puts the rendezvous on rvt past 256 estimated endpoints, or
 * past about 1,125 when rc's limit is lifted (test/testbed/select.sh). */
perf_estimate estimate(const client::port_info &p, uint32_t path_mtu)
{
    /* rvt's bytes are RDMA writes on the agent's RC QPs: rc_verbs' wire */
    return {client::device_latency(p) + agent_hops_latency,
            client::rc_write_bandwidth(p, path_mtu),
            client::rdma_stream_bandwidth(p, path_mtu)};
}

/* What UCP's protocols (UCX 1.22) weigh per operation: the interface's
 * figures, except that a zero-copy put or get is one RDMA stream, whose
 * packets after the first carry no transport header, where a UD send
 * carries one in each packet: so a large rendezvous prefers rvt's RDMA to
 * ud_verbs' fragments, as it does rc_verbs' RDMA. */
ucs_status_t
iface_estimate_perf(uct_iface_h handle, uct_perf_attr_t *perf_attr) noexcept
{
    const ucs_status_t status = uct_base_iface_estimate_perf(handle, perf_attr);
    if (status != UCS_OK ||
        !(perf_attr->field_mask & UCT_PERF_ATTR_FIELD_OPERATION)) {
        return status;
    }
    if (perf_attr->operation != UCT_EP_OP_PUT_ZCOPY &&
        perf_attr->operation != UCT_EP_OP_GET_ZCOPY) {
        return status;
    }
    const iface &i           = to_iface(handle);
    const perf_estimate perf = estimate(i.owner_md->port,
                                        i.session->path_mtu());
    set_perf_bandwidth(*perf_attr, perf.rdma_bandwidth);
    return status;
}

ucs_status_t iface_query(uct_iface_h handle, uct_iface_attr_t *attr) noexcept
{
    iface &i = to_iface(handle);
    uct_base_iface_query(&i.base.super, attr);

    attr->iface_addr_len  = sizeof(iface_address);
    attr->device_addr_len = sizeof(wire::agent_address::gid);
    attr->ep_addr_len     = 0;
    attr->max_conn_priv   = 0;
    attr->cap.flags       = UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY |
                      UCT_IFACE_FLAG_AM_ZCOPY | UCT_IFACE_FLAG_PUT_SHORT |
                      UCT_IFACE_FLAG_PUT_BCOPY | UCT_IFACE_FLAG_PUT_ZCOPY |
                      UCT_IFACE_FLAG_GET_BCOPY | UCT_IFACE_FLAG_GET_ZCOPY |
                      UCT_IFACE_FLAG_PENDING | UCT_IFACE_FLAG_CB_SYNC |
                      UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                      UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE |
                      UCT_IFACE_FLAG_EP_CHECK | iface_flag_inter_node;
    attr->cap.event_flags = UCT_IFACE_FLAG_EVENT_SEND_COMP |
                            UCT_IFACE_FLAG_EVENT_RECV | UCT_IFACE_FLAG_EVENT_FD;

    /* short operations: inline (the work ring's data slot) up to the
     * session's max_inline(), from a bounce buffer above, up to seg_size:
     * both work, so the limit is seg_size */
    attr->cap.put.max_short       = i.seg_size;
    attr->cap.put.max_bcopy       = i.seg_size;
    attr->cap.put.min_zcopy       = 0;
    attr->cap.put.max_zcopy       = i.max_zcopy;
    attr->cap.put.opt_zcopy_align = 1;
    attr->cap.put.align_mtu       = 1;
    attr->cap.put.max_iov         = 1;

    attr->cap.get.max_short       = 0;
    attr->cap.get.max_bcopy       = i.seg_size;
    attr->cap.get.min_zcopy       = 0;
    attr->cap.get.max_zcopy       = i.max_zcopy;
    attr->cap.get.opt_zcopy_align = 1;
    attr->cap.get.align_mtu       = 1;
    attr->cap.get.max_iov         = 1;

    /* one SEND carries one registered buffer: a zcopy AM is the caller's
     * payload alone, with no separate header */
    attr->cap.am.max_short       = i.seg_size;
    attr->cap.am.max_bcopy       = i.seg_size;
    attr->cap.am.min_zcopy       = 0;
    attr->cap.am.max_zcopy       = i.seg_size;
    attr->cap.am.opt_zcopy_align = 1;
    attr->cap.am.align_mtu       = 1;
    attr->cap.am.max_hdr         = i.am_max_header();
    attr->cap.am.max_iov         = 1;

    /* what verbs atomics are: 64-bit fetch-and-add (add without the fetch
     * too) and compare-and-swap, done by the agent's device, as rc_verbs
     * offers them on a device without extended atomics */
    if (i.atomic64) {
        attr->cap.atomic64.op_flags  = UCS_BIT(UCT_ATOMIC_OP_ADD);
        attr->cap.atomic64.fop_flags = UCS_BIT(UCT_ATOMIC_OP_ADD) |
                                       UCS_BIT(UCT_ATOMIC_OP_CSWAP);
        attr->cap.flags |= UCT_IFACE_FLAG_ATOMIC_DEVICE;
    }

    const perf_estimate perf  = estimate(i.owner_md->port,
                                         i.session->path_mtu());
    attr->latency             = ucs_linear_func_make(perf.latency, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = perf.bandwidth;
    /* a ring entry and a look at the agent's doorbell */
    attr->overhead = 200e-9;
    attr->priority = 0;
    return UCS_OK;
}

ucs_status_t
iface_get_address(uct_iface_h handle, uct_iface_addr_t *addr) noexcept
{
    const iface &i = to_iface(handle);
    const iface_address a{i.session->agent_address(),
                          static_cast<uint16_t>(i.session->client_index()),
                          i.session->attached().client_generation, 0};
    std::memcpy(addr, &a, sizeof(a));
    return UCS_OK;
}

ucs_status_t
iface_get_device_address(uct_iface_h handle, uct_device_addr_t *addr) noexcept
{
    const iface &i = to_iface(handle);
    std::memcpy(addr, i.session->agent_address().gid,
                sizeof(wire::agent_address::gid));
    return UCS_OK;
}

/* Any agent is reachable: RoCE routes, and IB fabrics are one subnet for
 * the agent's handshake; only a malformed address is not. */
bool iface_address_reachable(uct_iface_h,
                             const uct_iface_addr_t *iface_addr) noexcept
{
    if (iface_addr == nullptr) {
        return false;
    }
    iface_address a;
    std::memcpy(&a, iface_addr, sizeof(a));
    try {
        return iface_address_error(a).empty();
    } catch (const std::exception &) {
        return false;
    }
}

int iface_is_reachable(const uct_iface_h handle, const uct_device_addr_t *,
                       const uct_iface_addr_t *iface_addr) noexcept
{
    return iface_address_reachable(handle, iface_addr) ? 1 : 0;
}

ucs_status_t
iface_flush(uct_iface_h handle, unsigned, uct_completion_t *comp) noexcept
{
    if (comp != nullptr) {
        return UCS_ERR_UNSUPPORTED; /* as UCT's API says of iface flush */
    }
    return to_iface(handle).ops.in_flight() == 0 ? UCS_OK : UCS_INPROGRESS;
}

ucs_status_t iface_fence(uct_iface_h handle, unsigned) noexcept
{
    /* every endpoint's next operation waits for its earlier reads */
    ++to_iface(handle).fence_generation;
    return UCS_OK;
}

unsigned iface_progress(uct_iface_h handle) noexcept
{
    return to_iface(handle).progress();
}

ucs_status_t iface_event_fd_get(uct_iface_h handle, int *fd_p) noexcept
{
    *fd_p = to_iface(handle).session->event_fd();
    return UCS_OK;
}

ucs_status_t iface_event_arm(uct_iface_h handle, unsigned) noexcept
{
    iface &i = to_iface(handle);
    if (!i.failed_eps.empty() || !i.session->arm()) {
        return UCS_ERR_BUSY; /* something waits: progress first */
    }
    i.armed = true;
    return UCS_OK;
}

void iface_close(uct_iface_h handle) noexcept
{
    delete &to_iface(handle);
}

uct_iface_ops_t iface_ops = {
        .ep_put_short           = ep_put_short,
        .ep_put_bcopy           = ep_put_bcopy,
        .ep_put_zcopy           = ep_put_zcopy,
        .ep_get_short           = unsupported<uct_ep_get_short_func_t>,
        .ep_get_bcopy           = ep_get_bcopy,
        .ep_get_zcopy           = ep_get_zcopy,
        .ep_am_short            = ep_am_short,
        .ep_am_short_iov        = ep_am_short_iov,
        .ep_am_bcopy            = ep_am_bcopy,
        .ep_am_zcopy            = ep_am_zcopy,
        .ep_atomic_cswap64      = ep_atomic_cswap64,
        .ep_atomic_cswap32      = unsupported<uct_ep_atomic_cswap32_func_t>,
        .ep_atomic32_post       = unsupported<uct_ep_atomic32_post_func_t>,
        .ep_atomic64_post       = ep_atomic64_post,
        .ep_atomic32_fetch      = unsupported<uct_ep_atomic32_fetch_func_t>,
        .ep_atomic64_fetch      = ep_atomic64_fetch,
        .ep_tag_eager_short     = unsupported<uct_ep_tag_eager_short_func_t>,
        .ep_tag_eager_bcopy     = unsupported<uct_ep_tag_eager_bcopy_func_t>,
        .ep_tag_eager_zcopy     = unsupported<uct_ep_tag_eager_zcopy_func_t>,
        .ep_tag_rndv_zcopy      = unsupported<uct_ep_tag_rndv_zcopy_func_t>,
        .ep_tag_rndv_cancel     = unsupported<uct_ep_tag_rndv_cancel_func_t>,
        .ep_tag_rndv_request    = unsupported<uct_ep_tag_rndv_request_func_t>,
        .iface_tag_recv_zcopy   = unsupported<uct_iface_tag_recv_zcopy_func_t>,
        .iface_tag_recv_cancel  = unsupported<uct_iface_tag_recv_cancel_func_t>,
        .ep_pending_add         = ep_pending_add,
        .ep_pending_purge       = ep_pending_purge,
        .ep_flush               = ep_flush,
        .ep_fence               = ep_fence,
        .ep_check               = ep_check,
        .ep_create              = ep_create,
        .ep_connect             = unsupported<uct_ep_connect_func_t>,
        .ep_disconnect          = unsupported<uct_ep_disconnect_func_t>,
        .cm_ep_conn_notify      = unsupported<uct_cm_ep_conn_notify_func_t>,
        .ep_destroy             = ep_destroy,
        .ep_get_address         = unsupported<uct_ep_get_address_func_t>,
        .ep_connect_to_ep       = unsupported<uct_ep_connect_to_ep_func_t>,
        .iface_accept           = unsupported<uct_iface_accept_func_t>,
        .iface_reject           = unsupported<uct_iface_reject_func_t>,
        .iface_flush            = iface_flush,
        .iface_fence            = iface_fence,
        .iface_progress_enable  = uct_base_iface_progress_enable,
        .iface_progress_disable = uct_base_iface_progress_disable,
        .iface_progress         = iface_progress,
        .iface_event_fd_get     = iface_event_fd_get,
        .iface_event_arm        = iface_event_arm,
        .iface_close            = iface_close,
        .iface_query            = iface_query,
        .iface_get_device_address = iface_get_device_address,
        .iface_get_address        = iface_get_address,
        .iface_is_reachable       = iface_is_reachable,
};

/* Empty when the AM alignment parameters are valid, else what is wrong:
 * uct.h's rules (a power of 2; an offset only with it). rvt
 * hands AM data to the handler in place, never as a descriptor, so a
 * valid alignment has nothing to act on (uct.h: only descriptors are
 * aligned). */
std::string am_alignment_error(const uct_iface_params_t &p)
{
    const bool has_align  = p.field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT;
    const bool has_offset = p.field_mask &
                            UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET;
    if (has_offset && !has_align) {
        return format("AM alignment offset %zu without an alignment: "
                      "expected UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT too",
                      p.am_align_offset);
    }
    if (!has_align) {
        return {};
    }
    if (p.am_alignment == 0 || (p.am_alignment & (p.am_alignment - 1)) != 0) {
        return format("AM alignment %zu: expected a power of 2",
                      p.am_alignment);
    }
    /* an offset not below the alignment is accepted, as UCX's transports
     * accept it (uct_iface_param_am_alignment ignores it): UCP asks for
     * its header's size, 8, whatever alignment its user chose */
    return {};
}

/* Empty if UCX_RVT_STRIPE_MIN is usable, else why not. Below two pages
 * nothing can be split (parts are whole pages, work.h); "auto" would
 * leave the choice to a transport that has made it in its default. */
std::string stripe_min_error(size_t stripe_min)
{
    const bool is_auto = stripe_min == UCS_MEMUNITS_AUTO;
    if (is_auto ||
        (stripe_min != UCS_MEMUNITS_INF && stripe_min < 2 * stripe_align)) {
        return "UCX_RVT_STRIPE_MIN=" +
               (is_auto ? std::string("auto") : std::to_string(stripe_min)) +
               ": expected a size of at least " +
               std::to_string(2 * stripe_align) + " bytes, or inf";
    }
    return {};
}

/* What UCT asked for that this transport cannot give: an interface opens on
 * its memory domain's device only, and the settings must be valid. */
ucs_status_t check_open_params(const std::string &name,
                               const uct_iface_params_t &params,
                               const iface_config &config)
{
    if (!(params.field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE) ||
        !(params.open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("rvt %s: an interface opens on a device only "
                  "(UCT_IFACE_OPEN_MODE_DEVICE)",
                  name.c_str());
        return UCS_ERR_UNSUPPORTED;
    }
    if (name != params.mode.device.dev_name) {
        ucs_error("rvt: device %s is not this memory domain's (%s)",
                  params.mode.device.dev_name, name.c_str());
        return UCS_ERR_NO_DEVICE;
    }
    if (auto bad = am_alignment_error(params); !bad.empty()) {
        ucs_error("rvt %s: %s", name.c_str(), bad.c_str());
        return UCS_ERR_INVALID_PARAM;
    }
    if (auto bad = stripe_min_error(config.stripe_min); !bad.empty()) {
        ucs_error("rvt %s: %s", name.c_str(), bad.c_str());
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

/* The interface's attachment: the memory domain's, if no other interface
 * has claimed its data path, else one of its own (a sibling). */
ucs_status_t take_data_path(iface &i, const std::string &name)
{
    auto s = i.link->session();
    if (!s) {
        ucs_error("rvt %s: no agent: %s", name.c_str(), s.error().c_str());
        return UCS_ERR_UNREACHABLE;
    }
    if (i.link->claim_data_path(&i)) {
        i.session           = s.value();
        i.data_path_claimed = true;
        return UCS_OK;
    }
    auto own = i.link->attach_sibling();
    if (!own) {
        ucs_error("rvt %s: another interface of this memory domain holds its "
                  "attachment, and attaching one for this interface failed: "
                  "%s",
                  name.c_str(), own.error().c_str());
        return UCS_ERR_UNREACHABLE;
    }
    i.own_session = std::move(own).value();
    i.session     = i.own_session.get();
    return UCS_OK;
}

/* The settings, within what the attachment allows; returns the number of
 * operations in flight (bounded by the agent's completion ring). */
uint32_t apply_config(iface &i, const iface_config &config)
{
    /* the agent's slot is a multiple of 64 bytes (shm_layout.h) */
    const size_t seg    = std::min<size_t>(config.seg_size,
                                        i.session->max_am_size());
    i.seg_size          = static_cast<uint32_t>((seg + 63) / 64 * 64);
    i.max_poll          = std::max(1u, config.max_poll);
    i.idle_yield        = config.idle_yield != 0;
    i.max_zcopy         = std::min<size_t>(config.max_zcopy, UINT32_MAX);
    i.stripe_min        = config.stripe_min == UCS_MEMUNITS_INF ? SIZE_MAX :
                                                                  config.stripe_min;
    i.atomic64          = (i.session->attached().features &
                  wire::agent_feature_atomic64) != 0;
    const uint32_t ring = i.session->attached().layout.caps.completion;
    return std::clamp<uint32_t>(config.tx_queue_len, 1, ring);
}

} // namespace

ucs_status_t iface_open(uct_md_h md_handle, uct_worker_h worker,
                        const uct_iface_params_t *params,
                        const uct_iface_config_t *tl_config,
                        uct_iface_h *iface_p) noexcept
{
    md &m              = to_md(md_handle);
    const auto &config = *reinterpret_cast<const iface_config *>(tl_config);
    try {
        const std::string name = device_name(m);
        ucs_status_t status    = check_open_params(name, *params, config);
        if (status != UCS_OK) {
            return status;
        }
        auto i = std::make_unique<iface>();
        status = i->base.init(
                &iface_ops,
                iface_internal_ops<iface_address_reachable, ep_is_connected_to,
                                   iface_estimate_perf>(),
                md_handle, worker, params, tl_config);
        if (status != UCS_OK) {
            return status;
        }
        i->owner_md = &m;
        i->link     = m.link;
        status      = take_data_path(*i, name);
        if (status != UCS_OK) {
            return status;
        }
        const uint32_t queue_len = apply_config(*i, config);
        auto pool = bounce_pool::create(*i->link, queue_len, i->seg_size);
        if (!pool) {
            ucs_error("rvt %s: %s", name.c_str(), pool.error().c_str());
            return UCS_ERR_IO_ERROR;
        }
        i->bounce = std::move(pool).value();
        i->ops.init(queue_len);

        ucs_debug("rvt %s: interface %p is client %u: segments of %u bytes, "
                  "%u operations in flight",
                  name.c_str(), static_cast<void *>(i.get()),
                  i->session->client_index(), i->seg_size, queue_len);
        *iface_p = handle_of(*i.release());
        return UCS_OK;
    } catch (const std::exception &e) {
        ucs_error("rvt: opening an interface: %s", e.what());
        return UCS_ERR_NO_MEMORY;
    }
}

result<uint32_t> iface::peer_index(const wire::agent_address &remote)
{
    for (const auto &[address, index] : peers) {
        if (address == remote) {
            return index;
        }
    }
    auto peer = link->connect_peer(*session, remote);
    if (peer) {
        peers.emplace_back(remote, peer.value());
    }
    return peer;
}

void iface::forget_peer(uint32_t index)
{
    std::erase_if(peers, [index](const auto &p) { return p.second == index; });
}

ucs_status_t query_tl_devices(uct_md_h md_handle,
                              uct_tl_device_resource_t **devices_p,
                              unsigned *num_devices_p) noexcept
{
    md &m = to_md(md_handle);
    try {
        if (!m.link->may_attach()) {
            ucs_debug("rvt %s: no agent listens and UCX_RVT_START_AGENT=n",
                      m.port.device.c_str());
            return UCS_ERR_UNSUPPORTED;
        }
        return uct_single_device_resource(md_handle, device_name(m).c_str(),
                                          UCT_DEVICE_TYPE_NET,
                                          UCS_SYS_DEVICE_ID_UNKNOWN, devices_p,
                                          num_devices_p);
    } catch (const std::exception &e) {
        ucs_error("rvt: listing devices: %s", e.what());
        return UCS_ERR_NO_MEMORY;
    }
}

} // namespace rvt::uct
