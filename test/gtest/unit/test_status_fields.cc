/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The status's two renderings from one list of fields
 * (common/status_fields.h): where each field lands in the JSON, and what
 * the text for people shows of it.
 */
#include "uct/ib/rvt/common/status_fields.h"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace {

using json = nlohmann::ordered_json;
using rvt::status_counter;
using rvt::status_field;
using rvt::status_gauge;
using rvt::status_number;

const std::vector<status_field> fields = {
        {"", "gid", "address", "GID", "", "fe80::1"},
        {"pool", "posted", "receive", "buffers posted", "", status_gauge(3)},
        {"", "late", "peers", "late completions", "", status_counter(0)},
        {"pool", "size", "receive", "each", "bytes", status_number(8192)},
        {"", "auth", "auth", "", "", "munge", "MUNGE, socket /run/munge"},
        {"", "hidden", "", "never shown", "", status_counter(7)},
        {"", "intake", "intake", "", "", nullptr},
        {"", "error", "peers", "last error:", "", ""},
        {"", "paused", "peers", "paused", "", false},
        {"", "lanes", "peers", "in flight by lane", "", json::array({1, 2})}};

TEST(status_fields, the_json_nests_each_field_under_its_object_in_order)
{
    const json s = rvt::status_object(fields);
    EXPECT_EQ(s.dump(), "{\"gid\":\"fe80::1\",\"pool\":{\"posted\":3,"
                        "\"size\":8192},\"late\":0,\"auth\":\"munge\","
                        "\"hidden\":7,\"intake\":null,\"error\":\"\","
                        "\"paused\":false,\"lanes\":[1,2]}");
}

TEST(status_fields, the_text_shows_its_lines_in_their_order_with_units)
{
    const std::string_view lines[] = {"auth", "receive", "intake", "address",
                                      "peers"};
    EXPECT_EQ(rvt::status_lines(lines, fields),
              "auth      MUNGE, socket /run/munge\n"
              "receive   buffers posted 3, each 8192 bytes\n"
              "address   GID fe80::1\n"
              "peers     late completions 0, in flight by lane [1,2]\n");
}

TEST(status_fields, a_true_flag_shows_its_label_and_a_long_line_name_a_space)
{
    const std::vector<status_field> f = {{"", "paused", "handshakes", "paused",
                                          "", true},
                                         {"", "error", "handshakes",
                                          "last error:", "", "gone"}};
    const std::string_view lines[]    = {"handshakes"};
    EXPECT_EQ(rvt::status_lines(lines, f),
              "handshakes paused, last error: gone\n");
}

TEST(status_fields, a_row_shows_its_fields_two_spaces_apart)
{
    const std::vector<status_field> f = {{"", "index", "peer", "", "",
                                          status_number(2)},
                                         {"", "loopback", "peer", "(this node)",
                                          "", true},
                                         {"", "ud_qpn", "", "UD QPN", "",
                                          status_number(17)},
                                         {"", "ops", "peer", "ops", "",
                                          status_counter(5)},
                                         {"", "last_error", "peer",
                                          "last error:", "", ""}};
    EXPECT_EQ(rvt::status_row("peer", f), "  peer 2  (this node)  ops 5\n");
}

/* The counters and gauges, and only they, are described as metrics: by
 * name (rvt_, object, key, _total after a counter), with their kind, a
 * help from the text's words and where the value is in the JSON; an
 * array's gauge is found where the array is. */
TEST(status_fields, the_metrics_are_the_counters_and_gauges_with_their_place)
{
    EXPECT_EQ(rvt::status_metrics(fields, "/data_path").dump(),
              "{\"rvt_pool_posted\":{\"type\":\"gauge\",\"help\":"
              "\"receive: buffers posted\",\"at\":\"/data_path/pool/posted\"},"
              "\"rvt_late_total\":{\"type\":\"counter\",\"help\":"
              "\"peers: late completions\",\"at\":\"/data_path/late\"},"
              "\"rvt_hidden_total\":{\"type\":\"counter\",\"help\":"
              "\"never shown\",\"at\":\"/data_path/hidden\"}}");
    const std::vector<status_field> f = {
            {"", "clients", "clients", "", "attached",
             status_gauge(json::array({1, 2}))},
            {"", "written", "delivered", "written", "bytes",
             status_counter(uint64_t{1} << 40)},
            {"", "port", "device", "port", "", status_number(1)}};
    const json m = rvt::status_metrics(f);
    EXPECT_EQ(m.dump(), "{\"rvt_clients\":{\"type\":\"gauge\",\"help\":"
                        "\"clients (attached)\",\"at\":\"/clients\"},"
                        "\"rvt_written_total\":{\"type\":\"counter\","
                        "\"help\":\"delivered: written (bytes)\",\"at\":"
                        "\"/written\"}}");
    /* the JSON and the text do not change with a field's kind */
    EXPECT_EQ(rvt::status_object(f).dump(),
              "{\"clients\":[1,2],\"written\":1099511627776,\"port\":1}");
}

} // namespace
