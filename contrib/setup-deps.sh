#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Prepare a Debian 12 machine to build, test and run rvt:
#  1. install the Debian packages that are missing (one dpkg-query when all
#     are there, so a second run is fast and silent);
#  2. prepare the UCX source tree that matches the installed libucx0, because
#     a UCT transport needs UCX's internal headers (uct/base/uct_iface.h, ...)
#     that Debian does not install, and a config.h that matches the installed
#     build (struct layouts depend on it).  Only autogen + configure: UCX
#     itself is not built.
#
# With --ucx=VERSION (1.16.0, 1.18.1 or 1.22.0), step 2 instead builds that UCX
# release from its source tarball and installs it into a prefix of its own,
# $RVT_CACHE/ucx-VERSION (never over Debian's UCX), keeping the configured
# and built tree in $RVT_CACHE/ucx-src-VERSION for its internal headers.
# The tarball is the first of: $RVT_UCX_TARBALL (taken as it is), the
# project's shared copy (../shared/deps/ucx-VERSION.tar.gz beside the
# clone), the cache's ($RVT_CACHE/ucx-VERSION.tar.gz), else the release
# tarball fetched from $RVT_UCX_URL (default: the tag's archive on
# GitHub) into the cache.  Every copy but $RVT_UCX_TARBALL must hold the
# tar whose sha256 is pinned below; a fetched file that does not is
# refused and not kept.
# rvt then builds with
#   configure --with-ucx=$UCX_PREFIX --with-ucx-src=$UCX_SRC
# --fetch-only (with --ucx) stops after that: it installs nothing, builds
# nothing, and prints UCX_TARBALL=<file>.
#
# stdout: UCX_SRC=<dir> (and with --ucx also UCX_PREFIX=<dir>), one per
# line, so callers can `eval` it.
# Progress and errors go to stderr; tool output goes to a log file that is
# shown only when something fails.
#
# Environment: RVT_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/rvt) is
# where the UCX tree lives: $RVT_CACHE/ucx-src-<libucx0 Debian version>.
# configure (config/m4/rvt_ucx.m4) looks in the same place by default.
#
set -euo pipefail

# Everything rvt needs: build, unit tests, and the qemu/rxe testbed.
RVT_DEB_PACKAGES="build-essential autoconf automake libtool pkg-config
    autoconf-archive dpkg-dev libucx-dev libucx0 ucx-utils libibverbs-dev
    librdmacm-dev rdma-core ibverbs-utils ibverbs-providers perftest
    nlohmann-json3-dev googletest libgtest-dev clang-format clang libclang-rt-14-dev qemu-system-x86 busybox-static kmod
    cpio gzip iproute2 util-linux openmpi-bin libopenmpi-dev python3 bc procps jq
    munge libmunge-dev libssl-dev gnuplot-nox ccache
    slurmctld slurmd slurm-client libslurm-dev tcl
    curl ca-certificates debhelper lintian man-db bsdextrautils"

cache=${RVT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rvt}
log=$cache/setup-deps.log
debsrc_file=/etc/apt/sources.list.d/rvt-deb-src.sources

note() { echo "setup-deps: $*" >&2; }
die() {
    echo "setup-deps: error: $*" >&2
    exit 1
}

# Run a step with its output in the log; on failure show the log's tail.
run_logged() {
    local what=$1
    shift
    echo "=== $what: $*" >>"$log"
    if ! "$@" >>"$log" 2>&1; then
        tail -n 25 "$log" >&2
        die "$what failed (full log: $log)"
    fi
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        die "must be root (or have sudo) to run: $*"
    fi
}

# apt waits for a lock held by another apt/dpkg instead of failing at once.
apt_get() {
    as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get -q -o DPkg::Lock::Timeout=600 "$@"
}

install_missing_packages() {
    local installed missing=() p
    # One call for all: prints "name ii " for installed ones, nothing for
    # names dpkg has never seen (hence "|| true").
    # shellcheck disable=SC2086 # the list is split on purpose
    installed=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' \
        $RVT_DEB_PACKAGES 2>/dev/null | awk '$2 == "ii" {print $1}' || true)
    for p in $RVT_DEB_PACKAGES; do
        grep -qx -- "$p" <<<"$installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0

    note "installing: ${missing[*]}"
    run_logged "apt-get update" apt_get update
    if ! apt_get install -y --no-install-recommends "${missing[@]}" \
        >>"$log" 2>&1; then
        tail -n 25 "$log" >&2
        die "could not install: ${missing[*]} (log: $log); check that" \
            "the apt sources in /etc/apt are reachable"
    fi
}

