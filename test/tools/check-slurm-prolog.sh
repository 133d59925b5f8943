#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# contrib/slurm/rvt-slurm as slurmd runs it (root, the job's SLURM_*
# variables, SPANK_RVT as spank_rvt.so's --rvt sets it), with
# test/gtest/unit/fake_rvtd as the agent (rvtd's options, paths and
# --daemon, no RDMA), for an ordinary user (nobody), in a mount namespace
# of its own with a fresh /run:
#   - which jobs get agents: with RVT_JOBS=asked (the default) those
#     with SPANK_RVT=yes, with RVT_JOBS=all every job but SPANK_RVT=no;
#     a job that gets none has no job file, no runtime directory and no
#     agent; a SPANK_RVT that is neither yes nor no is refused in the log;
#   - extern mode (the default): the job file /run/rvt/jobs/<job>, root's
#     0644 in root's 0755 directory, says what spank_rvt.so starts (job,
#     mode, rvtd, devices, no cpus although the prolog runs on one CPU of
#     several, priority, args, preload); /run/rvt/<uid> is made, 0700, the
#     user's; and the prolog starts no agent;
#   - prolog mode (RVT_AGENT_MODE=prolog): the agent runs as the user,
#     SCHED_FIFO with reset-on-fork as RVT_PRIORITY=fifo:1 asks, set by
#     root: the agent's hard RLIMIT_RTPRIO stays 0, and another process of
#     the user cannot take SCHED_FIFO; its socket is in /run/rvt/<uid>;
#     the job file says mode=prolog and <job>.agents lists the agent;
#   - an RVT_PRIORITY that is not one is refused in the log, the agent
#     started at normal priority;
#   - with the prolog on one CPU of several (slurmd's specialized ones),
#     prolog mode pins the agent to it, read without scontrol;
#   - the epilog with RVT_STOP_WAIT=0 exits 0, leaves no agent, and
#     removes the job file and its .agents.
# Needs root (setpriv, chrt, unshare); exits 77 (a skip run-tests.sh
# allows only when not root) without it.
set -u
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root (it runs the prolog as slurmd does)"
    exit 77
fi
top=$(cd "$(dirname "$0")/../.." && pwd)
fake=$PWD/test/gtest/unit/fake_rvtd
[ -x "$fake" ] || { echo "FAIL: $fake not built (make check builds it)"; exit 1; }
if [ -z "${RVT_PROLOG_NS:-}" ]; then
    # a mount namespace of its own: /run fresh, the host's untouched
    # shellcheck disable=SC2016 # for the namespace's bash
    exec env RVT_PROLOG_NS=1 unshare --mount --propagation private \
        bash -c 'mount -t tmpfs -o mode=0755 tmpfs /run && exec "$0" "$@"' "$0" "$@"
fi
work=$(mktemp -d /tmp/rvt-check-prolog.XXXXXX) || exit 99
chmod 0755 "$work"
ln -s "$fake" "$work/rvtd"
user=65534 group=65534
bad=0
ok() { echo "PASS: $*"; }
no() { echo "FAIL: $*"; bad=1; }
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    local j p
    for j in 4242 4243 4244 4250 4251 4252 4253 4254; do
        for p in $(agent "$j"); do kill -KILL "$p"; done
    done
    rm -rf "$work"
}
trap cleanup EXIT

# prolog|epilog JOB [SETTING...]: rvt-slurm as slurmd runs it; SPANK_RVT
# (unset: not given) as the job's --rvt gives it
run() {
    local context=$1 job=$2
    shift 2
    {
        echo "RVTD=$work/rvtd"
        echo "RVT_DEVICES=fake0:1"
        echo "RVT_SLURM_LOG=$work/log"
        printf '%s\n' "$@"
    } >"$work/conf"
    env -i PATH="$PATH" RVT_SLURM_CONF="$work/conf" SLURM_JOB_ID="$job" \
        SLURM_JOB_UID=$user SLURM_JOB_GID=$group \
        SLURM_SCRIPT_CONTEXT="${context}_slurmd" ${SPANK_RVT+SPANK_RVT="$SPANK_RVT"} \
        ${RVT_PIN:+taskset -c "$RVT_PIN"} "$top/contrib/slurm/rvt-slurm"
}
# prolog mode with --rvt: the prolog starts the agent itself
start() { SPANK_RVT=yes run prolog "$@" RVT_AGENT_MODE=prolog; }
# agent JOB: the pid of the user's agent of JOB
agent() {
    local p
    for p in $(pgrep -u "$user" -x rvtd); do
        grep -qx -- "--job-key=slurm.$1" <(tr '\0' '\n' <"/proc/$p/cmdline") &&
            echo "$p"
    done
}

