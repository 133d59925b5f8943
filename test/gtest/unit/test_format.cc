/* SPDX-License-Identifier: BSD-3-Clause */
/* format(): printf into a std::string, of any length. */
#include "uct/ib/rvt/common/format.h"

#include <gtest/gtest.h>

#include <string>

using rvt::format;

TEST(format, short_and_long_results_are_whole)
{
    EXPECT_EQ(format("%s=%d", "x", 42), "x=42");
    const std::string long_text(5000, 'a');
    const std::string out = format("[%s]%u", long_text.c_str(), 7u);
    ASSERT_EQ(out.size(), long_text.size() + 3);
    EXPECT_EQ(out.front(), '[');
    EXPECT_EQ(out.substr(out.size() - 2), "]7");
}
