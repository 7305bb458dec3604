#!/usr/bin/env bash
# Build the WebSocket echo peers (see README.md):
#   actix/target/release/ws-echo        actix-web 4 + actix-ws
#   tungstenite/target/release/ws-echo  tokio current_thread + tokio-tungstenite
#   node/node_modules                   ws (node echo.js needs no build step)
#   go/ws-echo                          net/http + gorilla/websocket
# Usage: bench/ws-peers/build.sh [actix|tungstenite|node|go ...]   (default: all)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

die() { echo "ws-peers build: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found on PATH ($2)"; }

GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}

build_actix() {
    need cargo "install Rust: https://rustup.rs"
    echo "== actix: cargo build --release --locked"
    (cd actix && cargo build --release --locked)
}
build_tungstenite() {
    need cargo "install Rust: https://rustup.rs"
    echo "== tungstenite: cargo build --release --locked"
    (cd tungstenite && cargo build --release --locked)
}
build_node() {
    need node "install Node.js"
    need npm "install npm"
    echo "== node: npm ci"
    (cd node && npm ci --no-audit --no-fund)
}
build_go() {
    [ -x "$GO" ] || die "go not found on PATH or at /usr/local/go/bin/go (install Go, or set GO=/path/to/go)"
    echo "== go: go build -o go/ws-echo"
    (cd go && "$GO" build -o ws-echo .)
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(actix tungstenite node go)
for t in "${targets[@]}"; do
    case $t in
        actix|tungstenite|node|go) "build_$t" ;;
        *) die "unknown peer '$t' (expected actix, tungstenite, node or go)" ;;
    esac
done
echo "ws-peers build: ok (${targets[*]})"
