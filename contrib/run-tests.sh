#!/bin/bash
# Every rvt test, from a fresh Debian 12 machine or clone: installs what is
# missing (contrib/setup-deps.sh, the testbed's kernel), builds in ./build,
# runs the unit tests (make check), the testbed runner's own tests and the
# testbed suites with real RDMA between nodes (among them the Debian
# packages built, installed and run by a Slurm cluster), and ends with one line
# "N passed, N failed". Exit status 0 only if nothing failed.
#
#   contrib/run-tests.sh            everything
#   contrib/run-tests.sh unit       build + make check only (no qemu)
#
# The brief perf run comes first, the unit tests beside it at nice 19,
# then the other testbed suites in two lanes at once (below).
#
# Dependencies are cached outside the clone in $RVT_CACHE (default
# ~/.cache/rvt): the UCX source tree, the guest kernel, UCX's own UCT
# and UCP tests with rvt instantiated (contrib/ucx-gtest.sh, built once,
# about 30 minutes) and UCX 1.22.0 (its release tarball fetched once unless a local
# copy is found, see setup-deps.sh; built once, about 8 minutes: the second
# leg, in ./build122, runs the module-loading checks and the testbed's
# plugin and integration tests against it), and ccache's objects
# ($RVT_CACHE/ccache; a fresh clone's build compiles only what differs
# from the last build's sources). Soft-iWARP (siw.ko) is built
# once by the site check's step (test/testbed/check.sh), the only one that
# loads it.
set -u -o pipefail
top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
cd "$top" || exit 1
what=${1:-all}
case $what in all|unit) ;; *) echo "usage: $0 [all|unit]" >&2; exit 2 ;; esac

passed=0
failed=0
results=()
started=$SECONDS
step() { echo; echo "==== $* ($(date +%T), +$((SECONDS - started))s)"; }
# record SUITE LOG RC: count the suite's PASS/FAIL lines; a suite that
# failed without a FAIL line still counts as one failure
record() {
    local suite=$1 log=$2 rc=$3 p f
    p=$(grep -cE '^PASS: ' "$log")
    f=$(grep -cE '^(FAIL|ERROR): ' "$log")
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
    passed=$((passed + p))
    failed=$((failed + f))
    results+=("$(printf '%-34s %3d passed, %d failed' "$suite" "$p" "$f")")
}
finish() {
    echo
    echo "==== summary ($((SECONDS - started)) s)"
    printf '  %s\n' "${results[@]}"
    echo "$passed passed, $failed failed"
    [ "$failed" = 0 ] && exit 0
    exit 1
}
logs=$top/build/test-logs
cache=${RVT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rvt}

# The testbed suites: id, the suite's name in the summary, the headline,
# the command. Run by run_lane, shown by show_leg.
declare -A leg_name leg_title leg_cmd
add_leg() { # add_leg ID NAME TITLE COMMAND...
    local id=$1
    leg_name[$id]=$2
    leg_title[$id]=$3
    shift 3
    leg_cmd[$id]=$(printf '%q ' "$@")
}
add_leg runner "testbed runner" "testbed runner tests" \
    test/testbed/test-testbed.sh
add_leg selftest "testbed self-test" \
    "testbed self-test: real RDMA between 4 nodes" test/testbed/selftest.sh 4
add_leg site "site check (testbed)" \
    "site check: rvt-check says yes on rxe, and refuses Soft-iWARP with the reason, as rvtd does (testbed)" \
    test/testbed/check.sh build
add_leg integration "integration (testbed)" \
    "integration tests: real verbs in the testbed" \
    test/testbed/integration.sh build
add_leg traffic "traffic (testbed)" \
    "data path: 3 nodes x 4 clients, SIGKILL, link down (testbed)" \
    test/testbed/traffic.sh build
add_leg flood "flood (testbed)" \
    "flood: a third node floods an agent's handshake UD QP in each way under verified traffic; no peer lost, every op verified, CPU and log bounded (testbed)" \
    test/testbed/flood.sh build
add_leg soak "soak (testbed)" \
    "soak: processes attach, register, transfer and detach for 2 minutes; the agents stay flat (testbed)" \
    test/testbed/soak.sh --minutes 2 build
add_leg chaos "chaos (testbed)" \
    "chaos: processes killed, links down, processes stopped under traffic and MPI; nothing lost, nothing hung, the agents back to their baseline (testbed)" \
    test/testbed/chaos.sh --minutes 1 build
