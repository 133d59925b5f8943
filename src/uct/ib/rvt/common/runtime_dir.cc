/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's per-user directory and the names in it (runtime_dir.h).
 */
#include "uct/ib/rvt/common/runtime_dir.h"

#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/format.h"
#include "uct/ib/rvt/common/unique_fd.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

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

result<std::string> user_runtime_dir(const env_view &env, uid_t uid)
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
    auto dir = ensure_runtime_dir(runtime_base(env, uid), uid);
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

} // namespace rvt
