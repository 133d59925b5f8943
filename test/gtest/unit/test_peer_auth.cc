/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the handshake's credentials (agent/peers/peer_auth.h): a rule
 * of the replay window per test; the job secret's HMAC and MUNGE (with a
 * private munged) each refusing a stranger, an altered datagram, one
 * meant for another node, and a replay; the secret file's checks; what
 * --auth=auto picks.
 */
#include "test/gtest/unit/munged_fixture.h"
#include "uct/ib/rvt/agent/peers/peer_auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace conn = rvt::wire::conn;
using namespace rvt::agent;
using std::chrono::microseconds;
using std::chrono::seconds;

namespace {

const gid_array node_a       = {0xfe, 0x80, 0, 0, 0, 0, 0, 0,
                                0,    0,    0, 0, 0, 0, 0, 0x0a};
const gid_array node_b       = {0xfe, 0x80, 0, 0, 0, 0, 0, 0,
                                0,    0,    0, 0, 0, 0, 0, 0x0b};
const std::string the_secret = "0123456789abcdef-the-job";

conn::message request()
{
    conn::sender s{};
    std::memcpy(s.gid, node_a.data(), 16);
    s.instance_id                 = 7;
    s.ud_qpn                      = 0x11;
    s.uid                         = getuid();
    s.ud_qkey                     = 0x1234;
    std::vector<conn::qp_info> qs = {{0x20, 1}, {0x21, 2}};
    return conn::make_request(s, "slurm.5", 0, 1, qs, 8192);
}

template<class R> void expect_refused(const R &r, const std::string &needle)
{
    ASSERT_FALSE(r.ok()) << "believed; expected a refusal with: " << needle;
    EXPECT_NE(r.error().find(needle), std::string::npos)
            << "\"" << r.error() << "\" lacks \"" << needle << "\"";
}

replay_window::mac mac_of(uint8_t b)
{
    replay_window::mac m{};
    m.fill(b);
    return m;
}

/* A clock the test moves. */
struct fake_clock {
    microseconds now{seconds{1000000}};
    realtime_fn fn()
    {
        return [this] { return now; };
    }
};

} // namespace

/* ---- replay window: one rule each ------------------------------------ */

TEST(replay_window, a_new_mac_within_the_ttl_is_fresh)
{
    replay_window w(seconds{300}, 8);
    EXPECT_EQ(w.admit(mac_of(1), seconds{1000}, seconds{1000}),
              replay_window::verdict::fresh);
    EXPECT_EQ(w.admit(mac_of(2), seconds{800}, seconds{1000}),
              replay_window::verdict::fresh);
    EXPECT_EQ(w.remembered(), 2u);
}

TEST(replay_window, one_issued_more_than_the_ttl_ago_is_too_old)
{
    replay_window w(seconds{300}, 8);
    EXPECT_EQ(w.admit(mac_of(1), seconds{699}, seconds{1000}),
              replay_window::verdict::too_old);
    EXPECT_EQ(w.remembered(), 0u);
}

TEST(replay_window, one_issued_more_than_the_ttl_ahead_is_from_the_future)
{
    replay_window w(seconds{300}, 8);
    EXPECT_EQ(w.admit(mac_of(1), seconds{1301}, seconds{1000}),
              replay_window::verdict::from_the_future);
    EXPECT_EQ(w.admit(mac_of(1), seconds{1300}, seconds{1000}),
              replay_window::verdict::fresh);
}

TEST(replay_window, a_mac_seen_before_is_replayed)
{
    replay_window w(seconds{300}, 8);
    ASSERT_EQ(w.admit(mac_of(1), seconds{1000}, seconds{1000}),
              replay_window::verdict::fresh);
    EXPECT_EQ(w.admit(mac_of(1), seconds{1000}, seconds{1200}),
              replay_window::verdict::replayed);
}

TEST(replay_window, expired_macs_are_forgotten_and_stay_refused_by_age)
{
    replay_window w(seconds{300}, 8);
    ASSERT_EQ(w.admit(mac_of(1), seconds{1000}, seconds{1000}),
              replay_window::verdict::fresh);
    EXPECT_EQ(w.admit(mac_of(2), seconds{1301}, seconds{1301}),
              replay_window::verdict::fresh);
    EXPECT_EQ(w.remembered(), 1u) << "the expired one is forgotten";
    EXPECT_EQ(w.admit(mac_of(1), seconds{1000}, seconds{1301}),
              replay_window::verdict::too_old);
}

