/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where an agent's socket and lock live: one directory per user,
 *
 *   <base>/rvt-<uid>/                                 mode 0700, owned by uid
 *       <device>-<port>.<job key>.sock                the attach socket
 *       <device>-<port>.<job key>.lock                instance_lock.h
 *       <device>-<port>.<job key>.log                 a daemonized agent's
 *                                                     stdout and stderr
 *
 * base is $RVT_RUNTIME_DIR when it is set (it must be an absolute path of
 * a directory owned by uid: anything else is refused, naming it), else
 * $XDG_RUNTIME_DIR when it is set to an absolute path of a directory
 * owned by uid (systemd's per-user tmpfs), else /tmp. Every process of a
 * job (the module, the rvtd it starts, rvt-status) finds it the same way,
 * from the environment the job passes on.
 *
 * The directory is what keeps other users out (SO_PEERCRED then only
 * confirms), so an existing one is trusted only if lstat() shows a real
 * directory, not a symbolic link, owned by uid, with mode exactly 0700.
 * Anything else, such as a /tmp/rvt-1000 another user created first to
 * catch our socket, is refused with the path and what is wrong; it is
 * never repaired, since repairing someone else's directory means trusting
 * it; the refusal names what to set instead (RVT_RUNTIME_DIR or
 * XDG_RUNTIME_DIR), so that another user can delay a job's start but not
 * deny rvt to a user who reads it. One we create ourselves is chmod-ed to 0700 whatever the umask. In a
 * sticky /tmp, a directory owned by uid can be neither renamed nor removed
 * by anyone else, so what lstat() saw stays true while we use it.
 *
 * Names: device 1..63 characters of [A-Za-z0-9_.-], port 1..255, job key
 * as wire::job_key_error; the socket path must fit sockaddr_un (107
 * characters and the NUL); the lock path is as long, the log path one
 * character shorter.
 */
#ifndef RVT_COMMON_RUNTIME_DIR_H
#define RVT_COMMON_RUNTIME_DIR_H

#include "uct/ib/rvt/common/job_key.h" /* env_view */
#include "uct/ib/rvt/common/result.h"

#include <sys/types.h>

#include <string>
#include <string_view>

namespace rvt {

/* Longest socket path: sockaddr_un's sun_path less its NUL. */
inline constexpr size_t max_socket_path = 107;
inline constexpr size_t max_device_name = 63;

/* $XDG_RUNTIME_DIR if usable for uid (see above), else "/tmp". */
std::string runtime_base(const env_view &env, uid_t uid);

/* <base>/rvt-<uid>: created 0700 if missing, else checked as above. */
result<std::string> ensure_runtime_dir(const std::string &base, uid_t uid);

/* The variable that names the base explicitly. */
inline constexpr const char *runtime_dir_env_name = "RVT_RUNTIME_DIR";

/* The user's directory as every process of a job finds it: the base
 * from $RVT_RUNTIME_DIR, else runtime_base(), then ensure_runtime_dir();
 * a refusal says what to set. */
result<std::string> user_runtime_dir(const env_view &env, uid_t uid);

struct agent_paths {
    std::string socket;
    std::string lock;
    std::string log;
};

/* The names in dir of the agent for (device, port, job key); creates
 * nothing. */
result<agent_paths> make_agent_paths(const std::string &dir,
                                     std::string_view device, int port,
                                     std::string_view job_key);

} // namespace rvt

#endif
