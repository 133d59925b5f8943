#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Testbed self-test, run inside the guest by test/testbed/selftest.sh:
# proves that the nodes are separate hosts as far as UCX and MPI can tell,
# and that real RDMA crosses between them, before any rvt code is involved.
# Prints PASS/FAIL per check and the figures of every transfer; exits 1
# if any check failed.
# shellcheck disable=SC2016 # commands for `on`: single quotes on purpose
set -u
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
tx_bytes() { cat "/sys/class/net/veth$1/statistics/tx_bytes"; }
N=$TB_NODES
G=$(cat "$TB_RUN/gid_idx")
echo "== testbed self-test: $N nodes, RoCE v2 GID index $G"

# ---- each node is its own host -------------------------------------------
names=$(on all hostname | sort)
echo "$names"
check "every node has its own hostname ($N distinct)" \
    test "$(on all hostname | sed 's/^\[node[0-9]*\] //' | sort -u | wc -l)" = "$N"
ids=$(on all cat /proc/sys/kernel/random/boot_id | sed 's/^\[node[0-9]*\] //' | sort -u | wc -l)
check "every node has its own boot id, UCX's host identity ($ids distinct)" test "$ids" = "$N"
on 1 sh -c 'echo one > /dev/shm/tb-selftest; echo one > /tmp/tb-selftest'
check "/dev/shm of node1 is not node2's" on 2 test ! -e /dev/shm/tb-selftest
check "/tmp of node1 is not node2's" on 2 test ! -e /tmp/tb-selftest
check "/dev/shm of node1 is node1's own" on 1 test -e /dev/shm/tb-selftest
for ((i = 1; i <= N; i++)); do
    check "node$i's device rxe$i is active" \
        on "$i" sh -c 'ibv_devinfo -d "$RXE_DEV" | grep -q PORT_ACTIVE'
done

# ---- verbs traffic between nodes -----------------------------------------
# pingpong: SEND/RECV with the receive buffers checked (--chk)
pingpong() { # pingpong SERVER_NODE CLIENT_NODE
    local s=$1 c=$2 port=$((18000 + $1)) before out
    before=$(tx_bytes "$c")
    on "$s" ibv_rc_pingpong -d "rxe$s" -g "$G" -p "$port" -s 65536 -n 200 --chk \
        > "/tmp/pp$s.out" 2>&1 &
    local spid=$!
    wait-port "$port" 60 || { fail "pingpong server on node$s"; return; }
    out=$(on "$c" ibv_rc_pingpong -d "rxe$c" -g "$G" -p "$port" -s 65536 -n 200 --chk "node$s" 2>&1)
    local rc=$?
    wait $spid
    local src=$?
    echo "$out" | grep -E 'bytes in|iters in' | sed "s/^/  node$c -> node$s: /"
    check "ibv_rc_pingpong node$c <-> node$s, 200 x 64 KiB verified" test $rc = 0 -a $src = 0
    local sent=$(( $(tx_bytes "$c") - before ))
    check "that traffic left node$c through its own port veth$c ($sent bytes >= 200 x 64 KiB)" \
        test "$sent" -ge $((200 * 65536))
}
pingpong 2 1
[ "$N" -ge 4 ] && pingpong 4 3

# RDMA WRITE bandwidth and latency (perftest)
perftest() { # perftest TOOL ARGS...: server on node2, client on node1
    local tool=$1 out
    shift
    on 2 "$tool" -d rxe2 -x "$G" "$@" > /tmp/perf-server.out 2>&1 &
    local spid=$!
    wait-port 18515 60 || { fail "$tool server"; return; }
    out=$(on 1 "$tool" -d rxe1 -x "$G" "$@" node2 2>&1)
    local rc=$?
    wait $spid
    echo "$out" | sed -n '/#bytes/,/^---/p' | grep -v '^---' | sed "s/^/  $tool: /"
    if [ $rc != 0 ]; then
        # what perftest said when it failed (a completion's error status,
        # a connection it could not make), both sides
        echo "$out" | grep -v '^ *[0-9#-]' | tail -6 | sed "s/^/  $tool client: /"
        grep -v '^ *[0-9#-]' /tmp/perf-server.out | tail -6 | sed "s/^/  $tool server: /"
    fi
    check "$tool node1 -> node2 $* (exit $rc)" test $rc = 0
}
perftest ib_write_bw -s 65536 -n 500 --report_gbits
perftest ib_write_lat -s 8 -n 1000

