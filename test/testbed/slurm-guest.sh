#!/bin/bash
# Inside the testbed guest (2 nodes): a real Slurm cluster (Debian 12's
# slurmctld on node1, slurmd on both, the testbed's munged on each with
# one key) runs Open MPI jobs over rvt the ways sites launch them, with
# no rvt setting but UCX's own (UCX_TLS, the module preloaded):
#
#   1. mpirun inside salloc (UCX_TLS=ud_verbs,rvt), inside sbatch
#      (UCX_TLS=rvt), and srun --mpi=pmix launching the ranks itself
#      (ud_verbs,rvt); srun --mpi=pmi2 is tried and its refusal printed.
#      Each: test/mpi/rvt_mpi_check verifies every word; from each node,
#      the agent the module started serves key slurm.<job> (from
#      SLURM_JOB_ID, though mpirun's own node's ranks have no step and the
#      other node's run in step 0), authenticates its peer with MUNGE with
#      no --auth given, and its counters grew; afterwards no agent of the
#      job is left on any node
#   2. two jobs of the same user on the same nodes at once: each verified,
#      each with its own agents, each agent's one remote peer the other
#      node's agent of its own job; a job scancelled mid-transfer, and a
#      job whose node-2 ranks are SIGKILLed, leave no agent, MR or QP on
#      any node (`rdma resource` as before the jobs), and the next job runs
#   3. contrib/slurm/rvt-slurm as Prolog and Epilog: the job's agents run
#      before its first step, on the node's specialized core (CoreSpecCount
#      =1: CPUSpecList) with --priority=fifo:10 as configured; the ranks
#      (UCX_RVT_START_AGENT=n) attach to them, no other agent starts; the
#      epilog stops them (--linger=0: they would never leave by themselves)
#
# Prints PASS:/FAIL: lines and exits 1 if any check failed.
# Usage: slurm-guest.sh BUILD_DIR
#
# The testbed's nodes share one kernel and network namespace; what that
# asks of Slurm (each node's slurmd on a port of its own, state and
# spool in the node's own /run, a stand-in /sys/fs/cgroup, the node's
# device through a TaskProlog) is testbed plumbing, said where it is done.
# shellcheck disable=SC2016 # commands for other shells: single quotes on purpose
set -u -o pipefail
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
build=${1:?usage: slurm-guest.sh BUILD_DIR}
case $build in /*) ;; *) build=$PWD/$build ;; esac
top=$(cd "$(dirname "$0")/../.." && pwd)
rvtd=$build/src/uct/ib/rvt/tools/rvtd
rvt_status=$build/src/uct/ib/rvt/tools/rvt-status
module=$build/src/uct/ib/rvt/uct/.libs/libuct_rvt.so
mpi_prog=$build/test/mpi/rvt_mpi_check
# small: the suite shows the launch paths, not bandwidth (mpi.sh does)
MPI_ARGS="--max-size=1048576 --iterations=2 --coll-max-size=65536"
# long enough to be cut short mid-transfer
LONG_ARGS="--min-size=1048576 --max-size=16777216 --iterations=50 --volume=67108864"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# the rvtd the module starts: rvt is not installed in the testbed (a
# path, not a setting: an installed rvt finds its own)
export RVT_RVTD=$rvtd
# every node sees it (each has its own /tmp)
work=$(mktemp -d "$build/slurm.XXXXXX") || exit 1
export SLURM_CONF=$work/slurm.conf

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    local n p
    for n in 1 2; do
        for p in $(on "$n" cat /run/slurmd.pid /run/slurmctld.pid 2>/dev/null); do
            kill -TERM "$p" 2>/dev/null
        done
    done
    for p in $(pgrep -x rvtd); do kill -TERM "$p"; done
    # shellcheck disable=SC2046 # one word per job
    kill $(jobs -p) 2>/dev/null
    wait
    [ "${RVT_SLURM_KEEP:-0}" = 1 ] && { echo "kept $work"; return; }
    rm -rf "$work"
}
trap cleanup EXIT

for f in "$mpi_prog" "$module" "$rvtd" "$rvt_status"; do
    [ -e "$f" ] || { fail "not built: $f"; exit 1; }
done
for f in slurmctld slurmd srun salloc sbatch scancel munge; do
    command -v "$f" >/dev/null ||
        { fail "$f not installed (contrib/setup-deps.sh installs slurmctld slurmd slurm-client munge)"; exit 1; }
done

# ---- the cluster ---------------------------------------------------------
# Each slurmd listens on a port of its own (the nodes share the network
# namespace); state and spool go to the node's own /run. SlurmUser root:
# the testbed runs as root, as do its jobs. proctrack/linuxproc and
# task/affinity: no cgroup hierarchy per node here. PrologFlags=Alloc runs
# the prolog on every node at allocation, before any step (part 3); its
# wrapper does nothing until part 3 creates $work/prolog.on. The
# partition may be oversubscribed: part 2 runs two jobs at once, and each
# node has one core for jobs (the other is specialized).
cat >"$SLURM_CONF" <<EOF
ClusterName=testbed
SlurmctldHost=node1(198.18.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/run/slurmctld
SlurmdSpoolDir=/run/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
PrologFlags=Alloc
Prolog=$work/prolog
Epilog=$work/epilog
TaskProlog=$work/task-prolog
KillWait=5
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=node1 NodeAddr=198.18.0.1 Port=6818 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 CoreSpecCount=1
NodeName=node2 NodeAddr=198.18.0.2 Port=6819 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 CoreSpecCount=1
PartitionName=tb Nodes=node[1-2] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
for s in prolog epilog; do
    printf '#!/bin/sh\n[ -e %s/prolog.on ] || exit 0\nRVT_SLURM_CONF=%s/rvt-slurm.conf exec %s/contrib/slurm/rvt-slurm\n' \
        "$work" "$work" "$top" >"$work/$s"
done
# Testbed plumbing, not part of the contrib: every node sees every rxe
# device, and srun hands node1's environment (UCX_NET_DEVICES=rxe1:1) to
# node2's tasks; each task gets its own node's device and RVT_NODE back.
cat >"$work/task-prolog" <<'EOF'
#!/bin/sh
n=${SLURMD_NODENAME#node}
echo "export UCX_NET_DEVICES=rxe$n:1"
echo "export RXE_DEV=rxe$n"
echo "export RVT_NODE=$n"
EOF
# what a site's /etc/slurm/rvt-slurm.conf would say (rvt-slurm's header)
cat >"$work/rvt-slurm.conf" <<EOF
RVTD=$rvtd
RVT_DEVICES=rxe\${SLURMD_NODENAME#node}
RVT_PRIORITY=fifo:10
RVT_SLURM_LOG=$work/rvt-slurm.log
EOF
chmod 755 "$work/prolog" "$work/epilog" "$work/task-prolog"

# slurmd 22.05 will not start without a cgroup file system it knows:
# each node gets a tmpfs at /sys/fs/cgroup holding a named v1 hierarchy
# (no controllers), enough for its cgroup/v1 plugin to load; nothing here
# uses cgroups
on all bash -c 'mkdir -p /run/slurmctld /run/slurmd &&
    mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup &&
    mkdir /sys/fs/cgroup/systemd &&
    mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd' ||
    { fail "preparing the nodes for slurmd"; exit 1; }
# the device counters before any job: what every job must leave behind
on 1 rdma resource show >"$work/rdma.before"
t0=$SECONDS
on 1 slurmctld || { fail "slurmctld did not start"; cat "$work/slurmctld.log"; exit 1; }
for n in 1 2; do
    on "$n" slurmd || { fail "slurmd on node $n did not start"; tail "$work/slurmd.node$n.log"; exit 1; }
done
up=no
for _ in $(seq 60); do
    [ "$(on 1 sinfo -h -o '%T %D' 2>/dev/null)" = "idle 2" ] && { up=yes; break; }
    sleep 0.5
done
on 1 sinfo -N -o '%N %T %C %Z' | indent sinfo
spec=$(on 1 scontrol show node node2 | tr ' ' '\n' | sed -n 's/^CPUSpecList=//p')
check "Slurm cluster up: slurmctld on node1, slurmd on node1 and node2, both idle ($((SECONDS - t0)) s), node2's CPUSpecList '$spec'" \
    [ $up = yes ]
[ $up = yes ] || exit 1
# the MPI plugins this Slurm offers
on 1 srun --mpi=list 2>&1 | tr '\n' ' ' | indent "srun --mpi=list"
echo

# ---- the jobs --------------------------------------------------------------
# Open MPI inside an allocation: its plm slurm starts an orted on node2
# with srun (step 0), its own ranks on node1 are mpirun's children (no
# step). pml ucx and the rest as in lib.sh's mpi_options, less the rsh
# agent; UCX_TLS per job; no rvt setting at all but the module.
# job.sh TAG TLS [KIND]: run in the allocation (salloc's shell or the
# batch script, on node1). KIND: mpirun (default), srun (srun --mpi=pmix
# launches the ranks), barrier (mpirun once $work/TAG.go exists, the other
# job's status taken before either ends), long (the long program, no
# status). Writes TAG.out (the program), TAG.status.N (rvt-status --json
# of node N's agent for this job, taken by a step on each node after the
# ranks ended: the agents linger 10 s) and TAG.job (the job id).
cat >"$work/job.sh" <<EOF
#!/bin/bash
tag=\$1 tls=\$2 kind=\${3:-mpirun}
cd "$work" || exit 1
echo "\$SLURM_JOB_ID" >"\$tag.job"
# status [SUFFIX]: each node's agent once, now
status() {
    srun --overlap -N2 --ntasks-per-node=1 bash -c \\
        "$rvt_status --json --device=\\\$RXE_DEV >$work/\$tag.status\$1.\\\$RVT_NODE 2>&1"
}
# sampling: each node's agent every second while the ranks run, the last
# answer kept (the module's agents leave 10 s after the ranks, sooner
# than a step after them can be sure to start on this emulator)
sampling() {
    rm -f "\$tag.stop"
    srun --overlap -N2 --ntasks-per-node=1 $work/sample.sh "\$tag" &
    sampler=\$!
}
sampled() {
    touch "\$tag.stop"
    wait "\$sampler"
}
opts=(--bind-to none --mca pml ucx --mca pml_ucx_tls rvt --mca pml_ucx_devices any
    --mca btl self --mca mpi_yield_when_idle 1 --mca if_base_do_not_resolve 1
    --mca oob_tcp_if_include 198.18.0.0/24 -x LD_PRELOAD=$module
    -x UCX_TLS=\$tls,sm,self -x UCX_WARN_UNUSED_ENV_VARS=n -x RVT_RVTD)
[ -n "\${UCX_RVT_START_AGENT:-}" ] && opts+=(-x UCX_RVT_START_AGENT)
[ -n "\${UCX_LOG_LEVEL:-}" ] && opts+=(-x UCX_LOG_LEVEL)
case \$kind in
srun)
    # PMIx, Debian's Slurm's and Open MPI's one common PMI; MCA settings
    # through the environment, as srun passes it on
    sampling
    OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=rvt OMPI_MCA_pml_ucx_devices=any \\
    OMPI_MCA_btl=self OMPI_MCA_mpi_yield_when_idle=1 UCX_TLS=\$tls,sm,self \\
    UCX_WARN_UNUSED_ENV_VARS=n srun --mpi=pmix env LD_PRELOAD=$module \\
        $mpi_prog $MPI_ARGS >"\$tag.out" 2>&1
    echo "srun exit \$?" >>"\$tag.out"
    sampled
    timeout 20 srun --mpi=pmi2 -n 2 $mpi_prog --max-size=8 >"\$tag.pmi2" 2>&1
    echo "srun --mpi=pmi2 exit \$?" >>"\$tag.pmi2"
    exit 0
    ;;
long)
    mpirun "\${opts[@]}" $mpi_prog $LONG_ARGS >"\$tag.out" 2>&1
    echo "mpirun exit \$?" >>"\$tag.out"
    exit 0
    ;;
barrier)
    touch "\$tag.ready"
    for _ in \$(seq 600); do [ -e "\$tag.go" ] && break; sleep 0.1; done
    sampling
    mpirun "\${opts[@]}" $mpi_prog $MPI_ARGS >"\$tag.out" 2>&1
    echo "mpirun exit \$?" >>"\$tag.out"
    sampled
    ;;
*)
    if [ "\$kind" = prolog ]; then
        status .before
        # how the agents run: CPU list and scheduling policy (pids are
        # global in the testbed: node1 sees node2's)
        for p in \$(pgrep -x rvtd); do
            echo "\$p|\$(taskset -pc "\$p")|\$(chrt -p "\$p" | tr '\n' ' ')"
        done >"\$tag.sched"
    fi
    sampling
    mpirun "\${opts[@]}" $mpi_prog $MPI_ARGS >"\$tag.out" 2>&1
    echo "mpirun exit \$?" >>"\$tag.out"
    sampled
    ;;
esac
# the agents' own logs, for a failed job
grep -q '^OK: rvt_mpi_check' "\$tag.out" ||
    srun --overlap -N2 --ntasks-per-node=1 bash -c 'tail -n 20 /tmp/rvt-*/*.log' >"\$tag.agentlogs" 2>&1
