#!/usr/bin/env bash
# Runs every check linerate's CI runs: formatting, clippy, linerate-server's cargo features (none,
# each alone, all; its unit tests without any), the fuzz targets (built and replayed
# over their seed corpus), the API docs, the crates for crates.io packaged and built from their
# packages (scripts/package.sh) and their public API against the last release tag
# (scripts/semver.sh, cargo-semver-checks; NOT RUN before the first), all tests, a throwaway
# PostgreSQL 15 started, seeded and checked (scripts/pg.sh selftest), the Http11Probe
# conformance suite against the demo server (scripts/conformance.sh), http-tests/cache-tests against the proxy cache (scripts/cache-tests.sh),
# Redis and memcached installed and checked (scripts/cache-servers.sh)
# and `linerate lab cache` run end to end on tiny figures, h2spec in strict mode against its h2c and TLS listeners
# (scripts/h2spec.sh), grpc-go's interop client's 16 core cases over h2c and TLS
# (scripts/grpc-interop.sh), gRPC-Web with curl and @connectrpc/connect-node from npm
# (scripts/grpc-web.sh), PROXY protocol v1 and v2 (plain and TLS) behind Debian's HAProxy, the
# client's address checked in the access log and an access rule (scripts/proxy-protocol.sh),
# automatic HTTPS against Let's Encrypt's test CA Pebble (scripts/acme.sh; `go install`s
# Pebble into target/tools), three nodes as a fleet behind HAProxy with Redis, Pebble and bind9
# (scripts/fleet.sh; installs bind9 with apt where missing),
# headless Chromium loading browser URLs (scripts/browser.sh) and reading server-sent events,
# headless Chromium forced onto QUIC loading a page of 20 assets, every request logged as
# HTTP/3.0 (scripts/h3-browser.sh), aioquic's HTTP/3 client against --quic, its answers
# compared with HTTP/1.1's and HTTP/2's, HttpArena's static-h3 files and baseline-h3 sums
# among them (scripts/h3-interop.sh; pip installs aioquic where missing), HTTP/3 connections
# that move to new source ports, routed to their worker (scripts/h3-migrate.sh), HTTP/3 through a
# lossy link between two network namespaces (scripts/h3-netem.sh; netem, or a UDP relay where
# the kernel has none) and under attack (scripts/h3-attacks.sh), HTTP/2 under attack beside a
# good client, with hyperframe and hpack from PyPI (scripts/h2-attacks.sh), OpenTelemetry tracing
# checked by a Collector built from its Go modules and an app instrumented with OpenTelemetry's
# Python SDK (scripts/otel.sh), Python's websockets client
# through the proxy (scripts/ws-proxy.sh; pip installs it into target/), the gateway shape of
# docs/gateway/ with HttpArena's gateway-64 checks (scripts/gateway.sh), HttpArena's validation of
# every profile against the demo (scripts/arena.sh: `linerate lab arena --validate-only`), systemd-analyze verify
# on dist/'s units, `promtool check metrics` on a live scrape and the Grafana dashboard's series
# (scripts/promtool.sh; installs Debian's prometheus where missing), the Debian package built with cargo-deb (pinned, `cargo install`ed into
# target/tools) and installed into a clean root (scripts/deb.sh), the container image written
# without an engine or a base image and its root filesystem served under chroot
# (scripts/image.sh; installs skopeo and umoci with apt where missing), and the kTLS checks in a VM
# (scripts/ktls-vm.sh). Needs a Rust toolchain;
# the h2spec and gRPC interop stages install h2spec and grpc-go's interop client with `go
# install` into target/tools; the PROXY protocol
# stage installs haproxy with apt when missing; the Debian package stage dpkg-dev and a
# systemd-sysusers where missing; the VM stage installs QEMU, busybox-static,
# cpio and kmod with apt and fetches a Debian kernel package where it can. Each says loudly
# (without failing) where it cannot.
# Servers started by tests bind 127.0.0.1 on OS-chosen ports (the VM's, its own loopback).
#
# Each stage's wall time is printed when it ends, and a table of every stage (seconds, passed,
# NOT RUN or FAILED) at the end, also when a stage fails. Autobahn, which keeps both CPUs busy
# for minutes while the later stages mostly wait, runs beside them at low priority and is
# waited for last (its row: its wall time from its start). The stages run the binary of the `ci`
# profile (Cargo.toml: release's optimisation without fat LTO, which only links slower; no
# figure depends on it), built in target/ci-build at low priority while the tests run, and
# named to every script by LINERATE_BIN. Figures come from `cargo build --release` alone.
set -euo pipefail
cd "$(dirname "$0")/.."