# `apt-get source` needs a deb-src entry.  Derive it from the machine's own
# sources so no mirror host name is written anywhere by this project.
ensure_deb_src() {
    local f
    if grep -Eqs '^(Types:.*deb-src|deb-src[[:space:]])' /etc/apt/sources.list \
        /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; then
        return 0
    fi
    f=/etc/apt/sources.list.d/debian.sources
    [ -r "$f" ] || die "no deb-src entry in /etc/apt and no $f to derive" \
        "one from; add a deb-src entry for Debian's main archive"
    note "adding $debsrc_file (deb-src twin of $f)"
    sed 's/^Types:[[:space:]]*deb[[:space:]]*$/Types: deb-src/' "$f" |
        as_root tee "$debsrc_file" >/dev/null
}

# Download the Debian source of exactly the installed ucx into $ucx_src.
fetch_ucx_source() {
    local tmp dirs
    if ! apt-get source --print-uris -qq "ucx=$ucx_deb_ver" >/dev/null 2>&1
    then
        ensure_deb_src
        run_logged "apt-get update" apt_get update
    fi
    note "downloading the source of ucx=$ucx_deb_ver"
    # Unpack next to the final place, then rename: the tree appears whole or
    # not at all, even if this script is interrupted.
    tmp=$(mktemp -d "$cache/.ucx-src.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    if ! (cd "$tmp" && apt-get source -q "ucx=$ucx_deb_ver") >>"$log" 2>&1
    then
        tail -n 25 "$log" >&2
        die "cannot download the source of ucx=$ucx_deb_ver (log: $log):" \
            "the deb-src entries in /etc/apt must serve exactly the" \
            "installed libucx0 version; install the archive's libucx0 or" \
            "prepare a configured tree yourself (configure --with-ucx-src)"
    fi
    dirs=("$tmp"/ucx-*/)
    if [ ${#dirs[@]} -ne 1 ] || [ ! -d "${dirs[0]}" ]; then
        die "unexpected layout of 'apt-get source ucx' in $tmp"
    fi
    mv -T "${dirs[0]}" "$ucx_src"
    rm -rf "$tmp"
    trap - EXIT
}

# autogen + configure with the installed build's own flags.
configure_ucx_source() {
    local name f start=$SECONDS
    note "configuring $ucx_src (takes about 30 s, once)"
    # Upstream keeps debian/*.in in debian.upstream/; Debian's patches decide
    # which debian/ files configure.ac still names (1.13.1-1: only
    # debian/copyright, which Debian ships).  Supply any named file, or its
    # .in template, that debian/ lacks; never overwrite Debian's own.
    for name in $(grep -o 'debian/[A-Za-z0-9_.-]*' \
        "$ucx_src/configure.ac" | sort -u); do
        for f in "${name#debian/}" "${name#debian/}.in"; do
            if [ -f "$ucx_src/debian.upstream/$f" ] &&
                [ ! -e "$ucx_src/debian/$f" ]; then
                cp "$ucx_src/debian.upstream/$f" "$ucx_src/debian/$f"
            fi
        done
    done
    run_logged "ucx autogen.sh" sh -c 'cd "$1" && ./autogen.sh' sh "$ucx_src"
    # Words of the "Configured with:" line, passed literally: Debian's
    # ${prefix} references are meant for configure to expand, not the shell.
    run_logged "ucx configure" \
        sh -c 'cd "$1" && shift && ./configure "$@"' sh "$ucx_src" \
        "${ucx_flags[@]}"
    if [ ! -f "$ucx_src/config.h" ] ||
        [ ! -f "$ucx_src/src/uct/api/version.h" ]; then
        die "configure of $ucx_src did not produce config.h (log: $log)"
    fi
    printf '%s\n' "$stamp_text" >"$stamp"
    note "UCX source tree ready in $((SECONDS - start)) s"
}

# UCX releases --ucx= can build, with the sha256 of the tar stream inside
# each release's tarball: `git archive` of the release tag (prefix
# ucx-VERSION/), which GitHub serves as the tag's archive and the project
# keeps as ../shared/deps/ucx-VERSION.tar.gz. The pin is the tar's, not
# the gzip file's, so that a copy compressed by another gzip still
# matches: the one value every copy, local or fetched, is checked against.
declare -A ucx_release_sha256=(
    [1.16.0]=21f5843481b803b59f633ddfd754cabc02567b838f2c25f1400bde64375791b3
    [1.18.1]=b6cf1b1674a1e4cae6d1bb91414add13ad049a41fe6af0222f0716ede0c2b3f9
    [1.22.0]=a75b1283f89a52c5e94f7fe2506c488828d01b4e69ad4d94716264de55fc7eb8
)
# Only what rvt and its tests use: verbs and rdmacm (rc_verbs and ud_verbs
# for comparisons), shared memory, the tools (ucx_info, ucx_perftest) and
# the devel headers; no GPU, no mlx5 direct verbs, no bindings, no docs,
# no static archives (libtool would compile every file twice).
ucx_release_flags=(--disable-static --enable-mt --with-verbs --with-rdmacm
    --enable-cma --enable-devel-headers --disable-logging --without-mlx5
    --without-cuda --without-rocm --without-ze --without-gdrcopy
    --without-knem --without-xpmem --without-fuse3 --without-go
    --without-java --disable-doxygen-doc --disable-gtest --disable-examples)

usage() {
    echo "usage: $0 [--ucx=VERSION [--fetch-only]]" >&2
    echo "  --ucx=VERSION  build UCX VERSION (one of:" \
        "${!ucx_release_sha256[*]}) into \$RVT_CACHE/ucx-VERSION" >&2
    echo "  --fetch-only   only find or fetch its tarball and check it" >&2
    exit 2
}

ucx_release=""
fetch_only=0
for arg in "$@"; do
    case $arg in
    --ucx=*) ucx_release=${arg#--ucx=} ;;
    --fetch-only) fetch_only=1 ;;
    -h | --help) usage ;;
    *)
        echo "setup-deps: error: unknown argument '$arg'" >&2
        usage
        ;;
    esac
