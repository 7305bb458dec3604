#!/usr/bin/env bash
# Runs h2spec (HTTP/2 conformance: RFC 7540/9113 and HPACK test cases, strict mode) against the
# demo server's two HTTP/2 listeners — cleartext with prior knowledge (--h2c-port) and TLS with
# ALPN h2 (--tls-port, a throwaway self-signed certificate) — prints the counts per listener,
# then runs a short h2load smoke over both, and fails if anything fails on either. Builds
# nothing: target/release/linerate must exist (scripts/test-all.sh builds it before its stages).
#
#   scripts/h2spec.sh [path/to/linerate]   ours (default: target/release/linerate)
#   scripts/h2spec.sh peers                the same h2spec against Debian's nginx (TLS and h2c)
#                                          and h2o (TLS and h2c) with throwaway configs: their
#                                          counts, printed beside ours, never a failure
#
# h2spec is installed into target/tools with `go install`, pinned: the Go module proxy serves
# v2.2.1+incompatible as the latest (later tags carry a go.mod without /v2, so no `go install`
# can name them). Servers bind 127.0.0.1 (OS-chosen or probed-free ports) and are stopped by
# their PIDs. Exit 2, with a line saying why, where it cannot run (no h2spec and no way to
# install it, no openssl). In peers mode a peer that is not installed is skipped with a NOT RUN
# line naming its package (not installed here: Debian's packages start a server on port 80 when
# installed), and the mode exits 2 only when neither peer ran.
set -euo pipefail
cd "$(dirname "$0")/.."
H2SPEC_MODULE=github.com/summerwind/h2spec
H2SPEC_VERSION=v2.2.1+incompatible
tools=$PWD/target/tools
h2spec=$tools/h2spec

