#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the testbed guest (2 nodes): a real Slurm cluster (Debian 12's
# slurmctld on node1, slurmd on both, the testbed's munged on each with
# one key) runs Open MPI jobs over rvt from the INSTALLED Debian packages
# (test/install/check-deb.sh unpacked rvt-agent and ucx-rvt into ROOT):
# the module preloaded from ROOT as README.Debian says, and each job's
# agents started inside the job by ROOT's spank_rvt.so (plugstack.conf,
# PrologFlags=Contain) in its extern step, from the job file ROOT's
# /usr/lib/rvt/rvt-slurm writes as Prolog (RVT_JOBS=asked: the jobs that
# ask with --rvt), with ROOT's rvtd. No rvt setting is given to the jobs
# but --rvt, the preload and UCX_TLS (section 6: --rvt and UCX_TLS alone).
#
#   0. on each node `ucx_info -d` with the installed module preloaded
#      lists transport rvt on the node's device
#   1. two jobs of the same user at once, both with --rvt: mpirun inside
#      salloc (UCX_TLS=ud_verbs,rvt) and inside sbatch (UCX_TLS=rvt);
#      each verifies every word (test/mpi/rvt_mpi_check); from each node,
#      the job's agent is the one spank_rvt.so started (its pid in
#      slurmd's log), a child of `slurmstepd: [<job>.extern]`, serving
#      slurm.<job> before the first rank with no client, the only agent
#      of the job (the module started none of its own), with
#      --priority=fifo:10 as configured (its CPUs shown: the extern
#      step's), authenticated its peer with MUNGE (no --auth given),
#      carried bytes both ways, and its one remote peer is the other
#      node's agent of its own job; after each job no agent of it is left
#   2. with the Epilog off, a job cancelled mid-transfer (scancel) and a
#      job whose node-2 ranks are SIGKILLed, at once: no agent (Slurm ends
#      the extern step's), MR, QP, CQ or PD left on any device (`rdma
#      resource` as before the jobs)
#   3. the next job, srun --mpi=pmix launching the ranks itself
#      (UCX_TLS=ud_verbs,rvt): verified, its agents as in 1, pinned to
#      RVT_AGENT_CPUS=0,1 by the plugin
#   4. an OpenSHMEM job (oshmem's spml ucx, mpirun in salloc,
#      UCX_TLS=rvt): test/shmem/rvt_shmem_check verifies every word, its
#      agents as in 1
#   5. a job without --rvt: no job file and no agent on any node
#   6. two ordinary users (made here: /etc/passwd and /etc/group copies
#      bound on each node), a --rvt batch job each at once, srun
#      --mpi=pmix launching the ranks with nothing set but UCX_TLS and
#      Open MPI's pml: each verifies every word through its own job's
#      agents, which run as its user, children of the extern step, the
#      module given to the ranks by the plugin (LD_PRELOAD) and no agent
#      started by it; neither user can reach the other's socket, signal
#      its agent or read its environment; after both, no agent is left
#
# Prints PASS:/FAIL: lines and exits 1 if any check failed.
# Usage: site-jobs-guest.sh BUILD_DIR ROOT (both relative to the tree)
#
# The testbed's nodes share one kernel and network namespace; what that
# asks of Slurm (each node's slurmd on a port of its own, state and
# spool in the node's own /run, a stand-in /sys/fs/cgroup, the node's
# device through a TaskProlog, the prolog's settings file beside the
# job's work as the guest's /etc is the host's, read-only) is testbed
# plumbing, said where it is done. What the testbed cannot show: the
# cgroup charge (no cgroup hierarchy per node: proctrack/linuxproc ends
# the extern step's agent as the stepd's child); test/tools/check-slurm-jobs.sh
# shows the same on the host, with a slurmstepd and a slurmd killed.
# shellcheck disable=SC2016 # jq programs: single quotes on purpose
set -u -o pipefail
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=test/testbed/verdicts.sh
. "$(dirname "$0")/verdicts.sh"
build=${1:?usage: site-jobs-guest.sh BUILD_DIR ROOT}
root=$PWD/${2:?usage: site-jobs-guest.sh BUILD_DIR ROOT}
case $build in /*) ;; *) build=$PWD/$build ;; esac
top=$(cd "$(dirname "$0")/../.." && pwd)
rvtd=$root/usr/bin/rvtd
rvt_status=$root/usr/bin/rvt-status
rvt_slurm=$root/usr/lib/rvt/rvt-slurm
module=$(echo "$root"/usr/lib/*/ucx/libuct_rvt.so)
spank=$(echo "$root"/usr/lib/*/slurm-wlm/spank_rvt.so)
mpi_prog=$build/test/mpi/rvt_mpi_check
shmem_prog=$build/test/shmem/rvt_shmem_check
on=$top/contrib/testbed/guest/bin/on
# small: the suite shows the launch paths, not bandwidth (mpi.sh does)
MPI_ARGS="--max-size=262144 --iterations=2 --coll-max-size=65536"
# long enough to be cut short mid-transfer, whatever the emulator's
# load: the two jobs are always cut (scancel, SIGKILL), never left to
# end, so length costs nothing (50 iterations and 64 MiB a size ended one
# in about 300 s in a gate, before the other was seen moving); from
# 64 KiB, so that data moves soon after the ranks start
LONG_ARGS="--min-size=65536 --max-size=16777216 --iterations=1000 --volume=1073741824"
SHMEM_ARGS="--large=262144 --rounds=2"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# every node sees it (each has its own /tmp)
work=$(mktemp -d "$build/site-jobs.XXXXXX") || exit 1
# readable by section 6's ordinary users (mktemp makes it 0700): its
# slurm.conf, their job script and their work directories
chmod 0755 "$work"
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
    [ "${RVT_SITE_KEEP:-0}" = 1 ] && { echo "kept $work"; return; }
    rm -rf "$work"
}
trap cleanup EXIT

for f in "$mpi_prog" "$module" "$rvtd" "$rvt_status" "$rvt_slurm" "$spank"; do
    [ -e "$f" ] || { fail "not there: $f"; exit 1; }
done
for f in slurmctld slurmd srun salloc sbatch scancel munge; do
    command -v "$f" >/dev/null ||
        { fail "$f not installed (contrib/setup-deps.sh installs slurmctld slurmd slurm-client munge)"; exit 1; }
done

# 0 ---------------------------------------------------------------------
for n in 1 2; do
    if on "$n" env LD_PRELOAD="$module" ucx_info -d >"$work/info.$n" 2>&1 &&
        grep -A3 'Transport: rvt' "$work/info.$n" | grep -q "Device: rxe$n"; then
        pass "node$n: ucx_info -d lists Transport: rvt on rxe$n from the installed module (LD_PRELOAD=${module#"$root"})"
    else
        fail "node$n: no transport rvt in ucx_info -d: $(grep -i -m3 'rvt\|error' "$work/info.$n")"
    fi
done

# ---- the cluster ---------------------------------------------------------
# Each slurmd listens on a port of its own (the nodes share the network
# namespace); state and spool go to the node's own /run. SlurmUser root:
# the testbed runs as root, as do its jobs but section 6's. proctrack/linuxproc and
# task/affinity: no cgroup hierarchy per node here. PrologFlags=Contain
# runs the prolog on every node at allocation, before any step, then the
# job's extern step, where spank_rvt.so (PlugStackConfig) starts the
# agents. The partition
# may be oversubscribed: two jobs run at once, and each node has one core
# for jobs (the other is specialized).
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
PrologFlags=Contain
PlugStackConfig=$work/plugstack.conf
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
# The installed rvt-slurm is the Prolog and the Epilog; the wrapper only
# names its settings file, which a site keeps in /etc/slurm (the guest's
# /etc is the host's, read-only), and the Epilog is skipped while
# $work/epilog.off exists (section 2). The installed plugin, with the
# line the package's plugstack.conf.d/rvt.conf has (commented out), by
# its path: this Slurm's PluginDir is the host's.
printf '#!/bin/sh\nRVT_SLURM_CONF=%s/rvt-slurm.conf exec %s\n' \
    "$work" "$rvt_slurm" >"$work/prolog"
printf '#!/bin/sh\n[ -e %s/epilog.off ] && exit 0\nRVT_SLURM_CONF=%s/rvt-slurm.conf exec %s\n' \
    "$work" "$work" "$rvt_slurm" >"$work/epilog"
echo "optional $spank" >"$work/plugstack.conf"
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
# what a site's /etc/slurm/rvt-slurm.conf would say (rvt-slurm's header);
# RVT_DEVICES: every node sees every rxe device here, a site's see their own
# RVT_PRELOAD: the installed module, which is under ROOT here, not in
# /usr/lib where rvt-slurm looks by default
cat >"$work/rvt-slurm.conf" <<EOF
RVTD=$rvtd
RVT_DEVICES=rxe\${SLURMD_NODENAME#node}
RVT_PRIORITY=fifo:10
RVT_PRELOAD=$module
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
# slurmd with no memlock limit, as RDMA sites run it (LimitMEMLOCK=
# infinity): the extern step's agents, its children, inherit its limits
for n in 1 2; do
    on "$n" prlimit --memlock=unlimited:unlimited slurmd ||
        { fail "slurmd on node $n did not start"; tail "$work/slurmd.node$n.log"; exit 1; }
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
# the plugin is loaded where jobs are submitted: --rvt is an option
help=$(on 1 sbatch --help 2>&1)
check "spank_rvt.so loaded (PlugStackConfig): sbatch --help lists '$(grep -m1 -- '--rvt' <<<"$help" | sed 's/^ *//')'" \
    grep -q -- '--rvt' <<<"$help"

# ---- the jobs --------------------------------------------------------------
# Open MPI inside an allocation: its plm slurm starts an orted on node2
# with srun (step 0), its own ranks on node1 are mpirun's children (no
# step); both derive the key slurm.<SLURM_JOB_ID>. pml ucx and the rest
# as in lib.sh's mpi_options, less the rsh agent; UCX_TLS per job.
# job.sh TAG TLS KIND, in the allocation (salloc's shell or the batch
# script, on node1). KIND: mpirun; srun (srun --mpi=pmix launches the
# ranks); barrier (mpirun once $work/TAG.go exists, holding the job until
# TAG.release so that two jobs overlap); long (the long program, no
# status). Writes TAG.job (the job id), TAG.out (the program's output),
# TAG.status.N (rvt-status --json of node N's agent of the job, after the
# ranks: the extern step's agents stay until the job ends), TAG.agents
# (every rvtd of the job's key then, pid:device: pids are global in the
# guest), TAG.sched (their CPU lists and policies) and TAG.parents (pid|the
# command line of each one's parent); barrier also TAG.status.before.N,
# before the first rank.
cat >"$work/job.env" <<EOF
work=$work
on=$on
rvt_status=$rvt_status
module=$module
mpi_prog=$mpi_prog
shmem_prog=$shmem_prog
MPI_ARGS="$MPI_ARGS"
SHMEM_ARGS="$SHMEM_ARGS"
LONG_ARGS="$LONG_ARGS"
EOF
# (sbatch runs a copy of the script in slurmd's spool: job.env by its path)
# for ShellCheck in job.sh: job.env is written above; MPI_ARGS and LONG_ARGS split on purpose
printf '#!/bin/bash\n# shellcheck disable=SC1091,SC2154,SC2086\n. %q/job.env\n' "$work" >"$work/job.sh"
cat >>"$work/job.sh" <<'EOF'
tag=$1 tls=$2 kind=$3
cd "$work" || exit 1
key=slurm.$SLURM_JOB_ID
echo "$SLURM_JOB_ID" >"$tag.job"
# status SUFFIX: each node's agent of this job, now
status() {
    local n
    for n in 1 2; do
        "$on" "$n" "$rvt_status" --json --device="rxe$n" --job-key="$key" \
            >"$tag.status$1.$n" 2>&1
    done
}
opts=(--bind-to none --mca pml ucx --mca pml_ucx_tls rvt --mca pml_ucx_devices any
    --mca btl self --mca mpi_yield_when_idle 1 --mca if_base_do_not_resolve 1
    --mca oob_tcp_if_include 198.18.0.0/24 -x LD_PRELOAD="$module"
    -x UCX_TLS="$tls,sm,self" -x UCX_WARN_UNUSED_ENV_VARS=n)
case $kind in
srun)
    # PMIx, Debian's Slurm's and Open MPI's one common PMI; MCA settings
    # through the environment, as srun passes it on
    OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=rvt OMPI_MCA_pml_ucx_devices=any \
    OMPI_MCA_btl=self OMPI_MCA_mpi_yield_when_idle=1 UCX_TLS=$tls,sm,self \
    UCX_WARN_UNUSED_ENV_VARS=n srun --mpi=pmix env LD_PRELOAD="$module" \
        "$mpi_prog" $MPI_ARGS >"$tag.out" 2>&1
    echo "srun exit $?" >>"$tag.out"
    ;;
