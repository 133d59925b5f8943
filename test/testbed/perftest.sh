#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# ucx_perftest over rvt next to rc_verbs, UCT and UCP level, in a 2-node
# testbed (perftest-guest.sh says what runs and what is checked); exits
# with the guest script's status, 1 when a check failed.
# Usage: test/testbed/perftest.sh [BUILD_DIR]   (default: build)
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=${1:-build}
perf_prerequisites "$build" || exit 1
started=$SECONDS
contrib/testbed/testbed run -n 2 -t 1200 "test/testbed/perftest-guest.sh $build"
rc=$?
echo "perftest suite: $((SECONDS - started)) s of testbed time, boot included"
exit $rc
