#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Inside the testbed guest (2 nodes): rvt's performance against rc_verbs,
same boot, as ratios, each beside the project's target for it
(docs/performance.md, "On the testbed"):

  latency     UCT am_lat and put_lat 8 B (short), UCP tag_lat 8 B:
              rvt / rc_verbs <= 3
  bandwidth   UCT put_bw zcopy 64 KiB, 1 MiB, 4 MiB; UCT am_bw bcopy
              8 KiB and zcopy: rvt / rc_verbs >= 0.9; UCP tag_bw 1, 4
              and 16 MiB: >= 0.95
  4 pairs     4 processes per node, each pair at once: UCT am_bw 8 B and
              put_bw zcopy 256 KiB, the pairs' sum: >= 0.9
  pollers     every rc_verbs figure again with one more process per
              node that polls and yields as an agent does: an rvt message
              passes 4 spinning processes on the guest's 2 vCPUs,
              rc_verbs' only 2; rvt / that is the part of each ratio that
              is not the emulator's scheduling of busy pollers
  agent core  rvt again with its agents on one vCPU and every
              ucx_perftest on the other, for the rows the emulator's
              scheduling is suspected of (docs/performance.md's rule: rvtd
              needs a core it does not wait for); where the CPU went in the
              4-pair runs, the agents' share of it
  UCX_TLS     what users should set: UCP tag_lat and tag_bw, one pair and
              4 pairs at once, with rvt alone, with active messages on
              per-process UD and the rendezvous on rvt (ud_verbs,rvt),
              and rc_verbs; the agents' counters show that rvt carried
              the rendezvous
  rendezvous  UCP's get and put rendezvous schemes over rvt, 4 pairs at
              once, 1 and 4 MiB: which moves more (printed, not judged)
  trace       where an 8-byte active message's time goes, per hop, from
              the agents' and the processes' traces (rvt-trace-report)
  bench       rvt_host_bench in this guest: the same hops with the agent
              and its client on a vCPU each, nothing else running
  striping    UCT put_bw zcopy 64 KiB to 4 MiB over rvt with the agent
              splitting each put over its K QPs (UCX_RVT_STRIPE_MIN=
              256k) and without (inf, the default), and rc_verbs: striped /
              unstriped, target >= 1.3 from 1 MiB (docs/performance.md,
              "Striping"); `perf_guest.py BUILD stripe` runs this
              section alone
  full node   MPI kernels (rvt_mpi_kernels) with every vCPU running a
              rank, rc_verbs beside ud_verbs,rvt and rvt under agents
              of each scheduling mode (Kernels says what);
              `perf_guest.py BUILD kernels` runs this section alone
  large job   UCX_TLS unset at 1,024 and 4,096 estimated endpoints: UD
              alone beside UD + rvt (and rc_verbs at a small job's
              setting), MPI latency, bandwidth, alltoall and kernels in
              interleaved rounds (LargeJob says what); brief in CI;
              `perf_guest.py BUILD largejob` runs it in full
  mid-size    UCP tag_bw and tag_lat from 512 B to 256 KiB, rvt,
              ud_verbs,rvt and rc_verbs, and the ratios
              (docs/performance.md, "Mid-size messages");
              `perf_guest.py BUILD sweep` runs it alone

A run's figure is a FIGURE: line, no test; a run that fails (no figure,
a UCX error, a program's failure) is a FAIL. The checks (PASS/FAIL) are
what can fail besides: MPI runs that verify every value, the agents
carrying the rendezvous of ud_verbs,rvt. The ratios are printed with
"met" or "not met", never judged: under TCG with every node on 2 vCPUs
they say what the emulator allows, and the docs/performance.md explains
them next to the host benchmark.

Usage: perf_guest.py BUILD_DIR [stripe|kernels|sweep|largejob|brief] (a
path relative to the source tree; stripe, kernels, sweep, largejob: that
section alone; brief: all but the 4-process, pollers, mid-size,
rendezvous, striping, agents' vCPU, UCX_TLS and full-node sections, and
bandwidth at 1 MiB, 8 KiB and 8000 B only, as CI runs it)

