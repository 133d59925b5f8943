/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What rvt-status shows about the data path: clients, peers, QPs,
 * counters and the receive pool, as JSON or as text for people.
 */
#include "uct/ib/rvt/agent/engine/engine.h"

#include "uct/ib/rvt/common/format.h"
#include "uct/ib/rvt/common/status_fields.h"
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

/* The text's lines, in the order it shows them (the fields name theirs). */
constexpr std::string_view status_text_lines[] = {
        "address",   "receive", "departed", "delivered", "auth",
        "handshake", "MRs",     "paused",   "gone",      "scan",
        "striped",   "share",   "intake",   "peers"};

} // namespace

/* Connections made after the first (for loopback: its rebuilds). */
uint64_t engine::reconnects_of(const peer &p)
{
    const uint64_t connects = p.conn->counters().connects;
    return connects > 0 ? connects - 1 : 0;
}

/* A peer's fields: its JSON object in "peers" and its row in the text. */
std::vector<status_field> engine::peer_status(const peer &p) const
{
    /* per lane; their sum is `posted` unless the books are wrong */
    nlohmann::ordered_json in_flight = nlohmann::ordered_json::array();
    for (uint16_t i = 0; i < m_cfg.peers.num_qps; ++i) {
        in_flight.push_back(m_lanes.in_flight(p.index, i));
    }
    /* a row's numbers are no metrics of the agent's (a series per peer:
     * up to --max-peers of each); they say what they are all the same */
    const char *row = "peer";
    return {{"", "index", row, "", "", status_number(p.index)},
            {"", "loopback", row, "(this node)", "", p.loopback},
            {"", "gid", row, "", "", gid_text(p.addr.gid)},
            {"", "ud_qpn", row, "UD QPN", "", status_number(p.addr.ud_qpn)},
            {"", "state", row, "", "", std::string(to_string(p.conn->state()))},
            {"", "qps", row, "QPs", "", status_gauge(p.qps().size())},
            {"", "ops", row, "ops", "", status_counter(p.traffic.ops_posted)},
            {"", "bytes", row, "bytes", "",
             status_counter(p.traffic.bytes_posted)},
            {"", "failed", row, "failed", "",
             status_counter(p.traffic.ops_failed)},
            {"", "received", row, "received", "",
             status_counter(p.traffic.recv_msgs)},
            {"", "received_bytes", row, "received bytes", "",
             status_counter(p.traffic.recv_bytes)},
            {"", "qp_errors", row, "QP errors", "",
             status_counter(p.traffic.qp_errors)},
            {"", "confirmed", row, "confirmed", "", p.confirmed()},
            {"", "reconnects", row, "reconnects", "",
             status_counter(reconnects_of(p))},
            {"", "keepalives", row, "keepalives", "",
             status_counter(p.conn->counters().keepalives_sent)},
            {"", "queued", row, "queued", "",
             status_gauge(m_lanes.queued(p.index))},
            {"", "parked", row, "parked", "",
             status_gauge(m_lanes.parked(p.index))},
            {"", "posted", row, "posted", "",
             status_gauge(m_lanes.posted(p.index))},
            {"", "in_flight_by_lane", row, "in flight by lane", "", in_flight},
            {"", "sq_depth", row, "send WRs per QP", "",
             status_number(p.sq_depth())},
            {"", "last_error", row, "last error:", "", p.last_error}};
}

/* An attached client's fields: its JSON object in "client_traffic" and
 * its row in the text. */
