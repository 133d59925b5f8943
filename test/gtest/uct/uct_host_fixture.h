/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The UCX module on the host: its real md, iface and ep, driven through
 * UCT's public API, against a real agent (engine and attach server) on
 * the loopback nic, no RDMA device, no testbed.
 *
 * The module's objects are linked into the test binary, so that its UCS
 * constructor registers the component `rvt` as loading the module would.
 * The agent runs on a thread of this process: the loopback nic's copy
 * mode moves bytes by virtual address, which reaches the client's memory
 * only in the same address space. Two seams of the client library let
 * the real module find it, both named for what they are:
 *   client::set_devices_root   a sysfs-like directory listing one ACTIVE
 *                              device, the agent's;
 *   client::set_in_process_registrar   the agent grants
 *                              wire::reg_mode::in_process, and memory is
 *                              registered in its loopback nic (rvtd never
 *                              grants that mode; a client with no
 *                              registrar refuses it).
 * The intent, the announcement and its check against the nic's MR table,
 * and every other message, are the product's.
 *
 * The agent's loop takes a lock for each pass: pause() holds it, so that
 * the work a test posts stays in the rings (back-pressure, flushes in
 * progress), and stop() ends the agent as a crash would.
 */
#ifndef RVT_TEST_UCT_HOST_FIXTURE_H
#define RVT_TEST_UCT_HOST_FIXTURE_H

#include "test/gtest/uct/uct_api.h"
#include "test/loopback/loopback_agent.h"
#include "uct/ib/rvt/client/devices.h"
#include "uct/ib/rvt/client/registration.h"
#include "uct/ib/rvt/common/runtime_dir.h"

#include <unistd.h>

#include <gtest/gtest.h>
#include <uct/api/uct.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rvt::test {

using namespace std::chrono_literals;

inline constexpr char host_job_key[] = "uct-host-test";
inline constexpr char host_device[]  = "loop0";

/* An agent on a loopback nic, served by a thread of its own. */
class host_agent {
public:
    /* `auth`: the handshake's credentials. One node: no peer ever asks,
     * so none is checked, but the clients are told whether it has any. */
    host_agent(const std::string &socket, const shm_capacities &caps,
               std::unique_ptr<agent::peer_auth> auth,
               const agent::engine_config &engine = {})
    {
        auto log  = [this](std::string_view line) { m_log.emplace_back(line); };
        auto made = agent::testing::make_loopback_agent(
                m_fabric, {.socket           = socket,
                           .job_key          = host_job_key,
                           .agent_id         = 77,
                           .caps             = caps,
                           .nic              = {.receive_size = caps.slot_size},
                           .engine           = engine,
                           .auth             = std::move(auth),
                           .log              = log,
                           .reg_mode         = wire::reg_mode::in_process,
                           .index_quarantine = 0ms});
        if (!made) {
            throw std::runtime_error(made.error());
        }
        m_agent  = std::move(made).value();
        m_thread = std::thread([this] { run(); });
    }

    ~host_agent()
    {
        stop();
    }

    host_agent(const host_agent &)            = delete;
    host_agent &operator=(const host_agent &) = delete;

    /* While the returned lock is held, the agent takes no work. */
    std::unique_lock<std::mutex> pause()
    {
        return std::unique_lock(m_lock);
    }

    /* Ends the agent as a crash would: its sockets close, nothing it
     * held is handed back. With `paused` (this test's pause()), the work
     * in the rings is never taken. */
    void stop(std::unique_lock<std::mutex> paused = {})
    {
        std::unique_lock held = paused ? std::move(paused) : pause();
        if (m_stopped) {
            return;
        }
        m_stop    = true;
        m_stopped = true;
        m_agent.server.reset();
        m_agent.engine.reset();
        held.unlock();
        m_thread.join();
    }

    /* The registrar the agent's clients in this process use. */
    std::shared_ptr<const client::in_process_registrar> registrar()
    {
        auto r = std::make_shared<client::in_process_registrar>();
        r->reg = [this](void *addr, size_t length,
                        int access) -> result<client::memory_region> {
            std::lock_guard g(m_lock);
            if (m_stopped) {
                return failure{"the agent stopped"};
            }
            auto mr = m_agent.nic->register_memory(addr, length, access);
            return client::memory_region{mr.handle, mr.lkey, mr.rkey, addr,
                                         length};
        };
        r->drop = [this](uint32_t handle) {
            std::lock_guard g(m_lock);
            (void)m_agent.nic->deregister(handle);
        };
        return r;
    }

private:
    void run()
    {
        for (;;) {
            {
                std::lock_guard g(m_lock);
                if (m_stop) {
                    return;
                }
                m_agent.pump();
            }
            /* two cores, shared with the client thread */
            std::this_thread::sleep_for(20us);
        }
    }

    agent::testing::loopback_fabric m_fabric;
    std::vector<std::string> m_log;
    /* stop() ends its engine and server; its nic stays, for the
     * registrar */
    agent::testing::loopback_agent m_agent;
    std::mutex m_lock; /* one pass of the loop; the nic's MR table */
    bool m_stop    = false; /* under m_lock */
    bool m_stopped = false;
    std::thread m_thread;
};

