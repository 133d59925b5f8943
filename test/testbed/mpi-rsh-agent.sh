#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Open MPI's stand-in for ssh inside the testbed (mpirun --mca
# plm_rsh_agent THIS): the guest has no ssh, but `on N CMD` enters node N.
#
#   mpi-rsh-agent.sh [SSH-OPTIONS...] HOST COMMAND-WORDS...
#
# HOST is nodeN or 198.18.0.N. Like ssh, the command words are joined and
# run by a shell on the node (mpirun quotes them for that). `on` needs
# TB_RUN and TB_NODES, which mpirun passes down from the guest's control
# context, where mpi-guest.sh started it.
set -u -o pipefail
# mpirun may add ssh-like options (-x, -o ...) before the host
while [[ ${1:-} == -* ]]; do
    case $1 in
    -o | -l | -p | -i) shift 2 ;;
    *) shift ;;
    esac
done
host=${1:?usage: mpi-rsh-agent.sh [OPTIONS] HOST COMMAND...}
shift
case $host in
node[0-9]*) n=${host#node} ;;
198.18.0.[0-9]*) n=${host##*.} ;;
*)
    echo "mpi-rsh-agent: no testbed node is called '$host'" >&2
    exit 255 # what ssh returns when it cannot reach a host
    ;;
esac
: "${TB_RUN:?mpi-rsh-agent: TB_RUN unset (not started inside the testbed?)}"
: "${TB_NODES:?mpi-rsh-agent: TB_NODES unset}" "${TB_SRC:?mpi-rsh-agent: TB_SRC unset}"
exec "$TB_SRC/guest/bin/on" "$n" bash -c "$*"
