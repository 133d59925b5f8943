/*
 * The engine's life cycle, clients and main loop (engine.h); peers are in
 * engine_connect.cc, posting in engine_post.cc, the CQ in
 * engine_complete.cc, status in engine_status.cc.
 */
#include "uct/ib/rvt/agent/engine.h"

#include "uct/ib/rvt/agent/engine_tags.h"
#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/common/uverbs_cmd.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rvt::agent {

engine::engine(device &dev, const engine_config &cfg, const shm_layout &layout,
               std::string job_key, uint64_t agent_id, log_fn log) :
    m_dev(dev),
    m_cfg(cfg),
    m_layout(layout),
    m_job_key(std::move(job_key)),
    m_agent_id(agent_id),
    m_log(std::move(log)),
    m_clients(imm::max_clients)
{
}

engine::~engine()
{
    /* QPs before the SRQ, CQ, MRs and channel they use */
    m_peers.clear();
    m_keepalive_mr.reset();
    m_ud.reset();
    m_pool.reset();
    m_cq.reset();
}

result<std::unique_ptr<engine>>
engine::create(device &dev, const engine_config &cfg, const shm_layout &layout,
               std::string job_key, uint64_t agent_id, log_fn log)
{
    if (std::string e = config_error(cfg.peers); !e.empty()) {
        return failure{e};
    }
    std::unique_ptr<engine> e(new engine(dev, cfg, layout, std::move(job_key),
                                         agent_id, std::move(log)));
    e->m_wake.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!e->m_wake) {
        return failure{std::string("eventfd failed: ") + std::strerror(errno)};
    }
    e->m_channel.reset(ibv_create_comp_channel(dev.context()));
    if (!e->m_channel) {
        return failure{std::string("ibv_create_comp_channel failed: ") +
                       std::strerror(errno)};
    }
    /* end_sleep() drains its events without blocking */
    const int fl = fcntl(e->m_channel->fd, F_GETFL);
    if (fl < 0 || fcntl(e->m_channel->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
        return failure{std::string("completion channel: fcntl failed: ") +
                       std::strerror(errno)};
    }
    const int cqe = std::min<int>(static_cast<int>(cfg.cq_size),
                                  dev.attr().max_cqe);
    if (cqe <= static_cast<int>(cfg.srq_size) + 16) {
        return failure{"CQ of " + std::to_string(cqe) +
                       " entries: expected more than the " +
                       std::to_string(cfg.srq_size) + " receive buffers"};
    }
    e->m_cq.reset(
            ibv_create_cq(dev.context(), cqe, nullptr, e->m_channel.get(), 0));
    if (!e->m_cq) {
        return failure{"ibv_create_cq (" + std::to_string(cqe) +
                       " entries) failed: " + std::strerror(errno)};
    }
    e->m_cq_budget = static_cast<uint32_t>(cqe) - cfg.srq_size;
    auto pool = receive_pool::create(dev, cfg.srq_size, layout.caps.slot_size,
                                     tag::receive);
    if (!pool) {
        return failure{pool.error()};
    }
    e->m_pool = std::move(pool).value();
    auto ud   = ud_channel::create(dev, e->m_channel.get());
    if (!ud) {
        return failure{ud.error()};
    }
    e->m_ud = std::move(ud).value();
    e->m_keepalive_mr.reset(ibv_reg_mr(dev.pd(), e->m_keepalive_bytes.data(),
                                       sizeof(e->m_keepalive_bytes), 0));
    if (!e->m_keepalive_mr) {
        return failure{std::string("keepalive buffer: ibv_reg_mr failed: ") +
                       std::strerror(errno)};
    }
    /* the node's own peer: index 0, always there */
    e->add_peer(e->address(), true);
    return e;
}

wire::agent_address engine::address() const
{
    wire::agent_address a{};
    std::memcpy(a.gid, m_dev.gid().raw, sizeof(a.gid));
    a.ud_qpn   = m_ud->qpn();
    a.agent_id = m_agent_id;
    return a;
}

