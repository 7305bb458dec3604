#!/usr/bin/env bash
# The packaging stage: every crate of the workspace that may go to crates.io packaged as
# `cargo publish` would package it, so that a change that breaks packaging fails CI. Nothing
# is published from here.
#
#   scripts/package.sh [--no-verify]
#
# The crates are the members whose manifest does not say `publish = false`, read from
# `cargo metadata` (today linerate-http1, -hpack, -h3, -ws, -cache, -kv, -grpc, -postgres and
# -server; the lab, the load generator, the binary and the TechEmpower entry are not for
# crates.io: docs/library.md, "Stability"). `cargo package` checks each manifest (a
# dependency without a version, a missing readme), lists the files (only those under the
# crate's directory: an include_str! of a file outside it breaks here), and, unless
# --no-verify, unpacks each .crate under target/package-build/package/ and builds it from there
# alone, with its own features and against the others' packaged sources (cargo's local overlay
# of the workspace's unpublished crates), so a crate that builds only inside the workspace
# fails. docs/testing.md has its time.
#
# It needs crates.io's index, as cargo publish does; where the index cannot be reached it is
# read from the local registry cache (`--offline`), which every build before this one has
# filled, and says so. Needs python3 (to read cargo metadata's JSON). Exit 1 when packaging
# fails, 0 with a one-line summary.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "package: $*" >&2; }

verify=1
case "${1:-}" in
    "") ;;
    --no-verify) verify="" ;;
    *) say "usage: scripts/package.sh [--no-verify]"; exit 1 ;;
esac

# cargo metadata's `publish` is null (anywhere) or a list of registries; `[]` is publish = false.
mapfile -t found < <(cargo metadata --format-version 1 --no-deps --locked | python3 -c '
import json, sys
for p in sorted(json.load(sys.stdin)["packages"], key=lambda p: p["name"]):
    if p["publish"] != []:
        print(p["name"], p["version"])')
[ ${#found[@]} -gt 0 ] || { say "FAILED: no publishable crate in the workspace"; exit 1; }
crates=()
for nv in "${found[@]}"; do crates+=("${nv% *}"); done

# The verification builds a crate's dependents against the other packages, served from a
# local registry that cargo unpacks into $CARGO_HOME/registry/src/-<hash>/NAME-VERSION and
# compiles as registry crates, which it takes to be immutable: the next run, same version,
# would build against the last run's unpacked sources and reuse their compiled units (a
# server change that needed a new linerate-cache function failed so). So the packages are
# built in a target directory of their own, target/package-build, whose units of these crates
# go before each run, as do their unpacked copies; the dependencies stay, built once.
build_dir=${CARGO_TARGET_DIR:-target}/package-build
for nv in "${found[@]}"; do
    c=${nv% *}
    rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$c-${nv#* }" \
        "$build_dir"/debug/.fingerprint/"$c"-* "$build_dir"/debug/build/"$c"-* \
        "$build_dir"/debug/deps/lib"${c//-/_}"-* "$build_dir"/debug/deps/"${c//-/_}"-*
done

args=(--locked --target-dir "$build_dir")
# Each package is built in an ephemeral workspace without the root manifest's profiles: the
# dev profile's debug settings are given again (line tables only, none for dependencies),
# which also keeps the directory small.
args+=(--config 'profile.dev.debug="line-tables-only"' --config 'profile.dev.package."*".debug=false')
for c in "${crates[@]}"; do args+=(-p "$c"); done
if [ -z "$verify" ]; then args+=(--no-verify); fi
# Uncommitted changes are packaged as they are (a developer runs this before committing):
# nothing is published, so cargo's check for a clean tree guards nothing here.
args+=(--allow-dirty)
if ! curl -fsS --max-time 10 -o /dev/null https://index.crates.io/config.json 2>/dev/null; then
    say "crates.io's index cannot be reached: its local cache is used (--offline)"
    args+=(--offline)
fi

say "${crates[*]}"
t0=$SECONDS
cargo package "${args[@]}"
kib=0
for c in "${crates[@]}"; do
    files=("$build_dir/package/$c"-[0-9]*.crate)
    [ -f "${files[0]}" ] || { say "FAILED: no $build_dir/package/$c-*.crate"; exit 1; }
    f=$(printf '%s\n' "${files[@]}" | sort -V | tail -n 1)
    kib=$((kib + $(stat -c %s "$f") / 1024))
done
say "${#crates[@]} crates packaged$([ -n "$verify" ] && echo " and built from their packages"), ${kib} KiB of .crate files, $((SECONDS - t0)) s"
