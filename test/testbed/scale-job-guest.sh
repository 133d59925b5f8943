#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the testbed guest: the largest MPI job the guest's 2 vCPUs allow,
# to count what each node's device holds for a real job
# (docs/performance.md, "Many nodes, simulated with the real engine",
# ends with its figures). NODES nodes (default 6) x PPN ranks (default 2)
# run test/mpi/rvt_mpi_check's alltoall and allreduce, every word
# verified (pingpong and bandwidth too, between rank 0 and the next
# node), over
#
#   ud_verbs,rvt   UCX_TLS=ud_verbs,rvt,sm,self, the recommended setting
#   rvt            UCX_TLS=rvt,sm,self
#   rc_verbs       UCX_TLS=rc_verbs,ud_verbs:aux,sm,self (UCX's own)
#
# and prints what each node's device held at the job's largest (QPs, from
# `rdma resource`, sampled every second while the job runs: rvt's agents
# and rc_verbs' processes both create theirs there), the KiB of verbs
# queues its processes mapped (rxe maps every QP's and CQ's queue into
# the process that made it: /proc/PID/maps) and, for the rvt
# settings, each agent's peers, RC QPs and resident memory from its status
# and /proc. Every job that verified everything is a PASS; the QP counts
# are printed, not judged.
# Usage: scale-job-guest.sh BUILD_DIR [NODES [PPN]]
# shellcheck disable=SC2016 # jq filters: single quotes on purpose
# shellcheck disable=SC2154 # rvtd, module, work, t_start: perf_guest_setup's
set -u -o pipefail
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
build=${1:?usage: scale-job-guest.sh BUILD_DIR [NODES [PPN]]}
nodes=${2:-6}
ppn=${3:-2}
perf_guest_setup scale "$build"
prog=$PWD/$build/test/mpi/rvt_mpi_check
ARGS=${RVT_SCALE_ARGS:---max-size=65536 --iterations=3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x "$prog" ] || { fail "$prog not built (test/testbed/mpi.sh builds it)"; finish scale; }
# shellcheck disable=SC2034 # mpi_options reads them
mpi_hosts=$(seq -f 'node%g' 1 "$nodes" | tr '\n' ' ')
# shellcheck disable=SC2034
mpi_slots=$ppn

for n in $(seq "$nodes"); do
    on "$n" bash -c "exec timeout 3000 $rvtd --device=\$RXE_DEV --linger=0 \
        --keepalive-ms=20000 --give-up-ms=120000" >"$work/rvtd.$n.log" 2>&1 &
done
for n in $(seq "$nodes"); do
    wait_agent "$n" || { fail "node $n's agent did not start"; finish scale; }
done

# qps_sample: every node's QP count on its device, one line
qps_sample() {
    rdma resource show 2>/dev/null | awk -v nodes="$nodes" '
        { for (i = 3; i < NF; i += 2) if ($i == "qp") q[$2] = $(i + 1) }
        END { for (n = 1; n <= nodes; ++n) printf "%d ", q["rxe" n ":"] + 0; print "" }'
}

# queues_sample: every node's KiB of verbs queues (the uverbs mappings of
# its ranks and its agent: rxe maps each QP's and CQ's queue into the
# process that made it), one line
queues_sample() {
    local -a kib
    local p node lo hi n
    for p in $(pgrep -x rvt_mpi_check) $(pgrep -x rvtd); do
        # a process may end between pgrep and here
        node=$(node_of "$p")
        [ -n "$node" ] || continue
        while IFS='- ' read -r lo hi _; do
            kib[node]=$((${kib[node]:-0} + (16#$hi - 16#$lo) / 1024))
        done < <(grep uverbs "/proc/$p/maps" 2>/dev/null)
    done
    for n in $(seq "$nodes"); do printf '%d ' "${kib[n]:-0}"; done
    echo
}

# column_max FILE: each column's largest value over FILE's lines, one line
column_max() {
    awk '{ for (i = 1; i <= NF; ++i) if ($i > m[i]) m[i] = $i }
        END { for (i = 1; i <= NF; ++i) printf "%d ", m[i]; }' "$1"
}

# job NAME UCX_TLS: one verified job; the most QPs each device held while
# it ran in most[NAME]
declare -A most most_kib
job() {
    local name=$1 tls=$2 out=$work/job.$1.out rc t0=$SECONDS stop=$work/stop.$1
    # shellcheck disable=SC2034 # mpi_options reads them
    mpi_tls=$tls mpi_pml_tls=any mpi_options "$work/hosts" \
        -x LD_PRELOAD="$module" -x UCX_UD_VERBS_ETH_DGID_CHECK=n
    (
        while [ ! -e "$stop" ]; do qps_sample; sleep 1; done
    ) >"$work/qps.$name" &
    local sampler=$!
    (
        while [ ! -e "$stop" ]; do queues_sample; sleep 1; done
    ) >"$work/queues.$name" &
    local queues=$!
    # shellcheck disable=SC2086 # ARGS: words
    on 1 timeout 900 mpirun "${mpirun_opts[@]}" -np $((nodes * ppn)) \
        --map-by "ppr:$ppn:node" "$prog" $ARGS >"$out" 2>&1
    rc=$?
    touch "$stop"
    wait "$sampler" "$queues"
    most[$name]=$(column_max "$work/qps.$name")
    most_kib[$name]=$(column_max "$work/queues.$name")
    if [ $rc = 0 ] && ! grep -q '^FAIL' "$out"; then
        pass "$nodes x $ppn ranks, $name (UCX_TLS=$tls): alltoall, allreduce, pingpong, bandwidth, every word verified ($((SECONDS - t0)) s)"
    else
        fail "$nodes x $ppn ranks, $name (UCX_TLS=$tls): exit $rc"
        tail -20 "$out" | indent "$name"
    fi
}

section "$nodes nodes x $ppn ranks: rvt_mpi_check $ARGS"
job ud_verbs,rvt ud_verbs,rvt,sm,self
job rvt rvt,sm,self
section "the agents after the rvt jobs (status, /proc)"
printf '  %-6s %-6s %-8s %-10s\n' node peers rc_qps rss_kib
for n in $(seq "$nodes"); do
    p=$(agent_pids "$n" | head -n 1)
    printf '  %-6s %-6s %-8s %-10s\n' "node$n" \
        "$(agent_get "$n" '.data_path.peers | length')" \
        "$(agent_get "$n" '.data_path.rc_qps')" \
        "$(awk '/^VmRSS:/ { print $2 }' "/proc/${p:-0}/status" 2>/dev/null)"
done
job rc_verbs rc_verbs,ud_verbs:aux,sm,self

section "QPs on each node's device at the job's largest (node1 .. node$nodes)"
for name in ud_verbs,rvt rvt rc_verbs; do
    printf '  %-14s %s\n' "$name" "${most[$name]:-?}"
done
section "KiB of verbs queues mapped on each node (ranks and agent), at the job's largest"
for name in ud_verbs,rvt rvt rc_verbs; do
    printf '  %-14s %s\n' "$name" "${most_kib[$name]:-?}"
done
echo "  (rvt: the agent's K = 4 per remote node and 4 for its own, and its"
echo "  UD QP; ud_verbs adds one UD QP per process; rc_verbs: the processes'"
echo "  RC QPs, one per remote process each, and their UD QPs)"
echo "guest time: $((SECONDS - t_start)) s"
finish scale
