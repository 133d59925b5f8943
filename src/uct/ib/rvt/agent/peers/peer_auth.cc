/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The handshake's credentials (peer_auth.h): MUNGE through libmunge,
 * the job secret through OpenSSL's HMAC, and the replay window.
 */
#include "uct/ib/rvt/agent/peers/peer_auth.h"

#include "uct/ib/rvt/common/format.h"

#include <fcntl.h>
#include <munge.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace rvt::agent {

namespace conn = wire::conn;
using std::chrono::microseconds;

result<auth_choice> parse_auth_choice(std::string_view text)
{
    for (auth_choice c : {auth_choice::auto_, auth_choice::munge,
                          auth_choice::secret, auth_choice::none}) {
        if (text == to_string(c)) {
            return c;
        }
    }
    return failure{"--auth=" + std::string(text) +
                   ": expected auto, munge, secret or none"};
}

std::string_view to_string(auth_choice c)
{
    switch (c) {
    case auth_choice::auto_:
        return "auto";
    case auth_choice::munge:
        return "munge";
    case auth_choice::secret:
        return "secret";
    case auth_choice::none:
        return "none";
    }
    return "unknown";
}

result<done>
check_datagram(peer_auth &auth, const conn::message &msg, const gid_array &self)
{
    const auto theirs = static_cast<conn::auth_kind>(msg.auth.kind);
    if (theirs != auth.kind()) {
        return failure{format("its credential is of kind %s: this agent "
                              "demands %s (--auth)",
                              conn::to_string(theirs).data(),
                              conn::to_string(auth.kind()).data())};
    }
    return auth.check(msg, self);
}

microseconds realtime_now()
{
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return microseconds{int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000};
}

/* ---- replay window --------------------------------------------------- */

replay_window::replay_window(microseconds ttl, size_t capacity) :
    m_ttl(ttl), m_capacity(std::max<size_t>(capacity, 1))
{
}

void replay_window::forget_expired(microseconds now)
{
    while (!m_by_issue.empty() && m_by_issue.begin()->first + m_ttl < now) {
        m_macs.erase(m_by_issue.begin()->second);
        m_by_issue.erase(m_by_issue.begin());
    }
}

replay_window::verdict
replay_window::admit(const mac &m, microseconds issued, microseconds now)
{
    if (issued + m_ttl < now || (m_floor && issued <= *m_floor)) {
        return verdict::too_old;
    }
    if (issued > now + m_ttl) {
        return verdict::from_the_future;
    }
    forget_expired(now);
    if (m_macs.count(m) != 0) {
        return verdict::replayed;
    }
    if (m_macs.size() >= m_capacity) {
        auto oldest = m_by_issue.begin();
        m_floor     = std::max(m_floor.value_or(oldest->first), oldest->first);
        m_macs.erase(oldest->second);
        m_by_issue.erase(oldest);
        if (issued <= *m_floor) {
            return verdict::too_old;
        }
    }
    m_macs.insert(m);
    m_by_issue.emplace(issued, m);
    return verdict::fresh;
}

std::string_view to_string(replay_window::verdict v)
{
    switch (v) {
    case replay_window::verdict::fresh:
        return "fresh";
    case replay_window::verdict::too_old:
        return "issued too long ago (or before credentials this agent has "
               "forgotten)";
    case replay_window::verdict::from_the_future:
        return "issued in the future (the clocks differ by more than the "
               "time-to-live)";
    case replay_window::verdict::replayed:
        return "replayed: this credential was seen before";
    }
    return "unknown";
}

std::array<uint8_t, conn::digest_size>
binding_digest(const conn::message &msg, const gid_array &to)
{
    conn::message m = msg;
    m.auth.length   = 0;
    std::memset(m.auth.credential, 0, conn::max_credential);
    std::array<uint8_t, conn::digest_size> out{};
    unsigned int n  = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    const bool ok   = ctx != nullptr &&
                    EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
                    EVP_DigestUpdate(ctx, &m, sizeof(m)) == 1 &&
                    EVP_DigestUpdate(ctx, to.data(), to.size()) == 1 &&
                    EVP_DigestFinal_ex(ctx, out.data(), &n) == 1 &&
                    n == out.size();
    EVP_MD_CTX_free(ctx);
    if (!ok) {
        /* SHA-256 fails only without memory: a digest no credential
         * matches, so the datagram is refused, never trusted */
        out.fill(0xff);
    }
    return out;
}

