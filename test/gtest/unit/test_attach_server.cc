/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The attach path without RDMA: the agent's attach server and the client
 * library's attach(), over a real Unix socket, with /dev/null standing in
 * for the verbs command fd. Covers acceptance, index reuse after a client
 * dies, and a refusal with its reason for every kind of bad input, after
 * which the server keeps serving.
 */
#include "uct/ib/rvt/agent/attach/attach_server.h"
#include "uct/ib/rvt/agent/engine/mr_registry.h"
#include "test/gtest/unit/mr_driver.h"
#include "uct/ib/rvt/client/attach.h"
#include "uct/ib/rvt/client/registration.h"
#include "uct/ib/rvt/client/status.h"
#include "uct/ib/rvt/common/fd_passing.h"
#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/common/unix_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

using namespace rvt;
using namespace std::chrono_literals;

namespace {

wire::agent_address test_address()
{
    wire::agent_address a{};
    a.gid[10]  = 0xff;
    a.gid[11]  = 0xff;
    a.gid[15]  = 1;
    a.ud_qpn   = 17;
    a.ud_qkey  = 0x5eed;
    a.agent_id = 0xabcdef;
    return a;
}

class attach_fixture : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/rvt-attach-test.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        m_dir = tmpl;
        m_null.reset(open("/dev/null", O_RDWR | O_CLOEXEC));
        ASSERT_TRUE(m_null);
        auto summary = create_shm_segment("rvt-test-summary",
                                          work_summary_size);
        ASSERT_TRUE(summary.ok()) << summary.error();
        m_summary = std::move(summary).value();
    }

    void TearDown() override
    {
        stop();
        std::filesystem::remove_all(m_dir);
    }

    void start(uint32_t max_clients = 4, std::chrono::milliseconds timeout = 2s)
    {
        agent::attach_config cfg{m_dir + "/agent.sock",
                                 "job.1",
                                 m_agent_uid,
                                 max_clients,
                                 shm_layout::make({64, 128, 32, 256}).value(),
                                 timeout,
                                 m_reply_timeout,
                                 m_max_pending,
                                 m_quarantine,
                                 m_max_unattached,
                                 m_max_socket_read,
                                 m_accept_retry};
        agent::device_grant grant{m_null.get(), 7, 11, m_reg_mode, 0xabcdef};
        grant.address         = test_address();
        grant.num_qps         = 4;
        grant.agent_wake_fd   = m_null.get();
        grant.work_summary_fd = m_summary.fd.get();
        auto srv              = agent::attach_server::create(cfg, grant,
                                                             [this](std::string_view line) {
                                                    /* under m_lock already */
                                                    m_log += std::string(line) +
                                                             "\n";
                                                });
        ASSERT_TRUE(srv.ok()) << srv.error();
        m_server = std::move(srv).value();
        if (!m_threaded) {
            return; /* the test runs run_once() itself */
        }
        m_running = true;
        m_thread  = std::thread([this] {
            while (m_running) {
                {
                    std::lock_guard g(m_lock);
                    serve(0);
                }
                std::this_thread::sleep_for(1ms);
            }
        });
    }

    void stop()
    {
        m_running = false;
        if (m_thread.joinable()) {
            m_thread.join();
        }
        m_server.reset();
    }

    /* One pass of the server, its events acted on. */
    void serve(int timeout_ms)
    {
        act_on(m_server->run_once(timeout_ms));
    }

    /* The server's take_pending(), its events acted on: all read? */
    bool take_pending(uint32_t index,
                      agent::attach_server::read_limit limit =
                              agent::attach_server::read_limit::pass_budget)
    {
        auto read = m_server->take_pending(index, limit);
        act_on(std::move(read.events));
        return read.complete;
    }

    /* What the server's owner does with its events: the MR registry
     * behind the socket, as the engine runs it (engine::act_on), or what
     * a test put in m_on_mr, m_resolve_peer, m_status. */
    void act_on(agent::attach_events events)
    {
        for (const agent::attach_event &ev : events) {
            m_events.push_back(ev.kind);
            switch (ev.kind) {
            case agent::attach_event_kind::attached:
                m_mrs.attached(ev.client->index);
                break;
            case agent::attach_event_kind::detached:
                /* its segment is still the agent's to read */
                m_gone_header_index.push_back(
                        ev.client->shm.at<shm_header>(0)->client_index);
                client_gone(*ev.client);
                break;
            case agent::attach_event_kind::peer_request:
                m_server->answer_peer(ev.client->index,
                                      m_resolve_peer ?
                                              m_resolve_peer(ev.peer) :
                                              failure{"no data path here"});
                break;
            case agent::attach_event_kind::mr_notice:
                if (m_on_mr) {
                    m_on_mr(ev.notice);
                    break;
                }
                run_mrs(m_mrs.on_notice(ev.client->index, ev.notice,
                                        m_ring_busy,
                                        agent::mr_registry::asks_device(
                                                ev.notice) ?
                                                device(ev.notice.handle) :
                                                agent::device_mr{}));
                break;
            case agent::attach_event_kind::status_request:
                m_server->answer_status(ev.ticket, m_status(ev.human));
                break;
            case agent::attach_event_kind::retired:
                m_server->answer_retired(ev.client->index);
                break;
            }
        }
    }

    /* Its MRs are deregistered at once (no grace). */
    void client_gone(const agent::attached_client &c)
    {
        m_detached.push_back(c.index);
        const size_t before = m_deregistered.size();
        m_mrs.client_gone(c.index, 0, 0);
        run_mrs(m_mrs.tick(std::chrono::steady_clock::now()));
        m_detached_mrs.emplace_back(m_deregistered.begin() + before,
                                    m_deregistered.end());
    }

    /* Waits until pred() holds (under the server's lock), at most 5 s. */
    template<class Pred> bool eventually(Pred pred)
    {
        for (int i = 0; i < 500; ++i) {
            {
                std::lock_guard g(m_lock);
                if (pred()) {
                    return true;
                }
            }
            std::this_thread::sleep_for(10ms);
        }
        return false;
    }

    /* Connects as a raw client (no library code in between). */
    unique_fd raw_connect()
    {
        unique_fd s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_un addr{};
        addr.sun_family  = AF_UNIX;
        std::string path = m_dir + "/agent.sock";
        path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
        EXPECT_EQ(connect(s.get(), (sockaddr *)&addr, sizeof(addr)), 0);
        return s;
    }

    /* Status requests are answered with `json` (and "human text"). */
    void serve_status(std::string json)
    {
        std::lock_guard g(m_lock);
        m_status = [json](bool human) {
            return human ? std::string("human text") : json;
        };
    }

    /* Asks for the JSON status as a raw client that reads nothing yet. */
    unique_fd ask_status()
    {
        unique_fd s = raw_connect();
        auto req    = wire::make_status_request(0);
        EXPECT_EQ(send(s.get(), &req, sizeof(req), MSG_NOSIGNAL),
                  (ssize_t)sizeof(req));
        return s;
    }

    /* Sends raw bytes as a client and returns the agent's reply. */
    wire::attach_reply
    raw_exchange(std::span<const std::byte> bytes, bool half_close = false)
    {
        unique_fd s = raw_connect();
        EXPECT_EQ(send(s.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
                  (ssize_t)bytes.size());
        if (half_close) {
            shutdown(s.get(), SHUT_WR);
        }
        wire::attach_reply rep{};
        pollfd pfd{s.get(), POLLIN, 0};
        EXPECT_EQ(poll(&pfd, 1, 5000), 1) << "no reply from the agent";
        EXPECT_EQ(recv(s.get(), &rep, sizeof(rep), MSG_WAITALL),
                  (ssize_t)sizeof(rep));
        return rep;
    }

    template<class Msg> static std::span<const std::byte> bytes(const Msg &m)
    {
        return std::as_bytes(std::span(&m, 1));
    }

    void expect_refused(const wire::attach_reply &rep,
                        wire::attach_status status, const std::string &needle)
    {
        EXPECT_EQ(rep.status, static_cast<uint32_t>(status))
                << "reason: " << rep.reason;
        EXPECT_NE(std::string(rep.reason).find(needle), std::string::npos)
                << "reason \"" << rep.reason << "\" lacks \"" << needle << "\"";
    }

    void run_mrs(agent::mr_actions acts)
    {
        const test::mr_driver exec{
                [this](uint32_t handle) {
                    m_deregistered.push_back(handle);
                    return m_dereg ? m_dereg(handle) : result<uint32_t>(handle);
                },
                [this](uint32_t index, uint32_t handle,
                       const std::string &refusal) {
                    m_server->answer_release(index, handle, refusal);
                },
                [this](std::string_view line) {
                    m_log += std::string(line) + "\n";
                },
                [] { return std::vector<agent::client_mr>{}; },
                [this](uint32_t index, uint32_t handle,
                       const std::string &refusal) {
                    m_server->answer_announce(index, handle, refusal);
                }};
        exec.run(m_mrs, std::move(acts));
    }

    /* What the device says of a handle: an MR as announce() makes them
     * (lkey = 1000 + handle), unless m_device_says has the handle. */
    agent::device_mr device(uint32_t handle) const
    {
        auto it = m_device_says.find(handle);
        if (it != m_device_says.end()) {
            return it->second;
        }
        return {agent::device_mr::owner::client,
                {handle, 1000 + handle, 2, 0x1000, 4096}};
    }

    /* The handles client `index` holds, by the registry (lkey = 1000 +
     * handle, as announce() makes them). */
    std::vector<uint32_t> handles_of(uint32_t index) const
    {
        std::vector<uint32_t> out;
        for (const auto &[lkey, mr] : m_mrs.mrs_of(index)) {
            out.push_back(mr.handle);
        }
        std::sort(out.begin(), out.end());
        return out;
    }

    /* Runs `fn` in a child process (another pid, for SO_PEERCRED) and
     * returns the text it returned, with the child's pid. */
    static std::pair<std::string, pid_t>
    in_child(std::function<std::string()> fn)
    {
        int pfd[2];
        EXPECT_EQ(pipe(pfd), 0);
        pid_t child = fork();
        if (child == 0) {
            std::string msg = fn();
            (void)!write(pfd[1], msg.data(), msg.size());
            _exit(0);
        }
        close(pfd[1]);
        char buf[512] = {};
        ssize_t n     = read(pfd[0], buf, sizeof(buf) - 1);
        close(pfd[0]);
        waitpid(child, nullptr, 0);
        EXPECT_GT(n, 0) << "the child said nothing";
        return {buf, child};
    }

    /* Without the server's thread: attaches as the client library does,
     * running the server meanwhile. */
    client::attachment attach_running_it()
    {
        auto f = std::async(std::launch::async, [this] {
            return client::attach(m_dir + "/agent.sock", "job.1");
        });
        while (f.wait_for(0s) != std::future_status::ready) {
            serve(1);
        }
        auto a = f.get();
        EXPECT_TRUE(a.ok()) << a.error();
        return std::move(a).value();
    }

    /* After any refusal the agent must still serve a good client. */
    void expect_still_serving()
    {
        auto a = client::attach(m_dir + "/agent.sock", "job.1");
        EXPECT_TRUE(a.ok()) << a.error();
    }

    std::chrono::milliseconds m_reply_timeout{5000};
    size_t m_max_pending = wire::max_status_size;
    /* none by default: the tests reuse indices at once */
    std::chrono::milliseconds m_quarantine{0};
    /* the server's bounds (attach_config's defaults unless a test sets
     * them) */
    uint32_t m_max_unattached = agent::attach_config{}.max_unattached;
    size_t m_max_socket_read  = agent::attach_config{}.max_socket_read;
    wire::reg_mode m_reg_mode = wire::reg_mode::uverbs_ioctl;
    std::chrono::milliseconds m_accept_retry =
            agent::attach_config{}.accept_retry;
    bool m_threaded = true; /* false: the test runs run_once() */
    uid_t m_agent_uid = getuid(); /* the user the agent serves */
    std::string m_dir;
    /* Connects `sock` to the agent's socket. */
    bool connect_to_agent(int sock) const
    {
        sockaddr_un addr{};
        addr.sun_family  = AF_UNIX;
        std::string path = m_dir + "/agent.sock";
        path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
        return connect(sock, (sockaddr *)&addr, sizeof(addr)) == 0;
    }
    /* Lowers the soft RLIMIT_NOFILE so that only `free` descriptors are
     * left below it (the caller restores it). */
    static bool limit_descriptors(int free)
    {
        rlimit r{};
        const int lowest = fcntl(0, F_DUPFD_CLOEXEC, 0);
        if (lowest < 0 || getrlimit(RLIMIT_NOFILE, &r) != 0) {
            return false;
        }
        close(lowest);
        r.rlim_cur = static_cast<rlim_t>(lowest + free);
        return setrlimit(RLIMIT_NOFILE, &r) == 0;
    }

    unique_fd m_null;
    shm_segment m_summary; /* the work summary the grant passes */
    std::unique_ptr<agent::attach_server> m_server;
    std::mutex m_lock;
    std::string m_log;
    std::vector<uint32_t> m_detached;
    std::vector<std::vector<uint32_t>> m_detached_mrs;
    /* the MRs: what the agent's device is asked to deregister (by the
     * registry's actions) and what it answers (m_dereg; default: done) */
    agent::mr_registry m_mrs{imm::max_clients, 0ms};
    std::vector<uint32_t> m_deregistered;
    std::function<result<uint32_t>(uint32_t)> m_dereg;
    bool m_ring_busy = false; /* what the registry is told of the ring */
    /* the owner's answers (act_on): set, they replace the registry's */
    std::function<void(const wire::mr_notice &)> m_on_mr;
    std::function<result<uint32_t>(const wire::agent_address &)> m_resolve_peer;
    std::function<std::string(bool human)> m_status = [](bool) {
        return std::string("{}");
    };
    /* the events the server returned, in order */
    std::vector<agent::attach_event_kind> m_events;
    /* the client index in each detached client's segment, read as the
     * owner acted on its detached event */
    std::vector<uint32_t> m_gone_header_index;
    std::map<uint32_t, agent::device_mr> m_device_says; /* see device() */
    std::atomic<bool> m_running{false};
    std::thread m_thread;
};

} // namespace

