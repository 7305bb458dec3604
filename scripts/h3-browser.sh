#!/usr/bin/env bash
# A real browser over HTTP/3: headless Chromium (Debian's package), forced onto QUIC for the
# server's origin (--origin-to-force-quic-on, no Alt-Svc discovery, no race with TCP), loads a
# page with 20 assets from `linerate serve --root --quic`: stylesheets, scripts, SVG and PNG
# images and fetched data, from 341 bytes to 300 KiB. The throwaway certificate is
# accepted by its key's hash (--ignore-certificate-errors-spki-list).
#
# The page's script checks every asset: each element's load event, each fetch's length, and
# for all 20 and the page itself the Resource Timing entry (decodedBodySize equal to the file's
# size, nextHopProtocol "h3"); it writes its verdict into the DOM Chromium dumps. The access
# log must then show the 21 requests, each once, as HTTP/3.0 with status 200, and nothing
# else: a Chromium that fell back to TCP (HTTP/2 on the same port) fails the check.
#
#   scripts/h3-browser.sh [path/to/linerate]     (default: target/release/linerate)
#   H3_BROWSER_NO_QUIC=1 scripts/h3-browser.sh   the server without --quic: must fail
#
# Installs Chromium with apt when it is missing and this runs as root on Debian; exit 2 with a
# NOT RUN line saying why where it cannot (no Chromium and no way to install it, no openssl).
# The server binds 127.0.0.1 on free ports (one UDP port for QUIC, the same number over TCP
# for TLS) and is stopped by its PID; Chromium runs with its background networking off (this
# machine reaches no other host) and a fresh profile.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/linerate}

say() { echo "h3-browser: $*" >&2; }
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

out=$(mktemp -d "${TMPDIR:-/tmp}/linerate-h3-browser.XXXXXX")
pid=""
cleanup() {
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$out"
}
trap cleanup EXIT

# A port free for both TCP and UDP on 127.0.0.1 (QUIC and TLS share the number).
free_port() {
    python3 -c '
import socket
for _ in range(50):
    t = socket.socket(); t.bind(("127.0.0.1", 0)); p = t.getsockname()[1]
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        t.close(); u.close()
    print(p); break
else:
    raise SystemExit("no port free for both TCP and UDP")'
}

# The page and its 20 assets, deterministic content; the page knows every asset's size.
mkdir -p "$out/www"
python3 - "$out/www" <<'PY'
import json, os, random, struct, sys, zlib
root = sys.argv[1]
rng = random.Random(3)

# Whole lines up to SIZE, then spaces: every file stays valid CSS, JavaScript or SVG.
def text(line, size, head="", tail=""):
    body, i = [], 0
    n = len(head) + len(tail)
    while True:
        s = line(i)
        if n + len(s) > size:
            break
        body.append(s)
        n += len(s)
        i += 1
    return (head + "".join(body) + " " * (size - n) + tail).encode()

def css(size):
    return text(lambda i: f".c{i} {{ margin: {i % 9}px; color: #{rng.randrange(1 << 24):06x}; }}\n",
                size, tail="\n/* end */\n")

def js(size):
    return text(lambda i: f"function f{i}(a, b) {{ return a * {i} + b; }}\n", size,
                tail="\n// end\n")

def svg(size):
    return text(lambda i: f'<rect x="{i % 64}" y="{i % 48}" width="3" height="3" '
                          f'fill="#{rng.randrange(1 << 24):06x}"/>\n', size,
                head='<svg xmlns="http://www.w3.org/2000/svg" width="64" height="48">\n',
                tail="</svg>\n")

def png(width, height):
    # Random pixels, stored (zlib level 0): the size is the pixel count, not what zlib finds.
    raw = b"".join(b"\0" + rng.randbytes(width * 3) for _ in range(height))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 0)) + chunk(b"IEND", b""))

