#!/bin/bash
# The defaults the README states are the programs' own: each rvtd default
# the README names against `rvtd --help` ("(default: N)", written from
# src/uct/ib/rvt/common/defaults.h and the agent's config structs), and
# each UCX_RVT_* default it names against the module's config table as
# `ucx_info -c` shows it.
#
# Run by `make check` (abs_top_srcdir, abs_top_builddir, UCX_PREFIX,
# UCX_LOADS_PLUGINS); `all` built rvtd and the module.
set -u
: "${abs_top_srcdir:?run from make check}" "${abs_top_builddir:?}"
: "${UCX_PREFIX:?}" "${UCX_LOADS_PLUGINS:?}"
readme=$abs_top_srcdir/README.md
rvtd=$abs_top_builddir/src/uct/ib/rvt/tools/rvtd
libs=$abs_top_builddir/src/uct/ib/rvt/uct/.libs
failed=0

# compare WHAT README_VALUE PROGRAM_VALUE
compare() {
    if [ -z "$2" ] || [ "$2" != "$3" ]; then
        echo "FAIL: $1: README says '${2:-nothing found}', the program '$3'"
        failed=1
    else
        echo "PASS: $1: $2"
    fi
}

# readme_value ERE: the first README match of ERE's group 1, commas
# dropped ("4,096" is 4096); the README is joined into one line first, so
# a phrase may wrap
readme_value() {
    tr '\n' ' ' <"$readme" | sed -nE "s/.*$1.*/\\1/p" | head -n 1 | tr -d ,
}

# help_default OPTION: the default `rvtd --help` shows for --OPTION (its
# entry's wrapped lines joined)
help_default() {
    "$rvtd" --help | awk -f "$abs_top_srcdir/test/tools/help-entries.awk" |
        sed -nE "s/^  --$1=[A-Z]+ .*\\(default: ([^)]*)\\)\$/\\1/p"
}

# rvtd OPTION ERE: the README's default for --OPTION (ERE's group 1)
rvtd_default() {
    compare "rvtd --$1" "$(readme_value "$2")" "$(help_default "$1")"
}

if [ ! -x "$rvtd" ]; then
    echo "FAIL: no $rvtd (make all first)"
    exit 1
fi
rvtd_default inline-size "work ring's data slot \\(([0-9]+) by default\\)"
rvtd_default num-qps "small fixed number \\(default ([0-9]+)\\)"
rvtd_default max-clients "rvtd --max-clients\`, ([0-9]+) by default"
rvtd_default max-peers "\`--max-peers\`, ([0-9,]+) by default"
rvtd_default max-peers "the \`max_peers\` \\(([0-9,]+)\\) table"
rvtd_default spin-us "polls for \`--spin-us\` \\(([0-9]+)\\)"
rvtd_default fault-silent-qps "\\(tests only, ([0-9]+) by default\\)"

# ucx_default NAME: UCX_RVT_NAME's default in `ucx_info -c`, the module
# loaded the way this UCX loads it (check-module-loading.sh)
ucx_default() {
    local load
    if [ "$UCX_LOADS_PLUGINS" = yes ]; then
        load=UCX_PLUGIN_PATH=$libs
    else
        load=LD_PRELOAD=$libs/libuct_rvt.so
    fi
    env -u LD_PRELOAD -u UCX_PLUGIN_PATH "$load" "$UCX_PREFIX/bin/ucx_info" \
        -c 2>/dev/null | sed -nE "s/^UCX_RVT_$1=(.*)/\\1/p" | head -n 1
}

compare UCX_RVT_IDLE_YIELD "$(readme_value "UCX_RVT_IDLE_YIELD\`, default ([a-z]+)\\)")" \
    "$(ucx_default IDLE_YIELD)"
compare UCX_RVT_STRIPE_MIN "$(readme_value "the default, \`([a-z0-9]+)\`, never splits")" \
    "$(ucx_default STRIPE_MIN)"

exit $failed
