#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# A third node floods one agent's handshake UD QP while two nodes trade
# verified traffic with keepalives (flood-guest.sh), in a 3-node testbed;
# exits with the guest script's status, 1 when a check failed.
# Usage: test/testbed/flood.sh [BUILD_DIR] [--rvtd=PATH] [--modes=LIST]
#   --rvtd=PATH: node 1's agent is that rvtd (a file named rvtd) instead
#   of the build's: a build with a bound taken out, to see the checks fail
#   --modes=LIST: the flood modes to run, comma-separated (default
#   garbage,wrong-key,other-job,replay,forged); the phases without flood,
#   and node 3 joining with and without its user's held flood, run
#   always
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=build
rvtd1=
modes=garbage,wrong-key,other-job,replay,forged
for a in "$@"; do
    case $a in
    --rvtd=*) rvtd1=${a#--rvtd=} ;;
    --modes=*) modes=${a#--modes=} ;;
    -*) fail "$a: expected BUILD_DIR, --rvtd=PATH or --modes=LIST"; exit 2 ;;
    *) build=$a ;;
    esac
done
need_built "$build" "make check" test/testbed/rvt_ud_flood \
    test/gtest/integration/rvt_traffic_client || exit 1
if [ -n "$rvtd1" ] && [ ! -x "$rvtd1" ]; then
    fail "--rvtd=$rvtd1: not an executable"
    exit 2
fi
# the guest finds each node's agent by its name (lib.sh, agent_pids)
if [ -n "$rvtd1" ] && [ "$(basename "$rvtd1")" != rvtd ]; then
    fail "--rvtd=$rvtd1: expected a file named rvtd (the checks find the agent by its name), e.g. build-broken/rvtd"
    exit 2
fi
if ! [[ $modes =~ ^(garbage|wrong-key|other-job|replay|forged)(,(garbage|wrong-key|other-job|replay|forged))*$ ]]; then
    fail "--modes=$modes: expected a comma-separated list of garbage, wrong-key, other-job, replay, forged"
    exit 2
fi
contrib/testbed/testbed run -n 3 -t 900 \
    "RVT_FLOOD_RVTD1=$rvtd1 FLOOD_MODES=$modes test/testbed/flood-guest.sh $build"
