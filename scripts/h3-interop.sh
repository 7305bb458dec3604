#!/usr/bin/env bash
# HTTP/3 interop: aioquic's HTTP/3 client (PyPI; scripts/h3client.py drives it) against
# `linerate serve --quic`, every answer compared with the same request's answer over HTTP/1.1
# and HTTP/2 (curl): the demo's endpoints, static files byte for byte, a range, a 304, a
# request body, many requests on one connection, and two workers (connection IDs steer each
# connection's packets to its worker).
#
# HttpArena's two HTTP/3 profiles, shaped as HttpArena runs them: static-h3's 20 files under
# /static/ (the names and sizes of data/static in MDA2AV/HttpArena, our own content; the text
# ones with a gzip -9 sibling), each fetched plain and with static-h3's Accept-Encoding and
# checked byte for byte against the file or its .gz; baseline-h3's GET /baseline2?a=1&b=1 and
# other sums, the body checked to be the sum (baseline-h3 has no POST; the HTTP/1.1 baseline's
# POST /baseline11 is checked too).
#
#   scripts/h3-interop.sh [path/to/linerate]     (default: target/release/linerate)
#
# Exit 2 with a NOT RUN line where it cannot run (no aioquic and no pip to install it, no curl
# or openssl). The server binds 127.0.0.1 on free ports and is stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/linerate}

stage=h3-interop
# shellcheck source=scripts/h3-common.sh
. scripts/h3-common.sh

[ -x "$bin" ] || { say "no $bin (build it first)"; exit 1; }
command -v curl >/dev/null || not_run "no curl for the HTTP/1.1 and HTTP/2 answers"
h3_need_aioquic

h3_workdir h3


mkdir -p "$out/www"
head -c 300000 /dev/urandom >"$out/www/big.bin"
head -c 14000 /dev/urandom >"$out/www/first.bin"
printf 'hello over quic\n' >"$out/www/hello.txt"
head -c 200000 /dev/urandom >"$out/body.bin"
h3_cert "$out" IP:127.0.0.1,DNS:localhost
# start ARGS...: a server with --quic on fresh ports (the previous one stopped).
start() {
    stop
    port=$(free_port)
    tls_port=$(free_port)
    "$bin" serve --addr "127.0.0.1:$port" --tls-port "$tls_port" --tls-cert "$out/cert.pem" \
        --tls-key "$out/key.pem" --quic --workers 2 --no-pin --log-level warn "$@" \
        >"$out/banner.txt" 2>"$out/server.err" &
    pid=$!
    for _ in $(seq 1 600); do
        grep -q "^Stop with" "$out/banner.txt" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || { cat "$out/server.err" >&2; say "the server did not start"; exit 1; }
        sleep 0.1
    done
    grep -q "^Stop with" "$out/banner.txt" || { cat "$out/server.err" >&2; say "no banner in 60 s"; exit 1; }
}

h3() { timeout 60 python3 scripts/h3client.py -k --timeout 50 "$@"; }
fail=0
n=0
# check PATH [CURL/H3 ARGS...]: the status and body over HTTP/3 are the ones HTTP/1.1 and
# HTTP/2 (TLS) give.
check() {
    local path=$1
    shift
    n=$((n + 1))
    local want1 want2 got
    # curl leaves -o's file as it was when no body comes (a 304): start empty.
    : >"$out/c1"
    : >"$out/c2"
    want1=$(curl -s -m 30 -o "$out/c1" -w '%{http_code}' "$@" "http://127.0.0.1:$port$path")
    want1="$want1 $(sha256sum <"$out/c1" | cut -c1-64)"
    want2=$(curl -sk -m 30 --http2 -o "$out/c2" -w '%{http_code}' "$@" "https://127.0.0.1:$tls_port$path")
    want2="$want2 $(sha256sum <"$out/c2" | cut -c1-64)"
    local h3args=() shown=""
    while [ $# -gt 0 ]; do
        case $1 in
            -H) h3args+=(-H "$2"); shown+=", $2"; shift 2 ;;
            --data-binary) h3args+=(-d "${2#@}"); shift 2 ;;
            *) shift ;;
        esac
    done
    if ! got=$(h3 "${h3args[@]}" "https://127.0.0.1:$tls_port$path" 2>"$out/h3.err"); then
        echo "  FAIL  $path: the HTTP/3 client failed: $(tail -1 "$out/h3.err")" >&2
        fail=1
        return
    fi
    local status digest
    status=$(grep -o 'status=[0-9]*' <<<"$got" | head -1 | cut -d= -f2)
    digest=$(grep -o 'sha256=[0-9a-f]*' <<<"$got" | head -1 | cut -d= -f2)
    h3_got="$status $digest"
    if [ "$h3_got" = "$want1" ] && [ "$want1" = "$want2" ]; then
        echo "  ok    $path (${status}${shown})"
    else
        echo "  FAIL  $path: h3 '$h3_got', h1 '$want1', h2 '$want2'" >&2
        fail=1
    fi
}

