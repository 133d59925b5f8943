/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of daemonizing (tools/daemon.h). Each test forks a "starter"
 * whose stderr is a pipe to the test; the starter calls daemonize(), and
 * the daemon then runs the test's body and exits by itself. Checked: the
 * starter's exit status and stderr for ready(), failed() and a daemon
 * that dies without a word; the daemon's own session (not as its leader),
 * cwd, umask and stdin; its stdout and stderr appended to the 0600 log;
 * and failures before the fork returned in the caller. notify_in_foreground
 * (rvtd --notify-fd): the child stays in its starter's session, logs
 * as a daemon does, and its starter reads 'R', or 'F' and the reason; a
 * descriptor that is no Unix socket is refused with nothing sent.
 */
#include "uct/ib/rvt/tools/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

using rvt::tools::daemon_notifier;
using rvt::tools::daemonize;

namespace {

/* What the daemon does once daemonize() has returned in it; it exits
 * with the returned status. */
using daemon_body = std::function<int(daemon_notifier &)>;

/* Exit status 99 of the starter: daemonize() returned a failure. */
constexpr int returned_failure = 99;

struct started {
    int status = -1; /* the starter's exit status, -1 if not exited */
    std::string err; /* what it wrote to its stderr */
};

std::string read_file(const std::string &path)
{
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

class daemon_fixture : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/rvt-daemon-test.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        m_dir = tmpl;
        m_log = m_dir + "/rxe0-1.job.log";
    }

    void TearDown() override
    {
        std::filesystem::remove_all(m_dir);
    }

    /* Forks a starter that daemonizes with log and runs body in the
     * daemon; returns once the starter has exited. */
    started start(const std::string &log, const daemon_body &body,
                  mode_t umask_before = 022)
    {
        int p[2];
        EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
        std::fflush(nullptr); /* gtest's buffered output stays ours */
        pid_t pid = ::fork();
        if (pid == 0) {
            ::dup2(p[1], STDERR_FILENO);
            ::close(p[0]);
            ::close(p[1]);
            ::umask(umask_before);
            auto d = daemonize(log);
            if (!d) {
                std::fprintf(stderr, "%s", d.error().c_str());
                std::fflush(stderr);
                ::_exit(returned_failure);
            }
            daemon_notifier n = std::move(d).value();
            int status        = body(n);
            std::fflush(nullptr);
            ::_exit(status);
        }
        ::close(p[1]);
        started s;
        char buf[256];
        ssize_t n;
        while ((n = ::read(p[0], buf, sizeof(buf))) > 0) {
            s.err.append(buf, size_t(n));
        }
        ::close(p[0]);
        int status = 0;
        if (::waitpid(pid, &status, 0) == pid && WIFEXITED(status)) {
            s.status = WEXITSTATUS(status);
        }
        return s;
    }

