#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Inside the testbed guest (2 nodes): ucx_perftest over rvt, next to UCX's
# own rc_verbs on the same rxe devices in the same run.
#
#   1. UCT level, node 1 -> node 2: put_lat, put_bw, am_lat, am_bw, each
#      with -D short, bcopy and zcopy, for -x rvt and -x rc_verbs; one
#      table of the figures (8 B for latency; for bandwidth 64 KiB or the
#      largest size both transports take in that layout).
#   2. UCP level, node 1 -> node 2, UCX_TLS=rvt,self and rvt,sm,self:
#      tag_lat, tag_bw (4 MiB, rendezvous), ucp_put_bw, stream_bw, and the
#      lanes UCP chose: rvt must carry the am lane, the rendezvous (rma_bw)
#      lanes and, for ucp_put_bw, the RMA lane. The rendezvous of tag_bw
#      (UCX 1.13's default scheme: the receiver reads) must show up as
#      bytes posted by node 2's agent.
#   3. The same tag_bw with UCX_RNDV_SCHEME=put_zcopy: node 2's agent must
#      have delivered writes with immediate, and node 1's must have posted
#      at least the bytes moved (rvt-status life totals, which outlive the
#      client; a striped write's notice comes with its last part only).
#   4. Both processes on node 1, UCX_TLS=rvt,sm,self: shared memory must
#      carry the am lane and the first rendezvous lane.
#
# Every ucx_perftest run is a PASS when it ends with a figure and no UCX
# error, and a FAIL with its error text otherwise. Figures are printed,
# never judged: under TCG they say little about real hardware, only rvt
# against rc_verbs in the same run.
#
# Exits 1 if any check failed.
# Usage: perftest-guest.sh BUILD_DIR (a path relative to the source tree)
# shellcheck disable=SC2016 # jq filters and commands for `on`: single quotes on purpose
set -u -o pipefail
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
build=${1:?usage: perftest-guest.sh BUILD_DIR}
perf_guest_setup perftest "$build"

# the agents: started by hand, staying (linger 0) so that their life
# totals cover the whole run
for n in 1 2; do
    on "$n" bash -c "exec timeout 1500 $rvtd --device=\$RXE_DEV --linger=0" \
        >"$work/rvtd.$n.log" 2>&1 &
done
for n in 1 2; do
    wait_agent "$n" || { fail "rvtd on node $n does not answer"; exit 1; }
done

# ---- 1. UCT level ------------------------------------------------------
section "UCT level: ucx_perftest -x rvt / -x rc_verbs -d rxe1:1, node1 -> node2"

# caps TL: "OP_LAYOUT BYTES" lines of rxe1:1 for TL, from ucx_info -d (the
# agent is up; START_AGENT=n keeps node 1 from starting one for rxe2)
caps() {
    on 1 env LD_PRELOAD="$module" UCX_RVT_START_AGENT=n timeout 60 \
        ucx_info -d -t "$1" 2>/dev/null | awk '
        function bytes(v) {
            sub(/,$/, "", v)
            if (v ~ /K$/) return v * 1024
            if (v ~ /M$/) return v * 1048576
            if (v ~ /G$/) return v * 1073741824
            return v + 0
        }
        /Device:/ { dev = $3 }
        dev == "rxe1:1" && $2 ~ /^(put|am)_(short|bcopy|zcopy):$/ {
            op = $2; sub(/:$/, "", op)
            print op, ($3 == "unlimited" ? 1073741824 : bytes($4))
        }'
}
declare -A cap
for tl in rvt rc_verbs; do
    while read -r op v; do cap[$tl.$op]=$v; done < <(caps $tl)
    echo "$tl caps on rxe1:1: $(for k in put_short put_bcopy put_zcopy am_short am_bcopy am_zcopy; do printf '%s<=%s ' $k "${cap[$tl.$k]:-?}"; done)"
    # without them the sizes below are guesses: say so, and go on
    [ -n "${cap[$tl.am_bcopy]:-}" ] ||
        fail "ucx_info -d -t $tl shows no rxe1:1 capabilities"
done

