/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's status as JSON (rvt-status --json): built with nlohmann/json,
 * written out by one function so every part is written the same way.
 */
#ifndef RVT_COMMON_STATUS_JSON_H
#define RVT_COMMON_STATUS_JSON_H

#include <nlohmann/json.hpp>

#include <string>

namespace rvt {

/* The text of a status object, on one line. Never throws: a string that
 * is not UTF-8 (a name from outside the agent) shows U+FFFD where it is
 * broken. */
inline std::string status_json_text(const nlohmann::ordered_json &status)
{
    return status.dump(-1, ' ', false,
                       nlohmann::ordered_json::error_handler_t::replace);
}

} // namespace rvt

#endif
