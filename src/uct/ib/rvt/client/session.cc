/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/client/session.h"

#include "uct/ib/rvt/client/agent_reply.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace rvt::client {

using clock = std::chrono::steady_clock;

namespace {

template<class Entry>
std::span<Entry>
ring_slots(const shm_mapping &shm, uint64_t offset, uint32_t capacity)
{
    return {shm.at<Entry>(offset + sizeof(ring_indices)), capacity};
}

} // namespace

result<std::unique_ptr<session>> session::open(attachment at)
{
    if (!at.agent_wake_fd || !at.client_wake_fd || !at.sock ||
        at.summary.size() != work_summary_size) {
        return failure{"session: the attachment lacks its socket, eventfds "
                       "or work summary"};
    }
    return std::unique_ptr<session>(new session(std::move(at)));
}

session::session(attachment at) :
    m_at(std::move(at)),
    m_doorbells(m_at.shm.at<shm_doorbells>(m_at.layout.doorbell_offset)),
    m_summary(m_at.summary.at<work_summary_line>(0)),
    m_work(*m_at.shm.at<ring_indices>(m_at.layout.work_offset),
           ring_slots<work_request>(m_at.shm, m_at.layout.work_offset,
                                    m_at.layout.caps.work)),
    m_work_data(m_at.shm.at<std::byte>(m_at.layout.work_data_offset)),
    m_completions(*m_at.shm.at<ring_indices>(m_at.layout.completion_offset),
                  ring_slots<completion>(m_at.shm,
                                         m_at.layout.completion_offset,
                                         m_at.layout.caps.completion)),
    m_inbound(*m_at.shm.at<ring_indices>(m_at.layout.inbound_offset),
              ring_slots<inbound_message>(m_at.shm, m_at.layout.inbound_offset,
                                          m_at.layout.caps.inbound)),
    m_inbound_data(m_at.shm.at<std::byte>(m_at.layout.inbound_data_offset))
{
    if (const char *spec = std::getenv("RVT_TRACE");
        spec != nullptr && *spec != '\0') {
        std::string_view v(spec);
        size_t events = 100000;
        if (auto colon = v.rfind(':'); colon != std::string_view::npos) {
            events = std::strtoull(spec + colon + 1, nullptr, 10);
            v      = v.substr(0, colon);
        }
        m_trace_path = std::string(v) + "." + std::to_string(getpid());
        m_trace      = std::make_unique<trace>(events, "client");
    }
}

session::~session()
{
    if (!m_trace) {
        return;
    }
    if (std::FILE *f = std::fopen(m_trace_path.c_str(), "w")) {
        m_trace->write(f);
        std::fclose(f);
    }
}

