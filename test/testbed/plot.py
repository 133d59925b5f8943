#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Draws a run's figures as SVG pictures, with gnuplot.

Usage: test/testbed/plot.py DIR
       test/testbed/plot.py --tables DIR

With --tables, nothing is drawn: figures.csv is printed as the markdown
tables the docs show (docs/performance.md keeps those of the recorded
run, test/tools/check-plots.sh checks they are what its CSV prints):
rvt beside rc_verbs per measure, and the mid-size sweep.

DIR holds what a run wrote, and the pictures go beside it:
  figures.csv   the perf suite's figures (test/testbed/perf.sh writes
                BUILD/perf-results/figures.csv, one row per ucx_perftest
                run: test,layout,size,setting,value,unit)
                -> sweep-bandwidth.svg, sweep-latency.svg: UCP tag_bw and
                   tag_lat against message size, rvt, ud_verbs,rvt and
                   rc_verbs, each over rc_verbs below
                -> four-pair.svg: 4 pairs at once, the pairs' sum over
                   rc_verbs'
  attached.csv  rvt_host_bench --csv=DIR/attached.csv (section 3: N
                clients on one agent)
                -> host-hops.svg: the hops' medians against N
A file that is absent draws nothing; no file at all is an error. The
figures are drawn as measured: nothing is smoothed or left out.
"""
import csv
import os
import subprocess
import sys
from collections import defaultdict

SETTINGS = [  # (the setting as the perf suite names it, its label)
    ("rvt", "rvt"),
    ("ud_verbs,rvt,self", "ud_verbs,rvt (recommended)"),
    ("rc_verbs", "rc_verbs"),
]
TERMINAL = "set terminal svg size 760,560 dynamic noenhanced font 'sans,12'"


def die(why):
    print(f"plot.py: {why}", file=sys.stderr)
    sys.exit(1)


def read_figures(path):
    """{(test, layout, setting): {size: [value, ...]}} of the rows with a
    figure (a run that failed, "error", has none), and {(test, layout):
    unit}."""
    series = defaultdict(lambda: defaultdict(list))
    units = {}
    with open(path, newline="") as f:
        rows = csv.DictReader(f)
        want = ["test", "layout", "size", "setting", "value", "unit"]
        if rows.fieldnames != want:
            die(f"{path}: columns {rows.fieldnames}, expected {want}")
        for n, r in enumerate(rows, start=2):
            if r["unit"] == "error":
                continue
            try:
                size, value = int(r["size"]), float(r["value"])
            except ValueError:
                die(f"{path} line {n}: size '{r['size']}' or value "
                    f"'{r['value']}' is not a number")
            series[(r["test"], r["layout"], r["setting"])][size].append(value)
            units[(r["test"], r["layout"])] = r["unit"]
    return series, units


def mean(values):
    return sum(values) / len(values)


def gnuplot(script, out):
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    except FileNotFoundError:
        die("gnuplot is not installed (Debian: gnuplot-nox)")
    except subprocess.CalledProcessError as e:
        die(f"gnuplot failed drawing {out} (exit {e.returncode})")
    print(out)


def block(name, lines):
    return f"${name} << EOD\n" + "\n".join(lines) + "\nEOD\n"


def size_label(size):
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20} MiB"
    if size >= 1024 and size % 1024 == 0:
        return f"{size >> 10} KiB"
    return f"{size} B"


def draw_sweep(series, test, unit, target, out):
    """test against size per setting, and each over rc_verbs below
    (latency on log scales: its sizes span 8 B to 256 KiB)."""
    curves = {s: series.get((test, "ucp", s), {}) for s, _ in SETTINGS}
    rc = curves["rc_verbs"]
    if not rc or not any(curves[s] for s, _ in SETTINGS if s != "rc_verbs"):
        return
    data, ratio, plots, rplots = "", "", [], []
    for i, (s, label) in enumerate(SETTINGS):
        sizes = sorted(curves[s])
        if not sizes:
            continue
        data += block(f"d{i}", [f"{z} {mean(curves[s][z])}" for z in sizes])
        plots.append(f"$d{i} using 1:2 with linespoints lw 2 title '{label}'")
        both = [z for z in sizes if z in rc]
        if s != "rc_verbs" and both:
            ratio += block(f"r{i}", [
                f"{z} {mean(curves[s][z]) / mean(rc[z])}" for z in both])
            rplots.append(f"$r{i} using 1:2 with linespoints lw 2 lc {i + 1} "
                          f"title '{label}'")
    what = "bandwidth" if unit == "MB/s" else "latency"
    every = sorted({z for c in curves.values() for z in c})
    tics = ", ".join(f"'{size_label(z)}' {z}" for z in every)
    script = f"""{TERMINAL}
