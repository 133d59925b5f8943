#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# perf-ab.sh's guest side (see there): ROUNDS rounds of the 4-pair put_bw
# over build A's rvt, build B's and rc_verbs, in one boot.
# Usage: perf-ab-guest.sh BUILD_A BUILD_B ROUNDS SIZE ITERS (absolute paths)
set -u -o pipefail
a=$1 b=$2 rounds=$3 size=$4 iters=$5
here=$(dirname "$0")
# shellcheck source=test/testbed/lib.sh
. "$here/lib.sh"
# the guest writes only below the source tree: the results, and the
# work directory, go to build/perf-ab
results=build/perf-ab
mkdir -p "$results" || exit 125
perf_guest_setup perf-ab "$results"
# shellcheck disable=SC2034 # perf_pair's and agents_up's, set by use()
echo "round,setting,mb_per_s,agent1_cpu_s" >"$results/figures.csv"
alias_env="RVT_PERFTEST_DEV_ALIAS=rxe1:1=rxe2:1"

# use BUILD: the agents, module and device alias perf_pair runs with
use() {
    rvtd=$1/src/uct/ib/rvt/tools/rvtd
    rvt_status=$1/src/uct/ib/rvt/tools/rvt-status
    module=$1/src/uct/ib/rvt/uct/.libs/libuct_rvt.so
    dev_alias=$1/test/testbed/perftest_dev_alias.so
}

# pair TL K: pair K's put_bw into $work/pair.K.fig
pair() {
    local tl=$1 k=$2 senv cenv=""
    senv="LD_PRELOAD=$dev_alias $alias_env"
    if [ "$tl" = rvt ]; then
        senv="LD_PRELOAD=$module:$dev_alias $alias_env"
        cenv="LD_PRELOAD=$module"
    fi
    # shellcheck disable=SC2034 # perf_pair's port
    port=$((30000 + 100 * round + 10 * k)) # its own: the pairs run at once
    perf_pair "$work/pair.$k" 2 1 "$senv" "$cenv" -t put_bw -x "$tl" \
        -d rxe1:1 -D zcopy -s "$size" -n "$iters" -w $((iters / 10 + 1)) &&
        figure "$work/pair.$k" bw | awk '{ print $1 }' >"$work/pair.$k.fig"
}

# run NAME BUILD TL: the 4 pairs at once with BUILD's agents up
declare -A sum runs
run() {
    local name=$1 tl=$3 k pids=() t0 t1 mb total
    use "$2"
    agents_up 600 1 2 || return
    t0=$(cpu_ticks)
    for k in 1 2 3 4; do
        pair "$tl" "$k" &
        pids+=($!)
    done
    for k in "${pids[@]}"; do wait "$k"; done
    t1=$(cpu_ticks)
    for k in 1 2; do on "$k" pkill -x rvtd; done
    wait
    if [ "$(cat "$work"/pair.*.fig 2>/dev/null | wc -l)" != 4 ]; then
        fail "round $round, $name: a pair failed"
        return
    fi
    total=$(cat "$work"/pair.*.fig | awk '{ s += $1 } END { printf "%.2f", s }')
    rm -f "$work"/pair.*.fig
    mb=$(awk -v n=$((4 * (iters + iters / 10 + 1))) -v s="$size" \
        'BEGIN { printf "%.1f", n * s / 1e6 }')
    pass "round $round, $name: $total MB/s ($(cpu_report "$t0" "$t1" "$mb"))"
    echo "$round,$name,$total,$(cpu_ticks_agent1 "$t0" "$t1")" >>"$results/figures.csv"
    sum[$name]=$(awk -v a="${sum[$name]:-0}" -v b="$total" 'BEGIN { print a + b }')
    runs[$name]=$((${runs[$name]:-0} + 1))
}
# cpu_ticks_agent1 BEFORE AFTER: node 1's agent's CPU seconds between them
cpu_ticks_agent1() {
    awk -v b="$1" -v a="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN {
        split(b, x, " "); split(a, y, " "); printf "%.2f", (y[5] - x[5]) / hz }'
}

section "4 pairs put_bw zcopy $size B at once: A $a, B $b, $rounds rounds"
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) = 1 ]; then
        run A "$a" rvt
        run B "$b" rvt
    else
        run B "$b" rvt
        run A "$a" rvt
    fi
    run rc_verbs "$a" rc_verbs
done
for name in A B rc_verbs; do
    [ "${runs[$name]:-0}" -gt 0 ] &&
        echo "mean $name: $(awk -v s="${sum[$name]}" -v n="${runs[$name]}" 'BEGIN { printf "%.2f", s / n }') MB/s over ${runs[$name]} runs"
done
[ "${runs[A]:-0}" -gt 0 ] && [ "${runs[B]:-0}" -gt 0 ] &&
    echo "B / A: $(awk -v a="${sum[A]}" -v b="${sum[B]}" -v na="${runs[A]}" -v nb="${runs[B]}" 'BEGIN { printf "%.2f", (b / nb) / (a / na) }')"
finish "perf A/B"
