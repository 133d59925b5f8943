/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/agent/attach/client_channel.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace rvt::agent {

namespace {

template<class Entry>
std::span<Entry> slots(const shm_mapping &shm, uint64_t offset, uint32_t n)
{
    return {shm.at<Entry>(offset + sizeof(ring_indices)), n};
}

} // namespace

client_channel::client_channel(const shm_mapping &shm, const shm_layout &layout,
                               int wake_fd, client_set *given, uint32_t index) :
    m_bells(shm.at<shm_doorbells>(layout.doorbell_offset)),
    m_work(*shm.at<ring_indices>(layout.work_offset),
           slots<work_request>(shm, layout.work_offset, layout.caps.work)),
    m_work_data(shm.at<std::byte>(layout.work_data_offset)),
    m_inline_size(layout.caps.inline_size),
    m_completions(*shm.at<ring_indices>(layout.completion_offset),
                  slots<completion>(shm, layout.completion_offset,
                                    layout.caps.completion)),
    m_inbound(*shm.at<ring_indices>(layout.inbound_offset),
              slots<inbound_message>(shm, layout.inbound_offset,
                                     layout.caps.inbound)),
    m_inbound_data(shm.at<std::byte>(layout.inbound_data_offset)),
    m_slot_size(layout.caps.slot_size),
    m_wake_fd(wake_fd),
    m_given(given),
    m_index(index)
{
}

bool client_channel::peek_work(work_request &out)
{
    if (!m_healthy) {
        return false;
    }
    ring_pop r = m_work.try_peek(out);
    if (r == ring_pop::corrupt) {
        m_healthy = false;
    }
    return r == ring_pop::item;
}

void client_channel::release_work(std::span<std::byte> into)
{
    const size_t n = std::min<size_t>(into.size(), m_inline_size);
    if (n > 0) {
        /* the client wrote the slot before it published the entry (the
         * peek's acquire load of the head orders this read after it) */
        std::memcpy(into.data(),
                    m_work_data + size_t{m_work.position()} * m_inline_size, n);
    }
    m_work.release();
}

bool client_channel::pop_work(work_request &out)
{
    if (!peek_work(out)) {
        return false;
    }
    release_work();
    return true;
}

bool client_channel::has_work() const
{
    /* our own tail is the truth (the client can write the shared copy);
     * the head is the client's */
    return m_healthy && m_work.has_more();
}

void client_channel::complete(const completion &c)
{
    if (m_given != nullptr) {
        m_given->insert(m_index);
    }
    if (!m_late_completions.empty() || !m_completions.stage(c)) {
        m_late_completions.push_back(c);
        return;
    }
    m_gave = true;
}

bool client_channel::push_inbound(const inbound_message &msg,
                                  std::span<const std::byte> data)
{
    if (m_inbound.free_slots() == 0) {
        return false;
    }
    const size_t n = std::min<size_t>(data.size(), m_slot_size);
    if (n > 0) {
        std::memcpy(m_inbound_data + size_t{m_inbound.position()} * m_slot_size,
                    data.data(), n);
    }
    (void)m_inbound.stage(msg); /* cannot fail: a slot was free */
    m_gave = true;
    return true;
}

void client_channel::deliver(const inbound_message &msg,
                             std::span<const std::byte> data)
{
    if (m_given != nullptr) {
        m_given->insert(m_index);
    }
    if (m_late_inbound.empty() && push_inbound(msg, data)) {
        return;
    }
    m_late_inbound.push_back({msg, {data.begin(), data.end()}});
    m_late_inbound_bytes += data.size();
}

void client_channel::flush_backlog()
{
    while (!m_late_completions.empty() &&
           m_completions.stage(m_late_completions.front())) {
        m_late_completions.pop_front();
        m_gave = true;
    }
    while (!m_late_inbound.empty() &&
           push_inbound(m_late_inbound.front().msg,
                        m_late_inbound.front().data)) {
        m_late_inbound_bytes -= m_late_inbound.front().data.size();
        m_late_inbound.pop_front();
    }
}

void client_channel::publish_and_wake()
{
    if (!m_gave) {
        return;
    }
    m_gave = false;
    publish();
    /* pairs with the client's store of client_asleep and its re-check of
     * the rings (shm_layout.h, "Doorbells") */
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (m_bells->client_asleep.load(std::memory_order_relaxed) != 0) {
        uint64_t one = 1;
        (void)!write(m_wake_fd, &one, sizeof(one));
    }
}

void client_channel::set_agent_asleep(bool asleep)
{
    m_bells->agent_asleep.store(asleep ? 1 : 0, std::memory_order_seq_cst);
}

} // namespace rvt::agent
