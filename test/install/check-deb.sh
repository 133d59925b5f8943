#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The Debian packages (contrib/debian/build-package.sh) build, hold what
# they must, install, and what they install works:
#  - build-package.sh builds rvt-agent and ucx-rvt from the release
#    tarball and lintian finds no error (its warnings are printed);
#  - each package's file list (dpkg -c) is exactly the expected one;
#  - ucx-rvt depends on the upstream release of the libucx0 installed
#    here (any Debian revision of it, not the next release), and on
#    rvt-agent; rvt-agent on procps, with its Slurm settings and its
#    plugstack.conf.d snippet conffiles;
#    apt-get --simulate can install both on this machine;
#  - dpkg -i of both into a throwaway root (its own --admindir and
#    --instdir; never the machine's own root) installs and configures them,
#    and dpkg -L lists the module;
#  - from that root: rvtd, rvt-status and rvt-check answer --help, man -l
#    renders each installed page (rvt-trace-report's is Debian's own), and
#    UCX 1.13 loads the installed module with LD_PRELOAD (UCX_RVT_* in
#    ucx_info -c), and not without it, even with its module directory
#    named (what README.Debian says);
#  - the installed plugstack.conf.d/rvt.conf names spank_rvt.so commented
#    out, the plugin exports only Slurm's symbols, the modulefile appends
#    the installed module to LD_PRELOAD;
#  - into a second throwaway root: installed, the Slurm settings edited
#    as a site would, upgraded to the next version (the site's edit
#    kept), removed (the conffiles left), purged (nothing left);
#  - the testbed part, the packages' files at work in a Slurm cluster, is
#    test/testbed/site-jobs.sh's, which runs this first.
#
# Usage: test/install/check-deb.sh [BUILD_DIR]   (default: build; the
#   installed tree is left in BUILD_DIR/deb/root)
# Prints PASS:/FAIL: lines and exits 1 if a check failed.
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
cd "$top" || exit 1
build=$(cd "$build" && pwd) || exit 1
out=$build/deb
failed=0
pass() { echo "PASS: $*"; }
fail() {
    echo "FAIL: $*"
    failed=1
}
t0=$SECONDS

root=$out/root
# 1. build and lintian ----------------------------------------------------
# noddebs: the -dbgsym package is not checked here, and compressing its
# 12 MB took the most of a warm build's time
export DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-parallel=$(nproc) noddebs}
if debs=$(contrib/debian/build-package.sh "$build" "$out"); then
    pass "packages built, lintian: no errors ($((SECONDS - t0)) s)"
    grep -E '^[EWI]: ' "$out/lintian.txt" | sed 's/^/  lintian| /'
else
    fail "build-package.sh failed (log: $out/build.log)"
    exit 1
fi
agent_deb=$(grep '/rvt-agent_[^/]*\.deb$' <<<"$debs")
module_deb=$(grep '/ucx-rvt_[^/]*\.deb$' <<<"$debs")
for d in "$agent_deb" "$module_deb"; do
    [ -f "$d" ] || {
        fail "missing package in: $debs"
        exit 1
    }
done

# 2. file lists -------------------------------------------------------------
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
moddir=/usr/lib/$multiarch/ucx
files_of() { dpkg -c "$1" | awk '$1 !~ /^d/ {sub(/^\./, "", $6); print $6}' | sort; }
# shellcheck disable=SC2034 # read through ${!expect}
expect_agent="/etc/slurm/plugstack.conf.d/rvt.conf
/etc/slurm/rvt-slurm.conf
/usr/bin/rvt-check
/usr/bin/rvt-status
/usr/bin/rvt-trace-report
/usr/bin/rvtd
/usr/lib/rvt/rvt-slurm
/usr/lib/tmpfiles.d/rvt-agent.conf
/usr/lib/$multiarch/slurm-wlm/spank_rvt.so
/usr/share/doc/rvt-agent/changelog.Debian.gz
/usr/share/doc/rvt-agent/copyright
/usr/share/man/man1/rvt-status.1.gz
/usr/share/man/man1/rvt-trace-report.1.gz
/usr/share/man/man8/rvt-check.8.gz
/usr/share/man/man8/rvtd.8.gz"
# shellcheck disable=SC2034
expect_module="$moddir/libuct_rvt.so
/usr/share/doc/ucx-rvt/README.Debian
/usr/share/doc/ucx-rvt/changelog.Debian.gz
/usr/share/doc/ucx-rvt/copyright
/usr/share/modules/modulefiles/ucx-rvt"
for pkg in agent module; do
    deb=${pkg}_deb
    expect=expect_$pkg
    got=$(files_of "${!deb}")
    if [ "$got" = "${!expect}" ]; then
        pass "${!deb##*/}: the expected $(wc -l <<<"$got") files"
    else
        fail "${!deb##*/}: file list differs (< expected, > in the package):" \
            "$(diff <(echo "${!expect}") <(echo "$got") | grep '^[<>]')"
    fi
