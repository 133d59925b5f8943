/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The attach server's gate on accepting (see accept_gate.h for the
 * table).
 */
#include "uct/ib/rvt/agent/attach/accept_gate.h"

#include "uct/ib/rvt/common/format.h"

namespace rvt::agent {

accept_gate::accept_gate(uint32_t max_unattached,
                         std::chrono::milliseconds retry) :
    m_max(max_unattached), m_retry(retry)
{
}

std::string accept_gate::accepted()
{
    ++m_unattached;
    if (m_unattached != m_max || !worth_logging(++m_times_full)) {
        return {};
    }
    return format("attach server: %u connections have not attached, "
                  "max-unattached (%u): accepting no more until one attaches "
                  "or closes (%llu so far)",
                  m_unattached, m_max,
                  static_cast<unsigned long long>(m_times_full));
}

void accept_gate::settled()
{
    if (m_unattached > 0) {
        --m_unattached;
    }
}

void accept_gate::fd_freed()
{
    m_no_fds_until.reset();
}

std::string accept_gate::out_of_fds(time_point now, std::string_view why)
{
    m_no_fds_until = now + m_retry;
    if (!worth_logging(++m_fd_shortages)) {
        return {};
    }
    return format("attach server: accept failed: %.*s: accepting no more "
                  "until a connection closes, or for %lld ms (%llu so far)",
                  static_cast<int>(why.size()), why.data(),
                  static_cast<long long>(m_retry.count()),
                  static_cast<unsigned long long>(m_fd_shortages));
}

void accept_gate::tick(time_point now)
{
    if (m_no_fds_until && now >= *m_no_fds_until) {
        m_no_fds_until.reset();
    }
}

} // namespace rvt::agent
