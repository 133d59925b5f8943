#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rvt as a site runs it: installed from its Debian packages, jobs launched
# by Slurm with MUNGE, each job's agents placed by the packaged prolog.
#  1. on the host, test/install/check-deb.sh: the packages built from the
#     release tarball (make dist; dpkg-buildpackage, through ccache when
#     /usr/lib/ccache is first in PATH, as contrib/run-tests.sh sets it),
#     lintian without errors, their file lists and dependencies, dpkg -i
#     into a throwaway root BUILD_DIR/deb/root, the installed programs,
#     pages and module;
#  2. one testbed boot of 2 nodes, a real Slurm cluster running Open MPI
#     jobs with the files installed in that root (site_jobs_guest.py says
#     what it checks).
# Needs Debian's slurmctld, slurmd, slurm-client, munge, dpkg-dev,
# debhelper and lintian on the host (contrib/setup-deps.sh installs them;
# the guest runs the host's binaries), and the MPI program, built here with
# mpicxx when make check has not.
# Usage: test/testbed/site-jobs.sh [--installed] [BUILD_DIR]  (default: build)
#   --installed  skip 1: the root a run of check-deb.sh left in
#                BUILD_DIR/deb/root (contrib/run-tests.sh runs check-deb.sh
#                on the host beside the perf run, and this suite in a lane)
# Exits 1 when a check failed.
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/testbed/lib.sh
. "$top/test/testbed/lib.sh"
cd "$top" || exit 125
installed=no
if [ "${1:-}" = --installed ]; then
    installed=yes
    shift
fi
build=${1:-build}
build=$(cd "$build" && pwd) || exit 125
started=$SECONDS
rc=0
root=$build/deb/root
if [ $installed = no ]; then
    test/install/check-deb.sh "$build" || rc=1
    echo "site jobs: packages built, checked and installed in $((SECONDS - started)) s"
fi
[ -x "$root/usr/bin/rvtd" ] || { echo "FAIL: no installed tree in $root: no Slurm jobs"; exit 1; }
mpi_build mpicxx test/mpi/rvt_mpi_check.cc "$build/test/mpi/rvt_mpi_check" || exit 1
mpi_build oshcxx test/shmem/rvt_shmem_check.cc "$build/test/shmem/rvt_shmem_check" || exit 1
t=$SECONDS
contrib/testbed/testbed run -n 2 -t 900 \
    "test/testbed/site_jobs_guest.py ${build#"$top"/} ${root#"$top"/}" || rc=1
echo "site jobs: $((SECONDS - t)) s of testbed time, boot included; $((SECONDS - started)) s in all"
exit $rc
