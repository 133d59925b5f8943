#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the testbed guest (2 nodes): what each kind of verbs object costs
# on this device, measured, for the per-node table (qp-table.sh prints it;
# docs/performance.md, "The device side"). Prints one JSON object
# between the lines "--- measurement" and "--- end":
#
#   probe        qp_cost_probe's figures for 64 objects of each kind (the
#                device's limits, the capabilities it granted, the bytes
#                each object maps from the device and adds to the
#                process), with the capabilities the transports ask for:
#   rc_verbs, ud_verbs   the RC and UD QPs UCX creates, from its own debug
#                line (ib_iface.c, "created RC QP ... TX wr:N sge:N inl:N
#                ... RX wr:N") during a ucx_perftest pair
#   rvt          the agent's deep RC QP (--sq-depth, 2 SGEs, --inline-size,
#                on its SRQ), from rvtd --help's defaults: the first
#                --deep-peers remote nodes' QPs and the node's own
#   rvt_shallow  the agent's shallow RC QP (--shallow-sq-depth, otherwise
#                the same): every further remote node's
#   registered   the bytes each process has registered with the device
#                while it runs (`rdma -j resource show mr`, the largest
#                sample): a rc_verbs process (UCX_TLS=rc_verbs,
#                ud_verbs:aux: its receive and send buffers), a UCX_TLS=
#                ud_verbs process, and the agent with one client attached
#   config       what the counts scale with: rvtd's --num-qps and
#                --deep-peers, and UCX's RC and UD receive queue lengths
#                and segment sizes
#
# Exits 1 if a measurement failed.
# Usage: qp-table-guest.sh BUILD_DIR
# shellcheck disable=SC2154 # rvtd, module, work: perf_guest_setup's
set -u -o pipefail
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
build=${1:?usage: qp-table-guest.sh BUILD_DIR}
perf_guest_setup qptable "$build"
probe=$PWD/$build/test/testbed/qp_cost_probe

# registered_max OUT COMM: the most bytes node 1's processes named COMM
# had registered on rxe1 at once, sampled every 0.2 s until OUT.done exists
registered_max() {
    local out=$1 comm=$2 most=0 now
    while [ ! -e "$out.done" ]; do
        now=$(rdma -j resource show mr 2>/dev/null | jq --arg c "$comm" \
            '[.[] | select(.ifname == "rxe1" and .comm == $c) | .mrlen] | add // 0')
        [ "${now:-0}" -gt "$most" ] && most=$now
        sleep 0.2
    done
    echo "$most"
}

# ucx_run NAME UCX_TLS: a ucx_perftest tag_lat pair (node 1 the client)
# under UCX's debug log of ib_iface.c; sets reg[NAME] to what the client
# registered at most
declare -A reg
ucx_run() {
    local name=$1 tls=$2 out=$work/ucx.$1
    local env="UCX_TLS=$tls UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_LOG_LEVEL=debug UCX_LOG_FILE_FILTER=*ib_iface.c"
    registered_max "$out" ucx_perftest >"$out.reg" &
    local sampler=$!
    perf_pair "$out" 2 1 "$env" "$env" -t tag_lat -s 8 -n 20000 -w 100
    local rc=$?
    touch "$out.done"
    wait "$sampler"
    reg[$name]=$(cat "$out.reg")
    [ $rc = 0 ] || { fail "ucx_perftest over $tls: $(error_text "$out")"; return 1; }
}
ucx_run rc_verbs rc_verbs,ud_verbs:aux,self || finish qptable
ucx_run ud_verbs ud_verbs,self || finish qptable

# created TYPE: "WR SGE INLINE RECV_WR RECV_SGE" of UCX's last TYPE QP
created() {
    sed -n "s/.*created $1 QP .*TX wr:\([0-9]*\) sge:\([0-9]*\) inl:\([0-9]*\) resp:[0-9-]* RX wr:\([0-9]*\) sge:\([0-9]*\).*/\1 \2 \3 \4 \5/p" \
        "$work/ucx.rc_verbs.client" "$work/ucx.ud_verbs.client" | tail -1
}
read -r rc_wr rc_sge rc_inl _ _ <<<"$(created RC)"
read -r ud_wr ud_sge ud_inl ud_rwr ud_rsge <<<"$(created UD)"
if [ -z "${rc_wr:-}" ] || [ -z "${ud_wr:-}" ]; then
    fail "UCX's \"created RC/UD QP\" debug lines not found"
    finish qptable
