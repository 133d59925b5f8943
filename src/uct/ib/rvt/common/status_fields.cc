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
        if (f.value.is_null()) {
            return {};
        } else if (f.value.is_boolean()) {
            return f.value.get<bool>() ? std::string(f.label) : std::string();
        } else if (f.value.is_string()) {
            value = f.value.get<std::string>();
        } else {
            value = status_json_text(f.value);
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
        in[std::string(f.key)] = f.value;
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

} // namespace rvt
