/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Integration test of the rvtd daemon itself (real verbs, in the testbed):
 * it starts, serves its attach socket, refuses a second agent for the same
 * key, deregisters the memory of a client killed with SIGKILL, the MR it
 * registered and never announced included (and its
 * status, over the socket and through rvt-status, shows it), and leaves
 * after its linger time; a bad option is refused naming it.
 *
 * Environment: RXE_DEV (device); skips without one.
 */
#include "uct/ib/rvt/agent/device/device.h"
#include "uct/ib/rvt/agent/device/ud_channel.h"
#include "uct/ib/rvt/agent/peers/peer_auth.h"
#include "uct/ib/rvt/common/conn_wire.h"
#include "uct/ib/rvt/client/attach.h"
#include "uct/ib/rvt/client/session.h"
#include "uct/ib/rvt/client/status.h"
#include "uct/ib/rvt/common/work.h"

#include "rvtd_fixture.h"

#include <nlohmann/json.hpp>

#include <sys/socket.h>

#include <cstring>
#include <cstdio>

using namespace rvt;
using namespace std::chrono_literals;

using test::eventually;
using test::rvtd_test;
using test::slurp;
using test::spawn;
using test::wait_exit;

TEST_F(rvtd_test, serves_refuses_a_twin_cleans_up_and_lingers_out)
{
    pid_t agent = start_rvtd();
    ASSERT_TRUE(
            eventually([&] { return std::filesystem::exists(m_socket); }, 20s))
            << "no socket at " << m_socket << "; log:\n"
            << slurp(m_log);

    /* a second agent for the same key must not start */
    pid_t twin = start_rvtd();
    EXPECT_EQ(wait_exit(twin, 20s), 1);
    forget(twin);
    EXPECT_NE(slurp(m_log).find("another agent holds it"), std::string::npos)
            << slurp(m_log);

    /* a client attaches, registers memory (one buffer announced, one
     * registered after its intent and never announced), and is killed */
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pid_t client = spawn({test::client_path, m_socket, std::to_string(sv[1]),
                          "unannounced"},
                         m_runtime, m_log);
    m_pids.push_back(client);
    close(sv[1]);
    test::client_report r{};
    ASSERT_EQ(read(sv[0], &r, sizeof(r)), (ssize_t)sizeof(r)) << slurp(m_log);
    ASSERT_EQ(r.registered, 1u) << r.error;
    auto st = client::query_status(m_socket, false);
    ASSERT_TRUE(st.ok()) << st.error() << "\nrvtd log:\n" << slurp(m_log);
    auto status = nlohmann::json::parse(st.value(), nullptr, false);
    ASSERT_FALSE(status.is_discarded()) << st.value();
    EXPECT_EQ(status["clients"],
              nlohmann::json::parse(
                      "[{\"index\": 0, \"pid\": " + std::to_string(client) +
                      ", \"mrs\": 1, \"sibling_of\": null}]"))
            << st.value();
    EXPECT_EQ(status.value("registration", ""), "uverbs_ioctl") << st.value();
    /* chosen at run time: rxe has no import path, and status says so */
    EXPECT_EQ(status.value("registration_reason", "")
                      .rfind("the provider cannot import a context", 0),
              0u)
            << st.value();
    kill(client, SIGKILL);
    waitpid(client, nullptr, 0);
    forget(client);
    close(sv[0]);
    EXPECT_TRUE(eventually(
            [&] {
                return slurp(m_log).find("gone: deregistered 2 of its 2 MRs") !=
                       std::string::npos;
            },
            10s))
            << slurp(m_log);

    st = client::query_status(m_socket, false);
    ASSERT_TRUE(st.ok()) << st.error() << "\nrvtd log:\n" << slurp(m_log);
    status = nlohmann::json::parse(st.value(), nullptr, false);
    ASSERT_FALSE(status.is_discarded()) << st.value();
    const auto &data_path = status["data_path"];
    EXPECT_EQ(data_path.value("clients_gone", -1), 1) << st.value();
    EXPECT_EQ(data_path.value("mrs_cleaned", -1), 2) << st.value();
    EXPECT_EQ(data_path.value("mrs_unannounced", -1), 1) << st.value();
    EXPECT_EQ(data_path.value("mrs_released", -1), 0) << st.value();
    EXPECT_EQ(data_path.value("mrs_leaked", -1), 0) << st.value();
    EXPECT_EQ(status["clients"], nlohmann::json::array()) << st.value();

    /* the tool, as a person runs it */
    std::string cmd = test::status_path + " --socket=" + m_socket;
    FILE *p         = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char line[4096];
    std::string out;
    while (std::fgets(line, sizeof(line), p) != nullptr) {
        out += line;
    }
    EXPECT_EQ(pclose(p), 0) << out;
    EXPECT_NE(out.find("clients   0 attached\n"), std::string::npos) << out;
    EXPECT_NE(out.find("\ngone      clients 1, "), std::string::npos) << out;
    EXPECT_NE(out.find(", their MRs deregistered 2, never announced 1, "
                       "clients waiting "),
              std::string::npos)
            << out;

    /* with no clients left it leaves after --linger=2 */
    EXPECT_EQ(wait_exit(agent, 15s), 0) << slurp(m_log);
    forget(agent);
    EXPECT_NE(slurp(m_log).find("no clients for 2 s: exiting"),
              std::string::npos)
            << slurp(m_log);
}

