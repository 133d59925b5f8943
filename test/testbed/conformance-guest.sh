#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the testbed guest (1 node): UCX's own UCT tests (contrib/ucx-gtest.sh
# builds them with rvt instantiated) for rvt and rc_verbs, group by group,
# on the node's rxe device. One GoogleTest process per group and transport,
# so that a crash costs one group; UCX_HANDLE_ERRORS=bt turns a fault into
# an exit with a backtrace instead of UCX's default freeze.
#
# Prints a table, per group: passed/failed/skipped for rvt and for
# rc_verbs, and one check per group (verdicts.sh, uct_group_verdict): rvt
# fails no test, skips no variant (test and parameter index) that
# rc_verbs runs, unless docs/testing.md's list of what rvt does not
# support allows it (ALLOWED_SKIPS below), and passes every case rc_verbs
# passes but those allowed skips. rc_verbs' own failures are shown,
# never counted: they are UCX's, under this emulator. The reference's
# results are taken from an earlier run when nothing they depend on has
# changed (lib.sh, conformance_leg), and marked "cached" in the table.
#
# Usage: conformance-guest.sh BUILD_DIR GTEST GROUP...|--all
set -u -o pipefail
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=test/testbed/verdicts.sh
. "$(dirname "$0")/verdicts.sh"
build=${1:?usage: conformance-guest.sh BUILD_DIR GTEST GROUP...}
gtest=${2:?usage: conformance-guest.sh BUILD_DIR GTEST GROUP...}
shift 2
perf_guest_setup conformance "$build"
# the logs of groups that fail outlive the run
logs=$build/conformance-logs
rm -rf "$logs"
mkdir -p "$logs"

# Skips rvt may have beyond its reference's, by group (blank separated:
# GROUP.TEST, every variant of the test, or GROUP.TEST/INDEX, that
# variant alone), each for a reason docs/testing.md gives: tests that name
# the transports they run for, or run only with a setting rvt does not
# have.
declare -A ALLOWED_SKIPS=(
    # check_skip_test_tl(): "not supported yet" but for dc_mlx5, rc_verbs
    # and rc_mlx5
    [uct_cancel_test]="uct_cancel_test.am_bcopy uct_cancel_test.am_zcopy
        uct_cancel_test.get_bcopy uct_cancel_test.get_zcopy"
    # runs with RC_FC_ENABLE=y, a setting of UCX's rc transports
    [test_uct_event]="test_uct_event.am_with_fc"
    # runs only where the interface takes RX_MAX_BUFS, IB_RX_MAX_BUFS or
    # IB_RX_QUEUE_LEN, to run out of receive buffers: rvt's are its
    # agent's (rc_verbs skips only variant /1, on loopback)
    [uct_p2p_am_misc]="uct_p2p_am_misc.no_rx_buffs/0"
)

on 1 bash -c "exec timeout 7200 $rvtd --device=\$RXE_DEV --linger=0" \
    >"$work/rvtd.log" 2>&1 &
wait_agent 1 || { fail "rvtd on node 1 does not answer"; exit 1; }