TEST_F(attach_fixture, attach_gives_index_fds_and_segment)
{
    start();
    auto a = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_TRUE(a.ok()) << a.error();
    const auto &at = a.value();
    EXPECT_EQ(at.client_index, 0u);
    EXPECT_EQ(at.pd_handle, 7u);
    EXPECT_EQ(at.driver_id, 11u);
    EXPECT_EQ(at.mode, wire::reg_mode::uverbs_ioctl);
    EXPECT_EQ(at.agent_id, 0xabcdefu);
    EXPECT_TRUE(at.cmd_fd) << "no command fd passed";
    EXPECT_EQ(at.layout.caps.work, 64u);
    EXPECT_EQ(at.layout.caps.completion, 128u);
    EXPECT_EQ(at.layout.caps.inbound, 32u);
    EXPECT_EQ(at.max_am_size, 256u);
    EXPECT_EQ(at.num_qps, 4u);
    EXPECT_EQ(at.address, test_address());
    EXPECT_TRUE(at.agent_wake_fd && at.client_wake_fd) << "eventfds missing";
    EXPECT_EQ(at.shm.size(), at.layout.size);

    /* the segment really is shared: the agent sees what the client wrote */
    at.shm.at<ring_indices>(at.layout.work_offset)->head.store(3);
    ASSERT_TRUE(eventually([&] { return m_server->client(0) != nullptr; }));
    std::lock_guard g(m_lock);
    EXPECT_EQ(m_server->client(0)
                      ->shm.at<ring_indices>(at.layout.work_offset)
                      ->head.load(),
              3u);
}

TEST_F(attach_fixture, a_dead_clients_index_is_cleaned_up_and_reused)
{
    start();
    auto a = client::attach(m_dir + "/agent.sock", "job.1");
    auto b = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(b.value().client_index, 1u);

    /* a process killed with SIGKILL while attached: its socket closes
     * with it, and that is all the agent learns */
    int pfd[2];
    ASSERT_EQ(pipe(pfd), 0);
    pid_t child = fork();
    if (child == 0) {
        auto c         = client::attach(m_dir + "/agent.sock", "job.1");
        uint32_t index = c.ok() ? c.value().client_index : 999;
        (void)!write(pfd[1], &index, sizeof(index));
        pause();
        _exit(0);
    }
    close(pfd[1]);
    uint32_t index = 999;
    ASSERT_EQ(read(pfd[0], &index, sizeof(index)), (ssize_t)sizeof(index));
    close(pfd[0]);
    EXPECT_EQ(index, 2u);
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    ASSERT_TRUE(eventually([&] { return m_detached.size() == 1; }));
    {
        std::lock_guard g(m_lock);
        EXPECT_EQ(m_detached[0], 2u);
        EXPECT_EQ(m_server->attached_count(), 2u);
    }
    a = failure{"closed"}; /* detach index 0 by closing */
    ASSERT_TRUE(eventually([&] { return m_detached.size() == 2; }));
    auto c = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_TRUE(c.ok()) << c.error();
    EXPECT_EQ(c.value().client_index, 0u) << "the lowest free index";
}

/* Each attachment of an index has its generation (imm.h): a reused index
 * comes with the next one, and other indices count their own. */
TEST_F(attach_fixture, a_reused_index_comes_with_its_next_generation)
{
    start();
    auto a = client::attach(m_dir + "/agent.sock", "job.1");
    auto b = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a.value().client_generation, 1u);
    EXPECT_EQ(b.value().client_generation, 1u);
    for (uint32_t round = 2; round <= 4; ++round) {
        const size_t before = m_detached.size();
        a                   = failure{"closed"};
        ASSERT_TRUE(
                eventually([&] { return m_detached.size() == before + 1; }));
        a = client::attach(m_dir + "/agent.sock", "job.1");
        ASSERT_TRUE(a.ok()) << a.error();
        EXPECT_EQ(a.value().client_index, 0u);
        EXPECT_EQ(a.value().client_generation, round);
    }
    std::lock_guard g(m_lock);
    EXPECT_EQ(m_server->client(0)->generation, 4u);
    EXPECT_EQ(m_server->client(1)->generation, 1u);
}

/* A detached index waits out its quarantine before anyone gets it again
 * (what keeps its generation from wrapping quickly); with every free
 * index in quarantine, an attach is refused, saying so. */
TEST_F(attach_fixture, a_detached_index_is_quarantined)
{
    m_quarantine = 1h;
    start(2);
    auto a = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_TRUE(a.ok()) << a.error();
    a = failure{"closed"};
    ASSERT_TRUE(eventually([&] { return m_detached.size() == 1; }));
    auto b = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_TRUE(b.ok()) << b.error();
    EXPECT_EQ(b.value().client_index, 1u) << "index 0 is in quarantine";
    auto c = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.error().find("1 of them detached less than 3600000 ms ago"),
              std::string::npos)
            << c.error();
}

