#!/usr/bin/env bash
# HTTP/3 under attack: hostile clients built on aioquic's sans-I/O QUIC and HTTP/3 layers
# (scripts/h3attack.py) against `linerate serve --quic`, each followed by a normal client
# (scripts/h3client.py) that must still be served:
#   - handshake flood: a few Initials get no Retry; past RETRY_ABOVE handshakes in progress
#     on the one worker, Retry packets come (and no more handshakes than that are started);
#     a normal client, sent a Retry, follows it and gets 200;
#   - rapid reset: request streams opened and cancelled (RESET_STREAM + STOP_SENDING) once
#     the server read them end the connection with H3_EXCESSIVE_LOAD (0x107; RFC 9114 §8.1,
#     CVE-2023-44487), never more than the stream credit the server gives open at once;
#   - cancelled streams give their credit back (MAX_STREAMS grows by as many; RFC 9000
#     §4.6): cancelled with their HEADERS (credit-early), or with a body in flight once read
#     (credit-body); 16 of them, since quinn-proto announces credit only once more than an
#     eighth of the limit (13 of 100) has come back;
#   - bodies at once: request bodies past MAX_BODY_STREAMS are refused with
#     H3_REQUEST_REJECTED (0x10b), the others answered;
#   - a field section over MAX_FIELD_SECTION (64 KiB) is answered 431 and the connection
#     serves the next request;
#   - a 32 MiB body proxied to an upstream that reads nothing for a while: the stream credit
#     the server gives stops growing (held at its buffers and one stream window, well under
#     half the body: the body waits in the client, not in the server), then the upstream
#     reads it and it arrives whole.
# Behaviour only, no timing: every loop is bounded in count and time.
#
#   scripts/h3-attacks.sh [path/to/linerate]     (default: target/release/linerate)
#
# H3_ATTACKS_SKIP="credit-early credit-body" leaves out the checks so named (each says SKIP),
# to look at one failure at a time.
#
# Exit 2 with a NOT RUN line where it cannot run (no aioquic and no pip to install it, no
# openssl). The servers bind 127.0.0.1 on free ports and are stopped by their PIDs.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/linerate}

stage=h3-attacks
# shellcheck source=scripts/h3-common.sh
. scripts/h3-common.sh

[ -x "$bin" ] || { say "no $bin (build it first)"; exit 1; }
h3_need_aioquic
retry_above=$(grep -o 'RETRY_ABOVE: usize = [0-9]*' crates/server/src/driver/quic.rs | grep -o '[0-9]*$')

h3_workdir h3a


h3_cert "$out" IP:127.0.0.1,DNS:localhost
# start ARGS...: a fresh server with --quic on fresh ports (the previous one stopped).
start() {
    stop
    port=$(free_port)
    tls_port=$(free_port)
    "$bin" serve --addr "127.0.0.1:$port" --tls-port "$tls_port" --tls-cert "$out/cert.pem" \
        --tls-key "$out/key.pem" --quic --no-pin --log-level warn "$@" \
        >"$out/banner.txt" 2>"$out/server.err" &
    pid=$!
    for _ in $(seq 1 600); do
        grep -q "^Stop with" "$out/banner.txt" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || { cat "$out/server.err" >&2; say "the server did not start"; exit 1; }
        sleep 0.1
    done
    grep -q "^Stop with" "$out/banner.txt" || { cat "$out/server.err" >&2; say "no banner in 60 s"; exit 1; }
}

fail=0
n=0
ok() { n=$((n + 1)); echo "  ok    $*"; }
bad() { n=$((n + 1)); echo "  FAIL  $*" >&2; fail=1; }
attack() { timeout 60 python3 scripts/h3attack.py "$@" 127.0.0.1 "$tls_port" 2>>"$out/attack.err" || echo "exit=$?"; }
# field NAME LINE: the value of NAME=... in LINE.
field() { grep -o "\b$1=[^ ]*" <<<"$2" | head -1 | cut -d= -f2; }
# served [WHAT]: a normal client on a new connection gets 200 for /json. Its QUIC log goes
# to $out/client.log (it says when it followed a Retry).
served() {
    if timeout 60 python3 scripts/h3client.py -k -v --timeout 50 --expect-status 200 \
        "https://127.0.0.1:$tls_port/json" >"$out/client.out" 2>"$out/client.log"; then
        ok "a new connection still gets 200${1:+ ($1)}"
    else
        bad "a new connection after the attack: $(grep -E 'error|status=' "$out/client.out" "$out/client.log" | tail -1)"
    fi
}
alive() {
    kill -0 "$pid" 2>/dev/null || { bad "the server died"; cat "$out/server.err" >&2; exit 1; }
}