# check_file PATH FILE [CURL/H3 ARGS...]: check, and the HTTP/3 answer is 200 with FILE's bytes.
check_file() {
    local path=$1 file=$2
    shift 2
    h3_got=""
    check "$path" "$@"
    local want
    want="200 $(sha256sum <"$file" | cut -c1-64)"
    if [ "$h3_got" != "$want" ]; then
        echo "  FAIL  $path: h3 '$h3_got', not ${file##*/} ($want)" >&2
        fail=1
    fi
}

# check_sum A B [POST BODY]: /baseline2?a=A&b=B (or POST /baseline11 with BODY) answers the sum
# over all three, and the body is that sum.
check_sum() {
    local a=$1 b=$2 body=${3:-}
    if [ -n "$body" ]; then
        printf '%s' "$body" >"$out/sum-body"
        check "/baseline11?a=$a&b=$b" --data-binary "@$out/sum-body"
    else
        check "/baseline2?a=$a&b=$b"
    fi
    local sum=$((a + b + ${body:-0})) seen
    seen=$(cat "$out/c1")
    if [ "$seen" != "$sum" ]; then
        echo "  FAIL  sum of $a, $b${body:+ and $body}: '$seen', want $sum" >&2
        fail=1
    fi
}

echo "the demo's endpoints:"
start
check /json
check /plaintext
check "/baseline2?a=13&b=42"
check /upload --data-binary "@$out/body.bin"
check /nowhere

echo "static files (--root):"
start --root "$out/www"
check /big.bin
check /first.bin
check /hello.txt
check /big.bin -H "Range: bytes=1000-1999"
check /missing.txt
etag=$(curl -sI "http://127.0.0.1:$port/hello.txt" | tr -d '\r' | awk -F': ' 'tolower($1)=="etag"{print $2}')
if [ -n "$etag" ]; then
    check /hello.txt -H "If-None-Match: $etag"
fi

echo "HttpArena's static-h3 (its 20 files under /static/, plain and with its Accept-Encoding):"
mkdir -p "$out/arena/static"
python3 - "$out/arena/static" <<'PY'
import os, random, sys
# data/static in MDA2AV/HttpArena (28606ba): name and size of each of static-h3's 20 files
# (requests/static-h2-uris.txt).
FILES = [("reset.css", 8192), ("layout.css", 25600), ("theme.css", 18432),
         ("components.css", 204800), ("utilities.css", 61440), ("analytics.js", 12288),
         ("helpers.js", 22528), ("app.js", 204800), ("vendor.js", 307200), ("router.js", 35840),
         ("header.html", 122880), ("footer.html", 56320), ("regular.woff2", 18432),
         ("bold.woff2", 22528), ("logo.svg", 15344), ("icon-sprite.svg", 71680),
         ("hero.webp", 46080), ("thumb1.webp", 8192), ("thumb2.webp", 6144),
         ("manifest.json", 2883)]
rng = random.Random(20)
words = "static file quic stream window packet header body frame push".split()
for name, size in FILES:
    if name.endswith((".woff2", ".webp")):
        data = rng.randbytes(size)
    else:
        text = []
        n = 0
        while n < size:
            line = f"{name} {n} {' '.join(rng.choices(words, k=6))} {rng.randrange(1 << 32):08x}\n"
            text.append(line)
            n += len(line)
        data = "".join(text).encode()[:size]
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(data)
PY
for f in "$out"/arena/static/*; do
    case $f in *.woff2 | *.webp) ;; *) gzip -9 -n -k "$f" ;; esac
done
# One server for both, as HttpArena runs it: the files under /static/ beside the demo's routes.
start --root "$out/arena/static" --root-prefix /static --app demo
arena_ae="Accept-Encoding: br;q=1, gzip;q=0.8"
arena_files=0
for file in "$out"/arena/static/*; do
    [[ $file == *.gz ]] && continue
    arena_files=$((arena_files + 1))
    name=${file##*/}
    check_file "/static/$name" "$file"
    [ -f "$file.gz" ] && file=$file.gz
    check_file "/static/$name" "$file" -H "$arena_ae"