shmem)
    # opal_common_ucx_opal_mem_hooks 0: Debian's Open MPI 4.1.4 crashes in
    # shmem_finalize otherwise, rvt or not (mpi-guest.sh says why)
    mpirun "${opts[@]}" --mca spml ucx --mca opal_common_ucx_opal_mem_hooks 0 \
        -x SHMEM_SYMMETRIC_SIZE=64M "$shmem_prog" $SHMEM_ARGS >"$tag.out" 2>&1
    echo "mpirun exit $?" >>"$tag.out"
    ;;
long)
    mpirun "${opts[@]}" "$mpi_prog" $LONG_ARGS >"$tag.out" 2>&1
    echo "mpirun exit $?" >>"$tag.out"
    exit 0
    ;;
barrier)
    status .before
    touch "$tag.ready"
    for _ in $(seq 600); do [ -e "$tag.go" ] && break; sleep 0.1; done
    mpirun "${opts[@]}" "$mpi_prog" $MPI_ARGS >"$tag.out" 2>&1
    echo "mpirun exit $?" >>"$tag.out"
    ;;
esac
status ""
for p in $(pgrep -x rvtd); do
    tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -qxF -- "--job-key=$key" || continue
    echo "$p:$(tr '\0' '\n' <"/proc/$p/cmdline" | sed -n 's/^--device=//p')" >>"$tag.agents"
    echo "$p|$(taskset -pc "$p")|$(chrt -p "$p" | tr '\n' ' ')" >>"$tag.sched"
    echo "$p|$(tr '\0' ' ' <"/proc/$(ps -o ppid= -p "$p" | tr -d ' ')/cmdline" 2>/dev/null)" >>"$tag.parents"
