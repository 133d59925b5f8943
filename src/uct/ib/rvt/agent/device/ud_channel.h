/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's handshake channel: one UD QP on which agents exchange the
 * connection datagrams of common/conn_wire.h. Datagrams may be lost; the
 * connection state machine retries, so a full send ring here drops the
 * datagram instead of waiting.
 *
 * Its Q_Key is the agent run's (common/attach_wire.h, "Q_Keys"): the
 * device drops a datagram that names another before it takes one of the
 * ud_receive_depth receive buffers (nic.h), and a send names the
 * receiver's.
 */
#ifndef RVT_AGENT_UD_CHANNEL_H
#define RVT_AGENT_UD_CHANNEL_H

#include "uct/ib/rvt/agent/device/device.h"
#include "uct/ib/rvt/agent/device/nic.h"
#include "uct/ib/rvt/agent/device/verbs_ptr.h"
#include "uct/ib/rvt/common/conn_wire.h"
#include "uct/ib/rvt/common/result.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

namespace rvt::agent {

/* The 40 bytes a UD receive puts before the datagram. */
inline constexpr size_t grh_size = 40;

/* The sender's GID from those bytes, as rdma-core's ibv_init_ah_from_wc
 * reads them: an IB/RoCE v1/RoCE v2-over-IPv6 GRH has it at byte 8; RoCE
 * v2 over IPv4 leaves 20 bytes unset and the IPv4 header after them
 * (told apart by the IP version nibble and, when the first nibble could
 * be either, the IPv4 header checksum), whose source address becomes an
 * IPv4-mapped GID (::ffff:a.b.c.d), as the node's own RoCE v2 GID is. */
std::array<uint8_t, 16>
grh_source_gid(std::span<const std::byte, grh_size> grh);

class ud_channel {
public:
    /* Its own CQ, notified through `channel`; its QP's Q_Key `qkey`
     * (wire::qkey_valid, else a failure naming it). */
    static result<std::unique_ptr<ud_channel>>
    create(const device &dev, ibv_comp_channel *channel, uint32_t qkey);
    ~ud_channel();

    uint32_t qpn() const
    {
        return m_qp->qp_num;
    }
    uint32_t qkey() const
    {
        return m_qkey;
    }
    ibv_cq *cq() const
    {
        return m_cq.get();
    }

    /* Queues one datagram to (gid, qpn), naming the receiving QP's Q_Key
     * `qkey`; a failure (no free send slot, no AH) is returned for the
     * log, and the handshake's retry covers it. */
    result<done> send(const wire::conn::message &msg, const uint8_t (&gid)[16],
                      uint32_t qpn, uint32_t qkey);

    /* Handles completions until `max` datagrams were received or the CQ
     * is empty (the rest wait in it for the next call, their buffers
     * still taken: once all recv_slots are, the device drops what comes);
     * `deliver` gets the bytes of each received datagram (the GRH
     * stripped), still to be parsed, and where it came from: the GID
     * (grh_source_gid) and the sending QP (the completion's src_qp).
     * Returns how many datagrams were received. */
    size_t poll(const nic::datagram_fn &deliver, size_t max);
    /* The same, telling only the GID: for tools that only reap
     * (test/testbed/rvt_ud_flood). */
    size_t
    poll(const std::function<void(std::span<const std::byte>,
                                  const std::array<uint8_t, 16> &)> &deliver,
         size_t max);

    /* Counters for the status tool. */
    /* its MR's handle in the agent's PD */
    uint32_t mr_handle() const
    {
        return m_mr->handle;
    }
    uint64_t sent() const
    {
        return m_sent;
    }
    uint64_t received() const
    {
        return m_received;
    }
    uint64_t dropped() const
    {
        return m_dropped;
    }

private:
    static constexpr uint32_t recv_slots = ud_receive_depth;
    static constexpr uint32_t send_slots = 64;
    static constexpr size_t recv_size    = grh_size + wire::conn::message_size;

    ud_channel(const device &dev, uint32_t qkey) : m_dev(dev), m_qkey(qkey)
    {
    }
    result<done> post_recv(uint32_t slot);
    ibv_ah *ah_for(const uint8_t (&gid)[16]);

    const device &m_dev;
    const uint32_t m_qkey;
    std::vector<std::byte> m_buffers; /* recv slots, then send slots */
    verbs::mr_ptr m_mr;
    verbs::cq_ptr m_cq;
    verbs::qp_ptr m_qp;
    std::map<std::array<uint8_t, 16>, verbs::ah_ptr> m_ahs;
    std::vector<bool> m_send_busy;
    uint32_t m_next_send = 0;
    uint64_t m_sent      = 0;
    uint64_t m_received  = 0;
    uint64_t m_dropped   = 0;
};

} // namespace rvt::agent

#endif
