#!/usr/bin/env bash
# HttpArena's gateway shape, run for real (docs/gateway.md): two linerate processes started
# from docs/gateway/edge.toml and docs/gateway/app.toml as shipped, with only their paths and
# port replaced —
#   the app:  the demo on a Unix socket, with a throwaway PostgreSQL 15 (scripts/pg.sh);
#   the edge: HTTPS (h2 and http/1.1, a throwaway certificate), /static/ from disk, the rest
#             proxied to the app over kept-alive connections.
#
#   scripts/gateway.sh check [path/to/linerate]   what HttpArena's validate.sh checks for
#                                                 gateway-64, with curl over HTTP/2: h2
#                                                 negotiation, static types and sizes, a
#                                                 missing file's 404, /json/50 with its
#                                                 totals, /async-db's structure and its empty
#                                                 range, /baseline2 with random inputs
#   scripts/gateway.sh bench [path/to/linerate]   the same, then h2load -c 64 -m 32 over TLS
#                                                 on HttpArena's mix (edge on CPU 0, app,
#                                                 database and load on CPU 1)
#
# Exit 2 with a NOT RUN line saying why where it cannot run (no PostgreSQL, no curl with HTTP/2,
# no openssl; bench: no h2load). Everything binds 127.0.0.1 or a socket in a temporary
# directory, and everything started here is stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-check}
bin=${2:-target/release/linerate}
case $mode in check | bench) ;; *) echo "usage: scripts/gateway.sh check|bench [linerate]" >&2; exit 1 ;; esac

say() { echo "gateway: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

[ -x "$bin" ] || { say "no $bin (build it first)"; exit 1; }
command -v openssl >/dev/null || not_run "no openssl to make a throwaway certificate"
command -v python3 >/dev/null || not_run "no python3 to read the JSON answers"
curl --version 2>/dev/null | grep -qw HTTP2 || not_run "no curl with HTTP/2"
if [ "$mode" = bench ]; then
    command -v h2load >/dev/null || not_run "no h2load (scripts/peers.sh installs it)"
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/linerate-gateway.XXXXXX")
pids=()
pg_dir=
cleanup() {
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    [ -z "$pg_dir" ] || scripts/pg.sh stop "$pg_dir" >/dev/null 2>&1 || true
    rm -rf "$out"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

set +e
pg_out=$(scripts/pg.sh start)
rc=$?
set -e
case $rc in
    0) ;;
    2) not_run "no PostgreSQL for /async-db (see the pg line above)" ;;
    *) say "scripts/pg.sh start failed"; exit 1 ;;
esac
pg_dir=$(echo "$pg_out" | sed -n 's/^PG_DIR=//p')
db_url=$(echo "$pg_out" | sed -n 's/^DATABASE_URL=//p')

openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$out/key.pem" -out "$out/cert.pem" >/dev/null 2>&1

# HttpArena's static names, with content of a realistic size.
mkdir -p "$out/static"
python3 - "$out/static" <<'PY'
import sys, os
d = sys.argv[1]
css = "".join(f".c{i} {{ margin: 0; padding: {i % 7}px; color: #{i * 2654435761 % 0xffffff:06x}; }}\n" for i in range(300))
js = "".join(f"function f{i}(a, b) {{ return a * {i} + b; }}\n" for i in range(400))
open(os.path.join(d, "reset.css"), "w").write(css)
open(os.path.join(d, "app.js"), "w").write(js)
open(os.path.join(d, "index.html"), "w").write("<!doctype html><title>gateway</title>\n")
PY

port=$(free_port)
sock=$out/app.sock
sed -e "s|/run/linerate-app.sock|$sock|" docs/gateway/app.toml >"$out/app.toml"
sed -e "s|/run/linerate-app.sock|$sock|" \
    -e "s|0.0.0.0:8443|127.0.0.1:$port|" \
    -e "s|/etc/linerate/gateway.pem|$out/cert.pem|" \
    -e "s|/etc/linerate/gateway.key|$out/key.pem|" \
    -e "s|/srv/gateway/static|$out/static|" \
    docs/gateway/edge.toml >"$out/edge.toml"
for f in app edge; do
    "$bin" serve --check-config "$out/$f.toml" >/dev/null || { say "docs/gateway/$f.toml does not check"; exit 1; }
done

pin_app=() pin_edge=()
if [ "$mode" = bench ]; then
    pin_app=(--workers 1 --cpus 1)
    pin_edge=(--workers 1 --cpus 0)
fi
"$bin" serve --config "$out/app.toml" --database-url "$db_url" --log-level warn "${pin_app[@]}" \
    >"$out/app.log" 2>&1 &
pids+=($!)
"$bin" serve --config "$out/edge.toml" --log-level warn "${pin_edge[@]}" >"$out/edge.log" 2>&1 &
pids+=($!)

base=https://127.0.0.1:$port
up=0
for _ in $(seq 100); do
    if curl -sk --max-time 2 --http2 -o /dev/null "$base/static/reset.css" && [ -S "$sock" ]; then
        up=1
        break
    fi
    sleep 0.1
done
if [ $up = 0 ]; then
    cat "$out/app.log" "$out/edge.log" >&2
    say "the edge or the app did not start"
    exit 1
fi

