#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# configure must refuse a UCX source tree that does not match the installed
# UCX: internal headers of another version or configuration compile fine and
# corrupt memory at run time; and an installed UCX outside the releases rvt
# supports.  This re-runs configure (VPATH, in a scratch dir) against fake
# trees and prefixes and checks that it fails, and why.
#
# Run by `make check`, which sets abs_top_srcdir, abs_top_builddir, UCX_SRC
# (the tree this build uses), UCX_VERSION (the installed UCX) and
# UCX_OLDEST, UCX_NEWEST (the supported minor releases, from configure).
#
set -u
: "${abs_top_srcdir:?run from make check}" "${abs_top_builddir:?}"
: "${UCX_SRC:?}" "${UCX_VERSION:?}" "${UCX_OLDEST:?}" "${UCX_NEWEST:?}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rvt-check-ucx-src.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
failed=0

# The arguments this build was configured with (CXX=..., --with-ucx=...),
# shell-quoted, so the scratch runs look at the same system; ours come last
# and win (--srcdir too: make distcheck configures with --srcdir=../..).
config_args=$("$abs_top_builddir/config.status" --config) || exit 99

# configure refuses a VPATH build from a source dir that is configured
# in-tree, so run a clean copy of just what configure reads.
mkdir "$tmp/src" || exit 99
(cd "$abs_top_srcdir" &&
    cp -pR configure Makefile.in rvt_config.h.in config "$tmp/src/") || exit 99

# run_configure TREE: exit status of configure, its output in $tmp/out
# (with --with-ucx=$prefix when prefix is set).
prefix=""
run_configure() {
    rm -rf "$tmp/build" && mkdir "$tmp/build" &&
        (cd "$tmp/build" &&
            eval "\"\$tmp/src/configure\" $config_args" \
                '--srcdir="$tmp/src" --with-ucx-src="$1" --disable-gtest' \
                '${prefix:+--with-ucx="$prefix"}') \
        >"$tmp/out" 2>&1
}

# expect_failure NAME TREE TEXT...: configure fails and its error line
# contains every TEXT.
expect_failure() {
    name=$1 tree=$2
    shift 2
    if run_configure "$tree"; then
        echo "FAIL: $name: configure accepted $tree"
        failed=1
        return
    fi
    error=$(grep 'configure: error:' "$tmp/out" | tail -n 1)
    for text in "$@"; do
        case $error in
        *"$text"*) ;;
        *)
            echo "FAIL: $name: error does not say '$text': ${error:-(none)}"
            failed=1
            return
            ;;
        esac
    done
    echo "PASS: $name: $error"
}

# (a) a tree claiming the next minor version: same headers and config.h,
# only configure.ac's version differs.
major=${UCX_VERSION%%.*}
minor=${UCX_VERSION#*.}
minor=${minor%%.*}
fake_version=$major.$((minor + 1)).0
mkdir "$tmp/newer"
sed -e "s/^\(define(\[ucx_ver_minor\], *\)[0-9]*/\1$((minor + 1))/" \
    -e "s/^\(define(\[ucx_ver_patch\], *\)[0-9]*/\10/" \
    "$UCX_SRC/configure.ac" >"$tmp/newer/configure.ac"
cp "$UCX_SRC/config.h" "$tmp/newer/"
ln -s "$UCX_SRC/src" "$tmp/newer/src"
if ! grep -q "^define(\[ucx_ver_minor\], *$((minor + 1)))" \
    "$tmp/newer/configure.ac"; then
    echo "FAIL: (a) could not fake version $fake_version in configure.ac"
    failed=1
else
    expect_failure "(a) version $fake_version" "$tmp/newer" \
        "$fake_version" "$UCX_VERSION" "$tmp/newer"
fi

# (b) a directory that does not exist.
expect_failure "(b) missing dir" "$tmp/nowhere" "$tmp/nowhere" \
    "does not exist"

# (c) the right version, never configured (no config.h).
mkdir "$tmp/unconfigured"
cp "$UCX_SRC/configure.ac" "$tmp/unconfigured/"
ln -s "$UCX_SRC/src" "$tmp/unconfigured/src"
expect_failure "(c) no config.h" "$tmp/unconfigured" "not configured"

# (d) the real tree is accepted (else (a)-(c) and (e) prove nothing).
if run_configure "$UCX_SRC"; then
    echo "PASS: (d) $UCX_SRC accepted"
else
    echo "FAIL: (d) $UCX_SRC rejected:" \
        "$(grep 'configure: error:' "$tmp/out" | tail -n 1)"
    failed=1
fi

# (e) a real tree of another UCX release from the cache, if there is one
# (1.13.1's for a build against 1.22.0, and the other way round): its
# internal headers compile, so only the versions can tell.
cache=${RVT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rvt}
other="" other_version=""
for tree in "$cache"/ucx-src-*; do
    [ -f "$tree/config.h" ] && [ -f "$tree/configure.ac" ] || continue
    version=$(sed -n 's/^define(\[ucx_ver_\(major\|minor\|patch\)\], *\([0-9]*\)).*/\2/p' \
        "$tree/configure.ac" | paste -sd.)
    if [ "$version" != "$UCX_VERSION" ]; then
        other=$tree other_version=$version
        break
    fi
done
if [ -z "$other" ]; then
    echo "SKIP: (e) no configured tree of another UCX version in $cache"
else
    expect_failure "(e) release $other_version" "$other" "$other_version" \
        "$UCX_VERSION" "$other"
fi

# (f) an installed UCX outside the supported releases: a prefix with a
# libuct.so and the public version header, claiming the release before
# the oldest and after the newest; the oldest and newest themselves pass
# the range check (and fail later: the prefix is no real UCX).
# fake_prefix VERSION: such a prefix, in $prefix
fake_prefix() {
    prefix=$tmp/ucx-$1
    mkdir -p "$prefix/lib" "$prefix/include/uct/api" &&
        : >"$prefix/lib/libuct.so" &&
        printf '#define UCT_VERNO_MAJOR %s\n#define UCT_VERNO_MINOR %s\n#define UCT_VERNO_PATCH 0\n' \
            "${1%%.*}" "$(echo "$1" | cut -d. -f2)" \
            >"$prefix/include/uct/api/version.h"
}
range="UCX $UCX_OLDEST to $UCX_NEWEST"
oldest_minor=${UCX_OLDEST#*.}
newest_minor=${UCX_NEWEST#*.}
for v in "${UCX_OLDEST%%.*}.$((oldest_minor - 1)).0" \
    "${UCX_NEWEST%%.*}.$((newest_minor + 1)).0"; do
    fake_prefix "$v"
    expect_failure "(f) UCX $v refused" "$UCX_SRC" "UCX $v" "not supported" \
        "$range"
done
for v in "$UCX_OLDEST.0" "$UCX_NEWEST.0"; do
    fake_prefix "$v"
    if run_configure "$UCX_SRC"; then
        echo "FAIL: (f) configure accepted the fake UCX $v in $prefix"
        failed=1
    elif grep -q 'configure: error:.*not supported' "$tmp/out"; then
        echo "FAIL: (f) UCX $v refused: $(grep 'configure: error:' "$tmp/out")"
        failed=1
    elif ! grep -q "checking for the installed UCX version\.\.\. $v\$" "$tmp/out"; then
        echo "FAIL: (f) UCX $v: configure did not read its version:" \
            "$(grep 'configure: error:' "$tmp/out")"
        failed=1
    else
        echo "PASS: (f) UCX $v passes the range check"
    fi
done
prefix=""

exit $failed
