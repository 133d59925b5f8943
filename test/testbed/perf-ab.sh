#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two builds of rvt in one 2-node testbed boot, alternating, on the case of
# the perf suite that the boot's scheduling moves most: 4 pairs of UCT
# put_bw zcopy at once (perf_guest.py's "4 processes per node"), with the
# agents asleep between messages as on a full node. Each round runs build
# A's agents and module, then B's (the next round B first), then rc_verbs;
# a boot-to-boot spread of 30% in that case hides what one boot per build
# cannot show. Prints a line per run and the mean of each; every figure
# also in build/perf-ab/figures.csv. Exits 1 when a run failed.
# Usage: test/testbed/perf-ab.sh BUILD_A BUILD_B [ROUNDS [SIZE [ITERS]]]
# (BUILD_A and BUILD_B: build directories, each with its rvtd, rvt-status,
# module and test/testbed/perftest_dev_alias.so; ROUNDS default 6, SIZE
# 262144, ITERS 40, as the perf suite)
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
[ $# -ge 2 ] || { sed -n '2,14s/^# \{0,1\}//p' "$0"; exit 2; }
a=$(cd "$1" && pwd) || exit 2
b=$(cd "$2" && pwd) || exit 2
for build in "$a" "$b"; do
    perf_prerequisites "$build" || exit 1
done
contrib/testbed/testbed run -n 2 -t 2400 \
    "test/testbed/perf-ab-guest.sh $a $b ${3:-6} ${4:-262144} ${5:-40}"
