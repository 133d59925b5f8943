# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# The verdicts of the testbed's guest scripts that are a piece of logic
# of their own: each takes what a suite read (a program's output and exit
# status, counters before and after, a test's pass and skip lists) and
# says whether that passes. Sourced after lib.sh by the guest scripts that
# need one:
#
#   . "$(dirname "$0")/verdicts.sh"
#
# and by test/testbed/test-verdicts.sh, which feeds each one a good case
# and every broken case it must fail. Each prints one line (what it
# judged, or why it fails; never a line starting with PASS: or FAIL:,
# which are the caller's) and returns status 0 when the case passes.
# Nothing here reads a node: the guest scripts do the reading.

# joined SEPARATOR WORD...: the WORDs (one at least), SEPARATOR between
# each two
joined() {
    local sep=$1 out=$2 w
    shift 2
    for w in "$@"; do out+="$sep$w"; done
    echo "$out"
}

# ---- flood-guest.sh --------------------------------------------------------

# flood_ran MODE STATUS OUTPUT: whether test/testbed/rvt_ud_flood flooded
# in MODE, from its exit STATUS and its OUTPUT (stdout and stderr). It did
# only if OUTPUT has its success line ("rvt_ud_flood: MODE: N datagrams in
# S s (R/s), ...", printed when it stops, SIGTERM or its time up) with
# N > 0, and STATUS is 0: it exits 0 after SIGTERM too, 1 or 2 with a
# line "rvt_ud_flood: <error>" when it could not flood. Prints the
# success line, or what is missing.
flood_ran() {
    local mode=$1 status=$2 output=$3 line n
    line=$(grep -E "^rvt_ud_flood: $mode: [0-9]+ datagrams in " <<<"$output" | tail -n 1)
    if [ -z "$line" ]; then
        echo "no line 'rvt_ud_flood: $mode: N datagrams in ...' (exit status $status): $(head -c 300 <<<"$output")"
        return 1
    fi
    n=$(sed -E 's/^rvt_ud_flood: [a-z-]+: ([0-9]+) datagrams .*/\1/' <<<"$line")
    if [ "$n" = 0 ]; then
        echo "it sent no datagram: $line"
        return 1
    fi
    if [ "$status" != 0 ]; then
        echo "it exited with status $status: $line"
        return 1
    fi
    echo "$line"
}

# hs_fields: the handshake counters of an agent's status (rvt-status
# --json, .data_path.handshake) that flood-guest.sh's handshake_of reads,
# in the order of its line
hs_fields=(received malformed forged own_address unknown_sender unauthenticated unchecked throttled crowded holds half_open recycled sent)

