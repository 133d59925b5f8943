/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A per-message trace of the data path: where each message spends its
 * time between a process, its agent and the device. Off by default; when
 * off, the engine and the client session hold no trace and pay one
 * predictable branch per stage. When on, the first `capacity` events are
 * kept in memory (no allocation, no I/O on the data path) and written out
 * once, as text: by rvtd when it stops (--trace-events, --trace-file), by
 * a client session when it closes (RVT_TRACE=FILE[:EVENTS] in its
 * environment), or by whoever owns the engine (the host benchmark).
 *
 * An event is a stage, its time (CLOCK_MONOTONIC, ns: one clock for every
 * process of a host, and for every node of the testbed, which share one
 * kernel) and what it concerns. Per stage:
 *
 *   stage     when                                  key
 *   (client, the session)
 *   submit    a work request entered the work ring    its wr_id
 *   reap      its completion left the completion ring its wr_id
 *   read      an inbound entry was peeked             the immediate
 *   (agent, the engine)
 *   pop       a work request left the client's ring  the client's wr_id
 *   post      the nic accepted its WR                the client's wr_id
 *   sent      its completion was polled              the client's wr_id
 *   complete  its completion entered the client's    the client's wr_id
 *             completion ring
 *   receive   a receive completion was polled        the immediate
 *   deliver   the message entered the client's       the immediate
 *             inbound ring
 *
 * A reader lines events up per message; for a ping-pong (one message in
 * flight) time order alone does it (tools/rvt-trace-report).
 */
#ifndef RVT_COMMON_TRACE_H
#define RVT_COMMON_TRACE_H

#include <time.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace rvt {

enum class trace_stage : uint8_t {
    submit,
    reap,
    read,
    pop,
    post,
    sent,
    complete,
    receive,
    deliver,
};
inline constexpr uint8_t trace_stage_limit = 9;

constexpr std::string_view to_string(trace_stage s)
{
    constexpr std::string_view names[trace_stage_limit] = {
            "submit", "reap",     "read",    "pop",    "post",
            "sent",   "complete", "receive", "deliver"};
    return names[static_cast<uint8_t>(s)];
}

struct trace_event {
    uint64_t ns;
    uint64_t key; /* wr_id, or the immediate */
    uint32_t client; /* the client index it concerns */
    trace_stage stage;
};

/* CLOCK_MONOTONIC in ns: what every trace of a host is stamped with. */
inline uint64_t trace_now()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

class trace {
public:
    /* `source` names the writer in every line: "agent", "client". */
    trace(size_t capacity, std::string_view source) : m_source(source)
    {
        m_events.reserve(capacity);
    }

    void record(trace_stage stage, uint32_t client, uint64_t key,
                uint64_t ns = trace_now())
    {
        if (m_events.size() < m_events.capacity()) {
            m_events.push_back({ns, key, client, stage});
        } else {
            ++m_dropped;
        }
    }

    const std::vector<trace_event> &events() const
    {
        return m_events;
    }
    uint64_t dropped() const
    {
        return m_dropped;
    }

    /* One line per event: "<ns> <source> <stage> <client> <key>", the
     * format tools/rvt-trace-report reads. */
    void write(std::FILE *out) const
    {
        for (const trace_event &e : m_events) {
            std::fprintf(out, "%llu %s %.*s %u %llu\n",
                         static_cast<unsigned long long>(e.ns),
                         m_source.c_str(),
                         static_cast<int>(to_string(e.stage).size()),
                         to_string(e.stage).data(), e.client,
                         static_cast<unsigned long long>(e.key));
        }
    }

private:
    std::string m_source;
    std::vector<trace_event> m_events;
    uint64_t m_dropped = 0;
};

} // namespace rvt

#endif
