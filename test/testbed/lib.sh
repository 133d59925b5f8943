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
