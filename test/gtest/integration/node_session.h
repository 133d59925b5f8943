/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * For the testbed's test programs: a client session with the agent of the
 * node they run on (the device in RXE_DEV, port 1, the job key from the
 * environment), found where rvtd places itself. It never starts an agent:
 * the test scripts start theirs with the options they test.
 */
#ifndef RVT_TEST_NODE_SESSION_H
#define RVT_TEST_NODE_SESSION_H

#include "uct/ib/rvt/client/attach.h"
#include "uct/ib/rvt/client/session.h"
#include "uct/ib/rvt/common/job_key.h"
#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/common/runtime_dir.h"

#include <unistd.h>

#include <cstdlib>
#include <memory>

namespace rvt::test {

inline result<std::unique_ptr<client::session>> open_node_session()
{
    const char *dev = std::getenv("RXE_DEV");
    if (dev == nullptr) {
        return failure{"RXE_DEV is not set (run inside a testbed node)"};
    }
    auto key = resolve_job_key(process_env(), getuid());
    if (!key) {
        return failure{key.error()};
    }
    auto dir = ensure_runtime_dir(runtime_base(process_env(), getuid()),
                                  getuid());
    if (!dir) {
        return failure{dir.error()};
    }
    auto paths = make_agent_paths(dir.value(), dev, 1, key.value().key);
    if (!paths) {
        return failure{paths.error()};
    }
    auto at = client::attach(paths.value().socket, key.value().key);
    if (!at) {
        return failure{at.error()};
    }
    return client::session::open(std::move(at).value());
}

} // namespace rvt::test

#endif
