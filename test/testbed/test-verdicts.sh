#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The guest scripts' verdicts (test/testbed/verdicts.sh) on canned input,
# host side, no testbed: for each verdict a good case that must pass and
# every broken case it was written to catch, which must fail (a flood
# that never ran, a conformance run that crashed after its last case, a
# variant skipped over rvt only, a sample that could not be read, ...).
# Prints a PASS or FAIL line per case; exits 1 if any check failed.
set -u
here=$(dirname "$0")
# shellcheck source=test/testbed/lib.sh
. "$here/lib.sh"
# shellcheck source=test/testbed/verdicts.sh
. "$here/verdicts.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/rvt-test-verdicts.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT

# passes DESCRIPTION VERDICT ARG...: VERDICT passes on the ARGs
passes() {
    local what=$1 out
    shift
    if out=$("$@"); then
        pass "$what: passes ($out)"
    else
        fail "$what: should pass, fails ($out)"
    fi
}

# fails DESCRIPTION TEXT VERDICT ARG...: VERDICT fails on the ARGs, and
# its line has TEXT (what it names as the reason)
fails() {
    local what=$1 says=$2 out
    shift 2
    if out=$("$@"); then
        fail "$what: should fail, passes ($out)"
    elif [[ $out != *"$says"* ]]; then
        fail "$what: fails, but its line does not say '$says' ($out)"
    else
        pass "$what: fails ($out)"
    fi
}

# ---- flood-guest.sh --------------------------------------------------------
echo "flood_ran: the flooder's success line, with datagrams sent, and exit 0"
ok_line="rvt_ud_flood: garbage: 812345 datagrams in 21.3 s (38138/s), 12 not sent (send queue full), 0 answers received"
passes "flood_ran: the success line and exit 0" flood_ran garbage 0 "$ok_line"
fails "flood_ran: only the flooder's error line (it could not open the device), exit 1" \
    "no line" flood_ran garbage 1 "rvt_ud_flood: device rxe3: no such device"
fails "flood_ran: an error line, exit status lost (0)" \
    "no line" flood_ran garbage 0 "rvt_ud_flood: ibv_create_comp_channel failed"
fails "flood_ran: no output at all" "no line" flood_ran garbage 0 ""
fails "flood_ran: the success line with 0 datagrams" "no datagram" flood_ran other-job 0 \
    "rvt_ud_flood: other-job: 0 datagrams in 20.0 s (0/s), 0 not sent (send queue full), 0 answers received, 40000 not sealed"
fails "flood_ran: the success line, but exit status 143 (killed by the signal)" \
    "status 143" flood_ran garbage 143 "$ok_line"
fails "flood_ran: the success line of another mode" "no line" flood_ran replay 0 "$ok_line"

echo "handshake_verdict: node 1's handshake counters over a phase"
# received malformed forged own_address unknown_sender unauthenticated unchecked throttled crowded holds half_open recycled sent
hs0="10 0 0 0 0 0 0 0 0 0 0 0 12"
passes "handshake_verdict: no flood, only node 2's handshake received" \
    handshake_verdict none "$hs0" "14 0 0 0 0 0 0 0 0 0 0 0 16"
for i in 1 2 3 4 5 6 7 8; do
    read -r -a hs1 <<<"$hs0"
    hs1[i]=$((hs1[i] + 3))
    fails "handshake_verdict: no flood, but ${hs_fields[i]} grew" "${hs_fields[i]} grew" \
        handshake_verdict none "$hs0" "${hs1[*]}"
done
passes "handshake_verdict: garbage, received and malformed grew" \
    handshake_verdict garbage "$hs0" "90010 67000 5 0 0 0 0 0 0 0 0 0 12"
fails "handshake_verdict: garbage, malformed did not grow" "malformed did not grow" \
    handshake_verdict garbage "$hs0" "90010 0 0 0 0 0 0 0 0 0 0 0 12"
fails "handshake_verdict: garbage, nothing received (no flood arrived)" "received no datagram" \
    handshake_verdict garbage "$hs0" "$hs0"
passes "handshake_verdict: wrong-key, unauthenticated and unchecked grew" \
    handshake_verdict wrong-key "$hs0" "50010 0 0 0 0 4 49990 0 0 1 0 0 12"
passes "handshake_verdict: other-job, unchecked alone grew (its MUNGE credentials are good)" \
    handshake_verdict other-job "$hs0" "50010 0 0 0 0 0 49990 0 0 1 3 0 14"
fails "handshake_verdict: wrong-key, neither unauthenticated nor unchecked grew" \
    "neither unauthenticated nor unchecked grew" handshake_verdict wrong-key "$hs0" "50010 0 0 0 0 0 0 0 0 0 0 0 12"
fails "handshake_verdict: other-job, neither unauthenticated nor unchecked grew" \
    "neither unauthenticated nor unchecked grew" handshake_verdict other-job "$hs0" "50010 0 0 0 0 0 0 0 0 0 1 0 12"
