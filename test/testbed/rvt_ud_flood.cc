/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A hostile host on the fabric (test/testbed/flood-guest.sh): it opens a
 * UD QP of its own on its node's device (the agent's own ud_channel, with
 * a random Q_Key of its own, so the datagram's layout is the real one),
 * and sends datagrams to one agent's handshake UD QP, naming that QP's
 * Q_Key, as fast as the device takes them, until the time is up or it is
 * told to stop (SIGTERM, SIGINT). Then it prints what it sent.
 *
 *   rvt_ud_flood --device=NAME --to-gid=GID --to-qpn=N --to-qkey=N
 *       --mode=MODE [--port=1] [--gid-index=-1] [--seconds=60]
 *       [--job-key=KEY] [--other-job-key=KEY] [--num-qps=4]
 *       [--am-size=8192] [--munge-socket=PATH]
 *
 * GID, UD QPN and Q_Key are the agent's `address` in rvt-status (`gid`,
 * `ud_qpn`, `ud_qkey` in --json): what every process of a job that talks
 * to the agent has in its UCT address, so each mode is a user of the
 * job's fabric who knows that address; without the Q_Key the receiving
 * device drops every datagram before the agent could see it
 * (common/attach_wire.h, "Q_Keys"). Modes, each a flood that such a user
 * can send (docs/reliability.md, "Hostile input" and "A flood on the
 * handshake UD QP"):
 *
 *   garbage    1024 random bytes (a quarter of them with the right magic,
 *              version, type and length, so the parser looks further)
 *   wrong-key  the right shape: a request from this host's GID and this
 *              QP (its real QPN, as the completion's source QP shows
 *              it) with a new instance id each time, naming a job key of
 *              no job (--other-job-key), with a made-up credential of
 *              the agent's kind
 *   forged     wrong-key's request claiming a random UD QPN, not the QP
 *              that sends it: what a stranger sends to pass for a known
 *              peer, or to spread its failures over made-up senders
 *   other-job  wrong-key's request with a real credential, sealed for each
 *              datagram by this node's munged (or the job's secret: the
 *              agent's own peer_auth, --auth=auto's choice): what an agent
 *              of another job of the same user sends
 *   replay     one request of this job (--job-key, default $RVT_JOB_KEY),
 *              K QPs and the AM size as the agent's (--num-qps,
 *              --am-size), from this QP, sealed once and sent again and
 *              again: the agent takes the first (a half-open peer, its
 *              reply comes back here), and every copy after it is a
 *              replay
 *
 * Every datagram of a shape mode is checked with the agents' own parser
 * before the flood starts: a flood that the parser would refuse would
 * measure the garbage path twice.
 *
 * Output, one line: "rvt_ud_flood: MODE: N datagrams in S s (R/s), F not
 * sent (send queue full), A answers received". Exit 0; 2 on bad
 * arguments, 1 when the device, the QP or the credential cannot be had.
 */
#include "uct/ib/rvt/agent/device/device.h"
#include "uct/ib/rvt/agent/device/ud_channel.h"
#include "uct/ib/rvt/agent/device/verbs_ptr.h"
#include "uct/ib/rvt/agent/peers/peer_auth.h"
#include "uct/ib/rvt/common/conn_wire.h"
#include "uct/ib/rvt/common/job_key.h"

#include <arpa/inet.h>
#include <sys/random.h>

#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

using namespace rvt;
namespace conn = rvt::wire::conn;

