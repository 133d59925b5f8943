#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX's own UCT test suite, as a conformance suite for rvt
# (docs/testing.md, "Conformance: UCX's own UCT tests"): the generic UCT
# test groups, rvt beside rc_verbs on one testbed node
# (conformance-guest.sh says what is checked). Builds the suite first
# (contrib/ucx-gtest.sh: once, about 25 minutes, cached outside the clone).
#
#   test/testbed/conformance.sh [BUILD_DIR]          the groups CI runs
#   test/testbed/conformance.sh [BUILD_DIR] --all    every group rvt is
#                                                    instantiated in (hours
#                                                    under the emulator)
#   test/testbed/conformance.sh [BUILD_DIR] GROUP... those groups
#
# Exits 1 if any check failed.
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=${1:-build}
shift $(($# > 0 ? 1 : 0))

# What CI runs: the groups that cover the MD, the data path, pending,
# flush, fence, events, endpoints and peer failure, the keepalive
# included. Left to --all: the many-to-one and mixed groups (long under
# the emulator).
ci_groups=(
    test_md
    uct_p2p_rma_test
    uct_p2p_am_test
    uct_p2p_am_misc
    uct_p2p_am_alignment
    uct_p2p_err_test
    uct_amo_cswap_test
    uct_amo_add_xor_test
    uct_amo_fadd_fxor_test
    test_uct_pending
    uct_flush_test
    uct_fence_test
    uct_cancel_test
    test_zcopy_comp
    test_uct_progress
    test_uct_query
    test_uct_event
    test_uct_peer_failure_keepalive
    test_uct_peer_failure
    test_uct_peer_failure_multiple
    test_uct_ep
)

if [ $# = 0 ]; then
    set -- "${ci_groups[@]}"
fi
conformance_leg "$build" conformance test/testbed/conformance-guest.sh "$@"
