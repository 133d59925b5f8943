/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine's life cycle, clients and main loop (engine.h); peers are in
 * engine_connect.cc, posting in engine_post.cc, the CQ in
 * engine_complete.cc, status in engine_status.cc.
 */
#include "uct/ib/rvt/agent/engine/engine.h"

#include "uct/ib/rvt/common/imm.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rvt::agent {

engine::engine(nic &n, const engine_config &cfg, const shm_layout &layout,
               std::unique_ptr<peer_auth> auth, std::string job_key,
               uint64_t agent_id, log_fn log) :
    m_nic(n),
    m_cfg(cfg),
    m_layout(layout),
    m_job_key(std::move(job_key)),
    m_agent_id(agent_id),
    m_log(std::move(log)),
    m_auth(std::move(auth)),
    m_senders([&cfg] {
        /* a peer resending its request at the handshake's pace never
         * runs dry (sender_gate.h) */
        sender_gate_config g = cfg.senders;
        g.refill             = std::min(g.refill, cfg.peers.retry_interval);
        return g;
    }()),
    m_peers({cfg.max_peers, cfg.max_half_open, cfg.deep_peers, n.sq_depth(),
             std::clamp(cfg.shallow_sq_depth, 1u, n.sq_depth())},
            [this](uint32_t index) { return m_lanes.holds_nothing(index); }),
    m_lanes({cfg.peers.num_qps, n.sq_depth(), n.send_budget(),
             n.control_buffer()}),
    m_clients(layout, cfg.full_scan_period),
    m_mrs(imm::max_clients, cfg.dead_client_grace),
    m_share(resolve(cfg.share, layout.caps.completion, cfg.max_peers),
            imm::max_clients),
    m_departures(cfg.departure_memory),
    m_barrier(cfg.departure_wait)
{
}

engine::~engine()
{
    for (auto &p : m_peers) {
        for (uint32_t qpn : p->qps()) {
            m_nic.destroy_qp(qpn);
        }
    }
}

result<std::unique_ptr<engine>>
engine::create(nic &n, const engine_config &cfg, const shm_layout &layout,
               std::string job_key, uint64_t agent_id,
               std::unique_ptr<peer_auth> auth, log_fn log)
{
    if (std::string e = config_error(cfg.peers); !e.empty()) {
        return failure{e};
    }
    if (!auth) {
        return failure{"engine: no peer_auth: expected one (no_auth() for "
                       "--auth=none)"};
    }
    if (std::string e = config_error(
                resolve(cfg.share, layout.caps.completion, cfg.max_peers));
        !e.empty()) {
        return failure{e};
    }
    if (n.max_inline() < layout.caps.inline_size) {
        return failure{"engine: the work-data slot is " +
                       std::to_string(layout.caps.inline_size) +
                       " bytes and the nic carries at most " +
                       std::to_string(n.max_inline()) +
                       " inline: expected a slot no larger"};
    }
    std::unique_ptr<engine> e(new engine(n, cfg, layout, std::move(auth),
                                         std::move(job_key), agent_id,
                                         std::move(log)));
    /* agents must agree on it: it sizes every receive buffer */
    e->m_cfg.peers.am_size = layout.caps.slot_size;
    if (e->m_auth->kind() == wire::conn::auth_kind::none) {
        e->m_log("WARNING: peers are not authenticated (--auth=none): any "
                 "host on the fabric that sends the job key gets RC QPs to "
                 "this agent, and with them its clients' memory");
    } else {
        e->m_log("peers must prove they are this job's agents: " +
                 e->m_auth->describe());
    }
    e->m_wake.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!e->m_wake) {
        return failure{std::string("eventfd failed: ") + std::strerror(errno)};
    }
    auto summary = create_shm_segment("rvt-work-summary", work_summary_size);
    if (!summary) {
        return failure{"engine: " + summary.error()};
    }
    e->m_summary_segment = std::move(summary).value();
    e->m_summary         = e->m_summary_segment.map.at<work_summary_line>(0);
    /* the node's own peer: index 0, always there */
    e->add_peer(e->m_peers.place_client(e->address()), e->address(), true);
    return e;
}

wire::agent_address engine::address() const
{
    wire::agent_address a{};
    const gid_bytes gid = m_nic.gid();
    std::memcpy(a.gid, gid.data(), sizeof(a.gid));
    a.ud_qpn   = m_nic.ud_qpn();
    a.ud_qkey  = m_nic.ud_qkey();
    a.agent_id = m_agent_id;
    return a;
}

