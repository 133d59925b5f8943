/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for every parser the agent runs on untrusted bytes:
 * attach requests, MR notices and attach replies from a client's socket,
 * and handshake datagrams from other agents. Whatever arrives, parsing
 * must neither crash nor read out of bounds (ASan/UBSan watch), and an
 * accepted message must be whole and valid.
 */
#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/conn_wire.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    std::span<const std::byte> bytes(reinterpret_cast<const std::byte *>(data),
                                     size);
    (void)rvt::wire::parse_header(bytes);
    auto req = rvt::wire::parse_attach_request(bytes);
    if (req.ok()) {
        /* accepted: the key must be valid and the message whole */
        if (!rvt::wire::job_key_error(req.value().job_key).empty() ||
            size != sizeof(rvt::wire::attach_request)) {
            std::abort();
        }
    }
    auto mr = rvt::wire::parse_mr_notice(bytes);
    if (mr.ok() && size != sizeof(rvt::wire::mr_notice)) {
        std::abort();
    }
    auto status = rvt::wire::parse_status_request(bytes);
    if (status.ok() && size != sizeof(rvt::wire::status_request)) {
        std::abort();
    }
    (void)rvt::wire::parse_status_reply_header(bytes);
    auto peer = rvt::wire::parse_peer_request(bytes);
    if (peer.ok() &&
        (size != sizeof(rvt::wire::peer_request) ||
         !rvt::wire::agent_address_error(peer.value().peer).empty())) {
        std::abort();
    }
    auto peer_rep = rvt::wire::parse_peer_reply(bytes);
    if (peer_rep.ok() && size != sizeof(rvt::wire::peer_reply)) {
        std::abort();
    }
    auto dgram = rvt::wire::conn::parse(bytes);
    if (dgram.ok() && size != sizeof(rvt::wire::conn::message)) {
        std::abort();
    }
    auto rep = rvt::wire::parse_attach_reply(bytes);
    if (rep.ok() && std::strlen(rep.value().reason) >= rvt::wire::reason_size) {
        std::abort();
    }
    return 0;
}
