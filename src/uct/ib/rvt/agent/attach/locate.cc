/* SPDX-License-Identifier: BSD-3-Clause */
#include "uct/ib/rvt/agent/attach/locate.h"

#include "uct/ib/rvt/common/job_key.h"
#include "uct/ib/rvt/common/attach_wire.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rvt::agent {

result<agent_location>
locate(const std::string &device, int port, const std::string &job_key)
{
    const uid_t uid = getuid();
    auto env        = process_env();
    agent_location loc{job_key, "--job-key", device, port, {}};
    if (loc.job_key.empty()) {
        auto choice = resolve_job_key(env, uid);
        if (!choice) {
            return failure{choice.error()};
        }
        loc.job_key        = choice.value().key;
        loc.job_key_source = choice.value().source;
    } else if (auto err = wire::job_key_error(job_key); !err.empty()) {
        return failure{"--job-key: " + err};
    }
    if (loc.device.empty()) {
        return failure{"no RDMA device found (and none named with "
                       "--device)"};
    }
    auto dir = user_runtime_dir(env, uid);
    if (!dir) {
        return failure{dir.error()};
    }
    auto paths = make_agent_paths(dir.value(), loc.device, port, loc.job_key);
    if (!paths) {
        return failure{paths.error()};
    }
    loc.paths = paths.value();
    return loc;
}

agent_search find_agents(const std::vector<std::string> &bases,
                         std::optional<uid_t> only,
                         const agent_search_bounds &bounds)
{
    agent_search out;
    node_runtime_dirs dirs = find_runtime_dirs(bases, only,
                                               bounds.entries_per_dir);
    out.notes = std::move(dirs.notes);
    for (const user_runtime_dir_entry &d : dirs.dirs) {
        if (out.agents.size() >= bounds.agents) {
            out.notes.push_back("stopped at " +
                                std::to_string(bounds.agents) +
                                " agents: " + d.dir + " and after not read");
            break;
        }
        DIR *dp = ::opendir(d.dir.c_str());
        if (dp == nullptr) {
            out.notes.push_back(d.dir + ": cannot read it: " +
                                std::strerror(errno));
            continue;
        }
        std::vector<std::pair<std::string, agent_name>> names;
        size_t read = 0;
        while (const dirent *e = ::readdir(dp)) {
            if (++read > bounds.entries_per_dir) {
                out.notes.push_back(d.dir + ": read only its first " +
                                    std::to_string(bounds.entries_per_dir) +
                                    " entries");
                break;
            }
            if (auto name = parse_socket_name(e->d_name)) {
                names.emplace_back(e->d_name, std::move(*name));
            }
        }
        ::closedir(dp);
        std::sort(names.begin(), names.end(),
                  [](const auto &a, const auto &b) { return a.first < b.first; });
        size_t taken = 0;
        for (auto &[file, name] : names) {
            const std::string path = d.dir + "/" + file;
            struct stat st;
            if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) ||
                st.st_uid != d.uid) {
                out.notes.push_back(path + ": not a socket of uid " +
                                    std::to_string(d.uid) + ": passed by");
                continue;
            }
            if (taken == bounds.agents_per_dir ||
                out.agents.size() == bounds.agents) {
                out.notes.push_back(
                        d.dir + ": took its first " + std::to_string(taken) +
                        " sockets (at most " +
                        std::to_string(bounds.agents_per_dir) +
                        " a directory, " + std::to_string(bounds.agents) +
                        " in all)");
                break;
            }
            ++taken;
            auto paths = make_agent_paths(d.dir, name.device, name.port,
                                          name.job_key);
            std::string log;
            if (paths && ::lstat(paths.value().log.c_str(), &st) == 0 &&
                S_ISREG(st.st_mode) && st.st_uid == d.uid) {
                log = paths.value().log;
            }
            out.agents.push_back({d.uid, d.dir, path, std::move(name), log});
        }
    }
    return out;
}

} // namespace rvt::agent
