#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# PID 1 of the testbed guest: builds the nodes' network and rxe devices,
# starts one namespace holder per node, runs the command, powers off.
#
# The network, in the one (initial) network namespace: rdma_rxe in 6.1
# receives and routes only there, so rxe devices on veth ends moved into
# other network namespaces fail with "local QP operation error".
#
#   node i:  veth<i> 198.18.0.<i>/24, rxe<i> on it
#            peer end vbr<i> enslaved to bridge br0
#
# Every address is local to this one kernel, so plain routing would take
# node-to-node traffic straight through lo. Policy routing sends packets
# from 198.18.0.<i> to another node's address out of veth<i> (table
# 100+i), and delivers what arrives
# on a veth locally, so each rxe device receives on its own port: rxe finds
# the receiving device by the ingress netdev. Neighbours are static so a
# port never answers ARP for another node's address.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb LANG=C.UTF-8
RUN=$1
. "$RUN/params"
# devtmpfs has no /dev/fd: bash's process substitution needs it
ln -sfn /proc/self/fd /dev/fd
ln -sfn /proc/self/fd/0 /dev/stdin
ln -sfn /proc/self/fd/1 /dev/stdout
ln -sfn /proc/self/fd/2 /dev/stderr
export TB_NODES TB_SRC TB_SHARE TB_TOP TB_RUN

# command output goes to a virtio-serial port (no tty layer: no CRLF
# rewriting, large writes); qemu connects it to the host script's stdout
out=
for _ in $(seq 50); do
    for p in /sys/class/virtio-ports/*; do
        [ "$(cat "$p/name" 2>/dev/null)" = tb.out ] && out=/dev/${p##*/}
    done
    [ -n "$out" ] && [ -c "$out" ] && break
    sleep 0.1
done
exec </dev/null >"${out:-/dev/ttyS0}" 2>&1

finish() {
    [ "$1" = 0 ] || dmesg > "$RUN/dmesg" 2>/dev/null
    echo "$1" > "$RUN/rc"
    sync
    echo o > /proc/sysrq-trigger
    while :; do sleep 1; done
}

node_ip() { echo "198.18.0.$1"; }

setup_network() {
    local i j n=$TB_NODES
    echo "$TB_MODPROBE" > /proc/sys/kernel/modprobe
    hostname testbed
    # a 1 MiB message is ~1000 RoCE packets queued on a veth at once; the
    # default backlog (1000) drops some, and each drop costs a 1 s rxe retry
    sysctl -qw net.core.netdev_max_backlog=65536
    for i in all default; do
        sysctl -qw net.ipv4.conf.$i.rp_filter=0 net.ipv4.conf.$i.accept_local=1 \
                   net.ipv4.conf.$i.arp_ignore=1 net.ipv4.conf.$i.arp_announce=2
    done
    {
        echo "link set lo up"
        echo "link add br0 type bridge"
        echo "link set br0 up"
        for ((i = 1; i <= n; i++)); do
            echo "link add veth$i type veth peer name vbr$i"
            echo "link set vbr$i master br0"
            echo "link set vbr$i up"
            echo "addr add $(node_ip $i)/24 dev veth$i"
            echo "link set veth$i up"
        done
        echo "rule add pref 1000 lookup local"
        echo "rule del pref 0"
        for ((i = 1; i <= n; i++)); do
            echo "rule add pref 100 iif veth$i lookup local"
            echo "route add 198.18.0.0/24 dev veth$i src $(node_ip $i) table $((100 + i))"
            for ((j = 1; j <= n; j++)); do
                [ $i = $j ] && continue
                echo "rule add pref 200 from $(node_ip $i) to $(node_ip $j) lookup $((100 + i))"
            done
        done
    } | ip -batch - || { echo "testbed: ip -batch failed"; return 1; }
    for ((i = 1; i <= n; i++)); do
        sysctl -qw net.ipv4.conf.veth$i.rp_filter=0 net.ipv4.conf.veth$i.accept_local=1
        for ((j = 1; j <= n; j++)); do
            [ $i = $j ] && continue
            ip neigh replace "$(node_ip $j)" dev "veth$i" nud permanent \
                lladdr "$(cat /sys/class/net/veth$j/address)"
        done
        rdma link add "rxe$i" type rxe netdev "veth$i" ||
            { echo "testbed: rdma link add rxe$i failed"; return 1; }
    done
    # the RoCE v2 IPv4 GID appears asynchronously
    local gid=
    for _ in $(seq 100); do
        gid=$(grep -l "0000:0000:0000:0000:0000:ffff:c612:00$(printf %02x "$n")" \
                  /sys/class/infiniband/rxe$n/ports/1/gids/* 2>/dev/null | head -1)
        [ -n "$gid" ] && break
        sleep 0.1
    done
    [ -n "$gid" ] || { echo "testbed: rxe$n has no IPv4 GID"; return 1; }
    echo "${gid##*/}" > "$RUN/gid_idx"
    # node names for every node (the host's /etc is read-only: bind a copy)
    {
        echo "127.0.0.1 localhost"
        for ((i = 1; i <= n; i++)); do echo "$(node_ip $i) node$i"; done
    } > /run/hosts
    mount --bind /run/hosts /etc/hosts
}

start_nodes() {
    local i
    mkdir -p "$RUN/nodes"
    # one MUNGE key for every node, as a Slurm site has (node-init.sh
    # starts each node's munged with it)
    mungekey -c -b 1024 -k "$RUN/munge.key" || return 1
    for ((i = 1; i <= TB_NODES; i++)); do
        setsid unshare --uts --mount --ipc --propagation private \
            bash "$TB_SRC/guest/node-init.sh" "$i" "$RUN" </dev/null \
            >"$RUN/nodes/node$i.log" 2>&1 &
        echo $! > "$RUN/nodes/node$i.pid"
    done
    for ((i = 1; i <= TB_NODES; i++)); do
        for _ in $(seq 100); do
            [ -f "$RUN/nodes/node$i.ready" ] && break
            sleep 0.05
        done
        [ -f "$RUN/nodes/node$i.ready" ] ||
            { echo "testbed: node$i did not come up:"; cat "$RUN/nodes/node$i.log"; return 1; }
    done
}

setup_network > "$RUN/setup.log" 2>&1 || { cat "$RUN/setup.log"; finish 125; }
start_nodes || finish 125
export PATH=$TB_SRC/guest/bin:$PATH UCX_UD_VERBS_ETH_DGID_CHECK=n
touch "$RUN/ready"
cd "$(cat "$RUN/cwd")" 2>/dev/null || cd /tmp
bash "$RUN/cmd.sh"
finish $?
