#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX's own test suite (its gtest), built with `rvt` among the transports
# it instantiates: its UCT tests (test/testbed/conformance.sh runs them
# beside rc_verbs: docs/testing.md, "Conformance: UCX's own UCT tests")
# and its UCP groups (test/testbed/ucp-conformance.sh, beside rc_v:
# docs/testing.md, "Conformance: UCX's own UCP tests").
#
#   contrib/ucx-gtest.sh [--ucx=VERSION]   build once (cached), print
#                                          GTEST=PATH
#
# Without --ucx: from the UCX 1.13.1 tree of Debian's libucx0, as below.
# With --ucx=VERSION (a release setup-deps.sh builds: 1.16.0, 1.18.1,
# 1.22.0): the same from that release's tree and with its build's flags
# (contrib/setup-deps.sh --ucx=VERSION builds both), into
# $RVT_CACHE/ucx-gtest-VERSION, with UCP's tests only; its libraries load
# the modules of that prefix, and the module of a build against it is
# preloaded.
#
# From the UCX 1.13.1 source tree that contrib/setup-deps.sh caches, a copy
# in $RVT_CACHE/ucx-gtest-1.13.1 (the header tree rvt builds against is
# never touched) is
#   1. patched in three places: `rvt` joins UCT_TEST_NO_SELF_TLS in
#      test/gtest/uct/uct_test.h, the list behind UCT_INSTANTIATE_TEST_CASE
#      and UCT_INSTANTIATE_NO_SELF_TEST_CASE (never UCT_TEST_IB_TLS, whose
#      groups test IB internals that rvt does not have), and the component
#      list of UCT_MD_INSTANTIATE_TEST_CASE in test_md.cc; and two rows,
#      `rvt` ("rvt") and `ud_rvt` ("ud_v,rvt"), join UCP's lists after
#      `rc` ("rc_v") in test/gtest/ucp/ucp_test.h: UCP_INSTANTIATE_TEST_CASE
#      and UCP_INSTANTIATE_TEST_CASE_GPU_AWARE (the list of the RMA, mmap
#      and atomic groups);
#   2. configured with the flags of Debian's build (`ucx_info -v`), so that
#      the libraries it builds are layout-compatible with the rvt module
#      built against Debian's UCX, plus --enable-gtest; gcc 12 needs -O2
#      (-O1 fails on an always_inline) and -Wno-error;
#   3. built: UCX's libraries, then the gtest program from UCX's common
#      test code, its generic UCT tests and the UCP test files of the
#      groups ucp-conformance.sh runs (ucp_tests below; the UCS, UCM, IB
#      and other UCP test files are left out, which halves the build).
# About 25 minutes on 2 cores, once, and about 12 more for the UCP files; a
# stamp records what was built, this script's own text included, so that
# a changed patch or file list rebuilds.
set -u -o pipefail
top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
cache=${RVT_CACHE:-$HOME/.cache/rvt}

die() {
    echo "ucx-gtest: $*" >&2
    exit 1
}
note() { echo "ucx-gtest: $*" >&2; }

# the UCX: Debian's 1.13.1 (its ucx_info on PATH), or the one setup-deps
# builds into the cache
version=1.13.1
deps=()
case ${1:-} in
"") ;;
--ucx=?*) version=${1#--ucx=} deps=("$1") ;;
*) die "'${1}': expected no argument or --ucx=VERSION" ;;
esac
dir=$cache/ucx-gtest-$version
log=$cache/ucx-gtest-$version.log

ucx_line=$("$top/contrib/setup-deps.sh" "${deps[@]}") ||
    die "contrib/setup-deps.sh ${deps[*]} failed"
