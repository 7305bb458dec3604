#!/usr/bin/env bash
# Runs gRPC's official interop client (grpc-go's, pinned) against the demo's
# grpc.testing.TestService over linerate's two HTTP/2 listeners — cleartext with prior
# knowledge (--h2c-port) and TLS with ALPN h2 (--tls-port, a throwaway self-signed
# certificate) — then through linerate's reverse proxy (an h2c listener, `--proxy
# /=h2c://…` to the demo's h2c port; `--proxy /=h2://localhost:…` to its TLS port, HTTP/2 over
# TLS by ALPN, verified against the throwaway CA), and through the proxy to grpc-go's own interop server
# when one is at target/tools/grpc-interop-server (GOBIN=… go install
# google.golang.org/grpc/interop/server@v1.85.0; or GRPC_INTEROP_SERVER=PATH; skipped with a
# line otherwise); and linerate's own gRPC client (crates/linerate/examples/
# grpc_interop_client.rs, built beside the binary; GRPC_INTEROP_RUST_CLIENT=PATH) against that
# grpc-go server over h2c and over TLS (grpc-go's test certificate and CA), one line per case
# (NOT RUN where either is missing). Fails unless
# every one of the 16 core cases passes on each. Builds
# nothing: target/release/linerate must exist (scripts/test-all.sh builds it first).
#
#   scripts/grpc-interop.sh [path/to/linerate]
#
# The cases (doc/interop-test-descriptions.md): empty_unary, large_unary, client_streaming,
# server_streaming, ping_pong, empty_stream, timeout_on_sleeping_server, cancel_after_begin,
# cancel_after_first_response, status_code_and_message, special_status_message,
# custom_metadata, unimplemented_method, unimplemented_service, rpc_soak and channel_soak (the
# soaks shortened to 20 iterations). Skipped: the cases that need several backends, ORCA,
# compression negotiation tests outside the core list, or Google credentials.
#
# Then grpcurl (fullstorydev's, pinned), through the demo's reflection and health services:
# `list`, `describe`, a health Check and a GetSum encoded from reflected descriptors, over
# h2c and TLS. Where grpcurl cannot be installed that stage says NOT RUN and the interop
# result stands.
#
# The client is installed into target/tools with `go install` from the Go module proxy. The
# server binds 127.0.0.1 (OS-chosen ports) and is stopped by its PID. Exit 2, with a line
# saying why, where it cannot run (no client and no Go to install it with, no openssl).
set -euo pipefail
cd "$(dirname "$0")/.."
GRPC_MODULE=google.golang.org/grpc
GRPC_VERSION=v1.85.0
GRPCURL_MODULE=github.com/fullstorydev/grpcurl
GRPCURL_VERSION=v1.9.3
tools=$PWD/target/tools
client=$tools/grpc-interop-client
grpcurl=$tools/grpcurl

CASES=(empty_unary large_unary client_streaming server_streaming ping_pong empty_stream
    timeout_on_sleeping_server cancel_after_begin cancel_after_first_response
    status_code_and_message special_status_message custom_metadata unimplemented_method
    unimplemented_service rpc_soak channel_soak)

