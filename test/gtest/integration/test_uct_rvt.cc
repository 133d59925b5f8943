/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Integration test of the UCX module (libuct_rvt.so) through UCT's public
 * API, with a real agent on a real device (the testbed): the component
 * lists the device; the MD registers memory into the agent's PD (the
 * agent's status shows the MRs), through the registration cache (released
 * when the memory is unmapped) or directly; packed rkeys unpack to the
 * MR's rkey; the interface reports its capabilities and addresses, starts
 * the agent when none runs, and moves data to itself through the agent's
 * loopback: active messages (short, bcopy, zcopy), puts (short, bcopy,
 * zcopy) and get zcopy, with flush, in order, through the pending queue,
 * and waking a sleeper. uct_rvt_fixture.h loads the module and says what
 * the environment may set; test_uct_rvt_semantics.cc tests the semantics
 * of the operations in more depth, and failures.
 */
#include "uct_rvt_fixture.h"

#include <nlohmann/json.hpp>

#include <poll.h>
#include <sys/mman.h>

#include <gtest/gtest.h>
#include <uct/api/uct.h>
#include <uct/api/v2/uct_v2.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace rvt::test;

namespace {

class uct_rvt : public uct_rvt_fixture {};

/* A pending request that sends one empty active message. */
struct pending_send {
    uct_pending_req_t req;
    uct_ep_h ep;
    bool done = false;

    static ucs_status_t run(uct_pending_req_t *self)
    {
        auto *p             = reinterpret_cast<pending_send *>(self);
        ucs_status_t status = uct_ep_am_short(p->ep, 5, 7, nullptr, 0);
        p->done             = status == UCS_OK;
        return status;
    }
};

} // namespace

TEST_F(uct_rvt, component_lists_the_device_and_its_settings)
{
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    ASSERT_EQ(uct_component_query(m_component, &attr), UCS_OK);
    std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
    attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = mds.data();
    ASSERT_EQ(uct_component_query(m_component, &attr), UCS_OK);
    bool found = false;
    for (const auto &md : mds) {
        found = found || m_dev == md.md_name;
    }
    EXPECT_TRUE(found) << m_dev << " is not among the " << mds.size()
                       << " rvt memory domains";

    uct_md_config_t *config;
    ASSERT_EQ(uct_md_config_read(m_component, nullptr, nullptr, &config),
              UCS_OK);
    char value[64];
    EXPECT_EQ(uct_config_get(config, "JOB_KEY", value, sizeof(value)), UCS_OK);
    EXPECT_STREQ(value, uct_job_key);
    EXPECT_EQ(uct_config_get(config, "REG_METHODS", value, sizeof(value)),
              UCS_OK);
    EXPECT_STREQ(value, "rcache,direct");
    uct_config_release(config);
}

TEST_F(uct_rvt, md_registers_through_the_cache_and_unmap_releases)
{
    start_agent();
    open_md();
    uct_md_attr_t attr;
    ASSERT_EQ(uct_md_query(m_md, &attr), UCS_OK);
    EXPECT_EQ(attr.cap.flags & (UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_RKEY),
              UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_RKEY);
    EXPECT_FALSE(attr.cap.flags & UCT_MD_FLAG_ALLOC);
    /* no allocation, so no limit of ours: UCX's UCT tests size their
     * buffers by it (uct_p2p_test), and 0 trimmed every sweep to nothing */
    EXPECT_EQ(attr.cap.max_alloc, ULONG_MAX);
    /* zcopy needs a local registration: without NEED_MEMH UCP skips it,
     * and a rendezvous receiver's get_zcopy arrives without a memh */
    EXPECT_TRUE(attr.cap.flags & UCT_MD_FLAG_NEED_MEMH);
    EXPECT_EQ(attr.rkey_packed_size, 4u);
    EXPECT_STREQ(attr.component_name, "rvt");
    EXPECT_GT(attr.reg_cost.c, 0);

    const size_t len = 1 << 20;
    void *addr       = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(addr, MAP_FAILED);
    uct_mem_h memh;
    ASSERT_EQ(uct_md_mem_reg(m_md, addr, len, UCT_MD_MEM_ACCESS_ALL, &memh),
              UCS_OK);
    EXPECT_EQ(agent_mrs(), 1);

    /* the same buffer again: a cache hit, no second MR */
    uct_mem_h again;
    ASSERT_EQ(uct_md_mem_reg(m_md, addr, len / 2, UCT_MD_MEM_ACCESS_ALL,
                             &again),
              UCS_OK);
    EXPECT_EQ(agent_mrs(), 1);

    std::vector<char> packed(attr.rkey_packed_size);
    ASSERT_EQ(uct_md_mkey_pack(m_md, memh, packed.data()), UCS_OK);
    uint32_t rkey;
    std::memcpy(&rkey, packed.data(), sizeof(rkey));
    uct_rkey_bundle_t bundle;
    ASSERT_EQ(uct_rkey_unpack(m_component, packed.data(), &bundle), UCS_OK);
    EXPECT_EQ(bundle.rkey, uct_rkey_t{rkey});
    EXPECT_EQ(uct_rkey_release(m_component, &bundle), UCS_OK);

    EXPECT_EQ(uct_md_mem_dereg(m_md, again), UCS_OK);
    EXPECT_EQ(uct_md_mem_dereg(m_md, memh), UCS_OK);
    EXPECT_EQ(agent_mrs(), 1) << "the cache keeps the registration";

    /* unmapping invalidates it (UCS memory hooks); the cache deregisters
     * at its next operation: registering another buffer */
    ASSERT_EQ(munmap(addr, len), 0);
    std::vector<char> other(4096);
    uct_mem_h other_memh;
    ASSERT_EQ(uct_md_mem_reg(m_md, other.data(), other.size(),
                             UCT_MD_MEM_ACCESS_ALL, &other_memh),
              UCS_OK);
    EXPECT_EQ(agent_mrs(), 1) << "the unmapped buffer's MR is still there";
    EXPECT_EQ(uct_md_mem_dereg(m_md, other_memh), UCS_OK);
}

