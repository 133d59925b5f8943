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
using rvt::status_field;

const std::vector<status_field> fields = {
        {"", "gid", "address", "GID", "", "fe80::1"},
        {"pool", "posted", "receive", "buffers posted", "", 3},
        {"", "late", "peers", "late completions", "", 0},
        {"pool", "size", "receive", "each", "bytes", 8192},
        {"", "auth", "auth", "", "", "munge", "MUNGE, socket /run/munge"},
        {"", "hidden", "", "never shown", "", 7},
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
    const std::vector<status_field> f = {{"", "index", "peer", "", "", 2},
                                         {"", "loopback", "peer", "(this node)",
                                          "", true},
                                         {"", "ud_qpn", "", "UD QPN", "", 17},
                                         {"", "ops", "peer", "ops", "", 5},
                                         {"", "last_error", "peer",
                                          "last error:", "", ""}};
    EXPECT_EQ(rvt::status_row("peer", f), "  peer 2  (this node)  ops 5\n");
}

} // namespace
