#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The multi-node data-path tests of rvtd (traffic-guest.sh) in a 3-node
# testbed; exits with the guest script's status, 1 when a check failed.
# Usage: test/testbed/traffic.sh [BUILD_DIR]   (default: build)
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=${1:-build}
need_built "$build" "make check" \
    test/gtest/integration/rvt_traffic_client || exit 1
contrib/testbed/testbed run -n 3 -t 600 "test/testbed/traffic-guest.sh $build"