set output '{out}'
{data}{ratio}
set multiplot layout 2,1 title 'UCP {test}, one pair, one boot: {what}'
set logscale x 2
set xrange [{every[0] / 1.5}:{every[-1] * 1.5}]
set xtics ({tics}) rotate by -45
set grid
set key top left
{"set logscale y 10" if unit == "us" else ""}
set ylabel '{unit}'
plot {", ".join(plots)}
set ylabel 'over rc_verbs'
set key top left
set arrow 1 from graph 0, first {target} to graph 1, first {target} nohead dt 2
plot {", ".join(rplots)}, {target} with lines dt 2 lc 'gray' title 'target {target}'
unset multiplot
"""
    gnuplot(script, out)


def draw_four_pair(series, out):
    """The 4 pairs' sum over rc_verbs', per test and setting."""
    tests = sorted({(t, z) for (t, layout, _), sizes in series.items()
                    if layout == "x4" for z in sizes})
    names = {"rvt": "rvt", "rvt_core": "rvt, a vCPU for the agents",
             "rc_verbs_pollers": "rc_verbs beside as many pollers"}
    names = {s: label for s, label in names.items()
             if any(layout == "x4" and setting == s
                    for (_, layout, setting) in series)}
    rows = []
    for t, z in tests:
        rc = series.get((t, "x4", "rc_verbs"), {}).get(z)
        if not rc:
            continue
        cells = []
        for s in names:
            v = series.get((t, "x4", s), {}).get(z)
            cells.append(f"{mean(v) / mean(rc):.3f}" if v else "NaN")
        rows.append(f'"{t} {size_label(z)}" ' + " ".join(cells))
    if not rows or not names:
        return
    cols = ", ".join(f"$d using {k + 2}:xtic(1) title '{label}'"
                     for k, label in enumerate(names.values()))
    script = f"""{TERMINAL}
set output '{out}'
{block("d", rows)}
set title '4 processes per node, each pair at once: the sum over rc_verbs'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set yrange [0:*]
set grid ytics
set key top left
set ylabel 'over rc_verbs'
plot {cols}, 0.9 with lines dt 2 lc 'gray' title 'target 0.9'
"""
    gnuplot(script, out)


def draw_host_hops(path, out):
    """rvt_host_bench's section 3: hop medians and posts/s against N."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        die(f"{path}: no rows")
    hops = [("client_agent_ns", "client -> agent"),
            ("agent_post_ns", "agent: pop -> post"),
            ("agent_client_ns", "agent -> client"),
            ("completion_ns", "completion -> reap"),
            ("round_trip_ns", "round trip"),
            ("pass_ns", "agent loop pass, idle")]
    try:
        lines = [" ".join([r["attached"]] + [r[k] for k, _ in hops] +
                          [r["posts_per_s"]]) for r in rows]
    except KeyError as e:
        die(f"{path}: no column {e}: not rvt_host_bench --csv output")
    plots = ", ".join(f"$d using 1:{k + 2} with linespoints lw 2 title '{label}'"
                      for k, (_, label) in enumerate(hops))
    script = f"""{TERMINAL}
set output '{out}'
{block("d", lines)}
set multiplot layout 2,1 title 'rvt_host_bench: N clients on one agent (real cores)'
set logscale x 2
set grid
set key top left
set xlabel 'clients attached'
set ylabel 'ns, median'
plot {plots}
set ylabel 'posts/s, min(N, 8) streaming'
plot $d using 1:{len(hops) + 2} with linespoints lw 2 title 'posts/s'
unset multiplot
"""
    gnuplot(script, out)


SWEEP = range(512, 262144 + 1)  # the sweep's sizes: its own table


