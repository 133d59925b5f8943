/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The module's iface and ep on the host (uct_host_fixture.h), with the
 * assertions UCX's own UCT tests make (test/gtest/uct in UCX's tree):
 *
 *   zcopy      each put_zcopy and am_zcopy that answers UCS_INPROGRESS
 *              completes exactly once, with UCS_OK (test_zcopy_comp,
 *              test_uct_ep);
 *   pending    pending_add answers UCS_ERR_BUSY while there is room; a
 *              request added under back-pressure is dispatched, and sends,
 *              once the room is back; purge hands each back once, and no
 *              request runs after its endpoint is gone (test_pending);
 *   flush      ep and iface flush answer UCS_INPROGRESS while operations
 *              are outstanding, the ep's completion runs after every one
 *              of them, and both answer UCS_OK after (test_flush);
 *   fence      a get after put, fence, sees the put (test_fence; in
 *              order on the loopback nic anyway, see the test);
 *   failure    the agent going away fails the outstanding operations with
 *              an error status and the endpoint through the error handler,
 *              without a hang (test_uct_ep's peer failure);
 *   idle       a progress call that finds nothing yields the CPU only
 *              while the agent holds work of the interface's: UCP calls it
 *              in every turn of its loop, whatever transport carries the
 *              work (sched_yield is counted below);
 *   departure  an interface of this process closed while its memory
 *              domain stays open (UCP destroys a worker and keeps its
 *              context: test_ucp_peer_failure) is gone to its senders in
 *              this process: their endpoints fail through the error
 *              handler, an operation posted after the close fails, and
 *              the other interfaces go on working;
 *   settings   a UCX_RVT_* setting the agent must know (md.h,
 *              md_agent_settings) is one of md_config_table's and one of
 *              rvtd's options, reaches the argument list of the rvtd the
 *              module would start, and an agent that runs with another
 *              value draws a warning naming the setting and both values.
 */
#include "count_yields.h"
#include "ucs_log_capture.h"
#include "uct_host_fixture.h"

#include "uct/ib/rvt/tools/rvtd_settings.h"
#include "uct/ib/rvt/uct/iface.h"
#include "uct/ib/rvt/uct/md.h"

#include <gtest/gtest.h>
#include <uct/api/uct.h>

#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <vector>

using namespace rvt::test;

namespace {

/* The sched_yield calls of `calls` calls of the interface's progress. */
uint64_t yields_in_progress(uct_iface_h iface, int calls)
{
    yields       = 0;
    count_yields = true;
    for (int k = 0; k < calls; ++k) {
        uct_iface_progress(iface);
    }
    count_yields = false;
    return yields;
}

/* Another worker of this process with an interface on `md`, as a UCP
 * worker is: AMs counted, endpoint errors kept. */
struct worker_iface {
    uct_worker_h worker = nullptr;
    uct_iface_h iface   = nullptr;
    std::vector<uint64_t> ams;
    std::vector<ucs_status_t> errors;

    worker_iface(ucs_async_context_t *async, uct_md_h md, uint8_t am_id)
    {
        EXPECT_EQ(uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker),
                  UCS_OK);
        iface = open_host_iface(md, worker, on_error, this);
        if (iface != nullptr) {
            EXPECT_EQ(uct_iface_set_am_handler(iface, am_id, on_am, this, 0),
                      UCS_OK);
        }
    }
    worker_iface(const worker_iface &)            = delete;
    worker_iface &operator=(const worker_iface &) = delete;
    ~worker_iface()
    {
        close();
    }
    /* As UCP's worker destroy does, its endpoints gone first. */
    void close()
    {
        if (iface != nullptr) {
            uct_iface_close(iface);
            iface = nullptr;
        }
        if (worker != nullptr) {
            uct_worker_destroy(worker);
            worker = nullptr;
        }
    }

private:
    static ucs_status_t on_am(void *arg, void *data, size_t, unsigned)
    {
        uint64_t hdr;
        std::memcpy(&hdr, data, sizeof(hdr));
        static_cast<worker_iface *>(arg)->ams.push_back(hdr);
        return UCS_OK;
    }
    static ucs_status_t on_error(void *arg, uct_ep_h, ucs_status_t status)
    {
        static_cast<worker_iface *>(arg)->errors.push_back(status);
        return UCS_OK;
    }
};

/* Progresses every worker until pred() or `limit`. */
bool progress_all_until(const std::vector<uct_worker_h> &workers,
                        const std::function<bool()> &pred,
                        std::chrono::milliseconds limit = 10s)
{
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > until) {
            return false;
        }
        for (uct_worker_h w : workers) {
            uct_worker_progress(w);
        }
    }
    return true;
}

/* A pending request that sends one AM with its sequence number: UCS_OK
 * once sent (UCT then drops it), else it stays queued. */
struct pending_am {
    uct_pending_req_t req{};
    uct_ep_h ep    = nullptr;
    uint64_t seq   = 0;
    int calls      = 0; /* every dispatch */
    int sent       = 0; /* dispatches that sent */
    int purged     = 0;
    bool destroyed = false; /* the test freed it: must never run again */

