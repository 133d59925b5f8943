#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Tests of the testbed runner itself (host side): exit status, node
# selection, refusal of bad arguments, and that qemu is always torn down:
# on timeout, on interrupt and when the guest dies, the latter printing the
# guest's kernel log. First, without qemu, the test scripts' helpers
# (lib.sh): a failed check fails the script, and the agent-status readers.
# Exits 1 if any check failed.
# shellcheck disable=SC2016 # scripts for bash -c and the testbed: single quotes on purpose
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
tb=$top/contrib/testbed/testbed
cd "$top" || exit 125
out=$(mktemp)
trap 'rm -rf "$out" "$RVT_TESTBED_RUNS"' EXIT

# this test's own runs only: other testbed runs may come and go meanwhile
RVT_TESTBED_RUNS=$(mktemp -d /tmp/tb-runs.XXXXXX)
export RVT_TESTBED_RUNS
qemus() { pgrep -c -f "tb.run=$RVT_TESTBED_RUNS/" || true; }
expect() { # expect DESCRIPTION RC PATTERN -- testbed args...
    local what=$1 want=$2 pattern=$3 rc
    shift 4
    "$tb" "$@" > "$out" 2>&1
    rc=$?
    if [ "$rc" = "$want" ] && grep -qE -- "$pattern" "$out"; then
        pass "$what (exit $rc)"
    else
        fail "$what: exit $rc (want $want), output:"
        sed 's/^/    /' "$out" | tail -20
    fi
}

# lib_expect DESCRIPTION RC WANT < SCRIPT: SCRIPT, run by bash after
# sourcing lib.sh, exits RC and prints exactly WANT (kept out of this
# script's output, whose PASS/FAIL lines are counted)
lib_expect() {
    local what=$1 want_rc=$2 want=$3 script rc
    script=$(cat)
    bash -c '. "$1" && eval "$2"' lib-test "$top/test/testbed/lib.sh" "$script" >"$out" 2>&1
    rc=$?
    if [ "$rc" = "$want_rc" ] && [ "$(cat "$out")" = "$want" ]; then
        pass "$what (exit $rc)"
    else
        fail "$what: exit $rc (want $want_rc), output against the expected:"
        diff <(echo "$want") "$out" | sed 's/^/    /' | tail -20
    fi
}
lib_expect "lib.sh: a failed check makes the script exit 1, after its EXIT trap" 1 \
    $'PASS: one\nFAIL: two\nPASS: three\ndemo: 2 passed, 1 failed\ntrap ran' <<'EOF'
trap 'echo trap ran' EXIT
pass one
check two false
check three true
finish demo
EOF
lib_expect "lib.sh: a script whose checks all pass exits 0" 0 \
    $'PASS: one\nPASS: two\ndemo: 2 passed, 0 failed' <<'EOF'
pass one
check two test 1 = 1
finish demo
EOF
lib_expect "lib.sh: gtest_verdicts counts plain and parameterised cases, not the summary" 0 \
    "$(printf '%s\n' '[       OK ] a.one (3 ms)' 'PASS: a.one' \
        '[  FAILED  ] r/p.two/0, where GetParam() = rc (path) (12 ms)' 'FAIL: r/p.two/0' \
        '[  FAILED  ] b.three (0 ms)' 'FAIL: b.three' \
        '[  SKIPPED ] b.four (1 ms)' 'FAIL: b.four skipped: no device in the testbed?' \
        '[  FAILED  ] r/p.two/0, where GetParam() = rc (path)' '[  FAILED  ] b.three' \
        'demo: 1 passed, 3 failed')" <<'EOF2'
v=$(printf '%s\r\n' '[       OK ] a.one (3 ms)' \
    '[  FAILED  ] r/p.two/0, where GetParam() = rc (path) (12 ms)' \
    '[  FAILED  ] b.three (0 ms)' '[  SKIPPED ] b.four (1 ms)' \
    '[  FAILED  ] r/p.two/0, where GetParam() = rc (path)' '[  FAILED  ] b.three' |
    { gtest_verdicts; echo "demo: $checks_passed passed, $checks_failed failed"; })
echo "${v//$'\r'/}"
EOF2
lib_expect "lib.sh: the wrappers' argument checks name the bad value" 0 \
    $'FAIL: --minutes \'0\': expected a whole number of minutes, 1 or more\n2\n0\nFAIL: /nonexistent/b not built (make check)\n1\n0' <<'EOF'
check_minutes 0; echo $?
check_minutes 12; echo $?
d=$(mktemp -d); touch "$d/a"
need_built /nonexistent "make check" b; echo $?
need_built "$d" "make check" a; echo $?
rm -rf "$d"
checks_failed=0
EOF
# reference_key: the cache key of a conformance suite's reference rows
# changes with what they depend on (here the gtest program, its stamp and
# the guest script), not with the groups asked for; --all has none
lib_expect "lib.sh: reference_key follows the gtest program, its stamp and the guest script" 0 \
    $'same\nsame for other groups\nnew program\nnew stamp\nnew script\nnone' <<'EOF'