namespace {

/* ---- none ------------------------------------------------------------- */

class none_auth final : public peer_auth {
public:
    conn::auth_kind kind() const override
    {
        return conn::auth_kind::none;
    }
    std::string describe() const override
    {
        return "none (UNAUTHENTICATED: any host that knows the job key "
               "may connect)";
    }
    result<done> seal(conn::message &msg, const gid_array &) override
    {
        msg.auth = {};
        return done{};
    }
    result<done> check(const conn::message &, const gid_array &) override
    {
        return done{};
    }
};

/* ---- secret ----------------------------------------------------------- */

class hmac_auth final : public peer_auth {
public:
    hmac_auth(std::string secret, std::chrono::seconds ttl, realtime_fn now,
              size_t capacity) :
        m_secret(std::move(secret)),
        m_now(std::move(now)),
        m_window(ttl, capacity)
    {
    }
    ~hmac_auth() override
    {
        OPENSSL_cleanse(m_secret.data(), m_secret.size());
    }

    conn::auth_kind kind() const override
    {
        return conn::auth_kind::secret;
    }
    std::string describe() const override
    {
        return "secret (HMAC-SHA256 under the job's secret)";
    }

    result<done> seal(conn::message &msg, const gid_array &to) override
    {
        msg.auth           = {};
        msg.auth.kind      = static_cast<uint16_t>(conn::auth_kind::secret);
        msg.auth.issued_us = static_cast<uint64_t>(m_now().count());
        if (getrandom(msg.auth.nonce, sizeof(msg.auth.nonce), 0) !=
            static_cast<ssize_t>(sizeof(msg.auth.nonce))) {
            return failure{"no random bytes for the nonce"};
        }
        auto mac = compute(msg, to);
        if (!mac) {
            return failure{mac.error()};
        }
        std::memcpy(msg.auth.credential, mac.value().data(), conn::hmac_size);
        msg.auth.length = conn::hmac_size;
        return done{};
    }

    result<done> check(const conn::message &msg, const gid_array &self) override
    {
        auto mac = compute(msg, self);
        if (!mac) {
            return failure{mac.error()};
        }
        if (msg.auth.length != conn::hmac_size ||
            CRYPTO_memcmp(mac.value().data(), msg.auth.credential,
                          conn::hmac_size) != 0) {
            return failure{"its HMAC does not match: another secret, or the "
                           "datagram was altered or meant for another GID"};
        }
        auto v = m_window.admit(mac.value(),
                                microseconds{static_cast<int64_t>(
                                        msg.auth.issued_us)},
                                m_now());
        if (v != replay_window::verdict::fresh) {
            return failure{"its credential is " + std::string(to_string(v))};
        }
        return done{};
    }

private:
    result<replay_window::mac>
    compute(const conn::message &msg, const gid_array &to) const
    {
        const auto digest = binding_digest(msg, to);
        replay_window::mac out{};
        unsigned int n = 0;
        if (HMAC(EVP_sha256(), m_secret.data(),
                 static_cast<int>(m_secret.size()), digest.data(),
                 digest.size(), out.data(), &n) == nullptr ||
            n != out.size()) {
            return failure{"HMAC-SHA256 failed"};
        }
        return out;
    }

    std::string m_secret;
    realtime_fn m_now;
    replay_window m_window;
};

/* ---- munge ------------------------------------------------------------ */

struct munge_ctx_deleter {
    void operator()(munge_ctx_t c) const
    {
        munge_ctx_destroy(c);
    }
};
using munge_ctx_ptr =
        std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, munge_ctx_deleter>;

struct free_deleter {
    void operator()(void *p) const
    {
        std::free(p);
    }
};

class munge_auth_impl final : public peer_auth {
public:
    explicit munge_auth_impl(std::string socket) : m_socket(std::move(socket))
    {
    }

