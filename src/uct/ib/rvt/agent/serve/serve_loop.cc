/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/agent/serve/serve_loop.h"

#include <sched.h>

#include <algorithm>
#include <thread>
#include <utility>

namespace rvt::agent {

namespace {

/* Whether the kernel runs this thread SCHED_FIFO now (cpu_policy's
 * class_is: the flag SCHED_RESET_ON_FORK comes back or-ed in). */
bool runs_fifo()
{
    const int policy = sched_getscheduler(0);
    return policy >= 0 && (policy & ~SCHED_RESET_ON_FORK) == SCHED_FIFO;
}

} // namespace

serve_loop::serve_loop(engine &e, attach_server &srv,
                       const cpu_policy::settings &cpu) :
    m_e(e), m_srv(srv), m_policy(cpu, clock::now())
{
    m_policy.class_is(runs_fifo());
    m_pacer.served_at(clock::now());
}

serve_loop::turn serve_loop::next()
{
    switch (m_after) {
    case after::start:
        break;
    case after::pass:
        if (m_step != cpu_policy::step::sleep) {
            take_step();
            break;
        }
        /* the idle pass */
        serve_clients();
        m_pacer.served_at(m_now);
        m_after = after::idle_pass;
        return make_turn(m_now, true,
                         m_srv.attached_count() == 0 && m_e.idle());
    case after::idle_pass:
        sleep();
        break;
    }
    const auto now = clock::now();
    (void)m_e.progress(now);
    m_step  = m_policy.passed(now, m_e.served_clients());
    m_now   = now;
    m_after = after::pass;
    return make_turn(now, false, false);
}

void serve_loop::answer(uint64_t ticket, const std::string &text)
{
    m_srv.answer_status(ticket, text);
}

void serve_loop::serve_clients()
{
    for (const attach_event &ev : m_e.serve_clients(0)) {
        m_requests.push_back({.ticket = ev.ticket, .human = ev.human});
    }
}

void serve_loop::serve_when_due(time_point now)
{
    if (m_pacer.due(now)) {
        serve_clients();
    }
}

void serve_loop::take_step()
{
    switch (m_step) {
    case cpu_policy::step::poll:
        serve_when_due(m_now);
        return;
    case cpu_policy::step::yield:
        serve_when_due(m_now);
        sched_yield();
        return;
    case cpu_policy::step::pause: {
        std::this_thread::sleep_for(m_policy.config().pause);
        const auto back = clock::now();
        m_policy.resumed(back);
        serve_when_due(back);
        return;
    }
    case cpu_policy::step::sleep: /* the idle pass: next() */
        return;
    }
}

void serve_loop::sleep()
{
    /* announce it, then look once more (engine.h) */
    if (!m_e.prepare_sleep()) {
        return;
    }
    if (m_e.progress(clock::now())) {
        /* it did not sleep: a client's work found in this look is work
         * like any other pass's */
        m_e.end_sleep();
        m_policy.woke(clock::now(), m_e.served_clients());
        return;
    }
    const bool by_client = sleep_until_woken();
    m_e.end_sleep();
    m_policy.woke(clock::now(), by_client);
    m_policy.class_is(runs_fifo());
    serve_clients();
}

bool serve_loop::sleep_until_woken()
{
    int timeout_ms = 1000;
    for (auto t : {m_e.next_timer(), m_srv.next_timer()}) {
        if (!t) {
            continue;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                *t - clock::now());
        timeout_ms = static_cast<int>(
                std::clamp<int64_t>(left.count() + 1, 0, timeout_ms));
    }
    m_pfds.clear();
    m_srv.poll_fds(m_pfds);
    const size_t sockets = m_pfds.size();
    m_pfds.push_back({m_e.completion_fd(), POLLIN, 0});
    m_pfds.push_back({m_e.wake_fd(), POLLIN, 0});
    if (poll(m_pfds.data(), m_pfds.size(), timeout_ms) <= 0) {
        return false;
    }
    const auto woke_it = [](const pollfd &p) { return p.revents != 0; };
    return std::any_of(m_pfds.begin(), m_pfds.begin() + sockets, woke_it) ||
           woke_it(m_pfds.back());
}

serve_loop::turn
serve_loop::make_turn(time_point now, bool idle_pass, bool idle)
{
    return {.now             = now,
            .idle_pass       = idle_pass,
            .idle            = idle,
            .status_requests = std::exchange(m_requests, {})};
}

} // namespace rvt::agent