    /* Waits up to 5 s for the log to contain text. */
    std::string log_with(const std::string &text)
    {
        std::string got;
        for (int i = 0; i < 500; ++i) {
            got = read_file(m_log);
            if (got.find(text) != std::string::npos) {
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return got;
    }

    std::string m_dir;
    std::string m_log;
};

/* "key=value" out of the daemon's report line. */
long field(const std::string &log, const std::string &key)
{
    size_t at = log.find(" " + key + "=");
    if (at == std::string::npos) {
        return -1;
    }
    return std::strtol(log.c_str() + at + key.size() + 2, nullptr, 0);
}

} // namespace

TEST_F(daemon_fixture, ready_lets_the_starter_exit_0)
{
    started s = start(m_log, [](daemon_notifier &n) {
        std::printf("before ready\n");
        std::fflush(stdout);
        n.ready();
        n.failed("too late: ignored");
        std::printf("after ready, pending=%d\n", int(n.pending()));
        std::fflush(stdout);
        return 0;
    });
    EXPECT_EQ(s.status, 0);
    EXPECT_EQ(s.err, "");
    /* the daemon outlives the starter and keeps logging */
    std::string log = log_with("after ready");
    EXPECT_NE(log.find("before ready\nafter ready, pending=0\n"),
              std::string::npos)
            << log;
}

TEST_F(daemon_fixture, failed_is_printed_by_the_starter)
{
    started s = start(m_log, [](daemon_notifier &n) {
        n.failed("x");
        return 0;
    });
    EXPECT_EQ(s.status, 1);
    EXPECT_EQ(s.err, "x\n");

    s = start(m_log, [](daemon_notifier &n) {
        n.failed("agent lock /p: another agent holds it (pid 7)");
        return 1;
    });
    EXPECT_EQ(s.status, 1);
    EXPECT_EQ(s.err, "agent lock /p: another agent holds it (pid 7)\n");
}

TEST_F(daemon_fixture, exit_without_a_word_reports_the_status)
{
    started s = start(m_log, [](daemon_notifier &) { return 3; });
    EXPECT_EQ(s.status, 1);
    EXPECT_EQ(s.err, "rvtd exited during start-up (status 3)\n");

    /* the notifier dropped without a word, then exit */
    s = start(m_log, [](daemon_notifier &n) {
        daemon_notifier gone = std::move(n);
        return 0;
    });
    EXPECT_EQ(s.status, 1);
    EXPECT_EQ(s.err, "rvtd exited during start-up (status 0)\n");

    s = start(m_log, [](daemon_notifier &) {
        ::raise(SIGKILL);
        return 0;
    });
    EXPECT_EQ(s.status, 1);
    EXPECT_EQ(s.err, "rvtd exited during start-up (killed by signal 9)\n");
}

TEST_F(daemon_fixture, daemon_is_detached)
{
    started s = start(m_log, [](daemon_notifier &n) {
        char cwd[256]                = "?";
        [[maybe_unused]] char *c     = ::getcwd(cwd, sizeof(cwd));
        char in[256]                 = {};
        [[maybe_unused]] ssize_t len = ::readlink("/proc/self/fd/0", in,
                                                  sizeof(in) - 1);
        mode_t mask                  = ::umask(0);
        ::umask(mask);
        std::printf("daemon pid=%d sid=%d pgid=%d umask=0%o cwd=%s "
                    "stdin=%s\n",
                    int(::getpid()), int(::getsid(0)), int(::getpgid(0)),
                    unsigned(mask), cwd, in);
        std::fflush(stdout);
        std::fprintf(stderr, "stderr line\n");
        n.ready();
        return 0;
    });
    ASSERT_EQ(s.status, 0) << s.err;
    std::string log = log_with("stderr line");
    long pid = field(log, "pid"), sid = field(log, "sid");
    ASSERT_GT(pid, 0) << log;
    /* a session of its own, without being its leader */
    EXPECT_NE(sid, long(::getsid(0))) << log;
    EXPECT_NE(sid, pid) << log;
    EXPECT_EQ(field(log, "pgid"), sid) << log;
    EXPECT_EQ(field(log, "umask"), 077) << log;
    EXPECT_NE(log.find(" cwd=/ "), std::string::npos) << log;
    EXPECT_NE(log.find(" stdin=/dev/null\n"), std::string::npos) << log;
    EXPECT_NE(log.find("stderr line\n"), std::string::npos) << log;
}

TEST_F(daemon_fixture, log_is_created_0600_whatever_the_umask)
{
    started s = start(
            m_log,
            [](daemon_notifier &n) {
                n.ready();
                return 0;
            },
            0);
    ASSERT_EQ(s.status, 0) << s.err;
    struct stat st;
    ASSERT_EQ(::stat(m_log.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(daemon_fixture, existing_log_is_appended_and_made_0600)
{
    {
        std::ofstream(m_log) << "old line\n";
    }
    ASSERT_EQ(::chmod(m_log.c_str(), 0644), 0);
    started s = start(m_log, [](daemon_notifier &n) {
        std::printf("new line\n");
        std::fflush(stdout);
        n.ready();
        return 0;
    });
    ASSERT_EQ(s.status, 0) << s.err;
    EXPECT_EQ(log_with("new line"), "old line\nnew line\n");
    struct stat st;
    ASSERT_EQ(::stat(m_log.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(daemon_fixture, bad_log_path_fails_before_the_fork)
{
    std::string missing = m_dir + "/none/x.log";
    started s           = start(missing, [](daemon_notifier &n) {
        n.ready();
        return 0;
    });
    EXPECT_EQ(s.status, returned_failure);
    EXPECT_NE(s.err.find("daemon log " + missing + ": open failed"),
              std::string::npos)
            << s.err;

    /* a symbolic link is refused, even to a good file */
    std::string target = m_dir + "/target.log";
    {
        std::ofstream(target) << "";
    }
    ASSERT_EQ(::symlink(target.c_str(), m_log.c_str()), 0);
    s = start(m_log, [](daemon_notifier &n) {
        n.ready();
        return 0;
    });
    EXPECT_EQ(s.status, returned_failure);
    EXPECT_NE(s.err.find("daemon log " + m_log), std::string::npos) << s.err;
    ASSERT_EQ(::unlink(m_log.c_str()), 0);

    /* a FIFO nobody reads: refused at once, never a hang */
    ASSERT_EQ(::mkfifo(m_log.c_str(), 0600), 0);
    s = start(m_log, [](daemon_notifier &n) {
        n.ready();
        return 0;
    });
    EXPECT_EQ(s.status, returned_failure);
    EXPECT_NE(s.err.find("daemon log " + m_log), std::string::npos) << s.err;
}

TEST(daemon, failure_in_the_caller_leaves_it_as_it_was)
{
    /* the caller goes on: in this process itself, no fork happened */
    pid_t self = ::getpid();
    auto d     = daemonize("/nonexistent-dir/x.log");
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(::getpid(), self);
    int subreaper = -1;
    ASSERT_EQ(::prctl(PR_GET_CHILD_SUBREAPER, &subreaper, 0, 0, 0), 0);
    EXPECT_EQ(subreaper, 0);
}

namespace {

/* A child that calls notify_in_foreground(its end of a socket pair, log)
 * and runs body; returns what the starter's end read to EOF, and the
 * child's exit status. */
struct foreground_run {
    std::string word;
    int status = -1;
};

foreground_run
run_in_foreground(const std::string &log,
                  const std::function<int(daemon_notifier &)> &body)
{
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
        ::close(sv[0]);
        /* as a starter hands it over: inherited across exec */
        ::fcntl(sv[1], F_SETFD, 0);
        auto n = rvt::tools::notify_in_foreground(sv[1], log);
        if (!n) {
            ::_exit(returned_failure);
        }
        daemon_notifier notifier = std::move(n).value();
        int status               = body(notifier);
        std::fflush(nullptr);
        ::_exit(status);
    }
    ::close(sv[1]);
    foreground_run r;
    char buf[256];
    ssize_t got;
    while ((got = ::read(sv[0], buf, sizeof(buf))) > 0) {
        r.word.append(buf, size_t(got));
    }
    ::close(sv[0]);
    int status = 0;
    if (::waitpid(pid, &status, 0) == pid && WIFEXITED(status)) {
        r.status = WEXITSTATUS(status);
    }
    return r;
}

} // namespace

TEST_F(daemon_fixture, notify_in_foreground_stays_the_starters_child)
{
    const long starter_sid = long(::getsid(0));
    foreground_run r       = run_in_foreground(m_log, [](daemon_notifier &n) {
        char in[256]                 = {};
        [[maybe_unused]] ssize_t len = ::readlink("/proc/self/fd/0", in,
                                                        sizeof(in) - 1);
        char cwd[256]                = "?";
        [[maybe_unused]] char *c     = ::getcwd(cwd, sizeof(cwd));
        mode_t mask                  = ::umask(0);
        ::umask(mask);
        std::printf("child pid=%d ppid=%d sid=%d umask=0%o cwd=%s "
                                "stdin=%s\n",
                          int(::getpid()), int(::getppid()), int(::getsid(0)),
                          unsigned(mask), cwd, in);
        std::fflush(stdout);
        std::fprintf(stderr, "stderr line\n");
        n.ready();
        n.failed("too late: ignored");
        return 0;
    });
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.word, "R");
    std::string log = read_file(m_log);
    EXPECT_EQ(field(log, "ppid"), long(::getpid())) << log;
    EXPECT_EQ(field(log, "sid"), starter_sid) << log;
    EXPECT_EQ(field(log, "umask"), 077) << log;
    EXPECT_NE(log.find(" cwd=/ "), std::string::npos) << log;
    EXPECT_NE(log.find(" stdin=/dev/null\n"), std::string::npos) << log;
    EXPECT_NE(log.find("stderr line\n"), std::string::npos) << log;
    struct stat st;
    ASSERT_EQ(::stat(m_log.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(daemon_fixture, notify_in_foreground_failures_reach_the_starter)
{
    foreground_run r = run_in_foreground(m_log, [](daemon_notifier &n) {
        n.failed("cannot open device rxe9: no such device");
        return 1;
    });
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.word, "Fcannot open device rxe9: no such device");

    /* the log cannot be opened: said to the starter, then returned */
    std::string missing = m_dir + "/none/x.log";
    r                   = run_in_foreground(missing, [](daemon_notifier &n) {
        n.ready();
        return 0;
    });
    EXPECT_EQ(r.status, returned_failure);
    EXPECT_EQ(r.word.rfind("Fdaemon log " + missing + ": open failed", 0), 0u)
            << r.word;

    /* a word sent before notify_in_foreground() could be reached */
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    rvt::tools::notify_failed(sv[1], "agent lock: held");
    ::close(sv[1]);
    char buf[64] = {};
    ASSERT_GT(::read(sv[0], buf, sizeof(buf) - 1), 0);
    ::close(sv[0]);
    EXPECT_STREQ(buf, "Fagent lock: held");
}

TEST(daemon, notify_in_foreground_refuses_what_is_no_unix_socket)
{
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    auto n = rvt::tools::notify_in_foreground(p[1], "/nonexistent-dir/x.log");
    ASSERT_FALSE(n.ok());
    EXPECT_NE(n.error().find("expected a Unix stream socket"), std::string::npos)
            << n.error();
    /* nothing was written, and the descriptor is still open */
    EXPECT_EQ(::fcntl(p[1], F_GETFD), FD_CLOEXEC);
    ::close(p[1]);
    char c;
    EXPECT_EQ(::read(p[0], &c, 1), 0);
    ::close(p[0]);
    /* stdio is never taken for it */
    EXPECT_FALSE(rvt::tools::notify_in_foreground(STDERR_FILENO, "/x").ok());
}