add_leg perftest "perftest (testbed)" \
    "ucx_perftest: rvt next to rc_verbs, UCT and UCP (testbed)" \
    test/testbed/perftest.sh build
add_leg select "transport selection (testbed)" \
    "UCX_TLS unset: UCP keeps rc_verbs for a small job and takes ud_verbs and rvt for a large one (testbed)" \
    test/testbed/select.sh build
# brief: the hour (perf-guest.sh: the pollers and rendezvous sections,
# whose findings docs/performance.md states, run in the full suite only)
add_leg perf "perf (testbed)" \
    "performance: rvt / rc_verbs ratios and the per-hop trace (testbed)" \
    test/testbed/perf.sh build brief
add_leg mpi "mpi, shmem (testbed)" \
    "Open MPI and OpenSHMEM over rvt: 2 nodes x 4 processes (testbed)" \
    test/testbed/mpi.sh build
add_leg uct_conformance "UCT conformance (testbed)" \
    "UCX's own UCT tests for rvt beside rc_verbs (testbed; the suite is built once)" \
    test/testbed/conformance.sh build
add_leg ucp_conformance "UCP conformance (testbed)" \
    "UCX's own UCP tests for rvt and ud_v,rvt beside rc_v: the same cases pass (testbed)" \
    test/testbed/ucp-conformance.sh build
# the Debian packages built (through ccache, at one path whatever the
# clone's: build-package.sh), lintian, installed into a throwaway root;
# then a Slurm cluster runs jobs with the installed files
add_leg packages "Debian packages" \
    "the Debian packages: built from the release tarball, lintian, their files, installed into a throwaway root, what they install works" \
    env RVT_DEB_WORKDIR="$cache/deb-build" test/install/check-deb.sh build
add_leg site_jobs "site jobs: Slurm (testbed)" \
    "at a site: Slurm runs MPI and OpenSHMEM jobs with the installed packages, agents placed by the packaged prolog (testbed)" \
    test/testbed/site-jobs.sh --installed build
# The second UCX: 1.22.0, built once into the cache (setup-deps.sh
# --ucx), rvt built against it in build122 (the unit tests do not depend
# on UCX's version: only what loads or runs the module), then UCX loading
# rvt as a plugin and the integration tests. Its suites run only when
# the build did (build_122 writes build122/.built).
add_leg ucx122 "UCX 1.22 build" "UCX 1.22: dependencies (cached) and build" \
    build_122
# check_PROGRAMS empty: the unit tests are the 1.13 leg's
add_leg ucx122_loading "UCX 1.22 make check (loading)" \
    "UCX 1.22: module loading, the source-tree check, make install" \
    make -C build122 check check_PROGRAMS= \
    TESTS='test/uct/check-module-loading.sh test/configure/check-ucx-src.sh test/install/check-install.sh'
add_leg ucx122_plugin "UCX 1.22 plugin (testbed)" \
    "UCX 1.22: rvt as UCX's plugin, no preload; its ucx_perftest over rvt and rc_verbs; Open MPI on it (testbed)" \
    test/testbed/plugin.sh build122
add_leg ucx122_select "UCX 1.22 transport selection (testbed)" \
    "UCX 1.22, UCX_TLS unset: the lanes UCP chooses by the job's size (testbed)" \
    test/testbed/select.sh build122
# rvtd_* and shared_pd load no UCX: the 1.13 leg has run them. UCP 1.22
# selects no atomic protocol on an endpoint with peer error handling, over
# any transport, and then aborts (README, "Limits and known issues"): the
# UCP atomic departure cases wait. The departure cases run with the
# departed process on the other node only: on this node or the other is
# the agent's routing (its loopback peer or a remote one), which UCX's
# version does not reach; the 1.13 leg runs both.
add_leg ucx122_integration "UCX 1.22 integration (testbed)" \
    "UCX 1.22: integration tests that load UCX (testbed)" \
    test/testbed/integration.sh build122 \
    '-rvtd_*:shared_pd.*:*ucp_rvt_departure_ops*rvt_atomic_*:*ucp_rvt_departure_ops*_this_node'