std::vector<status_field> engine::client_status(uint32_t i) const
{
    const client_state &c = m_clients[i];
    const char *row       = "client";
    /* a row's numbers: as a peer's (peer_status) */
    return {{"", "index", row, "", "", status_number(i)},
            {"", "ops", row, "ops", "", status_counter(c.ops)},
            {"", "bytes", row, "bytes", "", status_counter(c.bytes)},
            {"", "invalid", row, "invalid", "", status_counter(c.invalid)},
            {"", "am_in", row, "AMs in", "", status_counter(c.am_in)},
            {"", "writes_in", row, "writes in", "",
             status_counter(c.writes_in)},
            {"", "write_bytes_in", row, "written in", "bytes",
             status_counter(c.write_bytes_in)},
            {"", "held_back", row, "held back", "",
             status_gauge(c.channel->backlog())},
            {"", "inbound_waiting", row, "inbound waiting", "",
             status_gauge(c.channel->inbound_waiting())},
            {"", "paused", row, "paused", "", c.paused},
            {"", "held", row, "ops held", "", status_gauge(m_share.held(i))},
            {"", "lkeys", row, "lkeys", "",
             status_gauge(m_mrs.lkeys_with(i, work_request{}))},
            /* its process's (client_share.h, "peers") */
            {"", "peers_made", row, "peers made for its process", "",
             status_gauge(m_share.peers_charged(
                     c.who != nullptr ? c.who->pid : 0))}};
}

/* Every fact the status shows, in the JSON's order: the one list both
 * renderings walk (common/status_fields.h). */
