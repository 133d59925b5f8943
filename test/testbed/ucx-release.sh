#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rvt on another UCX release (one contrib/setup-deps.sh --ucx builds into
# the cache: 1.16, 1.18, 1.22), in a 2-node testbed: that release's
# ucx_info finds rvt the way the README says for it (1.22 as a plugin from
# UCX_PLUGIN_PATH, no LD_PRELOAD; 1.16 and 1.18 preloaded, as Debian's
# 1.13) and does not without it; its ucx_perftest runs UCT and UCP over
# rvt beside rc_verbs; Debian's Open MPI runs the project's MPI program
# over rvt on that release's libraries, every word checked
# (ucx-release-guest.sh says what runs).
# Exits with the guest script's status, 1 when a check failed.
# Usage: test/testbed/ucx-release.sh [BUILD_DIR]   (default: build122)
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=${1:-build122}
[ -f "$build/Makefile" ] || { fail "$build is not configured"; exit 1; }
if [ "$(make_var UCX_PREFIX)" = /usr ]; then
    fail "$build is built against Debian's UCX in /usr (the perftest," \
        "mpi and select suites cover it); configure against a release" \
        "contrib/setup-deps.sh --ucx builds"
    exit 1
fi
need_built "$build" make src/uct/ib/rvt/tools/rvtd \
    src/uct/ib/rvt/uct/.libs/libuct_rvt.so || exit 1
perf_prerequisites "$build" || exit 1 # rvt built, the UCT server's shim
started=$SECONDS
contrib/testbed/testbed run -n 2 -t 900 \
    "test/testbed/ucx-release-guest.sh $build $(make_var UCX_PREFIX)"
rc=$?
echo "UCX release suite: $((SECONDS - started)) s of testbed time, boot included"
exit $rc
