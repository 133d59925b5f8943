#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The site check in the guest (check.sh): rvt-check on node 1's rxe1
# says yes to every need, in text and JSON, and its agent leaves after;
# a Soft-iWARP device on the same port (siw1) is refused by rvt-check and
# by rvtd at start, each naming iWARP; a device that does not exist is
# named with the devices there are; rvt-check --listen on node 2 and
# --peer on node 1 move 64 KiB each way over the agents' shared RC QPs,
# every byte checked, and --peer with nobody listening says so; rvtd
# run by an ordinary user cannot be read by the user's other processes.
# Usage: check-guest.sh BUILD_DIR
set -u
# shellcheck source=test/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
build=${1:?usage: check-guest.sh BUILD_DIR}
tools=$PWD/$build/src/uct/ib/rvt/tools
export RVT_RVTD=$tools/rvtd
work=$(mktemp -d /tmp/check.XXXXXX)
names="auth device transport port gid registration rc_qp ud_qp atomics agent register write_imm atomic"

# ---- rxe: every need, text ------------------------------------------------
on 1 "$tools/rvt-check" --device=rxe1 >"$work/rxe.txt" 2>&1
rc=$?
indent rxe <"$work/rxe.txt"
check "rvt-check on rxe1: exit 0" test $rc = 0
for n in $names; do
    check "rvt-check on rxe1: $n says yes" \
        grep -qE "^  yes  $n " "$work/rxe.txt"
done
check "rvt-check on rxe1: the write and its immediate checked through the agent" \
    grep -qE '^  yes  write_imm +64 KiB arrived intact, the immediate.s notice named this process' "$work/rxe.txt"

# ---- rxe: JSON ------------------------------------------------------------
on 1 "$tools/rvt-check" --device=rxe1 --json >"$work/rxe.json" 2>"$work/rxe.json.err"
rc=$?
check "rvt-check --json on rxe1: exit 0, ok true, the 13 checks each ok" \
    python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
names = sys.argv[2].split()
assert j["ok"] is True and j["device"] == "rxe1", j
assert [c["name"] for c in j["checks"]] == names, j["checks"]
assert all(c["ok"] is True and c["detail"] for c in j["checks"]), j["checks"]
' "$work/rxe.json" "$names"
check "rvt-check --json: exit status 0 ($rc)" test $rc = 0
# its agent leaves a second after the check (--linger=1)
for _ in $(seq 50); do
    pgrep -f 'rvtd .*--job-key=rvt-check\.' >/dev/null || break
    sleep 0.2
done
check "the check's agent has left" \
    sh -c "! pgrep -f 'rvtd .*--job-key=rvt-check\.' >/dev/null"

# ---- siw: refused, by the check and by the agent ---------------------------
# modules come from the testbed's kernel, through the kernel's modprobe
# (the testbed's wrapper)
if "$(cat /proc/sys/kernel/modprobe)" siw 2>"$work/siw.err" &&
    rdma link add siw1 type siw netdev veth1 2>>"$work/siw.err"; then
    on 1 "$tools/rvt-check" --device=siw1 >"$work/siw.txt" 2>&1
    rc=$?
    indent siw <"$work/siw.txt"
    check "rvt-check on siw1: exit 1" test $rc = 1
    check "rvt-check on siw1: the transport says no, naming iWARP and what it lacks" \
        grep -qE '^  no   transport +an iWARP device: it has no UD QPs .* and no immediate data' "$work/siw.txt"
    check "rvt-check on siw1: no agent started" \
        sh -c "! grep -qE '^  (yes|no) +agent' '$work/siw.txt'"
    on 1 timeout 30 "$RVT_RVTD" --device=siw1 --job-key=check.siw --linger=1 \
        >"$work/rvtd-siw.log" 2>&1
    rc=$?
    indent rvtd <"$work/rvtd-siw.log"
    check "rvtd --device=siw1 refuses to start (exit $rc), naming iWARP" \
        sh -c "[ $rc != 0 ] && [ $rc != 124 ] && grep -q 'device siw1 port 1: an iWARP device' '$work/rvtd-siw.log'"
    rdma link delete siw1 2>/dev/null
else
    indent siw <"$work/siw.err"
    fail "cannot add a Soft-iWARP device (modprobe siw, rdma link add siw1 type siw netdev veth1)"
fi

