//! Command-line definitions and their mapping onto the library crates' configurations.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use linerate_server::{Config, LogTarget, Server, config as defaults};

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

#[derive(Args, Clone)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = defaults::DEFAULT_ADDR)]
    addr: SocketAddr,
    /// Number of workers (default: one per CPU in --cpus).
    #[arg(long)]
    workers: Option<usize>,
    /// CPUs to pin workers to, e.g. `0,2-3` (default: every CPU this process may use).
    #[arg(long, value_parser = parse_cpu_list)]
    cpus: Option<CpuList>,
    /// Do not pin workers to CPUs.
    #[arg(long)]
    no_pin: bool,
    /// Do not attach the CPU-steering cBPF program to the SO_REUSEPORT group.
    #[arg(long)]
    no_steering: bool,
    /// Never compress responses (default: gzip/br for JSON and text when the client asks).
    #[arg(long)]
    no_compression: bool,
    /// COMPRESS_MIN_BYTES: smallest in-memory body compressed on the fly.
    #[arg(long, default_value_t = defaults::COMPRESS_MIN_BYTES)]
    compress_min_bytes: usize,
    /// MAX_HEAD_BYTES: largest request head; a longer request line is 414, a larger head 431.
    #[arg(long, default_value_t = linerate_http1::MAX_HEAD_BYTES)]
    max_head_bytes: usize,
    /// MAX_HEADERS: most header fields per request (431 beyond).
    #[arg(long, default_value_t = linerate_http1::MAX_HEADERS)]
    max_headers: usize,
    /// MAX_BODY_BYTES: largest body for buffering handlers (413 beyond).
    #[arg(long, default_value_t = defaults::MAX_BODY_BYTES)]
    max_body_bytes: u64,
    /// MAX_STREAM_BODY_BYTES: largest body for streaming handlers (413 beyond).
    #[arg(long, default_value_t = defaults::MAX_STREAM_BODY_BYTES)]
    max_stream_body_bytes: u64,
    /// HEADER_TIMEOUT: from a request's first byte to the end of its head (408 after), e.g. 10s.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    header_timeout: Duration,
    /// BODY_TIMEOUT: longest gap between reads of a request body (408 after).
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    body_timeout: Duration,
    /// KEEPALIVE_TIMEOUT: how long an idle keep-alive connection stays open.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    keepalive_timeout: Duration,
    /// SEND_TIMEOUT: longest wait for a client to read a response.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    send_timeout: Duration,
    /// MAX_REQUESTS_PER_CONN: requests per connection before it closes (default: unlimited).
    #[arg(long)]
    max_requests_per_conn: Option<u64>,
    /// DRAIN_TIMEOUT: on SIGTERM/SIGINT, how long in-flight requests may take.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    drain_timeout: Duration,
    /// Write an nginx `combined` access log to this file (`-` for stdout). Off by default.
    #[arg(long)]
    access_log: Option<PathBuf>,
    /// Serve static files from this directory (GET/HEAD, sendfile, ranges, conditional
    /// requests, precompressed .br/.gz siblings); routes take precedence.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Path prefix the --root directory is served under, e.g. /static.
    #[arg(long, default_value = "/", value_name = "PREFIX")]
    root_prefix: String,
    /// Log level for errors and events (overridden by RUST_LOG): error, warn, info, debug, trace.
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Also serve HTTPS on this port (same IP as --addr); needs --tls-cert and --tls-key.
    #[arg(long, value_name = "PORT")]
    tls_port: Option<u16>,
    /// PEM certificate chain for HTTPS, leaf first.
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for HTTPS (PKCS#8, PKCS#1 or SEC1), matching --tls-cert.
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// Keep TLS encryption in user space even where the kernel offers kTLS.
    #[arg(long)]
    no_ktls: bool,
}

#[derive(Args)]
struct FloorArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Canned response to send.
    #[arg(long, value_enum, default_value_t = FloorBody::Json)]
    response: FloorBody,
    /// Pin the thread to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
}

#[derive(Clone, Copy, ValueEnum)]
enum FloorBody {
    Json,
    Plaintext,
}

#[derive(Clone, Debug)]
struct CpuList(Vec<usize>);

/// `0,2-3` → [0, 2, 3].
fn parse_cpu_list(s: &str) -> Result<CpuList, String> {
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("invalid CPU list {s:?} (expected e.g. 0,2-3)");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    if cpus.is_empty() {
        return Err(format!("empty CPU list {s:?}"));
    }
    Ok(CpuList(cpus))
}

/// `10s`, `500ms`, `2m`, or plain seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?} (expected e.g. 10s, 500ms, 2m)");
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((s, "s"), |i| s.split_at(i));
    let n: f64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| bad())
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        None => serve(cli.serve),
        Some(Command::Serve(args)) => serve(args),
        Some(Command::Load(args)) => linerate_load::run(args),
        Some(Command::Lab {
            tool: LabTool::Floor(a),
        }) => {
            init_tracing("info");
            linerate_lab::floor::run(&linerate_lab::floor::FloorConfig {
                addr: a.addr,
                response: match a.response {
                    FloorBody::Json => linerate_lab::floor::FloorResponse::Json,
                    FloorBody::Plaintext => linerate_lab::floor::FloorResponse::Plaintext,
                },
                cpu: a.cpu,
            })?;
            Ok(ExitCode::SUCCESS)
        }
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

