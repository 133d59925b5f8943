#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the testbed guest (3 nodes): the chaos run (docs/reliability.md,
# "Chaos"). A driver injects faults at random, seeded (the seed is
# printed: the same seed makes the same choices, though not at the same
# instants), while
#
#   A. 3 nodes x 4 processes of rvt_chaos_client trade rounds (writes
#      with immediate and AMs with every other process, each one verified
#      on arrival: test/gtest/integration/chaos_runner.h says how) while
#      the driver injects faults for TRAFFIC_SECONDS and until each kind
#      has come once (a slow guest can reach the end before its turn: for
#      at most TRAFFIC_SECONDS more), then stops them (a file they look
#      for). The faults come one at a time, 1-3 s apart,
#      their kinds in shuffled turns (each kind once in every 3):
#        kill  SIGKILL a traffic process that has run 5 s or more, and
#              start its replacement (same ID, next incarnation, a new
#              client index on its agent, a new card)
#        link  a node's link down for 2-5 s, then up (the bridge's end of
#              its cable, as in traffic-guest.sh)
#        stop  SIGSTOP a traffic process, or 1 time in 5 an agent, for
#              2-5 s, then SIGCONT
#      These agents keep alive every second (lost after 2 s more), so
#      every outage breaks the connections it cuts: ops fail, and QPs are
#      rebuilt; their RC timeout is rvtd --qp-timeout=QP_TIMEOUT
#      (chaos.sh's --qp-timeout: 18 unless told, 1.07 s a try).
#   B. Open MPI's rvt_mpi_check (pingpong, bandwidth, alltoall and
#      allreduce, every word verified), 8 ranks on node1 and node2 with
#      UCX_TLS=rvt,sm,self as mpi-guest.sh runs it, job after job while
#      the driver injects link and stop faults only (on ranks, or 1 time
#      in 5 an agent) for MPI_SECONDS, on fresh agents with rvtd's default
#      timeouts, which a 2-5 s outage does not exhaust. Then the kill
#      case: a rank SIGKILLed mid-job, which aborts its job by design.
#
# Checks:
#   - A: no arrival corrupt or misdirected, in any process, killed ones
#     included (up to their death); every op completed, ok or failed (the
#     failures reported to the sender, counted by kind), none left without
#     a completion; at the end each process's fin to each other one: every
#     op that completed ok at its sender had arrived and been verified,
#     none twice. And the faults did bite: ops failed.
#   - A: the agents keep answering their sockets while busy: status
#     requests every 2 s during the traffic, each answered within
#     rvt-status's 10 s, the time a process's attach waits (replacements
#     attach to busy agents), and every process attached.
#   - Nothing hangs: every traffic process runs under `timeout`: its
#     deadline (the latest stop) plus more than its own bounded end
#     (drain, fins); none may reach it. Every MPI job has T_JOB seconds.
#     The whole run has the testbed's -t.
#   - After A, a clean round (12 plain traffic clients, any failure fails)
#     shows that every connection works again; then each agent, once it
#     has settled (lib.sh's agent_settle) and its peers are connected, has
#     the fds, MRs, QPs and CQs of its baseline (taken the same way after
#     a clean warm-up round before the chaos), and its resident memory is
#     at most RSS_BOUND_KIB above it (verdicts.sh: resources_back,
#     rss_within; a figure that could not be read, at the baseline or
#     after, fails). The same agent process throughout.
#   - B: every job under faults completed and verified every word; the job
#     with a rank killed exits with an error (not the timeout) within
#     T_KILLED s of the kill; the next job verifies; agents 1 and 2 are
#     then back to their baseline as above (taken after a clean traffic
#     round between them, which connects them as a job would).
#
# Why the QPs must be back exactly, when a link flap or a stopped agent
# makes the agents rebuild their connections: a reconnection replaces a
# peer's K RC QPs (the old ones destroyed once their flush has drained)
# and never adds to them, and a peer given up holds none. So once every
# peer is connected again, which the clean round proves, an agent's device
# holds K RC QPs per remote node, its K loopback QPs, its UD QP and the
# device's own QP1, exactly as at the baseline (4 + 4 + 4 + 1 + 1 = 14
# with 3 nodes): any other count is a leak or a lost connection. The same
# holds for CQs (the agent's own), MRs (its own; its clients', live or
# dead, all deregistered once it has settled) and fds. Resident memory is
# the one figure given a bound: the allocator need not hand back what the
# agent held for a stopped client's backlog.
#
# Prints PASS:/FAIL: lines, the faults and figures, and exits 1 if any
# check failed; the work directory (every process's output, the agents'
# logs) is kept in BUILD_DIR when one did.
# Usage: chaos-guest.sh BUILD_DIR TRAFFIC_SECONDS MPI_SECONDS SEED
#            QP_TIMEOUT
# shellcheck disable=SC2016 # jq filters and commands for `on`: single quotes on purpose
set -u
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=test/testbed/verdicts.sh
. "$(dirname "$0")/verdicts.sh"
usage="usage: chaos-guest.sh BUILD_DIR TRAFFIC_SECONDS MPI_SECONDS SEED QP_TIMEOUT"
build=${1:?$usage}
traffic_secs=${2:?$usage}
mpi_secs=${3:?$usage}
seed=${4:?$usage}
qp_timeout=${5:?$usage}
case $build in /*) ;; *) build=$PWD/$build ;; esac
K=4
CLIENTS=12          # 3 nodes x 4
RSS_BOUND_KIB=4096  # what an agent's memory may grow by over the run
T_END=240           # a traffic process's time after the deadline (its own
                    # bounds: drain 60 s, fins 60 s, others' fins 60 s)
T_JOB=240           # one MPI job (about 12 s alone, 25 s under faults)
T_KILLED=60         # a job with a rank killed must end within this
MPI_ARGS=${RVT_CHAOS_MPI_ARGS:---max-size=65536}
rvtd=$build/src/uct/ib/rvt/tools/rvtd
rvt_status=$build/src/uct/ib/rvt/tools/rvt-status
client=$build/test/gtest/integration/rvt_traffic_client
chaos_client=$build/test/gtest/integration/rvt_chaos_client
module=$build/src/uct/ib/rvt/uct/.libs/libuct_rvt.so
mpi_prog=$build/test/mpi/rvt_mpi_check
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shared by all nodes (each node has its own /tmp)
work=$(mktemp -d "$build/chaos.XXXXXX") || exit 1
t_start=$SECONDS # for lib.sh's section

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    local n p
    touch "$work/stop"
    # nothing left stopped or cut off, whatever happened
    for n in 1 2 3; do ip link set "vbr$n" up 2>/dev/null; done
    # (a traffic process's pid is in its pid file: its name is longer
    # than the 15 characters pgrep -x sees)
    for p in $(pgrep -x rvtd) $(pgrep -x rvt_mpi_check) $(cat "$work"/a/pid.* 2>/dev/null); do
        kill -CONT "$p" 2>/dev/null
    done
    for n in "${!agent_pid[@]}"; do kill -TERM "${agent_pid[$n]}" 2>/dev/null; done
    # shellcheck disable=SC2046 # one word per job
    kill $(jobs -p) 2>/dev/null
    # shellcheck disable=SC2046
    wait_bounded 30 $(jobs -p)
    if [ "$checks_failed" = 0 ]; then
        rm -rf "$work"
    else
        echo "the run's outputs and the agents' logs are kept in $work"
    fi
}
trap cleanup EXIT
declare -A agent_pid agent_wrapper

# agent_state N: node N's agent's connections (state, reconnects, what is
# posted, the last error) and what its device did twice or too late
agent_state() {
    echo "  node $1 agent's peers: $(agent_get "$1" '[.data_path.peers[] | select(.loopback | not)
        | "\(.index) \(.state) (QPs \(.qps), \(.reconnects) reconnects, \(.posted) posted, by lane \(.in_flight_by_lane)\(if .last_error != "" then ", last error: " + .last_error else "" end))"] | join("; ")')"
    echo "  node $1 agent's device faults: $(agent_get "$1" '.data_path | "\(.receive_pool.extra_completions) receive completions for a buffer not posted, \(.receive_pool.refused_reposts) double reposts skipped, \(.late_completions) completions for ops given up on"')"
    device_counters "$1"
}

# device_counters N: what node N's rxe device counted since boot (its
# hw_counters): retransmissions it started (completer_retry_err) and the
# requests it received again or out of order. A bad arrival in a run where
# these are 0 is not a retransmission's doing.
device_counters() {
    local d=/sys/class/infiniband/rxe$1/ports/1/hw_counters c out=
    for c in completer_retry_err rcvd_seq_err rcvd_rnr_err duplicate_request \
             out_of_seq_request send_rnr_err retry_exceeded_err send_err; do
        out+=" $c=$(cat "$d/$c" 2>/dev/null || echo '?')"
    done
    echo "  node $1 device rxe$1 since boot:$out"
}

# wait_bounded SECONDS PID...: wait for the PIDs (children) to end, SECONDS
# at most: a process stuck in the kernel (a wedged device) ends with no
# signal, and a plain `wait` would hold the run until the testbed's -t
wait_bounded() {
    local tries=$(($1 * 10)) p
    shift
    while [ "$tries" -gt 0 ]; do
        for p in "$@"; do
            kill -0 "$p" 2>/dev/null && break
            p=
        done
        [ -z "${p:-}" ] && break
        sleep 0.1
        tries=$((tries - 1))
    done
    for p in "$@"; do
        if kill -0 "$p" 2>/dev/null; then
            echo "  pid $p did not end: left behind"
            disown "$p" 2>/dev/null
        else
            wait "$p" 2>/dev/null
        fi
    done
}

for f in "$rvtd" "$rvt_status" "$client" "$chaos_client" "$module" "$mpi_prog"; do
    [ -e "$f" ] || { fail "$f not built (make check)"; finish chaos; }
done

# the run's random choices: rnd N sets r to 0..N-1 (a function, not $(...),
# whose subshell would not advance the generator)
RANDOM=$seed
rnd() { r=$((RANDOM % $1)); }
event() { echo "  [+$((SECONDS - phase_t0)) s] $*"; }
# verdict STATUS DESCRIPTION: a check of a status already taken (for
# conditions of several tests: `[ a ] && [ b ]; verdict $? "..."`)
verdict() {
    local rc=$1
    shift
    if [ "$rc" = 0 ]; then pass "$*"; else fail "$*"; fi
}

# start_agents NODE... : one rvtd per node with $agent_opts, K QPs, never
# lingering away; agent_pid[N] is its pid
start_agents() {
    local n
    for n in "$@"; do
        # shellcheck disable=SC2086 # agent_opts: options, split on purpose
        on "$n" bash -c "exec $rvtd --device=\$RXE_DEV --num-qps=$K --linger=0 $agent_opts" \
            >>"$work/rvtd.$n.log" 2>&1 &
        agent_wrapper[$n]=$!
    done
    for n in "$@"; do
        wait_agent "$n" 20 || { fail "rvtd on node $n does not answer"; finish chaos; }
        agent_pid[$n]=$(agent_pids "$n")
    done
}

# stop_agents NODE...: SIGTERM, and wait (10 s, then SIGKILL)
stop_agents() {
    local n _
    for n in "$@"; do kill -TERM "${agent_pid[$n]}" 2>/dev/null; done
    for n in "$@"; do
        for _ in $(seq 100); do
            kill -0 "${agent_pid[$n]}" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "${agent_pid[$n]}" 2>/dev/null
        wait_bounded 10 "${agent_wrapper[$n]}"
        unset "agent_pid[$n]"
    done
}

# connected N [SECONDS]: wait (default 30 s) until every peer of node N's
# agent is connected
connected() {
    local tries=$((${2:-30} * 10))
    while [ "$tries" -gt 0 ]; do
        agent_get "$1" '[.data_path.peers[] | .state == "connected"] | all' \
            >/dev/null && return 0
        sleep 0.1
        tries=$((tries - 1))
    done
    return 1
}

# baseline_take NODE...: settle, and base[N] = "rss fds mrs qps cqs"
declare -A base
baseline_take() {
    local n rss fds mrs qps cqs attached
    for n in "$@"; do
        if ! agent_settle "$n" 30 || ! connected "$n"; then
            fail "node $n's agent did not settle before its baseline"
        fi
        read -r rss fds mrs qps cqs attached < <(agent_sample "$n")
        base[$n]="$rss $fds $mrs $qps $cqs"
        echo "  node $n agent (pid ${agent_pid[$n]}) baseline: rss $rss KiB, fds $fds, MRs $mrs, QPs $qps, CQs $cqs ($attached attached)"
    done
}

# baseline_check WHAT NODE...: each agent settled, connected, the same
# process, and back to its baseline (RSS within the bound); a figure
# agent_sample could not read ("?", then or now) fails, naming it
baseline_check() {
    local what=$1 n rss fds mrs qps cqs attached brss bfds bmrs bqps bcqs now why
    shift
    for n in "$@"; do
        agent_settle "$n" 30
        connected "$n"
        read -r rss fds mrs qps cqs attached < <(agent_sample "$n")
        read -r brss bfds bmrs bqps bcqs <<<"${base[$n]}"
        now=$(agent_pids "$n")
        echo "  node $n agent: rss $brss -> $rss KiB, fds $bfds -> $fds, MRs $bmrs -> $mrs, QPs $bqps -> $qps, CQs $bcqs -> $cqs, $attached attached"
        [ "$now" = "${agent_pid[$n]}" ] && [ "$attached" = 0 ]
        verdict $? "$what: node $n's agent is the one started (pid ${agent_pid[$n]}, now '${now//$'\n'/ }'), settled with no client attached ($attached)"
        why=$(resources_back "$bfds $bmrs $bqps $bcqs" "$fds $mrs $qps $cqs")
        verdict $? "$what: node $n's agent's fds, MRs, QPs and CQs back to its baseline ($why)"
        why=$(rss_within "$brss" "$rss" "$RSS_BOUND_KIB")
        verdict $? "$what: node $n's agent's resident memory within $RSS_BOUND_KIB KiB of its baseline ($why)"
    done
}

# plain_round DIR NODE...: plain traffic clients (no fault tolerated),
# one on each NODE given, ids from 0, each trading verified rounds with
# all the others
plain_round() {
    local dir=$1 pids=() id=0 n p rc=0
    shift
    mkdir -p "$dir"
    for n in "$@"; do
        on "$n" timeout 180 "$client" --dir="$dir" --id="$id" --clients=$# \
            --rounds=2 --size=16384 >"$dir/out.$id" 2>&1 &
        pids+=($!)
        id=$((id + 1))
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    [ $rc = 0 ] || grep -h FAILED "$dir"/out.* | head -5 | sed 's/^/    /'
    return $rc
}

# ---- A: traffic --------------------------------------------------------
section "chaos A: $CLIENTS traffic processes on 3 nodes, seed $seed: warm-up and baseline"
export RVT_JOB_KEY=chaos.$$
agent_opts="--keepalive-ms=1000 --reconnect-ms=500 --qp-timeout=$qp_timeout"
start_agents 1 2 3
phase_t0=$SECONDS
all_nodes="1 1 1 1 2 2 2 2 3 3 3 3" # 4 processes on each
# shellcheck disable=SC2086 # all_nodes: words on purpose
if plain_round "$work/warmup" $all_nodes; then
    pass "warm-up round: 12 clients, every write and AM verified ($((SECONDS - phase_t0)) s)"
else
    fail "warm-up round"
fi
baseline_take 1 2 3

mkdir -p "$work/a"
# The processes run until the driver's stop ($work/a/stop): TRAFFIC_SECONDS
# of faults, twice that at most, from the moment all have published their cards (T_START at
# most), then until the last replacement has published its own and the
# others have had time to read it. Their deadline (--until) is only the
# bound on that, in case the driver never said stop.
T_START=60
deadline=$(($(date +%s) + T_START + 2 * traffic_secs + 120))
declare -a inc started wrapper
declare -A fate # "ID.INC" -> killed or final
# start_client ID INC: a chaos process; its pid goes to a file (the shell
# in front of it execs it), its bound is the deadline plus T_END
start_client() {
    local id=$1 n=$(($1 / 4 + 1))
    inc[id]=$2
    started[id]=$SECONDS
    fate[$id.$2]=final
    rm -f "$work/a/pid.$id.$2"
    timeout $((deadline - $(date +%s) + T_END)) on "$n" bash -c 'echo $$ >"$1"; shift; exec "$@"' \
        _ "$work/a/pid.$id.$2" "$chaos_client" --dir="$work/a" --id="$id" \
        --clients=$CLIENTS --until="$deadline" --incarnation="$2" --size=16384 \
        --window=4 >"$work/a/out.$id.$2" 2>&1 &
    wrapper[id]=$!
}
# client_pid ID: the pid of ID's current process (it may still be starting)
client_pid() {
    local f=$work/a/pid.$1.${inc[$1]} _
    for _ in $(seq 50); do
        [ -s "$f" ] && { cat "$f"; return 0; }
        sleep 0.1
    done
    return 1
}
# cards_out: every ID's current process has published its card
cards_out() {
    local id
    for id in "${!inc[@]}"; do
        [ -e "$work/a/card.$id.${inc[id]}" ] || return 1
    done
}
for id in $(seq 0 $((CLIENTS - 1))); do start_client "$id" 0; done
for _ in $(seq $((T_START * 10))); do
    cards_out && break
    sleep 0.1
done
# The agents' sockets while they are busy with the traffic: a status
# request to each every 2 s until the stop ("NODE STATUS MS STOPPED"
# lines). rvt-status waits 10 s for the answer, as a process's attach
# does: a replacement attaches to a busy agent. A request that met its
# agent stopped by the fault driver (SIGSTOP, up to 5 s) is STOPPED=1:
# it measures the fault, not the agent, and is left out of the verdict.
(
    while [ ! -e "$work/a/stop" ]; do
        for n in 1 2 3; do
            stopped=0
            [ ! -e "$work/a/stopped.$n" ] || stopped=1
            t0=$(date +%s%N)
            agent_json "$n" >/dev/null
            rc=$?
            [ ! -e "$work/a/stopped.$n" ] || stopped=1
            echo "$n $rc $((($(date +%s%N) - t0) / 1000000)) $stopped"
        done
        sleep 2
    done
) >"$work/a/probe" &
probe=$!

# the driver: faults for TRAFFIC_SECONDS (a fault starts before they are
# over)
declare -A faults=([kill]=0 [link]=0 [stop_client]=0 [stop_agent]=0)
declare -A exit_of # "ID.INC" -> exit status
bag=()
# next_kind KIND...: kind = the next of a shuffled turn of KIND...
next_kind() {
    local i j t
    if [ ${#bag[@]} = 0 ]; then
        bag=("$@")
        for ((i = ${#bag[@]} - 1; i > 0; i--)); do
            rnd $((i + 1)); j=$r
            t=${bag[i]}; bag[i]=${bag[j]}; bag[j]=$t
        done
    fi
    kind=${bag[0]}
    bag=("${bag[@]:1}")
}
fault_kill() {
    local cand=() id pid old
    for id in "${!inc[@]}"; do
        [ $((SECONDS - started[id])) -ge 5 ] && cand+=("$id")
    done
    [ ${#cand[@]} -gt 0 ] || return 1
    rnd ${#cand[@]}; id=${cand[r]}
    old=${inc[$id]}
    pid=$(client_pid "$id") || { event "kill: client $id.$old has no pid yet"; return 1; }
    kill -KILL "$pid"
    wait "${wrapper[$id]}"
    exit_of[$id.$old]=$?
    fate[$id.$old]=killed
    start_client "$id" $((old + 1))
    event "kill: client $id.$old (node $((id / 4 + 1)), pid $pid) SIGKILLed; $id.$((old + 1)) started"
    faults[kill]=$((faults[kill] + 1))
}
# fault_link NODES: one of NODES loses its link for 2-5 s
fault_link() {
    local n d
    rnd "$1"; n=$((r + 1))
    rnd 4; d=$((r + 2))
    event "link: node $n down for $d s"
    ip link set "vbr$n" down
    sleep "$d"
    ip link set "vbr$n" up
    faults[link]=$((faults[link] + 1))
}
# fault_stop PID WHAT [MARK]: SIGSTOP for 2-5 s, then SIGCONT; MARK (a
# file) exists while it is stopped
fault_stop() {
    local d
    rnd 4; d=$((r + 2))
    event "stop: $2 (pid $1) stopped for $d s"
    [ -z "${3:-}" ] || : >"$3"
    kill -STOP "$1"
    sleep "$d"
    kill -CONT "$1"
    [ -z "${3:-}" ] || rm -f "$3"
}

section "chaos A: faults for $traffic_secs s"
phase_t0=$SECONDS
faults_end=$((SECONDS + traffic_secs))
faults_last=$((SECONDS + 2 * traffic_secs))
# every_kind_came: a kill, a link flap and a stop (of a process or an
# agent) have each come at least once
every_kind_came() {
    [ "${faults[kill]}" -gt 0 ] && [ "${faults[link]}" -gt 0 ] &&
        [ $((faults[stop_client] + faults[stop_agent])) -gt 0 ]
}
# done_yet: the time is up, and each kind has come (or the extra time is
# up too: the verdict below says which kind did not come)
done_yet() {
    [ $SECONDS -ge $faults_end ] &&
        { [ $SECONDS -ge $faults_last ] || every_kind_came; }
}
while :; do
    rnd 3; sleep $((r + 1))
    ! done_yet || break
    next_kind kill link stop
    case $kind in
    kill) fault_kill || fault_link 3 ;;
    link) fault_link 3 ;;
    stop)
        rnd 5
        if [ "$r" = 0 ]; then
            rnd 3
            fault_stop "${agent_pid[$((r + 1))]}" "node $((r + 1))'s agent" \
                "$work/a/stopped.$((r + 1))"
            faults[stop_agent]=$((faults[stop_agent] + 1))
        else
            rnd $CLIENTS
            if pid=$(client_pid "$r"); then
                fault_stop "$pid" "client $r.${inc[$r]}"
                faults[stop_client]=$((faults[stop_client] + 1))
            fi
        fi
        ;;
    esac
done
event "faults over: ${faults[kill]} kills, ${faults[link]} link flaps, ${faults[stop_client]} processes and ${faults[stop_agent]} agents stopped"
# the stop, once the last replacement's card is out (60 s at most) and
# the others have read it (every second)
for _ in $(seq 600); do
    cards_out && break
    sleep 0.1
done
sleep 3
touch "$work/a/stop"
event "stop"
for id in "${!inc[@]}"; do
    wait "${wrapper[$id]}"
    exit_of[$id.${inc[$id]}]=$?
done
event "every process has ended"
wait "$probe"
# each agent's connections now (a peer not connected again is what a
# failed clean round below would be about)
for n in 1 2 3; do agent_state "$n"; done
section "chaos A: what the processes saw"

# the figures: each process's summary line (its last progress line for
# those killed: the same counts, up to then), "KEY=VALUE" words, read
# once into fig[ID.INC/KEY]
declare -A fig total
keys="ops_ok ops_failed failed_gone failed_flushed failed_retries failed_other writes_verified ams_verified controls_verified corrupt pairs_checked lost duplicate never_completed fins_missing"
for k in $keys; do total[$k]=0; done
hung=0 bad_exits=0 finals=0 killed=0 no_summary=0
printf '  %-7s %-6s %-5s %9s %7s %9s %9s %6s %7s\n' process fate exit ops_ok failed writes ams pairs corrupt
for key in $(printf '%s\n' "${!fate[@]}" | sort -t. -k1,1n -k2,2n); do
    out=$work/a/out.$key
    rc=${exit_of[$key]:-?}
    while read -r k v; do
        fig[$key/$k]=$v
    done < <(awk '/^(CHAOS|progress) / { line = $0 }
        END { n = split(line, w, " ")
              for (i = 1; i <= n; i++) if (split(w[i], kv, "=") == 2) print kv[1], kv[2] }' "$out")
    for k in $keys; do
        total[$k]=$((total[$k] + ${fig[$key/$k]:-0}))
    done
    if [ "${fate[$key]}" = final ]; then
        finals=$((finals + 1))
        grep -q '^CHAOS ' "$out" || no_summary=$((no_summary + 1))
        [ "$rc" = 0 ] || bad_exits=$((bad_exits + 1))
    else
        killed=$((killed + 1))
        # SIGKILL through on and timeout: 137
        [ "$rc" = 137 ] || bad_exits=$((bad_exits + 1))
    fi
    [ "$rc" = 124 ] && hung=$((hung + 1))
    # (a long run kills hundreds: the first 20 of them are shown)
    [ "${fate[$key]}" = final ] || [ "$killed" -le 20 ] || continue
    printf '  %-7s %-6s %-5s %9s %7s %9s %9s %6s %7s\n' "$key" "${fate[$key]}" "$rc" \
        "${fig[$key/ops_ok]:-}" "${fig[$key/ops_failed]:-}" "${fig[$key/writes_verified]:-}" \
        "${fig[$key/ams_verified]:-}" "${fig[$key/pairs_checked]:-}" "${fig[$key/corrupt]:-}"
done
bad_lines=$(cat "$work"/a/out.* | grep -c -E 'BAD ARRIVAL|LOST|DUPLICATE')
cat "$work"/a/out.* | grep -E 'BAD ARRIVAL|LOST|DUPLICATE|FAILED|timed out|failed: status' |
    head -n 10 | sed 's/^/    /'
echo "  in all: ${total[ops_ok]} ops ok, ${total[ops_failed]} failed (destination gone ${total[failed_gone]}, flushed ${total[failed_flushed]}, retries exceeded ${total[failed_retries]}, other ${total[failed_other]}; a killed process's up to its last progress line), ${total[writes_verified]} writes, ${total[ams_verified]} data AMs and ${total[controls_verified]} acks/pings/fins verified"

every_kind_came
verdict $? "faults injected: ${faults[kill]} kills, ${faults[link]} link flaps, ${faults[stop_client]} processes and ${faults[stop_agent]} agents stopped (seed $seed)"
[ "$bad_lines" = 0 ] && [ "${total[corrupt]}" = 0 ]
verdict $? "no arrival corrupt or misdirected: ${total[writes_verified]} writes and ${total[ams_verified]} AMs verified in $((finals + killed)) processes ($bad_lines bad, lost or duplicate lines; corrupt=${total[corrupt]})"
check "every op completed, ok or failed and reported to its sender: ${total[ops_ok]} ok, ${total[ops_failed]} failed, ${total[never_completed]} never completed" \
    [ "${total[never_completed]}" = 0 ]
check "the faults made ops fail (${total[ops_failed]}), and the senders were told" \
    [ "${total[ops_failed]}" -gt 0 ]
[ "${total[lost]}" = 0 ] && [ "${total[duplicate]}" = 0 ] && [ "${total[fins_missing]}" = 0 ] &&
    [ "${total[pairs_checked]}" = $((finals * (finals - 1))) ]
verdict $? "every op that completed ok arrived, once: ${total[pairs_checked]} of $((finals * (finals - 1))) sender-receiver pairs checked by fin, ${total[lost]} with a loss, ${total[duplicate]} with a duplicate, ${total[fins_missing]} fins missing"
[ "$hung" = 0 ] && [ "$no_summary" = 0 ]
verdict $? "nothing hung: all $((finals + killed)) processes ended before their timeout ($hung did not), the $finals last ones with a summary ($no_summary without), $killed killed"
# a replacement attaches while its agent is busy with the others' traffic
# (and the client library waits 10 s for the answer): what the agent said
attach_failed=$(grep -l 'client: FAILED: attach' "$work"/a/out.* 2>/dev/null | wc -l)
grep -h 'attach server: reply to client' "$work"/rvtd.*.log 2>/dev/null | head -n 5 | sed 's/^/    /'
check "every process, replacements included, attached to its agent in time ($attach_failed did not)" \
    [ "$attach_failed" = 0 ]
for n in 1 2 3; do
    read -r asked unanswered slowest stopped < <(awk -v n="$n" '
        $1 == n && $4 == 1 { s++ }
        $1 == n && $4 != 1 { k++; if ($2 != 0) u++; if ($3 > m) m = $3 }
        END { print k + 0, u + 0, m + 0, s + 0 }' "$work/a/probe")
    [ "$asked" -gt 0 ] && [ "$unanswered" = 0 ]
    verdict $? "node $n's agent answered its socket under the traffic: $((asked - unanswered)) of $asked status requests within rvt-status's 10 s (slowest $slowest ms, process start included; $stopped more met it stopped by a fault)"
done
check "every process ended as it should: the last ones exit 0, the killed ones by SIGKILL ($bad_exits did not)" \
    [ "$bad_exits" = 0 ]

section "chaos A: afterwards"
t0=$SECONDS
# shellcheck disable=SC2086
if plain_round "$work/after" $all_nodes; then
    pass "after the chaos, a clean round: 12 new clients, every write and AM verified, no op failed ($((SECONDS - t0)) s)"
else
    fail "after the chaos, a clean round failed"
fi
for n in 1 2 3; do
    echo "  node $n agent: $(agent_get "$n" '.data_path | "\(.peers | map(.reconnects) | add) reconnects, \(.clients_gone) clients gone, \(.mrs_cleaned) of their MRs deregistered, \(.pauses) pauses, \(.ops_parked) ops parked, \(.departed.ops_failed) ops failed for departed clients, \(.misrouted) misrouted"')"
done
baseline_check "after the traffic chaos" 1 2 3
stop_agents 1 2 3

# ---- B: MPI ------------------------------------------------------------
section "chaos B: MPI jobs (8 ranks, node1 and node2) for $mpi_secs s under link and stop faults"
export RVT_JOB_KEY=chaos-mpi.$$
agent_opts=""
start_agents 1 2
# Open MPI's options for the testbed (lib.sh), and UCX 1.13's way to load
# the module: LD_PRELOAD (it loads only its own modules)
mpi_options "$work/hosts" -x LD_PRELOAD="$module"
indent() { sed "s/^/    $1| /"; }
# mpi_job NAME: one job of the MPI program; job_rc, job_secs, and
# job_verdict: verified, corrupt (words differed), hung (its timeout) or
# failed (an error exit)
jobs_run=0
mpi_job() {
    local out=$work/$1.out t0=$SECONDS
    jobs_run=$((jobs_run + 1))
    # shellcheck disable=SC2086 # MPI_ARGS: options, split on purpose
    on 1 timeout $T_JOB mpirun "${mpirun_opts[@]}" -np 8 "$mpi_prog" $MPI_ARGS >"$out" 2>&1
    job_rc=$?
    job_secs=$((SECONDS - t0))
    if grep -qE 'words differed|MISMATCH' "$out"; then
        job_verdict=corrupt
    elif [ "$job_rc" = 124 ]; then
        job_verdict=hung
    elif [ "$job_rc" = 0 ] && grep -q '^OK: rvt_mpi_check' "$out"; then
        job_verdict=verified
    else
        job_verdict=failed
    fi
}
phase_t0=$SECONDS
# the agents' baseline once they have connected to each other: a plain
# traffic round between the two nodes (an MPI job would do the same, in
# 15 s rather than 3)
if plain_round "$work/b-warmup" 1 2; then
    pass "warm-up round: a client on node 1 and one on node 2, every write and AM verified"
else
    fail "warm-up round between nodes 1 and 2"
fi
baseline_take 1 2

# the driver, in the background: link flaps of node 1 or 2, and stops of
# a rank or (1 in 5) an agent, for MPI_SECONDS and until each kind has
# come once; its own generator, seeded from the run's seed. Jobs start
# one after the other until it is done; the last one ends without faults
# (a job under faults is mostly stalled: it moves in the gaps between
# them). A fault comes only while a job moves data: after MPI_Init (its
# table's header is out) and before its verdict. A job that starts while
# its node's link is down does fail, and rightly: UCX finds the device's
# port down, and no transport for pml ucx ("network device 'rxe2:1' is
# not available").
# in_data_phase [OUT]: the job writing OUT (default: the current one,
# $work/b.job) is between the two
in_data_phase() {
    local f=${1:-$work/chaos.$(cat "$work/b.job" 2>/dev/null).out}
    [ -f "$f" ] && grep -q 'ranks; pingpong' "$f" &&
        ! grep -qE '^(OK|FAIL): rvt_mpi_check' "$f"
}
rm -f "$work/stop" "$work/b.done"
mpi_end=$((SECONDS + mpi_secs))
(
    RANDOM=$((seed + 1))
    bag=()
    links=0 stops=0
    done_yet() { [ $SECONDS -ge $mpi_end ] && [ $links -gt 0 ] && [ $stops -gt 0 ]; }
    while :; do
        rnd 3; sleep $((r + 1))
        until in_data_phase || [ -e "$work/stop" ] || done_yet; do
            sleep 0.2
        done
        if [ -e "$work/stop" ] || done_yet; then
            break
        fi
        next_kind link stop
        if [ "$kind" = link ]; then
            fault_link 2
            echo link >>"$work/b.faults"
            links=$((links + 1))
            continue
        fi
        mapfile -t ranks < <(pgrep -x rvt_mpi_check)
        rnd 5
        if [ "$r" = 0 ] || [ ${#ranks[@]} = 0 ]; then
            rnd 2
            fault_stop "${agent_pid[$((r + 1))]}" "node $((r + 1))'s agent" \
                "$work/a/stopped.$((r + 1))"
            echo stop_agent >>"$work/b.faults"
        else
            rnd ${#ranks[@]}
            fault_stop "${ranks[r]}" "MPI rank process"
            echo stop_rank >>"$work/b.faults"
        fi
        stops=$((stops + 1))
    done
    touch "$work/b.done"
) &
driver=$!
chaos_jobs=0 chaos_verified=0 chaos_secs=""
# (bounded: a job has T_JOB s, and the driver is done within a job of
# MPI_SECONDS: its faults need only the data phase of one)
while [ ! -e "$work/b.done" ] && [ $SECONDS -lt $((mpi_end + 2 * T_JOB)) ]; do
    chaos_jobs=$((chaos_jobs + 1))
    echo "$chaos_jobs" >"$work/b.job"
    mpi_job "chaos.$chaos_jobs"
    event "job $chaos_jobs: $job_verdict (exit $job_rc, $job_secs s)"
    chaos_secs+="${chaos_secs:+, }$job_secs"
    if [ "$job_verdict" = verified ]; then
        chaos_verified=$((chaos_verified + 1))
    else
        indent "job $chaos_jobs" <"$work/chaos.$chaos_jobs.out" | grep -v ' UCX  INFO ' | tail -n 20
        # what the agents made of it (their logs are kept in $work)
        for n in 1 2; do agent_state "$n"; done
    fi
done
touch "$work/stop"
wait "$driver"
b_link=$(grep -c '^link$' "$work/b.faults" 2>/dev/null)
b_rank=$(grep -c '^stop_rank$' "$work/b.faults" 2>/dev/null)
b_agent=$(grep -c '^stop_agent$' "$work/b.faults" 2>/dev/null)
[ "${b_link:-0}" -gt 0 ] && [ $((${b_rank:-0} + ${b_agent:-0})) -gt 0 ]
verdict $? "MPI under faults: ${b_link:-0} link flaps, ${b_rank:-0} ranks and ${b_agent:-0} agents stopped"
check "MPI under faults: $chaos_verified of $chaos_jobs jobs completed and verified every word, none hung or corrupt ($chaos_secs s)" \
    [ "$chaos_verified" = "$chaos_jobs" ]

# the kill case: a rank SIGKILLed 2 s into the job's data phase
phase_t0=$SECONDS
# shellcheck disable=SC2086
on 1 timeout $T_JOB mpirun "${mpirun_opts[@]}" -np 8 "$mpi_prog" $MPI_ARGS \
    >"$work/killed.out" 2>&1 &
job=$!
for _ in $(seq 1200); do
    in_data_phase "$work/killed.out" && break
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
done
sleep 2
mapfile -t ranks < <(pgrep -x rvt_mpi_check)
rnd 8
if [ ${#ranks[@]} -ge 8 ] && kill -0 "$job" 2>/dev/null && kill -KILL "${ranks[r]}" 2>/dev/null; then
    t_kill=$SECONDS
    event "kill: MPI rank process ${ranks[r]} SIGKILLed"
    wait "$job"
    rc=$?
    dt=$((SECONDS - t_kill))
    grep -v ' UCX  INFO ' "$work/killed.out" | tail -n 6 | indent "killed rank"
    [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$dt" -le $T_KILLED ]
    verdict $? "MPI job with a rank SIGKILLed ended with an error (mpirun exit $rc, not 0 nor the timeout's 124) $dt s after the kill (bound $T_KILLED s)"
else
    wait "$job"
    fail "MPI kill case: no job to kill a rank of (${#ranks[@]} ranks seen)"
    indent "killed rank" <"$work/killed.out" | tail -n 20
fi
mpi_job next
check "the next MPI job on the nodes verified every word (exit $job_rc, $job_secs s)" \
    [ "$job_verdict" = verified ]
[ "$job_verdict" = verified ] || indent next <"$work/next.out" | tail -n 20
baseline_check "after the MPI chaos" 1 2

echo "chaos run: seed $seed, $((SECONDS - t_start)) s in the guest, $jobs_run MPI jobs"
finish chaos
