/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client_set: a set of client indices (< imm::max_clients) as a bitmap,
 * walked in ascending order. The client table keeps the clients a pass must
 * visit in these (client_table.h, "Which clients a pass visits"), so that a
 * pass costs nothing per idle client.
 */
#ifndef RVT_AGENT_CLIENT_SET_H
#define RVT_AGENT_CLIENT_SET_H

#include "uct/ib/rvt/common/imm.h"

#include <array>
#include <bit>
#include <cstdint>

namespace rvt::agent {

class client_set {
public:
    void insert(uint32_t index)
    {
        m_words[index / 64] |= bit(index);
    }
    void erase(uint32_t index)
    {
        m_words[index / 64] &= ~bit(index);
    }
    bool contains(uint32_t index) const
    {
        return (m_words[index / 64] & bit(index)) != 0;
    }
    bool empty() const
    {
        for (uint64_t w : m_words) {
            if (w != 0) {
                return false;
            }
        }
        return true;
    }
    void merge(const client_set &other)
    {
        for (size_t w = 0; w < words; ++w) {
            m_words[w] |= other.m_words[w];
        }
    }
    /* Calls visit(index) for each member, ascending. The set may change
     * during the walk: a word is read once, before its members are
     * visited. */
    template<class Visit> void for_each(Visit &&visit) const
    {
        for (size_t w = 0; w < words; ++w) {
            for (uint64_t bits = m_words[w]; bits != 0; bits &= bits - 1) {
                visit(static_cast<uint32_t>(w * 64 + std::countr_zero(bits)));
            }
        }
    }

private:
    static constexpr size_t words = imm::max_clients / 64;
    static_assert(imm::max_clients % 64 == 0);
    static uint64_t bit(uint32_t index)
    {
        return uint64_t{1} << (index % 64);
    }

    std::array<uint64_t, words> m_words{};
};

} // namespace rvt::agent

#endif