# shellcheck disable=SC2317 # run by run_lane, through eval
build_122() {
    local ucx122
    rm -f build122/.built
    if ucx122=$(contrib/setup-deps.sh --ucx=1.22.0) && eval "$ucx122" &&
        mkdir -p build122 &&
        (cd build122 && ../configure --with-ucx="$UCX_PREFIX" \
            --with-ucx-src="$UCX_SRC" &&
            make -j"$(nproc)" all &&
            make -j"$(nproc)" integration-programs test/mpi/rvt_mpi_check) \
            >"$top/build/build122.log" 2>&1; then
        echo "PASS: UCX 1.22: $UCX_PREFIX, source tree $UCX_SRC, rvt built in build122"
        touch build122/.built
    else
        tail -40 build/build122.log 2>/dev/null
        echo "FAIL: UCX 1.22 set-up or build (log: build/build122.log)"
        return 1
    fi
}

# What a suite needs of the host's work (run beside the perf run, then
# beside the lanes): UCX 1.22's build, the packages' installed tree.
# The suite waits for that leg to end; no lane waits for the rest.
declare -A leg_needs=([ucx122_plugin]=ucx122 [ucx122_select]=ucx122
    [ucx122_integration]=ucx122 [site_jobs]=packages)
# wait_for_leg ID: until the leg (or make_check: make-check) has ended
# (its .rc file), or the host's work is gone without it
wait_for_leg() {
    while [ ! -f "$logs/$1.log.rc" ] && kill -0 "${host_work:-0}" 2>/dev/null; do
        sleep 1
    done
}

# run_lane LANE ID...: the suites one after another, each one's output
# into its log, its exit status and times beside it; a line as each
# starts and ends
run_lane() {
    local lane=$1 id log t0 rc
    shift
    mkdir -p "$logs"
    for id in "$@"; do
        log=$logs/$id.log
        if [ -n "${leg_needs[$id]:-}" ]; then
            wait_for_leg "${leg_needs[$id]}"
        fi
        if [[ $id == ucx122_* ]] && [ ! -f build122/.built ]; then
            echo "FAIL: not run: UCX 1.22 did not build" >"$log"
            echo "1 - 0 $lane" >"$log.rc"
            continue
        fi
        t0=$SECONDS
        echo "---- $(date +%T) lane $lane: ${leg_name[$id]} starts"
        eval "${leg_cmd[$id]}" </dev/null >"$log" 2>&1
        rc=$?
        echo "$rc $(date -d "@$((EPOCHSECONDS - SECONDS + t0))" +%T) $((SECONDS - t0)) $lane" >"$log.rc"
        echo "---- $(date +%T) lane $lane: ${leg_name[$id]} ends after $((SECONDS - t0)) s:" \
            "$(grep -cE '^PASS: ' "$log") passed, $(grep -cE '^(FAIL|ERROR): ' "$log") failed"
    done
}

# show_leg ID: the suite's headline, its whole output, its count
show_leg() {
    local id=$1 log=$logs/$1.log rc at secs lane
    read -r rc at secs lane <"$log.rc"
    echo
    echo "==== ${leg_title[$id]} (lane ${lane:-?}, from ${at:-?}, ${secs:-?} s)"
    cat "$log"
    record "${leg_name[$id]}" "$log" "$rc"
}

step "dependencies"
ucx_line=$(contrib/setup-deps.sh) || { echo "setup-deps failed"; failed=1; finish; }
eval "$ucx_line"
echo "UCX source tree: $UCX_SRC"

step "build"
# ccache keys an object by its preprocessed source and flags, not by the
# clone's path (base and hash dirs), so that every clone shares the
# cache. Through its compiler links first in PATH, not CC="ccache gcc":
# every compiler a build runs (configure's, MPI's wrappers', UCX's) goes
# through it, and configure sees plain compiler names.
if [ -d /usr/lib/ccache ]; then
    export PATH=/usr/lib/ccache:$PATH
    export CCACHE_DIR=${CCACHE_DIR:-$cache/ccache}
    export CCACHE_BASEDIR=$top CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-4G}
    ccache -z >/dev/null
fi
mkdir -p build
# `make check TESTS=`: the test programs too (the testbed suites run
# them), no test yet
if ! { ./autogen.sh && cd build && ../configure --with-ucx-src="$UCX_SRC" &&
       make -j"$(nproc)" && make -j"$(nproc)" check TESTS=; } \
       > "$top/build/build.log" 2>&1; then
    tail -40 "$top/build/build.log"
    echo "FAIL: build (log: build/build.log)"
    failed=$((failed + 1))
    results+=("build failed")
    finish
