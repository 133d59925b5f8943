/* SPDX-License-Identifier: BSD-3-Clause */
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
#include "processes.h"
#include "test_paths.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace rvt::test {

using namespace std::chrono_literals;

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

    /* rvtd's command line for this test (device, job key, --linger=2),
     * then `extra`; behind `launcher`'s words (setpriv, taskset), if any */
    std::vector<std::string>
    rvtd_argv(const std::vector<std::string> &extra,
              std::vector<std::string> launcher = {}) const
    {
        std::vector<std::string> argv = std::move(launcher);
        argv.insert(argv.end(),
                    {test::rvtd_path, "--device=" + m_dev,
                     std::string("--job-key=") + test::job_key, "--linger=2"});
        argv.insert(argv.end(), extra.begin(), extra.end());
        return argv;
    }

    pid_t start_rvtd(std::vector<std::string> extra = {}, rlim_t max_fds = 0)
    {
        pid_t p = spawn(rvtd_argv(extra), m_runtime, m_log, max_fds);
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
