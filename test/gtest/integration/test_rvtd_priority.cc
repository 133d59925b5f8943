/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvtd --priority (agent/serve/cpu_policy.h) against a real rvtd in the
 * testbed: each mode runs as asked, says so in its log, falls back to
 * normal with a reason where the permission is missing, and a SCHED_FIFO
 * agent kept awake still leaves the rank on its core a share of it.
 */
#include "rvtd_fixture.h"

#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <atomic>
#include <cstdio>

using namespace rvt;
using namespace rvt::test;

namespace {

/* What /proc/PID/stat says of its scheduling: nice (field 19),
 * rt_priority (40), policy (41); CPU time (14 + 15) in clock ticks. */
struct sched_state {
    long nice        = 0;
    long rt_priority = 0;
    long policy      = -1;
    long cpu_ticks   = 0;
};

sched_state sched_of(pid_t pid)
{
    const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
    sched_state s;
    const auto close = stat.rfind(')');
    if (close == std::string::npos) {
        return s;
    }
    std::istringstream in(stat.substr(close + 2));
    std::string field;
    for (int n = 3; in >> field; ++n) { /* field 3 is the state */
        if (n == 14 || n == 15) {
            s.cpu_ticks += std::stol(field);
        } else if (n == 19) {
            s.nice = std::stol(field);
        } else if (n == 40) {
            s.rt_priority = std::stol(field);
        } else if (n == 41) {
            s.policy = std::stol(field);
        }
    }
    return s;
}

/* A rank's stand-in: a process that spins on `cpu` until killed. */
pid_t spinner_on(int cpu)
{
    const pid_t pid = fork();
    if (pid == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof(set), &set);
        std::atomic<uint64_t> n{0};
        for (;;) {
            n.fetch_add(1, std::memory_order_relaxed);
        }
    }
    return pid;
}

/* Opens and closes a connection to the agent's socket: a wake-up. */
void knock(const std::string &socket)
{
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", socket.c_str());
    (void)connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a));
    close(fd);
}

/* the log line rvtd writes once it has asked for --priority */
bool said_priority(const std::string &log)
{
    return eventually(
            [&] { return slurp(log).find("--priority=") != std::string::npos; },
            20s);
}

TEST_F(rvtd_test, fifo_runs_sched_fifo_and_says_so)
{
    const pid_t p = start_serving(
            {"--priority=fifo:7", "--spin-us=20", "--linger=0"});
    ASSERT_TRUE(said_priority(m_log)) << slurp(m_log);
    const sched_state s = sched_of(p);
    EXPECT_EQ(s.policy, SCHED_FIFO);
    EXPECT_EQ(s.rt_priority, 7);
    EXPECT_NE(slurp(m_log).find("--priority=fifo:7: running SCHED_FIFO 7"),
              std::string::npos)
            << slurp(m_log);
}

TEST_F(rvtd_test, nice_runs_at_that_nice_and_normal_is_untouched)
{
    const pid_t p = start_serving({"--priority=nice:-5", "--linger=0"});
    ASSERT_TRUE(said_priority(m_log)) << slurp(m_log);
    EXPECT_EQ(sched_of(p).nice, -5);
    EXPECT_EQ(sched_of(p).policy, SCHED_OTHER);
    EXPECT_NE(slurp(m_log).find("--priority=nice:-5: running at nice -5"),
              std::string::npos)
            << slurp(m_log);
}

TEST_F(rvtd_test, without_the_permission_it_runs_normal_and_says_why)
{
    /* CAP_SYS_NICE out of the bounding set: root without it, and
     * RLIMIT_RTPRIO 0 */
    for (const char *asked : {"--priority=fifo:7", "--priority=nice:-5"}) {
        const auto argv       = rvtd_argv({"--linger=0", asked},
                                          {"/usr/bin/setpriv",
                                           "--bounding-set=-sys_nice"});
        const std::string log = m_runtime + "/" + (asked + 11) + ".log";
        const pid_t p         = spawn(argv, m_runtime, log);
        m_pids.push_back(p);
        ASSERT_TRUE(eventually(
                [&] {
                    return slurp(log).find("normal priority") !=
                           std::string::npos;
                },
                20s))
                << slurp(log);
        const sched_state s = sched_of(p);
        EXPECT_EQ(s.policy, SCHED_OTHER) << asked;
        EXPECT_EQ(s.nice, 0) << asked;
        const std::string why = std::string(asked) == "--priority=fifo:7" ?
                                        "needs CAP_SYS_NICE or RLIMIT_RTPRIO" :
                                        "needs CAP_SYS_NICE or RLIMIT_NICE";
        EXPECT_NE(slurp(log).find(std::string(asked) + ": "), std::string::npos)
                << slurp(log);
        EXPECT_NE(slurp(log).find(why + "): running at normal priority"),
                  std::string::npos)
                << slurp(log);
        kill(p, SIGTERM);
        EXPECT_EQ(wait_exit(p, 10s), 0);
        forget(p);
    }
}

/* A SCHED_FIFO agent and a spinning rank on CPU 1, the agent kept awake
 * (spinning 1 s after each wake-up, woken every 200 ms): the share of
 * the CPU the rank gets in 3 s, for two busy limits. */
TEST_F(rvtd_test, a_fifo_agent_kept_awake_still_leaves_the_rank_its_share)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        GTEST_SKIP() << "needs 2 CPUs: the agent and a rank on one, the test "
                        "on the other";
    }
    const auto share = [&](const std::string &limit, const std::string &pause) {
        const auto argv   = rvtd_argv({"--linger=0", "--priority=fifo:5",
                                       "--spin-us=1000000",
                                       "--busy-limit-us=" + limit,
                                       "--busy-pause-us=" + pause},
                                      {"/usr/bin/taskset", "-c", "1"});
        const pid_t agent = spawn(argv, m_runtime, m_log);
        m_pids.push_back(agent);
        EXPECT_TRUE(
                eventually([&] { return std::filesystem::exists(m_socket); },
                           20s))
                << slurp(m_log);
        const pid_t rank = spinner_on(1);
        m_pids.push_back(rank);
        const long before = sched_of(rank).cpu_ticks;
        const auto t0     = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - t0 < 3s) {
            knock(m_socket);
            std::this_thread::sleep_for(200ms);
        }
        const double ticks = static_cast<double>(sched_of(rank).cpu_ticks -
                                                 before);
        const double wall  = std::chrono::duration<double>(
                                    std::chrono::steady_clock::now() - t0)
                                    .count();
        for (pid_t p : {rank, agent}) {
            kill(p, SIGKILL);
            waitpid(p, nullptr, 0);
            forget(p);
        }
        std::filesystem::remove(m_socket);
        return ticks / static_cast<double>(sysconf(_SC_CLK_TCK)) / wall;
    };
    /* at most half of the CPU while awake: 1 ms awake, 1 ms paused */
    const double bounded = share("1000", "1000");
    /* no bound to speak of: 1 s awake, 1 us paused (the kernel's own
     * real-time throttling, 5% by default, is all the rank gets) */
    const double unbounded = share("1000000", "1");
    std::printf("[ INFO     ] the rank's share of its CPU beside a SCHED_FIFO "
                "agent kept awake: %.2f with a 1 ms busy limit and 1 ms "
                "pauses, %.2f without the bound\n",
                bounded, unbounded);
    EXPECT_GE(bounded, 0.3);
    EXPECT_LT(unbounded, bounded / 2) << "the bound is what made the share";
}

} // namespace