assets = [
    ("css/reset.css", css(2_000), "link"),
    ("css/layout.css", css(14_500), "link"),
    ("css/theme.css", css(40_000), "link"),
    ("css/components.css", css(120_000), "link"),
    ("css/utilities.css", css(300_000), "link"),
    ("js/analytics.js", js(3_000), "script"),
    ("js/helpers.js", js(16_000), "script"),
    ("js/router.js", js(60_000), "script"),
    ("js/app.js", js(200_000), "script"),
    ("js/vendor.js", js(290_000), "script"),
    ("img/logo.svg", svg(1_500), "img"),
    ("img/icons.svg", svg(20_000), "img"),
    ("img/chart.svg", svg(80_000), "img"),
    ("img/map.svg", svg(150_000), "img"),
    ("img/thumb.png", png(40, 40), "img"),
    ("img/photo.png", png(120, 120), "img"),
    ("img/hero.png", png(300, 300), "img"),
    ("data/manifest.json", json.dumps({"name": "linerate", "icons": list(range(80))}).encode(), "fetch"),
    ("data/blob.bin", rng.randbytes(16_384), "fetch"),
    ("data/large.bin", rng.randbytes(307_200), "fetch"),
]
sizes = {}
tags = []
for path, data, kind in assets:
    os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
    with open(os.path.join(root, path), "wb") as f:
        f.write(data)
    sizes["/" + path] = len(data)
    on = 'onload="loaded(this)" onerror="failed(this)"'
    if kind == "link":
        tags.append(f'<link rel="stylesheet" href="/{path}" {on}>')
    elif kind == "script":
        tags.append(f'<script src="/{path}" {on}></script>')
    elif kind == "img":
        tags.append(f'<img src="/{path}" alt="" {on}>')
fetched = ["/" + p for p, _, k in assets if k == "fetch"]
page = """<!doctype html>
<html><head><meta charset="utf-8"><title>linerate h3 browser check</title>
<link rel="icon" href="data:,">
<script>
const SIZES = %s;
const FETCHED = %s;
const bad = [];
let elements = 0;
function loaded(el) { elements++; }
function failed(el) { bad.push("error " + (el.href || el.src)); }
</script>
%s
</head><body><p id="verdict">VERDICT[pending]</p>
%s
<script>
window.addEventListener("load", async () => {
  let fetches = 0;
  for (const url of FETCHED) {
    try {
      const r = await fetch(url);
      const n = (await r.arrayBuffer()).byteLength;
      if (r.status === 200 && n === SIZES[url]) fetches++;
      else bad.push(`fetch ${url}: ${r.status}, ${n} bytes`);
    } catch (e) { bad.push(`fetch ${url}: ${e}`); }
  }
  let h3 = 0;
  const nav = performance.getEntriesByType("navigation")[0];
  if (nav && nav.nextHopProtocol === "h3") h3++;
  else bad.push("page over " + (nav ? nav.nextHopProtocol : "?"));
  for (const [path, size] of Object.entries(SIZES)) {
    const e = performance.getEntriesByName(location.origin + path)[0];
    if (!e) { bad.push("no timing entry for " + path); continue; }
    if (e.decodedBodySize !== size) bad.push(`${path}: ${e.decodedBodySize} bytes, want ${size}`);
    if (e.nextHopProtocol === "h3") h3++;
    else bad.push(`${path} over ${e.nextHopProtocol}`);
  }
  const total = Object.keys(SIZES).length;
  const summary = `elements=${elements}/${total - FETCHED.length} fetches=${fetches}/${FETCHED.length} h3=${h3}/${total + 1}`;
  document.getElementById("verdict").textContent = bad.length === 0
    ? `VERDICT[ok ${summary}]` : `VERDICT[FAIL ${summary}: ${bad.slice(0, 5).join("; ")}]`;
});
</script>
</body></html>
""" % (json.dumps(sizes), json.dumps(fetched),
       "\n".join(t for t in tags if not t.startswith("<img")),
       "\n".join(t for t in tags if t.startswith("<img")))
with open(os.path.join(root, "index.html"), "w") as f:
    f.write(page)
PY
assets=$(find "$out/www" -type f ! -name index.html | wc -l)
[ "$assets" = 20 ] || { say "made $assets assets, not 20"; exit 1; }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$out/key.pem" -out "$out/cert.pem" -days 1 -subj /CN=localhost \
    -addext subjectAltName=IP:127.0.0.1,DNS:localhost >/dev/null 2>&1
