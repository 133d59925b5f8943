/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the two simulations of many nodes share (rvt_scale_sim: N real
 * agents; rvt_hub_sim: one real agent and N far ones): their command
 * line's numbers, the heap in use, CPU clocks, and the agent's refusals
 * as its status counts them.
 */
#ifndef RVT_TEST_BENCH_SIM_COMMON_H
#define RVT_TEST_BENCH_SIM_COMMON_H

#include <errno.h> /* program_invocation_short_name */
#include <malloc.h>
#include <time.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rvt::bench {

/* What went wrong with the command line or the setup: said, and exit 2. */
[[noreturn]] inline void die(const std::string &why)
{
    std::fprintf(stderr, "%s: %s\n", program_invocation_short_name,
                 why.c_str());
    std::exit(2);
}

/* The text after "--name=" when arg is that option, else null. */
inline const char *value_of(const char *arg, const char *name)
{
    const std::string a = arg, p = std::string("--") + name + "=";
    return a.rfind(p, 0) == 0 ? arg + p.size() : nullptr;
}

/* --name=text as a number from low to high, or die naming both. */
inline unsigned
number(const char *text, const char *name, unsigned low, unsigned high)
{
    char *end             = nullptr;
    const unsigned long v = std::strtoul(text, &end, 10);
    if (end == text || *end != '\0' || v < low || v > high) {
        die(std::string("--") + name + "=" + text + ": expected " +
            std::to_string(low) + " to " + std::to_string(high));
    }
    return static_cast<unsigned>(v);
}

/* --name=N,N,...: each a number from low to high. */
inline std::vector<unsigned>
numbers(const std::string &list, const char *name, unsigned low, unsigned high)
{
    std::vector<unsigned> out;
    for (size_t pos = 0; pos <= list.size();) {
        const size_t end       = std::min(list.find(',', pos), list.size());
        const std::string item = list.substr(pos, end - pos);
        out.push_back(number(item.c_str(), name, low, high));
        pos = end + 1;
    }
    return out;
}

/* Heap and mmapped chunks in use, bytes. */
inline uint64_t heap_in_use()
{
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

/* CPU time of this process or thread, seconds. */
inline double cpu_seconds(clockid_t which)
{
    timespec ts{};
    clock_gettime(which, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

/* A counter of the status, or nothing when this engine has none. */
inline std::optional<uint64_t>
counter(const nlohmann::ordered_json &j, const char *a, const char *b)
{
    const auto s = j.find(a);
    if (s == j.end() || !s->contains(b)) {
        return std::nullopt;
    }
    return s->at(b).get<uint64_t>();
}

/* Every refusal an agent counts (engine_status.cc): a datagram not
 * believed, not checked or not answered, a peer not made. passes_cut
 * refuses nothing (the rest of the pass's datagrams wait) but is a
 * budget reached, so it is here too. */
inline constexpr std::pair<const char *, const char *> refusals[] = {
        {"handshake", "unauthenticated"}, {"handshake", "unsealed"},
        {"handshake", "malformed"},       {"handshake", "forged"},
        {"handshake", "own_address"},     {"handshake", "unknown_sender"},
        {"handshake", "unchecked"},       {"handshake", "holds"},
        {"handshake", "throttled"},       {"handshake", "crowded"},
        {"handshake", "passes_cut"},      {"handshake", "half_open_refused"},
        {"handshake", "table_full"},      {"share", "refused_peers"}};
inline constexpr size_t num_refusals = std::size(refusals);

} // namespace rvt::bench

#endif