start 4242 RVT_PRIORITY=fifo:1 || no "prolog exit $?"
pid=$(agent 4242)
if [ -z "$pid" ]; then
    no "no agent of job 4242 after the prolog; its log:"
    cat "$work/log"
    exit 1
fi
ok "the prolog started the agent as uid $(stat -c %u "/proc/$pid") (pid $pid)"
sched=$(chrt -p "$pid")
if grep -q 'policy: SCHED_FIFO|SCHED_RESET_ON_FORK' <<<"$sched" &&
    grep -q 'priority: 1$' <<<"$sched"; then
    ok "the agent runs SCHED_FIFO 1 with reset-on-fork"
else
    no "the agent's scheduling: $sched"
fi
# "Max realtime priority  SOFT  HARD", from /proc (prlimit --pid needs
# CAP_SYS_RESOURCE, which a container's root may lack)
hard=$(awk '/^Max realtime priority/ { print $5 }' "/proc/$pid/limits")
if [ "$hard" = 0 ]; then
    ok "the agent's hard RLIMIT_RTPRIO is 0: the user was given no limit"
else
    no "the agent's hard RLIMIT_RTPRIO is $hard: the user holds a real-time limit"
fi
if setpriv --reuid=$user --regid=$group --clear-groups chrt -f 1 true 2>/dev/null; then
    no "a process of the user took SCHED_FIFO"
else
    ok "a process of the user cannot take SCHED_FIFO"
fi
dir=/run/rvt/$user
if [ "$(stat -c '%u %a' "$dir" 2>/dev/null)" = "$user 700" ] &&
    [ "$(stat -c '%u %a' /run/rvt)" = "0 755" ] &&
    grep -q "serving $dir/fake0-1.slurm.4242.sock" "$dir/fake0-1.slurm.4242.log" 2>/dev/null; then
    ok "the agent's socket is in $dir (root's parent, the user's 0700 directory)"
else
    no "runtime directory: $(stat -c '%n %U %a' /run/rvt "$dir" 2>&1 | tr '\n' ' ')"
fi

jf=/run/rvt/jobs/4242
if [ "$(sed -n 's/^mode=//p' "$jf" 2>/dev/null)" = prolog ] &&
    [ "$(cat "$jf.agents" 2>/dev/null)" = "fake0:1=$pid" ]; then
    ok "prolog mode: the job file says mode=prolog, $jf.agents lists the agent (fake0:1=$pid)"
else
    no "prolog mode: job file: $(tr '\n' ' ' <"$jf" 2>&1); agents: $(cat "$jf.agents" 2>&1)"
fi

# the epilog with no wait at all: no unset variable, no agent left
if run epilog 4242 RVT_STOP_WAIT=0; then
    ok "the epilog with RVT_STOP_WAIT=0 exits 0"
else
    no "the epilog with RVT_STOP_WAIT=0 exits $?"
fi
sleep 0.2
if [ -z "$(agent 4242)" ] && [ ! -e "$jf" ] && [ ! -e "$jf.agents" ]; then
    ok "no agent of job 4242 after the epilog, its job file and .agents removed"
else
    no "the epilog left agent '$(agent 4242)', $(ls "$jf"* 2>&1)"
fi

# a setting that is no priority: said, and the agent runs all the same
start 4243 RVT_PRIORITY=fifo:high
pid=$(agent 4243)
if [ -n "$pid" ] && chrt -p "$pid" | grep -q SCHED_OTHER &&
    grep -q "RVT_PRIORITY 'fifo:high': expected" "$work/log"; then
    ok "RVT_PRIORITY=fifo:high is refused in the log; the agent runs at normal priority"
else
    no "RVT_PRIORITY=fifo:high: agent '${pid:-none}', log: $(tail -n 2 "$work/log")"
