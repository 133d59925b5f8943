/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the agent's instance lock (agent/attach/instance_lock.h): one
 * holder at a time, within a process and across processes, the refusal
 * naming the holder's pid, release on destruction and on SIGKILL of the
 * holder, and refusal of what is not a plain lock file.
 */
#include "uct/ib/rvt/agent/attach/instance_lock.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

using rvt::agent::instance_lock;

namespace {

std::string read_file(const std::string &path)
{
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

/* Runs body in a child; its return value is the exit status. */
pid_t fork_child(const std::function<int()> &body)
{
    pid_t pid = ::fork();
    if (pid == 0) {
        ::_exit(body());
    }
    return pid;
}

int exit_status(pid_t pid)
{
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        return -1;
    }
    return WEXITSTATUS(status);
}

class instance_lock_fixture : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/rvt-lock-test.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        m_dir  = tmpl;
        m_path = m_dir + "/rxe0-1.job.lock";
    }

    void TearDown() override
    {
        std::filesystem::remove_all(m_dir);
    }

    void expect_held_by(pid_t holder)
    {
        auto again = instance_lock::acquire(m_path);
        ASSERT_FALSE(again.ok())
                << "acquired a lock pid " << holder << " holds";
        EXPECT_NE(again.error().find(m_path), std::string::npos)
                << again.error();
        EXPECT_NE(again.error().find("another agent holds it"),
                  std::string::npos)
                << again.error();
        EXPECT_NE(again.error().find("pid " + std::to_string(holder) + ")"),
                  std::string::npos)
                << again.error();
    }

    std::string m_dir;
    std::string m_path;
};

} // namespace

