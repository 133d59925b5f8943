#!/bin/bash
# Inside the testbed guest (1 node): UCX_PREFIX's ucx_info loads rvt from
# the directory on UCX_PLUGIN_PATH, with no LD_PRELOAD (test/testbed/
# plugin.sh). The checks:
#   1. without UCX_PLUGIN_PATH there is no rvt (unless installed into
#      that UCX's module directory: then this is skipped);
#   2. with it, `ucx_info -d` lists transport rvt on the node's device and
#      opens its interface (its capabilities are printed);
#   3. this UCX has rc_verbs and ud_verbs too, the transports rvt is
#      compared with.
# Exits 1 if any check failed.
# Usage: plugin-guest.sh BUILD_DIR UCX_PREFIX
set -u -o pipefail
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
build=${1:?usage: plugin-guest.sh BUILD_DIR UCX_PREFIX}
prefix=${2:?usage: plugin-guest.sh BUILD_DIR UCX_PREFIX}
libs=$PWD/$build/src/uct/ib/rvt/uct/.libs
out=$(mktemp -d "$PWD/$build/plugin.XXXXXX")
trap 'rm -rf "$out"' EXIT

# info OUT ENV...: `ucx_info -d` of that UCX on node 1 with ENV and
# neither LD_PRELOAD nor an inherited UCX_PLUGIN_PATH; rvt starts its
# agent from this build
info() {
    local file=$1
    shift
    on 1 env -u LD_PRELOAD -u UCX_PLUGIN_PATH \
        RVT_RVTD="$PWD/$build/src/uct/ib/rvt/tools/rvtd" \
        RVT_JOB_KEY="plugin.$$" "$@" timeout 120 "$prefix/bin/ucx_info" -d \
        >"$out/$file" 2>&1
}

if ls "$prefix"/lib*/ucx/libuct_rvt.* >/dev/null 2>&1; then
    echo "SKIP: rvt is installed in $prefix's module directory"
else
    info none
    if grep -q 'Transport: rvt' "$out/none"; then
        fail "without UCX_PLUGIN_PATH, $prefix/bin/ucx_info lists rvt"
    else
        pass "without UCX_PLUGIN_PATH, no rvt"
    fi
fi

info plugin UCX_PLUGIN_PATH="$libs"
if grep -q 'Transport: rvt' "$out/plugin"; then
    pass "UCX_PLUGIN_PATH=$libs, no LD_PRELOAD: ucx_info -d lists rvt"
else
    fail "UCX_PLUGIN_PATH=$libs, no LD_PRELOAD: ucx_info -d has no rvt"
fi
# the rvt section: from its Transport line to the next transport or MD
awk '/Transport: |Memory domain: /{in_rvt = ($3 == "rvt")} in_rvt' \
    "$out/plugin" >"$out/rvt"
# an interface that does not open shows "< failed to open interface >"
if grep -q 'am_bcopy' "$out/rvt" && ! grep -q 'failed' "$out/rvt"; then
    pass "rvt's interface opens: $(grep -m1 'Device:' "$out/rvt" | xargs)"
else
    fail "rvt's interface does not open:"
    sed 's/^/    /' "$out/rvt"
    grep 'UCX  ERROR' "$out/plugin" | head -5 | sed 's/^/    /'
fi
for tl in rc_verbs ud_verbs; do
    check "$prefix has $tl" grep -q "Transport: $tl" "$out/plugin"
done

finish "plugin (UCX $("$prefix/bin/ucx_info" -v | sed -n 's/^# Library version: //p'))"
