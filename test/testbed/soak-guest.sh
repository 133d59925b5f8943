#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the testbed guest (2 nodes): the soak (docs/reliability.md,
# "Soak"): what an agent holds must not grow while processes come and go
# for as long as the run lasts. One agent per node with K QPs, started
# once; then, round after round for MINUTES minutes, 2 processes per node
# attach, register, trade writes with immediate and active messages with
# every other process (each byte verified on arrival) and detach
# (rvt_traffic_client). After every round each agent is sampled: its
# resident memory, its open fds, and its device's MRs, QPs and CQs
# (`rdma resource`: everything registered in the agent's PD, the
# clients' MRs included). The series is printed, and checked against the
# round that ends the warm-up (the agents' QPs to the other node are made
# in the first round and kept):
#   - every round's traffic verified, no client left attached;
#   - fds, MRs, QPs and CQs back to the warm-up's figures after each round;
#   - resident memory at most RSS_BOUND_KIB above the warm-up's;
# a figure that could not be read, in the warm-up's sample or a round's,
# is a sample off (verdicts.sh's resources_back).
# Prints PASS:/FAIL: lines and exits 1 if any check failed.
# Usage: soak-guest.sh BUILD_DIR MINUTES
# shellcheck disable=SC2016 # jq filters: single quotes on purpose
set -u
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=test/testbed/verdicts.sh
. "$(dirname "$0")/verdicts.sh"
build=${1:?usage: soak-guest.sh BUILD_DIR MINUTES}
minutes=${2:?usage: soak-guest.sh BUILD_DIR MINUTES}
K=4
WARMUP=2            # rounds before the baseline
RSS_BOUND_KIB=2048  # what the agent's memory may grow by after them
rvtd=$build/src/uct/ib/rvt/tools/rvtd
rvt_status=$build/src/uct/ib/rvt/tools/rvt-status
client=$build/test/gtest/integration/rvt_traffic_client
export RVT_JOB_KEY=soak.$$
work=$(mktemp -d "$PWD/$build/soak.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf "$work"' EXIT

for n in 1 2; do
    on "$n" bash -c "exec $rvtd --device=\$RXE_DEV --num-qps=$K --linger=0" \
        >"$work/rvtd.$n.log" 2>&1 &
done
for n in 1 2; do
    wait_agent "$n" || { fail "rvtd on node $n does not answer"; finish soak; }
done
# one round: 2 clients per node, ids 0..3, every one trading with the
# other 3 (its own node's through the agent's loopback), all verified
round() {
    local dir=$work/round.$1 pids=() id n r rc=0
    mkdir -p "$dir"
    for n in 1 2; do
        for r in 0 1; do
            id=$(((n - 1) * 2 + r))
            on "$n" "$client" --dir="$dir" --id=$id --clients=4 --rounds=2 \
                --size=65536 >"$dir/out.$id" 2>&1 &
            pids+=($!)
        done
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    [ $rc = 0 ] || grep -h FAILED "$dir"/out.* | head -3
    rm -rf "$dir"
    return $rc
}

t_start=$SECONDS # for lib.sh's section
section "soak: $minutes minutes of rounds (2 processes per node attach, register, trade, detach)"
printf '%-6s %-6s | %-9s %-4s %-4s %-4s %-4s %-8s | %-9s %-4s %-4s %-4s %-4s %s\n' \
    round secs "1:rss KiB" fds mrs qps cqs attached "2:rss KiB" fds mrs qps cqs attached
declare -A base
rounds=0 bad_rounds=0 bad_samples=0 max_growth=0 left_attached=0
end=$((SECONDS + minutes * 60))
t0=$SECONDS
while [ $SECONDS -lt $end ] || [ $rounds -le $WARMUP ]; do
    rounds=$((rounds + 1))
    round "$rounds" || bad_rounds=$((bad_rounds + 1))
    # (lib.sh; an agent that never settles shows in the sample that follows)
    for n in 1 2; do agent_settle "$n"; done
    line=()
    for n in 1 2; do
        read -r rss fds mrs qps cqs attached < <(agent_sample "$n")
        line+=("$rss" "$fds" "$mrs" "$qps" "$cqs" "$attached")
        [ "$attached" = 0 ] || left_attached=$((left_attached + 1))
        if [ $rounds = $WARMUP ]; then
            base[$n]="$rss $fds $mrs $qps $cqs"
        elif [ $rounds -gt $WARMUP ]; then
            read -r brss bfds bmrs bqps bcqs <<<"${base[$n]}"
            # ("?": agent_sample could not read it)
            if [[ $brss =~ ^[0-9]+$ && $rss =~ ^[0-9]+$ ]]; then
                growth=$((rss - brss))
                [ $growth -gt $max_growth ] && max_growth=$growth
            else
                bad_samples=$((bad_samples + 1))
                echo "  node $n after round $rounds: could not read its resident memory (/proc/PID/status): warm-up $brss, now $rss KiB"
            fi
            if ! why=$(resources_back "$bfds $bmrs $bqps $bcqs" "$fds $mrs $qps $cqs"); then
                bad_samples=$((bad_samples + 1))
                echo "  node $n after round $rounds: fds mrs qps cqs, warm-up -> now: $why"
            fi
        fi
    done
    printf '%-6s %-6s | %-9s %-4s %-4s %-4s %-4s %-8s | %-9s %-4s %-4s %-4s %-4s %s\n' \
        "$rounds" "$((SECONDS - t0))" "${line[@]}"
done

check "$rounds rounds, every one's traffic verified ($bad_rounds failed)" \
    [ "$bad_rounds" = 0 ]
check "no client left attached after a round ($left_attached samples with one)" \
    [ "$left_attached" = 0 ]
check "the agents' fds, MRs, QPs and CQs back to the warm-up's after every round, every figure read ($bad_samples samples off)" \
    [ "$bad_samples" = 0 ]
check "the agents' resident memory grew by at most $RSS_BOUND_KIB KiB after the warm-up (most: $max_growth KiB)" \
    [ "$max_growth" -le "$RSS_BOUND_KIB" ]
for n in 1 2; do
    check "node $n's agent served every round without an error in its log" \
        bash -c "! grep -qiE 'error|fatal' '$work/rvtd.$n.log'"
done
finish soak
