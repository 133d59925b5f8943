#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# test/testbed/plot.py, the pictures of a run: the recorded run's pictures
# in docs/plots are what plot.py draws from the CSV files beside them (not
# drawn by hand, nor from other figures), the tables in docs/performance.md
# are what it prints from them, and malformed input gets a clear error and
# no picture.
set -u
top=${abs_top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
tool=$top/test/testbed/plot.py
plots=$top/docs/plots
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failed=1; }

if ! command -v gnuplot >/dev/null; then
    fail "gnuplot is not installed (Debian: gnuplot-nox; contrib/setup-deps.sh installs it)"
    exit 1
fi

# ---- the recorded run: redrawn from its CSV, the same pictures ----------
mkdir "$work/redrawn"
cp "$plots"/*.csv "$work/redrawn/"
if python3 "$tool" "$work/redrawn" >"$work/out" 2>&1; then
    pass "plot.py draws docs/plots from its CSV files"
else
    fail "plot.py on docs/plots' CSV: $(cat "$work/out")"
fi
drawn=$(cd "$work/redrawn" && printf '%s ' *.svg)
kept=$(cd "$plots" && printf '%s ' *.svg)
if [ -n "$kept" ] && [ "$drawn" = "$kept" ]; then
    pass "the pictures kept are the ones drawn: $kept"
else
    fail "docs/plots keeps '$kept', plot.py draws '$drawn'"
fi
for f in $kept; do
    if cmp -s "$plots/$f" "$work/redrawn/$f"; then
        pass "docs/plots/$f is what its CSV draws"
    else
        fail "docs/plots/$f differs from what its CSV draws (test/testbed/plot.py docs/plots redraws it)"
    fi
done

# ---- the tables docs/performance.md shows: what the CSV prints --------------
# each table plot.py --tables prints from the recorded run is in the doc,
# line for line
if python3 "$tool" --tables "$plots" >"$work/tables" 2>&1 &&
    python3 - "$work/tables" "$top/docs/performance.md" >"$work/out" 2>&1 <<'PY'; then
import sys
tables = open(sys.argv[1]).read().strip().split("\n\n")
doc = open(sys.argv[2]).read()
missing = [t.split("\n")[0] for t in tables if t + "\n" not in doc]
for m in missing:
    print(f"docs/performance.md lacks the table that begins: {m}")
sys.exit(1 if missing or not tables else 0)
PY
    pass "docs/performance.md shows the recorded run's tables as its CSV prints them"
else
    fail "$(cat "$work/out") (test/testbed/plot.py --tables docs/plots prints them)"
fi

# ---- the large job's tables: what each raw file's figures print ------------
# (the runs of test/testbed/perf_guest.py's LargeJob, docs/plots/largejob*.raw)
for raw in "$plots"/largejob*.raw; do
    if python3 "$top/test/testbed/largejob_table.py" "$raw" \
        >"$work/largejob" 2>&1 &&
        python3 - "$work/largejob" "$top/docs/performance.md" >"$work/out" 2>&1 <<'PY'; then
import sys
tables = [t for t in open(sys.argv[1]).read().strip().split("\n\n") if t]
doc = open(sys.argv[2]).read()
missing = [t.split("\n")[0] for t in tables if t.strip() + "\n" not in doc]
for m in missing:
    print(f"docs/performance.md lacks the large job's table that begins: {m}")
sys.exit(1 if missing or not tables else 0)
PY
        pass "docs/performance.md shows ${raw##*/}'s tables as largejob_table.py prints them"
    else
        fail "$(cat "$work/out") (test/testbed/largejob_table.py docs/plots/${raw##*/} prints them)"
    fi
done

# ---- malformed input: an error naming it, no picture ------------------------
bad() { # bad WHAT EXPECTED-ERROR-ERE: $work/bad holds the input
    rm -f "$work"/bad/*.svg
    if python3 "$tool" "$work/bad" >"$work/out" 2>&1; then
        fail "$1: accepted"
    elif ! grep -qE "$2" "$work/out"; then
        fail "$1: the error does not say '$2': $(cat "$work/out")"
    elif ls "$work"/bad/*.svg >/dev/null 2>&1; then
        fail "$1: a picture was drawn anyway"
    else
        pass "$1: refused, $(head -1 "$work/out")"
    fi
}
mkdir "$work/bad"
bad "a directory without figures.csv or attached.csv" \
    "neither figures.csv nor attached.csv"
printf 'test,size,value\ntag_bw,512,1.0\n' >"$work/bad/figures.csv"
bad "figures.csv with other columns" "figures.csv: columns .*expected"
printf 'test,layout,size,setting,value,unit\ntag_bw,ucp,512,"rvt",fast,MB/s\n' \
    >"$work/bad/figures.csv"
bad "a figure that is not a number" "figures.csv line 2: .*'fast' is not a number"
rm "$work/bad/figures.csv"
printf 'attached,pass_ns\n1,100\n' >"$work/bad/attached.csv"
bad "attached.csv that is not rvt_host_bench's" "no column .*rvt_host_bench --csv"

exit $failed
