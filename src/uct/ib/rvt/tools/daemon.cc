/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Daemonizing with a start-up report (daemon.h).
 *
 * The report channel carries, in order:
 *   'P' <daemon pid, decimal> '\n'    from the daemon, before daemonize()
 *                                     returns in it
 *   'R'                               ready()
 *   'F' <reason up to EOF>            failed(), or the intermediate when
 *                                     setsid() or the second fork fails
 *
 * notify_in_foreground() sends no 'P': its starter forked the program and
 * knows its pid. The starter reads up to 'R', or 'F' and the reason to
 * EOF; EOF without a word is a program that ended (or closed the socket)
 * during start-up.
 *
 * Call daemonize() while the process has a single thread: fork() copies
 * only the calling thread, and the intermediate and the daemon go on with
 * ordinary (allocating) code.
 *
 * Descriptors the caller holds are inherited by the daemon. The starter
 * and the intermediate leave only through _exit(): no destructor and no
 * atexit handler runs in them, so nothing they inherited is released or
 * rewritten on their way out. That is what lets an agent take its flock()
 * instance lock before daemonizing (the lock belongs to the open file
 * description, which the daemon's copy of the fd keeps alive after the
 * other two copies are closed by their exit).
 */
#include "uct/ib/rvt/tools/daemon.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace rvt::tools {

namespace {

constexpr size_t max_reason = 4000;
/* How long the starter waits for a daemon that closed the channel without
 * a word to exit, before saying that it still runs. */
constexpr int silent_exit_wait_ms = 2000;

std::string errno_text()
{
    return std::strerror(errno);
}

/* Our descriptors must not be 0, 1 or 2, which the daemon's dup2()s
 * replace: a caller started with stdio closed would otherwise lose one. */
bool move_above_stdio(unique_fd &fd)
{
    if (fd.get() > STDERR_FILENO) {
        return true;
    }
    int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    if (moved < 0) {
        return false;
    }
    fd.reset(moved);
    return true;
}

void send_all(int fd, const char *data, size_t len) noexcept
{
    while (len > 0) {
        ssize_t n = ::send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return; /* the starter is gone: nobody to tell */
        }
        data += n;
        len -= size_t(n);
    }
}

void write_all(int fd, const char *data, size_t len) noexcept
{
    while (len > 0) {
        ssize_t n = ::write(fd, data, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return;
        }
        data += n;
        len -= size_t(n);
    }
}

