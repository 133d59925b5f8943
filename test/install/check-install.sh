#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# `make install` into a DESTDIR puts each file where this build's configure
# said, and what it installs works from there:
#  - rvtd, rvt-status, rvt-check, rvt-trace-report in bindir, and the installed
#    programs answer --help;
#  - rvtd.8 and rvt-check.8 in man8 and rvt-status.1 in man1, the pages the build made;
#  - the module in the UCX module directory under the name its UCX loads
#    (libuct_rvt.so.0 for a UCX that loads plugins, libuct_rvt.so for
#    1.13's LD_PRELOAD), and that UCX loads the installed copy: its
#    UCX_RVT_* settings appear in `ucx_info -c` (1.22: from
#    UCX_PLUGIN_PATH, and from the module dir with nothing set);
#  - the module starts rvtd from where rvtd was installed (launch.cc's
#    default is bindir);
#  - spank_rvt.so in the Slurm plugin directory when configure built it
#    (slurm/spank.h found), exporting Slurm's plugin symbols and the
#    SPANK callbacks, and nothing else of ours;
#  - for UCX 1.13, the modulefile ucx-rvt in modulefiledir, naming the
#    installed module;
#  - nothing installed keeps a run path into the build tree;
#  - `make uninstall` takes away every file it put there.
#
# Run by `make check`, which sets MAKE, abs_top_builddir, UCX_PREFIX,
# UCX_LOADS_PLUGINS and the directories (RVT_BINDIR, RVT_MANDIR,
# RVT_UCXMODULEDIR) as the Makefile has them. Never installs outside the
# DESTDIR (a temporary directory).
set -u
: "${abs_top_builddir:?run from make check}" "${MAKE:?}" "${UCX_PREFIX:?}"
: "${UCX_LOADS_PLUGINS:?}" "${RVT_BINDIR:?}" "${RVT_MANDIR:?}"
: "${RVT_UCXMODULEDIR:?}" "${RVT_MODULEFILEDIR:?}" "${RVT_SLURMPLUGINDIR:?}"
: "${RVT_HAVE_SLURM:?}"

dest=$(mktemp -d "${TMPDIR:-/tmp}/rvt-check-install.XXXXXX") || exit 99
trap 'rm -rf "$dest"' EXIT
failed=0
pass() { echo "PASS: $*"; }
fail() {
    echo "FAIL: $*"
    failed=1
}

# DESTDIR must be absolute, and the Makefile's directories too
case $dest$RVT_BINDIR$RVT_MANDIR in
/*/*/*) ;;
*)
    fail "directories not absolute: $dest $RVT_BINDIR $RVT_MANDIR"
    exit 1
    ;;
esac

if ! $MAKE -C "$abs_top_builddir" install DESTDIR="$dest" \
    >"$dest.log" 2>&1; then
    fail "make install DESTDIR=$dest failed:"
    tail -20 "$dest.log"
    rm -f "$dest.log"
    exit 1
fi
rm -f "$dest.log"
pass "make install DESTDIR=$dest"

bin=$dest$RVT_BINDIR
man=$dest$RVT_MANDIR
moddir=$dest$RVT_UCXMODULEDIR
if [ "$UCX_LOADS_PLUGINS" = yes ]; then
    module=$moddir/libuct_rvt.so.0
else
    module=$moddir/libuct_rvt.so
fi

for prog in rvtd rvt-status rvt-check rvt-trace-report; do
    if [ -x "$bin/$prog" ] && [ -f "$bin/$prog" ]; then
        pass "$RVT_BINDIR/$prog"
    else
        fail "no program $bin/$prog"
    fi
done
for prog in rvtd rvt-status rvt-check; do
    if "$bin/$prog" --help 2>&1 | grep -q '^usage: '"$prog"; then
        pass "installed $prog --help"
    else
        fail "installed $bin/$prog --help: $("$bin/$prog" --help 2>&1 | head -3)"
    fi
done

