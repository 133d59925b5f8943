/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where an agent's socket and lock live: one directory per user,
 *
 *   <dir>/                                            mode 0700, owned by uid
 *       <device>-<port>.<job key>.sock                the attach socket
 *       <device>-<port>.<job key>.lock                instance_lock.h
 *       <device>-<port>.<job key>.log                 a daemonized agent's
 *                                                     stdout and stderr
 *
 * Every process of a job (the module, the rvtd it starts, rvt-status)
 * finds dir the same way, from the environment the job passes on, the
 * first of:
 *
 *   1. $RVT_RUNTIME_DIR/rvt-<uid> when RVT_RUNTIME_DIR is set (it must be
 *      an absolute path of a directory owned by uid: anything else is
 *      refused, naming it);
 *   2. /run/rvt/<uid>, when root made it: /run/rvt a real directory owned
 *      by root that no one else may write to (the Slurm prolog makes both,
 *      the package's tmpfiles.d the parent), and <uid> in it. No other
 *      user can make or replace an entry there; one that is not a 0700
 *      directory of uid is refused;
 *   3. $XDG_RUNTIME_DIR/rvt-<uid> when XDG_RUNTIME_DIR is an absolute
 *      path of a directory owned by uid (systemd's per-user tmpfs);
 *   4. in /tmp, the first (in name order) of rvt-<uid> and
 *      rvt-<uid>.<16 hex digits> that is a real directory owned by uid
 *      with mode 0700; when none is, rvt-<uid> is made, or, when another
 *      user holds that name, rvt-<uid>.<the time in ns, hex> (later makes
 *      sort later). After making one the process looks again and takes
 *      the first valid one, removing its own if that was not it: so
 *      processes that make theirs at once agree on one, and another user
 *      who made rvt-<uid> first (to deny rvt, or to catch its socket)
 *      delays nothing. In a sticky /tmp, a directory owned by uid can be
 *      neither renamed nor removed by anyone else, so once made it is
 *      what every later process finds. Two processes that both find
 *      none, in the microseconds between one's choice of a name and its
 *      mkdir, may each take their own: the later one then starts its own
 *      agent (the job runs on, without sharing its QPs).
 *
 * In a base of the user's own (1 and 3, or any base no one else may
 * write to), rvt-<uid> is the only name: what is there is trusted only if
 * lstat() shows a real directory, not a symbolic link, owned by uid, with
 * mode exactly 0700; anything else is refused with the path and what is
 * wrong, never repaired (repairing someone else's directory means
 * trusting it). One we create ourselves is chmod-ed to 0700 whatever the
 * umask.
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

#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

/* The bases of 2 and 4 above; a test names its own. */
struct runtime_bases {
    std::string system = "/run/rvt";
    std::string shared = "/tmp";
};

/* The user's directory as every process of a job finds it (1 to 4
 * above); a refusal says what to set. */
result<std::string> user_runtime_dir(const env_view &env, uid_t uid,
                                     const runtime_bases &bases = {});

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

/* What an agent's socket name says: make_agent_paths's names read back.
 * A name may read more than one way (a device with "-1." in it): this
 * is the one with the shortest device. Nothing when the name is none of
 * an agent's. */
struct agent_name {
    std::string device;
    int port = 0;
    std::string job_key;
};
std::optional<agent_name> parse_socket_name(std::string_view name);

/* Every user's runtime directory on the node, as an administrator finds
 * them (rvt-status --all), from outside and without making anything:
 * each base is read once, and each of its entries is taken as one of
 * the shapes above, never through a symbolic link (lstat, and each
 * directory checked as rule 4 checks: a real directory, owned by the uid
 * its name says, mode 0700):
 *
 *   <base>/<uid>              as /run/rvt (rule 2): only when the base is
 *                             root's and no one else may write to it
 *   <base>/<uid>/rvt-<uid>    as /run/user's $XDG_RUNTIME_DIR (rule 3):
 *                             <base>/<uid> a real directory of uid's
 *   <base>/rvt-<uid>[.<hex>]  as /tmp (rule 4; and a base named by
 *                             RVT_RUNTIME_DIR, rule 1): the first valid
 *                             in name order, as the user's processes take
 *
 * A directory reached twice (the same device and inode) is listed once.
 * `only`: that uid's alone. At most `max_entries` entries are read from
 * each base; `notes` says where a bound stopped the reading. */
struct user_runtime_dir_entry {
    uid_t uid;
    std::string dir;
};
struct node_runtime_dirs {
    std::vector<user_runtime_dir_entry> dirs; /* by uid, then path */
    std::vector<std::string> notes;
};
/* /run/rvt, /run/user and /tmp */
std::vector<std::string> default_node_bases();
node_runtime_dirs find_runtime_dirs(const std::vector<std::string> &bases,
                                    std::optional<uid_t> only,
                                    size_t max_entries = 100000);

} // namespace rvt

#endif
