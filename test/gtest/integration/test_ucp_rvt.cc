/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCP over rvt, as a library user reaches it: contexts, workers and
 * endpoints of UCP's public API, with UCX_TLS=rvt alone (no self, no shared
 * memory), so that whatever UCP selects is rvt. The module is loaded by
 * uct_rvt_fixture, as for the UCT tests.
 */
#include "ucp_side.h"

#include <ucp/api/ucp.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

namespace rvt::test {
namespace {

class ucp_rvt : public uct_rvt_fixture {
protected:
    void SetUp() override
    {
        uct_rvt_fixture::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        m_env.set("UCX_TLS", "rvt");
        m_env.set("UCX_NET_DEVICES", m_dev + ":1");
        m_env.set("UCX_WARN_UNUSED_ENV_VARS", "n");
        start_agent();
    }
};

/* Open MPI 4.1 publishes to the other nodes the address a worker gives
 * for UCP_WORKER_ADDRESS_FLAG_NET_ONLY, and connects to that: it must
 * carry rvt. UCX 1.22 packs into it only the transports that say
 * UCT_IFACE_FLAG_INTER_NODE; without the flag the endpoint cannot be
 * created ("no active messages transport ... Unsupported operation"). */
TEST_F(ucp_rvt, a_network_only_address_reaches_rvt)
{
    ucp_side a, b;
    ASSERT_EQ(a.open(), UCS_OK);
    ASSERT_EQ(b.open(), UCS_OK);

    ucp_worker_attr_t attr{};
    attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS |
                      UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS;
    attr.address_flags = UCP_WORKER_ADDRESS_FLAG_NET_ONLY;
    ASSERT_EQ(ucp_worker_query(b.worker, &attr), UCS_OK);

    ucp_ep_params_t ep_params{};
    ep_params.field_mask       = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address          = attr.address;
    ucp_ep_h ep                = nullptr;
    const ucs_status_t created = ucp_ep_create(a.worker, &ep_params, &ep);
    ucp_worker_release_address(b.worker, attr.address);
    ASSERT_EQ(created, UCS_OK) << ucs_status_string(created);

    /* and a message crosses it, every byte checked */
    std::array<uint8_t, 4096> out{}, in{};
    for (size_t i = 0; i < out.size(); ++i) {
        out[i] = static_cast<uint8_t>(i * 7 + 1);
    }
    constexpr ucp_tag_t tag = 0x5256540000000001ull;
    ucp_request_param_t none{};
    ucs_status_ptr_t recv = ucp_tag_recv_nbx(b.worker, in.data(), in.size(),
                                             tag, ~ucp_tag_t{0}, &none);
    ucs_status_ptr_t send = ucp_tag_send_nbx(ep, out.data(), out.size(), tag,
                                             &none);
    EXPECT_EQ(wait_request(a.worker, send, a, b), UCS_OK);
    EXPECT_EQ(wait_request(b.worker, recv, a, b), UCS_OK);
    EXPECT_EQ(std::memcmp(in.data(), out.data(), out.size()), 0);

    /* a flushing close (a forced one needs an endpoint with peer error
     * handling: UCS_ERR_INVALID_PARAM) */
    ucp_request_param_t close{};
    EXPECT_EQ(wait_request(a.worker, ucp_ep_close_nbx(ep, &close), a, b),
              UCS_OK);
}


/* Active messages that arrived at a worker (id 1), by their first byte. */
struct am_counter {
    std::vector<uint8_t> seen;

