#!/usr/bin/env bash
# Runs every check linerate's CI runs: formatting, clippy, the fuzz targets (built and replayed
# over their seed corpus), all tests, a throwaway PostgreSQL 15 started, seeded and checked
# (scripts/pg.sh selftest), the Http11Probe conformance suite against the demo server
# (scripts/conformance.sh), h2spec in strict mode against its h2c and TLS listeners
# (scripts/h2spec.sh), PROXY protocol v1 and v2 (plain and TLS) behind Debian's HAProxy, the
# client's address checked in the access log and an access rule (scripts/proxy-protocol.sh),
# automatic HTTPS against Let's Encrypt's test CA Pebble (scripts/acme.sh; `go install`s
# Pebble into target/tools),
# headless Chromium loading browser URLs (scripts/browser.sh) and reading server-sent events,
# headless Chromium forced onto QUIC loading a page of 20 assets, every request logged as
# HTTP/3.0 (scripts/h3-browser.sh), aioquic's HTTP/3 client against --quic, its answers
# compared with HTTP/1.1's and HTTP/2's, HttpArena's static-h3 files and baseline-h3 sums
# among them (scripts/h3-interop.sh; pip installs aioquic where missing), HTTP/3 connections
# that move to new source ports, routed to their worker (scripts/h3-migrate.sh), HTTP/3 through a
# lossy link between two network namespaces (scripts/h3-netem.sh; netem, or a UDP relay where
# the kernel has none) and under attack (scripts/h3-attacks.sh), Python's websockets client
# through the proxy (scripts/ws-proxy.sh; pip installs it into target/), the gateway shape of
# docs/gateway/ with HttpArena's gateway-64 checks (scripts/gateway.sh), systemd-analyze verify
# on dist/'s units, the Debian package built with cargo-deb (pinned, `cargo install`ed into
# target/tools) and installed into a clean root (scripts/deb.sh), and the kTLS checks in a VM
# (scripts/ktls-vm.sh). Needs a Rust toolchain;
# the h2spec stage installs h2spec with `go install` into target/tools; the PROXY protocol
# stage installs haproxy with apt when missing; the Debian package stage dpkg-dev and a
# systemd-sysusers where missing; the VM stage installs QEMU, busybox-static,
# cpio and kmod with apt and fetches a Debian kernel package where it can. Each says loudly
# (without failing) where it cannot.
# Servers started by tests bind 127.0.0.1 on OS-chosen ports (the VM's, its own loopback).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all --check

echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== fuzz targets: build and replay the seed corpus"
fuzz/build.sh
bin=""
for dir in "${CARGO_TARGET_DIR:-fuzz/target}" fuzz/target; do
    for sub in x86_64-unknown-linux-gnu/release release; do
        if [ -z "$bin" ] && [ -x "$dir/$sub/parse_request" ]; then bin="$dir/$sub"; fi
    done
