/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Failures of rvt peers, through UCT's public API with real agents on a
 * real device (the testbed): an endpoint to an agent nobody runs, to
 * another job's agent, and to an agent killed with SIGKILL. Its
 * operations complete with an error and the interface's error handler is
 * called, within a bounded time, never a hang; the local agent and other
 * endpoints go on working. The agents run with short timers.
 * Times are printed, never asserted beyond generous bounds.
 */
#include "uct_rvt_route.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>
#include <uct/api/uct.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using namespace rvt::test;

namespace {

/* Short timers on the test's own agent, so that failures are found fast:
 * a peer is given up 1.5 s after the connection was wanted or lost, a
 * lost one is retried after 200 ms, a keepalive goes out after 500 ms
 * idle (lost after 1 s unanswered). */
const std::vector<std::string> fast_failure = {"--give-up-ms=1500",
                                               "--reconnect-ms=200",
                                               "--keepalive-ms=500"};

class uct_rvt_failure : public uct_rvt_route {
protected:
    /* The operations a failed endpoint must complete with an error. */
    struct outstanding {
        call_counter put, get, flush;
        ucs_status_t put_started = UCS_OK, get_started = UCS_OK;
        ucs_status_t am_started    = UCS_OK;
        ucs_status_t flush_started = UCS_OK;
        std::unique_ptr<buffer> local;
    };

    /* Posts an AM, a put, a get and a flush on ep, to valid remote
     * memory: only the peer's failure may fail them (a bad rkey would
     * break the connection and fail them too). */
    void
    post_some(uct_ep_h ep, outstanding &o, uint64_t remote, uct_rkey_t rkey)
    {
        o.local = std::make_unique<buffer>(m_md, 64 * 1024);
        ASSERT_NE(o.local->memh, nullptr);
        uct_iov_t iov   = o.local->iov(64 * 1024);
        o.am_started    = uct_ep_am_short(ep, am_id, 1, "lost", 4);
        o.put_started   = uct_ep_put_zcopy(ep, &iov, 1, remote, rkey,
                                           &o.put.comp);
        o.get_started   = uct_ep_get_zcopy(ep, &iov, 1, remote, rkey,
                                           &o.get.comp);
        o.flush_started = uct_ep_flush(ep, 0, &o.flush.comp);
    }

    /* Waits (without progress: the agent decides) for the local agent to
     * show the peer at `ud_qpn` as `state`. */
    bool peer_becomes(uint32_t ud_qpn, const std::string &state)
    {
        return eventually([&] { return peer_state(ud_qpn) == state; }, 30s);
    }

    /* Waits for the endpoint's error and its operations' ends; checks
     * that each ended with an error. Returns the seconds it took. */
    double expect_failure(uct_ep_h ep, outstanding &o,
                          std::chrono::steady_clock::time_point t0)
    {
        auto ended = [](const call_counter &c, ucs_status_t started) {
            return started != UCS_INPROGRESS || c.calls > 0;
        };
        const bool done = progress_until(
                [&] {
                    return m_errors.count(ep) > 0 &&
                           ended(o.put, o.put_started) &&
                           ended(o.get, o.get_started) &&
                           ended(o.flush, o.flush_started);
                },
                60s);
        const double s = seconds_since(t0);
        EXPECT_TRUE(done) << "no error within 60 s: " << m_errors.count(ep)
                          << " error callbacks, put " << o.put.calls << ", get "
                          << o.get.calls << ", flush " << o.flush.calls;
        EXPECT_EQ(m_errors.count(ep), 1) << "error handler calls";
        for (const auto &[e, status] : m_errors.calls) {
            if (e == ep) {
                EXPECT_NE(status, UCS_OK);
                std::printf("[ INFO     ] endpoint error %s after %.2f s\n",
                            ucs_status_string(status), s);
            }
        }
        auto failed = [](const call_counter &c, ucs_status_t started,
                         const char *what) {
            if (started == UCS_INPROGRESS) {
                EXPECT_EQ(c.calls, 1) << what;
                EXPECT_NE(c.status, UCS_OK) << what << " succeeded";
                std::printf("[ INFO     ] %s completed: %s\n", what,
                            ucs_status_string(c.status));
            } else {
                EXPECT_NE(started, UCS_OK) << what << " succeeded at once";
            }
        };
        EXPECT_TRUE(o.am_started == UCS_OK || o.am_started < 0);
        failed(o.put, o.put_started, "put_zcopy");
        failed(o.get, o.get_started, "get_zcopy");
        failed(o.flush, o.flush_started, "flush");
        const ucs_status_t later = uct_ep_am_short(ep, am_id, 2, nullptr, 0);
        EXPECT_TRUE(later != UCS_OK && later != UCS_ERR_NO_RESOURCE)
                << "an AM on the failed endpoint: " << ucs_status_string(later);
        return s;
    }

