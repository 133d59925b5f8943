/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fixture of the UCT semantics tests (test_uct_rvt_semantics.cc,
 * test_uct_rvt_failure.cc): the test's agent, MD and interface, and an
 * endpoint to a target interface on one of three routes (route_kind):
 * itself, a second agent on the same device, or the agent of the next
 * node's device. Plus byte patterns that differ per seed and per
 * position, and completions and error handlers that count.
 *
 * An MD attaches when it first opens an interface (or registers), with
 * the environment of that moment, so an interface on a second agent is a
 * second MD opened while XDG_RUNTIME_DIR (and, for another job,
 * UCX_RVT_JOB_KEY) name the other agent.
 */
#ifndef RVT_TEST_UCT_RVT_ROUTE_H
#define RVT_TEST_UCT_RVT_ROUTE_H

#include "uct_rvt_fixture.h"

#include <gtest/gtest.h>
#include <uct/api/uct.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rvt::test {

inline constexpr uint8_t am_id = 5;
inline constexpr size_t npos   = ~size_t{0};

/* ---- byte patterns: distinct per seed and per position ---------------- */

inline uint64_t pattern_word(uint64_t seed, size_t word)
{
    uint64_t x = (word + 1) * 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return x ^ ((seed + 1) * 0x9e3779b97f4a7c15ull);
}

inline void fill(char *dst, size_t length, uint64_t seed)
{
    for (size_t w = 0; w * 8 < length; ++w) {
        const uint64_t v = pattern_word(seed, w);
        std::memcpy(dst + w * 8, &v, std::min<size_t>(8, length - w * 8));
    }
}

inline std::string pattern(size_t length, uint64_t seed)
{
    std::string s(length, '\0');
    fill(s.data(), length, seed);
    return s;
}

/* The first offset where src differs from the pattern, or npos. */
inline size_t mismatch(const char *src, size_t length, uint64_t seed)
{
    for (size_t w = 0; w * 8 < length; ++w) {
        const uint64_t v = pattern_word(seed, w);
        const size_t n   = std::min<size_t>(8, length - w * 8);
        if (std::memcmp(src + w * 8, &v, n) != 0) {
            for (size_t k = 0; k < n; ++k) {
                if (src[w * 8 + k] != reinterpret_cast<const char *>(&v)[k]) {
                    return w * 8 + k;
                }
            }
        }
    }
    return npos;
}

/* Deterministic sizes in [lo, hi] that reach both ends often. */
inline size_t size_of(uint64_t k, size_t lo, size_t hi)
{
    if (k % 7 == 0) {
        return lo;
    }
    if (k % 11 == 0) {
        return hi;
    }
    return lo + (k * 2654435761ull >> 4) % (hi - lo + 1);
}

inline double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
}

inline uint64_t tag_of(const std::string &msg)
{
    uint64_t tag = ~uint64_t{0};
    if (msg.size() >= sizeof(tag)) {
        std::memcpy(&tag, msg.data(), sizeof(tag));
    }
    return tag;
}

/* A completion that counts its calls and keeps the status of the last. */
struct call_counter {
    uct_completion_t comp{on_done, 1, UCS_OK};
    int calls                         = 0;
    ucs_status_t status               = UCS_OK;
    const std::function<void()> *then = nullptr; /* run at the first call */

    static void on_done(uct_completion_t *c)
    {
        auto *self   = reinterpret_cast<call_counter *>(c);
        self->status = c->status;
        if (++self->calls == 1 && self->then != nullptr) {
            (*self->then)();
        }
    }
};
static_assert(offsetof(call_counter, comp) == 0);

/* What the error handler of an interface heard. */
struct error_log {
    std::vector<std::pair<uct_ep_h, ucs_status_t>> calls;

    static ucs_status_t handler(void *arg, uct_ep_h ep, ucs_status_t status)
    {
        static_cast<error_log *>(arg)->calls.emplace_back(ep, status);
        return UCS_OK;
    }
    int count(uct_ep_h ep) const
    {
        return static_cast<int>(
                std::count_if(calls.begin(), calls.end(),
                              [ep](const auto &c) { return c.first == ep; }));
    }
};

