#!/usr/bin/env bash
# Runs linerate's ACME (RFC 8555) integration tests against Pebble, Let's Encrypt's test CA,
# and pebble-challtestsrv (the DNS server Pebble's validation authority asks): the ignored
# tests of crates/linerate/tests/acme.rs and acme_fleet.rs (three nodes sharing a [storage]
# dir or Redis; the Redis test needs redis-server), one at a time, with LINERATE_PEBBLE and
# LINERATE_CHALLTESTSRV naming the two binaries. The harness (tests/common/pebble.rs) starts
# both on 127.0.0.1 (free ports; challtestsrv answers every A query with 127.0.0.1, so Pebble
# validates HTTP-01 and TLS-ALPN-01 against the test's linerate) and stops them by PID.
# Then DNS-01 (crates/linerate/tests/acme_dns.rs): BIND 9's named as the zone's primary
# (tests/common/bind.rs starts it unprivileged on a free port) taking RFC 2136 updates signed
# with TSIG, and Pebble resolving `_acme-challenge` through it; named, tsig-keygen and dig come
# from Debian's bind9, bind9-utils and bind9-dnsutils (installed here with apt-get where
# missing and allowed; else the DNS-01 tests are NOT RUN and the script exits 2 after the
# others).
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

# named, tsig-keygen and dig (PATH or /usr/sbin); apt-get install when missing and root.
have_bind() {
    local p
    for p in named tsig-keygen dig; do
        PATH=$PATH:/usr/sbin command -v "$p" >/dev/null || return 1
    done
}
bind_missing=""
if ! have_bind; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        say "installing bind9, bind9-utils, bind9-dnsutils"
        apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends \
            bind9 bind9-utils bind9-dnsutils >&2 || true
    fi
    have_bind || bind_missing="named, tsig-keygen or dig is missing (apt-get install bind9 bind9-utils bind9-dnsutils)"
fi

command -v cargo >/dev/null || not_run "no cargo"
tests=(--test acme --test acme_fleet)
[ -n "$bind_missing" ] || tests+=(--test acme_dns)

out=$(mktemp "${TMPDIR:-/tmp}/linerate-acme.XXXXXX")
trap 'rm -f "$out"' EXIT
status=0
LINERATE_PEBBLE=$pebble LINERATE_CHALLTESTSRV=$challtestsrv \
    cargo test --locked -p linerate "${tests[@]}" -- --ignored --test-threads=1 "$@" 2>&1 \
    | tee "$out" || status=$?
# libtest's summary, one per test binary: "test result: ok. N passed; M failed; …".
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
[ -z "$bind_missing" ] || not_run "DNS-01 through bind9: $bind_missing"