void sleep_ms(long ms)
{
    timespec ts{ms / 1000, (ms % 1000) * 1000000L};
    while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

std::string status_text(int status)
{
    if (WIFEXITED(status)) {
        return "status " + std::to_string(WEXITSTATUS(status));
    }
    if (WIFSIGNALED(status)) {
        return "killed by signal " + std::to_string(WTERMSIG(status));
    }
    return "wait status " + std::to_string(status);
}

/* After the channel closed without a word: why, from the exit status of
 * the daemon (our child since the intermediate exited: subreaper) or, if
 * it never said its pid, of the intermediate. */
std::string silent_end(int intermediate_status, pid_t daemon)
{
    if (daemon <= 0) {
        return "rvtd exited during start-up (" +
               status_text(intermediate_status) + ")";
    }
    for (int waited = 0;; waited += 10) {
        int status = 0;
        pid_t r    = ::waitpid(daemon, &status, WNOHANG);
        if (r == daemon) {
            return "rvtd exited during start-up (" + status_text(status) + ")";
        }
        if (r < 0 && errno != EINTR) {
            return "rvtd exited during start-up (status unknown: waitpid " +
                   std::to_string(daemon) + " failed: " + errno_text() + ")";
        }
        if (waited >= silent_exit_wait_ms) {
            return "rvtd closed its start-up channel without a word (pid " +
                   std::to_string(daemon) + " still running)";
        }
        sleep_ms(10);
    }
}

/* The calling process after the first fork: waits for the word, exits. */
[[noreturn]] void starter(unique_fd sock, pid_t intermediate)
{
    std::string got;
    pid_t daemon = 0;
    char buf[512];
    for (;;) {
        /* Take the daemon's pid off the front as soon as it is whole. */
        if (daemon == 0 && !got.empty() && got[0] == 'P') {
            size_t nl = got.find('\n');
            if (nl != std::string::npos) {
                daemon = static_cast<pid_t>(std::atol(got.c_str() + 1));
                got.erase(0, nl + 1);
            }
        }
        if (!got.empty() && got[0] == 'R') {
            ::_exit(0);
        }
        ssize_t n = ::recv(sock.get(), buf, sizeof(buf), 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break; /* EOF (or an error, which ends the channel as well) */
        }
        got.append(buf, size_t(n));
    }
    int intermediate_status = 0;
    while (::waitpid(intermediate, &intermediate_status, 0) < 0 &&
           errno == EINTR) {
    }
    std::string why;
    if (!got.empty() && got[0] == 'F') {
        why = got.substr(1);
    } else {
        why = silent_end(intermediate_status, daemon);
    }
    why += '\n';
    write_all(STDERR_FILENO, why.data(), why.size());
    ::_exit(1);
}

/* The last words of the intermediate, or of the daemon before
 * daemonize() returns in it, when start-up cannot go on. */
[[noreturn]] void abandon(int sock, const std::string &what)
{
    std::string word = "F" + what + ": " + errno_text();
    send_all(sock, word.data(), word.size());
    ::_exit(1);
}

/* The log file: appended to, 0600, a regular file of ours. */
result<unique_fd> open_log(const std::string &path)
{
    /* O_NONBLOCK: a FIFO planted at path must not hang us in open(). */
    unique_fd fd(::open(path.c_str(),
                        O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW |
                                O_NOCTTY | O_NONBLOCK,
                        0600));
    if (!fd) {
        return failure{"daemon log " + path + ": open failed: " + errno_text()};
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) {
        return failure{"daemon log " + path +
                       ": fstat failed: " + errno_text()};
    }
    if (!S_ISREG(st.st_mode)) {
        return failure{"daemon log " + path +
                       " is not a regular file: expected a log file"};
    }
    if (st.st_uid != ::geteuid()) {
        return failure{"daemon log " + path + " is owned by uid " +
                       std::to_string(st.st_uid) + ": expected uid " +
                       std::to_string(::geteuid())};
    }
    if ((st.st_mode & 07777) != 0600 && ::fchmod(fd.get(), 0600) != 0) {
        return failure{"daemon log " + path +
                       ": chmod 0600 failed: " + errno_text()};
    }
    if (::fcntl(fd.get(), F_SETFL, O_APPEND) != 0) {
        return failure{"daemon log " + path +
                       ": clearing O_NONBLOCK failed: " + errno_text()};
    }
    if (!move_above_stdio(fd)) {
        return failure{"daemon log " + path + ": dup failed: " + errno_text()};
    }
    return fd;
}

} // namespace

daemon_notifier::daemon_notifier(unique_fd sock) noexcept :
    m_sock(std::move(sock))
{
}

void daemon_notifier::ready() noexcept
{
    if (m_sock) {
        send_all(m_sock.get(), "R", 1);
        m_sock.reset();
    }
}

void daemon_notifier::failed(std::string_view why) noexcept
{
    if (m_sock) {
        notify_failed(m_sock.get(), why);
        m_sock.reset();
    }
}