# ---- two nodes: a transfer each way, every byte checked --------------------
# node 2 listens first; node 1 comes to it (either order works within
# --peer-wait)
on 2 "$tools/rvt-check" --device=rxe2 --listen=7100 --peer-wait=60 --json \
    >"$work/listen.json" 2>"$work/listen.err" &
listener=$!
on 1 "$tools/rvt-check" --device=rxe1 --peer=node2:7100 >"$work/peer.txt" 2>&1
rc=$?
wait $listener
lrc=$?
indent peer <"$work/peer.txt"
check "rvt-check --peer=node2:7100 on node 1: exit 0" test $rc = 0
for n in peer peer_write peer_receive; do
    check "rvt-check --peer on node 1: $n says yes" \
        grep -qE "^  yes  $n " "$work/peer.txt"
done
check "rvt-check --peer: its 64 KiB arrived intact on node 2, and node 2's here, named by the immediate" \
    sh -c "grep -qE '^  yes  peer_write +64 KiB arrived intact there' '$work/peer.txt' &&
           grep -qE '^  yes  peer_receive +64 KiB arrived intact, the immediate.s notice named the other process' '$work/peer.txt'"
check "rvt-check --listen=7100 on node 2: exit 0 ($lrc), every check ok, the peer's three last" \
    python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
names = sys.argv[2].split() + ["peer", "peer_write", "peer_receive"]
assert j["ok"] is True and j["device"] == "rxe2", j
assert [c["name"] for c in j["checks"]] == names, j["checks"]
assert all(c["ok"] is True for c in j["checks"]), j["checks"]
' "$work/listen.json" "$names"
[ "$lrc" = 0 ] || indent listen <"$work/listen.json"

# nobody listening: the peer check says no, naming the address and the wait
on 1 "$tools/rvt-check" --device=rxe1 --peer=node2:7101 --peer-wait=2 \
    >"$work/nopeer.txt" 2>&1
rc=$?
check "rvt-check --peer=node2:7101 with nobody there: exit 1, peer says no naming it" \
    sh -c "[ $rc = 1 ] && grep -qE '^  no   peer +--peer=node2:7101: no rvt-check --listen there in 2 s' '$work/nopeer.txt'"

# ---- a device that does not exist -----------------------------------------
on 1 "$tools/rvt-check" --device=nosuch0 >"$work/nosuch.txt" 2>&1
rc=$?
check "rvt-check --device=nosuch0: exit 1, naming the devices there are" \
    sh -c "[ $rc = 1 ] && grep -qE '^  no   device +nosuch0 does not open \(devices here: .*rxe1' '$work/nosuch.txt'"

# ---- an ordinary user's agent: no other process of the user reads it ---
# rvtd makes itself non-dumpable at start (docs/reliability.md, "Hostile
# input"): the files in its /proc entry are root's, so the user's other
# processes can neither ptrace it nor read its memory or environment.
# (/proc/PID itself stays the task's euid whatever its dumpable flag: the
# kernel's task_dump_owner leaves the world-readable directories as they
# were, so `ps` and stat-based tools still see the owner.)
key=nodump.$$
# (root gives it the locked-memory limit a site gives its users: the
# agent registers its receive pool)
on 1 prlimit --memlock=unlimited:unlimited setpriv --reuid=65534 \
    --regid=65534 --clear-groups -- env -i \
    PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/ "$tools/rvtd" --device=rxe1 \
    --job-key=$key --linger=0 --auth=none >"$work/nobody.log" 2>&1 &
apid=
for _ in $(seq 100); do
    apid=$(pgrep -u 65534 -f "rvtd .*--job-key=$key" | head -n 1)
    [ -n "$apid" ] && grep -q 'serving job' "$work/nobody.log" && break
    sleep 0.1
done
if [ -n "$apid" ] && grep -q 'serving job' "$work/nobody.log"; then
    owner=$(stat -c %u "/proc/$apid/environ")
    check "rvtd run by uid 65534 is not dumpable: its /proc/PID/environ is root's (uid $owner), its environment unreadable by the user" \
        sh -c "[ '$owner' = 0 ] && ! setpriv --reuid=65534 --regid=65534 --clear-groups -- cat /proc/$apid/environ >/dev/null 2>&1"
    kill "$apid"
else
    fail "rvtd as uid 65534 on rxe1 did not serve: $(tail -n 3 "$work/nobody.log")"
fi

rm -rf "$work"
finish check
