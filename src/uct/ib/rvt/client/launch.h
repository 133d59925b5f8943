/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The first client of a job on a node starts its agent (docs/design.md part 1:
 * "started on demand by the first client"). A client that finds no agent
 * listening at the socket of its (uid, job key, device:port) runs
 *
 *   rvtd --daemon --device=D --port=P --job-key=K [extra args...]
 *
 * and waits for that process to exit; `rvtd --daemon` exits only once the
 * daemonized agent listens (tools/daemon.h), so
 *
 *   exit 0                          the agent is up: attach
 *   exit 1, output containing       another process's agent won the
 *     "another agent holds"         instance lock (a concurrent first
 *                                   client): wait for its socket
 *   anything else                   a failure, carrying rvtd's output
 *                                   (stdout and stderr) and exit status
 *
 * "No agent listens" means: no socket file, or a socket nobody accepts on
 * (ECONNREFUSED: a stale file left by an agent that died); any other
 * connect error is a failure. While waiting, rvtd is run again at most
 * once a second, for the case where the agent that held the lock was on
 * its way out. Every failure names the socket path.
 *
 * Which rvtd: launch_options::rvtd_path, else $RVT_RVTD, else
 * RVT_BINDIR/rvtd (the configured bindir) if it is executable, else
 * "rvtd" through PATH.
 *
 * rvtd is started with posix_spawn: stdin /dev/null, stdout and stderr a
 * pipe to us, no descriptor of ours beyond those three, an empty signal
 * mask and default signal dispositions, our environment. It is always
 * reaped (killed first if it outlives the timeout), so no zombie is left;
 * if this process ignores SIGCHLD or reaps children itself, its status is
 * unknown and we just wait for the socket. Thread-safe.
 */
#ifndef RVT_CLIENT_LAUNCH_H
#define RVT_CLIENT_LAUNCH_H

#include "uct/ib/rvt/client/attach.h"
#include "uct/ib/rvt/common/defaults.h"
#include "uct/ib/rvt/common/result.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace rvt::client {

struct launch_options {
    std::string device; /* e.g. "rxe1" (required) */
    uint8_t port = 1;
    /* empty: resolve_job_key(process_env()) (common/job_key.h) */
    std::string job_key;
    /* empty: $RVT_RVTD, else RVT_BINDIR "/rvtd" if it exists, else "rvtd"
     * from PATH */
    std::string rvtd_path;
    std::vector<std::string> extra_args; /* passed to rvtd ("--linger=5") */
    /* for the whole call: starting, waiting, attaching */
    std::chrono::milliseconds timeout = defaults::connect_timeout;
};

/* How ensure_agent found its agent. */
enum class agent_start {
    already_running, /* listening at the first look */
    started, /* our rvtd exited 0 (or, its status unknown, said nothing
              * of another agent) */
    started_by_another /* another starter's agent held the lock */
};

/* The options a site gives the agents its jobs start (UCX_RVT_AGENT_ARGS:
 * "--priority=fifo:10 --spin-us=20"), split at spaces and tabs. Each must
 * be an --OPTION[=VALUE]; the launcher's own (--daemon, --device, --port,
 * --job-key) are refused, since another would make the agent listen where
 * this process does not look. rvtd judges the rest (an unknown option or
 * a bad value fails the start with rvtd's reason). */
result<std::vector<std::string>> parse_agent_args(std::string_view text);

/* Attaches to the agent for (uid, job key, device:port), starting it when
 * none listens (see above). */
result<attachment> attach_or_start(const launch_options &opt);

/* The start-up half of attach_or_start: returns once something listens at
 * socket_path, starting rvtd for opt's device, port and job key if need
 * be, or fails at opt.timeout. */
result<agent_start>
ensure_agent(const launch_options &opt, const std::string &socket_path);

} // namespace rvt::client

#endif
