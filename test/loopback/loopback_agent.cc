/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An agent on the loopback nic, assembled where rvtd assembles its own
 * (agent/serve/assemble.h; loopback_agent.h).
 */
#include "test/loopback/loopback_agent.h"

#include "uct/ib/rvt/agent/serve/assemble.h"

#include <fcntl.h>
#include <unistd.h>

namespace rvt::agent::testing {

void loopback_agent::pump(std::chrono::steady_clock::time_point now)
{
    engine->progress(now);
    serve_clients();
}

void loopback_agent::serve_clients()
{
    /* what the engine leaves to its owner: the status requests */
    for (const attach_event &ev : engine->serve_clients(0)) {
        server->answer_status(ev.ticket, engine->status(ev.human));
    }
}

result<loopback_agent>
make_loopback_agent(loopback_fabric &fabric, loopback_agent_options o)
{
    auto layout = shm_layout::make(o.caps);
    if (!layout) {
        return failure{layout.error()};
    }
    loopback_agent a;
    a.nic = std::make_unique<loopback_nic>(fabric, o.nic);
    a.null_fd.reset(::open("/dev/null", O_RDWR | O_CLOEXEC));
    device_grant grant{a.null_fd.get(), 1, 0, o.reg_mode, o.agent_id};
    grant.features = a.nic->can_atomic() ? wire::agent_feature_atomic64 : 0;
    attach_config cfg{o.socket, o.job_key, ::getuid(), o.max_clients,
                      layout.value()};
    cfg.index_quarantine = o.index_quarantine;
    cfg.max_socket_read  = o.max_socket_read;
    cfg.max_siblings     = o.max_siblings;
    auto auth            = o.auth ? std::move(o.auth) : no_auth();

    auto made = assemble(*a.nic, {.attach = cfg,
                                  .engine = o.engine,
                                  .auth   = std::move(auth),
                                  .grant  = grant,
                                  .log    = o.log});
    if (!made) {
        return failure{made.error()};
    }
    a.engine = std::move(made.value().engine);
    a.server = std::move(made.value().server);
    return a;
}

} // namespace rvt::agent::testing
