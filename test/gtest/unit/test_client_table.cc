/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The client table's rules (agent/attach/client_table.h), one test each, with
 * no nic and no engine: real client_channels over memfd segments, the
 * clients' side played by the test through the segments' rings and
 * doorbells, and a work summary in test memory.
 */
#include "uct/ib/rvt/agent/attach/attach_server.h"
#include "uct/ib/rvt/agent/attach/client_table.h"
#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/common/ring.h"
#include "uct/ib/rvt/common/shm_mapping.h"

#include <poll.h>
#include <sys/eventfd.h>

#include <gtest/gtest.h>

#include <array>
#include <map>
#include <memory>
#include <vector>

namespace rvt::agent {
namespace {

using namespace std::chrono_literals;

class client_table_test : public ::testing::Test {
protected:
    static constexpr std::chrono::microseconds period{1000};
    /* a completion ring of 4: the 5th completion waits in a backlog */
    const shm_layout layout = shm_layout::make({8, 4, 4, 128}).value();
    const client_table::time_point t0 = client_table::time_point{} + 10s;

    /* a client's segment, as the client sees it, and the agent's record */
    struct client_end {
        shm_segment seg;
        attached_client who;
    };

    alignas(cache_line)
            std::array<work_summary_line, work_summary_words> summary{};
    std::map<uint32_t, std::unique_ptr<client_end>> ends;
    /* the attach server's part: the index given until it has `generation` */
    client_indices indices{imm::max_clients, 0ms};
    client_table table{layout, period};

    client_table_test()
    {
        table.read_generations_from(indices);
    }

    client_table::client_state &attach(uint32_t index, uint32_t generation = 1)
    {
        indices.free(index, t0);
        while (indices.give(index) < generation) {
            indices.free(index, t0);
        }
        auto seg = create_shm_segment("rvt-test-client", layout.size);
        EXPECT_TRUE(seg.ok()) << seg.error();
        auto map = map_shm_segment(seg.value().fd.get(), layout.size);
        EXPECT_TRUE(map.ok()) << map.error();
        auto e = std::make_unique<client_end>(
                client_end{std::move(seg).value(),
                           {index,
                            0,
                            std::move(map).value(),
                            unique_fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
                            indices.generation(index),
                            {}}});
        ends[index] = std::move(e);
        return table.attach(ends[index]->who);
    }

    /* A pass as the engine makes it: take(i, c) for each client to
     * visit, then visited(i); true when one took any. */
    template<class Take> bool pass(client_table::time_point now, Take &&take)
    {
        bool busy = false;
        table.to_visit(now, summary.data()).for_each([&](uint32_t i) {
            busy |= take(i, table[i]);
            table.visited(i);
        });
        return busy;
    }

    /* the first pass: the attach's `again` and the full scan done, the
     * next scan one period away */
    void settle()
    {
        pass(t0, [](uint32_t, auto &c) {
            work_request wr;
            while (c.channel->pop_work(wr)) {
            }
            return true;
        });
        table.wake_given(table.flush_given());
    }

    /* the client posts a request (and sets its summary bit if `note`) */
    void post(uint32_t index, bool note)
    {
        const shm_mapping &m = ends.at(index)->seg.map;
        ring_producer<work_request> work(
                *m.at<ring_indices>(layout.work_offset),
                {m.at<work_request>(layout.work_offset + sizeof(ring_indices)),
                 layout.caps.work});
        work_request wr{};
        wr.wr_id = 7;
        ASSERT_TRUE(work.try_push(wr));
        if (note) {
            note_work(summary.data(), index);
        }
    }

    /* the completions the client can see (published) */
    uint32_t published(uint32_t index)
    {
        const shm_mapping &m = ends.at(index)->seg.map;
        return m.at<ring_indices>(layout.completion_offset)
                ->head.load(std::memory_order_acquire);
    }

    /* the client takes one completion */
    void consume(uint32_t index)
    {
        const shm_mapping &m = ends.at(index)->seg.map;
        ring_consumer<completion> done(
                *m.at<ring_indices>(layout.completion_offset),
                {m.at<completion>(layout.completion_offset +
                                  sizeof(ring_indices)),
                 layout.caps.completion});
        completion c;
        ASSERT_EQ(done.try_pop(c), ring_pop::item);
    }

    shm_doorbells &bells(uint32_t index)
    {
        return *ends.at(index)->seg.map.at<shm_doorbells>(
                layout.doorbell_offset);
    }

    bool woken(uint32_t index)
    {
        pollfd p{ends.at(index)->who.wake_fd.get(), POLLIN, 0};
        return poll(&p, 1, 0) == 1;
    }

    /* the clients a pass at `now` visits (taking nothing) */
    std::vector<uint32_t> visited(client_table::time_point now)
    {
        std::vector<uint32_t> out;
        pass(now, [&](uint32_t i, auto &) {
            out.push_back(i);
            return false;
        });
        return out;
    }

    static std::vector<uint32_t> members(const client_set &s)
    {
        std::vector<uint32_t> out;
        s.for_each([&](uint32_t i) { out.push_back(i); });
        return out;
    }