fn init_tracing(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn serve(a: ServeArgs) -> anyhow::Result<ExitCode> {
    if !["error", "warn", "info", "debug", "trace", "off"].contains(&a.log_level.as_str()) {
        bail!(
            "invalid --log-level {:?} (expected error, warn, info, debug or trace)",
            a.log_level
        );
    }
    init_tracing(&a.log_level);
    if a.workers == Some(0) {
        bail!("--workers must be at least 1");
    }
    if !a.root_prefix.starts_with('/') {
        bail!(
            "--root-prefix must start with '/' (got {:?})",
            a.root_prefix
        );
    }
    let tls = tls_config(&a)?;
    let files = a.root.map(|root| linerate_server::config::FilesMount {
        prefix: a.root_prefix.trim_end_matches('/').to_string(),
        root,
    });
    let config = Config {
        addr: a.addr,
        files,
        tls,
        cpus: a.cpus.map(|c| c.0).unwrap_or_default(),
        workers: a.workers.unwrap_or(0),
        pin: !a.no_pin,
        steering: !a.no_steering,
        limits: linerate_http1::Limits {
            max_head_bytes: a.max_head_bytes,
            max_headers: a.max_headers,
            ..Default::default()
        },
        max_body_bytes: a.max_body_bytes,
        max_stream_body_bytes: a.max_stream_body_bytes,
        header_timeout: a.header_timeout,
        body_timeout: a.body_timeout,
        keepalive_timeout: a.keepalive_timeout,
        send_timeout: a.send_timeout,
        max_requests_per_conn: a
            .max_requests_per_conn
            .unwrap_or(defaults::MAX_REQUESTS_PER_CONN),
        drain_timeout: a.drain_timeout,
        compression: linerate_server::config::Compression {
            enabled: !a.no_compression,
            min_bytes: a.compress_min_bytes,
            ..Default::default()
        },
        access_log: a.access_log.map(|p| {
            if p.as_os_str() == "-" {
                LogTarget::Stdout
            } else {
                LogTarget::File(p)
            }
        }),
        ..Config::default()
    };
    let allowed = linerate_server::allowed_cpus();
    if let Some(bad) = config.cpus.iter().find(|c| !allowed.contains(c)) {
        bail!("--cpus: CPU {bad} is not available to this process (allowed: {allowed:?})");
    }
    let addr = config.addr;
    let server = Server::bind(config, linerate_server::demo::router())
        .with_context(|| format!("cannot listen on {addr}"))?;
    let url = format!("http://{}", server.local_addr());
    let https = server.tls_addr().map_or(String::new(), |t| {
        let how = if server.ktls() {
            "kernel TLS"
        } else {
            "user-space TLS"
        };
        format!("  HTTPS on https://{t} (TLS 1.3/1.2, {how})\n")
    });
    let banner = format!(
        "linerate serving on {url} ({} worker{}{})\n\
  GET  {url}/json             {{\"message\":\"Hello, World!\"}}\n\
  GET  {url}/plaintext        Hello, World!\n\
  GET  {url}/baseline11?a=13&b=42   55 (POST adds the body's integer)\n\
  GET  {url}/pipeline         ok\n\
  GET  {url}/json/{{count}}?m=M  first count (1-50) dataset items with totals\n\
  POST {url}/upload           number of body bytes received\n\
{https}Stop with Ctrl-C (graceful drain).\n",
        server.workers(),
        if server.workers() == 1 { "" } else { "s" },
        if server.steering() {
            ", CPU steering on"
        } else {
            ""
        }
    );
    // A closed stdout (e.g. piped into `head`) must not stop the server.
    let mut out = std::io::stdout().lock();
    let _ = std::io::Write::write_all(&mut out, banner.as_bytes())
        .and_then(|_| std::io::Write::flush(&mut out));
    drop(out);
    server.run_until_signal().context("server failed")?;
    Ok(ExitCode::SUCCESS)
}

/// The HTTPS settings: all three of --tls-port, --tls-cert and --tls-key, or none. The PEM
/// files are checked here so a mistake names the flag at fault.
fn tls_config(a: &ServeArgs) -> anyhow::Result<Option<linerate_server::TlsConfig>> {
    let (port, cert, key) = match (a.tls_port, &a.tls_cert, &a.tls_key) {
        (None, None, None) => return Ok(None),
        (Some(p), Some(c), Some(k)) => (p, c.clone(), k.clone()),
        _ => bail!("--tls-port, --tls-cert and --tls-key go together (give all three)"),
    };
    let tls = linerate_server::TlsConfig {
        addr: SocketAddr::new(a.addr.ip(), port),
        cert,
        key,
        ktls: !a.no_ktls,
    };
    use linerate_server::tls::TlsError;
    match linerate_server::tls::server_config(&tls) {
        Ok(_) => Ok(Some(tls)),
        Err(TlsError::Cert { path, why }) => bail!("--tls-cert {}: {why}", path.display()),
        Err(TlsError::Key { path, why }) => bail!("--tls-key {}: {why}", path.display()),
        Err(TlsError::KeyMismatch { cert, key }) => bail!(
            "--tls-key {} does not match --tls-cert {}",
            key.display(),
            cert.display()
        ),
        Err(e) => bail!("--tls-cert/--tls-key: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpu_list("0,2-3").unwrap().0, vec![0, 2, 3]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("3 parsecs").is_err());
    }
}