    static ucs_status_t send(uct_pending_req_t *r)
    {
        auto *self = reinterpret_cast<pending_am *>(r);
        EXPECT_FALSE(self->destroyed) << "request " << self->seq
                                      << " dispatched after its endpoint "
                                         "was destroyed";
        ++self->calls;
        ucs_status_t s = uct_ep_am_short(self->ep, 5, self->seq, nullptr, 0);
        if (s == UCS_OK) {
            ++self->sent;
        }
        return s;
    }
    static void purge(uct_pending_req_t *r, void *)
    {
        ++reinterpret_cast<pending_am *>(r)->purged;
    }
};
static_assert(offsetof(pending_am, req) == 0);

/* Purges what is still queued on `ep` when a test ends early, before
 * its requests go out of scope (declare it after them). */
struct purge_at_exit {
    uct_ep_h ep;
    ~purge_at_exit()
    {
        if (ep != nullptr) {
            uct_ep_pending_purge(ep, nullptr, nullptr);
        }
    }
};

} // namespace

TEST_F(uct_host, put_and_am_zcopy_complete_exactly_once)
{
    constexpr size_t len = 4096;
    constexpr int n      = 40;
    make_buffers(n * len);
    for (size_t k = 0; k < n * len; ++k) {
        m_src->bytes()[k] = static_cast<char>(k * 7 + 1);
    }
    std::deque<counted_completion> puts(n), ams(n);
    ep_scope ep_end{*this};
    std::vector<ucs_status_t> put_status(n), am_status(n);
    for (int k = 0; k < n; ++k) {
        uct_iov_t iov = m_src->iov(len, k * len);
        ucs_status_t s;
        while ((s = uct_ep_put_zcopy(m_ep, &iov, 1, remote(k * len),
                                     m_rkey.rkey, &puts[k].comp)) ==
               UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(m_worker);
        }
        put_status[k] = s;
        ASSERT_TRUE(s == UCS_OK || s == UCS_INPROGRESS) << ucs_status_string(s);
        const uint64_t hdr = 1000 + k;
        uct_iov_t am_iov   = m_src->iov(64, k * len);
        while ((s = uct_ep_am_zcopy(m_ep, am_id, &hdr, sizeof(hdr), &am_iov, 1,
                                    0, &ams[k].comp)) == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(m_worker);
        }
        am_status[k] = s;
        ASSERT_TRUE(s == UCS_OK || s == UCS_INPROGRESS) << ucs_status_string(s);
    }
    auto all_done = [&] {
        for (int k = 0; k < n; ++k) {
            if ((put_status[k] == UCS_INPROGRESS && puts[k].calls == 0) ||
                (am_status[k] == UCS_INPROGRESS && ams[k].calls == 0)) {
                return false;
            }
        }
        return m_ams.size() == static_cast<size_t>(n);
    };
    ASSERT_TRUE(progress_until(all_done)) << m_ams.size() << " AMs of " << n;
    progress_for(100ms); /* a second completion would come by now */
    for (int k = 0; k < n; ++k) {
        /* UCS_OK: done at once, and the completion is never called */
        EXPECT_EQ(puts[k].calls, put_status[k] == UCS_INPROGRESS ? 1 : 0)
                << "put " << k;
        EXPECT_EQ(ams[k].calls, am_status[k] == UCS_INPROGRESS ? 1 : 0)
                << "am " << k;
        EXPECT_EQ(puts[k].status, UCS_OK) << "put " << k;
        EXPECT_EQ(ams[k].status, UCS_OK) << "am " << k;
        EXPECT_EQ(m_ams[k], 1000u + k) << "AMs out of order";
    }
    EXPECT_EQ(std::memcmp(m_src->bytes(), m_dst->bytes(), n * len), 0);
}

TEST_F(uct_host, pending_add_is_busy_with_room_and_dispatches_once_room_is_back)
{
    pending_am first;
    first.ep       = m_ep;
    first.req.func = pending_am::send;
    /* room: the caller must send itself */
    EXPECT_EQ(uct_ep_pending_add(m_ep, &first.req, 0), UCS_ERR_BUSY);
    EXPECT_EQ(first.calls, 0);

    std::vector<pending_am> reqs(3);
    purge_at_exit guard{m_ep};
    int sent_first = 0;
    {
        auto paused = m_agent->pause();
        sent_first  = fill();
        ASSERT_GT(sent_first, 0);
        for (size_t k = 0; k < reqs.size(); ++k) {
            reqs[k].ep       = m_ep;
            reqs[k].seq      = 100000 + k;
            reqs[k].req.func = pending_am::send;
            ASSERT_EQ(uct_ep_pending_add(m_ep, &reqs[k].req, 0), UCS_OK);
        }
        /* no room while the agent takes nothing: none has sent */
        progress_for(50ms);
        for (const auto &r : reqs) {
            EXPECT_EQ(r.sent, 0);
        }
    }
    const size_t expected = sent_first + reqs.size();
    ASSERT_TRUE(progress_until([&] { return m_ams.size() == expected; }))
            << m_ams.size() << " AMs of " << expected;
    progress_for(50ms);
    for (size_t k = 0; k < reqs.size(); ++k) {
        EXPECT_EQ(reqs[k].sent, 1) << "request " << k;
        EXPECT_EQ(reqs[k].purged, 0);
        /* in the order added, after what was sent before */
        EXPECT_EQ(m_ams[sent_first + k], reqs[k].seq);
    }
    EXPECT_EQ(m_ams.size(), expected);
}

