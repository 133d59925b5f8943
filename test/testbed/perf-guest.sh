#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the testbed guest (2 nodes): rvt's performance against rc_verbs,
# same boot, as ratios, each beside the project's target for it
# (docs/performance.md, "On the testbed"):
#
#   latency     UCT am_lat and put_lat 8 B (short), UCP tag_lat 8 B:
#               rvt / rc_verbs <= 3
#   bandwidth   UCT put_bw zcopy 64 KiB, 1 MiB, 4 MiB; UCT am_bw bcopy
#               8 KiB and zcopy: rvt / rc_verbs >= 0.9; UCP tag_bw 1, 4
#               and 16 MiB: >= 0.95
#   4 pairs     4 processes per node, each pair at once: UCT am_bw 8 B and
#               put_bw zcopy 256 KiB, the pairs' sum: >= 0.9
#   pollers     every rc_verbs figure again with one more process per
#               node that polls and yields as an agent does: an rvt message
#               passes 4 spinning processes on the guest's 2 vCPUs,
#               rc_verbs' only 2; rvt / that is the part of each ratio that
#               is not the emulator's scheduling of busy pollers
#   agent core  rvt again with its agents on one vCPU and every
#               ucx_perftest on the other, for the rows the emulator's
#               scheduling is suspected of (docs/performance.md's rule: rvtd needs a
#               core it does not wait for); where the CPU went in the
#               4-pair runs, the agents' share of it
#   UCX_TLS     what users should set: UCP tag_lat and tag_bw, one pair and
#               4 pairs at once, with rvt alone, with active messages on
#               per-process UD and the rendezvous on rvt (ud_verbs,rvt),
#               and rc_verbs; the agents' counters show that rvt carried
#               the rendezvous
#   rendezvous  UCP's get and put rendezvous schemes over rvt, 4 pairs at
#               once, 1 and 4 MiB: which moves more (printed, not judged)
#   trace       where an 8-byte active message's time goes, per hop, from
#               the agents' and the processes' traces (rvt-trace-report)
#   bench       rvt_host_bench in this guest: the same hops with the agent
#               and its client on a vCPU each, nothing else running
#   striping    UCT put_bw zcopy 64 KiB to 4 MiB over rvt with the agent
#               splitting each put over its K QPs (UCX_RVT_STRIPE_MIN=
#               256k) and without (inf, the default), and rc_verbs: striped /
#               unstriped, target >= 1.3 from 1 MiB (docs/performance.md,
#               "Striping"); `perf-guest.sh BUILD stripe` runs this
#               section alone
#   full node   MPI kernels (rvt_mpi_kernels) with every vCPU running a
#               rank, rc_verbs beside ud_verbs,rvt and rvt under agents
#               of each scheduling mode (kernels-section.sh says what);
#               `perf-guest.sh BUILD kernels` runs this section alone
#   large job   UCX_TLS unset at 1,024 and 4,096 estimated endpoints: UD
#               alone beside UD + rvt (and rc_verbs at a small job's
#               setting), MPI latency, bandwidth, alltoall and kernels in
#               interleaved rounds (largejob-section.sh says what); brief
#               in CI; `perf-guest.sh BUILD largejob` runs it in full
#   mid-size    UCP tag_bw and tag_lat from 512 B to 256 KiB, rvt,
#               ud_verbs,rvt and rc_verbs, and the ratios
#               (docs/performance.md, "Mid-size messages");
#               `perf-guest.sh BUILD sweep` runs it alone
#
# A run's figure is a FIGURE: line, no test; a run that fails (no figure,
# a UCX error, a program's failure) is a FAIL. The checks (PASS/FAIL) are
# what can fail besides: MPI runs that verify every value, the agents
# carrying the rendezvous of ud_verbs,rvt. The ratios are printed with
# "met" or "not met", never judged: under TCG with every node on 2 vCPUs
# they say what the emulator allows, and the docs/performance.md explains
# them next to the host benchmark.
#
# Usage: perf-guest.sh BUILD_DIR [stripe|kernels|sweep|largejob|brief] (a path
# relative to the source tree; stripe, kernels, sweep, largejob: that
# section alone;
# brief: all but the 4-process, pollers, mid-size, rendezvous, striping,
# agents' vCPU, UCX_TLS and full-node sections, and bandwidth at 1 MiB,
# 8 KiB and 8000 B only, as CI runs it)
set -u -o pipefail
build=${1:?usage: perf-guest.sh BUILD_DIR [stripe|kernels|sweep|largejob|brief]}
only=${2:-}
here=$(dirname "$0")
# shellcheck source=test/testbed/lib.sh
. "$here/lib.sh"
perf_guest_setup perf "$build"
report=src/uct/ib/rvt/tools/rvt-trace-report