/* A sibling (attach_wire.h, "Siblings") names a live leader of its own
 * process and gets an index of its own; when its leader's attachment ends,
 * its own ends too, while a sibling's end leaves the leader be. */
TEST_F(attach_fixture, a_sibling_attaches_and_ends_with_its_leader)
{
    start();
    const std::string path = m_dir + "/agent.sock";
    auto l                 = client::attach(path, "job.1");
    ASSERT_TRUE(l.ok()) << l.error();
    const wire::leader_ref ref{l.value().client_index,
                               l.value().client_generation};
    auto s1 = client::attach(path, "job.1", 5000ms, ref);
    auto s2 = client::attach(path, "job.1", 5000ms, ref);
    ASSERT_TRUE(s1.ok()) << s1.error();
    ASSERT_TRUE(s2.ok()) << s2.error();
    auto other = client::attach(path, "job.1");
    ASSERT_TRUE(other.ok()) << other.error();
    {
        std::lock_guard g(m_lock);
        const auto *c = m_server->client(s1.value().client_index);
        ASSERT_NE(c, nullptr);
        EXPECT_EQ(c->leader, std::optional<uint32_t>(ref.index));
        EXPECT_FALSE(m_server->client(ref.index)->leader);
        EXPECT_NE(m_log.find(", a sibling of index " +
                             std::to_string(ref.index)),
                  std::string::npos)
                << m_log;
    }

    s2 = failure{"closed"}; /* a sibling goes: the leader stays */
    ASSERT_TRUE(eventually([&] { return m_detached.size() == 1; }));
    const int s1_sock = s1.value().sock.get();
    auto closed       = [](int fd) {
        pollfd p{fd, POLLRDHUP, 0};
        return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP));
    };
    EXPECT_FALSE(closed(s1_sock));

    l = failure{"closed"}; /* the leader goes: so does s1, not `other` */
    ASSERT_TRUE(eventually([&] { return m_detached.size() == 3; }));
    EXPECT_TRUE(closed(s1_sock)) << "the agent kept a dead leader's sibling";
    EXPECT_FALSE(closed(other.value().sock.get()));
    std::lock_guard g(m_lock);
    EXPECT_EQ(m_detached[1], ref.index) << "the leader first, then its group";
    EXPECT_EQ(m_server->attached_count(), 1u);
    EXPECT_NE(m_log.find("its leader index " + std::to_string(ref.index) +
                         " is gone: detaching it"),
              std::string::npos)
            << m_log;
}

/* A sibling request naming anything but a live leader of the same process
 * (by SO_PEERCRED) is refused (bad_sibling), naming the value; the agent
 * serves on. */
TEST_F(attach_fixture, a_forged_sibling_request_is_refused_naming_the_value)
{
    start();
    const std::string path = m_dir + "/agent.sock";
    auto sibling_of        = [&](uint32_t index, uint32_t generation) {
        return client::attach(path, "job.1", 5000ms,
                                     wire::leader_ref{index, generation});
    };
    auto expect_bad = [](const result<client::attachment> &r,
                         const std::string &needle) {
        ASSERT_FALSE(r.ok()) << "accepted a sibling it must refuse";
        EXPECT_NE(r.error().find("bad sibling"), std::string::npos)
                << r.error();
        EXPECT_NE(r.error().find(needle), std::string::npos) << r.error();
    };
    auto l = client::attach(path, "job.1");
    ASSERT_TRUE(l.ok()) << l.error();
    const uint32_t li = l.value().client_index;
    const uint32_t lg = l.value().client_generation;

    expect_bad(sibling_of(3, 1), "leader index 3 generation 1 is not attached");
    expect_bad(sibling_of(li, lg + 1),
               "leader index " + std::to_string(li) + " generation " +
                       std::to_string(lg + 1) +
                       ": that index is attached with generation " +
                       std::to_string(lg));
    auto s = sibling_of(li, lg);
    ASSERT_TRUE(s.ok()) << s.error();
    expect_bad(sibling_of(s.value().client_index, s.value().client_generation),
               "is itself a sibling of index " + std::to_string(li));

    /* another process (its pid by SO_PEERCRED; the pid in its message is
     * ours, forged) may not join */
    const auto [buf, child] = in_child([&] {
        auto a = client::attach(path, "job.1", 5000ms,
                                wire::leader_ref{li, lg});
        return a.ok() ? std::string("ACCEPTED") : a.error();
    });
    EXPECT_NE(std::string(buf).find("leader index " + std::to_string(li) +
                                    " belongs to pid " +
                                    std::to_string(getpid())),
              std::string::npos)
            << buf;
    EXPECT_NE(std::string(buf).find("not to this client (pid " +
                                    std::to_string(child)),
              std::string::npos)
            << buf;

    l = failure{"closed"}; /* a dead leader takes no more siblings */
    ASSERT_TRUE(eventually([&] { return m_detached.size() == 2; }));
    expect_bad(sibling_of(li, lg), "leader index " + std::to_string(li) +
                                           " generation " + std::to_string(lg) +
                                           " is not attached");
    expect_still_serving();
}

/* One process (by SO_PEERCRED) holds at most 1 + max-client-siblings
 * attachments at once, its siblings and its further leaders alike
 * (attach_server.h, "Attachments of one process"): the next is refused
 * (agent_full) naming the bound and the value, another process still
 * attaches, and one of its own that ends makes room for another. */
TEST_F(attach_fixture, a_process_holds_at_most_max_client_siblings_more)
{
    const uint32_t siblings = agent::attach_config{}.max_siblings;
    ASSERT_EQ(siblings, 127u) << "rvtd's default";
    start(siblings + 4);
    const std::string path = m_dir + "/agent.sock";
    auto l                 = client::attach(path, "job.1");
    ASSERT_TRUE(l.ok()) << l.error();
    const wire::leader_ref ref{l.value().client_index,
                               l.value().client_generation};
    std::vector<client::attachment> mine;
    for (uint32_t i = 0; i < siblings; ++i) {
        auto s = client::attach(path, "job.1", 5000ms, ref);
        ASSERT_TRUE(s.ok()) << "sibling " << i << ": " << s.error();
        mine.push_back(std::move(s).value());
    }
    const std::string held = "pid " + std::to_string(getpid()) + " holds " +
                             std::to_string(siblings + 1) +
                             " attachments of this agent: expected at most "
                             "1 + max-client-siblings (" +
                             std::to_string(siblings) + ")";
    auto one_more = client::attach(path, "job.1", 5000ms, ref);
    ASSERT_FALSE(one_more.ok()) << "a process took more than its share";
    EXPECT_NE(one_more.error().find("agent full"), std::string::npos)
            << one_more.error();
    EXPECT_NE(one_more.error().find(held), std::string::npos)
            << one_more.error();
    auto leader = client::attach(path, "job.1");
    ASSERT_FALSE(leader.ok()) << "a second leader is one more attachment";
    EXPECT_NE(leader.error().find(held), std::string::npos) << leader.error();

    const auto [buf, child] = in_child([&] {
        auto a = client::attach(path, "job.1");
        return a.ok() ? std::string("ACCEPTED") : a.error();
    });
    EXPECT_EQ(std::string(buf), "ACCEPTED") << "another process's share";

    mine.pop_back(); /* one of its siblings ends: room for another */
    ASSERT_TRUE(eventually([&] { return m_detached.size() == 2; }));
    auto again = client::attach(path, "job.1", 5000ms, ref);
    EXPECT_TRUE(again.ok()) << again.error();
    std::lock_guard g(m_lock);
    EXPECT_NE(m_log.find("refused client pid " + std::to_string(getpid())),
              std::string::npos)
            << m_log;
}

/* Whatever clients do at the socket, the log gets a line at the 1st, 2nd,
 * 4th, ... time of each kind (format.h, worth_logging): refusals of each
 * status, attaches, departures; each line counts them. */
TEST_F(attach_fixture, lines_clients_cause_are_logged_at_the_1st_2nd_4th)
{
    start();
    const std::string path = m_dir + "/agent.sock";
    for (int i = 0; i < 20; ++i) {
        auto a = client::attach(path, "job.2");
        ASSERT_FALSE(a.ok());
    }
    for (int i = 0; i < 20; ++i) {
        auto a = client::attach(path, "job.1");
        ASSERT_TRUE(a.ok()) << a.error();
        a = failure{"closed"};
        ASSERT_TRUE(eventually([&] {
            return m_detached.size() == static_cast<size_t>(i + 1);
        }));
    }
    const char junk[] = "GET / HTTP/1.1\r\n\r\n";
    for (int i = 0; i < 3; ++i) {
        expect_refused(raw_exchange(std::as_bytes(std::span(junk))),
                       wire::attach_status::bad_message, "bad magic");
    }
    std::lock_guard g(m_lock);
    auto lines = [&](const std::string &needle) {
        size_t n = 0;
        for (size_t at = 0; (at = m_log.find(needle, at)) != std::string::npos;
             ++at) {
            ++n;
        }
        return n;
    };
    EXPECT_EQ(lines("wrong job key"), 5u) << "20: the 1st, 2nd, 4th, 8th and "
                                             "16th\n"
                                          << m_log;
    EXPECT_EQ(lines("(16 so far)"), 3u) << m_log;
    EXPECT_EQ(lines(" attached as index "), 5u) << m_log;
    EXPECT_EQ(lines(") is gone"), 5u) << m_log;
    EXPECT_EQ(lines("bad magic"), 2u) << "a kind of its own: 1st, 2nd\n"
                                      << m_log;
}

