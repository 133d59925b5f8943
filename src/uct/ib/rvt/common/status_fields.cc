/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The status's two renderings from one list of fields (status_fields.h).
 */
#include "uct/ib/rvt/common/status_fields.h"

#include "uct/ib/rvt/common/status_json.h"

#include <algorithm>

namespace rvt {

namespace {

/* The field as the text shows it ("datagrams sent 3"), or empty. */
std::string field_text(const status_field &f)
{
    std::string value = f.text;
    if (value.empty()) {
        const nlohmann::ordered_json &v = f.value.json;
        if (v.is_null()) {
            return {};
        } else if (v.is_boolean()) {
            return v.get<bool>() ? std::string(f.label) : std::string();
        } else if (v.is_string()) {
            value = v.get<std::string>();
        } else {
            value = status_json_text(v);
        }
        if (value.empty()) {
            return {};
        }
    }
    std::string out(f.label);
    out += (out.empty() ? "" : " ") + value;
    if (!f.unit.empty()) {
        out += " " + std::string(f.unit);
    }
    return out;
}

} // namespace

nlohmann::ordered_json status_object(std::span<const status_field> fields)
{
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const status_field &f : fields) {
        auto &in = f.object.empty() ? out : out[std::string(f.object)];
        in[std::string(f.key)] = f.value.json;
    }
    return out;
}

std::string status_lines(std::span<const std::string_view> lines,
                         std::span<const status_field> fields)
{
    std::string out;
    for (std::string_view line : lines) {
        std::string text;
        for (const status_field &f : fields) {
            const std::string one = f.line == line ? field_text(f) : "";
            if (!one.empty()) {
                text += (text.empty() ? "" : ", ") + one;
            }
        }
        if (text.empty()) {
            continue;
        }
        std::string head(line);
        head.resize(std::max<size_t>(head.size() + 1, 10), ' ');
        out += head + text + "\n";
    }
    return out;
}

std::string
status_row(std::string_view name, std::span<const status_field> fields)
{
    std::string out = "  " + std::string(name);
    for (const status_field &f : fields) {
        const std::string text = f.line.empty() ? "" : field_text(f);
        if (!text.empty()) {
            out += (out.size() == name.size() + 2 ? " " : "  ") + text;
        }
    }
    return out + "\n";
}

std::string metric_name(const status_field &f)
{
    std::string name = "rvt_";
    if (!f.object.empty()) {
        name += std::string(f.object) + "_";
    }
    name += f.key;
    if (f.value.metric == metric_kind::counter) {
        name += "_total";
    }
    return name;
}

std::string metric_help(const status_field &f)
{
    std::string help(f.line);
    if (!f.label.empty() && f.label != f.line) {
        help += (help.empty() ? "" : ": ") + std::string(f.label);
    }
    if (help.empty()) {
        help = f.object.empty() ? std::string(f.key) :
                                  std::string(f.object) + " " +
                                          std::string(f.key);
    }
    if (!f.unit.empty()) {
        help += " (" + std::string(f.unit) + ")";
    }
    return help;
}

nlohmann::ordered_json status_metrics(std::span<const status_field> fields,
                                      std::string_view at)
{
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const status_field &f : fields) {
        if (f.value.metric == metric_kind::none) {
            continue;
        }
        std::string where(at);
        if (!f.object.empty()) {
            where += "/" + std::string(f.object);
        }
        where += "/" + std::string(f.key);
        out[metric_name(f)] = {
                {"type",
                 f.value.metric == metric_kind::counter ? "counter" : "gauge"},
                {"help", metric_help(f)},
                {"at", where}};
    }
    return out;
}

} // namespace rvt
