/*
 * UCP over rvt, as a library user reaches it: contexts, workers and
 * endpoints of UCP's public API, with UCX_TLS=rvt alone (no self, no shared
 * memory), so that whatever UCP selects is rvt. The module is loaded by
 * uct_rvt_fixture, as for the UCT tests.
 */
#include "uct_rvt_fixture.h"

#include <ucp/api/ucp.h>

#include <array>
#include <cstring>

namespace rvt::test {
namespace {

/* One UCP context with one worker, features TAG. */
struct ucp_side {
    ucp_context_h context = nullptr;
    ucp_worker_h worker   = nullptr;

    ucs_status_t open()
    {
        ucp_config_t *config;
        ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
        if (status != UCS_OK) {
            return status;
        }
        ucp_params_t params{};
        params.field_mask = UCP_PARAM_FIELD_FEATURES;
        params.features   = UCP_FEATURE_TAG;
        status            = ucp_init(&params, config, &context);
        ucp_config_release(config);
        if (status != UCS_OK) {
            return status;
        }
        ucp_worker_params_t wp{};
        wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        wp.thread_mode = UCS_THREAD_MODE_SINGLE;
        return ucp_worker_create(context, &wp, &worker);
    }
    ~ucp_side()
    {
        if (worker != nullptr) {
            ucp_worker_destroy(worker);
        }
        if (context != nullptr) {
            ucp_cleanup(context);
        }
    }
};

/* Waits for a request of worker `owner` (a status or a pointer) while
 * progressing both sides' workers; its final status, UCS_INPROGRESS if it
 * did not end in 20 s (then it is cancelled). */
ucs_status_t
wait_request(ucp_worker_h owner, ucs_status_ptr_t req, ucp_side &a, ucp_side &b)
{
    if (!UCS_PTR_IS_PTR(req)) {
        return UCS_PTR_STATUS(req);
    }
    ucs_status_t status = UCS_INPROGRESS;
    eventually(
            [&] {
                ucp_worker_progress(a.worker);
                ucp_worker_progress(b.worker);
                status = ucp_request_check_status(req);
                return status != UCS_INPROGRESS;
            },
            20s);
    if (status == UCS_INPROGRESS) {
        ucp_request_cancel(owner, req);
    }
    ucp_request_free(req);
    return status;
}

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

} // namespace
} // namespace rvt::test