pass=0 fail=0
ok() { echo "  PASS $*"; pass=$((pass + 1)); }
bad() { echo "  FAIL $*"; fail=$((fail + 1)); }
c() { curl -sk --max-time 30 --http2 "$@"; }
ctype() { c -D- -o /dev/null "$1" | tr -d '\r' | sed -n 's/^[Cc]ontent-[Tt]ype: *//p'; }
expect_type() {   # expect_type PATH TYPE...: the type (before any ;) is one of these
    local got
    got=$(ctype "$base$1")
    for t in "${@:2}"; do
        [ "${got%%;*}" = "$t" ] && { ok "$1 Content-Type ($got)"; return; }
    done
    bad "$1 Content-Type: got '$got', expected ${*:2}"
}

echo "gateway checks (HttpArena gateway-64's, against $base):"
proto=$(c -o /dev/null -w '%{http_version}' "$base/static/reset.css")
[ "$proto" = 2 ] && ok "HTTP/2 negotiated" || bad "HTTP/2 negotiation: got HTTP/$proto"
expect_type /static/reset.css text/css
# RFC 9239 made text/javascript the type; HttpArena takes both.
expect_type /static/app.js text/javascript application/javascript
size=$(c -o /dev/null -w '%{size_download}' "$base/static/app.js")
want=$(stat -c %s "$out/static/app.js")
[ "$size" = "$want" ] && ok "/static/app.js whole ($size bytes)" || bad "/static/app.js: $size bytes of $want"
status=$(c -o /dev/null -w '%{http_code}' "$base/static/nonexistent.txt")
[ "$status" = 404 ] && ok "/static/nonexistent.txt 404" || bad "/static/nonexistent.txt: $status"

json=$(c "$base/json/50")
verdict=$(echo "$json" | python3 -c '
import sys, json
d = json.load(sys.stdin)
items = d.get("items", [])
def whole(it):
    r = it.get("rating")
    return all(k in it for k in ("id", "name", "category", "price", "quantity", "total")) \
        and isinstance(it.get("tags"), list) and isinstance(it.get("active"), bool) \
        and isinstance(r, dict) and "score" in r and "count" in r
totals = all(abs(it["total"] - round(it["price"] * it["quantity"], 2)) <= 0.02 for it in items)
print(d.get("count"), bool(items) and all(map(whole, items)), totals)
' 2>&1 || true)
[ "$verdict" = "50 True True" ] && ok "/json/50 (50 items, schema, totals)" || bad "/json/50: $verdict"
expect_type /json/50 application/json

db=$(c "$base/async-db?min=10&max=50&limit=50")
verdict=$(echo "$db" | python3 -c '
import sys, json
d = json.load(sys.stdin)
items = d.get("items", [])
n = d.get("count", 0)
shape = bool(items) and all(isinstance(it.get("rating"), dict) and "score" in it["rating"]
    and isinstance(it.get("tags"), list) and isinstance(it.get("active"), bool) for it in items)
print(0 < n <= 50 and n == len(items), shape)
' 2>&1 || true)
[ "$verdict" = "True True" ] && ok "/async-db (count in 1..50, structure)" || bad "/async-db: $verdict ($(echo "$db" | head -c 200))"
expect_type "/async-db?min=10&max=50&limit=50" application/json
empty=$(c "$base/async-db?min=9999&max=9999&limit=50" | python3 -c 'import sys, json; print(json.load(sys.stdin).get("count"))' 2>&1 || true)
[ "$empty" = 0 ] && ok "/async-db empty range (count 0)" || bad "/async-db empty range: $empty"

sum=$(c "$base/baseline2?a=13&b=42")
[ "$sum" = 55 ] && ok "/baseline2?a=13&b=42 = 55" || bad "/baseline2?a=13&b=42: '$sum'"
a=$((RANDOM % 900 + 100)) b=$((RANDOM % 900 + 100))
sum=$(c "$base/baseline2?a=$a&b=$b")
[ "$sum" = $((a + b)) ] && ok "/baseline2?a=$a&b=$b = $sum (random)" || bad "/baseline2?a=$a&b=$b: '$sum'"

echo "gateway: $pass passed, $fail failed"
if [ "$fail" != 0 ]; then
    tail -5 "$out/app.log" "$out/edge.log" >&2 || true
    exit 1
fi

if [ "$mode" = bench ]; then
    printf '%s\n' "$base/static/reset.css" "$base/static/app.js" "$base/json/50" \
        "$base/async-db?min=10&max=50&limit=50" "$base/baseline2?a=13&b=42" >"$out/uris"
    edge_pid=${pids[1]}
    ticks() { awk '{print $14 + $15}' "/proc/$edge_pid/stat"; }
    # Warm-up, then the measured run; the edge's CPU is its own utime+stime over the run.
    taskset -c 1 h2load -c 64 -m 32 -t 1 -D 2 -i "$out/uris" >/dev/null 2>&1 || true
    t0=$(ticks)
    taskset -c 1 h2load -c 64 -m 32 -t 1 -D 10 -i "$out/uris" >"$out/h2load.txt" 2>&1 || true
    t1=$(ticks)
    cat "$out/h2load.txt"
    hz=$(getconf CLK_TCK)
    python3 - "$out/h2load.txt" "$((t1 - t0))" "$hz" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed", text)
rps = re.search(r"finished in [\d.]+s, ([\d.]+) req/s", text)
ok, failed = int(done.group(2)), int(done.group(3))
cpu_s = int(sys.argv[2]) / int(sys.argv[3])
print(f"gateway bench: {float(rps.group(1)):.0f} req/s, {ok} succeeded, {failed} failed, "
      f"edge CPU {cpu_s:.2f} s = {cpu_s / max(ok, 1) * 1e6:.1f} µs per request")
PY
fi
