/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Integration test (real verbs, run inside the testbed): the shared-PD
 * registration path rvt is built on. This process plays the agent: it owns
 * the context, the PD and a loopback pair of RC QPs, and serves the real
 * attach socket (agent::attach_server) with them. A separately exec'd
 * client attaches (client::attach), receiving the command fd, the PD
 * handle and the driver id the agent read with agent::uverbs_driver_id,
 * and registers its own buffer into the agent's PD with
 * client::register_memory (uverbs REG_MR on that fd, then a notice to the
 * agent). Then the agent's QP sends from the client's memory and writes
 * into it; the client is SIGKILLed, and the agent deregisters the MR the
 * client had announced, after which its lkey no longer works. A client
 * killed between its REG_MR and its notice leaves an MR the agent finds
 * by the intent it sent first (QUERY_MR on the agent's fd, as rvtd does).
 *
 * Environment: RXE_DEV (device, set by the testbed's `on`), GID_IDX.
 * Skips without a device.
 */
#include "uct/ib/rvt/agent/attach/attach_server.h"
#include "uct/ib/rvt/common/work_summary.h"
#include "uct/ib/rvt/agent/device/rdma_netlink.h"
#include "uct/ib/rvt/agent/device/verbs_ptr.h"
#include "uct/ib/rvt/agent/engine/mr_registry.h"
#include "../unit/mr_driver.h"
#include "uct/ib/rvt/common/unique_fd.h"
#include "uct/ib/rvt/common/uverbs_cmd.h"

#include "shared_pd_protocol.h"
#include "test_paths.h"

#include <arpa/inet.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <filesystem>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

using namespace rvt;
using namespace rvt::test;

namespace {


const char *env_or(const char *name, const char *dflt)
{
    const char *v = std::getenv(name);
    return (v != nullptr && *v != '\0') ? v : dflt;
}

verbs::context_ptr open_device(const std::string &name)
{
    int n             = 0;
    ibv_device **list = ibv_get_device_list(&n);
    verbs::context_ptr ctx;
    for (int i = 0; i < n && !ctx; ++i) {
        if (name == ibv_get_device_name(list[i])) {
            ctx.reset(ibv_open_device(list[i]));
        }
    }
    if (list != nullptr) {
        ibv_free_device_list(list);
    }
    return ctx;
}

class shared_pd : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dev = env_or("RXE_DEV", "");
        if (m_dev.empty()) {
            GTEST_SKIP()
                    << "no RDMA device (RXE_DEV unset): run in the testbed";
        }
        m_ctx.reset(open_device(m_dev).release());
        ASSERT_TRUE(m_ctx) << "cannot open " << m_dev;
        m_pd.reset(ibv_alloc_pd(m_ctx.get()));
        m_cq.reset(ibv_create_cq(m_ctx.get(), 64, nullptr, nullptr, 0));
        ASSERT_TRUE(m_pd && m_cq);
        m_qa = make_qp();
        m_qb = make_qp();
        ASSERT_TRUE(m_qa && m_qb);
        int gid_idx = std::atoi(env_or("GID_IDX", "1"));
        ASSERT_EQ(ibv_query_gid(m_ctx.get(), 1, gid_idx, &m_gid), 0);
        connect(m_qa.get(), m_qb->qp_num, gid_idx);
        connect(m_qb.get(), m_qa->qp_num, gid_idx);
        m_own.resize(2 * buffer_size);
        m_own_mr.reset(
                ibv_reg_mr(m_pd.get(), m_own.data(), m_own.size(),
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
        ASSERT_TRUE(m_own_mr);
    }

    void TearDown() override
    {
        if (m_client_pid > 0) {
            check_request bye{0, 0};
            (void)!write(m_sock.get(), &bye, sizeof(bye));
            waitpid(m_client_pid, nullptr, 0);
        }
        m_serving = false;
        if (m_server_thread.joinable()) {
            m_server_thread.join();
        }
        m_server.reset();
        m_wake.reset();
        if (!m_dir.empty()) {
            std::filesystem::remove_all(m_dir);
        }
    }

    /* The agent's attach socket, served from a thread, granting our
     * context's command fd and PD. */
    void serve_attach(uint32_t driver_id)
    {
        char tmpl[] = "/tmp/rvt-shared-pd.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        m_dir = tmpl;
        agent::attach_config cfg{m_dir + "/agent.sock",
                                 job_key,
                                 getuid(),
                                 8,
                                 shm_layout::make({64, 64, 64, 256}).value(),
                                 std::chrono::milliseconds(5000)};
        agent::device_grant grant{m_ctx->cmd_fd, m_pd->handle, driver_id,
                                  wire::reg_mode::uverbs_ioctl, 42};
        /* no data path here: any well-formed address will do */
        grant.address.gid[15]  = 1;
        grant.address.ud_qpn   = 2;
        grant.address.ud_qkey  = 0x5eed;
        grant.address.agent_id = 42;
        m_wake.reset(eventfd(0, EFD_CLOEXEC));
        ASSERT_TRUE(m_wake);
        grant.agent_wake_fd = m_wake.get();
        auto summary        = create_shm_segment("rvt-test-summary",
                                                 work_summary_size);
        ASSERT_TRUE(summary.ok()) << summary.error();
        m_summary             = std::move(summary).value();
        grant.work_summary_fd = m_summary.fd.get();
        auto log              = [](std::string_view line) {
            std::fprintf(stderr, "%.*s\n", (int)line.size(), line.data());
        };
        /* what rvtd does with MRs, without a data path (no grace: no op
         * of the client's is posted) */
        m_mr_exec = {[this, driver_id](uint32_t h) {
                         auto r = uverbs::dereg_mr(m_ctx->cmd_fd, driver_id, h);
                         m_cleaned.push_back({h, r.ok()});
                         return r;
                     },
                     [this](uint32_t index, uint32_t handle,
                            const std::string &refusal) {
                         m_server->answer_release(index, handle, refusal);
                     },
                     log,
                     [this, driver_id] { return find_unannounced(driver_id); },
                     [this](uint32_t index, uint32_t handle,
                            const std::string &refusal) {
                         m_server->answer_announce(index, handle, refusal);
                     }};
        auto srv  = agent::attach_server::create(cfg, grant, log);
        ASSERT_TRUE(srv.ok()) << srv.error();
        m_server        = std::move(srv).value();
        m_serving       = true;
        m_server_thread = std::thread([this, driver_id] {
            while (m_serving) {
                for (const auto &ev : m_server->run_once(10)) {
                    act_on(ev, driver_id);
                }
            }
        });
    }

    /* What rvtd does with the server's events, without a data path. */
    void act_on(const agent::attach_event &ev, uint32_t driver_id)
    {
        std::lock_guard g(m_detach_lock);
        switch (ev.kind) {
        case agent::attach_event_kind::attached:
            m_mrs.attached(ev.client->index);
            break;
        case agent::attach_event_kind::detached:
            m_mrs.client_gone(ev.client->index, 0, 0);
            m_mr_exec.run(m_mrs, m_mrs.tick(std::chrono::steady_clock::now()));
            m_detached = true;
            break;
        case agent::attach_event_kind::mr_notice: {
            /* what engine::on_mr_notice asks the device (no MR here is
             * the agent's own but m_own_mr) */
            const auto device = [this, driver_id](uint32_t h) {
                agent::device_mr d{};
                if (h == m_own_mr->handle) {
                    d.who = agent::device_mr::owner::agent;
                    return d;
                }
                auto q = uverbs::query_mr(m_ctx->cmd_fd, driver_id, h);
                if (q.ok()) {
                    d.who = agent::device_mr::owner::client;
                    d.mr  = {h, q.value().keys.lkey, q.value().keys.rkey,
                             q.value().iova, q.value().length};
                }
                return d;
            };
            m_mr_exec.run(m_mrs,
                          m_mrs.on_notice(ev.client->index, ev.notice, false,
                                          agent::mr_registry::asks_device(
                                                  ev.notice) ?
                                                  device(ev.notice.handle) :
                                                  agent::device_mr{}));
            break;
        }
        case agent::attach_event_kind::peer_request:
            m_server->answer_peer(ev.client->index,
                                  failure{"this agent has no data path"});
            break;
        case agent::attach_event_kind::status_request:
            m_server->answer_status(ev.ticket, "{}");
            break;
        case agent::attach_event_kind::retired:
            m_server->answer_retired(ev.client->index);
            break;
        }
    }

    verbs::qp_ptr make_qp()
    {
        ibv_qp_init_attr ia{};
        ia.send_cq          = m_cq.get();
        ia.recv_cq          = m_cq.get();
        ia.qp_type          = IBV_QPT_RC;
        ia.cap.max_send_wr  = 16;
        ia.cap.max_recv_wr  = 16;
        ia.cap.max_send_sge = 1;
        ia.cap.max_recv_sge = 1;
        return verbs::qp_ptr(ibv_create_qp(m_pd.get(), &ia));
    }

    void connect(ibv_qp *qp, uint32_t remote_qpn, int gid_idx)
    {
        ibv_qp_attr a{};
        a.qp_state        = IBV_QPS_INIT;
        a.port_num        = 1;
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                            IBV_ACCESS_LOCAL_WRITE;
        ASSERT_EQ(ibv_modify_qp(qp, &a,
                                IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                        IBV_QP_ACCESS_FLAGS),
                  0);
        a                        = {};
        a.qp_state               = IBV_QPS_RTR;
        a.path_mtu               = IBV_MTU_1024;
        a.dest_qp_num            = remote_qpn;
        a.max_dest_rd_atomic     = 1;
        a.min_rnr_timer          = 12;
        a.ah_attr.is_global      = 1;
        a.ah_attr.grh.dgid       = m_gid;
        a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_idx);
        a.ah_attr.grh.hop_limit  = 1;
        a.ah_attr.port_num       = 1;
        ASSERT_EQ(ibv_modify_qp(qp, &a,
                                IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                        IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                        IBV_QP_MAX_DEST_RD_ATOMIC |
                                        IBV_QP_MIN_RNR_TIMER),
                  0);
        a               = {};
        a.qp_state      = IBV_QPS_RTS;
        a.timeout       = 14;
        a.retry_cnt     = 7;
        a.rnr_retry     = 7;
        a.max_rd_atomic = 1;
        ASSERT_EQ(ibv_modify_qp(qp, &a,
                                IBV_QP_STATE | IBV_QP_TIMEOUT |
                                        IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                        IBV_QP_SQ_PSN |
                                        IBV_QP_MAX_QP_RD_ATOMIC),
                  0);
    }

    /* What engine::sweep_unannounced looks up, without the engine: every MR
     * of the agent's fd but its own, by QUERY_MR. */
    std::vector<agent::client_mr> find_unannounced(uint32_t driver_id)
    {
        std::vector<agent::client_mr> found;
        for (uint32_t h = 0; h < 256; ++h) {
            if (h == m_own_mr->handle) {
                continue;
            }
            auto q = uverbs::query_mr(m_ctx->cmd_fd, driver_id, h);
            if (q.ok()) {
                found.push_back({h, q.value().keys.lkey, q.value().keys.rkey,
                                 q.value().iova, q.value().length});
            }
        }
        m_found = found;
        return found;
    }

    /* Starts the client; it attaches and registers its buffer (and one
     * it never announces, with `unannounced`). */
    client_report start_client(bool unannounced = false)
    {
        int sv[2];
        EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        m_sock.reset(sv[0]);
        unique_fd theirs(sv[1]);
        std::string sock_path = m_dir + "/agent.sock";
        m_client_pid          = fork();
        if (m_client_pid == 0) {
            int fd          = dup(theirs.get()); /* without CLOEXEC */
            std::string arg = std::to_string(fd);
            execl(test::client_path.c_str(), test::client_path.c_str(),
                  sock_path.c_str(), arg.c_str(),
                  unannounced ? "unannounced" : static_cast<char *>(nullptr),
                  static_cast<char *>(nullptr));
            _exit(127);
        }
        client_report r{};
        EXPECT_EQ(read(m_sock.get(), &r, sizeof(r)), (ssize_t)sizeof(r))
                << "client " << test::client_path << " did not report";
        return r;
    }

    /* SIGKILLs the client; true once the agent has cleaned up after it
     * (at most 5 s). */
    bool kill_client()
    {
        kill(m_client_pid, SIGKILL);
        waitpid(m_client_pid, nullptr, 0);
        m_client_pid = -1;
        for (int i = 0; i < 500 && !m_detached; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return m_detached;
    }

    bool client_holds(uint32_t seed, uint32_t length)
    {
        check_request req{length, seed};
        uint32_t same = 0;
        return write(m_sock.get(), &req, sizeof(req)) == sizeof(req) &&
               read(m_sock.get(), &same, sizeof(same)) == sizeof(same) &&
               same == 1;
    }

    void post(ibv_qp *qp, ibv_wr_opcode op, uint64_t laddr, uint32_t len,
              uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm)
    {
        ibv_sge sge{laddr, len, lkey};
        ibv_send_wr wr{}, *bad = nullptr;
        wr.sg_list             = &sge;
        wr.num_sge             = 1;
        wr.opcode              = op;
        wr.send_flags          = IBV_SEND_SIGNALED;
        wr.imm_data            = htonl(imm);
        wr.wr.rdma.remote_addr = raddr;
        wr.wr.rdma.rkey        = rkey;
        ASSERT_EQ(ibv_post_send(qp, &wr, &bad), 0);
    }

    void post_recv(ibv_qp *qp)
    {
        ibv_recv_wr wr{}, *bad = nullptr;
        ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0);
    }

    /* Polls one completion, for at most 10 s. */
    bool poll(ibv_wc &wc)
    {
        auto until = std::chrono::steady_clock::now() +
                     std::chrono::seconds(10);
        while (std::chrono::steady_clock::now() < until) {
            if (ibv_poll_cq(m_cq.get(), 1, &wc) == 1) {
                return true;
            }
        }
        return false;
    }

    std::string m_dev;
    verbs::context_ptr m_ctx;
    verbs::pd_ptr m_pd;
    verbs::cq_ptr m_cq;
    verbs::qp_ptr m_qa, m_qb;
    ibv_gid m_gid{};
    std::vector<unsigned char> m_own;
    verbs::mr_ptr m_own_mr;
    unique_fd m_sock;
    pid_t m_client_pid = -1;
    std::string m_dir;
    std::unique_ptr<agent::attach_server> m_server;
    unique_fd m_wake;
    shm_segment m_summary; /* the work summary the grant passes */
    std::atomic<bool> m_serving{false};
    std::thread m_server_thread;
    std::mutex m_detach_lock;
    agent::mr_registry m_mrs{8, std::chrono::milliseconds(0)};
    test::mr_driver m_mr_exec;
    std::vector<std::pair<uint32_t, bool>> m_cleaned; /* handle, dereg ok */
    std::vector<agent::client_mr> m_found; /* by find_unannounced */
    std::atomic<bool> m_detached{false};
};

} // namespace

TEST_F(shared_pd, netlink_reports_the_driver_id)
{
    auto id = agent::uverbs_driver_id(m_dev);
    ASSERT_TRUE(id.ok()) << id.error();
    if (m_dev.rfind("rxe", 0) == 0) {
        EXPECT_EQ(id.value(), static_cast<uint32_t>(RDMA_DRIVER_RXE));
    }
    auto none = agent::uverbs_driver_id("no-such-device0");
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.error().find("no-such-device0"), std::string::npos);
}