d=$(mktemp -d); mkdir -p "$d/test/gtest"
echo a >"$d/test/gtest/gtest"; echo s >"$d/.rvt-gtest"; echo g >"$d/guest.sh"
k() { reference_key "$d/test/gtest/gtest" "$d/guest.sh" "$@"; }
k0=$(k g1 g2)
[ "$(k g1 g2)" = "$k0" ] && [ ${#k0} = 16 ] && echo same
[ "$(k g3)" = "$k0" ] && echo same for other groups
echo b >"$d/test/gtest/gtest"; k1=$(k g1); [ "$k1" != "$k0" ] && echo new program
echo t >"$d/.rvt-gtest"; k2=$(k g1); [ "$k2" != "$k1" ] && echo new stamp
echo h >"$d/guest.sh"; [ "$(k g1)" != "$k2" ] && echo new script
k --all
rm -rf "$d"
EOF
# ... and with what the initramfs holds, not with its archive's bytes: the
# testbed builds it again in each fresh clone, with new mtimes inside
lib_expect "lib.sh: reference_key follows what the initramfs holds, not its mtimes" 0 \
    $'same after a rebuild\nnew contents' <<'EOF'
d=$(mktemp -d); mkdir -p "$d/test/gtest" "$d/cache/testbed/kernel/boot"
echo a >"$d/test/gtest/gtest"; echo s >"$d/.rvt-gtest"; echo g >"$d/guest.sh"
echo k >"$d/cache/testbed/kernel/boot/vmlinuz-1"
rvt_cache=$d/cache
pack() { # pack INIT: an initramfs holding /init, with new mtimes
    rm -rf "$d/ir"; mkdir -p "$d/ir/bin"; echo "$1" >"$d/ir/init"
    touch -d "@$((RANDOM + 1000))" "$d/ir" "$d/ir/bin" "$d/ir/init"
    (cd "$d/ir" && find . | cpio -o -H newc --quiet | gzip -1) \
        >"$d/cache/testbed/initramfs.gz"
}
k() { reference_key "$d/test/gtest/gtest" "$d/guest.sh" g1; }
pack one; k0=$(k); b0=$(sha256sum <"$d/cache/testbed/initramfs.gz")
pack one; b1=$(sha256sum <"$d/cache/testbed/initramfs.gz")
[ "$b0" != "$b1" ] && [ "$(k)" = "$k0" ] && echo same after a rebuild
pack two; [ "$(k)" != "$k0" ] && echo new contents
rm -rf "$d"
EOF
# keep_reference: a run keeps each complete reference row (its .counts
# written) in the cache, whatever rvt's rows did; an unfinished row (no
# .counts) is not kept, and a cached row is not overwritten
lib_expect "lib.sh: keep_reference keeps complete reference rows only" 0 \
    $'a kept\nb not kept\nc left as it was' <<'EOF'
d=$(mktemp -d); mkdir -p "$d/ref" "$d/cache"
echo "3 0 1" >"$d/ref/rc_verbs.a.counts"; echo x >"$d/ref/rc_verbs.a.passed"
: >"$d/ref/rc_verbs.a.skipped"
echo x >"$d/ref/rc_verbs.b.passed"
echo old >"$d/cache/rc_verbs.c.counts"; echo new >"$d/ref/rc_verbs.c.counts"
keep_reference "$d/ref" "$d/cache"
[ -f "$d/cache/rc_verbs.a.counts" ] && [ -f "$d/cache/rc_verbs.a.passed" ] &&
    [ -f "$d/cache/rc_verbs.a.skipped" ] && echo a kept
[ ! -e "$d/cache/rc_verbs.b.passed" ] && echo b not kept
[ "$(cat "$d/cache/rc_verbs.c.counts")" = old ] && echo c left as it was
rm -rf "$d"
EOF
chaos_out=$(test/testbed/chaos.sh --qp-timeout 40 /nonexistent 2>&1)
chaos_rc=$?
if [ "$chaos_rc" = 2 ] &&
    [ "$chaos_out" = "FAIL: --qp-timeout '40': expected a number from 1 to 31" ]; then
    pass "chaos.sh refuses a QP timeout rvtd would not take, naming it (exit 2)"
else
    fail "chaos.sh --qp-timeout 40: exit $chaos_rc (want 2), output: $chaos_out"
fi
# the agent helpers, with a stand-in for the testbed's `on`: node N's
# agent answers with the file $d/nodeN, and not at all without it
lib_expect "lib.sh: agent status read with jq: fields, verdicts, counter deltas, waiting" 0 \
    "$(printf '%s\n' 9 false 'not more than 10' 'node 2: no answer' 'rc_qps 9' \
        'verdict ok' no 'verdict not ok' 'no answer, no verdict' '5 2 200 300 400' \
        '3 1 300 50 50' \
        'no counters before' 'node 3 answered' 'node 4 never answered')" <<'EOF'
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
rvt_status=/nonexistent
on() { cat "$d/node$1" 2>/dev/null; }
status() { # status AMS WRITES WRITE_BYTES SENT RECEIVED: an agent's JSON
    echo "{\"clients\": [{\"pid\": 10}], \"data_path\": {\"rc_qps\": 9,
        \"delivered\": {\"am\": $1, \"writes\": $2, \"write_bytes\": $3},
        \"peers\": [{\"loopback\": true, \"bytes\": 1000, \"received_bytes\": 1000},
            {\"loopback\": false, \"bytes\": $4, \"received_bytes\": $5}]}}"
}
status 5 2 200 300 400 >"$d/node1"
agent_get 1 .data_path.rc_qps
agent_get 1 '.data_path.rc_qps > $n' --argjson n 10 || echo "not more than 10"
agent_get 2 . || echo "node 2: no answer"
json_verdict "$(cat "$d/node1")" '{ok: (.data_path.rc_qps == 9), text: "rc_qps \(.data_path.rc_qps)"}' &&
    echo "verdict ok"
json_verdict "$(cat "$d/node1")" '{ok: false, text: "no"}' || echo "verdict not ok"
json_verdict "$(agent_json 2)" '{ok: true, text: "yes"}' || echo "no answer, no verdict"
agent_counters 1
counters_save 1 "$d/before"
status 8 3 500 350 450 >"$d/node1"
counters_delta 1 "$d/before"
counters_save 2 "$d/before"
counters_delta 1 "$d/before" || echo "no counters before"
(sleep 0.5; cp "$d/node1" "$d/node3") &
wait_agent 3 5 && echo "node 3 answered"
wait_agent 4 1 || echo "node 4 never answered"
EOF

lib_expect "lib.sh: agent_settle waits for no client, no gone or release waiting" 0 \
    "$(printf '%s\n' 'node 1 settled' 'node 2 never settled' 'node 3 settled' 'node 4 never settled')" <<'EOF'
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
rvt_status=/nonexistent
on() { cat "$d/node$1" 2>/dev/null; }
status() { # status CLIENTS GONE_WAITING RELEASES_WAITING
    echo "{\"clients\": $1, \"data_path\": {\"gone_waiting\": $2, \"releases_waiting\": $3}}"
}
status '[]' 0 0 >"$d/node1"
status '[{"pid": 10}]' 0 0 >"$d/node2"
status '[]' 1 0 >"$d/node3"
agent_settle 1 1 && echo "node 1 settled"
agent_settle 2 1 || echo "node 2 never settled"
(sleep 0.5; status '[]' 0 0 >"$d/node3.new"; mv "$d/node3.new" "$d/node3") &
agent_settle 3 5 && echo "node 3 settled"
agent_settle 4 1 || echo "node 4 never settled"
EOF
before=$(qemus)
expect "bad node count is refused, naming it" 125 "-n '0': expected a node count" -- run -n 0 true
expect "bad node number is refused, naming it" 125 "--on '5': expected 'all' or a node number from 1 to 2" \
    -- run -n 2 --on 5 true
expect "a command runs on the chosen node" 0 '^node2$' -- run -n 2 --on 2 hostname
expect "on all runs on every node, prefixed" 0 '^\[node3\] node3$' -- run -n 3 --on all hostname
# the runner's CPU figure is its boot's: a script that worked before it
# execs the runner (demo.sh builds, then execs it) keeps its children's
# CPU time in the process, which is not the run's; and no figure passes
# the host's cores. The CPU the test's children spent, around a run
# exec'd after a child that burns $burn CPU-seconds:
burn=5
children_cpu() { # children_cpu BEFORE AFTER: seconds between two `times`
    awk 'FNR == 2 { for (i = 1; i <= 2; ++i) { split($i, t, /[ms]/)
        c += (FILENAME == ARGV[1] ? -1 : 1) * (t[1] * 60 + t[2]) } }
        END { printf "%.1f", c }' "$1" "$2"
}
times > "$out.t0"
bash -c 'python3 -c "import time
while time.process_time() < $1: pass" && exec "$2" run -n 1 true' burner \
    "$burn" "$tb" > "$out" 2>&1
rc=$?
times > "$out.t1"
spent=$(children_cpu "$out.t0" "$out.t1")
figure=$(grep -oE '[0-9]+ CPU-s of the host \([0-9.]+ cores\)' "$out" | tail -1)
read -r cpu cores < <(echo "$figure" | tr -d '(' | awk '{ print $1, $6 }')
if [ "$rc" = 0 ] && [ -n "$figure" ] &&
    awk -v c="$cpu" -v s="$spent" -v b="$burn" -v k="$cores" -v n="$(nproc)" \
        'BEGIN { exit !(c <= s - b + 1 && k <= n) }'; then
    pass "the run's CPU figure is its own: $figure, of $spent CPU-s with the ${burn} s burnt before it"
else
    fail "the run's CPU figure '$figure' (exit $rc): expected at most $spent - $burn CPU-s and $(nproc) cores"
    sed 's/^/    /' "$out" | tail -5
fi
rm -f "$out.t0" "$out.t1"
# One boot for the checks of a run's command and of `on` (each checked in
# its output): a background job on one node beside a foreground one, a
# share below /tmp (which the guest and every node mount a fresh tmpfs
# over; a clone in /tmp is a common CI layout), the node's variables, a
# command's exit status through `on`, the program as the child of the
# `on` that started it (the suites stop programs with `pkill -P`), the
# command's exit status with the kernel log, and the guest's output kept
# before the runner's later notes in one file (expect() sends stdout and
# stderr into one)
tmpshare=$(mktemp -d /tmp/tb-share.XXXXXX)
"$tb" run -n 2 -s "$tmpshare" \
    'on 2 sh -c "sleep 2; hostname" > /tmp/bg & fg=$(on 1 hostname); wait; echo "bg-$(cat /tmp/bg) fg-$fg"
     on 2 sh -c "echo from-node2 > '"$tmpshare"'/f" && on 1 cat '"$tmpshare"'/f > /dev/null && echo shared-ok
     on 2 sh -c "echo vars \$RVT_NODE \$NODE_NAME \$RXE_DEV \$UCX_NET_DEVICES"
     on 2 sh -c "exit 3"; echo "on-status-$?"
     on 1 sleep 60 & sleep 3; pkill -KILL -P $! sleep && echo child-killed; wait
     echo guest-said-this-before-failing; exit 7' >"$out" 2>&1
rc=$?
seen() { # seen DESCRIPTION PATTERN: the run above exited 7 and printed PATTERN
    if [ "$rc" = 7 ] && grep -qE -- "$2" "$out"; then
        pass "$1 (exit $rc)"
    else
        fail "$1: exit $rc (want 7), output:"
        sed 's/^/    /' "$out" | tail -20
    fi
}
seen "background on one node while another runs" '^bg-node2 fg-node1$'
seen "a share below /tmp is writable from the nodes" '^shared-ok$'
seen "on sets the node's variables" '^vars 2 node2 rxe2 rxe2:1$'
seen "on returns the command's exit status" '^on-status-3$'
seen "the program is the child of its on (pkill -P finds it)" '^child-killed$'
if [ "$(cat "$tmpshare/f" 2>/dev/null)" = from-node2 ]; then
    pass "the host sees what a node wrote into the share"
else
    fail "the host does not see $tmpshare/f written by node2"
fi
rm -rf "$tmpshare"
seen "the command's exit status comes back, with the kernel log" 'guest kernel log'
seen "the guest's output and the runner's later notes share one file" \
    '^guest-said-this-before-failing$'
expect "a guest that dies is reported, with its kernel log" 125 'Kernel panic - not syncing' \
    -- run -n 1 'echo c > /proc/sysrq-trigger; sleep 60'
expect "a run past its timeout is stopped" 124 'timeout after 20s' -- run -n 1 -t 20 'sleep 600'

# interrupt: SIGINT once the nodes are up. Job control on (set -m), else
# bash starts the background job with SIGINT ignored, as for any
# non-interactive `&`, and the signal would never reach the runner. And
# SIGINT back to its default (env --default-signal): a test suite started
# as a background job of a non-interactive shell (`(.ci/run &)`) inherits
# it ignored, which no shell below can undo, and the runner would go on
# to its timeout.
set -m
env --default-signal=INT "$tb" run -n 1 -t 300 'sleep 600' > "$out" 2>&1 &
pid=$!
set +m
# (a boot takes 15-40 s under TCG, longer on a loaded host: wait up to
# 4 minutes, inside the run's own 300 s)
up=no
for _ in $(seq 2400); do
    grep -q 'node(s) up' "$out" && { up=yes; break; }
    sleep 0.1
done
kill -INT "$pid"
wait "$pid"
rc=$?
if [ "$up" = no ]; then
    fail "interrupted run: the node did not come up in 240 s (exit $rc after SIGINT)"
elif [ "$rc" = 130 ]; then
    pass "an interrupted run exits 130"
else
    fail "interrupted run exit $rc (want 130)"
fi

sleep 1
after=$(qemus)
if [ "$after" = "$before" ]; then
    pass "no qemu left behind ($after running before and after)"
else
    fail "qemu processes: $before before, $after after"
fi
finish "testbed runner"