void engine::serve(attach_server &server)
{
    m_server = &server;
    m_clients.read_generations_from(server.indices());
}

attach_events engine::serve_clients(int timeout_ms)
{
    return act_on(m_server->run_once(timeout_ms));
}

attach_events engine::act_on(attach_events events)
{
    attach_events left;
    for (attach_event &ev : events) {
        switch (ev.kind) {
        case attach_event_kind::attached:
            client_attached(*ev.client);
            break;
        case attach_event_kind::detached:
            client_gone(*ev.client);
            break;
        case attach_event_kind::retired:
            client_retired(*ev.client);
            break;
        case attach_event_kind::peer_request:
            m_server->answer_peer(ev.client->index,
                                  resolve_peer(*ev.client, ev.peer));
            break;
        case attach_event_kind::mr_notice:
            on_mr_notice(*ev.client, ev.notice);
            break;
        case attach_event_kind::status_request:
            left.push_back(ev);
            break;
        }
    }
    return left;
}

void engine::client_attached(const attached_client &c)
{
    m_clients.attach(c);
    m_departures.reattached(c.index, imm::wire_generation(c.generation));
    m_mrs.attached(c.index);
    m_share.attached(c.index);
    if (c.leader) {
        m_mrs.joined(c.index, *c.leader);
    }
}

void engine::client_gone(const attached_client &c)
{
    client_state &s = m_clients[c.index];
    if (s.paused) {
        /* nothing may wait for it: what its peers parked comes now, and
         * is counted as misrouted */
        set_paused(c.index, false);
    }
    m_clients.detach(c.index);
    m_peers.client_gone(c.index);
    ++m_totals.clients_gone;
    /* its posted ops still complete; its queued and parked ones are
     * dropped now (lanes::drop_client), before its departure fails what
     * other clients sent it on this node's own peer */
    m_mrs.client_gone(c.index, c.generation, s.posted);
    m_lanes.drop_client(c.index, c.generation);
    run_ends();
    /* a retirement it waited for has nobody to answer now */
    m_barrier.client_gone(c.index);
    announce_departure(c, std::chrono::steady_clock::now());
}

void engine::client_retired(const attached_client &c)
{
    client_state &s = m_clients[c.index];
    if (s.attached && !s.retired) {
        if (s.paused) { /* nothing comes for it any more */
            set_paused(c.index, false);
        }
        m_clients.retire(c.index);
        /* its rings are read by nobody: no notices of its peers either */
        m_peers.client_gone(c.index);
        const time_point now = std::chrono::steady_clock::now();
        answer_retirements(m_barrier.begin(c.index,
                                           imm::wire_generation(c.generation),
                                           announce_departure(c, now), now));
        return;
    }
    m_server->answer_retired(c.index); /* a repeat: nothing more to wait for */
}

/* Every connected peer hears of c's departure now, so that its senders'
 * endpoints fail even if they send nothing more, or if what they send
 * arrives before this agent saw the process go ("Departed clients"). */
std::vector<uint32_t>
engine::announce_departure(const attached_client &c, time_point now)
{
    std::vector<uint32_t> told;
    for (auto &p : m_peers) {
        if (p->is(peer_state::connected) &&
            tell_gone(*p, c.index, imm::wire_generation(c.generation), now)) {
            told.push_back(p->index);
        }
    }
    return told;
}

void engine::answer_retirements(const departure_barrier::dues &due)
{
    for (const departure_barrier::due &d : due) {
        if (d.unheard > 0) {
            log_counted(m_totals.departures_unheard, [&] {
                return "client index " + std::to_string(d.index) +
                       ": its retirement answered at the end of its " +
                       std::to_string(m_cfg.departure_wait.count()) +
                       " ms wait: " + std::to_string(d.unheard) +
                       (d.unheard == 1 ? " peer" : " peers") +
                       " told of it had not said they heard";
            });
        }
        if (m_server != nullptr) {
            m_server->answer_retired(d.index);
        }
    }
}

