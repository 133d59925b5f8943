#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the testbed guest (3 nodes): a hostile host floods one agent's
# handshake UD QP while two nodes trade verified traffic, to show that
# the agent's bounded intake keeps its peers and clients served
# (docs/reliability.md, "Hostile input" and "A flood on the handshake UD
# QP"). Agents on nodes 1 and 2 (--auth=auto: MUNGE, which the testbed
# runs on every node), keepalives every second, so an agent that stops
# answering for 2 s loses its peer. Node 3 runs no agent: it runs
# test/testbed/rvt_ud_flood against node 1's agent's UD QP.
#
# Phases, in one boot: no flood, then each flood mode in turn (garbage;
# the right shape with another job's key and a made-up credential;
# another job's real MUNGE credentials, freshly minted; replays of one
# valid datagram of this job; requests that claim another UD QPN than
# the QP that sends them), then no flood again. In each phase:
# FLOOD_IDLE seconds of flood on idle connections (keepalives only),
# then 2 clients per node on nodes 1 and 2 trade writes with immediate
# and AMs (test/gtest/integration/rvt_traffic_client, no --retry: a
# failed op fails the phase), then the flood stops.
#
# Then the host-hold attack (always run): a user on node 3 sends
# wrong-key datagrams to node 1's agent from their own UD QP, which the
# agent's sender gate holds (agent/peers/sender_gate.h), and while it is
# held a new agent of the job starts on that same node and a fifth client
# on it trades with the four: the hold is the flooder's QP's, not the
# host's, so the new agent connects and every op completes. Beside it the
# same join with no flood ("node 3 joins"), for the figures. Each join is
# a new agent (a new instance), so the second is also a restarted peer.
#
# Checks per phase (PASS/FAIL): the flood ran (the flooder's success
# line, datagrams sent, exit status 0); node 1's handshake counters moved
# as the mode must move them, and with no flood counted no refusal
# (verdicts.sh, handshake_verdict); every op completed and verified; no
# peer lost between nodes 1 and 2 (both agents: connected, no reconnect,
# no QP error in the phase); agent 1's CPU under CPU_BOUND CPU-seconds a
# second; agent 1's log grew by under LOG_BOUND bytes. Then a table of the
# figures beside each other. Timings are printed, never judged.
#
# Usage: flood-guest.sh BUILD_DIR   (environment: RVT_FLOOD_RVTD1, an
# rvtd for node 1 instead of the build's; FLOOD_MODES, comma-separated;
# FLOOD_IDLE, FLOOD_ROUNDS)
# shellcheck disable=SC2016 # jq filters and commands for `on`: single quotes on purpose
set -u
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=test/testbed/verdicts.sh
. "$(dirname "$0")/verdicts.sh"
build=${1:?usage: flood-guest.sh BUILD_DIR}
rvtd=$build/src/uct/ib/rvt/tools/rvtd
rvtd1=${RVT_FLOOD_RVTD1:-$rvtd}
# shellcheck disable=SC2034 # lib.sh's agent helpers read it
rvt_status=$build/src/uct/ib/rvt/tools/rvt-status
client=$build/test/gtest/integration/rvt_traffic_client
flood=$build/test/testbed/rvt_ud_flood
FLOOD_IDLE=${FLOOD_IDLE:-4}
FLOOD_ROUNDS=${FLOOD_ROUNDS:-40}
FLOOD_MODES=${FLOOD_MODES:-garbage,wrong-key,other-job,replay,forged}
# the bounds: a flood may take a share of the agent's core, never all of
# it (the agent's loop at its budget: 16 datagrams a pass), and the log
# gets a line at the 1st, 2nd, 4th, ... event of a kind: tens of lines
CPU_BOUND=${CPU_BOUND:-0.75}
LOG_BOUND=${LOG_BOUND:-16384}
export RVT_JOB_KEY=flood.$$
work=$(mktemp -d "$PWD/$build/flood.XXXXXX")
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    local p
    for p in $(jobs -p); do pkill -TERM -P "$p" 2>/dev/null; done
    wait
    rm -rf "$work"
}
trap cleanup EXIT

