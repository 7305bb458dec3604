//! `linerate serve` (the default command): its flags and the server they configure.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use linerate_server::{Config, LogTarget, Server, config as defaults};

use super::init_tracing;
use linerate_load::units;

#[derive(Args, Clone)]
pub(crate) struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = defaults::DEFAULT_ADDR)]
    addr: SocketAddr,
    /// Number of workers (default: one per CPU in --cpus).
    #[arg(long)]
    workers: Option<usize>,
    /// CPUs to pin workers to, e.g. `0,2-3` (default: every CPU this process may use).
    #[arg(long, value_parser = units::cpus)]
    cpus: Option<super::CpuList>,
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
    #[arg(long, value_parser = units::duration, default_value = "10s")]
    header_timeout: Duration,
    /// BODY_TIMEOUT: longest gap between reads of a request body (408 after).
    #[arg(long, value_parser = units::duration, default_value = "30s")]
    body_timeout: Duration,
    /// KEEPALIVE_TIMEOUT: how long an idle keep-alive connection stays open.
    #[arg(long, value_parser = units::duration, default_value = "60s")]
    keepalive_timeout: Duration,
    /// SEND_TIMEOUT: longest wait for a client to read a response.
    #[arg(long, value_parser = units::duration, default_value = "30s")]
    send_timeout: Duration,
    /// MAX_REQUESTS_PER_CONN: requests per connection before it closes (default: unlimited).
    #[arg(long)]
    max_requests_per_conn: Option<u64>,
    /// DRAIN_TIMEOUT: on SIGTERM/SIGINT, how long in-flight requests may take.
    #[arg(long, value_parser = units::duration, default_value = "10s")]
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
    /// Bytes sent under one TLS 1.3 key before the server updates it (KeyUpdate), e.g. 1MiB;
    /// in the kernel too where it can take new keys, else the connection ends there.
    #[arg(long, value_name = "SIZE", value_parser = units::size,
          default_value_t = linerate_server::tls::TLS_KEY_UPDATE_BYTES)]
    tls_key_update: u64,
}

pub(crate) fn serve(a: ServeArgs) -> anyhow::Result<ExitCode> {
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
        cpus: a.cpus.unwrap_or_default(),
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
    let server = Server::bind(config, crate::demo::router())
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
        key_update_bytes: a.tls_key_update,
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