for page in man8/rvtd.8 man8/rvt-check.8 man1/rvt-status.1; do
    built=$abs_top_builddir/src/uct/ib/rvt/tools/${page#*/}
    if [ ! -s "$man/$page" ]; then
        fail "no manual page $man/$page"
    elif ! cmp -s "$man/$page" "$built"; then
        fail "$man/$page differs from the build's $built"
    else
        pass "$RVT_MANDIR/$page"
    fi
done

if [ -f "$module" ]; then
    pass "module $RVT_UCXMODULEDIR/${module##*/}"
else
    fail "no module $module; the module dir has:" \
        "$(find "$moddir" -mindepth 1 -printf '%f ' 2>/dev/null)"
fi

# the SPANK plugin: Slurm's plugin symbols and the callbacks, C names
spank=$dest$RVT_SLURMPLUGINDIR/spank_rvt.so
if [ "$RVT_HAVE_SLURM" = yes ]; then
    syms=$(nm -D --defined-only "$spank" 2>/dev/null | awk '{print $3}' | sort | tr '\n' ' ')
    want="plugin_name plugin_type plugin_version slurm_spank_exit slurm_spank_init slurm_spank_init_post_opt slurm_spank_task_init slurm_spank_task_post_fork spank_plugin_version "
    if [ "$syms" = "$want" ]; then
        pass "$RVT_SLURMPLUGINDIR/spank_rvt.so exports exactly: $syms"
    else
        fail "spank_rvt.so ($spank): exports '$syms', expected '$want'"
    fi
elif [ -e "$spank" ]; then
    fail "spank_rvt.so installed though configure did not build it"
else
    pass "no slurm/spank.h: spank_rvt.so neither built nor installed"
fi

# the modulefile, for a UCX that loads only its own modules
mfile=$dest$RVT_MODULEFILEDIR/ucx-rvt
if [ "$UCX_LOADS_PLUGINS" = yes ]; then
    if [ -e "$mfile" ]; then
        fail "a modulefile installed for a UCX that loads plugins"
    else
        pass "no modulefile for a UCX that loads plugins"
    fi
elif grep -qxF "append-path LD_PRELOAD $RVT_UCXMODULEDIR/libuct_rvt.so" "$mfile" 2>/dev/null; then
    pass "$RVT_MODULEFILEDIR/ucx-rvt appends the installed module to LD_PRELOAD"
else
    fail "modulefile $mfile: $(grep -i preload "$mfile" 2>&1)"
fi

# nothing installed elsewhere than these directories (and no static
# archive anywhere)
others=$(cd "$dest" && find . -type f -o -type l |
    sed 's|^\.||' | grep -v -e "^$RVT_BINDIR/" -e "^$RVT_MANDIR/man[18]/" \
        -e "^$RVT_UCXMODULEDIR/libuct_rvt\." -e "^$RVT_SLURMPLUGINDIR/spank_rvt\." \
        -e "^$RVT_MODULEFILEDIR/ucx-rvt\$")
if [ -z "$others" ]; then
    pass "nothing else installed"
else
    fail "installed elsewhere: $others"
fi
if find "$dest" -name '*.a' | grep -q .; then
    fail "static archives installed: $(find "$dest" -name '*.a')"
fi

# no run path into the build tree: the installed files must not need it
for f in "$bin/rvtd" "$bin/rvt-status" "$bin/rvt-check" "$module"; do
    [ -f "$f" ] || continue
    rpath=$(readelf -d "$f" 2>/dev/null | grep -E 'R(UN)?PATH' || true)
    case $rpath in
    *"$abs_top_builddir"*) fail "${f#"$dest"} has a run path into the build tree: $rpath" ;;
    *) pass "${f#"$dest"}: no run path into the build tree" ;;
    esac
done

# the module starts the installed rvtd: launch.cc's default program
if [ -f "$module" ]; then
    if grep -qaF "$RVT_BINDIR" "$module"; then
        pass "module names $RVT_BINDIR for rvtd"
    else
        fail "module does not name $RVT_BINDIR (where rvtd is installed)"
    fi
fi

# this UCX loads the installed module as the README says: the module's
# settings in ucx_info -c (no device needed)
ucx_info=$UCX_PREFIX/bin/ucx_info
if [ ! -x "$ucx_info" ]; then
    fail "no $ucx_info (install UCX's tools: ucx-utils for Debian's)"
