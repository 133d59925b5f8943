#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# contrib/slurm/rvt-slurm as slurmd runs it (root, the job's SLURM_*
# variables), with test/gtest/unit/fake_rvtd as the agent (rvtd's options,
# paths and --daemon, no RDMA), for an ordinary user (nobody), in a mount
# namespace of its own with a fresh /run:
#   - the agent runs as the user, SCHED_FIFO with reset-on-fork as
#     RVT_PRIORITY=fifo:1 asks, set by root: the agent's hard
#     RLIMIT_RTPRIO stays 0, and another process of the user cannot take
#     SCHED_FIFO;
#   - its socket is in /run/rvt/<uid>, made by the prolog, 0700, the
#     user's;
#   - an RVT_PRIORITY that is not one is refused in the log, the agent
#     started at normal priority;
#   - with the prolog on one CPU of several (slurmd's specialized ones),
#     the agent is pinned to it, read without scontrol;
#   - the epilog with RVT_STOP_WAIT=0 exits 0 and leaves no agent.
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
    for j in 4242 4243 4244; do
        for p in $(agent "$j"); do kill -KILL "$p"; done
    done
    rm -rf "$work"
}
trap cleanup EXIT

# prolog|epilog JOB [SETTING...]: rvt-slurm as slurmd runs it
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
        SLURM_SCRIPT_CONTEXT="${context}_slurmd" \
        ${RVT_PIN:+taskset -c "$RVT_PIN"} "$top/contrib/slurm/rvt-slurm"
}
# agent JOB: the pid of the user's agent of JOB
agent() {
    local p
    for p in $(pgrep -u "$user" -x rvtd); do
        grep -qx -- "--job-key=slurm.$1" <(tr '\0' '\n' <"/proc/$p/cmdline") &&
            echo "$p"
    done
}

run prolog 4242 RVT_PRIORITY=fifo:1 || no "prolog exit $?"
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

# the epilog with no wait at all: no unset variable, no agent left
if run epilog 4242 RVT_STOP_WAIT=0; then
    ok "the epilog with RVT_STOP_WAIT=0 exits 0"
else
    no "the epilog with RVT_STOP_WAIT=0 exits $?"
fi
sleep 0.2
if [ -z "$(agent 4242)" ]; then
    ok "no agent of job 4242 after the epilog"
else
    no "the epilog left agent $(agent 4242)"
fi

# a setting that is no priority: said, and the agent runs all the same
run prolog 4243 RVT_PRIORITY=fifo:high
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
    RVT_PIN=0 run prolog 4244
    pid=$(agent 4244)
    cpus=$(taskset -pc "$pid" 2>/dev/null | sed 's/.*: //')
    if [ "$cpus" = 0 ] && grep -q "slurm.4244 on fake0:1 started .*cpus 0," "$work/log"; then
        ok "a prolog on CPU 0 of $(nproc --all) pins the agent there"
    else
        no "a prolog on CPU 0: the agent's CPUs '$cpus'; log: $(tail -n 1 "$work/log")"
    fi
    run epilog 4244
fi
exit $bad
