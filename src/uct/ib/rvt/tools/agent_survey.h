/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvt-status --all: every agent of the node, as an administrator finds
 * them, asked for its status and listed, answer or not; and the forms
 * rvt-status prints a list in (a line per agent, a JSON list, Prometheus'
 * text format).
 *
 *   find_agents (agent/attach/locate.h: the runtime directories of every
 *   uid, or the caller's own; no link followed, bounded)
 *     -> ask_agent each (client/status.h: only a process of the
 *        directory's uid is sent the request; `parallel` at once, each
 *        within `timeout`)
 *     -> surveyed_agent: what was found, what it answered, who and what
 *        it is (its job key, device and port: from its answer where that
 *        names the socket it was found at, else from the socket's name)
 *     -> survey_text / survey_json / survey_prometheus
 *
 * What an agent answers is its user's process's word: it is parsed as
 * JSON (not JSON: `unreadable`), shown with control characters replaced,
 * and its labels come from the socket's name unless its answer agrees
 * with that name.
 */
#ifndef RVT_TOOLS_AGENT_SURVEY_H
#define RVT_TOOLS_AGENT_SURVEY_H

#include "uct/ib/rvt/agent/attach/locate.h"
#include "uct/ib/rvt/client/status.h"
#include "uct/ib/rvt/common/prometheus.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace rvt::tools {

struct surveyed_agent {
    agent::found_agent found;
    client::agent_answer answer;
    nlohmann::ordered_json status; /* answered: its status, parsed */
    std::string user; /* the uid's name, or the number */
    std::string job_key;
    std::string device;
    int port = 0;
};

struct survey {
    std::vector<surveyed_agent> agents;
    std::vector<std::string> notes; /* what was passed by; bounds met */
};

struct survey_options {
    std::vector<std::string> bases = default_node_bases();
    std::optional<uid_t> only; /* a user sees their own */
    agent::agent_search_bounds bounds{};
    std::chrono::milliseconds timeout{2000}; /* each agent's answer */
    unsigned parallel = 16; /* agents asked at once */
};

/* Finds the node's agents and asks each. */
survey survey_node(const survey_options &o);

/* One agent at `socket` (rvt-status --prometheus without --all): asked
 * whoever listens; its uid is the one listening. */
surveyed_agent survey_one(const std::string &socket,
                          std::chrono::milliseconds timeout);

/* A line per agent under a header: UID USER PID JOB DEVICE:PORT CLIENTS
 * PEERS QPS STATE LOG, then what happened to one that did not answer. */
std::string survey_text(const survey &s);

/* A JSON list, an object per agent: uid, user, pid, job_key, device,
 * port, socket, log (null: none), state, why (null when it answered),
 * status (its whole status; null when it did not answer). */
nlohmann::ordered_json survey_json(const survey &s);

/* The agents' metrics (common/prometheus.h), labelled uid, job_key,
 * device and port. */
prometheus_page survey_prometheus(const survey &s);

/* `s` with each control character (and DEL) shown as '?'. */
std::string printable(std::string_view s);

} // namespace rvt::tools

#endif
