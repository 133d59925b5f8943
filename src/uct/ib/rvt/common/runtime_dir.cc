/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's per-user directory and the names in it (runtime_dir.h).
 */
#include "uct/ib/rvt/common/runtime_dir.h"

#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/format.h"
#include "uct/ib/rvt/common/unique_fd.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <vector>

namespace rvt {

static_assert(max_socket_path == sizeof(sockaddr_un{}.sun_path) - 1);

namespace {

std::string errno_text()
{
    return std::strerror(errno);
}

/* Refuses what runtime_dir.h says must not be trusted. */
std::string dir_error(const std::string &dir, uid_t uid)
{
    struct stat st;
    if (::lstat(dir.c_str(), &st) != 0) {
        return "runtime directory " + dir + ": lstat failed: " + errno_text();
    }
    if (S_ISLNK(st.st_mode)) {
        return "runtime directory " + dir +
               " is a symbolic link: expected a real directory (remove it "
               "if it is not yours)";
    }
    if (!S_ISDIR(st.st_mode)) {
        return "runtime directory " + dir + " is not a directory (mode " +
               format("0%o", unsigned(st.st_mode)) + ")";
    }
    if (st.st_uid != uid) {
        return "runtime directory " + dir + " is owned by uid " +
               std::to_string(st.st_uid) + ": expected uid " +
               std::to_string(uid) + " (remove it if it is not yours)";
    }
    if ((st.st_mode & 07777) != 0700) {
        return "runtime directory " + dir + " has mode " +
               format("0%03o", unsigned(st.st_mode & 07777)) +
               ": expected 0700";
    }
    return {};
}

/* A directory we just made: make its mode 0700 whatever the umask, through
 * an fd that cannot have followed a link. */
std::string fix_new_dir_mode(const std::string &dir)
{
    unique_fd fd(::open(dir.c_str(),
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) {
        return "runtime directory " + dir + ": open failed: " + errno_text();
    }
    if (::fchmod(fd.get(), 0700) != 0) {
        return "runtime directory " + dir +
               ": chmod 0700 failed: " + errno_text();
    }
    return {};
}

std::string device_error(std::string_view device)
{
    if (device.empty() || device.size() > max_device_name) {
        return format("device name of %zu characters: expected 1 to %zu",
                      device.size(), max_device_name);
    }
    for (char c : device) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
        if (!ok) {
            return "device name '" + std::string(device) +
                   format("' has character 0x%02x: expected only letters, "
                          "digits and _ . -",
                          static_cast<unsigned char>(c));
        }
    }
    return {};
}

/* Whether a user other than uid may make entries in base (group or
 * other write: /tmp), where a name can be taken before we make it. */
bool others_may_write(const std::string &base, uid_t uid)
{
    struct stat st;
    return ::stat(base.c_str(), &st) == 0 &&
           ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 || st.st_uid != uid);
}

/* "rvt-<uid>", or "rvt-<uid>." and 16 hex digits. */
bool is_candidate(std::string_view name, const std::string &plain)
{
    if (name == plain) {
        return true;
    }
    if (name.size() != plain.size() + 17 || !name.starts_with(plain) ||
        name[plain.size()] != '.') {
        return false;
    }
    return std::all_of(name.begin() + plain.size() + 1, name.end(),
                       [](char c) {
                           return (c >= '0' && c <= '9') ||
                                  (c >= 'a' && c <= 'f');
                       });
}

/* The first candidate in base, in name order, that is a directory of
 * uid's (dir_error finds nothing); empty if none. */
std::string first_valid(const std::string &base, uid_t uid)
{
    const std::string plain = "rvt-" + std::to_string(uid);
    std::vector<std::string> names;
    if (DIR *d = ::opendir(base.c_str())) {
        while (const dirent *e = ::readdir(d)) {
            if (is_candidate(e->d_name, plain)) {
                names.emplace_back(e->d_name);
            }
        }
        ::closedir(d);
    }
    std::sort(names.begin(), names.end());
    for (const auto &n : names) {
        const std::string dir = base + "/" + n;
        if (dir_error(dir, uid).empty()) {
            return dir;
        }
    }
    return {};
}

/* Rule 4 of runtime_dir.h: a base where others may make names. */
result<std::string> claim_in_shared_base(const std::string &base, uid_t uid)
{
    std::string found = first_valid(base, uid);
    if (!found.empty()) {
        return found;
    }
    std::string made = base + "/rvt-" + std::to_string(uid);
    if (::mkdir(made.c_str(), 0700) != 0) {
        if (errno != EEXIST) {
            return failure{"runtime directory " + made +
                           ": mkdir failed: " + errno_text()};
        }
        /* taken by someone else (it was not valid above) */
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::system_clock::now().time_since_epoch());
        made += format(".%016llx", static_cast<unsigned long long>(ns.count()));
        if (::mkdir(made.c_str(), 0700) != 0) {
            return failure{"runtime directory " + made +
                           ": mkdir failed: " + errno_text()};
        }
    }
    std::string err = fix_new_dir_mode(made);
    if (!err.empty()) {
        return failure{err};
    }
    found = first_valid(base, uid);
    if (found.empty()) {
        return failure{"runtime directory " + made +
                       ": made, then not found valid: " + dir_error(made, uid)};
    }
    if (found != made) {
        ::rmdir(made.c_str()); /* another process of ours made one first */
    }
    return found;
}

