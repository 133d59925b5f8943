#!/bin/bash
# Integration tests with real verbs (test/gtest/rvt_integration_tests, built
# by `make check`), run on node 1 of the testbed. Prints PASS/FAIL per test
# case; a test that skips here (no device) counts as failed, since the
# testbed always has one.
# Usage: test/testbed/integration.sh [BUILD_DIR]   (default: build)
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 125
build=${1:-build}
bin=$build/test/gtest/rvt_integration_tests
[ -x "$bin" ] || { echo "FAIL: $bin not built (run make check first)"; exit 1; }
contrib/testbed/testbed run -n 2 -t 600 "on 1 $bin" |
    awk '{ print }
         /^\[       OK \]/ { print "PASS: " $4 }
         /^\[  FAILED  \] [^ ]+ \(/ { print "FAIL: " $4 }
         /^\[  SKIPPED \] [^ ]+ \(/ { print "FAIL: " $4 " skipped: no device in the testbed?" }'
