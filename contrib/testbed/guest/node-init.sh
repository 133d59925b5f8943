#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
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
# The share, the run directory and the testbed's tree must stay visible
# even when they lie below /tmp or /run: hold them open, and bind them
# back after the fresh tmpfs mounts have hidden them, outer paths first so
# that binding one never hides another.
mapfile -t keep < <(printf '%s\n' "$TB_SHARE" "$RUN" "$TB_TOP" |
                    awk '{ print length($0), $0 }' | sort -n | cut -d' ' -f2-)
exec 3<"${keep[0]}" 4<"${keep[1]}" 5<"${keep[2]}"
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=755 tmpfs /run
for i in 0 1 2; do
    fd=/proc/self/fd/$((i + 3))
    if [ "$(stat -Lc %d:%i "$fd")" != "$(stat -c %d:%i "${keep[i]}" 2>/dev/null)" ]; then
        mkdir -p "${keep[i]}"
        # no canonicalisation: the fd's path now names the hidden dir
        mount --no-canonicalize --bind "$fd" "${keep[i]}"
    fi
done
exec 3<&- 4<&- 5<&-
mkdir -p /run/lock /run/user
cat /proc/sys/kernel/random/uuid > /run/boot_id
mount --bind /run/boot_id /proc/sys/kernel/random/boot_id
# MUNGE, as every Slurm site runs it: the run's one key, this node's own
# munged at MUNGE's default socket (/run is the node's), so that rvtd's
# --auth=auto proves its peers with it. --force: it runs as root here.
mkdir -p /run/munge
munged --force --key-file="$RUN/munge.key" --socket=/run/munge/munge.socket.2 \
    --log-file=/run/munge/munged.log --pid-file=/run/munge/munged.pid \
    --seed-file=/run/munge/munged.seed
touch "$RUN/nodes/node$N.ready"
exec sleep infinity
