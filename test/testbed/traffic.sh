#!/bin/bash
# The multi-node data-path tests of rvtd (traffic-guest.sh) in a 3-node
# testbed. Usage: test/testbed/traffic.sh [BUILD_DIR]   (default: build)
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 125
build=${1:-build}
[ -x "$build/test/gtest/integration/rvt_traffic_client" ] ||
    { echo "FAIL: $build/test/gtest/integration/rvt_traffic_client not built (make check)"; exit 1; }
contrib/testbed/testbed run -n 3 -t 600 "test/testbed/traffic-guest.sh $build"
