#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the testbed guest (2 nodes): test/testbed/idle-agent.sh says what.
# Usage: idle-agent-guest.sh BUILD_DIR
set -u -o pipefail
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
build=${1:?usage: idle-agent-guest.sh BUILD_DIR}
# rvtd, rvt_status, module, a job key of its own, $work
perf_guest_setup idle "$build"
agents_up 600 1 2 || finish idle

# idle LABEL: 10 s with nothing to do, the agents' CPU and scheduling
idle() {
    local b a s0 s1
    b=$(cpu_ticks)
    s0=$(agent_sched)
    sleep 10
    a=$(cpu_ticks)
    s1=$(agent_sched)
    echo "$1: $(cpu_report "$b" "$a" 0)"
    echo "  $(sched_report "$s0" "$s1" 10)"
}

section "agents with no peer"
sleep 2
idle "no peer"

section "agents after a job: one peer each, no client"
env="UCX_TLS=rvt,self LD_PRELOAD=$module UCX_RVT_START_AGENT=n RVT_JOB_KEY=$RVT_JOB_KEY"
if perf_pair "$work/job" 2 1 "$env" "$env" -t tag_bw -s 65536 -n 100; then
    pass "a UCP tag_bw over rvt connected the agents"
else
    fail "UCP tag_bw over rvt: $(error_text "$work/job")"
fi
peers=$(agent_get 1 '[.data_path.peers[] | select(.loopback | not) | .state] | join(",")')
check "node 1's agent has its remote peer connected ($peers)" [ "$peers" = connected ]
k0=$(agent_get 1 '[.data_path.peers[].keepalives] | add')
idle "one peer"
k1=$(agent_get 1 '[.data_path.peers[].keepalives] | add')
echo "  node 1's agent sent $((k1 - k0)) keepalives meanwhile"
finish idle
