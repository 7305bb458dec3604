#!/usr/bin/env bash
# TechEmpower's own toolset against the entry, unchanged: FrameworkBenchmarks' `./tfb --mode
# verify --test linerate`, which builds frameworks/Rust/linerate's linerate.dockerfile, starts
# TechEmpower's PostgreSQL image and checks every test type benchmark_config.json names (json,
# plaintext, db, query, fortune, update, cached-query) with its query and row counts.
#
#   scripts/tfb-verify.sh          (TFB_DIR: a FrameworkBenchmarks checkout to use; cloned
#                                   into target/tfb/ otherwise)
#
# The entry is copied into the checkout with this working tree's sources beside it
# (linerate-src/, which the dockerfile builds instead of cloning linerate), so what is verified
# is this tree. Exit 2, with a line saying why, where it cannot run: no Docker engine, or
# FrameworkBenchmarks cannot be fetched.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "tfb-verify: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

command -v docker >/dev/null || not_run "no docker command"
docker info >/dev/null 2>&1 || not_run "no Docker engine answers (docker info failed)"
tfb=${TFB_DIR:-target/tfb/FrameworkBenchmarks}
if [ ! -x "$tfb/tfb" ]; then
    mkdir -p "$(dirname "$tfb")"
    git clone --depth 1 https://github.com/TechEmpower/FrameworkBenchmarks "$tfb" >&2 \
        || not_run "cannot clone TechEmpower/FrameworkBenchmarks"
fi
dest=$tfb/frameworks/Rust/linerate
rm -rf "$dest"
mkdir -p "$dest/linerate-src"
cp -r frameworks/Rust/linerate/. "$dest/"
# The tracked and untracked, not ignored, files of this tree as they are now (a file deleted
# but not yet committed is passed over).
git ls-files -z -co --exclude-standard \
    | tar --null --ignore-failed-read -cf - -T - 2>/dev/null \
    | tar -xf - -C "$dest/linerate-src"
cd "$tfb"
./tfb --mode verify --test linerate