TEST(replay_window, when_full_the_oldest_goes_and_nothing_older_is_fresh)
{
    replay_window w(seconds{300}, 2);
    ASSERT_EQ(w.admit(mac_of(1), seconds{1000}, seconds{1000}),
              replay_window::verdict::fresh);
    ASSERT_EQ(w.admit(mac_of(2), seconds{1001}, seconds{1001}),
              replay_window::verdict::fresh);
    EXPECT_EQ(w.admit(mac_of(3), seconds{1002}, seconds{1002}),
              replay_window::verdict::fresh);
    EXPECT_EQ(w.remembered(), 2u);
    /* mac 1 was forgotten: its replay is refused by the floor */
    EXPECT_EQ(w.admit(mac_of(1), seconds{1000}, seconds{1003}),
              replay_window::verdict::too_old);
    EXPECT_EQ(w.admit(mac_of(4), seconds{999}, seconds{1003}),
              replay_window::verdict::too_old);
}

/* ---- the job secret ---------------------------------------------------- */

TEST(secret_auth, a_sealed_datagram_is_believed_once)
{
    fake_clock clock;
    auto a = secret_auth(the_secret, seconds{300}, clock.fn());
    auto b = secret_auth(the_secret, seconds{300}, clock.fn());
    ASSERT_TRUE(a.ok() && b.ok());
    conn::message m = request();
    ASSERT_TRUE(a.value()->seal(m, node_b).ok());
    EXPECT_EQ(m.auth.kind, static_cast<uint16_t>(conn::auth_kind::secret));
    EXPECT_EQ(m.auth.length, conn::hmac_size);
    EXPECT_TRUE(check_datagram(*b.value(), m, node_b).ok());
    expect_refused(b.value()->check(m, node_b), "replayed");
    /* each seal is a new credential: a resend is fresh */
    conn::message again = request();
    ASSERT_TRUE(a.value()->seal(again, node_b).ok());
    EXPECT_TRUE(b.value()->check(again, node_b).ok());
}

TEST(secret_auth, another_secret_is_refused)
{
    fake_clock clock;
    auto stranger   = secret_auth("a guess of sixteen+ bytes", seconds{300},
                                  clock.fn());
    auto b          = secret_auth(the_secret, seconds{300}, clock.fn());
    conn::message m = request();
    ASSERT_TRUE(stranger.value()->seal(m, node_b).ok());
    expect_refused(b.value()->check(m, node_b), "its HMAC does not match");
}

TEST(secret_auth, an_altered_datagram_or_another_destination_is_refused)
{
    fake_clock clock;
    auto a          = secret_auth(the_secret, seconds{300}, clock.fn());
    auto b          = secret_auth(the_secret, seconds{300}, clock.fn());
    conn::message m = request();
    ASSERT_TRUE(a.value()->seal(m, node_b).ok());
    conn::message altered = m;
    altered.qps[0].qpn    = 0x666;
    expect_refused(b.value()->check(altered, node_b), "HMAC does not match");
    /* moved to another node: the digest names the GID it was sent to */
    expect_refused(b.value()->check(m, node_a), "HMAC does not match");
}

TEST(secret_auth, a_credential_past_its_time_or_from_the_future_is_refused)
{
    fake_clock clock;
    auto a          = secret_auth(the_secret, seconds{300}, clock.fn());
    auto b          = secret_auth(the_secret, seconds{300}, clock.fn());
    conn::message m = request();
    ASSERT_TRUE(a.value()->seal(m, node_b).ok());
    clock.now += seconds{301};
    expect_refused(b.value()->check(m, node_b), "issued too long ago");
    conn::message late = request();
    ASSERT_TRUE(a.value()->seal(late, node_b).ok());
    clock.now -= seconds{700};
    expect_refused(b.value()->check(late, node_b), "issued in the future");
}

TEST(secret_auth, a_short_secret_is_refused_naming_its_length)
{
    expect_refused(secret_auth("short"),
                   "the job secret has 5 bytes: expected at least 16");
}

TEST(peer_auth, a_datagram_of_another_kind_is_refused_naming_both)
{
    auto b          = secret_auth(the_secret);
    conn::message m = request();
    ASSERT_TRUE(no_auth()->seal(m, node_b).ok());
    expect_refused(check_datagram(*b.value(), m, node_b),
                   "its credential is of kind none: this agent demands "
                   "secret");
    EXPECT_TRUE(check_datagram(*no_auth(), m, node_b).ok());
}

TEST(peer_auth, the_auth_option_is_parsed_or_refused_naming_the_value)
{
    EXPECT_EQ(parse_auth_choice("munge").value(), auth_choice::munge);
    EXPECT_EQ(parse_auth_choice("auto").value(), auth_choice::auto_);
    expect_refused(parse_auth_choice("kerberos"),
                   "--auth=kerberos: expected auto, munge, secret or none");
}

/* ---- the secret file ---------------------------------------------------- */

