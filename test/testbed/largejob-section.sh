# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# shellcheck disable=SC2154 # build, work, rvtd, module, mpirun_opts: perf-guest.sh's and lib.sh's
# A large job as UCP sees it, a section of perf-guest.sh (sourced): where
# UCP picks rvt by itself. With UCX_TLS unset and more estimated endpoints
# than rc_verbs' 256 (UCX_NUM_EPS, what a 1,024- or 4,096-rank job tells
# UCP), UCP runs active messages and eager sends on each process's UD QP
# and, when the module is loaded, the rendezvous on rvt. Its peer there is
# the same job without rvt (UD alone), not rc_verbs. Settings, each an
# mpirun of Open MPI's pml ucx between the 2 nodes, UCX_TLS unset:
#
#   ud E         UCX_NUM_EPS=E, the module not loaded, no agent running
#   rvt E        UCX_NUM_EPS=E, the module preloaded, the node's agents
#                running (rvtd's defaults)
#   rc_verbs     UCX_NUM_EPS unset (the job's own 2-8 ranks): what UCP
#                chooses for a small job, for scale
#   (full run also, each at E=1024: ud and rvt with UCX_RNDV_THRESH=8K:
#   does an earlier rendezvous help here, as it helps the mid-size sweep
#   from 16 KiB? docs/performance.md, "Mid-size messages")
#   ud-1.22 E, rvt-1.22 E
#                the same on UCX 1.22's libraries (RVT_LARGEJOB_UCX122:
#                its prefix; RVT_LARGEJOB_BUILD122: rvt built against it,
#                whose module and rvtd the rvt setting runs), Open MPI
#                taking them through LD_LIBRARY_PATH as ucx-release-guest.sh
#                does; compared with ud-1.22 at the same E
#
# and per setting test/mpi/rvt_mpi_sweep: latency and bandwidth from 8 B
# to 4 MiB between one rank on each node (2 ranks), an alltoall from 1 KiB
# to 1 MiB with 4 ranks on each node (8 ranks), and test/mpi/
# rvt_mpi_kernels (2 ranks on each node). In ROUNDS interleaved rounds
# (each round runs the settings in another order), every value verified;
# largejob_table.py prints the medians, the spread and each setting's
# ratio to UD alone at its E.
#
# brief (CI): ud and rvt at E=1024 only, 3 rounds, 8 B, 8 KiB, 32 KiB
# and 1 MiB, the alltoall at 256 KiB, no kernels; full: every setting
# above, RVT_LARGEJOB_ROUNDS (default 3) rounds.

largejob_agents_down() {
    local n
    for n in 1 2; do
        on "$n" bash -c 'pkill -TERM -x rvtd' 2>/dev/null
    done
    for _ in $(seq 100); do
        pgrep -x rvtd >/dev/null || return 0
        sleep 0.1
    done
    return 1
}

# largejob_agents_up [RVTD_OPTIONS [RVTD]]
largejob_agents_up() {
    local n
    largejob_agents_down
    for n in 1 2; do
        on "$n" bash -c "exec $largejob_pin timeout 3000 ${2:-$rvtd} --device=\$RXE_DEV --linger=0 ${1:-}" \
            >>"$work/rvtd.largejob.$n.log" 2>&1 &
    done
    # asked with the rvt-status of the agent's own build (a previous
    # build's agent may speak an older protocol)
    local rvt_status
    rvt_status=$(dirname "${2:-$rvtd}")/rvt-status
    for n in 1 2; do
        wait_agent "$n" || return 1
    done
}

