/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The head of rvtd's status (rvt-status): who the agent is and who is
 * attached to it, before the engine's part (engine.h, status). Its facts
 * are one list of fields (common/status_fields.h) from which both the
 * JSON and the text for people are rendered, so a fact added to the list
 * is in both.
 *
 *   JSON: the header's keys, the engine's object as "data_path", then
 *         "clients", an object per client, then "metrics": the counters
 *         and gauges of the header and the engine, each by its name
 *         (common/status_fields.h, status_metrics: what rvt-status
 *         --prometheus renders)
 *   text: the header's lines, a row "  index N ..." per client, then the
 *         engine's lines
 */
#ifndef RVT_AGENT_STATUS_HEADER_H
#define RVT_AGENT_STATUS_HEADER_H

#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/status_fields.h"

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rvt::agent {

class engine;

/* An attached client as the header lists it. */
struct header_client {
    uint32_t index;
    pid_t pid;
    uint64_t mrs; /* the MRs it holds */
    /* a sibling: the leader whose MRs its work uses */
    std::optional<uint32_t> sibling_of;
};

/* What the header says, gathered by rvtd from its parts. */
struct status_header {
    pid_t pid;
    uint64_t agent_id;
    std::string job_key;
    std::string job_key_source; /* "--job-key", a variable, or "default" */
    std::string device;
    int port;
    uint32_t driver_id; /* the uverbs driver id */
    uint32_t pd_handle;
    wire::reg_mode registration;
    std::string registration_reason;
    std::string socket;
    std::vector<header_client> clients;
};

/* The header's fields, in the JSON's order; `data_path` (the engine's
 * status JSON) goes between "socket" and "clients", for the JSON only. */
std::vector<status_field>
header_fields(const status_header &h, nlohmann::ordered_json data_path);

/* A client's fields: its object in "clients" and its row in the text. */
std::vector<status_field> header_client_fields(const header_client &c);

/* The header as text for people: its lines, then a row per client. */
std::string header_text(const status_header &h);

/* The whole status as JSON, "metrics" included. */
nlohmann::ordered_json agent_status_json(const status_header &h,
                                         const engine &eng);

/* The whole status: as text (human) or as one line of JSON. */
std::string agent_status(const status_header &h, const engine &eng, bool human);

} // namespace rvt::agent

#endif
