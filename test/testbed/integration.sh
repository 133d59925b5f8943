#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Integration tests with real verbs (test/gtest/rvt_integration_tests, built
# by `make check`), run on node 1 of the testbed. Prints PASS/FAIL per test
# case; a test that skips here (no device) counts as failed, since the
# testbed always has one. Exits 1 if any test case failed or the run did.
# Usage: test/testbed/integration.sh [BUILD_DIR [GTEST_FILTER]]
#   (default: build, every test)
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=${1:-build}
bin=$build/test/gtest/rvt_integration_tests
[ -x "$bin" ] || { fail "$bin not built (run make check first)"; exit 1; }

# lastpipe: gtest_verdicts runs in this shell, so its counts are finish's
shopt -s lastpipe
filter=${2:+ --gtest_filter=$2}
# the bound is a hang guard: the suite takes 5 to 9 minutes alone, and CI
# runs it beside another suite (contrib/run-tests.sh, lanes)
contrib/testbed/testbed run -n 2 -t 1500 "on 1 $bin$filter" | gtest_verdicts
rc=${PIPESTATUS[0]}
# a run that failed with no failed test case to show for it (a crash, a
# timeout) is one failure, as contrib/run-tests.sh counts it
if [ "$rc" != 0 ] && [ "$checks_failed" = 0 ]; then
    fail "the testbed run exited $rc with no failed test case (crashed, timed out?)"
fi
finish integration
