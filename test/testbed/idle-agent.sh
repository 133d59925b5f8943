#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# What an idle agent costs its node (the figures are in
# docs/performance.md, "A large job as UCP sees it"): two nodes' agents,
# first with no peer, then after a job has connected them (a short UCP
# tag_bw over rvt), each measured over 10 s with nothing to do: the
# agents' CPU seconds (utime + stime) and how the kernel scheduled them,
# beside the guest's. Printed, never judged: under TCG the guest's clock
# and its tick accounting disagree, so read the agents' share, not the
# seconds.
# Usage: test/testbed/idle-agent.sh [BUILD_DIR]   (default: build)
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=${1:-build}
[ -f "$build/Makefile" ] || { fail "$build is not configured"; exit 1; }
perf_prerequisites "$build" || exit 1
contrib/testbed/testbed run -n 2 -t 400 "test/testbed/idle-agent-guest.sh $build"
