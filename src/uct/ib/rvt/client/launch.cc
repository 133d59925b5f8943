/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Starting the agent on demand (launch.h).
 */
#include "uct/ib/rvt/client/launch.h"

#include "uct/ib/rvt/common/job_key.h"
#include "uct/ib/rvt/common/runtime_dir.h"
#include "uct/ib/rvt/common/unique_fd.h"
#include "uct/ib/rvt/common/unix_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#ifndef RVT_BINDIR
#error "RVT_BINDIR must name the directory rvtd is installed in"
#endif

extern char **environ;

namespace rvt::client {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

/* What we keep of rvtd's output for a failure message. */
constexpr size_t max_output = 16384;
/* Between two runs of rvtd while waiting for another starter's agent. */
constexpr milliseconds respawn_interval{1000};
constexpr milliseconds first_backoff{10};
constexpr milliseconds max_backoff{200};
/* The text of agent::instance_lock's refusal. */
constexpr std::string_view lock_held = "another agent holds";

std::string errno_text(int err = errno)
{
    return std::strerror(err);
}

milliseconds left(clock::time_point deadline)
{
    return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(
                                             deadline - clock::now()));
}

failure fail(const std::string &socket_path, const std::string &what)
{
    return failure{"start agent for " + socket_path + ": " + what};
}

result<std::string> job_key_of(const launch_options &opt)
{
    if (!opt.job_key.empty()) {
        return opt.job_key;
    }
    auto choice = resolve_job_key(process_env(), ::getuid());
    if (!choice) {
        return failure{choice.error()};
    }
    return choice.value().key;
}

/* The rvtd to run, and where that name came from (launch.h's order). */
struct program {
    std::string path;
    std::string source;
    bool search_path = false;
};

program choose_rvtd(const launch_options &opt)
{
    if (!opt.rvtd_path.empty()) {
        return {opt.rvtd_path, "launch_options::rvtd_path"};
    }
    auto env = process_env()("RVT_RVTD");
    if (env && !env->empty()) {
        return {*env, "$RVT_RVTD"};
    }
    std::string installed = std::string(RVT_BINDIR) + "/rvtd";
    if (::access(installed.c_str(), X_OK) == 0) {
        return {installed, "the installation directory"};
    }
    return {"rvtd", "PATH", true};
}

/* Whether something accepts connections at path: false for no socket file
 * or a stale one (ECONNREFUSED), a failure for any other error. */
result<bool> listening(const std::string &path)
{
    auto addr = unix_address(path);
    if (!addr) {
        return failure{addr.error()};
    }
    for (;;) {
        unique_fd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (!sock) {
            return failure{"socket failed: " + errno_text()};
        }
        if (::connect(sock.get(),
                      reinterpret_cast<const sockaddr *>(&addr.value()),
                      sizeof(sockaddr_un)) == 0) {
            return true;
        }
        if (errno == ENOENT || errno == ECONNREFUSED) {
            return false;
        }
        if (errno != EINTR) {
            return failure{"cannot connect: " + errno_text()};
        }
    }
}

/* How one run of rvtd ended. */
struct run_end {
    bool status_known = true; /* false: reaped by someone else */
    int status        = 0; /* waitpid status */
    std::string output; /* stdout and stderr, at most max_output */
};

std::string status_text(const run_end &end)
{
    if (!end.status_known) {
        return "unknown status (this process ignores SIGCHLD or reaps "
               "children itself)";
    }
    if (WIFEXITED(end.status)) {
        return "status " + std::to_string(WEXITSTATUS(end.status));
    }
    if (WIFSIGNALED(end.status)) {
        return "signal " + std::to_string(WTERMSIG(end.status));
    }
    return "wait status " + std::to_string(end.status);
}

/* Output as one line's tail of a message: trailing newlines dropped. */
std::string output_text(std::string out)
{
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) {
        out.pop_back();
    }
    return out.empty() ? "(no output)" : out;
}

/* posix_spawn's attribute objects, destroyed on every path. */
struct spawn_setup {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;

    spawn_setup()
    {
        posix_spawn_file_actions_init(&actions);
        posix_spawnattr_init(&attr);
    }
    ~spawn_setup()
    {
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&actions);
    }
    spawn_setup(const spawn_setup &)            = delete;
    spawn_setup &operator=(const spawn_setup &) = delete;
};

