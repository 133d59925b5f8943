#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# contrib/setup-deps.sh --ucx=1.22.0 finds UCX's release tarball without
# anything beside the clone: a local copy first (RVT_UCX_TARBALL, the
# shared copy beside the clone, the cache's), else it fetches the release
# into the cache, pinned by its sha256. Here the network is a python3 HTTP
# server on 127.0.0.1 serving a copy of the real tarball and a corrupted
# one (RVT_UCX_URL), the cache a temporary RVT_CACHE, and setup-deps runs
# with --fetch-only: no packages, no UCX build.
#
# Needs the real tarball: the shared copy beside the clone
# (../shared/deps/ucx-1.22.0.tar.gz) or the cache's
# ($RVT_CACHE/ucx-1.22.0.tar.gz); SKIP (77) without it or without python3.
set -u
top=${abs_top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
ver=1.22.0
name=ucx-$ver.tar.gz
real=
for f in "$top/../shared/deps/$name" \
    "${RVT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rvt}/$name"; do
    if [ -f "$f" ]; then
        real=$f
        break
    fi
done
if [ -z "$real" ]; then
    echo "SKIP: no copy of $name beside the clone or in the cache to serve"
    exit 77
fi
command -v python3 >/dev/null || {
    echo "SKIP: python3 is not installed"
    exit 77
}

work=$(mktemp -d "${TMPDIR:-/tmp}/rvt-check-ucx-fetch.XXXXXX") || exit 99
server=
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null &&
        wait "$server" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
failed=0
pass() { echo "PASS: $*"; }
fail() {
    echo "FAIL: $*"
    failed=1
}

# A clone with nothing beside it: setup-deps looks for the shared copy at
# ../shared/deps from the clone's top, here $work/shared/deps.
mkdir -p "$work/clone/contrib" "$work/www/good" "$work/www/bad" \
    "$work/www/regz" || exit 99
# the same tar under another gzip: the pin is the tar's
gzip -dc "$real" | gzip -1 >"$work/www/regz/$name" || exit 99
cp "$top/contrib/setup-deps.sh" "$work/clone/contrib/" || exit 99
cp "$real" "$work/www/good/$name" || exit 99
cp "$real" "$work/www/bad/$name" || exit 99
# one byte changed in the middle: still a gzip file's size and name
python3 - "$work/www/bad/$name" <<'EOF' || exit 99
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(100000)
    b = f.read(1)
    f.seek(100000)
    f.write(bytes([b[0] ^ 0xff]))
EOF

python3 -u -m http.server --bind 127.0.0.1 --directory "$work/www" 0 \
    >"$work/server.log" 2>&1 &
server=$!
port=
for _ in $(seq 100); do
    port=$(sed -n 's/^Serving HTTP on .* port \([0-9]*\).*/\1/p' \
        "$work/server.log")
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then
    echo "FAIL: the HTTP server did not start:"
    cat "$work/server.log"
    exit 1
fi
base=http://127.0.0.1:$port
export no_proxy=127.0.0.1 NO_PROXY=127.0.0.1

# fetch CACHE URL: setup-deps --fetch-only; its status, stdout in
# $work/out, stderr in $work/err
fetch() {
    env -u RVT_UCX_TARBALL RVT_CACHE="$1" RVT_UCX_URL="$2" \
        "$work/clone/contrib/setup-deps.sh" --ucx=$ver --fetch-only \
        >"$work/out" 2>"$work/err"
}
requests() { grep -c "\"GET /$1 " "$work/server.log"; }
shows() { # shows WHAT FILE TEXT...: FILE contains every TEXT
    local what=$1 file=$2 text
    shift 2
    for text in "$@"; do
        grep -qF -- "$text" "$file" || {
            fail "$what: does not say '$text':"
            cat "$file"
            return 1
        }
    done
}

# 1. nothing local: the release is fetched, checked and kept in the cache
c1=$work/cache1
if fetch "$c1" "$base/good/$name" &&
    grep -qx "UCX_TARBALL=$c1/$name" "$work/out" &&
    cmp -s "$c1/$name" "$real" && [ "$(requests "good/$name")" = 1 ]; then
    pass "fetched from $base/good/$name into the cache, sha256 checked"
else
    fail "fetch into an empty cache (status, stdout, stderr):"
    cat "$work/out" "$work/err"
fi

# 2. the cached copy is used: no request, even where nothing is served
if fetch "$c1" "$base/none/$name" &&
    grep -qx "UCX_TARBALL=$c1/$name" "$work/out" &&
    [ "$(requests "none/$name")" = 0 ]; then
    pass "the cache's copy is used without fetching"
else
    fail "second run did not use the cache:"
    cat "$work/out" "$work/err"
fi

# 2b. the same tar compressed by another gzip is the same release
cr=$work/cache-regz
if fetch "$cr" "$base/regz/$name" &&
    grep -qx "UCX_TARBALL=$cr/$name" "$work/out"; then
    pass "the same tar under another gzip is accepted (the pin is the tar's)"
else
    fail "a recompressed copy of the release was refused:"
    cat "$work/out" "$work/err"
fi

# 3. a corrupted download is refused, names the settings, keeps nothing
c2=$work/cache2
if fetch "$c2" "$base/bad/$name"; then
    fail "a tarball with another sha256 was accepted: $(cat "$work/out")"
elif shows "refusal of a corrupted download" "$work/err" \
    "sha256 is" "expected" "refusing what $base/bad/$name served" \
    RVT_UCX_TARBALL RVT_UCX_URL; then
    if compgen -G "$c2/ucx-*" >/dev/null; then
        fail "the refused download was left in the cache: $(ls "$c2")"
    else
        pass "a corrupted download is refused and not kept:" \
            "$(grep error "$work/err")"
    fi
fi

# 4. nothing to fetch: the refusal names the settings
c3=$work/cache3
if fetch "$c3" "$base/none/$name"; then
    fail "nothing was served, yet: $(cat "$work/out")"
elif shows "refusal with nothing to fetch" "$work/err" \
    "no UCX $ver source: cannot fetch $base/none/$name" \
    RVT_UCX_TARBALL RVT_UCX_URL "$c3/$name"; then
    if compgen -G "$c3/ucx-*" >/dev/null; then
        fail "a failed fetch left a file in the cache: $(ls "$c3")"
    else
        pass "nothing to fetch: $(grep error "$work/err")"
    fi
fi

# 5. a corrupted copy in the cache is not used: fetched again
cp "$work/www/bad/$name" "$c3/$name"
if fetch "$c3" "$base/good/$name" && cmp -s "$c3/$name" "$real" &&
    grep -q "removing $c3/$name" "$work/err"; then
    pass "a cached copy with another sha256 is replaced by a fetched one"
else
    fail "corrupted cached copy:"
    cat "$work/out" "$work/err"
fi

# 6. the shared copy beside the clone comes before the cache and the
# network, and is checked too
mkdir -p "$work/shared/deps"
cp "$real" "$work/shared/deps/$name"
before=$(requests "good/$name")
if fetch "$c2" "$base/good/$name" &&
    grep -qx "UCX_TARBALL=$work/shared/deps/$name" "$work/out" &&
    [ "$(requests "good/$name")" = "$before" ] && [ ! -e "$c2/$name" ]; then
    pass "the shared copy beside the clone is used, nothing fetched"
else
    fail "shared copy:"
    cat "$work/out" "$work/err"
fi
cp "$work/www/bad/$name" "$work/shared/deps/$name"
if fetch "$c2" "$base/good/$name"; then
    fail "a corrupted shared copy was used: $(cat "$work/out")"
else
    shows "corrupted shared copy" "$work/err" "$work/shared/deps/$name" \
        "sha256 is" && pass "a corrupted shared copy is refused"
fi

# 7. RVT_UCX_TARBALL comes first, taken as it is
if RVT_CACHE=$c2 RVT_UCX_URL=$base/none/$name \
    RVT_UCX_TARBALL=$work/www/good/$name \
    "$work/clone/contrib/setup-deps.sh" --ucx=$ver --fetch-only \
    >"$work/out" 2>"$work/err" &&
    grep -qx "UCX_TARBALL=$work/www/good/$name" "$work/out"; then
    pass "RVT_UCX_TARBALL comes first"
else
    fail "RVT_UCX_TARBALL:"
    cat "$work/out" "$work/err"
fi

exit $failed