Every figure is also a row of BUILD_DIR/perf-results/figures.csv
("test,layout,size,setting,value,unit"), which outlives the boot
(test/testbed/plot.py draws it); the large job's raw lines and table go
there too (largejob.raw, largejob.txt).
"""

import concurrent.futures
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time

# the suite runs in the source tree: it leaves no bytecode there
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guest  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# The UCT server takes the device name from its client: node 2 opens its
# own rxe2 under node 1's name (perftest_dev_alias.so, see the file).
ALIAS_ENV = ["RVT_PERFTEST_DEV_ALIAS=rxe1:1=rxe2:1"]


def secs_since(t0):
    """whole seconds since the monotonic time T0"""
    return int(time.monotonic() - t0)


def ratio(a, b):
    """A / B from two figures ("12.3 us"), "%.2f", or "-" when either is
    not a positive figure ("?", "-", "error", empty)"""
    x = guest.awk_num((a or "").split()[0] if (a or "").split() else "")
    y = guest.awk_num((b or "").split()[0] if (b or "").split() else "")
    if x <= 0 or y <= 0:
        return "-"
    return f"{x / y:.2f}"


def figure_line(text):
    """a figure printed, no test (contrib/test-count.sh counts PASS and
    FAIL lines, never these)"""
    print(f"FIGURE: {text}", flush=True)


def ucx_tls_env(tl):
    """the environment words of a UCP run over TL (rvt: rvt alone;
    rc_verbs: rc_verbs with UD as UCP's auxiliary wire-up transport, as
    UCX's default; else TL is the UCX_TLS list itself, words after it
    passed on). ud_verbs drops every packet on rxe without
    UCX_UD_VERBS_ETH_DGID_CHECK=n (docs/testing.md, "The testbed")."""
    if tl == "rvt":
        return ["UCX_TLS=rvt,self"]
    if tl == "rc_verbs":
        return ["UCX_TLS=rc_verbs,ud_verbs:aux,self", "UCX_UD_VERBS_ETH_DGID_CHECK=n"]
    return f"UCX_TLS={tl} UCX_UD_VERBS_ETH_DGID_CHECK=n".split()


class Perf:
    """The suite's state: the figures kept (fig), the CPU reports of the
    4-pair runs (cpu), the ratio table's rows and the rc_verbs runs the
    pollers' section repeats."""

    def __init__(self, build, only):
        self.build = build
        self.only = only
        self.g = guest.Suite("perf")
        self.s = guest.PerfSetup("perf", build)
        self.work = self.s.work
        self.fig = {}
        self.cpu = {}
        self.rows = []
        self.reruns = []
        # the TCP port of the next pair's rendezvous (each pair takes the next)
        self.port = 20000
        # what runs every ucx_perftest (empty, or taskset -c 0: the vCPUs
        # it may use)
        self.perf_cpus = []
        self.results = f"{build}/perf-results"
        self.trace = False

    # ---- figures ---------------------------------------------------------

    def start_results(self):
        """figures.csv afresh: every figure is also a row of it, which
        outlives the boot (test/testbed/plot.py draws it)"""
        try:
            shutil.rmtree(self.results, ignore_errors=True)
            os.makedirs(self.results)
            with open(f"{self.results}/figures.csv", "w") as f:
                f.write("test,layout,size,setting,value,unit\n")
        except OSError:
            sys.exit(125)

    def keep(self, test, layout, size, setting, fig):
        """FIG ("12.3 us", "4.56 MB/s" or "error") kept as
        fig[TEST.LAYOUT.SIZE.SETTING] and as a CSV row (SETTING may be a
        UCX_TLS list, so it is quoted)"""
        self.fig[f"{test}.{layout}.{size}.{setting}"] = fig
        value, unit = fig.rsplit(" ", 1)[0], fig.split(" ", 1)[-1]
        if fig == "error":
            value, unit = "", "error"
        with open(f"{self.results}/figures.csv", "a") as f:
            f.write(f'{test},{layout},{size},"{setting}",{value},{unit}\n')

    def f(self, key):
        """a kept figure, or "?" """
        return self.fig.get(key) or "?"

    def pair(self, out, senv, cenv, args, port=None):
        """perf_pair from node 2 (server) to node 1 (client); PORT, or the
        next of the suite's ports"""
        if port is None:
            self.port += 1
            port = self.port
        return guest.perf_pair(out, 2, 1, senv, cenv, args, port, cpus=self.perf_cpus)

    # ---- the runs --------------------------------------------------------

    def uct(self, test, layout, size, iters, tl, cenv=(), senv=(), key_tl=None):
        """one UCT run node1 -> node2 (its figure kept under KEY_TL, else TL)"""
        key_tl = key_tl or tl
        kind = test.split("_", 1)[1]
        out = f"{self.work}/uct.{test}.{layout}.{size}.{key_tl}"
        senv = [f"LD_PRELOAD={self.s.dev_alias}", *ALIAS_ENV, *senv]
        cenv = list(cenv)
        if tl == "rvt":
            senv[0] = f"LD_PRELOAD={self.s.module}:{self.s.dev_alias}"
            cenv = [f"LD_PRELOAD={self.s.module}", *cenv]
        ok, secs = self.pair(out, senv, cenv,
                             ["-t", test, "-x", tl, "-d", "rxe1:1", "-D", layout,
                              "-s", str(size), "-n", str(iters), "-w", str(iters // 10 + 1)])
        f = guest.figure(out, kind) if ok else None
        if f is not None:
            self.keep(test, layout, size, key_tl, f)
            figure_line(f"uct {test} -D {layout} {size} B, {key_tl}: {f} ({secs} s)")
        else:
            self.keep(test, layout, size, key_tl, "error")
            self.g.fail(f"uct {test} -D {layout} {size} B, {key_tl}: {guest.error_text(out)}")

    def ucp(self, test, size, iters, tl, key_tl=None):
        """one UCP run node1 -> node2; TL is rvt, rc_verbs or a UCX_TLS
        list (its figure kept under KEY_TL if given, else TL)"""
        key_tl = key_tl or tl
        kind = "lat" if test == "tag_lat" else "bw"
        out = f"{self.work}/ucp.{test}.{size}.{key_tl.replace(',', '_')}"
        env = [f"LD_PRELOAD={self.s.module}", *ucx_tls_env(tl)]
        ok, secs = self.pair(out, env, env, ["-t", test, "-s", str(size), "-n", str(iters),
                                             "-w", str(iters // 4 + 1)])
        f = guest.figure(out, kind) if ok else None
        if f is not None:
            self.keep(test, "ucp", size, key_tl, f)
            figure_line(f"ucp {test} {size} B, {key_tl}: {f} ({secs} s)")
        else:
            self.keep(test, "ucp", size, key_tl, "error")
            self.g.fail(f"ucp {test} {size} B, {key_tl}: {guest.error_text(out)}")

    def uct_pair_bg(self, test, layout, size, iters, tl, k):
        """pair K of many(): its bandwidth's number, or None when it failed"""
        out = f"{self.work}/many.{test}.{size}.{tl}.{k}"
        senv = [f"LD_PRELOAD={self.s.dev_alias}", *ALIAS_ENV]
        cenv = []
        if tl == "rvt":
            senv[0] = f"LD_PRELOAD={self.s.module}:{self.s.dev_alias}"
            cenv = [f"LD_PRELOAD={self.s.module}"]
        # a port of its own: the pairs run at once
        ok, _ = self.pair(out, senv, cenv,
                          ["-t", test, "-x", tl, "-d", "rxe1:1", "-D", layout, "-s", str(size),
                           "-n", str(iters), "-w", str(iters // 10 + 1)],
                          port=30000 + 10 * k + 1)
        f = guest.figure(out, "bw") if ok else None
        return f.split()[0] if f else None

    @staticmethod
    def at_once(fn, jobs):
        """FN(*JOB) for each of JOBS at once; their results in order"""
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as ex:
            return list(ex.map(lambda job: fn(*job), jobs))

    def many(self, test, layout, size, iters, tl, key_tl=None):
        """4 pairs node1 -> node2 at once; their bandwidths added (kept
        under KEY_TL if given), and where the CPU went meanwhile"""
        key_tl = key_tl or tl
        t0 = guest.cpu_ticks()
        figs = self.at_once(self.uct_pair_bg,
                            [(test, layout, size, iters, tl, k) for k in (1, 2, 3, 4)])
        total = f"{sum(guest.awk_num(x) for x in figs if x is not None):.2f} MB/s"
        t1 = guest.cpu_ticks()
        # what moved: 4 pairs, the measured iterations and the warm-up's
        mb = f"{4 * (iters + iters // 10 + 1) * size / 1e6:.1f}"
        if None not in figs:
            key = f"{test}.x4.{size}.{key_tl}"
            self.keep(test, "x4", size, key_tl, total)
            self.cpu[key] = guest.cpu_report(t0, t1, float(mb))
            figure_line(f"4 pairs uct {test} -D {layout} {size} B, {key_tl}: {total} together")
            print(f"  {mb} MB: {self.cpu[key]}", flush=True)
        else:
            self.keep(test, "x4", size, key_tl, "error")
            self.g.fail(f"4 pairs uct {test} -D {layout} {size} B, {key_tl}: a pair failed")

    def both(self, kind, *args, target):
        """KIND (uct, ucp or many) with ARGS over rvt, then rc_verbs, and a
        row of the table for their ratio; the rc_verbs run is remembered
        for the pollers' section"""
        run = getattr(self, kind)
        run(*args, "rvt")
        run(*args, "rc_verbs")
        self.reruns.append((kind, args))
        key = {"uct": f"{args[0]}.{args[1]}.{args[2]}",
               "ucp": f"{args[0]}.ucp.{args[1]}",
               "many": f"{args[0]}.x4.{args[2]}"}[kind]
        self.rows.append((key, target))

    # ---- pollers ---------------------------------------------------------

    def pollers_start(self):
        """one more process per node that polls and yields, as an idle
        agent does (rvtd --idle-yield)"""
        self.pollers = [guest.on_bg(n, ["timeout", "900", "python3", "-c",
                                        "import os\nwhile True: os.sched_yield()"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        for n in (1, 2)]
        self.s.bg += self.pollers

    def pollers_stop(self):
        """the pollers ended ([.]: the pattern must not match these
        commands' own)"""
        for n in (1, 2):
            guest.on(n, ["pkill", "-f", "os[.]sched_yield"], timeout=60)
        for p in self.pollers:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                guest.stop(p, "KILL")
        self.pollers = []

    # ---- the sections ----------------------------------------------------

    def agents_start(self):
        """the agents, tracing their first events when this rvtd can (an
        rvtd from before traces existed runs without, for a "before"
        table): the first rvt run (am_lat) below; False if one does not
        answer"""
        helped = subprocess.run([self.s.rvtd, "--help"], capture_output=True, text=True,
                                timeout=60)
        self.trace = "--trace-events" in helped.stdout
        opts = ""
        if self.trace:
            opts = f"--trace-events=6000 --trace-file={self.work}/agent.$RVT_NODE.trace"
        for n in (1, 2):
            self.s.start(n, ["bash", "-c", f"exec timeout 3000 {self.s.rvtd} --device=$RXE_DEV"
                                           f" --linger=0 {opts}"], f"{self.work}/rvtd.{n}.log")
        for n in (1, 2):
            if not self.s.agents.wait(n):
                self.g.fail(f"rvtd on node {n} does not answer")
                return False
        return True

    def striped_ops(self):
        """node 1's agent's striped_ops counter, 0 when it does not answer"""
        st = self.s.agents.json(1)
        try:
            return int(st["data_path"]["striped_ops"] or 0)
        except (TypeError, KeyError, ValueError):
            return 0

    def stripe_section(self):
        """striping (lanes.h, "Striping"): one put at a time
        (ucx_perftest's UCT put_bw waits for each zcopy completion), split
        by node 1's agent over its K QPs or not, beside rc_verbs; the
        agent's striped_ops counter says it split them"""
        self.g.section("striping: UCT put_bw zcopy, rvt split over K QPs or not, rc_verbs")
        for size, iters in ((65536, 100), (262144, 40), (1048576, 16), (4194304, 6)):
            n0 = self.striped_ops()
            self.uct("put_bw", "zcopy", size, iters, "rvt", ["UCX_RVT_STRIPE_MIN=256k"],
                     key_tl="rvt_stripe")
            n1 = self.striped_ops()
            print(f"  node 1's agent split {n1 - n0} puts", flush=True)
            self.uct("put_bw", "zcopy", size, iters, "rvt", ["UCX_RVT_STRIPE_MIN=inf"],
                     key_tl="rvt_nostripe")
            self.uct("put_bw", "zcopy", size, iters, "rc_verbs", key_tl="rc_verbs_stripe")
        fmt = "%-10s %-12s %-12s %-12s %-9s %-9s %s"
        print(fmt % ("size", "rvt split", "rvt whole", "rc_verbs", "split/whole", "split/rc",
                     "whole/rc"))
        for s in (65536, 262144, 1048576, 4194304):
            a = self.f(f"put_bw.zcopy.{s}.rvt_stripe")
            b = self.f(f"put_bw.zcopy.{s}.rvt_nostripe")
            c = self.f(f"put_bw.zcopy.{s}.rc_verbs_stripe")
            print(fmt % (s, a, b, c, ratio(a, b), ratio(a, c), ratio(b, c)))
        print("(MB/s, one boot; split: UCX_RVT_STRIPE_MIN=256k; whole:")
        print(" UCX_RVT_STRIPE_MIN=inf, the default; target: split/whole >= 1.3 from 1 MiB)",
              flush=True)

    def sweep_section(self):
        """the mid-size messages, the recommended setting's weak range
        (docs/performance.md, "Mid-size messages"): UCP tag_bw and tag_lat
        from 512 B to 256 KiB, one pair, rvt alone, the recommended
        ud_verbs,rvt and rc_verbs, and each over rc_verbs (bandwidth: this
        / rc_verbs, >= 0.9 is the target for ud_verbs,rvt from 1 to 128
        KiB; latency: this / rc_verbs, <= 1.3)"""
        self.g.section("mid-size messages: UCP tag_bw and tag_lat, 512 B to 256 KiB, one pair")
        sizes = (512, 1024, 4096, 16384, 65536, 131072, 262144)
        settings = ("rvt", "ud_verbs,rvt,self", "rc_verbs")
        # RVT_SWEEP_ENV (KEY=VALUE words): the recommended setting once
        # more with them, as a fourth column, to try a UCP setting in the
        # same boot
        sweep_env = os.environ.get("RVT_SWEEP_ENV", "")
        extra = ""
        if sweep_env:
            extra = "ud_verbs,rvt,self+" + sweep_env.replace(" ", "+")
            print(f"fourth column: ud_verbs,rvt,self with {sweep_env}", flush=True)
        for size in sizes:
            for tl in settings:
                self.ucp("tag_bw", size, 200, tl)
                self.ucp("tag_lat", size, 200, tl)
            if extra:
                self.ucp("tag_bw", size, 200, f"ud_verbs,rvt,self {sweep_env}", key_tl=extra)
                self.ucp("tag_lat", size, 200, f"ud_verbs,rvt,self {sweep_env}", key_tl=extra)
        # the format grows a column with the fourth setting
        fmt = "%-8s %-11s %-11s %-11s %-9s %-9s | %-11s %-11s %-11s %-9s %s"
        if extra:
            fmt += " | %s"
        head = ["size", "bw rvt", "ud,rvt", "rc_verbs", "rvt/rc", "ud,rvt/rc", "lat rvt",
                "ud,rvt", "rc_verbs", "rvt/rc", "ud,rvt/rc"]
        if extra:
            head.append("4th bw, lat over rc_verbs")
        print(fmt % tuple(head))
        f = self.f
        for size in sizes:
            b, l_ = f"tag_bw.ucp.{size}", f"tag_lat.ucp.{size}"
            cols = [size, f(f"{b}.rvt"), f(f"{b}.ud_verbs,rvt,self"), f(f"{b}.rc_verbs"),
                    ratio(f(f"{b}.rvt"), f(f"{b}.rc_verbs")),
                    ratio(f(f"{b}.ud_verbs,rvt,self"), f(f"{b}.rc_verbs")),
                    f(f"{l_}.rvt"), f(f"{l_}.ud_verbs,rvt,self"), f(f"{l_}.rc_verbs"),
                    ratio(f(f"{l_}.rvt"), f(f"{l_}.rc_verbs")),
                    ratio(f(f"{l_}.ud_verbs,rvt,self"), f(f"{l_}.rc_verbs"))]
            if extra:
                cols.append(f"{f(f'{b}.{extra}')} {ratio(f(f'{b}.{extra}'), f(f'{b}.rc_verbs'))},"
                            f" {f(f'{l_}.{extra}')} {ratio(f(f'{l_}.{extra}'), f(f'{l_}.rc_verbs'))}")
            print(fmt % tuple(cols))
        print("(bandwidth MB/s, latency us; one boot, idle nodes; targets for")
        print(" ud_verbs,rvt from 1 to 128 KiB: bandwidth >= 0.9, latency <= 1.3 of rc_verbs')",
              flush=True)

    def latency_section(self):
        """latency, 8 B; the first rvt run is traced (the trace section
        reports it)"""
        self.g.section("latency, 8 B")
        self.uct("am_lat", "short", 8, 1000, "rvt", [f"RVT_TRACE={self.work}/client.trace"],
                 [f"RVT_TRACE={self.work}/server.trace"])
        self.uct("am_lat", "short", 8, 1000, "rc_verbs")
        self.reruns.append(("uct", ("am_lat", "short", 8, 1000)))
        self.rows.append(("am_lat.short.8", "<=3"))
        self.both("uct", "put_lat", "short", 8, 1000, target="<=3")
        self.both("ucp", "tag_lat", 8, 1000, target="<=3")

    def bandwidth_section(self):
        """bandwidth; brief (CI): 1 MiB alone for the puts and UCP's tag_bw"""
        self.g.section("bandwidth")
        put_sizes = ((65536, 200), (1048576, 20), (4194304, 8))
        tag_sizes = ((1048576, 10), (4194304, 4), (16777216, 2))
        if self.only == "brief":
            put_sizes = ((1048576, 20),)
            tag_sizes = ((1048576, 10),)
        for size, iters in put_sizes:
            self.both("uct", "put_bw", "zcopy", size, iters, target=">=0.9")
        self.both("uct", "am_bw", "bcopy", 8192, 500, target=">=0.9")
        # am zcopy: rvt's largest active message (8 KiB less its header)
        self.both("uct", "am_bw", "zcopy", 8000, 500, target=">=0.9")
        for size, iters in tag_sizes:
            self.both("ucp", "tag_bw", size, iters, target=">=0.95")

    def pollers_section(self):
        """An rvt message passes 4 spinning processes (2 ucx_perftest, 2
        agents), rc_verbs' only 2 (with 4 pairs: 10 and 8). Every rc_verbs
        run above again, with a process per node that polls and yields
        between messages as an agent does: what rc_verbs gets from the
        emulator in rvt's place."""
        self.g.section("rc_verbs again, with as many busy pollers as rvt has")
        self.pollers_start()
        for kind, args in self.reruns:
            getattr(self, kind)(*args, "rc_verbs", key_tl="rc_verbs_pollers")
        self.pollers_stop()

    def pin_agents(self, cpus):
        """every rvtd's threads onto CPUS (taskset -apc)"""
        found = subprocess.run(["pgrep", "-x", "rvtd"], capture_output=True, text=True)
        for p in found.stdout.split():
            subprocess.run(["taskset", "-apc", cpus, p], stdout=subprocess.DEVNULL, timeout=60)

    def core_section(self):
        """The deployment rule docs/performance.md gives: rvtd needs a core
        it does not wait for. Both agents on vCPU 1, every ucx_perftest on
        vCPU 0: rvt's test processes get one vCPU where rc_verbs' (above)
        had both; the rows where the emulator's scheduling is suspected
        (latency, one message at a time, 4 pairs at once), against
        rc_verbs' figures above."""
        self.g.section("rvt with a vCPU for its agents, every ucx_perftest on the other")
        core_runs = (("uct", "am_lat", "short", 8, 1000), ("uct", "put_bw", "zcopy", 65536, 200),
                     ("uct", "am_bw", "bcopy", 8192, 500), ("uct", "am_bw", "zcopy", 8000, 500),
                     ("ucp", "tag_bw", 1048576, 10),
                     ("many", "am_bw", "short", 8, 2000), ("many", "put_bw", "zcopy", 262144, 40))
        self.pin_agents("1")
        self.perf_cpus = ["taskset", "-c", "0"]
        for kind, *args in core_runs:
            getattr(self, kind)(*args, "rvt", key_tl="rvt_core")
        self.perf_cpus = []
        self.pin_agents("0-1")

    def table_section(self):
        """rvt / rc_verbs, same boot: the ratio table, and where the CPU
        went in the 4-pair runs"""
        self.g.section("rvt / rc_verbs, same boot")
        fmt = "%-22s %-12s %-12s %-6s %-6s %-8s %-12s %-8s %-12s %s"
        print(fmt % ("measure", "rvt", "rc_verbs", "ratio", "target", "verdict", "rc_verbs+p",
                     "rvt/that", "rvt+core", "rvt+core/rc_verbs"))
        for key, target in self.rows:
            a, b = self.f(f"{key}.rvt"), self.f(f"{key}.rc_verbs")
            c = self.f(f"{key}.rc_verbs_pollers")
            d = self.fig.get(f"{key}.rvt_core") or "-"
            q = ratio(a, b)
            verdict = "-"
            if q != "-":
                lim = guest.awk_num(target[2:])
                ok = float(q) <= lim if target[:2] == "<=" else float(q) >= lim
                verdict = "met" if ok else "not-met"
            print(fmt % (key, a, b, q, target, verdict, c, ratio(a, c), d, ratio(d, b)))
        print("(latency: median half round trip, ratio > 1 is slower; bandwidth: MB/s,")
        print(" ratio < 1 is slower. TCG: every node shares the guest's 2 vCPUs.")
        print(" rc_verbs+p: rc_verbs with one more polling process per node, as many")
        print(" spinning processes as rvt has; rvt/that: the ratio without the")
        print(" emulator's scheduling of busy pollers; rvt+core: rvt with its agents")
        print(" on one vCPU and every ucx_perftest on the other)")
        print("4 pairs, where the CPU went (agent 1 is the senders' node's: rxe does")
        print("a send's packet work inside the ibv_post_send of the process that posts;")
        print("rc_verbs has no agent, its agents' figures are the idle ones of rvt's):")
        for line in sorted(f"  {k}: {v}" for k, v in self.cpu.items()):
            print(line)
        sys.stdout.flush()

    def tls_section(self):
        """what users should set: rvt alone; active messages on
        per-process UD with the rendezvous on the shared QPs (as rv and
        PSM3 split them); rc_verbs. The agents' counters say whether rvt
        carried the rendezvous of the ud_verbs,rvt runs."""
        self.g.section("what users should set: UCX_TLS for MPI and OpenSHMEM"
                       " (UCP, node1 -> node2)")
        for tl in ("rvt", "ud_verbs,rvt,self", "rc_verbs"):
            self.ucp("tag_lat", 8, 1000, tl)
            for size, iters in ((65536, 100), (1048576, 10)):
                if tl == "ud_verbs,rvt,self":
                    before = {n: self.s.agents.counters(n) for n in (1, 2)}
                self.ucp("tag_bw", size, iters, tl)
                if tl == "ud_verbs,rvt,self":
                    moved = 0
                    for n in (1, 2):
                        d = guest.counters_delta(before[n], self.s.agents.counters(n))
                        moved += d["sent"] if d else 0
                    self.g.check(f"ud_verbs,rvt tag_bw {size} B: the agents posted {moved} bytes"
                                 " (the rendezvous went over rvt)", moved >= size * iters)
        fmt = "%-16s %-14s %-14s %s"
        print(fmt % ("measure", "rvt", "ud_verbs,rvt", "rc_verbs"))
        f = self.f
        for key in ("tag_lat.ucp.8", "tag_bw.ucp.65536", "tag_bw.ucp.1048576"):
            print(fmt % (key, f(f"{key}.rvt"), f(f"{key}.ud_verbs,rvt,self"),
                         f(f"{key}.rc_verbs")))
        lat, bw = "tag_lat.ucp.8", "tag_bw.ucp.1048576"
        print(f"ratios to rc_verbs: rvt {ratio(f(f'{lat}.rvt'), f(f'{lat}.rc_verbs'))},"
              f" ud_verbs,rvt {ratio(f(f'{lat}.ud_verbs,rvt,self'), f(f'{lat}.rc_verbs'))}"
              f" (tag_lat); rvt {ratio(f(f'{bw}.rvt'), f(f'{bw}.rc_verbs'))},"
              f" ud_verbs,rvt {ratio(f(f'{bw}.ud_verbs,rvt,self'), f(f'{bw}.rc_verbs'))}"
              " (tag_bw 1 MiB)", flush=True)

    def ucp_pair_bg(self, size, iters, tl, scheme, k):
        """pair K of rndv_many: its bandwidth's number, or None"""
        out = f"{self.work}/rndv.{size}.{tl.replace(',', '_')}.{scheme}.{k}"
        env = [f"LD_PRELOAD={self.s.module}", *ucx_tls_env(tl), f"UCX_RNDV_SCHEME={scheme}"]
        # a port of its own: the pairs run at once
        ok, _ = self.pair(out, env, env, ["-t", "tag_bw", "-s", str(size), "-n", str(iters),
                                          "-w", str(iters // 4 + 1)], port=30000 + 10 * k + 1)
        f = guest.figure(out, "bw") if ok else None
        return f.split()[0] if f else None

    def rndv_many(self, size, iters, tl, scheme):
        """4 pairs at once, the sum; node 2's (the receivers') agent's
        counters meanwhile: AMs and writes with immediate delivered to its
        processes, bytes its agent posted (the READs of get_zcopy)"""
        before = self.s.agents.counters(2)
        figs = self.at_once(self.ucp_pair_bg, [(size, iters, tl, scheme, k) for k in (1, 2, 3, 4)])
        total = f"{sum(guest.awk_num(x) for x in figs if x is not None):.2f} MB/s"
        d = guest.counters_delta(before, self.s.agents.counters(2)) or {}
        ams, writes, sent = (d.get(k, "?") for k in ("am", "writes", "sent"))
        if None not in figs:
            self.keep("rndv", scheme, size, tl, total)
            figure_line(f"4 pairs ucp tag_bw {size} B, {tl}, {scheme}: {total} together"
                        f" (node 2: {ams} AMs, {writes} writes with immediate delivered,"
                        f" {sent} bytes posted)")
        else:
            self.keep("rndv", scheme, size, tl, "error")
            self.g.fail(f"4 pairs ucp tag_bw {size} B, {tl}, {scheme}: a pair failed")

    def rndv_section(self):
        """UCP 1.13's rendezvous for host memory: the receiver READs the
        data (get_zcopy, its default) or, with UCX_RNDV_SCHEME=put_zcopy,
        the sender WRITEs it with an immediate. On the shared QPs a READ
        also waits for the responder's outstanding-read limit per QP,
        which every process of the node shares (docs/performance.md,
        "Rendezvous: READ or WRITE WITH IMMEDIATE"). 4 pairs node1 ->
        node2 at once, UCP tag_bw, their sum; node 2's agent's counters
        show what moved the data: writes with immediate delivered (put),
        bytes it posted (the READs of get), or active messages (UCP chose
        eager sends, no rendezvous)."""
        self.g.section("rendezvous by RDMA READ (get) or WRITE WITH IMMEDIATE (put),"
                       " 4 pairs at once")
        for tl in ("rvt", "ud_verbs,rvt,self"):
            for size, iters in ((1048576, 8), (4194304, 4)):
                for scheme in ("get_zcopy", "put_zcopy"):
                    self.rndv_many(size, iters, tl, scheme)
                print(f"  put / get, {tl}, {size} B: "
                      f"{ratio(self.f(f'rndv.put_zcopy.{size}.{tl}'), self.f(f'rndv.get_zcopy.{size}.{tl}'))}",
                      flush=True)

    def trace_section(self):
        """where the time goes: the first rvt am_lat, per hop; the agents
        write their traces when they stop"""
        self.g.section("where the time goes: the first rvt am_lat, per hop")
        for n in (1, 2):
            guest.on(n, ["bash", "-c", "pkill -TERM -x rvtd"], stderr=subprocess.DEVNULL,
                     timeout=60)
        a1, a2 = f"{self.work}/agent.1.trace", f"{self.work}/agent.2.trace"

        def nonempty(p):
            return os.path.isfile(p) and os.path.getsize(p) > 0
        for _ in range(100):
            if nonempty(a1) and nonempty(a2):
                break
            time.sleep(0.1)
        clients = sorted(glob.glob(f"{self.work}/client.trace.*"))
        servers = sorted(glob.glob(f"{self.work}/server.trace.*"))
        if nonempty(a1) and nonempty(a2) and clients and servers:
            # the client ran on node 1, the server on node 2
            args = [f"node1={a1}", f"node2={a2}", *(f"node1={c}" for c in clients),
                    *(f"node2={s}" for s in servers)]
            sys.stdout.flush()
            report = subprocess.run(["src/uct/ib/rvt/tools/rvt-trace-report", *args],
                                    timeout=600)
            if report.returncode == 0:
                figure_line("per-hop trace of rvt am_lat 8 B (above)")
            else:
                self.g.fail("rvt-trace-report failed")
        else:
            names = sorted(n for n in os.listdir(self.work) if "trace" in n)
            self.g.fail(f"no traces to report: {' '.join(names) or '*trace*'}")

    def bench_section(self):
        """The hops of the trace above pass 4 busy processes (2 agents, 2
        ucx_perftest) on the guest's 2 vCPUs. The host benchmark runs the
        same software path (attach, rings, doorbells, engine; the loopback
        nic at the device end) with the agent and its client on a vCPU
        each and nothing else running: what a hop costs this emulator when
        no process waits for a CPU."""
        self.g.section("the same hops with a vCPU each: rvt_host_bench in this guest")
        bench = f"{self.build}/test/bench/rvt_host_bench"
        out = f"{self.work}/bench.out"
        if not (os.path.isfile(bench) and os.access(bench, os.X_OK)):
            self.g.fail(f"{bench} not built (make check builds it)")
            return
        rc = guest.run_logged(1, ["timeout", "300", bench, "--messages=2000", "--seconds=1",
                                  "--attached=none"], out, 330)
        with open(out, errors="replace") as f:
            lines = f.read().splitlines()
        if rc == 0:
            for line in lines:
                if not line.startswith("agent: "):
                    print(line)
            figure_line("rvt_host_bench in the guest (above)")
        else:
            for line in lines[-5:]:
                print(line)
            self.g.fail("rvt_host_bench in the guest failed")

    # ---- the agents for the MPI sections ---------------------------------

    def agents_down(self):
        """every node's agent stopped; False if one is left after 10 s"""
        for n in (1, 2):
            guest.on(n, ["bash", "-c", "pkill -TERM -x rvtd"], stderr=subprocess.DEVNULL,
                     timeout=60)
        for _ in range(100):
            if subprocess.run(["pgrep", "-x", "rvtd"], stdout=subprocess.DEVNULL).returncode:
                return True
            time.sleep(0.1)
        return False

    def agents_restart(self, opts, log, rvtd=None, pin=""):
        """both nodes' agents (re)started with the options OPTS (a string),
        RVTD (default the build's), PIN words in front, appending to LOG.N;
        True once both answer, asked with the rvt-status of the agent's
        own build (a previous build's agent may speak an older protocol)"""
        rvtd = rvtd or self.s.rvtd
        self.agents_down()
        for n in (1, 2):
            self.s.start(n, ["bash", "-c", f"exec {pin + ' ' if pin else ''}timeout 3000 {rvtd}"
                                           f" --device=$RXE_DEV --linger=0 {opts}"],
                         f"{log}.{n}.log", append=True)
        agents = guest.Agents(f"{os.path.dirname(rvtd)}/rvt-status")
        return all(agents.wait(n) for n in (1, 2))

    def mpirun(self, opts, np, prog, args, out, timeout, wrap=()):
        """mpirun of PROG (ARGS) with NP ranks, NP/2 on each node, from node
        1 (mpirun's options OPTS; WRAP, words in front of PROG), its output
        into OUT; returns the exit status"""
        return guest.run_logged(1, ["timeout", str(timeout), "mpirun", *opts, "-np", str(np),
                                    "--map-by", f"ppr:{np // 2}:node", *wrap, prog, *args],
                                out, timeout + 60)


class Kernels:
    """The full node, a section of the suite: test/mpi/rvt_mpi_kernels
    (alltoall, transpose, random updates, ring, every value verified) with
    2 ranks on each of 2 nodes, every node on the guest's 2 vCPUs: no vCPU
    is left for the agents, as on a node where every core runs a rank. One
    run per setting, same boot:

      rc_verbs        UCX_TLS=rc_verbs,ud_verbs:aux,sm,self (UD for UCP's
                      wire-up, as UCX's default)
      ud_verbs,rvt    UCX_TLS=ud_verbs,rvt,sm,self, the recommended setting
      rvt             UCX_TLS=rvt,sm,self

    the rvt ones under agents of each scheduling mode (rvtd --priority):

      normal          the default: the fair class, --spin-us 2000
      fifo            --priority=fifo:10 --spin-us=20: a woken agent
                      preempts the rank on its core, and sleeps soon after
                      its work

    and prints each kernel's time and bandwidth, and every setting's
    bandwidth over rc_verbs' (the project's target on a full node: >= 0.9
    for the recommended setting, 0.7 for rvt alone; docs/performance.md,
    "The full node: the agent's scheduling"; printed, not judged: one boot
    of an emulator). Every run that verified everything is a PASS."""

    # the kernels' sizes: a few seconds each under TCG
    ARGS = os.environ.get("RVT_KERNELS_ARGS") or ("--reps=4 --a2a-size=64K --transpose-n=512"
                                                  " --table-words=64K --updates=4096"
                                                  " --ring-max=1M")

    def __init__(self, p):
        self.p = p
        self.kfig, self.ktime, self.ksched = {}, {}, {}

    def run(self, name, tls):
        """one mpirun of the kernels; figures in kfig[NAME.KERNEL] (MB/s)
        and ktime[NAME.KERNEL] (s), and how the agents were scheduled
        meanwhile in ksched[NAME] (sched_report)"""
        p, work = self.p, self.p.work
        out = f"{work}/kernels.{name}.out"
        t0 = time.monotonic()
        opts = guest.mpi_options(f"{work}/kernels.hosts", tls=tls, pml_tls="any") + \
            ["-x", f"LD_PRELOAD={p.s.module}", "-x", "UCX_UD_VERBS_ETH_DGID_CHECK=n"]
        sched0 = guest.agent_sched()
        rc = p.mpirun(opts, 4, self.prog, self.ARGS.split(), out, 600)
        self.ksched[name] = guest.sched_report(sched0, guest.agent_sched(), secs_since(t0))
        with open(out, errors="replace") as f:
            text = f.read()
        if rc == 0 and re.search(r"^OK: rvt_mpi_kernels", text, re.M):
            p.g.pass_(f"kernels, {name} (UCX_TLS={tls}): every value verified"
                      f" ({secs_since(t0)} s)")
        else:
            print(guest.indent(name, text), end="")
            p.g.fail(f"kernels, {name} (UCX_TLS={tls}): mpirun exit {rc} after"
                     f" {secs_since(t0)} s (output above)")
            return
        totals = []
        for line in text.splitlines():
            w = line.split()
            if line.startswith("kernel "):
                w += [""] * 6
                self.kfig[f"{name}.{w[1]}"] = w[5]
                self.ktime[f"{name}.{w[1]}"] = w[3]
            if w and w[0] == "total":
                totals.append(w[2] if len(w) > 2 else "")
        self.ktime[f"{name}.total"] = "\n".join(totals)

    def section(self):
        """every setting's run, then the tables"""
        p = self.p
        p.g.section("the full node: MPI kernels, 2 ranks on each node's 2 vCPUs,"
                    " no vCPU for the agents")
        self.prog = f"{p.build}/test/mpi/rvt_mpi_kernels"
        if not os.access(self.prog, os.X_OK):
            p.g.fail(f"{self.prog} not built (make check builds it where Open MPI is installed)")
            return
        os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        settings = []
        for mode, opts in (("normal", ""), ("fifo", "--priority=fifo:10 --spin-us=20")):
            if not p.agents_restart(opts, f"{p.work}/rvtd.kernels"):
                p.g.fail(f"kernels: the agents ({mode}) do not answer")
                continue
            said = set()
            for log in glob.glob(f"{p.work}/rvtd.kernels.*.log"):
                with open(log, errors="replace") as f:
                    said |= {line.rstrip("\n") for line in f if "--priority" in line}
            print(guest.indent(f"agents ({mode})", "\n".join(sorted(said))), end="")
            if mode == "normal":
                self.run("rc_verbs", "rc_verbs,ud_verbs:aux,sm,self")
                settings.append("rc_verbs")
            self.run(f"ud_verbs,rvt.{mode}", "ud_verbs,rvt,sm,self")
            self.run(f"rvt.{mode}", "rvt,sm,self")
            settings += [f"ud_verbs,rvt.{mode}", f"rvt.{mode}"]
        kernels = ("alltoall", "transpose", "random", "ring", "total")
        print()
        print("%-10s" % "kernel" + "".join(" %-19s" % n for n in settings))
        for k in kernels:
            cells = [f"{self.ktime.get(f'{n}.{k}') or '-'} s" if k == "total"
                     else f"{self.kfig.get(f'{n}.{k}') or '-'} MB/s" for n in settings]
            print("%-10s" % k + "".join(" %-19s" % c for c in cells))
        print("bandwidth / rc_verbs' (time: rc_verbs' / this), target >= 0.9 for")
        print("ud_verbs,rvt and 0.7 for rvt:")
        for k in kernels:
            cells = [ratio(self.ktime.get(f"rc_verbs.{k}", ""), self.ktime.get(f"{n}.{k}", ""))
                     if k == "total" else
                     ratio(self.kfig.get(f"{n}.{k}", ""), self.kfig.get(f"rc_verbs.{k}", ""))
                     for n in settings[1:]]
            print("%-10s %-19s" % (k, "1.00") + "".join(" %-19s" % c for c in cells))
        print(f"(one boot, TCG: every node on the guest's 2 vCPUs; {self.ARGS})")
        print()
        print("where the agents' time went, each run (both nodes' agents):")
        for n in settings:
            print("%-19s %s" % (n, self.ksched.get(n) or "-"))
        sys.stdout.flush()


class LargeJob:
    """A large job as UCP sees it, a section of the suite: where UCP picks
    rvt by itself. With UCX_TLS unset and more estimated endpoints than
    rc_verbs' 256 (UCX_NUM_EPS, what a 1,024- or 4,096-rank job tells UCP),
    UCP runs active messages and eager sends on each process's UD QP and,
    when the module is loaded, the rendezvous on rvt. Its peer there is the
    same job without rvt (UD alone), not rc_verbs. Settings, each an mpirun
    of Open MPI's pml ucx between the 2 nodes, UCX_TLS unset:

      ud E         UCX_NUM_EPS=E, the module not loaded, no agent running
      rvt E        UCX_NUM_EPS=E, the module preloaded, the node's agents
                   running (rvtd's defaults)
      rc_verbs     UCX_NUM_EPS unset (the job's own 2-8 ranks): what UCP
                   chooses for a small job, for scale
      (full run also, each at E=1024: ud and rvt with UCX_RNDV_THRESH=8K:
      does an earlier rendezvous help here, as it helps the mid-size sweep
      from 16 KiB? docs/performance.md, "Mid-size messages")
      ud-1.22 E, rvt-1.22 E
                   the same on UCX 1.22's libraries (RVT_LARGEJOB_UCX122:
                   its prefix; RVT_LARGEJOB_BUILD122: rvt built against it,
                   whose module and rvtd the rvt setting runs), Open MPI
                   taking them through LD_LIBRARY_PATH as
                   ucx-release-guest.sh does; compared with ud-1.22 at the
                   same E

    and per setting test/mpi/rvt_mpi_sweep: latency and bandwidth from 8 B
    to 4 MiB between one rank on each node (2 ranks), an alltoall from 1
    KiB to 1 MiB with 4 ranks on each node (8 ranks), and test/mpi/
    rvt_mpi_kernels (2 ranks on each node). In ROUNDS interleaved rounds
    (each round runs the settings in another order), every value
    verified; largejob_table.py prints the medians, the spread and each
    setting's ratio to UD alone at its E.

    brief (CI): ud and rvt at E=1024 only, 3 rounds, 8 B, 8 KiB, 32 KiB
    and 1 MiB, the alltoall at 256 KiB, no kernels; full: every setting
    above, RVT_LARGEJOB_ROUNDS (default 3) rounds.

    RVT_LARGEJOB_SETTINGS (NAME E;NAME E...), _SIZES, _A2A_SIZES (none:
    no alltoall), _ROUNDS, _BEFORE (a previous build, for rvt-before),
    _PIN (n: no pinning), _UCX122, _BUILD122: for an investigation."""

    def __init__(self, p):
        self.p = p
        self.raw = f"{p.work}/largejob.raw"

    def run(self, rnd, setting):
        """every program of one setting; each figure a line "ROUND SETTING
        TEST SIZE VALUE" in largejob.raw"""
        p, env = self.p, os.environ
        name = setting.split(" ", 1)[0]
        eps = setting.split(" ", 1)[1] if " " in setting else setting
        rndv, extra, agent_opts = "", [], ""
        if name == "rc_verbs":
            eps = ""
        elif name == "ud-rndv8k":
            name, rndv = "ud", "8192"
        elif name == "rvt-rndv8k":
            name, rndv = "rvt", "8192"
        # diagnostics (RVT_LARGEJOB_SETTINGS): the module never yields, the
        # agents never spin
        elif name == "rvt-noyield":
            name, extra = "rvt", ["-x", "UCX_RVT_IDLE_YIELD=n"]
        elif name == "rvt-nospin":
            name, agent_opts = "rvt", "--spin-us=0"
        elif name in ("ud-1.22", "rvt-1.22"):
            if not env.get("RVT_LARGEJOB_UCX122"):
                sys.exit(f"{name} needs RVT_LARGEJOB_UCX122")
            extra = ["-x", f"LD_LIBRARY_PATH={env['RVT_LARGEJOB_UCX122']}/lib"]
        agent, load = p.s.rvtd, p.s.module
        # the previous design, in the same boot: RVT_LARGEJOB_BEFORE is
        # another build directory (its module and rvtd)
        for special, var in (("rvt-before", "RVT_LARGEJOB_BEFORE"),
                             ("rvt-1.22", "RVT_LARGEJOB_BUILD122")):
            if name == special:
                if not env.get(var):
                    sys.exit(f"{special} needs {var}")
                name = "rvt"
                agent = f"{env[var]}/src/uct/ib/rvt/tools/rvtd"
                load = f"{env[var]}/src/uct/ib/rvt/uct/.libs/libuct_rvt.so"
        if name == "rvt":
            if not p.agents_restart(agent_opts, f"{p.work}/rvtd.largejob", agent, self.pin):
                p.g.fail("large job: the agents do not answer")
                return
        else:
            load = ""
            if not p.agents_down():
                p.g.fail("large job: an agent did not stop")
                return
        label = setting.replace(" ", "@")
        for prog in ("sweep-pair", "sweep-a2a", "kernels"):
            if prog == "sweep-pair":
                np, args = 2, ["--only=lat,bw", f"--sizes={self.sizes}",
                               f"--iters={self.iters}"]
            elif prog == "sweep-a2a":
                if self.a2a_sizes == "none":
                    continue
                np, args = 8, ["--only=a2a", f"--a2a-sizes={self.a2a_sizes}", "--reps=3"]
            else:
                if not self.kernels:
                    continue
                np, args = 4, ["--reps=2", "--a2a-size=64K", "--transpose-n=512",
                               "--table-words=64K", "--updates=4096", "--ring-max=1M"]
            opts = guest.mpi_options(f"{p.work}/largejob.hosts", slots=np // 2, tls=None,
                                     pml_tls="any")
            if load:
                opts += ["-x", f"LD_PRELOAD={load}"]
            if eps:
                opts += ["-x", f"UCX_NUM_EPS={eps}"]
            if rndv:
                opts += ["-x", f"UCX_RNDV_THRESH={rndv}"]
            opts += ["-x", "UCX_UD_VERBS_ETH_DGID_CHECK=n", *extra]
            out = f"{p.work}/largejob.{rnd}.{label}.{prog}.out"
            binary = f"{p.build}/test/mpi/" + ("rvt_mpi_kernels" if prog == "kernels"
                                               else "rvt_mpi_sweep")
            wrap = []
            if self.pin:  # expanded on the rank's node
                wrap = ["bash", "-c",
                        'exec taskset -c $(((RVT_NODE - 1) % $(nproc))) "$0" "$@"']
            t0 = time.monotonic()
            sched0 = guest.agent_sched() if load else None
            rc = p.mpirun(opts, np, binary, args, out, 900, wrap)
            # what the agents cost the ranks' shared vCPUs meanwhile
            sched = (f"; {guest.sched_report(sched0, guest.agent_sched(), secs_since(t0))}"
                     if load else "")
            with open(out, errors="replace") as f:
                text = f.read()
            verified = re.search(r"^OK: rvt_mpi_", text, re.M) is not None
            # Open MPI's mpirun has once (UD alone, rvt not loaded) died of
            # SIGPIPE (141) at its teardown after every rank had verified
            # and ended: the job's figures stand, and the line says so
            after = ""
            if rc == 141 and verified:
                after, rc = "; then mpirun died of SIGPIPE at its teardown, exit 141", 0
            if rc == 0 and verified:
                p.g.pass_(f"large job, round {rnd}, {setting}: {prog}, {np} ranks, verified"
                          f" ({secs_since(t0)} s{after}{sched})")
            else:
                lines = guest.indent(f"{label} {prog}", text).splitlines()
                for line in lines[-20:]:
                    print(line)
                p.g.fail(f"large job, round {rnd}, {setting}: {prog}: mpirun exit {rc}"
                         f" after {secs_since(t0)} s")
                continue
            with open(self.raw, "a") as f:
                f.write(self.raw_lines(rnd, label, text))

    @staticmethod
    def raw_lines(rnd, label, text):
        """the figures of a program's output TEXT as largejob.raw's lines
        "ROUND SETTING TEST SIZE VALUE" (largejob_table.py reads them)"""
        lines = []
        for line in text.splitlines():
            w = line.split()
            g = (lambda i: w[i - 1] if len(w) >= i else "")
            for test in ("lat", "bw", "a2a"):
                if line.startswith(f"{test} "):
                    lines.append(f"{rnd} {label} {test} {g(2)} {g(4)}\n")
            if line.startswith("kernel "):
                lines.append(f"{rnd} {label} kernel_{g(2)} 0 {g(4)}\n")
            if line.startswith("total time_s"):
                lines.append(f"{rnd} {label} kernels_total 0 {g(3)}\n")
        return "".join(lines)

    def section(self, mode="full"):
        """ROUNDS interleaved rounds of every setting, then the table"""
        p, env = self.p, os.environ
        p.g.section(f"a large job as UCP sees it: UCX_TLS unset, UD alone beside UD + rvt ({mode})")
        if not os.access(f"{p.build}/test/mpi/rvt_mpi_sweep", os.X_OK):
            p.g.fail(f"{p.build}/test/mpi/rvt_mpi_sweep not built (make check builds it where"
                     " Open MPI is installed)")
            return
        os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        rounds = env.get("RVT_LARGEJOB_ROUNDS") or "3"
        if mode == "brief":
            self.sizes, self.a2a_sizes, self.iters, self.kernels = "8,8K,32K,1M", "256K", 30, False
            settings = ["ud 1024", "rvt 1024"]
        else:
            self.sizes = "8,64,512,1K,4K,8K,16K,32K,64K,256K,1M,4M"
            self.a2a_sizes, self.iters, self.kernels = "1K,32K,256K,1M", 50, True
            settings = ["ud 1024", "rvt 1024", "ud 4096", "rvt 4096", "rc_verbs -",
                        "ud-rndv8k 1024", "rvt-rndv8k 1024"]
        # for an investigation: other settings (NAME E;NAME E...), sizes,
        # or no alltoall (RVT_LARGEJOB_A2A_SIZES=none)
        if env.get("RVT_LARGEJOB_SETTINGS"):
            settings = env["RVT_LARGEJOB_SETTINGS"].split(";")
        self.sizes = env.get("RVT_LARGEJOB_SIZES") or self.sizes
        self.a2a_sizes = env.get("RVT_LARGEJOB_A2A_SIZES") or self.a2a_sizes
        # each node's processes (ranks and agent) on a vCPU of its own
        # (RVT_LARGEJOB_PIN=n: wherever the guest's scheduler puts them)
        self.pin = "taskset -c $(((RVT_NODE - 1) % $(nproc)))"
        if env.get("RVT_LARGEJOB_PIN", "y") == "n":
            self.pin = ""
        open(self.raw, "w").close()
        n = len(settings)
        for rnd in range(1, int(rounds) + 1):
            # each round starts one further along the list, so that no
            # setting always runs first or right after the same one
            for i in range(n):
                self.run(rnd, settings[(i + rnd - 1) % n])
        if not p.agents_restart("", f"{p.work}/rvtd.largejob", pin=self.pin):
            p.g.fail("large job: the agents do not come back")
        sys.stdout.flush()
        table = subprocess.run([sys.executable, f"{HERE}/largejob_table.py", self.raw],
                               capture_output=True, text=True, timeout=600)
        sys.stdout.write(table.stdout)
        sys.stderr.write(table.stderr)
        with open(f"{p.results}/largejob.txt", "w") as f:
            f.write(table.stdout)
        shutil.copy(self.raw, f"{p.results}/largejob.raw")
        print(f"(one boot, TCG: both nodes on the guest's 2 vCPUs; medians of {rounds}"
              " interleaved rounds,")
        print(" [min-max] the rounds' spread; ratio: the setting's median over UD alone's"
              " at the same")
        print(" endpoint count (time: lower is better, bandwidth: higher)", flush=True)


def main(p):
    """the sections in order; finish() exits"""
    g, only = p.g, p.only
    if not p.agents_start():
        g.finish()
    p.start_results()
    if only == "stripe":
        p.stripe_section()
        g.finish()
    if only == "sweep":
        p.sweep_section()
        g.finish()
    if only == "kernels":
        Kernels(p).section()
        g.finish()
    if only == "largejob":
        LargeJob(p).section(os.environ.get("RVT_LARGEJOB_MODE") or "full")
        g.finish()
    brief = only == "brief"
    p.latency_section()
    p.bandwidth_section()
    # brief (CI): striping and the full node have commands of their own
    # (`stripe`, `kernels`); their findings are in docs/performance.md
    if not brief:
        p.stripe_section()
        g.section("4 processes per node, each pair at once")
        # brief (CI): the full run's (docs/performance.md states its figures)
        p.both("many", "am_bw", "short", 8, 2000, target=">=0.9")
        p.both("many", "put_bw", "zcopy", 262144, 40, target=">=0.9")
        # brief (CI): the two investigations whose findings
        # docs/performance.md states (pollers, rendezvous get/put) are
        # left out, and the placement it states too
        p.pollers_section()
        p.core_section()
    p.table_section()
    # brief (CI): the large-job section below compares UD alone with UD +
    # rvt, and select.sh checks that the rendezvous goes over rvt
    if not brief:
        p.tls_section()
        p.sweep_section()
        p.rndv_section()
    if p.trace:
        p.trace_section()
    p.bench_section()
    if not brief:
        Kernels(p).section()
    LargeJob(p).section("brief")
    print(f"guest time: {secs_since(g.t_start)} s", flush=True)
    g.finish()


def on_term(signum, _frame):
    """a signal ends the suite through its cleanup"""
    sys.exit(128 + signum)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: perf_guest.py BUILD_DIR [stripe|kernels|sweep|largejob|brief]")
    sys.stdout.reconfigure(line_buffering=True)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    perf = Perf(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
    try:
        main(perf)
    finally:
        perf.s.cleanup()