TEST_F(attach_fixture, wrong_job_key_is_refused_with_both_keys)
{
    start();
    auto a = client::attach(m_dir + "/agent.sock", "job.2");
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.error().find("wrong job key"), std::string::npos) << a.error();
    EXPECT_NE(a.error().find("'job.2'"), std::string::npos) << a.error();
    EXPECT_NE(a.error().find("'job.1'"), std::string::npos) << a.error();
    expect_still_serving();
}

TEST_F(attach_fixture, another_users_process_is_refused)
{
    if (geteuid() != 0) {
        GTEST_SKIP() << "needs root to become another user";
    }
    start();
    chmod(m_dir.c_str(), 0755);
    chmod((m_dir + "/agent.sock").c_str(), 0777);
    const auto [buf, child] = in_child([&] {
        if (setresgid(65534, 65534, 65534) != 0 ||
            setresuid(65534, 65534, 65534) != 0) {
            return std::string("setresuid failed");
        }
        auto a = client::attach(m_dir + "/agent.sock", "job.1");
        return a.ok() ? std::string("ACCEPTED") : a.error();
    });
    EXPECT_NE(std::string(buf).find("uid 65534: this agent serves uid 0"),
              std::string::npos)
            << buf;
    expect_still_serving();
}

/* Becomes `uid` (group too) in a child and asks for the status and to
 * attach: what each got ("status: ..." and "attach: ..." lines). */
static std::string as_user_ask(const std::string &socket, uid_t uid)
{
    int pfd[2];
    EXPECT_EQ(pipe(pfd), 0);
    const pid_t child = fork();
    if (child == 0) {
        std::string msg;
        if (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) {
            msg = "setresuid failed";
        } else {
            auto st = client::query_status(socket, false);
            msg     = "status: " + (st.ok() ? "ANSWERED " + st.value() :
                                              st.error());
            auto a  = client::attach(socket, "job.1");
            msg += "\nattach: " + (a.ok() ? std::string("ACCEPTED") :
                                             a.error());
        }
        (void)!write(pfd[1], msg.data(), msg.size());
        _exit(0);
    }
    close(pfd[1]);
    std::string out;
    char buf[512];
    for (ssize_t n; (n = read(pfd[0], buf, sizeof(buf))) > 0;) {
        out.append(buf, static_cast<size_t>(n));
    }
    close(pfd[0]);
    waitpid(child, nullptr, 0);
    return out;
}

/* Root may read any agent's status (rvt-status --all), never attach to
 * another user's; a third user gets neither, and each refusal names the
 * uids. */
TEST_F(attach_fixture, root_reads_another_users_status_and_may_not_attach)
{
    if (geteuid() != 0) {
        GTEST_SKIP() << "needs root to become another user";
    }
    m_agent_uid = 65534;
    serve_status("{\"of\": 65534}");
    start();
    chmod(m_dir.c_str(), 0755);
    chmod((m_dir + "/agent.sock").c_str(), 0777);
    const std::string sock = m_dir + "/agent.sock";

    auto st = client::query_status(sock, false);
    ASSERT_TRUE(st.ok()) << st.error();
    EXPECT_EQ(st.value(), "{\"of\": 65534}");
    auto a = client::attach(sock, "job.1");
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.error().find("uid 0: this agent serves uid 65534"),
              std::string::npos)
            << a.error();

    /* its own user: both */
    const std::string own = as_user_ask(sock, 65534);
    EXPECT_NE(own.find("status: ANSWERED {\"of\": 65534}"), std::string::npos)
            << own;
    EXPECT_NE(own.find("attach: ACCEPTED"), std::string::npos) << own;

    /* another user: neither, named */
    const std::string other = as_user_ask(sock, 65533);
    EXPECT_NE(other.find("status: status of agent at " + sock +
                         ": refused: uid 65533: this agent answers uid "
                         "65534 and root"),
              std::string::npos)
            << other;
    EXPECT_NE(other.find("attach: "), std::string::npos) << other;
    EXPECT_NE(other.find("uid 65533: this agent serves uid 65534"),
              std::string::npos)
            << other;
    std::lock_guard g(m_lock);
    EXPECT_NE(m_log.find("uid 65533: this agent answers uid 65534 and root"),
              std::string::npos)
            << m_log;
}

/* The agent's own user is no root here: another user's status request is
 * refused as its attach is. */
TEST_F(attach_fixture, another_users_status_request_is_refused)
{
    if (geteuid() != 0) {
        GTEST_SKIP() << "needs root to become another user";
    }
    start();
    chmod(m_dir.c_str(), 0755);
    chmod((m_dir + "/agent.sock").c_str(), 0777);
    const std::string out = as_user_ask(m_dir + "/agent.sock", 65534);
    EXPECT_NE(out.find("refused: uid 65534: this agent answers uid 0"),
              std::string::npos)
            << out;
    EXPECT_NE(out.find("uid 65534: this agent serves uid 0"), std::string::npos)
            << out;
    expect_still_serving();
}

TEST_F(attach_fixture, garbage_is_refused)
{
    start();
    const char junk[] = "GET / HTTP/1.1\r\nHost: agent\r\n\r\n";
    expect_refused(raw_exchange(std::as_bytes(std::span(junk))),
                   wire::attach_status::bad_message, "bad magic");
    expect_still_serving();
}

TEST_F(attach_fixture, truncated_request_times_out_with_a_reason)
{
    start(4, 200ms);
    auto req = wire::make_attach_request("job.1", 1);
    expect_refused(raw_exchange(bytes(req).first(40)),
                   wire::attach_status::bad_message,
                   "incomplete attach request after 200 ms (40 bytes");
    expect_still_serving();
}

TEST_F(attach_fixture, oversized_and_wrong_version_are_refused)
{
    start();
    auto req       = wire::make_attach_request("job.1", 1);
    req.hdr.length = 1000000;
    expect_refused(raw_exchange(bytes(req)), wire::attach_status::bad_message,
                   "message length 1000000");
    req             = wire::make_attach_request("job.1", 1);
    req.hdr.version = static_cast<uint16_t>(wire::protocol_version + 1);
    expect_refused(raw_exchange(bytes(req)), wire::attach_status::bad_version,
                   "protocol version " +
                           std::to_string(wire::protocol_version + 1));
    expect_still_serving();
}

TEST_F(attach_fixture, bytes_after_the_request_are_refused)
{
    start();
    auto req = wire::make_attach_request("job.1", 1);
    std::vector<std::byte> msg(sizeof(req) + 4);
    std::memcpy(msg.data(), &req, sizeof(req));
    expect_refused(raw_exchange(msg), wire::attach_status::bad_message,
                   "4 bytes after the attach request");
    expect_still_serving();
}

TEST_F(attach_fixture, a_full_agent_says_so)
{
    start(2);
    auto a = client::attach(m_dir + "/agent.sock", "job.1");
    auto b = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_TRUE(a.ok() && b.ok());
    auto c = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.error().find("all 2 client indices are in use"),
              std::string::npos)
            << c.error();
}

/* reg_mode::in_process is for an agent the client's own process runs
 * (test/gtest/uct/): a client with no registrar refuses it, whoever
 * offers it. */
TEST_F(attach_fixture, in_process_registration_needs_an_agent_in_the_process)
{
    m_reg_mode = wire::reg_mode::in_process;
    start();
    auto refused = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().find("no agent runs here"), std::string::npos)
            << refused.error();

    client::set_in_process_registrar(
            std::make_shared<client::in_process_registrar>());
    auto a = client::attach(m_dir + "/agent.sock", "job.1");
    client::set_in_process_registrar(nullptr);
    ASSERT_TRUE(a.ok()) << a.error();
    EXPECT_EQ(a.value().mode, wire::reg_mode::in_process);
    EXPECT_NE(a.value().registrar, nullptr);
}

/* A socket file at the agent's path always accepts: the socket is bound
 * and listening under a staging name before it is renamed there. A client
 * that found the file and connected between a bind() at the path and its
 * listen() was refused, and took the agent for a dead one (its stale
 * file). Here a thread connects as fast as it can while the server is
 * made and unmade 300 times, and on until the thread has reached 20:
 * ENOENT (no agent) and EAGAIN (a full backlog) are fine, ECONNREFUSED
 * never is; nor is a staging file left. */
TEST_F(attach_fixture, a_socket_file_at_the_path_always_accepts)
{
    m_threaded             = false;
    const std::string path = m_dir + "/agent.sock";
    auto addr              = unix_address(path);
    ASSERT_TRUE(addr.ok()) << addr.error();
    std::atomic<bool> done{false};
    std::atomic<uint64_t> refused{0}, accepted{0};
    std::thread knocker([&] {
        while (!done.load()) {
            unique_fd s(::socket(AF_UNIX,
                                 SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                                 0));
            if (::connect(s.get(),
                          reinterpret_cast<const sockaddr *>(&addr.value()),
                          sizeof(sockaddr_un)) == 0) {
                ++accepted;
            } else if (errno == ECONNREFUSED) {
                ++refused;
            }
        }
    });
    /* 300 servers, and more until the knocker has reached 20 of them (a
     * loaded host may not run it for a while) */
    const auto until = std::chrono::steady_clock::now() + 60s;
    for (int i = 0; i < 300 || (accepted.load() < 20 &&
                                std::chrono::steady_clock::now() < until);
         ++i) {
        start();
        m_server.reset();
    }
    done = true;
    knocker.join();
    EXPECT_EQ(refused.load(), 0u) << accepted.load() << " accepted";
    EXPECT_GE(accepted.load(), 20u) << "the knocker never reached a server";
    EXPECT_FALSE(std::filesystem::exists(m_dir + "/agent.new"));
}

