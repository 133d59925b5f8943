#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX loads rvt by itself, as a plugin: in a 2-node testbed, the ucx_info of
# the UCX that BUILD_DIR was configured against (one that loads plugins,
# 1.22) lists transport rvt with the module's directory on UCX_PLUGIN_PATH
# and no LD_PRELOAD, and does not without it; that UCX's ucx_perftest runs
# UCT and UCP over rvt beside rc_verbs; Debian's Open MPI runs the
# project's MPI program over rvt on that UCX's libraries (plugin-guest.sh).
# Exits with the guest script's status, 1 when a check failed.
# Usage: test/testbed/plugin.sh [BUILD_DIR]   (default: build122)
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=${1:-build122}
[ -f "$build/Makefile" ] || { fail "$build is not configured"; exit 1; }
if [ "$(make_var UCX_LOADS_PLUGINS)" != yes ]; then
    fail "$build is built against UCX $(make_var UCX_VERSION)," \
        "which does not load plugins (configure against UCX 1.22)"
    exit 1
fi
need_built "$build" make src/uct/ib/rvt/tools/rvtd \
    src/uct/ib/rvt/uct/.libs/libuct_rvt.so.0 || exit 1
perf_prerequisites "$build" || exit 1 # rvt built (the shim is unused here)
started=$SECONDS
contrib/testbed/testbed run -n 2 -t 900 \
    "test/testbed/plugin-guest.sh $build $(make_var UCX_PREFIX)"
rc=$?
echo "plugin suite: $((SECONDS - started)) s of testbed time, boot included"
exit $rc
