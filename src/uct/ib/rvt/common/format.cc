/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/common/format.h"

#include <cstdarg>
#include <cstdio>

namespace rvt {

std::string format(const char *fmt, ...)
{
    /* most results are one line: try a stack buffer, then size exactly */
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    va_list again;
    va_copy(again, ap);
    const int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0) {
        va_end(again);
        return "(format error)";
    }
    if (static_cast<size_t>(n) < sizeof(buf)) {
        va_end(again);
        return std::string(buf, static_cast<size_t>(n));
    }
    std::string out(static_cast<size_t>(n), '\0');
    std::vsnprintf(out.data(), out.size() + 1, fmt, again);
    va_end(again);
    return out;
}

} // namespace rvt