# handshake_verdict MODE BEFORE AFTER: node 1's handshake counters over a
# phase of flood-guest.sh, BEFORE and AFTER it (handshake_of's lines, in
# hs_fields' order), judged for the phase's MODE (none: no flood). What
# each counter counts is engine::on_datagram's (engine_connect.cc):
#   none       no refusal of any kind (the refusals below and own_address
#              did not grow: nodes 1 and 2 only handshake with each
#              other, with good credentials)
#   garbage    received and malformed grew: three quarters of its
#              datagrams are random bytes, which wire::conn::parse refuses
#   wrong-key  received grew, and unauthenticated + unchecked + throttled
#   other-job  + crowded: each datagram is a request from the flooder's QP
#              (its real QPN, a new instance each time) with another
#              job's key; wrong-key's made-up credential fails the check
#              (unauthenticated), other-job's real MUNGE credential
#              passes it and is refused for its key; after the sender
#              gate's failures the sender (GID and QP) is held and what it
#              sends is refused unchecked, and its checks are bounded by
#              its bucket (throttled)
#   forged     received and forged grew, unauthenticated did not: a claim
#              of another QPN than the completion's source QP is dropped
#              before any credential is looked at
#   replay     received grew, nothing more: what becomes of the copies
#              is not certain (the first is taken as a half-open peer; the
#              copies are then that peer's, refused by MUNGE's replay
#              cache, or by the secret's replay window, or taken as the
#              handshake's own retransmissions, depending on the
#              credential and on where the handshake is)
# Prints the deltas judged, or why they fail.
handshake_verdict() {
    local mode=$1 hs_before hs_after i d text=() grew=()
    local -A delta
    read -r -a hs_before <<<"$2"
    read -r -a hs_after <<<"$3"
    if [ ${#hs_before[@]} != ${#hs_fields[@]} ] || [ ${#hs_after[@]} != ${#hs_fields[@]} ]; then
        echo "node 1's handshake counters could not be read (before '$2', after '$3')"
        return 1
    fi
    for i in "${!hs_fields[@]}"; do
        if ! [[ ${hs_before[i]} =~ ^[0-9]+$ && ${hs_after[i]} =~ ^[0-9]+$ ]]; then
            echo "node 1's handshake counter ${hs_fields[i]} is no number (before '$2', after '$3')"
            return 1
        fi
        delta[${hs_fields[i]}]=$((hs_after[i] - hs_before[i]))
    done
    for d in received malformed forged own_address unknown_sender unauthenticated unchecked throttled crowded; do
        text+=("$d +${delta[$d]}")
    done
    case $mode in
    none)
        for d in malformed forged own_address unknown_sender unauthenticated unchecked throttled crowded; do
            [ "${delta[$d]}" -gt 0 ] && grew+=("$d")
        done
        if [ ${#grew[@]} -gt 0 ]; then
            echo "refusals with no flood (${grew[*]} grew): ${text[*]}"
            return 1
        fi
        echo "no refusal: ${text[*]}"
        return 0
        ;;
    garbage | wrong-key | other-job | replay | forged) ;;
    *)
        echo "no rule for flood mode '$mode'"
        return 1
        ;;
    esac
    if [ "${delta[received]}" -le 0 ]; then
        echo "the agent received no datagram in a $mode flood: ${text[*]}"
        return 1
    fi
    if [ "$mode" = garbage ] && [ "${delta[malformed]}" -le 0 ]; then
        echo "malformed did not grow in a garbage flood: ${text[*]}"
        return 1
    fi
    case $mode in
    wrong-key | other-job)
        if [ $((delta[unauthenticated] + delta[unchecked] + delta[throttled] + delta[crowded])) -le 0 ]; then
            echo "neither unauthenticated nor unchecked grew in a $mode flood: ${text[*]}"
            return 1
        fi
        ;;
    forged)
        if [ "${delta[forged]}" -le 0 ] || [ "${delta[unauthenticated]}" -gt 0 ]; then
            echo "a forged flood must grow forged and no credential check (unauthenticated): ${text[*]}"
            return 1
        fi
        ;;
    esac
    echo "${text[*]}"
}

# ---- ucp-conformance-guest.sh, conformance-guest.sh ----------------------

# run_ended_well STATUS FAILED: a GoogleTest run's exit STATUS is what its
# cases explain: 0, or 1 with FAILED (the run's failed cases, every
# group's) above 0; GoogleTest exits 1 when a case failed. Anything else
# (1 with no failed case, the time bound's 124, a signal's 128 + N) is a
# crash or a timeout.
run_ended_well() {
    [ "$1" = 0 ] || { [ "$1" = 1 ] && [ "$2" -gt 0 ]; }
}

