#!/bin/bash
# Open MPI over rvt under a real Slurm cluster in the testbed, 2 nodes
# (slurm-guest.sh says what runs): mpirun in salloc and in sbatch, srun
# --mpi=pmix, two jobs at once, scancel and killed ranks, and
# contrib/slurm/rvt-slurm as Prolog and Epilog. Needs Debian's slurmctld,
# slurmd, slurm-client and munge on the host (contrib/setup-deps.sh
# installs them; the guest runs the host's binaries), and the MPI program,
# built here with mpicxx when make check has not.
# Usage: test/testbed/slurm.sh [BUILD_DIR]   (default: build)
# Exits with the guest script's status, 1 when a check failed.
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
build=${1:-build}
need_built "$build" make src/uct/ib/rvt/tools/rvtd src/uct/ib/rvt/tools/rvt-status \
    src/uct/ib/rvt/uct/.libs/libuct_rvt.so || exit 1
mpi_build mpicxx test/mpi/rvt_mpi_check.cc "$build/test/mpi/rvt_mpi_check" || exit 1
started=$SECONDS
contrib/testbed/testbed run -n 2 -t 600 "test/testbed/slurm-guest.sh $build"
rc=$?
echo "slurm suite: $((SECONDS - started)) s of testbed time, boot included"
exit $rc
