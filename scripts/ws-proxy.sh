#!/usr/bin/env bash
# WebSocket through the proxy with real implementations at both ends: Python's `websockets`
# (PyPI) as the client and as the echo upstream, `linerate serve --proxy` between them, over
# plain HTTP/1.1 and over TLS (wss, ALPN http/1.1; a throwaway certificate the client trusts).
# Then the same client against linerate's own WebSocket server (the demo's /ws), ws and wss.
# The client checks: the handshake (101, the upstream's subprotocol and Sec-WebSocket-Accept
# reaching it, permessage-deflate agreed), text and binary echoes, a 1 MiB message, fragments, a ping answered by the
# upstream, and a clean close (1000 both ways); then the proxy's access log has the 101.
#
#   scripts/ws-proxy.sh [path/to/linerate]     (default: target/release/linerate)
#
# Installs `websockets` with pip into a virtual environment under target/ (PyPI); exit 2 with
# a NOT RUN line saying why where it cannot (no python3 venv, pip cannot reach the registry,
# no openssl). Everything binds 127.0.0.1 on free ports and is stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/linerate}

say() { echo "ws-proxy: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

[ -x "$bin" ] || { say "no $bin (build it first)"; exit 1; }
command -v python3 >/dev/null || not_run "no python3"
command -v openssl >/dev/null || not_run "no openssl to make a throwaway certificate"
venv=target/ws-venv
if ! "$venv/bin/python" -c 'import websockets' 2>/dev/null; then
    python3 -m venv "$venv" >/dev/null 2>&1 || not_run "python3 -m venv failed (python3-venv missing?)"
    "$venv/bin/pip" install -q 'websockets>=13' >/tmp/linerate-ws-pip.log 2>&1 \
        || { tail -3 /tmp/linerate-ws-pip.log >&2; not_run "pip install websockets failed"; }
fi
py=$venv/bin/python
say "websockets $("$py" -c 'import websockets; print(websockets.__version__)')"

out=$(mktemp -d "${TMPDIR:-/tmp}/linerate-ws.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$out"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_port() {
    for _ in $(seq 100); do
        python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), 0.2)" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$out/key.pem" -out "$out/cert.pem" >/dev/null 2>&1

up_port=$(free_port)
cat >"$out/echo.py" <<'PY'
import asyncio, sys
from websockets.asyncio.server import serve

async def echo(ws):
    # The request as it reached the upstream, for the client to check.
    await ws.send("path " + ws.request.path)
    async for msg in ws:
        await ws.send(msg)

async def main():
    async with serve(echo, "127.0.0.1", int(sys.argv[1]), subprotocols=["chat"],
                     max_size=4 << 20):
        await asyncio.Future()

asyncio.run(main())
PY
"$py" "$out/echo.py" "$up_port" 2>"$out/echo.err" &
pids+=($!)
wait_port "$up_port" || { cat "$out/echo.err" >&2; say "the echo upstream did not start"; exit 1; }

port=$(free_port)
tls_port=$(free_port)
"$bin" serve --addr "127.0.0.1:$port" --workers 1 --no-pin --log-level warn --app none \
    --tls-port "$tls_port" --tls-cert "$out/cert.pem" --tls-key "$out/key.pem" \
    --access-log "$out/access.log" --proxy "/ws=http://127.0.0.1:$up_port/" \
    >"$out/server.out" 2>&1 &
pids+=($!)
wait_port "$port" || { cat "$out/server.out" >&2; say "linerate did not start"; exit 1; }
wait_port "$tls_port"

cat >"$out/client.py" <<'PY'
import asyncio, ssl, sys
from websockets.asyncio.client import connect

# Through the proxy the upstream speaks first (the path it was asked for) and chooses the
# subprotocol; linerate's own /ws only echoes.
PROXIED = sys.argv[1] == "proxy"
PATH = "/ws/room/7?x=1" if PROXIED else "/ws"

async def check(uri, ctx):
    protocols = ["chat"] if PROXIED else None
    async with connect(uri, subprotocols=protocols, ssl=ctx, max_size=4 << 20) as ws:
        assert ws.response.status_code == 101, ws.response.status_code
        # The client offers permessage-deflate (its default); the upstream and the demo's
        # /ws both take it, so every message below goes compressed both ways.
        ext = ws.response.headers.get("Sec-WebSocket-Extensions", "")
        assert ext.startswith("permessage-deflate"), f"no compression agreed: {ext!r}"
        if PROXIED:
            assert ws.subprotocol == "chat", ws.subprotocol
            first = await ws.recv()
            # The mount's prefix (/ws) is stripped on the way up.
            assert first == "path /room/7?x=1", first
        await ws.send("hello κόσμε")
        assert await ws.recv() == "hello κόσμε"
        await ws.send(b"\x00\x01\xfe\xff")
        assert await ws.recv() == b"\x00\x01\xfe\xff"
        big = bytes(i % 251 for i in range(1 << 20))
        await ws.send(big)
        assert await ws.recv() == big, "1 MiB message"
        await ws.send(["frag", "ments"])
        assert await ws.recv() == "fragments"
        pong = await ws.ping(b"p")
        await asyncio.wait_for(pong, 10)
        await ws.close()
        assert ws.close_code == 1000, ws.close_code
        assert ws.protocol.close_rcvd.code == 1000, ws.protocol.close_rcvd
    print("ok", uri)

async def main():
    ctx = ssl.create_default_context(cafile=sys.argv[4])
    await check(f"ws://127.0.0.1:{sys.argv[2]}{PATH}", None)
    await check(f"wss://localhost:{sys.argv[3]}{PATH}", ctx)

asyncio.run(asyncio.wait_for(main(), 60))
PY
if ! "$py" "$out/client.py" proxy "$port" "$tls_port" "$out/cert.pem"; then
    say "FAILED; the server said:"
    cat "$out/server.out" >&2
    exit 1
fi

# The access log is written by the worker; give it the time a handoff takes.
for _ in $(seq 50); do
    [ "$(grep -c '" 101 ' "$out/access.log" 2>/dev/null || true)" -ge 2 ] && break
    sleep 0.1
done
n=$(grep -c '"GET /ws/room/7?x=1 HTTP/1.1" 101 ' "$out/access.log" || true)
[ "$n" -ge 2 ] || { cat "$out/access.log" >&2; say "FAILED: the access log does not show both 101s"; exit 1; }
say "ok: ws:// and wss:// through the proxy (handshake, permessage-deflate, text, binary, 1 MiB, fragments, ping, close 1000); 101 logged"

# The same client against linerate's own WebSocket server: the demo's /ws echo, over plain
# HTTP/1.1 and over TLS.
direct_port=$(free_port)
direct_tls=$(free_port)
"$bin" serve --addr "127.0.0.1:$direct_port" --workers 1 --no-pin --log-level warn \
    --tls-port "$direct_tls" --tls-cert "$out/cert.pem" --tls-key "$out/key.pem" \
    >"$out/direct.out" 2>&1 &
pids+=($!)
wait_port "$direct_port" || { cat "$out/direct.out" >&2; say "linerate (demo) did not start"; exit 1; }
wait_port "$direct_tls"
if ! "$py" "$out/client.py" direct "$direct_port" "$direct_tls" "$out/cert.pem"; then
    say "FAILED against the demo's /ws; the server said:"
    cat "$out/direct.out" >&2
    exit 1
fi
say "ok: ws:// and wss:// to linerate's own /ws (permessage-deflate, text, binary, 1 MiB, fragments, ping, close 1000)"
