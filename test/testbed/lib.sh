# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash disable=SC2016 # jq filters: single quotes on purpose
# Helpers shared by the test scripts (test/testbed/*.sh, host and guest
# side). Source it, then report each check with pass/fail/check and end
# with `finish NAME`, which exits non-zero when any check failed:
#
#   . "$(dirname "$0")/lib.sh"
#   check "node 1 answers" on 1 true
#   finish "my suite"
#
# Output lines are "PASS: ..." and "FAIL: ...", which contrib/run-tests.sh
# counts; nothing else here prints a line starting with either.
#
# The agent helpers read rvt-status --json through the testbed's `on`, so
# they work inside the guest only; they need `rvt_status` set to the
# rvt-status binary (a path the nodes can reach) and jq.

checks_passed=0
checks_failed=0

# pass MESSAGE...: one passed check
pass() {
    echo "PASS: $*"
    checks_passed=$((checks_passed + 1))
}

# fail MESSAGE...: one failed check
fail() {
    echo "FAIL: $*"
    checks_failed=$((checks_failed + 1))
}

# check DESCRIPTION COMMAND...: pass if COMMAND succeeds, else fail
check() {
    local what=$1
    shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}

# finish NAME: print "NAME: N passed, N failed" and exit, 1 if any check
# failed (an EXIT trap still runs, and keeps that status)
finish() {
    echo "$1: $checks_passed passed, $checks_failed failed"
    [ "$checks_failed" = 0 ] && exit 0
    exit 1
}

# gtest_verdicts: GoogleTest's output on stdin, passed on, with a PASS or
# FAIL line per test case: its "[       OK ] NAME (N ms)" or
# "[  FAILED  ] NAME[, where GetParam() = ...] (N ms)" line (a
# parameterised test's failure names its parameter; the summary's list of
# failed tests has no time and is no second failure). A skipped case
# fails: the testbed always has a device.
gtest_verdicts() {
    local line re_ok re_failed re_skipped
    re_ok='^\[       OK \] ([^ ]+) \([0-9]+ ms\)$'
    re_failed='^\[  FAILED  \] ([^ ,]+)(, where .*)? \([0-9]+ ms\)$'
    re_skipped='^\[  SKIPPED \] ([^ ,]+)(, where .*)? \([0-9]+ ms\)$'
    while IFS= read -r line; do
        echo "$line"
        line=${line%$'\r'}
        if [[ $line =~ $re_ok ]]; then
            pass "${BASH_REMATCH[1]}"
        elif [[ $line =~ $re_failed ]]; then
            fail "${BASH_REMATCH[1]}"
        elif [[ $line =~ $re_skipped ]]; then
            fail "${BASH_REMATCH[1]} skipped: no device in the testbed?"
        fi
    done
}

# json_get JSON FILTER [JQ_OPTION...]: FILTER's result on JSON, strings
# raw; status non-zero when JSON is empty or invalid, or the result is
# null or false. JQ_OPTIONS such as --argjson NAME VALUE feed FILTER.
json_get() {
    local json=$1 filter=$2
    shift 2
    # jq -e (1.6) exits 0 on no input at all: no JSON is no result
    [[ $json == *[![:space:]]* ]] || return 1
    jq -e -r "$@" "$filter" <<<"$json"
}

# json_test JSON FILTER [JQ_OPTION...]: status 0 if FILTER is true on JSON
json_test() {
    json_get "$@" >/dev/null
}

# json_verdict JSON FILTER [JQ_OPTION...]: FILTER makes {ok, text} of
# JSON; prints text, status 0 only if ok is true: a check's verdict and
# the figures it judged, from one filter
json_verdict() {
    local v
    v=$(json_get "$@" -c) || return 1
    jq -r .text <<<"$v"
    jq -e .ok <<<"$v" >/dev/null
}

# agent_json N: the status of node N's agent (the one serving that node's
# device), one JSON line; status non-zero when it does not answer
agent_json() {
    on "$1" bash -c "exec timeout 20 ${rvt_status:?lib.sh: rvt_status unset} --json --device=\$RXE_DEV" \
        2>/dev/null
}

# agent_get N FILTER [JQ_OPTION...]: json_get on node N's agent status
agent_get() {
    local js
    js=$(agent_json "$1") || return 1
    json_get "$js" "${@:2}"
}