TEST_F(shared_pd, client_memory_is_usable_by_the_agents_qps)
{
    auto id = agent::uverbs_driver_id(m_dev);
    ASSERT_TRUE(id.ok()) << id.error();
    serve_attach(id.value());
    client_report c = start_client();
    ASSERT_EQ(c.registered, 1u) << c.error;
    EXPECT_EQ(c.client_index, 0u);
    EXPECT_EQ(c.bad_pd_refused, 1u) << "a wrong PD handle was not refused "
                                       "with a reason naming it";
    ibv_wc wc{};

    /* SEND side: WRITE WITH IMM from the client's buffer, client's lkey */
    post_recv(m_qb.get());
    post(m_qa.get(), IBV_WR_RDMA_WRITE_WITH_IMM, c.addr, buffer_size, c.lkey,
         (uintptr_t)m_own.data(), m_own_mr->rkey, 0xC11E7001);
    for (int i = 0; i < 2; ++i) {
        ASSERT_TRUE(poll(wc)) << "no completion";
        ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
        if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
            EXPECT_EQ(ntohl(wc.imm_data), 0xC11E7001u);
        }
    }
    std::vector<unsigned char> want(buffer_size);
    fill_pattern(want.data(), want.size(), c.pid);
    EXPECT_EQ(0, memcmp(m_own.data(), want.data(), buffer_size))
            << "the agent's buffer does not hold the client's bytes";

    /* RECEIVE side: an RDMA WRITE into the client's buffer, client's rkey */
    const uint32_t seed = 0x5eed;
    fill_pattern(m_own.data() + buffer_size, buffer_size, seed);
    post(m_qa.get(), IBV_WR_RDMA_WRITE, (uintptr_t)m_own.data() + buffer_size,
         buffer_size, m_own_mr->lkey, c.addr, c.rkey, 0);
    ASSERT_TRUE(poll(wc));
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_TRUE(client_holds(seed, buffer_size))
            << "the client's own buffer does not hold what was written";

    /* the client is killed; the agent deregisters the MR it announced */
    ASSERT_TRUE(kill_client()) << "the agent did not notice the client's death";
    {
        std::lock_guard g(m_detach_lock);
        ASSERT_EQ(m_cleaned.size(), 1u);
        EXPECT_EQ(m_cleaned[0].first, c.handle);
        EXPECT_TRUE(m_cleaned[0].second) << "deregistering the dead "
                                            "client's MR failed";
    }
    post(m_qa.get(), IBV_WR_RDMA_WRITE, c.addr, 64, c.lkey,
         (uintptr_t)m_own.data(), m_own_mr->rkey, 0);
    ASSERT_TRUE(poll(wc));
    EXPECT_NE(wc.status, IBV_WC_SUCCESS)
            << "the dead client's lkey still works";

    auto twice = uverbs::dereg_mr(m_ctx->cmd_fd, id.value(), c.handle);
    ASSERT_FALSE(twice.ok());
    EXPECT_NE(twice.error().find(std::to_string(c.handle)), std::string::npos)
            << twice.error();
}

