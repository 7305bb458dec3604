//! The two timing tests: constant-rate accuracy and coordinated omission. They run in their own
//! test binary, one at a time, so the other tests do not steal the CPU they measure.
#![forbid(unsafe_code)]

mod load_common;
use load_common as common;

use std::sync::Mutex;

use common::{Behavior, Server, measure};

/// Serializes the tests of this file.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn constant_rate_is_accurate() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = Server::start(Behavior::Ok);
    // 2000 req/s for 3 s: far below what this machine sustains, so only the schedule is tested.
    let r = measure(&[
        "-t",
        "1",
        "-c",
        "16",
        "--rate",
        "2000",
        "-d",
        "3s",
        &s.url(),
    ]);
    let run = &r.runs[0];
    let pct = run
        .rate_achieved_pct
        .expect("rate mode reports achieved rate");
    assert!(
        (98.0..=102.0).contains(&pct),
        "achieved {pct}% of 2000 req/s ({} responses)",
        run.responses
    );
    assert_eq!(run.errors.total(), 0);
    assert!(run.latency_uncorrected.is_some());
}

#[test]
fn stall_shows_in_corrected_latency_only() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // One connection at 200 req/s for 3 s; request 100 waits 1 s. About 200 requests are due
    // during the stall: measured from their intended send they wait up to 1 s (p99 shows it);
    // measured from when they actually left, only the stalled one is slow.
    let s = Server::start(Behavior::StallOnce { nth: 100, ms: 1000 });
    let r = measure(&[
        "-t",
        "1",
        "-c",
        "1",
        "--rate",
        "200",
        "-d",
        "3s",
        "--timeout",
        "5s",
        &s.url(),
    ]);
    let run = &r.runs[0];
    let corrected = &run.latency;
    let raw = run
        .latency_uncorrected
        .as_ref()
        .expect("uncorrected figures");
    assert!(
        corrected.p99_us >= 500_000,
        "corrected p99 {}us",
        corrected.p99_us
    );
    assert!(raw.p99_us < 100_000, "uncorrected p99 {}us", raw.p99_us);
    assert!(
        raw.max_us >= 900_000,
        "uncorrected max {}us still sees the one stall",
        raw.max_us
    );
}