done
# the agents' own logs, for a failed job
grep -qE '^OK: rvt_(mpi|shmem)_check' "$tag.out" ||
    for n in 1 2; do "$on" "$n" bash -c 'tail -n 20 /tmp/rvt-*/*.log'; done >"$tag.agentlogs" 2>&1
touch "$tag.done"
[ "$kind" = barrier ] && for _ in $(seq 600); do [ -e "$tag.release" ] && break; sleep 0.1; done
exit 0
EOF
chmod 755 "$work/job.sh"

# agents_of KEY: the rvtd processes serving KEY, anywhere in the guest
# (pids are global), as "pid:device" words
agents_of() {
    local p
    for p in $(pgrep -x rvtd); do
        tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -qxF -- "--job-key=$1" &&
            echo "$p:$(tr '\0' '\n' <"/proc/$p/cmdline" | sed -n 's/^--device=//p')"
    done
}

# gone KEY SECONDS: no agent serves KEY within SECONDS (by the clock: a
# look costs seconds on the loaded emulator)
gone() {
    local end=$((SECONDS + $2))
    while [ -n "$(agents_of "$1")" ] && [ $SECONDS -lt $end ]; do
        sleep 1
    done
    [ -z "$(agents_of "$1")" ]
}

# verified TAG WHAT [PROGRAM]: the program of job TAG (default
# rvt_mpi_check) verified every word
verified() {
    local tag=$1 what=$2 prog=${3:-rvt_mpi_check}
    indent "$tag" <"$work/$tag.out"
    if grep -q "^OK: $prog" "$work/$tag.out"; then
        pass "$what: $prog verified every word (job $(cat "$work/$tag.job"))"
    else
        indent "$tag agents" <"$work/$tag.agentlogs" 2>/dev/null
        fail "$what: $prog did not verify (job $(cat "$work/$tag.job" 2>/dev/null); output above)"
    fi
}