TEST_F(rvtd_test, bad_options_are_refused_naming_them)
{
    /* rvtd started with `option` exits with `code`, its log saying `why` */
    auto refused = [&](const std::string &option, int code,
                       const std::string &why) {
        const pid_t p = start_rvtd({option});
        EXPECT_EQ(wait_exit(p, 20s), code) << option;
        forget(p);
        EXPECT_NE(slurp(m_log).find(why), std::string::npos) << slurp(m_log);
    };
    refused("--port=0", 2, "--port=0: expected a whole number from 1 to 255");
    refused("--no-such-thing=1", 2, "unknown option --no-such-thing");
    refused("--inline-size=100", 2,
            "work inline size 100: expected a multiple of 64 from 64 to 256");
    refused("--inline-size=512", 2,
            "--inline-size=512: expected a whole number from 64 to 256");
    refused("--device=nosuchdev9", 1,
            "device nosuchdev9 port 1: cannot open it");
}

/* The handshake on the wire, as a member of the job would speak it (a UD
 * QP of the test's own, MUNGE credentials from this node's munged): a
 * request naming another Q_Key than the agent's never reaches it; a
 * request with the right key and uid and no credential is dropped
 * unanswered; a sealed request is answered; the same datagram sent again, as an
 * eavesdropper would replay it, is dropped unanswered and counted; and a
 * refusal names the requester's job key, not the agent's. */
