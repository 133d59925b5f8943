#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Every rvt test, from a fresh Debian 12 machine or clone: installs what is
# missing (contrib/setup-deps.sh, the testbed's kernel), builds in ./build,
# runs the unit tests (make check), the testbed runner's own tests and the
# testbed suites with real RDMA between nodes (among them the Debian
# packages built, installed and run by a Slurm cluster), and ends with one line
# "N passed, N failed, N skipped". Exit status 0 only if nothing failed.
#
#   contrib/run-tests.sh            the gate (what CI runs; at most 45
#                                   minutes with warm caches): every suite,
#                                   each with the cases that carry its
#                                   capability
#   contrib/run-tests.sh full       every case of every suite (at most 85)
#   contrib/run-tests.sh unit       build + make check only (no qemu)
#
# docs/testing.md's table says what each tier holds of each suite, and
# why full alone runs the rest. Counting (contrib/test-count.sh): a suite's
# PASS, FAIL and SKIP lines; a skip no stated reason covers fails, and so
# does a suite that ran no check; figures are no test.
#
# The brief perf run comes first, the unit tests beside it at nice 19,
# then the other testbed suites in two lanes at once (below).
#
# Dependencies are cached outside the clone in $RVT_CACHE (default
# ~/.cache/rvt): the UCX source tree, the guest kernel, UCX's own UCT
# and UCP tests with rvt instantiated (contrib/ucx-gtest.sh, built once,
# about 30 minutes, on the host beside the perf run), the other UCX
# releases a site runs, 1.16.0, 1.18.1 and 1.22.0 (each release tarball
# fetched once unless a local copy is found, see setup-deps.sh; built
# once, about 8 minutes each: rvt is built against each in ./build116,
# ./build118, ./build122, whose legs run the module-loading checks and
# testbed suites against it), and ccache's objects ($RVT_CACHE/ccache;
# a fresh clone's build compiles only what differs from the last build's
# sources). Soft-iWARP (siw.ko) is built once by the site check's step
# (test/testbed/check.sh), the only one that loads it.
set -u -o pipefail
top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
cd "$top" || exit 1
tier=${1:-gate}
case $tier in gate|full|unit) ;; *) echo "usage: $0 [gate|full|unit]" >&2; exit 2 ;; esac
# shellcheck source=contrib/test-count.sh
. "$top/contrib/test-count.sh"

passed=0
failed=0
skipped=0
results=()
started=$SECONDS
step() { echo; echo "==== $* ($(date +%T), +$((SECONDS - started))s)"; }
# record SUITE LOG RC: count the suite's verdicts (count_log), with the
# failures the log alone would not show printed first
record() {
    local suite=$1 log=$2 rc=$3 p f s counted
    counted=$(count_log "$log" "$rc")
    sed '$d' <<<"$counted"
    read -r p f s < <(tail -n 1 <<<"$counted")
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
    results+=("$(printf '%-34s %3d passed, %d failed, %d skipped' "$suite" "$p" "$f" "$s")")
}
finish() {
    echo
    echo "==== summary: $tier ($((SECONDS - started)) s)"
    printf '  %s\n' "${results[@]}"
    echo "$passed passed, $failed failed, $skipped skipped"
    [ "$failed" = 0 ] && exit 0
    exit 1
}
logs=$top/build/test-logs
cache=${RVT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rvt}

