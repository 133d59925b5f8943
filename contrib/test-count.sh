# shellcheck shell=bash
# SPDX-License-Identifier: BSD-3-Clause
# How contrib/run-tests.sh counts a suite's log: sourced by it, and by its
# own test (test/tools/check-test-count.sh). A suite's verdicts are its
# lines "PASS: ...", "FAIL: ...", "ERROR: ...", "XPASS: ..." (automake: a
# test expected to fail that passed) and "SKIP: ...". Figures are printed
# as "FIGURE: ..." and are no test.
#
# count_log LOG RC: prints "PASSED FAILED SKIPPED" for the suite whose
# output is LOG and whose exit status was RC, and before that line, a
# "FAIL: ..." line for each verdict that the log alone would not show:
#   - a skip that no stated reason covers (skip_reason) fails;
#   - a suite that exited non-zero with no failure line is one failure;
#   - a suite that exited 0 with no PASS line ran no check: one failure.

# count_uid: the uid a skip's reason is judged for (the caller's; the
# test of this file sets it)
# skip_reason LINE: status 0, and the reason printed, when a stated reason
# covers the skip LINE ("SKIP: NAME..."); status 1 otherwise. These are
# the only skips allowed; on CI's machine (root, setup-deps.sh run) none
# applies, so every skip there fails.
skip_reason() {
    case $1 in
    "SKIP: unit "*)
        # test_attach_server's other-user case and test_runtime_dir's
        # chown case become another user: only root can
        if [ "${count_uid:-$EUID}" != 0 ]; then
            echo "the case needs root (it becomes another user); CI runs as root"
            return 0
        fi
        ;;
    "SKIP: test/tools/check-slurm-prolog.sh"*)
        # it runs the prolog as slurmd does: setpriv, chrt, a namespace
        if [ "${count_uid:-$EUID}" != 0 ]; then
            echo "it runs the Slurm prolog as root does; CI runs as root"
            return 0
        fi
        ;;
    "SKIP: test/tools/check-slurm-jobs.sh"*)
        # a one-node Slurm cluster on the host, with the plugin the build
        # makes when libslurm-dev is there (setup-deps.sh installs all)
        if [ "${count_uid:-$EUID}" != 0 ]; then
            echo "it runs a Slurm cluster, as root; CI runs as root"
            return 0
        fi
        local t
        for t in ${count_slurm_cmds:-slurmctld slurmd munged mungekey sbatch}; do
            if ! command -v "$t" >/dev/null; then
                echo "no $t here (setup-deps.sh installs Slurm and MUNGE)"
                return 0
            fi
        done
        if [ ! -e "${count_spank_h:-/usr/include/slurm/spank.h}" ]; then
            echo "no slurm/spank.h: spank_rvt.so not built (setup-deps.sh installs libslurm-dev)"
            return 0
        fi
        ;;
    "SKIP: test/tools/check-modulefile.sh"*)
        if ! command -v "${count_tclsh:-tclsh}" >/dev/null; then
            echo "no tclsh to read the modulefile (setup-deps.sh installs tcl)"
            return 0
        fi
        ;;
    esac
    return 1
}

count_log() {
    local log=$1 rc=$2 p f s line reason
    p=$(grep -cE '^PASS: ' "$log")
    f=$(grep -cE '^(FAIL|ERROR|XPASS): ' "$log")
    s=0
    while IFS= read -r line; do
        s=$((s + 1))
        if ! reason=$(skip_reason "$line"); then
            echo "FAIL: a skip no stated reason covers: ${line#SKIP: }"
            f=$((f + 1))
        else
            echo "  allowed skip (${line#SKIP: }): $reason"
        fi
    done < <(grep -E '^SKIP: ' "$log")
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
        echo "FAIL: exit status $rc with no failure line (crashed, timed out?)"
        f=1
    elif [ "$rc" = 0 ] && [ "$p" = 0 ] && [ "$f" = 0 ]; then
        echo "FAIL: exit status 0 with no PASS line: no check ran"
        f=1
    fi
    echo "$p $f $s"
}

# gtest_cases LOG...: GoogleTest's output as one verdict line per case:
# "[       OK ] NAME (N ms)" a PASS, "[  FAILED  ] NAME[, where ...] (N ms)"
# a FAIL (a parameterised case names its parameter before the time; the
# closing list of failures has no time and is no second failure),
# "[  SKIPPED ] NAME (N ms)" a SKIP
gtest_cases() {
    awk '/^\[       OK \]/ { print "PASS: unit " $4 }
         /^\[  FAILED  \] [^ ,]+(, where .*)? \([0-9]+ ms\)$/ {
             n = $4; sub(/,$/, "", n); print "FAIL: unit " n }
         /^\[  SKIPPED \] [^ ,]+(, where .*)? \([0-9]+ ms\)$/ {
             n = $4; sub(/,$/, "", n); print "SKIP: unit " n }' "$@"
}

# without_gtest_binaries LOG BINARY...: LOG less automake's PASS line for
# each BINARY, whose cases are counted one by one (gtest_cases): a binary
# that passed is not one more test. Its FAIL line stays: a crash or a
# failure outside any case.
without_gtest_binaries() {
    local log=$1 b re=''
    shift
    for b in "$@"; do re+="${re:+|}$b"; done
    grep -vxE "PASS: ($re)" "$log"
}

# forget_test_logs DIR TEST...: remove automake's log and result of each
# TEST under DIR before make check, so that the log of a test no longer
# built (GoogleTest missing, a configure option) is not counted again
forget_test_logs() {
    local dir=$1 t
    shift
    for t in "$@"; do rm -f "$dir/$t.log" "$dir/$t.trs"; done
}
