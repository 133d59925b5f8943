/*
 * An agent on the loopback nic, assembled as rvtd assembles its own
 * (loopback_agent.h).
 */
#include "test/loopback/loopback_agent.h"

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
    for (const auto &ev : engine->serve_clients(0)) {
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
    a.nic     = std::make_unique<loopback_nic>(fabric, o.nic);
    auto auth = o.auth ? std::move(o.auth) : no_auth();
    auto e    = engine::create(*a.nic, o.engine, layout.value(), o.job_key,
                               o.agent_id, std::move(auth), o.log);
    if (!e) {
        return failure{e.error()};
    }
    a.engine = std::move(e).value();
    a.null_fd.reset(::open("/dev/null", O_RDWR | O_CLOEXEC));
    device_grant grant{a.null_fd.get(), 1, 0, o.reg_mode, o.agent_id};
    grant.address  = a.engine->address();
    grant.num_qps  = a.engine->num_qps();
    grant.features = a.nic->can_atomic() ? wire::agent_feature_atomic64 : 0;
    if (!a.engine->authenticates_peers()) {
        grant.features |= wire::agent_feature_unauthenticated;
    }
    grant.agent_wake_fd   = a.engine->wake_fd();
    grant.work_summary_fd = a.engine->work_summary_fd();
    attach_config cfg{o.socket, o.job_key, ::getuid(), o.max_clients,
                      layout.value()};
    cfg.index_quarantine = o.index_quarantine;
    cfg.max_socket_read  = o.max_socket_read;
    auto srv             = attach_server::create(cfg, grant, o.log);
    if (!srv) {
        return failure{srv.error()};
    }
    a.server = std::move(srv).value();
    a.engine->serve(*a.server);
    return a;
}

} // namespace rvt::agent::testing
