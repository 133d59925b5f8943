/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's work between the clients' rings and the device: the op
 * records, each peer's K lanes (a FIFO backlog and the WRs in flight), the
 * send-queue and CQ credits, selective signalling, striping and parking
 * (engine.h: "Peers and lanes", "Back-pressure", "Silent QPs"; below:
 * "Credits", "Striping").
 *
 * This is a pure state machine, as peer_connection and mr_registry are: no
 * nic, no clock, no client. Ops and completions go in; chains of WRs to
 * post and the ends of ops (op_end: a completion owed to a client, and
 * what the op held, to release: ends()) come out. The engine tells it
 * what only the engine knows, when it learns it (whether a peer is
 * connected and with how many lanes, which clients and destinations are
 * gone: drop_client, fail_destination), posts the chains and delivers
 * the ends; lanes asks the engine nothing. The walk of a put is engine ->
 * lanes -> nic.
 *
 * What holds:
 *   - an op record is in exactly one place: a lane's backlog, a lane's
 *     in-flight list, a peer's parked FIFO, or free (or, for a striped
 *     write whose parts are out, held at the front of its lane);
 *   - a lane has at most its peer's sq_depth WRs in flight (limits'
 *     sq_depth, or less: set_sq_depth); all lanes together at
 *     most cq_budget (the CQ never overflows);
 *   - a peer's posted count is the sum of its lanes' in-flight lists;
 *   - an op ends once: one op_end, after every part of it has ended;
 *   - after drop_client(c, g) no op of (c, g) is parked or queued, and
 *     after fail_destination(p, d, g) none of p's for (d, g) is, but for
 *     an op held for its parts, which is never posted.
 *
 * Events -> what happens (p: a peer, l: a lane, d: a destination client):
 *
 *   queue(i)          d paused at p, or ops parked for d -> parked (FIFO
 *                     per d, ops_parked+1); else -> back of its lane's
 *                     backlog (lane_of: one endpoint, one lane), l marked
 *   queue_control(p)  an agent's message -> back of lane 0, marked
 *   end_unqueued(i)   an op refused before it was queued -> ends now
 *   next_chain(p, l)  up to max_chain WRs from the front of l's backlog,
 *                     within l's SQ credit and the CQ credit:
 *                     front op held (parts out) -> stop (held)
 *                     wants a stripe (work_stripe, >= 2 stripe_align,
 *                       unfenced, K > 1 and K lanes active) -> split: the
 *                       other parts to the FRONT of the other lanes
 *                       (marked), the op held at the front of its own
 *                     nothing taken, backlog left and no CQ credit -> l
 *                       waits in the CQ line
 *                     the last WR, every signal_interval-th, an atomic
 *                     and every part and split op are signaled
 *   posted(c, n)      the chain's first n are in flight; the rest go back
 *                     to the front of their lane, in order
 *   retire(wr_id, s)  no such record -> unknown; a record not in use, or
 *                     an older use of it -> late (no change); not in its
 *                     lane's flight -> stray;
 *                     else the WRs posted before it on its lane retire
 *                     first as successes (unsignaled), then it with s;
 *                     credits back; success -> l marked, or (lanes wait
 *                     for CQ credit) l joins the line behind them
 *   give_up(p, l)     every WR in flight on l retires as flushed
 *   fail_backlog(p)   every parked and queued op of p ends with `why`
 *   drop_client(c, g) client c of generation g is gone: every parked and
 *                     queued op of (c, g), of any peer: an op -> freed,
 *                     no completion (nobody to tell); a part -> ends
 *                     peer_failed, so its op fails; an op held for its
 *                     parts stays held and, when they have ended, ends
 *                     failed if one failed, else is freed, no completion,
 *                     never posted. Posted WRs complete as they would
 *   fail_destination(p, d, g)
 *                     p's client d of generation g is gone: every parked
 *                     and queued op of p for (d, g) ends peer_failed (a
 *                     part: so does its op); an op held for its parts
 *                     ends peer_failed once they have ended (unless one
 *                     failed first: its failure). Answer: how many ops
 *                     and parts were so ended or held to fail (the engine
 *                     refuses later ops for (d, g) before queueing them)
 *   pause(p, d)       later ops for d park
 *   resume(p, d)      d's parked ops go to the back of their lanes, in order
 *   forget_pauses(p)  every destination of p resumed (a new connection)
 *   set_sq_depth(p, n) p's lanes post at most n WRs each (its QPs were
 *                     made shallower: peer_table.h, "Send depths"); n
 *                     above limits' sq_depth -> limits' sq_depth
 *   keepalive(p)      lane 0 and the CQ have credit -> a chain of one
 *                     signaled WR, never put back if not posted; else none
 *   watch(p)          the lanes of p with WRs in flight and none retired
 *                     since the last watch (the silent-QP watchdog)
 *   flush_started(p)  the watchdog forgets what it saw before the flush
 *
 * Credits: a lane posts at most sq_depth WRs; all lanes together post at
 * most cq_budget (the CQ size minus the SRQ size), so the CQ never
 * overflows. A lane that finds no CQ credit left waits in line, and the
 * lanes in line are served first when completions give credits back.
 *
 * Striping: a write with immediate flagged work_stripe (work.h) is split
 * over the peer's K lanes when it reaches the front of its endpoint's
 * lane, so that one large write uses K QPs at once. It is split into up to
 * K parts of whole stripe_align units (the last takes the rest; fewer
 * parts when it has fewer units); one that is fenced, or whose peer has
 * one lane or not all K connected, is not split. The parts for the other
 * lanes are plain RDMA WRITEs, op records of their own (stripe.of names
 * the op), queued at the FRONT of their lanes (behind another held write
 * they would wait for its parts, which may wait for this one's: a
 * deadlock; parts owe other endpoints no order) and posted as any op,
 * within the same SQ and CQ credits, and always signaled. The op itself
 * keeps the last part and stays at the front of its own lane, held
 * (nothing behind it on that lane is posted: the endpoint's order), until
 * every other part has ended; then it is posted as the WRITE WITH IMM. An
 * RC send completion means the responder has the bytes, so the target
 * agent's notice (the immediate) comes after every byte has landed. The
 * client gets one completion, for the whole length: success when every
 * part succeeded, else the first failure (status and detail), and never
 * while a part is still posted: the client may then deregister the
 * buffer. A part that fails fails the op once the others have ended,
 * without posting the held last part; parts flushed, given up by the
 * watchdog, dropped for a departed client, failed for a departed
 * destination or failed with their peer's backlog end the same way. Each
 * part is an op_end of its own (part: the client's MR is held by each,
 * and each counts in the client's posted ops, so a dead client's MRs wait
 * for its parts too).
 * The cost: another endpoint's ops behind a held op on its lane wait for
 * the op's other parts (about 1/K of its transfer), and the other parts
 * may land before ops the same endpoint posted earlier on its own lane
 * and are still on the wire (RC orders one QP only): an earlier put to
 * the same bytes needs a fence (a fenced op is not split) or a flush, as
 * UCT's ordering of puts without a fence promises nothing either.
 */
#ifndef RVT_AGENT_LANES_H
#define RVT_AGENT_LANES_H

#include "uct/ib/rvt/agent/device/nic.h"
#include "uct/ib/rvt/common/shm_layout.h"
#include "uct/ib/rvt/common/work.h"

#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rvt::agent {

class lanes {
public:
    static constexpr uint32_t no_client = ~0u; /* the agent's own op */
    static constexpr uint32_t no_op     = ~0u;
    static constexpr size_t max_chain   = 32; /* WRs per doorbell */
    /* a long stream of WRs on one QP asks for a completion this often */
    static constexpr uint32_t signal_interval = 16;

    /* An op's place in a striped write. */
    struct stripe_state {
        uint32_t of      = no_op; /* a part: the op it is part of */
        uint16_t pending = 0; /* the op: parts not ended yet */
        bool split       = false; /* the op: its wr is now its last part */
        /* the op was ended (with its peer's backlog) while parts were
         * pending: its end waits for them */
        bool ended = false;
        /* the op's client left while parts were pending: it is never
         * posted (part_ended frees it untold if they all succeed) */
        bool dropped          = false;
        uint32_t whole_length = 0; /* the op's length before the split */
        /* the first failure among its parts (success: none yet) */
        completion_status status = completion_status::success;
        uint32_t detail          = 0;

        /* a part's or the op's own end: kept if the first failure */
        void note(completion_status s, uint32_t d)
        {
            if (status == completion_status::success &&
                s != completion_status::success) {
                status = s;
                detail = d;
            }
        }
    };

    struct op_record {
        work_request wr; /* as the client sent it (after checks) */
        uint32_t client     = no_client;
        uint32_t generation = 0; /* of the client index */
        uint32_t peer       = 0;
        uint16_t lane       = 0;
        bool in_use         = false;
        uint32_t control    = 0; /* the agent's own message: its immediate */
        /* a work_inline request's payload, copied out of the client's
         * work-data slot (engine.h, "Inline requests") */
        std::array<std::byte, max_work_inline> inline_data;
        stripe_state stripe;
    };

    /* An op's end: what the engine delivers and releases. Its record
     * (op(op): client, generation, peer, wr, stripe.of for a part) stays
     * as it was until clear_ends(), which frees it. */
    struct op_end {
        uint32_t op  = no_op;
        bool retired = false; /* it was on a QP, and came back */
        bool told    = false; /* a completion is owed: completion_of() */
        completion_status status = completion_status::success;
        uint32_t detail          = 0;
        uint64_t value           = 0; /* an atomic's fetched word */
    };

    struct chain {
        uint32_t peer = 0;
        uint16_t lane = 0;
        size_t n      = 0;
        bool held     = false; /* a striped write waits at the front */
        bool requeue  = true; /* unposted WRs go back (a keepalive: freed) */
        std::array<nic_send, max_chain> sends;
        std::array<uint32_t, max_chain> ops;
    };

    enum class retire_verdict : uint8_t {
        retired,
        unknown, /* no such record */
        late, /* for a record freed (given up) or reused since */
        stray, /* its lane has not posted it */
    };
    struct retire_result {
        retire_verdict verdict = retire_verdict::retired;
        uint32_t op            = no_op;
        uint32_t peer          = 0;
        /* some WR retired well: this one, or an unsignaled one before it
         * (the peer answered) */
        bool succeeded = false;
    };

    struct limits {
        uint32_t num_lanes = 1; /* K, per peer */
        uint32_t sq_depth  = 0; /* WRs a lane may have posted, at most */
        uint32_t cq_budget = 0; /* sends that may be outstanding */
        /* where an agent's own message's (empty) payload is */
        nic_sge control_buffer{};
    };

    struct counters {
        uint64_t ops_parked   = 0; /* for peers' paused clients */
        uint64_t striped_ops  = 0;
        uint64_t stripe_parts = 0; /* all K of each */
    };

    explicit lanes(const limits &lim);

    /* A peer's lanes, empty (a new peer, or a recycled entry's index),
     * each posting up to limits' sq_depth. */
    void add_peer(uint32_t peer);
    void set_sq_depth(uint32_t peer, uint32_t sq_depth);
    uint32_t sq_depth(uint32_t peer) const
    {
        return m_peers[peer].sq_depth;
    }

    /* Ops in: a record to fill (its inline_data first), then queued or
     * ended without ever being queued. */
    uint32_t
    alloc(const work_request &wr, uint32_t client, uint32_t generation);
    op_record &op(uint32_t i)
    {
        return m_ops[i];
    }
    const op_record &op(uint32_t i) const
    {
        return m_ops[i];
    }
    /* records ever made: op(0) to op(records() - 1), in use or free */
    size_t records() const
    {
        return m_ops.size();
    }
    void queue(uint32_t i);
    void end_unqueued(uint32_t i, completion_status why);
    void queue_control(uint32_t peer, uint32_t immediate);

    /* Posting. `active`: the peer's lanes with a connected QP (0 when not
     * connected). */
    void mark(uint32_t peer, uint16_t lane_index);
    void mark_all(uint32_t peer); /* the lanes with a backlog */
    /* The next lane to post: first those that waited for CQ credit (while
     * there is credit), then the marked ones; false when none. */
    bool next_lane(uint32_t &peer, uint16_t &lane_index);
    /* Fills `c` from the lane; false when nothing is to be posted. */
    bool
    next_chain(uint32_t peer, uint16_t lane_index, size_t active, chain &c);
    void posted(const chain &c, size_t n);
    bool keepalive(uint32_t peer, uint32_t immediate, chain &c);

    /* Completions. */
    retire_result retire(uint64_t wr_id, completion_status status,
                         uint32_t detail, uint64_t value);
    size_t give_up(uint32_t peer, uint16_t lane_index, uint32_t vendor_flushed);
    void fail_backlog(uint32_t peer, completion_status why);

    /* Departures: what waits for a client, or for a destination, that is
     * gone (the events drop_client and fail_destination above). */
    void drop_client(uint32_t client, uint32_t generation);
    size_t fail_destination(uint32_t peer, uint32_t dst_client,
                            uint8_t dst_generation);

    /* Back-pressure. */
    void pause(uint32_t peer, uint32_t dst);
    void resume(uint32_t peer, uint32_t dst);
    void forget_pauses(uint32_t peer);

    /* The silent-QP watchdog. */
    std::vector<uint16_t> watch(uint32_t peer);
    void flush_started(uint32_t peer);

    /* What ended since clear_ends(), in order. The caller reads them and
     * clears them (their storage is kept: no allocation per op). */
    std::span<const op_end> ends() const
    {
        return m_ends;
    }
    /* What the client of a told end is sent. */
    completion completion_of(const op_end &e) const;
    void clear_ends();

    /* Looks. */
    uint32_t posted(uint32_t peer) const
    {
        return m_peers[peer].posted;
    }
    size_t in_flight(uint32_t peer, uint16_t lane_index) const
    {
        return m_peers[peer].lanes[lane_index].inflight.size();
    }
    size_t queued(uint32_t peer) const;
    size_t parked(uint32_t peer) const;
    /* Nothing posted, queued or parked for the peer. */
    bool holds_nothing(uint32_t peer) const;
    /* Nothing posted or queued anywhere. */
    bool idle() const;
    const counters &totals() const
    {
        return m_totals;
    }
    /* What does not add up (engine::check_books), or empty. */
    std::string check_books() const;

private:
    struct lane {
        std::deque<uint32_t> backlog; /* op records waiting, FIFO */
        /* posted, in posting order: RC completes them in this order, an
         * unsignaled one together with the next signaled one */
        std::deque<uint32_t> inflight;
        uint32_t unsignaled = 0; /* posted since the last signaled WR */
        bool marked         = false; /* in m_marked */
        bool cq_waiting     = false; /* in m_cq_waiting */
        /* the watchdog: ops retired so far, and what it saw last look */
        uint64_t retired      = 0;
        uint64_t seen_retired = 0;
        bool seen_busy        = false;
    };

    struct peer_lanes {
        std::vector<lane> lanes;
        uint32_t sq_depth = 0; /* WRs each lane may have posted */
        uint32_t posted = 0; /* over all lanes */
        /* back-pressure: the destinations paused, and the ops taken for
         * them meanwhile, FIFO per destination */
        std::bitset<512> paused;
        std::unordered_map<uint32_t, std::deque<uint32_t>> parked;
    };

    uint32_t alloc_control(uint32_t peer, uint32_t immediate);
    /* drop_client's and fail_destination's look through a peer's waiting
     * ops (lanes.cc) */
    template<typename Of>
    void take_waiting(peer_lanes &p, Of of, std::vector<uint32_t> &out,
                      std::vector<uint32_t> &held);
    void free_op(uint32_t i, bool retired, bool told = false,
                 completion_status status = completion_status::success,
                 uint32_t detail = 0, uint64_t value = 0);
    void end_op(uint32_t i, completion_status status, uint32_t detail,
                uint64_t value, bool retired);
    void part_ended(uint32_t part, completion_status status, uint32_t detail,
                    bool retired);
    void retire_one(uint32_t i, completion_status status, uint32_t detail,
                    uint64_t value);
    void wait_for_cq(uint32_t peer, uint16_t lane_index);
    void split(uint32_t i);
    bool wants_stripe(const op_record &op, size_t active) const;
    nic_send make_send(uint32_t i) const;
    void signal(lane &l, std::span<nic_send> sends);

    limits m_lim;
    std::vector<op_record> m_ops;
    std::vector<uint32_t> m_free; /* records free for alloc() */
    /* per op record, how often it was allocated: the `use` of its wr_ids
     * (engine_tags.h) */
    std::vector<uint32_t> m_uses;
    std::vector<peer_lanes> m_peers; /* by peer index */
    uint32_t m_cq_used = 0;
    /* lanes that got work: (peer, lane), in the order they got it */
    std::vector<std::pair<uint32_t, uint16_t>> m_marked;
    size_t m_marked_next = 0;
    /* lanes with a backlog that found no CQ credit, in the order they
     * stopped: only another lane's completion gives credits back, so
     * they go first when one does */
    std::deque<std::pair<uint32_t, uint16_t>> m_cq_waiting;
    std::vector<op_end> m_ends;
    counters m_totals;
};

} // namespace rvt::agent

#endif
