#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the agent's wire-parser fuzz target with clang's libFuzzer, ASan and
# UBSan, and runs it for a bounded time (RVT_FUZZ_SECONDS, default 30) from
# a seed corpus of valid messages. Exit 77 (automake SKIP) without clang.
set -u
src=${abs_top_srcdir:?run from make check}
out=${abs_top_builddir:?}/test/fuzz
seconds=${RVT_FUZZ_SECONDS:-30}
command -v clang++ > /dev/null || { echo "SKIP: clang++ not installed"; exit 77; }
mkdir -p "$out/corpus"
clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -I"$src/src" \
    "$src/test/fuzz/fuzz_wire.cc" \
    "$src/src/uct/ib/rvt/common/attach_wire.cc" \
    "$src/src/uct/ib/rvt/common/conn_wire.cc" \
    "$src/src/uct/ib/rvt/common/format.cc" -o "$out/fuzz_wire" ||
    { echo "FAIL: cannot build the fuzz target"; exit 1; }
# seed: the start of a valid attach_request (magic "RVTA", version 1,
# type 1, length 88 = 'X', reserved 0, a job key), so mutations start deep
printf 'RVTA\001\000\001\000X\000\000\000\000\000\000\000job-key' > "$out/corpus/seed-request"
"$out/fuzz_wire" -max_total_time="$seconds" -max_len=512 \
    -artifact_prefix="$out/" \
    -print_final_stats=1 "$out/corpus" > "$out/fuzz.log" 2>&1
rc=$?
grep -E 'stat::number_of_executed_runs|Done|ERROR|SUMMARY' "$out/fuzz.log"
[ $rc = 0 ] || { tail -40 "$out/fuzz.log"; echo "FAIL: the fuzzer found a crash"; exit 1; }
echo "PASS: $seconds s of fuzzing the agent's wire parsers, no crash"
