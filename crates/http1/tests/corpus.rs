//! Runs every committed fuzz seed (`fuzz/corpus/*`) through the fuzz targets' invariants, so a
//! plain `cargo test` on stable exercises the corpus; no fuzzer or nightly is needed.
//!
//! The checks are `fuzz/src/lib.rs`, included here rather than copied. Seeds named `accept_*`
//! must be used up by complete messages and seeds named `reject_*` must be refused somewhere;
//! other names (inputs a fuzzer found) need only pass the invariants.

use std::fs;
use std::path::{Path, PathBuf};

#[path = "../../../fuzz/src/lib.rs"]
mod check;

use check::End;

/// The seed files of one fuzz target, sorted by name.
fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "..",
        "fuzz",
        "corpus",
        target,
    ]
    .iter()
    .collect();
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("readable corpus dir").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no seeds in {}", dir.display());
    files
        .iter()
        .map(|path| (file_name(path), fs::read(path).expect("readable seed")))
        .collect()
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned()
}

/// Runs `check` over every seed of `target` and holds named seeds to their verdict.
fn run_seeds(target: &str, check: fn(&[u8]) -> End) {
    for (name, data) in seeds(target) {
        let end = check(&data);
        if name.starts_with("accept_") {
            assert_eq!(end, End::Clean, "{target}/{name}");
        } else if name.starts_with("reject_") {
            assert!(
                matches!(
                    end,
                    End::Rejected(_) | End::ResponseRejected(_) | End::ProxyRejected(_)
                ),
                "{target}/{name}: {end:?}"
            );
        }
    }
}

#[test]
fn parse_request_seeds_hold_the_invariants() {
    run_seeds("parse_request", check::check_request);
}

#[test]
fn parse_chunked_seeds_hold_the_invariants() {
    run_seeds("parse_chunked", check::check_chunked);
}

#[test]
fn parse_response_seeds_hold_the_invariants() {
    run_seeds("parse_response", check::check_response);
}

#[test]
fn parse_proxy_header_seeds_hold_the_invariants() {
    run_seeds("parse_proxy_header", check::check_proxy_header);
}