passes "handshake_verdict: wrong-key, the sender's checks throttled" \
    handshake_verdict wrong-key "$hs0" "50010 0 0 0 0 0 0 49990 0 1 0 0 12"
passes "handshake_verdict: forged, forged grew, no credential checked" \
    handshake_verdict forged "$hs0" "50010 0 50000 0 0 0 0 0 0 0 0 0 12"
fails "handshake_verdict: forged, forged did not grow" "a forged flood must grow forged" \
    handshake_verdict forged "$hs0" "50010 0 0 0 0 4 49990 0 0 1 0 0 12"
fails "handshake_verdict: forged, but credentials were checked" "a forged flood must grow forged" \
    handshake_verdict forged "$hs0" "50010 0 40000 0 0 10000 0 0 0 0 0 0 12"
passes "handshake_verdict: replay, received grew" \
    handshake_verdict replay "$hs0" "70010 0 0 0 0 69000 0 0 0 0 1 0 13"
fails "handshake_verdict: replay, nothing received" "received no datagram" \
    handshake_verdict replay "$hs0" "$hs0"
fails "handshake_verdict: the counters after the phase could not be read" "could not be read" \
    handshake_verdict none "$hs0" ""
fails "handshake_verdict: the counters before the phase could not be read" "could not be read" \
    handshake_verdict garbage "" "90010 67000 5 0 0 0 0 0 0 0 0 0 12"
fails "handshake_verdict: a counter that is no number" "no number" \
    handshake_verdict none "$hs0" "10 0 0 0 null 0 0 0 0 0 0 0 12"
fails "handshake_verdict: a mode it has no rule for" "no rule" \
    handshake_verdict flood-of-the-future "$hs0" "90010 67000 5 0 0 0 0 0 0 0 0 0 12"

# ---- ucp-conformance-guest.sh --------------------------------------------
echo "ucp_row_verdict: P F S STATUS RUN_FAILED REF_PASSED DIFFER"
passes "ucp_row_verdict: every case passed as over rc_v, exit 0" \
    ucp_row_verdict 20 0 1 0 0 20 ""
passes "ucp_row_verdict: this group clean, its run exited 1 for another group's failed case" \
    ucp_row_verdict 20 0 0 1 2 20 ""
fails "ucp_row_verdict: a crash (SIGSEGV) after the last case passed" "status 139" \
    ucp_row_verdict 20 0 0 139 0 20 ""
fails "ucp_row_verdict: the time bound after the last case passed" "status 124" \
    ucp_row_verdict 20 0 0 124 0 20 ""
fails "ucp_row_verdict: exit 1 with no failed case anywhere" "status 1" \
    ucp_row_verdict 20 0 0 1 0 20 ""
fails "ucp_row_verdict: a crash in this group, another group's case failed" "status 134" \
    ucp_row_verdict 20 0 0 134 1 20 ""
fails "ucp_row_verdict: a case failed" "1 failed" \
    ucp_row_verdict 19 1 0 1 1 20 "test_ucp_tag_match.send_recv/0"
fails "ucp_row_verdict: fewer cases ran than passed over rc_v" "cases missing" \
    ucp_row_verdict 12 0 0 0 0 20 ""
fails "ucp_row_verdict: the pass lists differ" "differ in test_ucp_rma.get_nonblocking/1" \
    ucp_row_verdict 20 0 0 0 0 20 "test_ucp_rma.get_nonblocking/1 "
fails "ucp_row_verdict: nothing passed" "nothing passed" \
    ucp_row_verdict 0 0 0 0 0 0 ""

