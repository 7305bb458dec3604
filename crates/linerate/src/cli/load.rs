//! `linerate load`: its flags (clap, wrk-compatible where wrk has the option), their mapping onto
//! `linerate_load::LoadOptions`, and the rendering of its report (text, or JSON with `--json`).
#![forbid(unsafe_code)]

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::{Args, Parser};
use linerate_load::{Config, LoadOptions, report, units};
use signal_hook::consts::SIGINT;

/// Generate HTTP/1.1, HTTP/2, HTTP/3 or WebSocket load and report throughput and latency
/// (wrk-style options; h2load's --max-concurrent-streams for HTTP/2 and HTTP/3; --ws for
/// WebSocket echo round trips).
#[derive(Args, Clone, Debug)]
pub struct LoadArgs {
    /// Target URL, http:// or https:// (TLS 1.2/1.3, ALPN http/1.1, or h2 with --http2, or
    /// QUIC with --http3), or ws:// or wss:// (the same as --ws).
    pub url: String,

    /// Worker threads, each with its own event loop and connections [default: one per CPU,
    /// or one per CPU in --cpus].
    #[arg(short = 't', long)]
    pub threads: Option<usize>,

    /// Total connections, spread evenly over the threads (the remainder is not dropped).
    #[arg(short = 'c', long, default_value_t = linerate_load::options::DEFAULT_CONNECTIONS)]
    pub connections: usize,

    /// Run length, e.g. 10s, 500ms, 2m [default: 10s, or until --requests are answered].
    #[arg(short = 'd', long, value_parser = units::duration)]
    pub duration: Option<Duration>,

    /// Extra request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,

    /// A request unanswered for this long counts as a timeout error and its connection is reopened.
    #[arg(long, value_parser = units::duration, default_value = "2s")]
    pub timeout: Duration,

    /// Print the full latency percentile table.
    #[arg(short = 'L', long)]
    pub latency: bool,

    /// Requests in flight per connection (HTTP/1.1 pipelining; no script needed).
    #[arg(short = 'p', long, default_value_t = 1)]
    pub pipeline: usize,

    /// Speak HTTP/2, as h2load does: h2c with prior knowledge for http://, ALPN h2 only for
    /// https:// (a server that does not choose h2 fails the run).
    #[arg(long, conflicts_with = "http3")]
    pub http2: bool,

    /// Speak HTTP/3 over QUIC (https:// URLs only): TLS 1.3 with ALPN h3 only, one UDP
    /// socket per connection; certificates are checked as for https (--cacert, -k).
    #[arg(long)]
    pub http3: bool,

    /// HTTP/2 and HTTP/3: streams in flight per connection (h2load's -m; here -m is
    /// --method), capped by the server's limit (HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS,
    /// QUIC's MAX_STREAMS).
    #[arg(long, visible_alias = "streams", value_name = "N", default_value_t = 1)]
    pub max_concurrent_streams: usize,

    /// Speak WebSocket (RFC 6455): upgrade every connection, then send messages the server
    /// echoes, --pipeline of them in flight per connection; each echo is timed from its
    /// message's send, and its length must be the length sent.
    #[arg(long)]
    pub ws: bool,

    /// --ws: the payload of each message, e.g. 32, 4KiB.
    #[arg(long, value_name = "BYTES", value_parser = units::size, default_value = "32")]
    pub message_size: u64,

    /// --ws: send binary messages (default: text).
    #[arg(long)]
    pub binary: bool,

    /// Request method [default: GET, or POST with --body/--body-file].
    #[arg(short = 'm', long)]
    pub method: Option<String>,

    /// Request body.
    #[arg(short = 'b', long, conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Request body read from a file.
    #[arg(long)]
    pub body_file: Option<PathBuf>,

    /// Files of exact request bytes, assigned round-robin to connections (replaces
    /// --method/--header/--body).
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["method", "headers", "body", "body_file"])]
    pub raw: Vec<PathBuf>,

    /// Open a new connection after this many requests on one (short-lived connection tests).
    #[arg(long)]
    pub reconnect: Option<u64>,

    /// Stop after exactly this many requests have been answered or failed.
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,

    /// Constant total request rate (req/s); latency is then measured from each request's
    /// intended send time.
    #[arg(short = 'R', long)]
    pub rate: Option<f64>,

    /// Load the server this long before measuring (not counted).
    #[arg(short = 'w', long, value_parser = units::duration, default_value = "0s")]
    pub warmup: Duration,

    /// Repeat the measurement this many times; each run and the median are reported.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,

    /// Pin threads to these CPUs, round-robin, e.g. `1` or `0,2-3`.
    #[arg(long, value_parser = units::cpus)]
    pub cpus: Option<super::CpuList>,

    /// After events, poll this long without sleeping before blocking (e.g. 1ms). Keeps the
    /// thread awake so the server does not pay to wake it per response; the empty polls are
    /// reported apart and left out of CPU per request and busy %. 0 = off.
    #[arg(long, value_parser = units::duration, default_value = "0s")]
    pub spin: Duration,

    /// https: do not verify the server's certificate (self-signed test servers), like curl -k.
    #[arg(short = 'k', long, conflicts_with = "cacert")]
    pub insecure: bool,

    /// https: trust only the CA certificates in this PEM file [default: the webpki roots].
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// https: offer only this TLS version.
    #[arg(long, value_name = "VERSION", value_parser = ["1.2", "1.3"])]
    pub tls_version: Option<String>,

    /// https: offer only this cipher suite (IANA name, e.g. TLS13_CHACHA20_POLY1305_SHA256).
    #[arg(long, value_name = "SUITE")]
    pub tls_cipher: Option<String>,

    /// https: send a TLS 1.3 KeyUpdate (update requested) before every Nth send on each
    /// connection, to exercise the server's key updates.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub tls_key_update: Option<u32>,

    /// https: never resume a TLS session, so every new connection makes a full handshake
    /// (with --reconnect, to measure a server's full handshakes rather than resumptions).
    #[arg(long)]
    pub tls_no_resume: bool,

    /// Print the result as JSON on stdout (and nothing else there).
    #[arg(long)]
    pub json: bool,

    /// Exit 0 even when responses are not 2xx/3xx (they are still counted and reported). By
    /// default any such response makes the exit status 1, as does a run with no answer or a
    /// target that goes away mid-run; Ctrl-C prints what was measured and exits 130.
    #[arg(long)]
    pub allow_status_errors: bool,

    /// Unary gRPC calls, as h2load -m N does with a prebuilt frame but checked: implies
    /// --http2; POST with content-type: application/grpc and te: trailers; the request is
    /// --body-file (one length-prefixed message, e.g. HttpArena's GetSum a=1 b=2:
    /// 00 00 00 00 04 08 01 10 02). Each answer must be HTTP 200, application/grpc, with
    /// grpc-status 0 in its trailers (or in a trailers-only answer): others count as gRPC
    /// errors and fail the run like non-2xx answers. Messages received are counted.
    #[arg(long, conflicts_with_all = ["http3", "ws", "raw"])]
    pub grpc: bool,

    /// --grpc: each answer's DATA bytes must be exactly these, in hex (spaces allowed),
    /// e.g. "00 00 00 00 02 08 03" for GetSum's SumReply { result: 3 }.
    #[arg(
        long,
        value_name = "HEX",
        requires = "grpc",
        conflicts_with = "expect_body_file"
    )]
    pub expect_body: Option<String>,

    /// --grpc: each answer's DATA bytes must be exactly this file's.
    #[arg(long, value_name = "FILE", requires = "grpc")]
    pub expect_body_file: Option<PathBuf>,
}

