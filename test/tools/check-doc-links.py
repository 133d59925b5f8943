#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Every link inside README.md and docs/*.md leads somewhere.

For each Markdown link or image `[text](target)` (outside code): a
relative target must be an existing file or directory of the tree, and an
anchor (`#anchor` in the same page, `file.md#anchor` in another) must be
the slug of one of that page's headings by GitHub's rules: the heading's
text lowercased, backticks and punctuation other than `-` and `_` dropped,
each space a `-`; a repeated slug gets `-1`, `-2`, ... Links to http(s)
and mailto are not followed.

The source's references into docs/ are links too: each "docs/design.md
part N" (or "parts N and M") in src/, test/ and contrib/ must name a
heading "N. ..." of docs/design.md, and each 'docs/NAME.md, "Section"'
written on one line a heading of that document.

Usage: check-doc-links.py [FILE.md...] (default: README.md and docs/*.md
of abs_top_srcdir, or of the tree this script is in).
"""
import glob
import os
import re
import sys

top = os.environ.get("abs_top_srcdir") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "../.."))


def prose_lines(path):
    """The file's lines outside fenced code blocks, inline code blanked."""
    fenced = False
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if re.match(r"^\s*(```|~~~)", line):
            fenced = not fenced
            continue
        if fenced:
            continue
        yield n, re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line)


def headings(path):
    """The text of each heading of a Markdown file, as GitHub shows it:
    links reduced to their text, backticks dropped."""
    out = []
    fenced = False
    for line in open(path, encoding="utf-8"):
        if re.match(r"^\s*(```|~~~)", line):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))
            out.append(text.replace("`", ""))
    return out


def slugs(path):
    out, seen = set(), {}
    for text in headings(path):
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        if slug in seen:
            seen[slug] += 1
            out.add("%s-%d" % (slug, seen[slug]))
        else:
            seen[slug] = 0
            out.add(slug)
    return out


def source_references():
    """(failed, checked) for the docs/ references in the source's comments."""
    failed = checked = 0
    ref = re.compile(r'docs/([a-z]+)\.md(?: parts? ([0-9]+)(?: and ([0-9]+))?'
                     r'|, "([^"]+)")')
    for sub in ("src", "test", "contrib"):
        for root, _, names in os.walk(os.path.join(top, sub)):
            for name in names:
                path = os.path.join(root, name)
                try:
                    text = open(path, encoding="utf-8").read()
                except (UnicodeDecodeError, OSError):
                    continue
                if "docs/" not in text:
                    continue
                for n, line in enumerate(text.splitlines(), 1):
                    for m in ref.finditer(line):
                        doc = os.path.join(top, "docs", m.group(1) + ".md")
                        where = "%s:%d: %s" % (os.path.relpath(path, top), n,
                                               m.group(0))
                        checked += 1
                        if not os.path.exists(doc):
                            print("FAIL: %s: no such document" % where)
                            failed += 1
                            continue
                        heads = headings(doc)
                        if m.group(4):
                            wanted = [m.group(4)]
                            found = [h for h in wanted if h in heads]
                        else:
                            wanted = [p for p in m.group(2, 3) if p]
                            found = [p for p in wanted
                                     if any(h.startswith(p + ". ")
                                            for h in heads)]
                        for w in wanted:
                            if w not in found:
                                print("FAIL: %s: no heading %s in docs/%s.md"
                                      % (where, w if m.group(4) else
                                         "'%s. ...'" % w, m.group(1)))
                                failed += 1
    return failed, checked


def main(files):
    failed = 0
    checked = 0
    cache = {}
    for path in files:
        rel = os.path.relpath(path, top)
        for n, line in prose_lines(path):
            for m in re.finditer(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?[^)]*\)",
                                 line):
                target = m.group(1)
                if re.match(r"^[a-z]+:", target):
                    continue
                checked += 1
                file_part, _, anchor = target.partition("#")
                dest = path if file_part == "" else os.path.normpath(
                    os.path.join(os.path.dirname(path), file_part))
                where = "%s:%d: %s" % (rel, n, target)
                if not os.path.exists(dest):
                    print("FAIL: %s: no such file %s"
                          % (where, os.path.relpath(dest, top)))
                    failed += 1
                    continue
                if anchor:
                    if not dest.endswith(".md"):
                        print("FAIL: %s: an anchor into a file that is not "
                              "Markdown" % where)
                        failed += 1
                        continue
                    if dest not in cache:
                        cache[dest] = slugs(dest)
                    if anchor not in cache[dest]:
                        print("FAIL: %s: no heading of %s has the anchor #%s"
                              % (where, os.path.relpath(dest, top), anchor))
                        failed += 1
    f, c = source_references()
    failed += f
    checked += c
    if failed:
        print("FAIL: %d of %d links in %d files lead nowhere"
              % (failed, checked, len(files)))
    else:
        print("PASS: %d links in %d files lead to a file and heading"
              % (checked, len(files)))
    return 1 if failed else 0


if __name__ == "__main__":
    args = sys.argv[1:] or [os.path.join(top, "README.md")] + sorted(
        glob.glob(os.path.join(top, "docs", "*.md")))
    sys.exit(main([os.path.abspath(a) for a in args]))
