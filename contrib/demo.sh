#!/bin/bash
# The main job: installs what is missing, boots the Soft-RoCE testbed with
# two nodes and shows real RDMA traffic between them (contrib/demo-guest.sh).
set -u -o pipefail
top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
cd "$top" || exit 1
contrib/setup-deps.sh > /dev/null || exit 1
contrib/testbed/testbed prepare || exit 1
exec contrib/testbed/testbed run -n 2 -t 900 bash contrib/demo-guest.sh
