/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rvt interface (transport "rvt", device "<dev>:<port>"): the owner of
 * a data path of its MD's agent link: the first interface of the MD takes
 * the link's own attachment (the leader), every other one attaches a
 * sibling of its own (agent_link.h). Any number may be open; each posts
 * and polls only its own rings, so interfaces of different workers share
 * no data-path state.
 *
 * Addresses (CONNECT_TO_IFACE; no endpoint address):
 *   device address  16 bytes: the agent's port GID
 *   iface address   36 bytes, packed: wire::agent_address of the agent
 *                   (GID, UD QPN, the Q_Key its datagrams must name, its
 *                   id), then this process's client index on it (16
 *                   bits) and its generation (imm.h; 8 bits), and a zero
 *                   byte: a stale address (its process gone, the index
 *                   maybe someone else's) reaches nobody, and its
 *                   endpoints fail (inbound client_gone)
 *
 * Progress, one call: the completion ring (user completions, bounce
 * buffers back, endpoint flushes, failures), then the inbound ring (active
 * messages handed to UCT's handlers in place, write notices counted, peer
 * failures failing the endpoints to that peer, client departures the
 * endpoints to that client), then the pending queues;
 * endpoint failures are reported to UCP last, once nothing of ours is
 * half-done. Endpoints destroyed meanwhile (from a callback) are freed at
 * the end of the call. A call that found nothing yields the CPU only while
 * the agent holds work of ours (waits_on_agent).
 */
#ifndef RVT_UCT_IFACE_H
#define RVT_UCT_IFACE_H

#include "uct/ib/rvt/client/session.h"
#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/common/work.h"
#include "uct/ib/rvt/uct/agent_link.h"
#include "uct/ib/rvt/uct/base.h"
#include "uct/ib/rvt/uct/bounce_pool.h"
#include "uct/ib/rvt/uct/md.h"
#include "uct/ib/rvt/uct/tx_ops.h"
#include "uct/ib/rvt/uct/ucx.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace rvt::uct {

struct ep;

/* UCX_RVT_* settings of the interface (iface.cc has the table). */
struct iface_config {
    uct_iface_config_t super;
    size_t seg_size;
    unsigned tx_queue_len;
    unsigned max_poll;
    size_t max_zcopy;
    int idle_yield;
    size_t stripe_min;
};
static_assert(std::is_standard_layout_v<iface_config>);

extern ucs_config_field_t iface_config_table[];

struct [[gnu::packed]] iface_address {
    wire::agent_address agent;
    uint16_t client_index; /* < imm::max_clients */
    uint8_t client_generation; /* imm.h */
    uint8_t reserved; /* zero */
};
static_assert(sizeof(iface_address) == 36);
static_assert(imm::max_clients <= UINT16_MAX + 1u &&
                      imm::max_generations <= UINT8_MAX + 1u,
              "the address fields hold an index and a generation");

/* Empty if `a` is a well-formed address, else what is wrong with it. */
std::string iface_address_error(const iface_address &a);

struct iface {
    base_iface base; /* first: the uct_iface_h */
    md *owner_md;
    std::shared_ptr<agent_link> link; /* before what registers through it */
    /* a sibling attachment, when the link's own data path is another
     * interface's (after the link: the leader outlives it) */
    std::unique_ptr<client::session> own_session;
    client::session *session; /* own_session, or the link's */
    bool data_path_claimed;
    /* the agent's peer index per remote agent, asked through `session` */
    std::vector<std::pair<wire::agent_address, uint32_t>> peers;

    /* derived from the configuration and the agent's limits */
    uint32_t seg_size; /* largest AM (header included), put/am bcopy */

    /* am_zcopy's header is copied into a bounce buffer and gathered before
     * the payload; enough for UCP's protocol headers */
    uint32_t am_max_header() const
    {
        return std::min<uint32_t>(128, seg_size);
    }
    unsigned max_poll;
    size_t max_zcopy;
    /* a put_zcopy of this many bytes or more may be split over the
     * agent's K QPs (work_stripe); SIZE_MAX: never */
    size_t stripe_min;
    bool idle_yield;
    /* the agent's device does 64-bit atomics (wire::agent_feature_atomic64) */
    bool atomic64;

    std::unique_ptr<bounce_pool> bounce;
    tx_ops ops;
    std::vector<ep *> eps;
    std::vector<ep *> pending_eps; /* eps with queued pending requests */
    size_t pending_cursor;
    std::vector<ep *> failed_eps; /* to report at the end of progress */
    std::vector<ep *> graveyard; /* destroyed during progress */
    bool in_progress;
    bool tx_blocked; /* the session refused a post since last progress */
    bool armed; /* the session's doorbell is armed for UCP's wakeup */
    bool agent_lost;
    uint32_t fence_generation;
    ucs_time_t next_liveness_check;
    unsigned liveness_countdown = 1; /* progress calls until the next look */

    /* inbound, for the debug log at close */
    uint64_t rx_am, rx_am_bytes, rx_writes, rx_write_bytes;

    ~iface();

    /* Whether the agent holds work of this interface's: operations in
     * flight, or endpoints whose requests wait for room. Only then does
     * an empty progress call yield (IDLE_YIELD): with nothing outstanding
     * it costs no system call, whatever else the process's loop polls. */
    bool waits_on_agent() const
    {
        return ops.in_flight() > 0 || !pending_eps.empty();
    }

    /* Room to post one more operation that needs a bounce buffer. */
    bool tx_room() const
    {
        return !tx_blocked && !ops.full() && !bounce->empty() && !agent_lost;
    }

    /* Posts wr for e, holding `bounce` (or -1) until its completion.
     * UCS_OK when posted; UCS_ERR_NO_RESOURCE when the session refused it
     * (then the bounce buffer is already back in the pool). */
    ucs_status_t
    post(ep &e, work_request &wr, uct_completion_t *comp, int32_t bounce);

    /* The agent's index for `remote`, asked once per remote agent. */
    result<uint32_t> peer_index(const wire::agent_address &remote);
    /* The agent gave up on peer `index`: the next endpoint to that agent
     * asks again instead of reusing it. */
    void forget_peer(uint32_t index);

    void fail_ep(ep &e, ucs_status_t status);
    /* Whether the departure of e's destination fails e at once: it was
     * checked (ep_check), or it has sent to that process and this
     * interface's user handles endpoint errors. An endpoint that has sent
     * nothing stays quiet until it does, as does every endpoint of a
     * user with no error handler (ucx_perftest's UCT server, whose peers
     * leave before it). UCP needs the second rule: it checks nothing of an
     * endpoint still being wired up, so a process gone before answering
     * UCP's wireup request would leave that endpoint, and every request
     * queued on it, waiting forever. */
    bool watches_departure(const ep &e) const;
    unsigned progress();

    /* The endpoint lists (eps, pending_eps, failed_eps, graveyard) are
     * edited here and by progress only. */
    void adopt_ep(ep &e); /* ep_create; may throw std::bad_alloc */
    void destroy_ep(ep &e); /* ep_destroy: freed now or after progress */
    void list_pending(ep &e); /* e queued its first pending request */
    void unlist_pending(ep &e); /* e has none queued any more */

private:
    void forget_ep(ep &e);
};
static_assert(std::is_standard_layout_v<iface> && offsetof(iface, base) == 0);

inline iface &to_iface(uct_iface_h handle)
{
    return *reinterpret_cast<iface *>(handle);
}

inline uct_iface_h handle_of(iface &i)
{
    return &i.base.super.super;
}

ucs_status_t
iface_open(uct_md_h md, uct_worker_h worker, const uct_iface_params_t *params,
           const uct_iface_config_t *config, uct_iface_h *iface_p) noexcept;

ucs_status_t query_tl_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                              unsigned *num_devices_p) noexcept;

} // namespace rvt::uct

#endif