    /* The local agent still moves data: an AM and a put to ourselves. */
    void expect_loopback_works()
    {
        uct_ep_h self = new_ep(m_oi.iface);
        ASSERT_NE(self, nullptr);
        std::vector<std::string> got;
        ASSERT_EQ(uct_iface_set_am_handler(m_oi.iface, am_id + 1, keep_am, &got,
                                           0),
                  UCS_OK);
        buffer target(m_md, 64 * 1024), src(m_md, 64 * 1024);
        ASSERT_NE(target.memh, nullptr);
        fill(src.bytes(), src.length, 9500);
        uct_iov_t iov = src.iov(src.length);
        call_counter put;
        ucs_status_t status = retry([&] {
            return uct_ep_put_zcopy(self, &iov, 1,
                                    reinterpret_cast<uint64_t>(target.bytes()),
                                    rkey_of(target), &put.comp);
        });
        EXPECT_TRUE(status == UCS_OK || status == UCS_INPROGRESS)
                << ucs_status_string(status);
        EXPECT_EQ(retry([&] {
                      return uct_ep_am_short(self, am_id + 1, 42, "after", 5);
                  }),
                  UCS_OK);
        EXPECT_TRUE(progress_until([&] { return !got.empty(); }))
                << "the local agent no longer delivers";
        EXPECT_EQ(flush_ep(self), UCS_OK);
        EXPECT_EQ(mismatch(target.bytes(), target.length, 9500), npos);
        EXPECT_EQ(m_errors.count(self), 0);
        destroy_ep(self);
    }

    /* The state the local agent shows for the peer at `ud_qpn`. */
    std::string peer_state(uint32_t ud_qpn)
    {
        auto st = rvt::client::query_status(m_socket, false);
        if (!st) {
            return "status: " + st.error();
        }
        const auto status = nlohmann::json::parse(st.value(), nullptr, false);
        if (status.is_discarded()) {
            return "not the agent's status JSON: " + st.value();
        }
        for (const auto &p : status["data_path"]["peers"]) {
            if (p.value("ud_qpn", uint32_t{0}) == ud_qpn) {
                return p.value("state", std::string("no state"));
            }
        }
        return "no such peer";
    }
};

/* The layout of an rvt interface address (iface.h), to make one up. */
struct [[gnu::packed]] rvt_iface_address {
    uint8_t gid[16];
    uint32_t ud_qpn;
    uint32_t reserved;
    uint64_t agent_id;
    uint16_t client_index;
    uint8_t client_generation;
    uint8_t reserved0;
};
static_assert(sizeof(rvt_iface_address) == 36);

uint32_t ud_qpn_of(uct_iface_h iface)
{
    iface_addresses a = addresses_of(iface);
    rvt_iface_address addr;
    std::memcpy(&addr, a.iface.data(), sizeof(addr));
    return addr.ud_qpn;
}

} // namespace

TEST_F(uct_rvt_failure, an_agent_nobody_runs)
{
    ASSERT_NO_FATAL_FAILURE(open_route(route_kind::self, fast_failure));
    /* our own address with a UD QPN that no QP has (rxe numbers QPs far
     * below) and another agent id: the handshake goes unanswered */
    iface_addresses a = addresses_of(m_oi.iface);
    ASSERT_EQ(a.iface.size(), sizeof(rvt_iface_address));
    rvt_iface_address addr;
    std::memcpy(&addr, a.iface.data(), sizeof(addr));
    addr.ud_qpn = 0xfffff0;
    addr.agent_id ^= 0x5a5a5a5a5a5a5a5aull;
    std::memcpy(a.iface.data(), &addr, sizeof(addr));
    ASSERT_TRUE(
            uct_iface_is_reachable(m_oi.iface, a.dev_addr(), a.iface_addr()));
    uct_ep_h ep = connect_ep(m_oi.iface, a);
    ASSERT_NE(ep, nullptr);
    m_eps.push_back(ep);

    buffer target(m_md, 64 * 1024);
    ASSERT_NE(target.memh, nullptr);
    outstanding o;
    const auto t0 = std::chrono::steady_clock::now();
    post_some(ep, o, reinterpret_cast<uint64_t>(target.bytes()),
              rkey_of(target));
    expect_failure(ep, o, t0);
    EXPECT_TRUE(peer_becomes(addr.ud_qpn, "failed")) << peer_state(addr.ud_qpn);
    destroy_ep(ep);
    expect_loopback_works();
}