done

# 3. dependencies -------------------------------------------------------------
# ucx-rvt takes Debian's revisions of the upstream UCX it was built
# against (their security fixes), not the next release
ucx_ver=$(dpkg-query -W -f='${Version}' libucx0)
ucx_up=$(sed 's/^[0-9]*://; s/-[^-]*$//' <<<"$ucx_ver")
deps=$(dpkg-deb -f "$module_deb" Depends)
min=$(grep -oE 'libucx0 \(>= [^)]+\)' <<<"$deps" | sed 's/.*>= //; s/)//')
next=$(grep -oE 'libucx0 \(<< [^)]+\)' <<<"$deps" | sed 's/.*<< //; s/)//')
if [ "$min" = "$ucx_up" ] && [ -n "$next" ] &&
    dpkg --compare-versions "$ucx_ver" ge "$min" &&
    dpkg --compare-versions "$ucx_up-1+deb12u9" lt "$next" &&
    dpkg --compare-versions "${next%\~}" ge "$next" &&
    grep -qE 'rvt-agent \(= [^)]+\)' <<<"$deps"; then
    pass "ucx-rvt depends on libucx0 (>= $min), (<< $next): $ucx_ver and its Debian revisions, not the next release; and on rvt-agent"
else
    fail "ucx-rvt's Depends: expected libucx0 (>= $ucx_up), (<< the next release) and rvt-agent: $deps"
fi
if dpkg-deb -f "$agent_deb" Depends | grep -qw procps; then
    pass "rvt-agent depends on procps (the prolog's pgrep)"
else
    fail "rvt-agent's Depends lack procps: $(dpkg-deb -f "$agent_deb" Depends)"
fi
if [ "$(dpkg-deb -I "$agent_deb" conffiles 2>/dev/null | sort | tr '\n' ' ')" = "/etc/slurm/plugstack.conf.d/rvt.conf /etc/slurm/rvt-slurm.conf " ]; then
    pass "rvt-agent's conffiles: /etc/slurm/rvt-slurm.conf and plugstack.conf.d/rvt.conf (a site's changes survive an upgrade)"
else
    fail "rvt-agent's conffiles: '$(dpkg-deb -I "$agent_deb" conffiles 2>&1)'"
fi
if sim=$(apt-get --simulate -o Debug::NoLocking=1 install "$agent_deb" "$module_deb" 2>&1); then
    pass "apt-get --simulate installs both here: $(grep -c '^Inst ' <<<"$sim") to install"
else
    fail "apt-get --simulate install: $(tail -5 <<<"$sim")"
fi

# 4. dpkg -i into a throwaway root ---------------------------------------------
# new_root DIR: an empty throwaway root with a dpkg database
new_root() {
    rm -rf "$1"
    mkdir -p "$1/var/lib/dpkg/updates" "$1/var/lib/dpkg/info"
    : >"$1/var/lib/dpkg/status"
}
# dpkg_in DIR ARG...: dpkg on that root. --force-depends: its database
# knows no libucx0 (checked above against this machine's);
# --force-script-chrootless: no maintainer script is run inside a root
# without a shell
dpkg_in() {
    local dir=$1
    shift
    dpkg --root="$dir" --force-not-root --force-depends \
        --force-script-chrootless --log=/dev/null "$@"
}
new_root "$root"
# shellcheck disable=SC2016 # ${db:Status-Abbrev}: dpkg's format
if dpkg_in "$root" -i "$agent_deb" "$module_deb" >"$out/dpkg-i.log" 2>&1 &&
    [ "$(dpkg-query --admindir="$root/var/lib/dpkg" -W \
        -f='${db:Status-Abbrev}' ucx-rvt rvt-agent)" = "ii ii " ]; then
    pass "dpkg -i into $root: both installed"
