//! Command-line definitions (clap) and their mapping onto the library crates' configurations.
//! One file per command family: `serve`, `lab`; `parse` holds the value parsers they share.
#![forbid(unsafe_code)]

mod lab;
mod parse;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use lab::FloorArgs;
use serve::ServeArgs;

#[derive(Parser)]
#[command(
    name = "linerate",
    version,
    about = "A fast, strict HTTP/1.1 server, load generator and lab",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(flatten)]
    serve: ServeArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve HTTP/1.1 (the default): the demo app (TechEmpower and HttpArena endpoints).
    Serve(ServeArgs),
    /// Generate HTTP/1.1 load against a URL (wrk-style flags; honest latency with --rate).
    Load(linerate_load::LoadArgs),
    /// Run the lab tools.
    Lab {
        #[command(subcommand)]
        tool: LabTool,
    },
}

#[derive(Subcommand)]
enum LabTool {
    /// The syscall-floor reference server: one thread, epoll, recv, count request ends,
    /// send that many canned responses in one send.
    Floor(FloorArgs),
    /// Compare servers side by side: interleaved rounds, req/s, CPU cost per request, latency
    /// at a fixed rate, ratios to the floor; Markdown report, raw JSON and charts.
    Compare(Box<linerate_lab::compare::CompareArgs>),
    /// Audit this host (read-only) against the nine tuning steps, kTLS, io_uring and limits.
    Doctor(linerate_lab::doctor::DoctorArgs),
    /// Core-to-core latency matrix (CAS ping-pong per CPU pair), CSV and PNG heatmap, and
    /// which CPUs to give the server and the load.
    C2c(linerate_lab::c2c::C2cArgs),
    /// Bytes and segments of a response (and an HTML page's first view) against the initial
    /// congestion window (10 segments, RFC 6928).
    Firstflight(linerate_lab::firstflight::FirstflightArgs),
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        None => serve::serve(cli.serve),
        Some(Command::Serve(args)) => serve::serve(args),
        Some(Command::Load(args)) => linerate_load::run(args),
        Some(Command::Lab {
            tool: LabTool::Floor(a),
        }) => lab::floor(&a),
        Some(Command::Lab {
            tool: LabTool::Compare(a),
        }) => linerate_lab::compare::run(&a),
        Some(Command::Lab {
            tool: LabTool::Doctor(a),
        }) => linerate_lab::doctor::run(&a),
        Some(Command::Lab {
            tool: LabTool::C2c(a),
        }) => linerate_lab::c2c::run(&a),
        Some(Command::Lab {
            tool: LabTool::Firstflight(a),
        }) => linerate_lab::firstflight::run(&a),
    }
}

pub(crate) fn init_tracing(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