    result<done> open()
    {
        m_ctx.reset(munge_ctx_create());
        if (!m_ctx) {
            return failure{"munge_ctx_create failed"};
        }
        if (!m_socket.empty() &&
            munge_ctx_set(m_ctx.get(), MUNGE_OPT_SOCKET, m_socket.c_str()) !=
                    EMUNGE_SUCCESS) {
            return failure{"munge socket " + m_socket + ": " +
                           munge_ctx_strerror(m_ctx.get())};
        }
        /* only agents of this user can decode our credentials */
        if (munge_ctx_set(m_ctx.get(), MUNGE_OPT_UID_RESTRICTION, getuid()) !=
            EMUNGE_SUCCESS) {
            return failure{std::string("munge uid restriction: ") +
                           munge_ctx_strerror(m_ctx.get())};
        }
        return done{};
    }

    conn::auth_kind kind() const override
    {
        return conn::auth_kind::munge;
    }
    std::string describe() const override
    {
        return "munge (socket " +
               (m_socket.empty() ? std::string("MUNGE's default") : m_socket) +
               ")";
    }

    result<done> seal(conn::message &msg, const gid_array &to) override
    {
        msg.auth          = {};
        msg.auth.kind     = static_cast<uint16_t>(conn::auth_kind::munge);
        const auto digest = binding_digest(msg, to);
        char *cred        = nullptr;
        munge_err_t e     = munge_encode(&cred, m_ctx.get(), digest.data(),
                                         static_cast<int>(digest.size()));
        std::unique_ptr<char, free_deleter> owned(cred);
        if (e != EMUNGE_SUCCESS) {
            return failure{std::string("munge_encode: ") +
                           munge_ctx_strerror(m_ctx.get())};
        }
        const size_t len = std::strlen(cred);
        if (len == 0 || len > conn::max_credential) {
            return failure{format("munge credential of %zu bytes: at most "
                                  "%zu fit",
                                  len, conn::max_credential)};
        }
        std::memcpy(msg.auth.credential, cred, len);
        msg.auth.length = static_cast<uint16_t>(len);
        return done{};
    }

    result<done> check(const conn::message &msg, const gid_array &self) override
    {
        const std::string cred(reinterpret_cast<const char *>(
                                       msg.auth.credential),
                               msg.auth.length);
        void *payload = nullptr;
        int len       = 0;
        uid_t uid     = 0;
        gid_t gid     = 0;
        munge_err_t e = munge_decode(cred.c_str(), m_ctx.get(), &payload, &len,
                                     &uid, &gid);
        std::unique_ptr<void, free_deleter> owned(payload);
        if (e != EMUNGE_SUCCESS) {
            return failure{std::string("munged refused its credential: ") +
                           munge_ctx_strerror(m_ctx.get())};
        }
        if (uid != getuid() || gid != getgid()) {
            return failure{format("its credential was made by uid %u gid %u: "
                                  "this agent is uid %u gid %u",
                                  unsigned(uid), unsigned(gid),
                                  unsigned(getuid()), unsigned(getgid()))};
        }
        const auto digest = binding_digest(msg, self);
        if (len != static_cast<int>(digest.size()) ||
            std::memcmp(payload, digest.data(), digest.size()) != 0) {
            return failure{"its credential vouches for another datagram (or "
                           "one meant for another GID)"};
        }
        return done{};
    }

private:
    std::string m_socket;
    munge_ctx_ptr m_ctx;
};

} // namespace

std::unique_ptr<peer_auth> no_auth()
{
    return std::make_unique<none_auth>();
}

result<std::unique_ptr<peer_auth>>
secret_auth(std::string secret, std::chrono::seconds ttl, realtime_fn now,
            size_t replay_capacity)
{
    if (secret.size() < min_secret_size) {
        return failure{format("the job secret has %zu bytes: expected at "
                              "least %zu",
                              secret.size(), min_secret_size)};
    }
    return std::unique_ptr<peer_auth>(
            std::make_unique<hmac_auth>(std::move(secret), ttl, std::move(now),
                                        replay_capacity));
}

result<std::unique_ptr<peer_auth>> munge_auth(std::string socket)
{
    auto a = std::make_unique<munge_auth_impl>(std::move(socket));
    if (auto o = a->open(); !o) {
        return failure{o.error()};
    }
    /* one round trip now: a munged that does not answer is a start-up
     * error, not a silent handshake failure later */
    conn::message probe{};
    gid_array nowhere{};
    nowhere[15] = 1;
    if (auto s = a->seal(probe, nowhere); !s) {
        return failure{s.error() + " (" + a->describe() + ")"};
    }
    if (auto c = a->check(probe, nowhere); !c) {
        return failure{c.error() + " (" + a->describe() + ")"};
    }
    return std::unique_ptr<peer_auth>(std::move(a));
}

