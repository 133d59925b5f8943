/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Whom the handshake channel still spends a credential check on
 * (engine.h, "Bounded intake"; docs/design.md part 6). A MUNGE decode is
 * a round trip to munged and an HMAC is a SHA-256, both in the agent's
 * one thread, so what a datagram that passed the cheap checks may cost
 * is bounded three ways:
 *
 *   per sender  a bucket of checks: `burst` at once, one more each
 *               `refill` (a peer's handshake resends no faster: the
 *               engine makes `refill` at most its first retry interval),
 *               for every sender, the agent's own peers included; and a
 *               sender whose datagrams fail `max_failures` checks within
 *               `window` (a wrong job key, a bad credential, another
 *               job's or user's MUNGE credential, a replay) gets no check
 *               for `hold`.
 *   per pass    checks stop taking datagrams once they took `pass_time`
 *               in one pass of the agent's loop (the rest wait in the UD
 *               QP's receive queue); with the engine's
 *               datagrams_per_pass, at most that many checks a pass.
 *   memory      at most `capacity` senders remembered; a sender the
 *               engine has no peer for is refused unchecked when every
 *               one remembered is held (crowded), so a flood of new
 *               senders never ends a hold before its time.
 *
 * A sender is where a datagram came from as the receiving device tells
 * it (nic.h, datagram_source): the packet's source GID and the UD QP that
 * sent it. The engine drops a datagram that names another sender than
 * that before it gets here (forged), so a process can fail, and be held,
 * only as itself: a user's wrong keys hold that user's UD QP, not its
 * host, nor the agent beside it on that host.
 *
 * This is a pure state machine, as accept_gate is: no I/O, no clock
 * reads (the engine measures a check and says how long it took).
 *
 * State per sender: its bucket (tokens, counted up to a time), its
 * failures (a count since a time), a hold (until a time), when it was
 * last seen, whether the engine last called it known. An entry carries
 * nothing once its bucket is full again, its failures are older than
 * `window` and its hold is over: it is forgotten when room is needed.
 * State per pass: the time its checks took.
 *
 * Events -> transitions (s: a sender; known: the engine has a peer the
 * datagram speaks for, peer_table::find_sender):
 *
 *   admit(s, known, now)
 *     s held, now < until  -> held: no check (held_back + 1)
 *     s held, until passed -> the hold is over, its failures forgotten;
 *                             then as below
 *     s remembered, its bucket empty
 *                          -> throttled: no check (throttled + 1)
 *     s remembered         -> check: a token taken
 *     s new, fewer than capacity remembered
 *                          -> remembered with a full bucket; check: a
 *                             token taken
 *     s new, capacity remembered
 *                          -> every entry that carries nothing forgotten;
 *                             else the entry seen longest ago that is not
 *                             held, an unknown sender's before a known
 *                             one's, forgotten (evicted + 1); else, s
 *                             known: the hold that ends first forgotten
 *                             (evicted + 1); then as above. Else (s not
 *                             known, every entry held): crowded, no check
 *                             (crowded + 1)
 *   failed(s, now)         a datagram of s failed its check, or named
 *                          another job (before its check)
 *     s held               -> nothing: neither counts nor extends
 *     s new                -> remembered as admit would one not known
 *                             (crowded: nothing)
 *     first failure more than `window` ago
 *                          -> failures 1, since now
 *     else                 -> failures + 1
 *     failures reaching max_failures
 *                          -> held until now + hold (holds + 1); returns
 *                             true, the time to log it (the 1st, 2nd,
 *                             4th, ... hold: worth_logging)
 *   passed(s)              a credential believed: its failures forgotten
 *                          (its bucket is not: a believed sender's checks
 *                          are bounded too)
 *   pass_started()         the pass's check time is 0
 *   checked(took)          the pass's check time + took; reaching
 *                          pass_time: passes_cut + 1
 *   pass_open()            whether the pass's check time is below
 *                          pass_time
 */
#ifndef RVT_AGENT_SENDER_GATE_H
#define RVT_AGENT_SENDER_GATE_H

#include "uct/ib/rvt/agent/device/nic.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>

