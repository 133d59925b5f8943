/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A memory domain's connection to its node agent: one attachment (one
 * client index, one set of rings), the leader, shared by the MD, which
 * registers memory through it, and the first interface, which moves data
 * through it. Every further interface of the MD gets an attachment of its
 * own, a sibling of the leader (attach_sibling(), attach_wire.h
 * "Siblings"): its own client index, generation and rings, so that the
 * data paths of different worker threads share nothing, while the agent
 * checks its work against the leader's MRs (it accepts work only on
 * memory the posting client's group registered, agent/engine/mr_registry.h).
 *
 * Attaching is lazy: UCP opens every MD and queries every transport of
 * every component whatever UCX_TLS says, and an rvt MD that nobody uses
 * must not start (or even contact) an agent. The first registration or
 * interface open attaches, starting rvtd when none listens and the
 * configuration allows it (client/launch.h). A failed attach is not
 * remembered: the next caller tries again.
 *
 * The MD and its interfaces hold it through shared_ptr; whichever closes
 * last detaches, and waits until the agent has let the attachment go
 * (client::leave), as an interface closing its sibling does; the
 * interface that used the leader's own data path retires its address
 * when it closes (retire_data_path). Either way, once an interface's
 * close returns, nothing sent to its address is delivered, and its
 * senders fail, whether the MD stays open or not (a UCP worker destroyed
 * while its context lives). Memory registration, peer lookups and attaching take the
 * link's lock (the rcache may call in from any thread); the data path
 * (post, poll) is the interface's alone and goes to the session directly.
 */
#ifndef RVT_UCT_AGENT_LINK_H
#define RVT_UCT_AGENT_LINK_H

#include "uct/ib/rvt/client/registration.h"
#include "uct/ib/rvt/client/session.h"
#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/defaults.h"
#include "uct/ib/rvt/common/result.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace rvt::uct {

/* How long closing an attachment waits for the agent to let it go
 * (client::leave): an agent that answers at all does in one pass of its
 * loop. */
inline constexpr std::chrono::milliseconds leave_wait{1000};

/* A value of a UCX_RVT_* setting the agent must know (md.h,
 * md_agent_settings), which this process gave: agent_args passes it to the
 * rvtd this process starts; an agent found running with another value
 * keeps its own, and the attach says so in UCX's log. */
struct agent_setting_value {
    std::string variable; /* "UCX_RVT_NUM_QPS" */
    uint64_t value;
    /* what the attached agent uses (its attach reply) */
    uint32_t (*agent_value)(const client::attachment &a);
};

struct link_settings {
    std::string device; /* e.g. "rxe1" */
    uint8_t port = 1;
    std::string job_key; /* empty: from the environment (job_key.h) */
    std::string rvtd_path; /* empty: client/launch.h's search */
    /* for the rvtd it starts: UCX_RVT_AGENT_ARGS's, then the settings the
     * agent must know */
    std::vector<std::string> agent_args;
    std::vector<agent_setting_value> agent_settings; /* given by the process */
    bool start_agent = true; /* run rvtd when no agent listens */
    /* attach, start, connect */
    std::chrono::milliseconds timeout = defaults::connect_timeout;
};

class agent_link {
public:
    explicit agent_link(link_settings settings);
    ~agent_link();

    agent_link(const agent_link &)            = delete;
    agent_link &operator=(const agent_link &) = delete;

    const link_settings &settings() const
    {
        return m_settings;
    }

    /* False when attaching could not work without starting an agent and
     * starting one is not allowed (no socket file): the transport then
     * hides its device instead of failing later. Attaches nothing. */
    bool may_attach();

    /* The attached session, attaching first if need be. */
    result<client::session *> session();

    /* Own memory into the agent's PD (attaching first if need be). */
    result<client::memory_region>
    register_memory(void *addr, size_t length, int access);
    /* With `invalidate`, returns once the agent has deregistered it (no
     * peer can reach it any more); else once the agent is asked. */
    result<uint32_t>
    deregister_memory(const client::memory_region &mr, bool invalidate = false);

    /* A new attachment of this process, a sibling of the leader (which
     * is attached first if need be), for an interface's own data path;
     * it ends when the session is destroyed, or when the leader's does. */
    result<std::unique_ptr<client::session>> attach_sibling();

    /* The agent's index for `remote`, asked through `s` (the leader's
     * session, or a sibling's: the agent tells the client that asked when
     * the peer fails); under the lock when `s` is the leader, whose
     * socket registration shares. */
    result<uint32_t>
    connect_peer(client::session &s, const wire::agent_address &remote);

    /* The agent died: lets its verbs context go (session.h,
     * release_agent_context), so that its peers see its QPs fail. */
    void agent_lost();

    /* One interface, once, owns the leader's inbound stream: an active
     * message names a client index, not an interface, so a second
     * interface on the same attachment could not tell its messages from
     * the first's. Returns false when another interface holds it or held
     * it (the interface then attaches a sibling). */
    bool claim_data_path(const void *iface);
    /* The owner closes: the leader's address, which the owner published,
     * is retired at the agent (attach_wire.h, retire_address), so that
     * its senders fail as they do when a sibling leaves, although the
     * attachment stays for the MD's registrations; and no interface
     * claims the data path again (its rings may still get the owner's
     * completions; later interfaces attach siblings, with addresses of
     * their own). Returns once the agent has retired it, or why not,
     * within leave_wait. */
    result<done> retire_data_path(const void *iface);

private:
    result<client::session *> attach_locked();
    /* UCX's log: each setting the agent must know that this process gave
     * and the attached agent does not use (agent_setting_value) */
    void warn_of_agent_settings() const;

    const link_settings m_settings;
    std::mutex m_lock;
    std::unique_ptr<client::session> m_session;
    /* where the leader attached: siblings attach there too, whatever the
     * environment says by then */
    std::string m_socket_path;
    std::string m_job_key;
    const void *m_data_path_owner = nullptr;
};

} // namespace rvt::uct

#endif