namespace {

enum class mode : uint8_t {
    garbage,
    wrong_key,
    other_job,
    replay,
    forged
};

struct options {
    std::string device;
    uint8_t port  = 1;
    int gid_index = -1;
    agent::gid_array to_gid{};
    uint32_t to_qpn  = 0;
    uint32_t to_qkey = 0;
    mode what        = mode::garbage;
    uint32_t seconds = 60;
    std::string job_key;
    std::string other_job_key = "flood.another-job";
    uint32_t num_qps          = 4;
    uint32_t am_size          = 8192;
    std::string munge_socket;
};

constexpr const char *usage =
        "usage: rvt_ud_flood --device=NAME --to-gid=GID --to-qpn=N "
        "--to-qkey=N\n"
        "       --mode=garbage|wrong-key|other-job|replay|forged\n"
        "       [--port=1] [--gid-index=-1] [--seconds=60] [--job-key=KEY]\n"
        "       [--other-job-key=KEY] [--num-qps=4] [--am-size=8192]\n"
        "       [--munge-socket=PATH]\n";

[[noreturn]] void bad_argument(const std::string &why)
{
    std::fprintf(stderr, "rvt_ud_flood: %s\n%s", why.c_str(), usage);
    std::exit(2);
}

[[noreturn]] void die(const std::string &why)
{
    std::fprintf(stderr, "rvt_ud_flood: %s\n", why.c_str());
    std::exit(1);
}

uint32_t
number(std::string_view name, std::string_view text, uint32_t lo, uint32_t hi)
{
    uint32_t v      = 0;
    const char *end = text.data() + text.size();
    auto [ptr, ec]  = std::from_chars(text.data(), end, v);
    if (text.empty() || ec != std::errc{} || ptr != end || v < lo || v > hi) {
        bad_argument(std::string(name) + "=" + std::string(text) +
                     ": expected a whole number from " + std::to_string(lo) +
                     " to " + std::to_string(hi));
    }
    return v;
}

mode parse_mode(std::string_view text)
{
    if (text == "garbage") {
        return mode::garbage;
    }
    if (text == "wrong-key") {
        return mode::wrong_key;
    }
    if (text == "other-job") {
        return mode::other_job;
    }
    if (text == "replay") {
        return mode::replay;
    }
    if (text == "forged") {
        return mode::forged;
    }
    bad_argument("--mode=" + std::string(text) +
                 ": expected garbage, wrong-key, other-job, replay or forged");
}

options parse(int argc, char **argv)
{
    options o;
    bool have_gid = false, have_mode = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            std::fputs(usage, stdout);
            std::exit(0);
        }
        const auto eq = arg.find('=');
        if (arg.substr(0, 2) != "--" || eq == std::string_view::npos) {
            bad_argument("'" + std::string(arg) + "': expected --name=value");
        }
        const std::string_view name = arg.substr(0, eq);
        const std::string_view val  = arg.substr(eq + 1);
        if (name == "--device") {
            o.device = val;
        } else if (name == "--port") {
            o.port = static_cast<uint8_t>(number(name, val, 1, 255));
        } else if (name == "--gid-index") {
            o.gid_index = val == "-1" ?
                                  -1 :
                                  static_cast<int>(number(name, val, 0, 255));
        } else if (name == "--to-gid") {
            if (inet_pton(AF_INET6, std::string(val).c_str(),
                          o.to_gid.data()) != 1) {
                bad_argument("--to-gid=" + std::string(val) +
                             ": expected a GID as rvt-status prints it "
                             "(IPv6 text, e.g. ::ffff:198.18.0.1)");
            }
            have_gid = true;
        } else if (name == "--to-qpn") {
            o.to_qpn = number(name, val, conn::min_qpn, conn::qpn_mask);
        } else if (name == "--to-qkey") {
            o.to_qkey = number(name, val, 1, ~wire::qkey_controlled);
        } else if (name == "--mode") {
            o.what    = parse_mode(val);
            have_mode = true;
        } else if (name == "--seconds") {
            o.seconds = number(name, val, 1, 3600);
        } else if (name == "--job-key") {
            o.job_key = val;
        } else if (name == "--other-job-key") {
            o.other_job_key = val;
        } else if (name == "--num-qps") {
            o.num_qps = number(name, val, 1, conn::max_qps);
        } else if (name == "--am-size") {
            o.am_size = number(name, val, 64, 65536);
        } else if (name == "--munge-socket") {
            o.munge_socket = val;
        } else {
            bad_argument("unknown option " + std::string(name));
        }
    }
    if (o.device.empty()) {
        bad_argument("--device is required (the node's device, e.g. rxe3)");
    }
    if (!have_gid || o.to_qpn == 0 || o.to_qkey == 0) {
        bad_argument("--to-gid, --to-qpn and --to-qkey are required: the "
                     "agent's address (rvt-status: gid, ud_qpn, ud_qkey)");
    }
    if (!have_mode) {
        bad_argument("--mode is required");
    }
    if (o.what == mode::replay && o.job_key.empty()) {
        const char *env = std::getenv("RVT_JOB_KEY");
        if (env == nullptr || *env == '\0') {
            bad_argument("--mode=replay needs the job's key: --job-key=KEY "
                         "or $RVT_JOB_KEY");
        }
        o.job_key = env;
    }
    for (const std::string *k : {&o.job_key, &o.other_job_key}) {
        if (!k->empty()) {
            if (auto err = wire::job_key_error(*k); !err.empty()) {
                bad_argument("job key '" + *k + "': " + err);
            }
        }
    }
    if (o.what != mode::replay && o.other_job_key == o.job_key) {
        bad_argument("--other-job-key must differ from --job-key");
    }
    return o;
}