/* A QP that goes to the error state and completes nothing, not even the
 * flush (Debian 12's rxe can; rvtd --fault-silent-qps=1 makes the first
 * QP that gets work do it): the agent's lane watchdog finds it (engine.h,
 * "Silent QPs"), the lane's ops complete with an error, the endpoint
 * fails as an RC endpoint does, and the agent rebuilds its QPs and
 * serves again. Without the watchdog the operations wait for ever. */
TEST_F(uct_rvt_failure, a_qp_that_fails_silently)
{
    std::vector<std::string> opts = fast_failure;
    opts.push_back("--fault-silent-qps=1");
    ASSERT_NO_FATAL_FAILURE(open_route(route_kind::self, opts));
    buffer target(m_md, 64 * 1024);
    ASSERT_NE(target.memh, nullptr);
    outstanding o;
    const auto t0 = std::chrono::steady_clock::now();
    post_some(m_ep, o, reinterpret_cast<uint64_t>(target.bytes()),
              rkey_of(target));
    const double s = expect_failure(m_ep, o, t0);
    if (HasFailure()) {
        /* operations still outstanding: the interface goes while their
         * completions (in this frame) live */
        destroy_ep(m_ep);
        m_oi.close();
        return;
    }
    std::printf("[ INFO     ] a silent QP's operations failed after %.2f s\n",
                s);
    expect_loopback_works();
}

TEST_F(uct_rvt_failure, another_jobs_agent_is_no_peer)
{
    ASSERT_NO_FATAL_FAILURE(open_route(route_kind::self, fast_failure));
    /* an agent of another job on this device: it refuses the handshake */
    context other;
    const std::string key = "uct-rvt-other-job";
    start_agent_at(m_runtime + "/c", key);
    error_log other_errors;
    ASSERT_NO_FATAL_FAILURE(
            open_context(other, m_runtime + "/c", key,
                         {error_log::handler, &other_errors, {}}));
    ASSERT_NE(other.oi.iface, nullptr);
    uct_ep_h ep = new_ep(other.oi.iface);
    ASSERT_NE(ep, nullptr);
    {
        buffer target(other.md, 64 * 1024);
        ASSERT_NE(target.memh, nullptr);
        outstanding o;
        const auto t0 = std::chrono::steady_clock::now();
        post_some(ep, o, reinterpret_cast<uint64_t>(target.bytes()),
                  rkey_of(target));
        expect_failure(ep, o, t0);
        EXPECT_TRUE(peer_becomes(ud_qpn_of(other.oi.iface), "failed"))
                << peer_state(ud_qpn_of(other.oi.iface));
    }
    destroy_ep(ep);
    expect_loopback_works();
}

/* An agent of this job and user that cannot prove it (--auth=none, while
 * the node's agents use MUNGE): its connection requests, with the right
 * job key and uid, are dropped unanswered and counted; it gets no peer
 * here, and its client's endpoint fails. */