fi

# the agent's defaults, as rvtd --help states them: the "(default: N)" in
# the option's paragraph (from its line "  --NAME=" to the next option's),
# which may break across its lines
default_of() {
    "$rvtd" --help | awk -v opt="--$1=" '
        /^  --[a-z]/ { on = index($1, opt) == 1 }
        on { text = text " " $0 }
        END {
            gsub(/[ \t]+/, " ", text)
            if (match(text, /\(default: [0-9]+\)/)) {
                n = substr(text, RSTART, RLENGTH); gsub(/[^0-9]/, "", n); print n
            }
        }'
}
k=$(default_of num-qps) sq=$(default_of sq-depth) inl=$(default_of inline-size)
shallow=$(default_of shallow-sq-depth) deep_peers=$(default_of deep-peers)
srq=$(default_of srq-size) am=$(default_of am-size)
for v in k sq inl shallow deep_peers srq am; do
    [ -n "${!v}" ] || { fail "rvtd --help states no default for $v"; finish qptable; }
done

# the agent with one client attached: a ucx_perftest pair over rvt, and
# node 1's agent's registrations meanwhile
agents_up 900 1 2 || finish qptable
out=$work/rvt
registered_max "$out" rvtd >"$out.reg" &
sampler=$!
env="LD_PRELOAD=$module UCX_TLS=rvt,self UCX_RVT_START_AGENT=n"
perf_pair "$out" 2 1 "$env" "$env" -t tag_lat -s 8 -n 2000 -w 100
rc=$?
touch "$out.done"
wait "$sampler"
reg[rvtd]=$(cat "$out.reg")
[ $rc = 0 ] || { fail "ucx_perftest over rvt: $(error_text "$out")"; finish qptable; }

# the probe, on node 1's device
if ! on 1 bash -c "$probe \$RXE_DEV 64 \
    rc_verbs:rc:$rc_wr:$rc_sge:$rc_inl:0:1 \
    ud_verbs:ud:$ud_wr:$ud_sge:$ud_inl:$ud_rwr:$ud_rsge \
    rvt:rc:$sq:2:$inl:0:1 rvt_shallow:rc:$shallow:2:$inl:0:1 \
    rvt_srq:srq:$srq:1" >"$work/probe.json" 2>&1; then
    fail "qp_cost_probe: $(head -3 "$work/probe.json")"
    finish qptable
fi

ucx_value() { ucx_info -c -f | sed -n "s/^$1=//p" | head -1; }
echo "--- measurement"
jq -n --slurpfile probe "$work/probe.json" \
    --argjson reg_rc "${reg[rc_verbs]}" --argjson reg_ud "${reg[ud_verbs]}" \
    --argjson reg_rvtd "${reg[rvtd]}" \
    --argjson k "$k" --argjson deep_peers "$deep_peers" \
    --argjson srq "$srq" --argjson am "$am" \
    --arg rc_rx "$(ucx_value UCX_RC_VERBS_RX_QUEUE_LEN)" \
    --arg rc_seg "$(ucx_value UCX_RC_VERBS_SEG_SIZE)" \
    --arg ud_rx "$(ucx_value UCX_UD_VERBS_RX_QUEUE_LEN)" \
    --arg ud_seg "$(ucx_value UCX_UD_VERBS_SEG_SIZE)" \
    --arg kernel "$(uname -r)" \
    '{kernel: $kernel, probe: $probe[0],
      registered: {rc_verbs_process: $reg_rc, ud_verbs_process: $reg_ud,
                   rvt_agent: $reg_rvtd},
      config: {num_qps: $k, deep_peers: $deep_peers, srq_size: $srq,
               am_size: $am,
               rc_rx_queue_len: $rc_rx, rc_seg_size: $rc_seg,
               ud_rx_queue_len: $ud_rx, ud_seg_size: $ud_seg}}'
echo "--- end"
pass "measured: RC QP (UCX) wr $rc_wr inline $rc_inl, UD QP wr $ud_wr recv $ud_rwr, the agent's RC QP wr $sq (shallow $shallow, past $deep_peers remote nodes) inline $inl"
finish qptable
