/*
 * format(): printf into a std::string, checked by the compiler, so that a
 * reason can never misformat the value it names.
 */
#ifndef RVT_COMMON_FORMAT_H
#define RVT_COMMON_FORMAT_H

#include <string>
#include <string_view>

namespace rvt {

[[gnu::format(printf, 1, 2)]] std::string format(const char *fmt, ...);

/* `v` as a JSON string literal, quotes included; control characters
 * become '?' (status texts hold names and paths, not binary). */
std::string json_string(std::string_view v);

} // namespace rvt

#endif
