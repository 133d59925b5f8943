/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvt-status --all (agent_survey.h).
 */
#include "uct/ib/rvt/tools/agent_survey.h"

#include "uct/ib/rvt/common/status_json.h"

#include <pwd.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace rvt::tools {

namespace {

using json = nlohmann::ordered_json;

std::string user_name(uid_t uid)
{
    passwd pw{};
    passwd *found = nullptr;
    std::vector<char> buf(16384);
    if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 &&
        found != nullptr && found->pw_name != nullptr) {
        return printable(found->pw_name);
    }
    return std::to_string(uid);
}

/* What the answer says, and who and what the agent is. */
void resolve(surveyed_agent &a)
{
    a.user    = user_name(a.found.uid);
    a.job_key = a.found.name.job_key;
    a.device  = a.found.name.device;
    a.port    = a.found.name.port;
    if (a.answer.kind != client::answer_kind::answered) {
        return;
    }
    a.status = json::parse(a.answer.text, nullptr, false);
    if (!a.status.is_object()) {
        a.status      = nullptr;
        a.answer.kind = client::answer_kind::unreadable;
        a.answer.why  = "its answer is not a JSON object";
        a.answer.text.clear();
        return;
    }
    /* its own word for what it is, where that names the socket it was
     * found at (a name can read more than one way) */
    const json &s = a.status;
    if (s.contains("device") && s["device"].is_string() &&
        s.contains("port") && s["port"].is_number_integer() &&
        s.contains("job_key") && s["job_key"].is_string()) {
        const std::string device = s["device"].get<std::string>();
        const int port           = s["port"].get<int>();
        const std::string key    = s["job_key"].get<std::string>();
        auto paths = make_agent_paths(a.found.dir, device, port, key);
        if (paths && paths.value().socket == a.found.socket) {
            a.device  = device;
            a.port    = port;
            a.job_key = key;
        }
    }
}

std::string dash_or(const std::string &s)
{
    return s.empty() ? "-" : printable(s);
}

/* A number at key in the status, or an array's length; "-" if none. */
std::string count_at(const json &status, const json::json_pointer &at)
{
    if (!status.is_object() || !status.contains(at)) {
        return "-";
    }
    const json &v = status.at(at);
    if (v.is_array()) {
        return std::to_string(v.size());
    }
    if (v.is_number_unsigned()) {
        return std::to_string(v.get<uint64_t>());
    }
    return "-";
}

} // namespace

std::string printable(std::string_view s)
{
    std::string out(s);
    for (char &c : out) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) {
            c = '?';
        }
    }
    return out;
}

survey survey_node(const survey_options &o)
{
    survey out;
    agent::agent_search found = agent::find_agents(o.bases, o.only, o.bounds);
    out.notes                 = std::move(found.notes);
    out.agents.resize(found.agents.size());
    for (size_t i = 0; i < found.agents.size(); ++i) {
        out.agents[i].found = std::move(found.agents[i]);
    }
    /* each agent asked by one of `parallel` workers: a slow or hostile
     * one holds one worker for its timeout, never the rest */
    std::atomic<size_t> next{0};
    const auto work = [&] {
        for (size_t i; (i = next++) < out.agents.size();) {
            surveyed_agent &a = out.agents[i];
            a.answer = client::ask_agent(a.found.socket, a.found.uid, false,
                                         o.timeout);
            resolve(a);
        }
    };
    std::vector<std::thread> workers;
    const size_t n = std::min<size_t>(std::max(1u, o.parallel),
                                      out.agents.size());
    for (size_t i = 0; i < n; ++i) {
        workers.emplace_back(work);
    }
    for (auto &t : workers) {
        t.join();
    }
    return out;
}