void engine::client_attached(const attached_client &c)
{
    client_state &s = m_clients[c.index];
    /* fresh counters; only the generation carries over, so completions of
     * an earlier holder of this index are told apart */
    const uint32_t generation = s.generation + 1;
    s                         = client_state{};
    s.generation              = generation;
    s.channel  = std::make_unique<client_channel>(c.shm, m_layout,
                                                 c.wake_fd.get());
    s.attached = true;
    m_attached.insert(std::upper_bound(m_attached.begin(), m_attached.end(),
                                       c.index),
                      c.index);
    if (m_asleep) {
        s.channel->set_agent_asleep(true);
    }
}

void engine::client_gone(const attached_client &c)
{
    client_state &s = m_clients[c.index];
    s.attached      = false;
    s.channel.reset();
    std::erase(m_attached, c.index);
    /* its MRs being released are in c.mr_handles: released with the rest */
    std::erase_if(m_deferred, [&](const deferred_release &d) {
        return d.index == c.index;
    });
    for (auto &p : m_peers) {
        p->users.reset(c.index);
    }
    ++m_totals.clients_gone;
    /* its posted ops still complete; its queued ones are dropped as they
     * come to the front of their lanes (post_lane) */
    m_gone.push_back({c.index, s.generation, c.mr_handles, std::nullopt});
}

result<uint32_t> engine::resolve_peer(const attached_client &c,
                                      const wire::agent_address &remote)
{
    std::array<uint8_t, 16> gid;
    std::memcpy(gid.data(), remote.gid, 16);
    auto it = m_peer_by_addr.find({gid, remote.ud_qpn});
    peer *p = nullptr;
    if (it != m_peer_by_addr.end()) {
        p = m_peers[it->second].get();
    } else {
        if (m_peers.size() >= m_cfg.max_peers) {
            return failure{"this agent already has " +
                           std::to_string(m_peers.size()) +
                           " peers, its maximum"};
        }
        p = &add_peer(remote, false);
    }
    p->users.set(c.index);
    if (p->conn && (p->conn->state() == peer_state::idle ||
                    p->conn->state() == peer_state::failed)) {
        p->failed = false;
        run(*p, p->conn->connect(std::chrono::steady_clock::now()),
            std::chrono::steady_clock::now());
    }
    return p->index;
}

bool engine::progress(time_point now)
{
    bool busy = poll_cq(now) > 0;
    busy |= m_ud->poll([&](std::span<const std::byte> b) {
        on_datagram(b, now);
    }) > 0;
    /* clients attach and detach only in the attach server's run_once(),
     * never during progress(), so m_attached is stable here */
    for (uint32_t i : m_attached) {
        busy |= take_work(i, m_clients[i]);
    }
    tick_peers(now);
    if (!m_deferred.empty()) {
        finish_releases();
    }
    release_gone(now);
    for (uint32_t i : m_attached) {
        m_clients[i].channel->flush_backlog();
        m_clients[i].channel->wake_if_needed();
    }
    return busy;
}

bool engine::prepare_sleep()
{
    m_asleep = true;
    for (uint32_t i : m_attached) {
        m_clients[i].channel->set_agent_asleep(true);
    }
    /* after announcing sleep, look once more (shm_layout.h, Doorbells) */
    for (uint32_t i : m_attached) {
        const client_channel &ch = *m_clients[i].channel;
        if (ch.has_work() || ch.backlog()) {
            end_sleep();
            return false;
        }
    }
    if (ibv_req_notify_cq(m_cq.get(), 0) != 0 ||
        ibv_req_notify_cq(m_ud->cq(), 0) != 0) {
        end_sleep();
        return false;
    }
    /* a completion that arrived before arming raised no event: the caller
     * runs progress() once more before it sleeps */
    return true;
}

void engine::end_sleep()
{
    if (!m_asleep) {
        return;
    }
    m_asleep = false;
    for (uint32_t i : m_attached) {
        m_clients[i].channel->set_agent_asleep(false);
    }
    uint64_t count;
    if (read(m_wake.get(), &count, sizeof(count)) == sizeof(count)) {
        ++m_totals.wakeups;
    }
    /* drain CQ events; each must be acknowledged before the CQ is
     * destroyed */
    ibv_cq *cq = nullptr;
    void *ctx  = nullptr;
    while (ibv_get_cq_event(m_channel.get(), &cq, &ctx) == 0) {
        ibv_ack_cq_events(cq, 1);
    }
}

