/*
 * What rvt-status shows about the data path: clients, peers, QPs,
 * counters and the receive pool, as JSON or as text for people.
 */
#include "uct/ib/rvt/agent/engine.h"

#include "uct/ib/rvt/common/format.h"
#include "uct/ib/rvt/common/status_json.h"

#include <arpa/inet.h>

namespace rvt::agent {

std::string gid_text(std::span<const uint8_t, 16> gid)
{
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(AF_INET6, gid.data(), buf, sizeof(buf));
    return buf;
}

namespace {

/* The attach server's bounds (attach_server.h, "Bounded intake"). */
nlohmann::ordered_json intake_json(const intake_counters &in)
{
    return {{"unattached", in.unattached},
            {"max_unattached", in.max_unattached},
            {"times_full", in.times_full},
            {"fd_shortages", in.fd_shortages},
            {"reads_deferred", in.reads_deferred}};
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
                      "%llu completions for a buffer not posted dropped, "
                      "%llu double reposts skipped; "
                      "misrouted %llu (detached %llu, old generation "
                      "%llu), bad immediates %llu\n",
                      nc.receives_posted, nc.receive_buffers,
                      m_layout.caps.slot_size,
                      static_cast<unsigned long long>(nc.receives_extra),
                      static_cast<unsigned long long>(nc.reposts_refused),
                      static_cast<unsigned long long>(m_totals.misrouted),
                      static_cast<unsigned long long>(m_totals.stale_detached),
                      static_cast<unsigned long long>(
                              m_totals.stale_generation),
                      static_cast<unsigned long long>(m_totals.bad_immediates));
        out += format("departed  %llu told to peers, %llu heard from "
                      "peers, %llu ops failed for them, %llu bad "
                      "controls\n",
                      static_cast<unsigned long long>(m_totals.gone_told),
                      static_cast<unsigned long long>(m_totals.gone_heard),
                      static_cast<unsigned long long>(m_totals.gone_ops_failed),
                      static_cast<unsigned long long>(m_totals.bad_controls));
        out += format("delivered %llu AMs, %llu writes with immediate "
                      "(%llu bytes) to clients, gone ones included\n",
                      static_cast<unsigned long long>(m_totals.am_in),
                      static_cast<unsigned long long>(m_totals.writes_in),
                      static_cast<unsigned long long>(m_totals.write_bytes_in));
        out += "auth      " + m_auth->describe() + "\n";
        out += format(
                "handshake %llu datagrams sent, %llu received, %llu "
                "dropped; refused: %llu unauthenticated, %llu not "
                "sealed, %llu forged, %llu from unknown "
                "senders, %llu half-open (%zu now), %llu table full; "
                "%llu peers recycled\n",
                static_cast<unsigned long long>(nc.datagrams_sent),
                static_cast<unsigned long long>(nc.datagrams_received),
                static_cast<unsigned long long>(nc.datagrams_dropped),
                static_cast<unsigned long long>(m_totals.unauthenticated),
                static_cast<unsigned long long>(m_totals.unsealed),
                static_cast<unsigned long long>(m_totals.forged_datagrams),
                static_cast<unsigned long long>(m_totals.unknown_datagrams),
                static_cast<unsigned long long>(m_totals.half_open_refused),
                half_open(),
                static_cast<unsigned long long>(m_totals.table_full),
                static_cast<unsigned long long>(m_totals.peers_recycled));
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
        out += format(
                "gone      %llu clients; their MRs deregistered %llu "
                "(%llu never announced), waiting %zu clients; %llu "
                "detached for a corrupt ring\n",
                static_cast<unsigned long long>(m_totals.clients_gone),
                static_cast<unsigned long long>(m_mrs.counters().cleaned),
                static_cast<unsigned long long>(m_mrs.counters().unannounced),
                m_mrs.gone_waiting(),
                static_cast<unsigned long long>(m_totals.corrupt_detached));
        out += format("scan      %llu times work was found only by the full "
                      "scan (its work summary bit cleared)\n",
                      static_cast<unsigned long long>(m_totals.scan_found));
        out += format("striped   %llu writes split over the lanes, in "
                      "%llu parts\n",
                      static_cast<unsigned long long>(m_totals.striped_ops),
                      static_cast<unsigned long long>(m_totals.stripe_parts));
        const share_limits &sl = m_share.limits();
        out += format("share     refused over a client's share: %llu ops "
                      "(max-client-ops %u), %llu lkeys (max-client-lkeys "
                      "%u), %llu peers (max-client-peers %u)\n",
                      static_cast<unsigned long long>(
                              m_share.refused(share_bound::ops)),
                      sl.ops,
                      static_cast<unsigned long long>(
                              m_share.refused(share_bound::lkeys)),
                      sl.lkeys,
                      static_cast<unsigned long long>(
                              m_share.refused(share_bound::peers)),
                      sl.peers);
        if (m_server != nullptr) {
            const intake_counters in = m_server->intake();
            out += format("intake    %u connections not attached "
                          "(max-unattached %u), at the bound %llu times; "
                          "%llu accepts found no descriptor; %llu socket "
                          "reads left bytes for the next pass\n",
                          in.unattached, in.max_unattached,
                          static_cast<unsigned long long>(in.times_full),
                          static_cast<unsigned long long>(in.fd_shortages),
                          static_cast<unsigned long long>(in.reads_deferred));
        }
        out += format("peers     %zu, RC QPs %u in all; %llu completions "
                      "came after their op was given up on\n",
                      m_peers.size(), rc_qps,
                      static_cast<unsigned long long>(
                              m_totals.late_completions));
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
                          "held back %zu  ops held %u  peers made %u%s\n",
                          i, static_cast<unsigned long long>(c.ops),
                          static_cast<unsigned long long>(c.bytes),
                          static_cast<unsigned long long>(c.invalid),
                          static_cast<unsigned long long>(c.am_in),
                          static_cast<unsigned long long>(c.writes_in),
                          static_cast<unsigned long long>(c.write_bytes_in),
                          c.channel->backlog(), m_share.held(i),
                          m_share.peers_made(i), c.paused ? "  paused" : "");
        }
        return out;
    }
    return status_json_text(status_json());
}