TEST_F(uct_rvt, md_registers_directly)
{
    start_agent();
    open_md("direct");
    std::vector<char> memory(64 * 1024);
    uct_mem_h memh;
    ASSERT_EQ(uct_md_mem_reg(m_md, memory.data(), memory.size(),
                             UCT_MD_MEM_ACCESS_ALL, &memh),
              UCS_OK);
    EXPECT_EQ(agent_mrs(), 1);
    EXPECT_EQ(uct_md_mem_dereg(m_md, memh), UCS_OK);
    EXPECT_EQ(agent_mrs(), 0);
}

/* Registered memory is pinned, so advice on it is answered at once;
 * what the caller can get wrong is refused, naming it. */
TEST_F(uct_rvt, md_advice_on_registered_memory)
{
    start_agent();
    open_md("rcache");
    uct_md_attr_t attr{};
    ASSERT_EQ(uct_md_query(m_md, &attr), UCS_OK);
    EXPECT_TRUE(attr.cap.flags & UCT_MD_FLAG_ADVISE);
    std::vector<char> memory(256 * 1024);
    uct_mem_h memh;
    ASSERT_EQ(uct_md_mem_reg(m_md, memory.data(), memory.size(),
                             UCT_MD_MEM_ACCESS_ALL, &memh),
              UCS_OK);
    EXPECT_EQ(uct_md_mem_advise(m_md, memh, memory.data() + 7, 32 * 1024,
                                UCT_MADV_WILLNEED),
              UCS_OK);
    EXPECT_EQ(uct_md_mem_advise(m_md, memh, memory.data(), memory.size(),
                                UCT_MADV_NORMAL),
              UCS_OK);
    {
        log_capture log;
        EXPECT_EQ(uct_md_mem_advise(m_md, memh, memory.data() + 4096,
                                    memory.size() * 2, UCT_MADV_WILLNEED),
                  UCS_ERR_INVALID_PARAM);
        EXPECT_EQ(uct_md_mem_advise(m_md, memh, memory.data(), 64,
                                    static_cast<uct_mem_advice_t>(7)),
                  UCS_ERR_INVALID_PARAM);
        EXPECT_TRUE(log.any_containing("not inside the registration"));
        EXPECT_TRUE(log.any_containing("advice 7"));
    }
    EXPECT_EQ(uct_md_mem_dereg(m_md, memh), UCS_OK);
}

/* A process that deregisters a buffer while a put from it is still in
 * the agent (queued or on the QP) breaks UCT's rules, but must not break
 * the QP every process of the node shares: the agent keeps the MR until
 * the op is done (status: mrs_deferred), and the put completes. */
