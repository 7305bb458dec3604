#!/usr/bin/env bash
# The size check: the stripped release binaries of the bank service on linerate-server
# (crates/server/examples/bank, built `--no-default-features --features grpc,tower`, what
# it uses, as bench/bank.sh runs it) and of its axum + tonic twin (bench/bank-axum-tonic), each
# with its project's release profile (fat LTO, one codegen unit, opt-level 3; panic unwinds in
# both), and their ratio (the acceptance: linerate ≤ 1.15× axum's). Prints, per service, the
# binary as cargo leaves it and after `strip`. Builds in the usual target directories, one after
# the other (sizes do not depend on what was built before).
#
#   bench/bank-size.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cargo build --release --locked -p linerate-server --example bank --no-default-features \
    --features grpc,tower >"$tmp/linerate.log" 2>&1 || { cat "$tmp/linerate.log" >&2; exit 1; }
(cd bench/bank-axum-tonic && cargo build --release --locked) >"$tmp/twin.log" 2>&1 ||
    { cat "$tmp/twin.log" >&2; exit 1; }

printf '%-18s %12s %12s\n' build bytes stripped
size() { # NAME BINARY: prints the row, and the stripped size in $tmp/NAME
    strip -o "$tmp/$1.stripped" "$2"
    stat -c %s "$tmp/$1.stripped" >"$tmp/$1"
    printf '%-18s %12d %12d\n' "$1" "$(stat -c %s "$2")" "$(cat "$tmp/$1")"
}
size linerate-bank target/release/examples/bank
size axum-tonic-bank bench/bank-axum-tonic/target/release/bank-axum-tonic
awk -v l="$(cat "$tmp/linerate-bank")" -v a="$(cat "$tmp/axum-tonic-bank")" \
    'BEGIN { printf "stripped ratio linerate / axum-tonic: %.3f\n", l / a }'
