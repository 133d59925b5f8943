/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Agents' metrics in Prometheus' text exposition format (version 0.0.4,
 * what node_exporter's textfile collector and a scrape read), for
 * rvt-status --prometheus.
 *
 * Nothing here names a metric: each agent's status JSON carries its own
 * description of them, "metrics" (status_fields.h, status_metrics: name,
 * type, help, where the value is), made from the one list of its fields.
 * This renders what the agents describe:
 *
 *   # HELP rvt_agent_up ...          one family first: 1 for an agent that
 *   # TYPE rvt_agent_up gauge        answered, 0 for one that did not
 *   rvt_agent_up{uid="1000",job_key="slurm.7",device="mlx5_0",port="1"} 1
 *   # HELP rvt_handshake_sent_total handshake: datagrams sent
 *   # TYPE rvt_handshake_sent_total counter
 *   rvt_handshake_sent_total{uid="1000",...} 12
 *
 * every family once, its HELP and TYPE first, then a sample per agent
 * that has it, in the agents' order. What an agent answered is input
 * from its user's process: a name that is not a metric name of rvt's
 * (rvt_ and [a-z0-9_]), a type other than counter or gauge, a place that
 * holds no number (or array: its length), or a family another agent
 * describes with another type is left out and said in `problems`, and
 * so is an agent whose labels an agent before it has (one user's agents
 * of one job, device and port in two runtime directories): a series is
 * one agent's. Label values and help are escaped as the format says.
 */
#ifndef RVT_COMMON_PROMETHEUS_H
#define RVT_COMMON_PROMETHEUS_H

#include <nlohmann/json.hpp>

#include <span>
#include <string>
#include <utility>
#include <vector>

namespace rvt {

/* One agent: its labels (in order), whether it answered, and its status
 * JSON when it did (its "metrics" describe the rest). */
struct agent_metrics {
    std::vector<std::pair<std::string, std::string>> labels;
    bool up = false;
    nlohmann::ordered_json status; /* null when it did not answer */
};

struct prometheus_page {
    std::string text;
    std::vector<std::string> problems; /* what was left out, and why */
};

/* The name of the family every agent has a sample in. */
inline constexpr const char *agent_up_metric = "rvt_agent_up";

prometheus_page prometheus_text(std::span<const agent_metrics> agents);

/* A label value or HELP text as the format writes it: backslash and
 * newline escaped, and a label value's double quote. */
std::string prometheus_escape(std::string_view s, bool label_value);

} // namespace rvt

#endif
