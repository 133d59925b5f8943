#!/bin/bash
# Every rvt test, from a fresh Debian 12 machine or clone: installs what is
# missing (contrib/setup-deps.sh, the testbed's kernel), builds in ./build,
# runs the unit tests (make check), builds and installs the Debian packages
# (test/install/check-deb.sh), the testbed runner's own tests and the
# testbed suites with real RDMA between nodes, and ends with one line
# "N passed, N failed". Exit status 0 only if nothing failed.
#
#   contrib/run-tests.sh            everything
#   contrib/run-tests.sh unit       build + make check only (no qemu)
#
# Dependencies are cached outside the clone in $RVT_CACHE (default
# ~/.cache/rvt): the UCX source tree, the guest kernel, UCX's own UCT
# tests with rvt instantiated (contrib/ucx-gtest.sh, built once, about 17
# minutes) and UCX 1.22.0 (its release tarball fetched once unless a local
# copy is found, see setup-deps.sh; built once, about 8 minutes: the second
# leg, in ./build122, runs the module-loading checks and the testbed's
# plugin and integration tests against it). Soft-iWARP (siw.ko) is built
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
run_suite() { # run_suite NAME COMMAND...: run, show and count
    local name=$1 log rc
    shift
    mkdir -p "$logs"
    log=$logs/${name// /-}.log
    "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    record "$name" "$log" "$rc"
    return "$rc"
}

step "dependencies"
ucx_line=$(contrib/setup-deps.sh) || { echo "setup-deps failed"; failed=1; finish; }
eval "$ucx_line"
echo "UCX source tree: $UCX_SRC"

step "build"
mkdir -p build
if ! { ./autogen.sh && cd build && ../configure --with-ucx-src="$UCX_SRC" &&
       make -j"$(nproc)"; } > "$top/build/build.log" 2>&1; then
    tail -40 "$top/build/build.log"
    echo "FAIL: build (log: build/build.log)"
    failed=$((failed + 1))
    results+=("build failed")
    finish
fi
cd "$top" || exit 1
sed -n '/rvt configuration/,$p' build/build.log | sed -n '1,/^$/p' | head -30

step "unit tests: make check"
run_suite "make check" make -C build check -j"$(nproc)"
# count the GoogleTest cases too, not just the binaries that hold them
if [ -f build/test/gtest/rvt_unit_tests.log ]; then
    # a parameterised case's failure line names its parameter before the
    # time (lib.sh, gtest_verdicts); the closing list has no time
    awk '/^\[       OK \]/ { print "PASS: unit " $4 }
         /^\[  FAILED  \] [^ ,]+(, where .*)? \([0-9]+ ms\)$/ {
             n = $4; sub(/,$/, "", n); print "FAIL: unit " n }' \
        build/test/gtest/rvt_unit_tests.log \
        $(ls build/test/gtest/rvt_uct_host_tests.log 2>/dev/null) \
        > build/unit-cases.log
    echo "unit test cases: $(grep -c '^PASS' build/unit-cases.log) passed"
    grep '^FAIL' build/unit-cases.log
    record "unit test cases (gtest)" build/unit-cases.log 0
fi

# the Debian packages from the release tarball (contrib/debian): dpkg-
# buildpackage, lintian without errors, file lists, dpkg -i into a
# throwaway root, the installed programs, pages and module; 14-16
# minutes on the 2-core VM (the whole project is built again)
if [ "$what" = all ]; then
    step "Debian packages: build, lintian, install"
    run_suite "Debian packages" test/install/check-deb.sh build
fi

if [ "$what" = all ]; then
    step "testbed: prepare (guest kernel, initramfs)"
    if ! contrib/testbed/testbed prepare; then
        echo "FAIL: testbed prepare"
        failed=$((failed + 1))
        finish
    fi
    step "testbed runner tests"
    run_suite "testbed runner" test/testbed/test-testbed.sh
    step "testbed self-test: real RDMA between 4 nodes"
    run_suite "testbed self-test" test/testbed/selftest.sh 4
    step "site check: rvt-check says yes on rxe, and refuses Soft-iWARP with the reason, as rvtd does (testbed)"
    run_suite "site check (testbed)" test/testbed/check.sh build
    step "integration tests: real verbs in the testbed"
    run_suite "integration (testbed)" test/testbed/integration.sh build
    step "data path: 3 nodes x 4 clients, SIGKILL, link down (testbed)"
    run_suite "traffic (testbed)" test/testbed/traffic.sh build
    step "flood: a third node floods an agent's handshake UD QP in each way under verified traffic; no peer lost, every op verified, CPU and log bounded (testbed)"
    run_suite "flood (testbed)" test/testbed/flood.sh build
    step "soak: processes attach, register, transfer and detach for 2 minutes; the agents stay flat (testbed)"
    run_suite "soak (testbed)" test/testbed/soak.sh --minutes 2 build
    step "chaos: processes killed, links down, processes stopped under traffic and MPI; nothing lost, nothing hung, the agents back to their baseline (testbed)"
    run_suite "chaos (testbed)" test/testbed/chaos.sh --minutes 1 build
    step "ucx_perftest: rvt next to rc_verbs, UCT and UCP (testbed)"
    run_suite "perftest (testbed)" test/testbed/perftest.sh build
    step "UCX_TLS unset: UCP keeps rc_verbs for a small job and takes ud_verbs and rvt for a large one (testbed)"
    run_suite "transport selection (testbed)" test/testbed/select.sh build
    step "performance: rvt / rc_verbs ratios and the per-hop trace (testbed)"
    # brief: the hour (perf-guest.sh: the pollers and rendezvous sections,
    # whose findings docs/performance.md states, run in the full suite only)
    run_suite "perf (testbed)" test/testbed/perf.sh build brief
    step "Open MPI and OpenSHMEM over rvt: 2 nodes x 4 processes (testbed)"
    run_suite "mpi, shmem (testbed)" test/testbed/mpi.sh build
    step "Debian packages in the testbed: ucx_info -d, an MPI job"
    run_suite "Debian packages (testbed)" test/install/check-deb.sh --testbed-only build
    step "UCX's own UCT tests for rvt beside rc_verbs (testbed; the suite is built once)"
    run_suite "UCT conformance (testbed)" test/testbed/conformance.sh build

    # The second UCX: 1.22.0, built once into the cache (setup-deps.sh
    # --ucx), rvt built against it in build122 (the unit tests do not
    # depend on UCX's version: only what loads or runs the module), then
    # UCX loading rvt as a plugin and the UCT integration tests.
    step "UCX 1.22: dependencies (cached) and build"
    if ucx122=$(contrib/setup-deps.sh --ucx=1.22.0) && eval "$ucx122" &&
        mkdir -p build122 &&
        { cd build122 && ../configure --with-ucx="$UCX_PREFIX" \
              --with-ucx-src="$UCX_SRC" && make -j"$(nproc)" all &&
          make -j"$(nproc)" integration-programs test/mpi/rvt_mpi_check; } \
            > "$top/build/build122.log" 2>&1; then
        cd "$top" || exit 1
        echo "UCX 1.22: $UCX_PREFIX, source tree $UCX_SRC"
        step "UCX 1.22: module loading, the source-tree check, make install"
        # check_PROGRAMS empty: the unit tests are the 1.13 leg's
        run_suite "UCX 1.22 make check (loading)" make -C build122 check \
            check_PROGRAMS= \
            TESTS='test/uct/check-module-loading.sh test/configure/check-ucx-src.sh test/install/check-install.sh'
        step "UCX 1.22: rvt as UCX's plugin, no preload; its ucx_perftest over rvt and rc_verbs; Open MPI on it (testbed)"
        run_suite "UCX 1.22 plugin (testbed)" test/testbed/plugin.sh build122
        step "UCX 1.22, UCX_TLS unset: the lanes UCP chooses by the job's size (testbed)"
        run_suite "UCX 1.22 transport selection (testbed)" test/testbed/select.sh build122
        # rvtd_* and shared_pd load no UCX: the 1.13 leg has run them.
        # UCP 1.22 selects no atomic protocol over rvt and then aborts
        # (README, "Limits and known issues"): its UCP atomic departure
        # cases wait.
        step "UCX 1.22: integration tests that load UCX (testbed)"
        run_suite "UCX 1.22 integration (testbed)" \
            test/testbed/integration.sh build122 \
            '-rvtd_*:shared_pd.*:*ucp_rvt_departure_ops*rvt_atomic_*'
    else
        cd "$top" || exit 1
        tail -40 build/build122.log 2>/dev/null
        echo "FAIL: UCX 1.22 set-up or build (log: build/build122.log)"
        failed=$((failed + 1))
        results+=("UCX 1.22 build failed")
    fi
fi
finish
