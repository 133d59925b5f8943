/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvtd's log file under a size cap (rvtd --max-log-size). The log lives in
 * the runtime directory, often a tmpfs (memory), so it must stay bounded
 * whatever the agent is made to log; the lines a client or an outsider
 * can cause are also rate-limited at their source (format.h,
 * worth_logging), so the cap is the backstop (docs/operations.md, "The
 * agent's log").
 *
 * At the cap the file is truncated and starts again, rather than stopping:
 * what an admin looks for is usually the latest lines (why the agent
 * exited, what a job saw last), and a log that stopped writing hours
 * before would have none. The restarted file opens with a line saying so
 * (how large it was, the cap, how many restarts), then the lines kept
 * with write_kept() (rvtd: what it serves, so that a restarted log still
 * names its agent), then the line that did not fit. `tail -F` reports the
 * truncation and follows on.
 *
 * Each line goes out in one write(2): the file is opened O_APPEND (daemon.h),
 * so the lines of another writer to the same file (a library's warning on
 * stderr) never land inside one of ours. The size is the file's as
 * fstat(2) reports it before each line, so their bytes count too.
 *
 * Events -> what happens (size: the file's size now, cap: max_bytes,
 * line: frame(message)):
 *
 *   write(m)         fd is no regular file (a terminal, a pipe: rvtd in
 *                    the foreground)   -> the line appended, no cap
 *                    size + line <= cap -> the line appended
 *                    otherwise          -> truncated to 0 and restarted:
 *                                          the restart line, the kept
 *                                          lines, then the line (cut to
 *                                          what the cap leaves, if alone
 *                                          it is larger); restarts + 1
 *   write_kept(m)    as write(m), and the line is kept (at most
 *                    max_kept, the oldest dropped first)
 *
 * Not thread-safe: rvtd logs from its one thread.
 */
#ifndef RVT_TOOLS_CAPPED_LOG_H
#define RVT_TOOLS_CAPPED_LOG_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace rvt::tools {

/* rvtd --max-log-size's default: days of an agent's ordinary lines, a
 * small part of a node's tmpfs. */
inline constexpr uint64_t default_max_log_size = uint64_t{16} << 20;

class capped_log {
public:
    /* A message as a whole line: rvtd's time stamp and name before it,
     * a newline after. */
    using frame_fn = std::function<std::string(std::string_view message)>;

    static constexpr size_t max_kept = 8;

    /* Writes to `fd` (not owned; rvtd's stderr, which daemonize() points at
     * the log file). */
    capped_log(int fd, uint64_t max_bytes, frame_fn frame);

    void write(std::string_view message);
    void write_kept(std::string_view message);

    uint64_t restarts() const
    {
        return m_restarts;
    }
    uint64_t max_bytes() const
    {
        return m_max_bytes;
    }

private:
    /* a whole line, the cap applied */
    void put(std::string line);
    void append(std::string_view line);
    void restart(uint64_t size, size_t next);

    int m_fd;
    uint64_t m_max_bytes;
    frame_fn m_frame;
    std::vector<std::string> m_kept; /* whole lines */
    uint64_t m_restarts = 0;
};

} // namespace rvt::tools

#endif
