//! Runs every committed seed of the gRPC fuzz targets (`fuzz/corpus/grpc_frames`,
//! `fuzz/corpus/grpc_web_text`) through the targets' invariants, so a plain `cargo test` on
//! stable exercises them; no fuzzer or nightly is needed. The checks are `fuzz/src/grpc.rs`,
//! included rather than copied. Seeds named `accept_*` must end cleanly and seeds named
//! `reject_*` must be refused; other names (inputs a fuzzer found) need only pass the checks.

use std::fs;
use std::path::PathBuf;

#[path = "../../../fuzz/src/grpc.rs"]
mod check;

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
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, fs::read(path).expect("readable seed"))
        })
        .collect()
}

fn expect(name: &str, ok: bool, verdict: &dyn std::fmt::Debug) {
    if name.starts_with("accept_") {
        assert!(ok, "{name}: refused: {verdict:?}");
    } else if name.starts_with("reject_") {
        assert!(!ok, "{name}: accepted: {verdict:?}");
    }
}

#[test]
fn grpc_frames_seeds() {
    for (name, data) in seeds("grpc_frames") {
        let verdict = check::check_frames(&data);
        expect(&name, verdict.is_ok(), &verdict);
    }
}

#[test]
fn grpc_web_text_seeds() {
    for (name, data) in seeds("grpc_web_text") {
        let verdict = check::check_web_text(&data);
        expect(&name, verdict.is_ok(), &verdict);
    }
}