class secret_file : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/rvt-secret.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        m_dir = tmpl;
    }
    void TearDown() override
    {
        std::filesystem::remove_all(m_dir);
    }
    std::string write(const std::string &text, mode_t mode)
    {
        std::string p = m_dir + "/secret";
        std::filesystem::remove(p);
        std::ofstream(p) << text;
        chmod(p.c_str(), mode);
        return p;
    }
    std::string m_dir;
};

TEST_F(secret_file, a_private_file_is_read_without_its_newline)
{
    auto s = read_secret_file(write(the_secret + "\n", 0600));
    ASSERT_TRUE(s.ok()) << s.error();
    EXPECT_EQ(s.value(), the_secret);
}

TEST_F(secret_file, a_file_others_can_read_is_refused_naming_its_mode)
{
    expect_refused(read_secret_file(write(the_secret, 0644)),
                   "mode 644: expected no access for group and others");
    expect_refused(read_secret_file(m_dir + "/none"), "No such file");
}

TEST_F(secret_file, auto_takes_the_secret_when_munged_does_not_answer)
{
    auth_settings s;
    s.munge_socket = m_dir + "/no-munged";
    s.secret_file  = write(the_secret, 0600);
    std::vector<std::string> log;
    auto a = make_peer_auth(s,
                            [&](std::string_view l) { log.emplace_back(l); });
    ASSERT_TRUE(a.ok()) << a.error();
    EXPECT_EQ(a.value()->kind(), conn::auth_kind::secret);
    ASSERT_FALSE(log.empty());
    EXPECT_NE(log[0].find("not munge"), std::string::npos) << log[0];

    s.secret_file.clear();
    s.choice = auth_choice::secret;
    expect_refused(make_peer_auth(s, [](std::string_view) {}),
                   "--auth=secret: no job secret");
    s.choice = auth_choice::munge;
    expect_refused(make_peer_auth(s, [](std::string_view) {}), "no-munged");
}

/* The default fails closed: neither munged nor a secret is a refusal to
 * start that says how to get either, never an agent anyone may join. */
TEST_F(secret_file, auto_without_munge_or_a_secret_refuses_saying_how)
{
    auth_settings s;
    s.munge_socket = m_dir + "/no-munged";
    auto a         = make_peer_auth(s, [](std::string_view) {});
    ASSERT_FALSE(a.ok()) << "auto ran with " << a.value()->describe();
    for (const char *says :
         {"--auth=auto: no way to prove peers: munged does not answer",
          "no-munged", "Start munged", "$RVT_JOB_SECRET_FILE",
          "--auth=none (UCX_RVT_AGENT_ARGS=--auth=none)"}) {
        EXPECT_NE(a.error().find(says), std::string::npos)
                << says << " in: " << a.error();
    }
    /* only in words */
    s.choice = auth_choice::none;
    a        = make_peer_auth(s, [](std::string_view) {});
    ASSERT_TRUE(a.ok()) << a.error();
    EXPECT_EQ(a.value()->kind(), conn::auth_kind::none);
}

/* A secret reaches rvtd as a file named in the environment, never on a
 * command line; the file is checked as --secret-file's is. */
TEST_F(secret_file, auto_takes_the_file_named_by_rvt_job_secret_file)
{
    auth_settings s;
    s.munge_socket    = m_dir + "/no-munged";
    s.secret_file_env = write(the_secret + "\n", 0600);
    s.secret_env      = "the variable loses to the file";
    auto a            = make_peer_auth(s, [](std::string_view) {});
    ASSERT_TRUE(a.ok()) << a.error();
    EXPECT_EQ(a.value()->kind(), conn::auth_kind::secret);
    /* the file's secret, not the variable's: a datagram sealed under it
     * is believed */
    auto same       = secret_auth(the_secret);
    conn::message m = request();
    ASSERT_TRUE(same.value()->seal(m, node_b).ok());
    EXPECT_TRUE(check_datagram(*a.value(), m, node_b).ok());

    s.secret_file_env = write(the_secret, 0640);
    expect_refused(make_peer_auth(s, [](std::string_view) {}),
                   "$RVT_JOB_SECRET_FILE: secret file " + m_dir +
                           "/secret: mode 640: expected no access");
}

/* ---- MUNGE ---------------------------------------------------------------- */

class munge : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_EQ(m_munged.error(), "");
    }
    rvt::test::private_munged m_munged;
};