TEST_F(attach_fixture, bad_config_is_refused_naming_the_value)
{
    auto layout = shm_layout::make({64, 64, 64, 128}).value();
    agent::device_grant grant{m_null.get(), 1, 1, wire::reg_mode::uverbs_ioctl,
                              1};
    grant.agent_wake_fd   = m_null.get();
    grant.work_summary_fd = m_summary.fd.get();
    auto nolog            = [](std::string_view) {};
    auto r = agent::attach_server::create({m_dir + "/a.sock", "bad key",
                                           getuid(), 4, layout, 1s},
                                          grant, nolog);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("0x20"), std::string::npos) << r.error();
    r = agent::attach_server::create({m_dir + "/a.sock", "k", getuid(), 513,
                                      layout, 1s},
                                     grant, nolog);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("max clients 513"), std::string::npos)
            << r.error();
    r = agent::attach_server::create({std::string(200, 'x'), "k", getuid(), 4,
                                      layout, 1s},
                                     grant, nolog);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("200 characters"), std::string::npos) << r.error();
    EXPECT_FALSE(shm_layout::make({100, 64, 64, 128}).ok());
    EXPECT_NE(shm_layout::make({64, 3, 64, 128}).error().find("capacity 3"),
              std::string::npos);
    EXPECT_NE(shm_layout::make({64, 64, 64, 100}).error().find("slot size 100"),
              std::string::npos);
}

namespace {

void announce(const client::attachment &at, wire::msg_type type,
              uint32_t handle, uint32_t flags = 0)
{
    if (type == wire::msg_type::mr_registered) {
        /* said first, as registration.cc does */
        auto i = wire::make_mr_intent(0x1000, 4096);
        ASSERT_TRUE(send_with_fds(at.sock.get(),
                                  std::as_bytes(std::span(&i, 1)), {})
                            .ok());
    }
    /* lkeys are unique among live MRs, as the kernel makes them */
    auto n = wire::make_mr_notice(type, handle, 1000 + handle, 2, 0x1000, 4096,
                                  flags);
    ASSERT_TRUE(
            send_with_fds(at.sock.get(), std::as_bytes(std::span(&n, 1)), {})
                    .ok());
}

} // namespace

TEST_F(attach_fixture, announced_mrs_are_deregistered_when_their_client_dies)
{
    start();
    auto a = client::attach(m_dir + "/agent.sock", "job.1");
    auto b = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_TRUE(a.ok() && b.ok());
    announce(a.value(), wire::msg_type::mr_registered, 5);
    announce(a.value(), wire::msg_type::mr_registered, 6);
    announce(a.value(), wire::msg_type::mr_release, 5);
    /* b claims a's handle, and releases one it never had and one of a's:
     * all ignored, nothing deregistered for b */
    announce(b.value(), wire::msg_type::mr_registered, 6);
    announce(b.value(), wire::msg_type::mr_release, 77);
    announce(b.value(), wire::msg_type::mr_release, 6);
    announce(b.value(), wire::msg_type::mr_registered, 8);
    ASSERT_TRUE(eventually([&] {
        return m_server->client(1) != nullptr && m_mrs.held_by(1) == 1 &&
               m_mrs.held_by(0) == 1;
    }));
    {
        std::lock_guard g(m_lock);
        EXPECT_EQ(handles_of(0), std::vector<uint32_t>{6});
        EXPECT_EQ(handles_of(1), std::vector<uint32_t>{8});
        EXPECT_EQ(m_deregistered, std::vector<uint32_t>{5})
                << "only a's own release deregisters";
        EXPECT_NE(m_log.find("announced MR handle 6: client index 0 holds "
                             "it: refused"),
                  std::string::npos)
                << m_log;
        EXPECT_NE(m_log.find("MR handle 77 is not this client's"),
                  std::string::npos)
                << m_log;
        EXPECT_NE(m_log.find("MR handle 6 is not this client's"),
                  std::string::npos)
                << m_log;
    }
    a = failure{"closed"};
    ASSERT_TRUE(eventually([&] { return m_detached.size() == 1; }));
    std::lock_guard g(m_lock);
    EXPECT_EQ(m_detached_mrs[0], std::vector<uint32_t>{6})
            << "the dead client's remaining MR, and only it";
}

/* The race the release protocol closes: the kernel reuses an MR handle as
 * soon as it is deregistered. Because only the agent deregisters, the
 * handle is free for the kernel to give to b only after the agent has
 * forgotten a's claim, so b's announcement is always accepted. */
TEST_F(attach_fixture, a_released_handle_reused_by_a_neighbour_is_theirs)
{
    start();
    auto a = client::attach(m_dir + "/agent.sock", "job.1");
    auto b = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_TRUE(a.ok() && b.ok());
    announce(a.value(), wire::msg_type::mr_registered, 33);
    announce(a.value(), wire::msg_type::mr_release, 33);
    /* as the kernel would: 33 is free only once the agent deregistered it */
    ASSERT_TRUE(eventually([&] { return m_deregistered.size() == 1; }));
    announce(b.value(), wire::msg_type::mr_registered, 33);
    ASSERT_TRUE(eventually([&] {
        return m_server->client(1) != nullptr && m_mrs.held_by(1) == 1;
    }));
    std::lock_guard g(m_lock);
    EXPECT_EQ(m_mrs.mrs_of(1).count(1033), 1u) << "b's lkey is known";
    EXPECT_TRUE(handles_of(0).empty());
    EXPECT_EQ(m_log.find("ignored"), std::string::npos) << m_log;
}

TEST_F(attach_fixture, a_release_asking_for_a_reply_gets_one_after_the_dereg)
{
    start();
    std::atomic<bool> fail_device{false};
    {
        std::lock_guard g(m_lock);
        m_dereg = [&](uint32_t h) -> result<uint32_t> {
            if (fail_device) {
                return failure{"DEREG_MR of handle " + std::to_string(h) +
                               ": Device or resource busy"};
            }
            return h;
        };
    }
    auto a = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_TRUE(a.ok());
    auto &at = a.value();
    announce(at, wire::msg_type::mr_registered, 40);
    announce(at, wire::msg_type::mr_registered, 41);
    announce(at, wire::msg_type::mr_registered, 42);

    /* through the client library, as the UCX module does on invalidate */
    client::memory_region mr{40, 1, 2, reinterpret_cast<void *>(0x1000), 4096};
    auto r = client::deregister_memory(at, mr, 5s);
    ASSERT_TRUE(r.ok()) << r.error();
    {
        std::lock_guard g(m_lock);
        EXPECT_EQ(m_deregistered, std::vector<uint32_t>{40})
                << "answered only after the device dropped it";
    }

    mr.handle = 99; /* never announced */
    r         = client::deregister_memory(at, mr, 5s);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("MR handle 99 is not this client's"),
              std::string::npos)
            << r.error();

    fail_device = true;
    mr.handle   = 41;
    r           = client::deregister_memory(at, mr, 5s);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("Device or resource busy"), std::string::npos)
            << r.error();

    /* without a wish for a reply nothing comes back: the next answer on
     * the socket is still the next request's */
    fail_device = false;
    mr.handle   = 42;
    r           = client::deregister_memory(at, mr);
    ASSERT_TRUE(r.ok()) << r.error();
    ASSERT_TRUE(eventually([&] { return m_deregistered.size() == 3; }));
    std::lock_guard g(m_lock);
    EXPECT_TRUE(handles_of(0).empty());
}

/* The registry may put a release off (the client's ring still holds work
 * that may use the MR): the client that asked for an answer gets it only
 * when the MR is gone. */
TEST_F(attach_fixture, a_put_off_release_is_answered_when_it_is_finished)
{
    start();
    {
        std::lock_guard g(m_lock);
        m_ring_busy = true;
    }
    auto a = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_TRUE(a.ok());
    announce(a.value(), wire::msg_type::mr_registered, 50);
    client::memory_region mr{50, 1, 2, reinterpret_cast<void *>(0x1000), 4096};
    std::optional<result<uint32_t>> r;
    std::thread waiter(
            [&] { r = client::deregister_memory(a.value(), mr, 10s); });
    ASSERT_TRUE(eventually([&] { return m_mrs.releases_waiting() == 1; }));
    std::this_thread::sleep_for(300ms);
    {
        std::lock_guard g(m_lock);
        EXPECT_FALSE(r.has_value()) << "answered before the release finished";
        /* until then the MR is still the client's: its work is checked
         * against it, and a death deregisters it */
        EXPECT_EQ(handles_of(0), std::vector<uint32_t>{50});
        EXPECT_TRUE(m_deregistered.empty());
        m_ring_busy = false;
        run_mrs(m_mrs.releases_due({}));
        EXPECT_TRUE(handles_of(0).empty());
    }
    waiter.join();
    ASSERT_TRUE(r.has_value());
    EXPECT_TRUE(r->ok()) << r->error();
}

/* An announcement that asks for an answer, as client::register_memory
 * makes it, gets the registry's verdict, and the client library returns
 * it: accepted, or refused with the reason naming the values. */
