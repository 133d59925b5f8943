#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Guest script: plain-verbs RC retransmission probe between node2 (server)
# and node1 (client), with CPU hogs on each node so that rxe's RC
# retransmission timer fires. `make check` does not build the probe; build
# it, then run from the source tree:
#   make -C build rc-retry-probe
#   contrib/testbed/testbed run -n 2 -t 600 \
#       "contrib/testbed/rc-retry-probe.sh [BUILD] [PROBE OPTIONS...]"
# BUILD defaults to build; PROBE OPTIONS go to both sides (e.g.
# --timeout=11 --seconds=30). HOGS (default 2) CPU hogs per node.
# Optional faults, off by default: LOSS=P drops P% of packets (netem) on
# both bridge ports vbr1/vbr2; FLAP=MS takes node2's bridge port vbr2 down
# for MS ms every second or so while the probe runs.
# Exit status: 0 if both sides report nothing duplicated, lost or corrupt.
set -u
build=build
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then build=$1; shift; fi
probe=$PWD/$build/contrib/testbed/rc_retry_probe
[ -x "$probe" ] || { echo "no $probe (make -C $build rc-retry-probe)" >&2; exit 125; }
mkdir -p "$PWD/$build/exp"
dir=$(mktemp -d "$PWD/$build/exp/probe.XXXXXX")
echo "== rc-retry-probe: dir $dir, options: $*, hogs ${HOGS:-2} per node, loss ${LOSS:-0}%, flap ${FLAP:-0} ms"
uname -r
hogs=()
for n in 1 2; do
    for ((i = 0; i < ${HOGS:-2}; i++)); do
        on "$n" sh -c 'while :; do :; done' &
        hogs+=($!)
    done
done
if [ -n "${LOSS:-}" ]; then
    for n in 1 2; do
        tc qdisc add dev "vbr$n" root netem loss "${LOSS}%" || echo "netem on vbr$n failed"
    done
fi
flapper=
if [ -n "${FLAP:-}" ]; then
    ( flaps=0
      while [ ! -e "$dir/client.done" ]; do
          sleep 1
          ip link set vbr2 down; sleep "$(awk "BEGIN{print $FLAP/1000}")"; ip link set vbr2 up
          flaps=$((flaps + 1))
      done
      echo "== link flaps of ${FLAP} ms: $flaps" ) &
    flapper=$!
fi
on 2 "$probe" --server --dir="$dir" "$@" > "$dir/server.out" 2>&1 &
spid=$!
on 1 "$probe" --client --dir="$dir" "$@" > "$dir/client.out" 2>&1
crc=$?
wait "$spid"
src=$?
[ -n "$flapper" ] && wait "$flapper"
ip link set vbr2 up
if [ -n "${LOSS:-}" ]; then
    for n in 1 2; do tc -s qdisc show dev "vbr$n"; tc qdisc del dev "vbr$n" root; done
fi
# the hogs: `on` runs them under nsenter; end each by its own process group
for p in "${hogs[@]}"; do
    pkill -P "$p" 2>/dev/null
    kill "$p" 2>/dev/null
done
for p in "${hogs[@]}"; do
    pkill -P "$p" 2>/dev/null
done
sleep 0.2
echo "== server (node2) exit $src"
cat "$dir/server.out"
echo "== client (node1) exit $crc"
cat "$dir/client.out"
[ "$src" = 0 ] && [ "$crc" = 0 ]