TEST_F(uct_rvt, md_dereg_under_an_op_in_flight_waits_for_the_op)
{
    start_agent();
    open_md("direct");
    opened_iface oi;
    open_iface(oi);
    iface_addresses self = addresses_of(oi.iface);
    uct_ep_h ep          = connect_ep(oi.iface, self);
    ASSERT_NE(ep, nullptr);

    const size_t len = 32 << 20;
    buffer target(m_md, len), source(m_md, len);
    ASSERT_NE(target.memh, nullptr);
    ASSERT_NE(source.memh, nullptr);
    std::memset(source.addr, 'S', len);
    std::vector<char> packed(16);
    ASSERT_EQ(uct_md_mkey_pack(m_md, target.memh, packed.data()), UCS_OK);
    uct_rkey_bundle_t rkey;
    ASSERT_EQ(uct_rkey_unpack(m_component, packed.data(), &rkey), UCS_OK);

    uct_iov_t iov{source.addr, len, source.memh, 0, 1};
    counted_completion c;
    ucs_status_t status = uct_ep_put_zcopy(ep, &iov, 1,
                                           reinterpret_cast<uint64_t>(
                                                   target.bytes()),
                                           rkey.rkey, &c.comp);
    ASSERT_EQ(status, UCS_INPROGRESS);
    ASSERT_EQ(uct_md_mem_dereg(m_md, source.memh), UCS_OK);
    source.memh = UCT_MEM_HANDLE_NULL;
    ASSERT_TRUE(oi.progress_until([&] { return c.finished(); }));
    EXPECT_EQ(c.comp.status, UCS_OK);
    EXPECT_EQ(std::memcmp(target.addr, source.addr, len), 0);

    auto st = rvt::client::query_status(m_socket, false);
    ASSERT_TRUE(st.ok()) << st.error();
    const auto agent_status = nlohmann::json::parse(st.value(), nullptr, false);
    ASSERT_FALSE(agent_status.is_discarded()) << st.value();
    EXPECT_EQ(agent_status["data_path"].value("mrs_deferred", -1), 1)
            << st.value();
    EXPECT_EQ(agent_status["data_path"].value("releases_waiting", -1), 0)
            << st.value();

    /* and the QPs still carry work */
    counted_completion again;
    uct_iov_t small{target.addr, 4096, target.memh, 0, 1};
    status = uct_ep_put_zcopy(ep, &small, 1,
                              reinterpret_cast<uint64_t>(target.bytes()) + 4096,
                              rkey.rkey, &again.comp);
    ASSERT_TRUE(status == UCS_OK || status == UCS_INPROGRESS);
    if (status == UCS_INPROGRESS) {
        ASSERT_TRUE(oi.progress_until([&] { return again.finished(); }));
        EXPECT_EQ(again.comp.status, UCS_OK);
    }
    EXPECT_EQ(uct_rkey_release(m_component, &rkey), UCS_OK);
    uct_ep_destroy(ep);
}

namespace {

/* The parameters of a deregistration with invalidate, completing `c`. */
uct_md_mem_dereg_params_t
invalidating_dereg(uct_mem_h memh, counted_completion &c)
{
    uct_md_mem_dereg_params_t params{};
    params.field_mask = UCT_MD_MEM_DEREG_FIELD_MEMH |
                        UCT_MD_MEM_DEREG_FIELD_FLAGS |
                        UCT_MD_MEM_DEREG_FIELD_COMPLETION;
    params.memh  = memh;
    params.flags = UCT_MD_MEM_DEREG_FLAG_INVALIDATE;
    params.comp  = &c.comp;
    return params;
}

} // namespace

/* Deregistering with UCT_MD_MEM_DEREG_FLAG_INVALIDATE (UCP asks for it
 * when a peer may have failed): the completion must not come before the
 * agent has deregistered the MR, since until then a peer holding the rkey
 * can still write. The agent is stopped (SIGSTOP) while the module
 * deregisters, so a completion that does not wait for it shows at once. */
TEST_F(uct_rvt, md_invalidate_completes_only_after_the_agent_dropped_the_mr)
{
    start_agent();
    for (const char *method : {"rcache", "direct"}) {
        SCOPED_TRACE(method);
        reopen_md(method);
        uct_md_attr_t attr;
        ASSERT_EQ(uct_md_query(m_md, &attr), UCS_OK);
        EXPECT_TRUE(attr.cap.flags & UCT_MD_FLAG_INVALIDATE);

        std::vector<char> memory(64 * 1024);
        uct_mem_h memh;
        ASSERT_EQ(uct_md_mem_reg(m_md, memory.data(), memory.size(),
                                 UCT_MD_MEM_ACCESS_ALL, &memh),
                  UCS_OK);
        ASSERT_EQ(agent_mrs(), 1);

        counted_completion c;
        uct_md_mem_dereg_params_t params = invalidating_dereg(memh, c);
        ASSERT_EQ(kill(m_agent, SIGSTOP), 0);
        ucs_status_t status = UCS_ERR_LAST;
        std::thread dereg([&] { status = uct_md_mem_dereg_v2(m_md, &params); });
        std::this_thread::sleep_for(500ms);
        EXPECT_FALSE(c.finished())
                << "invalidation completed while the agent was stopped";
        ASSERT_EQ(kill(m_agent, SIGCONT), 0);
        dereg.join();
        EXPECT_EQ(status, UCS_OK);
        EXPECT_TRUE(c.finished());
        EXPECT_EQ(c.comp.status, UCS_OK);
        EXPECT_EQ(agent_mrs(), 0);
    }

    /* without a completion to call there is nothing to wait on: refused */
    std::vector<char> memory(4096);
    uct_mem_h memh;
    ASSERT_EQ(uct_md_mem_reg(m_md, memory.data(), memory.size(),
                             UCT_MD_MEM_ACCESS_ALL, &memh),
              UCS_OK);
    uct_md_mem_dereg_params_t params{};
    params.field_mask = UCT_MD_MEM_DEREG_FIELD_MEMH |
                        UCT_MD_MEM_DEREG_FIELD_FLAGS;
    params.memh  = memh;
    params.flags = UCT_MD_MEM_DEREG_FLAG_INVALIDATE;
    {
        /* quietly, as UCX's own MDs refuse it (a caller's mistake that
         * the status reports; UCX's gtest fails a test that logs) */
        log_capture log;
        EXPECT_EQ(uct_md_mem_dereg_v2(m_md, &params), UCS_ERR_INVALID_PARAM);
        EXPECT_TRUE(log.lines().empty()) << log.lines().front();
    }
    EXPECT_EQ(uct_md_mem_dereg(m_md, memh), UCS_OK);
}

