/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one owner of the clients' MRs in the agent's PD: which client holds
 * which handle, what its work is checked against (by lkey), which of its
 * ops name which lkey, the releases that wait for those ops, and the MRs
 * of clients that died, which wait for their posted ops and a grace time.
 *
 * Why it is careful: the agent's QPs are shared by every client, and an
 * MR deregistered under a posted op fails it with a local protection error
 * and breaks the QP for all (engine.h, "Dead clients"); and the kernel
 * hands a deregistered handle to the next REG_MR at once, so a handle is
 * forgotten only once it is deregistered (attach_wire.h, mr_release):
 * then the agent never sees one handle announced by two clients.
 *
 * This is a pure state machine, as peer_connection is: no device calls,
 * no I/O, no clock reads, no callbacks. Every input is an event method
 * (what the device says of a handle comes in as an argument); every
 * effect comes back as a list of mr_actions the caller executes in order
 * (engine.cc, run_mrs): deregister a handle and report the outcome with
 * deregistered() (whose actions run next), answer a client's release,
 * log a line, look for unannounced MRs. The engine owns it and feeds it;
 * the attach server only parses notices and releases off the socket and
 * sends the answers.
 *
 * States of a handle:
 *   live           announced by its client, which may use it
 *   deferred       its client released it, but ops of the client (queued
 *                  or posted, or still in its work ring) may name it
 *   deregistering  a deregister action is out; deregistered() is owed
 *   orphaned       its client died; waits in the client's gone record
 * A handle in no state is unknown: never announced, or forgotten after
 * deregistered(). A client's work is checked against its live, deferred
 * and deregistering MRs (mrs_of).
 *
 * Groups: a sibling (attach_wire.h, "Siblings") holds no MRs; its work is
 * checked against its leader's (mrs_of), and the leader's release waits
 * for the whole group: every live sibling's ring and ops, and the posted
 * ops of every sibling that has gone (its gone record names the leader).
 * The group ends with its leader (attach_server.h): the leader's orphaned
 * MRs wait for its siblings' posted ops too.
 *
 * Events -> transitions and actions (i: a client index):
 *
 *   attached(i)          i's lkey uses start at zero (a new holder of i)
 *   joined(s, l)         after attached(s): s is a sibling of leader l (a
 *                        leader, attached): s's work is checked against
 *                        l's MRs, and l's releases wait for s
 *   announced(i, mr, device, answer)
 *                        passes every check of "Announcements" below ->
 *                        live (i's), highest_handle raised to its handle;
 *                        fails one -> refused: nothing changes (a note,
 *                        and answer_announce with the reason if the
 *                        client asked for an answer; accepted: an empty
 *                        answer_announce if asked)
 *   release_requested(i, h, answer, ring_busy)
 *                        live of i, ring empty, no op of i names its lkey,
 *                        i has no sibling (live, or gone with posted ops)
 *                            -> deregistering: deregister
 *                        live of i, otherwise -> deferred (mrs_deferred+1)
 *                        deferred or deregistering of i -> refused "being
 *                            released already"
 *                        unknown, another client's, orphaned -> refused
 *                            "not this client's": nothing deregistered
 *                        (refused: a note, and answer_release with the
 *                        reason if the client asked for an answer)
 *   op_queued(i, wr)     i's uses of wr's lkeys + 1 (no actions)
 *   op_done(i, wr)       - 1 (no actions)
 *   rings_asked()        (a question, no event) the clients whose rings
 *                        releases_due() must be told of: each client i
 *                        with a deferred release, and i's live siblings
 *   releases_due(busy)   deferred, i not in busy, no op of i names it,
 *                        and the same for each live sibling s of i
 *                        (s in busy, s's ops), and no gone sibling of i
 *                        has posted ops -> deregistering: deregister
 *   client_gone(i, generation, posted)
 *                        live and deferred of i -> orphaned, in a gone
 *                        record with i's posted ops; deregistering of i:
 *                        no answer is owed any more (no actions); i a
 *                        sibling: leaves its leader's live siblings, its
 *                        gone record names the leader
 *   gone_op_retired(i, generation)
 *                        that gone record's posted ops - 1 (no actions)
 *   tick(now)            a gone record with no posted ops left, no live
 *                        sibling and no gone sibling with posted ops: due
 *                        at now + grace (once); a due record's orphaned ->
 *                        deregistering: deregister each (a record with
 *                        none: its summary note, dropped)
 *   deregistered(h, outcome)
 *                        deregistering for a release -> unknown;
 *                            answer_release if owed; mrs_released or
 *                            mrs_leaked (and a note) + 1
 *                        deregistering for a gone client -> unknown;
 *                            mrs_cleaned or mrs_leaked (and a note) + 1;
 *                            the record's last: summary note, dropped
 *                        otherwise: nothing
 *
 * Announcements. The handle, keys and region a client announces are its
 * word only, and a client can learn those of a neighbour's MR, or of the
 * agent's own, with QUERY_MR on the command fd they share. So before
 * announced() the caller asks the device what the handle is (device_mr:
 * nic::owns_mr, then QUERY_MR), and announced(i, mr, device) accepts the
 * MR only if, in this order (the first that fails is the reason, naming
 * the values):
 *   1. i is no sibling (its leader announces the group's MRs);
 *   2. the handle is unknown here: no client holds it, i included (a
 *      neighbour's handle is refused naming the neighbour);
 *   3. the device does not call it one of the agent's own MRs (its
 *      receive pool, the UD channel's, its control and staging buffers);
 *   4. the device has an MR with that handle at all;
 *   5. the device's lkey, rkey, address and length are the announced ones
 *      (each that differs is named: announced, and the device's);
 *   6. i said it would register that (address, length) first (one of its
 *      intents, which the MR then takes, see "Intents").
 * What no check can see: QUERY_MR does not tell an MR's access flags, so
 * an MR registered without local write is accepted as any other (a READ
 * into it fails at the device, breaking the QP it was posted on); and
 * every client holds the same command fd: one can still announce a
 * neighbour's MR between the neighbour's REG_MR and its announcement,
 * sending an intent for the same region first (which the agent cannot
 * refuse: two processes often map the same addresses), or deregister a
 * neighbour's MR behind the agent's back.
 * highest_handle counts accepted handles only: a made-up handle raises
 * nothing, so it costs the sweep below nothing (engine.cc,
 * sweep_unannounced).
 *
 * Generations are the caller's: a gone record is (index, generation), so
 * the ops of a dead client are told apart from those of the next holder
 * of its index, and its MRs wait for its own ops only.
 *
 * Intents (wire::msg_type::mr_intent). A client registers in the agent's
 * PD itself and announces the handle afterwards; killed between the two,
 * it leaves an MR the agent never heard of, pinned for the agent's life.
 * So it first says what it is about to register (addr, length), and the
 * intent is kept until the announce (or a withdrawal after a failed
 * REG_MR) takes it back. A dead client's intents go into its gone record;
 * when the record is due, the agent looks for MRs of its PD it does not
 * know (find_unannounced: by handle, what the device says of each) and
 * feeds them back (unannounced): an unknown MR whose (addr, length) the
 * intents of that dead client name, and no other client's (live or gone),
 * is that client's: it is deregistered with its other MRs. Anything
 * ambiguous is left registered, with a note: deregistering a live
 * client's MR would fail its ops and break the QPs every client shares.
 * Why nothing live is missed: the caller looks for unknown MRs first and
 * then reads every client's socket, so a live client's MR found unknown
 * was registered, and its intent sent, before that read. An MR found
 * unknown and then announced in that read is known by the time
 * unannounced() runs, and is skipped.
 *
 *   intended(i, addr, len)  i's intents + (addr, len) (at most max_intents,
 *                        beyond: note "... ignored"; i a sibling: note
 *                        "... ignored")
 *   withdrawn(i, addr, len) one of i's intents for (addr, len) - 1
 *   announced(i, mr, ...) accepted: one of i's intents for (mr.addr,
 *                        mr.length) - 1 (without one it is refused, check 6)
 *   client_gone(i, ...)  also: i's intents -> its gone record
 *   tick(now)            a due record with intents waits for the sweep:
 *                        one find_unannounced action for all of them, and
 *                        alone: the due records are collected only in
 *                        unannounced() then, after the look (the caller
 *                        runs the sweep after the list, and answers with
 *                        unannounced())
 *   unannounced(found)   each found MR (unknown handles only) whose key is
 *                        named by intents of exactly one gone client, due,
 *                        and no more found MRs with that key than it has
 *                        intents for it -> orphaned in its record
 *                        (mrs_unannounced + 1, a note); then every due
 *                        record's intents are dropped and due records go
 *                        on as in tick()
 */
#ifndef RVT_AGENT_MR_REGISTRY_H
#define RVT_AGENT_MR_REGISTRY_H

#include "uct/ib/rvt/agent/attach/client_set.h"
#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/common/work.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rvt::agent {

/* An MR a client announced: what the agent checks its work against. */
struct client_mr {
    uint32_t handle;
    uint32_t lkey;
    uint32_t rkey;
    uint64_t addr;
    uint64_t length;
};

/* What the device says of a handle a client announced (the caller asks
 * it: nic::owns_mr, then QUERY_MR; see "Announcements"). */
struct device_mr {
    enum class owner : uint8_t {
        nobody, /* no MR in the agent's PD has the handle */
        agent, /* one of the agent's own MRs */
        client, /* an MR a client registered: `mr` is the device's word */
    };
    owner who = owner::nobody;
    client_mr mr{};
};

/* How many of one client's ops (queued or posted) name each lkey: an MR
 * is released only when none does. */
class lkey_uses {
public:
    void add(const work_request &wr)
    {
        change(wr, +1);
    }
    void remove(const work_request &wr)
    {
        change(wr, -1);
    }
    bool in_use(uint32_t lkey) const
    {
        auto it = m_count.find(lkey);
        return it != m_count.end() && it->second > 0;
    }
    /* The MR is gone: its entry, kept at zero between ops so the data path
     * allocates nothing, goes too. */
    void forget(uint32_t lkey)
    {
        if (!in_use(lkey)) {
            m_count.erase(lkey);
        }
    }
    /* The lkeys tracked once wr's op is added (client_share.h bounds
     * them). */
    size_t size_with(const work_request &wr) const
    {
        const bool data = wr.length > 0 && !m_count.contains(wr.lkey);
        const bool head = wr.head_length > 0 &&
                          !m_count.contains(wr.head_lkey) &&
                          !(data && wr.head_lkey == wr.lkey);
        return m_count.size() + data + head;
    }
    /* Drops the entries at zero: those no op names now (the MRs of a
     * sibling's leader, named once, are forgotten only here). */
    void drop_unused()
    {
        std::erase_if(m_count, [](const auto &e) { return e.second <= 0; });
    }

private:
    void change(const work_request &wr, int by)
    {
        if (wr.length > 0) {
            bump(wr.lkey, by);
        }
        if (wr.head_length > 0) {
            bump(wr.head_lkey, by);
        }
    }
    void bump(uint32_t lkey, int by)
    {
        m_count[lkey] += by;
    }
    std::unordered_map<uint32_t, int> m_count;
};

enum class mr_action_kind : uint8_t {
    deregister, /* deregister `handle` from the device, then call
                   deregistered() with the outcome */
    answer_release, /* send client `index` an mr_release_reply for
                       `handle`: released if `text` is empty, else refused
                       with `text` as the reason */
    answer_announce, /* send client `index` an mr_registered_reply for
                        `handle`: accepted if `text` is empty, else
                        refused with `text` as the reason */
    note, /* a line for the agent's log: `text`, of kind `about` */
    find_unannounced, /* look up the MRs of the agent's PD it may not know
                         of, read what every client has sent, then call
                         unannounced() with the MRs found (see "Intents") */
};

/* What a note is about. A client can cause each kind (an announcement,
 * a release, an intent it sends; its departure), so the engine logs each
 * kind at its 1st, 2nd, 4th, ... note (format.h, worth_logging). */
enum class mr_note : uint8_t {
    none, /* not a note */
    announcement, /* an announcement refused */
    release, /* a release refused */
    intent, /* an intent ignored */
    departure, /* what a gone client's MRs came to */
    device, /* the device refused a deregistration */
};
inline constexpr size_t num_mr_notes = 6;

struct mr_action {
    mr_action_kind kind;
    uint32_t index  = 0;
    uint32_t handle = 0;
    std::string text;
    mr_note about = mr_note::none; /* a note's kind */
};
using mr_actions = std::vector<mr_action>;

struct mr_counters {
    uint64_t released = 0; /* by live clients' releases */
    uint64_t deferred = 0; /* of those, put off for ops using them */
    uint64_t cleaned  = 0; /* of dead clients */
    uint64_t leaked   = 0; /* the device refused to deregister */
    /* of the cleaned, registered by a client that died before it
     * announced them (found through its intents) */
    uint64_t unannounced = 0;
};

class mr_registry {
public:
    using time_point = std::chrono::steady_clock::time_point;
    /* Registrations one client may have announced and not yet made. */
    static constexpr size_t max_intents = 64;

    mr_registry(uint32_t max_clients, std::chrono::milliseconds grace);

    void attached(uint32_t index);
    /* After attached(sibling): it belongs to `leader`'s group. */
    void joined(uint32_t sibling, uint32_t leader);
    /* The client whose MRs `index`'s work uses: its leader, or itself. */
    uint32_t owner_of(uint32_t index) const
    {
        return m_clients[index].leader.value_or(index);
    }
    /* `device`: what the device says of mr.handle; `answer`: the client
     * asked for an mr_registered_reply. */
    mr_actions announced(uint32_t index, const client_mr &mr,
                         const device_mr &device, bool answer = false);
    mr_actions intended(uint32_t index, uint64_t addr, uint64_t length);
    void withdrawn(uint32_t index, uint64_t addr, uint64_t length);
    mr_actions release_requested(uint32_t index, uint32_t handle, bool answer,
                                 bool ring_busy);
    /* A notice off the socket (attach_server's mr_notice event): announced()
     * (`device`: what the device says of the notice's handle, asked only
     * when asks_device()), release_requested(), intended() or withdrawn(),
     * as its type says. */
    mr_actions on_notice(uint32_t index, const wire::mr_notice &notice,
                         bool ring_busy, const device_mr &device);
    /* Whether on_notice() reads its `device` (an announcement). */
    static bool asks_device(const wire::mr_notice &notice)
    {
        return static_cast<wire::msg_type>(notice.hdr.type) ==
               wire::msg_type::mr_registered;
    }
    /* The data path: an op of the client's taken from its ring, and freed
     * (completed, refused or dropped). Inline: once per op. */
    void op_queued(uint32_t index, const work_request &wr)
    {
        m_clients[index].uses.add(wr);
    }
    void op_done(uint32_t index, const work_request &wr)
    {
        m_clients[index].uses.remove(wr);
    }
    /* The lkeys client `index`'s ops would track with wr's op added, and
     * dropping those no op names (lkey_uses). */
    size_t lkeys_with(uint32_t index, const work_request &wr) const
    {
        return m_clients[index].uses.size_with(wr);
    }
    void drop_unused_lkeys(uint32_t index)
    {
        m_clients[index].uses.drop_unused();
    }
    /* The clients whose work rings releases_due() must be told of. */
    client_set rings_asked() const;
    /* busy_rings: of rings_asked(), the clients whose work ring still
     * holds requests, which may name what they released. */
    mr_actions releases_due(const client_set &busy_rings);
    void client_gone(uint32_t index, uint32_t generation, uint32_t posted);
    void gone_op_retired(uint32_t index, uint32_t generation);
    mr_actions tick(time_point now);
    mr_actions deregistered(uint32_t handle, const result<uint32_t> &outcome);
    /* The answer to find_unannounced: MRs of the agent's PD, as the
     * device tells of them, those it knows among them or not. */
    mr_actions unannounced(std::span<const client_mr> found);

    /* Whether `handle` is a client's MR the registry holds. */
    bool knows(uint32_t handle) const
    {
        return m_handles.contains(handle);
    }
    /* The highest handle ever accepted (0: none yet): one the device
     * had. */
    uint32_t highest_handle() const
    {
        return m_highest_handle;
    }
    /* Intents held, of live clients and gone ones. */
    size_t intents_pending() const;

    /* What client `index`'s work is checked against, by lkey (a
     * sibling's: its leader's). */
    const std::unordered_map<uint32_t, client_mr> &mrs_of(uint32_t index) const
    {
        return m_clients[owner_of(index)].mrs;
    }
    /* The handles client `index` holds (any state but orphaned). */
    size_t held_by(uint32_t index) const
    {
        return m_clients[index].mrs.size();
    }
    size_t releases_waiting() const
    {
        return m_deferred.size();
    }
    size_t gone_waiting() const
    {
        return m_gone.size();
    }
    const mr_counters &counters() const
    {
        return m_counters;
    }
    /* When tick() is next due, if a gone record waits for its grace. */
    std::optional<time_point> next_timer() const;
    /* No release deferred, no gone client's MRs waiting. */
    bool idle() const
    {
        return m_deferred.empty() && m_gone.empty();
    }

private:
    enum class state : uint8_t {
        live,
        deferred,
        deregistering,
        orphaned
    };

    struct record {
        uint32_t index; /* the client that announced it */
        client_mr mr;
        state st;
        bool answer = false; /* the client waits for an mr_release_reply */
        bool gone   = false; /* orphaned, or deregistering for a dead
                                client: then generation is its */
        uint32_t generation = 0;
    };

    /* A registration a client said it was about to make. */
    struct intent {
        uint64_t addr;
        uint64_t length;
        friend bool operator==(const intent &, const intent &) = default;
    };

    struct client {
        std::unordered_map<uint32_t, client_mr> mrs; /* by lkey */
        lkey_uses uses;
        uint64_t epoch = 0; /* attached() calls of this index */
        std::optional<uint32_t> leader; /* a sibling's */
        std::vector<uint32_t> siblings; /* a leader's live ones */
        std::vector<intent> intents;
    };

    /* A leader, as a gone sibling's record names it. */
    struct leader_of_gone {
        uint32_t index;
        uint64_t epoch;
    };

    struct gone_client {
        uint32_t index;
        uint32_t generation;
        uint32_t posted; /* its ops still on a QP */
        std::vector<uint32_t> handles; /* orphaned */
        std::optional<time_point> release_at; /* set once drained */
        size_t left  = 0; /* deregister actions not yet reported */
        size_t freed = 0;
        std::optional<leader_of_gone> leader; /* a sibling's */
        uint64_t epoch = 0; /* the index's epoch when it went */
        std::vector<intent> intents; /* made and never announced, maybe */
        bool due = false; /* release_at has passed */
    };

    /* Posted ops of gone siblings of the leader `index` at `epoch`. */
    bool gone_siblings_posting(uint32_t index, uint64_t epoch) const;
    /* Whether anything of `index`'s group may name `lkey` now. */
    bool group_busy(uint32_t index, uint32_t lkey,
                    const client_set &busy_rings) const;

    void start_deregister(uint32_t handle, record &r, mr_actions &out);
    /* Due records with no intents left: deregister their MRs. */
    void collect_due(mr_actions &out);
    /* Adopts the unknown MRs `found` (all of one key) into `g`, if its
     * intents alone name the key. */
    void
    adopt(std::span<const client_mr> found, const intent &key, mr_actions &out);
    void refuse(uint32_t index, uint32_t handle, bool answer,
                std::string reason, mr_actions &out);
    /* Why announced() refuses `mr` (empty: it does not), checks 1-6. */
    std::string announce_error(uint32_t index, const client_mr &mr,
                               const device_mr &device) const;
    void forget(uint32_t handle, const record &r);
    void finish_gone(const record &r, const result<uint32_t> &outcome,
                     mr_actions &out);
    static mr_action note(mr_note about, std::string text);

    std::chrono::milliseconds m_grace;
    std::vector<client> m_clients; /* by index */
    std::unordered_map<uint32_t, record> m_handles;
    std::vector<uint32_t> m_deferred; /* handles, in release order */
    std::vector<gone_client> m_gone;
    mr_counters m_counters;
    uint32_t m_highest_handle = 0;
    bool m_sweep_asked        = false; /* find_unannounced is out */
};

} // namespace rvt::agent

#endif