nlohmann::ordered_json engine::status_json() const
{
    const nic_counters nc = m_nic.counters();
    uint32_t rc_qps       = 0;
    for (const auto &p : m_peers) {
        rc_qps += static_cast<uint32_t>(p->qps.size());
    }
    nlohmann::ordered_json peers = nlohmann::ordered_json::array();
    for (const auto &p : m_peers) {
        size_t queued = 0;
        /* per lane; their sum is `posted` unless the books are wrong */
        nlohmann::ordered_json in_flight = nlohmann::ordered_json::array();
        for (const auto &l : p->lanes) {
            queued += l.backlog.size();
            in_flight.push_back(l.inflight.size());
        }
        size_t parked = 0;
        for (const auto &[dst, ops] : p->parked) {
            parked += ops.size();
        }
        peers.push_back({{"index", p->index},
                         {"loopback", p->loopback},
                         {"gid", gid_text(p->addr.gid)},
                         {"ud_qpn", p->addr.ud_qpn},
                         {"state", std::string(to_string(p->conn->state()))},
                         {"qps", p->qps.size()},
                         {"ops", p->n.ops_posted},
                         {"bytes", p->n.bytes_posted},
                         {"failed", p->n.ops_failed},
                         {"received", p->n.recv_msgs},
                         {"received_bytes", p->n.recv_bytes},
                         {"qp_errors", p->n.qp_errors},
                         {"confirmed", p->confirmed},
                         {"reconnects", reconnects_of(*p)},
                         {"queued", queued},
                         {"parked", parked},
                         {"posted", p->posted},
                         {"in_flight_by_lane", in_flight},
                         {"last_error", p->last_error}});
    }
    nlohmann::ordered_json traffic = nlohmann::ordered_json::array();
    for (uint32_t i = 0; i < m_clients.size(); ++i) {
        const client_state &c = m_clients[i];
        if (!c.attached) {
            continue;
        }
        traffic.push_back({{"index", i},
                           {"ops", c.ops},
                           {"bytes", c.bytes},
                           {"invalid", c.invalid},
                           {"am_in", c.am_in},
                           {"writes_in", c.writes_in},
                           {"write_bytes_in", c.write_bytes_in},
                           {"held_back", c.channel->backlog()},
                           {"inbound_waiting", c.channel->inbound_waiting()},
                           {"paused", c.paused},
                           {"held", m_share.held(i)},
                           {"lkeys", m_mrs.lkeys_with(i, work_request{})},
                           {"peers_made", m_share.peers_made(i)}});
    }
    const share_limits &sl       = m_share.limits();
    nlohmann::ordered_json share = {
            {"max_ops", sl.ops},
            {"max_lkeys", sl.lkeys},
            {"max_peers", sl.peers},
            {"refused_ops", m_share.refused(share_bound::ops)},
            {"refused_lkeys", m_share.refused(share_bound::lkeys)},
            {"refused_peers", m_share.refused(share_bound::peers)}};
    return {{"gid", gid_text(address().gid)},
            {"ud_qpn", m_nic.ud_qpn()},
            {"num_qps", m_cfg.peers.num_qps},
            {"am_size", m_cfg.peers.am_size},
            {"rc_qps", rc_qps},
            {"receive_pool",
             {{"posted", nc.receives_posted},
              {"count", nc.receive_buffers},
              {"buffer_size", m_layout.caps.slot_size},
              {"extra_completions", nc.receives_extra},
              {"refused_reposts", nc.reposts_refused}}},
            {"misrouted", m_totals.misrouted},
            {"stale",
             {{"detached", m_totals.stale_detached},
              {"generation", m_totals.stale_generation},
              {"told", m_totals.gone_told}}},
            {"departed",
             {{"heard", m_totals.gone_heard},
              {"ops_failed", m_totals.gone_ops_failed},
              {"bad_controls", m_totals.bad_controls},
              {"remembered", m_departures.gone_count()}}},
            {"bad_immediates", m_totals.bad_immediates},
            {"delivered",
             {{"am", m_totals.am_in},
              {"writes", m_totals.writes_in},
              {"write_bytes", m_totals.write_bytes_in}}},
            {"auth", wire::conn::to_string(m_auth->kind())},
            {"handshake",
             {{"sent", nc.datagrams_sent},
              {"unauthenticated", m_totals.unauthenticated},
              {"unsealed", m_totals.unsealed},
              {"received", nc.datagrams_received},
              {"dropped", nc.datagrams_dropped},
              {"forged", m_totals.forged_datagrams},
              {"unknown_sender", m_totals.unknown_datagrams},
              {"half_open", half_open()},
              {"half_open_refused", m_totals.half_open_refused},
              {"table_full", m_totals.table_full},
              {"recycled", m_totals.peers_recycled}}},
            {"clients_gone", m_totals.clients_gone},
            {"corrupt_detached", m_totals.corrupt_detached},
            {"late_completions", m_totals.late_completions},
            {"mrs_cleaned", m_mrs.counters().cleaned},
            {"mrs_unannounced", m_mrs.counters().unannounced},
            {"mrs_released", m_mrs.counters().released},
            {"mrs_leaked", m_mrs.counters().leaked},
            {"mrs_deferred", m_mrs.counters().deferred},
            {"releases_waiting", m_mrs.releases_waiting()},
            {"gone_waiting", m_mrs.gone_waiting()},
            {"wakeups", m_totals.wakeups},
            {"scan_found", m_totals.scan_found},
            {"pauses", m_totals.pauses},
            {"resumes", m_totals.resumes},
            {"ops_parked", m_totals.ops_parked},
            {"striped_ops", m_totals.striped_ops},
            {"stripe_parts", m_totals.stripe_parts},
            {"share", std::move(share)},
            {"intake", m_server != nullptr ? intake_json(m_server->intake()) :
                                             nlohmann::ordered_json()},
            {"peers", std::move(peers)},
            {"client_traffic", std::move(traffic)}};
}

