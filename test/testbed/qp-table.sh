#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The device side of a node at scale (docs/performance.md, "The device
# side"): RC QPs and the memory the device holds for them, per node, for
# rc_verbs, ud_verbs,rvt and rvt, at N in {16, 128, 1024, 10000} nodes
# and P in {32, 64, 128, 256} ranks per node, printed by qp_table.py from
# figures measured on the testbed's device (qp-table-guest.sh says
# which). --boots N measures in N boots, and the table takes each figure's
# median (what a process registers varies from boot to boot). The
# measurements are kept in BUILD_DIR/qp-table.json, a list of one per boot;
# --from FILE prints the table from a kept one without a boot.
# Usage: test/testbed/qp-table.sh [BUILD_DIR] [--boots N]
#        test/testbed/qp-table.sh --from FILE
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
if [ "${1:-}" = --from ]; then
    exec test/testbed/qp_table.py "${2:?usage: qp-table.sh --from FILE}"
fi
build=build boots=1
while [ $# -gt 0 ]; do
    case $1 in
    --boots)
        boots=${2:-}
        [[ $boots =~ ^[1-9][0-9]?$ ]] ||
            { echo "qp-table.sh: --boots '$boots': expected a number of boots from 1 to 99" >&2; exit 2; }
        shift 2 ;;
    *) build=$1; shift ;;
    esac
done
perf_prerequisites "$build" || exit 1
probe=$build/test/testbed/qp_cost_probe
src=test/testbed/qp_cost_probe.cc
if [ ! -f "$probe" ] || [ "$src" -nt "$probe" ]; then
    ${CXX:-g++} -std=c++20 -O2 -Wall -Wextra -Werror -o "$probe" "$src" -libverbs ||
        { fail "building $probe"; exit 1; }
fi
measured=()
for ((boot = 1; boot <= boots; boot++)); do
    log=$build/qp-table.$boot.log
    contrib/testbed/testbed run -n 2 -t 900 "test/testbed/qp-table-guest.sh $build" >"$log" 2>&1
    rc=$?
    grep -E '^(PASS|FAIL)' "$log"
    [ $rc = 0 ] || { echo "qp-table: the guest failed in boot $boot (exit $rc): $log"; exit 1; }
    sed -n '/^--- measurement$/,/^--- end$/p' "$log" | sed '1d;$d' >"$build/qp-table.$boot.json"
    measured+=("$build/qp-table.$boot.json")
done
jq -s . "${measured[@]}" >"$build/qp-table.json" ||
    { echo "qp-table: a boot's measurement is not JSON: ${measured[*]}"; exit 1; }
echo "measurements ($boots boots): $build/qp-table.json"
echo
exec test/testbed/qp_table.py "$build/qp-table.json"