result<uint32_t> session::connect_peer(const wire::agent_address &remote,
                                       std::chrono::milliseconds timeout)
{
    if (std::string e = wire::agent_address_error(remote); !e.empty()) {
        return failure{"connect to peer: " + e};
    }
    auto req = wire::make_peer_request(remote);
    if (send(m_at.sock.get(), &req, sizeof(req), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(sizeof(req))) {
        return failure{std::string("connect to peer: cannot write to the "
                                   "agent's socket: ") +
                       std::strerror(errno)};
    }
    wire::peer_reply rep{};
    auto got = m_at.replies.receive(m_at.sock.get(),
                                    std::as_writable_bytes(std::span(&rep, 1)),
                                    timeout, "connect to peer");
    if (!got) {
        return failure{got.error()};
    }
    auto parsed = wire::parse_peer_reply(std::as_bytes(std::span(&rep, 1)));
    if (!parsed) {
        return failure{"connect to peer: bad reply: " + parsed.error()};
    }
    if (rep.status != static_cast<uint32_t>(wire::peer_status::accepted)) {
        return failure{std::string("connect to peer: refused: ") + rep.reason};
    }
    return rep.peer;
}

result<done> session::retire_address(std::chrono::milliseconds wait)
{
    auto req = wire::make_retire_notice(wire::msg_type::retire_address);
    if (send(m_at.sock.get(), &req, sizeof(req), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(sizeof(req))) {
        return failure{std::string("retire the address: cannot write to the "
                                   "agent's socket: ") +
                       std::strerror(errno)};
    }
    wire::retire_notice rep{};
    auto got = m_at.replies.receive(m_at.sock.get(),
                                    std::as_writable_bytes(std::span(&rep, 1)),
                                    wait, "retire the address");
    if (!got) {
        return failure{got.error()};
    }
    auto parsed =
            wire::parse_retire_notice(std::as_bytes(std::span(&rep, 1)),
                                      wire::msg_type::retire_address_reply);
    if (!parsed) {
        return failure{"retire the address: bad reply: " + parsed.error()};
    }
    return done{};
}

result<memory_region> session::register_memory(void *addr, size_t length,
                                               int access,
                                               std::chrono::milliseconds wait)
{
    return client::register_memory(m_at, addr, length, access, wait);
}

result<wire::mr_registered_reply>
session::announce_memory(const memory_region &mr,
                         std::chrono::milliseconds wait)
{
    return client::announce_memory(m_at, mr, wait);
}

result<uint32_t>
session::deregister_memory(const memory_region &mr,
                           std::optional<std::chrono::milliseconds> wait)
{
    return client::deregister_memory(m_at, mr, wait);
}

void session::release_agent_context()
{
    m_at.imported.reset();
    m_at.cmd_fd.reset();
}

post_status session::post(const work_request &wr)
{
    if (m_outstanding >= m_at.layout.caps.completion) {
        return post_status::busy;
    }
    /* stamped before the agent can see it */
    const uint64_t submitted = m_trace ? trace_now() : 0;
    if (!m_work.try_push(wr)) {
        return post_status::busy;
    }
    ++m_outstanding;
    traced(trace_stage::submit, wr.wr_id, submitted);
    wake_agent();
    return post_status::posted;
}

std::byte *session::inline_slot()
{
    if (m_outstanding >= m_at.layout.caps.completion ||
        m_work.free_slots() == 0) {
        return nullptr;
    }
    return m_work_data + size_t{m_work.position()} * max_inline();
}

post_status
session::post_inline(const work_request &wr, std::span<const std::byte> payload)
{
    std::byte *slot = inline_slot();
    if (slot == nullptr) {
        return post_status::busy;
    }
    std::memcpy(slot, payload.data(),
                std::min<size_t>(payload.size(), max_inline()));
    work_request copy = wr;
    copy.flags |= work_inline;
    copy.length     = static_cast<uint32_t>(payload.size());
    copy.local_addr = 0;
    copy.lkey       = 0;
    return post(copy);
}

void session::wake_agent()
{
    /* pairs with the agent's store of agent_asleep and its re-check of
     * the rings (shm_layout.h, "Doorbells"), and with its exchange of the
     * summary's word (work_summary.h) */
    std::atomic_thread_fence(std::memory_order_seq_cst);
    note_work(m_summary, m_at.client_index);
    if (m_doorbells->agent_asleep.load(std::memory_order_relaxed) != 0) {
        uint64_t one = 1;
        (void)!write(m_at.agent_wake_fd.get(), &one, sizeof(one));
    }
}

size_t session::poll_completions(std::span<completion> out)
{
    size_t n = 0;
    while (n < out.size()) {
        ring_pop r = m_completions.try_pop(out[n]);
        if (r == ring_pop::corrupt) {
            m_healthy = false;
        }
        if (r != ring_pop::item) {
            break;
        }
        traced(trace_stage::reap, out[n].wr_id);
        ++n;
    }
    m_outstanding -= std::min<uint32_t>(m_outstanding,
                                        static_cast<uint32_t>(n));
    return n;
}

bool session::peek_inbound(inbound_view &out)
{
    const uint32_t pos = m_inbound.position();
    ring_pop r         = m_inbound.try_peek(out.msg);
    if (r == ring_pop::corrupt) {
        m_healthy = false;
    }
    if (r != ring_pop::item) {
        return false;
    }
    if (!m_peeked) {
        traced(trace_stage::read, out.msg.imm);
    }
    m_peeked = true;
    out.data = {};
    if (out.msg.kind == static_cast<uint8_t>(inbound_kind::am)) {
        const uint32_t slot = m_at.layout.caps.slot_size;
        out.data            = {m_inbound_data + uint64_t{pos} * slot,
                               std::min(out.msg.length, slot)};
    }
    return true;
}

void session::release_inbound()
{
    if (m_peeked) {
        m_inbound.release();
        m_peeked = false;
    }
}

bool session::has_events()
{
    inbound_message probe;
    if (m_peeked || m_inbound.try_peek(probe) == ring_pop::item) {
        return true; /* a peek does not consume */
    }
    /* the completion consumer has no peek: compare its indices */
    auto &idx = *m_at.shm.at<ring_indices>(m_at.layout.completion_offset);
    return idx.head.load(std::memory_order_acquire) !=
           idx.tail.load(std::memory_order_relaxed);
}

bool session::arm()
{
    m_doorbells->client_asleep.store(1, std::memory_order_seq_cst);
    if (has_events()) {
        m_doorbells->client_asleep.store(0, std::memory_order_relaxed);
        return false;
    }
    return true;
}

void session::disarm()
{
    m_doorbells->client_asleep.store(0, std::memory_order_relaxed);
    uint64_t count;
    (void)!read(m_at.client_wake_fd.get(), &count, sizeof(count));
}

bool session::wait(std::chrono::microseconds timeout,
                   std::chrono::microseconds spin)
{
    const auto start = clock::now();
    while (clock::now() - start < std::min(spin, timeout)) {
        if (has_events()) {
            return true;
        }
        std::this_thread::yield();
    }
    if (!arm()) {
        return true;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            timeout - (clock::now() - start));
    pollfd p{m_at.client_wake_fd.get(), POLLIN, 0};
    (void)poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    disarm();
    return has_events();
}

} // namespace rvt::client
