/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Turning a program into a daemon that still tells whoever started it how
 * its start-up went, so that `rvtd --daemon` can exit 0 only once the
 * agent really serves, and 1 with the reason when it cannot.
 *
 *   starter (the caller)          intermediate               daemon
 *   ---------------------         ------------               ------
 *   socketpair, fork ------------> setsid, fork ------------> returns from
 *   reads the socket               _exit(0) (or reports a     daemonize()
 *   until a word or EOF            failed fork, _exit(1))      ...start-up...
 *   _exit(0) on "ready"                                        ready() or
 *   print why, _exit(1) on                                     failed(why)
 *     "failed"
 *   EOF without a word: "rvtd exited during start-up (status N)", _exit(1)
 *
 * The daemon is in a session of its own (the intermediate's), without a
 * controlling terminal, and is deliberately not the session's leader, so
 * that opening a terminal can never give it one. The starter makes itself
 * a child subreaper (PR_SET_CHILD_SUBREAPER) before the first fork: when
 * the intermediate exits, the daemon becomes the starter's child, so the
 * starter can collect the exit status of a daemon that dies before saying
 * a word; once the starter exits, the daemon passes to init as usual.
 *
 * The word travels on a Unix socket pair rather than a pipe so that
 * writing it never raises SIGPIPE in the daemon when the starter is gone.
 */
#ifndef RVT_TOOLS_DAEMON_H
#define RVT_TOOLS_DAEMON_H

#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/common/unique_fd.h"

#include <string>
#include <string_view>

namespace rvt::tools {

/* Held by the daemon; tells the process that started it how start-up went.
 * The first word counts, later calls do nothing; destroying the notifier
 * without a word is a start-up failure for the starter. */
class daemon_notifier {
public:
    daemon_notifier(daemon_notifier &&) noexcept            = default;
    daemon_notifier &operator=(daemon_notifier &&) noexcept = default;

    /* Start-up done: the starter exits 0. */
    void ready() noexcept;
    /* The starter prints why (at most 4000 bytes of it) and a newline to
     * its stderr and exits 1. */
    void failed(std::string_view why) noexcept;
    /* True until ready() or failed() has been called. */
    bool pending() const noexcept
    {
        return bool(m_sock);
    }

private:
    friend result<daemon_notifier> daemonize(const std::string &log_path);
    friend result<daemon_notifier>
    notify_in_foreground(int fd, const std::string &log_path);
    explicit daemon_notifier(unique_fd sock) noexcept;

    unique_fd m_sock;
};

/* Double fork + setsid: the calling process waits for the daemon's word
 * and then _exit()s (0 on ready(), 1 on failed() after printing the reason
 * to its stderr, 1 with "rvtd exited during start-up (status N)" when the
 * daemon dies or closes the socket without a word). Returns only in the
 * daemon: its own session, cwd "/", umask 077, stdin /dev/null, stdout and
 * stderr appended to log_path (created 0600; an existing file must be a
 * regular file of ours, and is set to 0600). stdio buffers are flushed
 * before the fork. A failure before the fork (log file, /dev/null, socket
 * pair, fork itself) is returned in the calling process, which then goes
 * on as before. Other descriptors are left as they are: open them
 * O_CLOEXEC, and see daemon.cc on locks held across the fork. */
result<daemon_notifier> daemonize(const std::string &log_path);

/* For a starter that keeps the program as its child instead (rvtd
 * --notify-fd, which Slurm's extern step runs through spank_rvt.so): no
 * fork and no new session, but the rest as daemonize() leaves the
 * daemon: cwd "/", umask 077, stdin /dev/null, stdout and stderr appended
 * to log_path (checked as above), and the notifier's words (daemon.cc)
 * written to fd, a Unix stream socket the starter holds the other end
 * of, made close-on-exec here. A failure is returned, and also sent to
 * the starter as failed()'s word, except when fd is no such socket (then
 * fd is left as it was). */
result<daemon_notifier>
notify_in_foreground(int fd, const std::string &log_path);

/* failed()'s word on fd, for a start-up that ends before
 * notify_in_foreground() (another agent holds the key, ...). */
void notify_failed(int fd, std::string_view why) noexcept;

} // namespace rvt::tools

#endif
