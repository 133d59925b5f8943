/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * far_agent: a remote node's agent as one agent (the hub) meets it, and
 * nothing more: its own loopback nic on the hub's fabric, the real
 * handshake (peer_connection, the credential of peer_auth, the datagrams
 * of conn_wire) towards the hub alone, K RC QPs connected to the hub's,
 * keepalives both ways, and a node that dies or restarts. No engine, no
 * clients, no attach server: light enough for ten thousand of them beside
 * one real agent (test/bench/rvt_hub_sim.cc), where a real engine per
 * remote node would not fit this host.
 *
 * Where it is lighter than an engine, and what the hub cannot tell:
 *   - its nic has 16 receive buffers of 64 bytes: the hub sends a peer
 *     nothing but control messages (keepalive, pause, resume,
 *     client_gone), each the 16-byte control buffer;
 *   - it answers the hub and no one else (a datagram from any other
 *     sender is dropped, counted);
 *   - its QPs are made when it is (and after a restart), not when the
 *     handshake asks for them: the heap the hub's storm adds is the hub's;
 *   - a drain ends as soon as the flush is posted (it has no client op to
 *     report): its flushes complete at once on the loopback nic anyway.
 *
 * Events the caller drives, one thread, as the engine's:
 *   connect(now)   its client wants the hub (as a rank's first message)
 *   pump(now)      datagrams, completions, then the timer if it is due
 *   die()          the node is gone: its nic leaves the fabric (every WR
 *                  to its QPs fails with IBV_WC_RETRY_EXC_ERR, datagrams
 *                  to it are lost); nothing is said to the hub
 *   restart(now)   the node's agent runs again: a new instance id, new
 *                  QPs, the old ones gone without a word, and it asks for
 *                  the hub at once (its clients had been talking to it)
 */
#ifndef RVT_TEST_FAR_AGENT_H
#define RVT_TEST_FAR_AGENT_H

#include "test/loopback/loopback_nic.h"
#include "uct/ib/rvt/agent/peers/peer_auth.h"
#include "uct/ib/rvt/agent/peers/peer_connection.h"
#include "uct/ib/rvt/common/conn_wire.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rvt::agent::testing {

struct far_agent_options {
    std::string job_key;
    uint64_t instance_id = 1; /* never 0; restart() takes the next one */
    peer_config peers; /* K and the am size must be the hub's */
    std::unique_ptr<peer_auth> auth; /* the hub's kind */
};

struct far_counters {
    uint64_t datagrams_sent      = 0; /* lost ones included */
    uint64_t datagrams_lost      = 0; /* the hub's queue was full */
    uint64_t datagrams_foreign   = 0; /* not from the hub: dropped */
    uint64_t datagrams_refused   = 0; /* malformed or failed the credential */
    uint64_t keepalives_received = 0; /* control receives from the hub */
    uint64_t keepalives_sent     = 0;
    uint64_t send_errors         = 0; /* completions with error status */
};

class far_agent {
public:
    /* `hub`: the address the hub's clients give (wire::agent_address). */
    far_agent(loopback_fabric &fabric, const wire::agent_address &hub,
              far_agent_options o);

    /* What the hub's clients name it by (a dead node's: what it was). */
    const wire::agent_address &address() const
    {
        return m_address;
    }

    void connect(time_point now);
    void pump(time_point now);
    void die();
    void restart(time_point now);

    bool alive() const
    {
        return m_nic != nullptr;
    }
    peer_state state() const
    {
        return m_conn->state();
    }
    std::optional<time_point> next_timer() const;
    const far_counters &counters() const
    {
        return m_counters;
    }
    /* The reason of the last report_peer_failed, if any. */
    const std::string &failed_why() const
    {
        return m_failed_why;
    }

private:
    void make_qps();
    void note_address();
    void run(const actions &acts, time_point now);
    void take_datagram(std::span<const std::byte> bytes,
                       const datagram_source &from, time_point now);
    void take_completions(time_point now);
    void post_keepalive();

    loopback_fabric &m_fabric;
    wire::agent_address m_hub;
    far_agent_options m_o;
    std::unique_ptr<loopback_nic> m_nic;
    std::unique_ptr<peer_connection> m_conn;
    wire::agent_address m_address{};
    /* made ahead (see the top); handed to create_qps */
    std::vector<wire::conn::qp_info> m_qps;
    uint64_t m_next_wr = 1;
    far_counters m_counters;
    std::string m_failed_why;
};

} // namespace rvt::agent::testing

#endif