result<uint32_t> engine::resolve_peer(const attached_client &c,
                                      const wire::agent_address &remote)
{
    const peer_table::placement where = m_peers.place_client(remote);
    if (where.kind == peer_table::place_kind::full) {
        return failure{"this agent already has " +
                       std::to_string(m_peers.size()) +
                       " peers, its maximum (rvtd --max-peers)"};
    }
    if (where.kind != peer_table::place_kind::known) {
        /* charged to its process (client_share.h, "peers") */
        settle_peer_charges();
        const share_verdict share = m_share.make_peer(c.index, c.pid,
                                                      where.index, remote);
        if (!share.admitted()) {
            if (share.log) {
                m_log("client index " + std::to_string(c.index) +
                      ": peer request refused: " + share.text() + " (" +
                      std::to_string(share.count) + " so far)");
            }
            return failure{share.text()};
        }
    }
    peer *p = where.kind == peer_table::place_kind::known ?
                      &m_peers.at(where.index) :
                      &add_peer(where, remote, false);
    m_peers.use(*p, c.index);
    if (p->is(peer_state::idle) || p->is(peer_state::failed)) {
        const time_point now = std::chrono::steady_clock::now();
        run(*p, p->conn->connect(now), now);
    }
    return p->index;
}

void engine::settle_peer_charges()
{
    /* a handshake request may have taken a charged record (admit) */
    if (m_peers.recycled() == m_recycles_settled) {
        return;
    }
    m_recycles_settled = m_peers.recycled();
    for (const auto &p : m_peers) {
        m_share.peer_is(p->index, p->addr);
    }
}

bool engine::progress(time_point now)
{
    bool busy = poll_cq(now) > 0;
    post_ready(); /* what the completions freed credit for */
    busy |= take_datagrams(now);
    settle_peer_charges(); /* what they recycled: one compare, usually */
    const bool took = take_clients_work(now);
    busy |= took;
    post_ready();
    tick_peers(now);
    if (now >= m_next_watch) {
        watch_lanes(now);
        m_next_watch = now + m_cfg.lane_watch_period;
    }
    if (m_mrs.releases_waiting() > 0) {
        /* the registry's question answered: which of those rings hold
         * work */
        client_set rings_busy;
        m_mrs.rings_asked().for_each([&](uint32_t index) {
            if (m_clients.has_work(index)) {
                rings_busy.insert(index);
            }
        });
        run_mrs(m_mrs.releases_due(rings_busy));
    }
    if (run_mrs(m_mrs.tick(now))) {
        sweep_unannounced();
    }
    m_departures.tick(now);
    answer_retirements(m_barrier.tick(now));
    m_served_clients = serve_given() || took;
    return busy;
}

bool engine::take_clients_work(time_point now)
{
    bool busy = false;
    m_clients.to_visit(now, m_summary).for_each([&](uint32_t i) {
        busy |= take_work(i, m_clients[i]);
        m_clients.visited(i);
    });
    return busy;
}

/* The channels given something this pass, or still holding a backlog or
 * a pause: flushed, checked for pauses, published. */
bool engine::serve_given()
{
    const client_set given = m_clients.flush_given();
    check_pauses(given);
    post_ready(); /* control messages and released ops */
    const bool gave = !given.empty();
    m_clients.wake_given(given); /* and what post_ready gave */
    return gave;
}

bool engine::prepare_sleep()
{
    /* announced, then every client looked at once more */
    if (m_clients.fall_asleep()) {
        end_sleep();
        return false;
    }
    if (!m_nic.arm()) {
        end_sleep();
        return false;
    }
    /* a completion that arrived before arming raised no event: the caller
     * runs progress() once more before it sleeps */
    return true;
}

void engine::end_sleep()
{
    if (!m_clients.wake_up()) {
        return;
    }
    uint64_t count;
    if (read(m_wake.get(), &count, sizeof(count)) == sizeof(count)) {
        ++m_totals.wakeups;
    }
    m_nic.disarm();
}

std::optional<time_point> engine::next_timer() const
{
    std::optional<time_point> t;
    auto take = [&t](std::optional<time_point> x) {
        if (x && (!t || *x < *t)) {
            t = x;
        }
    };
    take(m_peer_timers.next());
    take(m_mrs.next_timer());
    take(m_departures.next_timer());
    take(m_barrier.next_timer());
    return t;
}

bool engine::idle() const
{
    return m_lanes.idle() && m_mrs.idle();
}

