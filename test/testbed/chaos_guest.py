#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Inside the testbed guest (3 nodes): the chaos run (docs/reliability.md,
"Chaos"). A driver injects faults at random, seeded (the seed is
printed: the same seed makes the same choices, though not at the same
instants), while

  A. 3 nodes x 4 processes of rvt_chaos_client trade rounds (writes
     with immediate and AMs with every other process, each one verified
     on arrival: test/gtest/integration/chaos_runner.h says how) while
     the driver injects faults for TRAFFIC_SECONDS and until each kind
     has come once (a slow guest can reach the end before its turn: for
     at most TRAFFIC_SECONDS more), then stops them (a file they look
     for). The faults come one at a time, 1-3 s apart,
     their kinds in shuffled turns (each kind once in every 3):
       kill  SIGKILL a traffic process that has run 5 s or more, and
             start its replacement (same ID, next incarnation, a new
             client index on its agent, a new card)
       link  a node's link down for 2-5 s, then up (the bridge's end of
             its cable, as in traffic-guest.sh)
       stop  SIGSTOP a traffic process, or 1 time in 5 an agent, for
             2-5 s, then SIGCONT
     These agents keep alive every second (lost after 2 s more), so
     every outage breaks the connections it cuts: ops fail, and QPs are
     rebuilt; their RC timeout is rvtd --qp-timeout=QP_TIMEOUT
     (chaos.sh's --qp-timeout: 18 unless told, 1.07 s a try).
  B. Open MPI's rvt_mpi_check (pingpong, bandwidth, alltoall and
     allreduce, every word verified), 8 ranks on node1 and node2 with
     UCX_TLS=rvt,sm,self as mpi-guest.sh runs it, job after job while
     the driver injects link and stop faults only (on ranks, or 1 time
     in 5 an agent) for MPI_SECONDS, on fresh agents with rvtd's default
     timeouts, which a 2-5 s outage does not exhaust. Then the kill
     case: a rank SIGKILLed mid-job, which aborts its job by design.

Checks:
  - A: no arrival corrupt or misdirected, in any process, killed ones
    included (up to their death); every op completed, ok or failed (the
    failures reported to the sender, counted by kind), none left without
    a completion; at the end each process's fin to each other one: every
    op that completed ok at its sender had arrived and been verified,
    none twice. And the faults did bite: ops failed.
  - A: the agents keep answering their sockets while busy: status
    requests every 2 s during the traffic, each answered within
    rvt-status's 10 s, the time a process's attach waits (replacements
    attach to busy agents), and every process attached.
  - Nothing hangs: every traffic process runs under `timeout`: its
    deadline (the latest stop) plus more than its own bounded end
    (drain, fins); none may reach it. Every MPI job has T_JOB seconds.
    The whole run has the testbed's -t.
  - After A, a clean round (12 plain traffic clients, any failure fails)
    shows that every connection works again; then each agent, once it
    has settled (guest.py's Agents.settle) and its peers are connected,
    has the fds, MRs, QPs and CQs of its baseline (taken the same way
    after a clean warm-up round before the chaos), and its resident
    memory is at most RSS_BOUND_KIB above it (guest.py: resources_back,
    rss_within; a figure that could not be read, at the baseline or
    after, fails). The same agent process throughout.
  - B: every job under faults completed and verified every word; the job
    with a rank killed exits with an error (not the timeout) within
    T_KILLED s of the kill; the next job verifies; agents 1 and 2 are
    then back to their baseline as above (taken after a clean traffic
    round between them, which connects them as a job would).

Why the QPs must be back exactly, when a link flap or a stopped agent
makes the agents rebuild their connections: a reconnection replaces a
peer's K RC QPs (the old ones destroyed once their flush has drained)
and never adds to them, and a peer given up holds none. So once every
peer is connected again, which the clean round proves, an agent's device
holds K RC QPs per remote node, its K loopback QPs, its UD QP and the
device's own QP1, exactly as at the baseline (4 + 4 + 4 + 1 + 1 = 14
with 3 nodes): any other count is a leak or a lost connection. The same
holds for CQs (the agent's own), MRs (its own; its clients', live or
dead, all deregistered once it has settled) and fds. Resident memory is
the one figure given a bound: the allocator need not hand back what the
agent held for a stopped client's backlog.

Prints PASS:/FAIL: lines, the faults and figures, and exits 1 if any
check failed; the work directory (every process's output, the agents'
logs) is kept in BUILD_DIR when one did.
Usage: chaos_guest.py BUILD_DIR TRAFFIC_SECONDS MPI_SECONDS SEED
           QP_TIMEOUT