# largejob_run ROUND SETTING: every program of one setting; each figure a
# line "ROUND SETTING TEST SIZE VALUE" in $work/largejob.raw
largejob_run() {
    local round=$1 setting=$2 eps rndv="" load out rc t0=$SECONDS prog np
    local name=${setting%% *} extra=() agent_opts="" args
    eps=${setting#* }
    case $name in
    rc_verbs) eps="" ;;
    ud-rndv8k) name=ud rndv=8192 ;;
    rvt-rndv8k) name=rvt rndv=8192 ;;
    # diagnostics (RVT_LARGEJOB_SETTINGS): the module never yields, the
    # agents never spin
    rvt-noyield) name=rvt extra=(-x UCX_RVT_IDLE_YIELD=n) ;;
    rvt-nospin) name=rvt agent_opts=--spin-us=0 ;;
    # the previous design, in the same boot: RVT_LARGEJOB_BEFORE is
    # another build directory (its module and rvtd)
    rvt-before) name=rvt-before ;;
    ud-1.22 | rvt-1.22)
        extra=(-x "LD_LIBRARY_PATH=${RVT_LARGEJOB_UCX122:?$name needs RVT_LARGEJOB_UCX122}/lib") ;;
    esac
    local agent=$rvtd
    load=$module
    if [ "$name" = rvt-before ]; then
        name=rvt
        agent=${RVT_LARGEJOB_BEFORE:?rvt-before needs RVT_LARGEJOB_BEFORE}/src/uct/ib/rvt/tools/rvtd
        load=$RVT_LARGEJOB_BEFORE/src/uct/ib/rvt/uct/.libs/libuct_rvt.so
    elif [ "$name" = rvt-1.22 ]; then
        name=rvt
        agent=${RVT_LARGEJOB_BUILD122:?rvt-1.22 needs RVT_LARGEJOB_BUILD122}/src/uct/ib/rvt/tools/rvtd
        load=$RVT_LARGEJOB_BUILD122/src/uct/ib/rvt/uct/.libs/libuct_rvt.so
    fi
    if [ "$name" = rvt ]; then
        largejob_agents_up "$agent_opts" "$agent" || { fail "large job: the agents do not answer"; return; }
    else
        load=""
        largejob_agents_down || { fail "large job: an agent did not stop"; return; }
    fi
    local label=${setting// /@}
    for prog in sweep-pair sweep-a2a kernels; do
        case $prog in
        sweep-pair) np=2 args=(--only=lat,bw "--sizes=$largejob_sizes" "--iters=$largejob_iters") ;;
        sweep-a2a)
            [ "$largejob_a2a_sizes" != none ] || continue
            np=8 args=(--only=a2a "--a2a-sizes=$largejob_a2a_sizes" --reps=3) ;;
        kernels)
            [ "$largejob_kernels" = 1 ] || continue
            np=4 args=(--reps=2 --a2a-size=64K --transpose-n=512 --table-words=64K --updates=4096 --ring-max=1M) ;;
        esac
        mpi_tls=unset mpi_pml_tls=any mpi_slots=$((np / 2)) mpi_options "$work/largejob.hosts" \
            ${load:+-x LD_PRELOAD="$load"} ${eps:+-x UCX_NUM_EPS="$eps"} \
            ${rndv:+-x UCX_RNDV_THRESH="$rndv"} -x UCX_UD_VERBS_ETH_DGID_CHECK=n "${extra[@]}"
        out=$work/largejob.$round.$label.$prog.out
        local bin=$build/test/mpi/rvt_mpi_sweep
        [ "$prog" = kernels ] && bin=$build/test/mpi/rvt_mpi_kernels
        t0=$SECONDS
        # shellcheck disable=SC2016 # expanded on the rank's node
        on 1 timeout 900 mpirun "${mpirun_opts[@]}" -np "$np" \
            --map-by "ppr:$((np / 2)):node" \
            ${largejob_pin:+bash -c 'exec taskset -c $(((RVT_NODE - 1) % $(nproc))) "$0" "$@"'} \
            "$bin" "${args[@]}" >"$out" 2>&1
        rc=$?
        # Open MPI's mpirun has once (UD alone, rvt not loaded) died of
        # SIGPIPE (141) at its teardown after every rank had verified and
        # ended: the job's figures stand, and the line says so
        local after=""
        if [ $rc = 141 ] && grep -q '^OK: rvt_mpi_' "$out"; then
            after="; then mpirun died of SIGPIPE at its teardown, exit 141"
            rc=0
        fi
        if [ $rc = 0 ] && grep -q '^OK: rvt_mpi_' "$out"; then
            pass "large job, round $round, $setting: $prog, $np ranks, verified ($((SECONDS - t0)) s$after)"
        else
            indent "$label $prog" <"$out" | tail -20
            fail "large job, round $round, $setting: $prog: mpirun exit $rc after $((SECONDS - t0)) s"
            continue
        fi
        awk -v r="$round" -v s="$label" '
            /^lat / { print r, s, "lat", $2, $4 }
            /^bw / { print r, s, "bw", $2, $4 }
            /^a2a / { print r, s, "a2a", $2, $4 }
            /^kernel / { print r, s, "kernel_" $2, 0, $4 }
            /^total time_s/ { print r, s, "kernels_total", 0, $3 }' "$out" \
            >>"$work/largejob.raw"
    done
}

