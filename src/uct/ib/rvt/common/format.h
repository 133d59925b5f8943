/*
 * format(): printf into a std::string, checked by the compiler, so that a
 * reason can never misformat the value it names.
 */
#ifndef RVT_COMMON_FORMAT_H
#define RVT_COMMON_FORMAT_H

#include <string>

namespace rvt {

[[gnu::format(printf, 1, 2)]] std::string format(const char *fmt, ...);

} // namespace rvt

#endif
