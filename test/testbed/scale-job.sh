#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The largest MPI job the testbed's 2 vCPUs allow, over rvt, the
# recommended setting and rc_verbs, every word verified, with each node's
# QPs beside each other (scale-job-guest.sh says what runs).
# Usage: test/testbed/scale-job.sh [BUILD_DIR [NODES [PPN]]]   (default:
# build, 6 nodes, 2 ranks each). Exits with the guest script's status.
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=${1:-build}
nodes=${2:-6}
ppn=${3:-2}
perf_prerequisites "$build" || exit 1
need_built "$build" "make test/mpi/rvt_mpi_check" test/mpi/rvt_mpi_check || exit 1
started=$SECONDS
contrib/testbed/testbed run -n "$nodes" -t 2400 \
    "test/testbed/scale-job-guest.sh $build $nodes $ppn"
rc=$?
echo "scale job: $((SECONDS - started)) s of testbed time, boot included"
exit $rc