# Chromium's exception list names a certificate by the SHA-256 of its SubjectPublicKeyInfo.
spki=$(openssl x509 -in "$out/cert.pem" -pubkey -noout | openssl pkey -pubin -outform der \
    | openssl dgst -sha256 -binary | base64)
port=$(free_port)
tls_port=$(free_port)
quic=(--quic)
# H3_BROWSER_NO_QUIC=1 starts the server without --quic: the check that the test fails when
# Chromium cannot use QUIC.
[ "${H3_BROWSER_NO_QUIC:-0}" = 1 ] && quic=()
"$bin" serve --addr "127.0.0.1:$port" --tls-port "$tls_port" --tls-cert "$out/cert.pem" \
    --tls-key "$out/key.pem" "${quic[@]}" --root "$out/www" --workers 1 --no-pin --log-level warn \
    --access-log "$out/access.log" >"$out/banner.txt" 2>"$out/server.err" &
pid=$!
for _ in $(seq 1 200); do
    grep -q "^Stop with" "$out/banner.txt" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { cat "$out/server.err" >&2; say "the server did not start"; exit 1; }
    sleep 0.1
done
grep -q "^Stop with" "$out/banner.txt" || { cat "$out/server.err" >&2; say "no banner in 20 s"; exit 1; }

echo "Chromium $("$chromium" --version 2>/dev/null | awk '{print $2}') forced onto QUIC against linerate ($bin)"
fail=0
url="https://127.0.0.1:$tls_port/index.html"
# --virtual-time-budget: the DOM is dumped once the page's fetches and script have run.
dom=$(timeout 90 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --disable-features=MediaRouter,OptimizationHints \
    --enable-quic --origin-to-force-quic-on="127.0.0.1:$tls_port" \
    --ignore-certificate-errors-spki-list="$spki" --virtual-time-budget=30000 \
    --user-data-dir="$out/profile" --dump-dom "$url" 2>"$out/chromium.err" || true)
verdict=$(grep -o 'VERDICT\[[^]]*\]' <<<"$dom" | head -1 || true)
if [[ $verdict == "VERDICT[ok "* ]]; then
    echo "  ok    the page: $verdict"
else
    echo "  FAIL  the page: ${verdict:-no verdict}" >&2
    grep -o '<title>[^<]*</title>' <<<"$dom" | head -1 >&2 || true
    grep -i 'quic\|cert\|ERR_' "$out/chromium.err" | tail -3 >&2 || true
    fail=1
fi

# What the browser sent, as the server logged it. The drain ends the server (the log is
# written by then); a server that does not end is killed after 20 s.
kill -TERM "$pid"
for _ in $(seq 1 200); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
kill -KILL "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
pid=""
touch "$out/access.log"
paths=(/index.html $(cd "$out/www" && find . -type f ! -name index.html | sed 's/^\.//' | sort))
logged=0
missing=()
for path in "${paths[@]}"; do
    hits=$(grep -cF "\"GET $path HTTP/3.0\" 200 " "$out/access.log" || true)
    if [ "$hits" = 1 ]; then
        logged=$((logged + 1))
    else
        missing+=("$path ($hits times)")
    fi
done
if [ "${#missing[@]}" != 0 ]; then
    echo "  FAIL  not logged once as HTTP/3.0 200: ${#missing[@]} of ${#paths[@]}, ${missing[*]:0:5} ..." >&2
    fail=1
fi
lines=$(wc -l <"$out/access.log")
others=$(grep -vc 'HTTP/3.0" 200 ' "$out/access.log" || true)
if [ "$lines" != "${#paths[@]}" ] || [ "$others" != 0 ]; then
    echo "  FAIL  the access log has $lines lines, $others not HTTP/3.0 200 (want ${#paths[@]}, 0):" >&2
    grep -v 'HTTP/3.0" 200 ' "$out/access.log" | head -5 >&2 || true
    fail=1
fi
[ "$fail" = 0 ] || { say "FAILED"; exit 1; }
echo "  ok    the access log: $logged/${#paths[@]} requests as HTTP/3.0 with 200, nothing else"
echo "h3-browser: the page and its 20 assets came over HTTP/3"