/* Waits for pid until the deadline, then kills it; always reaps it. */
run_end
reap(pid_t pid, clock::time_point deadline, std::string output, bool *killed)
{
    run_end end{true, 0, std::move(output)};
    *killed = false;
    for (milliseconds pause{1};; pause = std::min(pause * 2, max_backoff)) {
        pid_t r = ::waitpid(pid, &end.status, WNOHANG);
        if (r == pid) {
            return end;
        }
        if (r < 0 && errno != EINTR) {
            end.status_known = false; /* ECHILD: not ours to reap */
            return end;
        }
        if (clock::now() >= deadline) {
            break;
        }
        std::this_thread::sleep_for(std::min(pause, left(deadline)));
    }
    *killed = true;
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &end.status, 0) < 0) {
        if (errno != EINTR) {
            end.status_known = false;
            break;
        }
    }
    return end;
}

/* Runs prog with args, collecting its output until it exits or the
 * deadline passes. */
result<run_end> run(const program &prog, const std::vector<std::string> &args,
                    clock::time_point deadline)
{
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
        return failure{"pipe failed: " + errno_text()};
    }
    unique_fd rd(fds[0]), wr(fds[1]);

    spawn_setup s;
    posix_spawn_file_actions_addopen(&s.actions, STDIN_FILENO, "/dev/null",
                                     O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&s.actions, wr.get(), STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&s.actions, wr.get(), STDERR_FILENO);
    /* Nothing of the application's reaches the agent, whether or not it
     * was opened close-on-exec. */
    posix_spawn_file_actions_addclosefrom_np(&s.actions, STDERR_FILENO + 1);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&s.attr, &none);
    posix_spawnattr_setsigdefault(&s.attr, &all);
    posix_spawnattr_setflags(&s.attr,
                             POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

    std::vector<char *> argv;
    argv.push_back(const_cast<char *>(prog.path.c_str()));
    for (const auto &a : args) {
        argv.push_back(const_cast<char *>(a.c_str()));
    }
    argv.push_back(nullptr);

    pid_t pid        = 0;
    const char *file = prog.path.c_str();
    int rc = prog.search_path ? ::posix_spawnp(&pid, file, &s.actions, &s.attr,
                                               argv.data(), environ) :
                                ::posix_spawn(&pid, file, &s.actions, &s.attr,
                                              argv.data(), environ);
    if (rc != 0) {
        return failure{"cannot run " + prog.path + " (from " + prog.source +
                       "): " + errno_text(rc)};
    }
    wr.reset();

    std::string out;
    bool timed_out = false;
    for (;;) {
        pollfd pfd{rd.get(), POLLIN, 0};
        int n = ::poll(&pfd, 1, static_cast<int>(left(deadline).count()));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            timed_out = true; /* (or poll failed: no better to do) */
            break;
        }
        char buf[4096];
        ssize_t got = ::read(rd.get(), buf, sizeof(buf));
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            break; /* EOF: rvtd and whatever it forked closed the pipe */
        }
        if (out.size() < max_output) {
            out.append(buf, std::min(size_t(got), max_output - out.size()));
        }
    }
    bool killed = false;
    run_end end = reap(pid, timed_out ? clock::now() : deadline, std::move(out),
                       &killed);
    if (timed_out || killed) {
        return failure{prog.path + " (from " + prog.source +
                       ") did not finish starting the agent in time; killed " +
                       "it (output: " + output_text(end.output) + ")"};
    }
    return end;
}

