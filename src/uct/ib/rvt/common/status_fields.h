/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A status written once: one list of fields, each with its JSON place and
 * how the text for people shows it; the JSON (rvt-status --json) and the
 * text (rvt-status) are both rendered from that list, so a counter added
 * to it is in both.
 *
 *   fields[] --status_object()--> {"key": value, "object": {"key": ...}}
 *            --status_lines()---> "line      label value unit, ...\n"
 *            --status_row()-----> "  peer 3  label value  ...\n"
 */
#ifndef RVT_COMMON_STATUS_FIELDS_H
#define RVT_COMMON_STATUS_FIELDS_H

#include <nlohmann/json.hpp>

#include <span>
#include <string>
#include <string_view>

namespace rvt {

struct status_field {
    /* the JSON object it is in ("handshake"); empty: the top level */
    std::string_view object;
    std::string_view key; /* its JSON name ("sent") */
    /* the text line it shows on ("handshake"); empty: JSON only */
    std::string_view line;
    std::string_view label; /* how the text names it ("datagrams sent") */
    std::string_view unit; /* after the value in the text ("bytes") */
    nlohmann::ordered_json value;
    /* what the text shows instead of the value; empty: the value */
    std::string text = {};
};

/* The JSON: each field at [object][key], in the order of `fields`, an
 * object where its first field is. */
nlohmann::ordered_json status_object(std::span<const status_field> fields);

/* The text: a line per name in `lines`, in that order, holding the fields
 * whose `line` it is: the name padded to 10 columns, then the fields as
 * "label value unit", separated by ", ". What a field shows: its `text`,
 * else its value; a boolean shows its label alone, when true; a null and
 * an empty string show nothing. A line that shows nothing is left out. */
std::string status_lines(std::span<const std::string_view> lines,
                         std::span<const status_field> fields);

/* One line of a table (a peer, a client): "  NAME", then each field with
 * a line, as above but separated by two spaces. */
std::string
status_row(std::string_view name, std::span<const status_field> fields);

} // namespace rvt

#endif
