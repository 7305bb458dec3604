#!/usr/bin/env bash
# Installs the peers the lab compares linerate with, all from Debian (bookworm):
#   nginx-light, haproxy, caddy, h2o    servers and proxies (bench/*_peers.toml; nginx, h2o and
#                                       caddy are also `lab arena --servers`'s static peers)
#   varnish                             the HTTP cache peer (bench/proxy_cache.toml)
#   wrk, nghttp2-client (h2load)        load generators
#   openssl, curl                       certificates and checks
# Then prints each one's version. Nothing is started here, nor by apt (policy-rc.d).
#
#   scripts/peers.sh          install what is missing (root on Debian), then list
#   scripts/peers.sh list     only list what is there
#   scripts/peers.sh rust     build the Rust peers `lab arena --servers …,actix,axum` starts:
#                             bench/actix-db and bench/axum-tokio (cargo build --release --locked)
#   scripts/peers.sh grpc     build the gRPC peers (bench/grpc.toml, bench/grpc_proxy.toml):
#                             bench/tonic-grpc (tonic 0.14, cargo --release --locked; no protoc
#                             needed) and bench/grpc-go-sum (grpc-go v1.85.0, go build; GOPROXY)
#   scripts/peers.sh arena    build the arena's peers, HttpArena's leading engines written here
#                             (bench/arena-peers/README.md), into target/peers/<name>, which
#                             `lab arena --servers linerate,actix,hyper,…` starts: actix, hyper,
#                             may-minihttp (cargo --release --locked, one target dir), fasthttp,
#                             gobwas-ws, caddy-handler (go build), h2o-h2c and uring-c (make;
#                             installs Debian's libh2o-evloop-dev, libcjson-dev and liburing-dev
#                             when root), and the earlier
#                             tonic, grpc-go and tungstenite peers (bench/tonic-grpc,
#                             bench/grpc-go-sum, bench/ws-peers/tungstenite)
#
# Exit 2 with a NOT RUN line where it cannot install (not root, no apt-get) or build (no cargo,
# no go); a package that Debian cannot install is named, and the rest still installed.
set -euo pipefail

say() { echo "peers: $*" >&2; }

if [ "${1:-}" = rust ]; then
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    command -v cargo >/dev/null || { say "NOT RUN: the Rust peers: cargo is not installed (https://rustup.rs)"; exit 2; }
    status=0
    for p in actix-db axum-tokio; do
        say "building bench/$p (cargo build --release --locked)"
        (cd "$root/bench/$p" && cargo build --release --locked) || status=1
    done
    [ $status != 0 ] || say "Rust peers built: bench/actix-db/target/release/actix-db, bench/axum-tokio/target/release/axum-tokio"
    exit $status
fi

if [ "${1:-}" = grpc ]; then
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
    status=0
    if command -v cargo >/dev/null; then
        say "building bench/tonic-grpc (cargo build --release --locked)"
        (cd "$root/bench/tonic-grpc" && cargo build --release --locked) || status=1
    else
        say "NOT RUN: bench/tonic-grpc: cargo is not installed (https://rustup.rs)"
        status=2
    fi
    if [ -x "$GO" ]; then
        say "building bench/grpc-go-sum ($GO build)"
        (cd "$root/bench/grpc-go-sum" && "$GO" build -o grpc-go-sum .) || status=1
    else
        say "NOT RUN: bench/grpc-go-sum: go is not on PATH nor at /usr/local/go/bin/go (set GO=)"
        [ $status = 1 ] || status=2
    fi
    [ $status != 0 ] || say "grpc peers built: bench/tonic-grpc/target/release/tonic-grpc, bench/grpc-go-sum/grpc-go-sum"
    exit $status
fi