fi
cd "$top" || exit 1
sed -n '/rvt configuration/,$p' build/build.log | sed -n '1,/^$/p' | head -30
[ -n "${CCACHE_DIR:-}" ] && ccache --print-stats |
    awk -F'\t' '$1 ~ /^(direct_cache_hit|preprocessed_cache_hit|cache_miss)$/ {
        printf "%s%s %s", sep, $1, $2; sep = ", " } END { print "" }' |
    sed 's/^/ccache: /'

# make_check: the unit tests (make check), then their GoogleTest cases
# counted one by one, into build/test-logs/make-check.log; its exit
# status in the .rc file beside it
make_check() {
    local log=$logs/make-check.log rc
    mkdir -p "$logs"
    make -C build check -j"$(nproc)" >"$log" 2>&1
    rc=$?
    echo "$rc" >"$log.rc"
    # count the GoogleTest cases too, not just the binaries that hold them
    local gtest_logs=(build/test/gtest/rvt_unit_tests.log
        build/test/gtest/rvt_uct_host_tests.log)
    if [ -f "${gtest_logs[0]}" ]; then
        [ -f "${gtest_logs[1]}" ] || unset 'gtest_logs[1]'
        # a parameterised case's failure line names its parameter before
        # the time (lib.sh, gtest_verdicts); the closing list has no time
        awk '/^\[       OK \]/ { print "PASS: unit " $4 }
             /^\[  FAILED  \] [^ ,]+(, where .*)? \([0-9]+ ms\)$/ {
                 n = $4; sub(/,$/, "", n); print "FAIL: unit " n }' \
            "${gtest_logs[@]}" >build/unit-cases.log
    fi
}
# show_make_check: its output, its count and its cases' count
show_make_check() {
    local log=$logs/make-check.log
    cat "$log"
    record "make check" "$log" "$(cat "$log.rc")"
    if [ -f build/unit-cases.log ]; then
        echo "unit test cases: $(grep -c '^PASS' build/unit-cases.log) passed"
        grep '^FAIL' build/unit-cases.log
        record "unit test cases (gtest)" build/unit-cases.log 0
    fi
}

if [ "$what" = unit ]; then
    step "unit tests: make check"
    make_check
    show_make_check
    finish
fi

step "testbed: prepare (guest kernel, initramfs)"
if ! contrib/testbed/testbed prepare; then
    echo "FAIL: testbed prepare"
    failed=$((failed + 1))
    finish
fi
# First the brief perf run. Beside it, at nice 19, the host's own work:
# the unit tests, then UCX 1.22's build and its loading checks and the
# Debian packages. Then two lanes of testbed suites at once. A testbed run
# keeps about one of the host's two cores busy (the runner's last line
# says how many: qemu's CPU seconds a second), so two run beside each
# other in little more time than one. The perf run's figures are ratios
# within its boot: no other testbed runs beside it, and the host's work
# at nice 19 takes only the CPU its guest leaves (about half a core).
# The lanes start when the unit tests have ended (at nice 19 beside two
# guests, tests that wait for timeouts could starve); a suite that needs
# more of the host's work waits for it (leg_needs). Each suite's output
# goes to its log and is shown whole, in the lanes' order, once all have
# ended; meanwhile a line marks each suite's start and end.
step "the brief perf run; beside it at nice 19 make check, UCX 1.22's build, the packages; then two lanes of testbed suites"
alone=(perf)
host=(ucx122 ucx122_loading packages)
lanes_a=(runner integration traffic soak mpi uct_conformance site_jobs)
lanes_b=(selftest site chaos ucx122_plugin ucx122_select ucx122_integration
    flood select perftest ucp_conformance)
rm -f "$logs"/*.rc
(
    renice -n 19 "$BASHPID" >/dev/null
    make_check
    run_lane host "${host[@]}"
) &
host_work=$!
run_lane alone "${alone[@]}"
wait_for_leg make-check # make_check's log is make-check.log
echo "---- $(date +%T) make check ends: exit $(cat "$logs/make-check.log.rc" 2>/dev/null)," \
    "$(grep -c '^PASS' build/unit-cases.log 2>/dev/null) unit test cases passed"
run_lane a "${lanes_a[@]}" &
lane_a=$!
run_lane b "${lanes_b[@]}" &
lane_b=$!
wait "$lane_a" "$lane_b" "$host_work"
step "unit tests: make check"
show_make_check
for id in "${alone[@]}" "${host[@]}" "${lanes_a[@]}" "${lanes_b[@]}"; do
    show_leg "$id"
done
finish