std::vector<status_field> engine::status_fields() const
{
    const nic_counters nc        = m_nic.counters();
    const lanes::counters &lt    = m_lanes.totals();
    uint32_t rc_qps              = 0;
    nlohmann::ordered_json peers = nlohmann::ordered_json::array();
    for (const auto &p : m_peers) {
        rc_qps += static_cast<uint32_t>(p->qps().size());
        peers.push_back(status_object(peer_status(*p)));
    }
    nlohmann::ordered_json traffic = nlohmann::ordered_json::array();
    for (uint32_t i : m_clients.attached()) {
        traffic.push_back(status_object(client_status(i)));
    }
    const share_limits &sl      = m_share.limits();
    const mr_counters &mr       = m_mrs.counters();
    const char *hs              = "handshake";
    /* a number's kind (status_fields.h, "Metrics"): C a counter, G a
     * gauge, N no metric (an id, a setting, the Q_Key: a secret of the
     * agent's address, never a metric) */
    const auto C                = [](auto n) { return status_counter(n); };
    const auto G                = [](auto n) { return status_gauge(n); };
    const auto N                = [](auto n) { return status_number(n); };
    std::vector<status_field> f = {
            {"", "gid", "address", "GID", "", gid_text(address().gid)},
            {"", "ud_qpn", "address", "UD QPN", "", N(m_nic.ud_qpn())},
            {"", "ud_qkey", "address", "Q_Key", "", N(m_nic.ud_qkey())},
            {"", "num_qps", "address", "RC QPs per peer", "",
             N(m_cfg.peers.num_qps)},
            {"", "am_size", "address", "largest AM", "bytes",
             N(m_cfg.peers.am_size)},
            {"", "rc_qps", "peers", "RC QPs in all", "", G(rc_qps)},
            {"", "deep_peers", "peers", "peers with deep QPs", "",
             G(m_peers.deep_held())},
            {"", "keepalive_ms", "peers", "keepalive after idle", "ms",
             G(keepalive_interval().count())},
            {"", "qp_errors", "peers", "QP errors in all", "",
             C(m_totals.qp_errors)},
            {"receive_pool", "posted", "receive", "buffers posted", "",
             G(nc.receives_posted)},
            {"receive_pool", "count", "receive", "of", "",
             N(nc.receive_buffers)},
            {"receive_pool", "buffer_size", "receive", "each", "bytes",
             N(m_layout.caps.slot_size)},
            {"receive_pool", "extra_completions", "receive",
             "completions for a buffer not posted, dropped", "",
             C(nc.receives_extra)},
            {"receive_pool", "refused_reposts", "receive",
             "double reposts skipped", "", C(nc.reposts_refused)},
            {"", "misrouted", "receive", "misrouted", "",
             C(m_totals.misrouted)},
            {"stale", "detached", "receive", "misrouted: detached", "",
             C(m_totals.stale_detached)},
            {"stale", "generation", "receive", "misrouted: old generation", "",
             C(m_totals.stale_generation)},
            {"stale", "told", "departed", "told to peers", "",
             C(m_totals.gone_told)},
            {"departed", "heard", "departed", "heard from peers", "",
             C(m_totals.gone_heard)},
            {"departed", "ops_failed", "departed", "ops failed for them", "",
             C(m_totals.gone_ops_failed)},
            {"departed", "bad_controls", "departed", "bad controls", "",
             C(m_totals.bad_controls)},
            {"departed", "remembered", "departed", "remembered", "",
             G(m_departures.gone_count())},
            {"departed", "retiring", "departed",
             "retirements waiting for peers to hear", "",
             G(m_barrier.waiting())},
            {"departed", "unheard", "departed",
             "retirements answered before every peer heard", "",
             C(m_totals.departures_unheard)},
            {"", "bad_immediates", "receive", "bad immediates", "",
             C(m_totals.bad_immediates)},
            {"delivered", "am", "delivered", "AMs", "", C(m_totals.am_in)},
            {"delivered", "writes", "delivered", "writes with immediate", "",
             C(m_totals.writes_in)},
            {"delivered", "write_bytes", "delivered", "written", "bytes",
             C(m_totals.write_bytes_in)},
            {"", "auth", "auth", "", "", wire::conn::to_string(m_auth->kind()),
             m_auth->describe()},
            {hs, "sent", hs, "datagrams sent", "", C(nc.datagrams_sent)},
            {hs, "unauthenticated", hs, "refused unauthenticated", "",
             C(m_totals.unauthenticated)},
            {hs, "unsealed", hs, "refused not sealed", "",
             C(m_totals.unsealed)},
            {hs, "received", hs, "received", "", C(nc.datagrams_received)},
            {hs, "dropped", hs, "dropped", "", C(nc.datagrams_dropped)},
            {hs, "malformed", hs, "refused malformed", "",
             C(m_totals.malformed)},
            {hs, "forged", hs, "refused forged", "",
             C(m_totals.forged_datagrams)},
            {hs, "own_address", hs, "refused naming this agent", "",
             C(m_totals.own_address)},
            {hs, "unknown_sender", hs, "refused from unknown senders", "",
             C(m_totals.unknown_datagrams)},
            {hs, "unchecked", hs, "refused unchecked (sender held)", "",
             C(m_senders.held_back())},
            {hs, "holds", hs, "senders held", "", C(m_senders.holds())},
            {hs, "throttled", hs, "refused unchecked (sender's checks used)",
             "", C(m_senders.throttled())},
            {hs, "crowded", hs, "refused unchecked (every sender held)", "",
             C(m_senders.crowded())},
            {hs, "passes_cut", hs, "passes whose checks took their time", "",
             C(m_senders.passes_cut())},
            {hs, "half_open", hs, "half-open now", "", G(m_peers.half_open())},
            {hs, "half_open_refused", hs, "refused half-open", "",
             C(m_totals.half_open_refused)},
            {hs, "table_full", hs, "refused table full", "",
             C(m_totals.table_full)},
            {hs, "recycled", hs, "peers recycled", "", C(m_peers.recycled())},
            {"", "clients_gone", "gone", "clients", "",
             C(m_totals.clients_gone)},
            {"", "corrupt_detached", "gone", "detached for a corrupt ring", "",
             C(m_totals.corrupt_detached)},
            {"", "late_completions", "peers",
             "completions after their op was given up on", "",
             C(m_totals.late_completions)},
            {"", "mrs_cleaned", "gone", "their MRs deregistered", "",
             C(mr.cleaned)},
            {"", "mrs_unannounced", "gone", "never announced", "",
             C(mr.unannounced)},
            {"", "mrs_released", "MRs", "released by their clients", "",
             C(mr.released)},
            {"", "mrs_leaked", "MRs", "failed", "", C(mr.leaked)},
            {"", "mrs_deferred", "MRs", "after the ops using them", "",
             C(mr.deferred)},
            {"", "releases_waiting", "MRs", "waiting", "",
             G(m_mrs.releases_waiting())},
            {"", "gone_waiting", "gone", "clients waiting", "",
             G(m_mrs.gone_waiting())},
            {"", "wakeups", "scan", "wakeups", "", C(m_totals.wakeups)},
            {"", "scan_found", "scan",
             "times work was found only by the full scan", "",
             C(m_clients.totals().scan_found)},
            {"", "pauses", "paused", "times", "", C(m_totals.pauses)},
            {"", "resumes", "paused", "resumed", "", C(m_totals.resumes)},
            {"", "ops_parked", "paused", "ops parked for peers' paused clients",
             "", C(lt.ops_parked)},
            {"", "striped_ops", "striped", "writes split over the lanes", "",
             C(lt.striped_ops)},
            {"", "stripe_parts", "striped", "in parts", "", C(lt.stripe_parts)},
            {"share", "max_ops", "share", "max-client-ops", "", N(sl.ops)},
            {"share", "max_lkeys", "share", "max-client-lkeys", "",
             N(sl.lkeys)},
            {"share", "max_peers", "share", "max-client-peers", "",
             N(sl.peers)},
            {"share", "refused_ops", "share", "refused ops", "",
             C(m_share.refused(share_bound::ops))},
            {"share", "refused_lkeys", "share", "refused lkeys", "",
             C(m_share.refused(share_bound::lkeys))},
            {"share", "refused_peers", "share", "refused peers", "",
             C(m_share.refused(share_bound::peers))},
            {"", "invalid_requests", "share", "invalid requests", "",
             C(m_totals.invalid_requests)}};
    if (m_server != nullptr) {
        /* the attach server's bounds (attach_server.h, "Bounded intake") */
        const intake_counters in = m_server->intake();
        const char *it           = "intake";
        f.insert(f.end(),
                 {{it, "unattached", it, "connections not attached", "",
                   G(in.unattached)},
                  {it, "max_unattached", it, "max-unattached", "",
                   N(in.max_unattached)},
                  {it, "times_full", it, "at the bound, times", "",
                   C(in.times_full)},
                  {it, "fd_shortages", it, "accepts that found no descriptor",
                   "", C(in.fd_shortages)},
                  {it, "reads_deferred", it,
                   "socket reads that left bytes for the next pass", "",
                   C(in.reads_deferred)}});
    } else {
        f.push_back({"", "intake", "", "", "", nullptr});
    }
    const size_t npeers = peers.size();
    /* a gauge of its length: the peers now */
    f.push_back({"", "peers", "peers", "peers", "", G(std::move(peers)),
                 std::to_string(npeers)});
    f.push_back({"", "client_traffic", "", "", "", std::move(traffic)});
    return f;
}