"""

import glob
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

# no __pycache__ written into the source tree the guest shares
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guest  # noqa: E402 (found beside this file)

USAGE = "usage: chaos_guest.py BUILD_DIR TRAFFIC_SECONDS MPI_SECONDS SEED QP_TIMEOUT"
K = 4
CLIENTS = 12          # 3 nodes x 4
ALL_NODES = [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]  # 4 processes on each
RSS_BOUND_KIB = 4096  # what an agent's memory may grow by over the run
T_END = 240           # a traffic process's time after the deadline (its own
                      # bounds: drain 60 s, fins 60 s, others' fins 60 s)
T_JOB = 240           # one MPI job (about 12 s alone, 25 s under faults)
T_KILLED = 60         # a job with a rank killed must end within this
T_START = 60          # the traffic processes' time to publish their cards
# the figures of a traffic process's summary (or last progress) line
KEYS = ("ops_ok ops_failed failed_gone failed_flushed failed_retries failed_other "
        "writes_verified ams_verified controls_verified corrupt pairs_checked lost "
        "duplicate never_completed fins_missing").split()
TABLE = "  {:<7} {:<6} {:<5} {:>9} {:>7} {:>9} {:>9} {:>6} {:>7}"


def now():
    """the seconds of the run's clock (bash's SECONDS: whole seconds)"""
    return int(time.monotonic())


def status(rc):
    """a Popen's returncode as the shell's wait reports it: 128 + N for a
    process ended by signal N"""
    return 128 - rc if rc is not None and rc < 0 else rc


def alive(pid):
    """whether PID exists (kill -0)"""
    try:
        os.kill(pid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def signal_pid(pid, sig):
    """SIG to PID; False when it could not be sent (the process is gone)"""
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def pgrep(name):
    """the pids of the processes named NAME exactly, in pid order"""
    r = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True, timeout=30)
    return [int(p) for p in r.stdout.split()]


def read_text(path):
    """PATH's text ("" when it cannot be read)"""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def touch(path):
    with open(path, "a"):
        pass


def indent(label, lines):
    """LINES each under "    LABEL| " (this suite's indent: 4 spaces)"""
    return "".join(f"    {label}| {line}\n" for line in lines)


def jq_text(v):
    """V as jq's string interpolation shows it: a string as it is, other
    values as compact JSON"""
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


def ip_link(node, state):
    """the bridge's end of node NODE's cable up or down"""
    subprocess.run(["ip", "link", "set", f"vbr{node}", state], timeout=60)


