/*
 * The engine's status JSON (rvt-status --json "data_path"), parsed with
 * nlohmann/json as any reader would: every field test/testbed reads with
 * jq is there, with its type, and the counters say what happened.
 */
#include "test/gtest/unit/engine_fixture.h"

#include <algorithm>

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

class engine_status : public engine_fixture {};

TEST_F(engine_status, the_json_has_every_field_with_its_type)
{
    agent_node &a     = add_agent({});
    agent_node &b     = add_agent({});
    test_client &x    = attach(a);
    test_client &y    = attach(b);
    const uint32_t to = peer(x, b);
    x.post(x.write(to, y, 1));
    ASSERT_TRUE(run_until([&] { return x.done.size() == 1; }));

    const json s = json::parse(a.status());
    expect_fields(s, {"gid"}, &json::is_string, "a string");
    expect_counters(s, {"ud_qpn", "num_qps", "rc_qps", "misrouted",
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
        EXPECT_EQ(p["loopback"], p["index"] != to);
        EXPECT_EQ(p["ops"], p["index"] == to ? 1u : 0u);
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
    EXPECT_EQ(c["index"], x.index());
    EXPECT_EQ(c["ops"], 1u);
    EXPECT_EQ(c["paused"], false);
}

} // namespace
} // namespace engine_test