touch "\$tag.done"
[ "\$kind" = barrier ] && for _ in \$(seq 600); do [ -e "\$tag.release" ] && break; sleep 0.1; done
exit 0
EOF
# sample.sh TAG: run by a step on each node (job.sh's sampling)
cat >"$work/sample.sh" <<EOF
#!/bin/bash
cd "$work" || exit 1
f=\$1.status.\$RVT_NODE
while :; do
    $rvt_status --json --device="\$RXE_DEV" >"\$f.tmp" 2>/dev/null && mv "\$f.tmp" "\$f"
    [ -e "\$1.stop" ] && break
    sleep 1
done
EOF
chmod 755 "$work/job.sh" "$work/sample.sh"

# agents_of KEY: the rvtd processes serving KEY, anywhere in the guest
# (pids are global), as "pid:device" words
agents_of() {
    local p
    for p in $(pgrep -x rvtd); do
        tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -qxF -- "--job-key=$1" &&
            echo "$p:$(tr '\0' '\n' <"/proc/$p/cmdline" | sed -n 's/^--device=//p')"
    done
}

# gone KEY SECONDS: no agent serves KEY within SECONDS (the module's
# agents linger 10 s after their last rank)
gone() {
    local tries=$(($2 * 10))
    while [ -n "$(agents_of "$1")" ] && [ $tries -gt 0 ]; do
        sleep 0.1
        tries=$((tries - 1))
    done
    [ -z "$(agents_of "$1")" ]
}

