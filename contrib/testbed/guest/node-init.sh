#!/bin/bash
# Runs in node N's fresh UTS, mount and IPC namespaces (started by init.sh)
# and gives the node what tells one host from another: its hostname, its
# own /tmp, /dev/shm and /run, and its own boot id, which UCX takes as the
# host's identity (ucs_get_system_id) when it decides whether shared memory
# can reach a peer. Then it holds the namespaces open for `on`.
#
# There is deliberately no PID namespace: pids stay global in the guest, so
# a launcher on one node (mpirun's rsh agent, later) can enter another node
# with nsenter --target. Nothing in UCX or MPI keys "same host" on pids.
set -e
N=$1
RUN=$2
hostname "node$N"
# The share and the run directory must stay visible even when they lie
# below /tmp or /run: hold them open, and bind them back after the fresh
# tmpfs mounts have hidden them.
exec 3<"$TB_SHARE" 4<"$RUN"
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=755 tmpfs /run
for fd in 3 4; do
    dir=$([ $fd = 3 ] && echo "$TB_SHARE" || echo "$RUN")
    if [ ! -d "$dir" ]; then
        mkdir -p "$dir"
        # no canonicalisation: the fd's path now names the hidden dir
        mount --no-canonicalize --bind "/proc/self/fd/$fd" "$dir"
    fi
done
exec 3<&- 4<&-
mkdir -p /run/lock /run/user
cat /proc/sys/kernel/random/uuid > /run/boot_id
mount --bind /run/boot_id /proc/sys/kernel/random/boot_id
touch "$RUN/nodes/node$N.ready"
exec sleep infinity
