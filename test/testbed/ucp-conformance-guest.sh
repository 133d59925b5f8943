#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the testbed guest (1 node): UCX's own UCP tests (contrib/ucx-gtest.sh
# builds them with rows `rvt` and `ud_rvt` beside UCX's `rc`) for the
# transports rc_v, rvt and ud_v,rvt, group by group, on the node's rxe
# device. One GoogleTest process per group and transport, so that a crash
# or a hang costs one group; UCX_HANDLE_ERRORS=bt turns a fault into an
# exit with a backtrace instead of UCX's default freeze.
#
# Prints a table, per group: passed/failed/skipped and the seconds its
# cases took (GoogleTest's own times, summed) for each transport, and one
# check per group and rvt transport (verdicts.sh, ucp_row_verdict): no
# case failed, its run did not crash nor reach its time bound, no fewer
# cases ran than passed over rc_v, and its pass list (the test names,
# parameter index included, without the row's name) equals rc_v's (rc_v's
# from an earlier run when nothing they depend on has changed: lib.sh,
# conformance_leg). Cases that cannot pass over rvt are left out by name
# (SKIP below, each with its reason); CI runs a selection of each group's
# cases (CASES below), the same for the three transports.
#
# Usage: ucp-conformance-guest.sh BUILD_DIR GTEST [--every-case] GROUP...
#   --every-case  every case of the groups, not CASES' selection (for
#                 measuring: hours under the emulator)
# RVT_UCP_SECONDS (default 1800) bounds each transport's run; a run cut
# short fails (for measuring per-case times: the logs keep them).
set -u -o pipefail
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=test/testbed/verdicts.sh
. "$(dirname "$0")/verdicts.sh"
build=${1:?usage: ucp-conformance-guest.sh BUILD_DIR GTEST GROUP...}
gtest=${2:?usage: ucp-conformance-guest.sh BUILD_DIR GTEST GROUP...}
shift 2
every=n
if [ "${1:-}" = --every-case ]; then
    every=y
    shift
fi
perf_guest_setup ucp-conformance "$build"
# every transport's log outlives the run: the per-case times are in them
logs=$build/ucp-conformance-logs
rm -rf "$logs"
mkdir -p "$logs"

# The rows compared: UCX's rc_v (ucp_test.h's `rc`), and the two the patch
# adds. The first is the reference.
rows=(rc rvt ud_rvt)
declare -A row_tls=([rc]=rc_v [rvt]=rvt [ud_rvt]="ud_v,rvt")

# CASES[GROUP]: the group's cases CI runs (gtest patterns after
# "ROW/GROUP."), blank separated; a group not listed runs every case.
# CI's leg has about 8 minutes for the three transports, and a case takes
# about 2 s over rc_v, 0.5 s over rvt and 1.3 s over ud_v,rvt under the
# emulator, but a test_ucp_rma case sweeps sizes for 25 to 80 s on each,
# and some single cases take a minute (docs/testing.md has the figures;
# --every-case runs them all: hours). So most tests of each group run,
# mostly with their first variant (/0), and the variants that change the
# protocol rvt sees run on one test each: the rendezvous schemes
# (tag_match_rndv's req_exp: auto, get_zcopy, put_zcopy, each with the
# old and the new protocols, and put with flush), AM rendezvous with the
# new protocols, device atomics. Every test_ucp_peer_failure case runs.
# Left out, for time alone (each passed over the three transports when
# measured): the other variants of each test (receive requests external
# or internal, memory pre-registered, map nonblocking, no rcache, CPU and
# guessed atomics); tag_match_rndv's exp_huge_mix (a minute on each) and
# bidir_multi_exp_post (7 to 11 s); mmap's fixed (7 to 14 s);
# wireup_errh_peer's stress_connect_force_disconnect (over a minute);
# rma but for one get (its puts are the peer-failure rma cases'); stream
# but for two of its 20 tests, which differ in datatype and in the order
# of send and receive, UCP's business rather than the transport's.
declare -A CASES=(
    [test_ucp_peer_failure]="*"
    [test_ucp_tag_match]="*/0"
    [test_ucp_tag_match_rndv]="length0/0 sync_send_unexp/0 req_exp/*
        rts_unexp/0 truncated/0 post_larger_recv/0 req_exp_auto_thresh/0"
    [test_ucp_am_nbx]="*/0"
    [test_ucp_am_nbx_rndv]="*/0 rndv_auto/1 rndv_auto/2 rndv_auto/3"
    [test_ucp_rma]="get_nonblocking/1"
    [test_ucp_mmap]="alloc_mem_type/0 reg_mem_type/0 reg0/0 alloc0/0
        alloc_advise/0 reg_advise/0"
    [test_ucp_atomic64]="post/1 fetch/1 misaligned_post/4"
    [test_ucp_stream]="send_recv_data/0 send_recv_data_recv_iov/0"
    [test_ucp_wireup_errh_peer]="msg_after_ep_create/0 msg_before_ep_create/0"
    [test_ucp_fence64]="*"
)

