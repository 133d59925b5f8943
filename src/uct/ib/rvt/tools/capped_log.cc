/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvtd's log file under a size cap (see capped_log.h for the table).
 */
#include "uct/ib/rvt/tools/capped_log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace rvt::tools {

capped_log::capped_log(int fd, uint64_t max_bytes, frame_fn frame) :
    m_fd(fd), m_max_bytes(max_bytes), m_frame(std::move(frame))
{
}

void capped_log::append(std::string_view line)
{
    while (!line.empty()) {
        const ssize_t n = ::write(m_fd, line.data(), line.size());
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return; /* nowhere left to say it */
        }
        line.remove_prefix(static_cast<size_t>(n));
    }
}

void capped_log::restart(uint64_t size, size_t next)
{
    ++m_restarts;
    if (::ftruncate(m_fd, 0) != 0) {
        return; /* appended past the cap: better than nothing */
    }
    /* an fd without O_APPEND (a shell's `>`) would write at its old
     * offset, leaving a hole of that size */
    (void)::lseek(m_fd, 0, SEEK_SET);
    append(m_frame("log: restarted: the file had " + std::to_string(size) +
                   " bytes and the next line (" + std::to_string(next) +
                   " bytes) would take it past --max-log-size (" +
                   std::to_string(m_max_bytes) +
                   " bytes): the lines before "
                   "are gone (restart " +
                   std::to_string(m_restarts) + ")"));
    for (const std::string &kept : m_kept) {
        append(kept);
    }
}

void capped_log::write(std::string_view message)
{
    put(m_frame(message));
}

void capped_log::put(std::string line)
{
    struct stat st;
    if (::fstat(m_fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        append(line); /* a terminal or a pipe: nothing to cap */
        return;
    }
    const auto size = static_cast<uint64_t>(st.st_size);
    if (size + line.size() > m_max_bytes) {
        restart(size, line.size());
        /* what the restart wrote, and room for this line */
        const uint64_t used = ::fstat(m_fd, &st) == 0 ?
                                      static_cast<uint64_t>(st.st_size) :
                                      0;
        const uint64_t room = m_max_bytes > used ? m_max_bytes - used : 0;
        if (line.size() > room && room > 0) {
            line.resize(static_cast<size_t>(room));
            line.back() = '\n'; /* cut, still a line */
        }
    }
    append(line);
}

void capped_log::write_kept(std::string_view message)
{
    std::string line = m_frame(message);
    put(line);
    if (m_kept.size() == max_kept) {
        m_kept.erase(m_kept.begin());
    }
    m_kept.push_back(std::move(line));
}

} // namespace rvt::tools
