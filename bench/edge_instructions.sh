#!/usr/bin/env bash
# Instructions per request (callgrind, user space, every thread: the program's total ÷ N,
# start-up included) of serving without attack, for each linerate binary given, in turn, in
# one run (the HTTP/2 abuse defences cost nothing when nobody attacks): /json over HTTP/1.1,
# /plaintext pipelined 16 deep, and /json over HTTP/2 on TLS (one connection's handshake in
# N). Ports are the OS's, every process is stopped by PID. Counts, not times: a noisy
# machine moves them by a few tens.
#   bench/edge_instructions.sh BINARY [BINARY…]      (N=20000 requests each)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-20000}
command -v openssl >/dev/null || { echo "NOT RUN: no openssl for a throwaway certificate"; exit 2; }
# shellcheck source=bench/callgrind_common.sh
. bench/callgrind_common.sh
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$tmp/key.pem" \
    -out "$tmp/cert.pem" -days 1 -subj /CN=localhost >/dev/null 2>&1
# case NAME: the load's arguments for it (the URL's port is $p, TLS's $tp).
load_args() {
    case $1 in
        json) echo "http://127.0.0.1:$p/json -c 16" ;;
        pipelined) echo "http://127.0.0.1:$p/plaintext -c 16 -p 16" ;;
        h2-tls) echo "https://127.0.0.1:$tp/json -k --http2 -c 1 --max-concurrent-streams 16" ;;
    esac
}
for bin in "$@"; do
    for case in json pipelined h2-tls; do
        p=$(free_port)
        tp=$(free_port)
        out=$tmp/cg.$p
        valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" serve --addr 127.0.0.1:$p \
            --tls-port "$tp" --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem" \
            --workers 1 --no-pin --log-level warn --app demo >/dev/null 2>&1 &
        vp=$!
        pids+=($vp)
        wait_port "$p"
        wait_port "$tp"
        # shellcheck disable=SC2046
        "$1" load $(load_args "$case") -n "$n" -t 1 >"$tmp/load"
        kill -INT "$vp"
        wait "$vp" 2>/dev/null || true
        ok=$(grep -m1 'Status codes' "$tmp/load" | sed 's/^ *//')
        printf '%s\t%s\t%d instructions per request\t(%s)\n' "$bin" "$case" "$(per_request "$out" "$n")" "$ok"
    done
done