std::string engine::status(bool human) const
{
    if (!human) {
        return status_json_text(status_json());
    }
    std::string out = status_lines(status_text_lines, status_fields());
    for (const auto &p : m_peers) {
        out += status_row("peer", peer_status(*p));
    }
    for (uint32_t i : m_clients.attached()) {
        out += status_row("client", client_status(i));
    }
    return out;
}

nlohmann::ordered_json engine::status_json() const
{
    return status_object(status_fields());
}

std::string engine::check_books() const
{
    std::string out = m_lanes.check_books();
    /* each attached client's share: its ops held, parts not counted */
    std::unordered_map<uint32_t, uint32_t> held;
    for (uint32_t i = 0; i < m_lanes.records(); ++i) {
        const op_record &op = m_lanes.op(i);
        if (op.in_use && op.client != no_client &&
            op.stripe.of == lanes::no_op &&
            m_clients.generation(op.client) == op.generation) {
            ++held[op.client];
        }
    }
    for (uint32_t i : m_clients.attached()) {
        const uint32_t mine = held.contains(i) ? held[i] : 0;
        if (mine != m_share.held(i)) {
            out += format("client %u: %u ops held, its share counts %u; ", i,
                          mine, m_share.held(i));
        }
    }
    return out;
}

} // namespace rvt::agent
