/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The head of rvtd's status, its JSON and its text from one list of
 * fields (status_header.h).
 */
#include "uct/ib/rvt/agent/serve/status_header.h"

#include "uct/ib/rvt/agent/engine/engine.h"
#include "uct/ib/rvt/common/status_json.h"

#include <string_view>

namespace rvt::agent {

namespace {

/* The text's lines, in the order it shows them (the fields name theirs). */
constexpr std::string_view header_lines[] = {"agent",  "job",    "device",
                                             "memory", "socket", "clients"};

} // namespace

std::vector<status_field> header_client_fields(const header_client &c)
{
    const char *row = "index";
    return {{"", "index", row, "", "", status_number(c.index)},
            {"", "pid", row, "pid", "", status_number(c.pid)},
            {"", "mrs", row, "MRs", "", status_gauge(c.mrs)},
            /* null when it is no sibling: the text shows nothing then */
            {"", "sibling_of", row, "sibling of", "",
             c.sibling_of ? nlohmann::ordered_json(*c.sibling_of) :
                            nlohmann::ordered_json()}};
}

std::vector<status_field>
header_fields(const status_header &h, nlohmann::ordered_json data_path)
{
    /* rvtd registers one of two ways (device.h); the JSON names the way,
     * the text names it and says what it is */
    const bool import          = h.registration == wire::reg_mode::import_pd;
    const char *registration   = import ? "import_pd" : "uverbs_ioctl";
    std::string registered_how = registration;
    registered_how += import ? " (provider import, ibv_import_pd)" :
                               " (uverbs ioctl on the shared fd)";
    nlohmann::ordered_json clients = nlohmann::ordered_json::array();
    for (const header_client &c : h.clients) {
        clients.push_back(status_object(header_client_fields(c)));
    }
    return {{"", "pid", "agent", "pid", "", status_number(h.pid)},
            {"", "agent_id", "agent", "id", "", status_number(h.agent_id)},
            {"", "job_key", "job", "", "", h.job_key},
            {"", "job_key_source", "job", "from", "", h.job_key_source},
            {"", "device", "device", "", "", h.device},
            {"", "port", "device", "port", "", status_number(h.port)},
            {"", "driver_id", "device", "uverbs driver id", "",
             status_number(h.driver_id)},
            {"", "pd_handle", "device", "PD handle", "",
             status_number(h.pd_handle)},
            {"", "registration", "memory", "registration", "", registration,
             registered_how},
            {"", "registration_reason", "memory", "", "",
             h.registration_reason},
            {"", "socket", "socket", "", "", h.socket},
            {"", "data_path", "", "", "", std::move(data_path)},
            /* a gauge of its length: the clients attached now */
            {"", "clients", "clients", "", "attached",
             status_gauge(std::move(clients)),
             std::to_string(h.clients.size())}};
}

std::string header_text(const status_header &h)
{
    std::string out = status_lines(header_lines, header_fields(h, nullptr));
    for (const header_client &c : h.clients) {
        out += status_row("index", header_client_fields(c));
    }
    return out;
}

nlohmann::ordered_json agent_status_json(const status_header &h,
                                         const engine &eng)
{
    const std::vector<status_field> data_path = eng.status_fields();
    const std::vector<status_field> head =
            header_fields(h, status_object(data_path));
    nlohmann::ordered_json out = status_object(head);
    nlohmann::ordered_json metrics = status_metrics(head);
    metrics.update(status_metrics(data_path, "/data_path"));
    out["metrics"] = std::move(metrics);
    return out;
}

std::string agent_status(const status_header &h, const engine &eng, bool human)
{
    if (human) {
        return header_text(h) + eng.status(true);
    }
    return status_json_text(agent_status_json(h, eng)) + "\n";
}

} // namespace rvt::agent
