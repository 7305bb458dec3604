#!/usr/bin/env bash
# The semver stage: the public API of every crate for crates.io (the members without
# `publish = false`; scripts/package.sh lists them) checked against the last release tag by
# cargo-semver-checks, so that a breaking change needs the version bump it calls for
# (0.x: the minor; docs/library.md, "Stability").
#
#   scripts/semver.sh [TAG]     (default: the newest release tag, vX.Y.Z, reachable from HEAD)
#
# The baseline is the tag's own sources, not crates.io: nothing is published from here, and a
# tag is what a release is. They are unpacked by `git archive` into target/semver-baseline/TAG
# and given as `--baseline-root` (cargo-semver-checks' own `--baseline-rev` checkout stops at
# the lab's test fixtures, a symlink to /dev/null: "cannot expand absolute symlink target");
# cargo-semver-checks builds both sides' rustdoc JSON under target/semver-checks/. cargo-semver-checks is installed into target/tools/cargo-semver-checks with
# `cargo install --locked`, pinned to CARGO_SEMVER_CHECKS_VERSION below, and reinstalled only
# when missing or another version (the first install compiles it: minutes).
#
# Exit 2 with a line `semver: NOT RUN: …` saying why where the check cannot run: no tag yet
# (until the first release), a shallow clone without tags, or cargo-semver-checks that cannot
# be installed. 1 when the check finds a change that the versions do not allow (its report
# says which item and which rule), 0 when there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO_SEMVER_CHECKS_VERSION=0.51.0
tools=$PWD/target/tools/cargo-semver-checks
bin=$tools/bin/cargo-semver-checks

say() { echo "semver: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

command -v git >/dev/null || not_run "no git"
git rev-parse --git-dir >/dev/null 2>&1 || not_run "not a git checkout: no tags to compare with"
tag=${1:-}
if [ -z "$tag" ]; then
    if [ "$(git rev-parse --is-shallow-repository)" = true ] && [ -z "$(git tag --list 'v[0-9]*')" ]; then
        not_run "a shallow clone without tags (fetch them: git fetch --tags --unshallow)"
    fi
    tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null) \
        || not_run "no tag yet: the public API is checked from the first release tag on (docs/library.md, \"Stability\")"
fi
git rev-parse --verify --quiet "$tag^{commit}" >/dev/null || { say "no commit for tag $tag"; exit 1; }

# `cargo semver-checks --version` says "cargo-semver-checks 0.51.0".
if [ "$("$bin" semver-checks --version 2>/dev/null)" != "cargo-semver-checks $CARGO_SEMVER_CHECKS_VERSION" ]; then
    mkdir -p "$tools"
    say "installing cargo-semver-checks $CARGO_SEMVER_CHECKS_VERSION into $tools"
    cargo install cargo-semver-checks --version "$CARGO_SEMVER_CHECKS_VERSION" --locked \
        --root "$tools" >"$tools/install.log" 2>&1 || {
        tail -20 "$tools/install.log" >&2
        not_run "cargo install cargo-semver-checks $CARGO_SEMVER_CHECKS_VERSION failed (see $tools/install.log)"
    }
fi

base=$PWD/target/semver-baseline/${tag//\//_}
if [ ! -f "$base/.complete" ]; then
    rm -rf "$base"
    mkdir -p "$base"
    git archive --format=tar "$tag" | tar -x -C "$base"
    touch "$base/.complete"
fi

say "the public API of $(git describe --tags --always --dirty 2>/dev/null || echo HEAD) against $tag"
# --workspace leaves out the members with `publish = false`. --all-features: every feature's
# API is public (linerate-server's `tower` and `kv` are off by default).
PATH=$tools/bin:$PATH cargo semver-checks check-release --workspace --baseline-root "$base" \
    --all-features
