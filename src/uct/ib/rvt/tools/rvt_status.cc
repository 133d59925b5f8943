/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvt-status: what a running rvtd is doing (its clients, their memory
 * registrations, the registration mode, and what it cleaned up after
 * clients that died), as text, JSON or Prometheus metrics; or every
 * agent of the node, a line each (--all: tools/agent_survey.h).
 *
 *   rvt-status [--json | --prometheus] [--socket=PATH]
 *   rvt-status [--json | --prometheus] [--device=NAME] [--port=N]
 *              [--job-key=KEY]
 *   rvt-status --all [--json | --prometheus] [--runtime-base=DIR]...
 *
 * Without --socket the agent is found as rvtd finds its own place: the
 * job key from the option or the environment, the first device, port 1.
 * Exit status: 0 answered (--all: the node was looked over), 1 no answer
 * (no agent, refused), 2 bad option.
 * rvt-status --help and rvt-status(1) come from the option table below.
 */
#include "uct/ib/rvt/agent/attach/locate.h"
#include "uct/ib/rvt/agent/device/device.h"
#include "uct/ib/rvt/client/status.h"
#include "uct/ib/rvt/common/status_json.h"
#include "uct/ib/rvt/tools/agent_survey.h"
#include "uct/ib/rvt/tools/usage.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct options {
    bool json = false, prometheus = false, all = false;
    std::string socket, device, job_key;
    long port = 1;
    std::vector<std::string> bases; /* --runtime-base; empty: the defaults */
    long timeout_ms = -1; /* -1: 10 s for one agent, 2 s each for --all */
    long max_agents = rvt::agent::agent_search_bounds{}.agents;
};

/* "--NAME=S: expected a whole number from lo to hi", or empty */
std::string whole(std::string_view name, std::string_view v, long lo, long hi,
                  long &out)
{
    std::string s(v);
    char *end = nullptr;
    errno     = 0;
    out       = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno != 0 || out < lo || out > hi) {
        return "--" + std::string(name) + "=" + s +
               ": expected a whole number from " + std::to_string(lo) +
               " to " + std::to_string(hi);
    }
    return {};
}

/* parsing, --help and rvt-status(1) all come from this table
 * (tools/usage.h) */
std::vector<rvt::tools::option> option_table(options &o)
{
    auto text = [](const char *name, const char *value, const char *dflt,
                   const char *help, std::string &out) {
        return rvt::tools::option{name, value, dflt, help,
                                  [&out](std::string_view v) {
                                      out = v;
                                      return std::string();
                                  }};
    };
    return {
            {"json", "", "",
             "print the status as one JSON object (with --all: a list, an "
             "object per agent)",
             [&o](std::string_view) {
                 o.json = true;
                 return std::string();
             }},
            {"prometheus", "", "",
             "print the agent's counters and gauges in Prometheus' text "
             "format, labelled uid, job_key, device and port (with --all: "
             "every agent's)",
             [&o](std::string_view) {
                 o.prometheus = true;
                 return std::string();
             }},
            {"all", "", "",
             "every agent of the node, a line each: root sees every "
             "user's, a user their own; the options naming one agent are "
             "then not used",
             [&o](std::string_view) {
                 o.all = true;
                 return std::string();
             }},
            {"runtime-base", "DIR", "/run/rvt, /run/user and /tmp",
             "with --all, look in DIR (repeat it for more) for the users' "
             "runtime directories instead (DIR/UID, DIR/UID/rvt-UID, "
             "DIR/rvt-UID); $RVT_RUNTIME_DIR and $XDG_RUNTIME_DIR are added "
             "to the defaults",
             [&o](std::string_view v) {
                 if (v.empty() || v[0] != '/') {
                     return "--runtime-base=" + std::string(v) +
                            ": expected an absolute path";
                 }
                 o.bases.emplace_back(v);
                 return std::string();
             }},
            {"timeout", "MS", "10000; with --all 2000 for each agent",
             "how long to wait for an agent's answer, in milliseconds",
             [&o](std::string_view v) {
                 return whole("timeout", v, 1, 600000, o.timeout_ms);
             }},
            {"max-agents", "N", std::to_string(o.max_agents),
             "with --all, ask at most N agents (64 from one directory)",
             [&o](std::string_view v) {
                 return whole("max-agents", v, 1, 65536, o.max_agents);
             }},
            text("socket", "PATH", "",
                 "ask the agent listening on this attach socket; the options "
                 "below are then not used",
                 o.socket),
            text("device", "NAME", "the first device",
                 "the device the agent serves", o.device),
            {"port", "N", "1", "the port of that device (1-255)",
             [&o](std::string_view v) {
                 std::string s(v);
                 char *end = nullptr;
                 o.port    = std::strtol(s.c_str(), &end, 10);
                 if (s.empty() || *end != '\0' || o.port < 1 || o.port > 255) {
                     return "--port=" + s +
                            ": expected a whole number from 1 to 255";
                 }
                 return std::string();
             }},
            text("job-key", "KEY", "from the environment",
                 "the job the agent serves; else RVT_JOB_KEY, Slurm, PMIx, "
                 "Open MPI, or user.<uid>, as rvtd finds it",
                 o.job_key),
    };
}

