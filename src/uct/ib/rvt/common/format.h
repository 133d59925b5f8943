/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * format(): printf into a std::string, checked by the compiler, so that a
 * reason can never misformat the value it names; worth_logging(), the
 * rule that keeps a flood of one kind of event from filling the log; and
 * log_fn, where a part that logs writes its lines.
 */
#ifndef RVT_COMMON_FORMAT_H
#define RVT_COMMON_FORMAT_H

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace rvt {

/* Where a part of the agent (the engine, the attach server, the choice of
 * credentials) writes a log line: one line, no newline; rvtd stamps it
 * and writes it to its log, a test keeps or drops it. */
using log_fn = std::function<void(std::string_view)>;

[[gnu::format(printf, 1, 2)]] std::string format(const char *fmt, ...);

/* Counted drops and refusals are logged at the 1st, 2nd, 4th, 8th, ...
 * one: a flood cannot fill the log. */
constexpr bool worth_logging(uint64_t count)
{
    return (count & (count - 1)) == 0;
}

} // namespace rvt

#endif