impl LoadArgs {
    /// The options these flags ask for.
    pub fn into_options(self) -> LoadOptions {
        LoadOptions {
            url: self.url,
            threads: self.threads,
            connections: self.connections,
            duration: self.duration,
            headers: self.headers,
            timeout: self.timeout,
            latency: self.latency,
            pipeline: self.pipeline,
            http2: self.http2,
            http3: self.http3,
            streams: self.max_concurrent_streams,
            ws: self.ws,
            message_size: usize::try_from(self.message_size).unwrap_or(usize::MAX),
            binary: self.binary,
            method: self.method,
            body: self.body,
            body_file: self.body_file,
            raw: self.raw,
            reconnect: self.reconnect,
            requests: self.requests,
            rate: self.rate,
            warmup: self.warmup,
            runs: self.runs,
            cpus: self.cpus.unwrap_or_default(),
            spin: self.spin,
            insecure: self.insecure,
            cacert: self.cacert,
            tls_version: self.tls_version.map(|v| match v.as_str() {
                "1.2" => linerate_load::options::TlsVersion::V12,
                _ => linerate_load::options::TlsVersion::V13,
            }),
            tls_cipher: self.tls_cipher,
            tls_key_update: self.tls_key_update,
            tls_no_resume: self.tls_no_resume,
            json: self.json,
            allow_status_errors: self.allow_status_errors,
            grpc: self.grpc,
            expect_body: self.expect_body,
            expect_body_file: self.expect_body_file,
        }
    }
}

/// `linerate load`'s flags (without the command name) as options: how tests build a run the way
/// a user would type it.
pub fn options_from<I, T>(flags: I) -> Result<LoadOptions, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    #[derive(Parser)]
    #[command(name = "load")]
    struct Load {
        #[command(flatten)]
        args: LoadArgs,
    }
    let argv =
        std::iter::once(std::ffi::OsString::from("load")).chain(flags.into_iter().map(Into::into));
    Load::try_parse_from(argv).map(|l| l.args.into_options())
}

/// `linerate load`: checks the options, runs, and prints each run (and the median of several),
/// or the whole report as JSON, then the verdict line (`report::verdict`), whose exit status it
/// returns. A run cut short (Ctrl-C, the target gone) is printed too, marked interrupted.
pub fn run(options: &LoadOptions) -> anyhow::Result<ExitCode> {
    let cfg = Config::from_options(options)?;
    linerate_load::engine::preflight(&cfg)?;
    let setup = report::setup(&cfg);
    let nouns = report::Nouns::of(&setup);
    let mut stdout = std::io::stdout();
    if !cfg.json {
        write!(stdout, "{}", report::header_text(&setup))?;
        stdout.flush()?;
    }
    // Ctrl-C ends the run in progress and reports it, as wrk does; a second one kills.
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register_conditional_shutdown(SIGINT, 1, stop.clone())?;
    signal_hook::flag::register(SIGINT, stop.clone())?;
    let report = linerate_load::measure_each(&cfg, &stop, |i, run| {
        if !cfg.json {
            let text = report::run_text(run, i, cfg.runs, cfg.latency_table, nouns);
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
    })?;
    let verdict = report::verdict(&report, cfg.allow_status_errors);
    if cfg.json {
        serde_json::to_writer_pretty(&mut stdout, &report)?;
        writeln!(stdout)?;
        // stdout holds the JSON only; the verdict goes beside it.
        if verdict.exit != 0 {
            eprintln!("{}", verdict.line);
        }
    } else {
        if report.runs.len() > 1 {
            write!(stdout, "{}", report::median_text(&report.median, nouns))?;
        }
        writeln!(stdout, "{}", verdict.line)?;
    }
    stdout.flush()?;
    Ok(ExitCode::from(verdict.exit))
}