std::optional<time_point> engine::next_timer() const
{
    std::optional<time_point> t;
    auto take = [&t](std::optional<time_point> x) {
        if (x && (!t || *x < *t)) {
            t = x;
        }
    };
    for (const auto &p : m_peers) {
        if (p->conn) {
            take(p->conn->next_timer());
        }
    }
    for (const auto &g : m_gone) {
        take(g.release_at);
    }
    return t;
}

bool engine::idle() const
{
    if (m_cq_used != 0 || !m_gone.empty() || !m_deferred.empty()) {
        return false;
    }
    for (const auto &p : m_peers) {
        for (const auto &l : p->lanes) {
            if (!l.backlog.empty()) {
                return false;
            }
        }
    }
    return true;
}

std::optional<result<uint32_t>>
engine::release_mr(const attached_client &c, const client_mr &mr)
{
    /* the client posts before it releases: work still in its ring may
     * name the MR, and is taken (and checked) at the next progress() */
    const client_state &s = m_clients[c.index];
    const bool ring_busy  = s.attached && s.channel && s.channel->has_work();
    if (ring_busy || mr_in_use(c.index, mr.lkey)) {
        /* deregistering under a posted op would fail it with a local
         * protection error and break the QP every client shares; one
         * still queued would fail the same way when posted */
        m_deferred.push_back({c.index, mr.handle, mr.lkey});
        ++m_totals.mrs_deferred;
        return std::nullopt;
    }
    return deregister(c.index, mr.handle);
}

bool engine::mr_in_use(uint32_t index, uint32_t lkey) const
{
    for (const op_record &op : m_ops) {
        if (op.in_use && op.client == index &&
            ((op.wr.length > 0 && op.wr.lkey == lkey) ||
             (op.wr.head_length > 0 && op.wr.head_lkey == lkey))) {
            return true;
        }
    }
    return false;
}

result<uint32_t> engine::deregister(uint32_t index, uint32_t handle)
{
    auto r = uverbs::dereg_mr(m_dev.context()->cmd_fd, m_dev.driver_id(),
                              handle);
    if (!r) {
        ++m_totals.mrs_leaked;
        return failure{"client index " + std::to_string(index) + ": " +
                       r.error()};
    }
    ++m_totals.mrs_released;
    return r;
}

void engine::finish_releases()
{
    std::erase_if(m_deferred, [&](const deferred_release &d) {
        const client_state &s = m_clients[d.index];
        if ((s.channel && s.channel->has_work()) ||
            mr_in_use(d.index, d.lkey)) {
            return false;
        }
        auto r = deregister(d.index, d.handle);
        if (!r) {
            m_log(r.error());
        }
        if (m_server) {
            m_server->release_finished(d.index, d.handle, r);
        }
        return true;
    });
}

void engine::release_gone(time_point now)
{
    for (auto &g : m_gone) {
        const client_state &s = m_clients[g.index];
        const bool drained    = s.generation != g.generation || s.posted == 0 ||
                             s.attached;
        if (!g.release_at && drained) {
            g.release_at = now + m_cfg.dead_client_grace;
        }
    }
    std::erase_if(m_gone, [&](const gone_client &g) {
        if (!g.release_at || now < *g.release_at) {
            return false;
        }
        size_t freed = 0;
        for (uint32_t h : g.mr_handles) {
            auto r = uverbs::dereg_mr(m_dev.context()->cmd_fd,
                                      m_dev.driver_id(), h);
            if (r) {
                ++freed;
                ++m_totals.mrs_cleaned;
            } else {
                ++m_totals.mrs_leaked;
                m_log("client index " + std::to_string(g.index) + ": " +
                      r.error());
            }
        }
        m_log("client index " + std::to_string(g.index) +
              " is gone: deregistered " + std::to_string(freed) + " of its " +
              std::to_string(g.mr_handles.size()) + " MRs");
        return true;
    });
}

void engine::shut_down(time_point now)
{
    for (auto &p : m_peers) {
        if (p->conn) {
            run(*p, p->conn->close(now), now);
        }
    }
}

} // namespace rvt::agent