# wait_agent N [SECONDS]: wait until node N's agent answers (default 10 s)
wait_agent() {
    local tries=$((${2:-10} * 10))
    while [ "$tries" -gt 0 ]; do
        agent_json "$1" >/dev/null && return 0
        sleep 0.1
        tries=$((tries - 1))
    done
    return 1
}

# agent_settle N [SECONDS]: wait (default 10 s) until node N's agent has
# finished with the clients that left: none attached, and the MRs of
# those that left without releasing them (a killed process, or the traffic
# client, which exits holding its MRs) deregistered. Sampled earlier, the
# agent would still hold some of them (seen: 4 MRs for about 0.5 s), and
# its figures would depend on timing. Status non-zero if it never does.
agent_settle() {
    local tries=$((${2:-10} * 10))
    while [ "$tries" -gt 0 ]; do
        agent_get "$1" '(.clients | length) == 0 and .data_path.gone_waiting == 0
            and .data_path.releases_waiting == 0' >/dev/null && return 0
        sleep 0.1
        tries=$((tries - 1))
    done
    return 1
}

# agent_sample N: node N's agent (testbed device rxeN) as one line
# "rss_kib fds mrs qps cqs attached": its resident memory and open fds
# (/proc), its device's MRs, QPs and CQs (`rdma resource`: everything in
# the agent's PD, its clients' MRs included) and its clients; "?" for
# what cannot be read
agent_sample() {
    local p rss fds res attached out rp _
    p=$(agent_pids "$1" | head -n 1)
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/${p:-0}/status" 2>/dev/null)
    fds=$(find "/proc/${p:-0}/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    # "1: rxe1: pd 3 cq 5 qp 9 cm_id 0 mr 12 ctx 0 srq 1", read for 20 s
    # at most, and never waited for beyond: a device stuck in the kernel
    # can hold rdma in a sleep no signal ends
    out=$(mktemp)
    rdma resource show >"$out" 2>/dev/null &
    rp=$!
    disown "$rp"
    for _ in $(seq 200); do
        kill -0 "$rp" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$rp" 2>/dev/null && { kill -KILL "$rp" 2>/dev/null; : >"$out"; }
    res=$(awk -v dev="rxe$1:" '$2 == dev {
        for (i = 3; i < NF; i += 2) v[$i] = $(i + 1)
        print v["mr"] + 0, v["qp"] + 0, v["cq"] + 0 }' "$out")
    rm -f "$out"
    attached=$(agent_get "$1" '.clients | length') || attached='?'
    [ -n "$p" ] || fds='?'
    echo "${rss:-?} $fds ${res:-? ? ?} $attached"
}

# agent_counters N: node N's agent's life totals, one line: "AMs writes
# write_bytes sent received", the AMs and writes with immediate it
# delivered to its clients and the bytes it posted to and received from
# the other nodes (loopback left out)
agent_counters() {
    agent_get "$1" '.data_path
        | [.peers[] | select(.loopback | not)] as $remote
        | [.delivered.am, .delivered.writes, .delivered.write_bytes,
           ($remote | map(.bytes) | add // 0),
           ($remote | map(.received_bytes) | add // 0)]
        | map(tostring) | join(" ")'
}

# counters_save N FILE: node N's agent_counters into FILE, for
# counters_delta (FILE left empty when the agent does not answer)
counters_save() {
    agent_counters "$1" >"$2"
}

# counters_delta N FILE: node N's agent_counters now less those saved in
# FILE, as "AMs writes write_bytes sent received"; nothing, and status
# non-zero, when the agent does not answer or FILE holds no counters
counters_delta() {
    local now am0 wr0 wb0 tx0 rx0 am1 wr1 wb1 tx1 rx1
    now=$(agent_counters "$1") && [ -n "$now" ] || return 1
    read -r am0 wr0 wb0 tx0 rx0 <"$2" && [ -n "$rx0" ] || return 1
    read -r am1 wr1 wb1 tx1 rx1 <<<"$now"
    echo $((am1 - am0)) $((wr1 - wr0)) $((wb1 - wb0)) $((tx1 - tx0)) $((rx1 - rx0))
}

# ---- the host-side wrappers' arguments -----------------------------------

# need_built BUILD HINT FILE...: each FILE exists under BUILD, or a failure
# naming the first missing one and HINT (how to build it); status 1
need_built() {
    local build=$1 hint=$2 f
    shift 2
    for f in "$@"; do
        [ -e "$build/$f" ] || { fail "$build/$f not built ($hint)"; return 1; }
    done
}

# check_minutes VALUE: a whole number of minutes, 1 or more, or a failure
# naming VALUE; status 2
check_minutes() {
    [[ $1 =~ ^[1-9][0-9]*$ ]] && return 0
    fail "--minutes '$1': expected a whole number of minutes, 1 or more"
    return 2
}

# ---- ucx_perftest between testbed nodes ---------------------------------

# perf_prerequisites BUILD (host side, from the source tree): rvt is
# built, and so is the UCT server's device alias (see the file: a test
# helper, not part of rvt, so it is built here rather than by make)
perf_prerequisites() {
    local build=$1 shim_src=test/testbed/perftest_dev_alias.cc shim
    need_built "$build" make src/uct/ib/rvt/tools/rvtd \
        src/uct/ib/rvt/tools/rvt-status \
        src/uct/ib/rvt/uct/.libs/libuct_rvt.so || return 1
    shim=$build/test/testbed/perftest_dev_alias.so
    if [ ! -f "$shim" ] || [ "$shim_src" -nt "$shim" ]; then
        if ! { mkdir -p "$(dirname "$shim")" &&
               ${CXX:-g++} -std=c++20 -O2 -Wall -Wextra -Werror -shared \
                   -fPIC -o "$shim" "$shim_src" -ldl; }; then
            fail "building $shim"
            return 1
        fi
    fi
}

# conformance_leg BUILD NAME GUEST ARG... (host side, from the source
# tree): UCX's gtest (contrib/ucx-gtest.sh builds it once) run by the guest
# script GUEST on one testbed node as `GUEST BUILD GTEST ARG...`; prints
# its output and the testbed time. Status 1 if anything failed.
# The reference transport's results (rc_verbs, UCP's rc_v) come from the
# cache when nothing they depend on has changed (reference_key), and are
# kept there after a run that made them: the guest finds them in
# BUILD/NAME-reference and runs only the rows it finds nothing for there.
# The guest script's output goes through a file ($build/NAME.out):
# printed straight to the testbed's console, it was lost after the UCT
# suite's first run (every line). The runner has since stopped its notes
# overwriting the guest's output in a shared log file, but that loss was
# seen through run-tests.sh's pipe, where that bug cannot happen: its
# cause is not known, so the file stays
conformance_leg() {
    local build=$1 name=$2 guest=$3 gtest_line out rc started=$SECONDS
    shift 3
    perf_prerequisites "$build" || return 1
    # UCX's gtest of the UCX this build is for (contrib/ucx-gtest.sh)
    # (Debian's in /usr, or a release setup-deps.sh built into the cache)
    local ucx_arg=()
    [ "$(make_var UCX_PREFIX)" = /usr ] ||
        ucx_arg=(--ucx="$(make_var UCX_VERSION)")
    gtest_line=$(contrib/ucx-gtest.sh "${ucx_arg[@]}") ||
        { fail "building UCX's gtest (contrib/ucx-gtest.sh ${ucx_arg[*]})"; return 1; }
    out=$build/$name.out
    rm -f "$out"
    local key refdir=$build/$name-reference cache
    key=$(reference_key "${gtest_line#GTEST=}" "$guest" "$@")
    cache=$rvt_cache/reference/$name-$key
    rm -rf "$refdir"
    mkdir -p "$refdir"
    if [ "$key" != none ] && [ -z "${RVT_FRESH_REFERENCE:-}" ] &&
        [ -d "$cache" ]; then
        cp -p "$cache"/* "$refdir"/ 2>/dev/null
        echo "reference results of $(find "$refdir" -name '*.counts' | wc -l) groups from the cache ($cache): RVT_FRESH_REFERENCE=1 runs them"
    fi
    contrib/testbed/testbed run -n 1 -t 7200 \
        "$guest $build ${gtest_line#GTEST=} $* >$out 2>&1"
    rc=$?
    # what the guest made is kept for the next run, whatever rvt did: a
    # reference row does not depend on rvt
    [ "$key" != none ] && keep_reference "$refdir" "$cache"
    if [ -f "$out" ]; then
        cat "$out"
    else
        fail "the guest script left no output ($out)"
        rc=1
    fi
    echo "$name suite: $((SECONDS - started)) s of testbed time, boot included"
    return $rc
}

# keep_reference REFDIR CACHE: the reference rows REFDIR holds, each
# ROW.GROUP.* that has its .counts (the guest writes it last, and only
# for a row that failed nothing), copied into CACHE beside what it holds.
# A run whose rvt rows failed still keeps them: rc_verbs' results do not
# depend on rvt, and without them the next run runs them again (the full
# UCT suite's 14 uncached groups cost about 15 minutes)
keep_reference() {
    local refdir=$1 cache=$2 counts row
    for counts in "$refdir"/*.counts; do
        [ -f "$counts" ] || continue
        row=${counts%.counts}
        mkdir -p "$cache" && cp -np "$row".* "$cache"/
    done
}

# the cache outside the clone (contrib/run-tests.sh, the testbed runner)
rvt_cache=${RVT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rvt}

# reference_key GTEST GUEST ARG...: a digest of what a conformance suite's
# reference rows depend on: UCX's gtest program and the stamp of its build
# (UCX's version, source and flags), the guest script (its cases and how
# it runs them), the testbed's kernel and what its initramfs holds, and
# the verbs packages the guest uses (the guest runs the host's root). Not
# rvt's build: the reference rows do not use rvt. The results are kept
# per group. For a run of every case (--all, --every-case) it is "none":
# those always run whole.
reference_key() {
    local gtest=$1 guest=$2 tb
    shift 2
    case " $* " in *" --all "* | *" --every-case "*) echo none; return ;; esac
    tb=$rvt_cache/testbed
    {
        sha256sum "$gtest" "$(dirname "$gtest")/../../.rvt-gtest" "$guest" \
            "$tb"/kernel/boot/vmlinuz-* 2>&1 |
            cut -d' ' -f1
        initramfs_digest "$tb/initramfs.gz"
        dpkg-query -W rdma-core ibverbs-providers libibverbs1 librdmacm1 2>&1
    } | sha256sum | cut -c1-16
}

# initramfs_digest FILE: a digest of what the initramfs holds, its files'
# names and contents, not of its bytes: the testbed builds it again in
# every fresh clone (its inputs are newer than the cached one there), and
# each build's archive differs from the last in its mtimes alone
initramfs_digest() {
    { zcat "$1" | cpio -t --quiet && zcat "$1" | cpio -i --to-stdout --quiet; } 2>&1 |
        sha256sum | cut -d' ' -f1
}

# make_var NAME: the value configure gave NAME in $build's Makefile
make_var() { sed -n "s/^$1 = //p" "$build/Makefile"; }

# mpi_build WRAPPER SOURCE OUTPUT: the MPI or SHMEM program SOURCE built
# into OUTPUT with WRAPPER (mpicxx, oshcxx), unless OUTPUT is newer than
# its sources; fails saying which package a missing wrapper comes from
mpi_build() {
    local cxx=$1 src=$2 out=$3
    command -v "$cxx" >/dev/null ||
        { fail "$cxx not found: install openmpi-bin and libopenmpi-dev (contrib/setup-deps.sh does)"; return 1; }
    mkdir -p "$(dirname "$out")"
    [ "$out" -nt "$src" ] && [ "$out" -nt test/common/check_pattern.h ] &&
        return 0
    # OMPI_SKIP_MPICXX: the programs use the C API; the old C++ bindings
    # do not compile warning-free
    "$cxx" -std=c++20 -O2 -Wall -Wextra -Werror -DOMPI_SKIP_MPICXX=1 \
        -o "$out" "$src" ||
        { fail "$cxx could not build $src"; return 1; }
}

# (guest side from here)

# agents_up SECONDS NODE...: rvtd on each NODE's device, staying
# (--linger=0) for at most SECONDS, its log in $work/rvtd.NODE.log; waits
# until each answers. Status 1, saying which, if one does not.
agents_up() {
    local secs=$1 n
    shift
    for n in "$@"; do
        on "$n" bash -c "exec timeout $secs $rvtd --device=\$RXE_DEV --linger=0" \
            >"$work/rvtd.$n.log" 2>&1 &
    done
    for n in "$@"; do
        wait_agent "$n" || { fail "rvtd on node $n does not answer"; return 1; }
    done
}

# perf_guest_setup SUITE BUILD: what a ucx_perftest suite in the guest
# shares: rvtd, rvt_status, module (libuct_rvt.so) and dev_alias paths;
# a job key of its own (so a leftover agent of another suite is never
# reused); `work`, a directory all nodes see (each has its own /tmp),
# removed at exit after the background jobs are stopped; t_start.
# shellcheck disable=SC2034 # the paths are for the suite that calls it
perf_guest_setup() {
    local suite=$1 build=$2
    rvtd=$build/src/uct/ib/rvt/tools/rvtd
    rvt_status=$build/src/uct/ib/rvt/tools/rvt-status
    module=$PWD/$build/src/uct/ib/rvt/uct/.libs/libuct_rvt.so
    dev_alias=$PWD/$build/test/testbed/perftest_dev_alias.so
    export RVT_JOB_KEY=$suite.$$
    work=$(mktemp -d "$PWD/$build/$suite.XXXXXX")
    trap perf_guest_cleanup EXIT
    t_start=$SECONDS
}
# module_env: the environment word that gives a process of the UCX this
# build is for ($build) the rvt module: UCX_PLUGIN_PATH=<its .libs> where
# that UCX loads plugins (configure's probe, UCX_LOADS_PLUGINS: 1.22),
# else LD_PRELOAD=<the module> (1.13, 1.16, 1.18); after perf_guest_setup
module_env() {
    if [ "$(make_var UCX_LOADS_PLUGINS)" = yes ]; then
        echo "UCX_PLUGIN_PATH=$PWD/$build/src/uct/ib/rvt/uct/.libs"
    else
        echo "LD_PRELOAD=$module"
    fi
}
# shellcheck disable=SC2317 # run by the EXIT trap
perf_guest_cleanup() {
    # each `on` wrapper's child is the timeout process in front of the
    # program; TERM to it is passed on
    local p
    for p in $(jobs -p); do pkill -TERM -P "$p" 2>/dev/null; done
    wait
    rm -rf "$work"
}

# indent LABEL: stdin, each line under "  LABEL| "
indent() { sed -u "s/^/  $1| /"; }

# section TITLE: a heading with the seconds since t_start
section() { echo; echo "--- $* (+$((SECONDS - ${t_start:-0})) s)"; }

# no process may hang a run: every ucx_perftest gets this long
T_PROC=${T_PROC:-120}
# the ucx_perftest to run (another UCX's: its bin/ucx_perftest), and
# words its servers get besides the port (UCX 1.22's UCT server keeps its
# own -d rather than its client's)
UCX_PERFTEST=${UCX_PERFTEST:-ucx_perftest}
perf_server_args=${perf_server_args:-}
# the TCP port of the next pair's rendezvous (each pair takes the next)
port=${port:-20000}
# what runs every ucx_perftest (empty, or "taskset -c 0": the vCPUs it
# may use)
perf_cpus=${perf_cpus:-}

# perf_pair OUT SERVER_NODE CLIENT_NODE "SERVER_ENV" "CLIENT_ENV" ARGS...:
# one ucx_perftest server and its client (ARGS); outputs in OUT.server and
# OUT.client. Status 0 only if both ended well.
perf_pair() {
    local out=$1 sn=$2 cn=$3 senv=$4 cenv=$5 spid rc src t0=$SECONDS
    shift 5
    port=$((port + 1))
    # the env lists are KEY=VALUE words without blanks: split on purpose
    # shellcheck disable=SC2086
    on "$sn" env $senv $perf_cpus timeout "$T_PROC" "$UCX_PERFTEST" -p "$port" \
        $perf_server_args >"$out.server" 2>&1 &
    spid=$!
    if ! wait-port "$port" 60 >"$out.client" 2>&1; then
        pkill -TERM -P "$spid"; wait "$spid"
        return 1
    fi
    # shellcheck disable=SC2086
    on "$cn" env $cenv $perf_cpus timeout "$T_PROC" "$UCX_PERFTEST" "node$sn" -p "$port" \
        "$@" >"$out.client" 2>&1
    rc=$?
    # a client that failed before its test may leave the server waiting
    [ $rc = 0 ] || pkill -TERM -P "$spid" 2>/dev/null
    wait "$spid"
    src=$?
    # shellcheck disable=SC2034 # for the caller: how long the pair took
    pair_secs=$((SECONDS - t0))
    # an error on either side fails the run, figure or not
    ! grep -q 'UCX  ERROR' "$out.client" "$out.server" &&
        [ $rc = 0 ] && [ $src = 0 ]
}

# figure OUT KIND: the client's final line as one figure: the median
# latency (lat tests, half a round trip) or the overall bandwidth
figure() {
    awk -v kind="$2" '/^Final:/ {
        if (kind == "lat") printf "%.1f us", $3
        else printf "%.2f MB/s", $7
        found = 1 }
        END { exit !found }' "$1.client"
}
# what went wrong, in at most 3 lines from both sides
error_text() {
    grep -h -E 'ERROR|[Ee]rror|failed|Cannot|not supported|larger|smaller|nothing listens|Terminated' \
        "$1.client" "$1.server" 2>/dev/null | sed 's/^\[[^]]*\] *\[[^]]*\] *//' |
        head -3 | tr '\n' ' '
}

# mpi_options HOSTFILE [MPIRUN_OPTION...]: sets the array mpirun_opts, the
# options under which mpirun runs a job over rvt across $mpi_hosts (by
# default node1 node2), $mpi_slots slots each (by default 4; HOSTFILE is
# written), with the options given added (how this UCX loads the module). What each option is for:
#  plm_rsh_agent            there is no ssh in the guest: `on N` instead
#                           (mpi-rsh-agent.sh)
#  plm_rsh_no_tree_spawn    only mpirun launches (the agent needs TB_*)
#  if_base_do_not_resolve   all nodes share one network namespace, so
#                           node2's address is also a local interface of
#                           node1: without this, mpirun takes node2 for
#                           itself and refuses the hostfile ("multiple
#                           definitions of the slot count for node1")
#  oob_tcp_if_include       out-of-band traffic over the nodes' addresses
#  pml ucx, pml_ucx_tls rvt Open MPI 4.1 selects pml ucx only if UCX
#  pml_ucx_devices any      offers a transport of its list (rc_verbs,...;
#                           "rvt" is not in it) on a device whose driver
#                           matches mlx*; rxe has neither
#  btl self                 pml ucx moves the messages; no other BTL
#  mpi_yield_when_idle      8 polling processes on 2 emulated cores
#  UCX_TLS=rvt,sm,self      rvt between the nodes, shared memory within
#                           ($mpi_tls if set, and pml_ucx_tls $mpi_pml_tls)
#  UCX_RVT_START_AGENT=n    use the agents the suite started, never another
#  RVT_JOB_KEY              theirs (exported by the caller)
mpi_options() {
    local hosts=$1
    shift
    local h
    : >"$hosts"
    # $mpi_hosts, $mpi_slots: the caller's nodes and ranks per node
    for h in ${mpi_hosts:-node1 node2}; do
        echo "$h slots=${mpi_slots:-4}" >>"$hosts"
    done
    # SC2034: the caller's; SC2054: commas in values (UCX_TLS=rvt,sm,self)
    # shellcheck disable=SC2034,SC2054
    mpirun_opts=(--hostfile "$hosts" --bind-to none
        --mca plm_rsh_agent "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/mpi-rsh-agent.sh"
        --mca plm_rsh_no_tree_spawn 1
        --mca if_base_do_not_resolve 1 --mca oob_tcp_if_include 198.18.0.0/24
        --mca pml ucx --mca pml_ucx_tls "${mpi_pml_tls:-rvt}"
        --mca pml_ucx_devices any
        --mca btl self --mca mpi_yield_when_idle 1
        -x UCX_RVT_START_AGENT=n -x RVT_JOB_KEY -x UCX_WARN_UNUSED_ENV_VARS=n)
    # mpi_tls=unset: UCX_TLS not set, UCP chooses (a suite's choice)
    [ "${mpi_tls:-}" = unset ] || mpirun_opts+=(-x UCX_TLS="${mpi_tls:-rvt,sm,self}")
    mpirun_opts+=("$@")
}

# node_of PID: the node PID runs on (pids are global in the guest, and
# `on N` puts RVT_NODE=N in the environment); nothing if PID has ended
node_of() {
    tr '\0' '\n' 2>/dev/null <"/proc/$1/environ" | sed -n 's/^RVT_NODE=//p'
}

# agent_pids N: the pids of node N's rvtd processes, one a line
agent_pids() {
    local p
    for p in $(pgrep -x rvtd); do
        [ "$(node_of "$p")" = "$1" ] && echo "$p"
    done
}

# cpu_ticks: the CPU time used so far, in clock ticks, as one line
# "all busy system softirq agent1 agent1_system agent2 agent2_system":
# the guest's, every vCPU's, idle or not, and busy (/proc/stat), and each
# node's rvtd's (its utime and stime). For cpu_report.
cpu_ticks() {
    local n p st ticks=(0 0 0) sys_ticks=(0 0 0)
    for n in 1 2; do
        for p in $(agent_pids "$n"); do
            read -r -a st <"/proc/$p/stat" 2>/dev/null || continue
            ticks[n]=$((ticks[n] + st[13] + st[14]))
            sys_ticks[n]=$((sys_ticks[n] + st[14]))
        done
    done
    awk -v a1="${ticks[1]}" -v s1="${sys_ticks[1]}" -v a2="${ticks[2]}" \
        -v s2="${sys_ticks[2]}" '/^cpu / {
        all = 0; for (i = 2; i <= NF; i++) all += $i
        print all, $2 + $3 + $4 + $7 + $8 + $9, $4, $8, a1, s1, a2, s2 }' /proc/stat
}

# agent_sched: how the kernel scheduled both nodes' agents so far, one
# line "oncpu_ns waited_ns slices sleeps preempted": the time they ran
# and the time they were runnable but waited for a CPU, the times they
# were given one (/proc/PID/schedstat), the times they slept and the
# times they were taken off a CPU with work to do (voluntary and
# nonvoluntary_ctxt_switches, /proc/PID/status). For sched_report.
agent_sched() {
    local n p run wait slices sleeps=0 preempted=0 sum=(0 0 0)
    for n in 1 2; do
        for p in $(agent_pids "$n"); do
            read -r run wait slices <"/proc/$p/schedstat" 2>/dev/null || continue
            sum=($((sum[0] + run)) $((sum[1] + wait)) $((sum[2] + slices)))
            sleeps=$((sleeps + $(awk '/^voluntary_ctxt_switches/ { print $2 }' "/proc/$p/status")))
            preempted=$((preempted + $(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' "/proc/$p/status")))
        done
    done
    echo "${sum[*]} $sleeps $preempted"
}

# sched_report BEFORE AFTER SECONDS: what the agents' scheduling cost
# between two agent_sched lines over a run of SECONDS, one line
sched_report() {
    awk -v b="$1" -v a="$2" -v s="$3" 'BEGIN {
        split(b, x, " "); split(a, y, " ")
        for (i = 1; i <= 5; i++) d[i] = y[i] - x[i]
        printf "agents on a vCPU %.0f ms, runnable and waiting for one %.0f ms (%.0f%% of the run), given one %d times (mean wait %.0f us), slept %d times, preempted %d times\n",
            d[1] / 1e6, d[2] / 1e6, (s > 0 ? 100 * d[2] / 1e9 / s : 0), d[3],
            (d[3] > 0 ? d[2] / d[3] / 1e3 : 0), d[4], d[5]
    }'
}

# cpu_report BEFORE AFTER MB: what the CPUs did between two cpu_ticks
# lines while MB megabytes moved, one line: the seconds that passed, the
# guest's busy CPU seconds, each agent's CPU seconds and its share of one
# vCPU, and (when agent 1 worked) the megabytes per CPU-second of node 1's
# agent, the senders' (rxe does a send's packet work in the ibv_post_send
# of the process that posts): what it could carry with a vCPU to itself
cpu_report() {
    awk -v b="$1" -v a="$2" -v mb="$3" -v hz="$(getconf CLK_TCK)" \
        -v ncpu="$(nproc)" 'BEGIN {
        split(b, x, " "); split(a, y, " ")
        for (i = 1; i <= 8; i++) d[i] = (y[i] - x[i]) / hz
        wall = d[1] / ncpu
        printf "%.1f s on %d vCPUs: busy %.1f CPU-s (system %.1f, softirq %.1f); agent 1 %.2f CPU-s (%.0f%% of a vCPU), agent 2 %.2f CPU-s (%.0f%%)",
            wall, ncpu, d[2], d[3], d[4], d[5], (wall > 0 ? 100 * d[5] / wall : 0),
            d[7], (wall > 0 ? 100 * d[7] / wall : 0)
        if (d[5] >= 0.1) printf "; %.0f MB per CPU-second of agent 1", mb / d[5]
        printf "\n"
    }'
}
