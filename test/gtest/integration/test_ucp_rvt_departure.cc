/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a UCP application with peer error handling sees when a peer
 * process goes away, for each operation it can have outstanding
 * (docs/reliability.md, "Agent and peer death").
 * The receiver is a process of its own (ucp_departure_peer), on this node
 * or on another (the testbed's second rxe device, with its own agent); it
 * goes either by destroying its UCP without closing anything or by
 * SIGKILL. The sender, with operations outstanding and more sent after
 * the departure as an application would, must see its endpoint's error
 * callback with a status saying the peer is gone, every request complete
 * (with an error, or done before the departure), its traffic with a
 * surviving worker verified meanwhile, and nothing left in its agent.
 * The same cases over rc_verbs print its time to the error callback
 * beside rvt's.
 */
#include "test_paths.h"
#include "ucp_side.h"

#include "uct/ib/rvt/client/status.h"

#include <nlohmann/json.hpp>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

struct peer_hello { /* ucp_departure_peer.cc */
    uint32_t address_length;
    uint32_t rkey_length;
    uint64_t buffer;
    uint64_t buffer_length;
};

namespace rvt::test {
namespace {

enum class op {
    am_short, /* 8 bytes */
    am_bcopy, /* 8188 bytes: rvt's AMs are short up to 8185 (ucp_ep_print_info) */
    am_zcopy, /* 4 KiB from the caller's memory (UCX_ZCOPY_THRESH=2048) */
    am_rndv, /* 1 MiB: a rendezvous the receiver keeps unfetched */
    tag_eager, /* 1 KiB, unexpected at the receiver */
    tag_rndv_get, /* 1 MiB, no receive posted; UCX_RNDV_SCHEME=get_zcopy */
    tag_rndv_put, /* the same with put_zcopy */
    put, /* 64 KiB into the receiver's mapped buffer */
    get, /* 64 KiB from it */
    atomic, /* a 64-bit add on it (not fetching: see the README's known
             * issues for UCX 1.13's purge of fetching software atomics) */
    flush, /* a put, then an endpoint flush */
};

const char *name_of(op o)
{
    switch (o) {
    case op::am_short:
        return "am_short";
    case op::am_bcopy:
        return "am_bcopy";
    case op::am_zcopy:
        return "am_zcopy";
    case op::am_rndv:
        return "am_rndv";
    case op::tag_eager:
        return "tag_eager";
    case op::tag_rndv_get:
        return "tag_rndv_get";
    case op::tag_rndv_put:
        return "tag_rndv_put";
    case op::put:
        return "put";
    case op::get:
        return "get";
    case op::atomic:
        return "atomic";
    case op::flush:
        return "flush";
    }
    return "?";
}

enum class departure {
    closed,
    killed,
    /* one worker of the receiver's process goes, another stays, as in
     * UCX's test_ucp_peer_failure (ucp_departure_peer's
     * RVT_DEPARTURE_PEER_SIBLING) */
    sibling_worker, /* a worker of the same context */
    sibling_context, /* a worker of a context of its own */
};

const char *name_of(departure d)
{
    switch (d) {
    case departure::closed:
        return "closed";
    case departure::killed:
        return "killed";
    case departure::sibling_worker:
        return "worker_closed_sibling_stays";
    case departure::sibling_context:
        return "context_closed_sibling_stays";
    }
    return "?";
}
enum class place {
    this_node,
    other_node
};

struct departure_case {
    const char *tls; /* "rvt", "ud_v,rvt", or "rc" (rc_verbs with ud_verbs
                      * for wireup) */
    op what;
    departure how;
    place where;
};

/* UCP >= 1.16 selects no atomic protocol on an endpoint with peer error
 * handling, whatever the transport: its atomic protocols cannot abort a
 * request, so they leave out UCP_PROTO_COMMON_INIT_FLAG_ERR_HANDLING and
 * proto_single drops them ("cannot find remote protocol for: ...
 * amo_post"); the request gets UCP's stub, "reconfig". UCP 1.13
 * emulates atomics over rvt with active messages (its device mode wants
 * the full 64-bit set, README). On 1.16 and 1.18 the stub, for an
 * endpoint whose wireup has not finished, answers "no resource" and
 * ucp_atomic_op_nbx retries it forever, inside the call; on 1.22 its
 * error path calls ucp_ep_set_lanes_failed_schedule, which asserts the
 * worker's async lock, held only in thread-multi mode, and aborts the
 * process. These departure tests use peer error handling. */
bool ucp_atomics_unsupported()
{
    unsigned major = 0, minor = 0, release = 0;
    ucp_get_version(&major, &minor, &release);
    return major > 1 || minor >= 16;
}

std::string case_name(const ::testing::TestParamInfo<departure_case> &p)
{
    std::string tls = p.param.tls;
    std::replace(tls.begin(), tls.end(), ',', '_');
    return tls + "_" + name_of(p.param.what) + "_" + name_of(p.param.how) +
           "_" +
           (p.param.where == place::this_node ? "this_node" : "other_node");
}

/* true if none of the requests is still in progress */
bool all_ended(const std::vector<ucs_status_ptr_t> &requests)
{
    for (auto r : requests) {
        if (UCS_PTR_IS_PTR(r) &&
            ucp_request_check_status(r) == UCS_INPROGRESS) {
            return false;
        }
    }
    return true;
}

/* How the requests ended: failed, still in progress (then cancelled),
 * and ended well from index `from` on. Frees every request. */
struct request_ends {
    size_t failed = 0, in_progress = 0, ok_from = 0;
};
request_ends end_requests(ucp_worker_h worker,
                          std::vector<ucs_status_ptr_t> &requests,
                          size_t from = SIZE_MAX)
{
    request_ends e;
    for (size_t i = 0; i < requests.size(); ++i) {
        ucs_status_ptr_t r = requests[i];
        ucs_status_t st    = UCS_PTR_STATUS(r);
        if (UCS_PTR_IS_PTR(r)) {
            st = ucp_request_check_status(r);
            if (st == UCS_INPROGRESS) {
                ++e.in_progress;
                ucp_request_cancel(worker, r);
            }
            ucp_request_free(r);
        }
        e.failed += UCS_STATUS_IS_ERR(st);
        e.ok_from += i >= from && st == UCS_OK;
    }
    requests.clear();
    return e;
}

/* The receiver's process: its pipes, and what it sent. */
struct peer_process {
    pid_t pid = -1;
    int to    = -1; /* its stdin */
    int from  = -1; /* its stdout */
    peer_hello hello{};
    std::vector<uint8_t> address, rkey;

    bool read_exactly(void *out, size_t length)
    {
        auto *p = static_cast<uint8_t *>(out);
        while (length > 0) {
            pollfd pf{from, POLLIN, 0};
            if (poll(&pf, 1, 20000) <= 0) {
                return false;
            }
            const ssize_t n = read(from, p, length);
            if (n <= 0) {
                return false;
            }
            p += n;
            length -= static_cast<size_t>(n);
        }
        return true;
    }

    /* starts `program` with `env` added to ours; false if it said
     * nothing of itself in 20 s */
    bool start(const std::string &program,
               const std::vector<std::pair<std::string, std::string>> &env)
    {
        int in[2], out[2];
        if (pipe(in) != 0 || pipe(out) != 0) {
            return false;
        }
        pid = fork();
        if (pid == 0) {
            dup2(in[0], 0);
            dup2(out[1], 1);
            close(in[1]);
            close(out[0]);
            for (const auto &[k, v] : env) {
                setenv(k.c_str(), v.c_str(), 1);
            }
            execl(program.c_str(), program.c_str(), nullptr);
            _exit(127);
        }
        close(in[0]);
        close(out[1]);
        to   = in[1];
        from = out[0];
        if (!read_exactly(&hello, sizeof(hello))) {
            return false;
        }
        address.resize(hello.address_length);
        rkey.resize(hello.rkey_length);
        return read_exactly(address.data(), address.size()) &&
               read_exactly(rkey.data(), rkey.size());
    }

    /* the second worker's hello, address and rkey (a sibling peer's) */
    peer_hello sibling_hello{};
    std::vector<uint8_t> sibling_address, sibling_rkey;
    bool read_sibling()
    {
        if (!read_exactly(&sibling_hello, sizeof(sibling_hello))) {
            return false;
        }
        sibling_address.resize(sibling_hello.address_length);
        sibling_rkey.resize(sibling_hello.rkey_length);
        return read_exactly(sibling_address.data(), sibling_address.size()) &&
               read_exactly(sibling_rkey.data(), sibling_rkey.size());
    }

    /* its UCP destroyed, nothing closed; the process stays */
    bool close_ucp()
    {
        char done = 0;
        return write(to, "q", 1) == 1 && read_exactly(&done, 1) && done == 'd';
    }

    /* how it ended, if it has: for a receiver that stopped answering */
    std::string fate()
    {
        int st = 0;
        if (pid <= 0 || waitpid(pid, &st, WNOHANG) != pid) {
            return "still running";
        }
        pid = -1;
        return WIFSIGNALED(st) ?
                       "killed by signal " + std::to_string(WTERMSIG(st)) :
                       "exited " + std::to_string(WEXITSTATUS(st));
    }

    /* SIGKILL; false if it has not died within 10 s */
    bool kill_now()
    {
        kill(pid, SIGKILL);
        const bool reaped = eventually(
                [&] { return waitpid(pid, nullptr, WNOHANG) == pid; }, 10s);
        pid = reaped ? -1 : pid;
        return reaped;
    }

    ~peer_process()
    {
        if (to >= 0) {
            close(to); /* it exits at its stdin's end */
        }
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
        if (from >= 0) {
            close(from);
        }
    }
};

class ucp_rvt_departure_ops :
    public uct_rvt_fixture,
    public ::testing::WithParamInterface<departure_case> {
protected:
    void SetUp() override
    {
        uct_rvt_fixture::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        const departure_case &c = GetParam();
        m_rvt = std::string(c.tls).find("rvt") != std::string::npos;
        m_env.set("UCX_TLS", c.tls);
        m_env.set("UCX_NET_DEVICES", m_dev + ":1");
        m_env.set("UCX_WARN_UNUSED_ENV_VARS", "n");
        m_env.set("UCX_RNDV_THRESH", "8192");
        m_env.set("UCX_KEEPALIVE_INTERVAL", "2s");
        if (c.what == op::am_zcopy) {
            m_env.set("UCX_ZCOPY_THRESH", "2048");
        }
        m_env.set("UCX_RNDV_SCHEME",
                  c.what == op::tag_rndv_put ? "put_zcopy" : "get_zcopy");
        if (m_rvt) {
            start_agent();
        }
        /* a missing receiver says so, not as a receiver that failed */
        ASSERT_EQ(access(departure_peer_path.c_str(), X_OK), 0)
                << departure_peer_path
                << " is not built: make integration-programs";
        /* the module registers itself when loaded, as ucx_perftest
         * loads it in the perf suites */
        m_peer_env = {{"UCX_NET_DEVICES", m_dev + ":1"},
                      {"LD_PRELOAD", module_path()}};
        if (c.where == place::other_node) {
            const std::string dev = other_device();
            if (dev.empty()) {
                GTEST_SKIP() << "no second rxe device for another node";
            }
            m_peer_env = {{"UCX_NET_DEVICES", dev + ":1"},
                          {"LD_PRELOAD", module_path()},
                          {"XDG_RUNTIME_DIR", m_runtime + "/b"}};
            if (m_rvt) {
                start_agent_at(m_runtime + "/b", uct_job_key, {}, dev);
            }
        }
    }

    /* The agent's status for this node, its data path part. */
    nlohmann::json data_path()
    {
        auto st = client::query_status(m_socket, false);
        EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error());
        return st.ok() ? nlohmann::json::parse(st.value())["data_path"] :
                         nlohmann::json::object();
    }

    bool m_rvt = true;
    std::vector<std::pair<std::string, std::string>> m_peer_env;
};

constexpr uint64_t features = UCP_FEATURE_TAG | UCP_FEATURE_AM |
                              UCP_FEATURE_RMA | UCP_FEATURE_AMO64;

TEST_P(ucp_rvt_departure_ops, the_endpoint_fails_and_every_request_ends)
{
    const departure_case &c = GetParam();
    /* not run there: UCP would spin in the call or abort this process */
    ASSERT_FALSE(c.what == op::atomic && ucp_atomics_unsupported())
            << "UCP " << ucp_get_version_string()
            << " selects no atomic protocol on an endpoint with peer error "
               "handling, whatever the transport (README, limits and "
               "known issues)";
    peer_process peer;
    ASSERT_TRUE(peer.start(departure_peer_path, m_peer_env))
            << "the receiver did not start: " << peer.fate();

    ucp_side a, b;
    ASSERT_EQ(a.open(features), UCS_OK);
    ASSERT_EQ(b.open(features), UCS_OK);
    watched_ep to_peer, to_b;
    ASSERT_EQ(to_peer.connect(a, reinterpret_cast<const ucp_address_t *>(
                                         peer.address.data())),
              UCS_OK);
    ASSERT_EQ(to_b.connect(a, b), UCS_OK);
    ucp_rkey_h rkey = nullptr;
    ASSERT_EQ(ucp_ep_rkey_unpack(to_peer.ep, peer.rkey.data(), &rkey), UCS_OK);

    /* the endpoint wired up: a flushed message */
    uint64_t word = 1;
    ucp_request_param_t none{};
    ASSERT_EQ(wait_request(a.worker,
                           ucp_tag_send_nbx(to_peer.ep, &word, sizeof(word),
                                            0x77, &none),
                           a, b),
              UCS_OK);
    ASSERT_EQ(wait_request(a.worker, ucp_ep_flush_nbx(to_peer.ep, &none), a, b),
              UCS_OK);
    const nlohmann::json before = m_rvt ? data_path() : nlohmann::json();

    std::vector<uint8_t> big(1 << 20, 0x3c), got(1 << 16);
    std::vector<ucs_status_ptr_t> requests;
    ucp_request_param_t add{};
    add.op_attr_mask      = UCP_OP_ATTR_FIELD_DATATYPE;
    add.datatype          = ucp_dt_make_contig(sizeof(uint64_t));
    const uint64_t remote = peer.hello.buffer;
    /* one operation of the case's kind; its request, if it has one */
    auto issue = [&] {
        ucs_status_ptr_t r = nullptr;
        switch (c.what) {
        case op::am_short:
            r = ucp_am_send_nbx(to_peer.ep, 1, nullptr, 0, big.data(), 8,
                                &none);
            break;
        case op::am_bcopy:
            r = ucp_am_send_nbx(to_peer.ep, 1, nullptr, 0, big.data(), 8188,
                                &none);
            break;
        case op::am_zcopy:
            r = ucp_am_send_nbx(to_peer.ep, 1, nullptr, 0, big.data(), 4096,
                                &none);
            break;
        case op::am_rndv:
            r = ucp_am_send_nbx(to_peer.ep, 1, nullptr, 0, big.data(),
                                big.size(), &none);
            break;
        case op::tag_eager:
            r = ucp_tag_send_nbx(to_peer.ep, big.data(), 1024, 0x30, &none);
            break;
        case op::tag_rndv_get:
        case op::tag_rndv_put:
            r = ucp_tag_send_nbx(to_peer.ep, big.data(), big.size(), 0x31,
                                 &none);
            break;
        case op::put:
            r = ucp_put_nbx(to_peer.ep, big.data(), 1 << 16, remote, rkey,
                            &none);
            break;
        case op::get:
            r = ucp_get_nbx(to_peer.ep, got.data(), got.size(), remote, rkey,
                            &none);
            break;
        case op::atomic:
            r = ucp_atomic_op_nbx(to_peer.ep, UCP_ATOMIC_OP_ADD, &word, 1,
                                  remote, rkey, &add);
            break;
        case op::flush:
            requests.push_back(ucp_put_nbx(to_peer.ep, big.data(), 1 << 16,
                                           remote, rkey, &none));
            r = ucp_ep_flush_nbx(to_peer.ep, &none);
            break;
        }
        requests.push_back(r);
    };
    /* outstanding at the departure */
    const int outstanding = (c.what == op::am_rndv ||
                             c.what == op::tag_rndv_get ||
                             c.what == op::tag_rndv_put) ?
                                    2 :
                                    16;
    for (int i = 0; i < outstanding; ++i) {
        issue();
    }
    ucp_worker_progress(a.worker);
    if (c.how == departure::closed) {
        ASSERT_TRUE(peer.close_ucp())
                << "the receiver did not close: " << peer.fate();
    } else {
        ASSERT_TRUE(peer.kill_now()) << "the receiver did not die";
    }
    const auto gone = std::chrono::steady_clock::now();

    /* the application goes on: one more of the same every pass until its
     * endpoint fails, and tagged messages to b, each verified */
    verified_stream to_b_stream{0x40, 50};
    const bool done = eventually(
            [&] {
                if (to_peer.errors == 0 && requests.size() < 4096) {
                    issue();
                }
                to_b_stream.step(a, b, to_b.ep);
                for (int i = 0; i < 16; ++i) {
                    ucp_worker_progress(a.worker);
                    ucp_worker_progress(b.worker);
                }
                return to_peer.errors > 0 && all_ended(requests) &&
                       to_b_stream.done();
            },
            m_rvt ? 30s : 20s);
    const size_t issued                        = requests.size();
    const auto [failed, in_progress, ok_after] = end_requests(a.worker,
                                                              requests);
    const double ms = std::chrono::duration<double, std::milli>(
                              to_peer.failed_at - gone)
                              .count();
    EXPECT_EQ(to_b_stream.arrived, to_b_stream.sent) << "the surviving pair";
    EXPECT_EQ(to_b.errors, 0);
    if (!m_rvt) { /* rc_verbs: measured, for the comparison */
        if (to_peer.errors > 0) {
            std::printf("[ INFO     ] rc_verbs %s, receiver %s: error "
                        "callback %.0f ms after the departure (%s)\n",
                        name_of(c.what),
                        c.how == departure::closed ? "closed" : "killed", ms,
                        ucs_status_string(to_peer.error));
        } else {
            std::printf("[ INFO     ] rc_verbs %s, receiver %s: no error "
                        "callback within 20 s, %zu of %zu requests still in "
                        "progress\n",
                        name_of(c.what),
                        c.how == departure::closed ? "closed" : "killed",
                        in_progress, issued);
        }
    } else {
        EXPECT_TRUE(done) << to_peer.errors << " error callbacks, "
                          << in_progress << " of " << issued
                          << " requests still in progress, "
                          << to_b_stream.arrived << " of " << to_b_stream.sent
                          << " to b";
        EXPECT_EQ(to_peer.errors, 1);
        /* the peer is gone; or, for an RDMA operation that reached the
         * node of a process that had closed, its memory was: its agent
         * had deregistered it, and the device failed the access */
        const bool rma = c.what == op::put || c.what == op::get ||
                         c.what == op::atomic || c.what == op::flush;
        EXPECT_TRUE(to_peer.error == UCS_ERR_ENDPOINT_TIMEOUT ||
                    to_peer.error == UCS_ERR_CONNECTION_RESET ||
                    to_peer.error == UCS_ERR_UNREACHABLE ||
                    (rma && c.where == place::other_node &&
                     to_peer.error == UCS_ERR_IO_ERROR))
                << ucs_status_string(to_peer.error);
        if (c.what == op::am_rndv || c.what == op::tag_rndv_get ||
            c.what == op::tag_rndv_put) { /* they cannot have ended well */
            EXPECT_GE(failed, 2u) << "the outstanding rendezvous did not fail";
        }
        std::printf("[ INFO     ] rvt %s, receiver %s, %s: error callback "
                    "%.0f ms after the departure (%s), %zu of %zu requests "
                    "failed\n",
                    name_of(c.what),
                    c.how == departure::closed ? "closed" : "killed",
                    c.where == place::this_node ? "this node" : "another node",
                    ms, ucs_status_string(to_peer.error), failed, issued);
    }

    ucp_rkey_destroy(rkey);
    ucp_request_param_t force{};
    force.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    force.flags        = UCP_EP_CLOSE_FLAG_FORCE;
    (void)wait_request(a.worker, ucp_ep_close_nbx(to_peer.ep, &force), a, b);
    EXPECT_EQ(wait_request(a.worker, ucp_ep_close_nbx(to_b.ep, &none), a, b),
              UCS_OK);
    if (!m_rvt) {
        return;
    }
    /* nothing left in the agent: no op held for anyone, no queue, and the
     * receiver's departure counted */
    nlohmann::json after;
    const auto left = [&] {
        std::string what;
        for (const auto &e : after["client_traffic"]) {
            if (e["held"] != 0u || e["held_back"] != 0u) {
                what += " client " + e.dump();
            }
        }
        for (const auto &p : after["peers"]) {
            if (p["queued"] != 0u || p["parked"] != 0u || p["posted"] != 0u) {
                what += " peer " + p.dump();
            }
        }
        return what;
    };
    EXPECT_TRUE(eventually(
            [&] {
                after = data_path();
                return left().empty();
            },
            10s))
            << "left in the agent:" << left();
    EXPECT_EQ(after["share"]["refused_ops"], before["share"]["refused_ops"]);
    if (c.where == place::this_node) { /* (another node's agent tells
                                        * ours over a connection that an
                                        * access error may have broken) */
        EXPECT_EQ(after["clients_gone"].get<uint64_t>(),
                  before["clients_gone"].get<uint64_t>() + 1)
                << "the receiver's departure was not counted";
    }
}

/* UCX's test_ucp_peer_failure across processes: the receiver's process
 * has two workers; one goes (destroyed, its context kept or destroyed
 * with it) and the process stays with the other. The sender's
 * endpoint to the one that went must fail as for any departure, every
 * put end, and its endpoint to the one that stays must go on working:
 * puts read back by gets, no error. Over rvt, ud_v,rvt (where the put is
 * rvt's and the endpoint's keepalive UD's) and, measured only, rc_verbs. */
class ucp_rvt_sibling_departure : public ucp_rvt_departure_ops {};

TEST_P(ucp_rvt_sibling_departure,
       the_departed_worker_fails_and_its_sibling_works)
{
    const departure_case &c = GetParam();
    /* the puts zero-copy, as in UCX's zcopy case: their requests complete
     * when the receiver's side has them, not when the data is copied */
    m_env.set("UCX_ZCOPY_THRESH", "1023");
    if (!m_rvt) { /* rc_verbs' timeouts as UCX's peer-failure tests set
                   * them (configure_peer_failure_settings), for an error
                   * time to compare */
        m_env.set("UCX_RC_TIMEOUT", "10ms");
        m_env.set("UCX_RC_RNR_TIMEOUT", "10ms");
        m_env.set("UCX_RC_RETRY_COUNT", "2");
    }
    std::vector<std::pair<std::string, std::string>> env = m_peer_env;
    env.emplace_back("RVT_DEPARTURE_PEER_SIBLING",
                     c.how == departure::sibling_worker ? "worker" : "context");
    peer_process peer;
    ASSERT_TRUE(peer.start(departure_peer_path, env) && peer.read_sibling())
            << "the receiver did not start: " << peer.fate();

    ucp_side a;
    ASSERT_EQ(a.open(features), UCS_OK);
    watched_ep to_gone, to_stays;
    ASSERT_EQ(to_gone.connect(a, reinterpret_cast<const ucp_address_t *>(
                                         peer.address.data())),
              UCS_OK);
    ASSERT_EQ(to_stays.connect(a, reinterpret_cast<const ucp_address_t *>(
                                          peer.sibling_address.data())),
              UCS_OK);
    ucp_rkey_h gone_rkey = nullptr, stays_rkey = nullptr;
    ASSERT_EQ(ucp_ep_rkey_unpack(to_gone.ep, peer.rkey.data(), &gone_rkey),
              UCS_OK);
    ASSERT_EQ(ucp_ep_rkey_unpack(to_stays.ep, peer.sibling_rkey.data(),
                                 &stays_rkey),
              UCS_OK);
    const auto wait = [&](ucs_status_ptr_t r) {
        ucs_status_t st = UCS_INPROGRESS;
        if (!UCS_PTR_IS_PTR(r)) {
            return UCS_PTR_STATUS(r);
        }
        eventually(
                [&] {
                    ucp_worker_progress(a.worker);
                    st = ucp_request_check_status(r);
                    return st != UCS_INPROGRESS;
                },
                20s);
        if (st == UCS_INPROGRESS) {
            ucp_request_cancel(a.worker, r);
        }
        ucp_request_free(r);
        return st;
    };
    ucp_request_param_t none{};
    std::vector<uint8_t> out(1 << 16), in(1 << 16);
    /* a put read back by a get on the worker that stays: true if it is
     * what was written */
    uint8_t round          = 0;
    const auto stays_works = [&] {
        std::fill(out.begin(), out.end(), ++round);
        std::fill(in.begin(), in.end(), 0);
        const ucs_status_t put = wait(
                ucp_put_nbx(to_stays.ep, out.data(), out.size(),
                            peer.sibling_hello.buffer, stays_rkey, &none));
        const ucs_status_t flush = wait(ucp_ep_flush_nbx(to_stays.ep, &none));
        const ucs_status_t get   = wait(
                  ucp_get_nbx(to_stays.ep, in.data(), in.size(),
                              peer.sibling_hello.buffer, stays_rkey, &none));
        const ucs_status_t flush2 = wait(ucp_ep_flush_nbx(to_stays.ep, &none));
        return put == UCS_OK && flush == UCS_OK && get == UCS_OK &&
               flush2 == UCS_OK && in == out;
    };
    /* both wired up */
    ASSERT_TRUE(stays_works());
    ASSERT_EQ(wait(ucp_put_nbx(to_gone.ep, out.data(), 1024, peer.hello.buffer,
                               gone_rkey, &none)),
              UCS_OK);
    ASSERT_EQ(wait(ucp_ep_flush_nbx(to_gone.ep, &none)), UCS_OK);

    /* puts outstanding at the departure, and after it (its close has
     * returned) one a pass until the endpoint fails, as UCX's test does */
    std::vector<ucs_status_ptr_t> requests;
    for (int i = 0; i < 16; ++i) {
        requests.push_back(ucp_put_nbx(to_gone.ep, out.data(), out.size(),
                                       peer.hello.buffer, gone_rkey, &none));
    }
    ucp_worker_progress(a.worker);
    ASSERT_TRUE(peer.close_ucp())
            << "the receiver did not close: " << peer.fate();
    const auto gone          = std::chrono::steady_clock::now();
    const size_t first_after = requests.size();
    const bool done          = eventually(
            [&] {
                if (to_gone.errors == 0 && requests.size() < 4096) {
                    requests.push_back(
                                     ucp_put_nbx(to_gone.ep, out.data(), out.size(),
                                                 peer.hello.buffer, gone_rkey, &none));
                }
                for (int i = 0; i < 16; ++i) {
                    ucp_worker_progress(a.worker);
                }
                return to_gone.errors > 0 && all_ended(requests);
            },
            m_rvt ? 30s : 20s);
    const double ms = std::chrono::duration<double, std::milli>(
                              to_gone.failed_at - gone)
                              .count();
    /* done_after: of the puts posted after the departure, those that
     * ended well (none may: nobody received them) */
    const size_t issued     = requests.size();
    const auto [failed, in_progress,
                done_after] = end_requests(a.worker, requests, first_after);
    const bool stays_after  = stays_works() && stays_works();
    const std::string where = c.where == place::this_node ? "this node" :
                                                            "another node";
    if (!m_rvt) { /* rc_verbs: measured, for the comparison */
        std::printf("[ INFO     ] %s put, %s, %s: %s; the sibling %s\n", c.tls,
                    name_of(c.how), where.c_str(),
                    to_gone.errors > 0 ?
                            ("error callback " + std::to_string(int(ms)) +
                             " ms after the departure (" +
                             ucs_status_string(to_gone.error) + ")")
                                    .c_str() :
                            "no error callback within 20 s",
                    stays_after && to_stays.errors == 0 ? "works" :
                                                          "does not work");
    } else {
        EXPECT_TRUE(done) << to_gone.errors << " error callbacks, "
                          << in_progress << " of " << issued
                          << " puts still in progress";
        EXPECT_EQ(to_gone.errors, 1);
        EXPECT_TRUE(to_gone.error == UCS_ERR_ENDPOINT_TIMEOUT ||
                    to_gone.error == UCS_ERR_CONNECTION_RESET ||
                    to_gone.error == UCS_ERR_UNREACHABLE ||
                    (c.where == place::other_node &&
                     to_gone.error == UCS_ERR_IO_ERROR))
                << ucs_status_string(to_gone.error);
        EXPECT_EQ(done_after, 0u)
                << "puts posted after the departure that ended well";
        EXPECT_TRUE(stays_after) << "the worker that stays";
        EXPECT_EQ(to_stays.errors, 0) << ucs_status_string(to_stays.error);
        std::printf("[ INFO     ] %s put, %s, %s: error callback %.0f ms "
                    "after the departure (%s), %zu of %zu puts failed\n",
                    c.tls, name_of(c.how), where.c_str(), ms,
                    ucs_status_string(to_gone.error), failed, issued);
    }
    ucp_rkey_destroy(gone_rkey);
    ucp_rkey_destroy(stays_rkey);
    ucp_request_param_t force{};
    force.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    force.flags        = UCP_EP_CLOSE_FLAG_FORCE;
    (void)wait(ucp_ep_close_nbx(to_gone.ep, &force));
    (void)wait(ucp_ep_close_nbx(to_stays.ep, &force));
}

std::vector<departure_case> sibling_cases()
{
    std::vector<departure_case> all;
    for (const char *tls : {"rvt", "ud_v,rvt", "rc"}) {
        for (departure d :
             {departure::sibling_worker, departure::sibling_context}) {
            for (place p : {place::this_node, place::other_node}) {
                if (std::string(tls) == "rc" && p == place::other_node) {
                    continue; /* measured on this node only */
                }
                all.push_back({tls, op::put, d, p});
            }
        }
    }
    return all;
}

INSTANTIATE_TEST_SUITE_P(siblings, ucp_rvt_sibling_departure,
                         ::testing::ValuesIn(sibling_cases()), case_name);

std::vector<departure_case> cases()
{
    std::vector<departure_case> all;
    const op every[] = {op::am_short,     op::am_bcopy,  op::am_zcopy,
                        op::am_rndv,      op::tag_eager, op::tag_rndv_get,
                        op::tag_rndv_put, op::put,       op::get,
                        op::atomic,       op::flush};
    for (op o : every) {
        for (departure d : {departure::closed, departure::killed}) {
            for (place p : {place::this_node, place::other_node}) {
                all.push_back({"rvt", o, d, p});
            }
        }
    }
    /* rc_verbs beside rvt, for the time to the error callback (measured
     * only: over Soft-RoCE its RC retries outlast the window) */
    for (departure d : {departure::closed, departure::killed}) {
        all.push_back({"rc", op::tag_rndv_get, d, place::this_node});
    }
    return all;
}

INSTANTIATE_TEST_SUITE_P(cases, ucp_rvt_departure_ops,
                         ::testing::ValuesIn(cases()), case_name);

} // namespace
} // namespace rvt::test
