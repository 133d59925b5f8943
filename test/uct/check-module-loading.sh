#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The UCX this build is for loads the rvt module the way the README says:
#  - a UCX that loads plugins (1.22): by itself, from a directory on
#    UCX_PLUGIN_PATH, with no LD_PRELOAD;
#  - a UCX that does not (1.13): only with LD_PRELOAD.
# Proof: the module's settings (UCX_RVT_REG_METHODS of the MD table,
# UCX_RVT_SEG_SIZE of the transport's) in that UCX's `ucx_info -c`. No
# device is needed: the settings are registered when the module loads.
#
# Run by `make check`, which sets abs_top_builddir, UCX_PREFIX (the
# installed UCX) and UCX_LOADS_PLUGINS (yes/no, from configure).
#
set -u
: "${abs_top_builddir:?run from make check}" "${UCX_PREFIX:?}"
: "${UCX_LOADS_PLUGINS:?}"

ucx_info=$UCX_PREFIX/bin/ucx_info
libs=$abs_top_builddir/src/uct/ib/rvt/uct/.libs
if [ ! -x "$ucx_info" ]; then
    echo "FAIL: no $ucx_info (install UCX's tools: ucx-utils for Debian's)"
    exit 1
fi
if [ ! -e "$libs/libuct_rvt.so" ]; then
    echo "FAIL: no $libs/libuct_rvt.so (make all first)"
    exit 1
fi
empty=$(mktemp -d "${TMPDIR:-/tmp}/rvt-check-module.XXXXXX") || exit 99
trap 'rmdir "$empty"' EXIT
failed=0

# settings ENV...: the UCX_RVT_* settings `ucx_info -c` shows with ENV
# (the caller's LD_PRELOAD and UCX_PLUGIN_PATH never leak in).
settings() {
    env -u LD_PRELOAD -u UCX_PLUGIN_PATH "$@" "$ucx_info" -c 2>&1 |
        grep -oE '^UCX_RVT_(REG_METHODS|SEG_SIZE)=' | sort -u | tr '\n' ' '
}

# expect NAME WANT ENV...: WANT is "both" or "none" of the two settings.
expect() {
    local name=$1 want=$2 got
    shift 2
    got=$(settings "$@")
    case $want:$got in
    "both:UCX_RVT_REG_METHODS= UCX_RVT_SEG_SIZE= " | none:)
        echo "PASS: $name: ${got:-no UCX_RVT_* settings}"
        ;;
    *)
        echo "FAIL: $name: expected $want of UCX_RVT_REG_METHODS and" \
            "UCX_RVT_SEG_SIZE, got: ${got:-none}"
        failed=1
        ;;
    esac
}

# Without any help UCX has no rvt (else the checks below prove nothing);
# an rvt installed into UCX's module directory would be found: then this
# is not checked.
if ls "$UCX_PREFIX"/lib*/ucx/libuct_rvt.* "$UCX_PREFIX"/lib/*/ucx/libuct_rvt.* \
    >/dev/null 2>&1; then
    echo "SKIP: (a) rvt is installed in $UCX_PREFIX's module directory"
else
    expect "(a) neither preload nor plugin path" none UCX_PLUGIN_PATH="$empty"
fi

if [ "$UCX_LOADS_PLUGINS" = yes ]; then
    expect "(b) UCX_PLUGIN_PATH=$libs, no LD_PRELOAD" both \
        UCX_PLUGIN_PATH="$libs"
else
    expect "(b) LD_PRELOAD=$libs/libuct_rvt.so" both \
        LD_PRELOAD="$libs/libuct_rvt.so"
fi

exit $failed