else
    fail "dpkg -i into $root: $(tail -5 "$out/dpkg-i.log")"
fi
if dpkg --root="$root" -L ucx-rvt 2>/dev/null | grep -qx "$moddir/libuct_rvt.so"; then
    pass "dpkg -L ucx-rvt lists $moddir/libuct_rvt.so"
else
    fail "dpkg -L ucx-rvt does not list $moddir/libuct_rvt.so"
fi

# 5. the installed files work ----------------------------------------------------
for prog in rvtd rvt-status rvt-check; do
    help=$("$root/usr/bin/$prog" --help 2>&1)
    if grep -q "^usage: $prog" <<<"$help"; then
        pass "installed $prog --help"
    else
        fail "installed $prog --help: $(head -3 <<<"$help")"
    fi
done
for page in man8/rvtd.8 man8/rvt-check.8 man1/rvt-status.1 \
    man1/rvt-trace-report.1; do
    name=${page#*/}
    name=${name%.*}
    text=$(MANWIDTH=80 man -l "$root/usr/share/man/$page.gz" 2>&1 | col -b)
    if grep -q "^NAME" <<<"$text" && grep -q "^ *$name - " <<<"$text"; then
        pass "man -l $page.gz renders ($(wc -l <<<"$text") lines)"
    else
        fail "man -l $page.gz: $(head -5 <<<"$text")"
    fi
done
module=$root$moddir/libuct_rvt.so
# the whole output first: grep -q leaves at its first match, and under
# pipefail ucx_info's SIGPIPE would fail the pipe
config=$(env -u UCX_PLUGIN_PATH LD_PRELOAD="$module" ucx_info -c 2>&1)
if grep -q '^UCX_RVT_SEG_SIZE=' <<<"$config"; then
    pass "UCX $(ucx_info -v | sed -n 's/^# Version //p') loads the installed module with LD_PRELOAD"
else
    fail "ucx_info -c with LD_PRELOAD=$module shows no UCX_RVT_*"
fi
config=$(env -u LD_PRELOAD UCX_MODULE_DIR="$root$moddir" ucx_info -c 2>&1)
if grep -q '^UCX_RVT_' <<<"$config"; then
    fail "UCX loaded rvt without LD_PRELOAD: README.Debian says it does not"
else
    pass "without LD_PRELOAD UCX does not load it, even from UCX_MODULE_DIR (as README.Debian says)"
fi
if grep -q "LD_PRELOAD=$moddir/libuct_rvt.so" "$root/usr/share/doc/ucx-rvt/README.Debian"; then
    pass "README.Debian names LD_PRELOAD=$moddir/libuct_rvt.so"
else
    fail "README.Debian does not name LD_PRELOAD=$moddir/libuct_rvt.so"
fi

# the SPANK plugin: off as installed (the site turns it on), exporting
# the symbols Slurm looks up and nothing else; the modulefile
snippet=$root/etc/slurm/plugstack.conf.d/rvt.conf
if [ "$(grep -v '^#' "$snippet" | grep -c .)" = 0 ] &&
    grep -qx '#optional spank_rvt.so' "$snippet"; then
    pass "plugstack.conf.d/rvt.conf: spank_rvt.so named, commented out (off until the site turns it on)"
else
    fail "plugstack.conf.d/rvt.conf: $(grep -v '^# ' "$snippet")"
fi
spank=$root/usr/lib/$multiarch/slurm-wlm/spank_rvt.so
syms=$(nm -D --defined-only "$spank" 2>/dev/null | awk '{print $3}' | grep -c '^slurm_spank_\|^plugin_\|^spank_plugin_version$')
slurm_ver=$(dpkg-query -W -f='${Version}' slurmd 2>/dev/null | sed 's/^[0-9]*://; s/^\([0-9]*\.[0-9]*\).*/\1/')
if [ "$syms" = 9 ] && [ "$(nm -D --defined-only "$spank" | wc -l)" = 9 ]; then
    pass "spank_rvt.so exports the 9 symbols Slurm looks up, nothing else (Slurm here: ${slurm_ver:-none})"
else
    fail "spank_rvt.so exports: $(nm -D --defined-only "$spank" 2>&1 | head -12 | tr '\n' ' ')"
fi
mfile=$root/usr/share/modules/modulefiles/ucx-rvt
if grep -qx "append-path LD_PRELOAD $moddir/libuct_rvt.so" "$mfile"; then
    pass "modulefile ucx-rvt appends $moddir/libuct_rvt.so to LD_PRELOAD"
else
    fail "modulefile $mfile: $(grep -v '^#' "$mfile" 2>&1)"
fi

# 6. upgrade and remove, in a second throwaway root ------------------------------
# Both packages installed, the site's edit to the Slurm settings made,
# then the next version of both (the same packages with a higher version,
# as dpkg-deb repacks them) over them: the new version installed, the
# site's edit kept. Then removed (rvt-agent's conffiles stay, "rc";
# ucx-rvt has none, so nothing of it is left, "un"), then purged (nothing
# of theirs left). $root above stays as installed, for the site
# suite.
cycle=$out/cycle
new_root "$cycle"
in_cycle() { dpkg_in "$cycle" "$@" >>"$out/cycle.log" 2>&1; }
# shellcheck disable=SC2016 # dpkg's formats
states() {
    dpkg-query --admindir="$cycle/var/lib/dpkg" -W \
        -f='${db:Status-Abbrev}${Version} ' ucx-rvt rvt-agent 2>/dev/null | sed 's/ *$//'
}
# next_version DEB NEW: DEB repacked as version NEW (the Depends naming
# the old version name the new one)
next_version() {
    local d=$out/repack old
    rm -rf "$d"
    dpkg-deb -R "$1" "$d" || return 1
    old=$(sed -n 's/^Version: //p' "$d/DEBIAN/control")
    sed -i "s/^Version: .*/Version: $2/; /^Depends:/s/(= $old)/(= $2)/" "$d/DEBIAN/control"
    dpkg-deb -b --root-owner-group "$d" "$out/$(basename "${1%%_*}")_$2.deb" >/dev/null &&
        rm -rf "$d"
}
: >"$out/cycle.log"
ver=$(dpkg-deb -f "$agent_deb" Version)
new=$ver+upgrade1
conf=$cycle/etc/slurm/rvt-slurm.conf
if in_cycle -i "$agent_deb" "$module_deb" && [ "$(states)" = "ii $ver ii $ver" ] &&
    echo "RVT_JOBS=all # the site's edit" >>"$conf" &&
    next_version "$agent_deb" "$new" && next_version "$module_deb" "$new" &&
    in_cycle -i "$out/rvt-agent_$new.deb" "$out/ucx-rvt_$new.deb" &&
    [ "$(states)" = "ii $new ii $new" ] &&
    [ -f "$cycle$moddir/libuct_rvt.so" ] && [ -x "$cycle/usr/bin/rvtd" ]; then
    if grep -qx "RVT_JOBS=all # the site's edit" "$conf"; then
        pass "upgrade $ver -> $new: both packages upgraded, the site's edit to rvt-slurm.conf kept"
    else
        fail "upgrade $ver -> $new: the site's edit to $conf lost: $(tail -3 "$conf")"
    fi
else
    fail "upgrade $ver -> $new: states '$(states)' ($(tail -5 "$out/cycle.log"))"
fi
left() { find "$cycle" -type f ! -path "$cycle/var/lib/dpkg/*" | sed "s|^$cycle||" | sort; }
if in_cycle -r ucx-rvt rvt-agent && [ "$(states)" = "rc $new un" ] &&
    [ "$(left | tr '\n' ' ')" = "/etc/slurm/plugstack.conf.d/rvt.conf /etc/slurm/rvt-slurm.conf " ]; then
    pass "dpkg -r: both removed, rvt-agent's two conffiles left (rc), nothing else"
else
    fail "dpkg -r: states '$(states)', files left: $(left | head -5 | tr '\n' ' ')"
fi
if in_cycle -P ucx-rvt rvt-agent && [ -z "$(states)" ] && [ -z "$(left)" ]; then
    pass "dpkg -P: both purged, no file of theirs left"
else
    fail "dpkg -P: states '$(states)', files left: $(left | head -5 | tr '\n' ' ')"
fi

echo "check-deb: $((SECONDS - t0)) s"
exit $failed
