/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of starting the agent on demand (client/launch.h), without
 * RDMA: rvtd is test/gtest/unit/fake_rvtd (see there), found through
 * $RVT_RVTD, and the runtime directory is under a private
 * $XDG_RUNTIME_DIR. Checked: an agent is started when no socket exists
 * or the socket is stale, and used when one listens; the command line
 * rvtd gets; a missing rvtd, an rvtd that fails, and a daemon that dies
 * without a word give failures naming the socket and carrying rvtd's
 * words; a lock held by someone else is waited for until the timeout;
 * concurrent starters end with exactly one agent; attach_or_start gets
 * past the start to the attach step; an ignored SIGCHLD does not get in
 * the way; and no child is left unreaped.
 */
#include "uct/ib/rvt/client/launch.h"

#include "uct/ib/rvt/agent/attach/instance_lock.h"
#include "uct/ib/rvt/common/runtime_dir.h"
#include "uct/ib/rvt/common/unique_fd.h"
#include "uct/ib/rvt/common/unix_socket.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#if !defined(RVT_FAKE_RVTD) || !defined(RVT_BINDIR)
#error "RVT_FAKE_RVTD must name the built fake_rvtd, RVT_BINDIR the bindir"
#endif

using namespace rvt;
using client::agent_start;
using client::ensure_agent;
using client::launch_options;

namespace {

std::string read_file(const std::string &path)
{
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

size_t count(const std::string &text, const std::string &what)
{
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos;
         at        = text.find(what, at + 1)) {
        ++n;
    }
    return n;
}

bool contains(const std::string &text, const std::string &what)
{
    return text.find(what) != std::string::npos;
}

/* No child of ours is left, running or a zombie. */
bool no_children()
{
    return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD;
}

class launch_fixture : public ::testing::Test {
protected:
    static constexpr const char *vars[] = {
            "XDG_RUNTIME_DIR",     "RVT_RVTD",       "RVT_JOB_KEY",
            "UCX_RVT_JOB_KEY",     "FAKE_RVTD_MODE", "FAKE_RVTD_DELAY_MS",
            "FAKE_RVTD_LINGER_MS", "PATH",           "RVT_JOB_SECRET",
            "RVT_JOB_SECRET_FILE"};

    void SetUp() override
    {
        for (const char *v : vars) {
            const char *old = std::getenv(v);
            m_saved[v] = old ? std::optional<std::string>(old) : std::nullopt;
        }
        char tmpl[] = "/tmp/rvt-launch-test.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        m_base = tmpl;
        ::setenv("XDG_RUNTIME_DIR", m_base.c_str(), 1);
        ::setenv("RVT_RVTD", RVT_FAKE_RVTD, 1);
        ::unsetenv("RVT_JOB_KEY");
        ::unsetenv("UCX_RVT_JOB_KEY");
        ::unsetenv("FAKE_RVTD_MODE");
        ::unsetenv("FAKE_RVTD_DELAY_MS");
        /* the fakes leave when the directory goes; this is a backstop */
        ::setenv("FAKE_RVTD_LINGER_MS", "10000", 1);

        auto dir = ensure_runtime_dir(m_base, ::getuid());
        ASSERT_TRUE(dir.ok()) << dir.error();
        auto paths = make_agent_paths(dir.value(), "rxe9", 1, "launchtest");
        ASSERT_TRUE(paths.ok()) << paths.error();
        m_paths = paths.value();

        m_opt.device     = "rxe9";
        m_opt.port       = 1;
        m_opt.job_key    = "launchtest";
        m_opt.extra_args = {"--linger=5"};
        m_opt.timeout    = std::chrono::milliseconds(10000);
    }

    void TearDown() override
    {
        /* a fake agent exits once its socket file is gone */
        std::filesystem::remove_all(m_base);
        for (const auto &[name, value] : m_saved) {
            if (value) {
                ::setenv(name.c_str(), value->c_str(), 1);
            } else {
                ::unsetenv(name.c_str());
            }
        }
        EXPECT_TRUE(no_children());
    }

    std::string log()
    {
        return read_file(m_paths.log);
    }

