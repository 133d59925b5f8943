/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Job key resolution (see job_key.h for the precedence and the encoding).
 */
#include "uct/ib/rvt/common/job_key.h"

#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/format.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <utility>

namespace rvt {

namespace {

constexpr size_t max_key_length = wire::job_key_size - 1;
constexpr size_t hash_digits    = 16;
/* Shortened keys: <kept prefix> ':' <hash>, exactly max_key_length. */
constexpr size_t kept_prefix = max_key_length - 1 - hash_digits;

/* Set and not empty (job_key.h: empty counts as unset). */
std::optional<std::string> lookup(const env_view &env, const char *name)
{
    std::optional<std::string> value = env(name);
    if (value && value->empty()) {
        return std::nullopt;
    }
    return value;
}

bool kept_as_is(char c, bool encode_dot)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           (c == '.' && !encode_dot);
}

/* Injective: "+xx" for every byte not kept, '+' itself included. */
std::string encode(std::string_view value, bool encode_dot)
{
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(value.size());
    for (char c : value) {
        if (kept_as_is(c, encode_dot)) {
            out += c;
        } else {
            auto byte = static_cast<unsigned char>(c);
            out += '+';
            out += hex[byte >> 4];
            out += hex[byte & 0xf];
        }
    }
    return out;
}

/* FNV-1a, 64 bits: fixed by its definition, so every build of client and
 * agent shortens a key the same way (std::hash promises no such thing). */
uint64_t fnv1a64(std::string_view s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (char c : s) {
        h ^= static_cast<unsigned char>(c);
        h *= 0x100000001b3ull;
    }
    return h;
}

std::string shorten(std::string key)
{
    if (key.size() <= max_key_length) {
        return key;
    }
    std::string hash = format("%016llx",
                              static_cast<unsigned long long>(fnv1a64(key)));
    key.resize(kept_prefix);
    return key + ":" + hash;
}

result<job_key_choice> derived(std::string key, std::string source)
{
    key             = shorten(std::move(key));
    std::string err = wire::job_key_error(key);
    if (!err.empty()) { /* a bug in encode/shorten, not bad input */
        return failure{"job key '" + key + "' derived from " + source + ": " +
                       err};
    }
    return job_key_choice{std::move(key), std::move(source)};
}

result<std::optional<job_key_choice>> explicit_key(const env_view &env)
{
    static constexpr const char *names[] = {"RVT_JOB_KEY", "UCX_RVT_JOB_KEY"};
    std::optional<job_key_choice> chosen;
    for (const char *name : names) {
        std::optional<std::string> value = lookup(env, name);
        if (!value) {
            continue;
        }
        std::string err = wire::job_key_error(*value);
        if (!err.empty()) {
            return failure{name + ("='" + *value + "': " + err)};
        }
        if (chosen && chosen->key != *value) {
            return failure{chosen->source + "='" + chosen->key + "' and " +
                           name + "='" + *value +
                           "' disagree: expected one job key, set one of "
                           "them or both to the same value"};
        }
        if (!chosen) {
            chosen = job_key_choice{std::move(*value), name};
        }
    }
    return chosen;
}

} // namespace

env_view process_env()
{
    return [](const char *name) -> std::optional<std::string> {
        const char *value = std::getenv(name);
        if (value == nullptr) {
            return std::nullopt;
        }
        return std::string(value);
    };
}

env_view env_from(std::map<std::string, std::string> vars)
{
    return [vars = std::move(vars)](
                   const char *name) -> std::optional<std::string> {
        auto it = vars.find(name);
        if (it == vars.end()) {
            return std::nullopt;
        }
        return it->second;
    };
}

result<job_key_choice> resolve_job_key(const env_view &env, uid_t uid)
{
    auto chosen = explicit_key(env);
    if (!chosen) {
        return failure{chosen.error()};
    }
    if (chosen.value()) {
        return *std::move(chosen).value();
    }

    /* Slurm's current name first, then the older one some launchers still
     * set alone; the source says which was read. The step is left out on
     * purpose (job_key.h): ranks of one mpirun run in different steps. */
    auto job_var = "SLURM_JOB_ID";
    auto job     = lookup(env, job_var);
    if (!job) {
        job_var = "SLURM_JOBID";
        job     = lookup(env, job_var);
    }
    if (job) {
        return derived("slurm." + encode(*job, true), job_var);
    }
    if (auto ns = lookup(env, "PMIX_NAMESPACE")) {
        return derived("pmix." + encode(*ns, false), "PMIX_NAMESPACE");
    }
    if (auto id = lookup(env, "OMPI_MCA_ess_base_jobid")) {
        return derived("ompi." + encode(*id, false), "OMPI_MCA_ess_base_jobid");
    }
    return derived("user." + std::to_string(uid), "default");
}

} // namespace rvt
