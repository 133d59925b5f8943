/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/agent/device/ud_channel.h"

#include "uct/ib/rvt/common/format.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace rvt::agent {

namespace {

/* wr_id of a UD work request: the slot, with the top bit for sends. */
constexpr uint64_t send_flag = uint64_t{1} << 63;

} // namespace

result<std::unique_ptr<ud_channel>>
ud_channel::create(const device &dev, ibv_comp_channel *channel, uint32_t qkey)
{
    if (!wire::qkey_valid(qkey)) {
        return failure{format("UD channel: Q_Key 0x%x: expected 1 to "
                              "0x7fffffff (not 0, high bit clear)",
                              qkey)};
    }
    std::unique_ptr<ud_channel> ch(new ud_channel(dev, qkey));
    ch->m_buffers.resize(recv_slots * recv_size +
                         send_slots * wire::conn::message_size);
    ch->m_send_busy.assign(send_slots, false);
    ch->m_mr.reset(ibv_reg_mr(dev.pd(), ch->m_buffers.data(),
                              ch->m_buffers.size(), IBV_ACCESS_LOCAL_WRITE));
    if (!ch->m_mr) {
        return failure{std::string("UD channel: ibv_reg_mr failed: ") +
                       std::strerror(errno)};
    }
    ch->m_cq.reset(ibv_create_cq(dev.context(),
                                 static_cast<int>(recv_slots + send_slots),
                                 nullptr, channel, 0));
    if (!ch->m_cq) {
        return failure{std::string("UD channel: ibv_create_cq failed: ") +
                       std::strerror(errno)};
    }
    ibv_qp_init_attr init{};
    init.send_cq          = ch->m_cq.get();
    init.recv_cq          = ch->m_cq.get();
    init.qp_type          = IBV_QPT_UD;
    init.cap.max_send_wr  = send_slots;
    init.cap.max_recv_wr  = recv_slots;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    ch->m_qp.reset(ibv_create_qp(dev.pd(), &init));
    if (!ch->m_qp) {
        return failure{std::string("UD channel: ibv_create_qp failed: ") +
                       std::strerror(errno)};
    }
    ibv_qp_attr attr{};
    attr.qp_state   = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num   = dev.port();
    attr.qkey       = qkey;
    int err         = ibv_modify_qp(ch->m_qp.get(), &attr,
                                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                            IBV_QP_QKEY);
    if (err == 0) {
        attr          = {};
        attr.qp_state = IBV_QPS_RTR;
        err           = ibv_modify_qp(ch->m_qp.get(), &attr, IBV_QP_STATE);
    }
    if (err == 0) {
        attr          = {};
        attr.qp_state = IBV_QPS_RTS;
        attr.sq_psn   = 0;
        err           = ibv_modify_qp(ch->m_qp.get(), &attr,
                                      IBV_QP_STATE | IBV_QP_SQ_PSN);
    }
    if (err != 0) {
        return failure{std::string("UD channel: QP to RTS failed: ") +
                       std::strerror(err)};
    }
    for (uint32_t i = 0; i < recv_slots; ++i) {
        auto r = ch->post_recv(i);
        if (!r) {
            return failure{r.error()};
        }
    }
    if (ibv_req_notify_cq(ch->m_cq.get(), 0) != 0) {
        return failure{"UD channel: ibv_req_notify_cq failed"};
    }
    return ch;
}

ud_channel::~ud_channel()
{
    /* QP before AHs, CQ and MR: members are declared in the other order */
    m_qp.reset();
}