def cell(values, unit):
    if not values:
        return ""
    v = mean(values)
    return f"{v:.1f} {unit}" if unit == "us" else f"{v:.2f} {unit}"


def ratio(a, b):
    return f"{mean(a) / mean(b):.2f}" if a and b else ""


def print_tables(series, units):
    """rvt beside rc_verbs for every measure both ran outside the sweep,
    then the sweep: what docs/performance.md shows. A figure measured
    twice in the run (a size two sections share) is their mean, as in the
    pictures."""
    measures = sorted({(t, layout, z) for (t, layout, s), sizes in
                       series.items() if s == "rvt" for z in sizes
                       if (t, layout, "rc_verbs") in series and
                       z in series[(t, layout, "rc_verbs")] and
                       not (layout == "ucp" and z in SWEEP)},
                      key=lambda m: (not m[0].endswith("_lat"),
                                     m[1] == "x4", m[0], m[1], m[2]))
    print("| measure | rvt | rc_verbs | rvt / rc_verbs | rc_verbs+p "
          "| rvt / rc_verbs+p | rvt+core | rvt+core / rc_verbs |")
    print("|---|---|---|---|---|---|---|---|")
    for t, layout, z in measures:
        def get(s):
            return series.get((t, layout, s), {}).get(z, [])
        u = units[(t, layout)]
        name = (f"4 pairs, UCT {t} {size_label(z)}, sum" if layout == "x4"
                else f"UCP {t} {size_label(z)}" if layout == "ucp"
                else f"UCT {t} {layout} {size_label(z)}")
        print(f"| {name} | {cell(get('rvt'), u)} | {cell(get('rc_verbs'), u)} "
              f"| {ratio(get('rvt'), get('rc_verbs'))} "
              f"| {cell(get('rc_verbs_pollers'), u)} "
              f"| {ratio(get('rvt'), get('rc_verbs_pollers'))} "
              f"| {cell(get('rvt_core'), u)} "
              f"| {ratio(get('rvt_core'), get('rc_verbs'))} |")
    sizes = sorted(z for z in series.get(("tag_bw", "ucp", "rc_verbs"), {})
                   if z in SWEEP)
    if not sizes:
        return
    print()
    print("| size | tag_bw rvt | ud_verbs,rvt | rc_verbs | rvt / rc "
          "| ud_verbs,rvt / rc | tag_lat rvt | ud_verbs,rvt | rc_verbs "
          "| rvt / rc | ud_verbs,rvt / rc |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for z in sizes:
        row = [size_label(z)]
        for t, u in (("tag_bw", "MB/s"), ("tag_lat", "us")):
            got = {s: series.get((t, "ucp", s), {}).get(z, [])
                   for s, _ in SETTINGS}
            row += [cell(got[s], u) for s, _ in SETTINGS]
            row += [ratio(got["rvt"], got["rc_verbs"]),
                    ratio(got["ud_verbs,rvt,self"], got["rc_verbs"])]
        print("| " + " | ".join(row) + " |")


def main():
    args = sys.argv[1:]
    tables = args[:1] == ["--tables"]
    if tables:
        args = args[1:]
    if len(args) != 1 or args[0].startswith("-"):
        die("usage: plot.py [--tables] DIR (with figures.csv, attached.csv "
            "or both)")
    d = args[0]
    if tables:
        figures = os.path.join(d, "figures.csv")
        if not os.path.exists(figures):
            die(f"{d}: no figures.csv")
        series, units = read_figures(figures)
        print_tables(series, units)
        return
    figures = os.path.join(d, "figures.csv")
    attached = os.path.join(d, "attached.csv")
    if not os.path.exists(figures) and not os.path.exists(attached):
        die(f"{d}: neither figures.csv nor attached.csv")
    if os.path.exists(figures):
        series, _ = read_figures(figures)
        draw_sweep(series, "tag_bw", "MB/s", 0.9,
                   os.path.join(d, "sweep-bandwidth.svg"))
        draw_sweep(series, "tag_lat", "us", 1.3,
                   os.path.join(d, "sweep-latency.svg"))
        draw_four_pair(series, os.path.join(d, "four-pair.svg"))
    if os.path.exists(attached):
        draw_host_hops(attached, os.path.join(d, "host-hops.svg"))


if __name__ == "__main__":
    main()
