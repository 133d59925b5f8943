/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registering a process's own memory into its agent's protection domain
 * (docs/design.md part 3), and telling the agent about it: the agent keeps the
 * handle of every MR a client holds and deregisters what is left when the
 * client dies, since nobody else will (the MR lives in the agent's PD, on
 * the agent's command fd, not in the dead process).
 *
 * The agent, not the client, deregisters: all clients share the command
 * fd's table of MR handles, and a handle a client freed itself could be
 * given to a neighbour and announced by it before the agent had read the
 * first client's notice (wire::msg_type::mr_release).
 *
 * A process killed between REG_MR and its notice leaves an MR the agent
 * was never told of: so it says what it is about to register first
 * (wire::msg_type::mr_intent), and the agent finds the MR by that after
 * its death (agent/engine/mr_registry.h, "Intents").
 *
 * Not thread-safe: one caller at a time per attachment (the UCX MD calls
 * these under its registration cache's lock).
 */
#ifndef RVT_CLIENT_REGISTRATION_H
#define RVT_CLIENT_REGISTRATION_H

#include "uct/ib/rvt/client/attach.h"
#include "uct/ib/rvt/common/result.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

namespace rvt::client {

struct memory_region {
    uint32_t handle;
    uint32_t lkey;
    uint32_t rkey;
    void *addr;
    size_t length;
};

/* How memory is registered when the agent runs in this very process
 * (wire::reg_mode::in_process): its nic is not a device, so neither
 * verbs path reaches it, and whoever runs the agent registers in it. The
 * rest is as on a device: the intent first, then the announcement, which
 * the agent checks against its nic's MR table; the agent deregisters
 * what it holds. `drop` undoes a `reg` the agent refused. Both may be
 * called from any thread of the process. */
struct in_process_registrar {
    std::function<result<memory_region>(void *addr, size_t length, int access)>
            reg;
    std::function<void(uint32_t handle)> drop;
};

/* Installs (or, with nullptr, removes) this process's registrar; an
 * attachment in reg_mode::in_process keeps the one installed when it
 * attached. */
void set_in_process_registrar(std::shared_ptr<const in_process_registrar> r);
std::shared_ptr<const in_process_registrar> in_process_registrar_installed();

/* For attach(): imports the agent's context and PD through the passed
 * command fd (the provider's import path); a failure says why, and the
 * caller registers through the uverbs ioctl path instead. */
result<std::shared_ptr<imported_pd>>
import_agent_pd(int cmd_fd, uint32_t pd_handle);

/* `access` is IBV_ACCESS_* flags. Uses the imported PD if there is one,
 * else REG_MR through the uverbs ioctl on the shared command fd. Tells
 * the agent what it is about to register first (mr_intent), then the
 * handle it got (announce_memory), or that the registration failed. The
 * agent refusing the MR fails it: the MR is deregistered (the agent will
 * not do it) and the intent withdrawn. No answer within `wait` fails it
 * too, the MR left registered: the agent may have taken it, or finds it
 * through the intent when this process dies. */
result<memory_region> register_memory(attachment &at, void *addr, size_t length,
                                      int access,
                                      std::chrono::milliseconds wait);

/* Tells the agent of an MR this process registered in its PD
 * (mr_registered, asking for an answer) and waits at most `wait` for the
 * agent's verdict: it checks the MR against what the device says of its
 * handle (agent/engine/mr_registry.h, "Announcements"). The reply says
 * accepted, or refused with the reason; a failure means no verdict came
 * (not sent, no answer in time, the agent gone). */
result<wire::mr_registered_reply>
announce_memory(attachment &at, const memory_region &mr,
                std::chrono::milliseconds wait);

/* Asks the agent to deregister `mr`. Without `wait` it returns once the
 * request is sent: the memory may be freed at once (the MR holds its pages
 * until the agent drops it). With `wait` it returns once the agent says
 * the MR is gone from the device, so no peer can reach it any more (UCT's
 * invalidate), or fails after that long. */
result<uint32_t>
deregister_memory(attachment &at, const memory_region &mr,
                  std::optional<std::chrono::milliseconds> wait = {});

} // namespace rvt::client

#endif