/* The client registers a second buffer and is killed before it announces
 * it: the agent finds that MR through the client's intent (QUERY_MR gives
 * its address and length) and deregisters it with the announced one. */
TEST_F(shared_pd, an_mr_registered_and_never_announced_goes_with_its_client)
{
    auto id = agent::uverbs_driver_id(m_dev);
    ASSERT_TRUE(id.ok()) << id.error();
    serve_attach(id.value());
    client_report c = start_client(true);
    ASSERT_EQ(c.registered, 1u) << c.error;
    ASSERT_NE(c.unannounced_handle, c.handle);

    /* QUERY_MR on the agent's fd tells what the client registered */
    auto q = uverbs::query_mr(m_ctx->cmd_fd, id.value(), c.unannounced_handle);
    ASSERT_TRUE(q.ok()) << q.error();
    EXPECT_EQ(q.value().iova, c.unannounced_addr);
    EXPECT_EQ(q.value().length, buffer_size);
    auto none = uverbs::query_mr(m_ctx->cmd_fd, id.value(), 100000);
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.error().find("handle 100000"), std::string::npos)
            << none.error();

    ASSERT_TRUE(kill_client()) << "the agent did not notice the client's death";
    std::lock_guard g(m_detach_lock);
    ASSERT_EQ(m_found.size(), 2u) << "QUERY_MR did not show the client's MRs";
    std::vector<uint32_t> cleaned;
    for (const auto &[handle, ok] : m_cleaned) {
        EXPECT_TRUE(ok) << "deregistering MR handle " << handle << " failed";
        cleaned.push_back(handle);
    }
    std::sort(cleaned.begin(), cleaned.end());
    std::vector<uint32_t> want{c.handle, c.unannounced_handle};
    std::sort(want.begin(), want.end());
    EXPECT_EQ(cleaned, want);
    EXPECT_EQ(m_mrs.counters().unannounced, 1u);
    EXPECT_FALSE(
            uverbs::query_mr(m_ctx->cmd_fd, id.value(), c.unannounced_handle)
                    .ok())
            << "the unannounced MR is still registered";
}