elif [ -f "$module" ]; then
    if [ "$UCX_LOADS_PLUGINS" = yes ]; then
        how="UCX_PLUGIN_PATH=$moddir"
        got=$(env -u LD_PRELOAD UCX_PLUGIN_PATH="$moddir" "$ucx_info" -c 2>&1)
    else
        how="LD_PRELOAD=$module"
        got=$(env -u UCX_PLUGIN_PATH LD_PRELOAD="$module" "$ucx_info" -c 2>&1)
    fi
    if grep -q '^UCX_RVT_SEG_SIZE=' <<<"$got" &&
        grep -q '^UCX_RVT_REG_METHODS=' <<<"$got"; then
        pass "installed module loads ($how): UCX_RVT_* in ucx_info -c"
    else
        fail "installed module not loaded ($how): no UCX_RVT_* in ucx_info -c"
    fi
    # striping's threshold (lanes.h, "Striping"): shown, and a value
    # that is no size refused naming the setting
    if grep -q '^UCX_RVT_STRIPE_MIN=' <<<"$got"; then
        pass "UCX_RVT_STRIPE_MIN in ucx_info -c"
    else
        fail "no UCX_RVT_STRIPE_MIN in ucx_info -c"
    fi
    if [ "$UCX_LOADS_PLUGINS" = yes ]; then
        bad=$(env -u LD_PRELOAD UCX_PLUGIN_PATH="$moddir" \
            UCX_RVT_STRIPE_MIN=banana "$ucx_info" -c 2>&1)
    else
        bad=$(env -u UCX_PLUGIN_PATH LD_PRELOAD="$module" \
            UCX_RVT_STRIPE_MIN=banana "$ucx_info" -c 2>&1)
    fi
    if grep -q "Invalid value for STRIPE_MIN: 'banana'" <<<"$bad"; then
        pass "UCX_RVT_STRIPE_MIN=banana refused naming the setting"
    else
        fail "UCX_RVT_STRIPE_MIN=banana not refused: $(grep -i stripe <<<"$bad")"
    fi
fi

# A UCX that loads plugins finds the module in its own module directory
# with nothing set: the directory next to the libucs.so.0 it runs with.
# The installed tree plays the UCX prefix: UCX's libraries and modules
# linked in beside the installed module, found through LD_LIBRARY_PATH
# (ucx_info's run path is a RUNPATH, which that overrides).
ucx_libdir=${RVT_UCXMODULEDIR%/ucx}
if [ "$UCX_LOADS_PLUGINS" = yes ] && [ -f "$module" ] &&
    [ -x "$ucx_info" ] && [ "$ucx_libdir/ucx" = "$RVT_UCXMODULEDIR" ] &&
    [ -e "$ucx_libdir/libucs.so.0" ]; then
    shadow=()
    for f in "$ucx_libdir"/lib*.so* "$ucx_libdir"/ucx/lib*.so*; do
        link=$dest$f
        [ -e "$link" ] || [ -L "$link" ] && continue
        ln -s "$f" "$link" && shadow+=("$link")
    done
    got=$(env -u LD_PRELOAD -u UCX_PLUGIN_PATH \
        LD_LIBRARY_PATH="$dest$ucx_libdir" "$ucx_info" -c 2>&1)
    if grep -q '^UCX_RVT_SEG_SIZE=' <<<"$got" &&
        grep -q '^UCX_RVT_REG_METHODS=' <<<"$got"; then
        pass "installed module loads from UCX's module dir, nothing set"
    else
        fail "UCX running from $dest$ucx_libdir does not load" \
            "${module#"$dest"} from its module dir: no UCX_RVT_* in ucx_info -c"
    fi
    rm -f "${shadow[@]}"
fi

if ! $MAKE -C "$abs_top_builddir" uninstall DESTDIR="$dest" >/dev/null 2>&1; then
    fail "make uninstall DESTDIR=$dest failed"
fi
left=$(cd "$dest" && find . -type f -o -type l)
if [ -z "$left" ]; then
    pass "make uninstall removes every file"
else
    fail "make uninstall left: $left"
fi

exit $failed
