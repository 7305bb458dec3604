#!/bin/sh
# Builds the fuzz targets. With nightly and cargo-fuzz: instrumented (sanitizer coverage +
# ASan), ready for `cargo +nightly fuzz run`. Without: a plain stable build of the same
# binaries (dev profile), which libFuzzer cannot steer (no coverage) but which replays inputs
# given as files, so CI can build and run the targets without nightly. Extra arguments go to cargo.
set -eu
cd "$(dirname "$0")/.."
if cargo +nightly --version >/dev/null 2>&1 && cargo +nightly fuzz --version >/dev/null 2>&1; then
    exec cargo +nightly fuzz build --fuzz-dir fuzz "$@"
fi
echo "fuzz/build.sh: no nightly toolchain or cargo-fuzz; building uninstrumented on stable" >&2
# The dev profile: what a replay needs (with overflow checks and debug assertions, stricter
# than release), and 90 s on a fresh machine against release's 128 s.
exec cargo build --manifest-path fuzz/Cargo.toml "$@"
