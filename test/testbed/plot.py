#!/usr/bin/env python3
"""Draws a run's figures as SVG pictures, with gnuplot.

Usage: test/testbed/plot.py DIR

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
    figure; a run that failed ("error") has none."""
    series = defaultdict(lambda: defaultdict(list))
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
    return series


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
    return f"{size // 1024} KiB" if size >= 1024 else f"{size} B"


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


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        die("usage: plot.py DIR (with figures.csv, attached.csv or both)")
    d = sys.argv[1]
    figures = os.path.join(d, "figures.csv")
    attached = os.path.join(d, "attached.csv")
    if not os.path.exists(figures) and not os.path.exists(attached):
        die(f"{d}: neither figures.csv nor attached.csv")
    if os.path.exists(figures):
        series = read_figures(figures)
        draw_sweep(series, "tag_bw", "MB/s", 0.9,
                   os.path.join(d, "sweep-bandwidth.svg"))
        draw_sweep(series, "tag_lat", "us", 1.3,
                   os.path.join(d, "sweep-latency.svg"))
        draw_four_pair(series, os.path.join(d, "four-pair.svg"))
    if os.path.exists(attached):
        draw_host_hops(attached, os.path.join(d, "host-hops.svg"))


if __name__ == "__main__":
    main()
