/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A UCP receiver in a process of its own, for the departure tests
 * (test_ucp_rvt_departure.cc): it opens a context and a worker (TAG, AM,
 * RMA, AMO64) with the environment it is given, maps a buffer for the
 * sender's puts, gets and atomics, and writes its worker address and the
 * buffer's rkey to stdout:
 *   peer_hello, then the address bytes, then the rkey bytes.
 * (stdout is the test's pipe alone: UCX logs to stdout by default, and
 * what it prints goes to stderr instead.)
 * Then it progresses its worker, keeping every rendezvous active message
 * it is offered (so the sender's stays outstanding) and posting no tag
 * receive (so a tagged rendezvous does), until a line on stdin:
 *   q  destroy the worker and the context without closing anything, as a
 *      process that dies leaves them, answer "d" on stdout, and wait for
 *      stdin's end (the process stays: only its UCP is gone).
 * SIGKILL is the other way to go.
 *
 * With RVT_DEPARTURE_PEER_SIBLING set (one process, several workers), a
 * second worker stays when the first goes, as in UCX's
 * test_ucp_peer_failure:
 *   worker   a second worker of the same context (q destroys the first
 *            worker only; the context and its mapping stay);
 *   context  a second context with its own worker and buffer (q destroys
 *            the first worker and context).
 * The second worker's address and its buffer's rkey follow the first's
 * (a second peer_hello, address, rkey), and after q it is progressed
 * until stdin's end.
 */
#include <ucp/api/ucp.h>

#include <poll.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

struct peer_hello {
    uint32_t address_length;
    uint32_t rkey_length;
    uint64_t buffer;
    uint64_t buffer_length;
};

namespace {

constexpr size_t buffer_length = 1 << 20;
int to_test                    = -1; /* the pipe stdout was */

bool write_all(const void *data, size_t length)
{
    const auto *p = static_cast<const char *>(data);
    while (length > 0) {
        const ssize_t n = write(to_test, p, length);
        if (n <= 0) {
            return false;
        }
        p += n;
        length -= static_cast<size_t>(n);
    }
    return true;
}

ucs_status_t keep_am(void *, const void *, size_t, void *, size_t,
                     const ucp_am_recv_param_t *param)
{
    /* a rendezvous kept and never fetched: the sender waits for it */
    return (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ? UCS_INPROGRESS :
                                                             UCS_OK;
}

int fail(const char *what, ucs_status_t status)
{
    std::fprintf(stderr, "ucp_departure_peer: %s: %s\n", what,
                 ucs_status_string(status));
    return 1;
}

/* A worker with the AM handler, a buffer mapped, its hello written. */
struct receiver {
    ucp_context_h context       = nullptr;
    ucp_worker_h worker         = nullptr;
    ucp_mem_h memh              = nullptr;
    std::vector<uint8_t> buffer = std::vector<uint8_t>(buffer_length, 0x5a);

    ucs_status_t init_context()
    {
        ucp_config_t *config;
        ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
        if (status != UCS_OK) {
            return status;
        }
        ucp_params_t params{};
        params.field_mask = UCP_PARAM_FIELD_FEATURES;
        params.features   = UCP_FEATURE_TAG | UCP_FEATURE_AM | UCP_FEATURE_RMA |
                          UCP_FEATURE_AMO64;
        status = ucp_init(&params, config, &context);
        ucp_config_release(config);
        return status;
    }
    /* a worker of `ctx`, memory mapped there unless `mapped` is given */
    int open(ucp_context_h ctx, ucp_mem_h mapped, const uint8_t *mapped_at)
    {
        ucp_worker_params_t wp{};
        wp.field_mask       = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        wp.thread_mode      = UCS_THREAD_MODE_SINGLE;
        ucs_status_t status = ucp_worker_create(ctx, &wp, &worker);
        if (status != UCS_OK) {
            return fail("ucp_worker_create", status);
        }
        ucp_am_handler_param_t h{};
        h.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                       UCP_AM_HANDLER_PARAM_FIELD_CB;
        h.id   = 1;
        h.cb   = keep_am;
        status = ucp_worker_set_am_recv_handler(worker, &h);
        if (status != UCS_OK) {
            return fail("ucp_worker_set_am_recv_handler", status);
        }
        const uint8_t *at = mapped_at;
        if (mapped == nullptr) {
            ucp_mem_map_params_t mp{};
            mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                            UCP_MEM_MAP_PARAM_FIELD_LENGTH;
            mp.address = buffer.data();
            mp.length  = buffer.size();
            status     = ucp_mem_map(ctx, &mp, &memh);
            if (status != UCS_OK) {
                return fail("ucp_mem_map", status);
            }
            mapped = memh;
            at     = buffer.data();
        }
        void *rkey;
        size_t rkey_length;
        status = ucp_rkey_pack(ctx, mapped, &rkey, &rkey_length);
        if (status != UCS_OK) {
            return fail("ucp_rkey_pack", status);
        }
        ucp_address_t *address;
        size_t address_length;
        status = ucp_worker_get_address(worker, &address, &address_length);
        if (status != UCS_OK) {
            return fail("ucp_worker_get_address", status);
        }
        const peer_hello hello{static_cast<uint32_t>(address_length),
                               static_cast<uint32_t>(rkey_length),
                               reinterpret_cast<uintptr_t>(at), buffer_length};
        const bool written = write_all(&hello, sizeof(hello)) &&
                             write_all(address, address_length) &&
                             write_all(rkey, rkey_length);
        ucp_worker_release_address(worker, address);
        ucp_rkey_buffer_release(rkey);
        return written ? 0 : 1;
    }
    /* the worker, then what it mapped, then its context (its own: only
     * `first` closes) */
    void close()
    {
        ucp_worker_destroy(worker);
        worker = nullptr;
        if (memh != nullptr) {
            ucp_mem_unmap(context, memh);
        }
        if (context != nullptr) {
            ucp_cleanup(context);
        }
    }
};

} // namespace

int main()
{
    to_test = dup(1);
    if (to_test < 0 || dup2(2, 1) < 0) {
        return 1;
    }
    const char *sibling_env   = std::getenv("RVT_DEPARTURE_PEER_SIBLING");
    const std::string sibling = sibling_env != nullptr ? sibling_env : "";
    if (!sibling.empty() && sibling != "worker" && sibling != "context") {
        std::fprintf(stderr,
                     "ucp_departure_peer: RVT_DEPARTURE_PEER_SIBLING="
                     "%s: expected worker or context\n",
                     sibling.c_str());
        return 1;
    }
    receiver first, second;
    ucs_status_t status = first.init_context();
    if (status != UCS_OK) {
        return fail("ucp_init", status);
    }
    if (first.open(first.context, nullptr, nullptr) != 0) {
        return 1;
    }
    if (sibling == "worker") {
        /* the context's mapping serves both; the context stays */
        if (second.open(first.context, first.memh, first.buffer.data()) != 0) {
            return 1;
        }
    } else if (sibling == "context") {
        status = second.init_context();
        if (status != UCS_OK) {
            return fail("ucp_init", status);
        }
        if (second.open(second.context, nullptr, nullptr) != 0) {
            return 1;
        }
    }

    for (;;) {
        for (int i = 0; i < 64; ++i) {
            ucp_worker_progress(first.worker);
            if (second.worker != nullptr) {
                ucp_worker_progress(second.worker);
            }
        }
        pollfd p{0, POLLIN, 0};
        if (poll(&p, 1, 0) <= 0) {
            continue;
        }
        char command = 0;
        if (read(0, &command, 1) != 1) {
            return 0; /* the test is gone */
        }
        if (command == 'q') {
            break;
        }
    }
    if (sibling == "worker") { /* the worker alone */
        ucp_worker_destroy(first.worker);
        first.worker = nullptr;
    } else {
        first.close();
    }
    if (!write_all("d", 1)) {
        return 1;
    }
    /* the second worker, if any, goes on until stdin's end */
    for (;;) {
        if (second.worker != nullptr) {
            for (int i = 0; i < 64; ++i) {
                ucp_worker_progress(second.worker);
            }
        }
        pollfd p{0, POLLIN, 0};
        if (poll(&p, 1, second.worker != nullptr ? 0 : -1) <= 0) {
            continue;
        }
        char rest;
        if (read(0, &rest, 1) <= 0) {
            return 0;
        }
    }
}
