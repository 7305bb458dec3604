#!/usr/bin/env bash
# End to end, once per server: a bank binary (linerate's example, the axum + tonic twin) on a
# throwaway PostgreSQL (scripts/pg.sh) and a private Redis, checked with Debian's curl (REST)
# and grpcio (gRPC, bench/bank/grpc_check.py): reads and transfers with a good bearer, 401s,
# 404, 409, 422, 400, 200 concurrent transfers back and forth with the total balance the same
# after, and Redis stopped (503: auth fails closed) then back (200 again). Every process it
# starts is stopped by PID at exit.
#
#   bench/bank/e2e.sh NAME=BINARY…     e.g. linerate=target/debug/examples/bank
#                                       axum-tonic=bench/bank-axum-tonic/target/release/bank-axum-tonic
#   PYTHON=…  a python3 with grpcio (default: target/tmp/grpc-venv/bin/python3)
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-target/tmp/grpc-venv/bin/python3}
PSQL=/usr/lib/postgresql/15/bin/psql

server_pid= redis_pid= pg_dir=
cleanup() {
    for p in $server_pid $redis_pid; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    if [ -n "$pg_dir" ]; then scripts/pg.sh stop "$pg_dir"; fi
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() { # PORT: up to 10 s
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "nothing listens on $1" >&2
    return 1
}

out=$(scripts/pg.sh start)
pg_dir=$(echo "$out" | sed -n 's/^PG_DIR=//p')
export DATABASE_URL REDIS_URL
DATABASE_URL=$(echo "$out" | sed -n 's/^DATABASE_URL=//p')
redis_port=$(free_port)
REDIS_URL=redis://127.0.0.1:$redis_port
start_redis() {
    redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no --logfile /dev/null &
    redis_pid=$!
    for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    redis-cli -p "$redis_port" set bank:token:secret 'owner 1' >/dev/null
}
stop_redis() { kill "$redis_pid"; wait "$redis_pid" 2>/dev/null || true; redis_pid=; }

fails=0
check() { # WHAT WANT GOT
    if [ "$2" = "$3" ]; then echo "ok   $1: $3"; else echo "FAIL $1: want $2, got $3"; fails=$((fails + 1)); fi
}
sql() { "$PSQL" -X -qAt -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "$1"; }

for spec in "$@"; do
    name=${spec%%=*} bin=${spec#*=}
    echo "== $name ($bin)"
    PGOPTIONS="-c client_min_messages=warning" "$PSQL" -X -q -v ON_ERROR_STOP=1 "$DATABASE_URL" -c 'DROP TABLE IF EXISTS transfers, accounts' \
        -f bench/bank/schema.sql -f bench/bank/seed.sql -v accounts=100 -v balance=100000
    start_redis
    port=$(free_port)
    "$bin" "127.0.0.1:$port" >/dev/null &
    server_pid=$!
    wait_port "$port"
    url=http://127.0.0.1:$port
    auth=(-H 'authorization: Bearer secret')
    json=(-H 'content-type: application/json')
    code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
    check "GET /accounts/1" '{"id":1,"owner":"owner 1","balance":100000}' "$(curl -s "${auth[@]}" "$url/accounts/1")"
    check "GET without a bearer" 401 "$(code "$url/accounts/1")"
    check "GET with an unknown bearer" 401 "$(code -H 'authorization: Bearer nobody' "$url/accounts/1")"
    check "GET /accounts/999999" 404 "$(code "${auth[@]}" "$url/accounts/999999")"
    check "POST a transfer" 201 "$(code "${auth[@]}" "${json[@]}" -d '{"from":1,"to":2,"amount":100}' "$url/transfers")"
    check "POST too much" 409 "$(code "${auth[@]}" "${json[@]}" -d '{"from":1,"to":2,"amount":100000}' "$url/transfers")"
    check "POST to nobody" 404 "$(code "${auth[@]}" "${json[@]}" -d '{"from":1,"to":999999,"amount":1}' "$url/transfers")"
    check "POST to itself" 422 "$(code "${auth[@]}" "${json[@]}" -d '{"from":3,"to":3,"amount":1}' "$url/transfers")"
    check "POST not JSON" 400 "$(code "${auth[@]}" "${json[@]}" -d '{' "$url/transfers")"
    check "balances after" "99900 100100" "$(sql 'SELECT balance FROM accounts WHERE id IN (1, 2) ORDER BY id' | xargs)"
    "$PYTHON" bench/bank/grpc_check.py "127.0.0.1:$port" secret || fails=$((fails + 1))
    # 200 transfers at once, 16 at a time, round and back between accounts 10..13.
    seq 0 199 | xargs -P 16 -I{} sh -c 'i={}; f=$((10 + i % 4)); t=$((10 + (i + 1) % 4));
        curl -s -o /dev/null -w "%{http_code}\n" -H "authorization: Bearer secret" \
            -H "content-type: application/json" -d "{\"from\":$f,\"to\":$t,\"amount\":$((i + 1))}" '"$url"'/transfers' \
        >"$pg_dir/codes"
    check "200 concurrent transfers: all 201" "200" "$(grep -c '^201$' "$pg_dir/codes")"
    check "their rows" 200 "$(sql 'SELECT count(*) FROM transfers WHERE from_id BETWEEN 10 AND 13')"
    check "money conserved" "$((100 * 100000))" "$(sql 'SELECT sum(balance) FROM accounts')"
    stop_redis
    check "Redis stopped: REST fails closed" 503 "$(code "${auth[@]}" "$url/accounts/1")"
    start_redis
    check "Redis back: REST" 200 "$(code "${auth[@]}" "$url/accounts/1")"
    kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=
    stop_redis
done
echo "$fails failed"
[ "$fails" = 0 ]