TEST_F(uct_rvt_failure,
       a_stranger_with_the_job_key_but_no_credential_is_no_peer)
{
    ASSERT_NO_FATAL_FAILURE(open_route(route_kind::self, fast_failure));
    auto status_of_ours = [&] {
        return nlohmann::json::parse(
                rvt::client::query_status(m_socket, false).value());
    };
    ASSERT_EQ(status_of_ours()["data_path"]["auth"], "munge")
            << "the testbed runs munged on every node";
    context stranger;
    std::vector<std::string> opts = fast_failure;
    opts.push_back("--auth=none");
    start_agent_at(m_runtime + "/c", uct_job_key, opts);
    error_log stranger_errors;
    ASSERT_NO_FATAL_FAILURE(
            open_context(stranger, m_runtime + "/c", uct_job_key,
                         {error_log::handler, &stranger_errors, {}}));
    ASSERT_NE(stranger.oi.iface, nullptr);
    /* the stranger's endpoint to us: its agent sends the requests */
    iface_addresses ours = addresses_of(m_oi.iface);
    uct_ep_h ep          = connect_ep(stranger.oi.iface, ours);
    ASSERT_NE(ep, nullptr);
    const ucs_status_t sent = uct_ep_am_short(ep, am_id, 1, nullptr, 0);
    EXPECT_TRUE(sent == UCS_OK || sent == UCS_ERR_NO_RESOURCE)
            << ucs_status_string(sent);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(eventually(
            [&] {
                uct_worker_progress(stranger.oi.worker);
                return stranger_errors.count(ep) > 0;
            },
            30s))
            << "the stranger's endpoint did not fail";
    std::printf("[ INFO     ] the stranger's endpoint failed after %.2f s\n",
                seconds_since(t0));
    const auto after = status_of_ours();
    EXPECT_GE(after["data_path"]["handshake"]["unauthenticated"].get<uint64_t>(),
              1u)
            << after.dump();
    EXPECT_EQ(peer_state(ud_qpn_of(stranger.oi.iface)), "no such peer");
    uct_ep_destroy(ep);
    expect_loopback_works();
}

namespace {
class uct_rvt_peer_death :
    public uct_rvt_failure,
    public ::testing::WithParamInterface<route_kind> {};
} // namespace

/* other_agent: the dead agent's QPs are on our device; other_node: across
 * the bridge, as when a node's agent dies */
INSTANTIATE_TEST_SUITE_P(route, uct_rvt_peer_death,
                         ::testing::Values(route_kind::other_agent,
                                           route_kind::other_node),
                         route_name);

TEST_P(uct_rvt_peer_death, a_peer_agent_killed)
{
    ASSERT_NO_FATAL_FAILURE(open_route(GetParam(), fast_failure));
    if (IsSkipped()) {
        return;
    }
    const pid_t agent_b  = m_other_agent;
    const uint32_t qpn_b = ud_qpn_of(m_to->iface);
    std::vector<std::string> back;
    ASSERT_EQ(uct_iface_set_am_handler(m_oi.iface, am_id, keep_am, &back, 0),
              UCS_OK);
    uct_ep_h reverse = new_ep(m_oi.iface, m_to->iface);
    ASSERT_NE(reverse, nullptr);
    /* another endpoint of ours, to the local agent */
    uct_ep_h bystander = new_ep(m_oi.iface);
    ASSERT_NE(bystander, nullptr);
    {
        /* both ways first: AMs and a put there, an AM back */
        buffer target(m_to_md, 256 * 1024), src(m_md, 256 * 1024);
        ASSERT_NE(target.memh, nullptr);
        ASSERT_NE(src.memh, nullptr);
        const uct_rkey_t rkey = rkey_of(target);
        const auto remote     = reinterpret_cast<uint64_t>(target.bytes());
        fill(src.bytes(), src.length, 9600);
        uct_iov_t iov = src.iov(src.length);
        call_counter put;
        ucs_status_t status = retry([&] {
            return uct_ep_put_zcopy(m_ep, &iov, 1, remote, rkey, &put.comp);
        });
        ASSERT_TRUE(status == UCS_OK || status == UCS_INPROGRESS);
        for (uint64_t k = 0; k < 20; ++k) {
            ASSERT_EQ(retry([&] {
                          return uct_ep_am_short(m_ep, am_id, k, "there", 5);
                      }),
                      UCS_OK);
        }
        ASSERT_EQ(flush_ep(m_ep), UCS_OK);
        ASSERT_TRUE(progress_until([&] { return m_received.size() == 20; }));
        EXPECT_EQ(mismatch(target.bytes(), target.length, 9600), npos);
        ASSERT_EQ(retry([&] {
                      return uct_ep_am_short(reverse, am_id, 7, "back", 4);
                  }),
                  UCS_OK);
        ASSERT_TRUE(progress_until([&] { return back.size() == 1; }));
        EXPECT_EQ(back[0].substr(8), "back");
        EXPECT_EQ(peer_state(qpn_b), "connected");

        stop_agent(agent_b, SIGKILL);
        /* its client hears of it first (the agent's socket closes): until
         * then the dead agent's QPs live on, held by that client, and a
         * put into the client's memory may still succeed */
        EXPECT_TRUE(progress_until([&] {
            return m_other_errors.count(reverse) > 0;
        })) << "no error on the endpoint of the interface whose agent "
               "died";
        outstanding o;
        const auto t0 = std::chrono::steady_clock::now();
        post_some(m_ep, o, remote, rkey);
        expect_failure(m_ep, o, t0);
        EXPECT_TRUE(peer_becomes(qpn_b, "failed")) << peer_state(qpn_b);
        std::printf("[ INFO     ] the local agent gave the peer up after "
                    "%.2f s\n",
                    seconds_since(t0));
    }
    EXPECT_EQ(m_errors.count(bystander), 0);
    EXPECT_EQ(retry([&] {
                  return uct_ep_am_short(bystander, am_id, 8, "still", 5);
              }),
              UCS_OK);
    EXPECT_TRUE(progress_until([&] { return back.size() == 2; }))
            << "an endpoint to the local agent stopped working";
    expect_loopback_works();

    for (const auto &[e, status] : m_other_errors.calls) {
        std::printf("[ INFO     ] the dead agent's client: endpoint error "
                    "%s\n",
                    ucs_status_string(status));
    }

    /* the interface on the dead agent closes without hanging */
    destroy_ep(reverse);
    const auto c0 = std::chrono::steady_clock::now();
    m_to          = nullptr;
    m_other.reset();
    std::printf("[ INFO     ] closing the interface of the dead agent: "
                "%.2f s\n",
                seconds_since(c0));
}

