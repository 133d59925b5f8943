#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Every file of the project says its license, BSD-3-Clause, in its first
lines (an SPDX line), but for the data files whose format has no comment,
which LICENSE at the root covers; and LICENSE is the BSD 3-Clause text.

In a git checkout the files are git's; in a release tree (no .git), the
sources and scripts under src, test, contrib and docs, less what autogen
and configure make."""
import os
import subprocess
import sys

TAG = "SPDX-License-Identifier: BSD-3-Clause"
# formats with no comment: the figures of a recorded run (drawn and
# checked by test/tools/check-plots.sh), a measured table, the Debian
# changelog and source format, and debian/copyright, which names the
# license in its own format
NO_COMMENT = ("docs/plots/", "test/testbed/qp-table.rxe.json",
              "contrib/debian/debian/changelog",
              "contrib/debian/debian/source/format",
              "contrib/debian/debian/copyright", "LICENSE")
GENERATED = ("Makefile.in", "configure", "aclocal.m4", "libtool.m4",
             "ltoptions.m4", "ltsugar.m4", "ltversion.m4", "lt~obsolete.m4",
             "rvt_config.h.in")

top = os.path.abspath(os.path.join(os.path.dirname(sys.argv[0]), "..", ".."))


def project_files():
    try:
        out = subprocess.run(["git", "-C", top, "ls-files"], check=True,
                             capture_output=True, text=True).stdout
        return out.split()
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for part in ("src", "test", "contrib", "docs"):
        for d, subdirs, names in os.walk(os.path.join(top, part)):
            subdirs[:] = [s for s in subdirs if s not in ("aux", ".deps", ".libs")]
            for n in names:
                if n in GENERATED or n.endswith((".o", ".lo", ".la")):
                    continue
                files.append(os.path.relpath(os.path.join(d, n), top))
    return files


def main():
    bad = []
    files = project_files()
    for f in files:
        if f.startswith(NO_COMMENT):
            continue
        try:
            with open(os.path.join(top, f), encoding="utf-8") as fh:
                head = fh.read(600)
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # a binary (none is tracked today) or a removed file
        if TAG not in head:
            bad.append(f)
    lic = open(os.path.join(top, "LICENSE"), encoding="utf-8").read()
    if "BSD 3-Clause License" not in lic or "Neither the name" not in lic:
        bad.append("LICENSE: not the BSD 3-Clause text")
    for f in bad:
        print(f"FAIL: {f}: no '{TAG}' in its first lines")
    print(f"{'FAIL' if bad else 'PASS'}: {len(files) - len(bad)} of {len(files)} "
          f"files state BSD-3-Clause (or are data files LICENSE covers)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
