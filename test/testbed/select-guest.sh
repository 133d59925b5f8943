#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the testbed guest (2 nodes): UCP chooses rvt by itself when the
# job is large (docs/performance.md, "UCP chooses rvt by itself for a
# large job"). With UCX_TLS unset, one ucx_perftest pair (UCP tag_bw, a
# rendezvous size) between the nodes at several estimated endpoint counts
# (UCX_NUM_EPS), and the lanes of the client's endpoint
# (UCX_LOG_LEVEL=debug from wireup.c):
#
#   endpoints  RC_MAX_NUM_EPS  am lane   rendezvous (rma_bw) lanes
#   8          256 (UCX's)     rc_verbs  rc_verbs
#   256        256             ud_verbs  rc_verbs  (ud's latency wins
#                                                   the am lane past 90)
#   257        256             ud_verbs  rvt       (rc is unscalable past
#   1024       256             ud_verbs  rvt        its MAX_NUM_EPS)
#   4096       256             ud_verbs  rvt
#   1100       inf             ud_verbs  rc_verbs  (rc's 1 ns an endpoint
#   1150       inf             ud_verbs  rvt        passes rvt's hops and
#                                                   overhead at ~1,125)
#
# rvt reports the device latency rc_verbs reports plus its agents' hops,
# with no growth per endpoint, rc_verbs' bandwidth (the same RC writes)
# and no endpoint limit. UCP first chooses among the transports whose
# MAX_NUM_EPS covers the estimate: past rc's 256 that is ud and rvt, the
# recommended setting. A site that raises UCX_RC_MAX_NUM_EPS gets the
# latency arithmetic's threshold instead. A change of any lane here
# fails the check. With Debian's UCX (1.13), also: Open MPI's pml ucx
# passes its job size as UCP's estimated endpoints (ucp_context.c's debug
# line), so an MPI job needs no UCX_NUM_EPS.
#
# Exits 1 if any check failed.
# Usage: select-guest.sh BUILD_DIR [UCX_PREFIX]
#   UCX_PREFIX: a UCX release setup-deps.sh built (1.16, 1.18, 1.22), which
#   takes rvt as the build's configure found (UCX_LOADS_PLUGINS: from
#   UCX_PLUGIN_PATH, else preloaded); without it, Debian's UCX with the
#   module preloaded
# shellcheck disable=SC2154 # rvtd, module, work: perf_guest_setup's
set -u -o pipefail
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
build=${1:?usage: select-guest.sh BUILD_DIR [UCX_PREFIX]}
prefix=${2:-}
perf_guest_setup select "$build"
ucx="Debian's UCX"
if [ -n "$prefix" ]; then
    # shellcheck disable=SC2034 # perf_pair runs it
    UCX_PERFTEST=$prefix/bin/ucx_perftest
    ucx="UCX $prefix"
fi
load=$(module_env)

agents_up 900 1 2 || finish select

# lanes OUT: "AM_TL RNDV_TL..." of the client's last endpoint: the
# transport of the lane with role am, then those with rma_bw#0, #1, ...
lanes() {
    /usr/bin/python3 - "$1.client" <<'PY'
import re, sys
am, rndv = [], []
for l in open(sys.argv[1], errors="replace"):
    if re.search(r"ep 0x[0-9a-f]+: am_lane", l):
        am, rndv = [], []
    m = re.search(r"ep 0x[0-9a-f]+: lane\[\d+\]:\s+\d+:(\w+)/\S+ .*->\s*\S+(.*)", l)
    if m:
        roles = m.group(2).split()
        if "am" in roles:
            am.append(m.group(1))
        rndv += [(r, m.group(1)) for r in roles if r.startswith("rma_bw#")]
print(" ".join(am + [tl for _, tl in sorted(rndv)]) or "no lanes found")
PY
}

