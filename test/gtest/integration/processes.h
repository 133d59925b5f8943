/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the integration tests do with processes and time: start a program
 * (an agent, a receiver) in a runtime directory with its stderr to a
 * file, wait for its end, and wait for a condition.
 */
#ifndef RVT_TEST_PROCESSES_H
#define RVT_TEST_PROCESSES_H

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
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
        std::this_thread::sleep_for(20ms);
    }
    return pred();
}

} // namespace rvt::test

#endif
