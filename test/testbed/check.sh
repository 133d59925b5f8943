#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The site check (rvt-check, check-guest.sh says what runs): on rxe every
# need of rvt answered yes, through a real agent too; on Soft-iWARP (siw,
# Debian's kernel module) the transport refused with its reason, by the
# check and by rvtd at start; between two nodes, a transfer each way
# (rvt-check --listen and --peer).
# Usage: test/testbed/check.sh [BUILD_DIR]   (default: build)
# Exits with the guest script's status, 1 when a check failed.
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=${1:-build}
need_built "$build" make src/uct/ib/rvt/tools/rvtd \
    src/uct/ib/rvt/tools/rvt-check || exit 1
# Soft-iWARP is this suite's alone: prepared here, on first use (the
# kernel's source package and headers), not by `testbed prepare`. Without
# it the run goes on and its siw case fails with the reason.
contrib/testbed/testbed prepare --siw ||
    echo "check: no Soft-iWARP module: the siw case will fail"
started=$SECONDS
contrib/testbed/testbed run -n 2 -t 400 "test/testbed/check-guest.sh $build"
rc=$?
echo "check suite: $((SECONDS - started)) s of testbed time, boot included"
exit $rc
