#!/usr/bin/env bash
# Throwaway Redis and memcached for tests, development and `linerate lab cache`: Debian's
# redis-server and memcached, installed with apt where missing, each instance started on
# 127.0.0.1 on a free port the kernel picks, with no persistence, in a new temporary directory.
#
#   scripts/cache-servers.sh install
#       installs redis-server and memcached where missing (apt-get update once first)
#   scripts/cache-servers.sh start redis [--maxmemory MB] [--io-threads N] [--cpus LIST]
#       maxmemory with the allkeys-lru policy (default 64 MB); io-threads N (1, the default,
#       is none: the main thread does all I/O); no RDB snapshots, no AOF
#   scripts/cache-servers.sh start memcached [--memory MB] [--threads N] [--cpus LIST]
#       -m MB (default 64), -t N (default 4, memcached's own default), TCP only (-U 0)
#   Both print KIND=… PID=… PORT=… DIR=… (also in $DIR/env); --cpus pins with taskset.
#   scripts/cache-servers.sh stop PID
#       stops an instance this script started (SIGTERM, SIGKILL after 5 s) and removes its DIR
#   scripts/cache-servers.sh selftest
#       starts one of each, talks to it over TCP, stops it, checks it is gone (CI runs it)
#
# Exit 2, with a line "NOT RUN: …" saying why, where it cannot run (not installed, and no root
# or apt-get to install it; the install failed): CI's convention (scripts/test-all.sh, `may`).
# Debian's packages start a system service on install where an init system runs; it is
# stopped again (nothing of ours uses ports 6379 or 11211).
set -euo pipefail
cd "$(dirname "$0")/.."
REDIS=${REDIS_SERVER:-redis-server}
MEMCACHED=${MEMCACHED:-memcached}
# How long a starting server gets to answer, in tenths of a second.
START_TENTHS=100

say() { echo "cache-servers: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

have() { command -v "$1" >/dev/null 2>&1; }

install() {
    local missing=()
    have "$REDIS" || missing+=(redis-server)
    have "$MEMCACHED" || missing+=(memcached)
    [ ${#missing[@]} = 0 ] && return 0
    if [ "$(id -u)" != 0 ] || ! have apt-get; then
        not_run "${missing[*]} not installed, and installing needs root and apt-get"
    fi
    say "installing ${missing[*]} (apt-get update first)"
    local log=/tmp/linerate-cache-apt.log
    { apt-get -o DPkg::Lock::Timeout=120 update \
        && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y \
            --no-install-recommends -o Dpkg::Options::=--force-confold "${missing[@]}"; } \
        >"$log" 2>&1 || not_run "apt-get install ${missing[*]} failed (see $log)"
    # The packages' own services, where an init system started them: not ours, stopped.
    if have systemctl && [ -d /run/systemd/system ]; then
        systemctl disable --now redis-server memcached >/dev/null 2>&1 || true
    elif have service; then
        service redis-server stop >/dev/null 2>&1 || true
        service memcached stop >/dev/null 2>&1 || true
    fi
    have "$REDIS" || not_run "redis-server is still missing after the install"
    have "$MEMCACHED" || not_run "memcached is still missing after the install"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ask PORT REQUEST EXPECT: sends REQUEST over TCP and succeeds when the answer starts with EXPECT.
ask() {
    local got
    got=$(exec 2>/dev/null 3<>"/dev/tcp/127.0.0.1/$1" && printf '%b' "$2" >&3 \
        && timeout 2 head -c "${#3}" <&3) || return 1
    [ "$got" = "$3" ]
}

# ready KIND PORT: the server answers its protocol's no-op.
ready() {
    case $1 in
        redis) ask "$2" 'PING\r\n' '+PONG' ;;
        memcached) ask "$2" 'mn\r\n' 'MN' ;;
    esac
}

start() {
    local kind=${1:-} mb=64 io=1 threads=4 cpus=""
    shift || true
    while [ $# -gt 0 ]; do
        case $1 in
            --maxmemory | --memory) mb=${2:?$1 needs a value}; shift 2 ;;
            --io-threads) io=${2:?$1 needs a value}; shift 2 ;;
            --threads) threads=${2:?$1 needs a value}; shift 2 ;;
            --cpus) cpus=${2:?$1 needs a value}; shift 2 ;;
            *) say "unknown option $1"; exit 1 ;;
        esac
    done
    case $kind in
        redis) have "$REDIS" || install ;;
        memcached) have "$MEMCACHED" || install ;;
        *) say "usage: start redis|memcached [options]"; exit 1 ;;
    esac
    local pin=()
    [ -n "$cpus" ] && pin=(taskset -c "$cpus")
    local dir port pid="" tries
    dir=$(mktemp -d "${TMPDIR:-/tmp}/linerate-cache.XXXXXX")
    for tries in 1 2 3; do   # a free port can be taken between the probe and the bind: try again
        port=$(free_port)
        case $kind in
            redis)
                local io_args=(--io-threads "$io")
                [ "$io" -gt 1 ] && io_args+=(--io-threads-do-reads yes)
                "${pin[@]}" "$REDIS" --bind 127.0.0.1 --port "$port" --protected-mode no \
                    --save "" --appendonly no --dir "$dir" --logfile "$dir/server.log" \
                    --maxmemory "${mb}mb" --maxmemory-policy allkeys-lru "${io_args[@]}" \
                    </dev/null >/dev/null 2>&1 &
                ;;
            memcached)
                # Root must name a user; the instance runs as that one.
                local user=()
                [ "$(id -u)" = 0 ] && user=(-u root)
                "${pin[@]}" "$MEMCACHED" -l 127.0.0.1 -p "$port" -U 0 -m "$mb" -t "$threads" \
                    -c 4096 "${user[@]}" </dev/null >"$dir/server.log" 2>&1 &
                ;;
        esac
        pid=$!
        local t
        for ((t = 0; t < START_TENTHS; t++)); do
            kill -0 "$pid" 2>/dev/null || break
            if ready "$kind" "$port"; then
                printf 'KIND=%s\nPID=%s\nPORT=%s\nDIR=%s\n' "$kind" "$pid" "$port" "$dir" \
                    | tee "$dir/env"
                echo "$pid" >"$dir/pid"
                return 0
            fi
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    tail -5 "$dir/server.log" >&2 2>/dev/null || true
    rm -rf "$dir"
    say "$kind did not start (3 tries)"
    exit 1
}

