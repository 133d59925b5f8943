/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine's side of the MR registry (agent/engine/mr_registry.h) for
 * tests that have no engine: runs a list of mr_actions in order as
 * engine::run_mrs does, through the test's own device, socket and log.
 * A deregister's outcome goes back to the registry at once (its actions
 * run next); find_unannounced, which tick() returns alone, is answered at
 * once with what `find` says (the engine's sweep).
 *
 * Used by test_mr_registry.cc, test_attach_server.cc and the integration
 * test test_shared_pd.cc.
 */
#ifndef RVT_TEST_GTEST_UNIT_MR_DRIVER_H
#define RVT_TEST_GTEST_UNIT_MR_DRIVER_H

#include "uct/ib/rvt/agent/engine/mr_registry.h"

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace rvt::test {

struct mr_driver {
    using answer_fn = std::function<void(uint32_t index, uint32_t handle,
                                         const std::string &refusal)>;

    std::function<result<uint32_t>(uint32_t handle)> dereg;
    answer_fn answer; /* answer_release (refusal empty: released) */
    std::function<void(std::string_view)> log;
    /* find_unannounced: the MRs of the agent's PD it may not know of */
    std::function<std::vector<agent::client_mr>()> find;
    answer_fn answer_announce; /* unset: the answer is dropped */

    void run(agent::mr_registry &reg, agent::mr_actions acts) const
    {
        using kind = agent::mr_action_kind;
        while (!acts.empty()) {
            const agent::mr_action a = acts.front();
            acts.erase(acts.begin());
            agent::mr_actions more;
            if (a.kind == kind::deregister) {
                more = reg.deregistered(a.handle, dereg(a.handle));
            } else if (a.kind == kind::find_unannounced) {
                more = reg.unannounced(find ? find() :
                                              std::vector<agent::client_mr>{});
            } else if (a.kind == kind::note) {
                log(a.text);
            } else if (a.kind == kind::answer_release) {
                answer(a.index, a.handle, a.text);
            } else if (answer_announce) {
                answer_announce(a.index, a.handle, a.text);
            }
            acts.insert(acts.begin(), more.begin(), more.end());
        }
    }
};

} // namespace rvt::test

#endif