largejob_section() {
    local mode=${1:-full} rounds settings=() round i n
    section "a large job as UCP sees it: UCX_TLS unset, UD alone beside UD + rvt ($mode)"
    if [ ! -x "$build/test/mpi/rvt_mpi_sweep" ]; then
        fail "$build/test/mpi/rvt_mpi_sweep not built (make check builds it where Open MPI is installed)"
        return
    fi
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    rounds=${RVT_LARGEJOB_ROUNDS:-3}
    if [ "$mode" = brief ]; then
        largejob_sizes=8,8K,32K,1M
        largejob_a2a_sizes=256K
        largejob_iters=30
        largejob_kernels=0
        settings=("ud 1024" "rvt 1024")
    else
        largejob_sizes=8,64,512,1K,4K,8K,16K,32K,64K,256K,1M,4M
        largejob_a2a_sizes=1K,32K,256K,1M
        largejob_iters=50
        largejob_kernels=1
        settings=("ud 1024" "rvt 1024" "ud 4096" "rvt 4096" "rc_verbs -"
            "ud-rndv8k 1024" "rvt-rndv8k 1024")
    fi
    # for an investigation: other settings (NAME E;NAME E...), sizes, or
    # no alltoall (RVT_LARGEJOB_A2A_SIZES=none)
    [ -n "${RVT_LARGEJOB_SETTINGS:-}" ] && IFS=';' read -r -a settings <<<"$RVT_LARGEJOB_SETTINGS"
    largejob_sizes=${RVT_LARGEJOB_SIZES:-$largejob_sizes}
    largejob_a2a_sizes=${RVT_LARGEJOB_A2A_SIZES:-$largejob_a2a_sizes}
    # each node's processes (ranks and agent) on a vCPU of its own
    # (RVT_LARGEJOB_PIN=n: wherever the guest's scheduler puts them)
    largejob_pin='taskset -c $(((RVT_NODE - 1) % $(nproc)))'
    [ "${RVT_LARGEJOB_PIN:-y}" = n ] && largejob_pin=""
    : >"$work/largejob.raw"
    n=${#settings[@]}
    for round in $(seq "$rounds"); do
        # each round starts one further along the list, so that no
        # setting always runs first or right after the same one
        for i in $(seq 0 $((n - 1))); do
            largejob_run "$round" "${settings[$(((i + round - 1) % n))]}"
        done
    done
    largejob_agents_up || fail "large job: the agents do not come back"
    python3 "$here/largejob_table.py" "$work/largejob.raw" | tee "$results/largejob.txt"
    cp "$work/largejob.raw" "$results/largejob.raw"
    echo "(one boot, TCG: both nodes on the guest's 2 vCPUs; medians of $rounds interleaved rounds,"
    echo " [min-max] the rounds' spread; ratio: the setting's median over UD alone's at the same"
    echo " endpoint count (time: lower is better, bandwidth: higher)"
}
