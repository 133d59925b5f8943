/* SPDX-License-Identifier: BSD-3-Clause */
#include "test_paths.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace rvt::test {
std::string client_path;
std::string departure_peer_path;
std::string rvtd_path;
std::string status_path;
} // namespace rvt::test

namespace {
std::string env_or(const char *name, const std::string &dflt)
{
    const char *v = std::getenv(name);
    return (v != nullptr && *v != '\0') ? v : dflt;
}
} // namespace

int main(int argc, char **argv)
{
    ::testing::InitGoogleTest(&argc, argv);
    std::string self               = argv[0];
    std::string dir                = self.substr(0, self.find_last_of('/') + 1);
    rvt::test::client_path         = env_or("RVT_SHARED_PD_CLIENT",
                                            dir + "integration/shared_pd_client");
    rvt::test::departure_peer_path = env_or(
            "RVT_UCP_DEPARTURE_PEER", dir + "integration/ucp_departure_peer");
    rvt::test::rvtd_path = env_or("RVTD",
                                  dir + "../../src/uct/ib/rvt/tools/rvtd");
    rvt::test::status_path =
            env_or("RVT_STATUS", dir + "../../src/uct/ib/rvt/tools/rvt-status");
    return RUN_ALL_TESTS();
}
