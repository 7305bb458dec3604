//! Command-line definitions (clap) and their mapping onto the library crates' configurations.
//! One file per command family: `serve`, `load`, `lab`. Values with units (durations, CPU lists)
//! are read by `linerate_load::units`, the workspace's one parser of each.
#![forbid(unsafe_code)]

mod config_hash;
mod lab;
pub mod load;
mod reload;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use lab::FloorArgs;
use serve::ServeArgs;

/// `--version`: the package's version and the commit built (`build.rs`), as
/// `linerate_build_info` says them.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("LINERATE_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "linerate",
    version = VERSION,
    about = "A fast, strict HTTP/1.1, HTTP/2 and HTTP/3 server, load generator and lab",
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
    /// Serve HTTP/1.1, HTTP/2 and HTTP/3 (QUIC, with --quic), with TLS (the default): static
    /// files, sites, a reverse proxy, and the demo app (TechEmpower and HttpArena endpoints).
    #[command(
        after_help = "Tracing (OpenTelemetry, OTLP/HTTP protobuf) is on when a collector is named: \
OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 (or [tracing] endpoint in --config); \
OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG, OTEL_BSP_SCHEDULE_DELAY, \
OTEL_BSP_MAX_QUEUE_SIZE, OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS are read too \
(docs/observability.md)."
    )]
    Serve(Box<ServeArgs>),
    /// Generate HTTP/1.1 or HTTP/2 load against a URL (wrk-style flags; honest latency with
    /// --rate).
    Load(Box<load::LoadArgs>),
    /// Run the lab tools.
    Lab {
        #[command(subcommand)]
        tool: LabTool,
    },
}

#[derive(Subcommand)]
enum LabTool {
    /// The syscall-floor reference server: one thread, epoll, recv, count request ends,
    /// send that many canned responses in one send; with --proxy, the proxy floor (a byte
    /// relay to a kept-alive upstream).
    Floor(FloorArgs),
    /// Compare servers side by side: interleaved rounds, req/s, CPU cost per request, latency
    /// at a fixed rate, ratios to the floor; Markdown report, raw JSON and charts.
    Compare(Box<lab::CompareFlags>),
    /// Redis against memcached with the same client and objects: GET/SET latency and CPU per
    /// request at 100 B, 4 KiB and 64 KiB, memory per stored object, hit ratio and evictions
    /// at a memory limit under Zipf; Markdown report, raw JSON and charts.
    Cache(Box<lab::CacheFlags>),
    /// Audit this host (read-only) against the nine tuning steps, kTLS, io_uring and limits.
    Doctor(lab::DoctorFlags),
    /// Core-to-core latency matrix (CAS ping-pong per CPU pair), CSV and PNG heatmap, and
    /// which CPUs to give the server and the load.
    C2c(lab::C2cFlags),
    /// Bytes and segments of a response (and an HTML page's first view) against the initial
    /// congestion window (10 segments, RFC 6928).
    Firstflight(lab::FirstflightFlags),
    /// HttpArena's profiles on this machine: each one's validation (its checks, with fresh
    /// random inputs) against the demo or a server you started; not entered profiles say why.
    Arena(Box<lab::ArenaFlags>),
}

impl Cli {
    /// Records which `serve` flags were given on the command line (not defaults), so they
    /// override a configuration file.
    pub fn note_explicit(&mut self, matches: &clap::ArgMatches) {
        let explicit = |m: &clap::ArgMatches| -> Vec<String> {
            m.ids()
                .filter(|id| {
                    m.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
                })
                .map(|id| id.as_str().to_string())
                .collect()
        };
        match (&mut self.command, matches.subcommand()) {
            (Some(Command::Serve(args)), Some(("serve", m))) => args.explicit = explicit(m),
            (None, _) => self.serve.explicit = explicit(matches),
            _ => {}
        }
    }
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        None => serve::serve(cli.serve),
        Some(Command::Serve(args)) => serve::serve(*args),
        Some(Command::Load(args)) => load::run(&args.into_options()),
        Some(Command::Lab {
            tool: LabTool::Floor(a),
        }) => lab::floor(&a),
        Some(Command::Lab {
            tool: LabTool::Compare(a),
        }) => linerate_lab::compare::run(&(*a).into()),
        Some(Command::Lab {
            tool: LabTool::Cache(a),
        }) => linerate_lab::cache::run(&(*a).into()),
        Some(Command::Lab {
            tool: LabTool::Doctor(a),
        }) => lab::doctor(a.into()),
        Some(Command::Lab {
            tool: LabTool::C2c(a),
        }) => linerate_lab::c2c::run(&a.into()),
        Some(Command::Lab {
            tool: LabTool::Firstflight(a),
        }) => lab::firstflight(a.into()),
        Some(Command::Lab {
            tool: LabTool::Arena(a),
        }) => lab::arena(*a),
    }
}

/// A clap error as one line: what is wrong, with what clap adds to it (the missing arguments,
/// the possible values, its "a similar argument exists" tip), but not its usage block, which
/// `--help` prints. Clap renders these over several lines; keeping only the first cut off the
/// hint and even the name of a missing argument.
pub fn error_line(e: &clap::Error) -> String {
    // Display is the plain text, without colours.
    let text = e.to_string();
    let mut line = String::new();
    for l in text.lines().map(str::trim) {
        if l.starts_with("Usage:") || l.starts_with("For more information") {
            break;
        }
        if l.is_empty() {
            continue;
        }
        let l = l.strip_prefix("error: ").unwrap_or(l);
        if line.is_empty() {
            line.push_str(l);
        } else if l.starts_with("tip:") {
            line.push_str("; ");
            line.push_str(l);
        } else {
            line.push(' ');
            line.push_str(l);
        }
    }
    if line.is_empty() {
        line.push_str("invalid arguments");
    }
    line.push_str(" (see --help)");
    line
}

/// A parsed CPU-list flag (`0,2-3`). An alias, not `Vec<usize>` written out: clap's derive reads
/// a field spelled `Vec<_>` as a repeated flag, and this is one value.
pub(crate) type CpuList = Vec<usize>;

pub(crate) fn init_tracing(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    // Colour only for a terminal: a log file or pipe gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // A log line that cannot be written is lost, never an error: with internal-error
    // logging on, tracing-subscriber reports a failed write with `eprintln!`, which panics
    // when stderr is a closed pipe, and a panic in the signal thread left SIGTERM unhandled.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(|| LossyStderr)
        .log_internal_errors(false)
        .try_init();
}

/// Standard error for log lines: a write that fails (a closed pipe, a full disk) is dropped.
struct LossyStderr;

impl std::io::Write for LossyStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