result<daemon_notifier> daemonize(const std::string &log_path)
{
    auto log = open_log(log_path);
    if (!log) {
        return failure{log.error()};
    }
    unique_fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!null || !move_above_stdio(null)) {
        return failure{"daemonize: cannot open /dev/null: " + errno_text()};
    }
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        return failure{"daemonize: socketpair failed: " + errno_text()};
    }
    unique_fd starter_end(pair[0]);
    unique_fd daemon_end(pair[1]);
    if (!move_above_stdio(starter_end) || !move_above_stdio(daemon_end)) {
        return failure{"daemonize: dup failed: " + errno_text()};
    }

    /* The starter must be able to wait for the intermediate and, through
     * the subreaper attribute (not inherited by children), for the
     * daemon: set both before the fork, since the intermediate may exit
     * before the starter runs again. */
    struct sigaction dfl      = {};
    struct sigaction old_chld = {};
    dfl.sa_handler            = SIG_DFL;
    int old_subreaper         = 0;
    ::sigaction(SIGCHLD, &dfl, &old_chld);
    ::prctl(PR_GET_CHILD_SUBREAPER, &old_subreaper, 0, 0, 0);
    ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    std::fflush(nullptr);

    pid_t intermediate = ::fork();
    if (intermediate < 0) {
        int err = errno;
        ::sigaction(SIGCHLD, &old_chld, nullptr);
        ::prctl(PR_SET_CHILD_SUBREAPER, old_subreaper, 0, 0, 0);
        return failure{"daemonize: fork failed: " +
                       std::string(std::strerror(err))};
    }
    if (intermediate > 0) {
        daemon_end.reset();
        starter(std::move(starter_end), intermediate);
    }

    /* The intermediate: a new session, then the daemon outside its
     * leadership. */
    starter_end.reset();
    if (::setsid() < 0) {
        abandon(daemon_end.get(), "rvtd: setsid failed");
    }
    pid_t daemon = ::fork();
    if (daemon < 0) {
        abandon(daemon_end.get(), "rvtd: second fork failed");
    }
    if (daemon > 0) {
        ::_exit(0);
    }

    /* The daemon: the caller's SIGCHLD disposition again (the subreaper
     * attribute was not inherited). */
    ::sigaction(SIGCHLD, &old_chld, nullptr);
    if (::chdir("/") != 0) {
        abandon(daemon_end.get(), "rvtd: chdir / failed");
    }
    ::umask(077);
    if (::dup2(null.get(), STDIN_FILENO) < 0 ||
        ::dup2(log.value().get(), STDOUT_FILENO) < 0 ||
        ::dup2(log.value().get(), STDERR_FILENO) < 0) {
        abandon(daemon_end.get(),
                "rvtd: redirecting stdio to " + log_path + " failed");
    }
    null.reset();
    std::string hello = "P" + std::to_string(::getpid()) + "\n";
    send_all(daemon_end.get(), hello.data(), hello.size());
    return daemon_notifier(std::move(daemon_end));
}

void notify_failed(int fd, std::string_view why) noexcept
{
    char word[1 + max_reason];
    size_t len = std::min(why.size(), max_reason);
    word[0]    = 'F';
    std::memcpy(word + 1, why.data(), len);
    send_all(fd, word, 1 + len);
}

result<daemon_notifier>
notify_in_foreground(int fd, const std::string &log_path)
{
    int type      = 0;
    socklen_t len = sizeof(type);
    sockaddr_storage addr{};
    socklen_t alen = sizeof(addr);
    if (fd <= STDERR_FILENO ||
        ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
        type != SOCK_STREAM ||
        ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &alen) != 0 ||
        addr.ss_family != AF_UNIX) {
        return failure{"notify descriptor " + std::to_string(fd) +
                       ": expected a Unix stream socket above 2 (the "
                       "starter's socketpair)"};
    }
    daemon_notifier notifier{unique_fd(fd)};
    /* from here on a failure is also the starter's word */
    auto fail = [&notifier](const std::string &why) {
        notifier.failed(why);
        return failure{why};
    };
    if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
        return fail("notify descriptor " + std::to_string(fd) +
                    ": close-on-exec failed: " + errno_text());
    }
    auto log = open_log(log_path);
    if (!log) {
        return fail(log.error());
    }
    unique_fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!null || !move_above_stdio(null)) {
        return fail("notify: cannot open /dev/null: " + errno_text());
    }
    if (::chdir("/") != 0) {
        return fail("notify: chdir / failed: " + errno_text());
    }
    std::fflush(nullptr);
    if (::dup2(null.get(), STDIN_FILENO) < 0 ||
        ::dup2(log.value().get(), STDOUT_FILENO) < 0 ||
        ::dup2(log.value().get(), STDERR_FILENO) < 0) {
        return fail("notify: redirecting stdio to " + log_path +
                    " failed: " + errno_text());
    }
    ::umask(077);
    return notifier;
}

} // namespace rvt::tools