namespace rvt::agent {

struct sender_gate_config {
    uint32_t max_failures = 4; /* failed checks before a hold */
    std::chrono::milliseconds window{10000}; /* they count within this */
    std::chrono::milliseconds hold{10000}; /* no checks for this long */
    uint32_t capacity = 1024; /* senders remembered */
    /* each sender's checks: `burst` at once, then one per `refill`. A
     * peer's handshake sends at most a request and a reply per retry
     * interval (peer_config::retry_interval, 250 ms: the engine lowers
     * `refill` to it), and 16 covers both sides' first tries and resends
     * of an attempt (250, 500, 1000 ms) twice over */
    uint32_t burst = 16;
    std::chrono::milliseconds refill{250};
    /* checks stop taking datagrams once they took this long in one pass:
     * about 20 MUNGE decodes at their median (64-101 us on a loaded
     * 2-core host: munge.what_a_check_costs_is_printed), more than the 16
     * datagrams a pass takes, so it binds only when munged is slow (the
     * longest decode there took 2-17 ms) */
    std::chrono::microseconds pass_time{2000};
};

class sender_gate {
public:
    using time_point = std::chrono::steady_clock::time_point;
    using sender     = datagram_source;

    enum class verdict : uint8_t {
        check, /* spend a credential check on it */
        held, /* its hold runs */
        throttled, /* its bucket is empty */
        crowded, /* not known, and every sender remembered is held */
    };

    explicit sender_gate(sender_gate_config cfg);

    /* Whether a datagram from `from` may cost a credential check now. */
    verdict admit(const sender &from, bool known, time_point now);
    /* A datagram from `from` failed its check, or was refused before it
     * (a wrong job key); true when this failure started a hold that
     * should be logged. */
    bool failed(const sender &from, time_point now);
    /* A datagram from `from` was believed. */
    void passed(const sender &from);

    /* The per-pass bound on the checks' time. */
    void pass_started()
    {
        m_pass_spent = {};
    }
    void checked(std::chrono::nanoseconds took);
    bool pass_open() const
    {
        return m_pass_spent < m_cfg.pass_time;
    }

    /* Senders remembered now (some may carry nothing any more), and
     * totals over the agent's life. */
    size_t remembered() const
    {
        return m_senders.size();
    }
    uint64_t held_back() const
    {
        return m_held_back;
    }
    uint64_t holds() const
    {
        return m_holds;
    }
    uint64_t throttled() const
    {
        return m_throttled;
    }
    uint64_t crowded() const
    {
        return m_crowded;
    }
    uint64_t evicted() const
    {
        return m_evicted;
    }
    uint64_t passes_cut() const
    {
        return m_passes_cut;
    }
    const sender_gate_config &config() const
    {
        return m_cfg;
    }

private:
    struct entry {
        bool known      = false; /* as the engine last said */
        uint32_t tokens = 0;
        time_point refilled{}; /* tokens counted up to this time */
        uint32_t failures = 0;
        time_point since{}; /* the first failure counted */
        std::optional<time_point> held_until;
        time_point seen{}; /* the latest admit or failure */
    };
    using table = std::map<sender, entry>;

    /* brings e up to now: tokens refilled, an ended hold and old
     * failures forgotten; true when it carries nothing any more */
    bool age(entry &e, time_point now) const;
    /* s's entry, made with a full bucket if there is room (see admit in
     * the table above); end() when crowded */
    table::iterator remember(const sender &s, bool known, time_point now);

    sender_gate_config m_cfg;
    table m_senders;
    /* every sender remembered was held, the earliest until this: a new
     * unknown sender before it is crowded without a look at them */
    std::optional<time_point> m_crowded_until;
    std::chrono::nanoseconds m_pass_spent{};
    uint64_t m_held_back  = 0;
    uint64_t m_holds      = 0;
    uint64_t m_throttled  = 0;
    uint64_t m_crowded    = 0;
    uint64_t m_evicted    = 0;
    uint64_t m_passes_cut = 0;
};

std::string_view to_string(sender_gate::verdict v);

} // namespace rvt::agent

#endif
