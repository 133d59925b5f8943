/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A process's working connection to its agent: the API the UCX module (and
 * the tests) use once attached. It owns the attachment and exposes:
 *
 *   connect_peer()     a remote (or this node's) agent -> a peer index
 *   register_memory()  own memory into the agent's PD (registration.h)
 *   post()             a work request into the work ring
 *   post_inline()      one whose payload travels in the ring's work-data
 *                      slot (no registered memory; the agent posts it
 *                      as an inline send)
 *   poll_completions() one completion per work request, in order per
 *                      endpoint (source client, peer, destination client)
 *                      for requests that were posted; a request refused
 *                      as `invalid`, or failed as `peer_failed` before it
 *                      was posted, completes at once and may overtake
 *                      earlier requests of its endpoint still in flight
 *   peek_inbound() /   active messages (read in place), write notices (if
 *   release_inbound()  asked for) and peer failures, in arrival order
 *   wait()             sleep until the agent has something for us
 *
 * Flow control: every request gets exactly one completion, so the session
 * admits at most completion-ring-capacity requests in flight; post()
 * answers `busy` when that many are outstanding or the work ring is full,
 * and never overruns either ring. A `busy` post changed nothing: retry
 * after polling completions.
 *
 * Tracing (common/trace.h): RVT_TRACE=FILE[:EVENTS] in the environment
 * makes the session record when each request entered the work ring, when
 * its completion was taken and when each inbound entry was read (the
 * first EVENTS, default 100000), and write them to FILE when it closes.
 *
 * Not thread-safe: one thread at a time per session (UCX calls under the
 * worker's lock).
 */
#ifndef RVT_CLIENT_SESSION_H
#define RVT_CLIENT_SESSION_H

#include "uct/ib/rvt/client/attach.h"
#include "uct/ib/rvt/client/registration.h"
#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/common/ring.h"
#include "uct/ib/rvt/common/trace.h"
#include "uct/ib/rvt/common/work.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace rvt::client {

enum class post_status {
    posted, /* in the ring: a completion will follow */
    busy, /* ring or completion budget full: nothing happened, retry */
};

/* An inbound entry and, for an active message, its bytes (valid until
 * release_inbound()). */
struct inbound_view {
    inbound_message msg;
    std::span<const std::byte> data; /* am only */
};

class session {
public:
    static result<std::unique_ptr<session>> open(attachment at);
    ~session();

    session(const session &)            = delete;
    session &operator=(const session &) = delete;

    uint32_t client_index() const
    {
        return m_at.client_index;
    }
    /* This process's agent, as peers must name it. */
    const wire::agent_address &agent_address() const
    {
        return m_at.address;
    }
    uint32_t num_qps() const
    {
        return m_at.num_qps;
    }
    /* Largest active message (header + payload) a send_am may carry. */
    uint32_t max_am_size() const
    {
        return m_at.max_am_size;
    }
    uint32_t path_mtu() const
    {
        return m_at.path_mtu;
    }
    const attachment &attached() const
    {
        return m_at;
    }

    /* Asks the agent for the peer index of `remote` (this node's own agent
     * included); the connection is made in the background. Synchronous:
     * one round trip on the agent's socket. */
    result<uint32_t> connect_peer(const wire::agent_address &remote,
                                  std::chrono::milliseconds timeout =
                                          std::chrono::milliseconds(10000));

    /* See client::register_memory (registration.h); `wait`: for the
     * agent's verdict on the MR. */
    result<memory_region> register_memory(
            void *addr, size_t length, int access,
            std::chrono::milliseconds wait = std::chrono::milliseconds(10000));
    /* See client::announce_memory (registration.h). */
    result<wire::mr_registered_reply> announce_memory(
            const memory_region &mr,
            std::chrono::milliseconds wait = std::chrono::milliseconds(10000));
    /* See client::deregister_memory (registration.h). */
    result<uint32_t>
    deregister_memory(const memory_region &mr,
                      std::optional<std::chrono::milliseconds> wait = {});

    /* The agent is gone: drops this process's hold on its verbs context
     * (the command fd, an imported PD). Every client holds one, and the
     * kernel keeps a dead agent's QPs alive, answering its peers at the
     * transport level, until the last hold goes. Registering fails after
     * this; deregistering succeeds at once (the MRs go with the context). */
    void release_agent_context();

    /* Retires this attachment's address, which then reaches nobody (the
     * agent announces its departure to its senders), while the
     * attachment stays for registering; returns once the agent says it
     * is done, within `wait`. For a memory domain's leader whose
     * interface closes (attach_wire.h, retire_address): nothing may read
     * these rings afterwards. */
    result<done> retire_address(std::chrono::milliseconds wait);

    /* Ends the attachment, waiting at most `wait` for the agent to have
     * let it go (client::leave); the session may only be destroyed then. */
    bool leave(std::chrono::milliseconds wait)
    {
        return client::leave(m_at, wait);
    }

    /* Asks the agent for an inbound `write` entry per RDMA WRITE WITH
     * IMM into this process (off after attach: see shm_doorbells). */
    void set_write_notices(bool on)
    {
        m_doorbells->write_notices.store(on ? 1 : 0, std::memory_order_relaxed);
    }

    /* The request is copied into the work ring. */
    post_status post(const work_request &wr);

    /* Largest payload of an inline request: the work-data slot. */
    uint32_t max_inline() const
    {
        return m_at.layout.caps.inline_size;
    }
    /* Inline requests (work.h, work_inline). inline_slot(): the work-data
     * slot of the next post, max_inline() bytes, or nullptr when a post
     * now would be `busy`. Write the payload there, then post() the
     * request with work_inline set before anything else is posted: the
     * slot belongs to the ring position that post fills. */
    std::byte *inline_slot();
    /* Both steps: copies `payload` into the slot and posts `wr` with
     * work_inline, its length payload.size() and no local memory. A
     * payload over max_inline() is not copied past the slot: the agent
     * refuses the request (`invalid`). */
    post_status
    post_inline(const work_request &wr, std::span<const std::byte> payload);

    /* Copies out up to out.size() completions; returns how many. */
    size_t poll_completions(std::span<completion> out);

    /* The oldest inbound entry, if any; it stays the oldest (and its data
     * valid) until release_inbound(). */
    bool peek_inbound(inbound_view &out);
    void release_inbound();

    /* Requests posted and not yet completed. */
    uint32_t outstanding() const
    {
        return m_outstanding;
    }
    /* False once a ring index from the agent was impossible: the session
     * is unusable (the agent is broken or gone). */
    bool healthy() const
    {
        return m_healthy;
    }

    /* Spins for `spin`, then sleeps on the session's eventfd until the
     * agent publishes something or `timeout` passes. Returns true when a
     * completion or inbound entry is waiting. */
    bool wait(std::chrono::microseconds timeout,
              std::chrono::microseconds spin = std::chrono::microseconds(50));

    /* Readable when the agent has woken us (for UCX's event fd support):
     * call arm() first, then poll it, then disarm() after waking. */
    int event_fd() const
    {
        return m_at.client_wake_fd.get();
    }
    /* Announces that we are about to sleep. Returns false if something is
     * already waiting (then do not sleep). */
    bool arm();
    void disarm();

private:
    explicit session(attachment at);
    bool has_events();
    void wake_agent();

    void traced(trace_stage stage, uint64_t key, uint64_t ns = 0)
    {
        if (m_trace) [[unlikely]] {
            m_trace->record(stage, m_at.client_index, key,
                            ns != 0 ? ns : trace_now());
        }
    }

    attachment m_at;
    std::unique_ptr<trace> m_trace; /* off: empty */
    std::string m_trace_path;
    shm_doorbells *m_doorbells;
    work_summary_line *m_summary; /* the agent's (work_summary.h) */
    ring_producer<work_request> m_work;
    std::byte *m_work_data;
    ring_consumer<completion> m_completions;
    ring_consumer<inbound_message> m_inbound;
    const std::byte *m_inbound_data;
    uint32_t m_outstanding = 0;
    bool m_healthy         = true;
    bool m_peeked          = false;
};

} // namespace rvt::client

#endif
