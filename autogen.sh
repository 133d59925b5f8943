#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Generate configure and Makefile.in from a git checkout.  Needs autoconf,
# automake, libtool, pkg-config and autoconf-archive (contrib/setup-deps.sh).
set -e
cd "$(dirname "$0")"
autoreconf -fi
