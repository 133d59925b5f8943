/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvtd's settings table (tools/rvtd_settings.h) held to what it claims,
 * so that a row cannot drift from its struct, its bounds or its texts:
 *
 *   defaults   each default --help shows is the struct's, within the
 *              bounds, and parsed back gives the same value;
 *   bounds     each bound is accepted and reaches the member unchanged
 *              (the member's type holds it), one past it is refused by a
 *              message naming the range; the bounds that are constants of
 *              the wire or the layout are those constants;
 *   members    each row fills a member of its own (setting one changes no
 *              other row's value), in the config struct the agent is
 *              given, and derive() keeps it;
 *   texts      no help text writes a range of its own: --help's is made
 *              from the bounds; --help and the manual page list the
 *              table's rows, in its order.
 */
#include "uct/ib/rvt/tools/rvtd_settings.h"

#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/conn_wire.h"
#include "uct/ib/rvt/common/imm.h"
#include "uct/ib/rvt/common/shm_layout.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

using namespace rvt;
using tools::rvtd_config;
using tools::rvtd_settings;
using tools::setting;

namespace {

const setting &row(std::string_view name)
{
    for (const auto &s : rvtd_settings) {
        if (s.name == name) {
            return s;
        }
    }
    throw std::runtime_error("no setting " + std::string(name));
}

/* The config after --NAME=v, and what set() said. */
std::string set(rvtd_config &c, std::string_view name, const std::string &v)
{
    const setting &s = row(name);
    return s.set(s, c, v);
}

rvtd_config derived(rvtd_config c)
{
    tools::derive(c);
    return c;
}

/* A value of s's other than its default, which set() accepts. */
std::string other_value(const setting &s)
{
    const std::string dflt = s.show(rvtd_config{});
    switch (s.what) {
    case setting::kind::flag:
        return "";
    case setting::kind::number:
        return std::to_string(dflt == std::to_string(s.hi) ? s.lo : s.hi);
    case setting::kind::text:
        return "/elsewhere";
    case setting::kind::mode:
        for (const char *m :
             {"none", "fifo:10", "munge", "normal", "auto", "3"}) {
            rvtd_config c;
            if (s.set(s, c, m).empty() && s.show(c) != dflt) {
                return m;
            }
        }
    }
    ADD_FAILURE() << "--" << s.name << ": no value other than its default";
    return {};
}

/* What a program wrote into `out` through `write`. */
template<class F> std::string written(F write)
{
    char *buf    = nullptr;
    size_t len   = 0;
    std::FILE *f = open_memstream(&buf, &len);
    write(f);
    std::fclose(f);
    std::string text(buf, len);
    std::free(buf);
    return text;
}

std::vector<std::string> matches(const std::string &text, const std::regex &re)
{
    std::vector<std::string> out;
    for (std::sregex_iterator i(text.begin(), text.end(), re), end; i != end;
         ++i) {
        out.push_back((*i)[1]);
    }
    return out;
}

} // namespace

TEST(rvtd_settings, each_default_is_within_its_bounds_and_parses_back_to_itself)
{
    const rvtd_config defaults{};
    for (const auto &s : rvtd_settings) {
        SCOPED_TRACE("--" + std::string(s.name));
        const std::string dflt = s.show(defaults);
        if (s.what == setting::kind::flag) {
            EXPECT_EQ(dflt, "") << "a flag is off unless given";
            continue;
        }
        if (s.what == setting::kind::number) {
            ASSERT_LT(s.lo, s.hi);
            const long v = std::stol(dflt);
            EXPECT_LE(s.lo, v);
            EXPECT_LE(v, s.hi);
        }
        rvtd_config c;
        EXPECT_EQ(s.set(s, c, dflt), "");
        EXPECT_EQ(s.show(c), dflt);
        EXPECT_EQ(tools::default_text(s), dflt.empty() ? s.none : dflt);
    }
}

TEST(rvtd_settings,
     each_bound_reaches_its_member_unchanged_and_one_past_is_refused)
{
    for (const auto &s : rvtd_settings) {
        if (s.what != setting::kind::number) {
            continue;
        }
        SCOPED_TRACE("--" + std::string(s.name));
        const std::string range = "expected a whole number from " +
                                  std::to_string(s.lo) + " to " +
                                  std::to_string(s.hi);
        for (long v : {s.lo, s.hi}) {
            rvtd_config c;
            EXPECT_EQ(s.set(s, c, std::to_string(v)), "");
            EXPECT_EQ(s.show(c), std::to_string(v))
                    << "the member cannot hold the bound";
        }
        for (long v : {s.lo - 1, s.hi + 1}) {
            rvtd_config c;
            EXPECT_EQ(s.set(s, c, std::to_string(v)),
                      "--" + std::string(s.name) + "=" + std::to_string(v) +
                              ": " + range);
            EXPECT_EQ(s.show(c), s.show(rvtd_config{})) << "changed anyway";
        }
        rvtd_config c;
        EXPECT_NE(s.set(s, c, "12x"), "");
        EXPECT_NE(s.set(s, c, ""), "");
    }
}

/* The bounds the wire and the layout set are theirs: a new limit there is
 * a new limit here, and the message says it. */
TEST(rvtd_settings, the_bounds_of_the_wire_and_the_layout_are_their_constants)
{
    struct bound {
        const char *name;
        long lo, hi;
    };
    const bound bounds[] = {
            {"num-qps", 1, wire::conn::max_qps},
            {"max-clients", 1, imm::max_clients},
            {"max-client-siblings", 0, imm::max_clients - 1},
            {"am-size", min_inbound_slot, max_inbound_slot},
            {"inline-size", min_work_inline, max_work_inline},
            {"max-socket-read", wire::max_message_size, 1 << 24},
    };
    for (const auto &b : bounds) {
        SCOPED_TRACE(b.name);
        rvtd_config c;
        EXPECT_EQ(set(c, b.name, std::to_string(b.hi + 1)),
                  "--" + std::string(b.name) + "=" + std::to_string(b.hi + 1) +
                          ": expected a whole number from " +
                          std::to_string(b.lo) + " to " + std::to_string(b.hi));
        EXPECT_EQ(set(c, b.name, std::to_string(b.lo - 1)),
                  "--" + std::string(b.name) + "=" + std::to_string(b.lo - 1) +
                          ": expected a whole number from " +
                          std::to_string(b.lo) + " to " + std::to_string(b.hi));
        EXPECT_NE(tools::help_text(row(b.name))
                          .find("(" + tools::range_text(b.lo, b.hi) + ")"),
                  std::string::npos)
                << tools::help_text(row(b.name));
    }
}

/* --notify-fd names a descriptor a starter gave, never a standard stream;
 * none is the default */
TEST(rvtd_settings,
     notify_fd_takes_none_or_a_descriptor_past_the_standard_streams)
{
    rvtd_config c;
    EXPECT_EQ(set(c, "notify-fd", "3"), "");
    EXPECT_EQ(c.notify.fd, 3);
    EXPECT_EQ(set(c, "notify-fd", "none"), "");
    EXPECT_EQ(c.notify.fd, -1);
    for (const char *bad : {"2", "0", "-1", "x", "", "3x", "2147483648"}) {
        SCOPED_TRACE(bad);
        EXPECT_EQ(set(c, "notify-fd", bad),
                  "--notify-fd=" + std::string(bad) +
                          ": expected none or a descriptor number from 3 to "
                          "2147483647");
        EXPECT_EQ(c.notify.fd, -1);
    }
}

TEST(rvtd_settings, each_row_fills_a_member_of_its_own_that_derive_keeps)
{
    const rvtd_config base = derived(rvtd_config{});
    for (const auto &s : rvtd_settings) {
        SCOPED_TRACE("--" + std::string(s.name));
        EXPECT_EQ(s.show(base), s.show(rvtd_config{}))
                << "derive() changed a member this row names";
        const std::string v = other_value(s);
        rvtd_config c;
        ASSERT_EQ(s.set(s, c, v), "");
        const std::string shown = s.show(c);
        ASSERT_NE(shown, s.show(rvtd_config{}));
        c = derived(c);
        EXPECT_EQ(s.show(c), shown) << "derive() undid it";
        for (const auto &t : rvtd_settings) {
            if (&t != &s) {
                EXPECT_EQ(t.show(c), t.show(base))
                        << "--" << s.name << " changed --" << t.name
                        << ": two rows name one member";
            }
        }
    }
}

/* Options each fine alone that contradict each other: named, with what
 * was expected. */
TEST(rvtd_settings, contradicting_options_are_named)
{
    rvtd_config c;
    EXPECT_FALSE(tools::conflict(c)) << "the defaults agree";
    c.engine.shallow_sq_depth = c.nic.qp.sq_depth + 1;
    auto why                  = tools::conflict(c);
    ASSERT_TRUE(why);
    EXPECT_NE(why->find("--shallow-sq-depth=128: expected at most "
                        "--sq-depth (127)"),
              std::string::npos)
            << *why;
    c           = {};
    c.daemon    = true;
    c.notify.fd = 5;
    why         = tools::conflict(c);
    ASSERT_TRUE(why);
    EXPECT_NE(why->find("--daemon and --notify-fd exclude each other"),
              std::string::npos)
            << *why;
}

/* Where a few land: the structs assemble() and the nic are given. */
TEST(rvtd_settings, options_land_in_the_agents_config_structs)
{
    rvtd_config c;
    const auto opts    = tools::options_of(rvtd_settings, c);
    const char *argv[] = {
            "rvtd",           "--num-qps=8",        "--sq-depth=64",
            "--srq-size=512", "--max-clients=9",    "--am-size=4096",
            "--spin-us=20",   "--keepalive-ms=300", "--auth=none",
            "--linger=0",     "--notify-fd=5",      "--daemon"};
    tools::program_doc doc;
    doc.name = "rvtd";
    ASSERT_EQ(tools::parse(static_cast<int>(std::size(argv)),
                           const_cast<char **>(argv), doc, opts),
              tools::parsed::run);
    tools::derive(c);
    EXPECT_EQ(c.engine.peers.num_qps, 8u);
    EXPECT_EQ(c.nic.qp.sq_depth, 64u);
    EXPECT_EQ(c.nic.srq_size, 512u);
    EXPECT_EQ(c.attach.max_clients, 9u);
    EXPECT_EQ(c.caps.slot_size, 4096u);
    EXPECT_EQ(c.cpu.spin, std::chrono::microseconds(20));
    EXPECT_EQ(c.engine.peers.keepalive_interval,
              std::chrono::milliseconds(300));
    EXPECT_EQ(c.auth.choice, agent::auth_choice::none);
    EXPECT_EQ(c.linger, std::chrono::seconds(0));
    EXPECT_TRUE(c.daemon);
    EXPECT_EQ(c.notify.fd, 5);
    /* derive(): what no one option states */
    EXPECT_EQ(c.nic.buffer_size, 4096u);
    EXPECT_EQ(c.nic.inline_size, c.caps.inline_size);
    EXPECT_EQ(c.nic.cq_size, 512u + 16 * 64 * 8);
    EXPECT_EQ(c.engine.peers.keepalive_timeout, std::chrono::milliseconds(600));
}

TEST(rvtd_settings, no_help_text_writes_a_range_its_bounds_do_not_give)
{
    /* "(1-16)", "(64-65536", "(1 to 255": a range, opening a parenthesis */
    const std::regex range(R"(\(\s*-?[0-9]+\s*(-|to)\s*-?[0-9]+)");
    for (const auto &s : rvtd_settings) {
        SCOPED_TRACE("--" + std::string(s.name));
        const std::string help(s.help);
        EXPECT_FALSE(std::regex_search(help, range)) << help;
        const std::string shown = tools::help_text(s);
        if (s.what == setting::kind::number) {
            EXPECT_EQ(shown, help + " (" + tools::range_text(s.lo, s.hi) + ")");
        } else {
            EXPECT_EQ(shown, help);
        }
    }
}

TEST(rvtd_settings, help_and_manual_page_list_the_tables_rows_in_its_order)
{
    rvtd_config c;
    const auto opts = tools::options_of(rvtd_settings, c);
    tools::program_doc doc;
    doc.name    = "rvtd";
    doc.section = 8;
    std::vector<std::string> names;
    for (const auto &s : rvtd_settings) {
        names.emplace_back(s.name);
    }
    names.emplace_back("help");
    const std::string help = written(
            [&](std::FILE *f) { tools::write_help(f, doc, opts); });
    const std::string page = written(
            [&](std::FILE *f) { tools::write_man(f, doc, opts); });
    EXPECT_EQ(matches(help, std::regex(R"(\n  --([a-z0-9-]+))")), names);
    EXPECT_EQ(matches(page,
                      std::regex(R"(\.TP\n\\fB\\-\\-([a-z0-9\\-]+)\\fR)")),
              [&] {
                  std::vector<std::string> roff;
                  for (const auto &n : names) {
                      roff.push_back(
                              std::regex_replace(n, std::regex("-"), "\\-"));
                  }
                  return roff;
              }());
    /* a number's row: its range, then the struct's default (the lines
     * --help wraps joined) */
    const std::string joined = std::regex_replace(help, std::regex("\n {6,}"),
                                                  " ");
    EXPECT_NE(joined.find("K: shared RC QPs per remote node (1-" +
                          std::to_string(wire::conn::max_qps) + ") (default: " +
                          std::to_string(agent::peer_config{}.num_qps) + ")"),
              std::string::npos)
            << joined;
}
