/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The two ends of a client's shared segment, without an agent process or
 * RDMA: client::session (the client library) against agent::
 * client_channel (the agent's end), over one real memfd mapped twice.
 * Covers the seam's promises: the completion budget answers busy instead
 * of overrunning, order is kept, inbound messages are read in place and
 * wait in the agent when the ring is full, doorbells wake the sleeper,
 * and a corrupt index stops the agent from trusting the ring.
 */
#include "uct/ib/rvt/agent/attach/client_channel.h"
#include "uct/ib/rvt/client/session.h"
#include "uct/ib/rvt/common/shm_mapping.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace rvt;

namespace {

bool readable(int fd)
{
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
}

class session_channel : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_layout = shm_layout::make({8, 4, 4, 128}).value();
        auto seg = create_shm_segment("rvt-test", m_layout.size);
        ASSERT_TRUE(seg.ok()) << seg.error();
        m_seg = std::make_unique<shm_segment>(std::move(seg).value());
        const shm_layout &l           = m_layout;
        *m_seg->map.at<shm_header>(0) = l.header(3);
        ring_init(*m_seg->map.at<ring_indices>(l.work_offset));
        ring_init(*m_seg->map.at<ring_indices>(l.completion_offset));
        ring_init(*m_seg->map.at<ring_indices>(l.inbound_offset));

        m_client_wake.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
        unique_fd agent_wake(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
        m_agent_wake_fd = agent_wake.get();
        int sv[2];
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        m_agent_sock.reset(sv[1]);

        auto map = map_shm_segment(m_seg->fd.get(), m_layout.size);
        ASSERT_TRUE(map.ok()) << map.error();
        auto summary = create_shm_segment("rvt-test-summary",
                                          work_summary_size);
        ASSERT_TRUE(summary.ok()) << summary.error();
        m_summary = std::make_unique<shm_segment>(std::move(summary).value());
        auto summary_map = map_shm_segment(m_summary->fd.get(),
                                           work_summary_size);
        ASSERT_TRUE(summary_map.ok()) << summary_map.error();
        unique_fd client_wake(dup(m_client_wake.get()));
        client::attachment at{3,
                              0,
                              0,
                              wire::reg_mode::uverbs_ioctl,
                              1,
                              {},
                              4,
                              128,
                              1024,
                              m_layout,
                              unique_fd(sv[0]),
                              unique_fd(),
                              std::move(map).value(),
                              std::move(agent_wake),
                              std::move(client_wake),
                              nullptr,
                              0,
                              0,
                              {},
                              std::move(summary_map).value(),
                              {}};
        auto s = client::session::open(std::move(at));
        ASSERT_TRUE(s.ok()) << s.error();
        m_session = std::move(s).value();
        m_channel = std::make_unique<agent::client_channel>(
                m_seg->map, m_layout, m_client_wake.get());
    }

    work_request request(uint64_t id)
    {
        work_request w{};
        w.wr_id = id;
        w.op    = static_cast<uint8_t>(work_op::send_am);
        return w;
    }

    shm_layout m_layout{};
    std::unique_ptr<shm_segment> m_seg;
    std::unique_ptr<shm_segment> m_summary; /* the agent's work summary */
    unique_fd m_client_wake;
    int m_agent_wake_fd = -1;
    unique_fd m_agent_sock;
    std::unique_ptr<client::session> m_session;
    std::unique_ptr<agent::client_channel> m_channel;
};

} // namespace

TEST_F(session_channel, completion_budget_answers_busy_and_order_is_kept)
{
    /* 4 completions fit, so only 4 requests may be out (the ring holds 8) */
    for (uint64_t i = 1; i <= 4; ++i) {
        ASSERT_EQ(m_session->post(request(i)), client::post_status::posted);
    }
    EXPECT_EQ(m_session->post(request(5)), client::post_status::busy);
    EXPECT_EQ(m_session->outstanding(), 4u);

    work_request w;
    for (uint64_t i = 1; i <= 4; ++i) {
        ASSERT_TRUE(m_channel->pop_work(w));
        EXPECT_EQ(w.wr_id, i);
        m_channel->complete({w.wr_id, 0, 0, 0, 0, {}});
    }
    EXPECT_FALSE(m_channel->pop_work(w));
    completion c[8];
    EXPECT_EQ(m_session->poll_completions(c), 0u)
            << "staged completions are not shown before publish_and_wake()";
    m_channel->publish_and_wake();
    ASSERT_EQ(m_session->poll_completions(c), 4u);
    for (uint64_t i = 0; i < 4; ++i) {
        EXPECT_EQ(c[i].wr_id, i + 1);
    }
    EXPECT_EQ(m_session->outstanding(), 0u);
    EXPECT_EQ(m_session->post(request(6)), client::post_status::posted);
}

