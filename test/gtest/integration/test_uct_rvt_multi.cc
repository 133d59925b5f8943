/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Several rvt interfaces per memory domain (uct/agent_link.h: the first
 * interface takes the MD's attachment, each further one a sibling of its
 * own): 4 interfaces of one MD on this node's device exchange with 4
 * interfaces of one MD on the next node's device (its own agent and rxe,
 * through the bridge), one thread per pair, each driving its two workers
 * alone; active messages both ways and zero-copy puts into the peer's
 * registered memory, every byte verified, and the agents' word that each
 * process holds one leader and three siblings.
 */
#include "uct_rvt_route.h"

#include <atomic>
#include <thread>

namespace rvt::test {
namespace {

constexpr size_t n_pairs = 4;
constexpr int n_ams      = 64; /* per direction and pair */
constexpr size_t put_len = 256 * 1024;

/* The agent's attached clients of this process: how many, and how many
 * of them are siblings of another. */
std::pair<int, int> attachments_of_me(const std::string &socket)
{
    auto st = rvt::client::query_status(socket, false);
    if (!st) {
        ADD_FAILURE() << st.error();
        return {-1, -1};
    }
    const auto j = nlohmann::json::parse(st.value(), nullptr, false);
    int mine = 0, siblings = 0;
    for (const auto &c : j.value("clients", nlohmann::json::array())) {
        if (c.value("pid", -1) == getpid()) {
            ++mine;
            siblings += !c["sibling_of"].is_null();
        }
    }
    return {mine, siblings};
}

/* One side of a pair: an interface, what it received, its memory. */
struct side {
    opened_iface oi;
    std::vector<std::string> received;
    std::unique_ptr<buffer> src, dst;
    uct_ep_h ep     = nullptr;
    uct_rkey_t rkey = 0; /* of the other side's dst */
};

class uct_rvt_multi : public uct_rvt_route {
protected:
    void TearDown() override
    {
        for (auto *sides : {&m_a, &m_b}) {
            for (auto &s : *sides) {
                if (s.ep != nullptr) {
                    uct_ep_destroy(s.ep);
                }
                s.src.reset();
                s.dst.reset();
                s.oi.close();
            }
        }
        if (m_md_b != nullptr) {
            uct_md_close(m_md_b);
        }
        uct_rvt_route::TearDown();
    }

    /* Sends n_ams AMs and one put from `from` to `to`, seeds by pair and
     * direction; progresses both workers (this thread owns them). */
    static std::string exchange(side &from, side &to, uint64_t seed)
    {
        const size_t seg = 1024;
        for (int k = 0; k < n_ams; ++k) {
            std::string msg = pattern(seg - 8 * (k % 8), seed * 1000 + k);
            ssize_t n;
            auto until = std::chrono::steady_clock::now() + 30s;
            while ((n = uct_ep_am_bcopy(from.ep, am_id, pack_pattern, &msg,
                                        0)) == UCS_ERR_NO_RESOURCE) {
                if (std::chrono::steady_clock::now() > until) {
                    return "AM " + std::to_string(k) + ": no room for 30 s";
                }
                uct_worker_progress(from.oi.worker);
                uct_worker_progress(to.oi.worker);
            }
            if (n < 0) {
                return "AM " + std::to_string(k) + ": " +
                       ucs_status_string(static_cast<ucs_status_t>(n));
            }
        }
        fill(from.src->bytes(), put_len, seed);
        counted_completion put;
        uct_iov_t iov = from.src->iov(put_len);
        ucs_status_t status;
        auto until = std::chrono::steady_clock::now() + 30s;
        while ((status = uct_ep_put_zcopy(
                        from.ep, &iov, 1,
                        reinterpret_cast<uint64_t>(to.dst->bytes()), from.rkey,
                        &put.comp)) == UCS_ERR_NO_RESOURCE &&
               std::chrono::steady_clock::now() < until) {
            uct_worker_progress(from.oi.worker);
            uct_worker_progress(to.oi.worker);
        }
        if (status != UCS_OK && status != UCS_INPROGRESS) {
            return std::string("put: ") + ucs_status_string(status);
        }
        until = std::chrono::steady_clock::now() + 60s;
        while ((status == UCS_INPROGRESS && !put.finished()) ||
               to.received.size() < static_cast<size_t>(n_ams)) {
            if (std::chrono::steady_clock::now() > until) {
                return "after 60 s: " + std::to_string(to.received.size()) +
                       " of " + std::to_string(n_ams) + " AMs, put " +
                       (put.finished() ? "done" : "not done");
            }
            uct_worker_progress(from.oi.worker);
            uct_worker_progress(to.oi.worker);
        }
        if (put.comp.status != UCS_OK) {
            return std::string("put completed with ") +
                   ucs_status_string(put.comp.status);
        }
        for (int k = 0; k < n_ams; ++k) {
            if (to.received[k] != pattern(seg - 8 * (k % 8), seed * 1000 + k)) {
                return "AM " + std::to_string(k) + " arrived changed";
            }
        }
        if (size_t at = mismatch(to.dst->bytes(), put_len, seed); at != npos) {
            return "put: byte " + std::to_string(at) + " differs";
        }
        return {};
    }

