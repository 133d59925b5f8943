#include "uct/ib/rvt/common/format.h"

#include <cstdarg>
#include <cstdio>

namespace rvt {

std::string format(const char *fmt, ...)
{
    char buf[256]; /* reasons are one line */
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return buf;
}

} // namespace rvt
