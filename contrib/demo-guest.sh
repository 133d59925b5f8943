#!/bin/bash
# The main job's guest side (run by contrib/demo.sh inside the testbed):
# two nodes, each its own host with its own Soft-RoCE device, moving data
# over RDMA: raw verbs first, then UCX's rc_verbs (the baseline), then rvt:
# processes on both nodes sharing their agents' few QPs, through the client
# library and through UCX.
set -u
G=$(cat "$TB_RUN/gid_idx")
say() { echo; echo "--- $*"; }
say "the nodes"
on all sh -c 'echo "$(hostname): $RXE_DEV on $NODE_IP, boot id $(cut -c1-8 /proc/sys/kernel/random/boot_id)"'
on 1 ibv_devinfo -d rxe1 | grep -E 'hca_id|state|active_mtu|link_layer'

say "RDMA WRITE bandwidth, node1 -> node2 (perftest ib_write_bw, 64 KiB)"
on 2 ib_write_bw -d rxe2 -x "$G" -s 65536 -n 1000 --report_gbits > /dev/null 2>&1 &
wait-port 18515 60 && on 1 ib_write_bw -d rxe1 -x "$G" -s 65536 -n 1000 --report_gbits node2 |
    sed -n '/#bytes/,/^---/p' | grep -v '^---'
wait || exit 1

say "UCX rc_verbs between the nodes (ucx_perftest, UCP level, all transports enabled)"
for t in tag_lat tag_bw; do
    size=8
    [ $t = tag_bw ] && size=1048576
    on 2 ucx_perftest -p 13337 > /dev/null 2>&1 &
    wait-port 13337 60 || exit 1
    on 1 env UCX_LOG_LEVEL=info ucx_perftest node2 -p 13337 -t $t -s $size -n 200 -w 5 2>&1 |
        grep -E 'ep_cfg|latency \(usec\)|Stage|Final' | sed "s/^/$t: /"
    wait || exit 1
done
build=${RVT_BUILD:-build}
rvtd=$build/src/uct/ib/rvt/tools/rvtd
status=$build/src/uct/ib/rvt/tools/rvt-status
module=$PWD/$build/src/uct/ib/rvt/uct/.libs/libuct_rvt.so
export RVT_JOB_KEY=demo.1
work=$(mktemp -d "$PWD/$build/demo.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf "$work"' EXIT

say "rvt: one agent per node (K = 4 shared RC QPs per remote node)"
for n in 1 2; do
    on $n bash -c "exec $rvtd --device=\$RXE_DEV --linger=0" >"$work/rvtd.$n.log" 2>&1 &
done
for n in 1 2; do
    for _ in $(seq 100); do
        on $n bash -c "$status --device=\$RXE_DEV" >/dev/null 2>&1 && break
        sleep 0.1
    done
done

say "rvt: 4 processes per node, each writing (with immediate) to and sending to all 7 others, every byte checked"
pids=()
for n in 1 2; do
    for r in 0 1 2 3; do
        on $n "$build/test/gtest/integration/rvt_traffic_client" --dir="$work" \
            --id=$(((n - 1) * 4 + r)) --clients=8 --rounds=4 --size=65536 &
        pids+=($!)
    done
done
for p in "${pids[@]}"; do wait "$p" || exit 1; done
for n in 1 2; do
    on $n bash -c "$status --device=\$RXE_DEV" | grep -E '^peers|  peer' | sed "s/^/node$n: /"
done
echo "node1's agent holds 4 RC QPs to node2 (plus 4 loopback) for its 4 processes;"
echo "per-process RC (rc_verbs) would need 4 x 4 = 16 QPs on each side."

say "UCX over rvt (LD_PRELOAD=libuct_rvt.so, UCX_TLS=rvt,self): UCP tag_lat and tag_bw, node1 -> node2"
for t in tag_lat tag_bw; do
    size=8
    [ $t = tag_bw ] && size=1048576
    on 2 env LD_PRELOAD="$module" UCX_TLS=rvt,self ucx_perftest -p 13338 > /dev/null 2>&1 &
    wait-port 13338 60 || exit 1
    on 1 env LD_PRELOAD="$module" UCX_TLS=rvt,self UCX_LOG_LEVEL=info \
        ucx_perftest node2 -p 13338 -t $t -s $size -n 200 -w 5 2>&1 |
        grep -E 'ep_cfg|latency \(usec\)|Stage|Final' | sed "s/^/rvt $t: /"
    wait %% 2>/dev/null
done
echo
echo "Both run on the same emulated testbed: compare rvt with rc_verbs as ratios,"
echo "never as absolute numbers (TCG, 2 vCPUs, every process polling)."