/* Rule 2 of runtime_dir.h: <system>/<uid> when root made it; nothing
 * (an empty string) when the rule does not apply. */
result<std::string> system_dir(const std::string &system, uid_t uid)
{
    struct stat st;
    if (system.empty() || ::lstat(system.c_str(), &st) != 0 ||
        !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
        (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        return std::string();
    }
    const std::string dir = system + "/" + std::to_string(uid);
    if (::lstat(dir.c_str(), &st) != 0 && errno == ENOENT) {
        return std::string();
    }
    std::string err = dir_error(dir, uid);
    if (!err.empty()) {
        return failure{err + " (" + system +
                       " is root's: its Slurm prolog or the package makes "
                       "these)"};
    }
    return dir;
}

} // namespace

std::string runtime_base(const env_view &env, uid_t uid)
{
    std::optional<std::string> xdg = env("XDG_RUNTIME_DIR");
    struct stat st;
    if (xdg && !xdg->empty() && (*xdg)[0] == '/' &&
        ::stat(xdg->c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
        st.st_uid == uid) {
        return *xdg;
    }
    return "/tmp";
}

result<std::string> ensure_runtime_dir(const std::string &base, uid_t uid)
{
    if (base.empty()) {
        return failure{"runtime directory base is empty: expected a path"};
    }
    std::string dir = base + (base.back() == '/' ? "" : "/") + "rvt-" +
                      std::to_string(uid);
    if (::mkdir(dir.c_str(), 0700) == 0) {
        std::string err = fix_new_dir_mode(dir);
        if (!err.empty()) {
            return failure{err};
        }
    } else if (errno != EEXIST) {
        return failure{"runtime directory " + dir +
                       ": mkdir failed: " + errno_text()};
    }
    std::string err = dir_error(dir, uid);
    if (!err.empty()) {
        return failure{err};
    }
    return dir;
}

result<std::string> user_runtime_dir(const env_view &env, uid_t uid,
                                     const runtime_bases &bases)
{
    if (std::optional<std::string> own = env(runtime_dir_env_name)) {
        struct stat st;
        if (own->empty() || (*own)[0] != '/' ||
            ::stat(own->c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
            st.st_uid != uid) {
            return failure{std::string(runtime_dir_env_name) + "=" + *own +
                           ": expected the absolute path of a directory "
                           "owned by uid " +
                           std::to_string(uid)};
        }
        return ensure_runtime_dir(*own, uid);
    }
    auto sys = system_dir(bases.system, uid);
    if (!sys || !sys.value().empty()) {
        return sys;
    }
    std::string base = runtime_base(env, uid);
    if (base == "/tmp") {
        base = bases.shared;
    }
    auto dir = others_may_write(base, uid) ? claim_in_shared_base(base, uid) :
                                             ensure_runtime_dir(base, uid);
    if (!dir) {
        return failure{dir.error() + "; or set " + runtime_dir_env_name +
                       " (or XDG_RUNTIME_DIR) to a directory of your own, "
                       "the same for every process of the job"};
    }
    return dir;
}

result<agent_paths> make_agent_paths(const std::string &dir,
                                     std::string_view device, int port,
                                     std::string_view job_key)
{
    if (dir.empty()) {
        return failure{"runtime directory is empty: expected a path"};
    }
    std::string err = device_error(device);
    if (!err.empty()) {
        return failure{err};
    }
    if (port < 1 || port > 255) {
        return failure{format("port %d: expected 1 to 255", port)};
    }
    err = wire::job_key_error(job_key);
    if (!err.empty()) {
        return failure{err};
    }
    std::string stem = dir + "/" + std::string(device) + "-" +
                       std::to_string(port) + "." + std::string(job_key);
    agent_paths paths{stem + ".sock", stem + ".lock", stem + ".log"};
    if (paths.socket.size() > max_socket_path) {
        return failure{"socket path " + paths.socket + " is " +
                       std::to_string(paths.socket.size()) +
                       " characters: a Unix socket path holds at most " +
                       std::to_string(max_socket_path) +
                       " (use a shorter runtime directory or job key)"};
    }
    return paths;
}

std::optional<agent_name> parse_socket_name(std::string_view name)
{
    constexpr std::string_view ext = ".sock";
    if (!name.ends_with(ext)) {
        return std::nullopt;
    }
    const std::string_view stem = name.substr(0, name.size() - ext.size());
    /* <device>-<port>.<job key>: the first '-' followed by a port and a
     * '.' that leaves a valid device and job key */
    for (size_t dash = stem.find('-'); dash != std::string_view::npos;
         dash = stem.find('-', dash + 1)) {
        const size_t dot = stem.find('.', dash + 1);
        if (dot == std::string_view::npos) {
            break;
        }
        const std::string_view device = stem.substr(0, dash);
        const std::string_view port   = stem.substr(dash + 1, dot - dash - 1);
        const std::string_view key    = stem.substr(dot + 1);
        int p                         = 0;
        const auto [end, ec] =
                std::from_chars(port.data(), port.data() + port.size(), p);
        if (ec != std::errc() || end != port.data() + port.size() ||
            port.empty() || port[0] == '0' || p < 1 || p > 255 ||
            !device_error(device).empty() || key.empty() ||
            !wire::job_key_error(key).empty()) {
            continue;
        }
        return agent_name{std::string(device), p, std::string(key)};
    }
    return std::nullopt;
}

std::vector<std::string> default_node_bases()
{
    return {"/run/rvt", "/run/user", "/tmp"};
}

namespace {

/* A uid as a directory name says it: digits, no leading zero. */
std::optional<uid_t> uid_named(std::string_view digits)
{
    unsigned long long v = 0;
    const auto [end, ec] =
            std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (digits.empty() || ec != std::errc() ||
        end != digits.data() + digits.size() ||
        (digits.size() > 1 && digits[0] == '0') ||
        v > static_cast<unsigned long long>(static_cast<uid_t>(-1) - 1)) {
        return std::nullopt;
    }
    return static_cast<uid_t>(v);
}

/* rule 2's base: root's, a real directory no one else may write to */
bool roots_own(const std::string &base)
{
    struct stat st;
    return ::lstat(base.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
           st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

/* the uid of "rvt-<uid>" or "rvt-<uid>.<16 hex>" */
std::optional<uid_t> candidate_uid(std::string_view name)
{
    if (!name.starts_with("rvt-")) {
        return std::nullopt;
    }
    std::string_view rest = name.substr(4);
    const std::string_view digits = rest.substr(0, rest.find('.'));
    auto uid = uid_named(digits);
    if (uid && is_candidate(name, "rvt-" + std::to_string(*uid))) {
        return uid;
    }
    return std::nullopt;
}

} // namespace

node_runtime_dirs find_runtime_dirs(const std::vector<std::string> &bases,
                                    std::optional<uid_t> only,
                                    size_t max_entries)
{
    node_runtime_dirs out;
    std::set<std::pair<dev_t, ino_t>> seen;
    const auto add = [&](uid_t uid, const std::string &dir) {
        struct stat st;
        if ((only && *only != uid) || !dir_error(dir, uid).empty() ||
            ::lstat(dir.c_str(), &st) != 0 ||
            !seen.insert({st.st_dev, st.st_ino}).second) {
            return;
        }
        out.dirs.push_back({uid, dir});
    };
    for (const std::string &base : bases) {
        struct stat st;
        if (base.empty() || base[0] != '/' || ::lstat(base.c_str(), &st) != 0 ||
            !S_ISDIR(st.st_mode)) {
            continue; /* none here (or a link: not followed) */
        }
        const bool system = roots_own(base);
        /* the shared shape's candidates of each uid, to take the first
         * valid in name order */
        std::map<uid_t, std::vector<std::string>> candidates;
        std::vector<std::pair<uid_t, std::string>> numbered;
        DIR *d = ::opendir(base.c_str());
        if (d == nullptr) {
            out.notes.push_back(base + ": cannot read it: " + errno_text());
            continue;
        }
        size_t read = 0;
        while (const dirent *e = ::readdir(d)) {
            if (++read > max_entries) {
                out.notes.push_back(base + ": read only its first " +
                                    std::to_string(max_entries) +
                                    " entries");
                break;
            }
            const std::string_view name = e->d_name;
            if (auto uid = uid_named(name)) {
                numbered.emplace_back(*uid, std::string(name));
            } else if (auto cuid = candidate_uid(name)) {
                candidates[*cuid].emplace_back(name);
            }
        }
        ::closedir(d);
        for (const auto &[uid, name] : numbered) {
            const std::string dir = base + "/" + name;
            if (system) {
                add(uid, dir);
            }
            /* rule 3: /run/user/<uid> a real directory of uid's */
            if (::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
                st.st_uid == uid) {
                add(uid, dir + "/rvt-" + std::to_string(uid));
            }
        }
        for (auto &[uid, names] : candidates) {
            std::sort(names.begin(), names.end());
            for (const std::string &n : names) {
                if (dir_error(base + "/" + n, uid).empty()) {
                    add(uid, base + "/" + n);
                    break;
                }
            }
        }
    }
    std::sort(out.dirs.begin(), out.dirs.end(),
              [](const auto &a, const auto &b) {
                  return std::tie(a.uid, a.dir) < std::tie(b.uid, b.dir);
              });
    return out;
}

} // namespace rvt