void engine::on_mr_notice(const attached_client &c,
                          const wire::mr_notice &notice)
{
    /* a release: work still in its ring may name the MR, and is taken
     * (and checked) at the next progress() */
    const bool ring_busy   = m_clients.has_work(c.index);
    const device_mr device = mr_registry::asks_device(notice) ?
                                     device_says(notice.handle) :
                                     device_mr{};
    run_mrs(m_mrs.on_notice(c.index, notice, ring_busy, device));
}

/* An announcement: what the device says of the handle (mr_registry.h,
 * "Announcements"). */
device_mr engine::device_says(uint32_t handle) const
{
    if (m_nic.owns_mr(handle)) {
        return {device_mr::owner::agent, {}};
    }
    auto mr = m_nic.query_client_mr(handle);
    if (!mr) {
        return {};
    }
    return {device_mr::owner::client,
            {mr->handle, mr->lkey, mr->rkey, mr->addr, mr->length}};
}

bool engine::run_mrs(mr_actions acts)
{
    bool sweep = false;
    for (size_t i = 0; i < acts.size(); ++i) {
        const mr_action a = acts[i];
        switch (a.kind) {
        case mr_action_kind::deregister: {
            /* the outcome's actions run next, before the rest */
            auto more = m_mrs.deregistered(a.handle,
                                           m_nic.deregister(a.handle));
            acts.insert(acts.begin() + static_cast<ptrdiff_t>(i) + 1,
                        more.begin(), more.end());
            break;
        }
        case mr_action_kind::answer_release:
            if (m_server) {
                m_server->answer_release(a.index, a.handle, a.text);
            }
            break;
        case mr_action_kind::answer_announce:
            if (m_server) {
                m_server->answer_announce(a.index, a.handle, a.text);
            }
            break;
        case mr_action_kind::note:
            log_counted(m_mr_notes[static_cast<size_t>(a.about)],
                        [&] { return a.text; });
            break;
        case mr_action_kind::find_unannounced:
            sweep = true; /* alone in tick's list: the caller sweeps */
            break;
        }
    }
    return sweep;
}

void engine::sweep_unannounced()
{
    /* The kernel gives a new object the lowest free handle of the agent's
     * file, whose table holds the agent's own objects (a PD, CQs, the
     * SRQ, and per QP the QP and up to two MRs) and the clients' MRs. So
     * an MR nobody announced has a handle below the number of objects the
     * file held when it was registered: announced MRs (handles up to the
     * highest ever accepted), registrations in flight (each has an
     * intent) and the agent's own. The bound counts those as they are
     * now, with room to spare; an MR above it (made when the agent had
     * many more QPs or registrations in flight than now) is not found,
     * and stays registered until the agent exits, as without intents.
     * Only handles the device confirmed raise the highest (mr_registry.h,
     * "Announcements"), and the kernel's are the lowest free ones, so the
     * bound follows what the file really held at once: an announced
     * handle of 2^32 - 1 is refused and costs the sweep nothing. */
    const size_t qps               = m_peers.size() * m_cfg.peers.num_qps;
    constexpr size_t fixed_objects = 64; /* PD, CQs, SRQ, UD QP, MRs */
    const size_t bound             = size_t{m_mrs.highest_handle()} +
                         m_mrs.intents_pending() + 3 * qps + fixed_objects;
    std::vector<client_mr> found;
    for (size_t h = 0; h <= bound && h <= UINT32_MAX; ++h) {
        const auto handle = static_cast<uint32_t>(h);
        if (m_mrs.knows(handle)) {
            continue;
        }
        if (auto mr = m_nic.query_client_mr(handle)) {
            found.push_back(
                    {mr->handle, mr->lkey, mr->rkey, mr->addr, mr->length});
        }
    }
    /* after the look, what every client has sent: a live client whose MR
     * was found unknown sent its intent (or its announce) before it */
    if (m_server != nullptr) {
        for (const attached_client *c : m_server->clients()) {
            act_on(m_server->take_pending(c->index,
                                          attach_server::read_limit::all_queued)
                           .events);
        }
    }
    log_counted(m_totals.sweeps, [&] {
        return "looked up " + std::to_string(bound + 1) +
               " handles for MRs of departed clients: " +
               std::to_string(found.size()) + " it did not know";
    });
    run_mrs(m_mrs.unannounced(found));
}

void engine::shut_down(time_point now)
{
    for (auto &p : m_peers) {
        run(*p, p->conn->close(now), now);
    }
}

} // namespace rvt::agent
