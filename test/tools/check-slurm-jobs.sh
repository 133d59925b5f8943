#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# A one-node Slurm cluster on this host runs jobs of two ordinary users
# with the build's spank_rvt.so in its plugstack, contrib/slurm/rvt-slurm
# as its Prolog (RVT_JOBS=asked, RVT_AGENT_MODE=extern) and
# PrologFlags=Contain; the agent is test/gtest/unit/fake_rvtd (rvtd's
# options and paths, --notify-fd, no RDMA). Everything runs in a mount
# namespace of its own: a fresh /run (the prolog's /run/rvt, MUNGE's
# socket), and copies of /etc/passwd and /etc/group holding the two users
# (the host's files are untouched); slurmctld, slurmd and munged are this
# script's children, on ports of their own, stopped at its end.
# Checked, with the Epilog off unless said:
#   - sbatch --rvt of user A and of user B, at once: each job's one agent
#     runs as its user, a child of `slurmstepd: [<job>.extern]`, and
#     served (the .agents list) before the batch script started; it runs
#     SCHED_FIFO 1 with reset-on-fork and on CPU 0, as the job file says
#     (RVT_PRIORITY, RVT_AGENT_CPUS), set by root: its hard RLIMIT_RTPRIO
#     stays 0; slurmd's log says so (spank_rvt's line); the
#     batch step and an srun step inside it see UCX_RVT_START_AGENT=n and
#     LD_PRELOAD with the module appended to the user's own (once); A
#     cannot list B's runtime directory, reach its socket or signal its
#     agent;
#   - sbatch without --rvt (user B): no job file, no agent, nothing set;
#   - scancel of A's job, and B's job ending by itself: no agent left,
#     with no Epilog;
#   - with the Epilog on, a job's end removes its job file;
#   - the extern slurmstepd SIGKILLed: its agent ends too (SIGTERM by the
#     kernel, PR_SET_PDEATHSIG);
#   - slurmd SIGKILLed mid-job: the agent and the job run on; the job
#     cancelled, slurmd started again: the agent is gone within the bound
#     docs/operations.md states (SLURMD_BACK_BOUND s, measured here).
# Needs root, Slurm's slurmctld and slurmd, munged and mungekey, and the
# plugin built (configure builds it when slurm/spank.h is there); exits
# 77 otherwise, saying why (contrib/test-count.sh's skip_reason knows
# each reason); and 77 in a build against a UCX the jobs' users cannot
# read (a release in root's cache: the test command runs this test in
# the build against Debian's UCX only, and would count that skip failed).
set -u
SLURMD_BACK_BOUND=60
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root (it runs a Slurm cluster)"
    exit 77
fi
for t in slurmctld slurmd munged mungekey sbatch; do
    if ! command -v "$t" >/dev/null; then
        echo "SKIP: no $t (contrib/setup-deps.sh installs slurmctld, slurmd, slurm-client and munge)"
        exit 77
    fi
done
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$PWD
plugin=$build/src/uct/ib/rvt/slurm/.libs/spank_rvt.so
fake=$build/test/gtest/unit/fake_rvtd
if [ ! -f "$plugin" ]; then
    if [ -e /usr/include/slurm/spank.h ]; then
        echo "FAIL: $plugin not built, though slurm/spank.h is there"
        exit 1
    fi
    echo "SKIP: spank_rvt.so not built: no slurm/spank.h (contrib/setup-deps.sh installs libslurm-dev)"
    exit 77
fi
[ -x "$fake" ] || { echo "FAIL: $fake not built (make check builds it)"; exit 1; }
module=$build/src/uct/ib/rvt/uct/.libs/libuct_rvt.so
[ -f "$module" ] || { echo "FAIL: $module not built"; exit 1; }
# The jobs' ordinary users preload the module, and with it the UCX it
# was built against: a UCX in a prefix they cannot read (setup-deps.sh
# --ucx builds one into root's cache) cannot run their jobs; the build
# against Debian's UCX runs this test
ucx_prefix=${UCX_PREFIX:-/usr}
if [ "$ucx_prefix" != /usr ] &&
    ! runuser -u nobody -- test -r "$ucx_prefix/lib/libucs.so.0"; then
    echo "SKIP: the module's UCX ($ucx_prefix) is not readable by other users (the jobs' users load it)"
    exit 77
