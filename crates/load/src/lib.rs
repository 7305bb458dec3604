//! linerate-load: the load generator engine behind `linerate load`.
//! One thread per core, each with its own epoll loop and connections; requests encoded once;
//! responses framed only as far as counting needs (`linerate_http1::ResponseCounter`); per-thread HdrHistograms merged at the end.
//! `--http2` connections speak HTTP/2 instead (`h2`, sans I/O: h2c with prior knowledge, or ALPN
//! `h2` over TLS), with `--max-concurrent-streams` streams in flight each; `--http3` connections
//! speak HTTP/3 over QUIC (`h3`, sans I/O over quinn-proto, one UDP socket each, driven by the
//! same loop in `worker::quic`), with as many streams.
//! `--grpc` runs are HTTP/2 runs whose answers are also held to gRPC's rules (`h2::grpc`).
//! Callers fill in `LoadOptions` (the binary from its flags, `lab compare` from a suite), check them
//! into a `Config` and call `measure` or `measure_each`; rendering the `Report` is theirs.
//!
//! Engine choice, measured on the 2-core VM (see `examples/uring_probe.rs`): a request costs the
//! client about 5 µs of CPU non-pipelined, over 90% of it in the kernel's TCP path; a syscall
//! costs about 0.1 µs. An io_uring closed loop (send + recv SQEs, one enter per ~15-45
//! completions) cost the same 4.5-5 µs/request as this epoll loop, so epoll is kept; multishot
//! recv with provided buffers is a follow-up, not expected to change the picture.
//! `https://` goes through `tls::Transport`, a rustls session per connection driven by the same
//! loop; `http://` connections skip it at the cost of one enum match per I/O call.
//! `--spin` (off by default) keeps a thread polling briefly after events: against a server that
//! is the bottleneck it saves the server the cost of waking the generator per response.
#![forbid(unsafe_code)]

pub mod config;
pub mod engine;
pub mod h2;
pub mod h3;
pub mod options;
pub mod report;
pub mod request;
pub mod schedule;
pub mod stats;
pub mod tls;
pub mod units;
pub mod url;
pub mod worker;
pub mod ws;

use std::sync::atomic::AtomicBool;

pub use config::{Config, ConfigError};
pub use engine::EngineError;
pub use options::LoadOptions;
pub use report::Report;

/// Runs the load described by `cfg` and returns the report; prints nothing.
pub fn measure(cfg: &Config) -> Result<Report, EngineError> {
    engine::preflight(cfg)?;
    measure_each(cfg, &AtomicBool::new(false), |_, _| {})
}

/// Runs the load described by `cfg` (already through `engine::preflight`, which makes the first
/// connection and reports why it fails) until done or until `stop` is set: the run in progress
/// then ends and is reported, as wrk does on Ctrl-C; so does a run whose target goes away (the
/// report is marked interrupted). `on_run` sees each run's report as it ends.
/// Rendering is the caller's (`report::*_text`, or the `Report` as JSON).
pub fn measure_each(
    cfg: &Config,
    stop: &AtomicBool,
    mut on_run: impl FnMut(usize, &report::RunReport),
) -> Result<Report, EngineError> {
    // Each run's report is made once, as it ends, and kept for the whole.
    let mut runs = Vec::with_capacity(cfg.runs);
    engine::execute(cfg, stop, |i, r| {
        let run = report::run_report(cfg, r);
        on_run(i, &run);
        runs.push(run);
    })?;
    Ok(Report {
        setup: report::setup(cfg),
        median: report::median(&runs),
        interrupted: runs.last().is_some_and(|r| r.interrupted),
        runs,
    })
}
