/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine's status JSON (rvt-status --json "data_path"), parsed with
 * nlohmann/json as any reader would: every field test/testbed reads with
 * jq is there, with its type, and the counters say what happened.
 */
#include "test/gtest/unit/engine_fixture.h"

#include <algorithm>
#include <sstream>

namespace engine_test {
namespace {

using json = nlohmann::ordered_json;

/* Each name in `fields` is a member of `obj`, of the type `is` checks. */
void expect_fields(const json &obj, std::initializer_list<const char *> fields,
                   bool (json::*is)() const noexcept, const char *type)
{
    for (const char *name : fields) {
        ASSERT_TRUE(obj.contains(name)) << "no \"" << name << "\" in " << obj;
        EXPECT_TRUE((obj[name].*is)())
                << "\"" << name << "\" is not " << type << ": " << obj[name];
    }
}

void expect_counters(const json &obj, std::initializer_list<const char *> names)
{
    expect_fields(obj, names, &json::is_number_unsigned, "a whole number");
}

class engine_status : public engine_fixture {
protected:
    /* What the tests read a's status after: a client of agent a writes
     * once to one of agent b. */
    void write_once()
    {
        m_a            = &add_agent({});
        agent_node &b  = add_agent({});
        m_x            = &attach(*m_a);
        test_client &y = attach(b);
        m_to           = peer(*m_x, b);
        m_x->post(m_x->write(m_to, y, 1));
        ASSERT_TRUE(run_until([&] { return m_x->done.size() == 1; }));
    }

