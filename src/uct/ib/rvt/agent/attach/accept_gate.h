/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Whether the attach server takes new connections off its listening
 * socket (attach_server.h). Two things close it:
 *
 *   - Connections that have not attached: each holds a descriptor and a
 *     buffer until it attaches, is answered, or its request times out, so
 *     at most max_unattached are accepted at once. Others wait in the
 *     kernel's listen backlog (their connect() has returned, their
 *     request waits with them) and are accepted in turn as the gate
 *     opens: nothing is refused, waiting is what a flood costs the rest.
 *   - No descriptor to accept with (EMFILE, ENFILE; ENOBUFS, ENOMEM):
 *     the connection stays in the backlog and the listener stays
 *     readable, so a loop that kept polling it would spin, and log on
 *     every pass. The gate closes until one of the server's connections
 *     closes (a descriptor freed), or the retry time passes (one freed
 *     elsewhere in the agent).
 *
 * While it is closed the server polls the listener for no event at all,
 * so the agent's loop sleeps as if nobody were connecting.
 *
 * This is a pure state machine, as client_share is: no I/O, no clock
 * reads. Its events return the line to log, if any (empty: none): the
 * 1st, 2nd, 4th, ... time of each kind (format.h, worth_logging).
 *
 * State: unattached (a count), full (unattached == max_unattached), and
 * no_fds (until a time). accepting() is true when neither holds.
 *
 * Events -> transitions:
 *   accepted()         unattached + 1; reaching the bound: full
 *                      (times_full + 1; a note naming the bound)
 *   settled()          a connection not attached attached, or closed:
 *                      unattached - 1; below the bound: not full
 *   fd_freed()         a connection closed: not no_fds
 *   out_of_fds(now, why)
 *                      no_fds until now + retry (fd_shortages + 1; a
 *                      note naming why and the retry)
 *   tick(now)          no_fds whose time has passed: not no_fds
 *   next_timer()       the end of no_fds, if it holds
 */
#ifndef RVT_AGENT_ACCEPT_GATE_H
#define RVT_AGENT_ACCEPT_GATE_H

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rvt::agent {

class accept_gate {
public:
    using time_point = std::chrono::steady_clock::time_point;

    accept_gate(uint32_t max_unattached, std::chrono::milliseconds retry);

    std::string accepted();
    void settled();
    void fd_freed();
    std::string out_of_fds(time_point now, std::string_view why);

    void tick(time_point now);
    std::optional<time_point> next_timer() const
    {
        return m_no_fds_until;
    }

    bool accepting() const
    {
        return !m_no_fds_until && !full();
    }

    uint32_t unattached() const
    {
        return m_unattached;
    }
    uint32_t max_unattached() const
    {
        return m_max;
    }
    bool full() const
    {
        return m_unattached >= m_max;
    }
    /* Times the bound closed the gate, and accepts that found no
     * descriptor, over the server's life. */
    uint64_t times_full() const
    {
        return m_times_full;
    }
    uint64_t fd_shortages() const
    {
        return m_fd_shortages;
    }

private:
    uint32_t m_max;
    std::chrono::milliseconds m_retry;
    uint32_t m_unattached = 0;
    std::optional<time_point> m_no_fds_until;
    uint64_t m_times_full   = 0;
    uint64_t m_fd_shortages = 0;
};

} // namespace rvt::agent

#endif