for n in 1 2; do
    bin=$rvtd
    [ "$n" = 1 ] && bin=$rvtd1
    on "$n" bash -c "exec $bin --device=\$RXE_DEV --linger=0 \
        --keepalive-ms=1000 --reconnect-ms=500 --give-up-ms=60000" \
        >"$work/rvtd.$n.log" 2>&1 &
done
for n in 1 2; do
    wait_agent "$n" 20 || { fail "rvtd on node $n does not answer"; finish flood; }
done
[ "$rvtd1" = "$rvtd" ] || echo "node 1's agent: $rvtd1"
for n in 1 2; do
    if auth=$(agent_get "$n" '.data_path.auth') && [[ $auth == munge* ]]; then
        pass "node $n agent authenticates its peers with MUNGE ($auth)"
    else
        fail "node $n agent: auth '${auth:-?}', expected munge (the testbed runs munged)"
    fi
done
gid1=$(agent_get 1 .data_path.gid)
qpn1=$(agent_get 1 .data_path.ud_qpn)
# its Q_Key: the flooder is a user who knows the agent's address (a
# process of a job that talks to it has it); with another the device
# drops every datagram before the agent sees one
qkey1=$(agent_get 1 .data_path.ud_qkey)
k=$(agent_get 1 .data_path.num_qps)
am=$(agent_get 1 .data_path.am_size)
gid2=$(agent_get 2 .data_path.gid)
echo "target: node 1's agent, GID $gid1, UD QPN $qpn1, Q_Key $qkey1 (K $k, AM size $am)"

# cpu_of N: node N's agent's CPU time so far, in clock ticks; "?" when
# its process is not found (then the CPU check fails)
cpu_of() {
    local st p
    p=$(agent_pids "$1" | head -n 1)
    if [ -n "$p" ] && read -r -a st <"/proc/$p/stat" 2>/dev/null; then
        echo $((st[13] + st[14]))
    else
        echo '?'
    fi
}

# per_second BEFORE AFTER SECONDS: clock ticks between two cpu_of
# readings as CPU-seconds a second, "?" when either is unknown
per_second() {
    if [ "$1" = '?' ] || [ "$2" = '?' ]; then
        echo '?'
        return
    fi
    awk -v a="$1" -v b="$2" -v s="$3" -v hz="$(getconf CLK_TCK)" \
        'BEGIN { printf "%.3f", (b - a) / hz / s }'
}

# guest_ticks: the guest's busy and softirq CPU time so far, in clock
# ticks, every vCPU's (every node, the flooder included): "busy softirq"
guest_ticks() {
    awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $8 }' /proc/stat
}

# link_of N GID: node N's agent's peer at GID as "state reconnects
# qp_errors" (nothing when it has none)
link_of() {
    agent_get "$1" '[.data_path.peers[] | select(.gid == $g)][0]
        | "\(.state) \(.reconnects) \(.qp_errors)"' --arg g "$2"
}

