# SPDX-License-Identifier: BSD-3-Clause
"""What the testbed suites written in Python share, inside the guest: the
Python side of lib.sh's guest helpers. A suite reports each check with
pass_/fail/check and ends with finish(NAME), which exits non-zero when any
check failed; its lines are "PASS: ..." and "FAIL: ...", which
contrib/run-tests.sh counts, and nothing here prints another line that
starts with either:

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import guest
    g = guest.Suite("my suite")
    g.check("node 1 answers", guest.on(1, ["true"]).returncode == 0)
    g.finish()

Processes on a node run through the testbed's `on` (contrib/testbed/
guest/bin/on), which enters that node's namespaces; the agent helpers
read rvt-status --json there. Standard library only: the guest runs the
host's python3 (Debian 12's)."""

import json
import os
import re
import subprocess
import sys
import tempfile
import time


class Suite:
    """The checks of one suite: counts, and the lines that report them."""

    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0
        self.t_start = time.monotonic()

    def pass_(self, text):
        print(f"PASS: {text}", flush=True)
        self.passed += 1

    def fail(self, text):
        print(f"FAIL: {text}", flush=True)
        self.failed += 1

    def check(self, text, ok):
        """pass_ or fail TEXT as OK is true or false; returns OK"""
        (self.pass_ if ok else self.fail)(text)
        return ok

    def section(self, title):
        """a heading with the seconds since the suite began (lib.sh's)"""
        secs = int(time.monotonic() - self.t_start)
        print(f"\n--- {title} (+{secs} s)", flush=True)

    def finish(self):
        """the suite's last line, and its exit: 1 if any check failed"""
        print(f"{self.name}: {self.passed} passed, {self.failed} failed", flush=True)
        sys.exit(0 if self.failed == 0 else 1)


def on(node, args, **kw):
    """ARGS run on testbed node NODE (a number); subprocess.run's keywords
    pass through (capture_output=True, text=True, timeout=...)"""
    return subprocess.run(["on", str(node), *args], **kw)


def on_bg(node, args, **kw):
    """ARGS started on node NODE in the background: a Popen. Its child is
    the node's program (`on` runs nsenter as its child), so stop it with
    stop(popen), never by killing the `on` process alone."""
    return subprocess.Popen(["on", str(node), *args], **kw)


def children(pid):
    """the pids whose parent is PID"""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def stop(popen, sig="TERM", wait=10):
    """signal SIG to the program an on_bg started (its `on`'s children, as
    `pkill -SIG -P PID` does), then wait up to WAIT seconds for it;
    returns its exit status, or None if it has not ended"""
    for c in children(popen.pid):
        subprocess.run(["kill", f"-{sig}", str(c)], stderr=subprocess.DEVNULL)
    try:
        return popen.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        return None


def indent(label, text):
    """TEXT's lines, each under "  LABEL| " (lib.sh's indent)"""
    return "".join(f"  {label}| {line}\n" for line in text.splitlines())


def node_of(pid):
    """the node PID runs on (`on N` puts RVT_NODE=N in its environment),
    or None when PID has ended"""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for var in f.read().split(b"\0"):
                if var.startswith(b"RVT_NODE="):
                    return int(var[len(b"RVT_NODE="):])
    except (OSError, ValueError):
        pass
    return None


def agent_pids(node):
    """the pids of node NODE's rvtd processes"""
    found = subprocess.run(["pgrep", "-x", "rvtd"], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split() if node_of(int(p)) == node]