eval "$ucx_line"
ucx_info=ucx_info
[ ${#deps[@]} = 0 ] || ucx_info=$UCX_PREFIX/bin/ucx_info
[ -f "$UCX_SRC/test/gtest/uct/uct_test.h" ] ||
    die "$UCX_SRC has no test/gtest/uct/uct_test.h: not a UCX source tree?"
# 1.13 says "# Version V", 1.22 "# Library version: V"
installed=$("$ucx_info" -v | sed -n 's/^# \(Library version:\|Version\) //p')
[ "$installed" = "$version" ] ||
    die "$ucx_info is UCX '$installed'; this suite is built for $version"
flags_line=$("$ucx_info" -v | sed -n 's/^# Configured with: //p')
[ -n "$flags_line" ] || die "'$ucx_info -v' printed no 'Configured with:'"

# the UCP test files: the groups' own, and what they are built on
# (ucp_test, ucp_datatype; test_ucp_tag for tag_match, test_ucp_memheap
# for rma and atomic)
ucp_tests=(ucp_test ucp_datatype test_ucp_tag test_ucp_memheap
    test_ucp_peer_failure test_ucp_tag_match test_ucp_am test_ucp_rma
    test_ucp_mmap test_ucp_atomic test_ucp_stream test_ucp_wireup
    test_ucp_fence)

stamp=$dir/.rvt-gtest
recipe=$(sha256sum <"$top/contrib/ucx-gtest.sh") || die "cannot read this script"
stamp_text="ucx=$version src=$UCX_SRC recipe=${recipe%% *} configure: $flags_line"
built() {
    [ -x "$dir/test/gtest/gtest" ] && [ -f "$stamp" ] &&
        [ "$(cat "$stamp")" = "$stamp_text" ]
}
if built; then
    echo "GTEST=$dir/test/gtest/gtest"
    exit 0
fi

# run_step WHAT COMMAND...: COMMAND's output into the log; dies with the
# log's tail when it fails
run_step() {
    local what=$1 start=$SECONDS
    shift
    note "$what (log: $log)"
    echo "==== $what" >>"$log"
    if ! "$@" >>"$log" 2>&1; then
        tail -30 "$log" >&2
        die "$what failed (log: $log)"
    fi
    note "$what: $((SECONDS - start)) s"
}

exec 9>"$cache/ucx-gtest-$version.lock"
flock 9 || die "cannot lock $cache/ucx-gtest-$version.lock"
# another run may have built it while this one waited for the lock
if built; then
    echo "GTEST=$dir/test/gtest/gtest"
    exit 0
fi
: >"$log"
rm -rf "$dir"
run_step "copying $UCX_SRC" cp -a "$UCX_SRC" "$dir"
rm -f "$dir/.rvt-configured"

# 1. rvt among the generic transports, right after tcp, and among the
# components whose MDs test_md and test_md_fork test. 1.13 only: UCX
# 1.22's list of transports is as long as its UCS_PP_FOREACH takes (one
# more fails to compile), so its program, and those of the other
# releases (whose UCT the 1.13 leg stands for), have the UCP tests alone
uct_groups=(common uct uct/v2)
if [ "$version" = 1.13.1 ]; then
    tests_h=$dir/test/gtest/uct/uct_test.h
    sed -i 's/^\(    \)tcp,\( *\)\\$/&\n\1rvt,\2\\/' "$tests_h"
    grep -q '^    rvt, *\\$' "$tests_h" ||
        die "could not add rvt to UCT_TEST_NO_SELF_TLS in $tests_h (its layout changed?)"
    md_cc=$dir/test/gtest/uct/test_md.cc
    sed -i 's/^\( *\)ib, \\$/&\n\1rvt, \\/' "$md_cc"
    grep -q '^ *rvt, \\$' "$md_cc" ||
        die "could not add rvt to UCT_MD_INSTANTIATE_TEST_CASE in $md_cc"
else
    uct_groups=(common)
fi
# UCP: rows rvt and ud_rvt after rc's, in both lists. The plain list has a
# row a line; the GPU-aware one splits each row after its name
ucp_h=$dir/test/gtest/ucp/ucp_test.h
sed -i 's/^\( *UCP_INSTANTIATE_TEST_CASE_TLS(_test_case, \)rc, *"rc_v") \\$/&\n\1rvt,    "rvt") \\\n\1ud_rvt, "ud_v,rvt") \\/' "$ucp_h"
sed -i '/UCP_INSTANTIATE_TEST_CASE_TLS_GPU_AWARE(_test_case, rc, \\$/{n;s/^\( *\)"rc_v") \\$/&\n    UCP_INSTANTIATE_TEST_CASE_TLS_GPU_AWARE(_test_case, rvt, \\\n\1"rvt") \\\n    UCP_INSTANTIATE_TEST_CASE_TLS_GPU_AWARE(_test_case, ud_rvt, \\\n\1"ud_v,rvt") \\/}' "$ucp_h"
[ "$(grep -c '^ *UCP_INSTANTIATE_TEST_CASE_TLS\(_GPU_AWARE\)\?(_test_case, \(rvt\|ud_rvt\),' "$ucp_h")" = 4 ] ||
    die "could not add the rvt and ud_rvt rows to UCP's lists in $ucp_h (its layout changed?)"

# 2. Debian's flags, word by word as configure must see them; ccache (in
# run-tests.sh's cache, when installed) makes a rebuild after a changed
# patch or file list cost minutes instead of half an hour
read -ra flags <<<"$flags_line"
if command -v ccache >/dev/null; then
    export CCACHE_DIR=${CCACHE_DIR:-$cache/ccache} CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-4G}
    flags+=(CC="ccache gcc" CXX="ccache g++")
fi
# shellcheck disable=SC2016 # $1 and $@ are the inner shell's
run_step "configure" sh -c 'cd "$1" && shift && ./configure "$@"' sh "$dir" \
    "${flags[@]}" --enable-gtest CFLAGS="-O2 -g" CXXFLAGS="-O2 -g -Wno-error"

# 3. the libraries, googletest, and the generic UCT tests
jobs=$(nproc)
for sub in src/ucm src/ucs src/uct src/ucp src/tools/perf/lib \
    test/gtest/common/googletest; do
    run_step "make in $sub" make -C "$dir/$sub" -j"$jobs"
done
groups_re=$(IFS='|'; echo "${uct_groups[*]}" | sed 's|/|\\/|g')
objects=$(awk -v re="^($groups_re)/gtest-.*[.][$][(]OBJEXT[)]$" '
    /^am_gtest_OBJECTS =/ { on = 1 }
    on { for (i = 1; i <= NF; ++i)
             if ($i ~ re) {
                 sub(/\$\(OBJEXT\)$/, "o", $i); print $i } }
    on && !/\\$/ { exit }' "$dir/test/gtest/Makefile" | tr '\n' ' ')
[ -n "$objects" ] || die "no test objects found in $dir/test/gtest/Makefile"
for t in "${ucp_tests[@]}"; do
    grep -q "ucp/gtest-$t\.\$(OBJEXT)" "$dir/test/gtest/Makefile" ||
        die "no UCP test file $t in $dir/test/gtest/Makefile"
    objects+=" ucp/gtest-$t.o"
done
run_step "gtest (common, UCT and some UCP tests)" \
    make -C "$dir/test/gtest" -j"$jobs" gtest gtest_OBJECTS="$objects"
[ -x "$dir/test/gtest/gtest" ] || die "no $dir/test/gtest/gtest after the build"

echo "$stamp_text" >"$stamp"
echo "GTEST=$dir/test/gtest/gtest"