/* UCP's pending callbacks free their request and answer UCS_OK: the
 * interface must not touch a request after a callback that sent (it once
 * read the request's link to the next one after the callback had freed
 * it, and UCX's test_uct_pending crashed). Each request poisons itself,
 * as a freed one would be, then is freed. */
TEST_F(uct_host, a_pending_request_may_free_itself_once_it_sent)
{
    struct self_freeing {
        pending_am am;
        int *sent;
        static ucs_status_t send(uct_pending_req_t *r)
        {
            auto *self     = reinterpret_cast<self_freeing *>(r);
            ucs_status_t s = uct_ep_am_short(self->am.ep, 5, self->am.seq,
                                             nullptr, 0);
            if (s == UCS_OK) {
                ++*self->sent;
                std::memset(static_cast<void *>(self), 0xa5, sizeof(*self));
                delete self;
            }
            return s;
        }
    };
    constexpr int n = 20;
    int sent        = 0;
    int sent_first  = 0;
    std::vector<self_freeing *> queued;
    {
        auto paused = m_agent->pause();
        sent_first  = fill();
        for (int k = 0; k < n; ++k) {
            auto *r        = new self_freeing{};
            r->am.ep       = m_ep;
            r->am.seq      = 400000 + k;
            r->am.req.func = self_freeing::send;
            r->sent        = &sent;
            ASSERT_EQ(uct_ep_pending_add(m_ep, &r->am.req, 0), UCS_OK);
        }
    }
    ASSERT_TRUE(progress_until([&] { return sent == n; }))
            << sent << " of " << n << " sent";
    ASSERT_TRUE(progress_until([&] {
        return m_ams.size() == static_cast<size_t>(sent_first + n);
    }));
    for (int k = 0; k < n; ++k) {
        EXPECT_EQ(m_ams[sent_first + k], 400000u + k);
    }
}

TEST_F(uct_host, purge_hands_back_each_request_once_and_none_runs_after)
{
    std::vector<pending_am> reqs(4);
    purge_at_exit guard{m_ep};
    int sent_first = 0;
    {
        auto paused = m_agent->pause();
        sent_first  = fill();
        for (size_t k = 0; k < reqs.size(); ++k) {
            reqs[k].ep       = m_ep;
            reqs[k].seq      = 200000 + k;
            reqs[k].req.func = pending_am::send;
            ASSERT_EQ(uct_ep_pending_add(m_ep, &reqs[k].req, 0), UCS_OK);
        }
        uct_ep_pending_purge(m_ep, pending_am::purge, nullptr);
        for (auto &r : reqs) {
            EXPECT_EQ(r.purged, 1);
            r.destroyed = true; /* as UCP frees its requests */
        }
    }
    ASSERT_TRUE(progress_until(
            [&] { return m_ams.size() == static_cast<size_t>(sent_first); }));
    progress_for(50ms);
    for (const auto &r : reqs) {
        EXPECT_EQ(r.sent, 0);
    }
}

TEST_F(uct_host, destroying_an_ep_with_pending_requests_runs_none_of_them)
{
    /* the use-after-free class: the requests' memory is the caller's
     * again once the endpoint is gone, so the interface must not dispatch
     * them when room comes back */
    auto reqs      = std::make_unique<std::vector<pending_am>>(4);
    int sent_first = 0;
    {
        auto paused = m_agent->pause();
        sent_first  = fill();
        for (size_t k = 0; k < reqs->size(); ++k) {
            (*reqs)[k].ep       = m_ep;
            (*reqs)[k].seq      = 300000 + k;
            (*reqs)[k].req.func = pending_am::send;
            ASSERT_EQ(uct_ep_pending_add(m_ep, &(*reqs)[k].req, 0), UCS_OK);
        }
        /* no purge first: the interface drops what is queued */
        uct_ep_destroy(m_ep);
        m_ep = nullptr;
        for (auto &r : *reqs) {
            r.destroyed = true;
        }
    }
    /* under ASan, a dispatch of a freed request is a use after free; in
     * any build, `destroyed` fails the test from the callback. The sent
     * ones arrive (however slowly a loaded host runs the agent), then
     * 200 ms more give a late dispatch its chance to show. */
    EXPECT_TRUE(progress_until([&] {
        return m_ams.size() >= static_cast<size_t>(sent_first);
    })) << m_ams.size()
        << " AMs of " << sent_first;
    progress_for(200ms);
    EXPECT_EQ(m_ams.size(), static_cast<size_t>(sent_first));
    for (const auto &r : *reqs) {
        EXPECT_EQ(r.calls, 0);
    }
    reqs.reset();
    progress_for(50ms);
}

