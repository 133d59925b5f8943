/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The chaos client's checks of what arrives for it (chaos_runner.h says
 * how): every write and every active message verified on its own, and the
 * agent's notices of clients gone and peers given up.
 */
#include "chaos_runner.h"
#include "write_damage.h"

#include "uct/ib/rvt/common/imm.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace rvt::test::chaos {

void runner::bad(const std::string &why)
{
    ++m_bad;
    std::fprintf(stderr, "client: BAD ARRIVAL: %s\n", why.c_str());
    std::fflush(stderr);
}


/* Whether slot `slot` holds a write of `length` bytes from (src,
 * src_inc) to us that we have not seen yet, every byte right: "" if so
 * (and it is counted), else what is wrong. */
std::string runner::check_slot(uint32_t src, uint32_t src_inc, uint32_t slot,
                               uint32_t length)
{
    const uint8_t *p = recv_slot(src, src_inc, slot);
    slot_header h{};
    std::memcpy(&h, p, sizeof(h));
    const std::string what = "write from client " + std::to_string(src) + "." +
                             std::to_string(src_inc) + " round " +
                             std::to_string(h.round) + " slot " +
                             std::to_string(slot);
    if (h.magic != slot_magic || h.src != src || h.src_inc != src_inc) {
        return what + ": the slot holds no write of that client";
    }
    source &s = m_sources[{src, src_inc}];
    if (h.dst != m_o.id || h.dst_inc != m_o.incarnation || h.reserved != 0 ||
        h.round % m_o.window != slot || length_of(h.round, src_inc) != length) {
        return what + ": header names client " + std::to_string(h.dst) + "." +
               std::to_string(h.dst_inc) + ", " + std::to_string(length) +
               " bytes";
    }
    if (static_cast<int64_t>(h.round) <= s.last_write) {
        return what + ": after round " + std::to_string(s.last_write);
    }
    const uint64_t seed = seed_of(src, m_o.id, src_inc, m_o.incarnation,
                                  h.round, kind::write);
    for (size_t k = sizeof(h); k < length; ++k) {
        if (p[k] != byte_of(seed, k)) {
            /* byte k of round r's write from this source, header included */
            auto expected = [&](uint64_t r, size_t at) -> uint8_t {
                if (at >= sizeof(slot_header)) {
                    return byte_of(seed_of(src, m_o.id, src_inc,
                                           m_o.incarnation, r, kind::write),
                                   at);
                }
                slot_header hr = h;
                hr.round       = r;
                uint8_t bytes[sizeof(hr)];
                std::memcpy(bytes, &hr, sizeof(hr));
                return bytes[at];
            };
            return what + ": byte " + std::to_string(k) + " is wrong (" +
                   rvt::test::damage_of(p, length, k, h.round, m_o.window,
                                        expected) +
                   ")";
        }
    }
    s.last_write = static_cast<int64_t>(h.round);
    ++s.writes;
    ++m_writes;
    return "";
}

void runner::check_write(const inbound_message &m)
{
    auto d = imm::decode(m.imm);
    if (!d || d->what != imm::kind::write ||
        d->dst_client != m_s.client_index() || d->src_client != m.src_client ||
        d->generation != m_generation) {
        bad("write with immediate 0x" + std::to_string(m.imm) + " from peer " +
            std::to_string(m.peer) + " client " + std::to_string(m.src_client) +
            " is not for us");
        return;
    }
    const uint32_t step = m_o.size - m.length;
    if (m.length > m_o.size || step % length_step != 0 ||
        step / length_step >= 2 * m_o.window) {
        bad("write of " + std::to_string(m.length) + " bytes names no slot");
        return;
    }
    const uint32_t slot   = step / length_step % m_o.window;
    const uint32_t parity = step / length_step / m_o.window;
    /* The sender the agent names (its peer, the sender's index there): the
     * processes whose cards had that route and whose incarnation has the
     * parity the length says (a client index is reused: by a dead
     * process's replacement too, while a write of the dead one may still
     * wait to be read), the latest first. When none of them wrote the
     * slot, the sender may be a process whose card we have not read yet:
     * read the cards again, then judge. */
    std::string why;
    for (int pass = 0; pass < 2; ++pass) {
        auto r = m_routes.find({m.peer, m.src_client});
        if (r != m_routes.end()) {
            for (auto it = r->second.rbegin(); it != r->second.rend(); ++it) {
                if (it->second % 2 != parity) {
                    continue;
                }
                std::string e = check_slot(it->first, it->second, slot,
                                           m.length);
                if (e.empty()) {
                    return;
                }
                why += (why.empty() ? "" : "; ") + e;
            }
        }
        if (pass == 0) {
            scan_cards();
            why.clear();
        }
    }
    bad("write of " + std::to_string(m.length) + " bytes from peer " +
        std::to_string(m.peer) + " client " + std::to_string(m.src_client) +
        (why.empty() ? ": no card names that sender" : ": " + why));
}

