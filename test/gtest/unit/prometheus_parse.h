/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A reader of Prometheus' text exposition format (version 0.0.4), strict
 * where Prometheus' own parser is and where a scrape would lose data: a
 * test's check that rvt-status --prometheus writes what a scraper takes.
 *
 *   # HELP name docstring         at most once per name, before its samples
 *   # TYPE name counter|gauge|... at most once per name, before its samples
 *   name{label="value",...} value [timestamp]
 *
 * Every line ends in '\n'; a family's lines are together (no name comes
 * back after another's); names are [a-zA-Z_:][a-zA-Z0-9_:]*, label names
 * [a-zA-Z_][a-zA-Z0-9_]*, a label value escapes \\, \" and \n; a value is
 * a number, NaN, +Inf or -Inf; no two samples of a name have the same
 * labels.
 */
#ifndef RVT_TEST_PROMETHEUS_PARSE_H
#define RVT_TEST_PROMETHEUS_PARSE_H

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace prometheus_test {

struct sample {
    std::map<std::string, std::string> labels;
    double value = 0;
    std::string text; /* the value as written */
};

struct family {
    std::string name;
    std::string type; /* empty: no TYPE line */
    std::string help;
    bool has_help = false;
    std::vector<sample> samples;
};

struct page {
    std::vector<family> families; /* in the order of the text */
    std::string error; /* empty: the text is valid */

    const family *find(std::string_view name) const
    {
        for (const family &f : families) {
            if (f.name == name) {
                return &f;
            }
        }
        return nullptr;
    }
};

inline bool name_char(char c, bool first, bool colon)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (colon && c == ':') || (!first && c >= '0' && c <= '9');
}

/* The name at s[i...], i moved past it; empty if none. */
inline std::string take_name(std::string_view s, size_t &i, bool colon)
{
    const size_t from = i;
    while (i < s.size() && name_char(s[i], i == from, colon)) {
        ++i;
    }
    return std::string(s.substr(from, i - from));
}

inline bool take_value(const std::string &v, double &out)
{
    if (v == "NaN") {
        out = NAN;
        return true;
    }
    if (v == "+Inf" || v == "-Inf") {
        out = v[0] == '+' ? INFINITY : -INFINITY;
        return true;
    }
    if (v.empty()) {
        return false;
    }
    char *end = nullptr;
    errno     = 0;
    out       = std::strtod(v.c_str(), &end);
    return *end == '\0' && errno == 0 && v.find_first_of("xXnNiI") ==
                                                 std::string::npos;
}

inline page parse(std::string_view text)
{
    page out;
    std::set<std::string> done; /* families whose lines have ended */
    auto fail = [&](size_t line, const std::string &why) {
        out.error = "line " + std::to_string(line) + ": " + why;
        return out;
    };
    /* the family of `name`: the current one, or a new one */
    auto family_of = [&](const std::string &name) -> family * {
        if (!out.families.empty() && out.families.back().name == name) {
            return &out.families.back();
        }
        if (done.contains(name)) {
            return nullptr;
        }
        if (!out.families.empty()) {
            done.insert(out.families.back().name);
        }
        out.families.push_back({name, "", "", false, {}});
        return &out.families.back();
    };
    if (!text.empty() && text.back() != '\n') {
        return fail(0, "the text does not end with a newline");
    }
    size_t n = 0;
    for (size_t at = 0; at < text.size();) {
        const size_t nl        = text.find('\n', at);
        const std::string_view line = text.substr(at, nl - at);
        at                     = nl + 1;
        ++n;
        if (line.empty()) {
            continue;
        }
        if (line[0] == '#') {
            const bool help = line.starts_with("# HELP ");
            const bool type = line.starts_with("# TYPE ");
            if (!help && !type) {
                continue; /* a comment */
            }
            size_t i               = 7;
            const std::string name = take_name(line, i, true);
            if (name.empty() || (i < line.size() && line[i] != ' ')) {
                return fail(n, "a HELP or TYPE line without a metric name");
            }
            family *f = family_of(name);
            if (f == nullptr) {
                return fail(n, name + ": its lines are not together");
            }
            const std::string rest(i < line.size() ? line.substr(i + 1) : "");
            if (help) {
                if (f->has_help) {
                    return fail(n, name + ": a second HELP");
                }
                f->has_help = true;
                f->help     = rest;
            } else {
                if (!f->type.empty()) {
                    return fail(n, name + ": a second TYPE");
                }
                if (!f->samples.empty()) {
                    return fail(n, name + ": TYPE after its samples");
                }
                if (rest != "counter" && rest != "gauge" &&
                    rest != "histogram" && rest != "summary" &&
                    rest != "untyped") {
                    return fail(n, name + ": type '" + rest + "'");
                }
                f->type = rest;
            }
            continue;
        }
        size_t i               = 0;
        const std::string name = take_name(line, i, true);
        if (name.empty()) {
            return fail(n, "a sample without a metric name");
        }
        sample s;
        if (i < line.size() && line[i] == '{') {
            ++i;
            while (i < line.size() && line[i] != '}') {
                const std::string label = take_name(line, i, false);
                if (label.empty() || i + 1 >= line.size() || line[i] != '=' ||
                    line[i + 1] != '"') {
                    return fail(n, name + ": a label is not name=\"value\"");
                }
                i += 2;
                std::string value;
                for (; i < line.size() && line[i] != '"'; ++i) {
                    if (line[i] == '\\') {
                        if (++i == line.size()) {
                            break;
                        }
                        const char e = line[i];
                        if (e != '\\' && e != '"' && e != 'n') {
                            return fail(n, name + ": escape \\" +
                                                   std::string(1, e));
                        }
                        value += e == 'n' ? '\n' : e;
                    } else {
                        value += line[i];
                    }
                }
                if (i == line.size()) {
                    return fail(n, name + ": a label value never ends");
                }
                ++i; /* the closing quote */
                if (!s.labels.emplace(label, value).second) {
                    return fail(n, name + ": label " + label + " twice");
                }
                if (i < line.size() && line[i] == ',') {
                    ++i;
                }
            }
            if (i == line.size()) {
                return fail(n, name + ": labels never end");
            }
            ++i; /* '}' */
        }
        if (i >= line.size() || line[i] != ' ') {
            return fail(n, name + ": no space before the value");
        }
        std::string_view rest = line.substr(i + 1);
        const size_t space    = rest.find(' ');
        s.text                = std::string(rest.substr(0, space));
        if (!take_value(s.text, s.value)) {
            return fail(n, name + ": value '" + s.text + "'");
        }
        if (space != std::string_view::npos) {
            const std::string ts(rest.substr(space + 1));
            char *end = nullptr;
            std::strtoll(ts.c_str(), &end, 10);
            if (ts.empty() || *end != '\0') {
                return fail(n, name + ": timestamp '" + ts + "'");
            }
        }
        family *f = family_of(name);
        if (f == nullptr) {
            return fail(n, name + ": its lines are not together");
        }
        for (const sample &other : f->samples) {
            if (other.labels == s.labels) {
                return fail(n, name + ": two samples with the same labels");
            }
        }
        f->samples.push_back(std::move(s));
    }
    return out;
}

} // namespace prometheus_test

#endif