TEST_F(uct_host, flush_is_in_progress_until_every_operation_completed)
{
    constexpr size_t len = 1024;
    constexpr int n      = 8;
    make_buffers(n * len);
    std::memset(m_src->bytes(), 0x5a, n * len);
    std::deque<counted_completion> puts(n);
    counted_completion flush;
    ep_scope ep_end{*this};
    int puts_done_at_flush         = -1;
    bool visible_at_flush          = false;
    std::function<void()> at_flush = [&] {
        puts_done_at_flush = 0;
        for (const auto &p : puts) {
            puts_done_at_flush += p.calls;
        }
        visible_at_flush = std::memcmp(m_src->bytes(), m_dst->bytes(),
                                       n * len) == 0;
    };
    flush.on_done = &at_flush;
    {
        auto paused = m_agent->pause();
        for (int k = 0; k < n; ++k) {
            uct_iov_t iov = m_src->iov(len, k * len);
            ASSERT_EQ(uct_ep_put_zcopy(m_ep, &iov, 1, remote(k * len),
                                       m_rkey.rkey, &puts[k].comp),
                      UCS_INPROGRESS);
        }
        EXPECT_EQ(uct_ep_flush(m_ep, 0, &flush.comp), UCS_INPROGRESS);
        EXPECT_EQ(uct_iface_flush(m_iface, 0, nullptr), UCS_INPROGRESS);
        progress_for(50ms);
        EXPECT_EQ(flush.calls, 0) << "flush completed with every put "
                                     "outstanding";
    }
    ASSERT_TRUE(progress_until([&] { return flush.calls > 0; }));
    progress_for(50ms);
    EXPECT_EQ(flush.calls, 1);
    EXPECT_EQ(flush.status, UCS_OK);
    EXPECT_EQ(puts_done_at_flush, n) << "the flush completed before the puts";
    EXPECT_TRUE(visible_at_flush);
    EXPECT_EQ(uct_ep_flush(m_ep, 0, nullptr), UCS_OK);
    EXPECT_EQ(uct_iface_flush(m_iface, 0, nullptr), UCS_OK);
}

/* The loopback nic runs a QP's WRs in order, so this would hold here
 * without the fence too: it checks UCT's answers and the bytes, not that
 * the fence reaches the device (the testbed's fence test does that). */
TEST_F(uct_host, a_get_after_put_and_fence_sees_the_put)
{
    constexpr size_t len = 256;
    make_buffers(2 * len);
    counted_completion put, get;
    ep_scope ep_end{*this};
    for (int round = 0; round < 20; ++round) {
        std::memset(m_src->bytes(), 'a' + round, len);
        std::memset(m_src->bytes() + len, 0, len);
        put.reset();
        get.reset();
        {
            /* both posted before the agent takes either */
            auto paused    = m_agent->pause();
            uct_iov_t in   = m_src->iov(len);
            ucs_status_t s = uct_ep_put_zcopy(m_ep, &in, 1, remote(),
                                              m_rkey.rkey, &put.comp);
            ASSERT_EQ(s, UCS_INPROGRESS) << ucs_status_string(s);
            ASSERT_EQ(uct_ep_fence(m_ep, 0), UCS_OK);
            uct_iov_t out = m_src->iov(len, len);
            s = uct_ep_get_zcopy(m_ep, &out, 1, remote(), m_rkey.rkey,
                                 &get.comp);
            ASSERT_EQ(s, UCS_INPROGRESS) << ucs_status_string(s);
        }
        ASSERT_TRUE(progress_until([&] { return get.comp.count == 0; }));
        EXPECT_EQ(get.status, UCS_OK);
        ASSERT_EQ(std::memcmp(m_src->bytes(), m_src->bytes() + len, len), 0)
                << "round " << round << ": the get overtook the put";
        ASSERT_TRUE(progress_until([&] { return put.comp.count == 0; }));
    }
    EXPECT_EQ(put.calls, 20);
    EXPECT_EQ(get.calls, 20);
}