    bool listening()
    {
        auto sock = connect_unix(m_paths.socket);
        return sock.ok();
    }

    std::map<std::string, std::optional<std::string>> m_saved;
    std::string m_base;
    agent_paths m_paths;
    launch_options m_opt;
};

} // namespace

TEST_F(launch_fixture, starts_an_agent_when_none_listens)
{
    ASSERT_FALSE(listening());
    auto r = ensure_agent(m_opt, m_paths.socket);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value(), agent_start::started);
    EXPECT_TRUE(listening());
    EXPECT_TRUE(no_children());
    std::string text = log();
    EXPECT_TRUE(contains(text, "fake_rvtd: args: --daemon --device=rxe9 "
                               "--port=1 --job-key=launchtest "
                               "--linger=5\n"))
            << text;
    EXPECT_EQ(count(text, "fake_rvtd: serving " + m_paths.socket), 1u) << text;

    /* the lock taken before daemonizing is the daemon's now that its
     * starter has exited */
    auto lock = agent::instance_lock::acquire(m_paths.lock);
    ASSERT_FALSE(lock.ok());
    EXPECT_TRUE(contains(lock.error(), "another agent holds it"))
            << lock.error();
}

/* A NUL-separated /proc file as one string, NULs as spaces. */
static std::string proc_text(pid_t pid, const char *what)
{
    std::string t = read_file("/proc/" + std::to_string(pid) + "/" + what);
    std::replace(t.begin(), t.end(), '\0', ' ');
    return t;
}

/* The job's secret reaches the agent the module starts through the
 * environment it inherits, never through an argument: every local user
 * reads /proc/PID/cmdline. */
TEST_F(launch_fixture, the_job_secret_is_in_no_command_line)
{
    const std::string secret = "a-secret-nobody-else-may-read-0123";
    const std::string file   = m_base + "/job.secret";
    ::setenv("RVT_JOB_SECRET", secret.c_str(), 1);
    ::setenv("RVT_JOB_SECRET_FILE", file.c_str(), 1);
    auto r = ensure_agent(m_opt, m_paths.socket);
    ASSERT_TRUE(r.ok()) << r.error();
    const std::string text = log();
    const std::string mark = "fake_rvtd: serving " + m_paths.socket + " (pid ";
    const size_t at        = text.find(mark);
    ASSERT_NE(at, std::string::npos) << text;
    const pid_t agent = std::atoi(text.c_str() + at + mark.size());
    ASSERT_GT(agent, 0) << text;

    const std::string argv = proc_text(agent, "cmdline");
    EXPECT_TRUE(contains(argv, "--job-key=launchtest")) << argv;
    EXPECT_FALSE(contains(argv, secret)) << argv;
    EXPECT_FALSE(contains(argv, "secret")) << argv;
    EXPECT_FALSE(contains(proc_text(::getpid(), "cmdline"), secret))
            << "the launcher's own";
    /* how it does reach the agent */
    const std::string env = proc_text(agent, "environ");
    EXPECT_TRUE(contains(env, "RVT_JOB_SECRET_FILE=" + file + " ")) << env;
    EXPECT_TRUE(contains(env, "RVT_JOB_SECRET=" + secret + " "));
}

/* With SIGCHLD ignored, rvtd's exit status is lost: the socket decides. */
TEST_F(launch_fixture, works_when_sigchld_is_ignored)
{
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
        ::signal(SIGCHLD, SIG_IGN);
        auto r = ensure_agent(m_opt, m_paths.socket);
        if (!r.ok()) {
            std::fprintf(stderr, "%s\n", r.error().c_str());
        }
        ::_exit(r.ok() && r.value() == agent_start::started ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    EXPECT_TRUE(listening());
}

TEST_F(launch_fixture, a_listening_agent_is_used_as_it_is)
{
    ASSERT_TRUE(ensure_agent(m_opt, m_paths.socket).ok());
    /* a second start would fail */
    ::setenv("FAKE_RVTD_MODE", "error", 1);
    auto r = ensure_agent(m_opt, m_paths.socket);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value(), agent_start::already_running);
    EXPECT_EQ(count(log(), "fake_rvtd: serving"), 1u) << log();
}

