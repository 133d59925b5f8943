/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvtd's settings table, as parser, help and config (rvtd_settings.h).
 */
#include "uct/ib/rvt/tools/rvtd_settings.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <optional>

namespace rvt::tools {

namespace {

/* `v` as a whole number from lo to hi; nothing if it is not one (empty,
 * other characters, out of range). Each caller names what it expected. */
std::optional<long> whole_within(std::string_view v, long lo, long hi)
{
    const std::string text(v);
    char *end = nullptr;
    errno     = 0;
    long x    = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno == ERANGE || x < lo || x > hi) {
        return std::nullopt;
    }
    return x;
}

} // namespace

void derive(rvtd_config &c)
{
    /* the receive buffers hold one inbound slot; each QP carries what a
     * work request carries inline */
    c.nic.buffer_size = c.caps.slot_size;
    c.nic.inline_size = c.caps.inline_size;
    /* room for every receive and every QP's sends, 16 WRs of a chain each */
    c.nic.cq_size = c.nic.srq_size +
                    16 * c.nic.qp.sq_depth * c.engine.peers.num_qps;
    c.engine.peers.keepalive_timeout = 2 * c.engine.peers.keepalive_interval;
}

std::optional<std::string> conflict(const rvtd_config &c)
{
    if (c.daemon && c.notify.fd >= 0) {
        return "--daemon and --notify-fd exclude each other: detach, or stay "
               "the starter's child";
    }
    if (c.engine.shallow_sq_depth > c.nic.qp.sq_depth) {
        return "--shallow-sq-depth=" +
               std::to_string(c.engine.shallow_sq_depth) +
               ": expected at most --sq-depth (" +
               std::to_string(c.nic.qp.sq_depth) + ")";
    }
    return std::nullopt;
}

result<notify_descriptor> parse_notify_fd(std::string_view v)
{
    if (v == "none") {
        return notify_descriptor{};
    }
    const auto x = whole_within(v, notify_descriptor::lowest, INT_MAX);
    if (!x) {
        return failure{"--notify-fd=" + std::string(v) +
                       ": expected none or a descriptor number from " +
                       std::to_string(notify_descriptor::lowest) + " to " +
                       std::to_string(INT_MAX)};
    }
    return notify_descriptor{static_cast<int>(*x)};
}

std::string to_string(notify_descriptor d)
{
    return d.fd < 0 ? "none" : std::to_string(d.fd);
}

std::string range_text(long lo, long hi)
{
    return std::to_string(lo) + (lo < 0 ? " to " : "-") + std::to_string(hi);
}

std::string help_text(const setting &s)
{
    std::string h(s.help);
    if (s.what == setting::kind::number) {
        h += " (" + range_text(s.lo, s.hi) + ")";
    }
    return h;
}

std::string default_text(const setting &s)
{
    static const rvtd_config defaults{};
    std::string v = s.show(defaults);
    return v.empty() ? std::string(s.none) : v;
}

result<long> whole_number(const setting &s, std::string_view v)
{
    const auto x = whole_within(v, s.lo, s.hi);
    if (!x) {
        return failure{"--" + std::string(s.name) + "=" + std::string(v) +
                       ": expected a whole number from " +
                       std::to_string(s.lo) + " to " + std::to_string(s.hi)};
    }
    return *x;
}

std::vector<option> options_of(std::span<const setting> table, rvtd_config &c)
{
    std::vector<option> out;
    out.reserve(table.size());
    for (const setting &s : table) {
        out.push_back(
                {std::string(s.name), std::string(s.value), default_text(s),
                 help_text(s),
                 [&s, &c](std::string_view v) { return s.set(s, c, v); }});
    }
    return out;
}

} // namespace rvt::tools