/* A second memory domain and interface, attached to another agent. */
struct context {
    uct_md_h md = nullptr;
    opened_iface oi;

    ~context()
    {
        oi.close();
        if (md != nullptr) {
            uct_md_close(md);
        }
    }
};

/* Where a route's target interface is:
 *   self         the sending interface itself: its agent's loopback QPs
 *   other_agent  on a second agent of the same job on the same device,
 *                in its own runtime directory (so its own UD QP): the
 *                agents connect by the handshake and share RC QPs, which
 *                the device loops back
 *   other_node   on the agent of another rxe device (the testbed's next
 *                node): the same, through that node's veth and the bridge
 */
enum class route_kind {
    self,
    other_agent,
    other_node
};

inline std::string route_name(const ::testing::TestParamInfo<route_kind> &info)
{
    switch (info.param) {
    case route_kind::self:
        return "self";
    case route_kind::other_agent:
        return "other_agent";
    default:
        return "other_node";
    }
}

/* Opens the test's agent, MD and interface, and an endpoint to a target
 * interface (itself, or one on a second agent), and drives both. */
class uct_rvt_route : public uct_rvt_fixture {
protected:
    void TearDown() override
    {
        for (uct_ep_h ep : m_eps) {
            uct_ep_destroy(ep);
        }
        m_eps.clear();
        for (auto &bundle : m_rkeys) {
            uct_rkey_release(m_component, &bundle);
        }
        m_rkeys.clear();
        m_other.reset();
        m_oi.close();
        uct_rvt_fixture::TearDown();
    }

    void open_route(route_kind kind,
                    const std::vector<std::string> &agent_options = {})
    {
        ASSERT_NO_FATAL_FAILURE(start_agent(agent_options));
        ASSERT_NO_FATAL_FAILURE(open_md());
        ASSERT_NO_FATAL_FAILURE(
                open_iface(m_oi, UCS_OK, {error_log::handler, &m_errors, {}}));
        ASSERT_NE(m_oi.iface, nullptr);
        if (kind == route_kind::self) {
            m_to    = &m_oi;
            m_to_md = m_md;
        } else {
            std::string dev;
            if (kind == route_kind::other_node) {
                dev = other_device();
                if (dev.empty()) {
                    GTEST_SKIP() << "no second rvt device for another node";
                }
            }
            m_other       = std::make_unique<context>();
            m_other_agent = start_agent_at(m_runtime + "/b", uct_job_key,
                                           agent_options, dev);
            /* with a handler: an endpoint error nobody handles is fatal
             * in UCT (uct_base_iface_failure_log_level) */
            ASSERT_NO_FATAL_FAILURE(
                    open_context(*m_other, m_runtime + "/b", uct_job_key,
                                 {error_log::handler, &m_other_errors, dev}));
            ASSERT_NE(m_other->oi.iface, nullptr);
            m_to    = &m_other->oi;
            m_to_md = m_other->md;
        }
        ASSERT_EQ(uct_iface_set_am_handler(m_to->iface, am_id, keep_am,
                                           &m_received, 0),
                  UCS_OK);
        m_ep = new_ep(m_to->iface);
        ASSERT_NE(m_ep, nullptr);
        ASSERT_EQ(uct_iface_query(m_oi.iface, &m_attr), UCS_OK);
        m_seg = m_attr.cap.am.max_bcopy;
        ASSERT_GE(m_seg, 64u);
    }

    /* Opens md and interface on the agent of `key` under `base`. */
    void open_context(context &c, const std::string &base,
                      const std::string &key, const iface_options &opts = {})
    {
        /* the module attaches at the first interface, with the
         * environment of that moment */
        m_env.set("XDG_RUNTIME_DIR", base);
        m_env.set("UCX_RVT_JOB_KEY", key);
        c.md = open_md_handle(opts.device);
        if (c.md != nullptr) {
            open_iface_on(c.md, c.oi, UCS_OK, opts);
        }
        m_env.set("XDG_RUNTIME_DIR", m_runtime);
        m_env.set("UCX_RVT_JOB_KEY", uct_job_key);
    }

