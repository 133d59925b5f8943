#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the testbed guest (3 nodes): the multi-node data-path tests of
# rvtd. One agent per node, started by hand with K QPs; clients are
# test/gtest/integration/rvt_traffic_client processes.
#
#   1. 3 nodes x 4 clients: every client writes-with-immediate a distinct
#      pattern into every other client (remote nodes and its own, through
#      loopback) and sends it active messages; everything is verified on
#      arrival; each agent then shows exactly K RC QPs per remote node.
#   2. A client killed with SIGKILL while it sends: the agents stay up, the
#      others' transfers complete and verify, and its agent deregisters the
#      dead client's MRs (rvt-status shows it).
#   3. Node 2's link down for 8 s while clients on all nodes trade with
#      it: the ops caught are reported failed (and retried by the client),
#      the connections come back, and everything verifies.
#
# Prints PASS:/FAIL: lines and exits 1 if any check failed.
# Usage: traffic-guest.sh BUILD_DIR
# shellcheck disable=SC2016 # jq filters and commands for `on`: single quotes on purpose
set -u
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
build=${1:?usage: traffic-guest.sh BUILD_DIR}
K=4
rvtd=$build/src/uct/ib/rvt/tools/rvtd
rvt_status=$build/src/uct/ib/rvt/tools/rvt-status
client=$build/test/gtest/integration/rvt_traffic_client
export RVT_JOB_KEY=traffic.1
# shared by all nodes (each node has its own /tmp)
work=$(mktemp -d "$PWD/$build/traffic.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf "$work"' EXIT

# the status of node N's agent as text (agent_json: the same as JSON)
text_of() { on "$1" bash -c "exec $rvt_status --device=\$RXE_DEV"; }

# check_qps N REMOTES: node N's agent has K RC QPs, connected, towards
# each of REMOTES remote nodes that it traded with; prints what it has
check_qps() {
    json_verdict "$(agent_json "$1")" '
        [.data_path.peers[] | select((.loopback | not) and .ops + .received > 0)] as $p
        | {ok: ($p | length == $remotes and all(.qps == $k and .state == "connected")),
           text: "\($p | length) remote nodes, QPs \($p | map(.qps) | tojson), \(.data_path.rc_qps) RC QPs in all (loopback included)"}' \
        --argjson k "$K" --argjson remotes "$2"
}

agent_pids=()
# start_agents [RVTD_OPTION...]
start_agents() {
    agent_pids=()
    for n in 1 2 3; do
        on "$n" bash -c "exec $rvtd --device=\$RXE_DEV --num-qps=$K \
            --linger=0 --reconnect-ms=500 --give-up-ms=60000 $*" \
            >>"$work/rvtd.$n.log" 2>&1 &
        agent_pids+=($!)
    done
    for n in 1 2 3; do wait_agent "$n"; done
}

# run_clients DIR ARGS_FOR_ID... : 4 clients per node, ids 0..11
run_clients() {
    local dir=$1 extra=$2 pids=() id
    mkdir -p "$dir"
    for n in 1 2 3; do
        for r in 0 1 2 3; do
            id=$(((n - 1) * 4 + r))
            # shellcheck disable=SC2086 # EXTRA: options, split on purpose
            on "$n" "$client" --dir="$dir" --id=$id --clients=12 $extra \
                >"$dir/out.$id" 2>&1 &
            pids+=($!)
        done
    done
    local rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    return $rc
}

start_agents

# 1 ---------------------------------------------------------------------
t0=$(date +%s.%N)
# no --retry: any failed op fails the test
if run_clients "$work/t1" "--rounds=4 --size=65536"; then
    pass "traffic 3x4: every write, immediate and AM verified ($(cat "$work"/t1/out.* | grep -c '^OK') clients OK, $(echo "$(date +%s.%N) - $t0" | bc) s)"
else
    fail "traffic 3x4"; grep -h FAILED "$work"/t1/out.* | head -5
fi
# the clients have detached: the agents' life totals still show what each
# delivered to its 4 clients from the 11 others (4 writes of 64 KiB each)
for n in 1 2 3; do
    if out=$(json_verdict "$(agent_json "$n")" '.data_path.delivered
        | {ok: (.writes == 176 and .write_bytes == 176 * 65536 and .am >= 176),
           text: "\(.writes) writes (\(.write_bytes) bytes), \(.am) AMs"}'); then
        pass "node $n agent counted what it delivered: $out"
    else
        fail "node $n agent delivered: $out (expected 176 writes of 65536 bytes, >= 176 AMs)"
    fi
done
for n in 1 2 3; do
    if out=$(check_qps "$n" 2); then
        pass "node $n agent: exactly $K RC QPs per remote node: $out (per-process RC: 4 local x 8 remote = 32)"
    else
        fail "node $n agent QPs: $out"
    fi
done

# 2 ---------------------------------------------------------------------
mkdir -p "$work/t2"
victim=5 # on node 2
on 2 "$client" --dir="$work/t2" --id=$victim --clients=12 --sender-only \
    --forever --rounds=8 --size=65536 >"$work/t2/out.victim" 2>&1 &
vpid=$!
gone_before=$(agent_get 2 .data_path.clients_gone)
others=()
for n in 1 2 3; do
    for r in 0 1 2 3; do
        id=$(((n - 1) * 4 + r))
        [ $id = $victim ] && continue
        on "$n" "$client" --dir="$work/t2" --id=$id --clients=12 \
            --skip=$victim --rounds=8 --size=65536 >"$work/t2/out.$id" 2>&1 &
        others+=($!)
    done
done
# kill it once it is sending (published, and its agent has its MRs)
for _ in $(seq 200); do
    [ -e "$work/t2/client.$victim" ] && break
    sleep 0.05
done
sleep 1
# $vpid is the `on` wrapper; the client is its child
pkill -KILL -P "$vpid" && killed=yes || killed=no
rc=0
for p in "${others[@]}"; do wait "$p" || rc=1; done
wait "$vpid" 2>/dev/null
if [ $rc = 0 ] && [ "$killed" = yes ]; then
    pass "SIGKILL of a sending client: the other 11 clients' transfers completed and verified"
else
    fail "SIGKILL test (killed=$killed)"; grep -h FAILED "$work"/t2/out.* | head -5
fi
ok=no
for _ in $(seq 100); do
    if agent_get 2 '.data_path | .clients_gone > $gone and .gone_waiting == 0 and .mrs_cleaned >= 2' \
        --argjson gone "$gone_before" >/dev/null; then
        ok=yes; break
    fi
    sleep 0.1
done
if [ $ok = yes ]; then
    pass "node 2 agent alive, dead client's MRs deregistered: $(text_of 2 | grep '^gone')"
else
    fail "dead client's MRs not deregistered: $(text_of 2 | grep '^gone')"
fi

# 3 ---------------------------------------------------------------------
# rxe's RC QPs do not give up on a dead link (none errored in a 13 s
# outage, though their packets were dropped), so the agents' keepalive is
# what finds it: fresh agents with a 1 s keepalive (lost after 2 s more)
# each `on` wrapper's child is the rvtd process itself (exec all the way)
for p in "${agent_pids[@]}"; do pkill -TERM -P "$p"; done
wait "${agent_pids[@]}" 2>/dev/null
start_agents --keepalive-ms=1000
mkdir -p "$work/t3"
# 8 s: far longer than the QPs' retries (7 x 268 ms), so ops do fail; once
# every client has published its address and traffic flows
(
    for _ in $(seq 600); do
        # shellcheck disable=SC2012 # names are ours: client.ID
        [ "$(ls "$work"/t3/client.* 2>/dev/null | wc -l)" = 12 ] && break
        sleep 0.1
    done
    sleep 2
    # the bridge's end of node 2's cable: node 2 loses carrier, as with a
    # pulled cable, and keeps its addresses, routes and neighbours (taking
    # veth2 itself down would delete the testbed's routing set-up)
    echo "link: node 2 down at $(date +%T)"
    ip link set vbr2 down; sleep 8; ip link set vbr2 up
    echo "link: node 2 up at $(date +%T)"
) &
flap=$!
# paced so that traffic flows for about 20 s, across the outage
if run_clients "$work/t3" "--rounds=40 --size=16384 --retry --pace-ms=20"; then
    retried=$(grep -ho '[0-9]* failed and retried' "$work"/t3/out.* | awk '{s += $1} END {print s + 0}')
    if [ "$retried" -gt 0 ]; then
        pass "link down 8 s: $retried ops reported failed and retried, all data verified after recovery"
    else
        fail "link down: no op was reported failed (did the link go down during traffic?)"
    fi
else
    fail "link down test"; grep -h FAILED "$work"/t3/out.* | head -5
fi
wait $flap
reconnects=$(agent_get 1 '.data_path.peers | map(.reconnects) | add // 0')
if [ "$reconnects" -ge 1 ]; then
    pass "node 1 agent reconnected to node 2 ($reconnects reconnects)"
else
    fail "node 1 agent shows no reconnect"
fi
# benchmark, not a test: what the agent's idle sleep costs
on 1 "$build/test/gtest/integration/rvt_wakeup_bench" --iterations=200 \
    --pause-ms=20 || fail "wake-up benchmark did not run"
for n in 1 2 3; do
    text_of "$n" | sed "s/^/[node$n status] /"
done
# what the agents said about their connections
for n in 1 2 3; do
    grep -E 'connected|lost|failed|error' "$work/rvtd.$n.log" | tail -n 12 |
        sed "s/^/[rvtd $n] /"
done
finish traffic