/* An invalidation the agent does not confirm (here: stopped past
 * UCX_RVT_CONNECT_TIMEOUT) must not be reported as done: a peer holding
 * the rkey may still write. Through the cache the completion carries the
 * error (the cache's own callback has no status); the direct path returns
 * it and calls no completion. */
TEST_F(uct_rvt, md_invalidate_the_agent_does_not_confirm_reports_an_error)
{
    start_agent();
    m_env.set("UCX_RVT_CONNECT_TIMEOUT", "1s");
    for (const char *method : {"rcache", "direct"}) {
        SCOPED_TRACE(method);
        reopen_md(method);
        std::vector<char> memory(64 * 1024);
        uct_mem_h memh;
        ASSERT_EQ(uct_md_mem_reg(m_md, memory.data(), memory.size(),
                                 UCT_MD_MEM_ACCESS_ALL, &memh),
                  UCS_OK);
        counted_completion c;
        uct_md_mem_dereg_params_t params = invalidating_dereg(memh, c);
        ASSERT_EQ(kill(m_agent, SIGSTOP), 0);
        const ucs_status_t status = uct_md_mem_dereg_v2(m_md, &params);
        ASSERT_EQ(kill(m_agent, SIGCONT), 0);
        if (std::string_view(method) == "rcache") {
            EXPECT_EQ(status, UCS_OK);
            ASSERT_TRUE(c.finished());
            EXPECT_EQ(c.comp.status, UCS_ERR_IO_ERROR)
                    << ucs_status_string(c.comp.status);
        } else {
            EXPECT_EQ(status, UCS_ERR_IO_ERROR) << ucs_status_string(status);
            EXPECT_FALSE(c.finished());
        }
    }
}

/* The registration cache must not hand out the MR of pages that are gone:
 * the same address, unmapped and mapped again with other pages, must move
 * the new pages' bytes (a stale MR would still pin, and send, the old). */