void runner::check_am(const client::inbound_view &v)
{
    auto d = imm::decode(v.msg.imm);
    message m{};
    if (!d || d->what != imm::kind::am || d->am_id != message_am_id ||
        v.msg.am_id != message_am_id || d->dst_client != m_s.client_index() ||
        d->generation != m_generation || v.data.size() != sizeof(m)) {
        bad("AM with immediate " + std::to_string(v.msg.imm) + ", id " +
            std::to_string(v.msg.am_id) + ", " + std::to_string(v.data.size()) +
            " bytes is not ours");
        return;
    }
    std::memcpy(&m, v.data.data(), sizeof(m));
    const auto what = static_cast<kind>(m.type);
    if (m.magic != message_magic || m.type < 1 || m.type > 4 ||
        m.src >= m_o.clients || m.dst != m_o.id ||
        m.dst_inc != m_o.incarnation) {
        bad("AM for client " + std::to_string(m.dst) + "." +
            std::to_string(m.dst_inc) + " (magic " + std::to_string(m.magic) +
            ", type " + std::to_string(m.type) + ")");
        return;
    }
    const std::string name = std::string(name_of(what)) + " from client " +
                             std::to_string(m.src) + "." +
                             std::to_string(m.src_inc) + " round " +
                             std::to_string(m.round);
    message expect = m;
    fill_message(expect);
    if (std::memcmp(expect.fill, m.fill, sizeof(m.fill)) != 0) {
        bad(name + ": fill is wrong");
        return;
    }
    /* it came from that client's agent */
    if (!m_cards.count({m.src, m.src_inc})) {
        scan_cards();
    }
    auto c = m_cards.find({m.src, m.src_inc});
    if (c == m_cards.end() || peer_of(c->second.agent) != v.msg.peer) {
        bad(name + ": arrived from peer " + std::to_string(v.msg.peer) +
            (c == m_cards.end() ? ", no such client" : ", not its agent"));
        return;
    }
    source &s           = m_sources[{m.src, m.src_inc}];
    dest &from          = m_dests[m.src];
    const bool same_inc = from.known && from.c.incarnation == m.src_inc;
    if (what == kind::data) {
        if (static_cast<int64_t>(m.round) <= s.last_am) {
            bad(name + ": after round " + std::to_string(s.last_am));
            return;
        }
        s.last_am = static_cast<int64_t>(m.round);
        ++s.ams;
        ++m_ams;
    } else {
        ++m_controls;
    }
    switch (what) {
    case kind::data:
    case kind::ping:
        if (same_inc && m_running) {
            from.ack_round = std::max(from.ack_round, m.round);
            from.ack_due   = true;
        }
        break;
    case kind::ack:
        if (same_inc) {
            from.acked = std::max(from.acked, static_cast<int64_t>(m.round));
            from.last_heard = clock_type::now();
        }
        break;
    case kind::fin:
        if (s.fin) {
            bad(name + ": a second fin");
            return;
        }
        s.fin     = true;
        s.fin_msg = m;
        break;
    case kind::write:
        break;
    }
}

bool runner::inbound()
{
    client::inbound_view v;
    bool got = false;
    while (m_s.peek_inbound(v)) {
        got             = true;
        const auto kind = static_cast<inbound_kind>(v.msg.kind);
        if (kind == inbound_kind::write) {
            check_write(v.msg);
        } else if (kind == inbound_kind::am) {
            check_am(v);
        } else if (kind == inbound_kind::client_gone) {
            ++m_gone_notices;
            for (auto &d : m_dests) {
                if (d.known && d.peer == v.msg.peer &&
                    d.c.client_index == v.msg.src_client &&
                    static_cast<uint8_t>(d.c.client_generation) ==
                            v.msg.generation) {
                    d.gone     = true;
                    d.alive    = false;
                    d.retry_at = clock_type::now() + milliseconds(500);
                }
            }
        } else if (kind == inbound_kind::peer_failed) {
            ++m_peer_failures;
            std::fprintf(stderr, "client: our agent gave peer %u up\n",
                         v.msg.peer);
            for (auto &d : m_dests) {
                if (d.known && d.peer == v.msg.peer && d.alive) {
                    d.alive    = false;
                    d.retry_at = clock_type::now() + milliseconds(500);
                }
            }
        } else {
            bad("inbound entry of kind " + std::to_string(v.msg.kind));
        }
        m_s.release_inbound();
    }
    traffic::check_rings(m_s);
    return got;
}


} // namespace rvt::test::chaos