class Run:
    """What the whole run shares: its suite, paths, work directory, the
    agents it started and their baselines, the processes it started (all
    stopped by cleanup, whatever happened), and the clock of its events."""

    def __init__(self, build, seed, qp_timeout):
        self.suite = guest.Suite("chaos")
        self.build = build
        self.seed = seed
        self.qp_timeout = qp_timeout
        self.rvtd = f"{build}/src/uct/ib/rvt/tools/rvtd"
        self.rvt_status = f"{build}/src/uct/ib/rvt/tools/rvt-status"
        self.client = f"{build}/test/gtest/integration/rvt_traffic_client"
        self.chaos_client = f"{build}/test/gtest/integration/rvt_chaos_client"
        self.module = f"{build}/src/uct/ib/rvt/uct/.libs/libuct_rvt.so"
        self.mpi_prog = f"{build}/test/mpi/rvt_mpi_check"
        self.agents = guest.Agents(self.rvt_status)
        # shared by all nodes (each node has its own /tmp)
        self.work = tempfile.mkdtemp(prefix="chaos.", dir=build)
        self.phase_t0 = now()
        self.agent_pid = {}      # node -> [pid of its rvtd]
        self.agent_wrapper = {}  # node -> the `on` in front of it
        self.base = {}           # node -> (rss, fds, mrs, qps, cqs)
        self.procs = []          # every Popen started, for cleanup
        self.agent_opts = ""
        # the run's random choices: the traffic driver's, and the kill
        # case's after it (one generator, as bash's RANDOM was)
        self.rng = random.Random(seed)

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def event(self, text):
        print(f"  [+{now() - self.phase_t0} s] {text}", flush=True)

    def popen(self, args, out, **kw):
        """ARGS started in the background, output (and errors) to the file
        OUT (appended to); remembered for cleanup"""
        with open(out, "a") as f:
            p = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, **kw)
        self.procs.append(p)
        return p

    def wait_bounded(self, secs, procs):
        """wait for PROCS (Popens) to end, SECS seconds at most: a process
        stuck in the kernel (a wedged device) ends with no signal, and an
        unbounded wait would hold the run until the testbed's -t"""
        end = time.monotonic() + secs
        for p in procs:
            try:
                p.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                print(f"  pid {p.pid} did not end: left behind", flush=True)

    def cleanup(self):
        """nothing left stopped, cut off or running, whatever happened; the
        work directory removed unless a check failed"""
        touch(self.path("stop"))
        for n in (1, 2, 3):
            subprocess.run(["ip", "link", "set", f"vbr{n}", "up"],
                           stderr=subprocess.DEVNULL, timeout=60)
        # (a traffic process's pid is in its pid file: its name is longer
        # than the 15 characters pgrep -x sees)
        pids = pgrep("rvtd") + pgrep("rvt_mpi_check")
        for f in glob.glob(self.path("a", "pid.*")):
            if read_text(f).strip().isdigit():
                pids.append(int(read_text(f)))
        for p in pids:
            signal_pid(p, signal.SIGCONT)
        for agent in self.agent_pid.values():
            for p in agent:
                signal_pid(p, signal.SIGTERM)
        running = [p for p in self.procs if p.poll() is None]
        for p in running:
            # an `on` passes no signal on: its program is its child
            for c in guest.children(p.pid):
                signal_pid(c, signal.SIGTERM)
            p.terminate()
        self.wait_bounded(30, running)
        if self.suite.failed == 0:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            print(f"the run's outputs and the agents' logs are kept in {self.work}", flush=True)

    # ---- the agents ----------------------------------------------------

    def start_agents(self, *nodes):
        """one rvtd per node with agent_opts, K QPs, never lingering away"""
        for n in nodes:
            self.agent_wrapper[n] = self.popen(
                ["on", str(n), "bash", "-c",
                 f"exec {self.rvtd} --device=$RXE_DEV --num-qps={K} --linger=0 {self.agent_opts}"],
                self.path(f"rvtd.{n}.log"))
        for n in nodes:
            if not self.agents.wait(n, 20):
                self.suite.fail(f"rvtd on node {n} does not answer")
                self.suite.finish()
            self.agent_pid[n] = guest.agent_pids(n)

    def stop_agents(self, *nodes):
        """SIGTERM, and wait (10 s, then SIGKILL)"""
        for n in nodes:
            for p in self.agent_pid[n]:
                signal_pid(p, signal.SIGTERM)
        for n in nodes:
            for p in self.agent_pid[n]:
                for _ in range(100):
                    if not alive(p):
                        break
                    time.sleep(0.1)
                signal_pid(p, signal.SIGKILL)
            self.wait_bounded(10, [self.agent_wrapper[n]])
            del self.agent_pid[n]

    def agent_pid_text(self, n):
        return " ".join(map(str, self.agent_pid.get(n, [])))

    def connected(self, n, secs=30):
        """True once every peer of node N's agent is connected (SECS s)"""
        end = time.monotonic() + secs
        while time.monotonic() < end:
            s = self.agents.json(n)
            if s is not None and all(p["state"] == "connected"
                                     for p in s["data_path"]["peers"]):
                return True
            time.sleep(0.1)
        return False

    def agent_state(self, n):
        """node N's agent's connections (state, reconnects, what is posted,
        the last error) and what its device did twice or too late"""
        s = self.agents.json(n)
        peers = faults = ""
        if s is not None:
            dp = s["data_path"]
            peers = "; ".join(
                f"{p['index']} {p['state']} (QPs {jq_text(p['qps'])}, "
                f"{p['reconnects']} reconnects, {p['posted']} posted, "
                f"by lane {jq_text(p['in_flight_by_lane'])}"
                + (f", last error: {p['last_error']}" if p["last_error"] != "" else "")
                + ")"
                for p in dp["peers"] if not p.get("loopback"))
            rp = dp["receive_pool"]
            faults = (f"{rp['extra_completions']} receive completions for a buffer not posted, "
                      f"{rp['refused_reposts']} double reposts skipped, "
                      f"{dp['late_completions']} completions for ops given up on")
        print(f"  node {n} agent's peers: {peers}")
        print(f"  node {n} agent's device faults: {faults}")
        self.device_counters(n)

    @staticmethod
    def device_counters(n):
        """what node N's rxe device counted since boot (its hw_counters):
        retransmissions it started (completer_retry_err) and the requests
        it received again or out of order. A bad arrival in a run where
        these are 0 is not a retransmission's doing."""
        d = f"/sys/class/infiniband/rxe{n}/ports/1/hw_counters"
        out = ""
        for c in ("completer_retry_err rcvd_seq_err rcvd_rnr_err duplicate_request "
                  "out_of_seq_request send_rnr_err retry_exceeded_err send_err").split():
            try:
                with open(f"{d}/{c}") as f:
                    v = f.read().strip()
            except OSError:
                v = "?"
            out += f" {c}={v}"
        print(f"  node {n} device rxe{n} since boot:{out}", flush=True)

    def baseline_take(self, *nodes):
        """settle, and base[N] = (rss, fds, mrs, qps, cqs)"""
        for n in nodes:
            if not self.agents.settle(n, 30) or not self.connected(n):
                self.suite.fail(f"node {n}'s agent did not settle before its baseline")
            rss, fds, mrs, qps, cqs, attached = guest.agent_sample(n, self.agents)
            self.base[n] = (rss, fds, mrs, qps, cqs)
            print(f"  node {n} agent (pid {self.agent_pid_text(n)}) baseline: rss {rss} KiB, "
                  f"fds {fds}, MRs {mrs}, QPs {qps}, CQs {cqs} ({attached} attached)", flush=True)

    def baseline_check(self, what, *nodes):
        """each agent settled, connected, the same process, and back to its
        baseline (RSS within the bound); a figure agent_sample could not
        read ("?", then or now) fails, naming it"""
        g = self.suite
        for n in nodes:
            self.agents.settle(n, 30)
            self.connected(n)
            rss, fds, mrs, qps, cqs, attached = guest.agent_sample(n, self.agents)
            brss, bfds, bmrs, bqps, bcqs = self.base[n]
            pids = guest.agent_pids(n)
            print(f"  node {n} agent: rss {brss} -> {rss} KiB, fds {bfds} -> {fds}, "
                  f"MRs {bmrs} -> {mrs}, QPs {bqps} -> {qps}, CQs {bcqs} -> {cqs}, "
                  f"{attached} attached", flush=True)
            g.check(f"{what}: node {n}'s agent is the one started (pid {self.agent_pid_text(n)}, "
                    f"now '{' '.join(map(str, pids))}'), settled with no client attached "
                    f"({attached})",
                    pids == self.agent_pid[n] and attached == "0")
            ok, why = guest.resources_back((bfds, bmrs, bqps, bcqs), (fds, mrs, qps, cqs))
            g.check(f"{what}: node {n}'s agent's fds, MRs, QPs and CQs back to its "
                    f"baseline ({why})", ok)
            ok, why = guest.rss_within(brss, rss, RSS_BOUND_KIB)
            g.check(f"{what}: node {n}'s agent's resident memory within {RSS_BOUND_KIB} KiB "
                    f"of its baseline ({why})", ok)

    def plain_round(self, name, nodes):
        """plain traffic clients (no fault tolerated), one on each of NODES,
        ids from 0, each trading verified rounds with all the others, in
        the directory NAME; True when every one succeeded"""
        d = self.path(name)
        os.makedirs(d, exist_ok=True)
        procs = [self.popen(["on", str(n), "timeout", "180", self.client, f"--dir={d}",
                             f"--id={i}", f"--clients={len(nodes)}", "--rounds=2",
                             "--size=16384"], os.path.join(d, f"out.{i}"))
                 for i, n in enumerate(nodes)]
        ok = True
        for p in procs:
            try:
                ok = p.wait(timeout=240) == 0 and ok
            except subprocess.TimeoutExpired:
                ok = False
        if not ok:
            lines = [line for f in sorted(glob.glob(os.path.join(d, "out.*")))
                     for line in read_text(f).splitlines() if "FAILED" in line]
            print("".join(f"    {line}\n" for line in lines[:5]), end="", flush=True)
        return ok