# extern_agent TAG N: the pid spank_rvt.so gives in node N's slurmd log
# (its extern step's lines) for job TAG's agent on node N's device
extern_agent() {
    local job
    job=$(cat "$work/$1.job")
    sed -n "s/.*spank_rvt: job $job: agent for slurm\.$job on rxe$2:1 started in the extern step (pid \([0-9]*\),.*/\1/p" \
        "$work/slurmd.node$2.log" | head -n 1
}

# placed TAG [CPUS]: from each node, job TAG's agent (its status after
# the ranks) is the one spank_rvt.so started, a child of the job's
# extern step, the job's only agent on that node (the module started
# none), with SCHED_FIFO 10 and, given CPUS, on those; its key is
# slurm.<job>, it proved its peer with MUNGE and carried bytes both ways
placed() {
    local tag=$1 cpus=${2:-} n job js v mine others sched parent
    job=$(cat "$work/$tag.job")
    for n in 1 2; do
        mine=$(extern_agent "$tag" "$n")
        others=$(grep -v "^${mine:-none}:rxe$n\$" "$work/$tag.agents" | grep ":rxe$n\$" | tr '\n' ' ')
        sched=$(grep "^${mine:-none}|" "$work/$tag.sched" 2>/dev/null)
        parent=$(sed -n "s/^${mine:-none}|//p" "$work/$tag.parents" 2>/dev/null)
        js=$(cat "$work/$tag.status.$n" 2>/dev/null)
        if v=$(json_verdict "$js" '
            [.data_path.peers[] | select(.loopback | not)] as $r
            | ($r | map(.bytes) | add // 0) as $tx
            | ($r | map(.received_bytes) | add // 0) as $rx
            | {ok: (.job_key == $key and (.pid | tostring) == $pid
                    and .data_path.auth == "munge" and $tx > 0 and $rx > 0
                    and .data_path.handshake.unauthenticated == 0),
               text: "agent pid \(.pid), job \(.job_key) from \(.job_key_source), auth \(.data_path.auth), \($r | length) remote peer(s), \($tx) bytes sent and \($rx) received"}' \
            --arg key "slurm.$job" --arg pid "${mine:-none}") && [ -z "$others" ] &&
            [[ $parent == "slurmstepd: [$job.extern]"* ]] &&
            grep -q "list: ${cpus:-[0-9,-]*}|.*SCHED_FIFO.*priority: 10" <<<"$sched"; then
            pass "$tag: node $n: the extern step's agent (pid $mine, child of '${parent% }', the job's only one there), $v; cpus and policy: ${sched#*|}"
        else
            fail "$tag: node $n: expected the extern step's agent (pid ${mine:-none}, parent '${parent:-?}') alone (others: ${others:-none}), key slurm.$job, auth munge, bytes both ways, ${cpus:+on CPU $cpus }with SCHED_FIFO 10: ${v:-$(head -c 300 <<<"$js")}; sched: ${sched:-none}"
        fi
    done
}

# left_behind TAG SECONDS [HOW]: no agent of job TAG on any node within
# SECONDS
left_behind() {
    local key
    key=slurm.$(cat "$work/$1.job" 2>/dev/null)
    [ "$key" != slurm. ] || { fail "$1: the job never ran"; return; }
    if gone "$key" "$2"; then
        pass "$1: no agent of $key left on any node after the job${3:+ ($3)}"
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

# salloc_job TAG ARG...: job.sh under salloc on node1, 2 nodes x 1 task
# (-O: the one core for jobs each node has may be shared; one rank a node:
# the emulator runs every node's ranks on that one vCPU)
salloc_job() {
    on 1 timeout 300 salloc --rvt -N2 -n2 -O -s "$work/job.sh" "$@" \
        >"$work/$1.salloc" 2>&1
}
# sbatch_job TAG ARG...: job.sh as a batch job, with --rvt; prints its id
sbatch_job() {
    on 1 sbatch --rvt --parsable -N2 -n2 -O -s -o "$work/$1.batch" \
        "$work/job.sh" "$@"
}
# job_wait ID SECONDS: until job ID has left the queue (by the clock)
job_wait() {
    local end=$((SECONDS + $2))
    while on 1 squeue -h -j "$1" 2>/dev/null | grep -q .; do
        [ $SECONDS -lt $end ] || return 1
        sleep 1
    done
}

# job_reaches FILE JOB SECONDS: wait until job JOB writes FILE; status 1
# at once if the job is no longer queued or running (it failed, or was
# refused), or after SECONDS
job_reaches() {
    local end=$((SECONDS + $3))
    while [ ! -e "$1" ]; do
        [[ $2 =~ ^[0-9]+$ ]] && [ $SECONDS -lt $end ] &&
            on 1 squeue -h -j "$2" 2>/dev/null | grep -q . || return 1
        sleep 0.5
    done
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
# shellcheck disable=SC2317 # called by long_moving, through await
moving() {
    on 2 timeout 10 "$rvt_status" --json --device=rxe2 --job-key="slurm.$1" 2>/dev/null |
        jq -e '[.data_path.peers[] | select(.loopback | not) | .bytes] | add // 0 | . > 0' >/dev/null
}

echo "cluster up at +$SECONDS s"
# 1 ---------------------------------------------------------------------
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
echo "both jobs ended after $((SECONDS - t)) s"
verified salloc "mpirun in salloc, UCX_TLS=ud_verbs,rvt, beside the sbatch job"
verified sbatch "mpirun in sbatch, UCX_TLS=rvt, beside the salloc job"
placed salloc
placed sbatch
# before the first rank: the prolog's agent already served the job's key
# with no client
for tag in salloc sbatch; do
    for n in 1 2; do
        before=$(jq -r '"\(.pid) \(.job_key) \(.clients | length)"' "$work/$tag.status.before.$n" 2>/dev/null)
        check "$tag: node $n: before the first rank, the agent pid $(extern_agent "$tag" "$n") served slurm.$(cat "$work/$tag.job") with 0 clients (rvt-status: '$before')" \
            [ "$before" = "$(extern_agent "$tag" "$n") slurm.$(cat "$work/$tag.job") 0" ]
    done
done
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
pids=$(cat "$work"/salloc.status.? "$work"/sbatch.status.? 2>/dev/null | jq -r .pid 2>/dev/null | sort -u | wc -l)
if [ $apart = yes ] && [ "$pids" = 4 ]; then
    pass "two jobs at once stay apart: 4 agents, each with its own job's peer only:$line"
else
    fail "two jobs at once: $pids agent pids (expected 4), peers:$line"
fi
for tag in salloc sbatch; do left_behind "$tag" 20 "the job's end"; done
echo "salloc and sbatch jobs: $((SECONDS - t)) s"

# 2 ---------------------------------------------------------------------
# Two long jobs at once, cut short once their agents carry data: one by
# scancel, the other by SIGKILL to its node-2 ranks (RVT_NODE=2 from the
# TaskProlog, through orted), after which mpirun ends it. Neither may
# leave an agent, MR or QP behind; the next job (3) must run.
t=$SECONDS
c=$(sbatch_job cancel rvt long)
k=$(sbatch_job killed rvt long)
# long_moving: both long jobs' node-2 agents have sent bytes, and the
# killed job's node-2 ranks are found (victims)
# shellcheck disable=SC2317 # called by await
long_moving() {
    moving "$c" && moving "$k" && victims=$(ranks_of "$k" 2) && [ -n "$victims" ]
}
# long_ended: one of them ended (its mpirun exited, or it left the queue)
# before it was seen moving: that can no longer come
# shellcheck disable=SC2317 # called by await
long_ended() {
    grep -qs 'mpirun exit' "$work/cancel.out" "$work/killed.out" ||
        [ -z "$(on 1 squeue -h -j "$c" 2>/dev/null)" ] ||
        [ -z "$(on 1 squeue -h -j "$k" 2>/dev/null)" ]
}
# Waited for as long as it takes the loaded emulator to start them (each
# look costs seconds), with a guard against a hang alone: a bound by the
# clock failed on a loaded machine ("moving after 154 s: no")
await 600 long_moving long_ended
case $? in
0) ready=yes awaited="both long jobs' agents carried data, node 2's ranks found, after $await_secs s" ;;
1) ready=no awaited="a long job ended before both were seen moving, after $await_secs s" ;;
*) ready=no awaited="both long jobs not seen moving after $await_secs s (the hang guard: 600 s)" ;;
esac
echo "long jobs moving: $awaited"
if [ $ready = no ]; then # what each job was doing: the queue, its output, its agents
    on 1 squeue -o '%i %j %T %R %N' 2>&1 | sed 's/^/  squeue| /'
    for j in "cancel $c" "killed $k"; do
        read -r tag id <<<"$j"
        tail -5 "$work/$tag.batch" "$work/$tag.out" 2>&1 | sed "s/^/  $tag| /"
        for n in 1 2; do
            echo "  $tag| node $n's agent: $(on "$n" timeout 10 "$rvt_status" --device="rxe$n" \
                --job-key="slurm.$id" 2>&1 | head -12 | tr '\n' ' ')"
        done
    done
fi
[ -n "${victims:-}" ] || victims=$(ranks_of "$k" 2)
on 1 scancel "$c"
# shellcheck disable=SC2086 # one pid a word
[ -n "${victims:-}" ] && kill -KILL $victims
# no ranks found to kill: the job is cancelled too (it would run on)
[ -n "${victims:-}" ] || on 1 scancel "$k"
job_wait "$c" 60
job_wait "$k" 90
check "both long jobs moved data through their agents before they were cut short ($awaited)" [ $ready = yes ]
check "scancel: job $c ended ($(grep -h 'mpirun exit' "$work/cancel.out" 2>/dev/null || echo 'mpirun killed'))" \
    test -z "$(on 1 squeue -h -j "$c" 2>/dev/null)"
check "node 2's ranks (${victims//$'\n'/ }) SIGKILLed mid-transfer: the job ended ($(grep -h 'mpirun exit' "$work/killed.out"))" \
    grep -q 'mpirun exit [1-9]' "$work/killed.out"
left_behind cancel 30
left_behind killed 30
rdma_clean "after the cancelled and the killed job"
echo "cancelled and killed jobs: $((SECONDS - t)) s"

# 3 ---------------------------------------------------------------------
# The next job on those nodes: srun launching the ranks itself, PMIx
# (Debian's Slurm's and Open MPI's one common PMI: srun --mpi=list above;
# Debian's Open MPI 4.1 has no PMI-2 client). Its prolog is given a
# cpuset, RVT_AGENT_CPUS=0,1: slurmd starts the prolog on the specialized
# CPU already, so only a list other than that one shows that rvt-slurm's
# taskset takes effect.
t=$SECONDS
echo "RVT_AGENT_CPUS=0,1" >>"$work/rvt-slurm.conf"
salloc_job srun ud_verbs,rvt srun
verified srun "srun --mpi=pmix (no mpirun), UCX_TLS=ud_verbs,rvt, after the cancelled and killed jobs"
placed srun 0,1
left_behind srun 20
rdma_clean "after the srun job"
echo "srun job: $((SECONDS - t)) s"

# 4 ---------------------------------------------------------------------
# OpenSHMEM as sites run it under Slurm: oshmem (spml ucx) started by
# mpirun in salloc, over rvt alone; its agents are the prolog's too
t=$SECONDS
salloc_job shmem rvt shmem
verified shmem "OpenSHMEM (spml ucx, mpirun in salloc), UCX_TLS=rvt" rvt_shmem_check
placed shmem 0,1
left_behind shmem 20
rdma_clean "after the OpenSHMEM job"
echo "OpenSHMEM job: $((SECONDS - t)) s"

# 5 ---------------------------------------------------------------------
# A job that does not ask: the prolog writes no job file and the extern
# step starts no agent, on either node (seen from the job's own step)
t=$SECONDS
cat >"$work/noask.sh" <<'NOASK'
#!/bin/bash
# on each node: the job file, and any agent serving this job's key
ls "/run/rvt/jobs/$SLURM_JOB_ID" 2>/dev/null
for p in $(pgrep -x rvtd); do
    tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -qx -- "--job-key=slurm.$SLURM_JOB_ID" &&
        echo "agent $p on $SLURMD_NODENAME"
done
exit 0
NOASK
chmod 0755 "$work/noask.sh"
# shellcheck disable=SC2016 # for salloc's shell
on 1 timeout 120 salloc -N2 -n2 -O -s bash -c \
    'echo "$SLURM_JOB_ID" >"$0/noask.job"; srun -N2 -n2 "$0/noask.sh" >"$0/noask.seen"' \
    "$work" >"$work/noask.salloc" 2>&1
job=$(cat "$work/noask.job" 2>/dev/null)
seen=$(cat "$work/noask.seen" 2>/dev/null)
if [ -n "$job" ] && [ -e "$work/noask.seen" ] && [ -z "$seen" ] &&
    ! grep -q "spank_rvt: job $job:" "$work"/slurmd.node?.log; then
    pass "a job without --rvt (job $job): no job file and no agent on either node, seen from its own step"
else
    fail "a job without --rvt (job ${job:-none}): its step saw '$seen'; $(grep -h "spank_rvt: job ${job:-none}:" "$work"/slurmd.node?.log); $(tail -n 3 "$work/noask.salloc")"
fi
echo "job without --rvt: $((SECONDS - t)) s"

# 6 ---------------------------------------------------------------------
# Two ordinary users, a --rvt batch job each, at once: srun --mpi=pmix
# launches the ranks, which are given nothing but UCX_TLS and Open MPI's
# pml; the module reaches them through spank_rvt.so (LD_PRELOAD), and the
# agents they use are their own job's, in its extern step. The users live
# in copies of /etc/passwd and /etc/group bound on each node (the guest's
# /etc is the host's, read-only); their work directories are 1777 (the
# share may not take a chown). The submitting shell has no memlock limit,
# as a site gives its users; Slurm propagates it to the ranks.
t=$SECONDS
for f in passwd group; do cp "/etc/$f" "$work/etc.$f"; done
for u in 1 2; do
    echo "rvtuser$u:x:428$u:428$u:rvt site jobs user $u:$work/user$u:/bin/bash" >>"$work/etc.passwd"
    echo "rvtuser$u:x:428$u:" >>"$work/etc.group"
    install -d -m 1777 "$work/user$u"
done
on all bash -c "mount --bind $work/etc.passwd /etc/passwd && mount --bind $work/etc.group /etc/group" ||
    fail "binding the users' /etc/passwd and /etc/group on the nodes"
# user-job.sh, in $HOME: hold until go (both jobs' agents seen), run the
# ranks (each records its LD_PRELOAD and UCX_RVT_START_AGENT), hold until
# release (the agents' status taken from outside, as the user)
printf '#!/bin/bash\n# shellcheck disable=SC1091,SC2154,SC2086\n. %q/job.env\n' "$work" >"$work/user-job.sh"
cat >>"$work/user-job.sh" <<'USERJOB'
cd "$HOME" || exit 1
echo "$SLURM_JOB_ID" >job
touch ready
for _ in $(seq 1200); do [ -e go ] && break; sleep 0.2; done
export OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=rvt OMPI_MCA_pml_ucx_devices=any \
    OMPI_MCA_btl=self OMPI_MCA_mpi_yield_when_idle=1 \
    UCX_TLS=ud_verbs,rvt,sm,self UCX_WARN_UNUSED_ENV_VARS=n
# shellcheck disable=SC2016 # for each rank's shell
srun --mpi=pmix bash -c 'env | grep -E "^(LD_PRELOAD|UCX_RVT_START_AGENT)=" | sort >"env.$SLURM_PROCID"; exec "$0" "$@"' \
    "$mpi_prog" $MPI_ARGS >out 2>&1
echo "srun exit $?" >>out
touch done
for _ in $(seq 1200); do [ -e release ] && break; sleep 0.2; done
USERJOB
chmod 0755 "$work/user-job.sh"
# as_user U CMD...: CMD on node 1 as rvtuserU, with no memlock limit
as_user() {
    local u=$1
    shift
    on 1 prlimit --memlock=unlimited:unlimited setpriv --reuid="428$u" --regid="428$u" \
        --clear-groups env HOME="$work/user$u" USER="rvtuser$u" "$@"
}
declare -A ujob upid
for u in 1 2; do
    ujob[$u]=$(as_user "$u" sbatch --rvt --parsable -N2 -n2 -O -s -D "$work/user$u" \
        -o "$work/user$u/batch" "$work/user-job.sh")
done
# a job that was not taken, or has ended, has nothing to wait for
for u in 1 2; do job_reaches "$work/user$u/ready" "${ujob[$u]}" 120; done
# each job's agent on each node: its user's, its extern step's child
users_ok=yes line=
for u in 1 2; do
    job=${ujob[$u]}
    for n in 1 2; do
        pid=$(sed -n "s/.*spank_rvt: job $job: agent for slurm\.$job on rxe$n:1 started in the extern step (pid \([0-9]*\),.*/\1/p" \
            "$work/slurmd.node$n.log" | head -n 1)
        owner=$(stat -c %u "/proc/${pid:-0}" 2>/dev/null)
        parent=$(tr '\0' ' ' <"/proc/$(ps -o ppid= -p "${pid:-0}" | tr -d ' ')/cmdline" 2>/dev/null)
        line+=" user $u job $job node $n: pid ${pid:-none} uid ${owner:-?} parent '${parent% }';"
        if [ -z "$pid" ] || [ "$owner" != "428$u" ] || [[ $parent != "slurmstepd: [$job.extern]"* ]]; then
            users_ok=no
        fi
        upid[$u.$n]=${pid:-0}
    done
done
check "two ordinary users' --rvt jobs at once: each node's agent of each job runs as its user, a child of its extern step:$line" \
    [ $users_ok = yes ]
# neither user reaches the other's agent: its socket, a signal, its
# environment
apart=yes line=
for n in 1 2; do
    sock=/run/rvt/4282/rxe$n-1.slurm.${ujob[2]}.sock
    as1=(setpriv --reuid=4281 --regid=4281 --clear-groups)
    if ! on "$n" test -S "$sock" || on "$n" "${as1[@]}" test -e "$sock" ||
        on "$n" "${as1[@]}" kill -0 "${upid[2.$n]}" 2>/dev/null ||
        on "$n" "${as1[@]}" cat "/proc/${upid[2.$n]}/environ" >/dev/null 2>&1; then
        apart=no
    fi
    line+=" node $n: $sock, agent ${upid[2.$n]};"
done
check "user 1 can neither reach user 2's agent's socket nor signal it nor read its environment:$line" [ $apart = yes ]
for u in 1 2; do touch "$work/user$u/go"; done
for u in 1 2; do job_reaches "$work/user$u/done" "${ujob[$u]}" 300; done
for u in 1 2; do
    job=${ujob[$u]}
    indent "user$u" <"$work/user$u/out"
    # the agents' status, as their user (rvt-status answers its own uid)
    for n in 1 2; do
        on "$n" setpriv --reuid="428$u" --regid="428$u" --clear-groups \
            "$rvt_status" --json --device="rxe$n" --job-key="slurm.$job" \
            >"$work/user$u/status.$n" 2>&1
    done
    agents=$(agents_of "slurm.$job" | sort | tr '\n' ' ')
    want=$(printf '%s\n' "${upid[$u.1]}:rxe1" "${upid[$u.2]}:rxe2" | sort | tr '\n' ' ')
    envs=$(cat "$work/user$u"/env.* 2>/dev/null | sort -u | tr '\n' ' ')
    tx=$(cat "$work/user$u"/status.? 2>/dev/null |
        jq -s '[.[].data_path.peers[] | select(.loopback | not) | .bytes] | add // 0' 2>/dev/null)
    if grep -q '^OK: rvt_mpi_check' "$work/user$u/out" && [ "$agents" = "$want" ] &&
        [ "$envs" = "LD_PRELOAD=$module UCX_RVT_START_AGENT=n " ] && [ "${tx:-0}" -gt 0 ]; then
        pass "user $u (job $job): rvt_mpi_check verified every word through its extern steps' agents alone ($agents), $tx bytes sent to peers; its ranks had $envs"
    else
        fail "user $u (job $job): '$(grep -E '^(OK|FAIL|srun exit)' "$work/user$u/out" | tr '\n' ' ')', agents '$agents' (expected '$want'), ranks' '$envs', bytes sent ${tx:-?}"
    fi
done
# the admin's view: root's rvt-status --all on each node lists both
# users' agents, each serving, with its uid, job and pid (the agents
# still run: their jobs wait for release)
seen=yes line=
for n in 1 2; do
    listed=$(on "$n" "$rvt_status" --all --json 2>"$work/all.$n.err" |
        jq -r '.[] | select(.state == "serving") | "\(.uid):\(.job_key):\(.pid)"' 2>/dev/null |
        sort | tr '\n' ' ')
    for w in "4281:slurm.${ujob[1]}:${upid[1.$n]}" "4282:slurm.${ujob[2]}:${upid[2.$n]}"; do
        [[ " $listed" == *" $w "* ]] || seen=no
    done
    line+=" node $n: '${listed% }';"
done
check "root's rvt-status --all lists both users' agents on each node, serving:$line" [ $seen = yes ]
for u in 1 2; do touch "$work/user$u/release"; done
for u in 1 2; do
    job_wait "${ujob[$u]}" 60
    echo "${ujob[$u]}" >"$work/user$u.job"
    left_behind "user$u" 30 "the job's end"
done
rdma_clean "after the two users' jobs"
echo "two users' jobs: $((SECONDS - t)) s"
indent "rvt-slurm log" <"$work/rvt-slurm.log"

finish "site jobs"
