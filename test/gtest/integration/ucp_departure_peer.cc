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
 */
#include <ucp/api/ucp.h>

#include <poll.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

struct peer_hello {
    uint32_t address_length;
    uint32_t rkey_length;
    uint64_t buffer;
    uint64_t buffer_length;
};

namespace {

constexpr size_t buffer_length = 1 << 20;
int to_test = -1; /* the pipe stdout was */

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

} // namespace

int main()
{
    to_test = dup(1);
    if (to_test < 0 || dup2(2, 1) < 0) {
        return 1;
    }
    ucp_config_t *config;
    ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
    if (status != UCS_OK) {
        return fail("ucp_config_read", status);
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_TAG | UCP_FEATURE_AM | UCP_FEATURE_RMA |
                      UCP_FEATURE_AMO64;
    ucp_context_h context;
    status = ucp_init(&params, config, &context);
    ucp_config_release(config);
    if (status != UCS_OK) {
        return fail("ucp_init", status);
    }
    ucp_worker_params_t wp{};
    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    ucp_worker_h worker;
    status = ucp_worker_create(context, &wp, &worker);
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

    std::vector<uint8_t> buffer(buffer_length, 0x5a);
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                    UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = buffer.data();
    mp.length  = buffer.size();
    ucp_mem_h memh;
    status = ucp_mem_map(context, &mp, &memh);
    if (status != UCS_OK) {
        return fail("ucp_mem_map", status);
    }
    void *rkey;
    size_t rkey_length;
    status = ucp_rkey_pack(context, memh, &rkey, &rkey_length);
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
                           reinterpret_cast<uintptr_t>(buffer.data()),
                           buffer.size()};
    if (!write_all(&hello, sizeof(hello)) ||
        !write_all(address, address_length) || !write_all(rkey, rkey_length)) {
        return 1;
    }
    ucp_worker_release_address(worker, address);
    ucp_rkey_buffer_release(rkey);

    for (;;) {
        for (int i = 0; i < 64; ++i) {
            ucp_worker_progress(worker);
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
    ucp_worker_destroy(worker);
    ucp_mem_unmap(context, memh);
    ucp_cleanup(context);
    if (!write_all("d", 1)) {
        return 1;
    }
    char rest;
    while (read(0, &rest, 1) > 0) {
    }
    return 0;
}
