#!/bin/bash
# ucx_perftest over rvt next to rc_verbs, UCT and UCP level, in a 2-node
# testbed (perftest-guest.sh says what runs and what is checked); exits
# with the guest script's status, 1 when a check failed.
# Usage: test/testbed/perftest.sh [BUILD_DIR]   (default: build)
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=${1:-build}
for f in src/uct/ib/rvt/tools/rvtd src/uct/ib/rvt/tools/rvt-status \
         src/uct/ib/rvt/uct/.libs/libuct_rvt.so; do
    [ -x "$build/$f" ] || [ -f "$build/$f" ] ||
        { fail "$build/$f not built (make)"; exit 1; }
done
# The UCT server's device alias (see the file): a test helper, not part
# of rvt, so it is built here rather than by make
shim_src=test/testbed/perftest_dev_alias.cc
shim=$build/test/testbed/perftest_dev_alias.so
if [ ! -f "$shim" ] || [ "$shim_src" -nt "$shim" ]; then
    if ! { mkdir -p "$(dirname "$shim")" &&
           ${CXX:-g++} -std=c++20 -O2 -Wall -Wextra -Werror -shared -fPIC \
               -o "$shim" "$shim_src" -ldl; }; then
        fail "building $shim"
        exit 1
    fi
fi
started=$SECONDS
contrib/testbed/testbed run -n 2 -t 1200 "test/testbed/perftest-guest.sh $build"
rc=$?
echo "perftest suite: $((SECONDS - started)) s of testbed time, boot included"
exit $rc
