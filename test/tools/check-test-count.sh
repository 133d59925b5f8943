#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# contrib/test-count.sh, how contrib/run-tests.sh counts a suite: each
# way a count could say more than happened (a suite that ran no check, a
# crash with no failure line, a skip with no reason, a gtest binary
# counted beside its cases, a stale log) is fed in and must be counted
# as a failure or left out.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=contrib/test-count.sh
. "$top/contrib/test-count.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/rvt-check-test-count.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
bad=0
# expect DESCRIPTION WANT RC < LOG: count_log's last line is WANT
expect() {
    local what=$1 want=$2 rc=$3 got
    cat >"$work/log"
    got=$(count_log "$work/log" "$rc" | tail -n 1)
    if [ "$got" = "$want" ]; then
        echo "ok: $what ($got)"
    else
        echo "not ok: $what: counted '$got', expected '$want'"
        count_log "$work/log" "$rc" | sed 's/^/    /'
        bad=1
    fi
}

printf 'PASS: a\nPASS: b\nfigure: 3 us\n' | expect "two passes" "2 0 0" 0
printf 'PASS: a\nFAIL: b\n' | expect "a failure" "1 1 0" 1
printf 'PASS: a\nERROR: b\nXPASS: c\n' | expect "automake's ERROR and XPASS fail" "1 2 0" 1
printf 'some output\n' | expect "exit 0 with no PASS line: no check ran" "0 1 0" 0
printf 'PASS: a\nSegmentation fault\n' | expect "exit 1 with no FAIL line" "1 1 0" 1
printf 'FIGURE: 3.2 us\nFIGURE: 1.1 GB/s\n' | expect "figures are no test" "0 1 0" 0
printf 'PASS: a\nSKIP: test/fuzz/run-fuzz.sh\n' |
    expect "a skip no reason covers fails" "1 1 1" 0
count_uid=0
printf 'PASS: a\nSKIP: unit attach_server.other_user\n' |
    expect "a root-only case skipped under root fails" "1 1 1" 0
count_uid=1000
printf 'PASS: a\nSKIP: unit attach_server.other_user\n' |
    expect "a root-only case skipped by an ordinary user is allowed" "1 0 1" 0
unset count_uid
# the one-node Slurm test: a skip is allowed only without root, Slurm,
# MUNGE or spank.h; on CI's machine (all there) it fails
count_uid=0 count_slurm_cmds="sh" count_spank_h=/
printf 'PASS: a\nSKIP: test/tools/check-slurm-jobs.sh\n' |
    expect "the Slurm jobs skipped with root, Slurm and spank.h there fails" "1 1 1" 0
count_spank_h=/nonexistent
printf 'PASS: a\nSKIP: test/tools/check-slurm-jobs.sh\n' |
    expect "the Slurm jobs skipped without spank.h is allowed" "1 0 1" 0
count_spank_h=/ count_slurm_cmds="sh no-such-slurmd"
printf 'PASS: a\nSKIP: test/tools/check-slurm-jobs.sh\n' |
    expect "the Slurm jobs skipped without slurmd is allowed" "1 0 1" 0
count_tclsh="sh"
printf 'PASS: a\nSKIP: test/tools/check-modulefile.sh\n' |
    expect "the modulefile skipped with tclsh there fails" "1 1 1" 0
count_tclsh=no-such-tclsh
printf 'PASS: a\nSKIP: test/tools/check-modulefile.sh\n' |
    expect "the modulefile skipped without tclsh is allowed" "1 0 1" 0
unset count_uid count_slurm_cmds count_spank_h count_tclsh

# GoogleTest's lines as cases: the closing list of failures and skips
# (no time) is no second verdict
cat >"$work/gtest.log" <<'LOG'
[ RUN      ] suite.passes
[       OK ] suite.passes (3 ms)
[ RUN      ] p/suite.fails/1
[  FAILED  ] p/suite.fails/1, where GetParam() = 4 (12 ms)
[ RUN      ] suite.skips
[  SKIPPED ] suite.skips (0 ms)
[  PASSED  ] 1 test.
[  SKIPPED ] 1 test, listed below:
[  SKIPPED ] suite.skips
[  FAILED  ] 1 test, listed below:
[  FAILED  ] p/suite.fails/1, where GetParam() = 4
LOG
want='PASS: unit suite.passes
FAIL: unit p/suite.fails/1
SKIP: unit suite.skips'
if [ "$(gtest_cases "$work/gtest.log")" = "$want" ]; then
    echo "ok: gtest_cases: one verdict per case"
else
    echo "not ok: gtest_cases printed:"
    gtest_cases "$work/gtest.log" | sed 's/^/    /'
    bad=1
fi

# a gtest binary that passed is not one more test; one that failed is
printf 'PASS: test/gtest/rvt_unit_tests\nPASS: test/tools/x.sh\n' >"$work/mc"
printf 'FAIL: test/gtest/rvt_uct_host_tests\n' >>"$work/mc"
got=$(without_gtest_binaries "$work/mc" test/gtest/rvt_unit_tests \
    test/gtest/rvt_uct_host_tests | tr '\n' ' ')
if [ "$got" = "PASS: test/tools/x.sh FAIL: test/gtest/rvt_uct_host_tests " ]; then
    echo "ok: without_gtest_binaries"
else
    echo "not ok: without_gtest_binaries left '$got'"
    bad=1
fi

# a stale log of a test no longer built is gone before make check
mkdir -p "$work/b/test/gtest"
touch "$work/b/test/gtest/rvt_unit_tests.log" "$work/b/test/gtest/rvt_unit_tests.trs"
forget_test_logs "$work/b" test/gtest/rvt_unit_tests
if [ -e "$work/b/test/gtest/rvt_unit_tests.log" ] ||
    [ -e "$work/b/test/gtest/rvt_unit_tests.trs" ]; then
    echo "not ok: forget_test_logs left the stale log"
    bad=1
else
    echo "ok: forget_test_logs: no stale log to count"
fi
exit $bad