TEST_F(instance_lock_fixture, creates_0600_and_records_pid)
{
    mode_t old = ::umask(0);
    auto lock  = instance_lock::acquire(m_path);
    ::umask(old);
    ASSERT_TRUE(lock.ok()) << lock.error();
    EXPECT_EQ(lock.value().path(), m_path);

    struct stat st;
    ASSERT_EQ(::lstat(m_path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    EXPECT_EQ(read_file(m_path), std::to_string(::getpid()) + "\n");
}

TEST_F(instance_lock_fixture, fd_is_close_on_exec)
{
    auto lock = instance_lock::acquire(m_path);
    ASSERT_TRUE(lock.ok()) << lock.error();
    int found = 0;
    for (const auto &entry :
         std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        auto target = std::filesystem::read_symlink(entry.path(), ec);
        if (ec || target != m_path) {
            continue;
        }
        int fd = std::stoi(entry.path().filename().string());
        EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC) << "fd " << fd;
        ++found;
    }
    EXPECT_EQ(found, 1);
}

TEST_F(instance_lock_fixture, second_holder_in_same_process_is_refused)
{
    auto first = instance_lock::acquire(m_path);
    ASSERT_TRUE(first.ok()) << first.error();
    expect_held_by(::getpid());
    /* the refusal did not disturb the holder's record */
    EXPECT_EQ(read_file(m_path), std::to_string(::getpid()) + "\n");
}

TEST_F(instance_lock_fixture, released_when_destroyed)
{
    {
        auto first = instance_lock::acquire(m_path);
        ASSERT_TRUE(first.ok()) << first.error();
    }
    auto second = instance_lock::acquire(m_path);
    ASSERT_TRUE(second.ok()) << second.error();
}

TEST_F(instance_lock_fixture, moves_keep_one_holder)
{
    auto r = instance_lock::acquire(m_path);
    ASSERT_TRUE(r.ok()) << r.error();
    instance_lock moved(std::move(r).value());
    expect_held_by(::getpid());

    std::string other_path = m_dir + "/other.lock";
    auto other             = instance_lock::acquire(other_path);
    ASSERT_TRUE(other.ok()) << other.error();
    instance_lock target(std::move(other).value());
    target = std::move(moved); /* releases other_path, takes m_path */
    EXPECT_EQ(target.path(), m_path);
    expect_held_by(::getpid());
    EXPECT_TRUE(instance_lock::acquire(other_path).ok());
}

TEST_F(instance_lock_fixture, another_process_is_refused)
{
    auto lock = instance_lock::acquire(m_path);
    ASSERT_TRUE(lock.ok()) << lock.error();
    pid_t me    = ::getpid();
    pid_t child = fork_child([&] {
        auto r = instance_lock::acquire(m_path);
        if (r.ok()) {
            return 1;
        }
        std::string want = "another agent holds it (pid " + std::to_string(me) +
                           ")";
        return r.error().find(want) == std::string::npos ? 2 : 0;
    });
    ASSERT_GT(child, 0);
    EXPECT_EQ(exit_status(child), 0) << "1: child got the lock, 2: reason "
                                        "did not name the holder";
}

TEST_F(instance_lock_fixture, released_when_holder_is_killed)
{
    int pipefd[2];
    ASSERT_EQ(::pipe2(pipefd, O_CLOEXEC), 0);
    pid_t child = fork_child([&] {
        auto r = instance_lock::acquire(m_path);
        char c = r.ok() ? 'L' : 'F';
        if (::write(pipefd[1], &c, 1) != 1 || !r.ok()) {
            return 1;
        }
        for (;;) {
            ::pause(); /* until SIGKILL: no destructor will run */
        }
    });
    ASSERT_GT(child, 0);
    ::close(pipefd[1]);
    char c = 0;
    ASSERT_EQ(::read(pipefd[0], &c, 1), 1);
    ::close(pipefd[0]);
    ASSERT_EQ(c, 'L') << "child could not take the lock";

    expect_held_by(child);

    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    auto after = instance_lock::acquire(m_path);
    ASSERT_TRUE(after.ok()) << after.error();
    EXPECT_EQ(read_file(m_path), std::to_string(::getpid()) + "\n");
}

/* instance_lock.h: a fork()ed child shares the lock until it too lets go. */
TEST_F(instance_lock_fixture, forked_child_shares_the_lock)
{
    int pipefd[2];
    ASSERT_EQ(::pipe2(pipefd, O_CLOEXEC), 0);
    pid_t child;
    {
        auto lock = instance_lock::acquire(m_path);
        ASSERT_TRUE(lock.ok()) << lock.error();
        child = fork_child([&] {
            char c = 'S';
            if (::write(pipefd[1], &c, 1) != 1) {
                return 1;
            }
            for (;;) {
                ::pause();
            }
        });
        ASSERT_GT(child, 0);
        char c = 0;
        ASSERT_EQ(::read(pipefd[0], &c, 1), 1);
    }
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    EXPECT_FALSE(instance_lock::acquire(m_path).ok());
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    ASSERT_EQ(::waitpid(child, nullptr, 0), child);
    EXPECT_TRUE(instance_lock::acquire(m_path).ok());
}

TEST_F(instance_lock_fixture, symbolic_link_is_refused)
{
    std::string target = m_dir + "/target";
    ASSERT_EQ(::symlink(target.c_str(), m_path.c_str()), 0);
    auto r = instance_lock::acquire(m_path);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find(m_path), std::string::npos) << r.error();
    EXPECT_FALSE(std::filesystem::exists(target)) << "followed the link";
}

TEST_F(instance_lock_fixture, non_regular_files_are_refused)
{
    ASSERT_EQ(::mkfifo(m_path.c_str(), 0600), 0);
    auto fifo = instance_lock::acquire(m_path); /* must not hang either */
    ASSERT_FALSE(fifo.ok());
    EXPECT_NE(fifo.error().find("not a regular file"), std::string::npos)
            << fifo.error();
    ASSERT_EQ(::unlink(m_path.c_str()), 0);

    ASSERT_EQ(::mkdir(m_path.c_str(), 0700), 0);
    auto dir = instance_lock::acquire(m_path);
    ASSERT_FALSE(dir.ok());
    EXPECT_NE(dir.error().find(m_path), std::string::npos) << dir.error();
}

TEST_F(instance_lock_fixture, missing_directory_is_an_error)
{
    auto r = instance_lock::acquire(m_dir + "/none/x.lock");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("open failed"), std::string::npos) << r.error();
}