# SKIP[GROUP]: cases left out for every row (gtest patterns after
# "ROW/GROUP."), each for a reason given here.
declare -A SKIP=(
    # rx_am_mpools draws a random length (below 32 bytes where an IB
    # transport is in UCX_TLS, else below 256) and skips itself ("non-inline
    # data arrived") when the data did not come inline from UCT: whether it
    # passes or skips depends on the seed, on any transport (rc_v skipped
    # it in one run where rvt and ud_v,rvt passed, and in another ud_v,rvt
    # skipped both variants), so its line in a pass list is chance
    [test_ucp_am_nbx]="rx_am_mpools/*"
)

# filter ROW GROUP...: the gtest filter of ROW's cases of the GROUPs
filter() {
    local row=$1 group p pos="" neg="" cases skips
    shift
    for group in "$@"; do
        # read, not word splitting: the patterns must not meet the globs
        read -rd "" -a cases <<<"${CASES[$group]:-*}"
        [ "$every" = y ] && cases=("*")
        read -rd "" -a skips <<<"${SKIP[$group]:-}"
        for p in "${cases[@]}"; do pos+="${pos:+:}$row/$group.$p"; done
        for p in "${skips[@]}"; do neg+="${neg:+:}$row/$group.$p"; done
    done
    echo "$pos${neg:+-$neg}"
}

on 1 bash -c "exec timeout 7200 $rvtd --device=\$RXE_DEV --linger=0" \
    >"$work/rvtd.log" 2>&1 &
wait_agent 1 || { fail "rvtd on node 1 does not answer"; exit 1; }