void take_secret_env(auth_settings &s)
{
    if (const char *v = std::getenv(secret_file_env_name); v != nullptr) {
        s.secret_file_env = v;
    }
    if (const char *v = std::getenv(secret_env_name); v != nullptr) {
        s.secret_env = v;
    }
}

result<std::string> read_secret_file(const std::string &path)
{
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return failure{"secret file " + path + ": " + std::strerror(errno)};
    }
    struct stat st {};
    std::string out;
    std::string err;
    if (fstat(fd, &st) != 0) {
        err = std::string("fstat: ") + std::strerror(errno);
    } else if (!S_ISREG(st.st_mode)) {
        err = "not a regular file";
    } else if (st.st_uid != getuid()) {
        err = format("owned by uid %u: expected this agent's uid %u",
                     unsigned(st.st_uid), unsigned(getuid()));
    } else if ((st.st_mode & 077) != 0) {
        err = format("mode %03o: expected no access for group and others "
                     "(chmod 600)",
                     unsigned(st.st_mode & 0777));
    } else if (st.st_size > 4096) {
        err = format("%lld bytes: expected at most 4096",
                     static_cast<long long>(st.st_size));
    } else {
        out.resize(static_cast<size_t>(st.st_size));
        ssize_t got = st.st_size > 0 ? ::read(fd, out.data(), out.size()) : 0;
        if (got != st.st_size) {
            err = "short read";
        }
    }
    ::close(fd);
    if (!err.empty()) {
        return failure{"secret file " + path + ": " + err};
    }
    if (!out.empty() && out.back() == '\n') {
        out.pop_back();
    }
    return out;
}

result<std::unique_ptr<peer_auth>>
make_peer_auth(const auth_settings &s, const log_fn &log)
{
    const bool has_secret = !s.secret_file.empty() ||
                            s.secret_file_env.has_value() ||
                            s.secret_env.has_value();
    auto secret = [&s]() -> result<std::string> {
        if (!s.secret_file.empty()) {
            return read_secret_file(s.secret_file);
        }
        if (s.secret_file_env) {
            auto k = read_secret_file(*s.secret_file_env);
            if (!k) {
                return failure{std::string("$") + secret_file_env_name + ": " +
                               k.error()};
            }
            return k;
        }
        if (s.secret_env) {
            return *s.secret_env;
        }
        return failure{std::string("no job secret: give every rank the same "
                                   "secret of at least ") +
                       std::to_string(min_secret_size) + " bytes in a file " +
                       "named by $" + secret_file_env_name +
                       " (mode 600), or in $" + secret_env_name +
                       ", or rvtd --secret-file"};
    };
    switch (s.choice) {
    case auth_choice::none:
        return no_auth();
    case auth_choice::munge:
        return munge_auth(s.munge_socket);
    case auth_choice::secret: {
        auto k = secret();
        if (!k) {
            return failure{"--auth=secret: " + k.error()};
        }
        return secret_auth(std::move(k.value()));
    }
    case auth_choice::auto_:
        break;
    }
    auto m = munge_auth(s.munge_socket);
    if (m) {
        return m;
    }
    log("--auth=auto: not munge: " + m.error());
    if (has_secret) {
        auto k = secret();
        if (!k) {
            return failure{"--auth=auto: " + k.error()};
        }
        return secret_auth(std::move(k.value()));
    }
    /* fail closed: a peer without a credential would get RC QPs with
     * access to every client's registered memory */
    return failure{"--auth=auto: no way to prove peers: munged does not "
                   "answer (" +
                   m.error() + ") and no job secret is given ($" +
                   secret_file_env_name + ", $" + secret_env_name +
                   " or --secret-file). Start munged with the site's key on "
                   "every node, or give every rank a secret of at least " +
                   std::to_string(min_secret_size) +
                   " bytes in a file of "
                   "mode 600 named by $" +
                   secret_file_env_name +
                   ", or run unauthenticated on "
                   "purpose with --auth=none (UCX_RVT_AGENT_ARGS=--auth=none)"};
}

} // namespace rvt::agent