surveyed_agent survey_one(const std::string &socket,
                          std::chrono::milliseconds timeout)
{
    surveyed_agent a;
    const size_t slash = socket.rfind('/');
    a.found.dir    = slash == std::string::npos ? "." : socket.substr(0, slash);
    a.found.socket = socket;
    if (auto name = parse_socket_name(socket.substr(slash + 1))) {
        a.found.name = *name;
    }
    struct stat st;
    a.found.uid = ::lstat(socket.c_str(), &st) == 0 ? st.st_uid : getuid();
    if (auto paths = make_agent_paths(a.found.dir, a.found.name.device,
                                      a.found.name.port,
                                      a.found.name.job_key);
        paths && ::lstat(paths.value().log.c_str(), &st) == 0 &&
        S_ISREG(st.st_mode)) {
        a.found.log = paths.value().log;
    }
    a.answer = client::ask_agent(socket, std::nullopt, false, timeout);
    if (a.answer.uid) {
        a.found.uid = *a.answer.uid; /* who listens */
    }
    resolve(a);
    return a;
}

std::string survey_text(const survey &s)
{
    std::vector<std::vector<std::string>> rows = {
            {"UID", "USER", "PID", "JOB", "DEVICE:PORT", "CLIENTS", "PEERS",
             "QPS", "STATE", "LOG"}};
    std::vector<std::string> why;
    for (const surveyed_agent &a : s.agents) {
        const bool up = a.answer.kind == client::answer_kind::answered;
        rows.push_back(
                {std::to_string(a.found.uid), a.user,
                 a.answer.pid ? std::to_string(*a.answer.pid) : "-",
                 dash_or(a.job_key),
                 dash_or(a.device) + ":" +
                         (a.port > 0 ? std::to_string(a.port) : "-"),
                 up ? count_at(a.status, json::json_pointer("/clients")) : "-",
                 up ? count_at(a.status,
                               json::json_pointer("/data_path/peers")) :
                      "-",
                 up ? count_at(a.status,
                               json::json_pointer("/data_path/rc_qps")) :
                      "-",
                 std::string(client::to_string(a.answer.kind)),
                 a.found.log.empty() ? "-" : a.found.log});
        why.push_back(up ? "" : printable(a.answer.why));
    }
    std::vector<size_t> width(rows[0].size(), 0);
    for (const auto &r : rows) {
        for (size_t i = 0; i < r.size(); ++i) {
            width[i] = std::max(width[i], r[i].size());
        }
    }
    std::string out;
    for (size_t n = 0; n < rows.size(); ++n) {
        std::string line;
        for (size_t i = 0; i < rows[n].size(); ++i) {
            line += rows[n][i];
            if (i + 1 < rows[n].size()) {
                line += std::string(width[i] - rows[n][i].size() + 2, ' ');
            }
        }
        if (n > 0 && !why[n - 1].empty()) {
            line += "  (" + why[n - 1] + ")";
        }
        while (!line.empty() && line.back() == ' ') {
            line.pop_back();
        }
        out += line + "\n";
    }
    return out;
}

json survey_json(const survey &s)
{
    json out = json::array();
    for (const surveyed_agent &a : s.agents) {
        const bool up = a.answer.kind == client::answer_kind::answered;
        out.push_back({{"uid", a.found.uid},
                       {"user", a.user},
                       {"pid", a.answer.pid ? json(*a.answer.pid) : json()},
                       {"job_key", a.job_key},
                       {"device", a.device},
                       {"port", a.port},
                       {"socket", a.found.socket},
                       {"log", a.found.log.empty() ? json() :
                                                     json(a.found.log)},
                       {"state", std::string(client::to_string(a.answer.kind))},
                       {"why", up ? json() : json(a.answer.why)},
                       {"status", up ? a.status : json()}});
    }
    return out;
}

prometheus_page survey_prometheus(const survey &s)
{
    std::vector<agent_metrics> agents;
    for (const surveyed_agent &a : s.agents) {
        const bool up = a.answer.kind == client::answer_kind::answered;
        agents.push_back({{{"uid", std::to_string(a.found.uid)},
                           {"job_key", a.job_key},
                           {"device", a.device},
                           {"port", a.port > 0 ? std::to_string(a.port) : ""}},
                          up,
                          up ? a.status : json()});
    }
    return prometheus_text(agents);
}

} // namespace rvt::tools
