/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where the integration tests find the programs they start: next to the
 * test binary in the build tree, or where RVT_SHARED_PD_CLIENT / RVT_UCP_DEPARTURE_PEER / RVTD / RVT_STATUS say.
 */
#ifndef RVT_TEST_PATHS_H
#define RVT_TEST_PATHS_H

#include <string>

namespace rvt::test {
extern std::string client_path; /* integration/shared_pd_client */
extern std::string departure_peer_path; /* integration/ucp_departure_peer */
extern std::string rvtd_path; /* src/uct/ib/rvt/tools/rvtd */
extern std::string status_path; /* src/uct/ib/rvt/tools/rvt-status */
} // namespace rvt::test

#endif
