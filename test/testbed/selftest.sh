#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Testbed self-test (host side): boots the testbed with 4 nodes and runs
# selftest-guest.sh in it. Real RDMA between nodes, before rvt exists.
# Exits with the guest script's status (exec), 1 when a check failed.
# Usage: test/testbed/selftest.sh [NODES]   (default 4, at least 2)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 125
exec contrib/testbed/testbed run -n "${1:-4}" -t 900 bash test/testbed/selftest-guest.sh