# the agents trace their first events: the first rvt run (am_lat) below
# (an rvtd from before traces existed runs without, for a "before" table)
trace=0
"$rvtd" --help | grep -q -- --trace-events && trace=1
trace_opts=""
[ "$trace" = 1 ] &&
    trace_opts="--trace-events=6000 --trace-file=$work/agent.\$RVT_NODE.trace"
for n in 1 2; do
    on "$n" bash -c "exec timeout 3000 $rvtd --device=\$RXE_DEV --linger=0 \
        $trace_opts" >"$work/rvtd.$n.log" 2>&1 &
done
for n in 1 2; do
    wait_agent "$n" || { fail "rvtd on node $n does not answer"; finish perf; }
done

# The UCT server takes the device name from its client: node 2 opens its
# own rxe2 under node 1's name (perftest_dev_alias.so, see the file).
alias_env="RVT_PERFTEST_DEV_ALIAS=rxe1:1=rxe2:1"
declare -A fig cpu
rows=()

# figure_line WHAT...: a figure printed, no test (contrib/test-count.sh
# counts PASS and FAIL lines, never these)
figure_line() { echo "FIGURE: $*"; }

# Every figure is also a row of $results/figures.csv, which outlives the
# boot (test/testbed/plot.py draws it); the suite starts it afresh
results=$build/perf-results
rm -rf "$results" && mkdir -p "$results" || exit 125
echo "test,layout,size,setting,value,unit" >"$results/figures.csv"
# keep TEST LAYOUT SIZE SETTING FIGURE: FIGURE ("12.3 us", "4.56 MB/s" or
# "error") as fig[TEST.LAYOUT.SIZE.SETTING] and as a CSV row (SETTING may
# be a UCX_TLS list, so it is quoted)
keep() {
    local value=${5% *} unit=${5#* }
    fig[$1.$2.$3.$4]=$5
    [ "$5" = error ] && value="" unit=error
    printf '%s,%s,%s,"%s",%s,%s\n' "$1" "$2" "$3" "$4" "$value" "$unit" \
        >>"$results/figures.csv"
}

# uct TEST LAYOUT SIZE ITERS TL [CLIENT_ENV [SERVER_ENV]]: one UCT run
# node1 -> node2
uct() {
    local test=$1 layout=$2 size=$3 iters=$4 tl=$5 cenv=${6:-} senv out kind
    local key_tl=${KEY_TL:-$tl} # the name its figure is kept under
    kind=${test#*_}
    out=$work/uct.$test.$layout.$size.$key_tl
    senv="LD_PRELOAD=$dev_alias $alias_env ${7:-}"
    if [ "$tl" = rvt ]; then
        senv="LD_PRELOAD=$module:$dev_alias $alias_env ${7:-}"
        cenv="LD_PRELOAD=$module $cenv"
    fi
    if perf_pair "$out" 2 1 "$senv" "$cenv" -t "$test" -x "$tl" -d rxe1:1 \
        -D "$layout" -s "$size" -n "$iters" -w $((iters / 10 + 1)) &&
        f=$(figure "$out" "$kind"); then
        keep "$test" "$layout" "$size" "$key_tl" "$f"
        figure_line "uct $test -D $layout $size B, $key_tl: $f ($pair_secs s)"
    else
        keep "$test" "$layout" "$size" "$key_tl" error
        fail "uct $test -D $layout $size B, $key_tl: $(error_text "$out")"
    fi
}

# ucp TEST SIZE ITERS TL: one UCP run node1 -> node2; TL is rvt, rc_verbs
# or a UCX_TLS list (its figure kept under KEY_TL if set, else TL)
ucp() {
    local test=$1 size=$2 iters=$3 tl=$4 env out kind=bw
    local key_tl=${KEY_TL:-$tl}
    [ "$test" = tag_lat ] && kind=lat
    out=$work/ucp.$test.$size.${key_tl//,/_}
    env="LD_PRELOAD=$module $(ucx_tls_env "$tl")"
    if perf_pair "$out" 2 1 "$env" "$env" -t "$test" -s "$size" \
        -n "$iters" -w $((iters / 4 + 1)) && f=$(figure "$out" "$kind"); then
        keep "$test" ucp "$size" "$key_tl" "$f"
        figure_line "ucp $test $size B, $key_tl: $f ($pair_secs s)"
    else
        keep "$test" ucp "$size" "$key_tl" error
        fail "ucp $test $size B, $key_tl: $(error_text "$out")"
    fi
}
# ucx_tls_env TL: the environment of a UCP run over TL (rvt: rvt alone;
# rc_verbs: rc_verbs with UD as UCP's auxiliary wire-up transport, as
# UCX's default; else TL is the UCX_TLS list itself). ud_verbs drops every
# packet on rxe without UCX_UD_VERBS_ETH_DGID_CHECK=n (docs/testing.md, "The testbed").
ucx_tls_env() {
    case $1 in
    rvt) echo "UCX_TLS=rvt,self" ;;
    rc_verbs) echo "UCX_TLS=rc_verbs,ud_verbs:aux,self UCX_UD_VERBS_ETH_DGID_CHECK=n" ;;
    *) echo "UCX_TLS=$1 UCX_UD_VERBS_ETH_DGID_CHECK=n" ;;
    esac
}