class Driver:
    """A fault driver's random choices (its own generator) and the faults
    it injects that both phases share: link flaps and stops."""

    def __init__(self, run, rng):
        self.run = run
        self.rng = rng
        self.bag = []

    def rnd(self, n):
        """0..N-1"""
        return self.rng.randrange(n)

    def next_kind(self, *kinds):
        """the next of a shuffled turn of KINDS"""
        if not self.bag:
            self.bag = list(kinds)
            for i in range(len(self.bag) - 1, 0, -1):
                j = self.rnd(i + 1)
                self.bag[i], self.bag[j] = self.bag[j], self.bag[i]
        return self.bag.pop(0)

    def fault_link(self, nodes):
        """one of nodes 1..NODES loses its link for 2-5 s"""
        n = self.rnd(nodes) + 1
        d = self.rnd(4) + 2
        self.run.event(f"link: node {n} down for {d} s")
        ip_link(n, "down")
        time.sleep(d)
        ip_link(n, "up")

    def fault_stop(self, pid, what, mark=None):
        """PID SIGSTOPped for 2-5 s, then SIGCONT; MARK (a file) exists
        while it is stopped"""
        d = self.rnd(4) + 2
        self.run.event(f"stop: {what} (pid {pid}) stopped for {d} s")
        if mark:
            touch(mark)
        signal_pid(pid, signal.SIGSTOP)
        time.sleep(d)
        signal_pid(pid, signal.SIGCONT)
        if mark:
            try:
                os.remove(mark)
            except OSError:
                pass


