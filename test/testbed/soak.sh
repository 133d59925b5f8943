#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The soak in a 2-node testbed boot (soak-guest.sh says what runs and
# what is checked, and
# docs/reliability.md, "Soak: attach, register, transfer, detach, for as long as it runs"):
# processes attach, register, transfer and detach for as long as it runs, while each
# agent's memory, fds, MRs, QPs and CQs are sampled, printed as a series
# and checked against a bound. Exits with the guest script's status, 1
# when a check failed.
# Usage: test/testbed/soak.sh [--minutes N] [BUILD_DIR]
#        (default: 2 minutes, as CI runs it; build)
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
minutes=2
case ${1:-} in
--minutes=*) minutes=${1#--minutes=}; shift ;;
--minutes) minutes=${2:?--minutes needs a number}; shift 2 ;;
esac
check_minutes "$minutes" || exit 2
build=${1:-build}
need_built "$build" "make check" src/uct/ib/rvt/tools/rvtd \
    src/uct/ib/rvt/tools/rvt-status \
    test/gtest/integration/rvt_traffic_client || exit 1
started=$SECONDS
contrib/testbed/testbed run -n 2 -t $((minutes * 60 + 600)) \
    "test/testbed/soak-guest.sh $build $minutes"
rc=$?
echo "soak suite: $((SECONDS - started)) s of testbed time, boot included"
exit $rc
