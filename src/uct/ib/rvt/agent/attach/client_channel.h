/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's end of one client's shared segment (common/shm_layout.h):
 * it consumes the client's work ring, produces its completion and inbound
 * rings, and rings its doorbell. Nothing here trusts the segment: indices
 * are checked by the rings, and what cannot be delivered now (the client
 * is slow, or broke the completion budget) waits in agent memory, in
 * order, so a slow client never holds the node's receive buffers and
 * never loses a message.
 */
#ifndef RVT_AGENT_CLIENT_CHANNEL_H
#define RVT_AGENT_CLIENT_CHANNEL_H

#include "uct/ib/rvt/agent/attach/client_set.h"
#include "uct/ib/rvt/common/ring.h"
#include "uct/ib/rvt/common/shm_layout.h"
#include "uct/ib/rvt/common/shm_mapping.h"
#include "uct/ib/rvt/common/work.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace rvt::agent {

class client_channel {
public:
    /* `shm` is the agent's mapping of the client's segment, formatted.
     * complete() and deliver() put `index` into `given` (if any): the
     * engine's list of channels to flush and publish this pass. */
    client_channel(const shm_mapping &shm, const shm_layout &layout,
                   int wake_fd, client_set *given = nullptr,
                   uint32_t index = 0);

    client_channel(const client_channel &)            = delete;
    client_channel &operator=(const client_channel &) = delete;

    /* The next work request, if any (copied out: validate the copy). Its
     * ring position and work-data slot stay the agent's until
     * release_work(), which must follow a true before the next peek. */
    bool peek_work(work_request &out);
    /* Copies the first into.size() bytes (at most a slot) of the peeked
     * request's work-data slot into `into` (shm_layout.h: the payload of
     * a work_inline request), then gives the position back to the client,
     * which may reuse entry and slot from then on. */
    void release_work(std::span<std::byte> into = {});
    /* peek_work and release_work, copying no data. */
    bool pop_work(work_request &out);
    bool has_work() const;

    void complete(const completion &c);
    /* Copies `data` (at most the slot size) into the inbound area. */
    void deliver(const inbound_message &msg, std::span<const std::byte> data);
    /* Moves waiting entries into the rings as space allows. */
    void flush_backlog();
    size_t late_completions() const
    {
        return m_late_completions.size();
    }
    size_t backlog() const
    {
        return m_late_completions.size() + m_late_inbound.size();
    }
    /* Inbound entries waiting in agent memory for room in the ring, and
     * their bytes (what back-pressure bounds: engine.h). */
    size_t inbound_waiting() const
    {
        return m_late_inbound.size();
    }
    size_t inbound_waiting_bytes() const
    {
        return m_late_inbound_bytes;
    }

    /* complete() and deliver() only stage their entries: this shows the
     * client everything staged since the last call (one store of each
     * ring's head, so the head's cache line crosses once per batch) and
     * wakes the client if it sleeps. */
    void publish_and_wake();
    /* The publication alone, without the fence and the look at the
     * client's sleep flag: for the middle of a pass, whose end calls
     * publish_and_wake() (that fence orders this store too). */
    void publish()
    {
        m_completions.publish();
        m_inbound.publish();
    }
    void set_agent_asleep(bool asleep);
    /* The client asked for inbound `write` entries (shm_doorbells). */
    bool wants_write_notices() const
    {
        return m_bells->write_notices.load(std::memory_order_relaxed) != 0;
    }

    /* False once the client corrupted a ring index: the agent stops
     * reading its work (its rings can no longer be trusted). */
    bool healthy() const
    {
        return m_healthy;
    }

private:
    struct late_inbound {
        inbound_message msg;
        std::vector<std::byte> data;
    };
    bool
    push_inbound(const inbound_message &msg, std::span<const std::byte> data);

    shm_doorbells *m_bells;
    ring_consumer<work_request> m_work;
    std::byte *m_work_data;
    uint32_t m_inline_size;
    ring_producer<completion> m_completions;
    ring_producer<inbound_message> m_inbound;
    std::byte *m_inbound_data;
    uint32_t m_slot_size;
    int m_wake_fd;
    client_set *m_given;
    uint32_t m_index;
    std::deque<completion> m_late_completions;
    std::deque<late_inbound> m_late_inbound;
    size_t m_late_inbound_bytes = 0;
    bool m_gave    = false; /* something published since the last wake */
    bool m_healthy = true;
};

} // namespace rvt::agent

#endif
