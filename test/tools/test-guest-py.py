#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""test/testbed/guest.py's helpers that need no testbed, on the host: the
checks' lines and exit status, and the verdicts and figures the Python
drivers (chaos_guest.py, perf_guest.py, site_jobs_guest.py) print, on
made-up input. test-testbed.sh does the same for lib.sh. Prints one
PASS/FAIL line per case; exits 1 if any failed.

Usage: test-guest-py.py [SRC_TOP]   (default: the tree it is in)"""

import contextlib
import io
import os
import sys
import tempfile

top = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
    "abs_top_srcdir", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
sys.dont_write_bytecode = True  # the source tree may be read-only (distcheck)
sys.path.insert(0, os.path.join(top, "test/testbed"))
import guest  # noqa: E402

failed = 0


def case(name, got, want):
    global failed
    if got == want:
        print(f"PASS: {name}")
    else:
        failed += 1
        print(f"FAIL: {name}: got {got!r}, expected {want!r}")


def suite_run(body):
    """BODY(Suite) run; returns (its output, its exit status)"""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            g = guest.Suite("demo")
            body(g)
            g.finish()
        except SystemExit as e:
            return out.getvalue(), e.code
    return out.getvalue(), None


# the checks: one line each, the summary, and the exit status
out, rc = suite_run(lambda g: (g.pass_("a"), g.check("b", True)))
case("Suite: passes print PASS lines, the summary, exit 0", (out, rc),
     ("PASS: a\nPASS: b\ndemo: 2 passed, 0 failed\n", 0))
out, rc = suite_run(lambda g: (g.pass_("a"), g.check("b", False)))
case("Suite: one failed check prints FAIL and exits 1", (out, rc),
     ("PASS: a\nFAIL: b\ndemo: 1 passed, 1 failed\n", 1))

case("indent: every line under its label", guest.indent("x", "one\ntwo\n"),
     "  x| one\n  x| two\n")

# numbers read as awk reads them
case("awk_num: a figure with its unit", guest.awk_num("12.5 us"), 12.5)
case("awk_num: an exponent", guest.awk_num("1.5e+03"), 1500.0)
case("awk_num: no number is 0", guest.awk_num("?"), 0.0)

# verdicts from JSON
case("json_verdict: the judge's verdict",
     guest.json_verdict('{"a": 2}', lambda d: (d["a"] == 2, f"a={d['a']}")), (True, "a=2"))
case("json_verdict: a field missing fails",
     guest.json_verdict('{"b": 2}', lambda d: (d["a"] == 2, "")), (False, None))
case("json_verdict: no JSON fails", guest.json_verdict("", lambda d: (True, "")),
     (False, None))
case("jq_text: strings raw, the rest as JSON",
     [guest.jq_text(v) for v in ("s", None, True, [1, 2])], ["s", "null", "true", "[1,2]"])

# an agent's resources against its baseline
case("resources_back: the same figures",
     guest.resources_back(("9", "4", "5", "3"), ("9", "4", "5", "3")),
     (True, "9 4 5 3 -> 9 4 5 3"))
case("resources_back: an MR left over fails",
     guest.resources_back(("9", "4", "5", "3"), ("9", "5", "5", "3"))[0], False)
ok, text = guest.resources_back(("9", "4", "5", "3"), ("9", "?", "5", "3"))
case("resources_back: a figure not read fails, naming it",
     (ok, "MRs (rdma resource show) now" in text), (False, True))
case("rss_within: growth within the bound", guest.rss_within("1000", "1500", 512),
     (True, "1000 -> 1500 KiB, 500 KiB"))
case("rss_within: growth past the bound fails", guest.rss_within("1000", "1600", 512)[0],
     False)
case("rss_within: unread fails", guest.rss_within("?", "1600", 512)[0], False)

# ucx_perftest's figures from its client's output
with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "pair")
    with open(out + ".client", "w") as f:
        # ucx_perftest 1.13: iters, the median latency, the moment and total
        # averages, bandwidth moment and total, message rate moment and total
        f.write("+----+\nFinal:     1000  12.345  12.500  12.600  80.91  1234.56  81011  81012\n")
    case("figure: the latency of the final line", guest.figure(out, "lat"), "12.3 us")
    case("figure: the bandwidth of the final line", guest.figure(out, "bw"), "1234.56 MB/s")
    with open(out + ".client", "w") as f:
        f.write("no final line\n")
    case("figure: none without a final line", guest.figure(out, "lat"), None)

case("counters_delta: after less before",
     guest.counters_delta({"am": 1, "sent": 10}, {"am": 4, "sent": 30}), {"am": 3, "sent": 20})
case("counters_delta: an agent that did not answer",
     guest.counters_delta(None, {"am": 4}), None)

print(f"test-guest-py: {failed} failed")
sys.exit(1 if failed else 0)
