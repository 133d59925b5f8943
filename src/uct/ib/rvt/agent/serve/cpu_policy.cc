/* SPDX-License-Identifier: BSD-3-Clause */
#include "cpu_policy.h"

#include <charconv>

namespace rvt::agent {

namespace {

/* "PREFIX:N" with N in [lo, hi], or nothing */
bool level_of(std::string_view text, std::string_view prefix, int lo, int hi,
              int &out)
{
    if (text.substr(0, prefix.size()) != prefix) {
        return false;
    }
    const std::string_view n = text.substr(prefix.size());
    int x                    = 0;
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), x);
    if (n.empty() || ec != std::errc{} || end != n.data() + n.size() ||
        x < lo || x > hi) {
        return false;
    }
    out = x;
    return true;
}

} // namespace

result<priority> parse_priority(std::string_view text)
{
    priority p;
    if (text == "normal") {
        return p;
    }
    if (level_of(text, "nice:", -20, 19, p.level)) {
        p.what = priority::kind::nice;
        return p;
    }
    if (level_of(text, "fifo:", 1, 99, p.level)) {
        p.what = priority::kind::fifo;
        return p;
    }
    return failure{"--priority=" + std::string(text) +
                   ": expected normal, nice:N (N from -20 to 19) or fifo:N "
                   "(N from 1 to 99)"};
}

std::string to_string(const priority &p)
{
    switch (p.what) {
    case priority::kind::normal:
        return "normal";
    case priority::kind::nice:
        return "nice:" + std::to_string(p.level);
    case priority::kind::fifo:
        return "fifo:" + std::to_string(p.level);
    }
    return "unknown";
}

cpu_policy::cpu_policy(const settings &s, time_point now) :
    m_settings(s), m_awake_since(now), m_last_work(now)
{
}

cpu_policy::step cpu_policy::passed(time_point now, bool worked)
{
    if (worked) {
        m_last_work = now;
    } else if (now - m_last_work >= m_settings.spin) {
        return step::sleep;
    }
    if (m_settings.realtime && now - m_awake_since >= m_settings.busy_limit) {
        ++m_pauses;
        return step::pause;
    }
    if (worked || m_settings.realtime || !m_settings.yield_when_idle) {
        return step::poll;
    }
    return step::yield;
}

void cpu_policy::woke(time_point now, bool client)
{
    m_awake_since = now;
    if (client) {
        m_last_work = now;
    }
}

void cpu_policy::resumed(time_point now)
{
    m_awake_since = now;
}

void cpu_policy::class_is(bool realtime)
{
    m_settings.realtime = realtime;
}

} // namespace rvt::agent
