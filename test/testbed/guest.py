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
import shutil
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


def kill(popen):
    """the program an on_bg started, and its `on`, killed (SIGKILL) and
    waited for: what is left to do when stop() did not end it"""
    stop(popen, "KILL")
    popen.kill()
    popen.wait()


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

    # The waits count tries, SECS * 10 of them 0.1 s apart, as lib.sh's
    # do, however long each asking takes: under TCG on a loaded host one
    # (an `on`, an rvt-status) can take a second, and an agent restarted
    # right after another stopped took longer than SECS of the clock to
    # answer; a wait bounded by the clock failed there ("the agents do not
    # answer") where the shell's tries did not.

    def wait(self, node, secs=10):
        """True once node NODE's agent answers, False after SECS * 10 tries"""
        for _ in range(secs * 10):
            if self.json(node) is not None:
                return True
            time.sleep(0.1)
        return False

    def settle(self, node, secs=10):
        """True once node NODE's agent has finished with the clients that
        left: none attached, and the MRs of those that left without
        releasing them deregistered (lib.sh's agent_settle says why)"""
        for _ in range(secs * 10):
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


# ---- commands run to their end, and verdicts read from JSON


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


# ---- an agent's resources, and whether they came back to a baseline


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


# ---- ucx_perftest pairs, their figures, and what the CPUs did


def awk_num(text):
    """TEXT as awk reads a number (its leading numeric part; 0 if none):
    figures such as "12.3 us" or "?" compare and divide as awk's did"""
    m = re.match(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text or "")
    return float(m.group(0)) if m else 0.0


class PerfSetup:
    """What a ucx_perftest suite in the guest shares (lib.sh's
    perf_guest_setup): the rvtd, rvt_status, module (libuct_rvt.so) and
    dev_alias paths; a job key of its own (so a leftover agent of another
    suite is never reused); `work`, a directory all nodes see (each has its
    own /tmp), removed by cleanup() after the background programs are
    stopped."""

    def __init__(self, suite, build):
        self.build = build
        self.rvtd = f"{build}/src/uct/ib/rvt/tools/rvtd"
        self.rvt_status = f"{build}/src/uct/ib/rvt/tools/rvt-status"
        self.module = f"{os.getcwd()}/{build}/src/uct/ib/rvt/uct/.libs/libuct_rvt.so"
        self.dev_alias = f"{os.getcwd()}/{build}/test/testbed/perftest_dev_alias.so"
        os.environ["RVT_JOB_KEY"] = f"{suite}.{os.getpid()}"
        self.work = tempfile.mkdtemp(prefix=f"{suite}.", dir=f"{os.getcwd()}/{build}")
        self.agents = Agents(self.rvt_status)
        self.bg = []

    def start(self, node, args, log, append=False):
        """ARGS started on node NODE in the background, its output into
        LOG (appended to with APPEND); stopped by cleanup() if still
        running then"""
        with open(log, "a" if append else "w") as f:
            p = on_bg(node, args, stdout=f, stderr=subprocess.STDOUT)
        self.bg.append(p)
        return p

    def cleanup(self):
        """each background program stopped (TERM to the `on` wrapper's
        child, the timeout in front of the program, which passes it on)
        and waited for; then `work` removed"""
        for p in self.bg:
            if p.poll() is None:
                if stop(p) is None:
                    kill(p)
        self.bg = []
        shutil.rmtree(self.work, ignore_errors=True)


# no process may hang a run: every ucx_perftest gets this long
T_PROC = int(os.environ.get("T_PROC", "120"))
# the ucx_perftest to run (another UCX's: its bin/ucx_perftest)
UCX_PERFTEST = os.environ.get("UCX_PERFTEST", "ucx_perftest")


