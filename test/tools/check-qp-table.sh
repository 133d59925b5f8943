#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# test/testbed/qp_table.py, the per-node QP and memory table: on a made-up
# measurement whose rows are known, on malformed input (a clear error, no
# table), and against docs/performance.md (its table is the one the recorded
# measurement test/testbed/qp-table.rxe.json prints, not typed by hand), and
# the README's rows against it. The agent's QPs past deep_peers remote nodes
# are shallow, and a measurement from before that (no rvt_shallow, no
# deep_peers) still reads as every QP deep.
set -u
top=${abs_top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
tool=$top/test/testbed/qp_table.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failed=1; }

# q_rc 1 KiB, q_ud 2 KiB (mapped; rss smaller), q_rvt 1 MiB (rss larger
# than mapped), q_srq 1 MiB, q_rvt_shallow 64 KiB (mapped; rss smaller),
# r_rc 10 KiB, r_ud 4 KiB, r_agent 8 KiB, K 4, deep_peers 100, max_qp 100000
cat >"$work/m.json" <<'JSON'
{"kernel": "test", "probe": {"device": "fake0", "count": 8,
  "limits": {"max_qp": 100000},
  "objects": [
    {"name": "rc_verbs", "mapped_bytes": 1024, "rss_bytes": 0},
    {"name": "ud_verbs", "mapped_bytes": 2048, "rss_bytes": 1000},
    {"name": "rvt", "mapped_bytes": 4096, "rss_bytes": 1048576},
    {"name": "rvt_srq", "mapped_bytes": 1048576, "rss_bytes": 0},
    {"name": "rvt_shallow", "mapped_bytes": 65536, "rss_bytes": 4096,
     "granted": {"wr": 15}}]},
 "registered": {"rc_verbs_process": 10240, "ud_verbs_process": 4096,
                "rvt_agent": 8192},
 "config": {"num_qps": 4, "deep_peers": 100, "srq_size": 1024,
            "am_size": 8192}}
JSON
"$tool" "$work/m.json" >"$work/out" 2>&1 || fail "exit $? on a good measurement"
# row N=16, P=32: rc_verbs 32*32*15 = 15,360 QPs, 15360 KiB + 32 x 12 KiB
# = 15.375 MiB; rvt 4*16 = 64 QPs, 65 MiB + 10 KiB; the hybrid adds 32 x
# 6 KiB. Row N=128, P=32: 130,048 QPs, over the device's 100,000; rvt's
# 512 are 4 x 101 deep (the own node and 100 remote ones: 404 MiB) and
# 4 x 27 shallow (6.75 MiB), 411.76 MiB with q_srq, q_ud and r_agent
# (411.95 MiB with the hybrid's 32 x 6 KiB). Row N=10,000, P=256: 4 x 101
# deep and 4 x 9,899 shallow, 404 + 2,474.75 + 1 MiB + 10 KiB (+ 256 x 6
# KiB): 2,880 and 2,881 MiB, where every QP deep would be 39 GiB.
for row in '| 16 | 32 | 15,360, 15 MiB | 64, 65 MiB | 64, 65 MiB |' \
    '| 128 | 32 | 130,048 (!), 127 MiB | 512, 412 MiB | 512, 412 MiB |' \
    '| 10,000 | 256 | 655,294,464 (!), 625 GiB | 40,000, 2,881 MiB | 40,000, 2,880 MiB |'; do
    if grep -qxF "$row" "$work/out"; then
        pass "row ${row:0:14}"
    else
        fail "expected the row $row; got:"
        grep '^| [0-9]' "$work/out" | head -3
    fi
done
if grep -q 'more RC QPs than this device allows (100,000)' "$work/out"; then
    pass "rows over max_qp are marked"
else
    fail "no max_qp note"
fi
if grep -qxF -- '- q_rvt_shallow = 64 KiB: one of its shallow RC QPs (15 send WRs)' "$work/out" &&
    grep -qF 'K x (min(N - 1, D) + 1) x q_rvt + K x max(0, N - 1 - D) x q_rvt_shallow' "$work/out" &&
    grep -qF 'D = 100 remote nodes with deep QPs' "$work/out"; then
    pass "the shallow QP's figure and formula are printed"
else
    fail "no q_rvt_shallow line, or no formula with it; got:"
    grep -E '^- (q_rvt|rvt:)' "$work/out"
fi

