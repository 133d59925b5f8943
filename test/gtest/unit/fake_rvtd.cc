/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A stand-in for rvtd in test_launch.cc and the Slurm tests: it takes
 * rvtd's options (--daemon, --notify-fd=, --device=, --port=, --job-key=,
 * and any other --NAME=VALUE, which it only records), computes the same socket, lock and log paths,
 * takes the same instance lock, and serves no RDMA. FAKE_RVTD_MODE says
 * what it does:
 *
 *   serve (or unset)  lock, daemonize (with --daemon; with --notify-fd
 *                     stay in the foreground as rvtd does), listen,
 *                     ready(): the starter exits 0 (or reads 'R'). It accepts connections and
 *                     closes each after reading what the peer sent first
 *                     (so an attach fails at the attach step), and exits
 *                     once its socket file is gone or it has had no
 *                     connection for FAKE_RVTD_LINGER_MS (default 5000;
 *                     with --linger=0, as rvtd: never, only when its
 *                     socket is gone or a signal ends it).
 *                     FAKE_RVTD_DELAY_MS: a pause between lock and
 *                     listen, to widen the window of a race.
 *   held              "another agent holds it", exit 1 (the lock text)
 *   error             an error on stderr, exit 1
 *   silent            daemonize, then exit 3 without a word
 *
 * The daemon writes "args: ..." and "serving <socket> (pid N)" to its
 * stdout, the log file.
 */
#include "uct/ib/rvt/agent/attach/instance_lock.h"
#include "uct/ib/rvt/common/job_key.h"
#include "uct/ib/rvt/common/runtime_dir.h"
#include "uct/ib/rvt/common/unique_fd.h"
#include "uct/ib/rvt/common/unix_socket.h"
#include "uct/ib/rvt/tools/daemon.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

using namespace rvt;

namespace {

long env_ms(const char *name, long dflt)
{
    const char *v = std::getenv(name);
    return (v != nullptr && *v != '\0') ? std::atol(v) : dflt;
}

int say(const std::string &line, int status)
{
    std::fprintf(stderr, "fake_rvtd: %s\n", line.c_str());
    return status;
}

/* Whether path still names the socket we bound (inode ino). */
bool still_ours(const std::string &path, ino_t ino)
{
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0 && st.st_ino == ino;
}

int serve(const agent_paths &paths, bool daemon, int notify_fd,
          bool linger_forever, const std::string &args)
{
    auto lock = agent::instance_lock::acquire(paths.lock);
    if (!lock) {
        if (notify_fd >= 0) {
            tools::notify_failed(notify_fd, lock.error());
        }
        return say(lock.error(), 1);
    }
    std::optional<tools::daemon_notifier> notifier;
    if (notify_fd >= 0) {
        auto n = tools::notify_in_foreground(notify_fd, paths.log);
        if (!n) {
            return say(n.error(), 1);
        }
        notifier.emplace(std::move(n).value());
    } else if (daemon) {
        auto d = tools::daemonize(paths.log);
        if (!d) {
            return say(d.error(), 1);
        }
        notifier.emplace(std::move(d).value());
    }
    std::printf("fake_rvtd: args:%s\n", args.c_str());
    std::fflush(stdout);
    std::this_thread::sleep_for(
            std::chrono::milliseconds(env_ms("FAKE_RVTD_DELAY_MS", 0)));

    /* as rvtd does: listening under a staging name, then renamed */
    std::string staging = paths.socket; /* "<stem>.sock" */
    staging.replace(staging.size() - 5, 5, ".new");
    auto addr = unix_address(staging);
    unique_fd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ::unlink(staging.c_str());
    struct stat st;
    if (!addr || !sock ||
        ::bind(sock.get(), reinterpret_cast<const sockaddr *>(&addr.value()),
               sizeof(sockaddr_un)) != 0 ||
        ::listen(sock.get(), 128) != 0 ||
        ::rename(staging.c_str(), paths.socket.c_str()) != 0 ||
        ::lstat(paths.socket.c_str(), &st) != 0) {
        std::string why = "fake_rvtd: cannot listen on " + paths.socket + ": " +
                          std::strerror(errno);
        if (notifier) {
            notifier->failed(why);
        }
        return say(why, 1);
    }
    std::printf("fake_rvtd: serving %s (pid %d)\n", paths.socket.c_str(),
                int(::getpid()));
    std::fflush(stdout);
    if (notifier) {
        notifier->ready();
    }

    const auto linger = std::chrono::milliseconds(
            env_ms("FAKE_RVTD_LINGER_MS", 5000));
    auto last = std::chrono::steady_clock::now();
    while (still_ours(paths.socket, st.st_ino) &&
           (linger_forever ||
            std::chrono::steady_clock::now() - last < linger)) {
        pollfd pfd{sock.get(), POLLIN, 0};
        if (::poll(&pfd, 1, 100) != 1) {
            continue;
        }
        unique_fd conn(::accept4(sock.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!conn) {
            continue;
        }
        last = std::chrono::steady_clock::now();
        pollfd cfd{conn.get(), POLLIN, 0};
        if (::poll(&cfd, 1, 200) == 1) {
            char buf[1024];
            [[maybe_unused]] ssize_t n = ::read(conn.get(), buf, sizeof(buf));
        }
    }
    if (still_ours(paths.socket, st.st_ino)) {
        ::unlink(paths.socket.c_str());
    }
    std::printf("fake_rvtd: exiting\n");
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    bool daemon = false, linger_forever = false;
    int notify_fd = -1;
    std::string device, job_key, args;
    int port = 1;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        args += " " + std::string(arg);
        if (arg == "--daemon") {
            daemon = true;
        } else if (arg.starts_with("--notify-fd=")) {
            notify_fd = std::atoi(argv[i] + 12);
        } else if (arg.starts_with("--device=")) {
            device = arg.substr(9);
        } else if (arg.starts_with("--port=")) {
            port = std::atoi(argv[i] + 7);
        } else if (arg == "--linger=0") {
            linger_forever = true;
        } else if (arg.starts_with("--job-key=")) {
            job_key = arg.substr(10);
        } else if (!arg.starts_with("--") ||
                   arg.find('=') == std::string_view::npos) {
            return say("'" + std::string(arg) + "': expected --OPTION=VALUE",
                       2);
        }
    }
    const uid_t uid = ::getuid();
    if (job_key.empty()) {
        auto choice = resolve_job_key(process_env(), uid);
        if (!choice) {
            return say(choice.error(), 1);
        }
        job_key = choice.value().key;
    }
    auto dir = user_runtime_dir(process_env(), uid);
    if (!dir) {
        return say(dir.error(), 1);
    }
    auto paths = make_agent_paths(dir.value(), device, port, job_key);
    if (!paths) {
        return say(paths.error(), 1);
    }

    const char *env       = std::getenv("FAKE_RVTD_MODE");
    std::string_view mode = env != nullptr ? env : "serve";
    if (mode == "held") {
        return say("agent lock " + paths.value().lock +
                           ": another agent holds it (pid 4242): expected "
                           "at most one agent per job key, device and port",
                   1);
    }
    if (mode == "error") {
        return say("cannot open device " + device + ": no such device", 1);
    }
    if (mode == "silent") {
        auto d = tools::daemonize(paths.value().log);
        if (!d) {
            return say(d.error(), 1);
        }
        std::printf("fake_rvtd: leaving without a word\n");
        std::fflush(stdout);
        ::_exit(3);
    }
    return serve(paths.value(), daemon, notify_fd, linger_forever, args);
}