std::atomic<bool> stop{false};

extern "C" void on_signal(int)
{
    stop = true;
}

uint64_t random_u64()
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != sizeof(v)) {
        die("getrandom failed");
    }
    return v;
}

/* A sender as the agent's own datagrams name it: this device's GID, a UD
 * QPN and instance id of the caller's choice, and this QP's Q_Key (where
 * the agent's answers reach it). */
conn::sender sender_of(const agent::device &dev, uint32_t ud_qpn,
                       uint32_t ud_qkey, uint64_t instance)
{
    conn::sender s{};
    std::memcpy(s.gid, dev.gid().raw, sizeof(s.gid));
    s.instance_id = instance == 0 ? 1 : instance;
    s.ud_qpn      = ud_qpn & conn::qpn_mask;
    s.uid         = static_cast<uint32_t>(getuid());
    s.ud_qkey     = ud_qkey;
    return s;
}

conn::message request_of(const options &o, const conn::sender &self,
                         std::string_view job_key, std::mt19937_64 &rng)
{
    std::vector<conn::qp_info> qps(o.num_qps);
    for (auto &q : qps) {
        q.qpn = std::max<uint32_t>(conn::min_qpn, rng() & conn::qpn_mask);
        q.psn = rng() & conn::psn_mask;
    }
    return conn::make_request(self, job_key, 0, 1, qps, o.am_size);
}

/* Another job's request from this host and UD QPN (claimed: this QP's
 * own, or with `forge` a random one), a new instance each time, as a
 * process mints them freely; no credential yet. */
conn::message stranger_request(const options &o, const agent::device &dev,
                               uint32_t own_qpn, uint32_t own_qkey, bool forge,
                               std::mt19937_64 &rng)
{
    uint32_t qpn = own_qpn;
    while (forge && (qpn & conn::qpn_mask) == (own_qpn & conn::qpn_mask)) {
        qpn = static_cast<uint32_t>(rng());
    }
    return request_of(o, sender_of(dev, qpn, own_qkey, rng()), o.other_job_key,
                      rng);
}

/* A credential of `kind` that no agent believes, of the right shape. */
void made_up_credential(conn::message &m, conn::auth_kind kind,
                        std::mt19937_64 &rng)
{
    m.auth      = {};
    m.auth.kind = static_cast<uint16_t>(kind);
    if (kind == conn::auth_kind::secret) {
        m.auth.length    = conn::hmac_size;
        m.auth.issued_us = static_cast<uint64_t>(agent::realtime_now().count());
        for (auto &b : m.auth.nonce) {
            b = static_cast<uint8_t>(rng());
        }
        for (size_t i = 0; i < conn::hmac_size; ++i) {
            m.auth.credential[i] = static_cast<uint8_t>(rng());
        }
    } else if (kind == conn::auth_kind::munge) {
        static constexpr char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn"
                                      "opqrstuvwxyz0123456789+/";
        std::string text            = "MUNGE:";
        while (text.size() < 160) {
            text += b64[rng() % 64];
        }
        text += ':';
        std::memcpy(m.auth.credential, text.data(), text.size());
        m.auth.length = static_cast<uint16_t>(text.size());
    }
}

void garbage(conn::message &m, std::mt19937_64 &rng, uint64_t n)
{
    auto *bytes = reinterpret_cast<uint64_t *>(&m);
    for (size_t i = 0; i < sizeof(m) / sizeof(uint64_t); ++i) {
        bytes[i] = rng();
    }
    if (n % 4 == 0) {
        m.hdr.magic   = conn::magic;
        m.hdr.version = conn::protocol_version;
        m.hdr.type    = static_cast<uint16_t>(conn::msg_type::request);
        m.hdr.length  = conn::message_size;
    }
}

/* The agents' own parser must take a datagram of a shape mode. */
void must_parse(const conn::message &m, std::string_view what)
{
    auto parsed = conn::parse(std::as_bytes(std::span(&m, 1)));
    if (!parsed) {
        die(std::string(what) + ": the agents' parser refuses it (" +
            parsed.error() + "): not the right shape");
    }
}

} // namespace

