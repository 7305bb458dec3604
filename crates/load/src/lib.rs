//! linerate-load: the load generator engine behind `linerate load` (issue B).
//! One thread per core, each with its own epoll loop and connections; requests encoded once;
//! responses framed only as far as counting needs (`linerate_http1::ResponseCounter`); per-thread HdrHistograms merged at the end.
//! The binary only parses `LoadArgs` and calls `run`; tests and the lab call `measure`.
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

pub mod args;
pub mod config;
pub mod engine;
pub mod report;
pub mod request;
pub mod schedule;
pub mod stats;
pub mod tls;
pub mod url;
pub mod worker;

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use signal_hook::consts::SIGINT;

pub use args::LoadArgs;
pub use config::{Config, ConfigError};
pub use engine::EngineError;
pub use report::Report;

/// Runs the load described by `cfg` and returns the report; prints nothing.
pub fn measure(cfg: &Config) -> Result<Report, EngineError> {
    engine::preflight(cfg)?;
    let results = engine::execute(cfg, &AtomicBool::new(false), |_, _| {})?;
    Ok(build_report(cfg, &results))
}

fn build_report(cfg: &Config, results: &[engine::RunResult]) -> Report {
    let runs: Vec<_> = results.iter().map(|r| report::run_report(cfg, r)).collect();
    Report {
        setup: report::setup(cfg),
        median: report::median(&runs),
        runs,
    }
}

/// `linerate load`: runs and prints the report (text, or JSON with `--json`).
pub fn run(args: LoadArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::from_args(&args)?;
    engine::preflight(&cfg)?;
    let setup = report::setup(&cfg);
    let mut stdout = std::io::stdout();
    if !cfg.json {
        write!(stdout, "{}", report::header_text(&setup))?;
        stdout.flush()?;
    }
    // Ctrl-C ends the run in progress and reports it, as wrk does; a second one kills.
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register_conditional_shutdown(SIGINT, 1, stop.clone())?;
    signal_hook::flag::register(SIGINT, stop.clone())?;
    let results = engine::execute(&cfg, &stop, |i, r| {
        if !cfg.json {
            let text =
                report::run_text(&report::run_report(&cfg, r), i, cfg.runs, cfg.latency_table);
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
    })?;
    let report = build_report(&cfg, &results);
    if cfg.json {
        serde_json::to_writer_pretty(&mut stdout, &report)?;
        writeln!(stdout)?;
    } else if report.runs.len() > 1 {
        write!(stdout, "{}", report::median_text(&report.median))?;
    }
    Ok(ExitCode::SUCCESS)
}