def run_logged(node, args, log, timeout):
    """ARGS on node NODE, stdout and stderr into the file LOG, waited for
    up to TIMEOUT seconds (then stopped; ARGS should carry a timeout of
    their own, this one is the last resort); its exit status (124 after
    the last resort)"""
    with open(log, "w") as f:
        p = on_bg(node, args, stdout=f, stderr=subprocess.STDOUT)
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        if stop(p) is None:
            kill(p)
        return 124


def perf_pair(out, server, client, senv, cenv, args, port, cpus=(),
              server_args=()):
    """one ucx_perftest server on node SERVER (environment words SENV,
    TCP port PORT) and its client on node CLIENT (CENV, ARGS); outputs in
    OUT.server and OUT.client; CPUS, words in front of each ucx_perftest
    (such as taskset -c 0). Returns (ok, seconds): ok only if both ended
    well and neither printed a UCX error (an error on either side fails
    the run, figure or not)."""
    t0 = time.monotonic()
    with open(f"{out}.server", "w") as f:
        srv = on_bg(server, ["env", *senv, *cpus, "timeout", str(T_PROC), UCX_PERFTEST,
                             "-p", str(port), *server_args],
                    stdout=f, stderr=subprocess.STDOUT)
    try:
        with open(f"{out}.client", "w") as f:
            waited = subprocess.run(["wait-port", str(port), "60"], stdout=f,
                                    stderr=subprocess.STDOUT, timeout=90)
        if waited.returncode != 0:
            stop(srv)
            return False, int(time.monotonic() - t0)
        rc = run_logged(client, ["env", *cenv, *cpus, "timeout", str(T_PROC), UCX_PERFTEST,
                                 f"node{server}", "-p", str(port), *args],
                        f"{out}.client", T_PROC + 30)
        # a client that failed before its test may leave the server waiting
        if rc != 0:
            stop(srv, wait=0)
        try:
            src = srv.wait(timeout=T_PROC + 30)
        except subprocess.TimeoutExpired:
            src = stop(srv, "KILL")
    finally:
        if srv.poll() is None:
            kill(srv)
    secs = int(time.monotonic() - t0)
    for side in ("client", "server"):
        with open(f"{out}.{side}", errors="replace") as f:
            if "UCX  ERROR" in f.read():
                return False, secs
    return rc == 0 and src == 0, secs


def figure(out, kind):
    """the client's (OUT.client) final line as one figure: the median
    latency (KIND lat, half a round trip), "12.3 us", or the overall
    bandwidth, "4.56 MB/s"; None when it has no final line"""
    found = []
    try:
        with open(f"{out}.client", errors="replace") as f:
            for line in f:
                if line.startswith("Final:"):
                    w = line.split()
                    get = (lambda i: w[i - 1] if len(w) >= i else "")
                    found.append(f"{awk_num(get(3)):.1f} us" if kind == "lat"
                                 else f"{awk_num(get(7)):.2f} MB/s")
    except OSError:
        return None
    return "".join(found) or None


def error_text(out):
    """what went wrong in a pair's run, in at most 3 lines from both sides
    (OUT.client, OUT.server), one line with a blank after each"""
    pat = re.compile(r"ERROR|[Ee]rror|failed|Cannot|not supported|larger|smaller"
                     r"|nothing listens|Terminated")
    lines = []
    for side in ("client", "server"):
        try:
            with open(f"{out}.{side}", errors="replace") as f:
                lines += [line.rstrip("\n") for line in f if pat.search(line)]
        except OSError:
            pass
    lines = [re.sub(r"^\[[^]]*\] *\[[^]]*\] *", "", line) for line in lines[:3]]
    return "".join(f"{line} " for line in lines)


