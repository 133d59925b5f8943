/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Who may become a peer: the credential on every handshake datagram
 * (common/conn_wire.h, `auth`). The UD QP that takes connection requests
 * can be reached by any host on the fabric, and a peer's RC QPs may read,
 * write and run atomics on every client's registered memory, so a
 * request is believed only when it proves that its sender is one of this
 * job's agents:
 *
 *   munge   munged, which every Slurm site runs, encodes a credential
 *           whose payload is the datagram's binding digest, readable by
 *           this uid only; the receiver's munged decodes it and says which
 *           uid and gid made it. Accepted when both are this agent's own
 *           and the payload is the digest of the datagram as it arrived,
 *           sent to this agent's GID. munged refuses a credential it has
 *           decoded before (replay) or whose time-to-live has passed.
 *   secret  every rank of the job is given one secret (RVT_JOB_SECRET, or
 *           a file): the credential is HMAC-SHA256(secret, digest), and
 *           the digest covers a random nonce and the sender's clock. The
 *           receiver recomputes it (constant-time compare), refuses one
 *           issued more than `ttl` away from its own clock, and one it has
 *           seen already (replay_window below). Replies are checked the
 *           same way, and the state machine takes only the reply to its
 *           own request's seq and instance. Clocks must agree within ttl,
 *           as MUNGE's do.
 *   none    no credential: anyone who knows the job key (not a secret:
 *           usually the Slurm job id) joins. Named loudly in the log and
 *           the status.
 *
 * Both ends must use the same kind: a datagram of another kind is refused
 * and both kinds are named. A datagram that fails its check is dropped
 * without an answer (an answer would teach a stranger something, and a
 * stranger could forge a refusal as easily), counted, and logged at the
 * 1st, 2nd, 4th, ... time with the reason.
 *
 * What no credential can do: RoCE carries no authentication, so a host
 * that forges its IP source address can still inject packets into a
 * connected RC QP, and an rkey is a capability. The credential keeps a
 * stranger from being given QPs at all.
 *
 * replay_window is a pure rule set (no clock reads, no I/O), one test per
 * rule:
 *   issued more than ttl before now        -> too_old
 *   issued more than ttl after now         -> from_the_future (clock skew)
 *   a MAC seen before, within ttl          -> replayed
 *   else                                   -> fresh, and remembered until
 *                                             issued + ttl
 *   more than `capacity` remembered        -> the oldest is forgotten, and
 *                                             nothing issued at or before
 *                                             it is fresh again (a floor),
 *                                             so memory stays bounded and a
 *                                             forgotten MAC cannot replay
 */
#ifndef RVT_AGENT_PEER_AUTH_H
#define RVT_AGENT_PEER_AUTH_H

#include "uct/ib/rvt/common/conn_wire.h"
#include "uct/ib/rvt/common/format.h"
#include "uct/ib/rvt/common/result.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace rvt::agent {

using gid_array = std::array<uint8_t, wire::conn::gid_size>;

/* What a credential vouches for: SHA-256 of `msg` with auth.length and
 * auth.credential zeroed, followed by the GID it is sent to. */
std::array<uint8_t, wire::conn::digest_size>
binding_digest(const wire::conn::message &msg, const gid_array &to);

/* --auth: which credential this agent uses and demands. */
enum class auth_choice : uint8_t {
    auto_,
    munge,
    secret,
    none
};
result<auth_choice> parse_auth_choice(std::string_view text);
std::string_view to_string(auth_choice c);

/* The shortest secret accepted, bytes. */
inline constexpr size_t min_secret_size = 16;
/* How long a credential is good for: MUNGE's default time-to-live. */
inline constexpr std::chrono::seconds default_auth_ttl{300};

class peer_auth {
public:
    virtual ~peer_auth() = default;

