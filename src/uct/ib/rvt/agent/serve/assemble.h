/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One agent from its parts, made in one place: rvtd assembles it around
 * its device's verbs_nic, the loopback agent (test/loopback/
 * loopback_agent.h) around an in-memory nic, and what is given here is
 * all they differ in. The engine on the nic; then the attach server,
 * granting every client the device's resources (the grant's part the
 * caller fills: device::grant) and the engine's (its address, K, wake-up
 * and work-summary descriptors, whether peers are authenticated); then
 * the engine serves the server's clients. The loop that runs them is
 * serve_loop.h; rvtd's daemon mode, lock and signals stay in rvtd.
 */
#ifndef RVT_AGENT_ASSEMBLE_H
#define RVT_AGENT_ASSEMBLE_H

#include "uct/ib/rvt/agent/attach/attach_server.h"
#include "uct/ib/rvt/agent/device/device_grant.h"
#include "uct/ib/rvt/agent/device/nic.h"
#include "uct/ib/rvt/agent/engine/engine.h"
#include "uct/ib/rvt/agent/peers/peer_auth.h"
#include "uct/ib/rvt/common/result.h"

#include <functional>
#include <memory>

namespace rvt::agent {

struct assembly {
    /* the socket and its bounds; its layout (the sizes of a client's
     * shared memory) and job key are the engine's too */
    attach_config attach;
    engine_config engine{};
    /* the handshake's credentials (no_auth() for none) */
    std::unique_ptr<peer_auth> auth{};
    /* the device's part of what clients are granted; its agent_id is the
     * engine's */
    device_grant grant;
    log_fn log;
    /* Called once the engine is made, before the socket opens (rvtd:
     * its trace starts, its descriptor limit rises to the socket's
     * bounds); may be empty. */
    std::function<void(agent::engine &, const attach_config &)> before_attach{};
};

/* The parts, declared in the order they are made: the server is
 * destroyed before the engine that serves it. The nic must outlive
 * both. */
struct assembled_agent {
    std::unique_ptr<agent::engine> engine;
    std::unique_ptr<attach_server> server;
};

/* The engine on `n`, the attach server, and the engine serving its
 * clients; or why the engine or the server could not be made (their own
 * words). */
result<assembled_agent> assemble(nic &n, assembly a);

} // namespace rvt::agent

#endif