# run_row ROW GROUP...: ROW's cases of the GROUPs in one process; its
# output in $logs/ROW.log, and per group the names of the passed cases
# (GROUP.NAME/INDEX) in $work/ROW.GROUP.passed and "P F S MS RC RUN_F"
# (passed, failed, skipped, the cases' milliseconds; the run's exit status
# and its failed cases, every group's: a crash or the time bound after a
# group's last case shows there alone) in $work/ROW.GROUP.counts. Prints
# the run's seconds.
run_row() {
    local row=$1 log=$logs/$1.log rc start=$SECONDS group
    shift
    on 1 env UCX_HANDLE_ERRORS=bt UCX_LOG_LEVEL=warn UCX_RVT_START_AGENT=n \
        LD_PRELOAD="$module" GTEST_FILTER="$(filter "$row" "$@")" \
        timeout "${RVT_UCP_SECONDS:-1800}" "$gtest" </dev/null >"$log" 2>&1
    rc=$?
    for group in "$@"; do
        : >"$work/$row.$group.passed"
        awk -v rc="$rc" -v passed="$work/$row.$group.passed" -v g="$row/$group." '
            /^\[     SKIP \]/ { skip = 1 }
            /^\[       OK \] [^ ]+ \([0-9]+ ms\)/ && index($4, g) == 1 {
                if (skip) s++
                else {
                    p++
                    name = $4; sub(/^[^\/]*\//, "", name); print name > passed
                }
                ms += substr($5, 2)
                skip = 0
            }
            /^\[  FAILED  \] [^ ,]+(, where .*)? \([0-9]+ ms\)/ {
                run_f++
                if (index($4, g) == 1) {
                    f++; t = $0; sub(/.*\(/, "", t); ms += t + 0
                }
            }
            /^\[  FAILED  \]|^\[       OK \]/ { skip = 0 }
            END { print p + 0, f + 0, s + 0, ms + 0, rc, run_f + 0 }' \
            "$log" >"$work/$row.$group.counts"
    done
    echo $((SECONDS - start))
}

# The reference row's results (rc_v's pass lists and counts) of the
# groups an earlier run left in $refdir are taken from there (lib.sh,
# conformance_leg: they do not depend on rvt); it runs the others, and
# leaves those that failed nothing, in a run that ended well, there for
# the next run.
refdir=$build/ucp-conformance-reference
mkdir -p "$refdir"
declare -A row_secs=()
for row in "${rows[@]}"; do
    if [ "$row" != "${rows[0]}" ]; then
        row_secs[$row]="$(run_row "$row" "$@") s"
        continue
    fi
    missing=()
    for group in "$@"; do
        if [ -f "$refdir/$row.$group.counts" ]; then
            cp "$refdir/$row.$group.passed" "$refdir/$row.$group.counts" "$work/"
        else
            missing+=("$group")
        fi
    done
    row_secs[$row]="$(($# - ${#missing[@]})) groups cached"
    [ ${#missing[@]} = 0 ] && continue
    row_secs[$row]+=", $(run_row "$row" "${missing[@]}") s"
    for group in "${missing[@]}"; do
        read -r _ f _ _ rc run_f <"$work/$row.$group.counts"
        [ "$f" = 0 ] && run_ended_well "$rc" "$run_f" &&
            cp "$work/$row.$group.passed" "$work/$row.$group.counts" "$refdir/"
    done
done

printf '%-34s' "UCP test group"
for row in "${rows[@]}"; do printf ' %-20s' "${row_tls[$row]} p/f/s s"; done
echo
for group in "$@"; do
    declare -A counts=()
    for row in "${rows[@]}"; do
        read -r p f s ms rc run_f <"$work/$row.$group.counts"
        counts[$row]="$p/$f/$s $(((ms + 500) / 1000))s"
        counts[$row.p]=$p
        counts[$row.all]="$p $f $s $rc $run_f"
    done
    printf '%-34s' "$group"
    for row in "${rows[@]}"; do printf ' %-20s' "${counts[$row]}"; done
    echo
    for row in "${rows[@]:1}"; do
        what="$group: ${row_tls[$row]} ${counts[$row]}, rc_v ${counts[rc]}"
        differ=$(diff <(sort "$work/rc.$group.passed") \
            <(sort "$work/$row.$group.passed") | sed -n 's/^[<>] //p' |
            tr '\n' ' ')
        # shellcheck disable=SC2086 # P F S RC RUN_F: one word each
        if why=$(ucp_row_verdict ${counts[$row.all]} "${counts[rc.p]}" "$differ"); then
            pass "$what: $why"
        else
            fail "$what: $why (logs: $logs/rc.log, $logs/$row.log)"
            grep -E "^\[  FAILED  \] $row/$group\..*ms\)$" "$logs/$row.log" |
                head -12 | sed 's/^/    /'
        fi
    done
    unset counts
done
for row in "${rows[@]}"; do
    echo "${row_tls[$row]}: ${row_secs[$row]}, the suite's start included"
done
echo "UCP conformance: $((SECONDS - t_start)) s in the guest"
finish "UCP conformance"