# ucp_row_verdict P F S STATUS RUN_FAILED REF_PASSED DIFFER: one rvt row
# of one UCP test group: its passed, failed and skipped cases (P F S),
# the exit STATUS of the run it was part of and that run's failed cases
# (RUN_FAILED, every group's), how many cases passed over the reference
# (REF_PASSED), and the cases in one pass list only (DIFFER, blank
# separated; empty when the lists agree). Fails when nothing passed, a
# case failed, the run ended in a crash or a timeout (run_ended_well),
# fewer cases ran than passed over the reference (cases missing), or the
# pass lists differ. Prints what passed, or every reason it fails.
ucp_row_verdict() {
    local p=$1 f=$2 s=$3 status=$4 run_failed=$5 ref_passed=$6 differ=$7 ran diffs reasons=()
    ran=$((p + f + s))
    [ "$p" = 0 ] && reasons+=("nothing passed")
    [ "$f" != 0 ] && reasons+=("$f failed")
    run_ended_well "$status" "$run_failed" ||
        reasons+=("its run exited with status $status, not for a failed case (a crash, or the time bound)")
    [ "$ran" -lt "$ref_passed" ] &&
        reasons+=("$ran cases ran where $ref_passed passed over the reference: cases missing")
    read -r -a diffs <<<"$differ"
    [ ${#diffs[@]} -gt 0 ] && reasons+=("the pass lists differ in ${diffs[*]}")
    if [ ${#reasons[@]} -gt 0 ]; then
        joined '; ' "${reasons[@]}"
        return 1
    fi
    echo "the same $p cases pass"
}

# skip_allowed NAME ALLOWED...: the skipped case NAME (GROUP.TEST/INDEX)
# is one an ALLOWED word names: the case itself (GROUP.TEST/INDEX), or its
# test without the index (GROUP.TEST), which covers every variant
skip_allowed() {
    local name=$1 a
    shift
    for a in "$@"; do
        if [ "$name" = "$a" ] || [ "${name%/*}" = "$a" ]; then
            return 0
        fi
    done
    return 1
}

# uct_extra_skips RVT_SKIPPED REF_SKIPPED ALLOWED...: the cases skipped
# over rvt (the file RVT_SKIPPED, a GROUP.TEST/INDEX a line) that the
# reference did not skip (the file REF_SKIPPED), variant by variant, and
# no ALLOWED word covers (skip_allowed); one a line
uct_extra_skips() {
    local rvt=$1 ref=$2 name
    shift 2
    while IFS= read -r name; do
        [ -n "$name" ] || continue
        grep -qxF -- "$name" "$ref" 2>/dev/null && continue
        skip_allowed "$name" "$@" && continue
        echo "$name"
    done < <(sort -u "$rvt")
}

# uct_group_verdict RP RF RS RVT_SKIPPED RVT_PASSED REF_SKIPPED REF_PASSED
# ALLOWED...: one UCT test group over rvt beside its reference transport:
# rvt's passed, failed and skipped counts (RP RF RS: a crash or the time
# bound counts one failure), and the files of each one's skipped and
# passed cases (GROUP.TEST/INDEX a line). Fails when no rvt case ran, one
# failed, rvt skipped a variant the reference ran and no ALLOWED word
# covers (uct_extra_skips), or a case passed over the reference that rvt
# neither passed nor skipped: rvt may pass fewer cases than the
# reference by its allowed skips alone. Prints why it fails (every
# reason), or that it passes.
uct_group_verdict() {
    local rp=$1 rf=$2 rs=$3 rvt_skipped=$4 rvt_passed=$5 ref_skipped=$6 ref_passed=$7
    local extra missing name reasons=()
    shift 7
    if [ "$rp" = 0 ] && [ "$rf" = 0 ] && [ "$rs" = 0 ]; then
        echo "no rvt test ran"
        return 1
    fi
    for name in "$rvt_skipped" "$rvt_passed" "$ref_skipped" "$ref_passed"; do
        [ -f "$name" ] || { echo "no list $name"; return 1; }
    done
    [ "$rf" != 0 ] && reasons+=("$rf failed")
    extra=$(uct_extra_skips "$rvt_skipped" "$ref_skipped" "$@" | tr '\n' ' ')
    [ -n "$extra" ] && reasons+=("skipped where the reference is not: ${extra% }")
    # the reference's passes that rvt did not pass: each must be a skip
    # of rvt's (judged just above), else a case failed or never ran
    missing=$(sort -u "$ref_passed" | while IFS= read -r name; do
        [ -n "$name" ] || continue
        grep -qxF -- "$name" "$rvt_passed" 2>/dev/null && continue
        grep -qxF -- "$name" "$rvt_skipped" 2>/dev/null && continue
        echo "$name"
    done | tr '\n' ' ')
    [ -n "$missing" ] &&
        reasons+=("passed $rp cases, and not these the reference passed, which rvt neither passed nor skipped: ${missing% }")
    if [ ${#reasons[@]} -gt 0 ]; then
        joined '; ' "${reasons[@]}"
        return 1
    fi
    echo "every case the reference passed passes, or is an allowed skip"
}

# ---- soak-guest.sh: an agent against its baseline --------------------------
# (chaos_guest.py judges by the same rules in Python: guest.py's
# resources_back and rss_within, which keep these texts)

# resources_back BASE NOW: an agent's "fds mrs qps cqs" at its baseline
# (BASE) and now (NOW), as lib.sh's agent_sample reads them: "?" for one
# it could not read. Status 0 when every figure was read both times and
# NOW is BASE: a figure not read is a failure naming it and where it is
# read from (two "? ? ?" are no match). Prints "BASE -> NOW", or what
# could not be read.
resources_back() {
    local names=("fds (/proc/PID/fd)" "MRs (rdma resource show)"
        "QPs (rdma resource show)" "CQs (rdma resource show)")
    local at_base at_now i unread=()
    read -r -a at_base <<<"$1"
    read -r -a at_now <<<"$2"
    for i in 0 1 2 3; do
        [[ ${at_base[i]:-} =~ ^[0-9]+$ ]] || unread+=("the baseline's ${names[i]}")
        [[ ${at_now[i]:-} =~ ^[0-9]+$ ]] || unread+=("${names[i]} now")
    done
    if [ ${#unread[@]} -gt 0 ]; then
        echo "could not read $(joined ', ' "${unread[@]}") ($1 -> $2)"
        return 1
    fi
    echo "${at_base[*]} -> ${at_now[*]}"
    [ "${at_base[*]}" = "${at_now[*]}" ]
}

# rss_within BASE NOW BOUND: an agent's resident memory now (NOW, KiB) at
# most BOUND KiB above its baseline's (BASE), both read (agent_sample's
# "?" is a failure naming it). Prints "BASE -> NOW KiB, GROWTH KiB", or
# what could not be read.
rss_within() {
    local base=$1 now=$2 bound=$3 unread=()
    [[ $base =~ ^[0-9]+$ ]] || unread+=("at the baseline")
    [[ $now =~ ^[0-9]+$ ]] || unread+=("now")
    if [ ${#unread[@]} -gt 0 ]; then
        echo "could not read its resident memory (/proc/PID/status) $(joined ' nor ' "${unread[@]}") ($base -> $now KiB)"
        return 1
    fi
    echo "$base -> $now KiB, $((now - base)) KiB"
    [ "$now" -le $((base + bound)) ]
}

# ---- waiting for an event -------------------------------------------------
# (site_jobs_guest.py waits with its Python twin, guest.py's await_)

# await GUARD READY [ENDED]: wait for an event rather than for a time:
# run the command READY every await_poll seconds (default 0.5) until it
# succeeds (status 0), or until the command ENDED succeeds first, saying
# the event can no longer come (status 1), or, a hang guard rather than a
# time the event must beat, GUARD seconds have passed (status 2). READY
# and ENDED run in this shell (they may set variables). await_secs: the
# seconds it waited.
await() {
    local guard=$1 ready=$2 ended=${3:-false} start=$SECONDS rc
    while :; do
        if "$ready"; then
            rc=0
        elif "$ended"; then
            rc=1
        elif [ $((SECONDS - start)) -ge "$guard" ]; then
            rc=2
        else
            sleep "${await_poll:-0.5}"
            continue
        fi
        # shellcheck disable=SC2034 # for the caller
        await_secs=$((SECONDS - start))
        return $rc
    done
}