section "UCX_TLS unset, $ucx: the lanes UCP chooses by the job's size"
# ud_verbs drops every packet on rxe without the DGID check off (docs/testing.md, "The testbed")
base="$load UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_RVT_START_AGENT=n \
UCX_LOG_LEVEL=debug UCX_LOG_FILE_FILTER=*wireup.c"
for want in "8 256 rc_verbs rc_verbs" "256 256 ud_verbs rc_verbs" \
    "257 256 ud_verbs rvt" "1024 256 ud_verbs rvt" "4096 256 ud_verbs rvt" \
    "1100 inf ud_verbs rc_verbs" "1150 inf ud_verbs rvt"; do
    read -r eps rc_max am rndv <<<"$want"
    out=$work/select.$eps.$rc_max
    env="$base UCX_NUM_EPS=$eps UCX_RC_MAX_NUM_EPS=$rc_max"
    name="UCX_NUM_EPS=$eps UCX_RC_MAX_NUM_EPS=$rc_max"
    if ! perf_pair "$out" 2 1 "$env" "$env" -t tag_bw -s 1048576 -n 4 -w 1; then
        fail "$name: ucx_perftest tag_bw: $(error_text "$out")"
        continue
    fi
    got=$(lanes "$out")
    if [ "$got" = "$am $rndv" ]; then
        pass "$name: am on $am, rendezvous on $rndv"
    else
        fail "$name: expected am on $am and the rendezvous on $rndv, UCP chose: $got"
        grep -E 'lane\[' "$out.client" | tail -4 | indent lanes
    fi
done

if [ -n "$prefix" ]; then
    # these releases' protocols weigh each operation (uct_iface_estimate_perf):
    # a large plain ucp_tag_send (what Open MPI calls) must take rvt's
    # zero-copy rendezvous, not ud_verbs' fragments
    section "UCX_TLS=ud_verbs,rvt, $ucx: the protocol of a large ucp_tag_send"
    on 1 env "$load" UCX_TLS=ud_verbs,rvt UCX_UD_VERBS_ETH_DGID_CHECK=n \
        UCX_RVT_START_AGENT=n "$prefix/bin/ucx_info" -e -u t -P inter \
        >"$work/protocols" 2>&1
    largest=$(/usr/bin/python3 - "$work/protocols" <<'PY'
import re, sys
block, last = False, None
for l in open(sys.argv[1], errors="replace"):
    if "tagged message by" in l:
        block = "ucp_tag_send* from host memory" in l
    m = re.match(r"# \|\s*(\S+)\s*\|\s*(.*?)\s*\|\s*(\S+)\s*\|", l)
    if block and m and m.group(1)[0].isdigit():
        last = f"{m.group(1)}: {m.group(2)} on {m.group(3)}"
print(last or "no ucp_tag_send table")
PY
)
    if [[ $largest == *"rendezvous zero-copy"*" on rvt/"* ]]; then
        pass "the largest messages: $largest"
    else
        fail "the largest messages: expected a zero-copy rendezvous on rvt, UCP chose $largest"
    fi
fi

if [ -z "$prefix" ]; then
    section "Open MPI's pml ucx: the job size is UCP's estimated endpoints"
    prog=$PWD/$build/test/mpi/rvt_mpi_check
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # shellcheck disable=SC2034 # mpi_options reads it
    mpi_slots=2
    mpi_options "$work/hosts" -x LD_PRELOAD="$module" \
        -x UCX_LOG_LEVEL=debug -x "UCX_LOG_FILE_FILTER=*ucp_context.c"
    out=$work/mpi.out
    on 1 timeout 600 mpirun "${mpirun_opts[@]}" -np 4 --map-by ppr:2:node \
        "$prog" --max-size=4096 --iterations=1 >"$out" 2>&1
    rc=$?
    said=$(grep -c 'estimated number of endpoints is 4$' "$out")
    if [ $rc = 0 ] && [ "$said" = 4 ]; then
        pass "4 ranks: each rank's UCP estimates 4 endpoints (estimated_num_eps = the world size)"
    else
        fail "4 ranks: mpirun exit $rc, $said of 4 ranks estimated 4 endpoints:"
        grep -E 'estimated number|FAIL|ERROR' "$out" | head -6 | indent mpi
    fi
fi
finish select