TEST_F(launch_fixture, a_stale_socket_is_replaced)
{
    {
        auto addr = unix_address(m_paths.socket);
        ASSERT_TRUE(addr.ok());
        unique_fd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        ASSERT_EQ(::bind(s.get(),
                         reinterpret_cast<const sockaddr *>(&addr.value()),
                         sizeof(sockaddr_un)),
                  0);
    } /* closed: the file stays, nobody listens */
    ASSERT_TRUE(std::filesystem::exists(m_paths.socket));
    ASSERT_FALSE(listening());
    auto r = ensure_agent(m_opt, m_paths.socket);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value(), agent_start::started);
    EXPECT_TRUE(listening());
}

TEST_F(launch_fixture, job_key_and_rvtd_default_from_the_environment)
{
    /* rvtd from PATH when nothing else names one (unless installed) */
    if (::access(RVT_BINDIR "/rvtd", X_OK) == 0) {
        GTEST_SKIP() << "an installed rvtd would be chosen first";
    }
    std::string bin = m_base + "/bin";
    ASSERT_TRUE(std::filesystem::create_directory(bin));
    std::filesystem::create_symlink(RVT_FAKE_RVTD, bin + "/rvtd");
    ::setenv("PATH", bin.c_str(), 1);
    ::unsetenv("RVT_RVTD");
    ::setenv("RVT_JOB_KEY", "fromenv", 1);
    m_opt.job_key.clear();
    m_opt.extra_args.clear();

    auto dir   = ensure_runtime_dir(m_base, ::getuid());
    auto paths = make_agent_paths(dir.value(), "rxe9", 1, "fromenv");
    ASSERT_TRUE(paths.ok()) << paths.error();
    auto r = ensure_agent(m_opt, paths.value().socket);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value(), agent_start::started);
    std::string text = read_file(paths.value().log);
    EXPECT_TRUE(contains(text, "args: --daemon --device=rxe9 --port=1 "
                               "--job-key=fromenv\n"))
            << text;
}

TEST_F(launch_fixture, a_missing_rvtd_is_named)
{
    m_opt.rvtd_path = m_base + "/no-such-rvtd";
    auto r          = ensure_agent(m_opt, m_paths.socket);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.error(), m_paths.socket)) << r.error();
    EXPECT_TRUE(contains(r.error(), "cannot run " + m_opt.rvtd_path))
            << r.error();
    EXPECT_TRUE(contains(r.error(), "No such file")) << r.error();

    ::setenv("RVT_RVTD", (m_base + "/also-missing").c_str(), 1);
    m_opt.rvtd_path.clear();
    r = ensure_agent(m_opt, m_paths.socket);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.error(), m_base + "/also-missing (from $RVT_RVTD)"))
            << r.error();
}

TEST_F(launch_fixture, a_failing_rvtd_is_quoted)
{
    ::setenv("FAKE_RVTD_MODE", "error", 1);
    auto r = ensure_agent(m_opt, m_paths.socket);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.error(), "start agent for " + m_paths.socket))
            << r.error();
    EXPECT_TRUE(contains(r.error(), "exited with status 1: fake_rvtd: "
                                    "cannot open device rxe9: no such "
                                    "device"))
            << r.error();
}

TEST_F(launch_fixture, a_daemon_dying_in_start_up_is_reported)
{
    ::setenv("FAKE_RVTD_MODE", "silent", 1);
    auto r = ensure_agent(m_opt, m_paths.socket);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.error(), m_paths.socket)) << r.error();
    EXPECT_TRUE(contains(r.error(), "exited with status 1: rvtd exited "
                                    "during start-up (status 3)"))
            << r.error();
}

