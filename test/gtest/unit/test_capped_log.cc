/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of rvtd's capped log (tools/capped_log.h), one or more per
 * row of its table, on a file in a temporary directory (no device, no
 * rvtd): lines appended, the restart at the cap and what it writes, the
 * kept lines, other writers' bytes, and a descriptor that is no file.
 */
#include "uct/ib/rvt/tools/capped_log.h"

#include "uct/ib/rvt/common/unique_fd.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using rvt::unique_fd;
using rvt::tools::capped_log;

namespace {

std::string framed(std::string_view m)
{
    return "T " + std::string(m) + "\n";
}

class capped_log_test : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/rvt-capped-log.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        m_dir  = tmpl;
        m_path = m_dir + "/agent.log";
        /* as daemon.h opens it */
        m_fd.reset(::open(m_path.c_str(),
                          O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
        ASSERT_TRUE(m_fd);
    }
    void TearDown() override
    {
        m_fd.reset();
        std::filesystem::remove_all(m_dir);
    }

    std::string contents() const
    {
        std::ifstream in(m_path);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }
    uint64_t size() const
    {
        return std::filesystem::file_size(m_path);
    }
    /* A message that frames to exactly `bytes` bytes. */
    static std::string message_of(size_t bytes, char c = 'x')
    {
        return std::string(bytes - framed("").size(), c);
    }

    std::string m_dir, m_path;
    unique_fd m_fd;
};

TEST_F(capped_log_test, lines_that_fit_are_appended_as_they_come)
{
    std::ofstream(m_path) << "before\n";
    capped_log log(m_fd.get(), 1000, framed);
    log.write("one");
    log.write("two");
    EXPECT_EQ(contents(), "before\nT one\nT two\n");
    EXPECT_EQ(log.restarts(), 0u);
}

TEST_F(capped_log_test, a_line_past_the_cap_restarts_the_file_saying_so)
{
    capped_log log(m_fd.get(), 400, framed);
    log.write(message_of(150, 'Q'));
    log.write(message_of(150, 'Z'));
    ASSERT_EQ(size(), 300u);
    log.write(message_of(150, 'c')); /* 450: past the cap */
    EXPECT_EQ(log.restarts(), 1u);
    const std::string text = contents();
    EXPECT_EQ(text.rfind("T log: restarted: the file had 300 bytes and the "
                         "next line (150 bytes) would take it past "
                         "--max-log-size (400 bytes): the lines before are "
                         "gone (restart 1)\n",
                         0),
              0u)
            << text;
    EXPECT_EQ(text.find('Q'), text.npos) << "the old lines are gone";
    EXPECT_EQ(text.find('Z'), text.npos);
    EXPECT_NE(text.find(message_of(150, 'c') + "\n"), text.npos)
            << "the line that did not fit comes after";
    EXPECT_LE(size(), 400u);
}

TEST_F(capped_log_test, kept_lines_are_written_again_after_each_restart)
{
    capped_log log(m_fd.get(), 600, framed);
    log.write_kept("serving job 'j' on rxe0:1");
    for (int i = 0; i < 40; ++i) {
        log.write(message_of(100, static_cast<char>('a' + i % 26)));
    }
    ASSERT_GE(log.restarts(), 2u);
    const std::string text = contents();
    const size_t note      = text.find("log: restarted");
    const size_t kept      = text.find("T serving job 'j' on rxe0:1\n");
    ASSERT_EQ(note, 2u) << text;
    EXPECT_GT(kept, note) << "after the restart line: " << text;
    EXPECT_EQ(text.find("serving", kept + 3), text.npos) << "kept once";
    EXPECT_LE(size(), 600u);
}

TEST_F(capped_log_test, at_most_max_kept_lines_are_kept_the_oldest_dropped)
{
    capped_log log(m_fd.get(), 4000, framed);
    for (size_t i = 0; i <= capped_log::max_kept; ++i) {
        log.write_kept("kept " + std::to_string(i));
    }
    log.write(message_of(3950));
    ASSERT_EQ(log.restarts(), 1u);
    const std::string text = contents();
    EXPECT_EQ(text.find("T kept 0\n"), text.npos) << text;
    EXPECT_NE(text.find("T kept 1\n"), text.npos) << text;
    EXPECT_NE(text.find("T kept " + std::to_string(capped_log::max_kept)),
              text.npos)
            << text;
}

/* However much is written, the file never passes its cap, and its last
 * line is the last one written. */
TEST_F(capped_log_test, the_file_never_passes_its_cap)
{
    capped_log log(m_fd.get(), 4096, framed);
    for (int i = 0; i < 5000; ++i) {
        log.write("a flood line " + std::to_string(i));
        ASSERT_LE(size(), 4096u) << "after line " << i;
    }
    EXPECT_GT(log.restarts(), 20u);
    const std::string text = contents();
    EXPECT_EQ(text.substr(text.size() - 20), "T a flood line 4999\n");
}

TEST_F(capped_log_test, a_line_larger_than_the_cap_alone_is_cut_to_fit)
{
    capped_log log(m_fd.get(), 300, framed);
    log.write("first");
    log.write(message_of(1000));
    EXPECT_EQ(log.restarts(), 1u);
    EXPECT_EQ(size(), 300u);
    const std::string text = contents();
    EXPECT_EQ(text.back(), '\n') << "still a line";
}

/* Another writer to the file (a library's warning on stderr) counts
 * towards the cap. */
TEST_F(capped_log_test, other_writers_bytes_count)
{
    capped_log log(m_fd.get(), 500, framed);
    log.write("ours");
    const std::string theirs(450, 'Q');
    ASSERT_EQ(::write(m_fd.get(), theirs.data(), theirs.size()),
              static_cast<ssize_t>(theirs.size()));
    log.write(message_of(100));
    EXPECT_EQ(log.restarts(), 1u);
    EXPECT_EQ(contents().find('Q'), std::string::npos);
}

/* A descriptor opened without O_APPEND (a shell's `>`): after the
 * restart the file starts at its beginning, with no hole. */
TEST_F(capped_log_test, a_descriptor_without_append_restarts_at_the_start)
{
    unique_fd plain(::open(m_path.c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(plain);
    capped_log log(plain.get(), 300, framed);
    for (int i = 0; i < 5; ++i) {
        log.write(message_of(100));
    }
    EXPECT_GE(log.restarts(), 1u);
    EXPECT_LE(size(), 300u);
    EXPECT_EQ(contents().rfind("T log: restarted", 0), 0u) << contents();
}

/* rvtd in the foreground writes to a terminal or a pipe: there is nothing
 * to truncate, and every line goes out. */
TEST_F(capped_log_test, no_regular_file_no_cap)
{
    int p[2];
    ASSERT_EQ(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    unique_fd r(p[0]), w(p[1]);
    capped_log log(w.get(), 100, framed);
    for (int i = 0; i < 20; ++i) {
        log.write(message_of(50));
    }
    std::vector<char> buf(4096);
    const ssize_t n = ::read(r.get(), buf.data(), buf.size());
    EXPECT_EQ(n, 20 * 50);
    EXPECT_EQ(log.restarts(), 0u);
}

} // namespace