TEST_F(attach_fixture, an_announcement_asking_for_an_answer_gets_the_verdict)
{
    start();
    {
        std::lock_guard g(m_lock);
        m_device_says[61] = {agent::device_mr::owner::client,
                             {61, 1061, 2, 0x1000, 8192}};
        m_device_says[62] = {agent::device_mr::owner::agent, {}};
    }
    auto a = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_TRUE(a.ok());
    auto &at = a.value();
    auto i   = wire::make_mr_intent(0x1000, 4096);
    ASSERT_TRUE(
            send_with_fds(at.sock.get(), std::as_bytes(std::span(&i, 1)), {})
                    .ok());
    const auto verdict = [&](uint32_t handle) {
        const client::memory_region mr{handle, 1000 + handle, 2,
                                       reinterpret_cast<void *>(0x1000), 4096};
        auto r = client::announce_memory(at, mr, 5s);
        EXPECT_TRUE(r.ok()) << r.error();
        return r.ok() ? r.value() : wire::mr_registered_reply{};
    };
    auto r = verdict(60);
    EXPECT_EQ(r.status, static_cast<uint32_t>(wire::announce_status::accepted))
            << r.reason;
    EXPECT_STREQ(r.reason, "");
    const auto refused = [](const wire::mr_registered_reply &rep,
                            const std::string &why) {
        EXPECT_EQ(rep.status,
                  static_cast<uint32_t>(wire::announce_status::refused));
        EXPECT_NE(std::string(rep.reason).find(why), std::string::npos)
                << rep.reason;
    };
    refused(verdict(61), "length 4096 announced, the device's is 8192");
    refused(verdict(62), "it is one of the agent's own MRs");
    refused(verdict(63), "this client never said it would register 4096 "
                         "bytes at 0x1000");
    refused(verdict(60), "this client holds it already");
    std::lock_guard g(m_lock);
    EXPECT_EQ(handles_of(0), std::vector<uint32_t>{60});
}

TEST_F(attach_fixture, a_malformed_message_after_attach_detaches_the_client)
{
    start();
    auto a = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_TRUE(a.ok());
    announce(a.value(), wire::msg_type::mr_registered, 9);
    const char junk[] = "this is not a notice at all";
    ASSERT_EQ(send(a.value().sock.get(), junk, sizeof(junk), MSG_NOSIGNAL),
              (ssize_t)sizeof(junk));
    ASSERT_TRUE(eventually([&] { return m_detached.size() == 1; }));
    std::lock_guard g(m_lock);
    EXPECT_EQ(m_detached_mrs[0], std::vector<uint32_t>{9});
    EXPECT_NE(m_log.find("bad magic"), std::string::npos) << m_log;
    EXPECT_EQ(m_server->attached_count(), 0u);
}

TEST_F(attach_fixture, status_requests_get_the_status_text)
{
    start();
    {
        std::lock_guard g(m_lock);
        m_status = [](bool human) {
            return std::string(human ? "human text" : "{\"json\": 1}");
        };
    }
    auto a = client::query_status(m_dir + "/agent.sock", false);
    ASSERT_TRUE(a.ok()) << a.error();
    EXPECT_EQ(a.value(), "{\"json\": 1}");
    auto h = client::query_status(m_dir + "/agent.sock", true);
    ASSERT_TRUE(h.ok()) << h.error();
    EXPECT_EQ(h.value(), "human text");

    auto bad  = wire::make_status_request(0);
    bad.flags = 6;
    expect_refused(raw_exchange(bytes(bad)), wire::attach_status::bad_message,
                   "flags 0x6");
    expect_still_serving();
}

namespace {

/* A status text far larger than a socket buffer, every byte telling its
 * position (so a lost, repeated or reordered piece shows). */
std::string large_status()
{
    std::string text(wire::max_status_size - 4096, ' ');
    for (size_t i = 0; i < text.size(); ++i) {
        text[i] = static_cast<char>('a' + (i / 4096 + i) % 26);
    }
    return text;
}

/* Everything the agent sends on `fd` until it closes it, read `chunk`
 * bytes at a time with `pause` between reads; stops after 10 s of
 * silence. `longest_gap`, if given, gets the longest time between two
 * reads that took bytes: `pause`, or more where the machine was slow to
 * run this thread again. */
std::string
read_until_closed(int fd, size_t chunk, std::chrono::microseconds pause,
                  std::chrono::steady_clock::duration *longest_gap = nullptr)
{
    std::string got;
    std::vector<char> buf(chunk);
    auto last = std::chrono::steady_clock::now();
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 10000) != 1) {
            ADD_FAILURE() << "the agent neither sent nor closed for 10 s";
            return got;
        }
        ssize_t n = recv(fd, buf.data(), buf.size(), 0);
        if (n <= 0) {
            return got;
        }
        const auto now = std::chrono::steady_clock::now();
        if (longest_gap != nullptr) {
            *longest_gap = std::max(*longest_gap, now - last);
        }
        last = now;
        got.append(buf.data(), static_cast<size_t>(n));
        std::this_thread::sleep_for(pause);
    }
}

std::string status_reply_bytes(const std::string &text)
{
    auto hdr = wire::make_status_reply_header(text.size());
    return std::string(reinterpret_cast<const char *>(&hdr), sizeof(hdr)) +
           text;
}

/* Equal, or where the first difference is (not a megabyte of diff). */
::testing::AssertionResult
same_bytes(const std::string &got, const std::string &want)
{
    auto diff = std::mismatch(got.begin(), got.end(), want.begin(), want.end());
    if (got.size() == want.size() && diff.first == got.end()) {
        return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "got " << got.size() << " bytes, expected " << want.size()
           << "; first difference at byte " << (diff.first - got.begin());
}

} // namespace

/* A status client that asks and never reads must not hold the agent's
 * loop: with the reply timeout far longer than the clients' own, a loop
 * held until it ran out would make the second status query and the
 * attach below fail. */
TEST_F(attach_fixture, a_status_reader_that_never_reads_holds_no_one)
{
    m_reply_timeout = 10min;
    start();
    const std::string big = large_status();
    serve_status(big);
    unique_fd slow = ask_status();
    pollfd p{slow.get(), POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 10000), 1) << "the agent did not start answering";
    int queued = 0;
    ASSERT_EQ(ioctl(slow.get(), FIONREAD, &queued), 0);
    ASSERT_LT(static_cast<size_t>(queued), big.size())
            << "the answer fit the socket: nothing was left pending";

    auto h = client::query_status(m_dir + "/agent.sock", true);
    ASSERT_TRUE(h.ok()) << h.error();
    EXPECT_EQ(h.value(), "human text");
    expect_still_serving();

    /* and the slow reader, once it reads, gets all of it */
    EXPECT_TRUE(same_bytes(read_until_closed(slow.get(), 1 << 16, 0us),
                           status_reply_bytes(big)));
    std::lock_guard g(m_lock);
    EXPECT_EQ(m_log.find("dropping"), std::string::npos) << m_log;
}

TEST_F(attach_fixture,
       a_reader_too_slow_for_too_long_is_dropped_with_the_reason)
{
    m_reply_timeout = 300ms;
    start();
    const std::string big = large_status();
    serve_status(big);
    unique_fd slow = ask_status();
    ASSERT_TRUE(eventually([&] {
        return m_log.find("too slow a reader") != std::string::npos;
    })) << m_log;
    {
        std::lock_guard g(m_lock);
        EXPECT_NE(m_log.find("bytes of its status answer still pending after"),
                  std::string::npos)
                << m_log;
        EXPECT_NE(m_log.find("(limit 300 ms): dropping the connection"),
                  std::string::npos)
                << m_log;
    }
    /* what it gets is cut short, then the connection is closed */
    EXPECT_LT(read_until_closed(slow.get(), 1 << 16, 0us).size(),
              sizeof(wire::msg_header) + big.size());
    expect_still_serving();
}

TEST_F(attach_fixture, output_pending_beyond_the_limit_drops_the_connection)
{
    m_max_pending = 64 * 1024;
    start();
    const std::string big = large_status();
    serve_status(big);
    unique_fd slow = ask_status();
    /* no reading until the agent has decided: a reader that drains the
     * socket while the agent writes could take the whole answer */
    EXPECT_TRUE(eventually([&] {
        return m_log.find("more than the limit of 65536: dropping the "
                          "connection") != std::string::npos;
    })) << m_log;
    EXPECT_LT(read_until_closed(slow.get(), 1 << 16, 0us).size(),
              sizeof(wire::msg_header) + big.size());
}

TEST_F(attach_fixture, a_large_answer_read_slowly_arrives_whole)
{
    start();
    const std::string big = large_status();
    serve_status(big);
    unique_fd reader = ask_status();
    EXPECT_TRUE(same_bytes(read_until_closed(reader.get(), 4096, 200us),
                           status_reply_bytes(big)));
    auto again = client::query_status(m_dir + "/agent.sock", false);
    ASSERT_TRUE(again.ok()) << again.error();
    EXPECT_TRUE(same_bytes(again.value(), big));
}

/* The reply timeout counts from the reader's last progress, not from the
 * start of the answer: a reader that keeps taking bytes is never dropped,
 * however long the whole answer takes it.
 *
 * The reader takes 32 KiB every timeout/12: about 32 reads, well over
 * twice the timeout in all, each far within it. A trial says something
 * only if the machine let the reader keep that pace, every gap between
 * its reads under half the timeout: on a loaded machine (at nice 19
 * beside two emulators, a 50 ms pause once took 600 ms) the next trial
 * doubles the timeout and the pause, so the bound follows the machine's
 * speed. */