result<done> ud_channel::post_recv(uint32_t slot)
{
    ibv_sge sge{reinterpret_cast<uint64_t>(m_buffers.data() + slot * recv_size),
                static_cast<uint32_t>(recv_size), m_mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id         = slot;
    wr.sg_list       = &sge;
    wr.num_sge       = 1;
    ibv_recv_wr *bad = nullptr;
    int err          = ibv_post_recv(m_qp.get(), &wr, &bad);
    if (err != 0) {
        return failure{std::string("UD channel: ibv_post_recv failed: ") +
                       std::strerror(err)};
    }
    return done{};
}

ibv_ah *ud_channel::ah_for(const uint8_t (&gid)[16])
{
    std::array<uint8_t, 16> key;
    std::memcpy(key.data(), gid, 16);
    auto it = m_ahs.find(key);
    if (it != m_ahs.end()) {
        return it->second.get();
    }
    ibv_ah_attr attr{};
    attr.is_global      = 1;
    attr.port_num       = m_dev.port();
    attr.grh.hop_limit  = 64;
    attr.grh.sgid_index = m_dev.gid_index();
    std::memcpy(attr.grh.dgid.raw, gid, 16);
    verbs::ah_ptr ah(ibv_create_ah(m_dev.pd(), &attr));
    ibv_ah *raw = ah.get();
    if (ah) {
        m_ahs.emplace(key, std::move(ah));
    }
    return raw;
}

result<done> ud_channel::send(const wire::conn::message &msg,
                              const uint8_t (&gid)[16], uint32_t qpn,
                              uint32_t qkey)
{
    uint32_t slot = send_slots;
    for (uint32_t i = 0; i < send_slots; ++i) {
        uint32_t s = (m_next_send + i) % send_slots;
        if (!m_send_busy[s]) {
            slot = s;
            break;
        }
    }
    if (slot == send_slots) {
        ++m_dropped;
        return failure{"UD channel: all send slots busy: datagram dropped"};
    }
    ibv_ah *ah = ah_for(gid);
    if (ah == nullptr) {
        ++m_dropped;
        return failure{std::string("UD channel: ibv_create_ah failed: ") +
                       std::strerror(errno)};
    }
    std::byte *buf = m_buffers.data() + recv_slots * recv_size +
                     slot * wire::conn::message_size;
    std::memcpy(buf, &msg, sizeof(msg));
    ibv_sge sge{reinterpret_cast<uint64_t>(buf), sizeof(msg), m_mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id             = send_flag | slot;
    wr.sg_list           = &sge;
    wr.num_sge           = 1;
    wr.opcode            = IBV_WR_SEND;
    wr.send_flags        = IBV_SEND_SIGNALED;
    wr.wr.ud.ah          = ah;
    wr.wr.ud.remote_qpn  = qpn;
    wr.wr.ud.remote_qkey = qkey;
    ibv_send_wr *bad     = nullptr;
    int err              = ibv_post_send(m_qp.get(), &wr, &bad);
    if (err != 0) {
        ++m_dropped;
        return failure{std::string("UD channel: ibv_post_send failed: ") +
                       std::strerror(err)};
    }
    m_send_busy[slot] = true;
    m_next_send       = (slot + 1) % send_slots;
    ++m_sent;
    return done{};
}

std::array<uint8_t, 16> grh_source_gid(std::span<const std::byte, grh_size> grh)
{
    auto byte = [&](size_t i) { return std::to_integer<uint8_t>(grh[i]); };
    constexpr size_t ip4 = 20; /* where RoCE v2 puts the IPv4 header */
    bool is_ip4          = false;
    if ((byte(0) >> 4) != 6) {
        is_ip4 = (byte(ip4) >> 4) == 4;
    } else if ((byte(ip4) & 0xf) == 5) {
        /* an IPv4 header of 5 words whose checksum holds: believe it */
        uint32_t sum = 0;
        for (size_t i = 0; i < 20; i += 2) {
            sum += uint32_t{byte(ip4 + i)} << 8 | byte(ip4 + i + 1);
        }
        while (sum > 0xffff) {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        is_ip4 = sum == 0xffff;
    }
    std::array<uint8_t, 16> gid{};
    if (is_ip4) {
        gid[10] = 0xff;
        gid[11] = 0xff;
        for (size_t i = 0; i < 4; ++i) {
            gid[12 + i] = byte(ip4 + 12 + i); /* the IPv4 source address */
        }
    } else {
        for (size_t i = 0; i < 16; ++i) {
            gid[i] = byte(8 + i); /* the GRH's SGID */
        }
    }
    return gid;
}

size_t ud_channel::poll(
        const std::function<void(std::span<const std::byte>,
                                 const std::array<uint8_t, 16> &)> &deliver,
        size_t max)
{
    return poll([&](std::span<const std::byte> bytes,
                    const datagram_source &from) { deliver(bytes, from.gid); },
                max);
}

size_t ud_channel::poll(const nic::datagram_fn &deliver, size_t max)
{
    ibv_wc wc[16];
    size_t received = 0;
    while (received < max) {
        /* never more receives than the budget has left: what is not
         * polled stays in the CQ */
        const int want = static_cast<int>(std::min<size_t>(16, max - received));
        int n          = ibv_poll_cq(m_cq.get(), want, wc);
        if (n <= 0) {
            break;
        }
        for (int i = 0; i < n; ++i) {
            if (wc[i].wr_id & send_flag) {
                m_send_busy[wc[i].wr_id & ~send_flag] = false;
                continue;
            }
            ++received;
            const auto slot = static_cast<uint32_t>(wc[i].wr_id);
            if (wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len >= grh_size) {
                ++m_received;
                const std::byte *at = m_buffers.data() + slot * recv_size;
                const datagram_source from{
                        grh_source_gid(
                                std::span<const std::byte, grh_size>(at,
                                                                     grh_size)),
                        wc[i].src_qp & wire::conn::qpn_mask};
                deliver(std::span(at + grh_size, wc[i].byte_len - grh_size),
                        from);
            }
            (void)post_recv(slot);
        }
    }
    return received;
}

} // namespace rvt::agent
