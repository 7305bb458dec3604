#!/usr/bin/env bash
# Runs linerate's ACME (RFC 8555) integration tests against Pebble, Let's Encrypt's test CA,
# and pebble-challtestsrv (the DNS server Pebble's validation authority asks): the ignored
# tests of crates/linerate/tests/acme.rs and acme_fleet.rs (three nodes sharing a [storage]
# dir or Redis; the Redis test needs redis-server), one at a time, with LINERATE_PEBBLE and
# LINERATE_CHALLTESTSRV naming the two binaries. The harness (tests/common/pebble.rs) starts
# both on 127.0.0.1 (free ports; challtestsrv answers every A query with 127.0.0.1, so Pebble
# validates HTTP-01 and TLS-ALPN-01 against the test's linerate) and stops them by PID.
#
#   scripts/acme.sh [TESTNAME_FILTER…]   arguments go to the test binary (after --ignored)
#   scripts/acme.sh --install-only       installs them, prints their two paths, runs nothing
#
# Both are installed into target/tools with `go install`, pinned to PEBBLE_VERSION below (the
# newest v2 tag the Go module proxy serves: `go list -m -versions github.com/letsencrypt/pebble/v2`;
# v2.10.1 needs Go >= 1.24, which `go install` fetches as a toolchain where GOTOOLCHAIN allows),
# and reinstalled only when missing or built from another version (`go version -m`). Exit 2,
# with a NOT RUN line saying why, where they cannot be had (no Go, the install failed); exit 1
# when a test fails or none ran; 0 with a one-line summary when all passed.
set -euo pipefail
cd "$(dirname "$0")/.."
PEBBLE_MODULE=github.com/letsencrypt/pebble/v2
PEBBLE_VERSION=v2.10.1
tools=$PWD/target/tools
pebble=$tools/pebble
challtestsrv=$tools/pebble-challtestsrv

say() { echo "acme: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

# pinned BIN: BIN exists and was built from $PEBBLE_MODULE at $PEBBLE_VERSION (its embedded
# build info: `go version -m`, or the same "mod" line found in the binary when there is no Go).
pinned() {
    [ -x "$1" ] || return 1
    local mod="mod[[:space:]]+${PEBBLE_MODULE//./\\.}[[:space:]]+${PEBBLE_VERSION//./\\.}([[:space:]]|\$)"
    if command -v go >/dev/null; then
        go version -m "$1" 2>/dev/null | grep -Eq "^[[:space:]]*$mod"
    else
        grep -aEq "$mod" "$1"
    fi
}

# The pinned pebble and pebble-challtestsrv in target/tools, installed when missing or another
# version.
install_pebble() {
    if pinned "$pebble" && pinned "$challtestsrv"; then
        return 0
    fi
    command -v go >/dev/null \
        || not_run "no pebble $PEBBLE_VERSION in $tools and no Go toolchain to install it with"
    mkdir -p "$tools"
    say "installing pebble and pebble-challtestsrv $PEBBLE_VERSION into $tools"
    GOBIN=$tools go install "$PEBBLE_MODULE/cmd/pebble@$PEBBLE_VERSION" \
        "$PEBBLE_MODULE/cmd/pebble-challtestsrv@$PEBBLE_VERSION" >"$tools/pebble-install.log" 2>&1 \
        || { cat "$tools/pebble-install.log" >&2; not_run "go install pebble@$PEBBLE_VERSION failed"; }
    pinned "$pebble" || not_run "go install succeeded but $pebble is missing or not $PEBBLE_VERSION"
    pinned "$challtestsrv" \
        || not_run "go install succeeded but $challtestsrv is missing or not $PEBBLE_VERSION"
}

install_pebble
if [ "${1:-}" = --install-only ]; then
    # scripts/fleet.sh's use: the pinned binaries, and nothing run.
    echo "$pebble $challtestsrv"
    exit 0
fi
command -v cargo >/dev/null || not_run "no cargo"

out=$(mktemp "${TMPDIR:-/tmp}/linerate-acme.XXXXXX")
trap 'rm -f "$out"' EXIT
status=0
LINERATE_PEBBLE=$pebble LINERATE_CHALLTESTSRV=$challtestsrv \
    cargo test --locked -p linerate --test acme --test acme_fleet -- --ignored --test-threads=1 "$@" 2>&1 \
    | tee "$out" || status=$?
# libtest's summary: "test result: ok. N passed; M failed; …".
# One summary per test binary (acme, acme_fleet): their sum.
passed=$(sed -nE 's/^test result: ok\. ([0-9]+) passed.*/\1/p' "$out" | awk '{ n += $1 } END { print n + 0 }')
if [ "$status" != 0 ]; then
    say "FAILED: pebble $PEBBLE_VERSION: cargo test exited $status (output above)"
    exit 1
fi
if [ -z "$passed" ] || [ "$passed" = 0 ]; then
    say "FAILED: pebble $PEBBLE_VERSION: no test ran (a filter that matches nothing?)"
    exit 1
fi
echo "acme: pebble $PEBBLE_VERSION: $passed tests passed"
