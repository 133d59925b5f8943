/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's loop, as rvtd runs it (and the host benchmark, to measure
 * it): the data path every pass, the attach socket as serve_pacer says
 * while busy and at every idle pass, and between passes what cpu_policy
 * says: poll again, hand the core over (yield), pause (a real-time agent
 * past its busy limit) or sleep.
 *
 * Sleeping: announce it (engine::prepare_sleep), look once more, then
 * poll() on the attach socket (POLLOUT too, where a reader is behind),
 * the completion channel and the clients' doorbell eventfd, at most until
 * the engine's or the attach server's next timer (its accept gate
 * retrying after running out of descriptors) or a second; a wake-up
 * serves the socket at once.
 *
 * The owner decides what the loop cannot: how a status request is
 * answered (rvtd describes itself, its device and its clients), and when
 * to stop, asked after every pass and at every idle pass (with whether
 * the agent is idle: no client attached and nothing in flight, for
 * rvtd's --linger).
 */
#ifndef RVT_AGENT_SERVE_LOOP_H
#define RVT_AGENT_SERVE_LOOP_H

#include "uct/ib/rvt/agent/attach/attach_server.h"
#include "uct/ib/rvt/agent/engine/engine.h"
#include "uct/ib/rvt/agent/serve/cpu_policy.h"

#include <chrono>
#include <functional>

namespace rvt::agent {

struct serve_loop_owner {
    using time_point = std::chrono::steady_clock::time_point;
    /* the answer to a status request (attach_server::answer_status) */
    std::function<std::string(bool human)> status;
    /* after each pass (idle: false) and at each idle pass before sleeping
     * (idle: no client attached, nothing in flight): true to stop */
    std::function<bool(time_point now, bool at_idle_pass, bool idle)> stop;
};

/* One pass over the attach socket: the engine acts on what the clients
 * did (engine::serve_clients); status requests are answered with
 * `status`. The loop's, and the loopback agent's when a test pumps it. */
void serve_clients(engine &e, attach_server &srv,
                   const std::function<std::string(bool human)> &status);

/* Runs until owner.stop says so. */
void serve_loop(engine &e, attach_server &srv, const cpu_policy::settings &cpu,
                const serve_loop_owner &owner);

} // namespace rvt::agent

#endif