# row KEY TARGET: KEY is test.layout.size; TARGET "<=3" or ">=0.9"
row() { rows+=("$1 $2"); }

# both KIND ARGS... TARGET: KIND (uct, ucp or many) with ARGS over rvt,
# then rc_verbs, and a row of the table for their ratio; the rc_verbs run
# is remembered for the pollers' section
reruns=()
both() {
    local kind=$1 target=${*: -1} args=("${@:2:$#-2}")
    "$kind" "${args[@]}" rvt
    "$kind" "${args[@]}" rc_verbs
    reruns+=("$kind ${args[*]}")
    case $kind in
    uct) row "${args[0]}.${args[1]}.${args[2]}" "$target" ;;
    ucp) row "${args[0]}.ucp.${args[1]}" "$target" ;;
    many) row "${args[0]}.x4.${args[2]}" "$target" ;;
    esac
}

# pollers_start / pollers_stop: one more process per node that polls and
# yields, as an idle agent does (rvtd --idle-yield)
pollers=()
pollers_start() {
    local n
    for n in 1 2; do
        on "$n" timeout 900 python3 -c \
            'import os
while True: os.sched_yield()' >/dev/null 2>&1 &
        pollers+=($!)
    done
}
pollers_stop() {
    local n
    for n in 1 2; do # ([.]: the pattern must not match these commands' own)
        on "$n" pkill -f 'os[.]sched_yield'
    done
    wait "${pollers[@]}" 2>/dev/null
    pollers=()
}

# ratio VALUE_A VALUE_B: A / B from two figures ("12.3 us"), or "-"
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " ")
        if (x[1] + 0 <= 0 || y[1] + 0 <= 0) print "-"
        else printf "%.2f\n", x[1] / y[1] }'
}