echo "handshake flood (one worker, Retry past $retry_above handshakes in progress):"
start --workers 1
few=$(attack flood -n 20)
echo "        20 Initials: $few"
if [ "$(field retry "$few")" = 0 ] && [ "$(field initial "$few")" -gt 0 ]; then
    ok "20 Initials to a fresh server: no Retry, $(field initial "$few") handshakes answered"
else
    bad "20 Initials to a fresh server: $few"
fi
many=$(attack flood -n 400 --seconds 30)
echo "        400 Initials: $many"
accepted=$(($(field initial "$few") + $(field initial "$many")))
if [ "$(field retry "$many")" -gt 0 ] && [ "$accepted" -le "$retry_above" ] \
    && [ "$(field unknown-ids "$many")" = 0 ]; then
    ok "400 more Initials: $(field retry "$many") Retry packets; $accepted handshakes started in all (at most $retry_above)"
else
    bad "400 more Initials: $many ($accepted handshakes started, at most $retry_above wanted, and some Retry)"
fi
served "after a Retry"
if ! grep -q "Retrying with token" "$out/client.log"; then
    bad "the normal client was not sent a Retry by the flooded server"
fi
alive

echo "rapid reset (request streams opened and cancelled once read):"
start
got=$(attack resets -n 3000 --when read --seconds 20)
echo "        $got"
limit=$(field initial-max-streams "$got")
if [ "$(field close "$got")" = 0x107 ] && [ -n "$limit" ] && [ "$limit" -gt 0 ] \
    && [ "$limit" -le 100 ]; then
    ok "closed with H3_EXCESSIVE_LOAD after $(field cancelled "$got") cancelled streams, at most $limit open at once"
else
    bad "rapid reset: $got (want close=0x107, stream credit at most 100)"
fi
served
alive

skipped() { case " ${H3_ATTACKS_SKIP:-} " in *" $1 "*) echo "  SKIP  $1 (H3_ATTACKS_SKIP)"; return 0 ;; esac; return 1; }
echo "stream credit of cancelled requests:"
for how in early body; do
    skipped "credit-$how" && continue
    got=$(attack credit -n 16 --how "$how")
    echo "        $how: $got"
    if [ -n "$(field streams "$got")" ] && [ "$(field credit-returned "$got")" = "$(field streams "$got")" ] \
        && [ "$(field close "$got")" = open ]; then
        ok "credit-$how: $(field streams "$got") cancelled streams, as much stream credit given back"
    else
        bad "credit-$how: $got (want all the credit back: streams closed at both ends)"
    fi
done
alive

echo "request bodies at once:"
got=$(attack bodies -n 12)
echo "        $got"
refused=$(field refused "$got")
codes=$(field codes "$got")
if [ -n "$refused" ] && [ "$refused" -gt 0 ] && [ "$(field close "$got")" = open ] \
    && ! grep -qv ':0x10b$' <<<"$(tr , '\n' <<<"$codes")" \
    && [ "$(field answered-200 "$got")" = $((12 - refused)) ]; then
    ok "12 bodies at once: $refused refused with H3_REQUEST_REJECTED, $((12 - refused)) answered 200"
else
    bad "bodies at once: $got (want some refused with 0x10b, the rest 200, the connection open)"
fi
alive

echo "oversized field section:"
got=$(attack bigfield)
echo "        $got"
if [ "$(field first "$got")" = 431 ] && [ "$(field second "$got")" = 200 ] \
    && [ "$(field close "$got")" = open ]; then
    ok "a field section over 64 KiB gets 431, the next request on the connection 200"
else
    bad "oversized field section: $got (want first=431 second=200 close=open)"
fi
served
alive

echo "a relayed body to a slow upstream:"
up_port=$(free_port)
start --workers 1 --proxy "/up=http://127.0.0.1:$up_port" --max-body-bytes 64MiB
got=$(timeout 120 python3 scripts/h3attack.py upload 127.0.0.1 "$tls_port" \
    --upstream-port "$up_port" 2>>"$out/attack.err" || echo "exit=$?")
echo "        $got"
body=$(field body "$got")
held=$(field credit-held "$got")
if [ -n "$body" ] && [ -n "$held" ] && [ "$held" -lt $((body / 2)) ] \
    && [ "$(field upstream-whole "$got")" = 1 ] && [ "$(field status "$got")" = 200 ]; then
    ok "the upload waited in the client: $held bytes of stream credit of $body while the upstream read nothing, then all of it arrived whole"
else
    bad "relayed body: $got (want credit-held under half the body, the body whole upstream, 200)"
fi
alive

if [ "$fail" != 0 ]; then
    tail -20 "$out/attack.err" >&2
    tail -20 "$out/server.err" >&2
    say "FAILED"
    exit 1
fi
echo "h3-attacks: $n checks passed (aioquic $(python3 -c 'import aioquic; print(aioquic.__version__)'))"
