//! Answers one static file many times from a warm open-file cache, for counting the
//! instructions of a static hit under callgrind (the files module's work: path, cache lookup,
//! precompressed siblings, validators; not the connection's).
//!
//! Owns nothing but a loop. Run it twice with different counts and divide the difference, so
//! that start-up cancels out:
//!
//!     cargo build --release -p linerate-server --no-default-features --example static_count
//!     valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/static_count 100001

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use linerate_server::Method;
use linerate_server::files::{FilesOptions, StaticFiles};

fn main() -> ExitCode {
    let Some(Ok(count)) = std::env::args().nth(1).map(|c| c.parse::<u64>()) else {
        eprintln!("usage: static_count COUNT");
        return ExitCode::FAILURE;
    };
    let dir = std::env::temp_dir().join(format!("linerate-static-count-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("reset.css"), "a { color: red }\n".repeat(500)).unwrap();
    std::fs::write(
        dir.join("reset.css.gz"),
        [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3],
    )
    .unwrap();
    let files = StaticFiles::open(&dir, FilesOptions::default()).unwrap();
    let headers: &[(&str, &str)] = &[("accept-encoding", "gzip, br")];
    // One clock for every call: each after the first is a hit, never a revalidation.
    let now = Instant::now();
    for _ in 0..count {
        black_box(files.resolve_at(now, Method::Get, black_box(b"/reset.css"), headers));
    }
    let _ = std::fs::remove_dir_all(&dir);
    ExitCode::SUCCESS
}
