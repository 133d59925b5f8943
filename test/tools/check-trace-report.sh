#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rvt-trace-report on a made-up ping-pong whose hop times are known: every
# hop of the table must come out with its count and median.
set -u
top=${abs_top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
tool=$top/src/uct/ib/rvt/tools/rvt-trace-report
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
check() { # check HOP COUNT MEDIAN_US
    if grep -qE "^$1 +$2 +$3 " "$work/out"; then
        echo "PASS: $1: $2 messages, median $3 us"
    else
        echo "FAIL: $1: expected $2 messages, median $3 us; got:"
        cat "$work/out"
        failed=1
    fi
}
# Node 1's client 0 sends wr_id 7 to node 2's client 3 (immediate 99),
# three times, 1 ms apart; every hop costs the same few microseconds.
for i in 0 1 2; do
    t=$((1000000 * (i + 1)))
    echo "$t client submit 0 7" >>"$work/n1.client"
    echo "$((t + 1000)) agent pop 0 7" >>"$work/n1.agent"
    echo "$((t + 3000)) agent post 0 7" >>"$work/n1.agent"
    echo "$((t + 50000)) agent receive 3 99" >>"$work/n2.agent"
    echo "$((t + 52000)) agent deliver 3 99" >>"$work/n2.agent"
    echo "$((t + 56000)) client read 3 99" >>"$work/n2.client"
    echo "$((t + 90000)) agent sent 0 7" >>"$work/n1.agent"
    echo "$((t + 91000)) agent complete 0 7" >>"$work/n1.agent"
    echo "$((t + 96000)) client reap 0 7" >>"$work/n1.client"
done
"$tool" node1="$work/n1.client" node1="$work/n1.agent" \
    node2="$work/n2.agent" node2="$work/n2.client" >"$work/out" 2>&1
check "submit -> pop" 3 1.0
check "pop -> post" 3 2.0
check "post -> sent" 3 87.0
check "sent -> complete" 3 1.0
check "complete -> reap" 3 5.0
check "post -> receive" 3 47.0
check "receive -> deliver" 3 2.0
check "deliver -> read" 3 4.0
# a malformed line is refused, naming it
echo "garbage" >"$work/bad"
if "$tool" node1="$work/bad" >"$work/err" 2>&1; then
    echo "FAIL: a malformed trace was accepted"
    failed=1
elif grep -q "bad:1: expected" "$work/err"; then
    echo "PASS: a malformed line is refused: $(cat "$work/err")"
else
    echo "FAIL: malformed line: unclear error: $(cat "$work/err")"
    failed=1
fi
exit $failed