const rvt::tools::program_doc doc = {
        .name     = "rvt-status",
        .section  = 1,
        .summary  = "show what a running rvt agent is doing",
        .synopsis = "[--json | --prometheus] [--socket=PATH | --device=NAME "
                    "--port=N --job-key=KEY] | --all [--json | --prometheus] "
                    "[--runtime-base=DIR]",
        .description =
                "Asks a running rvtd(8) what it is doing: the job and device "
                "it serves, its attached clients and their memory "
                "registrations, the registration mode, its peers and shared "
                "QPs, and what it cleaned up after clients that died; as "
                "text, or with --json as one JSON object.\n\n"
                "Without --socket the agent is found as rvtd finds its own "
                "place: the job key from --job-key or the environment, the "
                "first device, port 1.\n\n"
                "With --prometheus the agent's counters and gauges are "
                "printed in Prometheus' text exposition format, as the agent "
                "describes them, with rvt_agent_up (1 answered, 0 not): for "
                "node_exporter's textfile collector, written by a timer.\n\n"
                "With --all every agent of the node is found where its user's "
                "processes find it (the runtime directories under /run/rvt, "
                "/run/user and /tmp, or --runtime-base), without following a "
                "symbolic link, asked (only when the process listening is of "
                "that directory's user), and listed a line each: uid, user, "
                "pid, job key, device and port, clients, peers, RC QPs, state "
                "(serving, refused, silent, gone, busy, foreign, unreadable) "
                "and the agent's log file. An agent that does not answer is "
                "listed with what happened. Root sees every user's agents (an "
                "agent answers its own user and root); another user sees "
                "their own.",
        .exit_status = "0 when the agent answered (--all: when the node was "
                       "looked over, whatever the agents answered); 1 when "
                       "none did (no agent, refused); 2 on a bad option.",
        .see_also    = "rvtd(8)",
};

/* The caller's own runtime bases from the environment (runtime_dir.h,
 * rules 1 and 3), after the defaults. */
std::vector<std::string> bases_of(const options &opt)
{
    if (!opt.bases.empty()) {
        return opt.bases;
    }
    std::vector<std::string> bases = rvt::default_node_bases();
    for (const char *var : {rvt::runtime_dir_env_name, "XDG_RUNTIME_DIR"}) {
        const char *v = std::getenv(var);
        if (v != nullptr && v[0] == '/') {
            bases.emplace_back(v);
        }
    }
    return bases;
}

int print_survey(const options &opt, const rvt::tools::survey &s)
{
    for (const std::string &note : s.notes) {
        std::fprintf(stderr, "rvt-status: %s\n",
                     rvt::tools::printable(note).c_str());
    }
    if (opt.prometheus) {
        const rvt::prometheus_page page = rvt::tools::survey_prometheus(s);
        for (const std::string &p : page.problems) {
            std::fprintf(stderr, "rvt-status: %s\n",
                         rvt::tools::printable(p).c_str());
        }
        std::fputs(page.text.c_str(), stdout);
    } else if (opt.json) {
        std::fputs((rvt::status_json_text(rvt::tools::survey_json(s)) + "\n")
                           .c_str(),
                   stdout);
    } else {
        std::fputs(rvt::tools::survey_text(s).c_str(), stdout);
    }
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    options opt;
    const auto table = option_table(opt);
    if (auto code = rvt::tools::parse_or_exit(argc, argv, doc, table)) {
        return *code;
    }
    if (opt.json && opt.prometheus) {
        std::fprintf(stderr, "rvt-status: --json and --prometheus: expected "
                             "one of them (see rvt-status --help)\n");
        return 2;
    }
    if (opt.all) {
        rvt::tools::survey_options so;
        so.bases = bases_of(opt);
        if (geteuid() != 0) {
            so.only = getuid(); /* a user sees their own */
        }
        so.bounds.agents = static_cast<size_t>(opt.max_agents);
        so.timeout = std::chrono::milliseconds(
                opt.timeout_ms > 0 ? opt.timeout_ms : 2000);
        return print_survey(opt, rvt::tools::survey_node(so));
    }
    const std::chrono::milliseconds timeout(
            opt.timeout_ms > 0 ? opt.timeout_ms : 10000);
    auto &socket = opt.socket;
    if (socket.empty()) {
        auto loc = rvt::agent::locate(rvt::agent::named_or_first_device(
                                              opt.device),
                                      static_cast<int>(opt.port), opt.job_key);
        if (!loc) {
            std::fprintf(stderr, "rvt-status: %s\n", loc.error().c_str());
            return 1;
        }
        socket = loc.value().paths.socket;
    }
    if (opt.prometheus) {
        rvt::tools::survey one;
        one.agents.push_back(rvt::tools::survey_one(socket, timeout));
        const auto &a = one.agents.back();
        if (a.answer.kind != rvt::client::answer_kind::answered) {
            std::fprintf(stderr, "rvt-status: status of agent at %s: %s\n",
                         socket.c_str(),
                         rvt::tools::printable(a.answer.why).c_str());
        }
        print_survey(opt, one);
        return a.answer.kind == rvt::client::answer_kind::answered ? 0 : 1;
    }
    auto status = rvt::client::query_status(socket, !opt.json, timeout);
    if (!status) {
        std::fprintf(stderr, "rvt-status: %s\n", status.error().c_str());
        return 1;
    }
    std::fputs(status.value().c_str(), stdout);
    return 0;
}