# run_group TL GROUP: the group's tests for TL; prints "P F S" (passed,
# failed, skipped; a run that failed without a failed case, a crash or
# the time bound, counts one failure), leaves the output in
# $work/TL.GROUP.log and the names of the skipped and of the passed cases,
# each variant on its own (GROUP.TEST/INDEX: without the transport, with
# the parameter index), in $work/TL.GROUP.skipped and $work/TL.GROUP.passed.
# A group has 30 minutes, and so has each of its tests: UCX's own watchdog
# (-t; 15 minutes a test by default) is sized for hardware, and
# test_uct_event's 100,000 wake-ups through rvt's agent took 76 s here
# alone and more than 15 minutes beside another testbed
group_secs=1800
run_group() {
    local tl=$1 group=$2 log=$work/$1.$2.log rc
    on 1 env UCX_HANDLE_ERRORS=bt UCX_LOG_LEVEL=warn UCX_RVT_START_AGENT=n \
        LD_PRELOAD="$module" GTEST_FILTER="$tl/$group.*" \
        timeout "$group_secs" "$gtest" -t "$group_secs" </dev/null >"$log" 2>&1
    rc=$?
    # before the caller reads the counts
    : >"$work/$tl.$group.skipped"
    : >"$work/$tl.$group.passed"
    awk -v rc="$rc" -v skipped="$work/$tl.$group.skipped" \
        -v passed="$work/$tl.$group.passed" '
        /^\[     SKIP \]/ { skip = 1 }
        /^\[       OK \] [^ ]+ \([0-9]+ ms\)/ {
            name = $4; sub(/^[^\/]*\//, "", name)
            if (skip) {
                s++
                print name > skipped
            } else {
                p++
                print name > passed
            }
            skip = 0
        }
        /^\[  FAILED  \] [^ ,]+(, where .*)? \([0-9]+ ms\)/ { f++; skip = 0 }
        END { if (rc != 0 && f == 0) f = 1; print p + 0, f + 0, s + 0 }' "$log"
}

# reference_group TL GROUP: run_group for the reference transport, whose
# results a previous run may have left in $refdir (lib.sh,
# conformance_leg: they do not depend on rvt); a run that failed nothing
# leaves them there for the next. Prints "P F S" and "ran" or "cached".
# (What the cache holds is this script's: its key, lib.sh's
# reference_key, hashes this script, so a change here, of the names'
# format say, makes its old entries no match.)
refdir=$build/conformance-reference
mkdir -p "$refdir"
reference_group() {
    local tl=$1 group=$2 p f s
    if [ ! -f "$refdir/$tl.$group.counts" ]; then
        read -r p f s < <(run_group "$tl" "$group")
        [ "$f" = 0 ] &&
            cp "$work/$tl.$group.skipped" "$work/$tl.$group.passed" "$refdir/" &&
            echo "$p $f $s" >"$refdir/$tl.$group.counts"
        echo "$p $f $s ran"
        return
    fi
    cp "$refdir/$tl.$group.skipped" "$refdir/$tl.$group.passed" "$work/"
    echo "$(cat "$refdir/$tl.$group.counts") cached"
}
# the transport rvt is compared with: rc_verbs, and for the MD groups
# (instantiated per component) the IB component
reference() {
    case $1 in
    test_md | test_md_fork) echo ib ;;
    *) echo rc_verbs ;;
    esac
}

# --all: every group rvt is instantiated in (the suite enumerates its
# resources when it starts, so it lists them with the module loaded)
if [ "${1:-}" = --all ]; then
    mapfile -t groups < <(on 1 env UCX_RVT_START_AGENT=n LD_PRELOAD="$module" \
        timeout 120 "$gtest" --gtest_list_tests 2>/dev/null |
        sed -n 's|^rvt/\([A-Za-z0-9_]*\)\.$|\1|p' | sort -u)
    [ ${#groups[@]} -gt 0 ] || { fail "the suite lists no rvt test group"; exit 1; }
    set -- "${groups[@]}"
fi

printf '%-34s %-16s %-20s\n' "UCT test group" "rvt p/f/s" "reference p/f/s"
for group in "$@"; do
    ref=$(reference "$group")
    read -r rp rf rs < <(run_group rvt "$group")
    read -r vp vf vs how < <(reference_group "$ref" "$group")
    [ "$how" = cached ] && how=", cached" || how=""
    printf '%-34s %-16s %-20s\n' "$group" "$rp/$rf/$rs" "$vp/$vf/$vs ($ref$how)"
    what="$group: rvt $rp passed, $rf failed, $rs skipped ($ref $vp/$vf/$vs)"
    # the allowed skips: words, split on purpose
    # shellcheck disable=SC2086
    if why=$(uct_group_verdict "$rp" "$rf" "$rs" \
        "$work/rvt.$group.skipped" "$work/rvt.$group.passed" \
        "$work/$ref.$group.skipped" "$work/$ref.$group.passed" \
        ${ALLOWED_SKIPS[$group]:-}); then
        pass "$what"
    else
        fail "$what: $why (log: $logs/rvt.$group.log)"
        grep -E '^\[  FAILED  \].*ms\)$|rror|SIG|Abort' "$work/rvt.$group.log" |
            head -12 | sed 's/^/    /'
        # why each extra skip skipped: the line after its RUN line
        # shellcheck disable=SC2086
        uct_extra_skips "$work/rvt.$group.skipped" "$work/$ref.$group.skipped" \
            ${ALLOWED_SKIPS[$group]:-} | head -12 | while IFS= read -r name; do
            grep -A1 -xF "[ RUN      ] rvt/$name" "$work/rvt.$group.log" |
                grep SKIP | head -1 | sed "s|^|    $name: |"
        done
        cp "$work/rvt.$group.log" "$logs/"
    fi
done
finish conformance