TEST_F(session_channel, a_client_over_budget_has_its_completions_held_back)
{
    /* a client that ignores the budget (not using the library) cannot make
     * the agent overrun its ring: the excess waits, in order */
    for (uint64_t i = 1; i <= 6; ++i) {
        m_channel->complete({i, 0, 0, 0, 0, {}});
    }
    EXPECT_EQ(m_channel->late_completions(), 2u);
    m_channel->publish_and_wake();
    completion c[8];
    ASSERT_EQ(m_session->poll_completions(c), 4u);
    m_channel->flush_backlog();
    EXPECT_EQ(m_channel->late_completions(), 0u);
    m_channel->publish_and_wake();
    ASSERT_EQ(m_session->poll_completions(c), 2u);
    EXPECT_EQ(c[0].wr_id, 5u);
    EXPECT_EQ(c[1].wr_id, 6u);
}

TEST_F(session_channel, inbound_messages_are_read_in_place_and_wait_when_full)
{
    for (uint8_t i = 0; i < 6; ++i) {
        inbound_message m{};
        m.kind   = static_cast<uint8_t>(inbound_kind::am);
        m.am_id  = i;
        m.length = 100;
        std::byte data[100];
        std::memset(data, 'a' + i, sizeof(data));
        m_channel->deliver(m, data);
    }
    EXPECT_EQ(m_channel->backlog(), 2u) << "4 fit the ring, 2 wait";
    client::inbound_view v;
    EXPECT_FALSE(m_session->peek_inbound(v))
            << "staged messages are not shown before publish_and_wake()";
    m_channel->publish_and_wake();
    for (uint8_t i = 0; i < 6; ++i) {
        if (i == 4) {
            m_channel->flush_backlog();
            m_channel->publish_and_wake();
        }
        ASSERT_TRUE(m_session->peek_inbound(v)) << "message " << int(i);
        EXPECT_EQ(v.msg.am_id, i);
        ASSERT_EQ(v.data.size(), 100u);
        EXPECT_EQ(v.data[99], std::byte('a' + i));
        /* peeking again gives the same entry until it is released */
        client::inbound_view again;
        ASSERT_TRUE(m_session->peek_inbound(again));
        EXPECT_EQ(again.msg.am_id, i);
        m_session->release_inbound();
    }
    EXPECT_FALSE(m_session->peek_inbound(v));
}

TEST_F(session_channel, doorbells_wake_only_a_sleeper)
{
    /* the client is awake: no syscall, no wake-up */
    m_channel->complete({1, 0, 0, 0, 0, {}});
    m_channel->publish_and_wake();
    EXPECT_FALSE(readable(m_client_wake.get()));
    completion c[4];
    ASSERT_EQ(m_session->poll_completions(c), 1u);

    /* asleep: the agent's next publication wakes it */
    ASSERT_TRUE(m_session->arm());
    m_channel->complete({2, 0, 0, 0, 0, {}});
    m_channel->publish_and_wake();
    EXPECT_TRUE(readable(m_client_wake.get()));
    m_session->disarm();
    EXPECT_FALSE(readable(m_client_wake.get()));
    /* arm() refuses to sleep when something is already waiting */
    EXPECT_FALSE(m_session->arm());

    /* and the other way: a post wakes a sleeping agent */
    EXPECT_EQ(m_session->post(request(3)), client::post_status::posted);
    EXPECT_FALSE(readable(m_agent_wake_fd));
    m_channel->set_agent_asleep(true);
    EXPECT_EQ(m_session->post(request(4)), client::post_status::posted);
    EXPECT_TRUE(readable(m_agent_wake_fd));
}

