#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The manual pages the build made (rvtd.8, rvt-check.8, rvt-status.1) say what the
# programs' --help says: the same options, none missing and none extra,
# each with the default --help shows; the page is for the program and
# section its file name says; and groff renders it without a warning,
# every option visible in the rendered OPTIONS section.
#
# Run by `make check` (abs_top_builddir, abs_top_srcdir); `all` built the
# pages.
set -u
: "${abs_top_builddir:?run from make check}" "${abs_top_srcdir:?}"
tools=$abs_top_builddir/src/uct/ib/rvt/tools
work=$(mktemp -d "${TMPDIR:-/tmp}/rvt-check-man.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
failed=0
fail() {
    echo "FAIL: $*"
    failed=1 page_failed=1
}

# help_rows PROG: "--LABEL<TAB>text" per option --help lists, its wrapped
# lines joined
help_rows() {
    "$tools/$1" --help | awk -f "$abs_top_srcdir/test/tools/help-entries.awk" |
        sed -E 's/^  (--[^ ]+(, -h)?) +/\1\t/' | sort
}

# page_rows PAGE: the same from the page's .TP paragraphs (tag, then
# text), roff escapes and font changes undone
page_rows() {
    awk '/^\.TP$/ { getline tag; getline text; print tag "\t" text }' "$1" |
        sed -E 's/\\f[BIR]//g; s/\\-/-/g; s/\\e/\\/g; s/\\&//g' | sort
}

names() { sed -E 's/^--([a-z0-9-]+).*/\1/' "$1" | sort -u; }

check_page() {
    local prog=$1 section=$2 page=$tools/$1.$2 th
    page_failed=0
    if [ ! -s "$page" ]; then
        fail "$prog: no manual page $page (make all builds it)"
        return
    fi
    th=${prog^^}
    if ! grep -qF ".TH ${th//-/\\-} $section " "$page"; then
        fail "$prog: $page: no '.TH ${th//-/\\-} $section' line"
    fi
    help_rows "$prog" >"$work/help"
    page_rows "$page" >"$work/page"
    if [ ! -s "$work/help" ]; then
        fail "$prog: --help lists no options"
        return
    fi
    local missing extra
    names "$work/help" >"$work/help.names"
    names "$work/page" >"$work/page.names"
    missing=$(comm -23 "$work/help.names" "$work/page.names" | tr '\n' ' ')
    extra=$(comm -13 "$work/help.names" "$work/page.names" | tr '\n' ' ')
    [ -z "$missing" ] || fail "$prog: $page lacks options --help lists: $missing"
    [ -z "$extra" ] || fail "$prog: $page has options --help does not list: $extra"
    # and each says the same: value name, meaning, default
    if [ -z "$missing$extra" ] && ! diff "$work/help" "$work/page" >"$work/diff"; then
        fail "$prog: $page and --help describe options differently" \
            "(< --help, > page):"
        cat "$work/diff"
    fi

    if command -v groff >/dev/null; then
        if ! groff -man -Tascii -ww -z "$page" 2>"$work/warn" ||
            [ -s "$work/warn" ]; then
            fail "$prog: groff warns about $page: $(cat "$work/warn")"
        fi
        groff -man -Tascii -P-cbou "$page" 2>/dev/null |
            sed -n '/^OPTIONS/,/^[A-Z]/p' |
            sed -nE 's/^ +--([a-z0-9-]+).*/\1/p' | sort -u >"$work/shown"
        missing=$(comm -23 "$work/help.names" "$work/shown" | tr '\n' ' ')
        [ -z "$missing" ] ||
            fail "$prog: rendered $page does not show: $missing"
    else
        echo "NOTE: no groff: $page not rendered"
    fi
    [ $page_failed = 1 ] ||
        echo "PASS: $prog.$section: the $(wc -l <"$work/help") options of" \
            "--help, each described alike"
}

check_page rvtd 8
check_page rvt-status 1
check_page rvt-check 8
exit $failed
