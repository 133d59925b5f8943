#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The README's two settings tables are the programs' own.

- `| Variable | Default | Unit | Meaning |`: one row for every UCX_RVT_*
  variable that `ucx_info -c` shows with the module loaded (the way this
  UCX loads it, as check-module-loading.sh does), and none other; each
  default equal to ucx_info's (times and sizes compared as quantities:
  ucx_info prints 20s as 20000000.00us and 8k as 8K).
- `| Option | Default | Unit | Meaning |`: one row for every option that
  `rvtd --help` lists (but --help), and none other; each default equal to
  its "(default: ...)", and "none" where it shows none.

A variable that a UCX other than the one the README documents (1.13)
inherits from its own tables is reported, not failed: the module's own
variables (src/uct/ib/rvt/uct/md.cc, iface.cc) are checked on every UCX.

Run by `make check` (abs_top_srcdir, abs_top_builddir, UCX_PREFIX,
UCX_LOADS_PLUGINS, UCX_VERSION); `all` built rvtd and the module.
"""
import os
import re
import subprocess
import sys

README_UCX = "1.13"
UCX_HEADER = "| Variable | Default | Unit | Meaning |"
RVTD_HEADER = "| Option | Default | Unit | Meaning |"

failures = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL: " + msg)


def ok(msg):
    print("PASS: " + msg)


def env(name):
    v = os.environ.get(name)
    if v is None:
        print("FAIL: %s is not set (run from make check)" % name)
        sys.exit(1)
    return v


def table_rows(lines, header):
    """The rows of the table whose header line is `header`, as cells."""
    try:
        i = lines.index(header)
    except ValueError:
        return None
    rows = []
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append(cells)
    return rows


def unquote(cell):
    return cell.replace("`", "").strip()


UNITS_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
UNITS_B = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20,
           "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}


def quantity(v):
    """A time in seconds or a size in bytes, else None."""
    m = re.fullmatch(r"([0-9.]+)\s*(s|ms|us|ns)", v)
    if m:
        return ("time", float(m.group(1)) * UNITS_S[m.group(2)])
    m = re.fullmatch(r"([0-9.]+)\s*([kmg]?b?)", v.lower())
    if m and m.group(2) != "":
        return ("size", float(m.group(1)) * UNITS_B[m.group(2)])
    return None


def same_default(readme, program):
    if readme == program:
        return True
    a, b = quantity(readme), quantity(program)
    if a and b and a[0] == b[0]:
        # ucx_info prints times in us with two decimals
        tol = 0.005e-6 if a[0] == "time" else 0.5
        return abs(a[1] - b[1]) <= tol
    return False


def check_table(what, rows, program, own):
    """rows: {name: default} from the README; program: the same from the
    program; own: the names that are checked on every UCX."""
    before = failures
    for name, dflt in sorted(program.items()):
        if name not in rows:
            if own is None or name in own:
                fail("%s %s is not in the README's table (default %s)"
                     % (what, name, dflt or "none"))
            else:
                print("NOTE: %s %s (inherited from this UCX's tables) is "
                      "not in the README's table, which documents UCX %s"
                      % (what, name, README_UCX))
        elif not same_default(rows[name], dflt):
            if own is None or name in own:
                fail("%s %s: the README's default is '%s', the program's '%s'"
                     % (what, name, rows[name], dflt))
            else:
                # UCX's own setting, whose default this UCX changed (1.16
                # on: RCACHE_MAX_UNRELEASED inf, 1.13's 512M)
                print("NOTE: %s %s (inherited from this UCX's tables): the "
                      "README's default is UCX %s's '%s', this UCX's '%s'"
                      % (what, name, README_UCX, rows[name], dflt))
    for name in sorted(rows):
        if name not in program:
            if own is None or name in own:
                fail("%s %s is in the README's table but not in the program"
                     % (what, name))
            else:
                print("NOTE: %s %s is not in this UCX's tables" % (what, name))
    if failures == before:
        ok("%s: the README's %d rows are the program's %d, defaults equal"
           % (what, len(rows), len(program)))


def main():
    top = env("abs_top_srcdir")
    build = env("abs_top_builddir")
    prefix = env("UCX_PREFIX")
    plugins = env("UCX_LOADS_PLUGINS")
    version = os.environ.get("UCX_VERSION", README_UCX)
    readme = os.environ.get("RVT_README", os.path.join(top, "README.md"))
    lines = [l.rstrip("\n") for l in open(readme, encoding="utf-8")]

    # rvtd --help
    rvtd = os.path.join(build, "src/uct/ib/rvt/tools/rvtd")
    if not os.access(rvtd, os.X_OK):
        fail("no %s (make all first)" % rvtd)
        return
    helptext = subprocess.run([rvtd, "--help"], capture_output=True,
                              text=True).stdout
    awk = subprocess.run(["awk", "-f",
                          os.path.join(top, "test/tools/help-entries.awk")],
                         input=helptext, capture_output=True, text=True).stdout
    options = {}
    for entry in awk.splitlines():
        m = re.match(r"^  --([a-z0-9-]+)", entry)
        if not m or m.group(1) == "help":
            continue
        d = re.search(r"\(default: ([^)]*)\)$", entry)
        options[m.group(1)] = d.group(1) if d else ""
    rows = table_rows(lines, RVTD_HEADER)
    if rows is None:
        fail("README has no table headed '%s'" % RVTD_HEADER)
    else:
        table = {}
        for cells in rows:
            m = re.match(r"^--([a-z0-9-]+)", unquote(cells[0]))
            if not m or len(cells) != 4:
                fail("rvtd table: a row that is not `--option` and 4 cells: "
                     + " | ".join(cells))
                continue
            d = unquote(cells[1])
            # "none": no default, or an option whose default value is
            # the word none (--notify-fd)
            none_value = options.get(m.group(1)) == "none"
            table[m.group(1)] = "" if d == "none" and not none_value else d
        check_table("rvtd option", table, options, None)

    # ucx_info -c
    ucx_info = os.path.join(prefix, "bin/ucx_info")
    libs = os.path.join(build, "src/uct/ib/rvt/uct/.libs")
    e = {k: v for k, v in os.environ.items()
         if k not in ("LD_PRELOAD", "UCX_PLUGIN_PATH")}
    if plugins == "yes":
        e["UCX_PLUGIN_PATH"] = libs
    else:
        e["LD_PRELOAD"] = os.path.join(libs, "libuct_rvt.so")
    out = subprocess.run([ucx_info, "-c"], env=e, capture_output=True,
                         text=True).stdout
    variables = {}
    for line in out.splitlines():
        m = re.match(r"^UCX_RVT_([A-Z0-9_]+)=(.*)$", line)
        if m:
            variables["UCX_RVT_" + m.group(1)] = m.group(2)
    if not variables:
        fail("ucx_info -c shows no UCX_RVT_* variable (the module did not load)")
        return
    own = set()
    for src in ("md.cc", "iface.cc"):
        text = open(os.path.join(top, "src/uct/ib/rvt/uct", src),
                    encoding="utf-8").read()
        own |= {"UCX_RVT_" + n for n in re.findall(r'\{"([A-Z_]+)",', text)}
    rows = table_rows(lines, UCX_HEADER)
    if rows is None:
        fail("README has no table headed '%s'" % UCX_HEADER)
        return
    table = {}
    for cells in rows:
        name = unquote(cells[0])
        if not name.startswith("UCX_RVT_") or len(cells) != 4:
            fail("UCX table: a row that is not `UCX_RVT_*` and 4 cells: "
                 + " | ".join(cells))
            continue
        d = unquote(cells[1])
        table[name] = "" if d == "empty" else d
    strict = version.startswith(README_UCX + ".") or version == README_UCX
    check_table("UCX variable", table, variables, None if strict else own)


main()
sys.exit(1 if failures else 0)