    bool summary_empty() const
    {
        for (const auto &w : summary) {
            if (w.bits.load() != 0) {
                return false;
            }
        }
        return true;
    }
};

using v = std::vector<uint32_t>;

/* attach(a) */
TEST_F(client_table_test, an_attach_is_a_fresh_record_visited_at_the_next_pass)
{
    client_table::client_state &old = attach(5, 1);
    old.ops                   = 9;
    old.paused                = true;
    old.posted                = 2;
    attach(9);
    settle();
    table.detach(5);

    client_table::client_state &c = attach(5, 2);
    attach(2);
    EXPECT_EQ(&c, &table[5]);
    EXPECT_TRUE(c.attached);
    EXPECT_EQ(table.generation(5), 2u);
    EXPECT_EQ(c.ops, 0u);
    EXPECT_EQ(c.posted, 0u);
    EXPECT_FALSE(c.paused);
    EXPECT_EQ(c.who, &ends.at(5)->who);
    ASSERT_NE(c.channel, nullptr);
    EXPECT_EQ(table.attached(), (v{2, 5, 9}));
    /* no bit, no work, the scan not due: visited for what it may have
     * posted before it was attached */
    EXPECT_EQ(visited(t0), (v{2, 5}));
    EXPECT_EQ(visited(t0), v{});
    /* its channel puts it in `given` */
    c.channel->complete({});
    EXPECT_EQ(members(table.flush_given()), v{5});
}

/* attach(a) while asleep */
TEST_F(client_table_test, a_client_attached_while_the_agent_sleeps_is_told)
{
    attach(1);
    EXPECT_EQ(bells(1).agent_asleep.load(), 0u);
    settle();
    EXPECT_FALSE(table.fall_asleep());
    attach(2);
    EXPECT_EQ(bells(2).agent_asleep.load(), 1u);
    EXPECT_TRUE(table.wake_up());
    attach(3);
    EXPECT_EQ(bells(3).agent_asleep.load(), 0u);
}

/* retire(i) */
TEST_F(client_table_test, a_retired_client_stays_attached_visited_and_published)
{
    attach(1);
    attach(2);
    settle();
    table.retire(2);
    EXPECT_TRUE(table[2].retired);
    EXPECT_FALSE(table[1].retired);
    EXPECT_TRUE(table[2].attached);
    EXPECT_EQ(table.attached(), (v{1, 2}));
    /* its work is still taken and its completions still published */
    post(2, true);
    EXPECT_EQ(visited(t0), v{2});
    table[2].channel->complete({});
    EXPECT_EQ(members(table.flush_given()), v{2});
    /* not attached: nothing; the next attach of the index is not retired */
    table.detach(2);
    table.retire(2);
    table.retire(3);
    EXPECT_FALSE(table[3].retired);
    EXPECT_FALSE(attach(2, 2).retired);
}

/* detach(i) */
TEST_F(client_table_test, a_detach_forgets_the_index_but_keeps_the_record)
{
    attach(1);
    attach(2, 4);
    settle();
    table[2].posted = 3;
    table[2].channel->complete({});
    post(2, true);
    table.detach(2);
    EXPECT_EQ(table.attached(), v{1});
    EXPECT_FALSE(table[2].attached);
    EXPECT_EQ(table[2].channel, nullptr);
    EXPECT_EQ(table[2].who, nullptr);
    EXPECT_FALSE(table.has_work(2));
    /* what completes of it still finds its generation and posted ops */
    EXPECT_EQ(table.generation(2), 4u);
    EXPECT_EQ(table[2].posted, 3u);
    EXPECT_EQ(members(table.flush_given()), v{});
    /* its bit (and the scan) visit nobody */
    EXPECT_EQ(visited(t0 + period), v{});
    EXPECT_TRUE(summary_empty());
}

/* to_visit: the summary's bits, no idle client */
TEST_F(client_table_test, a_pass_visits_the_clients_whose_bits_are_set)
{
    for (uint32_t i = 0; i < 4; ++i) {
        attach(i * 100);
    }
    settle();
    post(100, true);
    post(300, true);
    EXPECT_EQ(visited(t0), (v{100, 300}));
    EXPECT_TRUE(summary_empty());
    EXPECT_EQ(visited(t0), (v{100, 300})); /* their work is still there */
    EXPECT_EQ(table.totals().scan_found, 0u);
}

/* to_visit: a bit for an index not attached */
TEST_F(client_table_test, a_bit_for_an_index_not_attached_visits_nobody)
{
    attach(1);
    settle();
    note_work(summary.data(), 7);
    EXPECT_EQ(visited(t0), v{});
    EXPECT_TRUE(summary_empty());
}

/* visited(i): work left -> `again` */
TEST_F(client_table_test, a_client_with_work_left_is_visited_next_pass)
{
    attach(3);
    settle();
    post(3, true);
    post(3, false);
    auto take_one = [&] {
        return pass(t0, [&](uint32_t i, client_table::client_state &c) {
            EXPECT_EQ(i, 3u);
            EXPECT_EQ(&c, &table[3]);
            work_request wr;
            return c.channel->pop_work(wr);
        });
    };
    EXPECT_TRUE(take_one());
    EXPECT_TRUE(take_one()); /* no bit: left last pass */
    EXPECT_FALSE(take_one()); /* nothing left: not visited */
}

/* to_visit: the full scan */
TEST_F(client_table_test, the_full_scan_finds_work_whose_bit_was_cleared)
{
    attach(1);
    attach(2);
    settle();
    post(1, false); /* another client cleared its bit */
    EXPECT_EQ(visited(t0 + period - 1us), v{});
    post(2, true); /* a bit the scan finds set: the summary announced it */
    EXPECT_EQ(visited(t0 + period), (v{1, 2}));
    EXPECT_EQ(table.totals().scan_found, 1u);
    EXPECT_TRUE(summary_empty());
    /* the next scan is a period later */
    pass(t0 + period, [](uint32_t, auto &c) {
        work_request wr;
        while (c.channel->pop_work(wr)) {
        }
        return true;
    });
    post(1, false);
    EXPECT_EQ(visited(t0 + 2 * period - 1us), v{});
    EXPECT_EQ(visited(t0 + 2 * period), v{1});
    EXPECT_EQ(table.totals().scan_found, 2u);
}

/* publish_given() */
TEST_F(client_table_test, publish_given_shows_what_was_staged_without_waking)
{
    attach(1);
    attach(2);
    settle();
    bells(1).client_asleep = 1;
    table[1].channel->complete({});
    table[1].channel->complete({});
    EXPECT_EQ(published(1), 0u);
    table.publish_given();
    EXPECT_EQ(published(1), 2u);
    EXPECT_FALSE(woken(1));
    /* still to serve at the end of the pass */
    EXPECT_EQ(members(table.flush_given()), v{1});
}

/* flush_given() */
TEST_F(client_table_test, flush_given_flushes_the_backlogs_of_the_given)
{
    attach(1);
    attach(2);
    settle();
    for (int n = 0; n < 5; ++n) {
        table[1].channel->complete({});
    }
    ASSERT_EQ(table[1].channel->backlog(), 1u);
    table.publish_given();
    consume(1); /* room for the fifth */
    EXPECT_EQ(members(table.flush_given()), v{1});
    EXPECT_EQ(table[1].channel->backlog(), 0u);
    EXPECT_EQ(members(table.flush_given()), v{}); /* `given` was emptied */
}

/* wake_given(g) */
TEST_F(client_table_test, wake_given_publishes_and_wakes_what_was_given)
{
    attach(1);
    attach(2);
    settle();
    bells(1).client_asleep = 1;
    bells(2).client_asleep = 1;
    table[1].channel->complete({});
    const client_set given = table.flush_given();
    table[2].channel->complete({}); /* given after the flush */
    table.wake_given(given);
    EXPECT_EQ(published(1), 1u);
    EXPECT_EQ(published(2), 1u);
    EXPECT_TRUE(woken(1));
    EXPECT_TRUE(woken(2));
    EXPECT_EQ(members(table.flush_given()), v{});
}

/* wake_given(g): backlog or paused -> stays given */
TEST_F(client_table_test, a_channel_with_a_backlog_or_paused_stays_given)
{
    attach(1);
    attach(2);
    attach(3);
    settle();
    for (int n = 0; n < 5; ++n) {
        table[1].channel->complete({});
    }
    table[2].paused = true;
    table[2].channel->complete({});
    table[3].channel->complete({});
    table.wake_given(table.flush_given());
    EXPECT_EQ(members(table.flush_given()), (v{1, 2}));
}

/* fall_asleep() */
TEST_F(client_table_test, falling_asleep_tells_every_client_and_looks_again)
{
    attach(1);
    attach(2);
    attach(3);
    settle();
    EXPECT_FALSE(table.fall_asleep());
    EXPECT_TRUE(table.asleep());
    EXPECT_TRUE(table.wake_up());

    post(1, false); /* posted before it saw the agent asleep, no bit */
    for (int n = 0; n < 5; ++n) {
        table[2].channel->complete({});
    }
    (void)table.flush_given(); /* served, its backlog still waiting */
    EXPECT_TRUE(table.fall_asleep());
    for (uint32_t i : {1, 2, 3}) {
        EXPECT_EQ(bells(i).agent_asleep.load(), 1u) << i;
    }
    EXPECT_EQ(members(table.flush_given()), v{2});
    EXPECT_EQ(visited(t0), v{1});
}

/* wake_up() */
TEST_F(client_table_test, waking_up_tells_every_client_once)
{
    attach(1);
    attach(2);
    settle();
    EXPECT_FALSE(table.wake_up()); /* not asleep */
    (void)table.fall_asleep();
    EXPECT_TRUE(table.wake_up());
    EXPECT_FALSE(table.asleep());
    for (uint32_t i : {1, 2}) {
        EXPECT_EQ(bells(i).agent_asleep.load(), 0u) << i;
    }
    EXPECT_FALSE(table.wake_up());
}

} // namespace
} // namespace rvt::agent
