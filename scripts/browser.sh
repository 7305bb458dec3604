#!/usr/bin/env bash
# A real browser against the real binary: headless Chromium (Debian's package) loads pages from
# `linerate serve --root` over HTTP/1.1 and over HTTPS with HTTP/2 (ALPN h2; a throwaway
# certificate, accepted with --ignore-certificate-errors), and the script checks what the page
# saw and what the access log says the browser sent.
#
# The URLs are ones the server once refused with 400: Chromium sends `|`, `^`, `{`, `}`,
# backquote and a stray `%` unencoded in a query (the WHATWG URL Standard's percent-encode
# sets); a `|` in a path it encodes itself. Each page must load (the page's script writes location.search into
# the DOM Chromium dumps) and be logged with status 200 and the bytes as sent.
#
#   scripts/browser.sh [path/to/linerate]     (default: target/release/linerate)
#
# Installs Chromium with apt when it is missing and this runs as root on Debian; exit 2 with a
# NOT RUN line saying why where it cannot (no Chromium and no way to install it, no openssl).
# The server binds 127.0.0.1 on free ports and is stopped by its PID; Chromium runs with its
# background networking off (this machine reaches no other host) and a fresh profile.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/linerate}

say() { echo "browser: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

[ -x "$bin" ] || { say "no $bin (build it first)"; exit 1; }
command -v openssl >/dev/null || not_run "no openssl to make a throwaway certificate"
chromium=$(command -v chromium || true)
if [ -z "$chromium" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        say "installing Debian's chromium (apt-get, --no-install-recommends)"
        export DEBIAN_FRONTEND=noninteractive
        if ! apt-get install -y --no-install-recommends chromium >/tmp/linerate-chromium-apt.log 2>&1; then
            apt-get update >/dev/null 2>&1 || true
            apt-get install -y --no-install-recommends chromium >/tmp/linerate-chromium-apt.log 2>&1 \
                || { tail -5 /tmp/linerate-chromium-apt.log >&2; not_run "apt-get install chromium failed"; }
        fi
        chromium=$(command -v chromium || true)
    fi
    [ -n "$chromium" ] || not_run "no chromium, and not root on Debian to install it"
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/linerate-browser.XXXXXX")
pid=""
cleanup() {
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$out"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

mkdir -p "$out/www"
cat >"$out/www/index.html" <<'HTML'
<!doctype html>
<html><head><meta charset="utf-8"><title>linerate browser check</title></head>
<body><p id="seen"></p>
<script>document.getElementById("seen").textContent = "SEEN[" + location.pathname + location.search + "]";</script>
</body></html>
HTML
cp "$out/www/index.html" "$out/www/a|b.html"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$out/key.pem" -out "$out/cert.pem" -days 1 -subj /CN=localhost \
    -addext subjectAltName=IP:127.0.0.1,DNS:localhost >/dev/null 2>&1
port=$(free_port)
tls_port=$(free_port)
"$bin" serve --addr "127.0.0.1:$port" --tls-port "$tls_port" --tls-cert "$out/cert.pem" \
    --tls-key "$out/key.pem" --root "$out/www" --workers 1 --no-pin --log-level warn \
    --access-log "$out/access.log" >"$out/banner.txt" 2>"$out/server.err" &
pid=$!
for _ in $(seq 1 200); do
    grep -q "^Stop with" "$out/banner.txt" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { cat "$out/server.err" >&2; say "the server did not start"; exit 1; }
    sleep 0.1
done
grep -q "^Stop with" "$out/banner.txt" || { cat "$out/server.err" >&2; say "no banner in 20 s"; exit 1; }

fail=0
n=0
# load URL WANT: Chromium dumps the page's DOM; the page must have seen WANT.
load() {
    local url=$1 want=$2 dom
    n=$((n + 1))
    dom=$(timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --disable-features=MediaRouter,OptimizationHints --ignore-certificate-errors \
        --user-data-dir="$out/profile-$n" --dump-dom "$url" 2>"$out/chromium-$n.err" || true)
    dom=$(sed 's/&amp;/\&/g' <<<"$dom")
    if grep -qF "SEEN[$want]" <<<"$dom"; then
        echo "  ok    $url"
    else
        echo "  FAIL  $url: the page did not see $want" >&2
        grep -o 'SEEN\[[^]]*\]\|<title>[^<]*</title>\|<pre[^>]*>[^<]*' <<<"$dom" | head -3 >&2 || true
        fail=1
    fi
}

echo "Chromium $("$chromium" --version 2>/dev/null | awk '{print $2}') against linerate ($bin)"
for base in "http://127.0.0.1:$port" "https://127.0.0.1:$tls_port"; do
    load "$base/index.html?filter=a|b" "/index.html?filter=a|b"
    load "$base/index.html?q=a^b&r={x}&s=\`t\`" "/index.html?q=a^b&r={x}&s=\`t\`"
    load "$base/index.html?d=100%" "/index.html?d=100%"
    # Chromium percent-encodes `|` in a path itself (the file is found all the same).
    load "$base/a|b.html?x=1" "/a%7Cb.html?x=1"
done

# What the browser sent, as the server logged it: every page 200, HTTP/2 over TLS. The drain
# ends it (the log is written by then); a server that does not end is killed after 20 s.
kill -TERM "$pid"
for _ in $(seq 1 200); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
kill -KILL "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
pid=""
for want in '"GET /index.html?filter=a|b HTTP/1.1" 200' '"GET /index.html?filter=a|b HTTP/2.0" 200' \
    '"GET /index.html?q=a^b&r={x}&s=`t` HTTP/2.0" 200' '"GET /index.html?d=100% HTTP/1.1" 200' \
    '"GET /a%7Cb.html?x=1 HTTP/2.0" 200'; do
    if grep -qF "$want" "$out/access.log"; then
        echo "  ok    logged $want"
    else
        echo "  FAIL  not logged: $want" >&2
        fail=1
    fi
done
if grep -q '" 400 ' "$out/access.log"; then
    echo "  FAIL  refused requests:" >&2
    grep '" 400 ' "$out/access.log" >&2
    fail=1
fi
[ "$fail" = 0 ] || { say "FAILED"; exit 1; }
echo "browser: $n pages loaded and logged as sent"