TEST_F(attach_fixture, a_reader_that_keeps_reading_outlasts_the_reply_timeout)
{
    const std::string big = large_status();
    std::chrono::steady_clock::duration gap{};
    for (m_reply_timeout = 600ms; m_reply_timeout <= 9600ms;
         m_reply_timeout *= 2) {
        start();
        serve_status(big);
        unique_fd reader      = ask_status();
        const auto t0         = std::chrono::steady_clock::now();
        gap                   = {};
        const std::string got = read_until_closed(reader.get(), 1 << 15,
                                                  m_reply_timeout / 12, &gap);
        const auto took       = std::chrono::steady_clock::now() - t0;
        stop();
        if (gap >= m_reply_timeout / 2) {
            std::lock_guard g(m_lock);
            m_log.clear();
            continue; /* the machine, not the agent, set this pace */
        }
        EXPECT_TRUE(same_bytes(got, status_reply_bytes(big)));
        EXPECT_GT(took, 2 * m_reply_timeout)
                << "the answer was read too fast to test the timeout";
        std::lock_guard g(m_lock);
        EXPECT_EQ(m_log.find("too slow a reader"), std::string::npos) << m_log;
        return;
    }
    ADD_FAILURE() << "no trial up to a 9.6 s timeout let the reader keep its "
                     "pace: the last gap between two reads was "
                  << std::chrono::duration_cast<std::chrono::milliseconds>(gap)
                             .count()
                  << " ms";
}

namespace {

/* Sends `count` peer requests on an attached client's socket without
 * reading any reply; returns how many went out before an error. */
size_t send_peer_requests(int sock, size_t count)
{
    auto req = wire::make_peer_request(test_address());
    for (size_t i = 0; i < count; ++i) {
        if (send(sock, &req, sizeof(req), MSG_NOSIGNAL) != sizeof(req)) {
            return i;
        }
    }
    return count;
}

} // namespace

/* The server calls nobody: each thing that happened comes back from
 * run_once() as one event, in order, and the owner's answers go out. */
TEST_F(attach_fixture, each_kind_of_event_comes_back_in_order)
{
    m_threaded     = false;
    m_resolve_peer = [](const wire::agent_address &a) {
        return result<uint32_t>(a.ud_qpn + 1);
    };
    m_status = [](bool human) {
        return std::string(human ? "human" : "{\"events\": 1}");
    };
    start();
    client::attachment a = attach_running_it();
    const uint32_t index = a.client_index;
    announce(a, wire::msg_type::mr_registered, 9);
    ASSERT_EQ(send_peer_requests(a.sock.get(), 1), 1u);
    while (m_events.size() < 4) { /* attached, the intent, the MR, peer */
        serve(10);
    }
    wire::peer_reply rep{};
    ASSERT_EQ(recv(a.sock.get(), &rep, sizeof(rep), MSG_WAITALL),
              (ssize_t)sizeof(rep));
    EXPECT_EQ(rep.peer, test_address().ud_qpn + 1) << "answer_peer's";
    EXPECT_EQ(handles_of(index), std::vector<uint32_t>{9});

    auto status = std::async(std::launch::async, [this] {
        return client::query_status(m_dir + "/agent.sock", false);
    });
    while (status.wait_for(0s) != std::future_status::ready) {
        serve(1);
    }
    auto text = status.get();
    ASSERT_TRUE(text.ok()) << text.error();
    EXPECT_EQ(text.value(), "{\"events\": 1}") << "answer_status's";

    a.sock.reset();
    while (m_detached.empty()) {
        serve(10);
    }
    using kind = agent::attach_event_kind;
    EXPECT_EQ(m_events,
              (std::vector<kind>{kind::attached, kind::mr_notice,
                                 kind::mr_notice, kind::peer_request,
                                 kind::status_request, kind::detached}));
    EXPECT_EQ(m_gone_header_index, std::vector<uint32_t>{index});
    EXPECT_EQ(m_detached_mrs[0], std::vector<uint32_t>{9});
}

/* A retire_address is a `retired` event of the client, which stays
 * attached; answer_retired() answers it. A malformed one detaches. */
TEST_F(attach_fixture, a_retire_request_is_an_event_and_the_client_stays)
{
    m_threaded = false;
    start();
    client::attachment a = attach_running_it();
    const uint32_t index = a.client_index;
    auto req = wire::make_retire_notice(wire::msg_type::retire_address);
    ASSERT_EQ(send(a.sock.get(), &req, sizeof(req), MSG_NOSIGNAL),
              (ssize_t)sizeof(req));
    while (m_events.size() < 2) {
        serve(10);
    }
    using kind = agent::attach_event_kind;
    EXPECT_EQ(m_events, (std::vector<kind>{kind::attached, kind::retired}));
    wire::retire_notice rep{};
    ASSERT_EQ(recv(a.sock.get(), &rep, sizeof(rep), MSG_WAITALL),
              (ssize_t)sizeof(rep));
    EXPECT_TRUE(wire::parse_retire_notice(std::as_bytes(std::span(&rep, 1)),
                                          wire::msg_type::retire_address_reply)
                        .ok());
    serve(10);
    EXPECT_NE(m_server->client(index), nullptr);
    EXPECT_TRUE(m_detached.empty());

    req.reserved[0] = 1;
    ASSERT_EQ(send(a.sock.get(), &req, sizeof(req), MSG_NOSIGNAL),
              (ssize_t)sizeof(req));
    for (int i = 0; i < 100 && m_detached.empty(); ++i) {
        serve(10);
    }
    EXPECT_EQ(m_detached, std::vector<uint32_t>{index});
}

/* More descriptors ready at once than one epoll batch holds (64): 100
 * connections that all hang up before the server's next pass, as the
 * ranks of a large job do when they end together. The pass takes them
 * and returns; it used to ask epoll again for as long as a batch came
 * back full, which level-triggered descriptors never stop doing. The
 * pass runs in a child under alarm(): a pass that never returns is a
 * failure, not a hung test. */
TEST_F(attach_fixture,
       a_pass_returns_when_more_connections_are_ready_than_a_batch)
{
    constexpr int conns = 100;
    m_threaded          = false;
    m_max_unattached    = conns + 1;
    start(4, 30s);
    std::vector<unique_fd> socks;
    for (int i = 0; i < conns; ++i) {
        socks.push_back(raw_connect());
        ASSERT_TRUE(socks.back());
    }
    for (int i = 0; i < 20; ++i) {
        serve(10); /* accepts them: the listener's backlog is drained */
    }
    socks.clear(); /* every one hangs up: all readable at once */
    const auto [buf, child] = in_child([&] {
        alarm(20);
        serve(0);
        return std::string("RETURNED");
    });
    EXPECT_EQ(std::string(buf), "RETURNED")
            << "a pass with " << conns << " connections ready did not return";
}

/* The owner answers a status request after run_once() has returned; once
 * all of the answer is sent, the server's descriptor is readable, so that
 * a loop sleeping on it wakes and the next pass closes the connection. */
TEST_F(attach_fixture, an_answered_status_request_wakes_the_loop_to_close_it)
{
    m_threaded = false;
    start();
    unique_fd s = ask_status();
    while (m_events.empty()) {
        serve(10); /* its status_request, answered by act_on */
    }
    ASSERT_EQ(m_events[0], agent::attach_event_kind::status_request);
    EXPECT_EQ(m_server->intake().unattached, 1u);
    std::vector<pollfd> pfds;
    m_server->poll_fds(pfds);
    ASSERT_EQ(poll(pfds.data(), pfds.size(), 0), 1)
            << "nothing wakes a sleeping loop to close it";
    serve(0);
    EXPECT_EQ(m_server->intake().unattached, 0u) << "closed";
    char buf[64];
    EXPECT_GT(recv(s.get(), buf, sizeof(buf), 0), 0) << "the answer";
}

/* Replies to an attached client share the status answer's path: what its
 * socket does not take waits, in order, until the client reads. */
TEST_F(attach_fixture, replies_a_client_is_slow_to_read_wait_in_order)
{
    m_reply_timeout = 10min;
    start();
    auto next = std::make_shared<uint32_t>(0); /* under m_lock */
    {
        std::lock_guard g(m_lock);
        m_resolve_peer = [next](const wire::agent_address &) {
            return result<uint32_t>((*next)++);
        };
    }
    auto a = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_TRUE(a.ok()) << a.error();
    const int sock = a.value().sock.get();
    /* far more replies than a socket buffer holds */
    constexpr size_t count = 4000;
    ASSERT_EQ(send_peer_requests(sock, count), count);
    ASSERT_TRUE(eventually([&] { return *next == count; }));
    for (uint32_t i = 0; i < count; ++i) {
        wire::peer_reply rep{};
        ASSERT_EQ(recv(sock, &rep, sizeof(rep), MSG_WAITALL),
                  (ssize_t)sizeof(rep))
                << "reply " << i;
        auto parsed = wire::parse_peer_reply(std::as_bytes(std::span(&rep, 1)));
        ASSERT_TRUE(parsed.ok()) << "reply " << i << ": " << parsed.error();
        ASSERT_EQ(rep.peer, i);
    }
    std::lock_guard g(m_lock);
    EXPECT_TRUE(m_detached.empty()) << m_log;
}

TEST_F(attach_fixture, a_client_with_replies_beyond_the_limit_is_detached)
{
    m_reply_timeout = 10min;
    m_max_pending   = 4096;
    start();
    auto a = client::attach(m_dir + "/agent.sock", "job.1");
    ASSERT_TRUE(a.ok()) << a.error();
    (void)send_peer_requests(a.value().sock.get(), 4000);
    ASSERT_TRUE(eventually([&] { return m_detached.size() == 1; })) << m_log;
    std::lock_guard g(m_lock);
    EXPECT_NE(m_log.find("(a peer reply of 152 bytes added), more than "
                         "the limit of 4096: dropping the connection"),
              std::string::npos)
            << m_log;
}

/* Connections that never send a request: at most max_unattached are
 * accepted at once (each an fd and a buffer); the others wait in the
 * listen backlog, and a real client queued behind them attaches once
 * their request timeout has closed them. */