done
[ -n "$bin" ] || { echo "fuzz targets were not built" >&2; exit 1; }
"$bin/parse_request" fuzz/corpus/parse_request/* >/dev/null 2>&1
"$bin/parse_chunked" fuzz/corpus/parse_chunked/* >/dev/null 2>&1
"$bin/parse_response" fuzz/corpus/parse_response/* >/dev/null 2>&1
"$bin/hpack_decode" fuzz/corpus/hpack_decode/* >/dev/null 2>&1
"$bin/ws_frames" fuzz/corpus/ws_frames/* >/dev/null 2>&1
"$bin/parse_proxy_header" fuzz/corpus/parse_proxy_header/* >/dev/null 2>&1
"$bin/h3_frames" fuzz/corpus/h3_frames/* >/dev/null 2>&1
"$bin/qpack_decode" fuzz/corpus/qpack_decode/* >/dev/null 2>&1
echo "fuzz targets replayed $(ls fuzz/corpus/parse_request | wc -l) + $(ls fuzz/corpus/parse_chunked | wc -l) + $(ls fuzz/corpus/parse_response | wc -l) + $(ls fuzz/corpus/hpack_decode | wc -l) + $(ls fuzz/corpus/parse_proxy_header | wc -l) + $(ls fuzz/corpus/ws_frames | wc -l) + $(ls fuzz/corpus/h3_frames | wc -l) + $(ls fuzz/corpus/qpack_decode | wc -l) seeds"

# The database tests (crates/linerate/tests/database.rs, crates/postgres/tests/) start their own
# throwaway PostgreSQL 15 with scripts/pg.sh; where it cannot run they fail saying so.
echo "== cargo test"
cargo test --workspace --locked

# The SSE tests read events with curl -N and headless Chromium's EventSource; a client that is
# missing makes its test print NOT RUN (which cargo test hides), so they run again here, shown.
echo "== server-sent events with real clients (curl -N, Chromium EventSource)"
sse_out=$(cargo test --locked -p linerate-server --test sse -- --nocapture --test-threads 1 2>&1) \
    || { echo "$sse_out"; exit 1; }
if grep -q "NOT RUN" <<<"$sse_out"; then
    grep "NOT RUN" <<<"$sse_out"
else
    echo "sse: curl -N and Chromium EventSource read the events"
fi

# Chromium's WebSocket client: a missing browser prints NOT RUN in its test, shown here.
echo "== WebSocket with a real browser (Chromium's WebSocket, headless)"
ws_out=$(cargo test --locked -p linerate-server --test websocket chromium -- --nocapture 2>&1) \
    || { echo "$ws_out"; exit 1; }
if grep -q "NOT RUN" <<<"$ws_out"; then
    grep "NOT RUN" <<<"$ws_out"
else
    echo "websocket: Chromium opened, echoed text and binary, and closed cleanly (1000)"
fi
ws_out=$(cargo test --locked -p linerate-server --test websocket_h2 chromium -- --nocapture 2>&1) \
    || { echo "$ws_out"; exit 1; }
if grep -q "NOT RUN" <<<"$ws_out"; then
    grep "NOT RUN" <<<"$ws_out"
else
    echo "websocket over HTTP/2 (RFC 8441): Chromium opened wss:// on its h2 connection, echoed, closed (1000)"
fi

cargo build --release --locked -p linerate

echo "== PostgreSQL 15 throwaway cluster: start, seed, check, stop (scripts/pg.sh selftest)"
set +e
scripts/pg.sh selftest
pg=$?
set -e
case $pg in
    0) ;;
    2) echo "!! PostgreSQL stage NOT RUN: it cannot run on this machine (see the line above)" ;;
    *) exit "$pg" ;;
esac

echo "== Http11Probe conformance against the demo server (scripts/conformance.sh)"
scripts/conformance.sh

echo "== h2spec --strict against the demo's h2c and TLS listeners (scripts/h2spec.sh)"
set +e
scripts/h2spec.sh
h2=$?
set -e
case $h2 in
    0) ;;
    2) echo "!! h2spec stage NOT RUN: it cannot run on this machine (see the line above)" ;;
    *) exit "$h2" ;;
esac

echo "== PROXY protocol behind HAProxy (scripts/proxy-protocol.sh)"
set +e
scripts/proxy-protocol.sh
pp=$?
set -e
case $pp in
    0) ;;
    2) echo "!! PROXY protocol stage NOT RUN: it cannot run on this machine (see the line above)" ;;
    *) exit "$pp" ;;
esac

echo "== ACME against Pebble: HTTP-01, TLS-ALPN-01, renewal, a CA down at start (scripts/acme.sh)"
set +e
scripts/acme.sh
acme=$?
set -e
case $acme in
    0) ;;
    2) echo "!! ACME stage NOT RUN: it cannot run on this machine (see the line above)" ;;
    *) exit "$acme" ;;
esac

echo "== Chromium headless against the binary: browser URLs over HTTP/1.1 and HTTPS/HTTP/2 (scripts/browser.sh)"
set +e
scripts/browser.sh
br=$?
set -e
case $br in
    0) ;;
    2) echo "!! browser stage NOT RUN: it cannot run on this machine (see the line above)" ;;
    *) exit "$br" ;;
esac

echo "== Chromium headless forced onto QUIC: a page and 20 assets over HTTP/3, the access log checked (scripts/h3-browser.sh)"
set +e
scripts/h3-browser.sh
h3br=$?
set -e
case $h3br in
    0) ;;
    2) echo "!! HTTP/3 browser stage NOT RUN: it cannot run on this machine (see the line above)" ;;
    *) exit "$h3br" ;;
esac

echo "== HTTP/3: aioquic's client against --quic, answers compared with HTTP/1.1's and HTTP/2's, HttpArena's static-h3 and baseline-h3 (scripts/h3-interop.sh)"
set +e
scripts/h3-interop.sh
h3=$?
set -e
case $h3 in
    0) ;;
    2) echo "!! HTTP/3 interop stage NOT RUN: it cannot run on this machine (see the line above)" ;;
    *) exit "$h3" ;;
esac

echo "== HTTP/3 connections moved to new source ports (NAT rebinding) with 2 and 4 workers, steering off and on, routed between workers (scripts/h3-migrate.sh)"
set +e
scripts/h3-migrate.sh
h3m=$?
set -e
case $h3m in
    0) ;;
    2) echo "!! HTTP/3 migration stage NOT RUN: it cannot run on this machine (see the line above)" ;;
    *) exit "$h3m" ;;
esac

echo "== HTTP/3 over a lossy link: 10 MB byte-exact and a 2 MB body through 3% loss, delay and reordering between two network namespaces (scripts/h3-netem.sh)"
set +e
scripts/h3-netem.sh
h3n=$?
set -e
case $h3n in
    0) ;;
    2) echo "!! HTTP/3 lossy-link stage NOT RUN: it cannot run on this machine (see the line above)" ;;
    *) exit "$h3n" ;;
esac

echo "== HTTP/3 attacks: handshake flood (Retry), rapid reset (H3_EXCESSIVE_LOAD), cancelled streams' credit, bodies at once, an oversized field section (scripts/h3-attacks.sh)"
set +e
scripts/h3-attacks.sh
h3a=$?
set -e
case $h3a in
    0) ;;
    2) echo "!! HTTP/3 attacks stage NOT RUN: it cannot run on this machine (see the line above)" ;;
    *) exit "$h3a" ;;
esac

echo "== WebSocket with Python's websockets: through the proxy to its echo upstream, and to the demo's /ws; ws and wss (scripts/ws-proxy.sh)"
set +e
scripts/ws-proxy.sh
ws=$?
set -e
case $ws in
    0) ;;
    2) echo "!! WebSocket proxy stage NOT RUN: it cannot run on this machine (see the line above)" ;;
    *) exit "$ws" ;;
esac

echo "== WebSocket: Autobahn|Testsuite's fuzzingclient, every case, against the demo's /ws (scripts/autobahn.sh)"
set +e
scripts/autobahn.sh
ab=$?
set -e
case $ab in
    0) ;;
    2) echo "!! Autobahn stage NOT RUN: it cannot run on this machine (see the line above)" ;;
    *) exit "$ab" ;;
esac

echo "== The gateway shape: an HTTPS edge and the demo app from docs/gateway/, HttpArena gateway-64's checks (scripts/gateway.sh)"
set +e
scripts/gateway.sh check
gw=$?
set -e
case $gw in
    0) ;;
    2) echo "!! gateway stage NOT RUN: it cannot run on this machine (see the line above)" ;;
    *) exit "$gw" ;;
esac

echo "== The systemd units (dist/linerate.service, .socket): systemd-analyze verify, every warning an error"
if command -v systemd-analyze >/dev/null; then
    unit_dir=$(mktemp -d)
    sed "s#/usr/bin/linerate#$PWD/target/release/linerate#g" dist/linerate.service >"$unit_dir/linerate.service"
    cp dist/linerate.socket "$unit_dir/linerate.socket"
    unit_out=$(systemd-analyze verify "$unit_dir/linerate.service" "$unit_dir/linerate.socket" 2>&1) ||
        unit_out="$unit_out (exit $?)"
    rm -rf "$unit_dir"
    if [ -n "$unit_out" ]; then
        echo "$unit_out"
        exit 1
    fi
    echo "dist/linerate.service and dist/linerate.socket: verified"
else
    echo "!! systemd units stage NOT RUN: no systemd-analyze on this machine"
fi

echo "== The Debian package: cargo-deb, dpkg into a clean root, the files, the binary, purge (scripts/deb.sh)"
set +e
# target/release/linerate is built above: packaged as it is, not linked again.
scripts/deb.sh --no-build
deb=$?
set -e
case $deb in
    0) ;;
    2) echo "!! Debian package stage NOT RUN: it cannot run on this machine (see the line above)" ;;
    *) exit "$deb" ;;
esac

echo "== kTLS in VMs (Debian 6.1 and trixie-backports kernels under QEMU; scripts/ktls-vm.sh)"
set +e
scripts/ktls-vm.sh
vm=$?
set -e
case $vm in
    0) ;;
    2) echo "!! kTLS VM stage NOT RUN: it cannot run on this machine (see the line above)" ;;
    *) exit "$vm" ;;
esac