# stop PID: only a redis-server or memcached whose directory (found by its PID) is one of ours.
stop() {
    local pid=${1:?usage: scripts/cache-servers.sh stop PID} dir="" d
    for d in "${TMPDIR:-/tmp}"/linerate-cache.*; do
        if [ -f "$d/pid" ] && [ "$(cat "$d/pid")" = "$pid" ]; then dir=$d; fi
    done
    [ -n "$dir" ] || { say "refusing to stop $pid: not an instance this script started"; exit 1; }
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        local t
        for ((t = 0; t < 50; t++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
}

selftest() {
    install
    local fail=0 kind out pid port
    for kind in redis memcached; do
        out=$(start "$kind" --maxmemory 16 --memory 16 --io-threads 2 --threads 2)
        pid=$(sed -n 's/^PID=//p' <<<"$out")
        port=$(sed -n 's/^PORT=//p' <<<"$out")
        case $kind in
            redis)
                if ask "$port" 'SET k vv\r\nGET k\r\n' $'+OK\r\n$2\r\nvv' \
                    && ask "$port" 'CONFIG GET maxmemory-policy\r\n' $'*2\r\n$16\r\nmaxmemory-policy\r\n$11\r\nallkeys-lru'; then
                    echo "CACHE redis PASS port $port: SET/GET, allkeys-lru"
                else
                    echo "CACHE redis FAIL port $port: no SET/GET answer or not allkeys-lru"; fail=1
                fi
                ;;
            memcached)
                if ask "$port" 'ms k 2\r\nvv\r\nmg k v\r\n' $'HD\r\nVA 2\r\nvv'; then
                    echo "CACHE memcached PASS port $port: ms/mg (meta protocol)"
                else
                    echo "CACHE memcached FAIL port $port: no ms/mg answer"; fail=1
                fi
                ;;
        esac
        stop "$pid"
        if kill -0 "$pid" 2>/dev/null || ready "$kind" "$port"; then
            echo "CACHE $kind stopped FAIL pid $pid or port $port still there"; fail=1
        else
            echo "CACHE $kind stopped PASS"
        fi
    done
    exit $fail
}

case "${1:-}" in
    install) install ;;
    start) shift; start "$@" ;;
    stop) stop "${2:-}" ;;
    selftest) selftest ;;
    *) echo "usage: scripts/cache-servers.sh install | start redis|memcached [options] | stop PID | selftest" >&2; exit 1 ;;
esac
