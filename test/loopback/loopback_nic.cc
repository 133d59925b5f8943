/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The in-memory NIC, its API side: the fabric, identity, QPs, posting,
 * the SRQ, polling, datagrams, sleeping and the test's hands. How WRs run
 * is in loopback_run.cc; what each call does, and why, in loopback_nic.h.
 */
#include "test/loopback/loopback_nic.h"

#include <infiniband/verbs.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>

namespace rvt::agent::testing {

namespace {


const char *state_name(nic_qp_state s)
{
    switch (s) {
    case nic_qp_state::reset:
        return "RESET";
    case nic_qp_state::init:
        return "INIT";
    case nic_qp_state::rtr:
        return "RTR";
    case nic_qp_state::rts:
        return "RTS";
    case nic_qp_state::error:
        return "ERROR";
    case nic_qp_state::other:
        break;
    }
    return "another state";
}

} // namespace

/* ---- the fabric ------------------------------------------------------ */

loopback_fabric::~loopback_fabric()
{
    if (!m_nics.empty()) {
        std::fprintf(stderr,
                     "loopback_fabric destroyed with %zu nics still "
                     "on it: destroy the nics first\n",
                     m_nics.size());
        std::abort();
    }
}

void loopback_fabric::progress()
{
    /* a nic whose WRs must wait again says so again */
    for (loopback_nic *nic : std::exchange(m_with_waiting, {})) {
        nic->progress_waiting();
    }
}

void loopback_fabric::has_waiting(loopback_nic *nic)
{
    m_with_waiting.push_back(nic);
}

uint32_t loopback_fabric::next_node()
{
    return m_next_node++;
}

void loopback_fabric::attach(loopback_nic *nic)
{
    m_nics.push_back(nic);
    m_by_gid[nic->gid()] = nic;
}

void loopback_fabric::detach(loopback_nic *nic)
{
    std::erase(m_nics, nic);
    std::erase(m_with_waiting, nic);
    m_by_gid.erase(nic->gid());
}

loopback_nic *loopback_fabric::find(const gid_bytes &gid) const
{
    auto it = m_by_gid.find(gid);
    return it == m_by_gid.end() ? nullptr : it->second;
}

uint32_t loopback_fabric::next_qpn()
{
    return m_next_qpn++ & wire::conn::qpn_mask;
}

uint32_t loopback_fabric::next_mr()
{
    return m_next_mr++ & 0xffffff; /* the key's top 24 bits */
}

/* ---- the nic: identity and setup ------------------------------------- */

loopback_nic::loopback_nic(loopback_fabric &fabric,
                           const loopback_options &options) :
    m_fabric(fabric),
    m_options(options),
    m_node(fabric.next_node()),
    m_ud_qpn(fabric.next_qpn()),
    m_ud_qkey(wire::conn::random_qkey()),
    m_event_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
    m_receive_memory(size_t{options.receive_buffers} * options.receive_size),
    m_on_srq(options.receive_buffers)
{
    if (!m_event_fd) {
        throw std::system_error(errno, std::generic_category(),
                                "loopback nic: eventfd");
    }
    for (uint32_t i = 0; i < options.receive_buffers; ++i) {
        m_on_srq.reposted(i);
        m_srq.push_back(i);
    }
    m_control_mr = register_memory(m_control.data(), m_control.size(),
                                   IBV_ACCESS_LOCAL_WRITE);
    m_pool_mr    = register_memory(m_receive_memory.data(),
                                   m_receive_memory.size(),
                                   IBV_ACCESS_LOCAL_WRITE);
    m_fabric.attach(this); /* last: nothing after it can throw */
}

loopback_nic::~loopback_nic()
{
    m_fabric.detach(this);
}

gid_bytes loopback_nic::gid() const
{
    /* fe80::<node>: link-local, never all zero */
    gid_bytes g{};
    g[0]  = 0xfe;
    g[1]  = 0x80;
    g[12] = static_cast<uint8_t>(m_node >> 24);
    g[13] = static_cast<uint8_t>(m_node >> 16);
    g[14] = static_cast<uint8_t>(m_node >> 8);
    g[15] = static_cast<uint8_t>(m_node);
    return g;
}

uint32_t loopback_nic::ud_qpn() const
{
    return m_ud_qpn;
}

uint32_t loopback_nic::ud_qkey() const
{
    return m_ud_qkey;
}

bool loopback_nic::can_read() const
{
    return m_options.can_read;
}

bool loopback_nic::can_atomic() const
{
    return m_options.can_atomic;
}

uint32_t loopback_nic::sq_depth() const
{
    return m_options.sq_depth;
}

uint32_t loopback_nic::send_budget() const
{
    return m_options.send_budget;
}

nic_sge loopback_nic::control_buffer() const
{
    return {reinterpret_cast<uintptr_t>(m_control.data()),
            static_cast<uint32_t>(m_control.size()), m_control_mr.lkey};
}

uint32_t loopback_nic::max_inline() const
{
    return m_options.max_inline;
}

std::string loopback_nic::name(uint32_t qpn) const
{
    return "loopback nic " + std::to_string(m_node) + ": QP " +
           std::to_string(qpn);
}

/* ---- QPs ------------------------------------------------------------- */

loopback_nic::rc_qp *loopback_nic::find_qp(uint32_t qpn)
{
    auto it = m_qps.find(qpn);
    return it == m_qps.end() ? nullptr : &it->second;
}

const loopback_nic::rc_qp *loopback_nic::find_qp(uint32_t qpn) const
{
    auto it = m_qps.find(qpn);
    return it == m_qps.end() ? nullptr : &it->second;
}

result<uint32_t> loopback_nic::create_qp(uint32_t sq_depth)
{
    if (sq_depth == 0 || sq_depth > m_options.sq_depth) {
        return failure{"create_qp: a send queue of " +
                       std::to_string(sq_depth) + " WRs: expected 1 to " +
                       std::to_string(m_options.sq_depth)};
    }
    const uint32_t qpn = m_fabric.next_qpn();
    m_qps.emplace(qpn, rc_qp{.qpn = qpn, .sq_depth = sq_depth});
    return qpn;
}

std::optional<uint32_t> loopback_nic::sq_depth_of(uint32_t qpn) const
{
    auto it = m_qps.find(qpn);
    if (it == m_qps.end()) {
        return std::nullopt;
    }
    return it->second.sq_depth;
}

result<done> loopback_nic::connect_qp(uint32_t qpn, const gid_bytes &gid,
                                      uint32_t remote_qpn, uint32_t remote_psn,
                                      uint32_t local_psn)
{
    rc_qp *qp = find_qp(qpn);
    if (qp == nullptr) {
        return failure{name(qpn) + ": connect_qp: no such QP"};
    }
    if (qp->state != nic_qp_state::init) {
        return failure{name(qpn) + ": connect_qp: the QP is in " +
                       state_name(qp->state) + ", expected INIT"};
    }
    qp->remote_gid = gid;
    qp->remote_qpn = remote_qpn;
    qp->recv_psn   = remote_psn & wire::conn::psn_mask;
    qp->send_psn   = local_psn & wire::conn::psn_mask;
    qp->state      = nic_qp_state::rts;
    return done{};
}

result<done> loopback_nic::flush_qp(uint32_t qpn)
{
    rc_qp *qp = find_qp(qpn);
    if (qp == nullptr) {
        return failure{name(qpn) + ": flush_qp: no such QP"};
    }
    to_error(*qp);
    return done{};
}

void loopback_nic::destroy_qp(uint32_t qpn)
{
    /* its queued WRs go without completions, as with ibv_destroy_qp; what
     * is in the CQ stays there */
    m_qps.erase(qpn);
}

nic_qp_state loopback_nic::query_qp(uint32_t qpn)
{
    const rc_qp *qp = find_qp(qpn);
    return qp == nullptr ? nic_qp_state::other : qp->state;
}

size_t loopback_nic::queued(uint32_t qpn) const
{
    const rc_qp *qp = find_qp(qpn);
    return qp == nullptr ? 0 : qp->queue.size();
}

std::vector<uint32_t> loopback_nic::qps_to(const gid_bytes &gid) const
{
    std::vector<uint32_t> out;
    for (const auto &[qpn, qp] : m_qps) {
        if (qp.remote_qpn != 0 && qp.remote_gid == gid) {
            out.push_back(qpn);
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

bool loopback_nic::has_mr(uint32_t handle) const
{
    return m_mrs.count(handle) != 0;
}

/* ---- posting --------------------------------------------------------- */

std::optional<std::string>
loopback_nic::check_post(const rc_qp &qp, const nic_send &wr) const
{
    if (wr.num_sge > wr.sge.size()) {
        return std::to_string(wr.num_sge) + " SGEs, at most " +
               std::to_string(wr.sge.size());
    }
    if (wr.opcode > nic_opcode::atomic_cmp_swp) {
        return "unknown opcode " + std::to_string(int(wr.opcode));
    }
    if (is_atomic(wr.opcode)) {
        if (!m_options.can_atomic) {
            return std::string("an atomic on a nic without can_atomic");
        }
        if (wr.num_sge != 0 || wr.inline_payload || !wr.signaled) {
            return "an atomic with " + std::to_string(wr.num_sge) +
                   " SGEs, inline " + std::to_string(wr.inline_payload) +
                   ", signaled " + std::to_string(wr.signaled) +
                   ": expected no SGEs, not inline, signaled";
        }
    }
    const bool read = wr.opcode == nic_opcode::rdma_read;
    if (read && !m_options.can_read) {
        return std::string("RDMA READ on a nic without can_read");
    }
    if (wr.inline_payload && read) {
        return std::string("an inline RDMA READ: a read has no payload to "
                           "carry");
    }
    if (wr.inline_payload && payload_length(wr) > max_inline()) {
        return "inline payload of " + std::to_string(payload_length(wr)) +
               " bytes: max_inline is " + std::to_string(max_inline());
    }
    if (qp.outstanding >= qp.sq_depth) {
        return "send queue full: " + std::to_string(qp.outstanding) +
               " WRs not retired, sq_depth " + std::to_string(qp.sq_depth) +
               " (a WR is retired when the completion that covers it is "
               "polled)";
    }
    return std::nullopt;
}

result<done> loopback_nic::post(uint32_t qpn, std::span<const nic_send> chain,
                                size_t &posted)
{
    posted    = 0;
    rc_qp *qp = find_qp(qpn);
    if (qp == nullptr) {
        return failure{name(qpn) + ": post: no such QP"};
    }
    if (qp->state == nic_qp_state::init || qp->state == nic_qp_state::reset) {
        return failure{name(qpn) + ": post: the QP is in " +
                       state_name(qp->state) + ", not yet connected"};
    }
    std::optional<std::string> refused;
    for (const nic_send &wr : chain) {
        refused = check_post(*qp, wr);
        if (refused) {
            break;
        }
        ++qp->outstanding;
        ++posted;
        if (!qp->silent) {
            queued_wr q{wr};
            if (wr.inline_payload) { /* the caller's bytes, now */
                if (qp->inline_store.empty()) {
                    qp->inline_store.resize(size_t{qp->sq_depth} *
                                            m_options.max_inline);
                }
                q.inline_at = size_t{qp->inline_next++ % qp->sq_depth} *
                              m_options.max_inline;
                gather(wr, qp->inline_store.data() + q.inline_at);
            }
            qp->queue.push_back(q);
        } else if (qp->late) { /* in error: it will flush, much later */
            complete(*qp, wr, nic_status::flushed, IBV_WC_WR_FLUSH_ERR);
        }
    }
    kick(*qp);
    if (refused) {
        return failure{name(qpn) + ": post: WR " + std::to_string(posted) +
                       " of the chain refused: " + *refused};
    }
    return done{};
}

/* ---- receive buffers (the SRQ) and the CQ ---------------------------- */

std::span<const std::byte>
loopback_nic::receive_data(uint32_t index, uint32_t length) const
{
    if (index >= m_options.receive_buffers) {
        return {};
    }
    return {m_receive_memory.data() + size_t{index} * m_options.receive_size,
            std::min(length, m_options.receive_size)};
}

result<done> loopback_nic::repost(std::span<const uint32_t> buffers)
{
    for (uint32_t index : buffers) {
        if (index >= m_options.receive_buffers) {
            return failure{"loopback nic " + std::to_string(m_node) +
                           ": repost of buffer " + std::to_string(index) +
                           ": the pool has " +
                           std::to_string(m_options.receive_buffers)};
        }
        if (!m_on_srq.reposted(index)) {
            return failure{"loopback nic " + std::to_string(m_node) +
                           ": repost of buffer " + std::to_string(index) +
                           ": it is already on the SRQ"};
        }
        m_srq.push_back(index);
    }
    return done{};
}

/* Polling frees the send-queue slots of the WRs a completion retires. */
size_t loopback_nic::poll(std::span<nic_completion> out)
{
    m_fabric.progress();
    size_t n = 0;
    while (n < out.size() && !m_cq.empty()) {
        const cq_entry e = m_cq.front();
        m_cq.pop_front();
        if (e.frees > 0) {
            if (rc_qp *qp = find_qp(e.c.qpn)) {
                qp->outstanding -= e.frees;
            }
        }
        out[n++] = e.c;
    }
    return n;
}

/* ---- fault injection ------------------------------------------------- */

result<done> loopback_nic::hold(uint32_t qpn, bool on)
{
    rc_qp *qp = find_qp(qpn);
    if (qp == nullptr) {
        return failure{name(qpn) + ": hold: no such QP"};
    }
    qp->held = on;
    if (!on) {
        kick(*qp);
    }
    return done{};
}

result<done> loopback_nic::fail_next(uint32_t qpn, uint32_t vendor_status)
{
    rc_qp *qp = find_qp(qpn);
    if (qp == nullptr) {
        return failure{name(qpn) + ": fail_next: no such QP"};
    }
    qp->fail_next = vendor_status;
    return done{};
}

result<done> loopback_nic::break_silently(uint32_t qpn)
{
    rc_qp *qp = find_qp(qpn);
    if (qp == nullptr) {
        return failure{name(qpn) + ": break_silently: no such QP"};
    }
    qp->silent = true;
    to_error(*qp);
    return done{};
}

result<done> loopback_nic::break_late(uint32_t qpn)
{
    rc_qp *qp = find_qp(qpn);
    if (qp == nullptr) {
        return failure{name(qpn) + ": break_late: no such QP"};
    }
    qp->silent = true;
    qp->late   = true;
    to_error(*qp);
    return done{};
}

size_t loopback_nic::speak_late()
{
    const size_t n = m_late.size();
    for (const cq_entry &e : m_late) {
        push(e);
    }
    m_late.clear();
    return n;
}

void loopback_nic::drop_datagrams(uint32_t n)
{
    m_drop_datagrams = n;
}

loopback_stats loopback_nic::stats() const
{
    return m_stats;
}

/* ---- datagrams ------------------------------------------------------- */

result<done> loopback_nic::send_datagram(const wire::conn::message &msg,
                                         const gid_bytes &gid, uint32_t qpn,
                                         uint32_t qkey)
{
    return send_datagram_from(m_ud_qpn, msg, gid, qpn, qkey);
}

uint32_t loopback_nic::open_ud_qp()
{
    m_other_ud_qps.push_back(m_fabric.next_qpn());
    return m_other_ud_qps.back();
}

result<done> loopback_nic::send_datagram_from(uint32_t src_qpn,
                                              const wire::conn::message &msg,
                                              const gid_bytes &gid,
                                              uint32_t qpn, uint32_t qkey)
{
    if (src_qpn != m_ud_qpn &&
        std::find(m_other_ud_qps.begin(), m_other_ud_qps.end(), src_qpn) ==
                m_other_ud_qps.end()) {
        return failure{"loopback nic: no UD QP " + std::to_string(src_qpn) +
                       " on this node to send from"};
    }
    if ((qkey & wire::qkey_controlled) != 0) {
        /* the sending QP's own: the nic's, or none an agent has */
        qkey = src_qpn == m_ud_qpn ? m_ud_qkey : 0;
    }
    loopback_nic *to = m_fabric.find(gid);
    const bool lost  = m_drop_datagrams > 0 || to == nullptr ||
                      to->m_ud_qpn != qpn;
    /* the receiving device's check, before a receive buffer is taken */
    const bool wrong_qkey = !lost && to->m_ud_qkey != qkey;
    if (wrong_qkey) {
        ++to->m_stats.datagrams_qkey_dropped;
    }
    if (lost || wrong_qkey ||
        to->m_datagrams.size() >= to->m_options.datagram_slots) {
        if (m_drop_datagrams > 0) {
            --m_drop_datagrams;
        }
        ++m_counters.datagrams_dropped;
        return done{}; /* UD: the sender never knows */
    }
    auto &d = to->m_datagrams.emplace_back();
    std::memcpy(d.bytes.data(), &msg, sizeof(msg));
    d.source = {this->gid(), src_qpn};
    ++m_counters.datagrams_sent;
    to->notify();
    return done{};
}

size_t loopback_nic::poll_datagrams(const datagram_fn &deliver, size_t max)
{
    if (m_datagrams.empty() || max == 0) {
        return 0; /* the common case: no deque built and torn down */
    }
    /* `deliver` may send to this nic: those wait for the next call, as do
     * those beyond `max` */
    const auto end = m_datagrams.begin() +
                     static_cast<std::ptrdiff_t>(
                             std::min(max, m_datagrams.size()));
    std::vector<datagram> arrived(std::make_move_iterator(m_datagrams.begin()),
                                  std::make_move_iterator(end));
    m_datagrams.erase(m_datagrams.begin(), end);
    for (const auto &d : arrived) {
        ++m_counters.datagrams_received;
        deliver(d.bytes, d.source);
    }
    return arrived.size();
}

nic_counters loopback_nic::counters() const
{
    nic_counters c    = m_counters;
    c.receive_buffers = m_options.receive_buffers;
    c.receives_posted = static_cast<uint32_t>(m_srq.size());
    return c;
}

/* ---- sleeping -------------------------------------------------------- */

int loopback_nic::event_fd() const
{
    return m_event_fd.get();
}

bool loopback_nic::arm()
{
    m_fabric.progress();
    if (!m_cq.empty() || !m_datagrams.empty()) {
        return false;
    }
    m_armed = true;
    return true;
}

void loopback_nic::disarm()
{
    m_armed        = false;
    uint64_t count = 0;
    while (::read(m_event_fd.get(), &count, sizeof(count)) > 0) {
    }
}

/* One-shot, like ibv_req_notify_cq: one event per arm(). */
void loopback_nic::notify()
{
    if (!m_armed) {
        return;
    }
    m_armed              = false;
    const uint64_t one   = 1;
    const ssize_t ignore = ::write(m_event_fd.get(), &one, sizeof(one));
    (void)ignore; /* an eventfd write fails only on counter overflow */
}

} // namespace rvt::agent::testing