TEST_F(uct_host, the_agent_going_away_fails_outstanding_operations)
{
    constexpr size_t len = 1024;
    constexpr int n      = 6;
    make_buffers(n * len);
    std::deque<counted_completion> puts(n);
    counted_completion flush;
    ep_scope ep_end{*this};
    auto paused = m_agent->pause();
    for (int k = 0; k < n; ++k) {
        uct_iov_t iov = m_src->iov(len, k * len);
        ASSERT_EQ(uct_ep_put_zcopy(m_ep, &iov, 1, remote(k * len), m_rkey.rkey,
                                   &puts[k].comp),
                  UCS_INPROGRESS);
    }
    ASSERT_EQ(uct_ep_flush(m_ep, 0, &flush.comp), UCS_INPROGRESS);
    /* the work stays in the rings, never taken */
    m_agent->stop(std::move(paused));

    auto all_failed = [&] {
        for (const auto &p : puts) {
            if (p.calls == 0) {
                return false;
            }
        }
        return flush.calls > 0 && !m_ep_errors.empty();
    };
    ASSERT_TRUE(progress_until(all_failed, 20s))
            << "no failure within 20 s: " << m_ep_errors.size()
            << " error handler calls";
    progress_for(100ms);
    for (int k = 0; k < n; ++k) {
        EXPECT_EQ(puts[k].calls, 1) << "put " << k;
        EXPECT_NE(puts[k].status, UCS_OK) << "put " << k;
        EXPECT_LT(puts[k].status, UCS_OK) << "put " << k;
    }
    EXPECT_EQ(flush.calls, 1);
    EXPECT_NE(flush.status, UCS_OK);
    ASSERT_EQ(m_ep_errors.size(), 1u);
    EXPECT_LT(m_ep_errors[0], UCS_OK);
    /* and what comes later fails at once */
    uct_iov_t iov  = m_src->iov(len);
    ucs_status_t s = uct_ep_put_zcopy(m_ep, &iov, 1, remote(), m_rkey.rkey,
                                      nullptr);
    EXPECT_LT(s, UCS_OK) << ucs_status_string(s);
    EXPECT_NE(s, UCS_ERR_NO_RESOURCE);
}

TEST_F(uct_host, an_empty_progress_yields_only_while_the_agent_holds_our_work)
{
    /* nothing outstanding: no system call for the sched_yield of
     * IDLE_YIELD, however often UCP calls */
    EXPECT_EQ(yields_in_progress(m_iface, 1000), 0u);

    /* an AM in flight that the paused agent does not take: every empty
     * call hands the CPU over, so that the agent can run */
    {
        auto paused = m_agent->pause();
        ASSERT_EQ(am_short(1), UCS_OK);
        EXPECT_EQ(yields_in_progress(m_iface, 100), 100u);
    }
    ASSERT_TRUE(progress_until([&] { return m_ams.size() == 1; }));
    /* delivered and completed: idle again */
    ASSERT_TRUE(progress_until(
            [&] { return uct_iface_flush(m_iface, 0, nullptr) == UCS_OK; }));
    EXPECT_EQ(yields_in_progress(m_iface, 1000), 0u);
}

/* UCX's test_ucp_peer_failure: three workers of one process, each of its
 * own context (its own MD here, whose attachment the worker's interface
 * uses), all connected; the failing receiver's worker is destroyed and
 * its context kept. Its sender's endpoint must fail through the error
 * handler, at once (the agent announces the departure when the
 * interface closes), what the sender posts after the close must end
 * with an error, a put into the receiver's still registered memory
 * included, and the stable pair (the fixture's interface to itself) must
 * go on working. Without the departure the AM was delivered into rings
 * nobody read and the sender waited for ever. */
TEST_F(uct_host, an_interface_closed_while_its_md_stays_fails_its_senders)
{
    constexpr size_t len = 4096;
    make_buffers(len);
    uct_md_h failing_md = open_uct_md(m_component, host_device);
    ASSERT_NE(failing_md, nullptr);
    struct md_end {
        uct_md_h md;
        ~md_end()
        {
            uct_md_close(md);
        }
    } md_end{failing_md};
    buffer target(failing_md, len);
    ASSERT_TRUE(target.memh != UCT_MEM_HANDLE_NULL);
    uct_md_attr_t attr;
    ASSERT_EQ(uct_md_query(failing_md, &attr), UCS_OK);
    std::vector<char> packed(attr.rkey_packed_size);
    ASSERT_EQ(uct_md_mkey_pack(failing_md, target.memh, packed.data()), UCS_OK);
    uct_rkey_bundle_t rkey{};
    ASSERT_EQ(uct_rkey_unpack(m_component, packed.data(), &rkey), UCS_OK);

    counted_completion put;
    ep_scope ep_end{*this};
    worker_iface failing(m_async, failing_md, am_id);
    ASSERT_NE(failing.iface, nullptr);
    iface_addresses where = addresses_of(failing.iface);
    uct_ep_h to_failing   = connect_ep(m_iface, where);
    ASSERT_NE(to_failing, nullptr);
    struct failing_ep_end {
        uct_ep_h ep;
        ~failing_ep_end()
        {
            uct_ep_destroy(ep);
        }
    } failing_ep_end{to_failing};
    const std::vector<uct_worker_h> both{m_worker, failing.worker};

    /* both pairs work */
    ASSERT_EQ(uct_ep_am_short(to_failing, am_id, 1, nullptr, 0), UCS_OK);
    ASSERT_EQ(am_short(2), UCS_OK);
    ASSERT_TRUE(progress_all_until(both, [&] {
        return failing.ams.size() == 1 && m_ams.size() == 1;
    }));

    failing.close();
    const auto closed = std::chrono::steady_clock::now();
    /* posted at once after the close, as UCP's test does */
    uct_iov_t iov  = m_src->iov(len);
    ucs_status_t s = uct_ep_put_zcopy(to_failing, &iov, 1,
                                      reinterpret_cast<uint64_t>(target.addr),
                                      rkey.rkey, &put.comp);
    ASSERT_TRUE(s == UCS_INPROGRESS || s < UCS_OK) << ucs_status_string(s);
    if (s != UCS_INPROGRESS) {
        put.calls  = 1;
        put.status = s;
    }
    ASSERT_TRUE(progress_until(
            [&] { return !m_ep_errors.empty() && put.calls > 0; }, 10s))
            << m_ep_errors.size() << " endpoint errors, the put "
            << (put.calls > 0 ? "ended" : "still in flight");
    const auto error_after = std::chrono::steady_clock::now() - closed;
    std::printf("error callback %.3f ms after the close\n",
                std::chrono::duration<double, std::milli>(error_after).count());
    EXPECT_LT(error_after, 1s) << "the departure was not announced at once";
    ASSERT_EQ(m_ep_errors.size(), 1u);
    EXPECT_EQ(m_ep_errors[0], UCS_ERR_ENDPOINT_TIMEOUT);
    EXPECT_EQ(put.calls, 1);
    EXPECT_LT(put.status, UCS_OK) << ucs_status_string(put.status);
    EXPECT_NE(put.status, UCS_ERR_NO_RESOURCE);
    EXPECT_LT(uct_ep_am_short(to_failing, am_id, 3, nullptr, 0), UCS_OK);

    /* the stable pair goes on */
    ASSERT_EQ(am_short(4), UCS_OK);
    ASSERT_TRUE(progress_until([&] { return m_ams.size() == 2; }));
    EXPECT_EQ(m_ams.back(), 4u);
    EXPECT_EQ(m_ep_errors.size(), 1u);
    uct_rkey_release(m_component, &rkey);
}

