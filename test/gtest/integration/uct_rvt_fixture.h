/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the integration tests of the UCX module (test_uct_rvt.cc,
 * test_uct_rvt_semantics.cc) share: loading the module, a private runtime
 * directory and job key per test, agents the test starts itself, memory
 * domains and interfaces opened through UCT's public API, registered
 * buffers and a few callbacks.
 *
 * The module is loaded with dlopen before UCT lists its components, as
 * LD_PRELOAD does for UCX's own tools (UCX 1.13 loads only its own
 * modules). Environment: RXE_DEV (device; tests skip without one),
 * RVT_UCT_MODULE (the module; default: next to this binary's build tree).
 */
#ifndef RVT_TEST_UCT_RVT_FIXTURE_H
#define RVT_TEST_UCT_RVT_FIXTURE_H

#include "uct/ib/rvt/client/status.h"
#include "uct/ib/rvt/common/job_key.h"
#include "uct/ib/rvt/common/runtime_dir.h"

#include "../uct/ucs_log_capture.h"
#include "../uct/uct_api.h"
#include "processes.h"
#include "test_paths.h"

#include <nlohmann/json.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <ucs/async/async_fwd.h>
#include <ucs/debug/log_def.h>
#include <uct/api/uct.h>

#include <chrono>
#include <cstdarg>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace rvt::test {

using namespace std::chrono_literals;

inline constexpr char uct_job_key[] = "uct-rvt-test";

inline std::string module_path()
{
    if (const char *p = std::getenv("RVT_UCT_MODULE"); p != nullptr && *p) {
        return p;
    }
    auto exe = std::filesystem::read_symlink("/proc/self/exe");
    return (exe.parent_path() / "../../src/uct/ib/rvt/uct/.libs/libuct_rvt.so")
            .lexically_normal()
            .string();
}

/* A worker and an interface on it. */
struct opened_iface {
    ucs_async_context_t *async = nullptr;
    uct_worker_h worker        = nullptr;
    uct_iface_h iface          = nullptr;

    opened_iface()                                = default;
    opened_iface(const opened_iface &)            = delete;
    opened_iface &operator=(const opened_iface &) = delete;
    ~opened_iface()
    {
        close();
    }

    void close()
    {
        if (iface != nullptr) {
            uct_iface_close(iface);
            iface = nullptr;
        }
        if (worker != nullptr) {
            uct_worker_destroy(worker);
            worker = nullptr;
        }
        if (async != nullptr) {
            ucs_async_context_destroy(async);
            async = nullptr;
        }
    }

    /* Progresses until pred() or `limit`. */
    bool progress_until(const std::function<bool()> &pred,
                        std::chrono::milliseconds limit = 20s)
    {
        auto until = std::chrono::steady_clock::now() + limit;
        while (!pred()) {
            if (std::chrono::steady_clock::now() > until) {
                return false;
            }
            uct_worker_progress(worker);
        }
        return true;
    }
};

/* An AM handler that keeps what it is given. */
inline ucs_status_t keep_am(void *arg, void *data, size_t length, unsigned)
{
    static_cast<std::vector<std::string> *>(arg)->emplace_back(
            static_cast<const char *>(data), length);
    return UCS_OK;
}

/* A bcopy pack callback: copies the std::string at arg. */
inline size_t pack_pattern(void *dest, void *arg)
{
    const auto &text = *static_cast<const std::string *>(arg);
    std::memcpy(dest, text.data(), text.size());
    return text.size();
}

struct counted_completion {
    uct_completion_t comp{done, 1, UCS_OK};
    static void done(uct_completion_t *)
    {
    }
    bool finished() const
    {
        return comp.count == 0;
    }
};

/* Optional interface parameters the tests use. */
struct iface_options {
    uct_error_handler_t err_handler = nullptr;
    void *err_handler_arg           = nullptr;
    std::string device; /* the MD's; empty: the test's (RXE_DEV) */
    /* AM alignment parameters, each passed when its field is set here */
    uint64_t am_align_fields = 0;
    size_t am_alignment      = 0;
    size_t am_align_offset   = 0;
};

class uct_rvt_fixture : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        if (s_module == nullptr) {
            s_module = dlopen(module_path().c_str(), RTLD_NOW | RTLD_GLOBAL);
            if (s_module == nullptr) {
                s_dlerror = dlerror();
            }
        }
    }

    void SetUp() override
    {
        const char *dev = std::getenv("RXE_DEV");
        if (dev == nullptr || *dev == '\0') {
            GTEST_SKIP() << "no RDMA device (RXE_DEV unset): run in the "
                            "testbed";
        }
        ASSERT_NE(s_module, nullptr) << module_path() << ": " << s_dlerror;
        m_dev       = dev;
        char tmpl[] = "/tmp/uct-rvt-test.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        m_runtime = tmpl;
        m_env.set("XDG_RUNTIME_DIR", m_runtime);
        m_env.set("UCX_RVT_JOB_KEY", uct_job_key);
        m_env.set("UCX_RVT_START_AGENT", "n");
        m_socket = socket_of(m_runtime, uct_job_key);
        ASSERT_FALSE(m_socket.empty());

        m_component = find_component("rvt");
        ASSERT_NE(m_component, nullptr) << "no component rvt registered";
    }

    void TearDown() override
    {
        if (m_md != nullptr) {
            uct_md_close(m_md);
        }
        for (pid_t pid : m_agents) {
            if (pid > 0) {
                kill(pid, SIGTERM);
                waitpid(pid, nullptr, 0);
            }
        }
        if (!m_runtime.empty()) {
            std::filesystem::remove_all(m_runtime);
        }
    }

    /* The attach socket of the agent for `key` and `dev` (empty: the
     * test's device) under runtime base `base` (created, mode 0700, if
     * need be); empty on failure. */
    std::string socket_of(const std::string &base, const std::string &key,
                          const std::string &dev = {})
    {
        std::error_code ec;
        if (std::filesystem::create_directories(base, ec)) {
            std::filesystem::permissions(base,
                                         std::filesystem::perms::owner_all, ec);
        }
        auto dir = rvt::ensure_runtime_dir(base, getuid());
        EXPECT_TRUE(dir.ok()) << dir.error();
        if (!dir.ok()) {
            return {};
        }
        auto paths = rvt::make_agent_paths(dir.value(),
                                           dev.empty() ? m_dev : dev, 1, key);
        EXPECT_TRUE(paths.ok()) << paths.error();
        return paths.ok() ? paths.value().socket : std::string();
    }

    /* Starts rvtd for `key` and `dev` (empty: the test's device) under
     * runtime base `base` with `extra` options, and waits for its socket;
     * its stderr goes to <base>/rvtd.<key>.out. The agent is stopped at
     * TearDown (or earlier, by the test, through the pid returned). */
    pid_t start_agent_at(const std::string &base, const std::string &key,
                         const std::vector<std::string> &extra = {},
                         const std::string &dev                = {})
    {
        const std::string device = dev.empty() ? m_dev : dev;
        const std::string socket = socket_of(base, key, device);
        const std::string out    = base + "/rvtd." + key + ".out";
        /* it stays until TearDown: an agent whose first client comes
         * late (a test that starts a process of its own first) must not
         * linger out before it */
        std::vector<std::string> argv{rvt::test::rvtd_path,
                                      "--device=" + device, "--job-key=" + key,
                                      "--linger=0"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        const pid_t pid = spawn(argv, base, out);
        m_agents.push_back(pid);
        EXPECT_TRUE(eventually([&] { return std::filesystem::exists(socket); },
                               20s))
                << "no agent socket at " << socket;
        return pid;
    }

    /* Stops an agent this test started, with `sig`, and reaps it. */
    void stop_agent(pid_t pid, int sig)
    {
        for (pid_t &p : m_agents) {
            if (p == pid && p > 0) {
                kill(p, sig);
                waitpid(p, nullptr, 0);
                p = -1;
            }
        }
    }

    /* The agent of this test's own runtime directory and job key. */
    void start_agent(const std::vector<std::string> &extra = {})
    {
        m_agent = start_agent_at(m_runtime, uct_job_key, extra);
    }

    /* An MD on `dev` (empty: the test's device). */
    uct_md_h open_md_handle(const std::string &dev = {})
    {
        return open_uct_md(m_component, dev.empty() ? m_dev : dev);
    }

    void open_md(const char *reg_methods = nullptr)
    {
        if (reg_methods != nullptr) {
            m_env.set("UCX_RVT_REG_METHODS", reg_methods);
        }
        m_md = open_md_handle();
        ASSERT_NE(m_md, nullptr);
    }
    /* closes the MD if one is open, and opens it again */
    void reopen_md(const char *reg_methods)
    {
        if (m_md != nullptr) {
            uct_md_close(m_md);
            m_md = nullptr;
        }
        open_md(reg_methods);
    }

    void open_iface_on(uct_md_h md, opened_iface &oi,
                       ucs_status_t expect          = UCS_OK,
                       const iface_options &options = {})
    {
        ASSERT_EQ(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                           &oi.async),
                  UCS_OK);
        ASSERT_EQ(uct_worker_create(oi.async, UCS_THREAD_MODE_SINGLE,
                                    &oi.worker),
                  UCS_OK);
        uct_iface_config_t *config;
        ASSERT_EQ(uct_md_iface_config_read(md, "rvt", nullptr, nullptr,
                                           &config),
                  UCS_OK);
        const std::string dev_name = (options.device.empty() ? m_dev :
                                                               options.device) +
                                     ":1";
        uct_iface_params_t params{};
        params.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                            UCT_IFACE_PARAM_FIELD_DEVICE;
        params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
        params.mode.device.tl_name  = "rvt";
        params.mode.device.dev_name = dev_name.c_str();
        if (options.err_handler != nullptr) {
            params.field_mask |= UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                 UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                                 UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
            params.err_handler       = options.err_handler;
            params.err_handler_arg   = options.err_handler_arg;
            params.err_handler_flags = 0; /* called from progress */
        }
        params.field_mask |= options.am_align_fields;
        params.am_alignment    = options.am_alignment;
        params.am_align_offset = options.am_align_offset;
        ucs_status_t status    = uct_iface_open(md, oi.worker, &params, config,
                                                &oi.iface);
        uct_config_release(config);
        ASSERT_EQ(status, expect) << ucs_status_string(status);
        if (status == UCS_OK) {
            uct_iface_progress_enable(oi.iface,
                                      UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
        } else {
            oi.iface = nullptr;
        }
    }

    void open_iface(opened_iface &oi, ucs_status_t expect = UCS_OK,
                    const iface_options &options = {})
    {
        open_iface_on(m_md, oi, expect, options);
    }

    /* An rvt device other than the test's, if the component lists one
     * (the testbed's other nodes' rxe devices are visible on every node,
     * and policy routing sends their traffic through the bridge); empty
     * if there is none. */
    std::string other_device()
    {
        uct_component_attr_t attr{};
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        EXPECT_EQ(uct_component_query(m_component, &attr), UCS_OK);
        std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
        attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        attr.md_resources = mds.data();
        EXPECT_EQ(uct_component_query(m_component, &attr), UCS_OK);
        for (const auto &md : mds) {
            if (m_dev != md.md_name) {
                return md.md_name;
            }
        }
        return {};
    }

    /* The MRs the agent holds for this process, as its status says; -1
     * when this process is not attached. */
    int agent_mrs()
    {
        auto st = rvt::client::query_status(m_socket, false);
        if (!st) {
            ADD_FAILURE() << st.error();
            return -1;
        }
        const auto status = nlohmann::json::parse(st.value(), nullptr, false);
        if (status.is_discarded() || !status.contains("clients")) {
            ADD_FAILURE() << "not the agent's status JSON: " << st.value();
            return -1;
        }
        for (const auto &c : status["clients"]) {
            if (c.value("pid", -1) == getpid()) {
                return c.value("mrs", -1);
            }
        }
        return -1;
    }

    inline static void *s_module = nullptr;
    inline static std::string s_dlerror;

    env_scope m_env;
    std::string m_dev, m_runtime, m_socket;
    pid_t m_agent = -1; /* the agent of m_runtime and uct_job_key */
    std::vector<pid_t> m_agents; /* every agent started, stopped at the end */
    uct_component_h m_component = nullptr;
    uct_md_h m_md               = nullptr;
};

} // namespace rvt::test

#endif
