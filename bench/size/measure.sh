#!/usr/bin/env bash
# Binary size and clean build time of the same in-memory todo service (GET/POST /todos,
# GET/DELETE /todos/{id}, JSON) on linerate-server with `default-features = false`
# (linerate-todo/) and on axum 0.8 + tokio (axum-todo/), and, for comparison, linerate-todo
# with every optional feature of the server (`--features full`). Each is its own cargo project with
# its own Cargo.lock, built with the main workspace's release profile (fat LTO, one codegen
# unit, opt-level 3; panic unwinds in both) from clean, in its own target directory, one after
# the other. Prints, per service: the release binary as cargo leaves it (symbols kept, debug
# info stripped: cargo's release default), the same after `strip`, and the build's wall time.
#
# Build times are only worth comparing on an otherwise idle machine; sizes are the same
# anywhere for the same toolchain and lock files. Usage: bench/size/measure.sh [TARGET_ROOT]
# (default: a fresh temporary directory, removed afterwards). Needs the crates in the lock
# files (`cargo fetch` reaches the registry once; the builds run --offline after it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${1:-}
if [ -z "$root" ]; then
    root=$(mktemp -d)
    trap 'rm -rf "$root"' EXIT
fi
mkdir -p "$root"

printf '%-22s %12s %12s %9s\n' build "bytes" "stripped" "build s"
# NAME PROJECT CARGO-FLAGS…
build() {
    local name=$1 svc=$2
    shift 2
    local dir=$here/$svc target=$root/$name
    rm -rf "$target"
    (cd "$dir" && cargo fetch --locked >/dev/null 2>&1)
    local t0 t1
    t0=$(date +%s.%N)
    (cd "$dir" && cargo build --release --locked --offline --target-dir "$target" "$@" >"$root/$name.log" 2>&1) ||
        { cat "$root/$name.log" >&2; exit 1; }
    t1=$(date +%s.%N)
    local bin=$target/release/$svc
    strip -o "$root/$name.stripped" "$bin"
    printf '%-22s %12d %12d %9s\n' "$name" "$(stat -c %s "$bin")" \
        "$(stat -c %s "$root/$name.stripped")" "$(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }")"
}
build linerate-todo linerate-todo
build axum-todo axum-todo
# For comparison: the same service with every optional feature of the server.
build linerate-todo-full linerate-todo --features full