result<agent_start>
ensure_until(const launch_options &opt, const std::string &job_key,
             const std::string &socket_path, clock::time_point deadline)
{
    const program prog            = choose_rvtd(opt);
    std::vector<std::string> args = {"--daemon", "--device=" + opt.device,
                                     "--port=" + std::to_string(opt.port),
                                     "--job-key=" + job_key};
    args.insert(args.end(), opt.extra_args.begin(), opt.extra_args.end());

    bool ran = false, other = false;
    std::string last; /* what the last run said, for a timeout */
    auto next_run        = clock::now();
    milliseconds backoff = first_backoff;
    for (;;) {
        auto up = listening(socket_path);
        if (!up) {
            return fail(socket_path, up.error());
        }
        if (up.value()) {
            return other ? agent_start::started_by_another :
                   ran   ? agent_start::started :
                           agent_start::already_running;
        }
        if (clock::now() >= deadline) {
            return fail(socket_path,
                        "no agent listens there after " +
                                std::to_string(opt.timeout.count()) + " ms" +
                                (last.empty() ? std::string() :
                                                " (last: " + last + ")"));
        }
        if (clock::now() >= next_run) {
            auto end = run(prog, args, deadline);
            if (!end) {
                return fail(socket_path, end.error());
            }
            const run_end &e = end.value();
            last = prog.path + " exited with " + status_text(e) + ": " +
                   output_text(e.output);
            bool held = e.output.find(lock_held) != std::string::npos;
            if (!e.status_known) {
                /* judged by its words and then by the socket alone */
                (held ? other : ran) = true;
            } else if (WIFEXITED(e.status) && WEXITSTATUS(e.status) == 0) {
                ran = true;
            } else if (WIFEXITED(e.status) && WEXITSTATUS(e.status) == 1 &&
                       held) {
                other = true;
            } else {
                return fail(socket_path, last);
            }
            next_run = clock::now() + respawn_interval;
            backoff  = first_backoff;
            continue; /* look again at once */
        }
        std::this_thread::sleep_for(std::min(backoff, left(deadline)));
        backoff = std::min(backoff * 2, max_backoff);
    }
}

} // namespace

result<agent_start>
ensure_agent(const launch_options &opt, const std::string &socket_path)
{
    auto deadline = clock::now() + opt.timeout;
    auto key      = job_key_of(opt);
    if (!key) {
        return fail(socket_path, key.error());
    }
    return ensure_until(opt, key.value(), socket_path, deadline);
}

result<std::vector<std::string>> parse_agent_args(std::string_view text)
{
    std::vector<std::string> args;
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t start = text.find_first_not_of(" \t", pos);
        if (start == std::string_view::npos) {
            break;
        }
        size_t end = text.find_first_of(" \t", start);
        if (end == std::string_view::npos) {
            end = text.size();
        }
        const std::string arg(text.substr(start, end - start));
        pos                    = end;
        const std::string name = arg.substr(0, arg.find('='));
        if (name.size() < 3 || name.rfind("--", 0) != 0) {
            return failure{"agent option '" + arg +
                           "': expected --OPTION or --OPTION=VALUE (rvtd "
                           "--help lists them)"};
        }
        for (const char *own :
             {"--daemon", "--device", "--port", "--job-key"}) {
            if (name == own) {
                return failure{"agent option '" + arg + "': " + own +
                               " is the launcher's (the process's device, "
                               "port and job key); expected another"};
            }
        }
        args.push_back(arg);
    }
    return args;
}

result<attachment> attach_or_start(const launch_options &opt)
{
    const auto deadline     = clock::now() + opt.timeout;
    const std::string where = "start agent on " + opt.device + ":" +
                              std::to_string(opt.port) + ": ";
    auto key = job_key_of(opt);
    if (!key) {
        return failure{where + key.error()};
    }
    const uid_t uid = ::getuid();
    auto dir        = user_runtime_dir(process_env(), uid);
    if (!dir) {
        return failure{where + dir.error()};
    }
    auto paths = make_agent_paths(dir.value(), opt.device, opt.port,
                                  key.value());
    if (!paths) {
        return failure{where + paths.error()};
    }
    const std::string &socket_path = paths.value().socket;
    for (;;) {
        auto up = ensure_until(opt, key.value(), socket_path, deadline);
        if (!up) {
            return failure{up.error()};
        }
        auto att = attach(socket_path, key.value(),
                          std::max(left(deadline), milliseconds(100)));
        if (att) {
            return att;
        }
        /* An agent that reached its linger time between our look and our
         * attach is gone now: start another while time is left. */
        auto still = listening(socket_path);
        if (!still.ok() || still.value() || clock::now() >= deadline) {
            return failure{att.error()};
        }
    }
}

} // namespace rvt::client