# ---- UCX over the testbed ------------------------------------------------
# UCT level, UCX's own rc_verbs: put bandwidth and active-message latency
uct_perf() { # uct_perf TEST SIZE ITERS [ucx_perftest options]
    local t=$1 size=$2 iters=$3 out rc
    shift 3
    on 2 ucx_perftest -x rc_verbs -d rxe2:1 -p 13337 > /tmp/uct-server.out 2>&1 &
    local spid=$!
    wait-port 13337 60 || { fail "ucx_perftest server"; return; }
    out=$(on 1 ucx_perftest node2 -p 13337 -x rc_verbs -d rxe1:1 -t "$t" -s "$size" \
              -n "$iters" -w 10 "$@" 2>&1)
    rc=$?
    wait $spid
    # the column header names the units of the Final line
    echo "$out" | grep -E '(latency|overhead) \(usec\)|^ *\| *Stage|^ *Final:|ERROR' | sed "s/^/  rc_verbs $t $size B: /"
    check "ucx_perftest -x rc_verbs $t${*:+ $*} node1 -> node2" test $rc = 0
}
uct_perf put_bw 65536 500 -D zcopy
uct_perf am_lat 8 1000

# UCP level with every transport enabled: the lanes UCX picks between two
# nodes must be network ones, and between two processes of one node they
# must include shared memory (which proves the first check can fail).
sm='posix|sysv|cma|xpmem|knem'
ucp_lanes() { # ucp_lanes SERVER_NODE CLIENT_NODE: print the ep_cfg lines
    local port=$((14000 + $1 * 10 + $2))
    on "$1" env UCX_LOG_LEVEL=info ucx_perftest -p "$port" > "/tmp/ucp-$1-$2.out" 2>&1 &
    local spid=$!
    wait-port "$port" 60 || return 1
    on "$2" env UCX_LOG_LEVEL=info ucx_perftest "node$1" -p "$port" -t tag_bw \
        -s 1048576 -n 20 -w 2 > "/tmp/ucp-$2-$1.client" 2>&1
    local rc=$?
    wait $spid
    grep -ho 'ep_cfg\[[0-9]*\]: .*' "/tmp/ucp-$2-$1.client" "/tmp/ucp-$1-$2.out" | sort -u
    grep -E '^ *Final:' "/tmp/ucp-$2-$1.client" | sed 's/^/  tag_bw 1 MiB: /' >&2
    return $rc
}
inter=$(ucp_lanes 2 1)
rc=$?
# shellcheck disable=SC2001 # a prefix for every line
echo "$inter" | sed 's/^/  node1 <-> node2 lanes: /'
check "UCP tag_bw node1 -> node2 with UCX_TLS=all" test $rc = 0 -a -n "$inter"
check "UCX picks no shared-memory transport between nodes" \
    bash -c "! grep -qE '$sm' <<< \"\$1\" && grep -q verbs <<< \"\$1\"" _ "$inter"
intra=$(ucp_lanes 3 3)
# shellcheck disable=SC2001
echo "$intra" | sed 's/^/  node3 <-> node3 lanes: /'
check "UCX does pick shared memory within one node (the check above can fail)" \
    bash -c "grep -qE '$sm' <<< \"\$1\"" _ "$intra"
echo "  ucx_info -e -u t -P inter on node1:"
on 1 ucx_info -e -u t -P inter 2>&1 | grep -E 'ep_cfg|lane\[' | head -8 | sed 's/^/    /'

finish "testbed self-test"
