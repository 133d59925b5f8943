#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX's own UCP tests over rvt (docs/testing.md, "Conformance: UCX's own
# UCP tests"): the UCP groups of ucp-conformance-guest.sh for rc_v, rvt
# and ud_v,rvt on one testbed node, each rvt row's pass list compared
# with rc_v's. Builds the suite first (contrib/ucx-gtest.sh: once, cached
# outside the clone; the UCT conformance suite's program, with the UCP
# files added).
#
#   test/testbed/ucp-conformance.sh [BUILD_DIR]               the groups CI
#                                                             runs, CI's cases
#   test/testbed/ucp-conformance.sh [BUILD_DIR] --every-case  every case of
#                                                             those groups
#   test/testbed/ucp-conformance.sh [BUILD_DIR] [--every-case] GROUP...
#
# Exits 1 if any check failed.
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=${1:-build}
shift $(($# > 0 ? 1 : 0))
every=()
if [ "${1:-}" = --every-case ]; then
    every=(--every-case)
    shift
fi

# The 11 UCP groups the suite runs (docs/testing.md says what each costs
# under the emulator): peer failure, tag matching and AM (eager and
# rendezvous), RMA, memory mapping, atomics, streams, wireup with peer
# error handling, fence.
ci_groups=(
    test_ucp_peer_failure
    test_ucp_tag_match
    test_ucp_tag_match_rndv
    test_ucp_am_nbx
    test_ucp_am_nbx_rndv
    test_ucp_rma
    test_ucp_mmap
    test_ucp_atomic64
    test_ucp_stream
    test_ucp_wireup_errh_peer
    test_ucp_fence64
)

if [ $# = 0 ]; then
    set -- "${ci_groups[@]}"
fi
conformance_leg "$build" ucp-conformance test/testbed/ucp-conformance-guest.sh \
    "${every[@]}" "$@"