say() { echo "h2spec: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

# The pinned h2spec in target/tools, installed when missing or another version.
install_h2spec() {
    if [ -x "$h2spec" ]; then
        # `go version -m` names the module version a binary was built from.
        if ! command -v go >/dev/null \
            || go version -m "$h2spec" 2>/dev/null | grep -q "$H2SPEC_MODULE[[:space:]]*$H2SPEC_VERSION"; then
            return 0
        fi
    fi
    command -v go >/dev/null || not_run "no $h2spec and no Go toolchain to install it with"
    mkdir -p "$tools"
    say "installing h2spec $H2SPEC_VERSION into $tools"
    GOBIN=$tools GOFLAGS=-mod=mod go install "$H2SPEC_MODULE/cmd/h2spec@$H2SPEC_VERSION" \
        >"$tools/h2spec-install.log" 2>&1 \
        || { cat "$tools/h2spec-install.log" >&2; not_run "go install h2spec@$H2SPEC_VERSION failed"; }
    [ -x "$h2spec" ] || not_run "go install succeeded but $h2spec is missing"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

out=$(mktemp -d "${TMPDIR:-/tmp}/linerate-h2spec.XXXXXX")
chmod 755 "$out" # peers' workers may run as an unprivileged user and must read www/
pids=()
cleanup() {
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$out"
}
trap cleanup EXIT

# stop PID: stops a server we started (TERM; nginx's and h2o's masters take their workers
# down with them) and forgets it.
stop() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    local keep=() p
    for p in "${pids[@]}"; do
        [ "$p" = "$1" ] || keep+=("$p")
    done
    pids=("${keep[@]}")
}

make_cert() {
    [ -f "$out/cert.pem" ] && return 0
    command -v openssl >/dev/null || not_run "no openssl to make a throwaway certificate"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$out/key.pem" -out "$out/cert.pem" -days 1 -subj /CN=localhost \
        -addext subjectAltName=DNS:localhost,IP:127.0.0.1 >"$out/openssl.log" 2>&1 \
        || { cat "$out/openssl.log" >&2; say "openssl could not make a certificate"; exit 1; }
    chmod 644 "$out/key.pem"
}

# run_h2spec NAME PORT [FLAGS…]: runs the suite, prints NAME's counts, sets $failed to the
# number of failed tests (-1 when h2spec gave no summary: it could not run against the port).
run_h2spec() {
    local name=$1 port=$2
    shift 2
    local log="$out/h2spec-$name.txt"
    "$h2spec" --strict -h 127.0.0.1 -p "$port" -o 2 "$@" >"$log" 2>&1 || true
    local summary
    summary=$(grep -E '^[0-9]+ tests, [0-9]+ passed, [0-9]+ skipped, [0-9]+ failed' "$log" | tail -1 || true)
    if [ -z "$summary" ]; then
        printf '%-26s no result (h2spec output below)\n' "$name"
        tail -20 "$log" >&2
        failed=-1
        return
    fi
    printf '%-26s %s\n' "$name" "$summary"
    failed=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$summary")
}

# The failing tests from a run's log: h2spec lists them, with what it saw, under "Failures:".
failures() {
    sed -n '/^Failures:/,/^Finished in/{/^Finished in/!p}' "$out/h2spec-$1.txt" | sed 's/^/    /' >&2
}

# h2load_smoke H2C_PORT TLS_PORT: a short h2load run over each listener (2,000 requests to
# /baseline2, 4 connections x 10 streams): every request must succeed with a 2xx. h2load is
# Debian's nghttp2-client, installed when missing; where it cannot be, a NOT RUN line says so
# (h2spec's verdict stands alone then).
h2load_smoke() {
    if ! command -v h2load >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        say "installing h2load (nghttp2-client)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q nghttp2-client >"$out/apt.log" 2>&1 || true
    fi
    if ! command -v h2load >/dev/null; then
        say "h2load smoke NOT RUN: no h2load (apt-get install nghttp2-client)"
        return 0
    fi
    local name url log
    for name in h2c tls; do
        url="http://127.0.0.1:$1/baseline2?a=1&b=2"
        [ "$name" = tls ] && url="https://127.0.0.1:$2/baseline2?a=1&b=2"
        log="$out/h2load-$name.txt"
        timeout 60 h2load -n 2000 -c 4 -m 10 "$url" >"$log" 2>&1 || true
        if grep -q '^requests: 2000 total, 2000 started, 2000 done, 2000 succeeded' "$log" \
            && grep -q '^status codes: 2000 2xx' "$log"; then
            printf '%-26s %s\n' "h2load smoke $name" "2000 requests, 2000 succeeded, all 2xx"
        else
            tail -15 "$log" >&2
            say "the h2load smoke over $name failed"
            ours_failed=1
        fi
    done
}

# Runs the suite against linerate's h2c and TLS listeners, then the h2load smoke; sets
# $ours_failed to 1 when anything failed on either.
ours_failed=0
ours() {
    local bin=${1:-${CARGO_TARGET_DIR:-target}/release/linerate}
    [ -x "$bin" ] || { say "no $bin: build it first (cargo build --release -p linerate)"; exit 1; }
    make_cert
    "$bin" serve --addr 127.0.0.1:0 --h2c-port 0 --tls-port 0 --tls-cert "$out/cert.pem" \
        --tls-key "$out/key.pem" --workers 1 --no-pin --log-level warn >"$out/banner" 2>"$out/stderr" &
    local pid=$!
    pids+=("$pid")
    local h2c="" tls=""
    for _ in $(seq 100); do
        h2c=$(sed -n 's|.*(h2c, prior knowledge) on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$out/banner")
        tls=$(sed -n 's|.*HTTPS on https://127\.0\.0\.1:\([0-9]*\) .*|\1|p' "$out/banner")
        [ -n "$h2c" ] && [ -n "$tls" ] && break
        kill -0 "$pid" 2>/dev/null || { cat "$out/stderr" >&2; say "the server did not start"; exit 1; }
        sleep 0.1
    done
    [ -n "$h2c" ] && [ -n "$tls" ] || { cat "$out/banner" "$out/stderr" >&2; say "no h2c/HTTPS ports in the banner"; exit 1; }
    run_h2spec linerate-h2c "$h2c"
    [ "$failed" = 0 ] || { failures linerate-h2c; ours_failed=1; }
    run_h2spec linerate-tls "$tls" -t -k
    [ "$failed" = 0 ] || { failures linerate-tls; ours_failed=1; }
    h2load_smoke "$h2c" "$tls"
    kill -0 "$pid" 2>/dev/null || { cat "$out/stderr" >&2; say "the server died during the suite"; exit 1; }
    stop "$pid"
}

# waits until something listens on 127.0.0.1:PORT (or PID died); 0 when it does.
wait_port() {
    local pid=$1 port=$2
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || return 1
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

peer_nginx() {
    command -v nginx >/dev/null || { say "NOT RUN: nginx (apt-get install nginx-light)"; return 2; }
    local dir=$out/nginx tls h2c
    mkdir -p "$dir"
    tls=$(free_port)
    h2c=$(free_port)
    # nginx 1.22: `listen … http2` (1.25 moved it to `http2 on;`); without ssl it is h2c with
    # prior knowledge only.
    cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $dir/client_body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    server {
        listen 127.0.0.1:$tls ssl http2;
        listen 127.0.0.1:$h2c http2;
        ssl_certificate $out/cert.pem;
        ssl_certificate_key $out/key.pem;
        root $out/www;
    }
}
EOF
    nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" >"$dir/stdout" 2>&1 &
    local pid=$!
    pids+=("$pid")
    if ! wait_port "$pid" "$tls" || ! wait_port "$pid" "$h2c"; then
        cat "$dir/stdout" "$dir/error.log" >&2 2>/dev/null || true
        say "NOT RUN: nginx did not start"
        return 2
    fi
    run_h2spec "nginx $(nginx -v 2>&1 | sed 's|.*/||') tls" "$tls" -t -k
    run_h2spec "nginx $(nginx -v 2>&1 | sed 's|.*/||') h2c" "$h2c"
    stop "$pid"
}

peer_h2o() {
    command -v h2o >/dev/null || { say "NOT RUN: h2o (apt-get install h2o)"; return 2; }
    local dir=$out/h2o tls h2c version
    mkdir -p "$dir"
    tls=$(free_port)
    h2c=$(free_port)
    version=$(h2o --version | sed -n 's/^h2o version //p')
    cat >"$dir/h2o.conf" <<EOF
num-threads: 1
error-log: $dir/error.log
listen:
  host: 127.0.0.1
  port: $tls
  ssl:
    certificate-file: $out/cert.pem
    key-file: $out/key.pem
    ocsp-update-interval: 0
listen:
  host: 127.0.0.1
  port: $h2c
hosts:
  default:
    paths:
      /:
        file.dir: $out/www
EOF
    # As root h2o drops to this user after binding (no pid-file: it would be opened after).
    [ "$(id -u)" = 0 ] && echo "user: nobody" >>"$dir/h2o.conf"
    h2o -c "$dir/h2o.conf" >"$dir/stdout" 2>&1 &
    local pid=$!
    pids+=("$pid")
    if ! wait_port "$pid" "$tls" || ! wait_port "$pid" "$h2c"; then
        cat "$dir/stdout" "$dir/error.log" >&2 2>/dev/null || true
        say "NOT RUN: h2o did not start"
        return 2
    fi
    run_h2spec "h2o $version tls" "$tls" -t -k
    run_h2spec "h2o $version h2c" "$h2c"
    stop "$pid"
}

install_h2spec
if [ "${1:-}" = peers ]; then
    make_cert
    mkdir -p "$out/www"
    echo "hello" >"$out/www/index.html"
    chmod -R a+rX "$out/www"
    # Ours first, from the same h2spec, so the counts sit side by side (a failure of ours is
    # listed, not fatal here: this mode only compares).
    ours
    ran=0
    peer_nginx && ran=1
    peer_h2o && ran=1
    [ "$ran" = 1 ] || exit 2
    exit 0
fi
ours "$@"
[ "$ours_failed" = 0 ] || { say "failed tests on linerate (listed above)"; exit 1; }
