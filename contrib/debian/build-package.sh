#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Debian packages of rvt from its release tarball:
#   rvt-agent  rvtd, rvt-status, rvt-check, rvt-trace-report, man pages
#   ucx-rvt    libuct_rvt.so in UCX's module directory (UCX 1.13 preloads
#              it: debian/ucx-rvt.README.Debian)
#
# Usage: contrib/debian/build-package.sh [BUILD_DIR [OUT_DIR]]
#   BUILD_DIR  a configured build tree of this checkout (default: build);
#              `make dist` there makes the tarball
#   OUT_DIR    where the packages, the build log and lintian's output go
#              (default: BUILD_DIR/deb); emptied first
#
# Steps: make dist; the tarball becomes rvt_<version>.orig.tar.gz and is
# unpacked beside it; contrib/debian/debian/ is copied in as debian/;
# dpkg-buildpackage -us -uc -b (its build-dependencies must be installed:
# dpkg-checkbuilddeps says which are not); lintian on the .changes, failing
# on errors. UCX's internal headers come from the configured UCX source
# tree of the installed libucx0's version, passed to debian/rules as
# RVT_UCX_SRC (default: the tree contrib/setup-deps.sh prepares in
# $RVT_CACHE/ucx-src-<libucx0 version>). DEB_BUILD_OPTIONS defaults to
# "parallel=2"; debian/rules runs no tests (contrib/run-tests.sh does).
#
# RVT_DEB_WORKDIR: where the tarball is unpacked and built (default:
# OUT_DIR; the packages are moved to OUT_DIR either way). The build's
# path is in every compiler command (dpkg-buildflags' -ffile-prefix-map),
# so ccache reuses a compile only from a build at the same path: a fixed
# directory outside the checkout (contrib/run-tests.sh gives one in
# $RVT_CACHE) lets every clone reuse the last one's. It is locked while
# in use.
#
# Prints the packages' paths last, one a line. Exits 1 on any failure.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
out=${2:-$build/deb}
note() { echo "build-package: $*" >&2; }
die() {
    note "$*"
    exit 1
}

[ -f "$build/Makefile" ] || die "$build is not a configured build tree (../configure first)"
for tool in dpkg-buildpackage dh lintian; do
    command -v "$tool" >/dev/null ||
        die "no $tool: apt-get install dpkg-dev debhelper lintian"
done

cache=${RVT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rvt}
ucx_deb_ver=$(dpkg-query -W -f='${Version}' libucx0 2>/dev/null) ||
    die "libucx0 is not installed"
export RVT_UCX_SRC=${RVT_UCX_SRC:-$cache/ucx-src-$ucx_deb_ver}
[ -f "$RVT_UCX_SRC/configure.ac" ] ||
    die "no UCX source tree in $RVT_UCX_SRC (contrib/setup-deps.sh prepares it; or set RVT_UCX_SRC)"

version=$(sed -n 's/^PACKAGE_VERSION = //p' "$build/Makefile")
[ -n "$version" ] || die "no PACKAGE_VERSION in $build/Makefile"
deb_upstream=$(dpkg-parsechangelog -l "$top/contrib/debian/debian/changelog" \
    -S Version | sed 's/-[^-]*$//')
[ "$deb_upstream" = "$version" ] ||
    die "contrib/debian/debian/changelog is for $deb_upstream, the tree is $version: add a changelog entry (dch -v $version-1)"

rm -rf "$out"
mkdir -p "$out"
log=$out/build.log
work=${RVT_DEB_WORKDIR:-$out}
if [ "$work" != "$out" ]; then
    mkdir -p "$work"
    exec 9>"$work.lock"
    flock 9
    rm -rf "${work:?}"/*
fi
note "make dist in $build"
make -s -C "$build" dist >"$log" 2>&1 || {
    tail -20 "$log" >&2
    die "make dist failed (log: $log)"
}
cp "$build/rvt-$version.tar.gz" "$work/rvt_$version.orig.tar.gz"
tar -C "$work" -xzf "$work/rvt_$version.orig.tar.gz"
src=$work/rvt-$version
cp -r "$top/contrib/debian/debian" "$src/debian"

note "dpkg-buildpackage in $src (RVT_UCX_SRC=$RVT_UCX_SRC; log: $log)"
if ! (cd "$src" && DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-parallel=2} \
    dpkg-buildpackage -us -uc -b) >>"$log" 2>&1; then
    tail -30 "$log" >&2
    die "dpkg-buildpackage failed (log: $log)"
fi

if [ "$work" != "$out" ]; then
    mv "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo "$out"/
fi
changes=$(ls "$out"/rvt_"$version"-*_*.changes)
note "lintian $changes (output: $out/lintian.txt)"
lintian_rc=0
lintian --fail-on error --info "$changes" >"$out/lintian.txt" 2>&1 ||
    lintian_rc=$?
cat "$out/lintian.txt" >&2
[ "$lintian_rc" -eq 0 ] || die "lintian found errors (exit $lintian_rc)"

ls "$out"/*.deb
