# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# shellcheck disable=SC2154 # build, work, rvtd, module, mpirun_opts: perf-guest.sh's and lib.sh's
# The full node, a section of perf-guest.sh (sourced; it uses lib.sh and
# perf-guest.sh's setup): test/mpi/rvt_mpi_kernels (alltoall, transpose,
# random updates, ring, every value verified) with 2 ranks on each of 2
# nodes, every node on the guest's 2 vCPUs: no vCPU is left for the
# agents, as on a node where every core runs a rank. One run per setting,
# same boot:
#
#   rc_verbs        UCX_TLS=rc_verbs,ud_verbs:aux,sm,self (UD for UCP's
#                   wire-up, as UCX's default)
#   ud_verbs,rvt    UCX_TLS=ud_verbs,rvt,sm,self, the recommended setting
#   rvt             UCX_TLS=rvt,sm,self
#
# the rvt ones under agents of each scheduling mode (rvtd --priority):
#
#   normal          the default: the fair class, --spin-us 2000
#   fifo            --priority=fifo:10 --spin-us=20: a woken agent preempts
#                   the rank on its core, and sleeps soon after its work
#
# and prints each kernel's time and bandwidth, and every setting's
# bandwidth over rc_verbs' (the project's target on a full node: >= 0.9
# for the recommended setting, 0.7 for rvt alone; docs/performance.md,
# "The full node: the agent's scheduling"; printed, not judged: one boot
# of an emulator). Every run that verified everything is a PASS.

# the kernels' sizes: a few seconds each under TCG
KERNELS_ARGS=${RVT_KERNELS_ARGS:---reps=4 --a2a-size=64K --transpose-n=512 --table-words=64K --updates=4096 --ring-max=1M}

# kernels_agents MODE_OPTIONS...: (re)starts both nodes' agents with
# these options; 0 once both answer
kernels_agents() {
    local n
    for n in 1 2; do
        on "$n" bash -c 'pkill -TERM -x rvtd' 2>/dev/null
    done
    for _ in $(seq 100); do
        pgrep -x rvtd >/dev/null || break
        sleep 0.1
    done
    for n in 1 2; do
        on "$n" bash -c "exec timeout 3000 $rvtd --device=\$RXE_DEV --linger=0 $*" \
            >>"$work/rvtd.kernels.$n.log" 2>&1 &
    done
    for n in 1 2; do
        wait_agent "$n" || return 1
    done
}

# kernels_run NAME UCX_TLS: one mpirun of the kernels; figures in
# kfig[NAME.KERNEL] (MB/s) and ktime[NAME.KERNEL] (s), and how the agents
# were scheduled meanwhile in ksched[NAME] (sched_report)
declare -A kfig ktime ksched
kernels_run() {
    local name=$1 tls=$2 out=$work/kernels.$1.out rc t0=$SECONDS sched0
    mpi_tls=$tls mpi_pml_tls=any mpi_options "$work/kernels.hosts" \
        -x LD_PRELOAD="$module" -x UCX_UD_VERBS_ETH_DGID_CHECK=n
    sched0=$(agent_sched)
    on 1 timeout 600 mpirun "${mpirun_opts[@]}" -np 4 --map-by ppr:2:node "$kernels_prog" \
        "${kernels_args[@]}" >"$out" 2>&1
    rc=$?
    ksched[$name]=$(sched_report "$sched0" "$(agent_sched)" $((SECONDS - t0)))
    if [ $rc = 0 ] && grep -q '^OK: rvt_mpi_kernels' "$out"; then
        pass "kernels, $name (UCX_TLS=$tls): every value verified ($((SECONDS - t0)) s)"
    else
        indent "$name" <"$out"
        fail "kernels, $name (UCX_TLS=$tls): mpirun exit $rc after $((SECONDS - t0)) s (output above)"
        return
    fi
    while read -r _ k _ t _ mb _; do
        kfig[$name.$k]=$mb
        ktime[$name.$k]=$t
    done < <(grep '^kernel ' "$out")
    ktime[$name.total]=$(awk '$1 == "total" { print $3 }' "$out")
}

kernels_section() {
    section "the full node: MPI kernels, 2 ranks on each node's 2 vCPUs, no vCPU for the agents"
    kernels_prog=$build/test/mpi/rvt_mpi_kernels
    if [ ! -x "$kernels_prog" ]; then
        fail "$kernels_prog not built (make check builds it where Open MPI is installed)"
        return
    fi
    read -r -a kernels_args <<<"$KERNELS_ARGS"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    local settings=() mode opts name k
    for mode in normal fifo; do
        case $mode in
        normal) opts="" ;;
        fifo) opts="--priority=fifo:10 --spin-us=20" ;;
        esac
        if ! kernels_agents "$opts"; then
            fail "kernels: the agents ($mode) do not answer"
            continue
        fi
        grep -h -- '--priority' "$work"/rvtd.kernels.*.log 2>/dev/null |
            sort -u | indent "agents ($mode)"
        if [ $mode = normal ]; then
            kernels_run rc_verbs rc_verbs,ud_verbs:aux,sm,self
            settings+=(rc_verbs)
        fi
        kernels_run "ud_verbs,rvt.$mode" ud_verbs,rvt,sm,self
        kernels_run "rvt.$mode" rvt,sm,self
        settings+=("ud_verbs,rvt.$mode" "rvt.$mode")
    done
    echo
    printf '%-10s' kernel
    for name in "${settings[@]}"; do printf ' %-19s' "$name"; done
    echo
    for k in alltoall transpose random ring total; do
        printf '%-10s' "$k"
        for name in "${settings[@]}"; do
            if [ "$k" = total ]; then
                printf ' %-19s' "${ktime[$name.$k]:--} s"
            else
                printf ' %-19s' "${kfig[$name.$k]:--} MB/s"
            fi
        done
        echo
    done
    echo "bandwidth / rc_verbs' (time: rc_verbs' / this), target >= 0.9 for"
    echo "ud_verbs,rvt and 0.7 for rvt:"
    for k in alltoall transpose random ring total; do
        printf '%-10s %-19s' "$k" "1.00"
        for name in "${settings[@]:1}"; do
            if [ "$k" = total ]; then
                printf ' %-19s' "$(ratio "${ktime[rc_verbs.$k]:-}" "${ktime[$name.$k]:-}")"
            else
                printf ' %-19s' "$(ratio "${kfig[$name.$k]:-}" "${kfig[rc_verbs.$k]:-}")"
            fi
        done
        echo
    done
    echo "(one boot, TCG: every node on the guest's 2 vCPUs; $KERNELS_ARGS)"
    echo
    echo "where the agents' time went, each run (both nodes' agents):"
    for name in "${settings[@]}"; do
        printf '%-19s %s\n' "$name" "${ksched[$name]:--}"
    done
}
