/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The chaos client's run (rvt_chaos_client.cc; test/testbed/chaos_guest.py):
 * its options, what it keeps of every other client, and the runner.
 */
#ifndef RVT_TEST_CHAOS_RUNNER_H
#define RVT_TEST_CHAOS_RUNNER_H

#include "chaos_protocol.h"
#include "traffic_common.h"

#include "uct/ib/rvt/client/session.h"
#include "uct/ib/rvt/common/work.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace rvt::test::chaos {

using std::chrono::milliseconds;
using std::chrono::seconds;
using traffic::clock_type;
using traffic::die;

/* rvt_chaos_client --dir=DIR --id=ID --clients=N --until=EPOCH
 *     [--incarnation=INC] [--size=BYTES] [--window=S] */
struct options : traffic::job_options {
    int64_t until        = 0; /* Unix seconds */
    uint32_t incarnation = 0;
    uint32_t window      = 4;
};

/*
 * How the chaos client runs. Every process sends rounds to every other
 * client until the deadline; a round to a destination is an RDMA WRITE WITH IMM
 * into one of the S (--window) slots the destination keeps for this
 * sender (two sets: for its odd and its even incarnations, so that a
 * killed process's last writes never land where its replacement writes),
 * then an active message naming the round. Meanwhile peers die and are
 * replaced, links go down and processes are stopped, so:
 *
 *   - Every arrival is verified on its own. A write's length names its
 *     slot and the parity of its sender's incarnation (--size less 64
 *     bytes per slot number, and per window if odd), and the slot starts
 *     with a header (source, destination, both incarnations, round)
 *     followed by bytes computed from all of those; an AM carries the
 *     same fields and a fill computed from them. The sender the agent
 *     reports (its peer and the sender's client index there, the write's
 *     immediate) must be the one the header names, the round must belong
 *     to the slot, and one sender's rounds must increase. Any mismatch is
 *     a corrupt or misdirected arrival: printed at once ("client: BAD
 *     ARRIVAL: ...") and counted.
 *   - A slot is written again only once its destination is done with it:
 *     the destination acknowledges each round's AM (an `ack` AM back),
 *     which it reads after that round's write (one endpoint: RC order), so
 *     by then every write notice up to that round has been checked or will
 *     never come. A sender whose S slots all wait asks with a `ping` after
 *     a second without an ack. So a slot is never checked while the next
 *     round overwrites it.
 *   - Every op completes, ok or failed; failures are counted by kind
 *     (destination gone, flushed, retries exceeded, other) and never
 *     retried. A destination reported gone (client_gone) is left alone
 *     until its card changes (its replacement's DIR/card.ID.INC, higher
 *     INC); one whose node's agent was given up (peer_failed) is asked for
 *     again after 0.5 s. Cards are read again every second.
 *   - At the deadline it stops sending and waits for every op's
 *     completion (one still missing after 60 s is a hang:
 *     "never_completed"); then it sends each destination a `fin` AM
 *     saying what it posted to it and what completed ok, and waits for
 *     every other client's fin. A fin travels behind all of its sender's
 *     writes and AMs to us, so then all that will ever arrive from it has:
 *     every op that completed ok at its sender must have been verified
 *     here (else "lost"), and no more than it posted (else "duplicate").
 *
 * Every wait is bounded: the other clients' first cards (120 s), the
 * drain (60 s), the fins (60 s); the agent's connect_peer (20 s, longer
 * than any stop the driver makes: an earlier timeout would leave its
 * answer on the socket for the next request). A progress line every 5 s,
 * then one summary line, "CHAOS id=.. inc=.. ops_ok=.. ..." (key=value,
 * for chaos_guest.py).
 */

/* Another client as a destination of ours. */
struct dest {
    bool known = false; /* a card has been read */
    card c{};
    uint32_t peer = 0; /* its agent, as ours numbers it */
    bool alive    = false; /* we send to it */
    bool gone     = false; /* its agent said it left (client_gone) */
    clock_type::time_point retry_at{}; /* when not alive: look again */
    uint64_t next_round = 0;
    int64_t acked       = -1; /* the highest round it acknowledged */
    bool am_pending     = false; /* round next_round - 1's AM unposted */
    bool ping_in_flight = false;
    clock_type::time_point last_heard{}, last_ping{};
    /* ops to this incarnation of it, for our fin */
    uint64_t posted_writes = 0, ok_writes = 0, posted_ams = 0, ok_ams = 0;
    /* the ack we owe it */
    uint64_t ack_round = 0;
    bool ack_due = false, ack_in_flight = false;
    /* our send slots towards it (any incarnation): a write from it is in
     * flight */
    std::vector<bool> slot_busy;
};

