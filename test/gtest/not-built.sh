#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Stands in for the unit tests when configure found no GoogleTest (or was
# given --disable-gtest), so `make check` reports a SKIP instead of passing.
echo "GoogleTest missing or disabled at configure time: unit tests NOT built." >&2
echo "Install googletest and libgtest-dev (contrib/setup-deps.sh), re-run configure." >&2
exit 77