# ---- conformance-guest.sh --------------------------------------------------
echo "uct_group_verdict: RP RF RS, rvt's and the reference's skip and pass lists, the allowed skips"
# lists NAME CASE...: the file $work/NAME, a case a line (none: empty)
lists() {
    local f=$work/$1
    shift
    : >"$f"
    [ $# = 0 ] || printf '%s\n' "$@" >"$f"
}
g=uct_p2p_am_misc
lists ref.passed $g.am_short/0 $g.am_short/1 $g.no_rx/0 $g.no_rx/1 $g.am_max/0
lists ref.skipped $g.am_max/1
lists rvt.passed $g.am_short/0 $g.am_short/1 $g.no_rx/0 $g.no_rx/1 $g.am_max/0
lists rvt.skipped $g.am_max/1
verdict_args=("$work/rvt.skipped" "$work/rvt.passed" "$work/ref.skipped" "$work/ref.passed")
passes "uct_group_verdict: the reference's passes and skips, variant by variant" \
    uct_group_verdict 5 0 1 "${verdict_args[@]}"
# the auditor's case: rvt 4/0/2 beside rc_verbs 5/0/1, both skipping
# variants of am_max, rvt one more (by test name alone they were the same)
lists rvt.passed $g.am_short/0 $g.am_short/1 $g.no_rx/0 $g.no_rx/1
lists rvt.skipped $g.am_max/0 $g.am_max/1
fails "uct_group_verdict: rvt 4/0/2, the reference 5/0/1: a variant skipped over rvt only" \
    "skipped where the reference is not: $g.am_max/0" uct_group_verdict 4 0 2 "${verdict_args[@]}"
passes "uct_group_verdict: the same, the test allowed without an index (every variant)" \
    uct_group_verdict 4 0 2 "${verdict_args[@]}" $g.am_max
passes "uct_group_verdict: the same, the variant allowed by its index" \
    uct_group_verdict 4 0 2 "${verdict_args[@]}" $g.am_max/0
fails "uct_group_verdict: the same, another variant allowed by its index" \
    "skipped where the reference is not: $g.am_max/0" uct_group_verdict 4 0 2 "${verdict_args[@]}" $g.am_max/1
# rvt passed fewer: a variant the reference passed never ran over rvt
lists rvt.passed $g.am_short/0 $g.am_short/1 $g.no_rx/0 $g.am_max/0
lists rvt.skipped $g.am_max/1
fails "uct_group_verdict: rvt passed 4, the reference 5, a variant missing over rvt" \
    "neither passed nor skipped: $g.no_rx/1" uct_group_verdict 4 0 1 "${verdict_args[@]}"
# rvt passed fewer by its allowed skips, and passed one the reference skips
lists rvt.passed $g.am_short/0 $g.no_rx/0 $g.no_rx/1 $g.am_max/0 $g.am_max/1
lists rvt.skipped $g.am_short/1
passes "uct_group_verdict: fewer passed by an allowed skip alone, one more passed than the reference" \
    uct_group_verdict 5 0 1 "${verdict_args[@]}" $g.am_short
fails "uct_group_verdict: a failure (or a crash)" "1 failed" \
    uct_group_verdict 4 1 1 "${verdict_args[@]}" $g.am_short
fails "uct_group_verdict: the reference's pass list missing (a cache entry without it)" \
    "no list $work/nowhere.passed" uct_group_verdict 5 0 1 "${verdict_args[@]::3}" "$work/nowhere.passed" $g.am_short
lists rvt.passed
lists rvt.skipped
fails "uct_group_verdict: no rvt case ran" "no rvt test ran" \
    uct_group_verdict 0 0 0 "${verdict_args[@]}"

# ---- soak-guest.sh (chaos_guest.py: guest.py's copies) -------------------
echo "resources_back, rss_within: an agent against its baseline"
passes "resources_back: fds, MRs, QPs and CQs as at the baseline" \
    resources_back "14 12 14 9" "14 12 14 9"
fails "resources_back: rdma resource show failed at both samples (? ? ? twice)" \
    "MRs (rdma resource show)" resources_back "14 ? ? ?" "14 ? ? ?"
fails "resources_back: rdma resource show failed now" "QPs (rdma resource show) now" \
    resources_back "14 12 14 9" "14 ? ? ?"
fails "resources_back: the agent's process not found at the baseline" \
    "the baseline's fds (/proc/PID/fd)" resources_back "? 12 14 9" "14 12 14 9"
fails "resources_back: nothing sampled now" "could not read" resources_back "14 12 14 9" ""
fails "resources_back: a QP more than at the baseline" "14 12 14 9 -> 14 12 15 9" \
    resources_back "14 12 14 9" "14 12 15 9"
passes "rss_within: 1000 KiB more, within 4096" rss_within 20000 21000 4096
fails "rss_within: 5000 KiB more, over 4096" "5000 KiB" rss_within 20000 25000 4096
fails "rss_within: not read at the baseline" "at the baseline" rss_within '?' 21000 4096
fails "rss_within: not read either time" "at the baseline nor now" rss_within '?' '?' 4096

# ---- waiting for an event ------------------------------------------------
echo "await: an event, not a time"
# shellcheck disable=SC2034 # await reads it
await_poll=0.01
tries=0
# shellcheck disable=SC2317 # the READY and ENDED of the awaits below
third_try() { tries=$((tries + 1)); [ "$tries" -ge 3 ]; }
# shellcheck disable=SC2317
never() { return 1; }
# shellcheck disable=SC2317
job_over() { tries=$((tries + 1)); [ "$tries" -ge 2 ]; }
await 5 third_try never
rc=$?
check "await: the event on the third look: status 0 (status $rc, $tries looks, $await_secs s)" \
    [ "$rc:$tries" = 0:3 ]
tries=0
await 5 never job_over
rc=$?
check "await: the awaited can no longer come (ENDED): status 1 after 2 looks, not the guard's 5 s (status $rc, $tries looks, $await_secs s)" \
    [ "$rc:$tries" = 1:2 ]
await 1 never never
rc=$?
check "await: never, the hang guard (1 s here): status 2 (status $rc, $await_secs s)" \
    [ "$rc" = 2 ]

finish "testbed verdicts"
