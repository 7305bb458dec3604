#!/usr/bin/env bash
# The WebSocket comparison: linerate's demo /ws echo against actix-ws, tokio-tungstenite,
# Node's ws and gorilla (bench/ws-peers), through `linerate lab compare --suite bench/ws.toml`.
#
#   bench/ws.sh [lab compare flags…]   e.g. --out docs/lab/ws --update-docs docs/benchmarks.md
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p linerate >/dev/null
bench/ws-peers/build.sh
target/release/linerate lab compare --suite bench/ws.toml "$@"
