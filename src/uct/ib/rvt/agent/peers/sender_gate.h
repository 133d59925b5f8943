/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Whom the handshake channel still spends a credential check on
 * (engine.h, "Hostile handshakes"): a bound on failed credentials per
 * sending host. A MUNGE decode is a round trip to munged and an HMAC is
 * a SHA-256; a host that sends datagrams of the right shape with a wrong
 * job key, a bad credential, another job's or another user's MUNGE
 * credential, or a replay, gets a few of those checks and then none for
 * a while: its datagrams are dropped after the cheap checks (size, kind,
 * the claimed GID), counted, and never decoded.
 *
 * A sender is the packet's source GID (nic.h, poll_datagrams), which the
 * network layer sets: not what a datagram says of itself, and not its UD
 * QPN, which a host mints freely. The engine still checks the datagrams
 * that name a peer it has (GID, UD QPN and its random instance id), so a
 * stranger on a peer's node cannot keep that peer's connection from
 * being kept alive; it can delay that node's *new* connections to this
 * agent by `hold` (docs/reliability.md, trust model).
 *
 * This is a pure state machine, as accept_gate is: no I/O, no clock
 * reads. At most `capacity` senders are remembered; a sender whose
 * credentials pass is forgotten.
 *
 * State per sender: failures (a count since `since`), held (until a
 * time).
 *
 * Events -> transitions:
 *   admit(from, now)   held and now < until: refused (held_back + 1)
 *                      held and until passed: forgotten, admitted
 *                      else admitted
 *   failed(from, now)  no entry: one, failures 1 (at capacity, the entry
 *                      whose last failure is oldest is forgotten first:
 *                      evicted + 1)
 *                      first failure more than `window` ago: failures 1,
 *                      since now
 *                      else failures + 1
 *                      failures reaching max_failures: held until
 *                      now + hold (holds + 1); returns true, the time to
 *                      log it (the 1st, 2nd, 4th, ... hold: worth_logging)
 *   passed(from)       a credential believed: forgotten
 */
#ifndef RVT_AGENT_SENDER_GATE_H
#define RVT_AGENT_SENDER_GATE_H

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>

namespace rvt::agent {

struct sender_gate_config {
    uint32_t max_failures = 4; /* failed checks before a hold */
    std::chrono::milliseconds window{10000}; /* they count within this */
    std::chrono::milliseconds hold{10000}; /* no checks for this long */
    uint32_t capacity = 1024; /* senders remembered */
};

class sender_gate {
public:
    using time_point = std::chrono::steady_clock::time_point;
    using gid        = std::array<uint8_t, 16>;

    explicit sender_gate(sender_gate_config cfg);

    /* Whether a datagram from `from` may cost a credential check now. */
    bool admit(const gid &from, time_point now);
    /* A datagram from `from` failed its check, or was refused before it
     * (a wrong job key); true when this failure started a hold that
     * should be logged. */
    bool failed(const gid &from, time_point now);
    /* A datagram from `from` was believed. */
    void passed(const gid &from);

    /* Senders held now (some may have expired and not been asked
     * since), and totals over the agent's life. */
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
    uint64_t evicted() const
    {
        return m_evicted;
    }
    const sender_gate_config &config() const
    {
        return m_cfg;
    }

private:
    struct sender {
        uint32_t failures = 0;
        time_point since{}; /* the first failure counted */
        time_point last{}; /* the latest failure */
        std::optional<time_point> held_until;
    };

    sender_gate_config m_cfg;
    std::map<gid, sender> m_senders;
    uint64_t m_held_back = 0;
    uint64_t m_holds     = 0;
    uint64_t m_evicted   = 0;
};

} // namespace rvt::agent

#endif
