#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The modulefile ucx-rvt (contrib/modulefiles/ucx-rvt.in, as the build
# made it), for a UCX that loads only its own modules (1.13):
#   - it opens with Environment Modules' magic line (#%Module), which
#     Lmod reads as well;
#   - evaluated by tclsh with a stand-in for the module commands, it uses
#     none but module-whatis and append-path, and appends exactly the
#     installed module ($ucxmoduledir/libuct_rvt.so) to LD_PRELOAD, the
#     one variable it touches: "" becomes the module, "/a.so" becomes
#     "/a.so:<module>";
#   - with Environment Modules' modulecmd.tcl (installed, or named by
#     RVT_MODULECMD), `module load ucx-rvt` appends it to LD_PRELOAD and
#     `module unload` takes it away again.
# A UCX that loads plugins gets no modulefile: checked that none is built.
# Needs tclsh; exits 77 without it (contrib/setup-deps.sh installs tcl).
set -u
: "${UCX_LOADS_PLUGINS:?run from make check}" "${RVT_UCXMODULEDIR:?}"
file=$PWD/contrib/modulefiles/ucx-rvt
if [ "$UCX_LOADS_PLUGINS" = yes ]; then
    if [ -e "$file" ]; then
        echo "FAIL: $file built for a UCX that loads plugins"
        exit 1
    fi
    echo "PASS: a UCX that loads plugins needs no preload: no modulefile built"
    exit 0
fi
if ! command -v tclsh >/dev/null; then
    echo "SKIP: no tclsh (contrib/setup-deps.sh installs tcl)"
    exit 77
fi
[ -f "$file" ] || { echo "FAIL: $file not built"; exit 1; }
module=$RVT_UCXMODULEDIR/libuct_rvt.so
bad=0
ok() { echo "PASS: $*"; }
no() {
    echo "FAIL: $*"
    bad=1
}

if [ "$(head -c 8 "$file")" = "#%Module" ]; then
    ok "the modulefile opens with #%Module"
else
    no "the modulefile's first line: $(head -n 1 "$file")"
fi

# stand-in: the module commands a modulefile may call, recorded; any
# other command is an error
harness=$(mktemp /tmp/rvt-modulefile.XXXXXX.tcl) || exit 99
trap 'rm -f "$harness"' EXIT
cat >"$harness" <<'TCL'
set file [lindex $argv 0]
set calls {}
proc module-whatis {args} { lappend ::calls whatis }
proc append-path {args} {
    set args [lsearch -all -inline -not -glob $args -*]
    lassign $args var value
    lappend ::calls "append-path $var"
    if {[info exists ::env($var)] && $::env($var) ne ""} {
        set ::env($var) "$::env($var):$value"
    } else {
        set ::env($var) $value
    }
}
rename unknown _unknown
proc unknown {cmd args} { error "the modulefile calls $cmd" }
set before [array get env]
if {[catch {source $file} err]} { puts "error: $err"; exit 1 }
rename unknown {}
rename _unknown unknown
foreach {k v} [array get env] {
    if {![dict exists $before $k] || [dict get $before $k] ne $v} {
        puts "changed: $k=$v"
    }
}
puts "calls: [join $calls {, }]"
TCL
for start in "" /a.so; do
    got=$(env LD_PRELOAD="$start" tclsh "$harness" "$file" 2>&1)
    want=$module
    [ -n "$start" ] && want=$start:$module
    if [ "$(grep '^changed: ' <<<"$got")" = "changed: LD_PRELOAD=$want" ] &&
        grep -qx 'calls: whatis, append-path LD_PRELOAD' <<<"$got"; then
        ok "LD_PRELOAD='$start' becomes '$want': the one variable it changes (tclsh, module commands stood in for)"
    else
        no "LD_PRELOAD='$start': expected only LD_PRELOAD=$want; got: $got"
    fi
done

# the real Environment Modules, when there
cmd=${RVT_MODULECMD:-}
for c in /usr/lib/x86_64-linux-gnu/modulecmd.tcl /usr/share/modules/libexec/modulecmd.tcl \
    /usr/lib/modulecmd.tcl; do
    [ -z "$cmd" ] && [ -f "$c" ] && cmd=$c
done
if [ -n "$cmd" ]; then
    dir=$(dirname "$file")
    load=$(env -i PATH="$PATH" MODULEPATH="$dir" LD_PRELOAD=/a.so \
        tclsh "$cmd" sh load ucx-rvt 2>&1)
    if grep -qF "LD_PRELOAD=/a.so:$module;" <<<"$load"; then
        ok "Environment Modules ($cmd): module load ucx-rvt appends $module to LD_PRELOAD"
    else
        no "module load ucx-rvt with $cmd: $load"
    fi
    loaded=$(grep -oE "(_LMFILES_|LOADEDMODULES)=[^;]*" <<<"$load" | tr '\n' ' ')
    unload=$(env -i PATH="$PATH" MODULEPATH="$dir" LD_PRELOAD="/a.so:$module" \
        LOADEDMODULES=ucx-rvt _LMFILES_="$file" tclsh "$cmd" sh unload ucx-rvt 2>&1)
    if grep -qF "LD_PRELOAD=/a.so;" <<<"$unload"; then
        ok "Environment Modules: module unload ucx-rvt takes it away again ($loaded)"
    else
        no "module unload ucx-rvt with $cmd: $unload"
    fi
else
    echo "note: no Environment Modules here (modulecmd.tcl): the stand-in only"
fi
exit $bad