say() { echo "grpc-interop: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

# install_interop KIND PATH: grpc-go's pinned interop client or server (KIND) at PATH in
# target/tools, installed when missing or another version; 1 when it cannot be.
install_interop() {
    local kind=$1 path=$2
    if [ -x "$path" ]; then
        if ! command -v go >/dev/null \
            || go version -m "$path" 2>/dev/null | grep -q "$GRPC_MODULE[[:space:]]*$GRPC_VERSION"; then
            return 0
        fi
    fi
    command -v go >/dev/null || { say "no $path and no Go toolchain to install it with"; return 1; }
    mkdir -p "$tools/grpc-gobin"
    say "installing grpc-go's interop $kind $GRPC_VERSION into $tools"
    GOBIN=$tools/grpc-gobin go install "$GRPC_MODULE/interop/$kind@$GRPC_VERSION" \
        >"$tools/grpc-interop-$kind-install.log" 2>&1 \
        || { cat "$tools/grpc-interop-$kind-install.log" >&2; say "go install $GRPC_MODULE/interop/$kind@$GRPC_VERSION failed"; return 1; }
    mv "$tools/grpc-gobin/$kind" "$path"
}

install_client() {
    install_interop client "$client" || not_run "grpc-go's interop client cannot be installed"
}

# grpcurl in target/tools, installed when missing or another version; 1 when it cannot be.
install_grpcurl() {
    if [ -x "$grpcurl" ]; then
        if ! command -v go >/dev/null \
            || go version -m "$grpcurl" 2>/dev/null | grep -q "$GRPCURL_MODULE[[:space:]]*$GRPCURL_VERSION"; then
            return 0
        fi
    fi
    command -v go >/dev/null || return 1
    mkdir -p "$tools/grpc-gobin"
    say "installing grpcurl $GRPCURL_VERSION into $tools"
    GOBIN=$tools/grpc-gobin go install "$GRPCURL_MODULE/cmd/grpcurl@$GRPCURL_VERSION" \
        >"$tools/grpcurl-install.log" 2>&1 || return 1
    mv "$tools/grpc-gobin/grpcurl" "$grpcurl"
}

out=$(mktemp -d "${TMPDIR:-/tmp}/linerate-grpc.XXXXXX")
pid="" proxy_pid="" tproxy_pid="" gs_pid="" gproxy_pid="" gts_pid=""
cleanup() {
    local p
    for p in "$gts_pid" "$gproxy_pid" "$gs_pid" "$tproxy_pid" "$proxy_pid" "$pid"; do
        if [ -n "$p" ]; then
            kill "$p" 2>/dev/null || true
            wait "$p" 2>/dev/null || true
        fi
    done
    rm -rf "$out"
}
trap cleanup EXIT

bin=${1:-${CARGO_TARGET_DIR:-target}/release/linerate}
[ -x "$bin" ] || { say "no $bin: build it first (cargo build --release -p linerate)"; exit 1; }
# linerate's own interop client, built beside the binary (`--example grpc_interop_client`).
rclient=${GRPC_INTEROP_RUST_CLIENT:-$(dirname "$bin")/examples/grpc_interop_client}
command -v openssl >/dev/null || not_run "no openssl to make a throwaway certificate"
install_client

# A throwaway CA and a leaf it signs: Go's verifier takes no self-signed leaf as its own CA.
{
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$out/ca-key.pem" -out "$out/ca.pem" -days 1 -subj "/CN=linerate test CA" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign &&
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
            -keyout "$out/key.pem" -out "$out/leaf.csr" -subj /CN=localhost &&
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >"$out/leaf.ext" &&
        openssl x509 -req -in "$out/leaf.csr" -CA "$out/ca.pem" -CAkey "$out/ca-key.pem" \
            -CAcreateserial -days 1 -extfile "$out/leaf.ext" -out "$out/cert.pem"
} >"$out/openssl.log" 2>&1 \
    || { cat "$out/openssl.log" >&2; say "openssl could not make a certificate"; exit 1; }

"$bin" serve --addr 127.0.0.1:0 --h2c-port 0 --tls-port 0 --tls-cert "$out/cert.pem" \
    --tls-key "$out/key.pem" --workers 1 --no-pin --log-level warn >"$out/banner" 2>"$out/stderr" &
pid=$!
h2c="" tls=""
for _ in $(seq 100); do
    h2c=$(sed -n 's|.*(h2c, prior knowledge) on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$out/banner")
    tls=$(sed -n 's|.*HTTPS on https://127\.0\.0\.1:\([0-9]*\) .*|\1|p' "$out/banner")
    [ -n "$h2c" ] && [ -n "$tls" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$out/stderr" >&2; say "the server did not start"; exit 1; }
    sleep 0.1
done
[ -n "$h2c" ] && [ -n "$tls" ] || { cat "$out/banner" "$out/stderr" >&2; say "no h2c/HTTPS ports in the banner"; exit 1; }

# run_cases NAME PORT [FLAGS…]: every case once; prints NAME's pass count, adds failures.
failed=0
# `--client PATH` runs another interop client (linerate's own); `--per-case` prints a line for
# each case.
run_cases() {
    local name=$1 port=$2
    shift 2
    local passed=0 c log who=$client per_case=""
    local flags=()
    while [ $# -gt 0 ]; do
        case $1 in
        --client) who=$2; shift 2 ;;
        --per-case) per_case=1; shift ;;
        *) flags+=("$1"); shift ;;
        esac
    done
    for c in "${CASES[@]}"; do
        log="$out/$name-$c.log"
        if timeout 120 "$who" --server_host 127.0.0.1 --server_port "$port" --test_case "$c" \
            --soak_iterations 20 "${flags[@]}" >"$log" 2>&1; then
            passed=$((passed + 1))
            [ -z "$per_case" ] || printf '%-20s %-28s passed\n' "$name" "$c"
        else
            say "$name: $c FAILED"
            [ -z "$per_case" ] || printf '%-20s %-28s FAILED\n' "$name" "$c"
            tail -5 "$log" >&2
            failed=$((failed + 1))
        fi
    done
    printf '%-18s %d of %d cases passed\n' "$name" "$passed" "${#CASES[@]}"
}

run_cases "interop h2c" "$h2c" --use_tls=false
# --use_test_ca: take --ca_file as the only root (without it the client trusts the system's).
run_cases "interop TLS" "$tls" --use_tls=true --use_test_ca --ca_file "$out/ca.pem" \
    --server_host_override localhost
kill -0 "$pid" 2>/dev/null || { cat "$out/stderr" >&2; say "the server died during the cases"; exit 1; }

# expect NAME WANT ARGS…: grpcurl ARGS must succeed and print WANT (a fixed string).
expect() {
    local name=$1 want=$2 log="$out/grpcurl-$1.log"
    shift 2
    if timeout 60 "$grpcurl" "$@" >"$log" 2>&1 && grep -qF -- "$want" "$log"; then
        return 0
    fi
    say "grpcurl $name FAILED (wanted: $want)"
    cat "$log" >&2
    failed=$((failed + 1))
}

# grpcurl_checks NAME FLAGS… ADDRESS: the tool's view of the server through reflection.
grpcurl_checks() {
    local name=$1 before=$failed
    shift
    local services
    for services in benchmark.BenchmarkService grpc.testing.TestService grpc.health.v1.Health \
        grpc.reflection.v1.ServerReflection grpc.reflection.v1alpha.ServerReflection; do
        expect "$name-list-$services" "$services" "$@" list
    done
    expect "$name-describe" "rpc FullDuplexCall ( stream .grpc.testing.StreamingOutputCallRequest ) returns ( stream .grpc.testing.StreamingOutputCallResponse );" \
        "$@" describe grpc.testing.TestService
    expect "$name-describe-message" "int32 response_size = 2;" "$@" describe grpc.testing.SimpleRequest
    expect "$name-health" '"status": "SERVING"' -d '{"service": ""}' "$@" grpc.health.v1.Health/Check
    expect "$name-getsum" '"result": 5' -d '{"a": 2, "b": 3}' "$@" benchmark.BenchmarkService/GetSum
    [ "$failed" = "$before" ] && printf '%-18s list, describe, health Check, GetSum: passed\n' "$name"
    return 0
}

if install_grpcurl; then
    grpcurl_checks "grpcurl h2c" -plaintext "127.0.0.1:$h2c"
    grpcurl_checks "grpcurl TLS" -cacert "$out/ca.pem" -authority localhost "127.0.0.1:$tls"
else
    [ -f "$tools/grpcurl-install.log" ] && tail -5 "$tools/grpcurl-install.log" >&2
    say "grpcurl: NOT RUN: no Go toolchain, or go install $GRPCURL_MODULE/cmd/grpcurl@$GRPCURL_VERSION failed"
fi

# HttpArena's unary-grpc shape: h2load -m 100 POSTing its prebuilt GetSum frame to the demo's
# HTTP/1.1 port (h2c by its preface, as HttpArena's port 8080) and its TLS port. h2load counts a
# gRPC error as a 2xx, so the answers' DATA must be exactly 7 bytes a call (`00 00 00 00 02 08
# 03`) and every call must succeed.
h2load_grpc() {
    local name=$1 url=$2 log="$out/h2load-$1.txt" n=2000
    printf '\x00\x00\x00\x00\x04\x08\x01\x10\x02' >"$out/getsum.bin"
    timeout 60 h2load -n "$n" -c 4 -m 100 -d "$out/getsum.bin" -H 'content-type: application/grpc' \
        -H 'te: trailers' "$url/benchmark.BenchmarkService/GetSum" >"$log" 2>&1 || true
    if grep -q "^requests: $n total, $n started, $n done, $n succeeded" "$log" \
        && grep -qE "^traffic: .*\($((7 * n))\) data" "$log"; then
        printf '%-18s %d calls -m 100, all succeeded, %d bytes of answers (7 each)\n' "$name" "$n" $((7 * n))
    else
        tail -8 "$log" >&2
        say "$name: the h2load -m 100 GetSum run failed"
        failed=$((failed + 1))
    fi
}
plain=$(sed -n 's|^linerate serving on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$out/banner")
if ! command -v h2load >/dev/null; then
    say "h2load GetSum: NOT RUN: no h2load (apt-get install nghttp2-client)"
elif [ -z "$plain" ]; then
    cat "$out/banner" >&2
    say "no HTTP/1.1 port in the banner"
    failed=$((failed + 1))
else
    h2load_grpc "h2load h2c :8080" "http://127.0.0.1:$plain"
    h2load_grpc "h2load TLS" "https://127.0.0.1:$tls"
fi
kill -0 "$pid" 2>/dev/null || { cat "$out/stderr" >&2; say "the server died during the checks"; exit 1; }

# start_proxy NAME UPSTREAM_PORT [URL [FLAGS…]]: `linerate serve --app none` with an h2c
# listener proxying everything to URL (h2c://127.0.0.1:UPSTREAM_PORT by default); sets
# proxy_port and last_pid.
start_proxy() {
    local name=$1 up=$2 url=${3:-h2c://127.0.0.1:$2}
    shift $(($# < 3 ? $# : 3))
    "$bin" serve --app none --addr 127.0.0.1:0 --h2c-port 0 --proxy "/=$url" "$@" \
        --workers 1 --no-pin --log-level warn >"$out/$name.banner" 2>"$out/$name.stderr" &
    last_pid=$!
    proxy_port=""
    for _ in $(seq 100); do
        proxy_port=$(sed -n 's|.*(h2c, prior knowledge) on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$out/$name.banner")
        [ -n "$proxy_port" ] && return 0
        kill -0 "$last_pid" 2>/dev/null || break
        sleep 0.1
    done
    cat "$out/$name.banner" "$out/$name.stderr" >&2
    say "the $name proxy did not start"
    exit 1
}

# Through the proxy to the demo's TestService.
start_proxy proxy "$h2c"
proxy_pid=$last_pid
run_cases "proxy to linerate" "$proxy_port" --use_tls=false
kill -0 "$proxy_pid" 2>/dev/null || { cat "$out/proxy.stderr" >&2; say "the proxy died during the cases"; exit 1; }

# Through the proxy to the demo's TLS port: HTTP/2 over TLS, ALPN h2, the leaf verified as
# localhost against the throwaway CA.
start_proxy tproxy "$tls" "h2://localhost:$tls" --proxy-tls-ca "$out/ca.pem"
tproxy_pid=$last_pid
run_cases "proxy h2 over TLS" "$proxy_port" --use_tls=false
kill -0 "$tproxy_pid" 2>/dev/null || { cat "$out/tproxy.stderr" >&2; say "the TLS proxy died during the cases"; exit 1; }

# Through the proxy to grpc-go's interop server, where one is built.
gserver=${GRPC_INTEROP_SERVER:-$tools/grpc-interop-server}
if [ -x "$gserver" ] || install_interop server "$gserver"; then
    gport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$gserver" --port "$gport" --use_tls=false >"$out/grpc-go-server.log" 2>&1 &
    gs_pid=$!
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$gport") 2>/dev/null && break
        kill -0 "$gs_pid" 2>/dev/null || { cat "$out/grpc-go-server.log" >&2; say "grpc-go's server did not start"; exit 1; }
        sleep 0.1
    done
    start_proxy gproxy "$gport"
    gproxy_pid=$last_pid
    run_cases "proxy to grpc-go" "$proxy_port" --use_tls=false
    kill -0 "$gproxy_pid" 2>/dev/null || { cat "$out/gproxy.stderr" >&2; say "the proxy died during the cases"; exit 1; }
    # linerate's own gRPC client (crates/linerate/examples/grpc_interop_client.rs: the
    # generated client on linerate's HTTP/2 connection) against grpc-go's server, over h2c,
    # then over TLS (grpc-go's server with its test certificate, verified against grpc-go's
    # test CA from the module cache as *.test.google.fr), one line per case.
    if [ -x "$rclient" ]; then
        run_cases "linerate client" "$gport" --use_tls=false --client "$rclient" --per-case
        gtestdata=$(go env GOMODCACHE 2>/dev/null)/$GRPC_MODULE@$GRPC_VERSION/testdata
        if [ -f "$gtestdata/ca.pem" ]; then
            gtport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
            "$gserver" --port "$gtport" --use_tls=true --tls_cert_file "$gtestdata/server1.pem" \
                --tls_key_file "$gtestdata/server1.key" >"$out/grpc-go-tls-server.log" 2>&1 &
            gts_pid=$!
            for _ in $(seq 100); do
                (exec 3<>"/dev/tcp/127.0.0.1/$gtport") 2>/dev/null && break
                kill -0 "$gts_pid" 2>/dev/null || { cat "$out/grpc-go-tls-server.log" >&2; say "grpc-go's TLS server did not start"; exit 1; }
                sleep 0.1
            done
            run_cases "linerate client TLS" "$gtport" --use_tls=true --use_test_ca \
                --ca_file "$gtestdata/ca.pem" --server_host_override foo.test.google.fr \
                --client "$rclient" --per-case
        else
            say "linerate client TLS to grpc-go: NOT RUN: no grpc-go test CA at $gtestdata/ca.pem"
        fi
    else
        say "linerate client to grpc-go: NOT RUN: no $rclient (cargo build -p linerate --example grpc_interop_client)"
    fi
else
    say "NOT RUN: the proxy to grpc-go's interop server (no $gserver, and it cannot be installed)"
    say "NOT RUN: linerate's client to grpc-go's interop server (no $gserver, and it cannot be installed)"
fi
[ "$failed" = 0 ] || { say "$failed case runs or checks failed"; exit 1; }