/* The process behind an endpoint goes away (its interface and MD close:
 * it detaches from its agent) while its agent lives on: what is sent to it
 * reaches nobody (the index is free, or someone else's), its agent tells
 * ours, and an endpoint that has sent to it fails with
 * UCS_ERR_ENDPOINT_TIMEOUT as soon as ours hears, with nothing
 * outstanding, since this interface's user handles endpoint errors
 * (iface::watches_departure; a user without a handler, such as
 * ucx_perftest's UCT server, sees the failure at its next operation, as
 * an RC endpoint's); the connection between the agents unharmed. */
TEST_P(uct_rvt_peer_death, a_peer_interface_closed)
{
    ASSERT_NO_FATAL_FAILURE(open_route(GetParam(), fast_failure));
    if (IsSkipped()) {
        return;
    }
    const uint32_t qpn_b = ud_qpn_of(m_to->iface);
    ASSERT_EQ(retry([&] { return uct_ep_am_short(m_ep, am_id, 1, "hi", 2); }),
              UCS_OK);
    ASSERT_TRUE(progress_until([&] { return m_received.size() == 1; }));
    EXPECT_EQ(peer_state(qpn_b), "connected");

    m_to = nullptr;
    m_other.reset(); /* interface and MD: the process is gone */
    const auto t0 = std::chrono::steady_clock::now();
    /* the departure is announced at once, and fails an endpoint that has
     * sent to the process, with nothing outstanding: its user handles
     * endpoint errors (iface::watches_departure) */
    EXPECT_TRUE(progress_until([&] { return m_errors.count(m_ep) > 0; }, 10s))
            << "no endpoint error within 10 s of the peer's departure";
    std::printf("[ INFO     ] endpoint error after %.2f s\n",
                seconds_since(t0));
    /* and its next operation fails */
    const ucs_status_t first = uct_ep_am_short(m_ep, am_id, 2, "lost", 4);
    EXPECT_EQ(first, UCS_ERR_ENDPOINT_TIMEOUT) << ucs_status_string(first);
    EXPECT_EQ(m_errors.count(m_ep), 1);
    for (const auto &[e, status] : m_errors.calls) {
        if (e == m_ep) {
            EXPECT_EQ(status, UCS_ERR_ENDPOINT_TIMEOUT)
                    << ucs_status_string(status);
        }
    }
    const ucs_status_t later = uct_ep_am_short(m_ep, am_id, 3, nullptr, 0);
    EXPECT_TRUE(later != UCS_OK && later != UCS_ERR_NO_RESOURCE)
            << "an AM on the failed endpoint: " << ucs_status_string(later);
    /* one process left, not the agent: the connection stays */
    EXPECT_EQ(peer_state(qpn_b), "connected");
    expect_loopback_works();
}

/* uct_ep_check (UCT_IFACE_FLAG_EP_CHECK, ep.cc "Keepalive") on an endpoint
 * whose process has gone, its agent alive, and that never sent to it (one
 * that had sent fails at the departure): the check's probe fails the
 * endpoint, with nothing else sent. */