/* One context, several workers: the MD's first interface uses the MD's
 * own attachment, later ones attach siblings. The first closing while a
 * sibling stays is a departure like the sibling's own: the sibling's
 * endpoint to it fails, the sibling goes on working, and an interface
 * opened afterwards on the MD has an address of its own that works. */
TEST_F(uct_host,
       the_first_interface_of_an_md_closed_before_its_siblings_is_gone)
{
    uct_md_h md = open_uct_md(m_component, host_device);
    ASSERT_NE(md, nullptr);
    struct md_end {
        uct_md_h md;
        ~md_end()
        {
            uct_md_close(md);
        }
    } md_end{md};
    auto first   = std::make_unique<worker_iface>(m_async, md, am_id);
    auto sibling = std::make_unique<worker_iface>(m_async, md, am_id);
    ASSERT_NE(first->iface, nullptr);
    ASSERT_NE(sibling->iface, nullptr);
    iface_addresses first_at = addresses_of(first->iface);
    iface_addresses self_at  = addresses_of(sibling->iface);
    EXPECT_NE(first_at.iface, self_at.iface);
    std::vector<uct_ep_h> eps;
    struct eps_end {
        std::vector<uct_ep_h> &eps;
        ~eps_end()
        {
            for (uct_ep_h ep : eps) {
                uct_ep_destroy(ep);
            }
        }
    } eps_end{eps};
    eps.push_back(connect_ep(sibling->iface, first_at));
    eps.push_back(connect_ep(sibling->iface, self_at));
    ASSERT_NE(eps[0], nullptr);
    ASSERT_NE(eps[1], nullptr);
    ASSERT_EQ(uct_ep_am_short(eps[0], am_id, 1, nullptr, 0), UCS_OK);
    ASSERT_TRUE(progress_all_until({first->worker, sibling->worker},
                                   [&] { return first->ams.size() == 1; }));

    first->close();
    ucs_status_t s = uct_ep_am_short(eps[0], am_id, 2, nullptr, 0);
    EXPECT_TRUE(s == UCS_OK || s < UCS_OK) << ucs_status_string(s);
    ASSERT_TRUE(progress_all_until({sibling->worker}, [&] {
        return !sibling->errors.empty();
    })) << "the sibling's endpoint to the closed interface never failed";
    EXPECT_EQ(sibling->errors.front(), UCS_ERR_ENDPOINT_TIMEOUT);

    /* the sibling reaches itself, and a later interface of the MD */
    ASSERT_EQ(uct_ep_am_short(eps[1], am_id, 3, nullptr, 0), UCS_OK);
    auto later = std::make_unique<worker_iface>(m_async, md, am_id);
    ASSERT_NE(later->iface, nullptr);
    iface_addresses later_at = addresses_of(later->iface);
    EXPECT_NE(later_at.iface, first_at.iface)
            << "a later interface took the closed one's address";
    eps.push_back(connect_ep(sibling->iface, later_at));
    ASSERT_NE(eps[2], nullptr);
    ASSERT_EQ(uct_ep_am_short(eps[2], am_id, 4, nullptr, 0), UCS_OK);
    ASSERT_TRUE(progress_all_until({sibling->worker, later->worker}, [&] {
        return sibling->ams.size() == 1 && later->ams.size() == 1;
    }));
    EXPECT_EQ(sibling->ams[0], 3u);
    EXPECT_EQ(later->ams[0], 4u);
    EXPECT_EQ(sibling->errors.size(), 1u);
    EXPECT_TRUE(later->errors.empty());
    for (uct_ep_h ep : eps) {
        uct_ep_destroy(ep);
    }
    eps.clear();
    later.reset();
    sibling.reset();
}