TEST_F(uct_rvt, md_cache_follows_memory_remapped_at_the_same_address)
{
    start_agent();
    open_md();
    opened_iface oi;
    open_iface(oi);
    iface_addresses self = addresses_of(oi.iface);
    uct_ep_h ep          = connect_ep(oi.iface, self);
    ASSERT_NE(ep, nullptr);

    buffer target(m_md, 1 << 20);
    ASSERT_NE(target.memh, nullptr);
    std::vector<char> packed(16);
    ASSERT_EQ(uct_md_mkey_pack(m_md, target.memh, packed.data()), UCS_OK);
    uct_rkey_bundle_t rkey;
    ASSERT_EQ(uct_rkey_unpack(m_component, packed.data(), &rkey), UCS_OK);

    const size_t len = 256 * 1024;
    /* registers src (through the cache), puts it into target, and
     * deregisters (the cache keeps the region) */
    auto put_through_cache = [&](void *src) {
        uct_mem_h memh;
        ASSERT_EQ(uct_md_mem_reg(m_md, src, len, UCT_MD_MEM_ACCESS_ALL, &memh),
                  UCS_OK);
        uct_iov_t iov{src, len, memh, 0, 1};
        counted_completion c;
        ucs_status_t status;
        while ((status = uct_ep_put_zcopy(
                        ep, &iov, 1, reinterpret_cast<uint64_t>(target.bytes()),
                        rkey.rkey, &c.comp)) == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(oi.worker);
        }
        ASSERT_TRUE(status == UCS_OK || status == UCS_INPROGRESS)
                << ucs_status_string(status);
        if (status == UCS_INPROGRESS) {
            ASSERT_TRUE(oi.progress_until([&] { return c.finished(); }));
            ASSERT_EQ(c.comp.status, UCS_OK);
        }
        EXPECT_EQ(uct_md_mem_dereg(m_md, memh), UCS_OK);
    };

    void *src = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(src, MAP_FAILED);
    std::memset(src, 'A', len);
    put_through_cache(src);
    ASSERT_EQ(std::string(target.bytes(), len), std::string(len, 'A'));

    ASSERT_EQ(munmap(src, len), 0);
    void *again = mmap(src, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    ASSERT_EQ(again, src) << "the test needs the same address back";
    std::memset(again, 'B', len);
    put_through_cache(again);
    EXPECT_EQ(std::string(target.bytes(), len), std::string(len, 'B'))
            << "the cache answered with the unmapped pages' registration";

    EXPECT_EQ(munmap(again, len), 0);
    EXPECT_EQ(uct_rkey_release(m_component, &rkey), UCS_OK);
    uct_ep_destroy(ep);
}

TEST_F(uct_rvt, no_agent_no_device_unless_it_may_start_one)
{
    open_md();
    uct_tl_resource_desc_t *resources;
    unsigned count;
    ASSERT_EQ(uct_md_query_tl_resources(m_md, &resources, &count), UCS_OK);
    EXPECT_EQ(count, 0u) << "no agent runs and UCX_RVT_START_AGENT=n";
    uct_release_tl_resource_list(resources);
}

TEST_F(uct_rvt, iface_describes_itself)
{
    start_agent();
    open_md();
    uct_tl_resource_desc_t *resources;
    unsigned count;
    ASSERT_EQ(uct_md_query_tl_resources(m_md, &resources, &count), UCS_OK);
    ASSERT_EQ(count, 1u);
    EXPECT_STREQ(resources[0].tl_name, "rvt");
    EXPECT_EQ(std::string(resources[0].dev_name), m_dev + ":1");
    EXPECT_EQ(resources[0].dev_type, UCT_DEVICE_TYPE_NET);
    uct_release_tl_resource_list(resources);

    {
        opened_iface oi;
        open_iface(oi);
        ASSERT_NE(oi.iface, nullptr);
        EXPECT_EQ(agent_mrs(), 1) << "the bounce buffers";

        uct_iface_attr_t attr;
        ASSERT_EQ(uct_iface_query(oi.iface, &attr), UCS_OK);
        const uint64_t want = UCT_IFACE_FLAG_AM_SHORT |
                              UCT_IFACE_FLAG_AM_BCOPY |
                              UCT_IFACE_FLAG_AM_ZCOPY |
                              UCT_IFACE_FLAG_PUT_SHORT |
                              UCT_IFACE_FLAG_PUT_BCOPY |
                              UCT_IFACE_FLAG_PUT_ZCOPY |
                              UCT_IFACE_FLAG_GET_BCOPY |
                              UCT_IFACE_FLAG_GET_ZCOPY |
                              UCT_IFACE_FLAG_PENDING | UCT_IFACE_FLAG_CB_SYNC |
                              UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                              UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE;
        EXPECT_EQ(attr.cap.flags & want, want);
        EXPECT_EQ(attr.iface_addr_len, 36u);
        EXPECT_EQ(attr.device_addr_len, 16u);
        EXPECT_EQ(attr.ep_addr_len, 0u);
        EXPECT_EQ(attr.cap.am.max_short, 8192u);
        EXPECT_EQ(attr.cap.am.max_bcopy, 8192u);
        EXPECT_EQ(attr.cap.am.max_hdr, 128u); /* am_zcopy's, gathered */
        /* UCP takes an RMA lane only with get_bcopy as well */
        EXPECT_EQ(attr.cap.get.max_bcopy, 8192u);
        EXPECT_GT(attr.cap.put.max_zcopy, 1u << 20);
        EXPECT_GT(attr.latency.c, 0);
        EXPECT_GT(attr.bandwidth.shared, 0);

        std::vector<char> dev_addr(attr.device_addr_len);
        std::vector<char> iface_addr(attr.iface_addr_len);
        ASSERT_EQ(uct_iface_get_device_address(
                          oi.iface, reinterpret_cast<uct_device_addr_t *>(
                                            dev_addr.data())),
                  UCS_OK);
        ASSERT_EQ(uct_iface_get_address(oi.iface,
                                        reinterpret_cast<uct_iface_addr_t *>(
                                                iface_addr.data())),
                  UCS_OK);
        EXPECT_TRUE(uct_iface_is_reachable(
                oi.iface,
                reinterpret_cast<uct_device_addr_t *>(dev_addr.data()),
                reinterpret_cast<uct_iface_addr_t *>(iface_addr.data())));
        std::vector<char> garbage(attr.iface_addr_len, 0);
        EXPECT_FALSE(uct_iface_is_reachable(
                oi.iface,
                reinterpret_cast<uct_device_addr_t *>(dev_addr.data()),
                reinterpret_cast<uct_iface_addr_t *>(garbage.data())));

        /* a second interface of the MD attaches on its own (a sibling of
         * the MD's attachment): its own client index in its address */
        opened_iface second;
        open_iface(second);
        ASSERT_NE(second.iface, nullptr);
        iface_addresses first_at  = addresses_of(oi.iface);
        iface_addresses second_at = addresses_of(second.iface);
        EXPECT_NE(first_at.iface, second_at.iface);
    }
    EXPECT_EQ(agent_mrs(), 0) << "closing deregisters the bounce buffers";
}

/* The AM alignment parameters are checked as UCX's transports check
 * them: a power of 2, an offset only with it; an offset not below the
 * alignment is ignored, as UCP asks for offset 8 whatever the alignment.
 * (rvt hands AM data to the handler in place, never as a descriptor, so
 * a valid alignment has nothing to act on.) */
TEST_F(uct_rvt, iface_checks_the_am_alignment_parameters)
{
    start_agent();
    open_md();
    const uint64_t align  = UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT;
    const uint64_t offset = UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET;
    struct bad_case {
        uint64_t fields;
        size_t alignment, offset;
        const char *named;
    };
    for (const bad_case &c : {bad_case{align, 0, 0, "alignment 0"},
                              bad_case{align, 3, 1, "alignment 3"},
                              bad_case{offset, 0, 11, "offset 11"},
                              bad_case{offset, 8, 8, "offset 8"}}) {
        SCOPED_TRACE(c.named);
        log_capture log;
        opened_iface oi;
        iface_options o;
        o.am_align_fields = c.fields;
        o.am_alignment    = c.alignment;
        o.am_align_offset = c.offset;
        open_iface(oi, UCS_ERR_INVALID_PARAM, o);
        EXPECT_TRUE(log.any_containing(c.named)) << "no error naming it";
    }
    for (const auto &[alignment, off] :
         {std::pair<size_t, size_t>{64, 8}, std::pair<size_t, size_t>{8, 8}}) {
        SCOPED_TRACE(alignment);
        opened_iface good;
        iface_options o;
        o.am_align_fields = align | offset;
        o.am_alignment    = alignment;
        o.am_align_offset = off;
        open_iface(good, UCS_OK, o);
    }
}

TEST_F(uct_rvt, iface_starts_the_agent)
{
    m_env.set("UCX_RVT_START_AGENT", "y");
    m_env.set("UCX_RVT_AGENT", rvt::test::rvtd_path);
    open_md();
    opened_iface oi;
    open_iface(oi);
    EXPECT_TRUE(std::filesystem::exists(m_socket)) << "no agent started";
    EXPECT_EQ(agent_mrs(), 1) << "the bounce buffers";
}

/* UCX_RVT_AGENT_ARGS reach the rvtd the module starts. */
TEST_F(uct_rvt, iface_starts_the_agent_with_the_sites_options)
{
    m_env.set("UCX_RVT_START_AGENT", "y");
    m_env.set("UCX_RVT_AGENT", rvt::test::rvtd_path);
    m_env.set("UCX_RVT_AGENT_ARGS", " --num-qps=2\t--spin-us=123 ");
    open_md();
    opened_iface oi;
    open_iface(oi);
    ASSERT_TRUE(std::filesystem::exists(m_socket)) << "no agent started";
    const std::string key = std::string("--job-key=") + uct_job_key;
    std::string found;
    for (const auto &p : std::filesystem::directory_iterator("/proc")) {
        std::ifstream in(p.path() / "cmdline");
        std::string cmdline((std::istreambuf_iterator<char>(in)), {});
        std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
        if (cmdline.find(key + " ") != std::string::npos &&
            cmdline.find("rvtd") != std::string::npos) {
            found = cmdline;
        }
    }
    EXPECT_NE(found.find(" --num-qps=2 --spin-us=123"), std::string::npos)
            << "the agent's command line: '" << found << "'";
}

/* An agent the module starts with neither MUNGE (its socket names none)
 * nor a job secret does not start, and UCX's log says why and what to
 * do: the default fails closed. */
TEST_F(uct_rvt, an_agent_without_munge_or_a_secret_fails_the_iface_naming_why)
{
    m_env.set("UCX_RVT_START_AGENT", "y");
    m_env.set("UCX_RVT_AGENT", rvt::test::rvtd_path);
    m_env.set("UCX_RVT_AGENT_ARGS", "--munge-socket=/nonexistent/munge");
    m_env.set("UCX_RVT_CONNECT_TIMEOUT", "5s");
    m_env.unset("RVT_JOB_SECRET");
    m_env.unset("RVT_JOB_SECRET_FILE");
    open_md();
    log_capture log;
    opened_iface oi;
    open_iface(oi, UCS_ERR_UNREACHABLE);
    EXPECT_FALSE(std::filesystem::exists(m_socket)) << "an agent started";
    EXPECT_TRUE(log.any_containing("--auth=auto: no way to prove peers: "
                                   "munged does not answer"))
            << testing::PrintToString(log.lines());
    EXPECT_TRUE(
            log.any_containing("--auth=none (UCX_RVT_AGENT_ARGS=--auth=none)"));
}

/* An option only the launcher may give fails the MD, naming it. */
TEST_F(uct_rvt, agent_args_with_a_launchers_option_fail_the_md_naming_it)
{
    m_env.set("UCX_RVT_AGENT_ARGS", "--spin-us=20 --device=mlx5_9");
    log_capture log;
    uct_md_config_t *config;
    ASSERT_EQ(uct_md_config_read(m_component, nullptr, nullptr, &config),
              UCS_OK);
    uct_md_h md         = nullptr;
    ucs_status_t status = uct_md_open(m_component, m_dev.c_str(), config, &md);
    uct_config_release(config);
    EXPECT_EQ(status, UCS_ERR_INVALID_PARAM);
    if (md != nullptr) {
        uct_md_close(md);
    }
    EXPECT_TRUE(log.any_containing(
            "UCX_RVT_AGENT_ARGS: agent option '--device=mlx5_9'"));
}

TEST_F(uct_rvt, moves_data_to_itself_through_the_agent)
{
    start_agent();
    open_md();
    opened_iface oi;
    open_iface(oi);
    uct_iface_attr_t attr;
    ASSERT_EQ(uct_iface_query(oi.iface, &attr), UCS_OK);

    std::vector<std::string> received;
    ASSERT_EQ(uct_iface_set_am_handler(oi.iface, 5, keep_am, &received, 0),
              UCS_OK);
    std::vector<char> dev_addr(attr.device_addr_len);
    std::vector<char> iface_addr(attr.iface_addr_len);
    auto *dev = reinterpret_cast<uct_device_addr_t *>(dev_addr.data());
    auto *ifa = reinterpret_cast<uct_iface_addr_t *>(iface_addr.data());
    ASSERT_EQ(uct_iface_get_device_address(oi.iface, dev), UCS_OK);
    ASSERT_EQ(uct_iface_get_address(oi.iface, ifa), UCS_OK);
    uct_ep_params_t ep_params{};
    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                           UCT_EP_PARAM_FIELD_DEV_ADDR |
                           UCT_EP_PARAM_FIELD_IFACE_ADDR;
    ep_params.iface      = oi.iface;
    ep_params.dev_addr   = dev;
    ep_params.iface_addr = ifa;
    uct_ep_h ep;
    ASSERT_EQ(uct_ep_create(&ep_params, &ep), UCS_OK);

    /* retries what the transport has no room for, as UCP would */
    auto retry = [&](const std::function<ucs_status_t()> &op) {
        ucs_status_t status;
        auto until = std::chrono::steady_clock::now() + 20s;
        while ((status = op()) == UCS_ERR_NO_RESOURCE &&
               std::chrono::steady_clock::now() < until) {
            uct_worker_progress(oi.worker);
        }
        return status;
    };
    auto flush = [&] {
        counted_completion c;
        ucs_status_t status = retry(
                [&] { return uct_ep_flush(ep, 0, &c.comp); });
        if (status == UCS_INPROGRESS) {
            EXPECT_TRUE(oi.progress_until([&] { return c.finished(); }));
            status = c.comp.status;
        }
        return status;
    };

    /* active messages */
    const uint64_t header = 0x1122334455667788ull;
    EXPECT_EQ(retry([&] { return uct_ep_am_short(ep, 5, header, "hello", 5); }),
              UCS_OK);
    std::string pattern(3000, 'b');
    for (size_t k = 0; k < pattern.size(); ++k) {
        pattern[k] = static_cast<char>('a' + k % 26);
    }
    EXPECT_EQ(retry([&] {
                  ssize_t n = uct_ep_am_bcopy(ep, 5, pack_pattern, &pattern, 0);
                  return n < 0 ? static_cast<ucs_status_t>(n) : UCS_OK;
              }),
              UCS_OK);
    buffer zsrc(m_md, 1 << 20);
    ASSERT_NE(zsrc.memh, nullptr);
    std::memset(zsrc.bytes(), 'z', 4000);
    counted_completion zc;
    uct_iov_t ziov      = zsrc.iov(4000);
    ucs_status_t status = retry([&] {
        /* the header is gathered in front of the payload, as one message */
        return uct_ep_am_zcopy(ep, 5, "zhead-12", 8, &ziov, 1, 0, &zc.comp);
    });
    ASSERT_TRUE(status == UCS_OK || status == UCS_INPROGRESS)
            << ucs_status_string(status);
    ASSERT_TRUE(oi.progress_until([&] { return received.size() == 3; }))
            << "received " << received.size() << " of 3 active messages";
    std::string want_short(reinterpret_cast<const char *>(&header), 8);
    want_short += "hello";
    EXPECT_EQ(received[0], want_short);
    EXPECT_EQ(received[1], pattern);
    EXPECT_EQ(received[2], "zhead-12" + std::string(4000, 'z'));
    if (status == UCS_INPROGRESS) {
        EXPECT_TRUE(oi.progress_until([&] { return zc.finished(); }));
        EXPECT_EQ(zc.comp.status, UCS_OK);
    }

    /* RDMA into and out of a registered buffer of our own */
    buffer target(m_md, 4 << 20);
    ASSERT_NE(target.memh, nullptr);
    std::vector<char> packed(4);
    ASSERT_EQ(uct_md_mkey_pack(m_md, target.memh, packed.data()), UCS_OK);
    uct_rkey_bundle_t rkey;
    ASSERT_EQ(uct_rkey_unpack(m_component, packed.data(), &rkey), UCS_OK);
    const auto remote = reinterpret_cast<uint64_t>(target.bytes());

    EXPECT_EQ(retry([&] {
                  return uct_ep_put_short(ep, "short put", 9, remote,
                                          rkey.rkey);
              }),
              UCS_OK);
    EXPECT_EQ(retry([&] {
                  ssize_t n = uct_ep_put_bcopy(ep, pack_pattern, &pattern,
                                               remote + 100, rkey.rkey);
                  return n < 0 ? static_cast<ucs_status_t>(n) : UCS_OK;
              }),
              UCS_OK);
    EXPECT_EQ(flush(), UCS_OK);
    EXPECT_EQ(std::string(target.bytes(), 9), "short put");
    EXPECT_EQ(std::string(target.bytes() + 100, pattern.size()), pattern);

    const size_t big = 1 << 20;
    for (size_t k = 0; k < big; ++k) {
        zsrc.bytes()[k] = static_cast<char>(k * 7 + 3);
    }
    counted_completion pc;
    uct_iov_t piov = zsrc.iov(big);
    status         = retry([&] {
        return uct_ep_put_zcopy(ep, &piov, 1, remote + (1 << 20), rkey.rkey,
                                        &pc.comp);
    });
    ASSERT_TRUE(status == UCS_OK || status == UCS_INPROGRESS)
            << ucs_status_string(status);
    EXPECT_TRUE(oi.progress_until([&] { return pc.finished(); }));
    EXPECT_EQ(pc.comp.status, UCS_OK);
    EXPECT_EQ(std::memcmp(target.bytes() + (1 << 20), zsrc.bytes(), big), 0);

    buffer back(m_md, big);
    ASSERT_NE(back.memh, nullptr);
    counted_completion gc;
    uct_iov_t giov = back.iov(big);
    status         = retry([&] {
        return uct_ep_get_zcopy(ep, &giov, 1, remote + (1 << 20), rkey.rkey,
                                        &gc.comp);
    });
    ASSERT_TRUE(status == UCS_OK || status == UCS_INPROGRESS)
            << ucs_status_string(status);
    EXPECT_TRUE(oi.progress_until([&] { return gc.finished(); }));
    EXPECT_EQ(gc.comp.status, UCS_OK);
    EXPECT_EQ(std::memcmp(back.bytes(), zsrc.bytes(), big), 0);

    /* get_bcopy: read into a bounce buffer, handed over at completion */
    std::string read_back;
    counted_completion bc;
    const size_t small = 5000;
    status             = retry([&] {
        return uct_ep_get_bcopy(
                            ep,
                            [](void *arg, const void *data, size_t length) {
                    static_cast<std::string *>(arg)->assign(
                                        static_cast<const char *>(data), length);
                },
                            &read_back, small, remote + (1 << 20) + 77, rkey.rkey,
                            &bc.comp);
    });
    ASSERT_TRUE(status == UCS_OK || status == UCS_INPROGRESS)
            << ucs_status_string(status);
    if (status == UCS_INPROGRESS) {
        EXPECT_TRUE(oi.progress_until([&] { return bc.finished(); }));
        EXPECT_EQ(bc.comp.status, UCS_OK);
    }
    EXPECT_EQ(read_back, std::string(zsrc.bytes() + 77, small));

    /* many small messages: more than the interface keeps in flight */
    received.clear();
    for (int k = 0; k < 1000; ++k) {
        ASSERT_EQ(retry([&] {
                      return uct_ep_am_short(ep, 5, static_cast<uint64_t>(k),
                                             nullptr, 0);
                  }),
                  UCS_OK);
    }
    EXPECT_EQ(flush(), UCS_OK);
    ASSERT_TRUE(oi.progress_until([&] { return received.size() == 1000; }))
            << received.size();
    for (int k = 0; k < 1000; ++k) {
        uint64_t got;
        std::memcpy(&got, received[k].data(), sizeof(got));
        ASSERT_EQ(got, static_cast<uint64_t>(k)) << "out of order";
    }

    /* pending: fill the interface without progress, queue one more */
    received.clear();
    int sent = 0;
    ucs_status_t st;
    while ((st = uct_ep_am_short(ep, 5, 7, nullptr, 0)) == UCS_OK) {
        ++sent;
    }
    ASSERT_EQ(st, UCS_ERR_NO_RESOURCE) << ucs_status_string(st);
    EXPECT_GE(sent, 1);
    pending_send ps;
    ps.ep       = ep;
    ps.req.func = pending_send::run;
    ASSERT_EQ(uct_ep_pending_add(ep, &ps.req, 0), UCS_OK);
    EXPECT_EQ(uct_ep_am_short(ep, 5, 7, nullptr, 0), UCS_ERR_NO_RESOURCE)
            << "a send overtook a pending request";
    EXPECT_TRUE(oi.progress_until([&] { return ps.done; }));
    EXPECT_EQ(flush(), UCS_OK);
    EXPECT_TRUE(oi.progress_until([&] {
        return received.size() == static_cast<size_t>(sent + 1);
    })) << received.size()
        << " of " << sent + 1;

    /* sleeping: armed, the interface's fd wakes when a message arrives */
    int fd = -1;
    ASSERT_EQ(uct_iface_event_fd_get(oi.iface, &fd), UCS_OK);
    ASSERT_TRUE(oi.progress_until([&] {
        return uct_iface_event_arm(oi.iface,
                                   UCT_EVENT_RECV | UCT_EVENT_SEND_COMP) ==
               UCS_OK;
    }));
    received.clear();
    EXPECT_EQ(uct_ep_am_short(ep, 5, 42, nullptr, 0), UCS_OK);
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 10000), 1) << "no wake-up within 10 s";
    EXPECT_TRUE(oi.progress_until([&] { return received.size() == 1; }));

    uct_rkey_release(m_component, &rkey);
    uct_ep_destroy(ep);
}
