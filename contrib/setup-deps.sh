#!/bin/bash
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
# stdout: exactly one line, UCX_SRC=<dir>, so callers can `eval` it.
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
    cpio gzip iproute2 util-linux openmpi-bin libopenmpi-dev python3 bc procps jq"

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

mkdir -p "$cache"
: >"$log"
# Two concurrent runs must not configure the same tree.
exec 9>"$cache/.setup-deps.lock"
flock 9

install_missing_packages

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