TEST_F(session_channel, a_corrupt_work_index_stops_the_agent_reading)
{
    auto *idx = m_seg->map.at<ring_indices>(m_layout.work_offset);
    idx->head.store(1000); /* claims more entries than the ring holds */
    work_request w;
    EXPECT_FALSE(m_channel->pop_work(w));
    EXPECT_FALSE(m_channel->healthy());
    EXPECT_FALSE(m_channel->has_work());
}

/* An inline request's payload goes into the work-data slot of its ring
 * position; the agent's end copies it out before it frees the position,
 * which the client then reuses for the next payload. */
TEST_F(session_channel, inline_payloads_travel_in_the_slot_of_their_position)
{
    EXPECT_EQ(m_session->max_inline(), m_layout.caps.inline_size);
    std::vector<std::byte> got(m_layout.caps.inline_size);
    for (uint64_t i = 1; i <= 3 * m_layout.caps.work; ++i) {
        std::vector<std::byte> payload(16 + i % 100, std::byte(i));
        work_request wr = request(i);
        wr.local_addr   = 0x1234; /* ignored: inline names no memory */
        wr.lkey         = 9;
        ASSERT_EQ(m_session->post_inline(wr, payload),
                  client::post_status::posted);
        work_request w;
        ASSERT_TRUE(m_channel->peek_work(w));
        EXPECT_EQ(w.wr_id, i);
        EXPECT_EQ(w.flags & work_inline, work_inline);
        EXPECT_EQ(w.length, payload.size());
        EXPECT_EQ(w.local_addr, 0u);
        EXPECT_EQ(w.lkey, 0u);
        std::fill(got.begin(), got.end(), std::byte{0});
        m_channel->release_work({got.data(), w.length});
        EXPECT_TRUE(std::equal(payload.begin(), payload.end(), got.begin()))
                << "request " << i;
        EXPECT_EQ(got[payload.size()], std::byte{0}) << "copied only length";
        m_channel->complete({w.wr_id, 0, 0, 0, 0, {}});
        m_channel->publish_and_wake();
        completion c[4];
        ASSERT_EQ(m_session->poll_completions(c), 1u);
    }
}

TEST_F(session_channel, inline_slot_is_null_when_a_post_would_be_busy)
{
    std::vector<std::byte> payload(8, std::byte{1});
    for (uint64_t i = 1; i <= 4; ++i) { /* the completion budget */
        ASSERT_NE(m_session->inline_slot(), nullptr);
        ASSERT_EQ(m_session->post_inline(request(i), payload),
                  client::post_status::posted);
    }
    EXPECT_EQ(m_session->inline_slot(), nullptr);
    EXPECT_EQ(m_session->post_inline(request(5), payload),
              client::post_status::busy);
    /* a payload over the slot is not written past it: the agent refuses
     * the request by its length */
    completion c[8];
    work_request w;
    for (int i = 0; i < 4; ++i) {
        ASSERT_TRUE(m_channel->pop_work(w));
        m_channel->complete({w.wr_id, 0, 0, 0, 0, {}});
    }
    m_channel->publish_and_wake();
    ASSERT_EQ(m_session->poll_completions(c), 4u);
    const size_t next_slot = 4 % m_layout.caps.work + 1;
    std::byte *after       = m_seg->map.at<std::byte>(
            m_layout.work_data_offset + next_slot * m_layout.caps.inline_size);
    std::memset(after, 0x5a, m_layout.caps.inline_size);
    std::vector<std::byte> big(m_layout.caps.inline_size + 64, std::byte{7});
    ASSERT_EQ(m_session->post_inline(request(6), big),
              client::post_status::posted);
    ASSERT_TRUE(m_channel->pop_work(w));
    EXPECT_EQ(w.length, big.size());
    EXPECT_EQ(after[0], std::byte{0x5a}) << "written past its slot";
}