    virtual wire::conn::auth_kind kind() const = 0;
    /* For the log and the status, e.g. "munge (socket /run/munge/...)". */
    virtual std::string describe() const = 0;
    /* Fills msg.auth for the datagram sent to `to`; a failure (munged
     * gone) is for the log: the datagram is not sent, the handshake's
     * retry sends it again. */
    virtual result<done>
    seal(wire::conn::message &msg, const gid_array &to) = 0;
    /* Checks a parsed datagram that arrived at this agent (`self`, our
     * GID): empty when believed, else why not. */
    virtual result<done>
    check(const wire::conn::message &msg, const gid_array &self) = 0;
};

/* Checks the kind, then asks the implementation: the sentence for the
 * log when the sender used another kind than `auth`. */
result<done> check_datagram(peer_auth &auth, const wire::conn::message &msg,
                            const gid_array &self);

std::unique_ptr<peer_auth> no_auth();

using realtime_fn = std::function<std::chrono::microseconds()>;
/* CLOCK_REALTIME since the epoch. */
std::chrono::microseconds realtime_now();

/* `secret` must be at least min_secret_size bytes. */
result<std::unique_ptr<peer_auth>>
secret_auth(std::string secret, std::chrono::seconds ttl = default_auth_ttl,
            realtime_fn now = realtime_now, size_t replay_capacity = 65536);

/* `socket`: munged's socket, empty for MUNGE's default. Encodes and
 * decodes one credential first: a munged that does not answer is an
 * error here, at start, not at the first peer. */
result<std::unique_ptr<peer_auth>> munge_auth(std::string socket);

/* What rvtd was told (--auth, --munge-socket, --secret-file,
 * RVT_JOB_SECRET_FILE, RVT_JOB_SECRET). */
struct auth_settings {
    auth_choice choice = auth_choice::auto_;
    std::string munge_socket; /* empty: MUNGE's default */
    std::string secret_file; /* --secret-file; empty: secret_file_env */
    std::optional<std::string> secret_file_env; /* $RVT_JOB_SECRET_FILE */
    std::optional<std::string> secret_env; /* $RVT_JOB_SECRET */
};

/* The environment variables that carry the job's secret to every rank
 * (and from the module to the rvtd it starts): a file's path, or the
 * secret itself. Never an argument: every local user reads argv. */
inline constexpr const char *secret_file_env_name = "RVT_JOB_SECRET_FILE";
inline constexpr const char *secret_env_name      = "RVT_JOB_SECRET";

/* Fills s.secret_file_env and s.secret_env from the environment (each
 * left empty when its variable is unset). */
void take_secret_env(auth_settings &s);

/* munge when munged answers, else secret when one is given (--secret-file,
 * $RVT_JOB_SECRET_FILE, $RVT_JOB_SECRET, in that order). auto with
 * neither fails closed, saying how to get either; only --auth=none runs
 * unauthenticated. `log` hears why auto chose what it chose. */
result<std::unique_ptr<peer_auth>>
make_peer_auth(const auth_settings &s, const log_fn &log);

/* The secret in `path`: the file must belong to this uid and be readable
 * by nobody else (mode 0600 or 0400); one trailing newline is dropped. */
result<std::string> read_secret_file(const std::string &path);

class replay_window {
public:
    using mac = std::array<uint8_t, wire::conn::hmac_size>;
    enum class verdict : uint8_t {
        fresh,
        too_old,
        from_the_future,
        replayed
    };

    replay_window(std::chrono::microseconds ttl, size_t capacity);

    verdict admit(const mac &m, std::chrono::microseconds issued,
                  std::chrono::microseconds now);

    size_t remembered() const
    {
        return m_macs.size();
    }

private:
    void forget_expired(std::chrono::microseconds now);

    std::chrono::microseconds m_ttl;
    size_t m_capacity;
    std::optional<std::chrono::microseconds> m_floor;
    std::set<mac> m_macs;
    std::multimap<std::chrono::microseconds, mac> m_by_issue;
};
std::string_view to_string(replay_window::verdict v);

} // namespace rvt::agent

#endif