done
[ "$arena_files" = 20 ] || { echo "  FAIL  $arena_files static-h3 files, not 20" >&2; fail=1; }

echo "HttpArena's baseline-h3 (/baseline2) and the HTTP/1.1 baseline's POST, on the same server:"
check_sum 1 1
check_sum 1 2
check_sum $((RANDOM % 900 + 100)) $((RANDOM % 900 + 100))
check_sum 13 42 7

echo "request trailers (RFC 9114 §4.1: a HEADERS frame after the body ends the request):"
printf '7' >"$out/seven"
# trailer NAME ARGS...: POST /baseline11?a=13&b=42 with body 7 and ARGS (trailers) over HTTP/3.
trailer() {
    local what=$1
    shift
    n=$((n + 1))
    h3 --print-body "$@" "https://127.0.0.1:$tls_port/baseline11?a=13&b=42" >"$out/tr.out" 2>"$out/tr.err"
}
if trailer body -d "$out/seven" --trailer 'x-checksum: 62' --trailer 'x-more: yes' \
    && grep -q 'status=200' "$out/tr.out" && [ "$(tail -1 "$out/tr.out")" = 62 ]; then
    echo "  ok    a body and two trailer fields: 200, the sum of the body's request (62)"
else
    echo "  FAIL  a body with trailers: $(cat "$out/tr.out" "$out/tr.err" | tail -2)" >&2
    fail=1
fi
if trailer none --trailer 'x-checksum: 55' && grep -q 'status=200' "$out/tr.out" \
    && [ "$(tail -1 "$out/tr.out")" = 55 ]; then
    echo "  ok    trailers after the HEADERS alone (no DATA): 200, 55"
else
    echo "  FAIL  trailers without a body: $(cat "$out/tr.out" "$out/tr.err" | tail -2)" >&2
    fail=1
fi
# §4.3: pseudo-header fields never appear in trailers; §4.1.2: a malformed request is a stream
# error of type H3_MESSAGE_ERROR (0x10e), and the connection serves on.
if ! trailer pseudo -d "$out/seven" --trailer ':path: /other' \
    && grep -q 'reset: 0x10e' "$out/tr.out"; then
    echo "  ok    a pseudo-header in the trailers: the stream reset with H3_MESSAGE_ERROR"
else
    echo "  FAIL  a pseudo-header in the trailers: $(cat "$out/tr.out" "$out/tr.err" | tail -2)" >&2
    fail=1
fi

# Many requests on one connection, 20 in flight: every answer whole.
start
n=$((n + 1))
if got=$(h3 -n 400 -c 20 --expect-status 200 "https://127.0.0.1:$tls_port/json" 2>"$out/h3.err"); then
    count=$(grep -c 'sha256=8811a6f55cb434d10921bccf7108016db61792083bb929eef0e592e376a0db9a' <<<"$got" || true)
    if [ "$count" = 400 ]; then
        echo "  ok    400 requests on one connection, 20 at once"
    else
        echo "  FAIL  400 requests on one connection: $count whole answers" >&2
        fail=1
    fi
else
    echo "  FAIL  400 requests on one connection: $(tail -1 "$out/h3.err")" >&2
    fail=1
fi

# Connections from many source ports: both workers serve (each connection's packets reach
# the worker that owns it).
n=$((n + 1))
bad=0
for i in $(seq 1 12); do
    h3 --expect-status 200 "https://127.0.0.1:$tls_port/plaintext" >/dev/null 2>&1 || bad=$((bad + 1))
done
if [ "$bad" = 0 ]; then
    echo "  ok    12 connections"
else
    echo "  FAIL  $bad of 12 connections failed" >&2
    fail=1
fi

kill -0 "$pid" 2>/dev/null || { say "the server died"; cat "$out/server.err" >&2; exit 1; }
if [ "$fail" != 0 ]; then
    tail -20 "$out/server.err" >&2
    say "FAILED"
    exit 1
fi
echo "h3-interop: $n checks passed (aioquic $(python3 -c 'import aioquic; print(aioquic.__version__)'))"