std::string engine::check_books() const
{
    std::string out;
    uint64_t posted = 0;
    for (const auto &p : m_peers) {
        size_t inflight = 0;
        for (const auto &l : p->lanes) {
            inflight += l.inflight.size();
        }
        if (inflight != p->posted) {
            out += format("peer %u: %u ops posted, its lanes have %zu; ",
                          p->index, p->posted, inflight);
        }
        posted += p->posted;
    }
    if (posted != m_cq_used) {
        out += format("%llu ops posted, %u CQ credits used; ",
                      static_cast<unsigned long long>(posted), m_cq_used);
    }
    std::unordered_map<uint32_t, uint32_t> parts; /* op -> its live parts */
    for (const auto &op : m_ops) {
        if (op.in_use && op.stripe.of != no_op) {
            ++parts[op.stripe.of];
        }
    }
    for (uint32_t i = 0; i < m_ops.size(); ++i) {
        const op_record &op = m_ops[i];
        const uint32_t live = parts.contains(i) ? parts[i] : 0;
        if (live != (op.in_use ? op.stripe.pending : 0)) {
            out += format("op %u: %u parts pending, %u parts in use; ", i,
                          op.stripe.pending, live);
        }
    }
    /* each attached client's share: its ops held, parts not counted */
    std::unordered_map<uint32_t, uint32_t> held;
    for (const auto &op : m_ops) {
        if (op.in_use && op.client != no_client && op.stripe.of == no_op &&
            m_clients[op.client].generation == op.generation) {
            ++held[op.client];
        }
    }
    for (uint32_t i : m_attached) {
        const uint32_t mine = held.contains(i) ? held[i] : 0;
        if (mine != m_share.held(i)) {
            out += format("client %u: %u ops held, its share counts %u; ", i,
                          mine, m_share.held(i));
        }
    }
    return out;
}

} // namespace rvt::agent