# --- stage bookkeeping -------------------------------------------------------------------------
STAGE_ROWS=()
RUN_START=$SECONDS

summary() {
    local rc=$?
    echo
    echo "== stages (wall seconds)"
    printf '%-34s %7s  %s\n' stage seconds result
    local row
    for row in "${STAGE_ROWS[@]}"; do
        IFS='|' read -r name secs result <<<"$row"
        printf '%-34s %7s  %s\n' "$name" "$secs" "$result"
    done
    printf '%-34s %7s  %s\n' total $((SECONDS - RUN_START)) "$([ "$rc" = 0 ] && echo passed || echo "FAILED (exit $rc)")"
}
BESIDE_PID="" # the stage `may_beside` runs, while it runs
trap 'summary; [ -z "$BESIDE_PID" ] || kill -- "$BESIDE_PID" 2>/dev/null || true' EXIT

# record NAME SECONDS RC: a stage's row in the table, and its line.
record() {
    STAGE_ROWS+=("$1|$2|$([ "$3" = 0 ] && echo passed || echo "FAILED ($3)")")
    echo "-- $1: $2 s"
}

# must NAME CMD…: a stage that passes or fails (any non-zero exit fails the run).
must() {
    local name=$1 t0=$SECONDS rc
    shift
    echo "== $name"
    set +e
    (set -e; "$@")
    rc=$?
    set -e
    record "$name" $((SECONDS - t0)) $rc
    [ $rc = 0 ] || exit $rc
}

# may_result NAME RC SECONDS: a `may` stage's row and line (exit 2: NOT RUN).
may_result() {
    local name=$1 rc=$2 secs=$3 result=passed
    case $rc in
        0) ;;
        2) result="NOT RUN"; echo "!! $name stage NOT RUN: it cannot run on this machine (see the line above)" ;;
        *) result="FAILED ($rc)" ;;
    esac
    STAGE_ROWS+=("$name|$secs|$result")
    echo "-- $name: $secs s"
    case $rc in 0 | 2) ;; *) exit $rc ;; esac
}

# may NAME CMD…: a stage that may not be able to run here: exit 2 is NOT RUN (said loudly,
# never a pass), any other non-zero exit fails the run.
may() {
    local name=$1 t0=$SECONDS rc
    shift
    echo "== $name"
    set +e
    (set -e; "$@")
    rc=$?
    set -e
    may_result "$name" $rc $((SECONDS - t0))
}

# may_beside NAME CMD…: a `may` stage started now in the background, at low priority (nice 10),
# beside the stages that follow, which mostly wait on sockets, timers and VMs; its output is
# kept and shown when `may_wait` waits for it. One at a time. A run that ends early kills it.
may_beside() {
    BESIDE_NAME=$1
    shift
    BESIDE_LOG=$(mktemp)
    BESIDE_T0=$SECONDS
    echo "== $BESIDE_NAME (started; runs beside the stages below)"
    (set -e; exec nice -n 10 "$@") >"$BESIDE_LOG" 2>&1 &
    BESIDE_PID=$!
}
may_wait() {
    echo "== $BESIDE_NAME (waited for)"
    local t0=$SECONDS rc=0
    wait "$BESIDE_PID" || rc=$?
    BESIDE_PID=""
    cat "$BESIDE_LOG"
    rm -f "$BESIDE_LOG"
    echo "(it started $((SECONDS - BESIDE_T0)) s ago; waited for it $((SECONDS - t0)) s)"
    may_result "$BESIDE_NAME" $rc $((SECONDS - BESIDE_T0))
}

# --- the stages --------------------------------------------------------------------------------
must "cargo fmt --check" cargo fmt --all --check

must "cargo clippy -D warnings" cargo clippy --workspace --all-targets --locked -- -D warnings