# The testbed suites: id, the suite's name in the summary, the headline,
# the command (full's). Run by run_lane, shown by show_leg. in_gate ID
# COMMAND... gives the gate's command where it runs fewer cases; a suite
# with neither in_gate nor a place in the gate's lanes runs in full alone
# (docs/testing.md says why, suite by suite).
declare -A leg_name leg_title leg_cmd leg_gate
add_leg() { # add_leg ID NAME TITLE COMMAND...
    local id=$1
    leg_name[$id]=$2
    leg_title[$id]=$3
    shift 3
    leg_cmd[$id]=$(printf '%q ' "$@")
}
in_gate() { # in_gate ID COMMAND...: the gate's cases of suite ID
    local id=$1
    shift
    leg_gate[$id]=$(printf '%q ' "$@")
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
# the gate: every case but the UCP departure cases, of which it keeps
# six operations (an AM, both rendezvous, a put, an atomic, a flush), each
# closed on this node and killed on the other; rc_verbs' timing rows and
# the other 30 are full's (the same paths, by other operations)
in_gate integration test/testbed/integration.sh build \
    '-*ucp_rvt_departure_ops*/rvt_am_bcopy_*:*ucp_rvt_departure_ops*/rvt_am_zcopy_*:*ucp_rvt_departure_ops*/rvt_am_rndv_*:*ucp_rvt_departure_ops*/rvt_tag_eager_*:*ucp_rvt_departure_ops*/rvt_get_*:*ucp_rvt_departure_ops*_closed_other_node:*ucp_rvt_departure_ops*_killed_this_node:*ucp_rvt_departure_ops*/rc_*'
add_leg traffic "traffic (testbed)" \
    "data path: 3 nodes x 4 clients, SIGKILL, link down (testbed)" \
    test/testbed/traffic.sh build
add_leg flood "flood (testbed)" \
    "flood: a third node floods an agent's handshake UD QP in each way under verified traffic; no peer lost, every op verified, CPU and log bounded (testbed)" \
    test/testbed/flood.sh build
# the gate: the wrong-key flood (the credential path) and the forged one
# (a claimed UD QPN not the sender's) between the phases
# without flood; the garbage, other-job and replay floods are full's
in_gate flood test/testbed/flood.sh build --modes=wrong-key,forged
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
# brief: the hour (perf_guest.py: the pollers and rendezvous sections,
# whose findings docs/performance.md states, run in the full suite only)
add_leg perf "perf (testbed)" \
    "performance: rvt / rc_verbs ratios and the per-hop trace (testbed)" \
    test/testbed/perf.sh build brief
add_leg mpi "mpi, shmem (testbed)" \
    "Open MPI and OpenSHMEM over rvt: 2 nodes x 4 processes (testbed)" \
    test/testbed/mpi.sh build
# the gate: Open MPI to 1 MiB, its rendezvous as writes with immediate,
# OpenSHMEM, the QPs shared and the agent's death; full adds
# MPI_THREAD_MULTIPLE, 16 MiB and the ud_verbs,rvt job (mpi-guest.sh)
in_gate mpi test/testbed/mpi.sh build gate
add_leg uct_conformance "UCT conformance (testbed)" \
    "UCX's own UCT tests for rvt beside rc_verbs (testbed; the suite is built once)" \
    test/testbed/conformance.sh build
# the gate: the MD, RMA, AM, an atomic, pending, flush, peer failure and
# endpoint groups; the other 13 are full's
in_gate uct_conformance test/testbed/conformance.sh build test_md \
    uct_p2p_rma_test uct_p2p_am_test uct_amo_cswap_test test_uct_pending \
    uct_flush_test test_uct_peer_failure test_uct_ep
add_leg ucp_conformance "UCP conformance (testbed)" \
    "UCX's own UCP tests for rvt and ud_v,rvt beside rc_v: the same cases pass (testbed)" \
    test/testbed/ucp-conformance.sh build
# the gate: peer failure, the rendezvous of tag matching, AM, RMA and
# atomics; the other 6 groups are full's
in_gate ucp_conformance test/testbed/ucp-conformance.sh build \
    test_ucp_peer_failure test_ucp_tag_match_rndv test_ucp_am_nbx \
    test_ucp_rma test_ucp_atomic64
# UCX's gtest (UCT and UCP conformance), built once into the cache on
# the host beside the perf run, where the conformance suites find it
add_leg ucx_gtest "UCX's gtest build" "UCX's own tests: built once with rvt instantiated (cached)" \
    build_gtest
# the Debian packages built (through ccache, at one path whatever the
# clone's: build-package.sh), lintian, installed into a throwaway root
# (and upgraded, removed, purged in another);
# then a Slurm cluster runs jobs with the installed files
add_leg packages "Debian packages" \
    "the Debian packages: built from the release tarball, lintian, their files, installed into a throwaway root, what they install works; installed, upgraded, removed and purged in another" \
    env RVT_DEB_WORKDIR="$cache/deb-build" test/install/check-deb.sh build
add_leg hub_sim "one agent, many nodes (host)" \
    "rvt_hub_sim: one real agent against 1,000, 4,096 and 10,000 far ones: the storm, memory, idle CPU, a thousand failing and restarting" \
    build/test/bench/rvt_hub_sim
in_gate hub_sim build/test/bench/rvt_hub_sim --peers=1000 --idle=6 \
    --fail=100 --restart=100
add_leg site_jobs "site jobs: Slurm (testbed)" \
    "at a site: Slurm runs MPI and OpenSHMEM jobs with the installed packages, agents placed by the packaged prolog (testbed)" \
    test/testbed/site-jobs.sh --installed build
# The other UCX releases a site runs (docs/operations.md, "Supported UCX
# releases"), each built once into the cache (setup-deps.sh --ucx) and rvt
# built against it in its own directory (ucx_build_dir); the unit tests do
# not depend on UCX's version: only what loads or runs the module. A
# release's suites run only when its build did (build_ucx writes
# BUILD/.built).
declare -A ucx_build_dir=([1.16.0]=build116 [1.18.1]=build118
    [1.22.0]=build122)
# ucx_release_legs ID VERSION: the build and the loading checks (the
# module found as the README says, the UCX module's host tests: its iface
# and ep through this UCX's UCT API, the source-tree check, make
# install; the agent's unit tests do not depend on UCX: the 1.13 leg's);
# the suites ID_* wait for the build ID and need its directory built
declare -A ucx_leg_dir
ucx_release_legs() {
    local id=$1 version=$2 dir=${ucx_build_dir[$2]}
    ucx_leg_dir[$id]=$dir
    add_leg "$id" "UCX ${version%.*} build" \
        "UCX $version: dependencies (cached) and build" build_ucx "$version" full
    in_gate "$id" build_ucx "$version" gate
    add_leg "${id}_loading" "UCX ${version%.*} make check (loading)" \
        "UCX $version: module loading, the UCX module's host tests, the source-tree check, make install" \
        make -C "$dir" check check_PROGRAMS=test/gtest/rvt_uct_host_tests \
        TESTS='test/uct/check-module-loading.sh test/gtest/rvt_uct_host_tests test/configure/check-ucx-src.sh test/install/check-install.sh'
}
# UCX 1.22: rvt as a plugin, the lanes UCP chooses, the integration tests
ucx_release_legs ucx122 1.22.0
add_leg ucx122_plugin "UCX 1.22 plugin (testbed)" \
    "UCX 1.22: rvt as UCX's plugin, no preload; its ucx_perftest over rvt and rc_verbs; Open MPI on it (testbed)" \
    test/testbed/ucx-release.sh build122
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
# UCX 1.16 (Ubuntu 24.04's) and 1.18 (Debian 13's): the module preloaded,
# as with 1.13; UCP and Open MPI between two nodes, UCX's UCP
# peer-failure group beside rc_v (its gtest built once for the release),
# the lanes UCP chooses
for version in 1.16.0 1.18.1; do
    id=ucx$(tr -d . <<<"${version%.*}")
    dir=${ucx_build_dir[$version]}
    v=${version%.*}
    ucx_release_legs "$id" "$version"
    add_leg "${id}_gtest" "UCX $v gtest build" \
        "UCX $version: UCX's own UCP tests built once with rvt instantiated (cached)" \
        build_gtest "--ucx=$version"
    add_leg "${id}_traffic" "UCX $v traffic (testbed)" \
        "UCX $version: rvt preloaded; its ucx_perftest over rvt and rc_verbs; Open MPI on it (testbed)" \
        test/testbed/ucx-release.sh "$dir"
    add_leg "${id}_ucp" "UCX $v UCP peer failure (testbed)" \
        "UCX $version: UCX's UCP peer-failure group for rvt and ud_v,rvt beside rc_v (testbed)" \
        test/testbed/ucp-conformance.sh "$dir" test_ucp_peer_failure
    add_leg "${id}_select" "UCX $v transport selection (testbed)" \
        "UCX $version, UCX_TLS unset: the lanes UCP chooses by the job's size (testbed)" \
        test/testbed/select.sh "$dir"
done

# shellcheck disable=SC2317 # run by run_lane, through eval
build_ucx() { # build_ucx VERSION gate|full: full builds the integration tests too
    local version=$1 dir=${ucx_build_dir[$1]} line extra=()
    [ "$2" = full ] && extra=(integration-programs)
    rm -f "$dir/.built"
    if line=$(contrib/setup-deps.sh --ucx="$version") && eval "$line" &&
        mkdir -p "$dir" &&
        (cd "$dir" && ../configure --with-ucx="$UCX_PREFIX" \
            --with-ucx-src="$UCX_SRC" &&
            make -j"$(nproc)" all &&
            make -j"$(nproc)" "${extra[@]}" test/mpi/rvt_mpi_check) \
            >"$top/build/$dir.log" 2>&1; then
        echo "PASS: UCX $version: $UCX_PREFIX, source tree $UCX_SRC, rvt built in $dir"
        touch "$dir/.built"
    else
        tail -40 "build/$dir.log" 2>/dev/null
        echo "FAIL: UCX $version set-up or build (log: build/$dir.log)"
        return 1
    fi
}

# shellcheck disable=SC2317 # run by run_lane, through eval
build_gtest() { # build_gtest [--ucx=VERSION]: Debian's UCX, or that release
    local line log=build/ucx-gtest${1:+-${1#--ucx=}}.log
    if line=$(contrib/ucx-gtest.sh "$@" 2>"$top/$log"); then
        echo "PASS: UCX's gtest${1:+ of UCX ${1#--ucx=}}: ${line#GTEST=}"
    else
        tail -40 "$log"
        echo "FAIL: building UCX's gtest${1:+ of UCX ${1#--ucx=}} (log: $log)"
        return 1
    fi
}

# What a suite needs of the host's work (run beside the perf run, then
# beside the lanes): a UCX release's build (every suite ucxNNN_* needs
# the build ucxNNN, and does not run if it failed: ucx_release_legs), UCX's
# gtest, the packages' installed tree. The suite waits for those legs to
# end; no lane waits for the rest.
declare -A leg_needs=([site_jobs]=packages
    [uct_conformance]=ucx_gtest [ucp_conformance]=ucx_gtest
    [ucx116_ucp]=ucx116_gtest [ucx118_ucp]=ucx118_gtest)
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
    local lane=$1 id log t0 rc cmd release
    shift
    mkdir -p "$logs"
    for id in "$@"; do
        log=$logs/$id.log
        if [ -n "${leg_needs[$id]:-}" ]; then
            wait_for_leg "${leg_needs[$id]}"
        fi
        release=${id%%_*}
        if [ "$release" != "$id" ] && [ -n "${ucx_leg_dir[$release]:-}" ]; then
            wait_for_leg "$release"
            if [ ! -f "${ucx_leg_dir[$release]}/.built" ]; then
                echo "FAIL: not run: ${leg_name[$release]} failed" >"$log"
                echo "1 - 0 $lane" >"$log.rc"
                continue
            fi
        fi
        t0=$SECONDS
        echo "---- $(date +%T) lane $lane: ${leg_name[$id]} starts"
        cmd=${leg_cmd[$id]}
        [ "$tier" = gate ] && cmd=${leg_gate[$id]:-$cmd}
        echo "$cmd" >"$log.cmd"
        eval "$cmd" </dev/null >"$log" 2>&1
        rc=$?
        echo "$rc $(date -d "@$((EPOCHSECONDS - SECONDS + t0))" +%T) $((SECONDS - t0)) $lane" >"$log.rc"
        echo "---- $(date +%T) lane $lane: ${leg_name[$id]} ends after $((SECONDS - t0)) s:" \
            "$(grep -cE '^PASS: ' "$log") passed, $(grep -cE '^(FAIL|ERROR): ' "$log") failed," \
            "$(grep -cE '^SKIP: ' "$log") skipped"
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

# make_check: the unit tests (make check) into
# build/test-logs/make-check.log, its exit status in the .rc file beside
# it; then their GoogleTest cases one by one (gtest_cases) into
# build/unit-cases.log. The binaries' logs are removed first: automake
# leaves the log of a test it no longer runs, which must not be counted.
gtest_bins=(test/gtest/rvt_unit_tests test/gtest/rvt_uct_host_tests)
make_check() {
    local log=$logs/make-check.log rc b found=()
    mkdir -p "$logs"
    forget_test_logs build "${gtest_bins[@]}"
    rm -f build/unit-cases.log
    make -C build check -j"$(nproc)" >"$log" 2>&1
    rc=$?
    echo "$rc" >"$log.rc"
    for b in "${gtest_bins[@]}"; do
        [ -f "build/$b.log" ] && found+=("build/$b.log")
    done
    [ ${#found[@]} -gt 0 ] && gtest_cases "${found[@]}" >build/unit-cases.log
}
# show_make_check: its output and count (a gtest binary not counted as
# one more test: its cases are), then its cases' count
show_make_check() {
    local log=$logs/make-check.log
    cat "$log"
    without_gtest_binaries "$log" "${gtest_bins[@]}" >"$log.counted"
    record "make check" "$log.counted" "$(cat "$log.rc")"
    if [ -f build/unit-cases.log ]; then
        echo "unit test cases: $(grep -c '^PASS' build/unit-cases.log) passed"
        grep -E '^(FAIL|SKIP)' build/unit-cases.log
        record "unit test cases (gtest)" build/unit-cases.log 0
    fi
}

if [ "$tier" = unit ]; then
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
# the unit tests, then UCX's gtest, the other UCX releases' builds and
# their loading checks, and the Debian packages. Then two lanes of
# testbed suites at once. A testbed run keeps about one of the host's two
# cores busy (the runner's last line says how many: qemu's CPU seconds a
# second), so two run beside each other in little more time than one. The perf run's figures are ratios
# within its boot: no other testbed runs beside it, and the host's work
# at nice 19 takes only the CPU its guest leaves (about half a core).
# The lanes start when the unit tests have ended (at nice 19 beside two
# guests, tests that wait for timeouts could starve); a suite that needs
# more of the host's work waits for it (leg_needs). Each suite's output
# goes to its log and is shown whole, in the lanes' order, once all have
# ended; meanwhile a line marks each suite's start and end.
step "$tier: the brief perf run; beside it at nice 19 make check, UCX's gtest, the other UCX releases, the packages; then two lanes of testbed suites"
alone=(perf)
# the host's work in two parts at once, each at nice 19: with cold
# caches these builds are what the lanes wait for (UCX's gtest about 30
# minutes, UCX 1.22 and the packages about 20, each other UCX release
# about 10 and its UCP tests about 15), and the lanes leave them little
# CPU; with warm caches they take minutes
if [ "$tier" = full ]; then
    host_a=(ucx_gtest ucx116_gtest ucx118_gtest)
    host_b=(ucx122 packages ucx122_loading ucx116 ucx116_loading ucx118
        ucx118_loading)
    # after the lanes, alone and not niced: its figures (the storm's time,
    # the hub's idle CPU) are measurements, and at nice 19 beside two
    # guests its ten thousand far agents starve until their handshakes
    # give up
    last=(hub_sim)
    # two lanes of about the same length (the log gives each suite's time)
    lanes_a=(runner integration traffic soak select mpi ucx116_select
        uct_conformance site_jobs)
    lanes_b=(selftest site chaos ucx122_plugin ucx122_select
        ucx122_integration ucx116_traffic ucx118_traffic flood perftest
        ucp_conformance ucx118_select ucx116_ucp ucx118_ucp)
else
    # the gate: full's suites less soak, chaos, perftest, UCX 1.22's
    # selection and integration, and the testbed suites of UCX 1.16 and
    # 1.18 (docs/testing.md: why), the rest with their in_gate cases; of
    # UCX 1.16 and 1.18, 1.16's build and loading checks
    host_a=(ucx_gtest)
    host_b=(ucx122 packages ucx122_loading ucx116 ucx116_loading hub_sim)
    last=()
    lanes_a=(integration mpi uct_conformance site_jobs)
    lanes_b=(selftest site flood traffic select runner ucx122_plugin
        ucp_conformance)
fi
host=("${host_a[@]}" "${host_b[@]}")
rm -f "$logs"/*.rc
(
    renice -n 19 "$BASHPID" >/dev/null
    make_check
    run_lane host "${host_a[@]}" &
    run_lane host "${host_b[@]}"
    wait
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
if [ ${#last[@]} -gt 0 ]; then
    run_lane alone "${last[@]}"
fi
step "unit tests: make check"
show_make_check
for id in "${alone[@]}" "${host[@]}" "${lanes_a[@]}" "${lanes_b[@]}" \
    "${last[@]}"; do
    show_leg "$id"
done
finish