    /* An endpoint from our interface to `to`, destroyed at the end. */
    uct_ep_h new_ep(uct_iface_h to, uct_iface_h from = nullptr)
    {
        iface_addresses a = addresses_of(to);
        uct_ep_h ep       = connect_ep(from ? from : m_oi.iface, a);
        if (ep != nullptr) {
            m_eps.push_back(ep);
        }
        return ep;
    }

    /* Destroys ep and forgets its errors: a later endpoint may get its
     * address. */
    void destroy_ep(uct_ep_h ep)
    {
        std::erase(m_eps, ep);
        std::erase_if(m_errors.calls,
                      [ep](const auto &c) { return c.first == ep; });
        uct_ep_destroy(ep);
    }

    /* The rkey of `b` (registered on the target's MD), released at the
     * end. */
    uct_rkey_t rkey_of(const buffer &b)
    {
        std::vector<char> packed(16);
        EXPECT_EQ(uct_md_mkey_pack(b.md, b.memh, packed.data()), UCS_OK);
        uct_rkey_bundle_t bundle{};
        if (uct_rkey_unpack(m_component, packed.data(), &bundle) != UCS_OK) {
            ADD_FAILURE() << "uct_rkey_unpack";
            return 0;
        }
        m_rkeys.push_back(bundle);
        return bundle.rkey;
    }

    void progress()
    {
        uct_worker_progress(m_oi.worker);
        if (m_to != nullptr && m_to != &m_oi) {
            uct_worker_progress(m_to->worker);
        }
    }

    bool progress_until(const std::function<bool()> &pred,
                        std::chrono::milliseconds limit = 30s)
    {
        auto until = std::chrono::steady_clock::now() + limit;
        while (!pred()) {
            if (std::chrono::steady_clock::now() > until) {
                return false;
            }
            progress();
        }
        return true;
    }

    /* Retries what the transport has no room for, as UCP would. */
    ucs_status_t retry(const std::function<ucs_status_t()> &op)
    {
        ucs_status_t status;
        auto until = std::chrono::steady_clock::now() + 30s;
        while ((status = op()) == UCS_ERR_NO_RESOURCE &&
               std::chrono::steady_clock::now() < until) {
            progress();
        }
        return status;
    }

    static ucs_status_t bcopy_status(ssize_t n)
    {
        return n < 0 ? static_cast<ucs_status_t>(n) : UCS_OK;
    }

    ucs_status_t flush_ep(uct_ep_h ep)
    {
        call_counter c;
        ucs_status_t status = retry(
                [&] { return uct_ep_flush(ep, 0, &c.comp); });
        if (status == UCS_INPROGRESS) {
            EXPECT_TRUE(progress_until([&] { return c.calls > 0; }));
            status = c.status;
        }
        return status;
    }

    opened_iface m_oi;
    std::unique_ptr<context> m_other;
    opened_iface *m_to = nullptr;
    uct_md_h m_to_md   = nullptr;
    uct_ep_h m_ep      = nullptr;
    uct_iface_attr_t m_attr{};
    size_t m_seg = 0;
    std::vector<std::string> m_received;
    error_log m_errors; /* of m_oi */
    error_log m_other_errors; /* of m_other's interface */
    pid_t m_other_agent = -1; /* m_other's */
    std::vector<uct_ep_h> m_eps;
    std::vector<uct_rkey_bundle_t> m_rkeys; /* released at TearDown */
};

/* A test run over each route (INSTANTIATE_TEST_SUITE_P with route_kind
 * values): the route is open when the test body starts. */
class uct_rvt_each_route :
    public uct_rvt_route,
    public ::testing::WithParamInterface<route_kind> {
protected:
    void SetUp() override
    {
        uct_rvt_route::SetUp();
        if (!IsSkipped() && !HasFatalFailure()) {
            open_route(GetParam());
        }
    }
};

} // namespace rvt::test

#endif