fuzz_replay() {
    fuzz/build.sh
    local bin="" dir sub
    for dir in "${CARGO_TARGET_DIR:-fuzz/target}" fuzz/target; do
        for sub in x86_64-unknown-linux-gnu/release debug; do
            if [ -z "$bin" ] && [ -x "$dir/$sub/parse_request" ]; then bin="$dir/$sub"; fi
        done
    done
    [ -n "$bin" ] || { echo "fuzz targets were not built" >&2; return 1; }
    local t
    local n=0
    local src
    for src in fuzz/fuzz_targets/*.rs; do
        t=$(basename "$src" .rs)
        # Every target replays its committed seeds; a corpus .gitignore hides is missing in CI.
        if ! compgen -G "fuzz/corpus/$t/*" >/dev/null; then
            echo "fuzz/corpus/$t has no seeds (committed? see .gitignore)" >&2
            return 1
        fi
        "$bin/$t" fuzz/corpus/$t/* >/dev/null 2>&1 || { echo "fuzz target $t failed on its seeds" >&2; return 1; }
        n=$((n + $(ls fuzz/corpus/$t | wc -l)))
    done
    echo "fuzz targets replayed $n seeds"
}
must "fuzz targets: build, replay seeds" fuzz_replay

# Redis and memcached before the tests: crates/lab/tests/cache.rs starts them through
# scripts/cache-servers.sh (and says NOT RUN, which cargo test hides, where they are missing).
may "Redis, memcached: install" scripts/cache-servers.sh install

# The database tests (crates/linerate/tests/database.rs, crates/postgres/tests/) start their own
# throwaway PostgreSQL 15 with scripts/pg.sh; where it cannot run they fail saying so.
must "cargo test: build" cargo test --workspace --locked --no-run

# linerate-server's optional features (crates/server/Cargo.toml: tls, http3, acme, brotli,
# basic-auth, jwt, proxy, websocket, gzip, http2; the workspace builds it with all of them): a service may take it with
# `default-features = false` and any subset. clippy -D warnings with none and with all, a check
# of each alone, and the unit tests with none (the refusals of `features.rs`, br left out of
# negotiation, and every protocol test over the plain transport). Shares target/, after the
# test build so that the dependencies it needs are built already: about 70 s.
server_features() {
    local f
    cargo clippy -p linerate-server --all-targets --locked --no-default-features -- -D warnings
    cargo clippy -p linerate-server --all-targets --locked --all-features -- -D warnings
    for f in http2 tls http3 acme brotli gzip basic-auth jwt proxy websocket grpc grpc-client grpc-client-tls; do
        cargo check -p linerate-server --all-targets --locked --no-default-features --features "$f"
    done
    cargo test -p linerate-server --lib --locked --no-default-features
}
must "server features: none, each, all" server_features

# The API docs of every crate, with rustdoc's warnings (broken intra-doc links among them)
# denied. After the feature checks, whose dependency metadata it reuses.
must "cargo doc -D warnings" env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

# The crates for crates.io packaged and each built from its package alone (scripts/package.sh,
# in target/package-build: about 5 minutes on a fresh machine), and their public API against
# the last release tag (scripts/semver.sh: NOT RUN until the first tag).
must "cargo package (crates.io crates)" scripts/package.sh
may "cargo semver-checks vs last tag" scripts/semver.sh

# The stages' binary builds while the tests run, at the lowest priority so that the tests keep
# the CPU they ask for (its output is shown when it is waited for).
CI_TARGET=target/ci-build
export LINERATE_BIN=$CI_TARGET/ci/linerate
ci_build_log=$(mktemp)
ci_build_t0=$SECONDS
nice -n 19 cargo build --profile ci --locked -p linerate --bins --example grpc_interop_client \
    --target-dir "$CI_TARGET" >"$ci_build_log" 2>&1 &
ci_build_pid=$!

must "cargo test" cargo test --workspace --locked
# linerate-server's integration tests again with every TestServer on the io_uring backend
# (`serve --io uring`; tests/uring.rs has its own checks, NOT RUN where the kernel refuses a
# ring). Named one by one under --workspace, so that the features are the test build's and
# nothing is compiled again (a name another crate also has runs there too).
uring_tests() {
    local t args=()
    for t in crates/server/tests/*.rs; do
        args+=(--test "$(basename "$t" .rs)")
    done
    LINERATE_TEST_IO=uring cargo test --workspace --locked "${args[@]}"
}
must "server tests on io_uring" uring_tests

# The stages' binary: waited for here, in this shell (its builder is this shell's child).
echo "== binary for the stages (profile ci, built beside the tests)"
ci_wait_t0=$SECONDS
ci_build_rc=0
wait "$ci_build_pid" || ci_build_rc=$?
tail -3 "$ci_build_log"
rm -f "$ci_build_log"
echo "(its build started $((SECONDS - ci_build_t0)) s ago; waited for it $((SECONDS - ci_wait_t0)) s)"
record "binary for the stages (ci profile)" $((SECONDS - ci_wait_t0)) $ci_build_rc
[ $ci_build_rc = 0 ] || exit $ci_build_rc

# Autobahn's Python 2.7 client takes about 9 minutes of both CPUs (the server a fifth of it,
# scripts/autobahn.sh), while the stages after it mostly wait: it runs beside them.
may_beside "WebSocket: Autobahn fuzzingclient" scripts/autobahn.sh "$LINERATE_BIN"

may "PostgreSQL 15: start, seed, check, stop" scripts/pg.sh selftest

# `linerate lab cache` end to end on tiny figures (a few thousand objects, sub-second rounds):
# every phase runs on every server and the report, raw JSON and charts are written. Proves the
# command works, measures nothing (CI's machine is shared). NOT RUN where the servers are not.
lab_cache_smoke() {
    scripts/cache-servers.sh selftest
    local out cpus=()
    out=$(mktemp -d)
    [ "$(nproc)" -ge 2 ] || cpus=(--server-cpus 0 --load-cpus 0)
    if ! "$LINERATE_BIN" lab cache --objects 5000 --keys 200 --rounds 1 --duration 200ms \
        --warmup 100ms --latency-rate 2000 --limit-mb 8 --evict-value-bytes 16384 "${cpus[@]}" \
        --out "$out/report" \
        >"$out/stdout" 2>"$out/stderr"; then
        tail -20 "$out/stderr"
        rm -rf "$out"
        return 1
    fi
    local missing=""
    for f in report.md runs.json memory.png limit-hit-ratio.png get-100B-latency.png set-64KiB-cost.png; do
        [ -s "$out/report/$f" ] || missing="$missing $f"
    done
    grep -q "^## At the memory limit" "$out/report/report.md" || missing="$missing (limit table)"
    # One server CPU: Redis's I/O threads would spin on it, so that row is left out, saying why.
    grep -q "Redis with I/O threads is left out" "$out/report/report.md" \
        || missing="$missing (why Redis with I/O threads is left out)"
    grep -q "^| redis-io" "$out/report/report.md" && missing="$missing (a redis-io row on one CPU)"
    rm -rf "$out"
    [ -z "$missing" ] || { echo "lab cache: missing from its output:$missing"; return 1; }
    echo "lab cache: report, runs.json and charts written for memcached and redis (on one server CPU; Redis with I/O threads needs two, and is left out with the reason)"
}
may "lab cache: Redis vs memcached smoke" lab_cache_smoke
must "Http11Probe conformance" scripts/conformance.sh "$LINERATE_BIN"
# http-tests/cache-tests (RFC 9111) against the proxy cache; fails below its goal.
may "cache-tests (RFC 9111): the proxy cache" scripts/cache-tests.sh "$LINERATE_BIN"
may "h2spec --strict (h2c, TLS)" scripts/h2spec.sh "$LINERATE_BIN"
# grpc-go's interop client, its 16 core cases over h2c and TLS (installs it with `go install`).
may "gRPC interop (grpc-go 1.85 client, h2c and TLS)" scripts/grpc-interop.sh "$LINERATE_BIN"
# gRPC-Web: curl (binary and -text) and connect-node (npm install into target/tools).
may "gRPC-Web (curl, connect-node)" scripts/grpc-web.sh "$LINERATE_BIN"
may "PROXY protocol behind HAProxy" scripts/proxy-protocol.sh "$LINERATE_BIN"
may "ACME against Pebble" scripts/acme.sh
# The fleet: three nodes behind HAProxy (TCP, PROXY v2, no retries), Redis, Pebble
# resolving through bind9, two apps; ACME across nodes (HTTP-01, TLS-ALPN-01, DNS-01), a forced
# renewal, sessions resumed across nodes, the fleet's rate limit, a purge, a rolling restart, a
# binary upgrade, kill -9 and Redis paused, each a line of its own.
may "fleet: 3 nodes behind HAProxy" scripts/fleet.sh "$LINERATE_BIN"
may "Chromium: HTTP/1.1, HTTPS/HTTP/2" scripts/browser.sh "$LINERATE_BIN"

# After the browser stage, which installs Chromium where it can.
# The SSE tests read events with curl -N and headless Chromium's EventSource; a client that is
# missing makes its test print NOT RUN (which cargo test hides), so they run again here, shown.
sse_clients() {
    local out
    out=$(cargo test --locked -p linerate-server --test sse -- --nocapture --test-threads 1 2>&1) \
        || { echo "$out"; return 1; }
    if grep -q "NOT RUN" <<<"$out"; then
        grep "NOT RUN" <<<"$out"
    else
        echo "sse: curl -N and Chromium EventSource read the events"
    fi
}
must "server-sent events: curl -N, Chromium" sse_clients

# Chromium's WebSocket client: a missing browser prints NOT RUN in its test, shown here.
ws_browser() {
    local out
    out=$(cargo test --locked -p linerate-server --test websocket chromium -- --nocapture 2>&1) \
        || { echo "$out"; return 1; }
    if grep -q "NOT RUN" <<<"$out"; then
        grep "NOT RUN" <<<"$out"
    else
        echo "websocket: Chromium opened, echoed text and binary, and closed cleanly (1000)"
    fi
    out=$(cargo test --locked -p linerate-server --test websocket_h2 chromium -- --nocapture 2>&1) \
        || { echo "$out"; return 1; }
    if grep -q "NOT RUN" <<<"$out"; then
        grep "NOT RUN" <<<"$out"
    else
        echo "websocket over HTTP/2 (RFC 8441): Chromium opened wss:// on its h2 connection, echoed, closed (1000)"
    fi
}
must "WebSocket: Chromium (h1, h2)" ws_browser

may "Chromium forced onto QUIC (h3)" scripts/h3-browser.sh "$LINERATE_BIN"
may "HTTP/3: aioquic interop" scripts/h3-interop.sh "$LINERATE_BIN"
may "HTTP/3: migration (NAT rebinding)" scripts/h3-migrate.sh "$LINERATE_BIN"
may "HTTP/3: lossy link (netem)" scripts/h3-netem.sh "$LINERATE_BIN"
may "HTTP/3: attacks" scripts/h3-attacks.sh "$LINERATE_BIN"
# HTTP/2 abuse: MadeYouReset's four forms, rapid reset, an HPACK bomb and slow
# uploads, over TLS to a proxied path and over h2c to a file, each 10 s beside a good client;
# nginx's rows beside where it is installed (never a failure).
may "HTTP/2: attacks (MadeYouReset, HPACK bomb)" scripts/h2-attacks.sh "$LINERATE_BIN"
# OpenTelemetry: a Collector built from its Go modules and a Python-SDK application;
# linerate's spans, the child context upstream, the app's span under ours; collector down: no block.
may "OpenTelemetry: Collector and an instrumented app" scripts/otel.sh "$LINERATE_BIN"
may "WebSocket: websockets via proxy" scripts/ws-proxy.sh "$LINERATE_BIN"
may "gateway shape (gateway-64 checks)" scripts/gateway.sh check "$LINERATE_BIN"
# HttpArena's validation of every profile against the demo (`lab arena --validate-only`; the
# database profiles with a throwaway PostgreSQL and Redis, NOT RUN lines where they cannot start).
must "HttpArena validation (lab arena)" scripts/arena.sh "$LINERATE_BIN"
# TechEmpower's own verifier against the entry (frameworks/Rust/linerate) built from this tree:
# NOT RUN without a Docker engine (its contract tests ran above, in `cargo test`).
may "TechEmpower verify (tfb --mode verify)" scripts/tfb-verify.sh

systemd_units() {
    if ! command -v systemd-analyze >/dev/null; then
        echo "no systemd-analyze on this machine"
        return 2
    fi
    local unit_dir unit_out
    unit_dir=$(mktemp -d)
    sed "s#/usr/bin/linerate#$PWD/$LINERATE_BIN#g" dist/linerate.service >"$unit_dir/linerate.service"
    cp dist/linerate.socket "$unit_dir/linerate.socket"
    unit_out=$(systemd-analyze verify "$unit_dir/linerate.service" "$unit_dir/linerate.socket" 2>&1) ||
        unit_out="$unit_out (exit $?)"
    rm -rf "$unit_dir"
    if [ -n "$unit_out" ]; then
        echo "$unit_out"
        return 1
    fi
    echo "dist/linerate.service and dist/linerate.socket: verified"
}
may "systemd units: systemd-analyze verify" systemd_units
# /metrics through Prometheus's linter (Debian's prometheus for promtool, apt-get where missing)
# under a configuration that shows every family, and dist/grafana's dashboard against the scrape.
may "metrics: promtool check metrics, Grafana dashboard" scripts/promtool.sh "$LINERATE_BIN"

# The stages' binary is packaged as it is, not linked again.
may "Debian package (cargo-deb, dpkg)" scripts/deb.sh --no-build
# The OCI image: one layer written by scripts/image.py, read back by skopeo
# and umoci, its root filesystem serving /json and a static file under chroot as 65532.
may "container image (OCI, rootfs under chroot)" scripts/image.sh check "$LINERATE_BIN"
may "kTLS in VMs (Debian 6.1, trixie)" scripts/ktls-vm.sh

may_wait