TEST_F(rvtd_test,
       no_credential_or_a_replayed_one_is_refused_and_a_refusal_carries_no_key)
{
    namespace conn = wire::conn;
    start_rvtd({"--linger=0"});
    ASSERT_TRUE(
            eventually([&] { return std::filesystem::exists(m_socket); }, 20s))
            << slurp(m_log);
    auto status = [&] {
        auto st = client::query_status(m_socket, false);
        EXPECT_TRUE(st.ok()) << st.error();
        return nlohmann::json::parse(st.ok() ? st.value() : "{}");
    };
    const auto before = status()["data_path"];
    ASSERT_EQ(before["auth"], "munge") << "the testbed runs munged";
    const uint32_t agent_qpn  = before["ud_qpn"];
    const uint32_t agent_qkey = before["ud_qkey"];
    const uint32_t k          = before["num_qps"];
    const uint32_t am         = before["am_size"];

    auto dev = agent::device::open(m_dev, 1);
    ASSERT_TRUE(dev.ok()) << dev.error();
    auto ch = agent::ud_channel::create(*dev.value(), nullptr,
                                        conn::random_qkey());
    ASSERT_TRUE(ch.ok()) << ch.error();
    auto auth = agent::munge_auth("");
    ASSERT_TRUE(auth.ok()) << auth.error();
    agent::gid_array gid{};
    std::memcpy(gid.data(), dev.value()->gid().raw, gid.size());
    uint8_t to[16];
    std::memcpy(to, gid.data(), 16);

    conn::sender self{};
    std::memcpy(self.gid, gid.data(), 16);
    self.ud_qpn  = ch.value()->qpn();
    self.uid     = getuid();
    self.ud_qkey = ch.value()->qkey(); /* where the agent answers */
    std::vector<conn::qp_info> qps;
    for (uint32_t i = 0; i < k; ++i) {
        qps.push_back({0x100 + i, i});
    }
    auto answers = [&](std::chrono::milliseconds wait) {
        std::vector<conn::message> got;
        eventually(
                [&] {
                    ch.value()->poll(
                            [&](std::span<const std::byte> b,
                                const agent::datagram_source &) {
                                auto m = conn::parse(b);
                                if (m.ok()) {
                                    got.push_back(m.value());
                                }
                            },
                            64);
                    return false;
                },
                wait);
        return got;
    };

    /* a good request naming the Q_Key every agent had before it was its
     * run's own ("RVTQ"): the device drops it, and the agent never sees
     * it */
    self.instance_id        = 0x7e55;
    conn::message other_key = conn::make_request(self, test::job_key, 0, 1, qps,
                                                 am);
    ASSERT_TRUE(auth.value()->seal(other_key, gid).ok());
    ASSERT_NE(agent_qkey, 0x52565451u);
    ASSERT_TRUE(ch.value()->send(other_key, to, agent_qpn, 0x52565451).ok());
    EXPECT_TRUE(answers(2s).empty()) << "a request to another Q_Key was "
                                        "answered";
    EXPECT_EQ(status()["data_path"]["handshake"]["received"], 0u);

    /* the right key and uid, no credential: dropped unanswered */
    self.instance_id         = 0x7e56;
    const conn::message bare = conn::make_request(self, test::job_key, 0, 1,
                                                  qps, am);
    ASSERT_TRUE(ch.value()->send(bare, to, agent_qpn, agent_qkey).ok());
    EXPECT_TRUE(answers(2s).empty()) << "a request with no credential was "
                                        "answered";
    EXPECT_EQ(status()["data_path"]["handshake"]["unauthenticated"], 1u);

    self.instance_id  = 0x7e57;
    conn::message req = conn::make_request(self, test::job_key, 0, 1, qps, am);
    ASSERT_TRUE(auth.value()->seal(req, gid).ok());
    ASSERT_TRUE(ch.value()->send(req, to, agent_qpn, agent_qkey).ok());
    auto first = answers(3s);
    ASSERT_EQ(first.size(), 1u) << slurp(m_log);
    EXPECT_EQ(first[0].status, static_cast<uint16_t>(conn::status::accepted));

    /* the same bytes again */
    ASSERT_TRUE(ch.value()->send(req, to, agent_qpn, agent_qkey).ok());
    EXPECT_TRUE(answers(2s).empty()) << "the replay was answered";
    EXPECT_EQ(status()["data_path"]["handshake"]["unauthenticated"], 2u);
    EXPECT_NE(slurp(m_log).find("munged refused its credential"),
              std::string::npos)
            << slurp(m_log);

    /* another job's key, from a member of this uid: refused, and the
     * refusal names the key it was sent */
    self.instance_id    = 0x7e58;
    conn::message other = conn::make_request(self, "other.job", 0, 1, qps, am);
    ASSERT_TRUE(auth.value()->seal(other, gid).ok());
    ASSERT_TRUE(ch.value()->send(other, to, agent_qpn, agent_qkey).ok());
    auto refused = answers(3s);
    ASSERT_EQ(refused.size(), 1u) << slurp(m_log);
    EXPECT_EQ(refused[0].status,
              static_cast<uint16_t>(conn::status::wrong_job_key));
    EXPECT_STREQ(refused[0].job_key, "other.job");
}

/* A neighbour's MR announced as one's own, on real verbs
 * (docs/reliability.md, "Hostile input"): a client announces its
 * neighbour's MR as it is (handle, keys and range, which QUERY_MR on the
 * shared command fd would tell it). The agent refuses it, naming the
 * holder; the thief's SEND from the neighbour's memory and its READ into
 * it complete invalid, nothing arrives and the neighbour's bytes are
 * unchanged; the thief's own MR is accepted and its own SEND arrives. */
