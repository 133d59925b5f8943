#!/bin/bash
# Inside the testbed guest (2 nodes), from the Debian packages unpacked
# into ROOT (test/install/check-deb.sh): on each node `ucx_info -d` with
# the installed module preloaded lists transport rvt on the node's device;
# then Open MPI runs test/mpi/rvt_mpi_check, 2 ranks per node, over
# ud_verbs,rvt with every word verified, the module preloaded from ROOT
# and the agents started by it (no agent started by hand) from ROOT's
# rvtd (RVT_RVTD: the guest has no /usr/bin/rvtd, the host's root being
# read-only and uninstalled), authenticated by the nodes' MUNGE.
# Usage: check-deb-guest.sh BUILD_DIR ROOT (both relative to the tree)
set -u -o pipefail
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/../testbed/lib.sh"
build=${1:?usage: check-deb-guest.sh BUILD_DIR ROOT}
root=$PWD/${2:?usage: check-deb-guest.sh BUILD_DIR ROOT}
module=$(echo "$root"/usr/lib/*/ucx/libuct_rvt.so)
rvtd=$root/usr/bin/rvtd
rvt_status=$root/usr/bin/rvt-status
mpi_prog=$PWD/$build/test/mpi/rvt_mpi_check
export RVT_JOB_KEY=deb.$$
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d "$PWD/$build/deb.XXXXXX") || exit 1
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    # the agents leave by themselves, --linger (10 s) after the job
    rm -rf "$work"
}
trap cleanup EXIT

for n in 1 2; do
    if on "$n" env LD_PRELOAD="$module" ucx_info -d >"$work/info.$n" 2>&1 &&
        grep -A3 'Transport: rvt' "$work/info.$n" | grep -q "Device: rxe$n"; then
        pass "node$n: ucx_info -d lists Transport: rvt on rxe$n from the installed module"
    else
        fail "node$n: no transport rvt in ucx_info -d: $(grep -i -m3 'rvt\|error' "$work/info.$n")"
    fi
done

# shellcheck disable=SC2154 # mpirun_opts: set by mpi_options
mpi_tls=ud_verbs,rvt,sm,self mpi_pml_tls=ud_verbs,rvt mpi_slots=2 \
    mpi_options "$work/hosts" -x LD_PRELOAD="$module" -x RVT_RVTD="$rvtd"
# the installed module starts the agents: drop the suite's
# UCX_RVT_START_AGENT=n
opts=()
for o in "${mpirun_opts[@]}"; do
    [ "$o" = UCX_RVT_START_AGENT=n ] && unset 'opts[-1]' && continue
    opts+=("$o")
done
t0=$SECONDS
on 1 timeout 600 mpirun "${opts[@]}" -np 4 "$mpi_prog" --max-size=4194304 \
    >"$work/mpi.out" 2>&1
rc=$?
indent mpi <"$work/mpi.out"
if [ $rc = 0 ] && grep -q '^OK: rvt_mpi_check' "$work/mpi.out"; then
    pass "MPI job from the installed files: 2 nodes x 2 ranks over ud_verbs,rvt, every word verified ($((SECONDS - t0)) s)"
else
    fail "MPI job from the installed files (mpirun exit $rc; output above)"
fi
# right after the job, within the agents' linger: each node's agent
# answers, and it is ROOT's rvtd (the guest has no other outside the tree)
agents=$(pgrep -af "^$rvtd " || true)
for n in 1 2; do
    if on "$n" "$rvt_status" --device="rxe$n" --json >"$work/status.$n" 2>&1 &&
        jq -e . "$work/status.$n" >/dev/null; then
        pass "node$n: an agent for the job answers rvt-status (installed)"
    else
        fail "node$n: no agent for job $RVT_JOB_KEY answers: $(head -3 "$work/status.$n")"
    fi
done
if [ "$(grep -c . <<<"$agents")" -ge 2 ]; then
    pass "the module started the installed rvtd: $(grep -c . <<<"$agents") agents"
else
    fail "fewer than 2 processes of $rvtd: ${agents:-none}"
fi
finish check-deb
