/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Agents' metrics in Prometheus' text format (prometheus.h).
 */
#include "uct/ib/rvt/common/prometheus.h"

#include "uct/ib/rvt/common/format.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace rvt {

namespace {

/* rvt_ and [a-z0-9_]: what status_metrics names (status_fields.h) */
bool rvt_metric_name(const std::string &name)
{
    return name.size() > 4 && name.starts_with("rvt_") &&
           std::all_of(name.begin(), name.end(), [](char c) {
               return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '_';
           });
}

/* A sample's value as the format writes it; empty when `v` is none. */
std::string sample_value(const nlohmann::ordered_json &v)
{
    if (v.is_number_unsigned()) {
        return std::to_string(v.get<uint64_t>());
    }
    if (v.is_number_integer()) {
        return std::to_string(v.get<int64_t>());
    }
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::isnan(d)) {
            return "NaN";
        }
        if (std::isinf(d)) {
            return d > 0 ? "+Inf" : "-Inf";
        }
        return format("%.17g", d);
    }
    if (v.is_array()) {
        return std::to_string(v.size());
    }
    return {};
}

std::string label_text(const agent_metrics &a)
{
    std::string out;
    for (const auto &[name, value] : a.labels) {
        out += (out.empty() ? "{" : ",") + name + "=\"" +
               prometheus_escape(value, true) + "\"";
    }
    return out.empty() ? out : out + "}";
}

struct family {
    std::string type;
    std::string help;
    std::vector<std::string> samples; /* "{labels} value" */
};

} // namespace

std::string prometheus_escape(std::string_view s, bool label_value)
{
    std::string out;
    for (char c : s) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '"' && label_value) {
            out += "\\\"";
        } else {
            out += c;
        }
    }
    return out;
}

prometheus_page prometheus_text(std::span<const agent_metrics> agents)
{
    prometheus_page page;
    std::vector<std::string> order; /* the families, as first described */
    std::map<std::string, family> families;
    order.push_back(agent_up_metric);
    families[agent_up_metric] = {
            "gauge",
            "1 when the agent answered its status request, 0 when it did "
            "not (no agent on its socket, refused, no answer in time)",
            {}};
    std::set<std::string> seen; /* each agent's labels */
    for (const agent_metrics &a : agents) {
        const std::string labels = label_text(a);
        if (!seen.insert(labels).second) {
            page.problems.push_back(
                    (labels.empty() ? "an agent" : labels) +
                    ": the labels of an agent before it: left out (a "
                    "series is one agent's)");
            continue;
        }
        families[agent_up_metric].samples.push_back(labels +
                                                    (a.up ? " 1" : " 0"));
        if (!a.up) {
            continue;
        }
        const std::string who = labels.empty() ? "the agent" : labels;
        const auto &described = a.status.is_object() &&
                                                a.status.contains("metrics") ?
                                        a.status["metrics"] :
                                        nlohmann::ordered_json();
        if (!described.is_object()) {
            page.problems.push_back(who +
                                    ": its status describes no metrics (an "
                                    "rvtd older than this rvt-status?)");
            continue;
        }
        for (const auto &[name, m] : described.items()) {
            const auto text = [&](const char *key) {
                return m.is_object() && m.contains(key) &&
                                       m[key].is_string() ?
                               m[key].get<std::string>() :
                               std::string();
            };
            const std::string type = text("type");
            if (!rvt_metric_name(name) || name == agent_up_metric ||
                (type != "counter" && type != "gauge")) {
                page.problems.push_back(
                        who + ": metric '" + prometheus_escape(name, true) +
                        "' of type '" + prometheus_escape(type, true) +
                        "': expected rvt_[a-z0-9_]*, a counter or a gauge");
                continue;
            }
            std::string value;
            try {
                value = sample_value(
                        a.status.at(nlohmann::ordered_json::json_pointer(
                                text("at"))));
            } catch (const nlohmann::ordered_json::exception &) {
                value.clear();
            }
            if (value.empty()) {
                page.problems.push_back(who + ": " + name + " at '" +
                                        prometheus_escape(text("at"), true) +
                                        "': no number there");
                continue;
            }
            auto [it, fresh] = families.try_emplace(name);
            if (fresh) {
                order.push_back(name);
                it->second.type = type;
                it->second.help = text("help").empty() ? name : text("help");
            } else if (it->second.type != type) {
                page.problems.push_back(who + ": " + name + " is a " + type +
                                        " here, a " + it->second.type +
                                        " before: left out");
                continue;
            }
            it->second.samples.push_back(labels + " " + value);
        }
    }
    for (const std::string &name : order) {
        const family &f = families[name];
        page.text += "# HELP " + name + " " + prometheus_escape(f.help, false) +
                     "\n# TYPE " + name + " " + f.type + "\n";
        for (const std::string &s : f.samples) {
            page.text += name + s + "\n";
        }
    }
    return page;
}

} // namespace rvt
