#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCP chooses rvt by itself when the job is large (select-guest.sh says
# what runs): with UCX_TLS unset, the lanes of a UCP endpoint at 8, 256,
# 257, 1024 and 4096 estimated endpoints, and at 1100 and 1150 with
# rc_verbs' endpoint limit lifted, for the UCX that BUILD_DIR was
# configured against (Debian's 1.13 with the module preloaded, or a
# release setup-deps.sh built: 1.16 and 1.18 preloaded, 1.22 from
# UCX_PLUGIN_PATH); with a release, also the protocol of a large
# ucp_tag_send; with Debian's, what Open MPI's pml ucx passes as the
# estimate.
# Usage: test/testbed/select.sh [BUILD_DIR]   (default: build)
# Exits with the guest script's status, 1 when a check failed.
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=${1:-build}
[ -f "$build/Makefile" ] || { fail "$build is not configured"; exit 1; }
perf_prerequisites "$build" || exit 1
prefix=
if [ "$(make_var UCX_PREFIX)" != /usr ]; then
    prefix=$(make_var UCX_PREFIX)
else
    mpi_build mpicxx test/mpi/rvt_mpi_check.cc "$build/test/mpi/rvt_mpi_check" || exit 1
fi
started=$SECONDS
contrib/testbed/testbed run -n 2 -t 900 "test/testbed/select-guest.sh $build $prefix"
rc=$?
echo "select suite: $((SECONDS - started)) s of testbed time, boot included"
exit $rc