TEST_P(uct_rvt_peer_death, ep_check_finds_a_departed_peer)
{
    ASSERT_NO_FATAL_FAILURE(open_route(GetParam(), fast_failure));
    if (IsSkipped()) {
        return;
    }
    uct_iface_attr_t attr{};
    ASSERT_EQ(uct_iface_query(m_oi.iface, &attr), UCS_OK);
    EXPECT_TRUE(attr.cap.flags & UCT_IFACE_FLAG_EP_CHECK);
    const uint32_t qpn_b = ud_qpn_of(m_to->iface);
    ASSERT_EQ(retry([&] { return uct_ep_am_short(m_ep, am_id, 1, "hi", 2); }),
              UCS_OK);
    ASSERT_TRUE(progress_until([&] { return m_received.size() == 1; }));
    /* to the same process, and sending nothing: the departure leaves it
     * quiet until it is checked */
    uct_ep_h probe = new_ep(m_to->iface);
    ASSERT_NE(probe, nullptr);

    m_to = nullptr;
    m_other.reset(); /* interface and MD: the process is gone */
    EXPECT_TRUE(progress_until([&] { return m_errors.count(m_ep) > 0; }, 10s))
            << "the endpoint that had sent did not fail";
    progress_until([] { return false; }, 500ms);
    EXPECT_EQ(m_errors.count(probe), 0) << "failed before it was checked";
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(uct_ep_check(probe, 0, nullptr), UCS_OK);
    EXPECT_TRUE(progress_until([&] { return m_errors.count(probe) > 0; }, 10s))
            << "no endpoint error within 10 s of a check";
    std::printf("[ INFO     ] endpoint error %.3f s after the check\n",
                seconds_since(t0));
    for (const auto &[e, status] : m_errors.calls) {
        EXPECT_EQ(status, UCS_ERR_ENDPOINT_TIMEOUT)
                << ucs_status_string(status);
    }
    /* checking a failed endpoint again reports nothing more */
    EXPECT_EQ(uct_ep_check(m_ep, 0, nullptr), UCS_OK);
    progress_until([] { return false; }, 200ms);
    EXPECT_EQ(m_errors.count(m_ep), 1);
    destroy_ep(probe);
    EXPECT_EQ(peer_state(qpn_b), "connected");
    expect_loopback_works();
}

/* A checked endpoint fails as soon as its destination's departure is
 * known, with no further call; an endpoint to the same process that was
 * never checked stays quiet until it sends. A check of a live process
 * costs it nothing and fails nothing. */
TEST_P(uct_rvt_peer_death, a_checked_endpoint_fails_when_its_peer_leaves)
{
    ASSERT_NO_FATAL_FAILURE(open_route(GetParam(), fast_failure));
    if (IsSkipped()) {
        return;
    }
    uct_ep_h unchecked = new_ep(m_to->iface);
    ASSERT_NE(unchecked, nullptr);
    ASSERT_EQ(retry([&] { return uct_ep_am_short(m_ep, am_id, 1, "hi", 2); }),
              UCS_OK);
    ASSERT_TRUE(progress_until([&] { return m_received.size() == 1; }));
    {
        log_capture log;
        EXPECT_EQ(uct_ep_check(m_ep, 1, nullptr), UCS_ERR_INVALID_PARAM);
        EXPECT_TRUE(log.any_containing("flags 0x1")) << "no error naming it";
    }
    ASSERT_EQ(uct_ep_check(m_ep, 0, nullptr), UCS_OK);
    ASSERT_EQ(flush_ep(m_ep), UCS_OK);
    EXPECT_EQ(m_errors.count(m_ep), 0) << "a live process's check failed";
    EXPECT_EQ(m_received.size(), 1u) << "the probe reached the process";

    m_to = nullptr;
    m_other.reset(); /* interface and MD: the process is gone */
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(progress_until([&] { return m_errors.count(m_ep) > 0; }, 10s))
            << "the checked endpoint did not fail within 10 s";
    std::printf("[ INFO     ] checked endpoint error %.3f s after the "
                "departure\n",
                seconds_since(t0));
    EXPECT_EQ(m_errors.count(unchecked), 0)
            << "an endpoint never checked failed with nothing sent";
    destroy_ep(unchecked);
}
