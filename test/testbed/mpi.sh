#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Open MPI and OpenSHMEM over rvt across 2 testbed nodes x 4 processes
# (mpi-guest.sh). Usage: test/testbed/mpi.sh [BUILD_DIR [threads]]
# (default: build; `threads`: only the MPI_THREAD_MULTIPLE program)
# `make check` builds the two programs when configure found Open MPI's
# wrappers (config/m4/rvt_mpi.m4); when they are missing or older than
# their source, they are built here with the wrappers (mpicxx, oshcxx:
# Debian's openmpi-bin and libopenmpi-dev, from setup-deps.sh), and without
# a wrapper the suite fails, saying which. Exits with the guest script's
# status, 1 when a check failed.
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=${1:-build}
only=${2:-}
mpi_build mpicxx test/mpi/rvt_mpi_check.cc "$build/test/mpi/rvt_mpi_check" || exit 1
mpi_build mpicxx test/mpi/rvt_mpi_threads.cc "$build/test/mpi/rvt_mpi_threads" || exit 1
mpi_build oshcxx test/shmem/rvt_shmem_check.cc "$build/test/shmem/rvt_shmem_check" || exit 1
t0=$SECONDS
contrib/testbed/testbed run -n 2 -t 1500 "test/testbed/mpi-guest.sh $build $only"
rc=$?
echo "mpi suite: $((SECONDS - t0)) s in the testbed (boot included)"
exit $rc
