#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rvt beside rc_verbs in one 2-node testbed boot: the ratio table
# (latency, bandwidth, 4 pairs at once), each ratio beside the project's
# speed target for it (docs/performance.md, "On the testbed"), and the
# per-hop trace of an 8-byte active message (perf_guest.py says what
# runs); every figure also in BUILD_DIR/perf-results/figures.csv, drawn
# there as SVG pictures (test/testbed/plot.py); exits with the guest
# script's status, 1 when a run failed or a picture could not be drawn.
# Usage: [RVT_SWEEP_ENV="KEY=VALUE ..."] test/testbed/perf.sh [BUILD_DIR [stripe|kernels|sweep|largejob|brief]]
# (default: build; stripe, kernels, sweep, largejob: only that section,
# largejob in full (RVT_LARGEJOB_* in perf_guest.py's LargeJob: other settings,
# sizes, rounds, a previous build); brief: all but the pollers, mid-size
# and rendezvous sections, the large job briefly, as CI runs it;
# perf_guest.py says what each runs)
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=${1:-build}
only=${2:-}
perf_prerequisites "$build" || exit 1
started=$SECONDS
# RVT_SWEEP_ENV (KEY=VALUE words, no quotes): the sweep's fourth column,
# the recommended setting with them (perf_guest.py)
sweep_env=${RVT_SWEEP_ENV:+RVT_SWEEP_ENV=\"$RVT_SWEEP_ENV\" }
# the large job's investigation settings pass into the guest
largejob_env=""
for v in RVT_LARGEJOB_SETTINGS RVT_LARGEJOB_SIZES RVT_LARGEJOB_A2A_SIZES \
    RVT_LARGEJOB_ROUNDS RVT_LARGEJOB_BEFORE RVT_LARGEJOB_PIN RVT_LARGEJOB_MODE \
    RVT_LARGEJOB_UCX122 RVT_LARGEJOB_BUILD122; do
    [ -n "${!v:-}" ] && largejob_env+="$v=$(printf %q "${!v}") "
done
timeout=2400
[ "$only" = largejob ] && timeout=7200
contrib/testbed/testbed run -n 2 -t "$timeout" "${sweep_env}${largejob_env}test/testbed/perf_guest.py $build $only"
rc=$?
echo "perf suite: $((SECONDS - started)) s of testbed time, boot included"
# the guest kept every figure in $build/perf-results/figures.csv: say
# which run it was and draw it
results=$build/perf-results
if [ -s "$results/figures.csv" ]; then
    {
        echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
        echo "commit: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo ' (with changes)')"
        echo "section: ${only:-all}"
        echo "ucx: $(sed -n "s/^UCX_VERSION = //p" "$build/Makefile")"
        echo "testbed: 2 nodes, qemu/TCG, Soft-RoCE (rxe), 2 vCPUs shared"
    } >"$results/run.txt"
    python3 test/testbed/plot.py "$results" || rc=1
    echo "perf suite: figures and pictures in $results"
fi
exit $rc
