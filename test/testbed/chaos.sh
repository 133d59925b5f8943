#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The chaos run in a 3-node testbed boot
# (docs/reliability.md, "Chaos: processes killed, links cut, processes stopped";
# chaos_guest.py says what runs and what is checked): traffic processes,
# then MPI jobs, while a driver kills processes, takes links down and
# stops processes at random; every arrival verified, nothing lost,
# nothing hung, and the agents back to their baseline afterwards. Exits
# with the guest script's status, 1 when a check failed.
# Usage: test/testbed/chaos.sh [--minutes N] [--seed S] [--qp-timeout T]
#                              [BUILD_DIR]
#   --minutes N  the run's length: N x 30 s of faults under the traffic
#                processes and N x 15 s under MPI jobs, beside about 2
#                minutes of boot, set-up, job ends and checks (default 1,
#                as CI runs it: about 3 minutes of testbed time in all;
#                --minutes 80: an hour of faults)
#   --seed S     the driver's random choices (default: a new one, printed;
#                the same seed replays the same choices)
#   --qp-timeout T  the traffic agents' RC retransmission timeout, rvtd's
#                --qp-timeout (4.096 us x 2^T a try; default 18: 1.07 s,
#                rvtd's own and UCX rc's; the agents' 1 s keepalive breaks
#                the connections an outage cuts). Lower values make the
#                devices retransmit under any load: a run that shows what
#                the device does then (its counters are printed; Soft-RoCE
#                then delivers a few messages twice: docs/reliability.md)
#   BUILD_DIR    default: build
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
minutes=1
seed=$(( $(date +%s%N) % 32768 ))
qp_timeout=18
while [ $# -gt 0 ]; do
    case $1 in
    --minutes=*) minutes=${1#--minutes=}; shift ;;
    --minutes) minutes=${2:?--minutes needs a number}; shift 2 ;;
    --seed=*) seed=${1#--seed=}; shift ;;
    --seed) seed=${2:?--seed needs a number}; shift 2 ;;
    --qp-timeout=*) qp_timeout=${1#--qp-timeout=}; shift ;;
    --qp-timeout) qp_timeout=${2:?--qp-timeout needs a number}; shift 2 ;;
    *) break ;;
    esac
done
check_minutes "$minutes" || exit 2
[[ $seed =~ ^[0-9]+$ ]] || { fail "--seed '$seed': expected a number"; exit 2; }
if ! [[ $qp_timeout =~ ^[0-9]+$ ]] || [ "$qp_timeout" -lt 1 ] || [ "$qp_timeout" -gt 31 ]; then
    fail "--qp-timeout '$qp_timeout': expected a number from 1 to 31"
    exit 2
fi
build=${1:-build}
need_built "$build" "make check; the MPI program needs Open MPI's mpicxx at configure time" \
    src/uct/ib/rvt/tools/rvtd src/uct/ib/rvt/tools/rvt-status \
    src/uct/ib/rvt/uct/.libs/libuct_rvt.so \
    test/gtest/integration/rvt_traffic_client \
    test/gtest/integration/rvt_chaos_client test/mpi/rvt_mpi_check || exit 1
traffic_secs=$((minutes * 30))
mpi_secs=$((minutes * 15))
echo "chaos: seed $seed (replay: test/testbed/chaos.sh --minutes $minutes --seed $seed --qp-timeout $qp_timeout $build)"
started=$SECONDS
contrib/testbed/testbed run -n 3 -t $((minutes * 60 + 1200)) \
    "test/testbed/chaos_guest.py $build $traffic_secs $mpi_secs $seed $qp_timeout"
rc=$?
echo "chaos suite: $((SECONDS - started)) s of testbed time, boot included (seed $seed)"
exit $rc
