/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a device took of a chain of work requests that ibv_post_send or
 * ibv_post_srq_recv refused: the requests before *bad_wr, the one it
 * names. A provider may also fail after it queued the whole chain without
 * naming one: rxe's provider queues every request in user space and then
 * rings the kernel, and a failed ring leaves bad_wr NULL. Then the whole
 * chain was taken, and its completions (flushed, if the QP is in error)
 * will say what became of it; counting those requests as refused would
 * post them again, and a peer would receive a message twice.
 */
#ifndef RVT_AGENT_CHAIN_TAKEN_H
#define RVT_AGENT_CHAIN_TAKEN_H

#include <cstddef>

namespace rvt::agent {

template<class Wr>
size_t chain_taken(const Wr *first, size_t n, const Wr *bad) noexcept
{
    for (size_t i = 0; i < n; ++i) {
        if (first + i == bad) {
            return i;
        }
    }
    return n; /* not named, or not one of ours: all of it */
}

} // namespace rvt::agent

#endif
