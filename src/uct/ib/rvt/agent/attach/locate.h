/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where the agent of (device, port, job) lives: the job key (given, or from
 * the environment), the device (given, or the first one), and the socket
 * and lock paths in the user's runtime directory. rvtd uses it to know
 * where to serve, rvt-status to know whom to ask.
 */
#ifndef RVT_AGENT_LOCATE_H
#define RVT_AGENT_LOCATE_H

#include "uct/ib/rvt/common/runtime_dir.h"
#include "uct/ib/rvt/common/result.h"

#include <optional>
#include <string>
#include <vector>

namespace rvt::agent {

struct agent_location {
    std::string job_key;
    std::string job_key_source; /* "--job-key", a variable, or "default" */
    std::string device;
    int port;
    agent_paths paths;
};

/* An empty `job_key` means: find one. `device`: the one to serve
 * (named_or_first_device, device/device.h); empty: there is none. */
result<agent_location>
locate(const std::string &device, int port, const std::string &job_key);

/* An agent's files as rvt-status --all finds them. */
struct found_agent {
    uid_t uid; /* whose runtime directory holds it */
    std::string dir;
    std::string socket;
    agent_name name; /* what its socket's name says */
    /* its log (runtime_dir.h: next to the socket) when that is a
     * regular file of uid's; empty when there is none (an agent in the
     * foreground logs to its stderr) */
    std::string log;
};

/* The bounds of a look over the node (rvt-status --all): a user's
 * directory is theirs to fill. */
struct agent_search_bounds {
    size_t entries_per_dir = 100000; /* entries read from a directory */
    size_t agents_per_dir  = 64; /* sockets taken from one directory */
    size_t agents          = 512; /* sockets taken in all */
};

struct agent_search {
    std::vector<found_agent> agents; /* by uid, then socket path */
    std::vector<std::string> notes; /* what was passed by, and bounds */
};

/* The agents' sockets in the runtime directories of find_runtime_dirs
 * (`bases`, `only`: runtime_dir.h): each an entry named as
 * make_agent_paths names a socket that lstat shows is a socket owned by
 * the directory's uid (a symbolic link, or anything else, is passed by,
 * noted). Nothing is connected to or made. */
agent_search find_agents(const std::vector<std::string> &bases,
                         std::optional<uid_t> only,
                         const agent_search_bounds &bounds = {});

} // namespace rvt::agent

#endif
