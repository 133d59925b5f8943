/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The head of rvtd's status (agent/serve/status_header.h): its JSON keeps the
 * keys and order its readers know (test_rvtd.cc, test_uct_rvt_multi.cc,
 * test/testbed's jq), and its text for people shows every fact of the
 * JSON, each on its line.
 */
#include "uct/ib/rvt/agent/serve/status_header.h"

#include "uct/ib/rvt/common/status_json.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace {

using json = nlohmann::ordered_json;
using rvt::agent::header_client;
using rvt::agent::status_header;

/* An agent with a client and its sibling (each number its own, so a
 * number shown on the wrong line is not found on the right one). */
status_header sample(rvt::wire::reg_mode mode)
{
    return {.pid                 = 4242,
            .agent_id            = 987654321,
            .job_key             = "slurm-77",
            .job_key_source      = "SLURM_JOB_ID",
            .device              = "rxe0",
            .port                = 1,
            .driver_id           = 19,
            .pd_handle           = 3,
            .registration        = mode,
            .registration_reason = "the provider imports context and PD",
            .socket              = "/run/user/1000/rvt/rxe0-1.slurm-77.sock",
            .clients = {{0, 5001, 12, std::nullopt}, {2, 5001, 0, 0u}}};
}

/* The JSON as a reader gets it: rendered, then parsed. */
json parsed(const status_header &h, json data_path)
{
    return json::parse(rvt::status_json_text(
            rvt::status_object(rvt::agent::header_fields(h, data_path))));
}

std::vector<std::string> keys_of(const json &obj)
{
    std::vector<std::string> out;
    for (const auto &[key, value] : obj.items()) {
        out.push_back(key);
    }
    return out;
}

/* The text's line named `name` ("device    ..."), or empty. */
std::string line_named(const std::string &text, const std::string &name)
{
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.starts_with(name + " ")) {
            return line;
        }
    }
    return {};
}

/* A JSON value as the text shows it: a string as it is, else its JSON. */
std::string shown(const json &v)
{
    return v.is_string() ? v.get<std::string>() : v.dump();
}

TEST(status_header, the_json_keeps_its_keys_in_their_order)
{
    const json data_path = {{"gid", "fe80::1"}};
    const json s = parsed(sample(rvt::wire::reg_mode::import_pd), data_path);
    EXPECT_EQ(keys_of(s),
              (std::vector<std::string>{"pid", "agent_id", "job_key",
                                        "job_key_source", "device", "port",
                                        "driver_id", "pd_handle",
                                        "registration", "registration_reason",
                                        "socket", "data_path", "clients"}));
    EXPECT_EQ(s["pid"], 4242);
    EXPECT_EQ(s["agent_id"], 987654321u);
    EXPECT_EQ(s["job_key_source"], "SLURM_JOB_ID");
    EXPECT_EQ(s["port"], 1);
    EXPECT_EQ(s["pd_handle"], 3u);
    EXPECT_EQ(s["registration"], "import_pd");
    EXPECT_EQ(s["data_path"], data_path);
    ASSERT_EQ(s["clients"].size(), 2u) << s;
    for (const json &c : s["clients"]) {
        EXPECT_EQ(keys_of(c), (std::vector<std::string>{"index", "pid", "mrs",
                                                        "sibling_of"}))
                << c;
    }
    EXPECT_TRUE(s["clients"][0]["sibling_of"].is_null()) << s;
    EXPECT_EQ(s["clients"][1]["sibling_of"], 0u) << s;
    EXPECT_EQ(parsed(sample(rvt::wire::reg_mode::uverbs_ioctl),
                     nullptr)["registration"],
              "uverbs_ioctl");
}

TEST(status_header, the_text_shows_the_header_line_by_line)
{
    EXPECT_EQ(rvt::agent::header_text(sample(rvt::wire::reg_mode::import_pd)),
              "agent     pid 4242, id 987654321\n"
              "job       slurm-77, from SLURM_JOB_ID\n"
              "device    rxe0, port 1, uverbs driver id 19, PD handle 3\n"
              "memory    registration import_pd (provider import, "
              "ibv_import_pd), the provider imports context and PD\n"
              "socket    /run/user/1000/rvt/rxe0-1.slurm-77.sock\n"
              "clients   2 attached\n"
              "  index 0  pid 5001  MRs 12\n"
              "  index 2  pid 5001  MRs 0  sibling of 0\n");
}

/* Every fact of the JSON is in the text: each top-level key (but the
 * engine's data_path, test_engine_status.cc's) on its field's line as
 * "label value", with the JSON's own value; a row per client showing
 * each of its keys the same way. A fact the text leaves out, or shows
 * otherwise than the JSON, fails here. */
TEST(status_header, the_text_shows_every_fact_of_the_json)
{
    for (const auto mode :
         {rvt::wire::reg_mode::import_pd, rvt::wire::reg_mode::uverbs_ioctl}) {
        const status_header h  = sample(mode);
        const json s           = parsed(h, nullptr);
        const std::string text = rvt::agent::header_text(h);
        const auto fields      = rvt::agent::header_fields(h, nullptr);
        ASSERT_EQ(fields.size(), s.size());
        for (const rvt::status_field &f : fields) {
            const std::string key(f.key);
            if (key == "data_path") {
                continue;
            }
            ASSERT_FALSE(f.line.empty()) << key << " has no text line";
            const std::string line = line_named(text, std::string(f.line));
            ASSERT_FALSE(line.empty())
                    << "no line \"" << f.line << "\" for " << key << ":\n"
                    << text;
            const std::string value = key == "clients" ?
                                              std::to_string(s[key].size()) :
                                              shown(s[key]);
            const std::string fact =
                    (f.label.empty() ? "" : std::string(f.label) + " ") + value;
            EXPECT_NE(line.find(fact), std::string::npos)
                    << key << ": \"" << fact << "\" not in \"" << line << "\"";
        }
        ASSERT_EQ(s["clients"].size(), h.clients.size());
        for (size_t i = 0; i < h.clients.size(); ++i) {
            const json &c         = s["clients"][i];
            const std::string row = line_named(text,
                                               "  index " + shown(c["index"]));
            ASSERT_FALSE(row.empty()) << "no row for " << c << ":\n" << text;
            for (const rvt::status_field &f :
                 rvt::agent::header_client_fields(h.clients[i])) {
                const json &v = c[std::string(f.key)];
                if (v.is_null()) { /* shown as nothing, label and all */
                    EXPECT_EQ(row.find(std::string(f.label)), std::string::npos)
                            << row;
                    continue;
                }
                const std::string fact = (f.label.empty() ?
                                                  "" :
                                                  std::string(f.label) + " ") +
                                         shown(v);
                EXPECT_NE(row.find(fact), std::string::npos)
                        << f.key << ": \"" << fact << "\" not in \"" << row
                        << "\"";
            }
        }
    }
}

} // namespace
