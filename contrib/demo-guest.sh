#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job's guest side (run by contrib/demo.sh inside the testbed):
# two nodes, each its own host with its own Soft-RoCE device, moving data
# over RDMA: raw verbs first, then UCX's rc_verbs (the baseline), then rvt:
# processes on both nodes sharing their agents' few QPs, through the client
# library and through UCX.
set -u
G=$(cat "$TB_RUN/gid_idx")
say() { echo; echo "--- $*"; }
say "the nodes"
on all sh -c 'echo "$(hostname): $RXE_DEV on $NODE_IP, boot id $(cut -c1-8 /proc/sys/kernel/random/boot_id)"'
on 1 ibv_devinfo -d rxe1 | grep -E 'hca_id|state|active_mtu|link_layer'

say "RDMA WRITE bandwidth, node1 -> node2 (perftest ib_write_bw, 64 KiB)"
on 2 ib_write_bw -d rxe2 -x "$G" -s 65536 -n 1000 --report_gbits > /dev/null 2>&1 &
wait-port 18515 60 && on 1 ib_write_bw -d rxe1 -x "$G" -s 65536 -n 1000 --report_gbits node2 |
    sed -n '/#bytes/,/^---/p' | grep -v '^---'
wait || exit 1

say "UCX rc_verbs between the nodes (ucx_perftest, UCP level, all transports enabled)"
for t in tag_lat tag_bw; do
    size=8
    [ $t = tag_bw ] && size=1048576
    on 2 ucx_perftest -p 13337 > /dev/null 2>&1 &
    wait-port 13337 60 || exit 1
    on 1 env UCX_LOG_LEVEL=info ucx_perftest node2 -p 13337 -t $t -s $size -n 200 -w 5 2>&1 |
        grep -E 'ep_cfg|latency \(usec\)|Stage|Final' | sed "s/^/$t: /"
    wait || exit 1
