#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the testbed guest (2 nodes): the UCX release in UCX_PREFIX (one
# setup-deps.sh --ucx built; test/testbed/ucx-release.sh) loads rvt as the
# README says for it: as a plugin from UCX_PLUGIN_PATH with no LD_PRELOAD
# when it loads plugins (1.22), else preloaded (1.16, 1.18). The checks:
#   1. without that (no UCX_PLUGIN_PATH, or no LD_PRELOAD) there is no rvt
#      (unless installed into that UCX's module directory: then this is
#      skipped);
#   2. with it, `ucx_info -d` lists transport rvt on the node's device and
#      opens its interface (its capabilities are printed);
#   3. this UCX has rc_verbs and ud_verbs too, the transports rvt is
#      compared with;
#   4. a short ucx_perftest of this UCX, node 1 -> node 2, rvt beside
#      rc_verbs: UCT am_lat 8 B and put_bw zcopy 64 KiB, UCP tag_bw 4 MiB
#      (a rendezvous; over rvt its bytes the two agents must have posted
#      between the nodes) and, for rvt, tag_lat 8 B. The full matrix is
#      the 1.13 leg's perftest.sh; figures are printed, never judged;
#   5. Debian's Open MPI 4.1.4 on this UCX's libraries: the project's MPI
#      program, 2 nodes x 4 processes, every word verified, with rvt
#      between the nodes (rank 0's UCP lanes, the agents' counters).
# Exits 1 if any check failed.
# Usage: ucx-release-guest.sh BUILD_DIR UCX_PREFIX
set -u -o pipefail
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
build=${1:?usage: ucx-release-guest.sh BUILD_DIR UCX_PREFIX}
prefix=${2:?usage: ucx-release-guest.sh BUILD_DIR UCX_PREFIX}
# rvtd, rvt_status, module, dev_alias, a job key, and $work (removed at
# exit)
perf_guest_setup ucx-release "$build"
out=$work
version=$("$prefix/bin/ucx_info" -v | sed -n 's/^# Library version: //p')
v="UCX ${version:-?}"
# how this UCX takes rvt (module_env)
load=$(module_env)
without="without ${load%%=*}"
how="preloaded ($load)"
[[ $load == UCX_PLUGIN_PATH=* ]] && how="as a plugin ($load, no LD_PRELOAD)"

# info OUT ENV...: `ucx_info -d` of that UCX on node 1 with ENV and
# neither LD_PRELOAD nor an inherited UCX_PLUGIN_PATH; rvt starts its
# agent from this build
info() {
    local file=$1
    shift
    on 1 env -u LD_PRELOAD -u UCX_PLUGIN_PATH \
        RVT_RVTD="$PWD/$build/src/uct/ib/rvt/tools/rvtd" \
        RVT_JOB_KEY="release-info.$$" "$@" timeout 120 "$prefix/bin/ucx_info" -d \
        >"$out/$file" 2>&1
}

if ls "$prefix"/lib*/ucx/libuct_rvt.* >/dev/null 2>&1; then
    echo "SKIP: rvt is installed in $prefix's module directory"
else
    info none
    if grep -q 'Transport: rvt' "$out/none"; then
        fail "$v: $without, $prefix/bin/ucx_info lists rvt"
    else
        pass "$v: $without, no rvt"
    fi
fi

info loaded "$load"
if grep -q 'Transport: rvt' "$out/loaded"; then
    pass "$v: rvt $how: ucx_info -d lists rvt"
else
    fail "$v: rvt $how: ucx_info -d has no rvt"
fi
# the rvt section: from its Transport line to the next transport or MD
awk '/Transport: |Memory domain: /{in_rvt = ($3 == "rvt")} in_rvt' \
    "$out/loaded" >"$out/rvt"
# an interface that does not open shows "< failed to open interface >"
if grep -q 'am_bcopy' "$out/rvt" && ! grep -q 'failed' "$out/rvt"; then
    pass "rvt's interface opens: $(grep -m1 'Device:' "$out/rvt" | xargs)"
else
    fail "rvt's interface does not open:"
    sed 's/^/    /' "$out/rvt"
    grep 'UCX  ERROR' "$out/loaded" | head -5 | sed 's/^/    /'
fi
for tl in rc_verbs ud_verbs; do
    check "$prefix has $tl" grep -q "Transport: $tl" "$out/loaded"
done

# ---- 4. ucx_perftest of this UCX over rvt, beside rc_verbs ---------------
section "ucx_perftest of $v ($prefix): rvt $how, and rc_verbs"
UCX_PERFTEST=$prefix/bin/ucx_perftest
# the agents, by hand, staying for the whole section (their life totals)
for n in 1 2; do
    on "$n" bash -c "exec timeout 900 $rvtd --device=\$RXE_DEV --linger=0" \
        >"$work/rvtd.$n.log" 2>&1 &
done
for n in 1 2; do
    wait_agent "$n" || fail "rvtd on node $n does not answer"
done
# UCT: from UCX 1.18 the server keeps its own -d: node 2 opens its own
# rxe2; 1.16's, as 1.13's, takes its client's, and perftest_dev_alias.so
# (see the file) gives it its own rxe2 under node 1's name
server_env=$load server_args="-d rxe2:1"
if [ "$(printf '%s\n' "$version" 1.18 | sort -V | head -n 1)" != 1.18 ]; then
    server_env="${load/LD_PRELOAD=/LD_PRELOAD=$dev_alias:} RVT_PERFTEST_DEV_ALIAS=rxe1:1=rxe2:1"
    server_args=""