class Agents:
    """The agents' status, read with an rvt-status binary the nodes reach."""

    def __init__(self, rvt_status):
        self.rvt_status = rvt_status

    def json(self, node):
        """node NODE's agent status (the one serving its device) as a dict,
        or None when it does not answer"""
        r = on(node, ["bash", "-c",
                      f"exec timeout 20 {self.rvt_status} --json --device=$RXE_DEV"],
               capture_output=True, text=True)
        if r.returncode != 0 or not r.stdout.strip():
            return None
        try:
            return json.loads(r.stdout)
        except json.JSONDecodeError:
            return None

    def wait(self, node, secs=10):
        """True once node NODE's agent answers, False after SECS seconds"""
        end = time.monotonic() + secs
        while time.monotonic() < end:
            if self.json(node) is not None:
                return True
            time.sleep(0.1)
        return False

    def settle(self, node, secs=10):
        """True once node NODE's agent has finished with the clients that
        left: none attached, and the MRs of those that left without
        releasing them deregistered (lib.sh's agent_settle says why)"""
        end = time.monotonic() + secs
        while time.monotonic() < end:
            s = self.json(node)
            if s is not None and not s["clients"] \
                    and s["data_path"]["gone_waiting"] == 0 \
                    and s["data_path"]["releases_waiting"] == 0:
                return True
            time.sleep(0.1)
        return False

    def counters(self, node):
        """node NODE's agent's life totals (lib.sh's agent_counters): AMs
        and writes with immediate delivered to its clients, their bytes,
        the bytes posted to and received from other nodes; None when the
        agent does not answer"""
        s = self.json(node)
        if s is None:
            return None
        dp = s["data_path"]
        remote = [p for p in dp["peers"] if not p.get("loopback")]
        return {"am": dp["delivered"]["am"], "writes": dp["delivered"]["writes"],
                "write_bytes": dp["delivered"]["write_bytes"],
                "sent": sum(p["bytes"] for p in remote),
                "received": sum(p["received_bytes"] for p in remote)}


def mpi_options(hostfile, hosts=("node1", "node2"), slots=4, tls="rvt,sm,self",
                pml_tls="rvt"):
    """the options under which mpirun runs a job over rvt across HOSTS,
    SLOTS ranks each (HOSTFILE is written); TLS None leaves UCX_TLS unset.
    lib.sh's mpi_options says what each option is for."""
    with open(hostfile, "w") as f:
        for h in hosts:
            f.write(f"{h} slots={slots}\n")
    here = os.path.dirname(os.path.abspath(__file__))
    opts = ["--hostfile", hostfile, "--bind-to", "none",
            "--mca", "plm_rsh_agent", os.path.join(here, "mpi-rsh-agent.sh"),
            "--mca", "plm_rsh_no_tree_spawn", "1",
            "--mca", "if_base_do_not_resolve", "1",
            "--mca", "oob_tcp_if_include", "198.18.0.0/24",
            "--mca", "pml", "ucx", "--mca", "pml_ucx_tls", pml_tls,
            "--mca", "pml_ucx_devices", "any",
            "--mca", "btl", "self", "--mca", "mpi_yield_when_idle", "1",
            "-x", "UCX_RVT_START_AGENT=n", "-x", "RVT_JOB_KEY",
            "-x", "UCX_WARN_UNUSED_ENV_VARS=n"]
    if tls is not None:
        opts += ["-x", f"UCX_TLS={tls}"]
    return opts


def make_var(build, name):
    """a variable of BUILD's Makefile ("NAME = value"), or None"""
    with open(os.path.join(build, "Makefile")) as f:
        for line in f:
            m = re.match(rf"^{re.escape(name)} = (.*)$", line.rstrip("\n"))
            if m:
                return m.group(1)
    return None


# ---- added for site_jobs_guest.py

def run(args, timeout, **kw):
    """ARGS run to their end, as subprocess.run (its keywords pass
    through), in a session of their own: after TIMEOUT seconds the whole
    process group is killed, not the first process alone (an `on` leaves
    its nsenter'd program behind otherwise), and the result has status 124
    as timeout(1) gives"""
    p = subprocess.Popen(args, start_new_session=True, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p)
        out, err = p.communicate()
        return subprocess.CompletedProcess(args, 124, out, err)
    return subprocess.CompletedProcess(args, p.returncode, out, err)