# The server takes every parameter from its client, the device name
# included: node 2 would open node 1's rxe1 (all nodes share one kernel)
# and the test would never leave node 1. perftest_dev_alias.so makes
# node 2 open its own rxe2 under that name (see the file).
alias_env="RVT_PERFTEST_DEV_ALIAS=rxe1:1=rxe2:1"
declare -A fig
uct_rows=()
for test in put_lat put_bw am_lat am_bw; do
    op=${test%_*}
    kind=${test#*_}
    for layout in short bcopy zcopy; do
        if [ "$kind" = lat ]; then
            size=8 iters=100 warm=10
        else
            # 64 KiB or the largest both transports take in this layout
            size=65536 iters=1000 warm=50
            for tl in rvt rc_verbs; do
                c=${cap[$tl.${op}_$layout]:-0}
                [ "$c" -gt 0 ] && [ "$c" -lt "$size" ] && size=$c
            done
            [ "$size" -ge 16384 ] && iters=100 warm=10
        fi
        uct_rows+=("$test $layout $size")
        for tl in rvt rc_verbs; do
            out=$work/uct.$test.$layout.$tl
            senv="LD_PRELOAD=$dev_alias $alias_env"
            cenv=""
            if [ $tl = rvt ]; then
                senv="LD_PRELOAD=$module:$dev_alias $alias_env"
                cenv="LD_PRELOAD=$module"
            fi
            name="uct $test -D $layout ${size} B, $tl"
            if perf_pair "$out" 2 1 "$senv" "$cenv" -t "$test" -x "$tl" \
                -d rxe1:1 -D "$layout" -s "$size" -n "$iters" -w "$warm" &&
                f=$(figure "$out" "$kind"); then
                if grep -q 'perftest_dev_alias: rxe1:1 opens rxe2:1' \
                    "$out.server"; then
                    fig[$test.$layout.$tl]=$f
                    pass "$name: $f ($pair_secs s)"
                else
                    fig[$test.$layout.$tl]="(wrong device)"
                    fail "$name: the server did not open its own rxe2"
                fi
            else
                fig[$test.$layout.$tl]="error"
                fail "$name: $(error_text "$out")"
            fi
        done
    done
done

echo
printf '%-8s %-6s %8s  %-14s %-14s %s\n' test layout size rvt rc_verbs rvt/rc_verbs
for row in "${uct_rows[@]}"; do
    read -r test layout size <<<"$row"
    r=${fig[$test.$layout.rvt]} c=${fig[$test.$layout.rc_verbs]}
    ratio=$(awk -v r="$r" -v c="$c" 'BEGIN {
        split(r, a, " "); split(c, b, " ")
        if (a[1] + 0 > 0 && b[1] + 0 > 0) printf "%.2f", a[1] / b[1]
        else printf "-" }')
    printf '%-8s %-6s %8s  %-14s %-14s %s\n' "$test" "$layout" "$size" "$r" "$c" "$ratio"
done
echo "(lat: median of half round trips, rvt/rc_verbs > 1 is slower; bw: overall"
echo " MB/s, < 1 is slower; TCG emulation: compare the columns, not the numbers)"

# rvt's UCT traffic went between the nodes: node 1's agent used its peer
# node 2, not its loopback QPs
if out=$(json_verdict "$(agent_json 1)" '.data_path.peers
    | (map(select(.loopback | not) | .ops) | add // 0) as $remote
    | (map(select(.loopback) | .ops) | add // 0) as $loop
    | {ok: ($remote > 0 and $loop == 0),
       text: "node 1 agent: \($remote) ops posted to node 2, \($loop) on loopback"}'); then
    pass "rvt UCT runs crossed the nodes: $out"
else
    fail "rvt UCT runs did not cross the nodes as expected: $out"
fi

# ---- 2. UCP level ------------------------------------------------------
# lanes OUT WHERE TEST: the lanes of the client's endpoint, from the last
# "ep_cfg" line (UCX INFO: features and transports) and the last per-lane
# block (UCX DEBUG from wireup.c: each lane's roles); prints them and a
# summary line. WHERE=remote: rvt must carry the am lane and the
# rendezvous (rma_bw) lanes, or for ucp_put_bw the rma lanes. WHERE=local:
# shared memory must carry the am lane and the first rendezvous lane.
# (Python, not jq: it reads UCX's log text, with regular expressions)
lanes() {
    /usr/bin/python3 - "$1.client" "$2" "$3" <<'PY'
import re, sys
path, where, test = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(path, errors="replace").read().splitlines()
cfg = [l for l in text if "ep_cfg[" in l]
block = []
for l in text:
    if re.search(r"ep 0x[0-9a-f]+: am_lane", l):
        block = []
    elif re.search(r"ep 0x[0-9a-f]+: lane\[", l):
        block.append(l)
if not cfg or not block:
    print("no lane lines found (UCX_LOG_LEVEL=debug output missing)")
    sys.exit(1)
ep_cfg = cfg[-1][cfg[-1].index("ep_cfg["):]
print("   ", ep_cfg)
roles = {}  # "tl/dev" -> its role tokens: am, rma_bw#0, am_bw#0, wireup...
for l in block:
    print("   ", l[l.index("lane["):])
    m = re.search(r"lane\[\d+\]:\s+\d+:(\S+)\.\d+ .*->\s*\S+(.*)", l)
    if m:
        roles.setdefault(m.group(1), []).extend(m.group(2).split())
am = [d for d, r in roles.items() if "am" in r]
rndv = sorted((t, d) for d, r in roles.items() for t in r
              if t.startswith("rma_bw#"))
rndv = [d for _, d in rndv]  # by priority: rma_bw#0 first
rma = re.search(r"\brma\(([^)]*)\)", ep_cfg)
rma = rma.group(1).split() if rma else []
summary = f"am on {am}, rendezvous (rma_bw) on {rndv}"
if test == "ucp_put_bw":
    summary += f", rma on {rma or 'nothing: ' + ep_cfg}"
def is_rvt(d):
    return d.startswith("rvt/")
if where == "remote":
    if test == "ucp_put_bw":
        ok = bool(rma) and all(map(is_rvt, rma))
    else:
        ok = bool(am) and all(map(is_rvt, am)) and (
            test == "stream_bw" or (bool(rndv) and all(map(is_rvt, rndv))))
else:
    ok = bool(am) and not any(map(is_rvt, am)) and bool(rndv) and \
        not is_rvt(rndv[0])
print(summary)
sys.exit(0 if ok else 1)
PY
}

# UCX_LOG_LEVEL=debug only for ucp_worker.c (the ep_cfg line) and
# wireup.c (one line per lane with its roles): one glob that matches
# both, so the data path stays quiet
log_env="UCX_LOG_LEVEL=debug UCX_LOG_FILE_FILTER=*/[uw][ci][pr][_e][wu][op]*.c"

# peer_bytes N: bytes node N's agent posted to other nodes (life total)
peer_bytes() {
    agent_get "$1" '.data_path.peers | map(select(.loopback | not) | .bytes) | add // 0'
}
# delivered N: "writes bytes" that node N's agent delivered to its
# clients as WRITE WITH IMM, over its life (they outlive the clients)
delivered() {
    agent_get "$1" '.data_path.delivered | "\(.writes) \(.write_bytes)"'
}

# ucp_case TLS TEST SIZE ITERS WARM [ENV...]: one UCP run between the
# nodes, its figure and its lanes
ucp_case() {
    local tls=$1 test=$2 size=$3 iters=$4 warm=$5 out kind=bw f l
    shift 5
    [ "$test" = tag_lat ] && kind=lat
    out=$work/ucp.$test.${tls//,/_}.$port
    local env="LD_PRELOAD=$module UCX_TLS=$tls $log_env $*"
    local name="ucp $test $size B, UCX_TLS=$tls${*:+ $*}"
    if perf_pair "$out" 2 1 "$env" "$env" -t "$test" -s "$size" \
        -n "$iters" -w "$warm" && f=$(figure "$out" $kind); then
        pass "$name: $f ($pair_secs s)"
    else
        fail "$name: $(error_text "$out")"
    fi
    if l=$(lanes "$out" remote "$test"); then
        echo "$l"
        pass "$name: lanes between the nodes on rvt ($(tail -1 <<<"$l"))"
    elif [ "$test" = ucp_put_bw ] && grep -q 'rma_am(rvt/' <<<"$l"; then
        echo "$l"
        # UCP 1.13 takes an RMA lane only from a transport with put_short,
        # put_bcopy, get_bcopy and pending (ucp/wireup/select.c); rvt has
        # no get_bcopy, so UCP emulates puts with rvt's active messages
        fail "$name: no RMA lane: UCP emulates RMA over rvt AMs (rma_am), rvt lacks UCT_IFACE_FLAG_GET_BCOPY, which UCP 1.13 requires of an RMA lane"
    else
        echo "$l"
        fail "$name: lanes between the nodes not as expected ($(tail -1 <<<"$l"))"
    fi
}

size_rndv=4194304 iters_rndv=4 warm_rndv=1
moved=$(((iters_rndv + warm_rndv) * size_rndv))
for tls in rvt,self rvt,sm,self; do
    section "UCP level, UCX_TLS=$tls, node1 -> node2"
    ucp_case "$tls" tag_lat 8 100 10
    # a rendezvous size; UCX 1.13's default scheme has the receiver read
    # (get_zcopy), so node 2's agent posts the bytes as RDMA READ
    b0=$(peer_bytes 2)
    ucp_case "$tls" tag_bw $size_rndv $iters_rndv $warm_rndv
    b1=$(peer_bytes 2)
    if [ -n "$b0" ] && [ -n "$b1" ] && [ $((b1 - b0)) -ge $moved ]; then
        pass "tag_bw rendezvous, UCX_TLS=$tls: node 2's agent posted $((b1 - b0)) bytes to node 1 (RDMA READ of the rendezvous) >= $moved moved"
    else
        fail "tag_bw rendezvous, UCX_TLS=$tls: node 2's agent posted ${b0:-?} -> ${b1:-?} bytes, expected >= $moved more (RDMA READ of the rendezvous)"
    fi
    ucp_case "$tls" ucp_put_bw 65536 100 10
    ucp_case "$tls" stream_bw 65536 100 10
done

# ---- 3. rendezvous as RDMA WRITE WITH IMM -------------------------------
section "rendezvous by RDMA WRITE WITH IMM: UCX_RNDV_SCHEME=put_zcopy"
# put_zcopy makes the sender write into the receiver's buffer, which rvt
# does as WRITE WITH IMM, routed and counted by the receiver's agent
read -r w0 wb0 < <(delivered 2)
s0=$(peer_bytes 1)
ucp_case rvt,self tag_bw $size_rndv $iters_rndv $warm_rndv \
    UCX_RNDV_SCHEME=put_zcopy
read -r w1 wb1 < <(delivered 2)
s1=$(peer_bytes 1)
if [ -n "${w0:-}" ] && [ -n "${w1:-}" ] && [ $((w1 - w0)) -gt 0 ] &&
    [ -n "$s0" ] && [ -n "$s1" ] && [ $((s1 - s0)) -ge $moved ]; then
    pass "node 2's agent delivered $((w1 - w0)) writes with immediate ($((wb1 - wb0)) bytes in their notices), node 1's posted $((s1 - s0)) bytes to node 2 >= $moved bytes moved ($((iters_rndv + warm_rndv)) x $size_rndv)"
else
    fail "rendezvous not delivered as WRITE WITH IMM on node 2: writes ${w0:-?} -> ${w1:-?}; node 1 posted ${s0:-?} -> ${s1:-?} bytes, moved $moved"
fi

# ---- 2b. within one node ------------------------------------------------
section "UCP level, UCX_TLS=rvt,sm,self, both processes on node1"
# the design intent: shared memory within a node, rvt between nodes
out=$work/ucp.samenode
env="LD_PRELOAD=$module UCX_TLS=rvt,sm,self $log_env"
if perf_pair "$out" 1 1 "$env" "$env" -t tag_bw -s $size_rndv \
    -n $iters_rndv -w $warm_rndv && f=$(figure "$out" bw); then
    pass "ucp tag_bw $size_rndv B on one node, UCX_TLS=rvt,sm,self: $f ($pair_secs s)"
else
    fail "ucp tag_bw on one node: $(error_text "$out")"
fi
l=$(lanes "$out" local tag_bw)
lrc=$?
echo "$l"
if [ $lrc = 0 ]; then
    pass "within a node UCP prefers shared memory ($(tail -1 <<<"$l"))"
else
    fail "within a node UCP does not prefer shared memory: $(tail -1 <<<"$l")"
fi
if grep -q 'rvt/.*rma_bw#[1-9]' <<<"$l"; then
    # UCP 1.13 fills up to UCX_MAX_RNDV_LANES (2) rendezvous lanes with
    # any transport that can reach the peer, with no bandwidth cut-off
    # (ucp_wireup_add_bw_lanes); rc_verbs (with ud_verbs for its wire-up)
    # is picked the same way, which ucx_info shows without a second run
    echo "note: rvt is a second rendezvous lane within the node; rc_verbs for comparison:"
    echo "    UCX_TLS=rc_verbs,ud_verbs:aux,sm,self ucx_info -e -u t -P intra:"
    cmp=$(on 1 env UCX_TLS=rc_verbs,ud_verbs:aux,sm,self timeout 60 \
        ucx_info -e -u t -P intra 2>&1)
    # shellcheck disable=SC2001 # a prefix for every line
    grep 'lane\[' <<<"$cmp" | sed 's/^# */    /' ||
        sed 's/^/    /' <<<"$cmp" | head -5
fi

section "agents"
for n in 1 2; do
    on "$n" bash -c "timeout 20 $rvt_status --device=\$RXE_DEV" |
        grep -E '^(delivered|peers)|  peer' | sed "s/^/[node$n status] /"
done
echo "guest time: $((SECONDS - t_start)) s"
finish perftest
