#!/usr/bin/env bash
# gRPC-Web against a real server: the demo's benchmark.BenchmarkService/GetSum
# called with curl over HTTP/1.1 and over h2c with prior knowledge (application/grpc-web+proto,
# and -text: base64 both ways),
# each answer checked byte for byte (the message, then the trailer frame with grpc-status 0);
# then @connectrpc/connect-node's grpc-web transport (scripts/grpc-web/client.mjs, the
# packages installed from npm into target/tools/grpc-web-node). Then the same checks through
# linerate's proxy translating gRPC-Web to gRPC (`--proxy /=h2c://… --proxy-grpc-web`, as
# Envoy's grpc_web filter) to the demo's h2c port. Builds nothing: pass the binary (default
# target/release/linerate).
#
#   scripts/grpc-web.sh [path/to/linerate]
#
# The servers bind 127.0.0.1 (OS-chosen ports) and are stopped by their PIDs. Exit 2, with a
# line saying why, where a stage cannot run (no curl; no node or npm, or the install fails).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "grpc-web: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

bin=${1:-${CARGO_TARGET_DIR:-target}/release/linerate}
[ -x "$bin" ] || { say "no $bin: build it first (cargo build --release -p linerate)"; exit 1; }
command -v curl >/dev/null || not_run "no curl"

out=$(mktemp -d "${TMPDIR:-/tmp}/linerate-grpc-web.XXXXXX")
pid="" proxy_pid=""
cleanup() {
    local p
    for p in "$proxy_pid" "$pid"; do
        if [ -n "$p" ]; then
            kill "$p" 2>/dev/null || true
            wait "$p" 2>/dev/null || true
        fi
    done
    rm -rf "$out"
}
trap cleanup EXIT

"$bin" serve --addr 127.0.0.1:0 --h2c-port 0 --workers 1 --no-pin --log-level warn \
    >"$out/banner" 2>"$out/stderr" &
pid=$!
port="" h2c=""
for _ in $(seq 100); do
    port=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$out/banner" | head -1)
    h2c=$(sed -n 's|.*(h2c, prior knowledge) on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$out/banner")
    [ -n "$port" ] && [ -n "$h2c" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$out/stderr" >&2; say "the server did not start"; exit 1; }
    sleep 0.1
done
[ -n "$port" ] || { cat "$out/banner" >&2; say "no port in the banner"; exit 1; }
path=/benchmark.BenchmarkService/GetSum

# HttpArena's frame: GetSum(a=1, b=2). The answer: SumReply{result: 3}, then the trailer frame.
printf '\x00\x00\x00\x00\x04\x08\x01\x10\x02' >"$out/frame"
printf '\x00\x00\x00\x00\x02\x08\x03\x80\x00\x00\x00\x0fgrpc-status:0\r\n' >"$out/want"
failed=0
check() { # NAME GOT WANT
    if cmp -s "$2" "$3"; then
        echo "curl $1: ok"
    else
        say "curl $1: FAILED"; od -c "$2" | head -5 >&2; failed=$((failed + 1))
    fi
}
# A -text answer may be several base64 flushes, each padded (PROTOCOL-WEB.md; a proxy flushes
# per piece): each 4-character quantum is decoded on its own.
decode_text() { # FILE
    { fold -w4 "$1"; echo; } | while read -r q; do
        [ -z "$q" ] || printf '%s' "$q" | base64 -d
    done
}
base64 -w0 "$out/frame" >"$out/frame.txt"
# curl_checks NAME PORT H2C_PORT: binary and -text, over HTTP/1.1 and h2c.
curl_checks() {
    local name=$1 how flag url
    for how in "--http1.1 http://127.0.0.1:$2" "--http2-prior-knowledge http://127.0.0.1:$3"; do
        set -- $how
        flag="$name $1" url=$2$path
        curl -sS "$1" -o "$out/got" -D "$out/head" --data-binary @"$out/frame" \
            -H 'content-type: application/grpc-web+proto' -H 'x-grpc-web: 1' "$url"
        check "$flag grpc-web+proto" "$out/got" "$out/want"
        grep -qi '^content-type: application/grpc-web+proto' "$out/head" || { say "$flag binary: wrong content-type"; failed=$((failed + 1)); }
        curl -sS "$1" -o "$out/got.txt" -D "$out/head.txt" --data-binary @"$out/frame.txt" \
            -H 'content-type: application/grpc-web-text' -H 'x-grpc-web: 1' "$url"
        decode_text "$out/got.txt" >"$out/got.dec" 2>/dev/null || true
        check "$flag grpc-web-text" "$out/got.dec" "$out/want"
        grep -qi '^content-type: application/grpc-web-text+proto' "$out/head.txt" || { say "$flag text: wrong content-type"; failed=$((failed + 1)); }
    done
}
curl_checks linerate "$port" "$h2c"

# The proxy: gRPC-Web in, gRPC to the demo's h2c port.
"$bin" serve --app none --addr 127.0.0.1:0 --h2c-port 0 --proxy "/=h2c://127.0.0.1:$h2c" \
    --proxy-grpc-web --workers 1 --no-pin --log-level warn >"$out/proxy.banner" 2>"$out/proxy.stderr" &
proxy_pid=$!
pport="" ph2c=""
for _ in $(seq 100); do
    pport=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$out/proxy.banner" | head -1)
    ph2c=$(sed -n 's|.*(h2c, prior knowledge) on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$out/proxy.banner")
    [ -n "$pport" ] && [ -n "$ph2c" ] && break
    kill -0 "$proxy_pid" 2>/dev/null || { cat "$out/proxy.stderr" >&2; say "the proxy did not start"; exit 1; }
    sleep 0.1
done
[ -n "$pport" ] && [ -n "$ph2c" ] || { cat "$out/proxy.banner" >&2; say "no ports in the proxy's banner"; exit 1; }
curl_checks proxy "$pport" "$ph2c"
[ "$failed" = 0 ] || { say "$failed curl checks failed"; exit 1; }

# connect-node's grpc-web transport.
command -v node >/dev/null && command -v npm >/dev/null || not_run "no node or npm for @connectrpc/connect-node"
tools=$PWD/target/tools/grpc-web-node
if [ ! -d "$tools/node_modules/@connectrpc/connect-node" ]; then
    mkdir -p "$tools"
    (cd "$tools" && npm install --no-audit --no-fund @connectrpc/connect@1 @connectrpc/connect-node@1 \
        @bufbuild/protobuf@1 >"$out/npm.log" 2>&1) || { cat "$out/npm.log" >&2; not_run "npm install failed"; }
fi
cp scripts/grpc-web/client.mjs "$tools/client.mjs"
node "$tools/client.mjs" "http://127.0.0.1:$port"
echo "connect-node through the proxy:"
node "$tools/client.mjs" "http://127.0.0.1:$pport"
kill -0 "$pid" 2>/dev/null || { cat "$out/stderr" >&2; say "the server died"; exit 1; }
kill -0 "$proxy_pid" 2>/dev/null || { cat "$out/proxy.stderr" >&2; say "the proxy died"; exit 1; }
