/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's clients as its data path sees them (engine.h): a record per
 * client index (its channel, generation and counters), which indices are
 * attached, which a pass visits and which channels it serves ("Which
 * clients a pass visits" below), and the agent's sleep as the clients see
 * it.
 *
 * A state machine, as lanes and mr_registry are: no nic, no clock, no
 * socket. It owns the records and their channels (client_channel, the
 * agent's end of a client's shared segment) and decides which clients
 * the engine visits and when a channel is flushed, published, woken or
 * told the agent sleeps. The engine does what only it knows: taking a
 * client's work (from each client to_visit() names, then visited()),
 * checking for pauses
 * and posting between flush_given() and wake_given(), the MRs, shares,
 * departures and peers of a client that attaches or leaves.
 *
 * Which clients a pass visits: none that has nothing to do, so that an
 * agent with 512 attached ranks, most of them computing, passes as fast
 * as one with 8. A pass takes work from the clients whose bits it finds
 * in the work summary (common/work_summary.h: a page every client maps,
 * where a client sets its bit after it posts) and from those it left
 * work for last pass (`again`: over work_batch, or waiting for their
 * socket or their completion budget); it flushes, checks for pauses and
 * publishes the channels that were given something (client_channel puts
 * its index in `given`) or still hold a backlog or a pause. Every
 * full_scan_period (engine_config) it also looks at every attached
 * client's work ring, whatever the summary says: a client can clear other
 * clients' bits, and so delay their work by up to that period, never
 * lose it (status "scan_found" counts the work only the scan found).
 *
 * What holds:
 *   - attached() is, ascending, exactly the indices whose record says
 *     attached, and those are the records with a channel;
 *   - `again` and `given` name attached clients only (a detach erases
 *     its index from both);
 *   - a client with work in its ring is visited within one
 *     full_scan_period, whatever the summary says;
 *   - while asleep() every attached channel says the agent sleeps, and
 *     no channel says so while it is awake.
 *
 * Events -> what happens (i: a client index, c: its record):
 *
 *   attach(a)         c reset (counters zero, not paused), who from a (a
 *                     is the holder of i: its generation is
 *                     generation(i)); a channel on a's segment, which puts i
 *                     in `given` when it is given something; i into
 *                     `again` (what it posted before: next pass) and into
 *                     attached(), sorted; asleep -> the channel is told
 *   retire(i)         attached -> c retired: its address reaches nobody
 *                     (the engine drops what comes for it, as for a
 *                     departed client, and never pauses it); it stays
 *                     attached, visited and published (its ops in flight
 *                     complete into its rings); not attached -> nothing.
 *                     The next attach of i is not retired
 *   detach(i)         c not attached, no channel, no who; i out of
 *                     attached(), `again` and `given`; its generation and
 *                     counters stay until the next attach (ops of it still
 *                     complete)
 *   to_visit(now, s)  returned: `again` (emptied), plus, when the full
 *                     scan is due (now >= next scan), every attached
 *                     client with work (one whose bit is not set in s:
 *                     scan_found+1; next scan = now + full_scan_period),
 *                     plus every bit set in s (cleared); not attached ->
 *                     left out (a bit set for an index not in use)
 *   visited(i)        (after the engine took i's work) work left in its
 *                     ring -> into `again`
 *   publish_given()   every attached channel in `given` shows what it
 *                     staged (no wake: the middle of a pass)
 *   flush_given()     `given` (emptied) returned, its attached channels'
 *                     backlogs flushed into their rings
 *   wake_given(g)     g plus `given` (emptied): every attached channel
 *                     published and woken; one with a backlog or paused
 *                     -> back into `given`
 *   fall_asleep()     asleep; every attached channel told; then each
 *                     looked at once more: work -> `again`, backlog ->
 *                     `given`; true when any had either
 *   wake_up()         not asleep -> false; else awake, every attached
 *                     channel told, true
 */
#ifndef RVT_AGENT_CLIENT_TABLE_H
#define RVT_AGENT_CLIENT_TABLE_H

#include "uct/ib/rvt/agent/attach/client_channel.h"
#include "uct/ib/rvt/agent/attach/client_indices.h"
#include "uct/ib/rvt/agent/attach/client_set.h"
#include "uct/ib/rvt/common/shm_layout.h"
#include "uct/ib/rvt/common/work_summary.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace rvt::agent {

struct attached_client; /* attach_server.h */

class client_table {
public:
    using time_point = std::chrono::steady_clock::time_point;

    /* One client index's record. */
    struct client_state {
        std::unique_ptr<client_channel> channel;
        bool attached           = false;
        uint64_t ops            = 0;
        uint64_t bytes          = 0;
        uint64_t invalid        = 0;
        uint64_t am_in          = 0;
        uint64_t writes_in      = 0;
        uint64_t write_bytes_in = 0; /* RDMA WRITE WITH IMM into it */
        uint32_t posted         = 0; /* ops of this generation on a QP */
        bool paused             = false; /* peers told to pause sending to it */
        bool corrupt = false; /* its ring is broken: detach asked for */
        /* its address is gone, the attachment stays (retire) */
        bool retired = false;
        /* the attach server's record of it (stable while attached: the
         * server detaches it only through client_gone) */
        const attached_client *who = nullptr;
    };

    struct counters {
        /* work the full scan found that no summary bit announced */
        uint64_t scan_found = 0;
    };

    /* `layout`: every client's segment's (the agent's shm_layout). */
    client_table(const shm_layout &layout,
                 std::chrono::microseconds full_scan_period);
    /* Where the generations are (the attach server's client_indices),
     * before the first attach. */
    void read_generations_from(const client_indices &indices)
    {
        m_indices = &indices;
    }

    client_state &operator[](uint32_t index)
    {
        return m_clients[index];
    }
    const client_state &operator[](uint32_t index) const
    {
        return m_clients[index];
    }
    /* The generation at `index` (client_indices): its client's while
     * attached, its last client's after, until the index is given again;
     * what tells an op or a message of that client from one of an earlier
     * or later holder of the index. */
    uint32_t generation(uint32_t index) const
    {
        return m_indices->generation(index);
    }
    /* the attached clients' indices, ascending */
    const std::vector<uint32_t> &attached() const
    {
        return m_attached;
    }
    /* attached, and work waits in its ring */
    bool has_work(uint32_t index) const
    {
        const client_state &c = m_clients[index];
        return c.attached && c.channel && c.channel->has_work();
    }
    bool asleep() const
    {
        return m_asleep;
    }
    const counters &totals() const
    {
        return m_totals;
    }

    /* The events (the table above). `a` must stay where it is while
     * attached (the attach server's record). */
    client_state &attach(const attached_client &a);
    void retire(uint32_t index);
    void detach(uint32_t index);

    /* A pass at `now`: the attached clients it visits. The engine takes
     * each one's work, then calls visited(). Clients attach and detach
     * only in the attach server's run_once(), never during a pass, so the
     * clients named here stay attached. */
    client_set to_visit(time_point now, work_summary_line *summary);
    void visited(uint32_t index)
    {
        if (m_clients[index].channel->has_work()) {
            m_again.insert(index);
        }
    }

    void publish_given();
    client_set flush_given();
    void wake_given(client_set given);

    bool fall_asleep();
    bool wake_up();

private:
    /* calls f(index, record) for every attached client in `set` */
    template<class F> void each_attached(const client_set &set, F &&f)
    {
        set.for_each([&](uint32_t i) {
            if (m_clients[i].attached) {
                f(i, m_clients[i]);
            }
        });
    }

    shm_layout m_layout;
    std::chrono::microseconds m_full_scan_period;
    const client_indices *m_indices = nullptr;
    std::vector<client_state> m_clients; /* by index */
    std::vector<uint32_t> m_attached; /* indices of attached clients, sorted */
    client_set m_again; /* work left in their rings last pass */
    client_set m_given; /* to flush, check for pauses and publish */
    time_point m_next_scan{}; /* the full scan is due */
    bool m_asleep = false;
    counters m_totals;
};

} // namespace rvt::agent

#endif