done
build=${RVT_BUILD:-build}
rvtd=$build/src/uct/ib/rvt/tools/rvtd
status=$build/src/uct/ib/rvt/tools/rvt-status
module=$PWD/$build/src/uct/ib/rvt/uct/.libs/libuct_rvt.so
export RVT_JOB_KEY=demo.1
work=$(mktemp -d "$PWD/$build/demo.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf "$work"' EXIT

say "rvt: one agent per node (K = 4 shared RC QPs per remote node)"
for n in 1 2; do
    on $n bash -c "exec $rvtd --device=\$RXE_DEV --linger=0" >"$work/rvtd.$n.log" 2>&1 &
done
for n in 1 2; do
    for _ in $(seq 100); do
        on $n bash -c "$status --device=\$RXE_DEV" >/dev/null 2>&1 && break
        sleep 0.1
    done
done

# the default path is the authenticated one: each node runs munged
for n in 1 2; do
    on $n bash -c "$status --device=\$RXE_DEV" | grep '^auth' | sed "s/^/node$n: /"
done
say "rvt: an agent with neither MUNGE nor a job secret refuses to start (only --auth=none runs open to the fabric)"
on 1 env -u RVT_JOB_SECRET -u RVT_JOB_SECRET_FILE RVT_JOB_KEY=demo.closed \
    bash -c "exec timeout 20 $rvtd --device=\$RXE_DEV --munge-socket=/nonexistent --linger=1" 2>&1 |
    grep -o -- '--auth=auto: no way to prove peers.*' | fold -s -w 100
echo "(without munged, hand every rank the secret in a file, never on a command line:"
echo " umask 077; openssl rand -hex 32 > F; export RVT_JOB_SECRET_FILE=F; mpirun -x RVT_JOB_SECRET_FILE ...)"

say "rvt: 4 processes per node, each writing (with immediate) to and sending to all 7 others, every byte checked"
pids=()
for n in 1 2; do
    for r in 0 1 2 3; do
        on $n "$build/test/gtest/integration/rvt_traffic_client" --dir="$work" \
            --id=$(((n - 1) * 4 + r)) --clients=8 --rounds=4 --size=65536 &
        pids+=($!)
    done
done
for p in "${pids[@]}"; do wait "$p" || exit 1; done
for n in 1 2; do
    on $n bash -c "$status --device=\$RXE_DEV" | grep -E '^peers|  peer' | sed "s/^/node$n: /"
done
echo "node1's agent holds 4 RC QPs to node2 (plus 4 loopback) for its 4 processes;"
echo "per-process RC (rc_verbs) would need 4 x 4 = 16 QPs on each side."

say "UCX over rvt (LD_PRELOAD=libuct_rvt.so, UCX_TLS=rvt,self): UCP tag_lat and tag_bw, node1 -> node2"
for t in tag_lat tag_bw; do
    size=8
    [ $t = tag_bw ] && size=1048576
    on 2 env LD_PRELOAD="$module" UCX_TLS=rvt,self ucx_perftest -p 13338 > /dev/null 2>&1 &
    wait-port 13338 60 || exit 1
    on 1 env LD_PRELOAD="$module" UCX_TLS=rvt,self UCX_LOG_LEVEL=info \
        ucx_perftest node2 -p 13338 -t $t -s $size -n 200 -w 5 2>&1 |
        grep -E 'ep_cfg|latency \(usec\)|Stage|Final' | sed "s/^/rvt $t: /"
    wait %% 2>/dev/null
done
echo
echo "Both run on the same emulated testbed: compare rvt with rc_verbs as ratios,"
echo "never as absolute numbers (TCG, 2 vCPUs, every process polling)."

say "QPs of one MPI job, 4 processes per node: UCX rc_verbs (per process pair) against rvt (the agent's K)"
# The same job twice: test/mpi/rvt_mpi_check (alltoall and allreduce make
# every rank talk to every other, every result verified). While it runs,
# `rdma resource show qp` is sampled on node 1's device and its RC QPs are
# counted by owner: the count is the kernel's, not rvt's own claim.
mpi_prog=$PWD/$build/test/mpi/rvt_mpi_check
mkdir -p "$(dirname "$mpi_prog")"
if [ ! "$mpi_prog" -nt test/mpi/rvt_mpi_check.cc ] &&
   ! mpicxx -std=c++20 -O2 -DOMPI_SKIP_MPICXX=1 -o "$mpi_prog" \
       test/mpi/rvt_mpi_check.cc; then
    echo "could not build $mpi_prog with mpicxx (openmpi-bin, libopenmpi-dev)"
    exit 1
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
printf 'node1 slots=4\nnode2 slots=4\n' >"$work/hosts"
# options explained in test/testbed/mpi-guest.sh
mpi_common=(--hostfile "$work/hosts" --bind-to none
    --mca plm_rsh_agent "$PWD/test/testbed/mpi-rsh-agent.sh"
    --mca plm_rsh_no_tree_spawn 1 --mca if_base_do_not_resolve 1
    --mca oob_tcp_if_include 198.18.0.0/24 --mca pml ucx
    --mca pml_ucx_devices any --mca btl self --mca mpi_yield_when_idle 1
    -x UCX_WARN_UNUSED_ENV_VARS=n)
# sample_qps FILE: the most RC QPs on rxe1 seen at once, by owner, until
# FILE.stop appears
sample_qps() {
    local out=$1
    while [ ! -e "$out.stop" ]; do
        rdma resource show qp link rxe1/1 2>/dev/null |
            awk '/ type RC / { for (i = 1; i < NF; i++) if ($i == "comm") c[$(i + 1)]++ }
                 END { for (k in c) printf "%s %d\n", k, c[k] }' >"$out.now"
        total=$(awk '{ s += $2 } END { print s + 0 }' "$out.now")
        best=$(awk '{ s += $2 } END { print s + 0 }' "$out" 2>/dev/null || echo 0)
        [ "$total" -gt "${best:-0}" ] && cp "$out.now" "$out"
        sleep 0.2
    done
}
run_job() { # LABEL TLS [EXTRA MPIRUN OPTIONS...]
    local label=$1 tls=$2
    shift 2
    : >"$work/qps.$label"
    sample_qps "$work/qps.$label" &
    local sampler=$!
    timeout 300 mpirun "${mpi_common[@]}" -x UCX_TLS="$tls" "$@" \
        "$mpi_prog" --max-size=65536 --coll-max-size=65536 --iterations=3 \
        >"$work/mpi.$label.log" 2>&1
    local rc=$?
    touch "$work/qps.$label.stop"
    wait "$sampler"
    if [ $rc != 0 ]; then
        echo "$label: the MPI job failed ($rc):"
        tail -20 "$work/mpi.$label.log"
        exit 1
    fi
    grep -m1 '^OK: ' "$work/mpi.$label.log" | sed "s/^/$label: /" ||
        { echo "$label: no OK line"; tail -20 "$work/mpi.$label.log"; exit 1; }
    # UCX's own threads show as "async"; they belong to the job's processes
    echo "$label: RC QPs on node 1's rxe1 at the most: $(awk '
        { if ($1 == "rvtd") a += $2; else p += $2 }
        END { printf "the 4 processes %d, the agent (rvtd) %d", p, a }' "$work/qps.$label")"
}
# rc_verbs needs ud_verbs to wire up (UCX: "auxiliary transport")
run_job rc_verbs rc_verbs,ud_verbs,sm,self --mca pml_ucx_tls any
run_job rvt rvt,sm,self --mca pml_ucx_tls rvt -x RVT_JOB_KEY \
    -x UCX_RVT_START_AGENT=n -x LD_PRELOAD="$module"
echo "rc_verbs: every process holds an RC QP per remote process it talks to;"
echo "rvt: node 1's 4 processes hold none, its agent holds K = 4 to node 2"
echo "(plus 4 loopback), however many processes the node runs."