namespace {

/* uct_host with what UCX logs at warning level or worse collected from
 * the start, the md's open and the attach included. */
class uct_host_logged : public uct_host {
protected:
    log_capture m_ucx_log;
};

/* Its agent runs with --auth=none. */
class uct_host_unauthenticated : public uct_host_logged {
protected:
    std::unique_ptr<rvt::agent::peer_auth> agent_auth() override
    {
        return rvt::agent::no_auth();
    }
};

} // namespace

/* A process sees its agent's authentication where its user looks: UCX's
 * log, at WARN, naming the job key anyone could send. */
TEST_F(uct_host_unauthenticated, the_module_warns_that_its_agent_is_open_to_all)
{
    ASSERT_NE(m_iface, nullptr);
    EXPECT_TRUE(m_ucx_log.any_containing(
            std::string("does not authenticate its peers (--auth=none): any "
                        "host on the fabric that sends the job key '") +
            host_job_key + "'"))
            << testing::PrintToString(m_ucx_log.lines());
}

TEST_F(uct_host_logged, an_agent_that_authenticates_draws_no_warning)
{
    ASSERT_NE(m_iface, nullptr);
    EXPECT_FALSE(m_ucx_log.any_containing("does not authenticate"))
            << testing::PrintToString(m_ucx_log.lines());
}

namespace {

/* Its agent's table holds two nodes: its own and one more. */
class uct_host_small_table : public uct_host_logged {
protected:
    rvt::agent::engine_config agent_engine() override
    {
        rvt::agent::engine_config c;
        c.max_peers   = 2;
        c.share.peers = 2; /* the table, not the process's share, is full */
        return c;
    }
};

/* The interface address of an agent on another node (`node` 1, 2, ...):
 * this one's, with another GID, UD QPN and agent id. */
iface_addresses on_another_node(const iface_addresses &here, uint8_t node)
{
    iface_addresses there = here;
    rvt::uct::iface_address a;
    std::memcpy(&a, there.iface.data(), sizeof(a));
    a.agent.gid[15] = static_cast<uint8_t>(a.agent.gid[15] + node);
    a.agent.ud_qpn += node;
    a.agent.agent_id += node;
    std::memcpy(there.iface.data(), &a, sizeof(a));
    return there;
}

} // namespace

/* A job on more nodes than the agent's --max-peers: the endpoint to one
 * node more is refused, and UCX's log of the process says which setting
 * to raise. */
TEST_F(uct_host_small_table, one_node_more_than_max_peers_is_refused_naming_it)
{
    const iface_addresses self = addresses_of(m_iface);
    iface_addresses first      = on_another_node(self, 1);
    iface_addresses second     = on_another_node(self, 2);
    uct_ep_h fits              = connect_ep(m_iface, first);
    ASSERT_NE(fits, nullptr);
    EXPECT_EQ(connect_ep(m_iface, second, UCS_ERR_UNREACHABLE), nullptr);
    uct_ep_destroy(fits);
    EXPECT_TRUE(m_ucx_log.any_containing(
            "this agent already has 2 peers, its maximum (rvtd --max-peers)"))
            << testing::PrintToString(m_ucx_log.lines());
}

namespace {

/* An MD of its own, opened with the environment the test set, and what
 * UCX logged meanwhile. */
struct other_md {
    log_capture log;
    uct_md_h md = nullptr;

    explicit other_md(uct_component_h component)
    {
        md = open_uct_md(component, host_device);
    }
    ~other_md()
    {
        if (md != nullptr) {
            uct_md_close(md);
        }
    }
    other_md(const other_md &)            = delete;
    other_md &operator=(const other_md &) = delete;

    const rvt::uct::link_settings &settings() const
    {
        return rvt::uct::to_md(md).link->settings();
    }
    /* attaches, as the first registration does */
    void attach()
    {
        buffer b(md, 4096);
        EXPECT_TRUE(b.memh != UCT_MEM_HANDLE_NULL);
    }
};

uint32_t agent_k(uct_md_h md)
{
    auto s = rvt::uct::to_md(md).link->session();
    EXPECT_TRUE(s.ok());
    return s ? s.value()->num_qps() : 0;
}

} // namespace

/* Each mark names a row of md_config_table (ULUNITS, default auto) and an
 * option rvtd has. */
TEST(uct_agent_settings, each_names_a_ucx_variable_and_an_rvtd_option)
{
    ASSERT_FALSE(rvt::uct::md_agent_settings().empty());
    for (const auto &a : rvt::uct::md_agent_settings()) {
        SCOPED_TRACE(a.name);
        const ucs_config_field_t *row = nullptr;
        for (auto *f = rvt::uct::md_config_table; f->name != nullptr; ++f) {
            if (std::string_view(f->name) == a.name) {
                row = f;
            }
        }
        ASSERT_NE(row, nullptr) << "not in md_config_table";
        EXPECT_EQ(row->offset, a.offset);
        EXPECT_STREQ(row->dfl_value, "auto");
        bool known = false;
        for (const auto &s : rvt::tools::rvtd_settings) {
            known |= s.name == a.option;
        }
        EXPECT_TRUE(known) << "rvtd has no --" << a.option;
    }
}