TEST_F(rvtd_test,
       a_forged_announcement_is_refused_and_the_neighbours_bytes_never_leave)
{
    start_rvtd();
    ASSERT_TRUE(
            eventually([&] { return std::filesystem::exists(m_socket); }, 10s))
            << slurp(m_log);
    const auto open_session = [&] {
        auto at = client::attach(m_socket, test::job_key);
        EXPECT_TRUE(at.ok()) << (at.ok() ? "" : at.error());
        auto s = client::session::open(std::move(at).value());
        EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error());
        return std::move(s).value();
    };
    auto mine            = open_session();
    auto thief           = open_session();
    constexpr int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_WRITE;
    std::vector<uint8_t> secret(4096, 0x5e), own(4096, 0x11);
    auto secret_mr = mine->register_memory(secret.data(), secret.size(),
                                           access);
    ASSERT_TRUE(secret_mr.ok()) << secret_mr.error();

    auto forged = thief->announce_memory(secret_mr.value());
    ASSERT_TRUE(forged.ok()) << forged.error();
    EXPECT_EQ(forged.value().status,
              static_cast<uint32_t>(wire::announce_status::refused));
    const std::string holder = "client index " +
                               std::to_string(mine->attached().client_index) +
                               " holds it";
    EXPECT_NE(std::string(forged.value().reason).find(holder), std::string::npos)
            << forged.value().reason;

    auto own_mr = thief->register_memory(own.data(), own.size(), access);
    ASSERT_TRUE(own_mr.ok()) << own_mr.error();
    auto me = thief->connect_peer(thief->attached().address);
    ASSERT_TRUE(me.ok()) << me.error();

    const auto am_from = [&](const client::memory_region &mr, uint64_t wr_id) {
        work_request wr{};
        wr.wr_id          = wr_id;
        wr.op             = static_cast<uint8_t>(work_op::send_am);
        wr.flags          = work_signaled;
        wr.am_id          = 7;
        wr.peer           = me.value();
        wr.dst_client     = thief->attached().client_index;
        wr.dst_generation = thief->attached().client_generation;
        wr.length         = 64;
        wr.local_addr     = reinterpret_cast<uintptr_t>(mr.addr);
        wr.lkey           = mr.lkey;
        return wr;
    };
    work_request read{};
    read.wr_id          = 2;
    read.op             = static_cast<uint8_t>(work_op::rdma_read);
    read.flags          = work_signaled;
    read.peer           = me.value();
    read.dst_client     = thief->attached().client_index;
    read.dst_generation = thief->attached().client_generation;
    read.length         = 64;
    read.local_addr     = reinterpret_cast<uintptr_t>(secret.data());
    read.lkey           = secret_mr.value().lkey; /* into the neighbour's */
    read.remote_addr    = reinterpret_cast<uintptr_t>(own.data());
    read.rkey           = own_mr.value().rkey;
    ASSERT_EQ(thief->post(am_from(secret_mr.value(), 1)),
              client::post_status::posted);
    ASSERT_EQ(thief->post(read), client::post_status::posted);

    std::vector<completion> done;
    const auto reap = [&] {
        completion c[8];
        const size_t n = thief->poll_completions(c);
        done.insert(done.end(), c, c + n);
    };
    ASSERT_TRUE(eventually(
            [&] {
                reap();
                return done.size() == 2;
            },
            10s))
            << slurp(m_log);
    for (const completion &c : done) {
        EXPECT_EQ(c.status, static_cast<uint32_t>(completion_status::invalid))
                << "wr_id " << c.wr_id;
    }

    /* the thief's own memory goes, and is all that arrives */
    ASSERT_EQ(thief->post(am_from(own_mr.value(), 3)),
              client::post_status::posted);
    std::vector<uint8_t> arrived;
    ASSERT_TRUE(eventually(
            [&] {
                reap();
                client::inbound_view v;
                while (thief->peek_inbound(v)) {
                    if (v.msg.kind == static_cast<uint8_t>(inbound_kind::am)) {
                        arrived.push_back(v.data.empty() ? 0 :
                                                           static_cast<uint8_t>(
                                                                   v.data[0]));
                    }
                    thief->release_inbound();
                }
                return done.size() == 3 && !arrived.empty();
            },
            10s))
            << slurp(m_log);
    std::this_thread::sleep_for(200ms);
    client::inbound_view v;
    while (thief->peek_inbound(v)) {
        arrived.push_back(v.data.empty() ? 0 : static_cast<uint8_t>(v.data[0]));
        thief->release_inbound();
    }
    EXPECT_EQ(done.back().status,
              static_cast<uint32_t>(completion_status::success));
    EXPECT_EQ(arrived, std::vector<uint8_t>{0x11})
            << "the neighbour's bytes (0x5e) were sent";
    EXPECT_TRUE(std::all_of(secret.begin(), secret.end(), [](uint8_t b) {
        return b == 0x5e;
    })) << "something was read into the neighbour's memory";
    EXPECT_NE(slurp(m_log).find(holder), std::string::npos) << slurp(m_log);
}