TEST_F(launch_fixture, a_lock_held_elsewhere_is_waited_for_until_timeout)
{
    ::setenv("FAKE_RVTD_MODE", "held", 1);
    m_opt.timeout = std::chrono::milliseconds(1500);
    auto t0       = std::chrono::steady_clock::now();
    auto r        = ensure_agent(m_opt, m_paths.socket);
    auto took     = std::chrono::steady_clock::now() - t0;
    ASSERT_FALSE(r.ok());
    EXPECT_GE(took, m_opt.timeout);
    EXPECT_LT(took, m_opt.timeout + std::chrono::seconds(3));
    EXPECT_TRUE(contains(r.error(), m_paths.socket)) << r.error();
    EXPECT_TRUE(contains(r.error(), "no agent listens there after 1500 ms"))
            << r.error();
    EXPECT_TRUE(contains(r.error(), "another agent holds it (pid 4242)"))
            << r.error();
}

TEST_F(launch_fixture, concurrent_starters_make_one_agent)
{
    ::setenv("FAKE_RVTD_DELAY_MS", "300", 1); /* all of them race */
    constexpr int n = 8;
    std::vector<std::optional<result<agent_start>>> results(n);
    std::vector<std::thread> threads;
    std::atomic<bool> go{false};
    for (int i = 0; i < n; ++i) {
        threads.emplace_back([&, i] {
            while (!go) {
                std::this_thread::yield();
            }
            results[i].emplace(ensure_agent(m_opt, m_paths.socket));
        });
    }
    go = true;
    for (auto &t : threads) {
        t.join();
    }
    int started = 0;
    for (const auto &r : results) {
        ASSERT_TRUE(r->ok()) << r->error();
        started += r->value() == agent_start::started;
    }
    EXPECT_EQ(started, 1);
    EXPECT_TRUE(listening());
    std::string text = log();
    EXPECT_EQ(count(text, "fake_rvtd: serving"), 1u) << text;
}

TEST_F(launch_fixture, attach_or_start_gets_to_the_attach_step)
{
    /* the fake closes every connection: attaching fails, starting not */
    auto r = client::attach_or_start(m_opt);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.error(), "attach to agent at " + m_paths.socket))
            << r.error();
    EXPECT_FALSE(contains(r.error(), "start agent")) << r.error();
    EXPECT_EQ(count(log(), "fake_rvtd: serving"), 1u) << log();
}

TEST_F(launch_fixture, attach_or_start_names_what_is_wrong)
{
    m_opt.device = "bad/name";
    auto r       = client::attach_or_start(m_opt);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.error(), "start agent on bad/name:1: device name"))
            << r.error();

    m_opt.device = "rxe9";
    ::setenv("FAKE_RVTD_MODE", "error", 1);
    r = client::attach_or_start(m_opt);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(contains(r.error(), "start agent for " + m_paths.socket))
            << r.error();
}

TEST(parse_agent_args, options_split_at_spaces_and_tabs)
{
    auto none = rvt::client::parse_agent_args("  ");
    ASSERT_TRUE(none) << none.error();
    EXPECT_TRUE(none.value().empty());
    auto two = rvt::client::parse_agent_args(
            " --priority=fifo:10\t --spin-us=20 --daemonic-x ");
    ASSERT_TRUE(two) << two.error();
    EXPECT_EQ(two.value(),
              (std::vector<std::string>{"--priority=fifo:10", "--spin-us=20",
                                        "--daemonic-x"}));
}

TEST(parse_agent_args, a_word_that_is_no_option_is_named)
{
    for (const char *bad : {"fifo", "-x", "--", "--=3", "--spin-us=20 20"}) {
        auto r = rvt::client::parse_agent_args(bad);
        ASSERT_FALSE(r) << bad;
        EXPECT_NE(r.error().find("expected --OPTION or --OPTION=VALUE"),
                  std::string::npos)
                << r.error();
    }
}

TEST(parse_agent_args, the_launchers_own_options_are_refused_by_name)
{
    for (const char *own :
         {"--daemon", "--device=mlx5_0", "--port=2", "--job-key=other"}) {
        auto r = rvt::client::parse_agent_args(std::string("--linger=5 ") +
                                               own);
        ASSERT_FALSE(r) << own;
        EXPECT_NE(r.error().find(std::string("agent option '") + own + "'"),
                  std::string::npos)
                << r.error();
        EXPECT_NE(r.error().find("is the launcher's"), std::string::npos);
    }
}