# a measurement from before the shallow QPs (no rvt_shallow object, no
# deep_peers): every QP deep, so at N=10,000 40,000 x 1 MiB = 39 GiB
jq 'del(.probe.objects[4]) | del(.config.deep_peers)' "$work/m.json" >"$work/old.json"
"$tool" "$work/old.json" >"$work/old" 2>&1 || fail "exit $? on a measurement without rvt_shallow"
if grep -qxF '| 128 | 32 | 130,048 (!), 127 MiB | 512, 513 MiB | 512, 513 MiB |' "$work/old" &&
    grep -qxF '| 10,000 | 256 | 655,294,464 (!), 625 GiB | 40,000, 39 GiB | 40,000, 39 GiB |' "$work/old" &&
    grep -qF 'every QP deep' "$work/old" && ! grep -q q_rvt_shallow "$work/old"; then
    pass "a measurement without rvt_shallow: every QP deep, as before"
else
    fail "a measurement without rvt_shallow: expected every QP deep; got:"
    grep -E '^(- q_rvt|\| 1(28|0,000) \| (32|256) \|)' "$work/old"
fi

# three boots: each figure the median of the three, whichever boot it
# came from (r_rc the first's, r_agent and q_rvt the second's), so the
# same N=16, P=32 row and r_agent as the one boot above
jq '[(.registered.rvt_agent = 100 | .probe.objects[2].rss_bytes = 7),
     (.registered.rc_verbs_process = 10),
     (.registered.rvt_agent = 999999 | .probe.objects[2].rss_bytes = 2097152 |
      .registered.rc_verbs_process = 99999999)]' \
    "$work/m.json" >"$work/boots.json"
"$tool" "$work/boots.json" >"$work/boots" 2>&1 || fail "exit $? on three boots"
if grep -qxF '| 16 | 32 | 15,360, 15 MiB | 64, 65 MiB | 64, 65 MiB |' "$work/boots" &&
    grep -q ', the median of 3 boots;' "$work/boots" &&
    grep -qxF -- '- r_agent = 8 KiB: the agent, one client attached (1024 receive buffers of 8192 B)' "$work/boots"; then
    pass "three boots: each figure their median, and the table says so"
else
    fail "three boots: expected the one boot's figures and 'the median of 3 boots'; got:"
    grep -E '^(Measured|- r_|\| 16 \| 32)' "$work/boots"
fi
# refused NAME WHAT JSON: the tool refuses the measurement JSON (in
# NAME.json) with a clear error and prints no table
refused() {
    echo "$3" >"$work/$1.json"
    if "$tool" "$work/$1.json" >"$work/$1" 2>&1; then
        fail "$2 printed a table"
    elif grep -q "$1.json: not a measurement of qp-table-guest.sh" "$work/$1"; then
        pass "$2: $(head -1 "$work/$1")"
    else
        fail "$2: $(head -1 "$work/$1")"
    fi
}
refused none "an empty list of boots" '[]'
refused bad "a measurement without objects" '{"probe": {}}'
refused half "deep_peers without an rvt_shallow object" \
    "$(jq -c 'del(.probe.objects[4])' "$work/m.json")"

# docs/performance.md's table: between its qp-table markers, exactly what the
# recorded measurement prints
sed -n '/^<!-- qp-table:begin -->$/,/^<!-- qp-table:end -->$/p' "$top/docs/performance.md" |
    sed '1d;$d' >"$work/readme"
"$tool" "$top/test/testbed/qp-table.rxe.json" >"$work/recorded" 2>&1
if [ -s "$work/readme" ] && diff -u "$work/recorded" "$work/readme" >"$work/diff"; then
    pass "docs/performance.md's table is qp-table.sh --from test/testbed/qp-table.rxe.json"
else
    fail "docs/performance.md's qp-table block differs from the recorded measurement's output:"
    diff -u "$work/recorded" "$work/readme" | head -20
fi

# the README's few rows ("| N x P | ... |") are rows of that table, the
# marks of too many QPs left out
readme_rows=0
while IFS= read -r row; do
    readme_rows=$((readme_rows + 1))
    full=$(sed -E 's/^\| ([0-9,]+) x ([0-9]+) \|/| \1 | \2 |/' <<<"$row")
    # the recorded row for the same N and P
    ours=$(sed 's/ (!)//g' "$work/recorded" | grep -F "$(cut -d'|' -f1-3 <<<"$full")|")
    if [ "$full" = "$ours" ]; then
        pass "README's row ${row%% |*} | is the recorded measurement's"
    else
        fail "README's row $row is not the recorded measurement's: ${ours:-no row}"
    fi
done < <(grep -E '^\| [0-9,]+ x [0-9]+ \|' "$top/README.md")
[ "$readme_rows" -gt 0 ] || fail "no '| N x P |' row in the README's table"
exit $failed
