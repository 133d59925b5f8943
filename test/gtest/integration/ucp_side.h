/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCP as the integration tests use it: a context with a worker, waiting
 * for a request while progressing two workers, and an endpoint with peer
 * error handling whose error callback is counted.
 */
#ifndef RVT_UCP_SIDE_H
#define RVT_UCP_SIDE_H

#include "uct_rvt_fixture.h"

#include <ucp/api/ucp.h>

#include <chrono>

namespace rvt::test {

/* One UCP context with one worker, features TAG. */
struct ucp_side {
    ucp_context_h context = nullptr;
    ucp_worker_h worker   = nullptr;

    ucs_status_t open(uint64_t features = UCP_FEATURE_TAG)
    {
        ucp_config_t *config;
        ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
        if (status != UCS_OK) {
            return status;
        }
        ucp_params_t params{};
        params.field_mask = UCP_PARAM_FIELD_FEATURES;
        params.features   = features;
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
    /* A worker of `shared`'s context (which stays `shared`'s). */
    ucs_status_t open_worker_of(const ucp_side &shared)
    {
        ucp_worker_params_t wp{};
        wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        wp.thread_mode = UCS_THREAD_MODE_SINGLE;
        return ucp_worker_create(shared.context, &wp, &worker);
    }
    /* Destroys the worker and the context, endpoints and all, as a
     * process that dies leaves them. */
    void destroy()
    {
        if (worker != nullptr) {
            ucp_worker_destroy(worker);
            worker = nullptr;
        }
        if (context != nullptr) {
            ucp_cleanup(context);
            context = nullptr;
        }
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
inline ucs_status_t
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

/* An endpoint with peer error handling, its error callback counted. */
struct watched_ep {
    ucp_ep_h ep = nullptr;
    int errors  = 0;
    ucs_status_t error{UCS_OK};
    std::chrono::steady_clock::time_point failed_at;

    ucs_status_t connect(ucp_side &from, ucp_side &to)
    {
        ucp_address_t *address;
        size_t length;
        ucs_status_t status = ucp_worker_get_address(to.worker, &address,
                                                     &length);
        if (status != UCS_OK) {
            return status;
        }
        status = connect(from, address);
        ucp_worker_release_address(to.worker, address);
        return status;
    }
    ucs_status_t connect(ucp_side &from, const ucp_address_t *address)
    {
        ucp_ep_params_t p{};
        p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                       UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                       UCP_EP_PARAM_FIELD_ERR_HANDLER;
        p.address        = address;
        p.err_mode       = UCP_ERR_HANDLING_MODE_PEER;
        p.err_handler.cb = [](void *arg, ucp_ep_h, ucs_status_t st) {
            auto *self = static_cast<watched_ep *>(arg);
            if (self->errors++ == 0) {
                self->error     = st;
                self->failed_at = std::chrono::steady_clock::now();
            }
        };
        p.err_handler.arg = this;
        return ucp_ep_create(from.worker, &p, &ep);
    }
};

/* The surviving pair's traffic in the departure tests: numbered tagged
 * messages from a to b, one at a time, each checked by b. */
struct verified_stream {
    ucp_tag_t tag;
    uint64_t total;
    uint64_t sent = 0, arrived = 0;

    /* the next message, if the last arrived and not all were sent */
    void step(ucp_side &a, ucp_side &b, ucp_ep_h to_b)
    {
        if (sent != arrived || sent == total) {
            return;
        }
        const ucp_request_param_t none{};
        uint64_t out = ++sent, in = 0;
        ucs_status_ptr_t r = ucp_tag_recv_nbx(b.worker, &in, sizeof(in), tag,
                                              ~ucp_tag_t{0}, &none);
        ucs_status_ptr_t s = ucp_tag_send_nbx(to_b, &out, sizeof(out), tag,
                                              &none);
        if (wait_request(a.worker, s, a, b) == UCS_OK &&
            wait_request(b.worker, r, a, b) == UCS_OK && in == out) {
            ++arrived;
        }
    }
    bool done() const
    {
        return sent == total && arrived == total;
    }
};

} // namespace rvt::test

#endif
