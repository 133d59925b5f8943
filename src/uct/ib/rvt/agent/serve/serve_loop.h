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
 * The owner decides what the loop cannot, and the loop calls nobody: it
 * hands the owner a turn and the owner acts on it. next() runs the loop
 * until the owner has something to decide and returns a turn: after each
 * pass (the data path and cpu_policy's step), and at each idle pass after
 * serving the socket, before sleeping. A turn says when it is, whether it
 * is an idle pass and then whether the agent is idle (no client attached
 * and nothing in flight: rvtd's --linger), and carries the status
 * requests the socket brought since the last turn, which the owner
 * answers (answer(): rvtd describes itself, its device and its clients)
 * before it calls next() again, so that no request waits across a sleep
 * or a pause. The owner stops by not calling next() again; rvtd looks at
 * its signal flag at every turn and at its linger time at idle passes.
 *
 *     serve_loop loop(e, srv, cpu);
 *     for (;;) {
 *         const serve_loop::turn t = loop.next();
 *         for (const auto &r : t.status_requests)
 *             loop.answer(r.ticket, status_text(r.human));
 *         if (stopping(t)) break;
 *     }
 */
#ifndef RVT_AGENT_SERVE_LOOP_H
#define RVT_AGENT_SERVE_LOOP_H

#include "uct/ib/rvt/agent/attach/attach_server.h"
#include "uct/ib/rvt/agent/engine/engine.h"
#include "uct/ib/rvt/agent/serve/cpu_policy.h"

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace rvt::agent {

class serve_loop {
public:
    using clock      = std::chrono::steady_clock;
    using time_point = clock::time_point;

    /* A connection (rvt-status) asks for the status text, human or JSON
     * (attach_event_kind::status_request). */
    struct status_request {
        uint64_t ticket = 0;
        bool human      = false;
    };

    /* What the owner decides on, between next() and the next next(). */
    struct turn {
        time_point now; /* the pass's */
        /* the idle pass: the socket served, the loop sleeps next */
        bool idle_pass = false;
        /* at an idle pass: no client attached and nothing in flight */
        bool idle = false;
        /* since the last turn, in order: answer each before next() */
        std::vector<status_request> status_requests;
    };

    /* The loop over `e`, which serves `srv` (engine::serve), sharing the
     * core as `cpu` says; its clock starts now. */
    serve_loop(engine &e, attach_server &srv, const cpu_policy::settings &cpu);
    serve_loop(const serve_loop &)            = delete;
    serve_loop &operator=(const serve_loop &) = delete;

    /* Runs to the next turn (above). */
    turn next();
    /* Answers status request `ticket` with `text`
     * (attach_server::answer_status). */
    void answer(uint64_t ticket, const std::string &text);

private:
    /* where next() goes on from: the last turn */
    enum class after {
        start, /* none yet */
        pass, /* a pass's turn: its step comes next */
        idle_pass, /* the idle pass's turn: the loop sleeps next */
    };

    /* One pass over the attach socket (engine::serve_clients), its status
     * requests kept for the next turn. */
    void serve_clients();
    void serve_when_due(time_point now);
    /* The last pass's step, poll, yield or pause: the socket if due. */
    void take_step();
    /* After the idle pass: announce the sleep, look once more, sleep
     * until woken, serve the socket. */
    void sleep();
    /* Sleeps until a socket, a completion, a doorbell or a timer; true if
     * a client woke it (its socket or doorbell), which is a client's
     * work. */
    bool sleep_until_woken();
    turn make_turn(time_point now, bool idle_pass, bool idle);

    engine &m_e;
    attach_server &m_srv;
    cpu_policy m_policy;
    /* while busy, the socket is served as the pacer says (its comment) */
    serve_pacer m_pacer;
    after m_after           = after::start;
    cpu_policy::step m_step = cpu_policy::step::poll; /* the last pass's */
    time_point m_now; /* the last pass's */
    std::vector<status_request> m_requests; /* since the last turn */
    std::vector<pollfd> m_pfds;
};

} // namespace rvt::agent

#endif
