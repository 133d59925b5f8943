#!/bin/bash
# The main job's guest side (run by contrib/demo.sh inside the testbed):
# two nodes, each its own host with its own Soft-RoCE device, moving data
# over RDMA: raw verbs first, then UCX's rc_verbs, the baseline rvt will be
# measured against.
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
echo
echo "Real RDMA between two hosts of the testbed. The rvt transport is not usable yet;"
echo "this demo becomes rvt's (processes sharing the agent's QPs) when it is."
