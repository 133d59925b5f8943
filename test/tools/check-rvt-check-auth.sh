#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rvt-check's auth line says what rvtd --auth=auto would do on this node,
# without a device: munged that does not answer (a socket nobody serves)
# and no secret is a "no" quoting rvtd's refusal; a secret file of mode
# 600 is a "yes, secret"; one others can read is a "no" naming its mode.
set -u
build=${abs_top_builddir:-$(cd "$(dirname "$0")/../.." && pwd)/build}
tool=$build/src/uct/ib/rvt/tools/rvt-check
work=$(mktemp -d "${TMPDIR:-/tmp}/rvt-check-auth.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
failed=0
# auth_line [ENV...]: rvt-check's auth check as "yes|no DETAIL"
auth_line() {
    env -u RVT_JOB_SECRET -u RVT_JOB_SECRET_FILE "$@" "$tool" --json \
        --device=rvt-check-auth-no-such-device \
        --munge-socket="$work/no-munged" 2>/dev/null |
        jq -r '.checks[] | select(.name == "auth")
            | "\(if .ok then "yes" else "no" end) \(.detail)"'
}
# expect WHAT PATTERN [ENV...]: the auth line matches PATTERN (grep -E)
expect() {
    local what=$1 pattern=$2 line
    shift 2
    line=$(auth_line "$@")
    if grep -qE "$pattern" <<<"$line"; then
        echo "PASS: $what: $line"
    else
        echo "FAIL: $what: expected /$pattern/, got: ${line:-nothing}"
        failed=1
    fi
}
expect "no munged, no secret: rvtd would refuse, saying how" \
    '^no rvtd would refuse to start: --auth=auto: no way to prove peers: .*RVT_JOB_SECRET_FILE'
umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/secret"
expect "a secret file of mode 600: secret" '^yes secret' \
    RVT_JOB_SECRET_FILE="$work/secret"
chmod 644 "$work/secret"
expect "a secret file others can read: refused naming its mode" \
    '^no rvtd would refuse to start: .*mode 644' \
    RVT_JOB_SECRET_FILE="$work/secret"
exit $failed