int main(int argc, char **argv)
{
    const options o = parse(argc, argv);
    auto dev        = agent::device::open(o.device, o.port, o.gid_index);
    if (!dev) {
        die("device " + o.device + ": " + dev.error());
    }
    verbs::comp_channel_ptr channel(
            ibv_create_comp_channel(dev.value()->context()));
    if (!channel) {
        die("ibv_create_comp_channel failed");
    }
    auto ud = agent::ud_channel::create(*dev.value(), channel.get(),
                                        conn::random_qkey());
    if (!ud) {
        die(ud.error());
    }
    agent::ud_channel &qp = *ud.value();

    /* the credential kind --auth=auto would take here (munge when munged
     * answers, else the job's secret); only the shape modes need one */
    std::unique_ptr<agent::peer_auth> auth;
    if (o.what != mode::garbage) {
        agent::auth_settings s;
        s.munge_socket = o.munge_socket;
        agent::take_secret_env(s);
        auto a = agent::make_peer_auth(s, [](std::string_view) {});
        if (!a) {
            die("no credential to seal with: " + a.error());
        }
        auth = std::move(a.value());
    }

    std::mt19937_64 rng(random_u64());
    conn::message msg{};
    /* replay: one datagram of this job, from this QP, sealed once */
    if (o.what == mode::replay) {
        msg = request_of(o,
                         sender_of(*dev.value(), qp.qpn(), qp.qkey(),
                                   random_u64()),
                         o.job_key, rng);
        if (auto r = auth->seal(msg, o.to_gid); !r) {
            die("sealing the datagram to replay: " + r.error());
        }
        must_parse(msg, "the datagram to replay");
    }

    std::signal(SIGTERM, on_signal);
    std::signal(SIGINT, on_signal);
    using clock      = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto until = start + std::chrono::seconds(o.seconds);
    uint64_t sent = 0, full = 0, answers = 0, seal_failures = 0;
    uint8_t to_gid[16];
    std::memcpy(to_gid, o.to_gid.data(), sizeof(to_gid));
    bool checked = false;
    while (!stop && clock::now() < until) {
        /* reap send completions (and whatever the agent answers) */
        answers += qp.poll([](std::span<const std::byte>,
                              const std::array<uint8_t, 16> &) {},
                           64);
        for (int burst = 0; burst < 64 && !stop; ++burst) {
            switch (o.what) {
            case mode::garbage:
                garbage(msg, rng, sent);
                break;
            case mode::wrong_key:
            case mode::forged:
                msg = stranger_request(o, *dev.value(), qp.qpn(), qp.qkey(),
                                       o.what == mode::forged, rng);
                made_up_credential(msg, auth->kind(), rng);
                break;
            case mode::other_job:
                msg = stranger_request(o, *dev.value(), qp.qpn(), qp.qkey(),
                                       false, rng);
                if (auto r = auth->seal(msg, o.to_gid); !r) {
                    ++seal_failures;
                    continue;
                }
                break;
            case mode::replay:
                break;
            }
            if (!checked && o.what != mode::garbage) {
                must_parse(msg, "the first datagram");
                checked = true;
            }
            if (!qp.send(msg, to_gid, o.to_qpn, o.to_qkey)) {
                ++full;
                break; /* the send queue is full: reap, then go on */
            }
            ++sent;
        }
    }
    const double secs =
            std::chrono::duration<double>(clock::now() - start).count();
    static constexpr const char *names[] = {"garbage", "wrong-key", "other-job",
                                            "replay", "forged"};
    static_assert(std::size(names) == static_cast<size_t>(mode::forged) + 1);
    std::printf("rvt_ud_flood: %s: %llu datagrams in %.1f s (%.0f/s), %llu "
                "not sent (send queue full), %llu answers received",
                names[static_cast<int>(o.what)],
                static_cast<unsigned long long>(sent), secs,
                secs > 0 ? static_cast<double>(sent) / secs : 0.0,
                static_cast<unsigned long long>(full),
                static_cast<unsigned long long>(answers));
    if (seal_failures > 0) {
        std::printf(", %llu not sealed",
                    static_cast<unsigned long long>(seal_failures));
    }
    std::printf("\n");
    return 0;
}