/* By its mark alone: UCX_RVT_AGENT_ARGS's options, then each setting the
 * agent must know that the process gives, as the rvtd it starts gets them
 * (agent_link.cc's attach() hands agent_args to client/launch.h, whose
 * test_launch.cc sees them on rvtd's command line). */
TEST_F(uct_host, a_setting_the_agent_must_know_reaches_its_argument_list)
{
    env_scope env;
    env.set("UCX_RVT_AGENT_ARGS", "--linger=5");
    std::vector<std::string> want = {"--linger=5"};
    for (const auto &a : rvt::uct::md_agent_settings()) {
        env.set(std::string("UCX_RVT_") + a.name, "2");
        want.push_back(std::string("--") + a.option + "=2");
    }
    {
        other_md given(m_component);
        ASSERT_NE(given.md, nullptr);
        EXPECT_EQ(given.settings().agent_args, want);
        EXPECT_EQ(given.settings().agent_settings.size(),
                  rvt::uct::md_agent_settings().size());
    }
    for (const auto &a : rvt::uct::md_agent_settings()) {
        env.set(std::string("UCX_RVT_") + a.name, "auto");
    }
    other_md left(m_component);
    ASSERT_NE(left.md, nullptr);
    EXPECT_EQ(left.settings().agent_args,
              std::vector<std::string>{"--linger=5"});
    EXPECT_TRUE(left.settings().agent_settings.empty());
}

TEST_F(uct_host, a_setting_given_twice_is_refused_naming_both)
{
    env_scope env;
    env.set("UCX_RVT_NUM_QPS", "2");
    env.set("UCX_RVT_AGENT_ARGS", "--num-qps=3");
    log_capture log;
    uct_md_config_t *config;
    ASSERT_EQ(uct_md_config_read(m_component, nullptr, nullptr, &config),
              UCS_OK);
    uct_md_h md = nullptr;
    EXPECT_EQ(uct_md_open(m_component, host_device, config, &md),
              UCS_ERR_INVALID_PARAM);
    uct_config_release(config);
    EXPECT_TRUE(log.any_containing("UCX_RVT_AGENT_ARGS: '--num-qps=3': "
                                   "UCX_RVT_NUM_QPS gives --num-qps"))
            << testing::PrintToString(log.lines());
}

/* The agent runs already with its own K: a process that asked for
 * another hears it in UCX's log, naming the setting and both values. */
TEST_F(uct_host, an_agent_running_with_another_value_draws_a_warning)
{
    const uint32_t k     = agent_k(m_md);
    const uint32_t other = k == 1 ? 2 : k - 1;
    env_scope env;
    env.set("UCX_RVT_NUM_QPS", std::to_string(other));
    other_md asked(m_component);
    ASSERT_NE(asked.md, nullptr);
    asked.attach();
    EXPECT_TRUE(asked.log.any_containing(
            "UCX_RVT_NUM_QPS=" + std::to_string(other) + ", but agent " +
            "000000000000004d uses " + std::to_string(k) + ": "))
            << testing::PrintToString(asked.log.lines());
}

TEST_F(uct_host, an_agent_running_with_the_same_value_draws_none)
{
    env_scope env;
    env.set("UCX_RVT_NUM_QPS", std::to_string(agent_k(m_md)));
    other_md asked(m_component);
    ASSERT_NE(asked.md, nullptr);
    asked.attach();
    EXPECT_FALSE(asked.log.any_containing("UCX_RVT_NUM_QPS"))
            << testing::PrintToString(asked.log.lines());
}

#if RVT_UCX_MD_QUERY_V2
/* UCP asks an MD for the attributes it names in field_mask
 * (uct_md_query_v2), and UCX copies each named field after asserting
 * the MD answered it. On UCX 1.16, which has no uct_md_base_md_query,
 * a query that cleared the caller's field_mask aborted the process at
 * UCP's first query. */
TEST_F(uct_host, the_md_answers_the_fields_a_v2_query_names)
{
    uct_md_attr_v2_t attr{};
    attr.field_mask = UCT_MD_ATTR_FIELD_MAX_ALLOC | UCT_MD_ATTR_FIELD_FLAGS |
                      UCT_MD_ATTR_FIELD_RKEY_PACKED_SIZE |
                      UCT_MD_ATTR_FIELD_REG_MEM_TYPES;
    ASSERT_EQ(uct_md_query_v2(m_md, &attr), UCS_OK);
    EXPECT_NE(attr.flags & UCT_MD_FLAG_REG, 0u);
    EXPECT_GT(attr.rkey_packed_size, 0u);
    EXPECT_NE(attr.reg_mem_types & UCS_BIT(UCS_MEMORY_TYPE_HOST), 0u);
}
#endif