# handshake_of N: node N's agent's handshake counters, one line, in the
# order of verdicts.sh's hs_fields
handshake_of() {
    agent_get "$1" '.data_path.handshake as $h
        | [$f[] | $h[.] // 0 | tostring] | join(" ")' \
        --argjson f "$(printf '%s\n' "${hs_fields[@]}" | jq -R . | jq -s -c .)"
}

# phase NAME MODE [join]: one phase (MODE none: no flood); with `join`,
# after the idle flood an agent of the job starts on node 3 and a fifth
# client runs there, and node 3's agent must connect to node 1's; appends
# a row to $work/rows
phase() {
    local name=$1 mode=$2 join=${3:-} dir=$work/$1 fpid='' frc='' pids=() n r id rc=0 p
    local clients=4 a3='' gid3=''
    mkdir -p "$dir"
    section "$name"
    local hs0 log0 c10 c20 g0 t0 t1 t_end
    hs0=$(handshake_of 1)
    g0=$(guest_ticks)
    log0=$(stat -c %s "$work/rvtd.1.log")
    c10=$(cpu_of 1)
    c20=$(cpu_of 2)
    t0=$(date +%s.%N)
    if [ "$mode" != none ]; then
        on 3 bash -c "exec $flood --device=\$RXE_DEV --to-gid=$gid1 \
            --to-qpn=$qpn1 --to-qkey=$qkey1 --mode=$mode --num-qps=$k --am-size=$am \
            --seconds=600" >"$dir/flood.out" 2>&1 &
        fpid=$!
    fi
    sleep "$FLOOD_IDLE"
    if [ -n "$join" ]; then
        clients=5
        on 3 bash -c "exec $rvtd --device=\$RXE_DEV --linger=600 \
            --keepalive-ms=1000 --reconnect-ms=500 --give-up-ms=60000" \
            >"$dir/rvtd.3.log" 2>&1 &
        a3=$!
        if wait_agent 3 20; then
            gid3=$(agent_get 3 .data_path.gid)
        else
            fail "$name: node 3's new agent does not answer: $(tail -n 3 "$dir/rvtd.3.log")"
        fi
    fi
    local tt0
    tt0=$(date +%s.%N)
    for n in 1 2; do
        for r in 0 1; do
            id=$(((n - 1) * 2 + r))
            on "$n" "$client" --dir="$dir" --id=$id --clients=$clients \
                --rounds="$FLOOD_ROUNDS" --size=16384 >"$dir/out.$id" 2>&1 &
            pids+=($!)
        done
    done
    if [ -n "$join" ]; then
        on 3 "$client" --dir="$dir" --id=4 --clients=$clients \
            --rounds="$FLOOD_ROUNDS" --size=16384 >"$dir/out.4" 2>&1 &
        pids+=($!)
    fi
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    t1=$(date +%s.%N)
    sleep 2
    # the flooder's exit status: `on` exits with its command's (nsenter
    # execs the command), and the flooder exits 0 after SIGTERM, once it
    # has printed its line; pkill finds nothing when it had ended already
    if [ -n "$fpid" ]; then
        pkill -TERM -P "$fpid"
        wait "$fpid"
        frc=$?
    fi
    t_end=$(date +%s.%N)
    local secs traffic_s ops cpu1 cpu2 logb hs1 flood_line='' why
    secs=$(echo "$t_end - $t0" | bc)
    traffic_s=$(printf '%.1f' "$(echo "$t1 - $tt0" | bc)")
    local guest
    guest=$(awk -v a="$g0" -v b="$(guest_ticks)" -v s="$secs" -v hz="$(getconf CLK_TCK)" \
        'BEGIN { split(a, x, " "); split(b, y, " ")
            printf "%.2f/%.2f", (y[1] - x[1]) / hz / s, (y[2] - x[2]) / hz / s }')
    ops=$(sed -n 's/^OK .*: \([0-9]*\) ops completed.*/\1/p' "$dir"/out.* |
        awk '{s += $1} END {print s + 0}')
    cpu1=$(per_second "$c10" "$(cpu_of 1)" "$secs")
    cpu2=$(per_second "$c20" "$(cpu_of 2)" "$secs")
    logb=$(($(stat -c %s "$work/rvtd.1.log") - log0))
    hs1=$(handshake_of 1)
    # the flood ran only if the flooder says how much it sent, and ended
    # well: its own error lines start with "rvt_ud_flood:" too
    if [ "$mode" != none ]; then
        if flood_line=$(flood_ran "$mode" "$frc" "$(cat "$dir/flood.out" 2>/dev/null)"); then
            pass "$name: the flood ran: $flood_line"
        else
            fail "$name: the flood did not run: $flood_line"
            flood_line=''
        fi
    fi
    # and node 1's agent saw it, as the mode's datagrams are counted; in a
    # phase with no flood, it refused nothing
    if why=$(handshake_verdict "$mode" "$hs0" "$hs1"); then
        pass "$name: node 1's handshake counters: $why"
    else
        fail "$name: node 1's handshake counters: $why"
    fi

    if [ $rc = 0 ]; then
        pass "$name: every op completed and verified ($ops ops in $traffic_s s)"
    else
        fail "$name: traffic failed"
        grep -h -v '^OK' "$dir"/out.* | head -5
    fi
    # no peer lost: each agent's link to the other connected, never
    # remade, no QP error (the baseline phase makes the link: its
    # connection is the first, no reconnect)
    local lost=no pair g r0 q0 s q
    for pair in "1 $gid2 $l12_0" "2 $gid1 $l21_0"; do
        read -r n g _ r0 q0 <<<"$pair"
        read -r s r q <<<"$(link_of "$n" "$g")"
        if [ "${s:-none}" != connected ] || [ "${r:-0}" != "${r0:-0}" ] ||
            [ "${q:-0}" != "${q0:-0}" ]; then
            lost=yes
            echo "  node $n's peer $g: ${s:-none}, reconnects ${r0:-0} -> ${r:-?}, QP errors ${q0:-0} -> ${q:-?}"
        fi
    done
    l12_0=$(link_of 1 "$gid2")
    l21_0=$(link_of 2 "$gid1")
    if [ $lost = no ]; then
        pass "$name: no peer lost (nodes 1 and 2 connected throughout: $l12_0 / $l21_0)"
    else
        fail "$name: a peer was lost between nodes 1 and 2"
    fi
    # the new agent on node 3 reached node 1's, each side connected (its
    # traffic above completing is the other half), and then it goes
    if [ -n "$join" ]; then
        local l31='' l13=''
        # (node 1 may still hold the record of node 3's agent of the
        # phase before, on its way out: any of its records at that GID
        # that is connected will do)
        [ -n "$gid3" ] && l31=$(link_of 3 "$gid1") &&
            l13=$(agent_get 1 '[.data_path.peers[] | select(.gid == $g)
                | .state] | join(",")' --arg g "$gid3")
        if [ "${l31%% *}" = connected ] && [[ ,$l13, == *,connected,* ]]; then
            pass "$name: node 3's new agent and node 1's connected ($l31 / $l13)"
        else
            fail "$name: node 3's new agent and node 1's: '${l31:-none}' / '${l13:-none}', expected connected"
        fi
        for p in $(agent_pids 3); do kill "$p"; done
        wait "$a3"
    fi
    if [ "$cpu1" != '?' ] &&
        awk -v c="$cpu1" -v b="$CPU_BOUND" 'BEGIN { exit !(c <= b) }'; then
        pass "$name: agent 1's CPU $cpu1 CPU-s/s (bound $CPU_BOUND)"
    else
        fail "$name: agent 1's CPU $cpu1 CPU-s/s, over the bound $CPU_BOUND"
    fi
    if [ "$logb" -le "$LOG_BOUND" ]; then
        pass "$name: agent 1's log grew $logb bytes (bound $LOG_BOUND)"
    else
        fail "$name: agent 1's log grew $logb bytes, over the bound $LOG_BOUND"
    fi
    # the row: the flood's rate, traffic, CPU, log, handshake deltas
    local rate=- d
    [ -n "$flood_line" ] && rate=$(sed -n 's/.*: \([0-9]*\) datagrams in .* (\([0-9]*\)\/s).*/\1 (\2\/s)/p' <<<"$flood_line")
    d=$(awk -v a="$hs0" -v b="$hs1" 'BEGIN { n = split(a, x, " "); split(b, y, " ")
        for (i = 1; i <= n; i++) printf "%s%d", (i > 1 ? "|" : ""), y[i] - x[i] }')
    echo "$name|$rate|$traffic_s|$ops|$cpu1|$cpu2|$guest|$logb|$d" >>"$work/rows"
}

l12_0=
l21_0=
phase "no flood" none
for m in ${FLOOD_MODES//,/ }; do
    phase "flood $m" "$m"
done
phase "no flood again" none
phase "node 3 joins" none join
phase "node 3 joins, its user holding a QP" wrong-key join

section "figures (node 1's agent; handshake counters are the phase's)"
{
    printf 'phase|flood sent (rate)|traffic s|ops|agent1 CPU-s/s|agent2 CPU-s/s|guest busy/softirq CPU-s/s|log bytes'
    printf '|%s' "${hs_fields[@]}"
    echo
    cat "$work/rows"
} | tr ' ' '~' | tr '|' ' ' | column -t | tr '~' ' '
echo
echo "what node 1's agent logged:"
sed 's/^/  | /' "$work/rvtd.1.log" | tail -n 40
finish flood