done
if [ -n "$ucx_release" ] && [ -z "${ucx_release_sha256[$ucx_release]:-}" ]
then
    die "--ucx=$ucx_release: unknown UCX release; expected one of:" \
        "${!ucx_release_sha256[*]}"
fi
if [ $fetch_only = 1 ] && [ -z "$ucx_release" ]; then
    die "--fetch-only needs --ucx=VERSION"
fi

# sha256_is_pinned FILE: the sha256 of the tar inside FILE is the one
# pinned for $ucx_release; else say what it is instead (a file gzip
# cannot read fully has none).
sha256_is_pinned() {
    local sum want=${ucx_release_sha256[$ucx_release]}
    sum=$(set -o pipefail; gzip -dc "$1" 2>/dev/null | sha256sum |
        cut -d' ' -f1) || sum="none (not a whole gzip file)"
    [ "$sum" = "$want" ] && return 0
    note "$1: sha256 is $sum, expected $want"
    return 1
}

# download URL FILE, with whichever client the machine has
download() {
    if command -v curl >/dev/null; then
        curl -fsSL --retry 2 --connect-timeout 20 -o "$2" "$1"
    elif command -v wget >/dev/null; then
        wget -q --tries=3 --timeout=20 -O "$2" "$1"
    else
        note "neither curl nor wget is installed"
        return 1
    fi
}

# The tarball of UCX $ucx_release, the first of: $RVT_UCX_TARBALL, the
# shared copy beside the clone, the cache's, the release fetched into the
# cache.  Runs in $(...): die ends only it, and its caller with set -e.
ucx_release_tarball() {
    local top shared cached url tmp
    if [ -n "${RVT_UCX_TARBALL:-}" ]; then
        [ -f "$RVT_UCX_TARBALL" ] ||
            die "RVT_UCX_TARBALL=$RVT_UCX_TARBALL: no such file"
        echo "$RVT_UCX_TARBALL"
        return 0
    fi
    top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    shared=$top/shared/deps/ucx-$ucx_release.tar.gz
    if [ -f "$shared" ]; then
        sha256_is_pinned "$shared" || die "$shared is not UCX $ucx_release"
        echo "$shared"
        return 0
    fi
    cached=$cache/ucx-$ucx_release.tar.gz
    if [ -f "$cached" ]; then
        if sha256_is_pinned "$cached"; then
            echo "$cached"
            return 0
        fi
        note "removing $cached, fetching it again"
        rm -f "$cached"
    fi
    url=https://github.com/openucx/ucx/archive/refs/tags
    url=${RVT_UCX_URL:-$url/v$ucx_release.tar.gz}
    note "fetching $url"
    # a partial or refused download never takes the cache's name
    tmp=$(mktemp "$cached.XXXXXX")
    trap 'rm -f "$tmp"' EXIT
    if ! download "$url" "$tmp" 2>>"$log"; then
        die "no UCX $ucx_release source: cannot fetch $url" \
            "(log: $log); set RVT_UCX_TARBALL to its tarball, or" \
            "RVT_UCX_URL to where it can be fetched (not found either:" \
            "$shared, $cached)"
    fi
    sha256_is_pinned "$tmp" ||
        die "refusing what $url served: it is not UCX $ucx_release" \
            "(nothing kept); set RVT_UCX_TARBALL or RVT_UCX_URL"
    chmod 644 "$tmp"
    mv "$tmp" "$cached"
    trap - EXIT
    echo "$cached"
}