    std::vector<side> m_a = std::vector<side>(n_pairs);
    std::vector<side> m_b = std::vector<side>(n_pairs);
    uct_md_h m_md_b       = nullptr;
};

TEST_F(uct_rvt_multi,
       four_interfaces_of_an_md_exchange_with_four_on_another_node)
{
    const std::string dev_b = other_device();
    if (dev_b.empty()) {
        GTEST_SKIP() << "no second rvt device for another node";
    }
    ASSERT_NO_FATAL_FAILURE(start_agent());
    const std::string base_b = m_runtime + "/b";
    start_agent_at(base_b, uct_job_key, {}, dev_b);
    ASSERT_NO_FATAL_FAILURE(open_md());
    for (auto &s : m_a) {
        ASSERT_NO_FATAL_FAILURE(open_iface(s.oi));
        ASSERT_NE(s.oi.iface, nullptr);
    }
    /* the other node's MD attaches (its leader and its siblings) while the
     * environment names its agent */
    m_env.set("XDG_RUNTIME_DIR", base_b);
    m_md_b = open_md_handle(dev_b);
    ASSERT_NE(m_md_b, nullptr);
    for (auto &s : m_b) {
        ASSERT_NO_FATAL_FAILURE(
                open_iface_on(m_md_b, s.oi, UCS_OK, {nullptr, nullptr, dev_b}));
        ASSERT_NE(s.oi.iface, nullptr);
    }
    m_env.set("XDG_RUNTIME_DIR", m_runtime);

    for (size_t p = 0; p < n_pairs; ++p) {
        for (auto [s, md] : {std::pair{&m_a[p], m_md}, {&m_b[p], m_md_b}}) {
            ASSERT_EQ(uct_iface_set_am_handler(s->oi.iface, am_id, keep_am,
                                               &s->received, 0),
                      UCS_OK);
            s->src = std::make_unique<buffer>(md, put_len);
            s->dst = std::make_unique<buffer>(md, put_len);
            ASSERT_TRUE(s->src->memh != UCT_MEM_HANDLE_NULL);
            ASSERT_TRUE(s->dst->memh != UCT_MEM_HANDLE_NULL);
            std::memset(s->dst->bytes(), 0, put_len);
        }
        iface_addresses to_b = addresses_of(m_b[p].oi.iface);
        iface_addresses to_a = addresses_of(m_a[p].oi.iface);
        m_a[p].ep            = connect_ep(m_a[p].oi.iface, to_b);
        m_b[p].ep            = connect_ep(m_b[p].oi.iface, to_a);
        ASSERT_NE(m_a[p].ep, nullptr);
        ASSERT_NE(m_b[p].ep, nullptr);
        m_a[p].rkey = rkey_of(*m_b[p].dst);
        m_b[p].rkey = rkey_of(*m_a[p].dst);
    }
    uct_iface_attr_t attr{};
    ASSERT_EQ(uct_iface_query(m_a[0].oi.iface, &attr), UCS_OK);
    ASSERT_GE(attr.cap.am.max_bcopy, 1024u);
    /* every interface has an address of its own */
    for (size_t p = 0; p < n_pairs; ++p) {
        for (size_t q = p + 1; q < n_pairs; ++q) {
            EXPECT_NE(addresses_of(m_a[p].oi.iface).iface,
                      addresses_of(m_a[q].oi.iface).iface);
        }
    }

    std::vector<std::string> errors(n_pairs);
    std::vector<std::thread> threads;
    for (size_t p = 0; p < n_pairs; ++p) {
        threads.emplace_back([&, p] {
            std::string e = exchange(m_a[p], m_b[p], 2 * p + 1);
            if (e.empty()) {
                e = exchange(m_b[p], m_a[p], 2 * p + 2);
            }
            errors[p] = e;
        });
    }
    for (auto &t : threads) {
        t.join();
    }
    for (size_t p = 0; p < n_pairs; ++p) {
        EXPECT_EQ(errors[p], "") << "pair " << p;
    }

    /* each agent: this process holds one leader (the MD's) and three
     * siblings, one per further interface */
    EXPECT_EQ(attachments_of_me(m_socket), std::make_pair(4, 3));
    EXPECT_EQ(attachments_of_me(socket_of(base_b, uct_job_key, dev_b)),
              std::make_pair(4, 3));
}

} // namespace
} // namespace rvt::test
