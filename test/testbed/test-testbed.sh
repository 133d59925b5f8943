#!/bin/bash
# Tests of the testbed runner itself (host side): exit status, node
# selection, refusal of bad arguments, and that qemu is always torn down:
# on timeout, on interrupt and when the guest dies, the latter printing the
# guest's kernel log.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
tb=$top/contrib/testbed/testbed
cd "$top" || exit 125
passed=0
failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
out=$(mktemp)
trap 'rm -rf "$out" "$RVT_TESTBED_RUNS"' EXIT

# this test's own runs only: other testbed runs may come and go meanwhile
export RVT_TESTBED_RUNS=$(mktemp -d /tmp/tb-runs.XXXXXX)
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

before=$(qemus)
expect "bad node count is refused, naming it" 125 "-n '0': expected a node count" -- run -n 0 true
expect "bad node number is refused, naming it" 125 "--on '5': expected 'all' or a node number from 1 to 2" \
    -- run -n 2 --on 5 true
expect "a command runs on the chosen node" 0 '^node2$' -- run -n 2 --on 2 hostname
expect "on all runs on every node, prefixed" 0 '^\[node3\] node3$' -- run -n 3 --on all hostname
expect "background on one node while another runs" 0 '^bg-node2 fg-node1$' \
    -- run -n 2 'on 2 sh -c "sleep 2; hostname" > /tmp/bg & fg=$(on 1 hostname); wait; echo "bg-$(cat /tmp/bg) fg-$fg"'
# a share below /tmp, which the guest and every node mount a fresh tmpfs
# over (a clone in /tmp is a common CI layout)
tmpshare=$(mktemp -d /tmp/tb-share.XXXXXX)
expect "a share below /tmp is writable from the nodes" 0 '^shared-ok$' \
    -- run -n 2 -s "$tmpshare" "on 2 sh -c 'echo from-node2 > $tmpshare/f' && on 1 cat $tmpshare/f > /dev/null && echo shared-ok"
if [ "$(cat "$tmpshare/f" 2>/dev/null)" = from-node2 ]; then
    pass "the host sees what a node wrote into the share"
else
    fail "the host does not see $tmpshare/f written by node2"
fi
rm -rf "$tmpshare"
expect "the command's exit status comes back, with the kernel log" 7 'guest kernel log' \
    -- run -n 1 'exit 7'
expect "a guest that dies is reported, with its kernel log" 125 'Kernel panic - not syncing' \
    -- run -n 1 'echo c > /proc/sysrq-trigger; sleep 60'
expect "a run past its timeout is stopped" 124 'timeout after 20s' -- run -n 1 -t 20 'sleep 600'

# interrupt: SIGINT once the nodes are up. Job control on (set -m), else
# bash starts the background job with SIGINT ignored, as for any
# non-interactive `&`, and the signal would never reach the runner.
set -m
"$tb" run -n 1 -t 300 'sleep 600' > "$out" 2>&1 &
pid=$!
set +m
for _ in $(seq 600); do
    grep -q 'node(s) up' "$out" && break
    sleep 0.1
done
kill -INT "$pid"
wait "$pid"
rc=$?
if [ "$rc" = 130 ]; then pass "an interrupted run exits 130"; else fail "interrupted run exit $rc (want 130)"; fi

sleep 1
after=$(qemus)
if [ "$after" = "$before" ]; then
    pass "no qemu left behind ($after running before and after)"
else
    fail "qemu processes: $before before, $after after"
fi
echo "testbed runner: $passed passed, $failed failed"
[ "$failed" = 0 ]