# Unpack, autogen (a `git archive` has no configure), configure, build and
# install UCX $ucx_release; the stamp is written last, so an interrupted
# build is redone from scratch.
build_ucx_release() {
    local tarball tmp dirs start=$SECONDS
    tarball=$(ucx_release_tarball)
    note "building UCX $ucx_release from $tarball into $ucx_prefix" \
        "(about 10 min on 2 cores, once; log: $log)"
    rm -rf "$ucx_src" "$ucx_prefix"
    tmp=$(mktemp -d "$cache/.ucx-src.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    run_logged "unpack" tar -xzf "$tarball" -C "$tmp"
    dirs=("$tmp"/*/)
    if [ ${#dirs[@]} -ne 1 ] || [ ! -f "${dirs[0]}/configure.ac" ]; then
        die "$tarball is not a UCX source tarball (one top directory" \
            "with configure.ac expected)"
    fi
    # Built where it stays: its config.h and generated headers are the
    # internal headers rvt compiles against.
    mv -T "${dirs[0]}" "$ucx_src"
    rm -rf "$tmp"
    trap - EXIT
    if [ ! -x "$ucx_src/configure" ]; then
        run_logged "ucx autogen.sh" sh -c 'cd "$1" && ./autogen.sh' sh \
            "$ucx_src"
    fi
    run_logged "ucx configure" sh -c 'cd "$1" && shift && ./configure "$@"' \
        sh "$ucx_src" --prefix="$ucx_prefix" "${ucx_release_flags[@]}"
    run_logged "ucx make" make -C "$ucx_src" -j2
    run_logged "ucx make install" make -C "$ucx_src" install
    [ -x "$ucx_prefix/bin/ucx_info" ] ||
        die "UCX install into $ucx_prefix has no bin/ucx_info (log: $log)"
    printf '%s\n' "$stamp_text" >"$stamp"
    note "UCX $ucx_release ready in $((SECONDS - start)) s"
}

mkdir -p "$cache"
: >"$log"
# Two concurrent runs must not configure the same tree.
exec 9>"$cache/.setup-deps.lock"
flock 9

if [ $fetch_only = 1 ]; then
    tarball=$(ucx_release_tarball)
    rm -f "$log"
    echo "UCX_TARBALL=$tarball"
    exit 0
fi

install_missing_packages

if [ -n "$ucx_release" ]; then
    ucx_src=$cache/ucx-src-$ucx_release
    ucx_prefix=$cache/ucx-$ucx_release
    stamp=$ucx_prefix/.rvt-installed
    stamp_text="ucx=$ucx_release configure: ${ucx_release_flags[*]}"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$stamp_text" ]; then
        build_ucx_release
    fi
    rm -f "$log"
    echo "UCX_SRC=$ucx_src"
    echo "UCX_PREFIX=$ucx_prefix"
    exit 0
fi

ucx_deb_ver=$(dpkg-query -W -f='${Version}\n' libucx0 | head -n 1)
[ -n "$ucx_deb_ver" ] || die "libucx0 is not installed"
ucx_src=$cache/ucx-src-$ucx_deb_ver
flags_line=$(ucx_info -v | sed -n 's/^# Configured with: //p')
[ -n "$flags_line" ] || die "'ucx_info -v' printed no 'Configured with:'" \
    "line; is ucx-utils $ucx_deb_ver installed?"
read -r -a ucx_flags <<<"$flags_line"

# The stamp records what the tree was configured for; a new libucx0 or new
# flags mean a new directory or a re-configure.
stamp=$ucx_src/.rvt-configured
stamp_text="libucx0=$ucx_deb_ver configure: $flags_line"

[ -d "$ucx_src" ] || fetch_ucx_source
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$stamp_text" ]; then
    configure_ucx_source
fi
rm -f "$log"

echo "UCX_SRC=$ucx_src"