/* What arrived from one incarnation of another client. */
struct source {
    int64_t last_write = -1, last_am = -1;
    uint64_t writes = 0, ams = 0;
    bool fin = false;
    message fin_msg{};
};

struct op_record {
    uint32_t dst;
    uint32_t dst_inc;
    kind what;
    uint32_t slot;
};

using id_inc = std::pair<uint32_t, uint32_t>;

class runner {
public:
    runner(const options &o, client::session &s) : m_o(o), m_s(s)
    {
    }
    /* the run, to its summary line: 0 when nothing was corrupt, lost,
     * duplicated or left without a completion, else 1 */
    int run();

private:
    /* How the run ended, for the summary line. */
    struct ending {
        uint64_t never_completed = 0;
        uint64_t fins_sent = 0, fins_failed = 0, fins_missing = 0;
        uint64_t pairs = 0, lost = 0, duplicate = 0;
    };

    /* the steps of run() (chaos_runner.cc) */
    void start();
    clock_type::time_point deadline() const;
    void wait_for_cards();
    void send_until(clock_type::time_point until);
    uint64_t drain();
    uint64_t send_fins();
    uint64_t fins_missing();
    void wait_for_fins();
    void check_fins(ending &e);
    int summary(const ending &e) const;

    void publish_card();
    void scan_cards();
    uint32_t peer_of(const wire::agent_address &a, bool fresh = false);
    void switch_dest(uint32_t id, const card &c);
    void post_work();
    bool post_write(uint32_t id);
    bool post_message(uint32_t id, kind what, uint64_t round);
    size_t poll();
    void tick();
    /* the arrivals, each checked (chaos_checks.cc) */
    bool inbound();
    void check_write(const inbound_message &m);
    std::string
    check_slot(uint32_t src, uint32_t src_inc, uint32_t slot, uint32_t length);
    void check_am(const client::inbound_view &v);
    void bad(const std::string &why);
    /* one pass: post (while running), completions, arrivals, timers */
    void pump();
    std::string counts() const;

    uint8_t *recv_slot(uint32_t src, uint32_t src_inc, uint32_t slot)
    {
        return m_recv.data() +
               ((size_t{src} * 2 + src_inc % 2) * m_o.window + slot) * m_o.size;
    }
    uint8_t *send_slot(uint32_t dst, uint32_t slot)
    {
        return m_send.data() + (size_t{dst} * m_o.window + slot) * m_o.size;
    }
    /* a write's length: --size less a step per slot, and per window for
     * an odd incarnation of its sender (above) */
    uint32_t length_of(uint64_t round, uint32_t src_inc) const
    {
        return m_o.size -
               length_step * static_cast<uint32_t>(round % m_o.window +
                                                   src_inc % 2 * m_o.window);
    }

    const options &m_o;
    client::session &m_s;
    std::vector<uint8_t> m_recv, m_send;
    client::memory_region m_recv_mr{}, m_send_mr{};
    uint8_t m_generation = 0;
    bool m_running       = true;

    std::map<id_inc, card> m_cards;
    std::set<std::string> m_card_files;
    std::map<uint32_t, uint32_t> m_latest; /* id -> highest incarnation */
    /* (peer, client index) -> the cards that had it */
    std::map<std::pair<uint32_t, uint32_t>, std::vector<id_inc>> m_routes;
    std::map<uint64_t, uint32_t> m_peers; /* agent id -> peer index */
    std::vector<dest> m_dests;
    std::map<id_inc, source> m_sources;
    std::map<uint64_t, op_record> m_in_flight;
    uint64_t m_next_wr = 1;
    size_t m_rotate    = 0;

    /* figures */
    uint64_t m_ok = 0, m_failed = 0, m_failed_gone = 0, m_failed_flushed = 0,
             m_failed_retries = 0, m_failed_other = 0;
    uint64_t m_writes = 0, m_ams = 0, m_controls = 0, m_bad = 0;
    uint64_t m_gone_notices = 0, m_peer_failures = 0, m_restarts = 0;
    clock_type::time_point m_last_scan{}, m_last_progress{}, m_start{};
};

} // namespace rvt::test::chaos

#endif
