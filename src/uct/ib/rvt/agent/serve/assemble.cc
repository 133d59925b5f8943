/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/agent/serve/assemble.h"

namespace rvt::agent {

result<assembled_agent> assemble(nic &n, assembly a)
{
    auto e = engine::create(n, a.engine, a.attach.layout, a.attach.job_key,
                            a.grant.agent_id, std::move(a.auth), a.log);
    if (!e) {
        return failure{e.error()};
    }
    assembled_agent made;
    made.engine = std::move(e).value();
    if (a.before_attach) {
        a.before_attach(*made.engine, a.attach);
    }
    device_grant grant = a.grant;
    grant.address      = made.engine->address();
    grant.num_qps      = made.engine->num_qps();
    if (!made.engine->authenticates_peers()) {
        grant.features |= wire::agent_feature_unauthenticated;
    }
    grant.agent_wake_fd   = made.engine->wake_fd();
    grant.work_summary_fd = made.engine->work_summary_fd();
    auto srv              = attach_server::create(a.attach, grant, a.log);
    if (!srv) {
        return failure{srv.error()};
    }
    made.server = std::move(srv).value();
    made.engine->serve(*made.server);
    return made;
}

} // namespace rvt::agent