fi
for t in "am_lat short 8" "put_bw zcopy 65536"; do
    read -r test layout size <<<"$t"
    for tl in rvt rc_verbs; do
        o=$work/uct.$test.$tl
        name="$v uct $test -D $layout $size B, $tl"
        if perf_server_args=$server_args perf_pair "$o" 2 1 "$server_env" \
            "$load" -t "$test" -x "$tl" -d rxe1:1 -D "$layout" \
            -s "$size" -n 100 -w 10 && f=$(figure "$o" "${test#*_}"); then
            pass "$name: $f ($pair_secs s)"
        else
            fail "$name: $(error_text "$o")"
        fi
    done
done
# UCP: rc_verbs needs ud_verbs to wire up; rvt needs nothing else
size_rndv=4194304 iters_rndv=4 warm_rndv=1
moved=$(((iters_rndv + warm_rndv) * size_rndv))
# posted: bytes both agents posted to the other node (life totals)
posted() {
    local n b total=0
    for n in 1 2; do
        b=$(agent_get "$n" '.data_path.peers | map(select(.loopback | not) | .bytes) | add // 0') &&
            [ -n "$b" ] || return 1
        total=$((total + b))
    done
    echo "$total"
}
# shellcheck disable=SC2317 # run by check
moved_over_rvt() { [ -n "$b0" ] && [ -n "$b1" ] && [ $((b1 - b0)) -ge "$moved" ]; }
for tls in rvt,self rc_verbs,ud_verbs:aux,self; do
    for t in "tag_lat 8 100 10" "tag_bw $size_rndv $iters_rndv $warm_rndv"; do
        read -r test size iters warm <<<"$t"
        # (rc_verbs' UCP latency: the 1.13 leg's perftest.sh has UCT's)
        [ "$tls$test" = rc_verbs,ud_verbs:aux,selftag_lat ] && continue
        o=$work/ucp.$test.${tls//[,:]/_}
        name="$v ucp $test $size B, UCX_TLS=$tls"
        b0=$(posted)
        if perf_pair "$o" 2 1 "$load UCX_TLS=$tls" \
            "$load UCX_TLS=$tls" -t "$test" -s "$size" -n "$iters" \
            -w "$warm" && f=$(figure "$o" "${test#*_}"); then
            pass "$name: $f ($pair_secs s)"
        else
            fail "$name: $(error_text "$o")"
        fi
        b1=$(posted)
        if [ "$tls" = rvt,self ] && [ "$test" = tag_bw ]; then
            check "$name: the agents posted ${b0:-?} -> ${b1:-?} bytes between the nodes, >= $moved more" \
                moved_over_rvt
        fi
    done
done

# ---- 5. Open MPI on this UCX's libraries -----------------------------
# Debian's Open MPI 4.1.4 was built against Debian's UCX 1.13; this UCX's
# libraries take their place through LD_LIBRARY_PATH (the same sonames),
# and they take rvt as the section above did. 2 nodes x 4 processes, rvt
# between the nodes; rank 0 logs at info level: which UCX it loaded, and
# the transports UCP chose for each peer.
section "Open MPI 4.1.4 on UCX $prefix's libraries, over rvt"
mpi_prog=$PWD/$build/test/mpi/rvt_mpi_check
if [ ! -x "$mpi_prog" ]; then
    fail "$mpi_prog not built (make test/mpi/rvt_mpi_check: configure finds Open MPI's mpicxx)"
else
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    mpi_options "$work/hosts" -x LD_LIBRARY_PATH="$prefix/lib" \
        -x "$load"
    # shellcheck disable=SC2016 # for the ranks' shell
    rank0_info='[ "$OMPI_COMM_WORLD_RANK" = 0 ] && export UCX_LOG_LEVEL=info; exec "$0" "$@"'
    for n in 1 2; do counters_save "$n" "$work/counters.before.$n"; done
    t0=$SECONDS
    on 1 timeout 600 mpirun "${mpirun_opts[@]}" -np 8 bash -c "$rank0_info" \
        "$mpi_prog" --max-size=1048576 >"$work/mpi.out" 2>&1
    rc=$?
    grep -v ' UCX  INFO ' "$work/mpi.out" | sed 's/^/  mpi| /'
    if [ $rc = 0 ] && grep -q '^OK: rvt_mpi_check' "$work/mpi.out"; then
        pass "MPI program verified, 2 nodes x 4 processes, 8 B to 1 MiB ($((SECONDS - t0)) s)"
    else
        fail "MPI program (mpirun exit $rc after $((SECONDS - t0)) s; output above)"
    fi
    loaded=$(sed -n 's/.*UCX  INFO  Version \(.*\)/\1/p' "$work/mpi.out" | head -1)
    check "rank 0 ran on $prefix's UCX: ${loaded:-no version logged}" \
        grep -q "loaded from $prefix/lib/libucp" <<<"$loaded"
    # UCP's endpoint configurations ("ucp_context_0 inter-node cfg#1
    # tag(rvt/rxe1:1)"): the other node's ranks on rvt, and taken for
    # other nodes (UCT_IFACE_FLAG_INTER_NODE, ucx_compat.h)
    grep -E ' cfg#[0-9]+ ' "$work/mpi.out" | sed 's/.*INFO *//' | sort -u | sed 's/^/  rank 0 UCP| /'
    check "rank 0's UCP put the other node's ranks on rvt, as inter-node endpoints" \
        grep -qE 'inter-node cfg#[0-9]+ .*rvt/' "$work/mpi.out"
    for n in 1 2; do
        if d=$(counters_delta "$n" "$work/counters.before.$n"); then
            read -r am _ _ tx rx <<<"$d"
            check "node $n's agent carried the job: +$am AMs delivered, $tx bytes sent, $rx received" \
                test "$am" -gt 0 -a "$tx" -gt 0 -a "$rx" -gt 0
        else
            fail "node $n's agent does not answer after the MPI job"
        fi
    done
fi

finish "ucx-release ($v)"
