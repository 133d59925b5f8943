/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's metrics (rvt-status --prometheus): made from the one list
 * of status fields (common/status_fields.h) of a real engine on the
 * loopback nic and its header (agent/serve/status_header.h), described
 * in the agent's JSON, rendered by common/prometheus.h and read back by
 * a strict reader of the format (prometheus_parse.h). Every counter and
 * gauge of the lists is a metric of its kind with its value, nothing
 * else is (the Q_Key of the agent's address is none), and what an agent
 * describes wrongly is left out, named.
 */
#include "test/gtest/unit/engine_fixture.h"
#include "test/gtest/unit/prometheus_parse.h"

#include "uct/ib/rvt/agent/serve/status_header.h"
#include "uct/ib/rvt/common/prometheus.h"
#include "uct/ib/rvt/common/status_json.h"

#include <set>

namespace engine_test {
namespace {

using json = nlohmann::ordered_json;

/* The value a metric's field has in the status JSON: a number, or an
 * array's length. */
double metric_value(const json &v)
{
    return v.is_array() ? static_cast<double>(v.size()) : v.get<double>();
}

class status_metrics : public engine_fixture {
protected:
    rvt::agent::status_header header() const
    {
        return {.pid                 = 4242,
                .agent_id            = 987654321,
                .job_key             = job_key,
                .job_key_source      = "--job-key",
                .device              = "rxe0",
                .port                = 1,
                .driver_id           = 19,
                .pd_handle           = 3,
                .registration        = rvt::wire::reg_mode::uverbs_ioctl,
                .registration_reason = "",
                .socket              = "/run/rvt/1000/rxe0-1.x.sock",
                .clients             = {{0, 5001, 1, std::nullopt}}};
    }
};

/* The drift test: each counter and gauge of the header's and the
 * engine's lists (the lists the JSON and the text are rendered from) is
 * in the Prometheus page as a family of its type, once, with the JSON's
 * value and the agent's labels; the page has nothing else but
 * rvt_agent_up, and a reader of the format takes it. A field made a
 * metric, or a metric added, without the other fails here. */
TEST_F(status_metrics, every_counter_and_gauge_of_the_lists_is_a_metric)
{
    agent_node &a  = add_agent({});
    agent_node &b  = add_agent({});
    test_client &x = attach(a);
    test_client &y = attach(b);
    x.post(x.write(peer(x, b), y, 1));
    ASSERT_TRUE(run_until([&] { return x.done.size() == 1; }));

    const auto h    = header();
    const json full = json::parse(
            rvt::status_json_text(rvt::agent::agent_status_json(h, *a.engine)));
    ASSERT_TRUE(full.contains("metrics")) << full;
    /* the same JSON as rvt-status --json gets, "metrics" included */
    EXPECT_EQ(json::parse(rvt::agent::agent_status(h, *a.engine, false)), full);

    std::vector<rvt::status_field> fields = rvt::agent::header_fields(h,
                                                                      nullptr);
    const auto data_path = a.engine->status_fields();
    const size_t in_header = fields.size();
    fields.insert(fields.end(), data_path.begin(), data_path.end());

    const std::vector<rvt::agent_metrics> described = {
            {{{"uid", "1000"},
              {"job_key", job_key},
              {"device", "rxe0"},
              {"port", "1"}},
             true,
             full}};
    const rvt::prometheus_page page = rvt::prometheus_text(described);
    EXPECT_TRUE(page.problems.empty()) << page.problems.front();
    const prometheus_test::page parsed = prometheus_test::parse(page.text);
    ASSERT_EQ(parsed.error, "") << page.text;

    std::set<std::string> expected = {rvt::agent_up_metric};
    size_t counters = 0, gauges = 0;
    for (size_t i = 0; i < fields.size(); ++i) {
        const rvt::status_field &f = fields[i];
        if (f.value.metric == rvt::metric_kind::none) {
            continue;
        }
        const std::string name = rvt::metric_name(f);
        const bool counter = f.value.metric == rvt::metric_kind::counter;
        counters += counter;
        gauges += !counter;
        EXPECT_TRUE(expected.insert(name).second) << name << " twice";
        const prometheus_test::family *fam = parsed.find(name);
        ASSERT_NE(fam, nullptr) << name << " (" << f.key << ") is no metric";
        EXPECT_EQ(fam->type, counter ? "counter" : "gauge") << name;
        EXPECT_EQ(counter, name.ends_with("_total")) << name;
        EXPECT_TRUE(fam->has_help && !fam->help.empty()) << name;
        ASSERT_EQ(fam->samples.size(), 1u) << name;
        EXPECT_EQ(fam->samples[0].labels,
                  (std::map<std::string, std::string>{{"uid", "1000"},
                                                      {"job_key", job_key},
                                                      {"device", "rxe0"},
                                                      {"port", "1"}}))
                << name;
        /* its value where the JSON has it: the header's at the top, the
         * engine's under data_path */
        std::string at = i < in_header ? "" : "/data_path";
        at += (f.object.empty() ? "" : "/" + std::string(f.object)) + "/" +
              std::string(f.key);
        ASSERT_TRUE(full.contains(json::json_pointer(at))) << at;
        EXPECT_EQ(fam->samples[0].value,
                  metric_value(full.at(json::json_pointer(at))))
                << name;
    }
    std::set<std::string> got;
    for (const auto &fam : parsed.families) {
        got.insert(fam.name);
    }
    EXPECT_EQ(got, expected);
    /* the lists are made of metrics for the most part; the names an
     * admin's alert would use are there */
    EXPECT_GE(counters, 50u);
    EXPECT_GE(gauges, 8u);
    for (const char *name :
         {"rvt_clients", "rvt_peers", "rvt_rc_qps", "rvt_qp_errors_total",
          "rvt_handshake_unauthenticated_total", "rvt_handshake_forged_total",
          "rvt_invalid_requests_total", "rvt_share_refused_ops_total",
          "rvt_delivered_write_bytes_total", "rvt_intake_times_full_total"}) {
        EXPECT_TRUE(got.contains(name)) << name;
    }
    /* what the page's numbers say: one client of this agent, its peers
     * (this node and b), one write sent */
    EXPECT_EQ(parsed.find("rvt_clients")->samples[0].value, 1);
    EXPECT_EQ(parsed.find("rvt_peers")->samples[0].value,
              static_cast<double>(full["data_path"]["peers"].size()));
    EXPECT_EQ(parsed.find(rvt::agent_up_metric)->samples[0].value, 1);
    /* the Q_Key is no metric, nor any other part of the address */
    for (const std::string &name : got) {
        EXPECT_EQ(name.find("qkey"), std::string::npos) << name;
        EXPECT_EQ(name.find("qpn"), std::string::npos) << name;
        EXPECT_EQ(name.find("gid"), std::string::npos) << name;
    }
}

/* A number of the status is a counter, a gauge or none by the field's
 * own word (status_value): the JSON and the text are the same whatever
 * it is. */
TEST_F(status_metrics, the_kind_of_a_field_changes_neither_json_nor_text)
{
    agent_node &a = add_agent({});
    const auto fields = a.engine->status_fields();
    EXPECT_EQ(rvt::status_object(fields), a.engine->status_json());
    for (const rvt::status_field &f : fields) {
        if (f.key == "ud_qkey" || f.key == "ud_qpn" || f.key == "num_qps") {
            EXPECT_EQ(f.value.metric, rvt::metric_kind::none) << f.key;
        }
    }
}

} // namespace
} // namespace engine_test

namespace {

using json = nlohmann::ordered_json;

rvt::agent_metrics described(json metrics, json rest = json::object(),
                             std::string uid = "7")
{
    rest["metrics"] = std::move(metrics);
    return {{{"uid", std::move(uid)}, {"job_key", "a\"b\\c\nd"}},
            true,
            std::move(rest)};
}

/* An agent's description is its user's process's word: what is not a
 * metric of rvt's is left out and named; label values are escaped as
 * the format says; an agent that did not answer is up 0, and one with no
 * description is up 1 with nothing else. */
TEST(prometheus_text, what_an_agent_describes_wrongly_is_left_out_named)
{
    const json rest = {{"n", 5}, {"list", {1, 2, 3}}, {"s", "text"}};
    const std::vector<rvt::agent_metrics> agents = {
            described({{"rvt_good_total",
                        {{"type", "counter"}, {"help", "h\\n"}, {"at", "/n"}}},
                       {"rvt_list", {{"type", "gauge"}, {"at", "/list"}}},
                       {"node_cpu", {{"type", "counter"}, {"at", "/n"}}},
                       {"rvt_Bad", {{"type", "counter"}, {"at", "/n"}}},
                       {"rvt_agent_up", {{"type", "gauge"}, {"at", "/n"}}},
                       {"rvt_histo", {{"type", "histogram"}, {"at", "/n"}}},
                       {"rvt_text", {{"type", "gauge"}, {"at", "/s"}}},
                       {"rvt_nowhere", {{"type", "gauge"}, {"at", "/x/y"}}},
                       {"rvt_badptr", {{"type", "gauge"}, {"at", "n"}}}},
                      rest),
            /* a second agent: the same family as another type */
            described({{"rvt_good_total", {{"type", "gauge"}, {"at", "/n"}}},
                       {"rvt_list", {{"type", "gauge"}, {"at", "/list"}}}},
                      rest, "6"),
            {{{"uid", "8"}}, false, nullptr},
            {{{"uid", "9"}}, true, json::object()},
            /* the first one's labels again: one series each */
            described({{"rvt_list", {{"type", "gauge"}, {"at", "/list"}}}},
                      rest)};
    const rvt::prometheus_page page = rvt::prometheus_text(agents);
    const prometheus_test::page parsed = prometheus_test::parse(page.text);
    ASSERT_EQ(parsed.error, "") << page.text;
    ASSERT_EQ(parsed.families.size(), 3u) << page.text;
    EXPECT_EQ(parsed.families[0].name, "rvt_agent_up");
    std::vector<double> up;
    for (const auto &s : parsed.families[0].samples) {
        up.push_back(s.value);
    }
    EXPECT_EQ(up, (std::vector<double>{1, 1, 0, 1}));
    const auto *good = parsed.find("rvt_good_total");
    ASSERT_NE(good, nullptr);
    EXPECT_EQ(good->type, "counter");
    EXPECT_EQ(good->help, "h\\\\n");
    ASSERT_EQ(good->samples.size(), 1u);
    EXPECT_EQ(good->samples[0].value, 5);
    EXPECT_EQ(good->samples[0].labels.at("job_key"), "a\"b\\c\nd");
    const auto *list = parsed.find("rvt_list");
    ASSERT_NE(list, nullptr);
    ASSERT_EQ(list->samples.size(), 2u);
    EXPECT_EQ(list->samples[0].value, 3);
    EXPECT_NE(page.text.find("job_key=\"a\\\"b\\\\c\\nd\""), std::string::npos)
            << page.text;

    std::string problems;
    for (const auto &p : page.problems) {
        problems += p + "\n";
    }
    for (const char *needle :
         {"'node_cpu'", "'rvt_Bad'", "'rvt_agent_up'", "'histogram'",
          "rvt_text at '/s': no number there",
          "rvt_nowhere at '/x/y': no number there",
          "rvt_badptr at 'n': no number there",
          "rvt_good_total is a gauge here, a counter before: left out",
          "{uid=\"9\"}: its status describes no metrics",
          "{uid=\"7\",job_key=\"a\\\"b\\\\c\\nd\"}: the labels of an agent "
          "before it: left out"}) {
        EXPECT_NE(problems.find(needle), std::string::npos)
                << needle << " not in:\n"
                << problems;
    }
    EXPECT_EQ(page.problems.size(), 10u) << problems;
}

} // namespace
