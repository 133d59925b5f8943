/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCT semantics of the rvt transport, through UCT's public API with real
 * agents on a real device (the testbed), every byte checked, over each
 * route of uct_rvt_route.h (self: one agent's loopback QPs; other_agent: a
 * second agent on the same device; other_node: the agent of the next
 * node's device, through the bridge):
 *
 *   active messages of every kind arrive in send order, intact; a put is
 *   visible when a later AM's handler runs; flush means earlier puts are
 *   complete and visible; fence orders a get and a later put from its
 *   buffer (and a put and a later get, a put and a later put); pending
 *   requests under back-pressure run exactly once, in order; every zcopy
 *   operation that answers UCS_INPROGRESS completes exactly once, after
 *   which its buffer is the caller's again.
 *
 * uct_rvt_large: puts of 64 MiB and 80 MiB (whole: UCX_RVT_STRIPE_MIN is
 * inf by default); UCX_RVT_MAX_ZCOPY bounds one; puts from
 * UCX_RVT_STRIPE_MIN up are split by the agent over its QPs, and a value
 * below two pages is refused.
 * Failures are in test_uct_rvt_failure.cc. Times are printed, never
 * asserted.
 */
#include "uct_rvt_route.h"

#include <gtest/gtest.h>
#include <uct/api/uct.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using namespace rvt::test;

namespace {

class uct_rvt_semantics : public uct_rvt_each_route {};

} // namespace

/* ---- AM order --------------------------------------------------------- */

TEST_P(uct_rvt_semantics, active_messages_arrive_in_send_order)
{
    /* every kind of AM, sizes from the 8-byte header alone to the
     * largest, interleaved: message k starts with k, then the pattern k */
    constexpr int n = 1200;
    buffer zsrc(m_md, (n / 4 + 1) * m_seg);
    ASSERT_NE(zsrc.memh, nullptr);
    std::vector<call_counter> zcomp(n);
    std::vector<ucs_status_t> zstatus(n, UCS_OK);
    auto message = [&](uint64_t k) {
        const size_t len = size_of(k, 8, m_seg);
        std::string msg(reinterpret_cast<const char *>(&k), 8);
        return msg + pattern(len - 8, k);
    };
    const auto t0 = std::chrono::steady_clock::now();
    for (uint64_t k = 0; k < n; ++k) {
        std::string msg = message(k);
        ucs_status_t status;
        switch (k % 4) {
        case 0:
            status = retry([&] {
                return uct_ep_am_short(m_ep, am_id, k, msg.data() + 8,
                                       static_cast<unsigned>(msg.size() - 8));
            });
            break;
        case 1: {
            uct_iov_t iov{msg.data(), msg.size(), UCT_MEM_HANDLE_NULL, 0, 1};
            status = retry(
                    [&] { return uct_ep_am_short_iov(m_ep, am_id, &iov, 1); });
            break;
        }
        case 2:
            status = retry([&] {
                return bcopy_status(
                        uct_ep_am_bcopy(m_ep, am_id, pack_pattern, &msg, 0));
            });
            break;
        default: {
            char *slot = zsrc.bytes() + (k / 4) * m_seg;
            std::memcpy(slot, msg.data(), msg.size());
            uct_iov_t iov = zsrc.iov(msg.size(), slot - zsrc.bytes());
            /* header length 0 (am_zcopy headers are tested elsewhere) */
            status     = retry([&] {
                return uct_ep_am_zcopy(m_ep, am_id, nullptr, 0, &iov, 1, 0,
                                           &zcomp[k].comp);
            });
            zstatus[k] = status;
            if (status == UCS_INPROGRESS) {
                status = UCS_OK;
            }
            break;
        }
        }
        ASSERT_EQ(status, UCS_OK)
                << "message " << k << ": " << ucs_status_string(status);
    }
    ASSERT_TRUE(progress_until([&] { return m_received.size() >= n; }))
            << "received " << m_received.size() << " of " << n;
    std::printf("[ INFO     ] %d AMs (%zu bytes max) in %.2f s\n", n, m_seg,
                seconds_since(t0));
    ASSERT_EQ(m_received.size(), size_t{n});
    for (uint64_t k = 0; k < n; ++k) {
        ASSERT_EQ(tag_of(m_received[k]), k)
                << "message " << k << " arrived out of order";
        const std::string want = message(k);
        ASSERT_EQ(m_received[k].size(), want.size()) << "message " << k;
        ASSERT_TRUE(m_received[k] == want)
                << "message " << k << " differs at byte "
                << mismatch(m_received[k].data() + 8, want.size() - 8, k) + 8;
    }
    for (int k = 3; k < n; k += 4) {
        if (zstatus[k] == UCS_INPROGRESS) {
            EXPECT_TRUE(progress_until([&] { return zcomp[k].calls > 0; }));
            EXPECT_EQ(zcomp[k].calls, 1) << "am_zcopy " << k;
            EXPECT_EQ(zcomp[k].status, UCS_OK) << "am_zcopy " << k;
        }
    }
    EXPECT_TRUE(m_errors.calls.empty());
}

/* ---- put, then AM ----------------------------------------------------- */

namespace {

/* The target's view: when AM r runs, put r must be in target slot r. */
struct put_watch {
    const char *target = nullptr;
    size_t slot        = 0;
    std::vector<size_t> lengths;
    std::vector<int> seen;
    std::vector<std::string> errors;

    static ucs_status_t on_am(void *arg, void *data, size_t length, unsigned)
    {
        auto &w    = *static_cast<put_watch *>(arg);
        uint64_t r = ~uint64_t{0};
        if (length >= sizeof(r)) {
            std::memcpy(&r, data, sizeof(r));
        }
        if (r >= w.lengths.size()) {
            w.errors.push_back("an AM with round " + std::to_string(r));
            return UCS_OK;
        }
        ++w.seen[r];
        const size_t at = mismatch(w.target + r * w.slot, w.lengths[r],
                                   1000 + r);
        if (at != npos) {
            w.errors.push_back("round " + std::to_string(r) + ": the put's " +
                               std::to_string(w.lengths[r]) +
                               " bytes are not there yet (byte " +
                               std::to_string(at) + " differs)");
        }
        return UCS_OK;
    }
};

} // namespace

TEST_P(uct_rvt_semantics, a_put_is_visible_when_a_later_am_runs)
{
    constexpr size_t rounds = 48;
    constexpr size_t slot   = 256 * 1024;
    buffer target(m_to_md, rounds * slot);
    buffer src(m_md, rounds * slot);
    buffer amsrc(m_md, rounds * 64);
    ASSERT_NE(target.memh, nullptr);
    ASSERT_NE(src.memh, nullptr);
    ASSERT_NE(amsrc.memh, nullptr);
    const uct_rkey_t rkey = rkey_of(target);
    const auto remote     = reinterpret_cast<uint64_t>(target.bytes());

    put_watch watch;
    watch.target = target.bytes();
    watch.slot   = slot;
    watch.lengths.resize(rounds);
    watch.seen.resize(rounds);
    ASSERT_EQ(uct_iface_set_am_handler(m_to->iface, am_id, put_watch::on_am,
                                       &watch, 0),
              UCS_OK);

    std::vector<call_counter> pcomp(rounds), acomp(rounds);
    for (uint64_t r = 0; r < rounds; ++r) {
        /* the put: zcopy, bcopy or short, by turns */
        const int kind   = static_cast<int>(r % 3);
        const size_t len = kind == 0 ? size_of(r, 1, slot) :
                                       size_of(r, 1, m_seg);
        watch.lengths[r] = len;
        char *from       = src.bytes() + r * slot;
        fill(from, len, 1000 + r);
        const uint64_t to = remote + r * slot;
        ucs_status_t status;
        if (kind == 0) {
            uct_iov_t iov = src.iov(len, r * slot);
            status        = retry([&] {
                return uct_ep_put_zcopy(m_ep, &iov, 1, to, rkey,
                                               &pcomp[r].comp);
            });
            status        = status == UCS_INPROGRESS ? UCS_OK : status;
        } else if (kind == 1) {
            std::string bytes(from, len);
            status = retry([&] {
                return bcopy_status(
                        uct_ep_put_bcopy(m_ep, pack_pattern, &bytes, to, rkey));
            });
        } else {
            status = retry([&] {
                return uct_ep_put_short(m_ep, from, static_cast<unsigned>(len),
                                        to, rkey);
            });
        }
        ASSERT_EQ(status, UCS_OK)
                << "put " << r << ": " << ucs_status_string(status);

        /* then an AM naming the round, of another kind by turns */
        std::string am(reinterpret_cast<const char *>(&r), 8);
        am += pattern(40, r);
        switch ((r / 3) % 3) {
        case 0:
            status = retry([&] {
                return uct_ep_am_short(m_ep, am_id, r, am.data() + 8, 40);
            });
            break;
        case 1:
            status = retry([&] {
                return bcopy_status(
                        uct_ep_am_bcopy(m_ep, am_id, pack_pattern, &am, 0));
            });
            break;
        default: {
            std::memcpy(amsrc.bytes() + r * 64, am.data(), am.size());
            uct_iov_t iov = amsrc.iov(am.size(), r * 64);
            status        = retry([&] {
                return uct_ep_am_zcopy(m_ep, am_id, nullptr, 0, &iov, 1, 0,
                                              &acomp[r].comp);
            });
            status        = status == UCS_INPROGRESS ? UCS_OK : status;
            break;
        }
        }
        ASSERT_EQ(status, UCS_OK)
                << "AM " << r << ": " << ucs_status_string(status);
    }
    ASSERT_TRUE(progress_until([&] {
        return std::all_of(watch.seen.begin(), watch.seen.end(),
                           [](int s) { return s > 0; });
    })) << "not every AM arrived";
    EXPECT_EQ(flush_ep(m_ep), UCS_OK);
    for (const auto &e : watch.errors) {
        ADD_FAILURE() << e;
    }
    for (size_t r = 0; r < rounds; ++r) {
        EXPECT_EQ(watch.seen[r], 1) << "AM " << r;
    }
}

/* ---- flush and fence -------------------------------------------------- */

TEST_P(uct_rvt_semantics, flush_means_earlier_puts_are_visible)
{
    constexpr size_t count = 30;
    constexpr size_t slot  = 128 * 1024;
    buffer target(m_to_md, count * slot);
    buffer src(m_md, count * slot);
    ASSERT_NE(target.memh, nullptr);
    ASSERT_NE(src.memh, nullptr);
    const uct_rkey_t rkey = rkey_of(target);
    const auto remote     = reinterpret_cast<uint64_t>(target.bytes());

    for (const bool whole_iface : {false, true}) {
        SCOPED_TRACE(whole_iface ? "uct_iface_flush" : "uct_ep_flush");
        const uint64_t base = whole_iface ? 3000 : 2000;
        std::vector<size_t> lengths(count);
        std::vector<call_counter> comps(count);
        std::memset(target.bytes(), 0, target.length);
        for (size_t i = 0; i < count; ++i) {
            const int kind = static_cast<int>(i % 3);
            lengths[i]     = kind == 0 ? size_of(i + base, slot / 2, slot) :
                                         size_of(i + base, 1, m_seg);
            fill(src.bytes() + i * slot, lengths[i], base + i);
            ucs_status_t status;
            if (kind == 0) {
                uct_iov_t iov = src.iov(lengths[i], i * slot);
                status        = retry([&] {
                    return uct_ep_put_zcopy(m_ep, &iov, 1, remote + i * slot,
                                                   rkey, &comps[i].comp);
                });
                status        = status == UCS_INPROGRESS ? UCS_OK : status;
            } else if (kind == 1) {
                std::string bytes(src.bytes() + i * slot, lengths[i]);
                status = retry([&] {
                    return bcopy_status(
                            uct_ep_put_bcopy(m_ep, pack_pattern, &bytes,
                                             remote + i * slot, rkey));
                });
            } else {
                status = retry([&] {
                    return uct_ep_put_short(m_ep, src.bytes() + i * slot,
                                            static_cast<unsigned>(lengths[i]),
                                            remote + i * slot, rkey);
                });
            }
            ASSERT_EQ(status, UCS_OK) << "put " << i;
        }
        /* what the target holds at the moment flush says done */
        std::vector<std::string> errors;
        auto check = [&] {
            for (size_t i = 0; i < count; ++i) {
                const size_t at = mismatch(target.bytes() + i * slot,
                                           lengths[i], base + i);
                if (at != npos) {
                    errors.push_back("put " + std::to_string(i) +
                                     " not visible at flush (byte " +
                                     std::to_string(at) + ")");
                }
                if (i % 3 == 0 && comps[i].calls != 1) {
                    errors.push_back("put_zcopy " + std::to_string(i) +
                                     " not completed at flush");
                }
            }
        };
        if (whole_iface) {
            ucs_status_t status;
            ASSERT_TRUE(progress_until([&] {
                status = uct_iface_flush(m_oi.iface, 0, nullptr);
                return status != UCS_INPROGRESS &&
                       status != UCS_ERR_NO_RESOURCE;
            }));
            ASSERT_EQ(status, UCS_OK) << ucs_status_string(status);
            check();
        } else {
            call_counter flush;
            const std::function<void()> then = check;
            flush.then                       = &then;
            ucs_status_t status              = retry(
                    [&] { return uct_ep_flush(m_ep, 0, &flush.comp); });
            if (status == UCS_INPROGRESS) {
                ASSERT_TRUE(progress_until([&] { return flush.calls > 0; }));
                EXPECT_EQ(flush.status, UCS_OK);
            } else {
                ASSERT_EQ(status, UCS_OK) << ucs_status_string(status);
                check();
            }
        }
        for (const auto &e : errors) {
            ADD_FAILURE() << e;
        }
    }
}

TEST_P(uct_rvt_semantics, fence_orders_later_operations)
{
    constexpr size_t len = 256 * 1024;
    buffer target(m_to_md, 8 * len);
    buffer local(m_md, 4 * len);
    ASSERT_NE(target.memh, nullptr);
    ASSERT_NE(local.memh, nullptr);
    const uct_rkey_t rkey = rkey_of(target);
    const auto remote     = reinterpret_cast<uint64_t>(target.bytes());
    auto region           = [&](int k) { return remote + k * len; };
    auto wait_comp        = [&](call_counter &c, ucs_status_t posted) {
        if (posted == UCS_INPROGRESS) {
            EXPECT_TRUE(progress_until([&] { return c.calls > 0; }));
            EXPECT_EQ(c.status, UCS_OK);
        } else {
            EXPECT_EQ(posted, UCS_OK) << ucs_status_string(posted);
        }
    };

    /* a get into a local buffer, a fence, a put from that buffer: the put
     * must carry what the get brought, not what was there before. With
     * the endpoint's fence and the interface's, at a few sizes: a large
     * read holds the device's later packets back by itself (rxe's window
     * of unacknowledged PSNs), a small one does not. */
    constexpr size_t sizes[] = {4096, 32 * 1024, len};
    constexpr int cases      = 2 * std::size(sizes);
    buffer froms(m_to_md, cases * len), tos(m_to_md, cases * len);
    buffer bufs(m_md, cases * len);
    ASSERT_NE(froms.memh, nullptr);
    ASSERT_NE(tos.memh, nullptr);
    ASSERT_NE(bufs.memh, nullptr);
    const uct_rkey_t from_rkey = rkey_of(froms), to_rkey = rkey_of(tos);
    for (int c = 0; c < cases; ++c) {
        const bool whole_iface = c >= cases / 2;
        const size_t size      = sizes[c % std::size(sizes)];
        SCOPED_TRACE(
                std::string(whole_iface ? "uct_iface_fence" : "uct_ep_fence") +
                ", " + std::to_string(size) + " bytes");
        const uint64_t seed = 5100 + c;
        fill(froms.bytes() + c * len, size, seed);
        std::memset(tos.bytes() + c * len, 0, size);
        char *buf = bufs.bytes() + c * len;
        std::memset(buf, 0xaa, size);
        uct_iov_t iov = bufs.iov(size, c * len);
        call_counter get, put;
        const uint64_t from = reinterpret_cast<uint64_t>(froms.bytes()) +
                              c * len;
        const uint64_t to = reinterpret_cast<uint64_t>(tos.bytes()) + c * len;
        ucs_status_t got  = retry([&] {
            return uct_ep_get_zcopy(m_ep, &iov, 1, from, from_rkey, &get.comp);
        });
        ASSERT_TRUE(got == UCS_OK || got == UCS_INPROGRESS)
                << ucs_status_string(got);
        ASSERT_EQ(whole_iface ? uct_iface_fence(m_oi.iface, 0) :
                                uct_ep_fence(m_ep, 0),
                  UCS_OK);
        ucs_status_t put_status = retry([&] {
            return uct_ep_put_zcopy(m_ep, &iov, 1, to, to_rkey, &put.comp);
        });
        ASSERT_TRUE(put_status == UCS_OK || put_status == UCS_INPROGRESS)
                << ucs_status_string(put_status);
        wait_comp(get, got);
        wait_comp(put, put_status);
        EXPECT_EQ(flush_ep(m_ep), UCS_OK);
        EXPECT_EQ(mismatch(buf, size, seed), npos) << "the get";
        EXPECT_EQ(mismatch(tos.bytes() + c * len, size, seed), npos)
                << "the put after the fence sent what the buffer held "
                   "before the get";
    }

    /* a put, a fence, a get of the same remote bytes: the get sees them */
    {
        char *src = local.bytes() + 2 * len;
        char *dst = local.bytes() + 3 * len;
        fill(src, len, 5003);
        std::memset(dst, 0, len);
        std::memset(target.bytes() + 4 * len, 0x55, len);
        uct_iov_t piov = local.iov(len, 2 * len),
                  giov = local.iov(len, 3 * len);
        call_counter put, get;
        ucs_status_t p = retry([&] {
            return uct_ep_put_zcopy(m_ep, &piov, 1, region(4), rkey, &put.comp);
        });
        ASSERT_EQ(uct_ep_fence(m_ep, 0), UCS_OK);
        ucs_status_t g = retry([&] {
            return uct_ep_get_zcopy(m_ep, &giov, 1, region(4), rkey, &get.comp);
        });
        wait_comp(put, p);
        wait_comp(get, g);
        EXPECT_EQ(mismatch(dst, len, 5003), npos)
                << "the get after the fence missed the put before it";
    }

    /* a put, a fence, a put to the same bytes: the later one stays */
    {
        std::string first = pattern(m_seg, 5004), second = pattern(64, 5005);
        ASSERT_EQ(retry([&] {
                      return bcopy_status(uct_ep_put_bcopy(m_ep, pack_pattern,
                                                           &first, region(5),
                                                           rkey));
                  }),
                  UCS_OK);
        ASSERT_EQ(uct_ep_fence(m_ep, 0), UCS_OK);
        ASSERT_EQ(retry([&] {
                      return uct_ep_put_short(m_ep, second.data(), 64,
                                              region(5), rkey);
                  }),
                  UCS_OK);
        EXPECT_EQ(flush_ep(m_ep), UCS_OK);
        EXPECT_EQ(std::string(target.bytes() + 5 * len, 64), second);
        EXPECT_EQ(std::string(target.bytes() + 5 * len + 64, m_seg - 64),
                  first.substr(64));
    }
}

/* ---- pending queue ---------------------------------------------------- */

namespace {

/* A pending request that sends one AM tagged (endpoint, sequence). */
struct tagged_pending {
    uct_pending_req_t req; /* first: UCT hands back its address */
    uct_ep_h ep                       = nullptr;
    uint64_t tag                      = 0;
    int calls                         = 0; /* every call */
    int sent                          = 0; /* calls that sent */
    int after                         = 0; /* calls after it had sent */
    int purged                        = 0;
    std::vector<uint64_t> *dispatched = nullptr;

    static ucs_status_t run(uct_pending_req_t *self)
    {
        auto &p = *reinterpret_cast<tagged_pending *>(self);
        ++p.calls;
        p.after += p.sent > 0;
        ucs_status_t status;
        if (p.tag % 2 == 0) {
            status = uct_ep_am_short(p.ep, am_id, p.tag, nullptr, 0);
        } else {
            std::string msg(reinterpret_cast<const char *>(&p.tag), 8);
            msg += pattern(size_of(p.tag, 1, 2000), p.tag);
            const ssize_t n = uct_ep_am_bcopy(p.ep, am_id, pack_pattern, &msg,
                                              0);
            status          = n < 0 ? static_cast<ucs_status_t>(n) : UCS_OK;
        }
        if (status == UCS_OK) {
            ++p.sent;
            p.dispatched->push_back(p.tag);
        }
        return status;
    }

    static void purge(uct_pending_req_t *self, void *)
    {
        ++reinterpret_cast<tagged_pending *>(self)->purged;
    }
};
static_assert(offsetof(tagged_pending, req) == 0);

uint64_t make_tag(uint64_t ep, uint64_t seq)
{
    return ep << 32 | seq;
}

} // namespace

TEST_P(uct_rvt_semantics, pending_requests_run_once_in_order)
{
    uct_ep_h eps[2] = {m_ep, new_ep(m_to->iface)};
    ASSERT_NE(eps[1], nullptr);
    uint64_t next_seq[2] = {0, 0};

    /* fill the interface without progress, as a burst of sends would */
    ucs_status_t status;
    while ((status = uct_ep_am_short(eps[0], am_id, make_tag(0, next_seq[0]),
                                     nullptr, 0)) == UCS_OK) {
        ++next_seq[0];
    }
    ASSERT_EQ(status, UCS_ERR_NO_RESOURCE) << ucs_status_string(status);
    const uint64_t burst = next_seq[0];
    ASSERT_GE(burst, 1u);

    /* queue requests on both endpoints, alternating */
    constexpr int queued = 200;
    std::vector<tagged_pending> reqs(queued);
    std::vector<uint64_t> dispatched;
    for (int i = 0; i < queued; ++i) {
        const int e  = i % 2;
        auto &p      = reqs[i];
        p.req.func   = tagged_pending::run;
        p.ep         = eps[e];
        p.tag        = make_tag(e, next_seq[e]++);
        p.dispatched = &dispatched;
        ASSERT_EQ(uct_ep_pending_add(eps[e], &p.req, 0), UCS_OK)
                << "request " << i;
    }
    const ucs_status_t overtaking = uct_ep_am_short(eps[0], am_id, 0, nullptr,
                                                    0);
    EXPECT_EQ(overtaking, UCS_ERR_NO_RESOURCE)
            << "a send overtook the pending requests";

    const size_t total = burst + queued;
    ASSERT_TRUE(progress_until([&] { return m_received.size() >= total; }))
            << "received " << m_received.size() << " of " << total
            << "; dispatched " << dispatched.size() << " of " << queued;
    EXPECT_EQ(flush_ep(eps[0]), UCS_OK);
    EXPECT_EQ(flush_ep(eps[1]), UCS_OK);
    for (int k = 0; k < 100; ++k) {
        progress(); /* anything dispatched twice would show now */
    }
    EXPECT_EQ(m_received.size(), total);
    EXPECT_EQ(dispatched.size(), size_t{queued});
    for (int i = 0; i < queued; ++i) {
        EXPECT_EQ(reqs[i].sent, 1) << "request " << i << " sent";
        EXPECT_EQ(reqs[i].after, 0) << "request " << i << " called again";
    }

    /* per endpoint: the burst, then its requests, in order and intact */
    uint64_t expect[2] = {0, 0};
    for (const auto &msg : m_received) {
        const uint64_t tag = tag_of(msg);
        const uint64_t e = tag >> 32, seq = tag & 0xffffffff;
        ASSERT_LT(e, 2u) << "unknown tag " << tag;
        ASSERT_EQ(seq, expect[e]) << "endpoint " << e << " out of order";
        ++expect[e];
        if (seq >= (e == 0 ? burst : 0) && tag % 2 == 1) {
            const std::string body = msg.substr(8);
            EXPECT_EQ(body, pattern(size_of(tag, 1, 2000), tag))
                    << "request with tag " << tag;
        } else {
            EXPECT_EQ(msg.size(), 8u) << "tag " << tag;
        }
    }
    EXPECT_EQ(expect[0], next_seq[0]);
    EXPECT_EQ(expect[1], next_seq[1]);

    /* with room, a request is refused (BUSY) rather than queued */
    tagged_pending idle;
    idle.req.func   = tagged_pending::run;
    idle.ep         = eps[0];
    idle.dispatched = &dispatched;
    EXPECT_EQ(uct_ep_pending_add(eps[0], &idle.req, 0), UCS_ERR_BUSY);

    /* purged requests are handed back once and never run */
    while (uct_ep_am_short(eps[0], am_id, 0, nullptr, 0) == UCS_OK) {
    }
    std::vector<tagged_pending> dropped(10);
    for (auto &p : dropped) {
        p.req.func   = tagged_pending::run;
        p.ep         = eps[0];
        p.dispatched = &dispatched;
        ASSERT_EQ(uct_ep_pending_add(eps[0], &p.req, 0), UCS_OK);
    }
    uct_ep_pending_purge(eps[0], tagged_pending::purge, nullptr);
    EXPECT_EQ(flush_ep(eps[0]), UCS_OK);
    for (const auto &p : dropped) {
        EXPECT_EQ(p.purged, 1);
        EXPECT_EQ(p.calls, 0);
    }
    EXPECT_EQ(idle.calls, 0);
}

namespace {

/* A pending request that, once it has sent, poisons itself as a freed one
 * would be: UCP frees its requests in the callback and answers UCS_OK. */
struct self_freeing_pending {
    uct_pending_req_t req; /* first: UCT hands back its address */
    uct_ep_h ep                       = nullptr;
    uint64_t tag                      = 0;
    std::vector<uint64_t> *dispatched = nullptr;

    static ucs_status_t run(uct_pending_req_t *self)
    {
        auto &p = *reinterpret_cast<self_freeing_pending *>(self);
        const ucs_status_t status = uct_ep_am_short(p.ep, am_id, p.tag, nullptr,
                                                    0);
        if (status == UCS_OK) {
            p.dispatched->push_back(p.tag);
            std::memset(&p.req, 0xa5, sizeof(p.req)); /* gone */
        }
        return status;
    }
};
static_assert(offsetof(self_freeing_pending, req) == 0);

} // namespace

TEST_P(uct_rvt_semantics, pending_request_may_free_itself)
{
    uint64_t seq = 0;
    ucs_status_t status;
    while ((status = uct_ep_am_short(m_ep, am_id, make_tag(0, seq), nullptr,
                                     0)) == UCS_OK) {
        ++seq;
    }
    ASSERT_EQ(status, UCS_ERR_NO_RESOURCE) << ucs_status_string(status);
    const uint64_t burst = seq;

    constexpr int queued = 50;
    std::vector<self_freeing_pending> reqs(queued);
    std::vector<uint64_t> dispatched;
    for (auto &p : reqs) {
        p.req.func   = self_freeing_pending::run;
        p.ep         = m_ep;
        p.tag        = make_tag(0, seq++);
        p.dispatched = &dispatched;
        ASSERT_EQ(uct_ep_pending_add(m_ep, &p.req, 0), UCS_OK);
    }
    const size_t total = burst + queued;
    ASSERT_TRUE(progress_until([&] { return m_received.size() >= total; }))
            << "received " << m_received.size() << " of " << total
            << "; dispatched " << dispatched.size() << " of " << queued;
    EXPECT_EQ(flush_ep(m_ep), UCS_OK);
    ASSERT_EQ(dispatched.size(), size_t{queued});
    for (int k = 0; k < queued; ++k) {
        EXPECT_EQ(dispatched[k], make_tag(0, burst + k)) << "request " << k;
    }
    uint64_t expect = 0;
    for (const auto &msg : m_received) {
        ASSERT_EQ(tag_of(msg), make_tag(0, expect)) << "out of order";
        ++expect;
    }
}

/* A length over the interface's limit is refused with UCX's own words
 * ("Invalid put_short length: ..."), which UCX's uct_p2p_err_test looks
 * for, and with nothing else logged. */
TEST_P(uct_rvt_semantics, too_long_operations_are_refused_in_ucx_words)
{
    const size_t put_max = m_attr.cap.put.max_short;
    const size_t am_max  = m_attr.cap.am.max_short;
    std::vector<char> bytes(std::max(put_max, am_max) + 1 + sizeof(uint64_t));
    std::string too_long(m_attr.cap.am.max_bcopy + 1, 'x');
    struct attempt {
        const char *what;
        std::function<ucs_status_t()> call;
    } attempts[] = {
            {"put_short",
             [&] {
                 return uct_ep_put_short(m_ep, bytes.data(), put_max + 1, 0, 0);
             }},
            {"am_short",
             [&] {
                 return uct_ep_am_short(m_ep, am_id, 0, bytes.data(),
                                        am_max + 1);
             }},
            {"am_bcopy",
             [&] {
                 const ssize_t n = uct_ep_am_bcopy(m_ep, am_id, pack_pattern,
                                                   &too_long, 0);
                 return n < 0 ? static_cast<ucs_status_t>(n) : UCS_OK;
             }},
    };
    for (const auto &a : attempts) {
        log_capture log;
        EXPECT_EQ(a.call(), UCS_ERR_INVALID_PARAM) << a.what;
        ASSERT_EQ(log.lines().size(), 1u) << a.what;
        EXPECT_TRUE(log.any_containing(std::string("Invalid ") + a.what +
                                       " length: "))
                << log.lines().front();
    }
}

/* ---- zcopy completions ------------------------------------------------ */

namespace {

struct zcopy_op {
    call_counter done;
    std::function<void()> release; /* gives the buffer back */
    int kind             = 0; /* 0 am, 1 put, 2 get */
    size_t length        = 0;
    size_t offset        = 0; /* get: in the remote source */
    ucs_status_t started = UCS_OK;
    bool data_ok         = true; /* get: the buffer held the data */
};

} // namespace

TEST_P(uct_rvt_semantics, zcopy_completes_once_and_frees_the_buffer)
{
    constexpr int count      = 240;
    constexpr size_t maxlen  = 64 * 1024;
    constexpr int nbuf       = 4;
    constexpr uint64_t gseed = 7000;
    buffer pool(m_md, nbuf * maxlen);
    buffer target(m_to_md, (count / 3 + 1) * maxlen);
    buffer gsrc(m_to_md, 2 * maxlen);
    ASSERT_NE(pool.memh, nullptr);
    ASSERT_NE(target.memh, nullptr);
    ASSERT_NE(gsrc.memh, nullptr);
    fill(gsrc.bytes(), gsrc.length, gseed);
    const uct_rkey_t trkey = rkey_of(target), grkey = rkey_of(gsrc);

    std::vector<std::unique_ptr<zcopy_op>> ops;
    std::vector<bool> busy(nbuf, false);
    for (int k = 0; k < count; ++k) {
        int b = -1;
        ASSERT_TRUE(progress_until([&] {
            auto it = std::find(busy.begin(), busy.end(), false);
            b       = static_cast<int>(it - busy.begin());
            return it != busy.end();
        })) << "no buffer came back";
        char *buf = pool.bytes() + b * maxlen;
        auto op   = std::make_unique<zcopy_op>();
        op->kind  = k % 3;
        /* an AM is at most one segment */
        op->length  = op->kind == 0 ? size_of(k, 8, m_seg) :
                                      size_of(k, 1, maxlen);
        op->offset  = size_of(k, 0, maxlen);
        zcopy_op &o = *op;
        /* at the completion, the buffer is ours: check what a get brought,
         * then scribble over it, as a reuse would */
        o.release = [&o, &busy, b, buf, from = gsrc.bytes()] {
            if (o.kind == 2) {
                o.data_ok = std::memcmp(buf, from + o.offset, o.length) == 0;
            }
            std::memset(buf, 0xee, o.length);
            busy[b] = false;
        };
        o.done.then   = &o.release;
        uct_iov_t iov = pool.iov(o.length, b * maxlen);
        busy[b]       = true;
        ucs_status_t status;
        if (o.kind == 0) {
            const uint64_t tag = k;
            std::memcpy(buf, &tag, sizeof(tag));
            fill(buf + 8, o.length - 8, k);
            status = retry([&] {
                return uct_ep_am_zcopy(m_ep, am_id, nullptr, 0, &iov, 1, 0,
                                       &o.done.comp);
            });
        } else if (o.kind == 1) {
            fill(buf, o.length, 8000 + k);
            const uint64_t to = reinterpret_cast<uint64_t>(target.bytes()) +
                                (k / 3) * maxlen;
            status = retry([&] {
                return uct_ep_put_zcopy(m_ep, &iov, 1, to, trkey, &o.done.comp);
            });
        } else {
            std::memset(buf, 0, o.length);
            const uint64_t from = reinterpret_cast<uint64_t>(gsrc.bytes()) +
                                  o.offset;
            status = retry([&] {
                return uct_ep_get_zcopy(m_ep, &iov, 1, from, grkey,
                                        &o.done.comp);
            });
        }
        o.started = status;
        ASSERT_TRUE(status == UCS_OK || status == UCS_INPROGRESS)
                << "op " << k << ": " << ucs_status_string(status);
        if (status == UCS_OK) {
            o.release(); /* done at once: the buffer is free now */
        }
        ops.push_back(std::move(op));
    }
    EXPECT_EQ(flush_ep(m_ep), UCS_OK);
    const size_t ams = (count + 2) / 3;
    EXPECT_TRUE(progress_until([&] { return m_received.size() >= ams; }));
    for (int k = 0; k < 100; ++k) {
        progress(); /* a second completion would show now */
    }

    int in_progress = 0;
    size_t am_seen  = 0;
    for (int k = 0; k < count; ++k) {
        const zcopy_op &o = *ops[k];
        if (o.started == UCS_INPROGRESS) {
            ++in_progress;
            EXPECT_EQ(o.done.calls, 1) << "op " << k << " completions";
            EXPECT_EQ(o.done.comp.count, 0) << "op " << k;
            EXPECT_EQ(o.done.status, UCS_OK) << "op " << k;
        } else {
            EXPECT_EQ(o.done.calls, 0) << "op " << k << " done at once";
        }
        if (o.kind == 1) {
            EXPECT_EQ(mismatch(target.bytes() + (k / 3) * maxlen, o.length,
                               8000 + k),
                      npos)
                    << "put " << k;
        } else if (o.kind == 2) {
            EXPECT_TRUE(o.data_ok)
                    << "get " << k << ": data not there at its completion";
        } else if (am_seen < m_received.size()) {
            const std::string &msg = m_received[am_seen++];
            EXPECT_EQ(tag_of(msg), uint64_t(k)) << "AM order";
            EXPECT_EQ(msg.size(), o.length) << "AM " << k;
            if (msg.size() >= 8) {
                EXPECT_EQ(mismatch(msg.data() + 8, msg.size() - 8, k), npos)
                        << "AM " << k << ": the buffer was reused early";
            }
        }
    }
    EXPECT_EQ(am_seen, ams);
    EXPECT_GT(in_progress, 0) << "no zcopy operation was asynchronous";
    std::printf("[ INFO     ] %d of %d zcopy operations completed "
                "asynchronously\n",
                in_progress, count);
}

INSTANTIATE_TEST_SUITE_P(route, uct_rvt_semantics,
                         ::testing::Values(route_kind::self,
                                           route_kind::other_agent,
                                           route_kind::other_node),
                         route_name);

/* ---- large puts ------------------------------------------------------- */

namespace {
class uct_rvt_large : public uct_rvt_route {};
} // namespace

TEST_F(uct_rvt_large, puts_of_64_and_80_mib)
{
    constexpr size_t mib = 1024 * 1024;
    ASSERT_NO_FATAL_FAILURE(open_route(route_kind::other_node));
    if (IsSkipped()) {
        return;
    }
    ASSERT_GE(m_attr.cap.put.max_zcopy, 80 * mib)
            << "UCX_RVT_MAX_ZCOPY's default no longer allows 80 MiB";
    buffer src(m_md, 80 * mib);
    buffer target(m_to_md, 80 * mib);
    ASSERT_NE(src.memh, nullptr) << "registering 80 MiB";
    ASSERT_NE(target.memh, nullptr) << "registering 80 MiB";
    const uct_rkey_t rkey = rkey_of(target);
    const auto remote     = reinterpret_cast<uint64_t>(target.bytes());

    for (const size_t len : {64 * mib, 80 * mib}) {
        const uint64_t seed = 9000 + len / mib;
        fill(src.bytes(), len, seed);
        call_counter done;
        uct_iov_t iov       = src.iov(len);
        const auto t0       = std::chrono::steady_clock::now();
        ucs_status_t status = retry([&] {
            return uct_ep_put_zcopy(m_ep, &iov, 1, remote, rkey, &done.comp);
        });
        ASSERT_TRUE(status == UCS_OK || status == UCS_INPROGRESS)
                << ucs_status_string(status);
        if (status == UCS_INPROGRESS) {
            ASSERT_TRUE(progress_until([&] { return done.calls > 0; }, 300s))
                    << "a put of " << len / mib << " MiB did not complete";
            ASSERT_EQ(done.status, UCS_OK) << ucs_status_string(done.status);
        }
        ASSERT_EQ(flush_ep(m_ep), UCS_OK);
        const double s = seconds_since(t0);
        std::printf("[ INFO     ] put_zcopy of %zu MiB: %.2f s, %.1f MB/s\n",
                    len / mib, s, len / s / 1e6);
        EXPECT_EQ(mismatch(target.bytes(), len, seed), npos)
                << "the " << len / mib << " MiB put differs at this byte";
    }
    EXPECT_TRUE(m_errors.calls.empty());
}

TEST_F(uct_rvt_large, a_stripe_min_below_two_pages_is_refused)
{
    m_env.set("UCX_RVT_STRIPE_MIN", "4k");
    ASSERT_NO_FATAL_FAILURE(start_agent());
    ASSERT_NO_FATAL_FAILURE(open_md());
    ASSERT_NO_FATAL_FAILURE(open_iface(m_oi, UCS_ERR_INVALID_PARAM));
}

/* Striping (engine.h): a put from UCX_RVT_STRIPE_MIN up is split by the
 * agent, one below is not; both land whole and complete once. */
TEST_F(uct_rvt_large, puts_from_stripe_min_up_are_split_by_the_agent)
{
    constexpr size_t kib = 1024;
    m_env.set("UCX_RVT_STRIPE_MIN", "64k");
    ASSERT_NO_FATAL_FAILURE(open_route(route_kind::other_node));
    if (IsSkipped()) {
        return;
    }
    auto striped = [&] {
        auto st = rvt::client::query_status(m_socket, false);
        EXPECT_TRUE(st.ok()) << st.error();
        const auto j = nlohmann::json::parse(st.ok() ? st.value() : "{}",
                                             nullptr, false);
        return j.is_object() && j.contains("data_path") ?
                       j["data_path"].value("striped_ops", -1) :
                       -1;
    };
    const int before = striped();
    ASSERT_GE(before, 0) << "no striped_ops in the agent's status";
    buffer src(m_md, 1024 * kib + 100);
    buffer target(m_to_md, 1024 * kib + 100);
    ASSERT_NE(src.memh, nullptr);
    ASSERT_NE(target.memh, nullptr);
    const uct_rkey_t rkey = rkey_of(target);
    const auto remote     = reinterpret_cast<uint64_t>(target.bytes());
    int expected          = before;
    for (const size_t len : {1024 * kib + 100, 64 * kib, 64 * kib - 1}) {
        const uint64_t seed = 9200 + len;
        fill(src.bytes(), len, seed);
        call_counter done;
        uct_iov_t iov       = src.iov(len);
        ucs_status_t status = retry([&] {
            return uct_ep_put_zcopy(m_ep, &iov, 1, remote, rkey, &done.comp);
        });
        ASSERT_EQ(status, UCS_INPROGRESS) << ucs_status_string(status);
        ASSERT_TRUE(progress_until([&] { return done.calls > 0; }, 60s));
        EXPECT_EQ(done.calls, 1) << "one completion per put";
        ASSERT_EQ(done.status, UCS_OK) << ucs_status_string(done.status);
        ASSERT_EQ(flush_ep(m_ep), UCS_OK);
        EXPECT_EQ(mismatch(target.bytes(), len, seed), npos)
                << "the put of " << len << " bytes differs at this byte";
        expected += len >= 64 * kib ? 1 : 0;
        EXPECT_EQ(striped(), expected) << "after a put of " << len << " bytes";
    }
    EXPECT_TRUE(m_errors.calls.empty());
}

TEST_F(uct_rvt_large, max_zcopy_bounds_a_put)
{
    constexpr size_t mib = 1024 * 1024;
    m_env.set("UCX_RVT_MAX_ZCOPY", "1m");
    ASSERT_NO_FATAL_FAILURE(open_route(route_kind::self));
    EXPECT_EQ(m_attr.cap.put.max_zcopy, mib);
    EXPECT_EQ(m_attr.cap.get.max_zcopy, mib);
    buffer src(m_md, 2 * mib);
    buffer target(m_to_md, 2 * mib);
    ASSERT_NE(src.memh, nullptr);
    ASSERT_NE(target.memh, nullptr);
    const uct_rkey_t rkey = rkey_of(target);
    const auto remote     = reinterpret_cast<uint64_t>(target.bytes());
    call_counter done;
    uct_iov_t iov = src.iov(mib + 1);
    EXPECT_EQ(uct_ep_put_zcopy(m_ep, &iov, 1, remote, rkey, &done.comp),
              UCS_ERR_INVALID_PARAM);
    EXPECT_EQ(uct_ep_get_zcopy(m_ep, &iov, 1, remote, rkey, &done.comp),
              UCS_ERR_INVALID_PARAM);
    EXPECT_EQ(done.calls, 0);
    fill(src.bytes(), mib, 9100);
    iov                 = src.iov(mib);
    ucs_status_t status = retry([&] {
        return uct_ep_put_zcopy(m_ep, &iov, 1, remote, rkey, &done.comp);
    });
    ASSERT_TRUE(status == UCS_OK || status == UCS_INPROGRESS);
    EXPECT_EQ(flush_ep(m_ep), UCS_OK);
    EXPECT_EQ(mismatch(target.bytes(), mib, 9100), npos);
}