fi
run epilog 4243

# slurmd's specialized CPUs, read from the prolog's own
if [ "$(nproc --all)" -ge 2 ]; then
    RVT_PIN=0 start 4244
    pid=$(agent 4244)
    cpus=$(taskset -pc "$pid" 2>/dev/null | sed 's/.*: //')
    if [ "$cpus" = 0 ] && grep -q "slurm.4244 on fake0:1 started .*cpus 0," "$work/log"; then
        ok "prolog mode: a prolog on CPU 0 of $(nproc --all) pins the agent there"
    else
        no "a prolog on CPU 0: the agent's CPUs '$cpus'; log: $(tail -n 1 "$work/log")"
    fi
    run epilog 4244
fi

# extern mode, the default: the job file, and no agent from the prolog
SPANK_RVT=yes RVT_PIN=0 run prolog 4250 RVT_PRIORITY=fifo:10 "RVT_AGENT_ARGS='--num-qps=2 --spin-us=20'" \
    RVT_PRELOAD=/x/libuct_rvt.so || no "prolog exit $?"
jf=/run/rvt/jobs/4250
want="job=4250
mode=extern
rvtd=$work/rvtd
devices=fake0:1
cpus=
priority=fifo:10
args=--num-qps=2 --spin-us=20
runtime_dir=
preload=/x/libuct_rvt.so"
if [ "$(grep -v '^#' "$jf" 2>/dev/null)" = "$want" ] &&
    [ "$(stat -c '%u %a' "$jf")" = "0 644" ] && [ "$(stat -c '%u %a' /run/rvt/jobs)" = "0 755" ]; then
    ok "extern mode: --rvt's job file $jf, root's 0644 in root's 0755 directory, says: $(tr '\n' ' ' <<<"$want")"
else
    no "extern mode: job file $(stat -c '%U %a' "$jf" 2>&1): $(tr '\n' ' ' <"$jf" 2>/dev/null)"
fi
if [ -z "$(agent 4250)" ] && [ ! -e "$jf.agents" ] &&
    [ "$(stat -c '%u %a' "/run/rvt/$user" 2>/dev/null)" = "$user 700" ]; then
    ok "extern mode: the prolog starts no agent (spank_rvt.so does, in the extern step), and makes /run/rvt/$user"
else
    no "extern mode: agent '$(agent 4250)', $(ls -ld "$jf.agents" "/run/rvt/$user" 2>&1)"
fi
run epilog 4250
[ -e "$jf" ] && no "the epilog left $jf"

# who asked: RVT_JOBS=asked (the default) and all, SPANK_RVT yes, no, unset
got=
for c in "asked yes 4251" "asked - 4252" "all - 4253" "all no 4254" "asked maybe 4255"; do
    read -r jobs asked job <<<"$c"
    if [ "$asked" = - ]; then
        run prolog "$job" RVT_JOBS="$jobs"
    else
        SPANK_RVT=$asked run prolog "$job" RVT_JOBS="$jobs"
    fi
    if [ -e "/run/rvt/jobs/$job" ]; then got+=" $jobs/$asked:file"; else got+=" $jobs/$asked:none"; fi
    run epilog "$job"
done
if [ "$got" = " asked/yes:file asked/-:none all/-:file all/no:none asked/maybe:none" ] &&
    grep -q "job 4255 .*SPANK_RVT 'maybe': expected yes or no" "$work/log"; then
    ok "who gets agents (RVT_JOBS/SPANK_RVT: job file or none):$got; 'maybe' refused in the log"
else
    no "who gets agents:$got (expected asked/yes:file asked/-:none all/-:file all/no:none asked/maybe:none); log: $(tail -n 2 "$work/log")"
fi
rm -rf "/run/rvt/$user"
run prolog 4252
if [ ! -e /run/rvt/jobs/4252 ] && [ ! -e "/run/rvt/$user" ] && [ -z "$(agent 4252)" ]; then
    ok "a job that did not ask: no job file, no /run/rvt/$user, no agent"
else
    no "a job that did not ask: $(ls -d /run/rvt/jobs/4252 "/run/rvt/$user" 2>&1), agent '$(agent 4252)'"
fi
exit $bad
