/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Attaching a process to its node's agent: the client library's first
 * call. On success the process holds the agent's verbs command fd and PD
 * handle (to register its own memory into the agent's PD), its client
 * index (the destination bits of immediates addressed to it) and its
 * mapped shared segment with its rings (shm_layout.h), and the two
 * eventfds of the doorbells. The socket
 * stays open for the life of the attachment: closing it is detaching, and
 * the agent cleans up after a process that dies without a word.
 */
#ifndef RVT_CLIENT_ATTACH_H
#define RVT_CLIENT_ATTACH_H

#include "uct/ib/rvt/client/agent_reply.h"
#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/common/shm_layout.h"
#include "uct/ib/rvt/common/shm_mapping.h"
#include "uct/ib/rvt/common/work_summary.h"
#include "uct/ib/rvt/common/unique_fd.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace rvt::client {

/* The agent's context and PD imported into this process, when the agent
 * chose the provider's import path (registration.cc uses and owns it). */
struct imported_pd;
/* How to register when the agent runs in this process (registration.h). */
struct in_process_registrar;

struct attachment {
    uint32_t client_index;
    uint32_t pd_handle;
    uint32_t driver_id;
    wire::reg_mode mode;
    uint64_t agent_id;
    wire::agent_address address; /* the agent, as its peers reach it */
    uint32_t num_qps; /* K */
    uint32_t max_am_size; /* = layout.caps.slot_size */
    uint32_t path_mtu; /* bytes: the agent's port's active MTU */
    shm_layout layout;
    unique_fd sock; /* the lifeline to the agent */
    unique_fd cmd_fd; /* the agent's verbs command fd */
    shm_mapping shm;
    unique_fd agent_wake_fd; /* eventfd: we write it to wake the agent */
    unique_fd client_wake_fd; /* eventfd: the agent writes it to wake us */
    /* set when mode is import_pd and the import worked here; else
     * registration uses the uverbs ioctl path (which works everywhere) */
    std::shared_ptr<imported_pd> imported;
    /* which attachment of client_index this is (imm.h): peers name it
     * with the index, so that nothing meant for an earlier or later
     * holder of the index reaches this process */
    uint8_t client_generation;
    uint32_t features; /* wire::agent_feature_* bits: what the agent's device does */
    reply_reader replies; /* the agent's answers on `sock` (agent_reply.h) */
    /* the agent's work summary (common/work_summary.h): our bit says we
     * posted work */
    shm_mapping summary;
    /* set when mode is in_process: the registrar installed at attach */
    std::shared_ptr<const in_process_registrar> registrar;
};

/* Connects to the agent's socket and attaches with `job_key`; a refusal
 * comes back as a failure carrying the agent's reason. With `leader`, as
 * a sibling of this process's attachment `leader` (attach_wire.h,
 * "Siblings"): its work may use the leader's MRs. */
result<attachment>
attach(const std::string &socket_path, std::string_view job_key,
       std::chrono::milliseconds timeout = std::chrono::milliseconds(10000),
       std::optional<wire::leader_ref> leader = {});

/* Ends the attachment and waits, at most `wait`, until the agent has let
 * the client go. The socket is half-closed: the agent reads its end of
 * file, handles the departure as it does a process's death (drops the
 * client's queued work, tells the peers that the index's generation has
 * gone; attach_server.h, "attached") and closes its end, which is the
 * answer read here (anything the agent sent before is read and dropped).
 * So once this returns true, nothing sent to this attachment's address
 * is delivered any more: a sender learns of the departure at once, as
 * UCT's peer-failure semantics want of a closed interface. False: the
 * agent did not answer in time (stopped, or gone without closing). */
bool leave(attachment &at, std::chrono::milliseconds wait);

} // namespace rvt::client

#endif
