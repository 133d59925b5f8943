/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The MD's lazily attached connection to its agent (agent_link.h).
 */
#include "uct/ib/rvt/uct/agent_link.h"

#include "uct/ib/rvt/client/attach.h"
#include "uct/ib/rvt/client/launch.h"
#include "uct/ib/rvt/common/job_key.h"
#include "uct/ib/rvt/common/runtime_dir.h"
#include "uct/ib/rvt/uct/ucx.h"

#include <sys/stat.h>
#include <unistd.h>

#include <tuple>
#include <utility>

namespace rvt::uct {

namespace {

/* The configured job key, else the environment's (job_key.h). */
result<std::string> job_key_of(const link_settings &s)
{
    if (!s.job_key.empty()) {
        return s.job_key;
    }
    auto choice = resolve_job_key(process_env(), ::getuid());
    if (!choice) {
        return failure{choice.error()};
    }
    return choice.value().key;
}

/* Where the agent for these settings listens (runtime_dir.h). */
result<std::string> socket_path(const link_settings &s, const std::string &key)
{
    auto dir = user_runtime_dir(process_env(), ::getuid());
    if (!dir) {
        return failure{dir.error()};
    }
    auto paths = make_agent_paths(dir.value(), s.device, s.port, key);
    if (!paths) {
        return failure{paths.error()};
    }
    return paths.value().socket;
}

/* The job key and the socket of the agent for these settings. */
result<std::pair<std::string, std::string>>
key_and_socket(const link_settings &s)
{
    auto key = job_key_of(s);
    if (!key) {
        return failure{key.error()};
    }
    auto path = socket_path(s, key.value());
    if (!path) {
        return failure{path.error()};
    }
    return std::pair{key.value(), path.value()};
}

/* Attaches to the agent that listens already, starting none. */
result<client::attachment> attach_running(const link_settings &s)
{
    auto where = key_and_socket(s);
    if (!where) {
        return failure{where.error()};
    }
    return client::attach(where.value().second, where.value().first, s.timeout);
}

result<client::attachment> attach(const link_settings &s)
{
    if (!s.start_agent) {
        return attach_running(s);
    }
    client::launch_options opt;
    opt.device     = s.device;
    opt.port       = s.port;
    opt.job_key    = s.job_key;
    opt.rvtd_path  = s.rvtd_path;
    opt.extra_args = s.agent_args;
    opt.timeout    = s.timeout;
    return client::attach_or_start(opt);
}

} // namespace

agent_link::agent_link(link_settings settings) : m_settings(std::move(settings))
{
}

agent_link::~agent_link()
{
    if (m_session) {
        ucs_debug("rvt %s:%u: detaching client %u", m_settings.device.c_str(),
                  m_settings.port, m_session->client_index());
        /* so that once the MD is closed, the agent has seen the process
         * go (client::leave) */
        if (!m_session->leave(leave_wait)) {
            ucs_debug("rvt %s:%u: the agent did not let client %u go "
                      "within %lld ms",
                      m_settings.device.c_str(), m_settings.port,
                      m_session->client_index(),
                      static_cast<long long>(leave_wait.count()));
        }
    }
}

result<client::session *> agent_link::attach_locked()
{
    if (m_session) {
        return m_session.get();
    }
    auto where = key_and_socket(m_settings);
    if (!where) {
        return failure{where.error()};
    }
    auto at = attach(m_settings);
    if (!at) {
        return failure{at.error()};
    }
    std::tie(m_job_key, m_socket_path) = where.value();
    auto s = client::session::open(std::move(at).value());
    if (!s) {
        return failure{s.error()};
    }
    m_session = std::move(s).value();
    ucs_debug("rvt %s:%u: attached as client %u (agent %016llx, %u QPs per "
              "node, AM up to %u bytes)",
              m_settings.device.c_str(), m_settings.port,
              m_session->client_index(),
              static_cast<unsigned long long>(m_session->attached().agent_id),
              m_session->num_qps(), m_session->max_am_size());
    warn_of_agent_settings();
    if ((m_session->attached().features &
         wire::agent_feature_unauthenticated) != 0) {
        /* the process's registered memory is reachable by any host that
         * sends the job key: said where the user looks */
        ucs_warn("rvt %s:%u: agent %016llx does not authenticate its peers "
                 "(--auth=none): any host on the fabric that sends the job "
                 "key '%s' can reach this process's registered memory; run "
                 "munged on every node or give the job a secret "
                 "(RVT_JOB_SECRET_FILE)",
                 m_settings.device.c_str(), m_settings.port,
                 static_cast<unsigned long long>(
                         m_session->attached().agent_id),
                 m_job_key.c_str());
    }
    return m_session.get();
}

void agent_link::warn_of_agent_settings() const
{
    const client::attachment &a = m_session->attached();
    for (const auto &given : m_settings.agent_settings) {
        const uint32_t used = given.agent_value(a);
        if (used != given.value) {
            ucs_warn("rvt %s:%u: %s=%llu, but agent %016llx uses %u: "
                     "another process (or an administrator) started it, and "
                     "it keeps its own; only the process that starts the "
                     "agent passes its value",
                     m_settings.device.c_str(), m_settings.port,
                     given.variable.c_str(),
                     static_cast<unsigned long long>(given.value),
                     static_cast<unsigned long long>(a.agent_id), used);
        }
    }
}

bool agent_link::may_attach()
{
    std::lock_guard guard(m_lock);
    if (m_settings.start_agent || m_session) {
        return true;
    }
    auto key = job_key_of(m_settings);
    if (!key) {
        return false;
    }
    auto path = socket_path(m_settings, key.value());
    struct stat st;
    return path && ::stat(path.value().c_str(), &st) == 0 &&
           S_ISSOCK(st.st_mode);
}

result<client::session *> agent_link::session()
{
    std::lock_guard guard(m_lock);
    return attach_locked();
}

result<client::memory_region>
agent_link::register_memory(void *addr, size_t length, int access)
{
    std::lock_guard guard(m_lock);
    auto s = attach_locked();
    if (!s) {
        return failure{s.error()};
    }
    /* the agent answers the announcement (its check of the MR) */
    return s.value()->register_memory(addr, length, access, m_settings.timeout);
}

result<uint32_t>
agent_link::deregister_memory(const client::memory_region &mr, bool invalidate)
{
    std::lock_guard guard(m_lock);
    if (!m_session) {
        return failure{"deregister: not attached to an agent"};
    }
    if (invalidate) {
        return m_session->deregister_memory(mr, m_settings.timeout);
    }
    return m_session->deregister_memory(mr);
}

result<std::unique_ptr<client::session>> agent_link::attach_sibling()
{
    std::unique_lock guard(m_lock);
    auto leader = attach_locked();
    if (!leader) {
        return failure{leader.error()};
    }
    const wire::leader_ref ref{leader.value()->client_index(),
                               leader.value()->attached().client_generation};
    const std::string path = m_socket_path;
    const std::string key  = m_job_key;
    guard.unlock(); /* the sibling's socket is its own */
    auto at = client::attach(path, key, m_settings.timeout, ref);
    if (!at) {
        return failure{at.error()};
    }
    auto s = client::session::open(std::move(at).value());
    if (!s) {
        return failure{s.error()};
    }
    ucs_debug("rvt %s:%u: attached as client %u, a sibling of client %u",
              m_settings.device.c_str(), m_settings.port,
              s.value()->client_index(), ref.index);
    return s;
}

result<uint32_t>
agent_link::connect_peer(client::session &s, const wire::agent_address &remote)
{
    std::unique_lock guard(m_lock, std::defer_lock);
    if (&s == m_session.get()) {
        guard.lock();
    }
    return s.connect_peer(remote, m_settings.timeout);
}

void agent_link::agent_lost()
{
    std::lock_guard guard(m_lock);
    if (m_session) {
        m_session->release_agent_context();
    }
}

bool agent_link::claim_data_path(const void *iface)
{
    std::lock_guard guard(m_lock);
    if (m_data_path_owner != nullptr && m_data_path_owner != iface) {
        return false;
    }
    m_data_path_owner = iface;
    return true;
}

result<done> agent_link::retire_data_path(const void *iface)
{
    static const char retired = 0; /* an owner no interface can be */
    std::lock_guard guard(m_lock);
    if (m_data_path_owner != iface || !m_session) {
        return failure{"retire the address: this interface does not own "
                       "the memory domain's attachment"};
    }
    m_data_path_owner = &retired;
    return m_session->retire_address(leave_wait);
}

} // namespace rvt::uct
