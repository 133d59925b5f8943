/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's data path: everything between the clients' rings and the
 * device. The engine is the executor beside the pure state machines
 * (lanes, peer_table, client_table, mr_registry, departures,
 * departure_barrier, sender_gate, client_share, peer_connection): it
 * feeds them what the nic, the clock and the attach server say, and does
 * what they answer.
 *
 *   clients' work rings --pop, check--> lane backlogs --post--> shared QPs
 *   CQ --op completions--> the owning client's completion ring
 *   CQ --receives (SRQ)--> routed by immediate --> client's inbound ring
 *   UD QP <--handshake--> peer_connection (one per remote agent)
 *
 * Where each rule lives (the header that owns it; the part that explains):
 * Peers and lanes: peer_table.h, lanes.h; docs/design.md part 4.
 * Inline requests: lanes.h, op_record::inline_data; docs/design.md part 4.
 * Credits: lanes.h, "Credits"; docs/design.md part 4.
 * Back-pressure: lanes.h (pause, resume); docs/design.md part 4.
 * Failures: peer_connection.h; docs/design.md part 6.
 * Silent QPs: lanes.h (watch, give_up), engine_tags.h; docs/design.md part 6.
 * Dead clients: mr_registry.h, "Intents" too; docs/design.md part 3.
 * Departed clients: departures.h, attach_server.h (generations), imm.h;
 *   docs/design.md part 4. A retirement is answered once the peers told
 *   of it have heard: departure_barrier.h.
 * Hostile handshakes: peer_table.h, "Half-open"; docs/design.md part 6.
 * Bounded intake: sender_gate.h; docs/design.md part 6.
 * Shares: client_share.h, attach_server.h (max_socket_read,
 *   max_siblings); docs/design.md part 4.
 * Which clients a pass visits: client_table.h, "Which clients a pass visits".
 * Log lines: each line a client can cause (an invalid request, a refusal,
 *   a pause, an MR notice's note, a departure heard of) is logged at the
 *   1st, 2nd, 4th, ... time of its kind (format.h, worth_logging), with
 *   its count; docs/operations.md, "The agent's log".
 * Striping: lanes.h, "Striping"; docs/design.md part 4.
 * Single-threaded: rvtd's loop calls progress(), and sleeps between calls
 * when prepare_sleep() allows (serve_loop.h).
 */
#ifndef RVT_AGENT_ENGINE_H
#define RVT_AGENT_ENGINE_H

#include "uct/ib/rvt/agent/attach/attach_server.h"
#include "uct/ib/rvt/agent/attach/client_channel.h"
#include "uct/ib/rvt/agent/attach/client_table.h"
#include "uct/ib/rvt/agent/device/nic.h"
#include "uct/ib/rvt/agent/engine/client_share.h"
#include "uct/ib/rvt/agent/engine/departure_barrier.h"
#include "uct/ib/rvt/agent/engine/departures.h"
#include "uct/ib/rvt/agent/engine/lanes.h"
#include "uct/ib/rvt/agent/engine/mr_registry.h"
#include "uct/ib/rvt/agent/peers/peer_auth.h"
#include "uct/ib/rvt/agent/peers/peer_connection.h"
#include "uct/ib/rvt/agent/peers/peer_table.h"
#include "uct/ib/rvt/agent/peers/peer_timers.h"
#include "uct/ib/rvt/agent/peers/sender_gate.h"
#include "uct/ib/rvt/common/format.h"
#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/common/trace.h"
#include "uct/ib/rvt/common/unique_fd.h"
#include "uct/ib/rvt/common/shm_mapping.h"
#include "uct/ib/rvt/common/status_fields.h"
#include "uct/ib/rvt/common/work.h"
#include "uct/ib/rvt/common/work_summary.h"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <bitset>
#include <cstddef>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace rvt::agent {

/* engine_config::departure_memory's default. A sender must forget that
 * (index, generation) departed before that pair can be attached again, or
 * it would fail the new holder: the generation wraps after max_generations
 * attaches of one index, each at least an index quarantine after the last. */
inline constexpr std::chrono::milliseconds default_departure_memory{60000};
static_assert(default_departure_memory <
                      default_index_quarantine * (imm::max_generations - 1),
              "a departure must be forgotten before its generation returns");

struct engine_config {
    peer_config peers; /* K, handshake and keepalive timing */
    uint32_t max_peers = default_max_peers; /* client_share.h */
    std::chrono::milliseconds dead_client_grace{2000};
    /* how often watch_lanes() looks ("Silent QPs" above); a lane is
     * suspect after one whole period with WRs posted and none retired */
    std::chrono::milliseconds lane_watch_period{1000};
    /* back-pressure ("Back-pressure" above): a client is paused when the
     * inbound entries waiting for room in its ring reach either bound,
     * and resumed when they are down to half of both */
    uint32_t pause_messages = 1024;
    uint64_t pause_bytes    = uint64_t{8} << 20;
    /* how long a departed client is remembered, on both ends
     * ("Departed clients" above, departures.h) */
    std::chrono::milliseconds departure_memory = default_departure_memory;
    /* how long a retirement waits for the peers told of it to say they
     * heard (departure_barrier.h): well within the client's own wait for
     * the answer (uct/agent_link.h, leave_wait) */
    std::chrono::milliseconds departure_wait{500};
    /* peers made for requests from new addresses and not yet confirmed
     * ("Hostile handshakes" above) */
    uint32_t max_half_open = 64;
    /* keepalives a second the agent plans for at most: with more peers
     * than keepalive_rate x peers.keepalive_interval, each idle peer's
     * keepalive comes every peers / keepalive_rate seconds instead
     * (keepalive_interval()), so that an idle agent's cost stops growing
     * with the job (docs/performance.md) */
    uint32_t keepalive_rate = 500;
    /* peers whose QPs hold the nic's sq_depth() send WRs; the others'
     * hold shallow_sq_depth (peer_table.h, "Send depths") */
    uint32_t deep_peers       = default_deep_peers;
    uint32_t shallow_sq_depth = default_shallow_sq_depth;
    /* what the agent holds for one client ("Shares" above) */
    share_limits share;
    /* how often a pass looks at every client's work ring (client_table.h,
     * "Which clients a pass visits") */
    std::chrono::microseconds full_scan_period{1000};
    /* handshake datagrams handled per pass ("Bounded intake" above) */
    uint32_t datagrams_per_pass = 16;
    /* credential checks per sender and per pass (sender_gate.h); its
     * refill is lowered to peers.retry_interval */
    sender_gate_config senders;
};

/* The idle time before a keepalive for an agent with `peers` peer
 * records (engine_config::keepalive_rate). */
std::chrono::milliseconds
keepalive_interval_for(const engine_config &cfg, size_t peers);

/* A GID as text (IPv6 notation), for logs and the status. */
std::string gid_text(std::span<const uint8_t, 16> gid);

class engine {
public:
    /* Everything the engine asks of the device goes through `n` (nic.h),
     * which must outlive the engine. */
    static result<std::unique_ptr<engine>>
    create(nic &n, const engine_config &cfg, const shm_layout &layout,
           std::string job_key, uint64_t agent_id,
           std::unique_ptr<peer_auth> auth, log_fn log);
    ~engine();

    /* This agent as peers and clients name it. */
    wire::agent_address address() const;
    uint32_t num_qps() const
    {
        return m_cfg.peers.num_qps;
    }
    /* Whether peers must prove they belong to the job (--auth is not
     * none): clients are told when not (attach_wire.h,
     * agent_feature_unauthenticated). */
    bool authenticates_peers() const
    {
        return m_auth->kind() != wire::conn::auth_kind::none;
    }
    /* The eventfd clients write to wake the agent. */
    int wake_fd() const
    {
        return m_wake.get();
    }
    /* The work summary's memfd (common/work_summary.h), which every
     * client maps. */
    int work_summary_fd() const
    {
        return m_summary_segment.fd.get();
    }
    /* Readable when a CQ has an event (after prepare_sleep armed it). */
    int completion_fd() const
    {
        return m_nic.event_fd();
    }

    /* Records the data path's stages into `t` (trace.h) from now on;
     * nullptr: stop. The trace must outlive the engine or the next call. */
    void set_trace(trace *t)
    {
        m_trace = t;
    }

    /* Serves `server`'s clients from now on; the server must outlive the
     * engine. The engine drives it (serve_clients(), and the data path's
     * look at a client's socket) and acts on the events it returns
     * (attach_server.h, "Events to the owner"); the server knows nothing
     * of the engine. */
    void serve(attach_server &server);
    /* One pass over the clients' sockets (the server's run_once): acts on
     * the clients' attaches, departures, MR notices and peer requests, and
     * returns what is the agent's to answer, not the engine's: status
     * requests (answered with attach_server::answer_status). */
    attach_events serve_clients(int timeout_ms);
    /* Acts on `events` in order (client_attached, client_gone,
     * client_retired, on_mr_notice, resolve_peer answered through the
     * server); returns
     * the status requests among them. */
    attach_events act_on(attach_events events);
    void client_attached(const attached_client &c);
    void client_gone(const attached_client &c);
    /* `c` retired its address (attach_wire.h, retire_address): its
     * departure as client_gone announces it, while it stays attached;
     * answered through the server once the peers told have heard
     * (departure_barrier.h). */
    void client_retired(const attached_client &c);
    result<uint32_t>
    resolve_peer(const attached_client &c, const wire::agent_address &remote);
    /* An MR notice or release from client `c` (mr_registry.h: only the
     * agent deregisters a live client's MRs, see attach_wire.h,
     * mr_release; one that ops of the client still name stays until they
     * are done, and the release is answered then). */
    void on_mr_notice(const attached_client &c, const wire::mr_notice &notice);
    /* The clients' MRs (for the status). */
    const mr_registry &mrs() const
    {
        return m_mrs;
    }

    /* One pass over CQs, rings and timers; true if anything happened. */
    bool progress(time_point now);
    /* Whether the last progress() took work from a client or gave one
     * something (a completion, a message, a notice): what rvtd's loop
     * spins after (cpu_policy). The agent's own traffic (keepalives,
     * handshake datagrams) and its timers are not a client's work. */
    bool served_clients() const
    {
        return m_served_clients;
    }
    /* Announces sleep to clients and arms the CQs; false when something
     * arrived meanwhile (then do not sleep). After a true, call progress()
     * once more and sleep only if it found nothing (completions from
     * before the arming raise no event). */
    bool prepare_sleep();
    /* After waking (or deciding not to sleep). */
    void end_sleep();
    std::optional<time_point> next_timer() const;

    /* Nothing posted, queued or pending: safe to exit. */
    bool idle() const;
    /* What rvt-status shows, JSON or text. */
    std::string status(bool human) const;
    /* The same as JSON (rvt-status's "data_path"). */
    nlohmann::ordered_json status_json() const;
    /* The fields both are rendered from, and the metrics
     * (common/status_fields.h: status_object(status_fields()) is
     * status_json()). */
    std::vector<status_field> status_fields() const;
    /* For tests, after a pass: what does not add up in the engine's
     * books (each peer's posted ops against its lanes' posted WRs, the CQ
     * credits against the peers, each split op's parts against its
     * count), or empty. */
    std::string check_books() const;
    /* Closes every peer (disconnect datagrams) before exit. */
    void shut_down(time_point now);

private:
    static constexpr uint32_t no_client = lanes::no_client;
    using op_record                     = lanes::op_record;

    using peer = peer_table::peer;

    /* a client's record (client_table.h) */
    using client_state = client_table::client_state;

    engine(nic &n, const engine_config &cfg, const shm_layout &layout,
           std::unique_ptr<peer_auth> auth, std::string job_key,
           uint64_t agent_id, log_fn log);

    /* engine_status.cc: the status's fields (common/status_fields.h) */
    static uint64_t reconnects_of(const peer &p);
    std::vector<status_field> peer_status(const peer &p) const;
    std::vector<status_field> client_status(uint32_t i) const;

    /* engine_connect.cc: peers, QPs and the handshake */
    /* where: a fresh or recycle placement (peer_table) */
    peer &add_peer(peer_table::placement where, const wire::agent_address &addr,
                   bool loopback);
    peer *
    admit(const wire::conn::message &request, const wire::agent_address &from);
    wire::conn::sender self_sender() const;
    /* Seals `msg` (peer_auth) and sends it; a failure is logged, and the
     * handshake's retry covers it. */
    void send_sealed(wire::conn::message msg, const gid_bytes &to,
                     uint32_t ud_qpn, uint32_t ud_qkey);
    void run(peer &p, actions acts, time_point now);
    void run_one(peer &p, const action &a, time_point now);
    /* A completion or receive from `p`: its connection hears of it
     * (peer_connection::activity), the table confirms it, and its next
     * keepalive, now the interval after this, joins the due timers. */
    void heard_from(peer &p, time_point now);
    /* m_peer_timers learns `p`'s next timer (peer_timers::note). */
    void note_timer(const peer &p);
    /* run_one's longer actions */
    void create_qps(peer &p, uint32_t num_qps, time_point now);
    void connect_qps(peer &p, const action &a, time_point now);
    void flush_qps(peer &p, const action &a, time_point now);
    void peer_connected(peer &p);
    void peer_failed(peer &p, const std::string &reason);
    result<uint32_t> create_loopback_qp(peer &p, uint32_t psn);
    /* A datagram from `from` failed a check, or named another job: its
     * sender's count (sender_gate.h), and a hold logged. */
    void sender_failed(const datagram_source &from, time_point now);
    /* Whether the gate lets a datagram from `from` cost a check; what it
     * refuses is logged. */
    bool gate_admits(const datagram_source &from, bool known, time_point now);
    void on_datagram(std::span<const std::byte> bytes,
                     const datagram_source &from, time_point now);
    /* Takes up to datagrams_per_pass datagrams, while the pass's checks
     * have time left (sender_gate.h); true if any came. */
    bool take_datagrams(time_point now);
    void qp_failed(peer &p, const std::string &reason, time_point now);
    void check_drained(peer &p, time_point now);
    void destroy_all_qps(peer &p);
    void fail_backlog(peer &p, completion_status why);
    void tick_peers(time_point now);
    /* the idle time before a peer's keepalive now (keepalive_rate) */
    std::chrono::milliseconds keepalive_interval() const;

    /* engine_post.cc: work in, verbs out */
    bool take_work(uint32_t index, client_state &c);
    bool admit_work(uint32_t index, client_state &c, const work_request &wr,
                    const std::string &why);
    void queue_work(uint32_t index, client_state &c, const work_request &wr);
    void refuse_work(uint32_t index, client_state &c, const work_request &wr,
                     completion_status status, uint32_t detail);
    void
    deliver_completion(uint32_t index, client_state &c, const completion &done);
    /* posts the lanes that have work and credit (lanes::next_lane) */
    void post_ready();
    void post_lane(peer &p, uint16_t lane_index);
    bool post_chain(peer &p, const lanes::chain &c);
    /* delivers what the lanes ended (lanes::ends) */
    void run_ends();
    void post_keepalive(peer &p);
    void set_paused(uint32_t index, bool paused);
    void check_pauses(const client_set &clients);
    /* queue_work's check: work for a departed destination is refused
     * unqueued (what was queued before failed at the departure:
     * destination_gone) */
    bool destination_is_gone(const op_record &op) const
    {
        return m_departures.gone_count() != 0 && op.client != no_client &&
               m_departures.is_gone(op.peer, op.wr.dst_client,
                                    op.wr.dst_generation);
    }

    /* engine_complete.cc: the CQ */
    size_t poll_cq(time_point now);
    void on_send_completion(const nic_completion &wc, time_point now);
    void on_receive(const nic_completion &wc, time_point now);
    void watch_lanes(time_point now);
    /* departed clients ("Departed clients" above) */
    void on_stale(peer &p, uint32_t index, uint8_t generation, bool detached,
                  time_point now);
    /* true if it sent p a message (departure_barrier.h waits for its
     * answer) */
    bool tell_gone(peer &p, uint32_t index, uint8_t generation, time_point now);
    /* true if that was news */
    bool destination_gone(peer &p, uint32_t index, uint8_t generation,
                          time_point now);
    /* answers the retirements the departure barrier says are due */
    void answer_retirements(const departure_barrier::dues &due);

    /* engine.cc: the records the peer table recycled since the last look
     * release their charges (client_share.h, peer_is) */
    void settle_peer_charges();
    /* engine.cc: logs line() at the 1st, 2nd, 4th, ... time of its kind
     * (`count`: format.h, worth_logging), its count after it: each line a
     * client can cause ("Log lines" above) */
    template<class Line> void log_counted(uint64_t &count, Line &&line)
    {
        if (worth_logging(++count)) {
            m_log(line() + " (" + std::to_string(count) + " so far)");
        }
    }

    /* engine.cc: the pass over the clients */
    /* Takes work from the clients a pass visits (client_table::to_visit,
     * visited). */
    bool take_clients_work(time_point now);
    /* Shows each client what was staged on its rings since the last call,
     * and wakes it if it sleeps (client_table::flush_given, wake_given);
     * true if any was given something. */
    bool serve_given();
    /* c is gone (detached, or its address retired): every connected peer
     * is told at once; returns the peers sent the news */
    std::vector<uint32_t>
    announce_departure(const attached_client &c, time_point now);
    /* engine.cc: runs what the MR registry asks for, feeding each
     * deregister's outcome back (deregistered(), whose actions run next);
     * true if it asked for the sweep (find_unannounced, which tick()
     * returns alone) */
    bool run_mrs(mr_actions acts);
    /* engine.cc: the sweep (mr_registry.h, "Intents"): looks up the MRs
     * it may not know, reads what every client has sent and acts on it,
     * then runs the registry's unannounced() */
    void sweep_unannounced();
    device_mr device_says(uint32_t handle) const;

    nic &m_nic;
    engine_config m_cfg;
    shm_layout m_layout;
    std::string m_job_key;
    uint64_t m_agent_id;
    log_fn m_log;
    std::unique_ptr<peer_auth> m_auth; /* the handshake's credentials */
    sender_gate m_senders; /* who still gets a credential check */
    attach_server *m_server = nullptr;

    unique_fd m_wake;
    shm_segment m_summary_segment; /* common/work_summary.h */
    work_summary_line *m_summary = nullptr;

    /* the peers, by index, address and QP; a destroyed QP stays routed
     * until a poll finds the CQ empty (peer_table.h; rxe, like the
     * loopback nic, leaves a destroyed QP's receives in the CQ) */
    peer_table m_peers;

    /* op records, backlogs, in-flight lists, credits, striping, parking */
    lanes m_lanes;
    std::vector<uint32_t> m_repost; /* receive buffers routed this round */

    /* records, channels, which a pass visits and serves, sleep */
    client_table m_clients;
    mr_registry m_mrs;
    client_share m_share;
    uint64_t m_recycles_settled = 0; /* m_peers.recycled() at the last look */
    /* the MR registry's notes logged, by kind (mr_note) */
    std::array<uint64_t, num_mr_notes> m_mr_notes{};
    departures m_departures;
    departure_barrier m_barrier; /* retirements not yet answered */
    time_point m_next_watch{}; /* watch_lanes() is due */
    bool m_served_clients = false; /* by the last progress() */
    /* which peer's timer is due when (tick_peers) */
    peer_timers m_peer_timers;
    trace *m_trace = nullptr; /* off: nullptr */

    void
    traced(trace_stage stage, uint32_t client, uint64_t key, uint64_t ns = 0)
    {
        if (m_trace != nullptr) [[unlikely]] {
            m_trace->record(stage, client, key, ns != 0 ? ns : trace_now());
        }
    }
    /* a stamp taken before a client can see what it marks; 0 when off */
    uint64_t stamp() const
    {
        return m_trace != nullptr ? trace_now() : 0;
    }

    struct totals {
        uint64_t misrouted        = 0; /* receives for no live client: */
        uint64_t stale_detached   = 0; /* ... its index is not attached */
        uint64_t stale_generation = 0; /* ... attached, another generation */
        uint64_t gone_told        = 0; /* client_gone sent (or applied) */
        uint64_t gone_heard       = 0; /* client_gone news from peers */
        uint64_t gone_ops_failed  = 0; /* ops for a departed destination */
        uint64_t bad_controls     = 0; /* well-formed, but out of place */
        /* retirements answered before every peer told had heard */
        uint64_t departures_unheard = 0;
        uint64_t bad_immediates   = 0;
        uint64_t clients_gone     = 0;
        uint64_t wakeups          = 0;
        uint64_t pauses           = 0; /* of our clients (back-pressure) */
        uint64_t resumes          = 0;
        /* hostile handshakes (see above) and corrupt clients */
        uint64_t malformed = 0; /* refused by the parser */
        /* the sender it names is not its source (GID, UD QP) */
        uint64_t forged_datagrams  = 0;
        uint64_t own_address       = 0; /* names this agent as its sender */
        uint64_t unknown_datagrams = 0; /* not a request, unknown sender */
        uint64_t unauthenticated   = 0; /* credential refused (peer_auth) */
        uint64_t unsealed          = 0; /* our credential could not be made */
        uint64_t half_open_refused = 0; /* answered busy at the cap */
        uint64_t table_full        = 0; /* max_peers reached: dropped */
        uint64_t corrupt_detached  = 0; /* clients whose ring broke */
        /* requests refused by check_work (each client's: its `invalid`) */
        uint64_t invalid_requests = 0;
        uint64_t sweeps           = 0; /* sweep_unannounced() */
        /* send completions for ops the watchdog had given up on */
        uint64_t late_completions = 0;
        uint64_t qp_errors        = 0; /* every peer's, gone ones' too */
        /* delivered to clients over the agent's life, gone ones included:
         * a finished run's rendezvous writes stay visible in the status */
        uint64_t am_in          = 0;
        uint64_t writes_in      = 0;
        uint64_t write_bytes_in = 0;
    } m_totals;
};

} // namespace rvt::agent

#endif