fi

if [ -z "${RVT_SLURM_NS:-}" ]; then
    # shellcheck disable=SC2016 # for the namespace's bash
    exec env RVT_SLURM_NS=1 unshare --mount --propagation private \
        bash -c 'mount -t tmpfs -o mode=0755 tmpfs /run && exec "$0" "$@"' "$0" "$@"
fi

work=$(mktemp -d /tmp/rvt-check-slurm.XXXXXX) || exit 99
chmod 0755 "$work"
bad=0
ok() { echo "PASS: $*"; }
no() {
    echo "FAIL: $*"
    bad=1
}
daemons=()
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    local p j
    # the jobs' slurmstepd left by a killed slurmd, then the daemons
    cat "$work"/*/job 2>/dev/null | while read -r j; do
        for p in $(pgrep -f "^slurmstepd: \[$j\."); do kill -KILL "$p" 2>/dev/null; done
    done
    # slurmd, slurmctld, then munged: the reverse of their start
    for ((i = ${#daemons[@]} - 1; i >= 0; i--)); do
        kill -TERM "${daemons[i]}" 2>/dev/null
        wait "${daemons[i]}" 2>/dev/null
    done
    for p in $(pgrep -x rvtd); do
        grep -qx -- "--job-key=slurm.*" <(tr '\0' '\n' <"/proc/$p/cmdline") 2>/dev/null &&
            [ "$(readlink "/proc/$p/exe")" = "$fake" ] && kill -KILL "$p"
    done
    if [ "$bad" = 1 ]; then
        for f in slurmd.log slurmctld.log rvt-slurm.log; do
            echo "---- $f (last 40 lines)"
            tail -n 40 "$work/$f" 2>/dev/null
        done
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# ---- two ordinary users, in this namespace only ---------------------------
ua=4271 ub=4272
for f in passwd group; do
    cp "/etc/$f" "$work/$f"
    mount --bind "$work/$f" "/etc/$f" || { no "bind-mounting a copy of /etc/$f"; exit 1; }
done
for u in a b; do
    id=u$u
    if getent passwd "${!id}" >/dev/null || getent passwd "rvtjob$u" >/dev/null; then
        no "uid ${!id} or user rvtjob$u taken here: pick others"
        exit 1
    fi
    echo "rvtjob$u:x:${!id}:${!id}:rvt check job user $u:$work/$u:/bin/bash" >>"$work/passwd"
    echo "rvtjob$u:x:${!id}:" >>"$work/group"
    install -d -m 0700 -o "${!id}" -g "${!id}" "$work/$u"
done

# ---- MUNGE, Slurm ------------------------------------------------------------
mkdir -p /run/munge
mungekey -c -b 1024 -k "$work/munge.key" 2>/dev/null || { no "mungekey"; exit 1; }
munged -F --force --key-file="$work/munge.key" --socket=/run/munge/munge.socket.2 \
    --log-file="$work/munged.log" --pid-file=/run/munge/munged.pid \
    --seed-file="$work/munged.seed" &
daemons+=($!)

# two free TCP ports for slurmctld and slurmd
ports=()
for p in $(seq $((20000 + $$ % 20000)) 45000); do
    ss -Htln "sport = :$p" | grep -q . || ports+=("$p")
    [ ${#ports[@]} = 2 ] && break
done
host=$(hostname -s)
export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=rvtcheck
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${ports[0]}
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
SlurmdDebug=verbose
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
PrologFlags=Contain
Prolog=$work/prolog
Epilog=$work/epilog
PlugStackConfig=$work/plugstack.conf
KillWait=3
SlurmdTimeout=300
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=rvtnode NodeAddr=127.0.0.1 Port=${ports[1]} CPUs=8 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1
PartitionName=check Nodes=rvtnode Default=YES MaxTime=INFINITE State=UP
EOF
echo "required $plugin" >"$work/plugstack.conf"
ln -s "$fake" "$work/rvtd"
# the prolog's settings; the Epilog runs rvt-slurm only while epilog.on
# exists, so that most jobs end with no Epilog at all
cat >"$work/rvt-slurm.conf" <<EOF
RVTD=$work/rvtd
RVT_DEVICES=fake0:1
RVT_PRELOAD=$module
RVT_PRIORITY=fifo:1
RVT_AGENT_CPUS=0
RVT_SLURM_LOG=$work/rvt-slurm.log
EOF
printf '#!/bin/sh\nRVT_SLURM_CONF=%s/rvt-slurm.conf exec %s/contrib/slurm/rvt-slurm\n' \
    "$work" "$top" >"$work/prolog"
printf '#!/bin/sh\n[ -e %s/epilog.on ] || exit 0\nRVT_SLURM_CONF=%s/rvt-slurm.conf exec %s/contrib/slurm/rvt-slurm\n' \
    "$work" "$work" "$top" >"$work/epilog"
chmod 0755 "$work/prolog" "$work/epilog"
mkdir -p "$work/state" "$work/spool"

start_slurmd() {
    slurmd -D -N rvtnode >>"$work/slurmd.out" 2>&1 &
    slurmd_pid=$!
    daemons+=("$slurmd_pid")
}
slurmctld -D -i >"$work/slurmctld.out" 2>&1 &
daemons+=($!)
start_slurmd
up=no
for _ in $(seq 120); do
    [ "$(sinfo -h -o '%T' 2>/dev/null)" = idle ] && { up=yes; break; }
    sleep 0.5
done
if [ $up = yes ]; then
    ok "a one-node Slurm is up (ports ${ports[*]}, PrologFlags=Contain, plugstack: spank_rvt.so)"
else
    no "the one-node Slurm did not come up: $(sinfo -h 2>&1 | head -3)"
    cat "$work/slurmctld.out" "$work/slurmd.out" 2>/dev/null | tail -20
    exit 1
fi

# ---- the jobs ------------------------------------------------------------
# job.sh: what a job's ranks see (the batch step's environment, an srun
# step's), the agents listed before the script started, held until
# $PWD/release exists
cat >"$work/job.sh" <<'EOF'
#!/bin/bash
echo "$SLURM_JOB_ID" >job
cat "/run/rvt/jobs/$SLURM_JOB_ID.agents" >agents.at-start 2>&1
env >batch.env
srun -n1 env >srun.env 2>srun.err
touch started
for _ in $(seq 1200); do [ -e release ] && break; sleep 0.1; done
EOF
chmod 0755 "$work/job.sh"
# the user's own preload: any library every process can take
user_preload=$(find /lib/ /usr/lib/ -maxdepth 2 -name libm.so.6 | head -n 1)

# submit USER TAG [SBATCH OPTION...]: job.sh as USER in $work/TAG
# (made for them), with the user's own LD_PRELOAD; prints the job id
submit() {
    local u=$1 tag=$2 id
    shift 2
    id=u$u
    install -d -m 0700 -o "${!id}" -g "${!id}" "$work/$tag"
    (cd "$work/$tag" && env -i PATH="$PATH" SLURM_CONF="$SLURM_CONF" \
        LD_PRELOAD="$user_preload" HOME="$work/$u" USER="rvtjob$u" \
        setpriv --reuid="${!id}" --regid="${!id}" --clear-groups -- \
        sbatch --parsable -n1 -o "$work/$tag/out" "$@" "$work/job.sh")
}
# until SECONDS: COMMAND... succeeds within SECONDS (0.2 s apart)
until_ok() {
    local end=$((SECONDS + $1))
    shift
    until "$@"; do
        [ $SECONDS -lt $end ] || return 1
        sleep 0.2
    done
}
# agents_of JOB: pids of rvtd serving slurm.JOB
agents_of() {
    local p
    for p in $(pgrep -x rvtd); do
        grep -qx -- "--job-key=slurm.$1" <(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null) &&
            echo "$p"
    done
}
none_of() { [ -z "$(agents_of "$1")" ]; }
# shellcheck disable=SC2317 # called through until_ok
gone_from_queue() { [ -z "$(squeue -h -j "$1" 2>/dev/null)" ]; }
val() { sed -n "s/^$1=//p" "$2" 2>/dev/null; }

ja=$(submit a a --rvt)
jb=$(submit b b --rvt)
jc=$(submit b c)
for t in a b c; do
    until_ok 60 test -e "$work/$t/started" || no "job $t did not start: $(cat "$work/$t/out" 2>/dev/null)"
done

# each --rvt job: its one agent, its user's, the extern step's child
declare -A agent
for t in a b; do
    j=ja
    [ $t = b ] && j=jb
    job=${!j} id=u$t
    pids=$(agents_of "$job")
    pid=${pids%%$'\n'*}
    parent=$(ps -o ppid= -p "${pid:-0}" 2>/dev/null | tr -d ' ')
    pcmd=$(tr '\0' ' ' <"/proc/${parent:-0}/cmdline" 2>/dev/null)
    owner=$(stat -c %u "/proc/${pid:-0}" 2>/dev/null)
    if [ -n "$pid" ] && [ "$pid" = "$pids" ] && [ "$owner" = "${!id}" ] &&
        [[ $pcmd == "slurmstepd: [$job.extern]"* ]]; then
        ok "sbatch --rvt of user $t (job $job): its one agent, pid $pid, runs as uid $owner, a child of '${pcmd% }' (pid $parent)"
    else
        no "sbatch --rvt of user $t (job $job): agents '${pids//$'\n'/ }', uid '$owner', parent $parent '$pcmd'"
    fi
    agent[$t]=${pid:-0}
    sched=$(chrt -p "${pid:-0}" 2>&1 | tr '\n' ' ')
    cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/${pid:-0}/status" 2>/dev/null)
    rtprio=$(awk '/^Max realtime priority/ { print $5 }' "/proc/${pid:-0}/limits" 2>/dev/null)
    logline=$(grep -F "spank_rvt: job $job: agent for slurm.$job on fake0:1 started in the extern step (pid $pid, uid ${!id}, cpus 0, priority fifo:1)" "$work/slurmd.log")
    if [[ $sched == *"SCHED_FIFO|SCHED_RESET_ON_FORK"*"priority: 1 "* ]] && [ "$cpus" = 0 ] &&
        [ "$rtprio" = 0 ] && [ -n "$logline" ]; then
        ok "job $job: its agent runs SCHED_FIFO 1 with reset-on-fork on CPU 0 (the job file's), its hard RLIMIT_RTPRIO 0; slurmd's log: ${logline#*\] }"
    else
        no "job $job: agent $pid: '$sched', CPUs '$cpus', hard RLIMIT_RTPRIO '$rtprio', log line '$logline' ($(grep 'spank_rvt' "$work/slurmd.log" | tail -n 2))"
    fi
    at_start=$(cat "$work/$t/agents.at-start")
    if [ "$at_start" = "fake0:1=$pid" ]; then
        ok "job $job: before its batch script started, the agent served (/run/rvt/jobs/$job.agents: $at_start)"
    else
        no "job $job: at its batch script's start the agents listed were '$at_start' (expected fake0:1=$pid)"
    fi
    for e in batch srun; do
        f=$work/$t/$e.env
        if [ "$(val UCX_RVT_START_AGENT "$f")" = n ] &&
            [ "$(val LD_PRELOAD "$f")" = "$user_preload:$module" ]; then
            ok "job $job: its $e step's task sees UCX_RVT_START_AGENT=n and LD_PRELOAD=$user_preload:$module (the module appended, once)"
        else
            no "job $job: $e step: UCX_RVT_START_AGENT='$(val UCX_RVT_START_AGENT "$f")' LD_PRELOAD='$(val LD_PRELOAD "$f")' $(cat "$work/$t/srun.err" 2>/dev/null)"
        fi
    done
done
# the two users' agents apart
sock_b=/run/rvt/$ub/fake0-1.slurm.$jb.sock
as_a() { setpriv --reuid="$ua" --regid="$ua" --clear-groups -- "$@"; }
if [ -S "$sock_b" ] && [ "${agent[a]}" != "${agent[b]}" ] &&
    ! as_a ls "/run/rvt/$ub" >/dev/null 2>&1 &&
    ! as_a test -e "$sock_b" && ! as_a kill -0 "${agent[b]}" 2>/dev/null; then
    ok "user a cannot list user b's /run/rvt/$ub, reach its agent's socket, or signal its agent (${agent[b]})"
else
    no "users apart: socket $sock_b, agents ${agent[a]} and ${agent[b]}, a's view: $(as_a ls -la "/run/rvt/$ub" 2>&1 | head -3)"
fi
# the job that did not ask
f=$work/c/batch.env
if none_of "$jc" && [ ! -e "/run/rvt/jobs/$jc" ] && [ -z "$(val UCX_RVT_START_AGENT "$f")" ] &&
    [ "$(val LD_PRELOAD "$f")" = "$user_preload" ]; then
    ok "sbatch without --rvt (job $jc): no job file, no agent, its tasks' LD_PRELOAD untouched, no UCX_RVT_START_AGENT"
else
    no "job $jc without --rvt: agents '$(agents_of "$jc")', job file $(ls "/run/rvt/jobs/$jc" 2>&1), UCX_RVT_START_AGENT='$(val UCX_RVT_START_AGENT "$f")', LD_PRELOAD='$(val LD_PRELOAD "$f")'"
fi

# the ends, with no Epilog
scancel "$ja"
if until_ok 30 none_of "$ja"; then
    ok "scancel of job $ja: its agent ${agent[a]} is gone, no Epilog run"
else
    no "scancel of job $ja: agents $(agents_of "$ja") still run"
fi
touch "$work/b/release" "$work/c/release"
until_ok 60 gone_from_queue "$jb"
if none_of "$jb"; then
    ok "job $jb ended by itself: its agent ${agent[b]} is gone, no Epilog run"
else
    no "job $jb ended: agents $(agents_of "$jb") still run"
fi

# the Epilog removes the job file
touch "$work/epilog.on"
jd=$(submit a d --rvt)
until_ok 60 test -e "$work/d/started"
jf_during=$(ls "/run/rvt/jobs/$jd" 2>/dev/null)
touch "$work/d/release"
until_ok 60 gone_from_queue "$jd"
if [ -n "$jf_during" ] && until_ok 10 test ! -e "/run/rvt/jobs/$jd" && none_of "$jd"; then
    ok "with the Epilog on, job $jd's end removed its job file $jf_during"
else
    no "Epilog: job file of $jd '$jf_during' during, now $(ls "/run/rvt/jobs/$jd"* 2>&1)"
fi
rm -f "$work/epilog.on"

# the extern slurmstepd dies: its agent follows
je=$(submit a e --rvt)
until_ok 60 test -e "$work/e/started"
agent_e=$(agents_of "$je")
stepd=$(pgrep -f "^slurmstepd: \[$je\.extern\]")
# its sleep (the step's one task), which nobody ends once it is killed
orphans=$(pgrep -P "${stepd:-0}" -x sleep)
[ -n "$stepd" ] && kill -KILL "$stepd"
# shellcheck disable=SC2086 # one pid a word
[ -n "$orphans" ] && kill -KILL $orphans
if [ -n "$agent_e" ] && [ -n "$stepd" ] && until_ok 10 none_of "$je"; then
    ok "the extern slurmstepd ($stepd) of job $je SIGKILLed: its agent $agent_e ended (parent-death signal)"
else
    no "extern stepd '$stepd' of job $je killed: agents '$agent_e' before, '$(agents_of "$je")' now"
fi
scancel "$je"
until_ok 60 gone_from_queue "$je"

# slurmd dies mid-job: agent and job run on; cancelled while slurmd is
# down, the agent goes once slurmd is back
jf=$(submit b f --rvt)
until_ok 60 test -e "$work/f/started"
agent_f=$(agents_of "$jf")
kill -KILL "$slurmd_pid"
wait "$slurmd_pid" 2>/dev/null
sleep 2
if [ -n "$agent_f" ] && kill -0 "$agent_f" 2>/dev/null; then
    ok "slurmd SIGKILLed mid-job $jf: its agent $agent_f runs on"
else
    no "slurmd killed: job $jf's agent '$agent_f' is gone"
fi
scancel "$jf"
sleep 2
still=$(agents_of "$jf")
start_slurmd
t=$SECONDS
if until_ok "$SLURMD_BACK_BOUND" none_of "$jf"; then
    ok "job $jf cancelled while slurmd was down (agent '${still:-gone already}' then): gone $((SECONDS - t)) s after slurmd came back (bound ${SLURMD_BACK_BOUND} s)"
else
    no "job $jf: agent $(agents_of "$jf") still runs ${SLURMD_BACK_BOUND} s after slurmd came back"
fi
exit $bad
