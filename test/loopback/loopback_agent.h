/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An agent on the loopback nic: what rvtd assembles around its device,
 * assembled by the same code (agent/serve/assemble.h) around a
 * loopback_nic (loopback_nic.h) instead. The nic, the real engine over
 * it and the real attach server on a socket, with the grant rvtd would
 * give (64-bit atomics where the nic does them; a /dev/null descriptor
 * stands in for the verbs command fd), and the engine serving the
 * server's clients. Made by make_loopback_agent; the
 * engine tests, the UCX module's host tests and both benchmarks run their
 * agents on it.
 *
 * The parts are public, for the tests to drive and inspect, and declared
 * in the order they are made: each is destroyed before what it needs (the
 * server before the engine that serves it, the engine before its nic).
 * The fabric must outlive the agent.
 */
#ifndef RVT_TEST_LOOPBACK_AGENT_H
#define RVT_TEST_LOOPBACK_AGENT_H

#include "test/loopback/loopback_nic.h"
#include "uct/ib/rvt/agent/attach/attach_server.h"
#include "uct/ib/rvt/agent/engine/engine.h"
#include "uct/ib/rvt/agent/peers/peer_auth.h"
#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/common/shm_layout.h"
#include "uct/ib/rvt/common/unique_fd.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace rvt::agent::testing {

/* What the users' agents differ in; the rest is as rvtd has it. */
struct loopback_agent_options {
    std::string socket{}; /* where the attach server listens */
    std::string job_key{};
    uint64_t agent_id = 1;
    shm_capacities caps{};
    /* as given: rvtd's receive buffers hold one inbound slot, so
     * receive_size is caps.slot_size unless a test means otherwise */
    loopback_options nic{};
    engine_config engine{};
    /* the handshake's credentials; null: none (agent::no_auth()), for an
     * agent that no peer ever asks */
    std::unique_ptr<peer_auth> auth{};
    log_fn log = [](std::string_view) {};
    /* what the grant tells clients about registering their memory */
    wire::reg_mode reg_mode = wire::reg_mode::uverbs_ioctl;
    /* attach_config's */
    uint32_t max_clients                       = 64;
    std::chrono::milliseconds index_quarantine = default_index_quarantine;
    size_t max_socket_read = attach_config{}.max_socket_read;
    /* none: a test's clients are all one process (SO_PEERCRED), where
     * rvtd's are a node's processes */
    uint32_t max_siblings = imm::max_clients - 1;
};

struct loopback_agent {
    std::unique_ptr<loopback_nic> nic;
    unique_fd null_fd; /* the grant's command fd */
    std::unique_ptr<agent::engine> engine;
    std::unique_ptr<attach_server> server;

    /* One pass of rvtd's loop: the data path, then the socket. */
    void pump(std::chrono::steady_clock::time_point now =
                      std::chrono::steady_clock::now());
    /* The socket's part: one pass over the clients (engine::
     * serve_clients), the status requests answered. */
    void serve_clients();
};

/* The nic on `fabric`, the engine, the server listening on o.socket and
 * served by the engine; or why one of them could not be made. */
result<loopback_agent>
make_loopback_agent(loopback_fabric &fabric, loopback_agent_options o);

} // namespace rvt::agent::testing

#endif
