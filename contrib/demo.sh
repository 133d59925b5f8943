#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job: installs what is missing, builds rvt, boots the Soft-RoCE
# testbed with two nodes and shows real RDMA traffic between them: raw
# verbs, UCX's rc_verbs, then rvt (contrib/demo-guest.sh).
set -u -o pipefail
top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
cd "$top" || exit 1
ucx_line=$(contrib/setup-deps.sh) || exit 1
eval "$ucx_line"
echo "building rvt (log: build/build.log)"
mkdir -p build
{ ./autogen.sh && cd build && ../configure --with-ucx-src="$UCX_SRC" &&
    make -j"$(nproc)" && make -j"$(nproc)" check TESTS=; } \
    > "$top/build/build.log" 2>&1 ||
    { tail -30 "$top/build/build.log"; echo "demo: build failed"; exit 1; }
cd "$top" || exit 1
contrib/testbed/testbed prepare || exit 1
exec contrib/testbed/testbed run -n 2 -t 900 bash contrib/demo-guest.sh
