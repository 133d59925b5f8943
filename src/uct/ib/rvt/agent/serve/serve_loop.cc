/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/agent/serve/serve_loop.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <thread>
#include <vector>

namespace rvt::agent {

void serve_clients(engine &e, attach_server &srv,
                   const std::function<std::string(bool human)> &status)
{
    for (const auto &ev : e.serve_clients(0)) {
        srv.answer_status(ev.ticket, status(ev.human));
    }
}

namespace {

using clock = std::chrono::steady_clock;

/* Sleeps until a socket, a completion, a doorbell or a timer; true if a
 * client woke it (its socket or doorbell), which is a client's work. */
bool sleep_until_woken(engine &e, attach_server &srv, std::vector<pollfd> &pfds)
{
    int timeout_ms = 1000;
    for (auto t : {e.next_timer(), srv.next_timer()}) {
        if (!t) {
            continue;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                *t - clock::now());
        timeout_ms = static_cast<int>(
                std::clamp<int64_t>(left.count() + 1, 0, timeout_ms));
    }
    pfds.clear();
    srv.poll_fds(pfds);
    const size_t sockets = pfds.size();
    pfds.push_back({e.completion_fd(), POLLIN, 0});
    pfds.push_back({e.wake_fd(), POLLIN, 0});
    if (poll(pfds.data(), pfds.size(), timeout_ms) <= 0) {
        return false;
    }
    const auto woke_it = [](const pollfd &p) { return p.revents != 0; };
    return std::any_of(pfds.begin(), pfds.begin() + sockets, woke_it) ||
           woke_it(pfds.back());
}

/* Whether the kernel runs this thread SCHED_FIFO now (cpu_policy's
 * class_is: the flag SCHED_RESET_ON_FORK comes back or-ed in). */
bool runs_fifo()
{
    const int policy = sched_getscheduler(0);
    return policy >= 0 && (policy & ~SCHED_RESET_ON_FORK) == SCHED_FIFO;
}

} // namespace

void serve_loop(engine &e, attach_server &srv, const cpu_policy::settings &cpu,
                const serve_loop_owner &owner)
{
    cpu_policy policy(cpu, clock::now());
    policy.class_is(runs_fifo());
    /* while busy, the socket is served as the pacer says (its comment) */
    serve_pacer pacer;
    pacer.served_at(clock::now());
    const auto serve_when_due = [&](clock::time_point now) {
        if (pacer.due(now)) {
            serve_clients(e, srv, owner.status);
        }
    };
    std::vector<pollfd> pfds;
    for (;;) {
        auto now = clock::now();
        (void)e.progress(now);
        const auto step = policy.passed(now, e.served_clients());
        if (owner.stop(now, false, false)) {
            return;
        }
        switch (step) {
        case cpu_policy::step::poll:
            serve_when_due(now);
            continue;
        case cpu_policy::step::yield:
            serve_when_due(now);
            sched_yield();
            continue;
        case cpu_policy::step::pause: {
            std::this_thread::sleep_for(cpu.pause);
            const auto back = clock::now();
            policy.resumed(back);
            serve_when_due(back);
            continue;
        }
        case cpu_policy::step::sleep:
            break;
        }
        serve_clients(e, srv, owner.status);
        pacer.served_at(now);
        if (owner.stop(now, true, srv.attached_count() == 0 && e.idle())) {
            return;
        }
        /* sleep: announce it, then look once more (engine.h) */
        if (!e.prepare_sleep()) {
            continue;
        }
        if (e.progress(clock::now())) {
            /* it did not sleep: a client's work found in this look is
             * work like any other pass's */
            e.end_sleep();
            policy.woke(clock::now(), e.served_clients());
            continue;
        }
        const bool by_client = sleep_until_woken(e, srv, pfds);
        e.end_sleep();
        policy.woke(clock::now(), by_client);
        policy.class_is(runs_fifo());
        serve_clients(e, srv, owner.status);
    }
}

} // namespace rvt::agent