if [ "${1:-}" = arena ]; then
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
    out=$root/target/peers
    mkdir -p "$out"
    status=0
    built=()
    fail() { say "NOT BUILT: $1"; status=1; }
    # One target directory for the Rust peers: their common crates (tokio, rustls…) build once.
    cargo_peer() { # NAME DIR BINARY
        command -v cargo >/dev/null || { say "NOT RUN: $1: cargo is not installed (https://rustup.rs)"; status=2; return; }
        say "building $1 ($2: cargo build --release --locked)"
        if (cd "$root/$2" && cargo build --release --locked --target-dir "$root/target/peers-build"); then
            cp "$root/target/peers-build/release/$3" "$out/$1" && built+=("$1")
        else
            fail "$1"
        fi
    }
    go_peer() { # NAME DIR
        [ -x "$GO" ] || { say "NOT RUN: $1: go is not on PATH nor at /usr/local/go/bin/go (set GO=)"; status=2; return; }
        say "building $1 ($2: go build)"
        if (cd "$root/$2" && CGO_ENABLED=0 "$GO" build -o "$out/$1" .); then built+=("$1"); else fail "$1"; fi
    }
    cargo_peer actix bench/arena-peers/actix actix-arena
    cargo_peer hyper bench/arena-peers/hyper hyper-arena
    cargo_peer may-minihttp bench/arena-peers/may-minihttp may-minihttp-arena
    cargo_peer tonic bench/tonic-grpc tonic-grpc
    cargo_peer tungstenite bench/ws-peers/tungstenite ws-echo
    go_peer fasthttp bench/arena-peers/fasthttp
    go_peer gobwas-ws bench/arena-peers/gobwas-ws
    go_peer grpc-go bench/grpc-go-sum
    go_peer caddy-handler bench/arena-peers/caddy
    # C peers on Debian's libraries: installed (root) where pkg-config does not find them.
    c_peer() { # NAME DIR "PKG-CONFIG NAMES" "DEBIAN PACKAGES"
        # shellcheck disable=SC2086
        if ! pkg-config --exists $3 2>/dev/null; then
            if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
                say "installing $4 (apt-get) for $1"
                # shellcheck disable=SC2086
                DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                    $4 pkg-config >/dev/null 2>&1 || true
            fi
        fi
        # shellcheck disable=SC2086
        if pkg-config --exists $3 2>/dev/null; then
            say "building $1 ($2: make)"
            if make -s -C "$root/$2" OUT="$out/$1" >/dev/null; then built+=("$1"); else fail "$1"; fi
        else
            say "NOT RUN: $1: Debian's $4 are not installed (root on Debian installs them)"
            [ $status = 1 ] || status=2
        fi
    }
    # h2o-h2c links Debian's libh2o (bookworm: 2.2.5) and cJSON; uring-c, liburing (2.3).
    c_peer h2o-h2c bench/arena-peers/h2o-h2c "libh2o-evloop libcjson" "libh2o-evloop-dev libcjson-dev"
    c_peer uring-c bench/arena-peers/uring-c "liburing" "liburing-dev"
    say "arena peers built in target/peers: ${built[*]:-none}"
    exit $status
fi

# command:package
peers=(nginx:nginx-light haproxy:haproxy caddy:caddy h2o:h2o varnishd:varnish wrk:wrk h2load:nghttp2-client
    openssl:openssl curl:curl)

missing=()
for p in "${peers[@]}"; do
    command -v "${p%%:*}" >/dev/null || missing+=("${p#*:}")
done

if [ "${1:-install}" != list ] && [ ${#missing[@]} != 0 ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        say "NOT RUN: missing ${missing[*]}, and not root on Debian to install them"
        exit 2
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Debian starts a packaged service on install (nginx on :80…); the lab starts its own, so
    # a policy-rc.d refuses those starts while apt runs (only if the host has none of its own).
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    log=$(mktemp "${TMPDIR:-/tmp}/linerate-peers-apt.XXXXXX")
    say "installing ${missing[*]} (apt-get, --no-install-recommends)"
    if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
        apt-get update >>"$log" 2>&1 || true
        for pkg in "${missing[@]}"; do
            apt-get install -y -q --no-install-recommends "$pkg" >>"$log" 2>&1 \
                || say "apt-get install $pkg failed (see $log)"
        done
    fi
fi

version() {
    case $1 in
        nginx) nginx -v 2>&1 ;;
        haproxy) haproxy -v 2>&1 | head -1 ;;
        caddy) caddy version 2>&1 ;;
        h2o) h2o --version 2>&1 | head -1 ;;
        varnishd) varnishd -V 2>&1 | head -1 ;;
        wrk) wrk -v 2>&1 | head -1 ;;
        h2load) h2load --version 2>&1 | head -1 ;;
        openssl) openssl version ;;
        curl) curl --version | head -1 ;;
    esac
}
absent=0
for p in "${peers[@]}"; do
    c=${p%%:*}
    if command -v "$c" >/dev/null; then
        printf '  %-8s %s\n' "$c" "$(version "$c")"
    else
        printf '  %-8s absent (%s)\n' "$c" "${p#*:}"
        absent=1
    fi
done
exit $absent
