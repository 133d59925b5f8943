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
 *            --status_metrics()-> {"rvt_object_key_total": {"type":
 *                                  "counter", "help": ..., "at": ...}}
 *
 * Metrics: every number in the list says what it is, a counter (only
 * grows while the agent runs), a gauge (what is now), or neither (an id,
 * a setting, an address, a secret: status_number): a bare number does not
 * compile (status_value). The counters and gauges are the agent's
 * metrics: status_metrics() describes them, by name, in the JSON the
 * agent answers with, and rvt-status --prometheus renders them from that
 * description (common/prometheus.h). So a counter added to the list is in
 * the JSON, the text and the metrics, and nothing else names it.
 */
#ifndef RVT_COMMON_STATUS_FIELDS_H
#define RVT_COMMON_STATUS_FIELDS_H

#include <nlohmann/json.hpp>

#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace rvt {

enum class metric_kind : uint8_t {
    none, /* no metric: text, a flag, an id, a setting */
    counter, /* only grows while the agent runs (Prometheus counter) */
    gauge, /* what is now; an array's gauge is its length */
};

/* A field's value and what kind of metric it is. Anything JSON takes but
 * a number converts to it (a metric of none); a number must say what it
 * is: status_counter(), status_gauge() or status_number(). */
struct status_value {
    nlohmann::ordered_json json;
    metric_kind metric = metric_kind::none;

    status_value() = default;
    template<class T>
        requires(!std::is_arithmetic_v<std::remove_cvref_t<T>> ||
                 std::same_as<std::remove_cvref_t<T>, bool>) &&
                std::constructible_from<nlohmann::ordered_json, T &&>
    status_value(T &&v) : json(std::forward<T>(v))
    {
    }
    status_value(nlohmann::ordered_json v, metric_kind kind) :
        json(std::move(v)), metric(kind)
    {
    }
};

/* A count that only grows while the agent runs. */
template<class N>
    requires std::is_arithmetic_v<N>
status_value status_counter(N n)
{
    return {n, metric_kind::counter};
}
/* What is now: a number, or an array (the metric is its length). */
inline status_value status_gauge(nlohmann::ordered_json v)
{
    return {std::move(v), metric_kind::gauge};
}
/* A number that is no metric: an id, a setting, an address, a secret. */
template<class N>
    requires std::is_arithmetic_v<N>
status_value status_number(N n)
{
    return {n, metric_kind::none};
}

struct status_field {
    /* the JSON object it is in ("handshake"); empty: the top level */
    std::string_view object;
    std::string_view key; /* its JSON name ("sent") */
    /* the text line it shows on ("handshake"); empty: JSON only */
    std::string_view line;
    std::string_view label; /* how the text names it ("datagrams sent") */
    std::string_view unit; /* after the value in the text ("bytes") */
    status_value value;
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

/* A counter's or gauge's name: rvt_, its object and key ("rvt_handshake_
 * sent"), and _total after a counter's. */
std::string metric_name(const status_field &f);

/* A metric's help: its text line and label ("handshake: datagrams
 * sent"), its unit in parentheses; its key where it has no label. */
std::string metric_help(const status_field &f);

/* The metrics among `fields`: an object with a member per counter and
 * gauge, by metric_name, {"type": "counter" or "gauge", "help": ...,
 * "at": where its value is in the status JSON, a JSON pointer: `at`, then
 * "/object/key"}. Fields that are no metric are not in it. */
nlohmann::ordered_json status_metrics(std::span<const status_field> fields,
                                      std::string_view at = "");

} // namespace rvt

#endif