TEST_F(attach_fixture, connections_that_never_attach_are_bounded)
{
    m_max_unattached = 4;
    start(4, 200ms);
    std::vector<unique_fd> squatters;
    for (int i = 0; i < 16; ++i) {
        squatters.push_back(raw_connect());
    }
    uint32_t most = 0;
    for (int i = 0; i < 100; ++i) { /* the first round, and into the next */
        {
            std::lock_guard g(m_lock);
            most = std::max(most, m_server->intake().unattached);
        }
        std::this_thread::sleep_for(3ms);
    }
    EXPECT_EQ(most, 4u) << "connections accepted and not attached at once";
    auto a = client::attach(m_dir + "/agent.sock", "job.1", 10s);
    ASSERT_TRUE(a.ok()) << a.error();
    std::lock_guard g(m_lock);
    EXPECT_LE(m_server->intake().unattached, 4u);
    EXPECT_GE(m_server->intake().times_full, 2u);
    EXPECT_EQ(m_server->attached_count(), 1u);
    EXPECT_NE(m_log.find("attach server: 4 connections have not attached, "
                         "max-unattached (4): accepting no more until one "
                         "attaches or closes (1 so far)"),
              std::string::npos)
            << m_log;
    size_t lines = 0;
    for (size_t at = 0;
         (at = m_log.find("max-unattached (4)", at)) != std::string::npos;
         ++at) {
        ++lines;
    }
    EXPECT_LE(lines, 3u) << "logged at the 1st, 2nd and 4th time: " << m_log;
}

/* With no descriptor left, accept() fails and the connection stays in
 * the listen backlog, the listener readable: a loop that kept polling it
 * would spin and log on every pass. The server stops accepting until a
 * descriptor frees (or its retry time passes), then serves the
 * connection. The loop here is rvtd's sleeping one: run_once(50). */
TEST_F(attach_fixture, out_of_descriptors_it_stops_accepting_without_spinning)
{
    m_threaded     = false;
    m_accept_retry = 100ms;
    start();
    serve_status("{\"ok\": true}");
    unique_fd s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_TRUE(s);
    /* no descriptor below the limit is free: the next one fails EMFILE */
    rlimit saved{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
    ASSERT_TRUE(limit_descriptors(0));
    ASSERT_TRUE(connect_to_agent(s.get()));
    auto req = wire::make_status_request(0);
    ASSERT_EQ(send(s.get(), &req, sizeof(req), MSG_NOSIGNAL),
              (ssize_t)sizeof(req));
    int passes      = 0;
    const auto stop = std::chrono::steady_clock::now() + 500ms;
    while (std::chrono::steady_clock::now() < stop) {
        serve(50);
        ++passes;
    }
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
    EXPECT_LT(passes, 40) << "the loop spun: " << m_log;
    EXPECT_GE(m_server->intake().fd_shortages, 2u) << "retried meanwhile";
    size_t lines = 0;
    for (size_t at = 0;
         (at = m_log.find("accept failed", at)) != std::string::npos; ++at) {
        ++lines;
    }
    EXPECT_LE(lines, 4u) << m_log;
    EXPECT_NE(m_log.find("attach server: accept failed: Too many open files: "
                         "accepting no more until a connection closes, or "
                         "for 100 ms (1 so far)"),
              std::string::npos)
            << m_log;

    /* descriptors again: the waiting connection is answered */
    pollfd pfd{s.get(), POLLIN, 0};
    const auto until = std::chrono::steady_clock::now() + 2s;
    while (poll(&pfd, 1, 0) == 0 && std::chrono::steady_clock::now() < until) {
        serve(50);
    }
    char reply[256];
    EXPECT_GT(recv(s.get(), reply, sizeof(reply), 0), 0) << m_log;
}

/* The accept took the last descriptor, and the attach needs two more (its
 * segment and its eventfd): the request waits, as a connection does in
 * the backlog, and is answered, accepted, once descriptors are back,
 * instead of being refused for an agent error. */
TEST_F(attach_fixture, an_attach_short_of_descriptors_waits_and_is_accepted)
{
    m_threaded     = false;
    m_accept_retry = 100ms;
    start();
    unique_fd s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_TRUE(s);
    ASSERT_TRUE(connect_to_agent(s.get()));
    /* one descriptor below the limit is free: the accept's */
    rlimit saved{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
    ASSERT_TRUE(limit_descriptors(1));
    auto req = wire::make_attach_request("job.1", 1);
    ASSERT_EQ(send(s.get(), &req, sizeof(req), MSG_NOSIGNAL),
              (ssize_t)sizeof(req));
    const auto stop = std::chrono::steady_clock::now() + 300ms;
    while (std::chrono::steady_clock::now() < stop) {
        serve(20);
    }
    pollfd pfd{s.get(), POLLIN, 0};
    const bool answered_short = poll(&pfd, 1, 0) == 1;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
    EXPECT_FALSE(answered_short)
            << "answered while short of descriptors: " << m_log;
    EXPECT_GE(m_server->intake().fd_shortages, 1u) << m_log;

    /* descriptors again: the waiting request is accepted */
    const auto until = std::chrono::steady_clock::now() + 2s;
    while (poll(&pfd, 1, 0) == 0 && std::chrono::steady_clock::now() < until) {
        serve(50);
    }
    wire::attach_reply rep{};
    auto got = recv_with_fds(s.get(),
                             std::as_writable_bytes(std::span(&rep, 1)));
    ASSERT_TRUE(got.ok()) << got.error();
    EXPECT_EQ(rep.status, static_cast<uint32_t>(wire::attach_status::accepted))
            << rep.reason << "\n"
            << m_log;
    EXPECT_EQ(got.value().fds.size(), 5u);
}

/* A client that writes without pause: the data path's look at its socket
 * (take_pending) reads at most max_socket_read bytes between two passes
 * over the sockets, and says the rest waits; the sweep's look reads all
 * that was queued when it asked. */
TEST_F(attach_fixture, a_client_is_read_at_most_max_socket_read_bytes_a_pass)
{
    m_threaded        = false;
    m_max_socket_read = 4096;
    start();
    size_t notices       = 0;
    m_on_mr              = [&notices](const wire::mr_notice &) { ++notices; };
    client::attachment a = attach_running_it();
    serve(0); /* whatever came with the attach */
    /* n harmless notices (an intent withdrawn), in one send: small ones
     * would fill the socket's buffer with their overhead first */
    const auto flood = [&](int n) {
        const std::vector<wire::mr_notice> burst(
                n,
                wire::make_mr_intent(0x1000, 4096, wire::mr_intent_withdrawn));
        const size_t bytes = burst.size() * sizeof(wire::mr_notice);
        ASSERT_EQ(send(a.sock.get(), burst.data(), bytes, MSG_NOSIGNAL),
                  (ssize_t)bytes);
    };
    constexpr int n           = 400; /* 19200 bytes */
    constexpr size_t per_pass = 4096 / sizeof(wire::mr_notice);
    flood(n);
    EXPECT_FALSE(take_pending(a.client_index)) << "all read";
    EXPECT_LE(notices, per_pass);
    EXPECT_FALSE(take_pending(a.client_index));
    EXPECT_LE(notices, per_pass) << "read twice in one pass";
    EXPECT_NE(m_log.find("bytes read from its socket this pass, "
                         "max-socket-read (4096): "),
              std::string::npos)
            << m_log;
    EXPECT_EQ(m_server->intake().reads_deferred, 2u);
    int passes = 1;
    while (!take_pending(a.client_index)) {
        serve(0);
        ASSERT_LT(++passes, 100) << notices << " notices read";
    }
    EXPECT_EQ(notices, static_cast<size_t>(n));
    EXPECT_GE(passes, n * sizeof(wire::mr_notice) / 4096);

    flood(n);
    EXPECT_TRUE(take_pending(a.client_index,
                             agent::attach_server::read_limit::all_queued));
    EXPECT_EQ(notices, static_cast<size_t>(2 * n));
}

/* The busy loop serves the socket every 256 passes, and after a
 * millisecond whatever the count (rvtd.cc). */
TEST(serve_pacer, serves_by_count_and_by_time)
{
    agent::serve_pacer p;
    const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
    p.served_at(t0);
    for (unsigned i = 1; i < 256; ++i) {
        ASSERT_FALSE(p.due(t0)) << "pass " << i;
    }
    EXPECT_TRUE(p.due(t0)) << "the 256th pass";
    EXPECT_FALSE(p.due(t0 + 999us));
    EXPECT_TRUE(p.due(t0 + 1ms)) << "a millisecond of slow passes";
    EXPECT_FALSE(p.due(t0 + 1ms + 10us));
    EXPECT_TRUE(p.due(t0 + 2ms + 10us));
}

namespace {

TEST(descriptors, the_soft_limit_is_raised_to_what_512_clients_need)
{
    const uint64_t needed = agent::descriptors_needed(512, 64);
    EXPECT_GE(needed, 2u * 512 + 64) << "a socket and an eventfd per client";
    /* a site's usual 1024 / 524288 */
    auto p = agent::plan_descriptors(1024, 524288, needed);
    EXPECT_EQ(p.soft, needed);
    EXPECT_EQ(p.warning, "");
    /* enough already: left alone */
    p = agent::plan_descriptors(20000, 20000, needed);
    EXPECT_EQ(p.soft, 20000u);
    EXPECT_EQ(p.warning, "");
    /* the hard limit too low: as far as it goes, and said with both values */
    p = agent::plan_descriptors(1024, 1024, needed);
    EXPECT_EQ(p.soft, 1024u);
    EXPECT_NE(p.warning.find("need " + std::to_string(needed)),
              std::string::npos)
            << p.warning;
    EXPECT_NE(p.warning.find("hard limit is 1024"), std::string::npos)
            << p.warning;
}

} // namespace