TEST(shm_layout, the_work_data_area_follows_the_work_ring_slot_per_position)
{
    const shm_layout l = shm_layout::make({16, 64, 8, 1024, 192}).value();
    EXPECT_EQ(l.work_data_offset,
              l.work_offset + sizeof(ring_indices) + 16 * sizeof(work_request));
    EXPECT_EQ(l.completion_offset, l.work_data_offset + 16 * 192);
    for (uint64_t off : {l.doorbell_offset, l.work_offset, l.work_data_offset,
                         l.completion_offset, l.inbound_offset}) {
        EXPECT_EQ(off % cache_line, 0u) << off;
    }
    EXPECT_EQ(l.inbound_data_offset % shm_layout::page, 0u);
    EXPECT_GE(l.inbound_offset, l.completion_offset + sizeof(ring_indices) +
                                        64 * sizeof(completion));
    const shm_header h = l.header(5);
    EXPECT_EQ(h.work_inline_size, 192u);
    EXPECT_EQ(h.work_data_offset, l.work_data_offset);
    auto back = shm_layout::from_header(h);
    ASSERT_TRUE(back.ok()) << back.error();
    EXPECT_EQ(back.value().caps, l.caps);
}

TEST(shm_layout, inline_sizes_and_headers_that_disagree_are_refused)
{
    for (uint32_t bad : {0u, 32u, 100u, 320u}) {
        auto r = shm_layout::make({16, 64, 8, 1024, bad});
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_NE(r.error().find("work inline size " + std::to_string(bad) +
                                 ": expected a multiple of 64 from 64 to 256"),
                  std::string::npos)
                << r.error();
    }
    const shm_header good =
            shm_layout::make({16, 64, 8, 1024, 128}).value().header(5);
    shm_header h       = good;
    h.work_inline_size = 100; /* not a size at all */
    auto r             = shm_layout::from_header(h);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("work inline size 100"), std::string::npos)
            << r.error();
    h                  = good;
    h.work_inline_size = 256; /* a size, but not the one the offsets say */
    r                  = shm_layout::from_header(h);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("offsets or size differ"), std::string::npos)
            << r.error();
    h = good;
    h.work_data_offset += cache_line;
    EXPECT_FALSE(shm_layout::from_header(h).ok());
    h         = good;
    h.version = shm_version - 1; /* a segment without the work-data area */
    r         = shm_layout::from_header(h);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("magic/version"), std::string::npos) << r.error();
}

TEST_F(session_channel, a_post_sets_the_clients_bit_in_the_work_summary)
{
    auto *lines = m_summary->map.at<work_summary_line>(0);
    std::vector<uint32_t> seen;
    take_summary(lines, [&](uint32_t i) { seen.push_back(i); });
    EXPECT_TRUE(seen.empty()) << "a new summary has no bits";

    EXPECT_EQ(m_session->post(request(1)), client::post_status::posted);
    EXPECT_EQ(m_session->post(request(2)), client::post_status::posted);
    take_summary(lines, [&](uint32_t i) { seen.push_back(i); });
    EXPECT_EQ(seen, std::vector<uint32_t>{3}) << "client index 3, once";

    /* taken: clear until the next post */
    seen.clear();
    take_summary(lines, [&](uint32_t i) { seen.push_back(i); });
    EXPECT_TRUE(seen.empty());
    EXPECT_EQ(m_session->post(request(3)), client::post_status::posted);
    take_summary(lines, [&](uint32_t i) { seen.push_back(i); });
    EXPECT_EQ(seen, std::vector<uint32_t>{3});
}

TEST(work_summary, take_visits_every_set_bit_once_across_words)
{
    std::vector<work_summary_line> lines(work_summary_words);
    for (uint32_t i : {0u, 63u, 64u, 200u, imm::max_clients - 1}) {
        note_work(lines.data(), i);
        note_work(lines.data(), i);
    }
    std::vector<uint32_t> seen;
    take_summary(lines.data(), [&](uint32_t i) { seen.push_back(i); });
    EXPECT_EQ(seen,
              (std::vector<uint32_t>{0, 63, 64, 200, imm::max_clients - 1}));
    for (const auto &l : lines) {
        EXPECT_EQ(l.bits.load(), 0u);
    }
}