    agent_node *m_a  = nullptr;
    test_client *m_x = nullptr; /* a's client */
    uint32_t m_to    = 0; /* its peer index of b */
};

TEST_F(engine_status, the_json_has_every_field_with_its_type)
{
    ASSERT_NO_FATAL_FAILURE(write_once());
    const agent_node &a = *m_a;

    const json s = json::parse(a.status());
    expect_fields(s, {"gid"}, &json::is_string, "a string");
    expect_counters(s, {"ud_qpn", "ud_qkey", "num_qps", "rc_qps", "misrouted",
                        "bad_immediates", "clients_gone", "mrs_cleaned",
                        "mrs_released", "mrs_leaked", "mrs_deferred",
                        "releases_waiting", "gone_waiting", "wakeups", "pauses",
                        "resumes", "ops_parked"});
    expect_counters(s["receive_pool"],
                    {"posted", "count", "buffer_size", "extra_completions",
                     "refused_reposts"});
    expect_counters(s["delivered"], {"am", "writes", "write_bytes"});
    expect_counters(s["handshake"], {"sent", "received", "dropped"});
    EXPECT_EQ(s["num_qps"], a.engine->num_qps());
    /* what rvt-status tells the agent's user of its address, as
     * test/testbed/flood-guest.sh reads it for rvt_ud_flood */
    EXPECT_EQ(s["ud_qkey"], a.nic->ud_qkey());
    EXPECT_EQ(s["ud_qkey"], a.engine->address().ud_qkey);

    /* this node's own (loopback) peer, and b */
    ASSERT_TRUE(s["peers"].is_array()) << s;
    ASSERT_EQ(s["peers"].size(), 2u) << s;
    uint64_t rc_qps = 0;
    for (const json &p : s["peers"]) {
        expect_fields(p, {"gid", "state", "last_error"}, &json::is_string,
                      "a string");
        expect_fields(p, {"loopback"}, &json::is_boolean, "true or false");
        expect_counters(p, {"index", "ud_qpn", "qps", "ops", "bytes", "failed",
                            "received", "received_bytes", "qp_errors",
                            "reconnects", "queued", "parked", "posted"});
        EXPECT_EQ(p["state"], "connected");
        /* one entry per lane, adding up to what the peer counts posted */
        ASSERT_TRUE(p["in_flight_by_lane"].is_array()) << p;
        EXPECT_EQ(p["in_flight_by_lane"].size(), s["num_qps"].get<size_t>())
                << p;
        uint64_t in_flight = 0;
        for (const json &n : p["in_flight_by_lane"]) {
            in_flight += n.get<uint64_t>();
        }
        EXPECT_EQ(in_flight, p["posted"].get<uint64_t>()) << p;
        EXPECT_EQ(p["loopback"], p["index"] != m_to);
        EXPECT_EQ(p["ops"], p["index"] == m_to ? 1u : 0u);
        rc_qps += p["qps"].get<uint64_t>();
    }
    EXPECT_EQ(s["rc_qps"], rc_qps);

    ASSERT_TRUE(s["client_traffic"].is_array()) << s;
    ASSERT_EQ(s["client_traffic"].size(), 1u) << s;
    const json &c = s["client_traffic"][0];
    expect_fields(c, {"paused"}, &json::is_boolean, "true or false");
    expect_counters(c,
                    {"index", "ops", "bytes", "invalid", "am_in", "writes_in",
                     "write_bytes_in", "held_back", "inbound_waiting"});
    EXPECT_EQ(c["index"], m_x->index());
    EXPECT_EQ(c["ops"], 1u);
    EXPECT_EQ(c["paused"], false);
}

/* Which lines of `text` start with `head`. */
size_t lines_starting(const std::string &text, const std::string &head)
{
    std::istringstream in(text);
    size_t n = 0;
    for (std::string line; std::getline(in, line);) {
        n += line.starts_with(head);
    }
    return n;
}

/* The text for people (rvt-status) comes from the JSON's fields: its
 * lines in their order, the same numbers, a row per peer and per client
 * (test/testbed greps these lines, test_rvtd.cc reads "gone"). */
TEST_F(engine_status, the_text_shows_the_jsons_counters_line_by_line)
{
    ASSERT_NO_FATAL_FAILURE(write_once());
    const agent_node &a = *m_a;

    const json s           = json::parse(a.status());
    const std::string text = "\n" + a.engine->status(true);
    size_t at              = 0;
    for (const char *line :
         {"address   GID ", "receive   buffers posted ", "departed  told to ",
          "delivered AMs ", "auth      ", "handshake datagrams sent ",
          "MRs       released by their clients ", "paused    times ",
          "gone      clients ", "scan      wakeups ",
          "striped   writes split over the lanes ", "share     max-client-ops ",
          "intake    connections not attached ", "peers     RC QPs in all "}) {
        const size_t next = text.find(std::string("\n") + line, at);
        ASSERT_NE(next, std::string::npos)
                << "no line \"" << line << "\" after the one before: " << text;
        at = next + 1;
    }
    EXPECT_EQ(text.find("\naddress   GID "), 0u) << text;
    const auto number = [&](const json &v) {
        return std::to_string(v.get<uint64_t>());
    };
    EXPECT_NE(text.find("\nhandshake datagrams sent " +
                        number(s["handshake"]["sent"]) + ", "),
              std::string::npos)
            << text;
    EXPECT_NE(text.find("\ndelivered AMs " + number(s["delivered"]["am"]) +
                        ", writes with immediate " +
                        number(s["delivered"]["writes"]) + ", written " +
                        number(s["delivered"]["write_bytes"]) + " bytes\n"),
              std::string::npos)
            << text;
    EXPECT_NE(text.find("\ngone      clients 0, detached for a corrupt ring "
                        "0, their MRs deregistered 0, never announced 0, "
                        "clients waiting 0\n"),
              std::string::npos)
            << text;
    EXPECT_NE(text.find("\npeers     RC QPs in all " + number(s["rc_qps"]) +
                        ", "),
              std::string::npos)
            << text;
    EXPECT_EQ(lines_starting(text, "  peer "), s["peers"].size()) << text;
    EXPECT_EQ(lines_starting(text, "  peer "), 2u) << text;
    for (const json &p : s["peers"]) {
        const std::string row = "  peer " + number(p["index"]) + "  " +
                                (p["loopback"] ? "(this node)  " : "") +
                                p["gid"].get<std::string>() + "  UD QPN " +
                                number(p["ud_qpn"]) + "  connected  QPs " +
                                number(p["qps"]) + "  ops " + number(p["ops"]);
        EXPECT_EQ(lines_starting(text, row), 1u) << row << " in " << text;
    }
    const json &c = s["client_traffic"][0];
    EXPECT_EQ(lines_starting(text, "  client " + number(c["index"]) +
                                           "  ops 1  bytes " +
                                           number(c["bytes"]) + "  "),
              1u)
            << text;
}

} // namespace
} // namespace engine_test
