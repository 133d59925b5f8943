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

#include <string>

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

} // namespace rvt::agent

#endif