def _proc_stat(pid):
    """the fields of /proc/PID/stat after its command (field 3 on), or None"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def cpu_ticks():
    """the CPU time used so far, in clock ticks: [all, busy, system,
    softirq, agent1, agent1_system, agent2, agent2_system], the guest's
    every vCPU's, idle or not, and busy (/proc/stat), and each node's
    rvtd's (its utime and stime). For cpu_report."""
    ticks = {1: 0, 2: 0}
    sys_ticks = {1: 0, 2: 0}
    for n in (1, 2):
        for p in agent_pids(n):
            st = _proc_stat(p)
            if st is None:
                continue
            ticks[n] += int(st[11]) + int(st[12])
            sys_ticks[n] += int(st[12])
    with open("/proc/stat") as f:
        for line in f:
            w = line.split()
            if w[0] == "cpu":
                v = [int(x) for x in w[1:]]
                busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
                return [sum(v), busy, v[2], v[6], ticks[1], sys_ticks[1],
                        ticks[2], sys_ticks[2]]
    return [0] * 8


def cpu_report(before, after, mb):
    """what the CPUs did between two cpu_ticks while MB megabytes moved,
    one line: the seconds that passed, the guest's busy CPU seconds, each
    agent's CPU seconds and its share of one vCPU, and (when agent 1
    worked) the megabytes per CPU-second of node 1's agent, the senders'
    (rxe does a send's packet work in the ibv_post_send of the process
    that posts): what it could carry with a vCPU to itself"""
    hz = os.sysconf("SC_CLK_TCK")
    ncpu = len(os.sched_getaffinity(0))  # nproc's count
    d = [(a - b) / hz for a, b in zip(after, before)]
    wall = d[0] / ncpu
    text = (f"{wall:.1f} s on {ncpu} vCPUs: busy {d[1]:.1f} CPU-s (system {d[2]:.1f},"
            f" softirq {d[3]:.1f}); agent 1 {d[4]:.2f} CPU-s"
            f" ({100 * d[4] / wall if wall > 0 else 0:.0f}% of a vCPU), agent 2"
            f" {d[6]:.2f} CPU-s ({100 * d[6] / wall if wall > 0 else 0:.0f}%)")
    if d[4] >= 0.1:
        text += f"; {mb / d[4]:.0f} MB per CPU-second of agent 1"
    return text


def agent_sched():
    """how the kernel scheduled both nodes' agents so far: [oncpu_ns,
    waited_ns, slices, sleeps, preempted], the time they ran and the time
    they were runnable but waited for a CPU, the times they were given one
    (/proc/PID/schedstat), the times they slept and the times they were
    taken off a CPU with work to do (voluntary and
    nonvoluntary_ctxt_switches, /proc/PID/status). For sched_report."""
    s = [0, 0, 0, 0, 0]
    for n in (1, 2):
        for p in agent_pids(n):
            try:
                with open(f"/proc/{p}/schedstat") as f:
                    run, wait, slices = (int(x) for x in f.read().split()[:3])
                with open(f"/proc/{p}/status") as f:
                    status = f.read()
            except (OSError, ValueError):
                continue
            s[0] += run
            s[1] += wait
            s[2] += slices
            for i, key in ((3, "voluntary_ctxt_switches"), (4, "nonvoluntary_ctxt_switches")):
                m = re.search(rf"^{key}:\s*(\d+)", status, re.M)
                s[i] += int(m.group(1)) if m else 0
    return s


def sched_report(before, after, secs):
    """what the agents' scheduling cost between two agent_sched over a run
    of SECS seconds, one line"""
    d = [a - b for a, b in zip(after, before)]
    share = 100 * d[1] / 1e9 / secs if secs > 0 else 0
    mean = d[1] / d[2] / 1e3 if d[2] > 0 else 0
    return (f"agents on a vCPU {d[0] / 1e6:.0f} ms, runnable and waiting for one"
            f" {d[1] / 1e6:.0f} ms ({share:.0f}% of the run), given one {int(d[2])} times"
            f" (mean wait {mean:.0f} us), slept {int(d[3])} times, preempted {int(d[4])} times")


def counters_delta(before, after):
    """two Agents.counters' difference (after less before), or None when
    either is None (the agent did not answer)"""
    if before is None or after is None:
        return None
    return {k: after[k] - before[k] for k in after}