/* An rvt interface of `md` on host_device for `worker`, its endpoints'
 * errors handled by `on_error(arg)` from progress, its progress enabled;
 * nullptr (a test failure) if it does not open. */
inline uct_iface_h open_host_iface(uct_md_h md, uct_worker_h worker,
                                   uct_error_handler_t on_error, void *arg)
{
    uct_iface_config_t *config;
    EXPECT_EQ(uct_md_iface_config_read(md, "rvt", nullptr, nullptr, &config),
              UCS_OK);
    const std::string dev = std::string(host_device) + ":1";
    uct_iface_params_t params{};
    params.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                        UCT_IFACE_PARAM_FIELD_DEVICE |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = "rvt";
    params.mode.device.dev_name = dev.c_str();
    params.err_handler          = on_error;
    params.err_handler_arg      = arg;
    params.err_handler_flags    = 0; /* from progress */
    uct_iface_h iface           = nullptr;
    ucs_status_t status = uct_iface_open(md, worker, &params, config, &iface);
    uct_config_release(config);
    EXPECT_EQ(status, UCS_OK) << ucs_status_string(status);
    if (status != UCS_OK) {
        return nullptr;
    }
    uct_iface_progress_enable(iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    return iface;
}

/* A completion that counts its calls and keeps the last status, as
 * UCX's tests check (each op's completion exactly once). */
struct counted_completion {
    uct_completion_t comp{done, 1, UCS_OK};
    int calls           = 0;
    ucs_status_t status = UCS_OK;
    /* called after the count, to see what had completed by then */
    std::function<void()> *on_done = nullptr;

    static void done(uct_completion_t *c)
    {
        auto *self = reinterpret_cast<counted_completion *>(c);
        ++self->calls;
        self->status = c->status;
        if (self->on_done != nullptr) {
            (*self->on_done)();
        }
    }
    /* ready for another operation */
    void reset()
    {
        comp = {done, 1, UCS_OK};
    }
};
static_assert(offsetof(counted_completion, comp) == 0);

class uct_host : public ::testing::Test {
protected:
    /* Work ring small enough that a paused agent runs it out quickly. */
    static shm_capacities capacities()
    {
        shm_capacities c;
        c.work       = 64;
        c.completion = 64;
        return c;
    }

    /* The agent's credentials: a job secret, as a real job's agent has
     * one (or MUNGE). */
    virtual std::unique_ptr<agent::peer_auth> agent_auth()
    {
        return agent::secret_auth("uct-host-test's job secret").value();
    }

    /* The agent's engine settings: rvtd's defaults. */
    virtual agent::engine_config agent_engine()
    {
        return {};
    }

    void SetUp() override
    {
        char tmpl[] = "/tmp/uct-host-test.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        m_dir = tmpl;
        write_sysfs(m_dir + "/sys");
        client::set_devices_root(m_dir + "/sys");
        const std::string run = m_dir + "/run";
        std::filesystem::create_directories(run);
        std::filesystem::permissions(run, std::filesystem::perms::owner_all);
        m_env.set("XDG_RUNTIME_DIR", run);
        m_env.set("UCX_RVT_JOB_KEY", host_job_key);
        m_env.set("UCX_RVT_START_AGENT", "n");
        auto dir = ensure_runtime_dir(run, ::getuid());
        ASSERT_TRUE(dir.ok()) << dir.error();
        auto paths = make_agent_paths(dir.value(), host_device, 1,
                                      host_job_key);
        ASSERT_TRUE(paths.ok()) << paths.error();
        m_agent = std::make_unique<host_agent>(paths.value().socket,
                                               capacities(), agent_auth(),
                                               agent_engine());
        client::set_in_process_registrar(m_agent->registrar());

        m_component = find_component("rvt");
        ASSERT_NE(m_component, nullptr) << "no component rvt registered";
        m_md = open_uct_md(m_component, host_device);
        ASSERT_NE(m_md, nullptr);

        ASSERT_EQ(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                           &m_async),
                  UCS_OK);
        ASSERT_EQ(uct_worker_create(m_async, UCS_THREAD_MODE_SINGLE, &m_worker),
                  UCS_OK);
        open_iface();
        connect_to_self();
    }

    void TearDown() override
    {
        if (m_rkey.rkey != UCT_INVALID_RKEY) {
            uct_rkey_release(m_component, &m_rkey);
        }
        if (m_ep != nullptr) {
            uct_ep_destroy(m_ep);
        }
        m_dst.reset();
        m_src.reset();
        if (m_iface != nullptr) {
            uct_iface_close(m_iface);
        }
        if (m_worker != nullptr) {
            uct_worker_destroy(m_worker);
        }
        if (m_async != nullptr) {
            ucs_async_context_destroy(m_async);
        }
        if (m_md != nullptr) {
            uct_md_close(m_md);
        }
        m_agent.reset();
        client::set_in_process_registrar(nullptr);
        client::set_devices_root({});
        if (!m_dir.empty()) {
            std::filesystem::remove_all(m_dir);
        }
    }

    /* Source and destination buffers of `len` bytes, and the rkey of the
     * destination. */
    void make_buffers(size_t len)
    {
        m_src = std::make_unique<buffer>(m_md, len);
        m_dst = std::make_unique<buffer>(m_md, len);
        ASSERT_TRUE(m_src->memh != UCT_MEM_HANDLE_NULL);
        ASSERT_TRUE(m_dst->memh != UCT_MEM_HANDLE_NULL);
        uct_md_attr_t attr;
        ASSERT_EQ(uct_md_query(m_md, &attr), UCS_OK);
        std::vector<char> packed(attr.rkey_packed_size);
        ASSERT_EQ(uct_md_mkey_pack(m_md, m_dst->memh, packed.data()), UCS_OK);
        ASSERT_EQ(uct_rkey_unpack(m_component, packed.data(), &m_rkey), UCS_OK);
    }

    uint64_t remote(size_t offset = 0) const
    {
        return reinterpret_cast<uint64_t>(m_dst->bytes() + offset);
    }

    /* Progresses until pred() or `limit`. */
    bool progress_until(const std::function<bool()> &pred,
                        std::chrono::milliseconds limit = 10s)
    {
        const auto until = std::chrono::steady_clock::now() + limit;
        while (!pred()) {
            if (std::chrono::steady_clock::now() > until) {
                return false;
            }
            uct_worker_progress(m_worker);
        }
        return true;
    }
    void progress_for(std::chrono::milliseconds time)
    {
        progress_until([] { return false; }, time);
    }

    /* An AM, counted by the handler; 8 bytes of its sequence number. */
    ucs_status_t am_short(uint64_t seq)
    {
        return uct_ep_am_short(m_ep, am_id, seq, nullptr, 0);
    }

    /* Posts AMs until the endpoint runs out of resources (the paused
     * agent takes none); returns how many went. */
    int fill()
    {
        int sent = 0;
        for (; sent < 100000; ++sent) {
            ucs_status_t s = am_short(sent);
            if (s == UCS_ERR_NO_RESOURCE) {
                return sent;
            }
            EXPECT_EQ(s, UCS_OK) << ucs_status_string(s);
        }
        ADD_FAILURE() << "the endpoint never ran out of resources";
        return sent;
    }

    /* Destroys the endpoint when it goes out of scope. Declared after a
     * test's completions: a test that ends early leaves operations
     * outstanding, which destroying the endpoint cancels, and their
     * completions must still be there then. */
    struct ep_scope {
        uct_host &test;
        ~ep_scope()
        {
            if (test.m_ep != nullptr) {
                uct_ep_destroy(test.m_ep);
                test.m_ep = nullptr;
            }
        }
    };

    static constexpr uint8_t am_id = 5;

    std::unique_ptr<host_agent> m_agent;
    uct_component_h m_component  = nullptr;
    uct_md_h m_md                = nullptr;
    ucs_async_context_t *m_async = nullptr;
    uct_worker_h m_worker        = nullptr;
    uct_iface_h m_iface          = nullptr;
    uct_ep_h m_ep                = nullptr;
    uct_rkey_bundle_t m_rkey{UCT_INVALID_RKEY, nullptr, nullptr};
    std::unique_ptr<buffer> m_src, m_dst;
    std::vector<uint64_t> m_ams; /* the header of every AM received */
    std::vector<ucs_status_t> m_ep_errors; /* the error handler's */

private:
    static ucs_status_t am_handler(void *arg, void *data, size_t, unsigned)
    {
        uint64_t hdr;
        std::memcpy(&hdr, data, sizeof(hdr));
        static_cast<uct_host *>(arg)->m_ams.push_back(hdr);
        return UCS_OK;
    }
    static ucs_status_t error_handler(void *arg, uct_ep_h, ucs_status_t status)
    {
        static_cast<uct_host *>(arg)->m_ep_errors.push_back(status);
        return UCS_OK;
    }

    void open_iface()
    {
        m_iface = open_host_iface(m_md, m_worker, error_handler, this);
        ASSERT_NE(m_iface, nullptr);
        ASSERT_EQ(uct_iface_set_am_handler(m_iface, am_id, am_handler, this, 0),
                  UCS_OK);
    }

    void connect_to_self()
    {
        iface_addresses self = addresses_of(m_iface);
        m_ep                 = connect_ep(m_iface, self);
        ASSERT_NE(m_ep, nullptr);
    }

    /* One ACTIVE RoCE port of host_device (client/devices.h). */
    static void write_sysfs(const std::string &root)
    {
        const std::string port = root + "/" + host_device + "/ports/1";
        std::filesystem::create_directories(port);
        std::ofstream(port + "/state") << "4: ACTIVE\n";
        std::ofstream(port + "/link_layer") << "Ethernet\n";
        std::ofstream(port + "/rate") << "10 Gb/sec (1X QDR)\n";
    }

    std::string m_dir;
    env_scope m_env; /* put back when the test is gone */
};

} // namespace rvt::test

#endif