    ucs_status_t listen(ucp_side &side)
    {
        ucp_am_handler_param_t h{};
        h.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                       UCP_AM_HANDLER_PARAM_FIELD_CB |
                       UCP_AM_HANDLER_PARAM_FIELD_ARG;
        h.id  = 1;
        h.arg = this;
        h.cb  = [](void *arg, const void *, size_t, void *data, size_t length,
                  const ucp_am_recv_param_t *) -> ucs_status_t {
            auto *self = static_cast<am_counter *>(arg);
            self->seen.push_back(
                     length > 0 ? *static_cast<const uint8_t *>(data) : 0);
            return UCS_OK;
        };
        return ucp_worker_set_am_recv_handler(side.worker, &h);
    }
};

/* A receiver that goes (docs/reliability.md, "Agent and peer death"): a
 * sender with peer error handling, connected to two receivers; one
 * receiver's worker is destroyed without closing anything (as a process
 * that dies leaves it), and the sender goes on sending to both. The
 * endpoint to the departed receiver must see its error callback with a
 * status that says the peer is gone, every request to it must end (with
 * an error), and the pair that is left must keep working, every message
 * arriving. Before, over rvt the sender hung. */
class ucp_rvt_departure :
    public ucp_rvt,
    public ::testing::WithParamInterface<bool> {
protected:
    void rendezvous_to_a_departed_receiver(bool answered);
};

TEST_P(ucp_rvt_departure,
       a_departed_receiver_fails_its_endpoint_and_the_other_pair_goes_on)
{
    constexpr uint64_t features = UCP_FEATURE_AM | UCP_FEATURE_TAG;
    const bool one_context      = GetParam();
    ucp_side a, b, c;
    ASSERT_EQ(a.open(features), UCS_OK);
    if (one_context) { /* three workers of a's context */
        ASSERT_EQ(b.open_worker_of(a), UCS_OK);
        ASSERT_EQ(c.open_worker_of(a), UCS_OK);
    } else {
        ASSERT_EQ(b.open(features), UCS_OK);
        ASSERT_EQ(c.open(features), UCS_OK);
    }
    am_counter at_b, at_c;
    ASSERT_EQ(at_b.listen(b), UCS_OK);
    ASSERT_EQ(at_c.listen(c), UCS_OK);
    watched_ep to_b, to_c;
    ASSERT_EQ(to_b.connect(a, b), UCS_OK);
    ASSERT_EQ(to_c.connect(a, c), UCS_OK);

    std::vector<ucs_status_ptr_t> out_b, out_c;
    uint8_t payload[64];
    const auto send = [&](watched_ep &to, uint8_t mark,
                          std::vector<ucs_status_ptr_t> &out) {
        std::memset(payload, mark, sizeof(payload));
        ucp_request_param_t p{};
        p.op_attr_mask     = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags            = UCP_AM_SEND_FLAG_EAGER;
        ucs_status_ptr_t r = ucp_am_send_nbx(to.ep, 1, nullptr, 0, payload,
                                             sizeof(payload), &p);
        if (UCS_PTR_IS_PTR(r)) {
            out.push_back(r);
        } else {
            EXPECT_TRUE(to.errors > 0 || UCS_PTR_STATUS(r) == UCS_OK)
                    << ucs_status_string(UCS_PTR_STATUS(r));
        }
    };
    /* what is left of a request list: the ended ones freed, their
     * statuses counted */
    const auto reap = [&](ucp_side &owner, std::vector<ucs_status_ptr_t> &out,
                          int &failed) {
        std::erase_if(out, [&](ucs_status_ptr_t r) {
            const ucs_status_t st = ucp_request_check_status(r);
            if (st == UCS_INPROGRESS) {
                return false;
            }
            failed += st != UCS_OK;
            ucp_request_free(r);
            (void)owner;
            return true;
        });
    };

    /* the pairs work */
    send(to_b, 1, out_b);
    send(to_c, 1, out_c);
    int failed_b = 0, failed_c = 0;
    ASSERT_TRUE(eventually(
            [&] {
                ucp_worker_progress(a.worker);
                ucp_worker_progress(b.worker);
                ucp_worker_progress(c.worker);
                reap(a, out_b, failed_b);
                reap(a, out_c, failed_c);
                return at_b.seen.size() == 1 && at_c.seen.size() == 1 &&
                       out_b.empty() && out_c.empty();
            },
            20s))
            << "before the departure: " << at_b.seen.size() << " at b, "
            << at_c.seen.size() << " at c";

    /* c goes away without a word */
    ucp_worker_flush(c.worker);
    c.destroy();
    const auto gone = std::chrono::steady_clock::now();

    /* the sender goes on sending to both */
    uint8_t mark     = 2;
    const bool ended = eventually(
            [&] {
                if (mark < 200) {
                    send(to_b, mark, out_b);
                    if (to_c.errors == 0) {
                        send(to_c, mark, out_c);
                    }
                    ++mark;
                }
                for (int i = 0; i < 16; ++i) {
                    ucp_worker_progress(a.worker);
                    ucp_worker_progress(b.worker);
                }
                reap(a, out_b, failed_b);
                reap(a, out_c, failed_c);
                return to_c.errors > 0 && out_c.empty() && out_b.empty() &&
                       at_b.seen.size() == mark - 1u;
            },
            30s);
    EXPECT_TRUE(ended) << "after the departure: error callbacks " << to_c.errors
                       << ", requests to c unfinished " << out_c.size()
                       << ", to b unfinished " << out_b.size() << ", "
                       << at_b.seen.size() << " of " << mark - 1
                       << " arrived at b";
    ASSERT_GT(to_c.errors, 0) << "no error callback for the departed peer";
    EXPECT_EQ(to_c.errors, 1);
    EXPECT_TRUE(to_c.error == UCS_ERR_ENDPOINT_TIMEOUT ||
                to_c.error == UCS_ERR_CONNECTION_RESET ||
                to_c.error == UCS_ERR_UNREACHABLE)
            << ucs_status_string(to_c.error);
    EXPECT_EQ(to_b.errors, 0) << ucs_status_string(to_b.error);
    EXPECT_EQ(failed_b, 0);
    for (size_t i = 0; i < at_b.seen.size(); ++i) {
        EXPECT_EQ(at_b.seen[i], i + 1) << "message " << i << " at b";
    }
    std::printf("[ INFO     ] error callback %.0f ms after the departure, "
                "%d requests to it failed\n",
                std::chrono::duration<double, std::milli>(to_c.failed_at - gone)
                        .count(),
                failed_c);

    /* closing: the failed endpoint by force, the good one flushed */
    ucp_request_param_t force{};
    force.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    force.flags        = UCP_EP_CLOSE_FLAG_FORCE;
    EXPECT_NE(wait_request(a.worker, ucp_ep_close_nbx(to_c.ep, &force), a, b),
              UCS_INPROGRESS);
    ucp_request_param_t flush{};
    EXPECT_EQ(wait_request(a.worker, ucp_ep_close_nbx(to_b.ep, &flush), a, b),
              UCS_OK);
}

/* The same departure with a rendezvous outstanding: the sender's 1 MiB
 * tagged send to c is under way when c goes; the send must end with an
 * error and the endpoint's error callback fire, while tagged messages to
 * b go on. `answered`: c has answered UCP's wireup and holds the send's
 * announcement (found by a probe), so only UCP's keepalive (an EP_CHECK
 * message to c, which the agent fails as sent to a departed client) can
 * find c gone, at its interval (20 s by default, here 5 s). Otherwise c
 * goes without reading the wireup request that the send made UCP send:
 * UCP checks nothing of an endpoint being wired up, so rvt fails it when
 * the agent reports c's departure (iface::watches_departure). */
void ucp_rvt_departure::rendezvous_to_a_departed_receiver(bool answered)
{
    constexpr uint64_t features = UCP_FEATURE_AM | UCP_FEATURE_TAG;
    m_env.set("UCX_KEEPALIVE_INTERVAL", "5s");
    m_env.set("UCX_RNDV_THRESH", "8192");
    ucp_side a, b, c;
    ASSERT_EQ(a.open(features), UCS_OK);
    if (GetParam()) {
        ASSERT_EQ(b.open_worker_of(a), UCS_OK);
        ASSERT_EQ(c.open_worker_of(a), UCS_OK);
    } else {
        ASSERT_EQ(b.open(features), UCS_OK);
        ASSERT_EQ(c.open(features), UCS_OK);
    }
    watched_ep to_b, to_c;
    ASSERT_EQ(to_b.connect(a, b), UCS_OK);
    ASSERT_EQ(to_c.connect(a, c), UCS_OK);

    std::vector<uint8_t> big(1 << 20, 0x3c);
    constexpr ucp_tag_t tag = 0x5256540000000030ull;
    ucp_request_param_t none{};
    ucs_status_ptr_t rndv = ucp_tag_send_nbx(to_c.ep, big.data(), big.size(),
                                             tag, &none);
    ASSERT_TRUE(UCS_PTR_IS_PTR(rndv))
            << "a 1 MiB send ended at once: "
            << ucs_status_string(UCS_PTR_STATUS(rndv));
    if (answered) { /* the announcement reaches c */
        ASSERT_TRUE(eventually(
                [&] {
                    ucp_worker_progress(a.worker);
                    ucp_worker_progress(c.worker);
                    ucp_tag_recv_info_t info;
                    return ucp_tag_probe_nb(c.worker, tag, ~ucp_tag_t{0}, 0,
                                            &info) != nullptr;
                },
                20s));
    } else { /* c reads nothing */
        for (int i = 0; i < 16; ++i) {
            ucp_worker_progress(a.worker);
        }
    }
    ASSERT_EQ(ucp_request_check_status(rndv), UCS_INPROGRESS);
    if (answered) {
        ucp_worker_flush(c.worker);
    }
    c.destroy();
    const auto gone = std::chrono::steady_clock::now();

    verified_stream to_b_stream{tag + 1, 100};
    ucs_status_t rndv_status = UCS_INPROGRESS;
    const bool ended         = eventually(
            [&] {
                to_b_stream.step(a, b, to_b.ep);
                for (int i = 0; i < 16; ++i) {
                    ucp_worker_progress(a.worker);
                    ucp_worker_progress(b.worker);
                }
                if (rndv != nullptr) {
                    rndv_status = ucp_request_check_status(rndv);
                    if (rndv_status != UCS_INPROGRESS) {
                        ucp_request_free(rndv);
                        rndv = nullptr;
                    }
                }
                return rndv == nullptr && to_c.errors > 0 && to_b_stream.done();
            },
            20s);
    EXPECT_TRUE(ended) << "error callbacks " << to_c.errors
                       << ", the rendezvous "
                       << (rndv == nullptr ? ucs_status_string(rndv_status) :
                                             "still in progress")
                       << ", " << to_b_stream.arrived << " of "
                       << to_b_stream.sent << " to b";
    EXPECT_NE(rndv_status, UCS_OK);
    EXPECT_EQ(to_b_stream.arrived, to_b_stream.sent);
    EXPECT_EQ(to_b.errors, 0);
    if (to_c.errors > 0) {
        std::printf("[ INFO     ] error callback %.0f ms after the departure "
                    "(%s), the rendezvous ended %s\n",
                    std::chrono::duration<double, std::milli>(to_c.failed_at -
                                                              gone)
                            .count(),
                    ucs_status_string(to_c.error),
                    ucs_status_string(rndv_status));
    }
    if (rndv != nullptr) {
        ucp_request_cancel(a.worker, rndv);
        ucp_request_free(rndv);
    }
    ucp_request_param_t force{};
    force.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    force.flags        = UCP_EP_CLOSE_FLAG_FORCE;
    (void)wait_request(a.worker, ucp_ep_close_nbx(to_c.ep, &force), a, b);
    ucp_request_param_t flush{};
    EXPECT_EQ(wait_request(a.worker, ucp_ep_close_nbx(to_b.ep, &flush), a, b),
              UCS_OK);
}

TEST_P(ucp_rvt_departure,
       an_outstanding_rendezvous_to_a_departed_receiver_fails)
{
    rendezvous_to_a_departed_receiver(true);
}

TEST_P(ucp_rvt_departure,
       a_receiver_gone_before_answering_the_wireup_fails_its_endpoint)
{
    rendezvous_to_a_departed_receiver(false);
}

INSTANTIATE_TEST_SUITE_P(contexts, ucp_rvt_departure, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &p) {
                             return p.param ? "one_context" : "a_context_each";
                         });

} // namespace
} // namespace rvt::test
