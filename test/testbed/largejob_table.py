#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The large-job section's table (perf_guest.py's LargeJob): reads its raw
lines "ROUND SETTING TEST SIZE VALUE" (SETTING as NAME@E, E the estimated
endpoints or - for rc_verbs' own setting) and prints, per test and size,
each setting's median over the rounds, the rounds' spread [min-max], and
its ratio to UD alone's median at the same E (ud@1024 for rc_verbs;
ud-1.22 for the UCX 1.22 settings),
then the issue-41 targets with "met" or "not met". Printed, never judged.

Usage: largejob_table.py RAW_FILE
"""
import statistics
import sys
from collections import defaultdict

# below UCP's rendezvous threshold on UD (eager bcopy to 34,697 B)
EAGER_MAX = 32 << 10

UNITS = {
    "lat": ("latency, us (half the median round trip), lower is better", False),
    "bw": ("bandwidth, MB/s (median window), higher is better", True),
    "a2a": ("8-rank alltoall, us (median repetition, slowest rank), lower is better", False),
}


def human(size):
    size = int(size)
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20} MiB"
    if size >= 1024 and size % 1024 == 0:
        return f"{size >> 10} KiB"
    return f"{size} B"


def base_of(setting):
    """The UD-alone setting a setting is compared with."""
    name, eps = setting.split("@")
    ud = "ud-1.22" if name.endswith("-1.22") else "ud"
    return f"{ud}@" + (eps if eps != "-" else "1024")


def main():
    values = defaultdict(list)  # (test, size, setting) -> [value per round]
    settings = []
    for line in open(sys.argv[1]):
        f = line.split()
        if len(f) != 5:
            continue
        _, setting, test, size, value = f
        values[(test, int(size), setting)].append(float(value))
        if setting not in settings:
            settings.append(setting)
    # by E (rc_verbs' own last), UCX 1.13 before 1.22, UD alone first
    order = sorted(settings, key=lambda s: (s.split("@")[1] == "-", s.split("@")[1],
                                            s.split("@")[0].endswith("-1.22"),
                                            base_of(s) != s, s))
    med = {k: statistics.median(v) for k, v in values.items()}

    def ratio(test, size, setting):
        b = med.get((test, size, base_of(setting)))
        m = med.get((test, size, setting))
        if b is None or m is None or b == 0 or setting == base_of(setting):
            return None
        return m / b

    tests = [t for t in ("lat", "bw", "a2a") if any(k[0] == t for k in values)]
    tests += sorted({k[0] for k in values if k[0].startswith("kernel")})
    for test in tests:
        title = UNITS.get(test, (f"{test.replace('kernel_', 'rvt_mpi_kernels ')}: "
                                 "MB/s (total: s)", True))[0]
        print(f"\n{title}")
        print((f"{'size':<8}" + "".join(f" {s:<26}" for s in order)).rstrip())
        for size in sorted({k[1] for k in values if k[0] == test}):
            cells = []
            for s in order:
                v = values.get((test, size, s))
                if not v:
                    cells.append(f" {'-':<26}")
                    continue
                r = ratio(test, size, s)
                cell = f"{med[(test, size, s)]:.4g} [{min(v):.3g}-{max(v):.3g}]"
                if r is not None:
                    cell += f" {r:.2f}x"
                cells.append(f" {cell:<26}")
            print((f"{human(size) if size else '':<8}" + "".join(cells)).rstrip())

    print("\nthe large job's targets, rvt's median over UD alone's, same E:")
    for s in order:
        if not s.startswith(("rvt@", "rvt-1.22@")):
            continue

        def worst(test, sizes, pick):
            rs = [(ratio(test, z, s), z) for z in sizes]
            rs = [(r, z) for r, z in rs if r is not None]
            return pick(rs) if rs else (None, None)

        sizes = {t: sorted({k[1] for k in values if k[0] == t}) for t in tests}
        rows = [
            ("lat", [z for z in sizes.get("lat", []) if z <= EAGER_MAX], max,
             lambda r: r <= 1.1, "latency up to 32 KiB <= 1.1x"),
            ("bw", [z for z in sizes.get("bw", []) if z <= EAGER_MAX], min,
             lambda r: r >= 0.9, "bandwidth up to 32 KiB >= 0.9x"),
            ("a2a", [z for z in sizes.get("a2a", []) if z >= 256 << 10], max,
             lambda r: r <= 0.5, "alltoall from 256 KiB <= 0.5x"),
            ("bw", [z for z in sizes.get("bw", []) if z >= 1 << 20], min,
             lambda r: r >= 1.5, "bandwidth from 1 MiB >= 1.5x"),
        ]
        for test, zs, pick, ok, text in rows:
            r, z = worst(test, zs, pick)
            if r is None:
                continue
            print(f"  {s}: {text}: worst {r:.2f}x at {human(z)}: "
                  f"{'met' if ok(r) else 'not met'}")


if __name__ == "__main__":
    main()