TEST_F(munge, a_sealed_datagram_is_believed_once)
{
    auto a = munge_auth(m_munged.socket());
    ASSERT_TRUE(a.ok()) << a.error();
    auto b = munge_auth(m_munged.socket());
    ASSERT_TRUE(b.ok()) << b.error();
    conn::message m = request();
    ASSERT_TRUE(a.value()->seal(m, node_b).ok());
    EXPECT_EQ(m.auth.kind, static_cast<uint16_t>(conn::auth_kind::munge));
    EXPECT_EQ(std::string(reinterpret_cast<char *>(m.auth.credential), 6),
              "MUNGE:");
    /* it fits the datagram's 720 bytes with room to spare */
    EXPECT_LT(m.auth.length, conn::max_credential / 2);
    std::printf("a MUNGE credential of the binding digest: %u bytes (room "
                "for %zu)\n",
                m.auth.length, conn::max_credential);
    EXPECT_TRUE(check_datagram(*b.value(), m, node_b).ok());
    expect_refused(b.value()->check(m, node_b), "Replayed credential");
}

TEST_F(munge, an_altered_datagram_or_another_destination_is_refused)
{
    auto a = munge_auth(m_munged.socket());
    auto b = munge_auth(m_munged.socket());
    ASSERT_TRUE(a.ok() && b.ok());
    conn::message m = request();
    ASSERT_TRUE(a.value()->seal(m, node_b).ok());
    conn::message altered = m;
    std::strcpy(altered.job_key, "slurm.6");
    expect_refused(b.value()->check(altered, node_b),
                   "vouches for another datagram");
    conn::message moved = request();
    ASSERT_TRUE(a.value()->seal(moved, node_b).ok());
    expect_refused(b.value()->check(moved, node_a),
                   "vouches for another datagram");
}

TEST_F(munge, a_credential_of_another_munge_key_is_refused)
{
    rvt::test::private_munged other;
    ASSERT_EQ(other.error(), "");
    auto stranger = munge_auth(other.socket());
    auto b        = munge_auth(m_munged.socket());
    ASSERT_TRUE(stranger.ok() && b.ok());
    conn::message m = request();
    ASSERT_TRUE(stranger.value()->seal(m, node_b).ok());
    expect_refused(b.value()->check(m, node_b), "munged refused");
}

/* What one credential check costs on this host, for the sender gate's
 * per-pass time (sender_gate_config::pass_time): printed, not judged. A
 * MUNGE check of a good credential and of its replay (each a round trip
 * to munged), and the secret's HMAC. */
TEST_F(munge, what_a_check_costs_is_printed)
{
    using clock = std::chrono::steady_clock;
    auto a      = munge_auth(m_munged.socket());
    auto b      = munge_auth(m_munged.socket());
    auto s      = secret_auth(the_secret);
    ASSERT_TRUE(a.ok() && b.ok() && s.ok());
    constexpr int n = 200;
    std::vector<conn::message> munged(n), hmac(n);
    for (int i = 0; i < n; ++i) {
        munged[i]         = request();
        munged[i].hdr.seq = static_cast<uint32_t>(1 + i);
        hmac[i]           = munged[i];
        ASSERT_TRUE(a.value()->seal(munged[i], node_b).ok());
        ASSERT_TRUE(s.value()->seal(hmac[i], node_b).ok());
    }
    /* each check of `ms` by `auth`, which must say `believed`: the
     * median, mean and longest, microseconds */
    const auto time = [&](peer_auth &auth, const std::vector<conn::message> &ms,
                          bool believed) {
        std::vector<double> us;
        double sum = 0;
        for (const auto &m : ms) {
            const auto t0 = clock::now();
            const bool ok = auth.check(m, node_b).ok();
            us.push_back(
                    std::chrono::duration<double, std::micro>(clock::now() - t0)
                            .count());
            sum += us.back();
            EXPECT_EQ(ok, believed);
        }
        std::sort(us.begin(), us.end());
        return std::array<double, 3>{us[us.size() / 2],
                                     sum / static_cast<double>(us.size()),
                                     us.back()};
    };
    const auto good   = time(*b.value(), munged, true);
    const auto replay = time(*b.value(), munged, false);
    const auto secret = time(*s.value(), hmac, true);
    std::printf("[   cost   ] one credential check here, %d each, median / "
                "mean / longest: munge %.0f / %.0f / %.0f us, a munge replay "
                "%.0f / %.0f / %.0f us, secret %.1f / %.1f / %.1f us\n",
                n, good[0], good[1], good[2], replay[0], replay[1], replay[2],
                secret[0], secret[1], secret[2]);
}

TEST_F(munge, auto_picks_munge_when_munged_answers)
{
    auth_settings s;
    s.munge_socket = m_munged.socket();
    s.secret_env   = the_secret;
    auto a         = make_peer_auth(s, [](std::string_view) {});
    ASSERT_TRUE(a.ok()) << a.error();
    EXPECT_EQ(a.value()->kind(), conn::auth_kind::munge);
    EXPECT_NE(a.value()->describe().find(m_munged.socket()), std::string::npos);
}