def kill_group(popen, sig=9):
    """signal SIG (default SIGKILL) to the process group POPEN leads (one
    started with start_new_session=True, as run does)"""
    try:
        os.killpg(popen.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def json_verdict(text, judge):
    """lib.sh's json_verdict: JUDGE makes (ok, text) of the JSON in TEXT, a
    check's verdict and the figures it judged, from one function. Returns
    (False, None) when TEXT is empty or not JSON, or JUDGE finds a field
    missing or of another type (where jq's filter would have failed)"""
    if not text or not text.strip():
        return False, None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return False, None
    try:
        ok, what = judge(data)
    except (KeyError, TypeError, IndexError, AttributeError, ValueError):
        return False, None
    return bool(ok), what


def jq_text(value):
    """VALUE as jq's string interpolation (and -r) writes it: strings raw,
    null, true and false as words, the rest as JSON"""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def await_(guard, ready, ended=lambda: False, poll=0.5):
    """verdicts.sh's await: wait for an event rather than for a time. Calls
    READY every POLL seconds until it returns true (status 0), or until
    ENDED returns true first, saying the event can no longer come (status
    1), or, a hang guard rather than a time the event must beat, GUARD
    seconds have passed (status 2). Returns (status, whole seconds
    waited)."""
    start = time.monotonic()
    while True:
        if ready():
            rc = 0
        elif ended():
            rc = 1
        elif time.monotonic() - start >= guard:
            rc = 2
        else:
            time.sleep(poll)
            continue
        return rc, int(time.monotonic() - start)
# ---- added for chaos_guest.py


def agent_sample(node, agents):
    """node NODE's agent (testbed device rxeNODE) as a tuple of strings
    (rss_kib, fds, mrs, qps, cqs, attached): its resident memory and open
    fds (/proc), its device's MRs, QPs and CQs (`rdma resource`:
    everything in the agent's PD, its clients' MRs included) and its
    clients, as AGENTS (an Agents) reads them; "?" for what cannot be
    read (lib.sh's agent_sample)"""
    pids = agent_pids(node)
    rss = fds = "?"
    if pids:
        try:
            with open(f"/proc/{pids[0]}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = line.split()[1]
        except OSError:
            pass
        try:
            fds = str(len(os.listdir(f"/proc/{pids[0]}/fd")))
        except OSError:
            pass
    # "1: rxe1: pd 3 cq 5 qp 9 cm_id 0 mr 12 ctx 0 srq 1", read for 20 s
    # at most, and never waited for beyond: a device stuck in the kernel
    # can hold rdma in a sleep no signal ends (so no subprocess.run,
    # whose timeout waits for the process it kills)
    res = ("?", "?", "?")
    with tempfile.TemporaryFile(mode="w+") as out:
        p = subprocess.Popen(["rdma", "resource", "show"], stdout=out,
                             stderr=subprocess.DEVNULL)
        end = time.monotonic() + 20
        while p.poll() is None and time.monotonic() < end:
            time.sleep(0.1)
        if p.poll() is None:
            p.kill()
        else:
            out.seek(0)
            for line in out:
                w = line.split()
                if len(w) >= 2 and w[1] == f"rxe{node}:":
                    v = {w[i]: w[i + 1] for i in range(2, len(w) - 1, 2)}
                    res = tuple(v.get(k, "0") for k in ("mr", "qp", "cq"))
    s = agents.json(node)
    attached = str(len(s["clients"])) if s is not None else "?"
    return (rss, fds, *res, attached)


def resources_back(base, now):
    """verdicts.sh's resources_back: an agent's (fds, mrs, qps, cqs) at its
    baseline (BASE) and NOW, as agent_sample reads them ("?" for one it
    could not read). Returns (ok, text): ok when every figure was read
    both times and NOW is BASE (a figure not read fails, naming it and
    where it is read from); text is "BASE -> NOW", or what could not be
    read."""
    names = ("fds (/proc/PID/fd)", "MRs (rdma resource show)",
             "QPs (rdma resource show)", "CQs (rdma resource show)")
    unread = []
    for i, name in enumerate(names):
        if not (i < len(base) and str(base[i]).isdigit()):
            unread.append(f"the baseline's {name}")
        if not (i < len(now) and str(now[i]).isdigit()):
            unread.append(f"{name} now")
    b, n = " ".join(map(str, base)), " ".join(map(str, now))
    if unread:
        return False, f"could not read {', '.join(unread)} ({b} -> {n})"
    return [int(x) for x in base] == [int(x) for x in now], f"{b} -> {n}"


def rss_within(base, now, bound):
    """verdicts.sh's rss_within: an agent's resident memory NOW (KiB) at
    most BOUND KiB above its baseline's (BASE), both read ("?" fails,
    naming it). Returns (ok, text): "BASE -> NOW KiB, GROWTH KiB", or
    what could not be read."""
    unread = []
    if not str(base).isdigit():
        unread.append("at the baseline")
    if not str(now).isdigit():
        unread.append("now")
    if unread:
        return False, ("could not read its resident memory (/proc/PID/status) "
                       f"{' nor '.join(unread)} ({base} -> {now} KiB)")
    return (int(now) <= int(base) + bound,
            f"{base} -> {now} KiB, {int(now) - int(base)} KiB")
