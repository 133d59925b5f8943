#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Inside the testbed guest (2 nodes): a real Slurm cluster (Debian 12's
slurmctld on node1, slurmd on both, the testbed's munged on each with
one key) runs Open MPI jobs over rvt from the INSTALLED Debian packages
(test/install/check-deb.sh unpacked rvt-agent and ucx-rvt into ROOT):
the module preloaded from ROOT as README.Debian says, and each job's
agents started inside the job by ROOT's spank_rvt.so (plugstack.conf,
PrologFlags=Contain) in its extern step, from the job file ROOT's
/usr/lib/rvt/rvt-slurm writes as Prolog (RVT_JOBS=asked: the jobs that
ask with --rvt), with ROOT's rvtd. No rvt setting is given to the jobs
but --rvt, the preload and UCX_TLS (section 6: --rvt and UCX_TLS alone).

  0. on each node `ucx_info -d` with the installed module preloaded
     lists transport rvt on the node's device
  1. two jobs of the same user at once, both with --rvt: mpirun inside
     salloc (UCX_TLS=ud_verbs,rvt) and inside sbatch (UCX_TLS=rvt);
     each verifies every word (test/mpi/rvt_mpi_check); from each node,
     the job's agent is the one spank_rvt.so started (its pid in
     slurmd's log), a child of `slurmstepd: [<job>.extern]`, serving
     slurm.<job> before the first rank with no client, the only agent
     of the job (the module started none of its own), with
     --priority=fifo:10 as configured (its CPUs shown: the extern
     step's), authenticated its peer with MUNGE (no --auth given),
     carried bytes both ways, and its one remote peer is the other
     node's agent of its own job; after each job no agent of it is left
  2. with the Epilog off, a job cancelled mid-transfer (scancel) and a
     job whose node-2 ranks are SIGKILLed, at once: no agent (Slurm ends
     the extern step's), MR, QP, CQ or PD left on any device (`rdma
     resource` as before the jobs)
  3. the next job, srun --mpi=pmix launching the ranks itself
     (UCX_TLS=ud_verbs,rvt): verified, its agents as in 1, pinned to
     RVT_AGENT_CPUS=0,1 by the plugin
  4. an OpenSHMEM job (oshmem's spml ucx, mpirun in salloc,
     UCX_TLS=rvt): test/shmem/rvt_shmem_check verifies every word, its
     agents as in 1
  5. a job without --rvt: no job file and no agent on any node
  6. two ordinary users (made here: /etc/passwd and /etc/group copies
     bound on each node), a --rvt batch job each at once, srun
     --mpi=pmix launching the ranks with nothing set but UCX_TLS and
     Open MPI's pml: each verifies every word through its own job's
     agents, which run as its user, children of the extern step, the
     module given to the ranks by the plugin (LD_PRELOAD) and no agent
     started by it; neither user can reach the other's socket, signal
     its agent or read its environment; after both, no agent is left

Prints PASS:/FAIL: lines and exits 1 if any check failed.
Usage: site_jobs_guest.py BUILD_DIR ROOT (both relative to the tree)

The testbed's nodes share one kernel and network namespace; what that
asks of Slurm (each node's slurmd on a port of its own, state and spool
in the node's own /run, a stand-in /sys/fs/cgroup, the node's device
through a TaskProlog, the prolog's settings file beside the job's work
as the guest's /etc is the host's, read-only) is testbed plumbing, said
where it is done. What the testbed cannot show: the cgroup charge (no
cgroup hierarchy per node: proctrack/linuxproc ends the extern step's
agent as the stepd's child); test/tools/check-slurm-jobs.sh shows the
same on the host, with a slurmstepd and a slurmd killed.

The job scripts Slurm runs (job.sh, noask.sh, user-job.sh) stay shell,
written into the work directory from the text here."""

import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# no __pycache__ written into the tree the guest shares with the host
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guest  # noqa: E402

# small: the suite shows the launch paths, not bandwidth (mpi.sh does)
MPI_ARGS = "--max-size=262144 --iterations=2 --coll-max-size=65536"
# long enough to be cut short mid-transfer, whatever the emulator's
# load: the two jobs are always cut (scancel, SIGKILL), never left to
# end, so length costs nothing (50 iterations and 64 MiB a size ended one
# in about 300 s in a gate, before the other was seen moving); from
# 64 KiB, so that data moves soon after the ranks start
LONG_ARGS = "--min-size=65536 --max-size=16777216 --iterations=1000 --volume=1073741824"
SHMEM_ARGS = "--large=262144 --rounds=2"

# Open MPI inside an allocation: its plm slurm starts an orted on node2
# with srun (step 0), its own ranks on node1 are mpirun's children (no
# step); both derive the key slurm.<SLURM_JOB_ID>. pml ucx and the rest
# as in lib.sh's mpi_options, less the rsh agent; UCX_TLS per job.
# job.sh TAG TLS KIND, in the allocation (salloc's shell or the batch
# script, on node1). KIND: mpirun; srun (srun --mpi=pmix launches the
# ranks); barrier (mpirun once $work/TAG.go exists, holding the job until
# TAG.release so that two jobs overlap); long (the long program, no
# status). Writes TAG.job (the job id), TAG.out (the program's output),
# TAG.status.N (rvt-status --json of node N's agent of the job, after the
# ranks: the extern step's agents stay until the job ends), TAG.agents
# (every rvtd of the job's key then, pid:device: pids are global in the
# guest), TAG.sched (their CPU lists and policies) and TAG.parents (pid|the
# command line of each one's parent); barrier also TAG.status.before.N,
# before the first rank. Shell: Slurm runs it as the job (sbatch runs a
# copy of it in slurmd's spool: job.env by its path).
JOB_SH = r'''tag=$1 tls=$2 kind=$3
cd "$work" || exit 1
key=slurm.$SLURM_JOB_ID
echo "$SLURM_JOB_ID" >"$tag.job"
# status SUFFIX: each node's agent of this job, now
status() {
    local n
    for n in 1 2; do
        "$on" "$n" "$rvt_status" --json --device="rxe$n" --job-key="$key" \
            >"$tag.status$1.$n" 2>&1
    done
}
opts=(--bind-to none --mca pml ucx --mca pml_ucx_tls rvt --mca pml_ucx_devices any
    --mca btl self --mca mpi_yield_when_idle 1 --mca if_base_do_not_resolve 1
    --mca oob_tcp_if_include 198.18.0.0/24 -x LD_PRELOAD="$module"
    -x UCX_TLS="$tls,sm,self" -x UCX_WARN_UNUSED_ENV_VARS=n)
case $kind in
srun)
    # PMIx, Debian's Slurm's and Open MPI's one common PMI; MCA settings
    # through the environment, as srun passes it on
    OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=rvt OMPI_MCA_pml_ucx_devices=any \
    OMPI_MCA_btl=self OMPI_MCA_mpi_yield_when_idle=1 UCX_TLS=$tls,sm,self \
    UCX_WARN_UNUSED_ENV_VARS=n srun --mpi=pmix env LD_PRELOAD="$module" \
        "$mpi_prog" $MPI_ARGS >"$tag.out" 2>&1
    echo "srun exit $?" >>"$tag.out"
    ;;
shmem)
    # opal_common_ucx_opal_mem_hooks 0: Debian's Open MPI 4.1.4 crashes in
    # shmem_finalize otherwise, rvt or not (mpi-guest.sh says why)
    mpirun "${opts[@]}" --mca spml ucx --mca opal_common_ucx_opal_mem_hooks 0 \
        -x SHMEM_SYMMETRIC_SIZE=64M "$shmem_prog" $SHMEM_ARGS >"$tag.out" 2>&1
    echo "mpirun exit $?" >>"$tag.out"
    ;;
long)
    mpirun "${opts[@]}" "$mpi_prog" $LONG_ARGS >"$tag.out" 2>&1
    echo "mpirun exit $?" >>"$tag.out"
    exit 0
    ;;
barrier)
    status .before
    touch "$tag.ready"
    for _ in $(seq 600); do [ -e "$tag.go" ] && break; sleep 0.1; done
    mpirun "${opts[@]}" "$mpi_prog" $MPI_ARGS >"$tag.out" 2>&1
    echo "mpirun exit $?" >>"$tag.out"
    ;;
esac
status ""
for p in $(pgrep -x rvtd); do
    tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -qxF -- "--job-key=$key" || continue
    echo "$p:$(tr '\0' '\n' <"/proc/$p/cmdline" | sed -n 's/^--device=//p')" >>"$tag.agents"
    echo "$p|$(taskset -pc "$p")|$(chrt -p "$p" | tr '\n' ' ')" >>"$tag.sched"
    echo "$p|$(tr '\0' ' ' <"/proc/$(ps -o ppid= -p "$p" | tr -d ' ')/cmdline" 2>/dev/null)" >>"$tag.parents"
done
# the agents' own logs, for a failed job
grep -qE '^OK: rvt_(mpi|shmem)_check' "$tag.out" ||
    for n in 1 2; do "$on" "$n" bash -c 'tail -n 20 /tmp/rvt-*/*.log'; done >"$tag.agentlogs" 2>&1
touch "$tag.done"
[ "$kind" = barrier ] && for _ in $(seq 600); do [ -e "$tag.release" ] && break; sleep 0.1; done
exit 0
'''

# section 5's step, on each node: the job file, and any agent serving
# this job's key
NOASK_SH = r'''#!/bin/bash
# on each node: the job file, and any agent serving this job's key
ls "/run/rvt/jobs/$SLURM_JOB_ID" 2>/dev/null
for p in $(pgrep -x rvtd); do
    tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -qx -- "--job-key=slurm.$SLURM_JOB_ID" &&
        echo "agent $p on $SLURMD_NODENAME"
done
exit 0
'''

# section 6's batch job, in $HOME: hold until go (both jobs' agents
# seen), run the ranks (each records its LD_PRELOAD and
# UCX_RVT_START_AGENT), hold until release (the agents' status taken
# from outside, as the user)
USER_JOB_SH = r'''cd "$HOME" || exit 1
echo "$SLURM_JOB_ID" >job
touch ready
for _ in $(seq 1200); do [ -e go ] && break; sleep 0.2; done
export OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=rvt OMPI_MCA_pml_ucx_devices=any \
    OMPI_MCA_btl=self OMPI_MCA_mpi_yield_when_idle=1 \
    UCX_TLS=ud_verbs,rvt,sm,self UCX_WARN_UNUSED_ENV_VARS=n
# shellcheck disable=SC2016 # for each rank's shell
srun --mpi=pmix bash -c 'env | grep -E "^(LD_PRELOAD|UCX_RVT_START_AGENT)=" | sort >"env.$SLURM_PROCID"; exec "$0" "$@"' \
    "$mpi_prog" $MPI_ARGS >out 2>&1
echo "srun exit $?" >>out
touch done
for _ in $(seq 1200); do [ -e release ] && break; sleep 0.2; done
'''

# Testbed plumbing, not part of the contrib: every node sees every rxe
# device, and srun hands node1's environment (UCX_NET_DEVICES=rxe1:1) to
# node2's tasks; each task gets its own node's device and RVT_NODE back.
TASK_PROLOG_SH = r'''#!/bin/sh
n=${SLURMD_NODENAME#node}
echo "export UCX_NET_DEVICES=rxe$n:1"
echo "export RXE_DEV=rxe$n"
echo "export RVT_NODE=$n"
'''

# slurmd 22.05 will not start without a cgroup file system it knows:
# each node gets a tmpfs at /sys/fs/cgroup holding a named v1 hierarchy
# (no controllers), enough for its cgroup/v1 plugin to load; nothing here
# uses cgroups
PREPARE_NODE_SH = '''mkdir -p /run/slurmctld /run/slurmd &&
    mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup &&
    mkdir /sys/fs/cgroup/systemd &&
    mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd'''


def cat(path):
    """PATH's text less its trailing newlines, or "" when it cannot be
    read (the shell's $(cat PATH 2>/dev/null))"""
    try:
        with open(path, errors="replace") as f:
            return f.read().rstrip("\n")
    except OSError:
        return ""


def lines_of(path):
    """PATH's lines, or none when it cannot be read"""
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def write(path, text, mode=None):
    """TEXT into PATH, with permissions MODE when given"""
    with open(path, "w") as f:
        f.write(text)
    if mode is not None:
        os.chmod(path, mode)


def touch(path):
    """PATH made, or its time updated (a flag a job script waits for)"""
    with open(path, "a"):
        os.utime(path)


def say(text=""):
    """a line of the log that is not a check"""
    print(text, flush=True)


def show(label, text):
    """TEXT's lines under "  LABEL| " (lib.sh's indent)"""
    sys.stdout.write(guest.indent(label, text))
    sys.stdout.flush()


def jq_dig(obj, *keys):
    """jq's .a.b on OBJ: null through missing keys and nulls; an error
    (TypeError) where jq's is, indexing what is not an object"""
    for k in keys:
        if obj is None:
            return None
        if not isinstance(obj, dict):
            raise TypeError(f"cannot index {type(obj).__name__} with {k}")
        obj = obj.get(k)
    return obj


def remote_peers(status):
    """jq's [.data_path.peers[] | select(.loopback | not)]: the agent's
    peers on other nodes"""
    peers = jq_dig(status, "data_path", "peers")
    if not isinstance(peers, list):
        raise TypeError("no peers to iterate")
    return [p for p in peers if p.get("loopback") is None or p.get("loopback") is False]


def json_file(path):
    """the one JSON value in PATH, or None when it has none (rvt-status
    wrote an error, or nothing)"""
    try:
        with open(path) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def jq_sum(values):
    """jq's add // 0"""
    return sum(values) if values else 0


class Site:
    """The cluster and its jobs: the paths, the work directory every node
    sees, and the helpers each section's checks use."""

    def __init__(self, g, build, root):
        self.g = g
        self.root = root
        self.build = build
        top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.rvtd = f"{root}/usr/bin/rvtd"
        self.rvt_status = f"{root}/usr/bin/rvt-status"
        self.rvt_slurm = f"{root}/usr/lib/rvt/rvt-slurm"
        # the shell's $(echo ROOT/usr/lib/*/...): the one match, or the
        # pattern itself
        self.module = (sorted(glob.glob(f"{root}/usr/lib/*/ucx/libuct_rvt.so"))
                       or [f"{root}/usr/lib/*/ucx/libuct_rvt.so"])[0]
        self.spank = (sorted(glob.glob(f"{root}/usr/lib/*/slurm-wlm/spank_rvt.so"))
                      or [f"{root}/usr/lib/*/slurm-wlm/spank_rvt.so"])[0]
        self.mpi_prog = f"{build}/test/mpi/rvt_mpi_check"
        self.shmem_prog = f"{build}/test/shmem/rvt_shmem_check"
        self.on_path = f"{top}/contrib/testbed/guest/bin/on"
        # every node sees it (each has its own /tmp)
        self.work = tempfile.mkdtemp(prefix="site-jobs.", dir=build)
        # readable by section 6's ordinary users (mkdtemp makes it 0700):
        # its slurm.conf, their job script and their work directories
        os.chmod(self.work, 0o755)
        os.environ["SLURM_CONF"] = f"{self.work}/slurm.conf"
        os.environ["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        os.environ["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
        self.background = []  # Popens still to end at cleanup

    def w(self, name):
        """NAME's path in the work directory"""
        return f"{self.work}/{name}"

    # ---- running things --------------------------------------------------

    @staticmethod
    def on(node, *args, timeout=120, **kw):
        """ARGS on node NODE (a number or "all"), ended after TIMEOUT
        seconds with everything they started; a CompletedProcess"""
        return guest.run(["on", str(node), *args], timeout, **kw)

    def out(self, node, *args, timeout=120, stderr=subprocess.DEVNULL):
        """the output of ARGS on node NODE, less its trailing newlines
        (the shell's $(on NODE ARGS 2>/dev/null))"""
        r = self.on(node, *args, timeout=timeout, stdout=subprocess.PIPE,
                    stderr=stderr, text=True, errors="replace")
        return r.stdout.rstrip("\n")

    def to_file(self, path, node, *args, timeout=120, append_err=True):
        """ARGS on node NODE, their output (and errors) into PATH; their
        exit status"""
        with open(path, "w") as f:
            return self.on(node, *args, timeout=timeout, stdout=f,
                           stderr=subprocess.STDOUT if append_err else None).returncode

    def squeued(self, job):
        """whether JOB is still queued or running (squeue -h -j lists it)"""
        return self.out(1, "squeue", "-h", "-j", str(job), timeout=60) != ""

    # ---- the agents --------------------------------------------------------

    @staticmethod
    def agents_of(key):
        """the rvtd processes serving KEY, anywhere in the guest (pids are
        global), as "pid:device" words"""
        found = []
        r = subprocess.run(["pgrep", "-x", "rvtd"], capture_output=True, text=True,
                           timeout=30)
        for p in r.stdout.split():
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    args = f.read().decode(errors="replace").split("\0")
            except OSError:
                continue
            if f"--job-key={key}" in args:
                devs = [a[len("--device="):] for a in args if a.startswith("--device=")]
                found.append(f"{p}:" + "\n".join(devs))
        return found

    def gone(self, key, secs):
        """True once no agent serves KEY, False if some still does after
        SECS seconds (by the clock: a look costs seconds on the loaded
        emulator)"""
        end = time.monotonic() + secs
        while self.agents_of(key) and time.monotonic() < end:
            time.sleep(1)
        return not self.agents_of(key)

    def job_of(self, tag):
        """the id job TAG wrote, or an empty string"""
        return cat(self.w(f"{tag}.job"))

    def extern_agent(self, tag, n):
        """the pid spank_rvt.so gives in node N's slurmd log (its extern
        step's lines) for job TAG's agent on node N's device, or "" """
        return self.logged_agent(self.job_of(tag), n)

    def logged_agent(self, job, n):
        """the pid of job JOB's agent on node N's device, as spank_rvt.so
        logged it in node N's slurmd log, or "" """
        pat = re.compile(rf".*spank_rvt: job {job}: agent for slurm\.{job} on rxe{n}:1 "
                         r"started in the extern step \(pid ([0-9]*),.*")
        for line in lines_of(self.w(f"slurmd.node{n}.log")):
            m = pat.match(line)
            if m:
                return m.group(1)
        return ""

    # ---- the checks each job gets --------------------------------------------

    def verified(self, tag, what, prog="rvt_mpi_check"):
        """the program of job TAG (default rvt_mpi_check) verified every
        word"""
        out = self.w(f"{tag}.out")
        if os.path.exists(out):
            show(tag, cat(out) + "\n")
        if any(line.startswith(f"OK: {prog}") for line in lines_of(out)):
            self.g.pass_(f"{what}: {prog} verified every word (job {self.job_of(tag)})")
        else:
            logs = self.w(f"{tag}.agentlogs")
            if os.path.exists(logs):
                show(f"{tag} agents", cat(logs) + "\n")
            self.g.fail(f"{what}: {prog} did not verify (job {self.job_of(tag)}; output above)")

    def placed(self, tag, cpus=""):
        """from each node, job TAG's agent (its status after the ranks) is
        the one spank_rvt.so started, a child of the job's extern step, the
        job's only agent on that node (the module started none), with
        SCHED_FIFO 10 and, given CPUS, on those; its key is slurm.<job>,
        it proved its peer with MUNGE and carried bytes both ways"""
        job = self.job_of(tag)
        for n in (1, 2):
            mine = self.extern_agent(tag, n) or "none"
            agents = lines_of(self.w(f"{tag}.agents"))
            others = "".join(f"{a} " for a in agents
                             if a != f"{mine}:rxe{n}" and a.endswith(f":rxe{n}"))
            sched = "\n".join(s for s in lines_of(self.w(f"{tag}.sched"))
                              if s.startswith(f"{mine}|"))
            parent = "\n".join(s[len(mine) + 1:] for s in lines_of(self.w(f"{tag}.parents"))
                               if s.startswith(f"{mine}|"))
            js = cat(self.w(f"{tag}.status.{n}"))

            def judge(s):
                r = remote_peers(s)
                tx = jq_sum([p["bytes"] for p in r])
                rx = jq_sum([p["received_bytes"] for p in r])
                dp = jq_dig(s, "data_path")
                ok = (jq_dig(s, "job_key") == f"slurm.{job}"
                      and guest.jq_text(jq_dig(s, "pid")) == mine
                      and jq_dig(dp, "auth") == "munge" and tx > 0 and rx > 0
                      and jq_dig(dp, "handshake", "unauthenticated") == 0)
                text = (f"agent pid {guest.jq_text(jq_dig(s, 'pid'))}, job {guest.jq_text(jq_dig(s, 'job_key'))}"
                        f" from {guest.jq_text(jq_dig(s, 'job_key_source'))},"
                        f" auth {guest.jq_text(jq_dig(dp, 'auth'))}, {len(r)} remote peer(s),"
                        f" {guest.jq_text(tx)} bytes sent and {guest.jq_text(rx)} received")
                return ok, text
            ok, v = guest.json_verdict(js, judge)
            cpu_re = re.escape(cpus) if cpus else "[0-9,-]*"
            sched_ok = any(re.search(rf"list: {cpu_re}\|.*SCHED_FIFO.*priority: 10", s)
                           for s in sched.split("\n"))
            if ok and not others and parent.startswith(f"slurmstepd: [{job}.extern]") \
                    and sched_ok:
                policy = sched.split("|", 1)[1] if "|" in sched else sched
                self.g.pass_(f"{tag}: node {n}: the extern step's agent (pid {mine}, child of"
                             f" '{parent.removesuffix(' ')}', the job's only one there), {v};"
                             f" cpus and policy: {policy}")
            else:
                on_cpus = f"on CPU {cpus} " if cpus else ""
                head = (js + "\n")[:300].rstrip("\n")
                self.g.fail(f"{tag}: node {n}: expected the extern step's agent (pid {mine},"
                            f" parent '{parent or '?'}') alone (others: {others or 'none'}),"
                            f" key slurm.{job}, auth munge, bytes both ways, {on_cpus}with"
                            f" SCHED_FIFO 10: {v or head}; sched: {sched or 'none'}")

    def left_behind(self, tag, secs, how=None):
        """no agent of job TAG on any node within SECS seconds"""
        key = f"slurm.{self.job_of(tag)}"
        if key == "slurm.":
            self.g.fail(f"{tag}: the job never ran")
            return
        if self.gone(key, secs):
            self.g.pass_(f"{tag}: no agent of {key} left on any node after the job"
                         + (f" ({how})" if how else ""))
        else:
            self.g.fail(f"{tag}: agents of {key} still run after the job: "
                        + "\n".join(self.agents_of(key)))

    def rdma_clean(self, what):
        """every device's MRs, QPs, CQs and PDs as before any job"""
        self.to_file(self.w("rdma.now"), 1, "rdma", "resource", "show", append_err=False)
        with open(self.w("rdma.diff"), "w") as f:
            same = subprocess.run(["diff", "-u", self.w("rdma.before"), self.w("rdma.now")],
                                  stdout=f, timeout=30).returncode == 0
        if same:
            counts = ""
            for line in lines_of(self.w("rdma.now")):
                fld = line.split() + [""] * 12
                counts += f"{fld[1]} qp {fld[7]} mr {fld[11]}; "
            self.g.pass_(f"{what}: no MR, QP, CQ or PD left on any device ({counts})")
        else:
            self.g.fail(f"{what}: the devices hold more than before the jobs:")
            show("rdma", cat(self.w("rdma.diff")) + "\n")
            r = self.on(1, "rdma", "res", "show", "qp", timeout=60,
                        stdout=subprocess.PIPE, text=True)
            show("rdma qp", r.stdout)

    # ---- starting and waiting for jobs -----------------------------------------

    def salloc_args(self, tag, *args):
        """job.sh under salloc on node1, 2 nodes x 1 task (-O: the one core
        for jobs each node has may be shared; one rank a node: the
        emulator runs every node's ranks on that one vCPU)"""
        return ["on", "1", "timeout", "300", "salloc", "--rvt", "-N2", "-n2", "-O", "-s",
                self.w("job.sh"), tag, *args]

    def salloc_job(self, tag, *args):
        """job.sh TAG ARGS under salloc, to its end"""
        with open(self.w(f"{tag}.salloc"), "w") as f:
            guest.run(self.salloc_args(tag, *args), 330, stdout=f, stderr=subprocess.STDOUT)

    def sbatch_job(self, tag, *args):
        """job.sh TAG ARGS as a batch job, with --rvt; its id"""
        return self.out(1, "sbatch", "--rvt", "--parsable", "-N2", "-n2", "-O", "-s",
                        "-o", self.w(f"{tag}.batch"), self.w("job.sh"), tag, *args,
                        timeout=120, stderr=None)

    def job_wait(self, job, secs):
        """until job JOB has left the queue (by the clock); False after
        SECS seconds"""
        end = time.monotonic() + secs
        while self.squeued(job):
            if time.monotonic() >= end:
                return False
            time.sleep(1)
        return True

    def job_reaches(self, path, job, secs):
        """wait until job JOB writes PATH; False at once if the job is no
        longer queued or running (it failed, or was refused), or after
        SECS seconds"""
        end = time.monotonic() + secs
        while not os.path.exists(path):
            if not (re.fullmatch(r"[0-9]+", job) and time.monotonic() < end
                    and self.squeued(job)):
                return False
            time.sleep(0.5)
        return True

    @staticmethod
    def ranks_of(job, node):
        """the pids of job JOB's ranks on node NODE (pids are global in the
        testbed; the environment says job and node)"""
        found = []
        r = subprocess.run(["pgrep", "-x", "rvt_mpi_check"], capture_output=True,
                           text=True, timeout=30)
        for p in r.stdout.split():
            try:
                with open(f"/proc/{p}/environ", "rb") as f:
                    env = f.read().decode(errors="replace").split("\0")
            except OSError:
                continue
            if f"SLURM_JOB_ID={job}" in env and guest.node_of(int(p)) == node:
                found.append(p)
        return found

    def moving(self, job):
        """node 2's agent of job JOB has sent bytes to node 1"""
        js = self.out(2, "timeout", "10", self.rvt_status, "--json", "--device=rxe2",
                      f"--job-key=slurm.{job}", timeout=30)
        ok, _ = guest.json_verdict(
            js, lambda s: (jq_sum([p["bytes"] for p in remote_peers(s)]) > 0, ""))
        return ok

    def cleanup(self):
        """the daemons, the agents and the jobs this run started ended; the
        work directory removed unless RVT_SITE_KEEP=1"""
        for n in (1, 2):
            try:
                pids = self.out(n, "cat", "/run/slurmd.pid", "/run/slurmctld.pid", timeout=30)
            except OSError:  # no `on`: not in the testbed, nothing started
                pids = ""
            for p in pids.split():
                try:
                    os.kill(int(p), signal.SIGTERM)
                except (ValueError, OSError):
                    pass
        r = subprocess.run(["pgrep", "-x", "rvtd"], capture_output=True, text=True,
                           timeout=30)
        for p in r.stdout.split():
            try:
                os.kill(int(p), signal.SIGTERM)
            except OSError:
                pass
        for p in self.background:
            if p.poll() is None:
                guest.kill_group(p, signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    guest.kill_group(p)
                    p.wait()
        if os.environ.get("RVT_SITE_KEEP", "0") == "1":
            say(f"kept {self.work}")
            return
        shutil.rmtree(self.work, ignore_errors=True)


def elapsed(t):
    """whole seconds since T (time.monotonic()), as bash's SECONDS counts"""
    return int(time.monotonic() - t)


def section0(s):
    """on each node, ucx_info -d with the installed module preloaded lists
    transport rvt on the node's device"""
    g = s.g
    for n in (1, 2):
        info = s.w(f"info.{n}")
        rc = s.to_file(info, n, "env", f"LD_PRELOAD={s.module}", "ucx_info", "-d")
        lines = lines_of(info)
        listed = any(f"Device: rxe{n}" in ln
                     for i, line in enumerate(lines) if "Transport: rvt" in line
                     for ln in lines[i:i + 4])
        if rc == 0 and listed:
            g.pass_(f"node{n}: ucx_info -d lists Transport: rvt on rxe{n} from the installed"
                    f" module (LD_PRELOAD={s.module.removeprefix(s.root)})")
        else:
            found = [line for line in lines if re.search("rvt|error", line, re.I)][:3]
            g.fail(f"node{n}: no transport rvt in ucx_info -d: " + "\n".join(found))


def write_cluster(s):
    """the cluster's files: slurm.conf, the Prolog and Epilog, plugstack.conf,
    the TaskProlog, rvt-slurm.conf, job.env and the job scripts"""
    # Each slurmd listens on a port of its own (the nodes share the network
    # namespace); state and spool go to the node's own /run. SlurmUser root:
    # the testbed runs as root, as do its jobs but section 6's.
    # proctrack/linuxproc and task/affinity: no cgroup hierarchy per node
    # here. PrologFlags=Contain runs the prolog on every node at
    # allocation, before any step, then the job's extern step, where
    # spank_rvt.so (PlugStackConfig) starts the agents. The partition may
    # be oversubscribed: two jobs run at once, and each node has one core
    # for jobs (the other is specialized).
    work = s.work
    write(s.w("slurm.conf"), f"""ClusterName=testbed
SlurmctldHost=node1(198.18.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/run/slurmctld
SlurmdSpoolDir=/run/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile={work}/slurmctld.log
SlurmdLogFile={work}/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
PrologFlags=Contain
PlugStackConfig={work}/plugstack.conf
Prolog={work}/prolog
Epilog={work}/epilog
TaskProlog={work}/task-prolog
KillWait=5
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=node1 NodeAddr=198.18.0.1 Port=6818 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 CoreSpecCount=1
NodeName=node2 NodeAddr=198.18.0.2 Port=6819 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 CoreSpecCount=1
PartitionName=tb Nodes=node[1-2] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""")
    # The installed rvt-slurm is the Prolog and the Epilog; the wrapper only
    # names its settings file, which a site keeps in /etc/slurm (the guest's
    # /etc is the host's, read-only), and the Epilog is skipped while
    # $work/epilog.off exists (section 2). The installed plugin, with the
    # line the package's plugstack.conf.d/rvt.conf has (commented out), by
    # its path: this Slurm's PluginDir is the host's.
    write(s.w("prolog"), f"#!/bin/sh\nRVT_SLURM_CONF={work}/rvt-slurm.conf exec {s.rvt_slurm}\n",
          0o755)
    write(s.w("epilog"), f"#!/bin/sh\n[ -e {work}/epilog.off ] && exit 0\n"
          f"RVT_SLURM_CONF={work}/rvt-slurm.conf exec {s.rvt_slurm}\n", 0o755)
    write(s.w("plugstack.conf"), f"optional {s.spank}\n")
    write(s.w("task-prolog"), TASK_PROLOG_SH, 0o755)
    # what a site's /etc/slurm/rvt-slurm.conf would say (rvt-slurm's header);
    # RVT_DEVICES: every node sees every rxe device here, a site's see their own
    # RVT_PRELOAD: the installed module, which is under ROOT here, not in
    # /usr/lib where rvt-slurm looks by default
    write(s.w("rvt-slurm.conf"), f"""RVTD={s.rvtd}
RVT_DEVICES=rxe${{SLURMD_NODENAME#node}}
RVT_PRIORITY=fifo:10
RVT_PRELOAD={s.module}
RVT_SLURM_LOG={work}/rvt-slurm.log
""")
    write(s.w("job.env"), f"""work={work}
on={s.on_path}
rvt_status={s.rvt_status}
module={s.module}
mpi_prog={s.mpi_prog}
shmem_prog={s.shmem_prog}
MPI_ARGS="{MPI_ARGS}"
SHMEM_ARGS="{SHMEM_ARGS}"
LONG_ARGS="{LONG_ARGS}"
""")
    # for ShellCheck in the job scripts: job.env is written above; MPI_ARGS
    # and LONG_ARGS split on purpose
    head = ("#!/bin/bash\n# shellcheck disable=SC1091,SC2154,SC2086\n"
            f". {shlex.quote(work)}/job.env\n")
    write(s.w("job.sh"), head + JOB_SH, 0o755)
    write(s.w("user-job.sh"), head + USER_JOB_SH, 0o755)
    write(s.w("noask.sh"), NOASK_SH, 0o755)


def start_cluster(s):
    """slurmctld on node1, slurmd on both, up and idle; False (after a
    FAIL line) when not"""
    g = s.g
    prep = s.on("all", "bash", "-c", PREPARE_NODE_SH, timeout=60)
    if prep.returncode != 0:
        g.fail("preparing the nodes for slurmd")
        return False
    # the device counters before any job: what every job must leave behind
    s.to_file(s.w("rdma.before"), 1, "rdma", "resource", "show", append_err=False)
    t0 = time.monotonic()
    if s.on(1, "slurmctld", timeout=120).returncode != 0:
        g.fail("slurmctld did not start")
        say(cat(s.w("slurmctld.log")))
        return False
    # slurmd with no memlock limit, as RDMA sites run it (LimitMEMLOCK=
    # infinity): the extern step's agents, its children, inherit its limits
    for n in (1, 2):
        if s.on(n, "prlimit", "--memlock=unlimited:unlimited", "slurmd",
                timeout=120).returncode != 0:
            g.fail(f"slurmd on node {n} did not start")
            subprocess.run(["tail", s.w(f"slurmd.node{n}.log")], timeout=30)
            return False
    up = False
    for _ in range(60):
        if s.out(1, "sinfo", "-h", "-o", "%T %D", timeout=60) == "idle 2":
            up = True
            break
        time.sleep(0.5)
    r = s.on(1, "sinfo", "-N", "-o", "%N %T %C %Z", timeout=60, stdout=subprocess.PIPE,
             text=True)
    show("sinfo", r.stdout)
    node2 = s.out(1, "scontrol", "show", "node", "node2", timeout=60, stderr=None)
    spec = "\n".join(w[len("CPUSpecList="):] for line in node2.split("\n")
                     for w in line.split(" ") if w.startswith("CPUSpecList="))
    g.check("Slurm cluster up: slurmctld on node1, slurmd on node1 and node2, both idle"
            f" ({elapsed(t0)} s), node2's CPUSpecList '{spec}'", up)
    if not up:
        return False
    # the MPI plugins this Slurm offers
    r = s.on(1, "srun", "--mpi=list", timeout=60, stdout=subprocess.PIPE,
             stderr=subprocess.STDOUT, text=True, errors="replace")
    say(f"  srun --mpi=list| {r.stdout.replace(chr(10), ' ')}" if r.stdout else "")
    # the plugin is loaded where jobs are submitted: --rvt is an option
    help_text = s.out(1, "sbatch", "--help", timeout=60, stderr=subprocess.STDOUT)
    rvt_lines = [line.lstrip(" ") for line in help_text.split("\n") if "--rvt" in line]
    g.check("spank_rvt.so loaded (PlugStackConfig): sbatch --help lists"
            f" '{rvt_lines[0] if rvt_lines else ''}'", bool(rvt_lines))
    return True


def section1(s):
    """Two jobs of root on both nodes at once, the two ways sites run
    mpirun under Slurm: in salloc (UCX_TLS=ud_verbs,rvt) and in sbatch
    (rvt). Each waits for the other to be running before its mpirun and
    keeps its agents until both have taken their status, so the four
    agents overlap."""
    g, w = s.g, s.w
    t = time.monotonic()
    with open(w("salloc.salloc"), "w") as f:
        salloc = subprocess.Popen(s.salloc_args("salloc", "ud_verbs,rvt", "barrier"),
                                  stdin=subprocess.DEVNULL, stdout=f,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    s.background.append(salloc)
    b = s.sbatch_job("sbatch", "rvt", "barrier")
    for _ in range(600):
        if os.path.exists(w("salloc.ready")) and os.path.exists(w("sbatch.ready")):
            break
        time.sleep(0.2)
    touch(w("salloc.go"))
    touch(w("sbatch.go"))
    for _ in range(1200):
        if os.path.exists(w("salloc.done")) and os.path.exists(w("sbatch.done")):
            break
        time.sleep(0.2)
    touch(w("salloc.release"))
    touch(w("sbatch.release"))
    try:
        salloc.wait(timeout=330)  # its own timeout(1) ends it at 300 s
    except subprocess.TimeoutExpired:
        guest.kill_group(salloc)
        salloc.wait()
    s.job_wait(b, 60)
    say(f"both jobs ended after {elapsed(t)} s")
    s.verified("salloc", "mpirun in salloc, UCX_TLS=ud_verbs,rvt, beside the sbatch job")
    s.verified("sbatch", "mpirun in sbatch, UCX_TLS=rvt, beside the salloc job")
    s.placed("salloc")
    s.placed("sbatch")
    # before the first rank: the prolog's agent already served the job's
    # key with no client
    for tag in ("salloc", "sbatch"):
        for n in (1, 2):
            before = json_file(w(f"{tag}.status.before.{n}"))
            try:
                clients = jq_dig(before, "clients")
                text = (f"{guest.jq_text(jq_dig(before, 'pid'))} {guest.jq_text(jq_dig(before, 'job_key'))}"
                        f" {len(clients) if clients is not None else 0}")
            except TypeError:
                text = ""
            if before is None:
                text = ""
            agent, job = s.extern_agent(tag, n), s.job_of(tag)
            g.check(f"{tag}: node {n}: before the first rank, the agent pid {agent} served"
                    f" slurm.{job} with 0 clients (rvt-status: '{text}')",
                    text == f"{agent} slurm.{job} 0")
    # each agent's one remote peer is the other node's agent of its own
    # job (the UD QPN in its address), never the other job's
    apart, line = True, ""
    for tag, n, m in (("salloc", 1, 2), ("salloc", 2, 1), ("sbatch", 1, 2), ("sbatch", 2, 1)):
        theirs, mine_js = json_file(w(f"{tag}.status.{m}")), json_file(w(f"{tag}.status.{n}"))
        try:
            mine = guest.jq_text(jq_dig(theirs, "data_path", "ud_qpn")) if theirs is not None else ""
        except TypeError:
            mine = ""
        try:
            peers = (",".join(guest.jq_text(p.get("ud_qpn")) for p in remote_peers(mine_js))
                     if mine_js is not None else "")
        except (TypeError, AttributeError):
            peers = ""
        line += f" {tag} node{n}: peers UD QPN [{peers}], its job's node{m} agent {mine};"
        if not mine or peers != mine:
            apart = False
    # the pids of the four statuses (jq reads them as one stream: it stops
    # at the first that is not JSON)
    pids = set()
    for path in (w("salloc.status.1"), w("salloc.status.2"), w("sbatch.status.1"),
                 w("sbatch.status.2")):
        if not cat(path).strip():
            continue  # jq reads nothing there
        js = json_file(path)
        if js is None:
            break
        try:
            pids.add(guest.jq_text(jq_dig(js, "pid")))
        except TypeError:
            break
    if apart and len(pids) == 4:
        g.pass_(f"two jobs at once stay apart: 4 agents, each with its own job's peer only:{line}")
    else:
        g.fail(f"two jobs at once: {len(pids)} agent pids (expected 4), peers:{line}")
    for tag in ("salloc", "sbatch"):
        s.left_behind(tag, 20, "the job's end")
    say(f"salloc and sbatch jobs: {elapsed(t)} s")


def section2(s):
    """Two long jobs at once, cut short once their agents carry data: one
    by scancel, the other by SIGKILL to its node-2 ranks (RVT_NODE=2 from
    the TaskProlog, through orted), after which mpirun ends it. Neither
    may leave an agent, MR or QP behind; the next job (3) must run."""
    g, w = s.g, s.w
    t = time.monotonic()
    c = s.sbatch_job("cancel", "rvt", "long")
    k = s.sbatch_job("killed", "rvt", "long")
    victims = []

    def long_moving():
        """both long jobs' node-2 agents have sent bytes, and the killed
        job's node-2 ranks are found (victims)"""
        nonlocal victims
        if not (s.moving(c) and s.moving(k)):
            return False
        victims = s.ranks_of(k, 2)
        return bool(victims)

    def long_ended():
        """one of them ended (its mpirun exited, or it left the queue)
        before it was seen moving: that can no longer come"""
        outs = lines_of(w("cancel.out")) + lines_of(w("killed.out"))
        return (any("mpirun exit" in line for line in outs)
                or not s.squeued(c) or not s.squeued(k))

    # Waited for as long as it takes the loaded emulator to start them
    # (each look costs seconds), with a guard against a hang alone: a
    # bound by the clock failed on a loaded machine ("moving after 154 s:
    # no")
    rc, secs = guest.await_(600, long_moving, long_ended)
    ready = rc == 0
    awaited = {
        0: f"both long jobs' agents carried data, node 2's ranks found, after {secs} s",
        1: f"a long job ended before both were seen moving, after {secs} s",
    }.get(rc, f"both long jobs not seen moving after {secs} s (the hang guard: 600 s)")
    say(f"long jobs moving: {awaited}")
    if not ready:  # what each job was doing: the queue, its output, its agents
        r = s.on(1, "squeue", "-o", "%i %j %T %R %N", timeout=60, stdout=subprocess.PIPE,
                 stderr=subprocess.STDOUT, text=True)
        show("squeue", r.stdout)
        for tag, job in (("cancel", c), ("killed", k)):
            r = subprocess.run(["tail", "-5", w(f"{tag}.batch"), w(f"{tag}.out")],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace", timeout=30)
            show(tag, r.stdout)
            for n in (1, 2):
                r = s.on(n, "timeout", "10", s.rvt_status, f"--device=rxe{n}",
                         f"--job-key=slurm.{job}", timeout=30, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, errors="replace")
                first = "".join(x + " " for x in r.stdout.splitlines()[:12])
                say(f"  {tag}| node {n}'s agent: {first}")
    if not victims:
        victims = s.ranks_of(k, 2)
    s.on(1, "scancel", c, timeout=60)
    for p in victims:
        try:
            os.kill(int(p), signal.SIGKILL)
        except OSError:
            pass
    # no ranks found to kill: the job is cancelled too (it would run on)
    if not victims:
        s.on(1, "scancel", k, timeout=60)
    s.job_wait(c, 60)
    s.job_wait(k, 90)
    g.check(f"both long jobs moved data through their agents before they were cut short"
            f" ({awaited})", ready)
    exits = "\n".join(x for x in lines_of(w("cancel.out")) if "mpirun exit" in x)
    g.check(f"scancel: job {c} ended ({exits or 'mpirun killed'})", not s.squeued(c))
    killed = [x for x in lines_of(w("killed.out")) if "mpirun exit" in x]
    g.check(f"node 2's ranks ({' '.join(victims)}) SIGKILLed mid-transfer: the job ended"
            f" ({chr(10).join(killed)})",
            any(re.search("mpirun exit [1-9]", x) for x in killed))
    s.left_behind("cancel", 30)
    s.left_behind("killed", 30)
    s.rdma_clean("after the cancelled and the killed job")
    say(f"cancelled and killed jobs: {elapsed(t)} s")


def section3(s):
    """The next job on those nodes: srun launching the ranks itself, PMIx
    (Debian's Slurm's and Open MPI's one common PMI: srun --mpi=list
    above; Debian's Open MPI 4.1 has no PMI-2 client). Its prolog is given
    a cpuset, RVT_AGENT_CPUS=0,1: slurmd starts the prolog on the
    specialized CPU already, so only a list other than that one shows
    that rvt-slurm's taskset takes effect."""
    t = time.monotonic()
    with open(s.w("rvt-slurm.conf"), "a") as f:
        f.write("RVT_AGENT_CPUS=0,1\n")
    s.salloc_job("srun", "ud_verbs,rvt", "srun")
    s.verified("srun", "srun --mpi=pmix (no mpirun), UCX_TLS=ud_verbs,rvt, after the"
               " cancelled and killed jobs")
    s.placed("srun", "0,1")
    s.left_behind("srun", 20)
    s.rdma_clean("after the srun job")
    say(f"srun job: {elapsed(t)} s")


def section4(s):
    """OpenSHMEM as sites run it under Slurm: oshmem (spml ucx) started by
    mpirun in salloc, over rvt alone; its agents are the prolog's too"""
    t = time.monotonic()
    s.salloc_job("shmem", "rvt", "shmem")
    s.verified("shmem", "OpenSHMEM (spml ucx, mpirun in salloc), UCX_TLS=rvt",
               "rvt_shmem_check")
    s.placed("shmem", "0,1")
    s.left_behind("shmem", 20)
    s.rdma_clean("after the OpenSHMEM job")
    say(f"OpenSHMEM job: {elapsed(t)} s")


def section5(s):
    """A job that does not ask: the prolog writes no job file and the
    extern step starts no agent, on either node (seen from the job's own
    step)"""
    g, w = s.g, s.w
    t = time.monotonic()
    with open(w("noask.salloc"), "w") as f:
        s.on(1, "timeout", "120", "salloc", "-N2", "-n2", "-O", "-s", "bash", "-c",
             'echo "$SLURM_JOB_ID" >"$0/noask.job"; srun -N2 -n2 "$0/noask.sh" >"$0/noask.seen"',
             s.work, timeout=150, stdout=f, stderr=subprocess.STDOUT)
    job = cat(w("noask.job"))
    seen = cat(w("noask.seen"))
    logs = [x for n in (1, 2) for x in lines_of(w(f"slurmd.node{n}.log"))]
    said = [x for x in logs if f"spank_rvt: job {job or 'none'}:" in x]
    if job and os.path.exists(w("noask.seen")) and not seen and \
            not any(f"spank_rvt: job {job}:" in x for x in logs):
        g.pass_(f"a job without --rvt (job {job}): no job file and no agent on either node,"
                " seen from its own step")
    else:
        tail = "\n".join(lines_of(w("noask.salloc"))[-3:])
        g.fail(f"a job without --rvt (job {job or 'none'}): its step saw '{seen}';"
               f" {chr(10).join(said)}; {tail}")
    say(f"job without --rvt: {elapsed(t)} s")


def as_user(s, u, *args):
    """the command line of ARGS as rvtuserU (its HOME its work directory),
    with no memlock limit"""
    return ["prlimit", "--memlock=unlimited:unlimited", "setpriv", f"--reuid=428{u}",
            f"--regid=428{u}", "--clear-groups", "env", f"HOME={s.w(f'user{u}')}",
            f"USER=rvtuser{u}", *args]


def proc_owner_parent(pid):
    """the uid of process PID and its parent's command line (NULs as
    blanks), "" each when it cannot be read"""
    try:
        owner = str(os.stat(f"/proc/{pid or 0}").st_uid)
    except OSError:
        owner = ""
    parent = ""
    try:
        with open(f"/proc/{pid or 0}/stat") as f:
            ppid = f.read().rsplit(")", 1)[1].split()[1]
        with open(f"/proc/{ppid}/cmdline", "rb") as f:
            parent = f.read().decode(errors="replace").replace("\0", " ")
    except (OSError, IndexError):
        pass
    return owner, parent


def section6(s):
    """Two ordinary users, a --rvt batch job each, at once: srun
    --mpi=pmix launches the ranks, which are given nothing but UCX_TLS and
    Open MPI's pml; the module reaches them through spank_rvt.so
    (LD_PRELOAD), and the agents they use are their own job's, in its
    extern step. The users live in copies of /etc/passwd and /etc/group
    bound on each node (the guest's /etc is the host's, read-only); their
    work directories are 1777 (the share may not take a chown). The
    submitting shell has no memlock limit, as a site gives its users;
    Slurm propagates it to the ranks."""
    g, w, work = s.g, s.w, s.work
    t = time.monotonic()
    for f in ("passwd", "group"):
        shutil.copyfile(f"/etc/{f}", w(f"etc.{f}"))
    for u in (1, 2):
        with open(w("etc.passwd"), "a") as f:
            f.write(f"rvtuser{u}:x:428{u}:428{u}:rvt site jobs user {u}:{work}/user{u}:/bin/bash\n")
        with open(w("etc.group"), "a") as f:
            f.write(f"rvtuser{u}:x:428{u}:\n")
        os.makedirs(w(f"user{u}"), exist_ok=True)
        os.chmod(w(f"user{u}"), 0o1777)
    if s.on("all", "bash", "-c", f"mount --bind {work}/etc.passwd /etc/passwd &&"
            f" mount --bind {work}/etc.group /etc/group", timeout=60).returncode != 0:
        g.fail("binding the users' /etc/passwd and /etc/group on the nodes")
    ujob, upid = {}, {}
    for u in (1, 2):
        ujob[u] = s.out(1, *as_user(s, u, "sbatch", "--rvt", "--parsable", "-N2",
                                    "-n2", "-O", "-s", "-D", w(f"user{u}"),
                                    "-o", w(f"user{u}/batch"), w("user-job.sh")),
                        timeout=120, stderr=None)
    # a job that was not taken, or has ended, has nothing to wait for
    for u in (1, 2):
        s.job_reaches(w(f"user{u}/ready"), ujob[u], 120)
    # each job's agent on each node: its user's, its extern step's child
    users_ok, line = True, ""
    for u in (1, 2):
        job = ujob[u]
        for n in (1, 2):
            pid = s.logged_agent(job, n)
            owner, parent = proc_owner_parent(pid)
            line += (f" user {u} job {job} node {n}: pid {pid or 'none'} uid {owner or '?'}"
                     f" parent '{parent.removesuffix(' ')}';")
            if not pid or owner != f"428{u}" or \
                    not parent.startswith(f"slurmstepd: [{job}.extern]"):
                users_ok = False
            upid[u, n] = pid or "0"
    g.check("two ordinary users' --rvt jobs at once: each node's agent of each job runs as"
            f" its user, a child of its extern step:{line}", users_ok)
    # neither user reaches the other's agent: its socket, a signal, its
    # environment
    apart, line = True, ""
    as1 = ["setpriv", "--reuid=4281", "--regid=4281", "--clear-groups"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    for n in (1, 2):
        sock = f"/run/rvt/4282/rxe{n}-1.slurm.{ujob[2]}.sock"
        if s.on(n, "test", "-S", sock, timeout=30).returncode != 0 \
                or s.on(n, *as1, "test", "-e", sock, timeout=30).returncode == 0 \
                or s.on(n, *as1, "kill", "-0", upid[2, n], timeout=30,
                        stderr=subprocess.DEVNULL).returncode == 0 \
                or s.on(n, *as1, "cat", f"/proc/{upid[2, n]}/environ", timeout=30,
                        **quiet).returncode == 0:
            apart = False
        line += f" node {n}: {sock}, agent {upid[2, n]};"
    g.check("user 1 can neither reach user 2's agent's socket nor signal it nor read its"
            f" environment:{line}", apart)
    for u in (1, 2):
        touch(w(f"user{u}/go"))
    for u in (1, 2):
        s.job_reaches(w(f"user{u}/done"), ujob[u], 300)
    for u in (1, 2):
        job = ujob[u]
        out = w(f"user{u}/out")
        if os.path.exists(out):
            show(f"user{u}", cat(out) + "\n")
        # the agents' status, as their user (rvt-status answers its own uid)
        for n in (1, 2):
            s.to_file(w(f"user{u}/status.{n}"), n, "setpriv", f"--reuid=428{u}",
                      f"--regid=428{u}", "--clear-groups", s.rvt_status, "--json",
                      f"--device=rxe{n}", f"--job-key=slurm.{job}", timeout=60)
        agents = "".join(f"{a} " for a in sorted(s.agents_of(f"slurm.{job}")))
        want = "".join(f"{a} " for a in sorted([f"{upid[u, 1]}:rxe1", f"{upid[u, 2]}:rxe2"]))
        envs = "".join(f"{e} " for e in sorted({x for p in sorted(glob.glob(w(f"user{u}/env.*")))
                                                for x in lines_of(p)}))
        # jq -s over the statuses: no figure if one is not JSON
        tx = None
        statuses = [json_file(p) for p in sorted(glob.glob(w(f"user{u}/status.?")))
                    if cat(p).strip()]
        if None not in statuses:
            try:
                tx = jq_sum([p["bytes"] for st in statuses for p in remote_peers(st)])
            except (TypeError, KeyError):
                tx = None
        outs = lines_of(out)
        if any(x.startswith("OK: rvt_mpi_check") for x in outs) and agents == want \
                and envs == f"LD_PRELOAD={s.module} UCX_RVT_START_AGENT=n " and (tx or 0) > 0:
            g.pass_(f"user {u} (job {job}): rvt_mpi_check verified every word through its"
                    f" extern steps' agents alone ({agents}), {tx} bytes sent to peers; its"
                    f" ranks had {envs}")
        else:
            said = "".join(f"{x} " for x in outs if re.match(r"(OK|FAIL|srun exit)", x))
            g.fail(f"user {u} (job {job}): '{said}', agents '{agents}' (expected '{want}'),"
                   f" ranks' '{envs}', bytes sent {'?' if tx is None else tx}")
    # the admin's view: root's rvt-status --all on each node lists both
    # users' agents, each serving, with its uid, job and pid (the agents
    # still run: their jobs wait for release)
    seen, line = True, ""
    for n in (1, 2):
        with open(w(f"all.{n}.err"), "w") as err:
            r = s.on(n, s.rvt_status, "--all", "--json", timeout=60, stdout=subprocess.PIPE,
                     stderr=err, text=True)
        try:
            listed_all = [f"{guest.jq_text(a.get('uid'))}:{guest.jq_text(a.get('job_key'))}"
                          f":{guest.jq_text(a.get('pid'))}"
                          for a in json.loads(r.stdout) if a.get("state") == "serving"]
        except (ValueError, TypeError, AttributeError):
            listed_all = []
        listed = "".join(f"{x} " for x in sorted(listed_all))
        for want in (f"4281:slurm.{ujob[1]}:{upid[1, n]}", f"4282:slurm.{ujob[2]}:{upid[2, n]}"):
            if f" {want} " not in f" {listed}":
                seen = False
        line += f" node {n}: '{listed.removesuffix(' ')}';"
    g.check(f"root's rvt-status --all lists both users' agents on each node, serving:{line}",
            seen)
    for u in (1, 2):
        touch(w(f"user{u}/release"))
    for u in (1, 2):
        s.job_wait(ujob[u], 60)
        write(w(f"user{u}.job"), f"{ujob[u]}\n")
        s.left_behind(f"user{u}", 30, "the job's end")
    s.rdma_clean("after the two users' jobs")
    say(f"two users' jobs: {elapsed(t)} s")
    show("rvt-slurm log", cat(w("rvt-slurm.log")) + "\n")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: site_jobs_guest.py BUILD_DIR ROOT")
    build = os.path.abspath(sys.argv[1])
    root = os.path.join(os.getcwd(), sys.argv[2])
    g = guest.Suite("site jobs")
    s = Site(g, build, root)
    try:
        for f in (s.mpi_prog, s.module, s.rvtd, s.rvt_status, s.rvt_slurm, s.spank):
            if not os.path.exists(f):
                g.fail(f"not there: {f}")
                sys.exit(1)
        for f in ("slurmctld", "slurmd", "srun", "salloc", "sbatch", "scancel", "munge"):
            if shutil.which(f) is None:
                g.fail(f"{f} not installed (contrib/setup-deps.sh installs slurmctld slurmd"
                       " slurm-client munge)")
                sys.exit(1)
        section0(s)
        write_cluster(s)
        if not start_cluster(s):
            sys.exit(1)
        say(f"cluster up at +{elapsed(g.t_start)} s")
        section1(s)
        section2(s)
        section3(s)
        section4(s)
        section5(s)
        section6(s)
        g.finish()
    finally:
        s.cleanup()


if __name__ == "__main__":
    main()
