/*
 * The rvtd daemon under test (real verbs, in the testbed): a fixture that
 * starts it in a runtime directory of its own, with its log, and the
 * helpers its tests share. Skips without a device (RXE_DEV unset).
 */
#ifndef RVT_RVTD_FIXTURE_H
#define RVT_RVTD_FIXTURE_H

#include "uct/ib/rvt/common/job_key.h"
#include "uct/ib/rvt/common/runtime_dir.h"

#include "shared_pd_protocol.h"
#include "test_paths.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace rvt::test {

using namespace std::chrono_literals;

inline std::string slurp(const std::string &path)
{
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/* Starts `argv` with XDG_RUNTIME_DIR=runtime and stderr to log_path;
 * with `max_fds`, under that RLIMIT_NOFILE. */
inline pid_t spawn(const std::vector<std::string> &argv,
                   const std::string &runtime, const std::string &log_path,
                   rlim_t max_fds = 0)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(fd, 2);
        close(fd);
        if (max_fds != 0) {
            const rlimit lim{max_fds, max_fds};
            setrlimit(RLIMIT_NOFILE, &lim);
        }
        setenv("XDG_RUNTIME_DIR", runtime.c_str(), 1);
        std::vector<char *> args;
        for (const auto &a : argv) {
            args.push_back(const_cast<char *>(a.c_str()));
        }
        args.push_back(nullptr);
        execv(args[0], args.data());
        _exit(127);
    }
    return pid;
}

/* Waits for pid to exit, at most `limit`; returns its exit status or -1. */
inline int wait_exit(pid_t pid, std::chrono::milliseconds limit)
{
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        int st  = 0;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        std::this_thread::sleep_for(50ms);
    }
    return -1;
}

template<class Pred> bool eventually(Pred pred, std::chrono::milliseconds limit)
{
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (pred()) {
            return true;
        }
        std::this_thread::sleep_for(50ms);
    }
    return false;
}

class rvtd_test : public ::testing::Test {
protected:
    void SetUp() override
    {
        const char *dev = std::getenv("RXE_DEV");
        if (dev == nullptr || *dev == '\0') {
            GTEST_SKIP()
                    << "no RDMA device (RXE_DEV unset): run in the testbed";
        }
        m_dev       = dev;
        char tmpl[] = "/tmp/rvtd-test.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        m_runtime = tmpl;
        m_log     = m_runtime + "/rvtd.log";
        auto dir = ensure_runtime_dir(runtime_base(env_from({{"XDG_RUNTIME_DIR",
                                                              m_runtime}}),
                                                   getuid()),
                                      getuid());
        ASSERT_TRUE(dir.ok()) << dir.error();
        auto paths = make_agent_paths(dir.value(), m_dev, 1, test::job_key);
        ASSERT_TRUE(paths.ok()) << paths.error();
        m_socket = paths.value().socket;
    }

    void TearDown() override
    {
        for (pid_t p : m_pids) {
            kill(p, SIGKILL);
            waitpid(p, nullptr, 0);
        }
        if (!m_runtime.empty()) {
            std::filesystem::remove_all(m_runtime);
        }
    }

    pid_t start_rvtd(std::vector<std::string> extra = {}, rlim_t max_fds = 0)
    {
        std::vector<std::string> argv = {test::rvtd_path, "--device=" + m_dev,
                                         std::string("--job-key=") +
                                                 test::job_key,
                                         "--linger=2"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        pid_t p = spawn(argv, m_runtime, m_log, max_fds);
        m_pids.push_back(p);
        return p;
    }

    /* start_rvtd, then waits for its socket */
    pid_t start_serving(std::vector<std::string> extra = {}, rlim_t max_fds = 0)
    {
        const pid_t p = start_rvtd(std::move(extra), max_fds);
        EXPECT_TRUE(
                eventually([&] { return std::filesystem::exists(m_socket); },
                           20s))
                << "no socket at " << m_socket << "; log:\n"
                << slurp(m_log);
        return p;
    }

    void forget(pid_t p)
    {
        std::erase(m_pids, p);
    }

    std::string m_dev, m_runtime, m_log, m_socket;
    std::vector<pid_t> m_pids;
};


} // namespace rvt::test

#endif
