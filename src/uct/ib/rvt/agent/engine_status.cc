/*
 * What rvt-status shows about the data path: clients, peers, QPs,
 * counters and the receive pool, as JSON or as text for people.
 */
#include "uct/ib/rvt/agent/engine.h"

#include "uct/ib/rvt/common/format.h"

#include <arpa/inet.h>

namespace rvt::agent {

namespace {

std::string gid_text(const uint8_t (&gid)[16])
{
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(AF_INET6, gid, buf, sizeof(buf));
    return buf;
}

} // namespace

/* Connections made after the first (for loopback: its rebuilds). */
uint64_t engine::reconnects_of(const peer &p)
{
    const uint64_t connects = p.conn->counters().connects;
    return connects > 0 ? connects - 1 : 0;
}

std::string engine::status(bool human) const
{
    const nic_counters nc = m_nic.counters();
    uint32_t rc_qps       = 0;
    for (const auto &p : m_peers) {
        rc_qps += static_cast<uint32_t>(p->qps.size());
    }
    std::string out;
    if (human) {
        out += format("address   GID %s, UD QPN %u, K = %u RC QPs per peer\n",
                      gid_text(address().gid).c_str(), m_nic.ud_qpn(),
                      m_cfg.peers.num_qps);
        out += format("receive   %u of %u buffers posted (%u bytes each); "
                      "misrouted %llu, bad immediates %llu\n",
                      nc.receives_posted, nc.receive_buffers,
                      m_layout.caps.slot_size,
                      static_cast<unsigned long long>(m_totals.misrouted),
                      static_cast<unsigned long long>(m_totals.bad_immediates));
        out += format("delivered %llu AMs, %llu writes with immediate "
                      "(%llu bytes) to clients, gone ones included\n",
                      static_cast<unsigned long long>(m_totals.am_in),
                      static_cast<unsigned long long>(m_totals.writes_in),
                      static_cast<unsigned long long>(m_totals.write_bytes_in));
        out += format("handshake %llu datagrams sent, %llu received, %llu "
                      "dropped\n",
                      static_cast<unsigned long long>(nc.datagrams_sent),
                      static_cast<unsigned long long>(nc.datagrams_received),
                      static_cast<unsigned long long>(nc.datagrams_dropped));
        out += format(
                "MRs       %llu released by their clients (%llu after "
                "the ops using them, %zu waiting); failed %llu\n",
                static_cast<unsigned long long>(m_mrs.counters().released),
                static_cast<unsigned long long>(m_mrs.counters().deferred),
                m_mrs.releases_waiting(),
                static_cast<unsigned long long>(m_mrs.counters().leaked));
        out += format("paused    %llu times, resumed %llu (clients that "
                      "did not read); %llu ops parked for peers' paused "
                      "clients\n",
                      static_cast<unsigned long long>(m_totals.pauses),
                      static_cast<unsigned long long>(m_totals.resumes),
                      static_cast<unsigned long long>(m_totals.ops_parked));
        out += format("gone      %llu clients; their MRs deregistered %llu, "
                      "waiting %zu clients\n",
                      static_cast<unsigned long long>(m_totals.clients_gone),
                      static_cast<unsigned long long>(m_mrs.counters().cleaned),
                      m_mrs.gone_waiting());
        out += format("peers     %zu, RC QPs %u in all\n", m_peers.size(),
                      rc_qps);
        for (const auto &p : m_peers) {
            out += format("  peer %u  %s  %s  QPs %zu  ops %llu  bytes %llu  "
                          "failed %llu  received %llu  reconnects %llu%s%s\n",
                          p->index,
                          p->loopback ? "(this node)" :
                                        gid_text(p->addr.gid).c_str(),
                          std::string(to_string(p->conn->state())).c_str(),
                          p->qps.size(),
                          static_cast<unsigned long long>(p->n.ops_posted),
                          static_cast<unsigned long long>(p->n.bytes_posted),
                          static_cast<unsigned long long>(p->n.ops_failed),
                          static_cast<unsigned long long>(p->n.recv_msgs),
                          static_cast<unsigned long long>(reconnects_of(*p)),
                          p->last_error.empty() ? "" : "  last error: ",
                          p->last_error.c_str());
        }
        for (uint32_t i = 0; i < m_clients.size(); ++i) {
            const client_state &c = m_clients[i];
            if (!c.attached) {
                continue;
            }
            out += format("  client %u  ops %llu  bytes %llu  invalid %llu  "
                          "AMs in %llu  writes in %llu (%llu bytes)  "
                          "held back %zu%s\n",
                          i, static_cast<unsigned long long>(c.ops),
                          static_cast<unsigned long long>(c.bytes),
                          static_cast<unsigned long long>(c.invalid),
                          static_cast<unsigned long long>(c.am_in),
                          static_cast<unsigned long long>(c.writes_in),
                          static_cast<unsigned long long>(c.write_bytes_in),
                          c.channel->backlog(), c.paused ? "  paused" : "");
        }
        return out;
    }
    out += format("{\"gid\": %s, \"ud_qpn\": %u, \"num_qps\": %u, "
                  "\"rc_qps\": %u, ",
                  json_string(gid_text(address().gid)).c_str(), m_nic.ud_qpn(),
                  m_cfg.peers.num_qps, rc_qps);
    out += format("\"receive_pool\": {\"posted\": %u, \"count\": %u, "
                  "\"buffer_size\": %u}, \"misrouted\": %llu, "
                  "\"bad_immediates\": %llu, ",
                  nc.receives_posted, nc.receive_buffers,
                  m_layout.caps.slot_size,
                  static_cast<unsigned long long>(m_totals.misrouted),
                  static_cast<unsigned long long>(m_totals.bad_immediates));
    out += format("\"delivered\": {\"am\": %llu, \"writes\": %llu, "
                  "\"write_bytes\": %llu}, ",
                  static_cast<unsigned long long>(m_totals.am_in),
                  static_cast<unsigned long long>(m_totals.writes_in),
                  static_cast<unsigned long long>(m_totals.write_bytes_in));
    out += format("\"handshake\": {\"sent\": %llu, \"received\": %llu, "
                  "\"dropped\": %llu}, ",
                  static_cast<unsigned long long>(nc.datagrams_sent),
                  static_cast<unsigned long long>(nc.datagrams_received),
                  static_cast<unsigned long long>(nc.datagrams_dropped));
    out += format("\"clients_gone\": %llu, \"mrs_cleaned\": %llu, "
                  "\"mrs_released\": %llu, "
                  "\"mrs_leaked\": %llu, \"mrs_deferred\": %llu, "
                  "\"releases_waiting\": %zu, \"gone_waiting\": %zu, "
                  "\"wakeups\": %llu, \"pauses\": %llu, "
                  "\"resumes\": %llu, \"ops_parked\": %llu, \"peers\": [",
                  static_cast<unsigned long long>(m_totals.clients_gone),
                  static_cast<unsigned long long>(m_mrs.counters().cleaned),
                  static_cast<unsigned long long>(m_mrs.counters().released),
                  static_cast<unsigned long long>(m_mrs.counters().leaked),
                  static_cast<unsigned long long>(m_mrs.counters().deferred),
                  m_mrs.releases_waiting(), m_mrs.gone_waiting(),
                  static_cast<unsigned long long>(m_totals.wakeups),
                  static_cast<unsigned long long>(m_totals.pauses),
                  static_cast<unsigned long long>(m_totals.resumes),
                  static_cast<unsigned long long>(m_totals.ops_parked));
    for (size_t i = 0; i < m_peers.size(); ++i) {
        const peer &p = *m_peers[i];
        size_t queued = 0;
        for (const auto &l : p.lanes) {
            queued += l.backlog.size();
        }
        size_t parked = 0;
        for (const auto &[dst, ops] : p.parked) {
            parked += ops.size();
        }
        out += format(
                "%s{\"index\": %u, \"loopback\": %s, \"gid\": %s, "
                "\"ud_qpn\": %u, \"state\": %s, \"qps\": %zu, "
                "\"ops\": %llu, \"bytes\": %llu, \"failed\": %llu, "
                "\"received\": %llu, \"received_bytes\": %llu, "
                "\"qp_errors\": %llu, \"reconnects\": %llu, "
                "\"queued\": %zu, \"parked\": %zu, \"posted\": %u, "
                "\"last_error\": %s}",
                i ? ", " : "", p.index, p.loopback ? "true" : "false",
                json_string(gid_text(p.addr.gid)).c_str(), p.addr.ud_qpn,
                json_string(std::string(to_string(p.conn->state()))).c_str(),
                p.qps.size(), static_cast<unsigned long long>(p.n.ops_posted),
                static_cast<unsigned long long>(p.n.bytes_posted),
                static_cast<unsigned long long>(p.n.ops_failed),
                static_cast<unsigned long long>(p.n.recv_msgs),
                static_cast<unsigned long long>(p.n.recv_bytes),
                static_cast<unsigned long long>(p.n.qp_errors),
                static_cast<unsigned long long>(reconnects_of(p)), queued,
                parked, p.posted, json_string(p.last_error).c_str());
    }
    out += "], \"client_traffic\": [";
    bool first = true;
    for (uint32_t i = 0; i < m_clients.size(); ++i) {
        const client_state &c = m_clients[i];
        if (!c.attached) {
            continue;
        }
        out += format("%s{\"index\": %u, \"ops\": %llu, \"bytes\": %llu, "
                      "\"invalid\": %llu, \"am_in\": %llu, \"writes_in\": "
                      "%llu, \"write_bytes_in\": %llu, \"held_back\": %zu, "
                      "\"inbound_waiting\": %zu, \"paused\": %s}",
                      first ? "" : ", ", i,
                      static_cast<unsigned long long>(c.ops),
                      static_cast<unsigned long long>(c.bytes),
                      static_cast<unsigned long long>(c.invalid),
                      static_cast<unsigned long long>(c.am_in),
                      static_cast<unsigned long long>(c.writes_in),
                      static_cast<unsigned long long>(c.write_bytes_in),
                      c.channel->backlog(), c.channel->inbound_waiting(),
                      c.paused ? "true" : "false");
        first = false;
    }
    return out + "]}";
}

} // namespace rvt::agent