class Probe:
    """The agents' sockets while they are busy with the traffic: a status
    request to each every 2 s until the stop, each a record (NODE, RC, MS,
    STOPPED), in a thread. rvt-status waits 10 s for the answer, as a
    process's attach does: a replacement attaches to a busy agent. A
    request that met its agent stopped by the fault driver (SIGSTOP, up to
    5 s) is STOPPED: it measures the fault, not the agent, and is left out
    of the verdict."""

    def __init__(self, run):
        self.r = run
        self.records = []
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def start(self):
        self.thread.start()

    def join(self, timeout):
        self.thread.join(timeout)

    def loop(self):
        r = self.r
        while not os.path.exists(r.path("a", "stop")):
            for n in (1, 2, 3):
                mark = r.path("a", f"stopped.{n}")
                stopped = os.path.exists(mark)
                t0 = time.monotonic_ns()
                rc = 0 if r.agents.json(n) is not None else 1
                stopped = stopped or os.path.exists(mark)
                self.records.append((n, rc, (time.monotonic_ns() - t0) // 1000000, stopped))
            time.sleep(2)

    def summary(self, n):
        """node N's (asked, unanswered, slowest ms, met stopped)"""
        mine = [x for x in self.records if x[0] == n]
        asked = [x for x in mine if not x[3]]
        return (len(asked), sum(1 for x in asked if x[1] != 0),
                max((x[2] for x in asked), default=0), len(mine) - len(asked))


class Traffic:
    """Phase A: 12 chaos processes under kills, link flaps and stops, each
    process's incarnations, fates and exits."""

    def __init__(self, run):
        self.run = run
        self.g = run.suite
        self.inc = {}       # id -> its current incarnation
        self.started = {}   # id -> when it started
        self.wrapper = {}   # id -> the `timeout` in front of it
        self.fate = {}      # "ID.INC" -> killed or final
        self.exit_of = {}   # "ID.INC" -> exit status
        self.faults = {"kill": 0, "link": 0, "stop_client": 0, "stop_agent": 0}
        self.driver = Driver(run, run.rng)
        self.deadline = 0
        self.probe = None

    def start_client(self, id_, inc):
        """a chaos process; its pid goes to a file (the shell in front of it
        execs it), its bound is the deadline plus T_END"""
        r = self.run
        n = id_ // 4 + 1
        self.inc[id_] = inc
        self.started[id_] = now()
        self.fate[f"{id_}.{inc}"] = "final"
        pidfile = r.path("a", f"pid.{id_}.{inc}")
        try:
            os.remove(pidfile)
        except OSError:
            pass
        bound = self.deadline - int(time.time()) + T_END
        self.wrapper[id_] = r.popen(
            ["timeout", str(bound), "on", str(n), "bash", "-c",
             'echo $$ >"$1"; shift; exec "$@"', "_", pidfile, r.chaos_client,
             f"--dir={r.path('a')}", f"--id={id_}", f"--clients={CLIENTS}",
             f"--until={self.deadline}", f"--incarnation={inc}", "--size=16384",
             "--window=4"], r.path("a", f"out.{id_}.{inc}"))

    def client_pid(self, id_):
        """the pid of ID's current process (it may still be starting), or
        None after 5 s without one"""
        f = self.run.path("a", f"pid.{id_}.{self.inc[id_]}")
        for _ in range(50):
            t = read_text(f).strip()
            if t.isdigit():
                return int(t)
            time.sleep(0.1)
        return None

    def cards_out(self):
        """every ID's current process has published its card"""
        return all(os.path.exists(self.run.path("a", f"card.{i}.{c}"))
                   for i, c in self.inc.items())

    def wait_wrapper(self, id_):
        """the exit status of ID's current process (its `timeout` bounds it;
        this wait only guards against a wrapper stuck in the kernel)"""
        try:
            rc = self.wrapper[id_].wait(timeout=max(60, self.deadline - int(time.time())
                                                    + T_END + 60))
        except subprocess.TimeoutExpired:
            return "?"
        return status(rc)

    def fault_kill(self):
        """SIGKILL a process that has run 5 s or more, and start its
        replacement; False when there was none to kill"""
        r = self.run
        cand = [i for i in sorted(self.inc) if now() - self.started[i] >= 5]
        if not cand:
            return False
        id_ = cand[self.driver.rnd(len(cand))]
        old = self.inc[id_]
        pid = self.client_pid(id_)
        if pid is None:
            r.event(f"kill: client {id_}.{old} has no pid yet")
            return False
        signal_pid(pid, signal.SIGKILL)
        self.exit_of[f"{id_}.{old}"] = self.wait_wrapper(id_)
        self.fate[f"{id_}.{old}"] = "killed"
        self.start_client(id_, old + 1)
        r.event(f"kill: client {id_}.{old} (node {id_ // 4 + 1}, pid {pid}) SIGKILLed; "
                f"{id_}.{old + 1} started")
        self.faults["kill"] += 1
        return True

    def every_kind_came(self):
        """a kill, a link flap and a stop (of a process or an agent) have
        each come at least once"""
        f = self.faults
        return f["kill"] > 0 and f["link"] > 0 and f["stop_client"] + f["stop_agent"] > 0

    def start(self, traffic_secs):
        """the processes, and the probe of the agents' sockets"""
        r = self.run
        os.makedirs(r.path("a"), exist_ok=True)
        # The processes run until the driver's stop ($work/a/stop):
        # TRAFFIC_SECONDS of faults, twice that at most, from the moment
        # all have published their cards (T_START at most), then until the
        # last replacement has published its own and the others have had
        # time to read it. Their deadline (--until) is only the bound on
        # that, in case the driver never said stop.
        self.deadline = int(time.time()) + T_START + 2 * traffic_secs + 120
        for i in range(CLIENTS):
            self.start_client(i, 0)
        for _ in range(T_START * 10):
            if self.cards_out():
                break
            time.sleep(0.1)
        self.probe = Probe(r)
        self.probe.start()

    def drive(self, traffic_secs):
        """the driver: faults for TRAFFIC_SECONDS (a fault starts before
        they are over) and until each kind has come (for at most
        TRAFFIC_SECONDS more), then the stop"""
        r, d = self.run, self.driver
        r.phase_t0 = now()
        faults_end = now() + traffic_secs
        faults_last = now() + 2 * traffic_secs

        def done_yet():
            # the time is up, and each kind has come (or the extra time is
            # up too: the verdict below says which kind did not come)
            return now() >= faults_end and (now() >= faults_last or self.every_kind_came())

        while True:
            time.sleep(d.rnd(3) + 1)
            if done_yet():
                break
            kind = d.next_kind("kill", "link", "stop")
            if kind == "kill":
                if not self.fault_kill():
                    d.fault_link(3)
                    self.faults["link"] += 1
            elif kind == "link":
                d.fault_link(3)
                self.faults["link"] += 1
            elif d.rnd(5) == 0:
                n = d.rnd(3) + 1
                d.fault_stop(r.agent_pid[n][0], f"node {n}'s agent",
                             r.path("a", f"stopped.{n}"))
                self.faults["stop_agent"] += 1
            else:
                id_ = d.rnd(CLIENTS)
                pid = self.client_pid(id_)
                if pid is not None:
                    d.fault_stop(pid, f"client {id_}.{self.inc[id_]}")
                    self.faults["stop_client"] += 1
        f = self.faults
        r.event(f"faults over: {f['kill']} kills, {f['link']} link flaps, "
                f"{f['stop_client']} processes and {f['stop_agent']} agents stopped")
        # the stop, once the last replacement's card is out (60 s at most)
        # and the others have read it (every second)
        for _ in range(600):
            if self.cards_out():
                break
            time.sleep(0.1)
        time.sleep(3)
        touch(r.path("a", "stop"))
        r.event("stop")
        for id_ in sorted(self.inc):
            self.exit_of[f"{id_}.{self.inc[id_]}"] = self.wait_wrapper(id_)
        r.event("every process has ended")
        self.probe.join(timeout=120)
        # each agent's connections now (a peer not connected again is what
        # a failed clean round below would be about)
        for n in (1, 2, 3):
            r.agent_state(n)

    @staticmethod
    def figures(out):
        """each process's summary line (its last progress line for those
        killed: the same counts, up to then), its "KEY=VALUE" words"""
        line = ""
        for ln in read_text(out).splitlines():
            if ln.startswith(("CHAOS ", "progress ")):
                line = ln
        fig = {}
        for w in line.split():
            kv = w.split("=")
            if len(kv) == 2:
                fig[kv[0]] = kv[1]
        return fig

    def verdicts(self):
        """what the processes saw, and whether the agents kept answering"""
        r, g, f = self.run, self.g, self.faults
        r.suite.section("chaos A: what the processes saw")
        total = dict.fromkeys(KEYS, 0)
        hung = bad_exits = finals = killed = no_summary = 0
        print(TABLE.format("process", "fate", "exit", "ops_ok", "failed", "writes", "ams",
                           "pairs", "corrupt"))
        for key in sorted(self.fate, key=lambda k: tuple(map(int, k.split(".")))):
            out = r.path("a", f"out.{key}")
            rc = self.exit_of.get(key, "?")
            fig = self.figures(out)
            for k in KEYS:
                v = fig.get(k, "")
                total[k] += int(v) if v.isdigit() else 0
            if self.fate[key] == "final":
                finals += 1
                if not re.search(r"^CHAOS ", read_text(out), re.M):
                    no_summary += 1
                if rc != 0:
                    bad_exits += 1
            else:
                killed += 1
                # SIGKILL through on and timeout: 137
                if rc != 137:
                    bad_exits += 1
            if rc == 124:
                hung += 1
            # (a long run kills hundreds: the first 20 of them are shown)
            if self.fate[key] != "final" and killed > 20:
                continue
            print(TABLE.format(key, self.fate[key], rc, *(fig.get(k, "") for k in (
                "ops_ok", "ops_failed", "writes_verified", "ams_verified", "pairs_checked",
                "corrupt"))))
        lines = [ln for o in sorted(glob.glob(r.path("a", "out.*")))
                 for ln in read_text(o).splitlines()]
        bad_lines = sum(1 for ln in lines if re.search("BAD ARRIVAL|LOST|DUPLICATE", ln))
        shown = [ln for ln in lines
                 if re.search("BAD ARRIVAL|LOST|DUPLICATE|FAILED|timed out|failed: status", ln)]
        print("".join(f"    {ln}\n" for ln in shown[:10]), end="")
        t = total
        print(f"  in all: {t['ops_ok']} ops ok, {t['ops_failed']} failed (destination gone "
              f"{t['failed_gone']}, flushed {t['failed_flushed']}, retries exceeded "
              f"{t['failed_retries']}, other {t['failed_other']}; a killed process's up to its "
              f"last progress line), {t['writes_verified']} writes, {t['ams_verified']} data AMs "
              f"and {t['controls_verified']} acks/pings/fins verified", flush=True)

        g.check(f"faults injected: {f['kill']} kills, {f['link']} link flaps, "
                f"{f['stop_client']} processes and {f['stop_agent']} agents stopped "
                f"(seed {r.seed})", self.every_kind_came())
        g.check(f"no arrival corrupt or misdirected: {t['writes_verified']} writes and "
                f"{t['ams_verified']} AMs verified in {finals + killed} processes ({bad_lines} "
                f"bad, lost or duplicate lines; corrupt={t['corrupt']})",
                bad_lines == 0 and t["corrupt"] == 0)
        g.check(f"every op completed, ok or failed and reported to its sender: {t['ops_ok']} ok, "
                f"{t['ops_failed']} failed, {t['never_completed']} never completed",
                t["never_completed"] == 0)
        g.check(f"the faults made ops fail ({t['ops_failed']}), and the senders were told",
                t["ops_failed"] > 0)
        pairs = finals * (finals - 1)
        g.check(f"every op that completed ok arrived, once: {t['pairs_checked']} of {pairs} "
                f"sender-receiver pairs checked by fin, {t['lost']} with a loss, "
                f"{t['duplicate']} with a duplicate, {t['fins_missing']} fins missing",
                t["lost"] == 0 and t["duplicate"] == 0 and t["fins_missing"] == 0
                and t["pairs_checked"] == pairs)
        g.check(f"nothing hung: all {finals + killed} processes ended before their timeout "
                f"({hung} did not), the {finals} last ones with a summary ({no_summary} "
                f"without), {killed} killed", hung == 0 and no_summary == 0)
        # a replacement attaches while its agent is busy with the others'
        # traffic (and the client library waits 10 s for the answer): what
        # the agent said
        attach_failed = sum(1 for o in glob.glob(r.path("a", "out.*"))
                            if "client: FAILED: attach" in read_text(o))
        said = [ln for log in sorted(glob.glob(r.path("rvtd.*.log")))
                for ln in read_text(log).splitlines() if "attach server: reply to client" in ln]
        print("".join(f"    {ln}\n" for ln in said[:5]), end="")
        g.check(f"every process, replacements included, attached to its agent in time "
                f"({attach_failed} did not)", attach_failed == 0)
        for n in (1, 2, 3):
            asked, unanswered, slowest, stopped = self.probe.summary(n)
            g.check(f"node {n}'s agent answered its socket under the traffic: "
                    f"{asked - unanswered} of {asked} status requests within rvt-status's 10 s "
                    f"(slowest {slowest} ms, process start included; {stopped} more met it "
                    f"stopped by a fault)", asked > 0 and unanswered == 0)
        g.check(f"every process ended as it should: the last ones exit 0, the killed ones by "
                f"SIGKILL ({bad_exits} did not)", bad_exits == 0)


class Mpi:
    """Phase B: MPI jobs under link flaps and stops, then the kill case."""

    def __init__(self, run, mpi_secs):
        self.run = run
        self.g = run.suite
        self.mpi_secs = mpi_secs
        self.args = os.environ.get("RVT_CHAOS_MPI_ARGS", "--max-size=65536").split()
        self.opts = []
        self.jobs_run = 0
        self.current_out = None   # the output of the job under faults now
        self.faults = {"link": 0, "stop_rank": 0, "stop_agent": 0}
        self.driver_done = threading.Event()
        self.mpi_end = 0

    def command(self):
        return ["timeout", str(T_JOB), "mpirun", *self.opts, "-np", "8",
                self.run.mpi_prog, *self.args]

    def mpi_job(self, name):
        """one job of the MPI program, its output in NAME.out: (verdict, rc,
        secs), the verdict verified, corrupt (words differed), hung (its
        timeout) or failed (an error exit)"""
        out = self.run.path(f"{name}.out")
        t0 = now()
        self.jobs_run += 1
        with open(out, "w") as f:
            try:
                rc = guest.on(1, self.command(), stdout=f, stderr=subprocess.STDOUT,
                              timeout=T_JOB + 60).returncode
            except subprocess.TimeoutExpired:
                rc = 124
        rc = status(rc)
        secs = now() - t0
        text = read_text(out)
        if re.search("words differed|MISMATCH", text):
            verdict = "corrupt"
        elif rc == 124:
            verdict = "hung"
        elif rc == 0 and re.search(r"^OK: rvt_mpi_check", text, re.M):
            verdict = "verified"
        else:
            verdict = "failed"
        return verdict, rc, secs

    @staticmethod
    def in_data_phase(out):
        """the job writing OUT is after MPI_Init (its table's header is
        out) and before its verdict"""
        if out is None or not os.path.isfile(out):
            return False
        text = read_text(out)
        return "ranks; pingpong" in text and not re.search(
            r"^(OK|FAIL): rvt_mpi_check", text, re.M)

    def drive(self):
        """the driver, in a thread: link flaps of node 1 or 2, and stops of
        a rank or (1 in 5) an agent, for MPI_SECONDS and until each kind
        has come once; its own generator, seeded from the run's seed. Jobs
        start one after the other until it is done; the last one ends
        without faults (a job under faults is mostly stalled: it moves in
        the gaps between them). A fault comes only while a job moves data:
        after MPI_Init (its table's header is out) and before its verdict.
        A job that starts while its node's link is down does fail, and
        rightly: UCX finds the device's port down, and no transport for
        pml ucx ("network device 'rxe2:1' is not available")."""
        r = self.run
        d = Driver(r, random.Random(r.seed + 1))
        stop = r.path("stop")
        f = self.faults

        def done_yet():
            return (now() >= self.mpi_end and f["link"] > 0
                    and f["stop_rank"] + f["stop_agent"] > 0)

        try:
            while True:
                time.sleep(d.rnd(3) + 1)
                while not (self.in_data_phase(self.current_out) or os.path.exists(stop)
                           or done_yet()):
                    time.sleep(0.2)
                if os.path.exists(stop) or done_yet():
                    break
                if d.next_kind("link", "stop") == "link":
                    d.fault_link(2)
                    f["link"] += 1
                    continue
                ranks = pgrep("rvt_mpi_check")
                if d.rnd(5) == 0 or not ranks:
                    n = d.rnd(2) + 1
                    d.fault_stop(r.agent_pid[n][0], f"node {n}'s agent",
                                 r.path("a", f"stopped.{n}"))
                    f["stop_agent"] += 1
                else:
                    d.fault_stop(ranks[d.rnd(len(ranks))], "MPI rank process")
                    f["stop_rank"] += 1
        finally:
            self.driver_done.set()

    def under_faults(self):
        """jobs under the driver's faults, one after the other, until it is
        done; their verdicts"""
        r, g = self.run, self.g
        for p in (r.path("stop"), r.path("b.done")):
            if os.path.exists(p):
                os.remove(p)
        self.mpi_end = now() + self.mpi_secs
        driver = threading.Thread(target=self.drive, daemon=True)
        driver.start()
        jobs = verified = 0
        secs = []
        # (bounded: a job has T_JOB s, and the driver is done within a job
        # of MPI_SECONDS: its faults need only the data phase of one)
        while not self.driver_done.is_set() and now() < self.mpi_end + 2 * T_JOB:
            jobs += 1
            self.current_out = r.path(f"chaos.{jobs}.out")
            verdict, rc, s = self.mpi_job(f"chaos.{jobs}")
            r.event(f"job {jobs}: {verdict} (exit {rc}, {s} s)")
            secs.append(str(s))
            if verdict == "verified":
                verified += 1
            else:
                lines = [ln for ln in read_text(self.current_out).splitlines()
                         if " UCX  INFO " not in ln]
                print(indent(f"job {jobs}", lines[-20:]), end="")
                # what the agents made of it (their logs are kept in $work)
                for n in (1, 2):
                    r.agent_state(n)
        touch(r.path("stop"))
        driver.join(timeout=60)
        f = self.faults
        g.check(f"MPI under faults: {f['link']} link flaps, {f['stop_rank']} ranks and "
                f"{f['stop_agent']} agents stopped",
                f["link"] > 0 and f["stop_rank"] + f["stop_agent"] > 0)
        g.check(f"MPI under faults: {verified} of {jobs} jobs completed and verified every "
                f"word, none hung or corrupt ({', '.join(secs)} s)", verified == jobs)

    def kill_case(self):
        """a rank SIGKILLed 2 s into the job's data phase: its job ends with
        an error within T_KILLED s, and the next job verifies"""
        r, g = self.run, self.g
        r.phase_t0 = now()
        out = r.path("killed.out")
        job = r.popen(["on", "1", *self.command()], out)
        for _ in range(1200):
            if self.in_data_phase(out) or job.poll() is not None:
                break
            time.sleep(0.1)
        time.sleep(2)
        ranks = pgrep("rvt_mpi_check")
        i = r.rng.randrange(8)
        if len(ranks) >= 8 and job.poll() is None and signal_pid(ranks[i], signal.SIGKILL):
            t_kill = now()
            r.event(f"kill: MPI rank process {ranks[i]} SIGKILLed")
            try:
                rc = status(job.wait(timeout=T_JOB + 60))
            except subprocess.TimeoutExpired:
                rc = 124
            dt = now() - t_kill
            lines = [ln for ln in read_text(out).splitlines() if " UCX  INFO " not in ln]
            print(indent("killed rank", lines[-6:]), end="")
            g.check(f"MPI job with a rank SIGKILLed ended with an error (mpirun exit {rc}, not 0 "
                    f"nor the timeout's 124) {dt} s after the kill (bound {T_KILLED} s)",
                    rc not in (0, 124) and dt <= T_KILLED)
        else:
            r.wait_bounded(T_JOB + 60, [job])
            g.fail(f"MPI kill case: no job to kill a rank of ({len(ranks)} ranks seen)")
            print(indent("killed rank", read_text(out).splitlines()[-20:]), end="")
        verdict, rc, secs = self.mpi_job("next")
        g.check(f"the next MPI job on the nodes verified every word (exit {rc}, {secs} s)",
                verdict == "verified")
        if verdict != "verified":
            print(indent("next", read_text(r.path("next.out")).splitlines()[-20:]), end="")


def phase_a(r, traffic_secs):
    """A: the traffic processes under faults, and the agents afterwards"""
    g = r.suite
    g.section(f"chaos A: {CLIENTS} traffic processes on 3 nodes, seed {r.seed}: "
              "warm-up and baseline")
    os.environ["RVT_JOB_KEY"] = f"chaos.{os.getpid()}"
    r.agent_opts = f"--keepalive-ms=1000 --reconnect-ms=500 --qp-timeout={r.qp_timeout}"
    r.start_agents(1, 2, 3)
    r.phase_t0 = now()
    if r.plain_round("warmup", ALL_NODES):
        g.pass_(f"warm-up round: 12 clients, every write and AM verified "
                f"({now() - r.phase_t0} s)")
    else:
        g.fail("warm-up round")
    r.baseline_take(1, 2, 3)

    traffic = Traffic(r)
    traffic.start(traffic_secs)
    g.section(f"chaos A: faults for {traffic_secs} s")
    traffic.drive(traffic_secs)
    traffic.verdicts()

    g.section("chaos A: afterwards")
    t0 = now()
    if r.plain_round("after", ALL_NODES):
        g.pass_(f"after the chaos, a clean round: 12 new clients, every write and AM verified, "
                f"no op failed ({now() - t0} s)")
    else:
        g.fail("after the chaos, a clean round failed")
    for n in (1, 2, 3):
        s = r.agents.json(n)
        text = ""
        if s is not None:
            dp = s["data_path"]
            text = (f"{sum(p['reconnects'] for p in dp['peers'])} reconnects, "
                    f"{dp['clients_gone']} clients gone, {dp['mrs_cleaned']} of their MRs "
                    f"deregistered, {dp['pauses']} pauses, {dp['ops_parked']} ops parked, "
                    f"{dp['departed']['ops_failed']} ops failed for departed clients, "
                    f"{dp['misrouted']} misrouted")
        print(f"  node {n} agent: {text}", flush=True)
    r.baseline_check("after the traffic chaos", 1, 2, 3)
    r.stop_agents(1, 2, 3)


def phase_b(r, mpi_secs):
    """B: MPI jobs under link and stop faults, the kill case, the agents
    afterwards"""
    g = r.suite
    g.section(f"chaos B: MPI jobs (8 ranks, node1 and node2) for {mpi_secs} s under link and "
              "stop faults")
    os.environ["RVT_JOB_KEY"] = f"chaos-mpi.{os.getpid()}"
    r.agent_opts = ""
    r.start_agents(1, 2)
    mpi = Mpi(r, mpi_secs)
    # Open MPI's options for the testbed (guest.py), and UCX 1.13's way to
    # load the module: LD_PRELOAD (it loads only its own modules)
    mpi.opts = guest.mpi_options(r.path("hosts")) + ["-x", f"LD_PRELOAD={r.module}"]
    r.phase_t0 = now()
    # the agents' baseline once they have connected to each other: a plain
    # traffic round between the two nodes (an MPI job would do the same,
    # in 15 s rather than 3)
    if r.plain_round("b-warmup", [1, 2]):
        g.pass_("warm-up round: a client on node 1 and one on node 2, every write and AM "
                "verified")
    else:
        g.fail("warm-up round between nodes 1 and 2")
    r.baseline_take(1, 2)
    mpi.under_faults()
    mpi.kill_case()
    r.baseline_check("after the MPI chaos", 1, 2)
    return mpi.jobs_run


def main(argv):
    if len(argv) != 6:
        print(USAGE, file=sys.stderr)
        return 1
    build = os.path.abspath(argv[1])
    traffic_secs, mpi_secs, seed, qp_timeout = (int(a) for a in argv[2:6])
    sys.stdout.reconfigure(line_buffering=True)
    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = Run(build, seed, qp_timeout)
    try:
        for f in (r.rvtd, r.rvt_status, r.client, r.chaos_client, r.module, r.mpi_prog):
            if not os.path.exists(f):
                r.suite.fail(f"{f} not built (make check)")
                r.suite.finish()
        phase_a(r, traffic_secs)
        jobs_run = phase_b(r, mpi_secs)
        print(f"chaos run: seed {seed}, {int(time.monotonic() - r.suite.t_start)} s in the "
              f"guest, {jobs_run} MPI jobs")
        r.suite.finish()
    except Exception:  # a bug of this script's: a failed check, not a silent end
        traceback.print_exc()
        r.suite.fail("chaos_guest.py stopped on an error (its traceback above)")
        r.suite.finish()
    finally:
        r.cleanup()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