# verified TAG WHAT: the program of job TAG verified every word
verified() {
    local tag=$1 what=$2
    indent "$tag" <"$work/$tag.out"
    if grep -q '^OK: rvt_mpi_check' "$work/$tag.out"; then
        pass "$what: rvt_mpi_check verified every word (job $(cat "$work/$tag.job"))"
    else
        indent "$tag agents" <"$work/$tag.agentlogs" 2>/dev/null
        fail "$what: rvt_mpi_check did not verify (job $(cat "$work/$tag.job" 2>/dev/null); output above)"
    fi
}

# agents_served TAG [SUFFIX]: from each node's status (TAG.statusSUFFIX.N),
# the agent served the job's key, slurm.<SLURM_JOB_ID> (its source is
# --job-key: the module, or the prolog, passes the key it derived), proved
# its peer with MUNGE, and carried bytes both ways to the other node; one
# check per node
agents_served() {
    local tag=$1 sfx=${2:-} n job js v
    job=$(cat "$work/$tag.job")
    for n in 1 2; do
        js=$(cat "$work/$tag.status$sfx.$n" 2>/dev/null)
        if v=$(json_verdict "$js" '
            [.data_path.peers[] | select(.loopback | not)] as $r
            | ($r | map(.bytes) | add // 0) as $tx
            | ($r | map(.received_bytes) | add // 0) as $rx
            | {ok: (.job_key == $key and .data_path.auth == "munge" and $tx > 0 and $rx > 0
                    and .data_path.handshake.unauthenticated == 0),
               text: "agent pid \(.pid), job \(.job_key) from \(.job_key_source), auth \(.data_path.auth), \($r | length) remote peer(s), \($tx) bytes sent and \($rx) received"}' \
            --arg key "slurm.$job"); then
            pass "$tag: node $n: $v"
        else
            fail "$tag: node $n: expected key slurm.$job, auth munge, bytes both ways: ${v:-$(head -c 300 <<<"$js")}"
        fi
    done
}

# left_behind TAG SECONDS: no agent of job TAG on any node within SECONDS
left_behind() {
    local key
    key=slurm.$(cat "$work/$1.job" 2>/dev/null)
    [ "$key" != slurm. ] || { fail "$1: the job never ran"; return; }
    if gone "$key" "$2"; then
        pass "$1: no agent of $key left on any node after the job"
    else
        fail "$1: agents of $key still run after the job: $(agents_of "$key")"
    fi
}

# rdma_clean WHAT: every device's MRs, QPs, CQs and PDs as before any job
rdma_clean() {
    on 1 rdma resource show >"$work/rdma.now"
    if diff -u "$work/rdma.before" "$work/rdma.now" >"$work/rdma.diff"; then
        pass "$1: no MR, QP, CQ or PD left on any device ($(awk '{ printf "%s qp %s mr %s; ", $2, $8, $12 }' "$work/rdma.now"))"
    else
        fail "$1: the devices hold more than before the jobs:"
        indent "rdma" <"$work/rdma.diff"
        on 1 rdma res show qp | indent "rdma qp"
    fi
}

# salloc_job TAG ARG...: job.sh under salloc on node1, 2 nodes x 2 tasks
# (-O: 4 tasks on the one core for jobs each node has)
salloc_job() {
    on 1 timeout 300 salloc -N2 -n4 -O -s "$work/job.sh" "$@" \
        >"$work/$1.salloc" 2>&1
}
# sbatch_job TAG ARG...: job.sh as a batch job; prints its id
sbatch_job() {
    on 1 sbatch --parsable -N2 -n4 -O -s -o "$work/$1.batch" \
        "$work/job.sh" "$@"
}
# job_wait ID SECONDS: until job ID has left the queue
job_wait() {
    local tries=$(($2 * 2))
    while on 1 squeue -h -j "$1" 2>/dev/null | grep -q . && [ $tries -gt 0 ]; do
        sleep 0.5
        tries=$((tries - 1))
    done
    [ $tries -gt 0 ]
}

# ranks_of JOB NODE: the pids of job JOB's ranks on node NODE (pids are
# global in the testbed; the environment says job and node)
ranks_of() {
    local p
    for p in $(pgrep -x rvt_mpi_check); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
            grep -qx "SLURM_JOB_ID=$1" && [ "$(node_of "$p")" = "$2" ] && echo "$p"
    done
}

# moving JOB: node 2's agent of job JOB has sent bytes to node 1
moving() {
    on 2 timeout 10 "$rvt_status" --json --device=rxe2 --job-key="slurm.$1" 2>/dev/null |
        jq -e '[.data_path.peers[] | select(.loopback | not) | .bytes] | add // 0 | . > 0' >/dev/null
}

# 1, 2 ------------------------------------------------------------------
# Two jobs of root on both nodes at once, the two ways sites run mpirun
# under Slurm: in salloc (UCX_TLS=ud_verbs,rvt) and in sbatch (rvt). Each
# waits for the other to be running before its mpirun and keeps its
# agents until both have taken their status, so the four agents overlap.
t=$SECONDS
salloc_job salloc ud_verbs,rvt barrier &
salloc_pid=$!
b=$(sbatch_job sbatch rvt barrier)
for _ in $(seq 600); do
    [ -e "$work/salloc.ready" ] && [ -e "$work/sbatch.ready" ] && break
    sleep 0.2
done
touch "$work/salloc.go" "$work/sbatch.go"
for _ in $(seq 1200); do
    [ -e "$work/salloc.done" ] && [ -e "$work/sbatch.done" ] && break
    sleep 0.2
done
touch "$work/salloc.release" "$work/sbatch.release"
wait "$salloc_pid"
job_wait "$b" 60
verified salloc "mpirun in salloc, UCX_TLS=ud_verbs,rvt, beside the sbatch job"
verified sbatch "mpirun in sbatch, UCX_TLS=rvt, beside the salloc job"
agents_served salloc
agents_served sbatch
# each agent's one remote peer is the other node's agent of its own job
# (the UD QPN in its address), never the other job's
apart=yes line=
for pair in "salloc 1 2" "salloc 2 1" "sbatch 1 2" "sbatch 2 1"; do
    read -r tag n m <<<"$pair"
    mine=$(jq -r .data_path.ud_qpn "$work/$tag.status.$m" 2>/dev/null)
    peers=$(jq -r '[.data_path.peers[] | select(.loopback | not) | .ud_qpn] | map(tostring) | join(",")' \
        "$work/$tag.status.$n" 2>/dev/null)
    line+=" $tag node$n: peers UD QPN [$peers], its job's node$m agent $mine;"
    [ -n "$mine" ] && [ "$peers" = "$mine" ] || apart=no
done
qpns=$(cat "$work"/salloc.status.1 "$work"/sbatch.status.1 2>/dev/null | jq -r .data_path.ud_qpn 2>/dev/null | sort -u | wc -l)
pids=$(cat "$work"/salloc.status.* "$work"/sbatch.status.* 2>/dev/null | jq -r .pid 2>/dev/null | sort -u | wc -l)
if [ $apart = yes ] && [ "$pids" = 4 ] && [ "$qpns" = 2 ]; then
    pass "two jobs at once stay apart: 4 agents, each with its own job's peer only:$line"
else
    fail "two jobs at once: $pids agent pids (expected 4), $qpns UD QPNs on node 1 (expected 2), peers:$line"
fi
echo "salloc and sbatch jobs: $((SECONDS - t)) s"

# 1 ---------------------------------------------------------------------
# srun launching the ranks itself: PMIx, Debian's Slurm's and Open MPI's
# one common PMI (srun --mpi=list above); PMI-2 is tried and its answer
# printed: Debian's Open MPI 4.1 has no PMI-2 client
t=$SECONDS
salloc_job srun ud_verbs,rvt srun
verified srun "srun --mpi=pmix (no mpirun), UCX_TLS=ud_verbs,rvt"
agents_served srun
grep -v '^$' "$work/srun.pmi2" | head -n 5 | indent "srun --mpi=pmi2"
grep -q 'not built with SLURM.s PMI support' "$work/srun.pmi2" &&
    echo "srun --mpi=pmi2: Debian's Open MPI refuses it (above); srun --mpi=pmix works"
for tag in salloc sbatch srun; do left_behind "$tag" 20; done
echo "srun job: $((SECONDS - t)) s"
[ "${RVT_SLURM_PARTS:-}" = 1 ] && finish "slurm part 1"

# 2 ---------------------------------------------------------------------
# Two long jobs at once, cut short once their agents carry data: one by
# scancel, the other by SIGKILL to its node-2 ranks (RVT_NODE=2 from the
# TaskProlog, through orted), after which mpirun ends it. Neither may
# leave an agent, MR or QP behind; the next job (part 3) must run.
t=$SECONDS
c=$(sbatch_job cancel rvt long)
k=$(sbatch_job killed rvt long)
ready=no
for _ in $(seq 240); do
    moving "$c" && moving "$k" && victims=$(ranks_of "$k" 2) && [ -n "$victims" ] &&
        { ready=yes; break; }
    sleep 0.5
done
on 1 scancel "$c"
# shellcheck disable=SC2086 # one pid a word
[ -n "${victims:-}" ] && kill -KILL $victims
job_wait "$c" 60
job_wait "$k" 90
check "both long jobs moved data through their agents before they were cut short" [ $ready = yes ]
check "scancel: job $c ended ($(grep -h 'mpirun exit' "$work/cancel.out" 2>/dev/null || echo 'mpirun killed'))" \
    test -z "$(on 1 squeue -h -j "$c" 2>/dev/null)"
check "node 2's ranks (${victims//$'\n'/ }) SIGKILLed mid-transfer: the job ended ($(grep -h 'mpirun exit' "$work/killed.out"))" \
    grep -q 'mpirun exit [1-9]' "$work/killed.out"
left_behind cancel 30
left_behind killed 30
rdma_clean "after the cancelled and the killed job"
echo "cancelled and killed jobs: $((SECONDS - t)) s"

# 3 ---------------------------------------------------------------------
# contrib/slurm/rvt-slurm as Prolog and Epilog; the ranks must use its
# agents (UCX_RVT_START_AGENT=n: the module may not start one). The job
# takes its agents' status before its first rank starts and after.
t=$SECONDS
touch "$work/prolog.on"
UCX_RVT_START_AGENT=n salloc_job prolog ud_verbs,rvt prolog
verified prolog "agents from the prolog, UCX_RVT_START_AGENT=n, the job after the cancelled and killed ones"
agents_served prolog
job=$(cat "$work/prolog.job")
for n in 1 2; do
    before=$(jq -r .pid "$work/prolog.status.before.$n" 2>/dev/null)
    after=$(jq -r .pid "$work/prolog.status.$n" 2>/dev/null)
    clients=$(jq -r '.clients | length' "$work/prolog.status.before.$n" 2>/dev/null)
    check "prolog: node $n's agent (pid ${before:-none}) served slurm.$job before the first rank ($clients clients) and the ranks used it (pid after: ${after:-none})" \
        test -n "$before" -a "$before" = "$after" -a "$clients" = 0
    sched=$(grep "^$before|" "$work/prolog.sched" 2>/dev/null)
    check "prolog: node $n's agent runs on CPUSpecList $spec with --priority=fifo:10 as configured: ${sched:-no such agent}" \
        grep -q "list: $spec|.*SCHED_FIFO.*priority: 10" <<<"$sched"
done
indent "rvt-slurm log" <"$work/rvt-slurm.log"
# --linger=0: only the epilog can have stopped them
check "epilog: the prolog's agents stopped with the job, none left: '$(gone "slurm.$job" 5; agents_of "slurm.$job")'" \
    test -z "$(agents_of "slurm.$job")"
rdma_clean "after the prolog's job"
echo "prolog job: $((SECONDS - t)) s"

finish "slurm"