# striping (lanes.h, "Striping"): one put at a time (ucx_perftest's UCT
# put_bw waits for each zcopy completion), split by node 1's agent over
# its K QPs or not, beside rc_verbs; the agent's striped_ops counter
# says it split them
stripe_section() {
    section "striping: UCT put_bw zcopy, rvt split over K QPs or not, rc_verbs"
    local s size iters n0 n1
    for s in 65536:100 262144:40 1048576:16 4194304:6; do
        size=${s%:*} iters=${s#*:}
        n0=$(agent_get 1 '.data_path.striped_ops') || n0=0
        KEY_TL=rvt_stripe uct put_bw zcopy "$size" "$iters" rvt \
            UCX_RVT_STRIPE_MIN=256k
        n1=$(agent_get 1 '.data_path.striped_ops') || n1=0
        echo "  node 1's agent split $((n1 - n0)) puts"
        KEY_TL=rvt_nostripe uct put_bw zcopy "$size" "$iters" rvt \
            UCX_RVT_STRIPE_MIN=inf
        KEY_TL=rc_verbs_stripe uct put_bw zcopy "$size" "$iters" rc_verbs
    done
    printf '%-10s %-12s %-12s %-12s %-9s %-9s %s\n' size "rvt split" \
        "rvt whole" rc_verbs split/whole split/rc whole/rc
    for s in 65536 262144 1048576 4194304; do
        a=${fig[put_bw.zcopy.$s.rvt_stripe]:-?}
        b=${fig[put_bw.zcopy.$s.rvt_nostripe]:-?}
        c=${fig[put_bw.zcopy.$s.rc_verbs_stripe]:-?}
        printf '%-10s %-12s %-12s %-12s %-9s %-9s %s\n' "$s" "$a" "$b" "$c" \
            "$(ratio "$a" "$b")" "$(ratio "$a" "$c")" "$(ratio "$b" "$c")"
    done
    echo "(MB/s, one boot; split: UCX_RVT_STRIPE_MIN=256k; whole:"
    echo " UCX_RVT_STRIPE_MIN=inf, the default; target: split/whole >= 1.3 from 1 MiB)"
}
if [ "$only" = stripe ]; then
    stripe_section
    finish perf
fi
# the mid-size messages, the recommended setting's weak range
# (docs/performance.md, "Mid-size messages"): UCP tag_bw and tag_lat from
# 512 B to 256 KiB, one pair, rvt alone, the recommended ud_verbs,rvt and
# rc_verbs, and each over rc_verbs (bandwidth: this / rc_verbs, >= 0.9
# is the target for ud_verbs,rvt from 1 to 128 KiB; latency: this /
# rc_verbs, <= 1.3)
sweep_section() {
    section "mid-size messages: UCP tag_bw and tag_lat, 512 B to 256 KiB, one pair"
    local sizes="512 1024 4096 16384 65536 131072 262144" size tl
    local settings=(rvt "ud_verbs,rvt,self" rc_verbs) extra=""
    # RVT_SWEEP_ENV (KEY=VALUE words): the recommended setting once more
    # with them, as a fourth column, to try a UCP setting in the same boot
    if [ -n "${RVT_SWEEP_ENV:-}" ]; then
        extra="ud_verbs,rvt,self+${RVT_SWEEP_ENV// /+}"
        echo "fourth column: ud_verbs,rvt,self with $RVT_SWEEP_ENV"
    fi
    for size in $sizes; do
        for tl in "${settings[@]}"; do
            ucp tag_bw "$size" 200 "$tl"
            ucp tag_lat "$size" 200 "$tl"
        done
        if [ -n "$extra" ]; then
            KEY_TL=$extra ucp tag_bw "$size" 200 "ud_verbs,rvt,self $RVT_SWEEP_ENV"
            KEY_TL=$extra ucp tag_lat "$size" 200 "ud_verbs,rvt,self $RVT_SWEEP_ENV"
        fi
    done
    # the format, a constant here, grows a column with the fourth setting
    local f='%-8s %-11s %-11s %-11s %-9s %-9s | %-11s %-11s %-11s %-9s %s'
    # shellcheck disable=SC2059
    printf "$f${extra:+ | %s}\n" size "bw rvt" "ud,rvt" rc_verbs rvt/rc \
        ud,rvt/rc "lat rvt" "ud,rvt" rc_verbs rvt/rc ud,rvt/rc \
        ${extra:+"4th bw, lat over rc_verbs"}
    for size in $sizes; do
        local b=tag_bw.ucp.$size l=tag_lat.ucp.$size
        # shellcheck disable=SC2059
        printf "$f${extra:+ | %s}\n" "$size" \
            "${fig[$b.rvt]:-?}" "${fig[$b.ud_verbs,rvt,self]:-?}" "${fig[$b.rc_verbs]:-?}" \
            "$(ratio "${fig[$b.rvt]:-?}" "${fig[$b.rc_verbs]:-?}")" \
            "$(ratio "${fig[$b.ud_verbs,rvt,self]:-?}" "${fig[$b.rc_verbs]:-?}")" \
            "${fig[$l.rvt]:-?}" "${fig[$l.ud_verbs,rvt,self]:-?}" "${fig[$l.rc_verbs]:-?}" \
            "$(ratio "${fig[$l.rvt]:-?}" "${fig[$l.rc_verbs]:-?}")" \
            "$(ratio "${fig[$l.ud_verbs,rvt,self]:-?}" "${fig[$l.rc_verbs]:-?}")" \
            ${extra:+"${fig[$b.$extra]:-?} $(ratio "${fig[$b.$extra]:-?}" "${fig[$b.rc_verbs]:-?}"), ${fig[$l.$extra]:-?} $(ratio "${fig[$l.$extra]:-?}" "${fig[$l.rc_verbs]:-?}")"}
    done
    echo "(bandwidth MB/s, latency us; one boot, idle nodes; targets for"
    echo " ud_verbs,rvt from 1 to 128 KiB: bandwidth >= 0.9, latency <= 1.3 of rc_verbs')"
}
if [ "$only" = sweep ]; then
    sweep_section
    finish perf
fi
# shellcheck source=test/testbed/kernels-section.sh
. "$here/kernels-section.sh"
if [ "$only" = kernels ]; then
    kernels_section
    finish perf
fi
# shellcheck source=test/testbed/largejob-section.sh
. "$here/largejob-section.sh"
if [ "$only" = largejob ]; then
    largejob_section "${RVT_LARGEJOB_MODE:-full}"
    finish perf
fi

section "latency, 8 B"
# the first rvt run is traced (the last section reports it)
uct am_lat short 8 1000 rvt "RVT_TRACE=$work/client.trace" \
    "RVT_TRACE=$work/server.trace"
uct am_lat short 8 1000 rc_verbs
reruns+=("uct am_lat short 8 1000")
row am_lat.short.8 "<=3"
both uct put_lat short 8 1000 "<=3"
both ucp tag_lat 8 1000 "<=3"

section "bandwidth"
# brief (CI): 1 MiB alone for the puts and UCP's tag_bw
put_sizes=(65536:200 1048576:20 4194304:8)
tag_sizes=(1048576:10 4194304:4 16777216:2)
if [ "$only" = brief ]; then
    put_sizes=(1048576:20)
    tag_sizes=(1048576:10)
fi
for s in "${put_sizes[@]}"; do
    both uct put_bw zcopy "${s%:*}" "${s#*:}" ">=0.9"
done
both uct am_bw bcopy 8192 500 ">=0.9"
# am zcopy: rvt's largest active message (8 KiB less its header)
both uct am_bw zcopy 8000 500 ">=0.9"
for s in "${tag_sizes[@]}"; do
    both ucp tag_bw "${s%:*}" "${s#*:}" ">=0.95"
done

# brief (CI): striping and the full node have commands of their own
# (`stripe`, `kernels`); their findings are in docs/performance.md
[ "$only" = brief ] || stripe_section

[ "$only" = brief ] || section "4 processes per node, each pair at once"
# many TEST LAYOUT SIZE ITERS TL: 4 pairs node1 -> node2 at once; their
# bandwidths added (kept under KEY_TL if set)
# shellcheck disable=SC2317 # called through both() and the pollers' reruns
many() {
    local test=$1 layout=$2 size=$3 iters=$4 tl=$5 k pids=() sum ok=yes
    local key_tl=${KEY_TL:-$tl} t0 t1 mb
    t0=$(cpu_ticks)
    for k in 1 2 3 4; do
        uct_pair_bg "$test" "$layout" "$size" "$iters" "$tl" "$k" &
        pids+=($!)
    done
    for k in "${pids[@]}"; do wait "$k" || ok=no; done
    sum=$(cat "$work"/many.*."$tl".fig 2>/dev/null | awk '{ s += $1 } END { printf "%.2f MB/s", s }')
    rm -f "$work"/many.*."$tl".fig
    t1=$(cpu_ticks)
    # what moved: 4 pairs, the measured iterations and the warm-up's
    mb=$(awk -v n=$((4 * (iters + iters / 10 + 1))) -v s="$size" \
        'BEGIN { printf "%.1f", n * s / 1e6 }')
    if [ "$ok" = yes ]; then
        keep "$test" x4 "$size" "$key_tl" "$sum"
        cpu[$test.x4.$size.$key_tl]=$(cpu_report "$t0" "$t1" "$mb")
        figure_line "4 pairs uct $test -D $layout $size B, $key_tl: $sum together"
        echo "  $mb MB: ${cpu[$test.x4.$size.$key_tl]}"
    else
        keep "$test" x4 "$size" "$key_tl" error
        fail "4 pairs uct $test -D $layout $size B, $key_tl: a pair failed"
    fi
}
# uct_pair_bg TEST LAYOUT SIZE ITERS TL K: pair K of many(), its figure
# into many.K.TL.fig
# shellcheck disable=SC2317 # called by many()
uct_pair_bg() {
    local test=$1 layout=$2 size=$3 iters=$4 tl=$5 k=$6 out senv cenv=""
    out=$work/many.$test.$size.$tl.$k
    senv="LD_PRELOAD=$dev_alias $alias_env"
    if [ "$tl" = rvt ]; then
        senv="LD_PRELOAD=$module:$dev_alias $alias_env"
        cenv="LD_PRELOAD=$module"
    fi
    port=$((30000 + 10 * k)) # a port of its own: the pairs run at once
    perf_pair "$out" 2 1 "$senv" "$cenv" -t "$test" -x "$tl" -d rxe1:1 \
        -D "$layout" -s "$size" -n "$iters" -w $((iters / 10 + 1)) || return 1
    figure "$out" bw | awk '{ print $1 }' >"$work/many.$k.$tl.fig"
}
# brief (CI): the full run's (docs/performance.md states its figures)
if [ "$only" != brief ]; then
    both many am_bw short 8 2000 ">=0.9"
    both many put_bw zcopy 262144 40 ">=0.9"
fi

# brief (CI): the two investigations whose findings docs/performance.md states
# (pollers, rendezvous get/put) are left out
if [ "$only" != brief ]; then
section "rc_verbs again, with as many busy pollers as rvt has"
# An rvt message passes 4 spinning processes (2 ucx_perftest, 2 agents),
# rc_verbs' only 2 (with 4 pairs: 10 and 8). Every rc_verbs run above
# again, with a process per node that polls and yields between messages
# as an agent does: what rc_verbs gets from the emulator in rvt's place.
pollers_start
for r in "${reruns[@]}"; do
    read -ra cmd <<<"$r"
    KEY_TL=rc_verbs_pollers "${cmd[@]}" rc_verbs
done
pollers_stop
fi

# brief (CI): the placement docs/performance.md states is left out too
if [ "$only" != brief ]; then
section "rvt with a vCPU for its agents, every ucx_perftest on the other"
# The deployment rule docs/performance.md gives: rvtd needs a core it does not
# wait for. Both agents on vCPU 1, every ucx_perftest on vCPU 0: rvt's
# test processes get one vCPU where rc_verbs' (above) had both; the rows
# where the emulator's scheduling is suspected (latency, one message at a
# time, 4 pairs at once), against rc_verbs' figures above.
core_runs=("uct am_lat short 8 1000" "uct put_bw zcopy 65536 200"
    "uct am_bw bcopy 8192 500" "uct am_bw zcopy 8000 500"
    "ucp tag_bw 1048576 10"
    "many am_bw short 8 2000" "many put_bw zcopy 262144 40")
for p in $(pgrep -x rvtd); do taskset -apc 1 "$p" >/dev/null; done
perf_cpus="taskset -c 0"
for r in "${core_runs[@]}"; do
    read -ra cmd <<<"$r"
    KEY_TL=rvt_core "${cmd[@]}" rvt
done
perf_cpus=""
for p in $(pgrep -x rvtd); do taskset -apc 0-1 "$p" >/dev/null; done
fi

section "rvt / rc_verbs, same boot"
printf '%-22s %-12s %-12s %-6s %-6s %-8s %-12s %-8s %-12s %s\n' measure rvt \
    rc_verbs ratio target verdict "rc_verbs+p" "rvt/that" "rvt+core" \
    "rvt+core/rc_verbs"
for r in "${rows[@]}"; do
    read -r key target <<<"$r"
    a=${fig[$key.rvt]:-?} b=${fig[$key.rc_verbs]:-?} c=${fig[$key.rc_verbs_pollers]:-?}
    d=${fig[$key.rvt_core]:--}
    q=$(ratio "$a" "$b")
    verdict=-
    if [ "$q" != - ]; then
        verdict=$(awk -v r="$q" -v t="$target" 'BEGIN { lim = substr(t, 3) + 0
            ok = (substr(t, 1, 2) == "<=") ? r <= lim : r >= lim
            print ok ? "met" : "not-met" }')
    fi
    printf '%-22s %-12s %-12s %-6s %-6s %-8s %-12s %-8s %-12s %s\n' "$key" \
        "$a" "$b" "$q" "$target" "$verdict" "$c" "$(ratio "$a" "$c")" "$d" \
        "$(ratio "$d" "$b")"
done
echo "(latency: median half round trip, ratio > 1 is slower; bandwidth: MB/s,"
echo " ratio < 1 is slower. TCG: every node shares the guest's 2 vCPUs."
echo " rc_verbs+p: rc_verbs with one more polling process per node, as many"
echo " spinning processes as rvt has; rvt/that: the ratio without the"
echo " emulator's scheduling of busy pollers; rvt+core: rvt with its agents"
echo " on one vCPU and every ucx_perftest on the other)"
echo "4 pairs, where the CPU went (agent 1 is the senders' node's: rxe does"
echo "a send's packet work inside the ibv_post_send of the process that posts;"
echo "rc_verbs has no agent, its agents' figures are the idle ones of rvt's):"
for key in "${!cpu[@]}"; do
    echo "  $key: ${cpu[$key]}"
done | sort

# brief (CI): the large-job section below compares UD alone with UD + rvt,
# and select.sh checks that the rendezvous goes over rvt
if [ "$only" != brief ]; then
section "what users should set: UCX_TLS for MPI and OpenSHMEM (UCP, node1 -> node2)"
# rvt alone; active messages on per-process UD with the rendezvous on the
# shared QPs (as rv and PSM3 split them); rc_verbs. The agents' counters
# say whether rvt carried the rendezvous of the ud_verbs,rvt runs.
for tl in rvt ud_verbs,rvt,self rc_verbs; do
    ucp tag_lat 8 1000 "$tl"
    for s in 65536:100 1048576:10; do
        if [ "$tl" = ud_verbs,rvt,self ]; then
            for n in 1 2; do counters_save "$n" "$work/tls.before.$n"; done
        fi
        ucp tag_bw "${s%:*}" "${s#*:}" "$tl"
        if [ "$tl" = ud_verbs,rvt,self ]; then
            moved=0
            for n in 1 2; do
                read -r _ _ _ tx _ < <(counters_delta "$n" "$work/tls.before.$n")
                moved=$((moved + ${tx:-0}))
            done
            check "ud_verbs,rvt tag_bw ${s%:*} B: the agents posted $moved bytes (the rendezvous went over rvt)" \
                [ "$moved" -ge $((${s%:*} * ${s#*:})) ]
        fi
    done
done
printf '%-16s %-14s %-14s %s\n' measure rvt ud_verbs,rvt rc_verbs
for key in tag_lat.ucp.8 tag_bw.ucp.65536 tag_bw.ucp.1048576; do
    printf '%-16s %-14s %-14s %s\n' "$key" "${fig[$key.rvt]:-?}" \
        "${fig[$key.ud_verbs,rvt,self]:-?}" "${fig[$key.rc_verbs]:-?}"
done
echo "ratios to rc_verbs: rvt $(ratio "${fig[tag_lat.ucp.8.rvt]:-?}" "${fig[tag_lat.ucp.8.rc_verbs]:-?}")," \
    "ud_verbs,rvt $(ratio "${fig[tag_lat.ucp.8.ud_verbs,rvt,self]:-?}" "${fig[tag_lat.ucp.8.rc_verbs]:-?}") (tag_lat);" \
    "rvt $(ratio "${fig[tag_bw.ucp.1048576.rvt]:-?}" "${fig[tag_bw.ucp.1048576.rc_verbs]:-?}")," \
    "ud_verbs,rvt $(ratio "${fig[tag_bw.ucp.1048576.ud_verbs,rvt,self]:-?}" "${fig[tag_bw.ucp.1048576.rc_verbs]:-?}") (tag_bw 1 MiB)"
fi # not brief

if [ "$only" != brief ]; then
sweep_section
section "rendezvous by RDMA READ (get) or WRITE WITH IMMEDIATE (put), 4 pairs at once"
# UCP 1.13's rendezvous for host memory: the receiver READs the data
# (get_zcopy, its default) or, with UCX_RNDV_SCHEME=put_zcopy, the sender
# WRITEs it with an immediate. On the shared QPs a READ also waits for
# the responder's outstanding-read limit per QP, which every process of
# the node shares (docs/performance.md, "Rendezvous: READ or WRITE WITH
# IMMEDIATE"). 4 pairs node1 -> node2 at once, UCP tag_bw, their sum;
# node 2's agent's counters show what moved the data: writes with
# immediate delivered (put), bytes it posted (the READs of get), or
# active messages (UCP chose eager sends, no rendezvous).
# ucp_pair_bg SIZE ITERS TL SCHEME K: pair K of rndv_many, its figure into
# rndv.K.fig
# shellcheck disable=SC2317 # called by rndv_many
ucp_pair_bg() {
    local size=$1 iters=$2 tl=$3 scheme=$4 k=$5 out env
    out=$work/rndv.$size.${tl//,/_}.$scheme.$k
    env="LD_PRELOAD=$module $(ucx_tls_env "$tl") UCX_RNDV_SCHEME=$scheme"
    port=$((30000 + 10 * k)) # a port of its own: the pairs run at once
    perf_pair "$out" 2 1 "$env" "$env" -t tag_bw -s "$size" -n "$iters" \
        -w $((iters / 4 + 1)) || return 1
    figure "$out" bw | awk '{ print $1 }' >"$work/rndv.$k.fig"
}
# rndv_many SIZE ITERS TL SCHEME: 4 pairs at once, the sum
rndv_many() {
    local size=$1 iters=$2 tl=$3 scheme=$4 k pids=() ok=yes sum ams writes sent
    counters_save 2 "$work/rndv.before"
    for k in 1 2 3 4; do
        ucp_pair_bg "$size" "$iters" "$tl" "$scheme" "$k" &
        pids+=($!)
    done
    for k in "${pids[@]}"; do wait "$k" || ok=no; done
    sum=$(cat "$work"/rndv.*.fig 2>/dev/null | awk '{ s += $1 } END { printf "%.2f MB/s", s }')
    rm -f "$work"/rndv.*.fig
    # node 2 (the receivers'): AMs and writes with immediate delivered to
    # its processes, bytes its agent posted (the READs of get_zcopy)
    read -r ams writes _ sent _ < <(counters_delta 2 "$work/rndv.before")
    if [ "$ok" = yes ]; then
        keep rndv "$scheme" "$size" "$tl" "$sum"
        figure_line "4 pairs ucp tag_bw $size B, $tl, $scheme: $sum together (node 2: ${ams:-?} AMs, ${writes:-?} writes with immediate delivered, ${sent:-?} bytes posted)"
    else
        keep rndv "$scheme" "$size" "$tl" error
        fail "4 pairs ucp tag_bw $size B, $tl, $scheme: a pair failed"
    fi
}
for tl in rvt ud_verbs,rvt,self; do
    for s in 1048576:8 4194304:4; do
        for scheme in get_zcopy put_zcopy; do
            rndv_many "${s%:*}" "${s#*:}" "$tl" "$scheme"
        done
        echo "  put / get, $tl, ${s%:*} B: $(ratio "${fig[rndv.put_zcopy.${s%:*}.$tl]:-?}" "${fig[rndv.get_zcopy.${s%:*}.$tl]:-?}")"
    done
done
fi # not brief

if [ "$trace" = 1 ]; then
section "where the time goes: the first rvt am_lat, per hop"
# the agents write their traces when they stop
for n in 1 2; do
    on "$n" bash -c 'pkill -TERM -x rvtd' 2>/dev/null
done
for _ in $(seq 100); do
    [ -s "$work/agent.1.trace" ] && [ -s "$work/agent.2.trace" ] && break
    sleep 0.1
done
if [ -s "$work/agent.1.trace" ] && [ -s "$work/agent.2.trace" ] &&
    compgen -G "$work/client.trace.*" >/dev/null &&
    compgen -G "$work/server.trace.*" >/dev/null; then
    # the client ran on node 1, the server on node 2
    args=("node1=$work/agent.1.trace" "node2=$work/agent.2.trace")
    for f in "$work"/client.trace.*; do args+=("node1=$f"); done
    for f in "$work"/server.trace.*; do args+=("node2=$f"); done
    if "$report" "${args[@]}"; then
        figure_line "per-hop trace of rvt am_lat 8 B (above)"
    else
        fail "rvt-trace-report failed"
    fi
else
    fail "no traces to report: $(cd "$work" && echo *trace*)"
fi
fi # the trace

section "the same hops with a vCPU each: rvt_host_bench in this guest"
# The hops of the trace above pass 4 busy processes (2 agents, 2
# ucx_perftest) on the guest's 2 vCPUs. The host benchmark runs the same
# software path (attach, rings, doorbells, engine; the loopback nic at the
# device end) with the agent and its client on a vCPU each and nothing else
# running: what a hop costs this emulator when no process waits for a CPU.
bench=$build/test/bench/rvt_host_bench
if [ ! -x "$bench" ]; then
    fail "$bench not built (make check builds it)"
elif on 1 timeout 300 "$bench" --messages=2000 --seconds=1 --attached=none \
    >"$work/bench.out" 2>&1; then
    grep -v '^agent: ' "$work/bench.out"
    figure_line "rvt_host_bench in the guest (above)"
else
    tail -5 "$work/bench.out"
    fail "rvt_host_bench in the guest failed"
fi

[ "$only" = brief ] || kernels_section
largejob_section brief
echo "guest time: $((SECONDS - t_start)) s"
finish perf
