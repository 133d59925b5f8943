/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/agent/attach/locate.h"

#include "uct/ib/rvt/common/job_key.h"
#include "uct/ib/rvt/common/attach_wire.h"

#include <unistd.h>

namespace rvt::agent {

result<agent_location>
locate(const std::string &device, int port, const std::string &job_key)
{
    const uid_t uid = getuid();
    auto env        = process_env();
    agent_location loc{job_key, "--job-key", device, port, {}};
    if (loc.job_key.empty()) {
        auto choice = resolve_job_key(env, uid);
        if (!choice) {
            return failure{choice.error()};
        }
        loc.job_key        = choice.value().key;
        loc.job_key_source = choice.value().source;
    } else if (auto err = wire::job_key_error(job_key); !err.empty()) {
        return failure{"--job-key: " + err};
    }
    if (loc.device.empty()) {
        return failure{"no RDMA device found (and none named with "
                       "--device)"};
    }
    auto dir = user_runtime_dir(env, uid);
    if (!dir) {
        return failure{dir.error()};
    }
    auto paths = make_agent_paths(dir.value(), loc.device, port, loc.job_key);
    if (!paths) {
        return failure{paths.error()};
    }
    loc.paths = paths.value();
    return loc;
}

} // namespace rvt::agent
