//! `linerate serve` (the default command): its flags and the server they configure.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use linerate_server::access_log::LogFormat;
use linerate_server::{Config, LogTarget, Server, config as defaults};

use super::init_tracing;
use linerate_load::units;

#[derive(Args, Clone)]
pub(crate) struct ServeArgs {
    /// Read listeners, sites, limits and logs from this TOML file (see docs/config.md); flags
    /// given too override what it says.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Check this configuration file and exit: a summary when it is good, one line
    /// FILE:LINE:COLUMN naming the mistake when not.
    #[arg(long, value_name = "FILE")]
    check_config: Option<PathBuf>,
    /// The ids of the flags given on the command line (set by `Cli::note_explicit`).
    #[arg(skip)]
    pub(crate) explicit: Vec<String>,
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
    /// The workers' I/O: `epoll` (readiness, a recv and a send per exchange) or `uring`
    /// (io_uring completions: one io_uring_enter per turn for every connection's sends and
    /// receives; a worker whose kernel refuses a ring runs on epoll).
    #[arg(long, value_enum, default_value = "epoll", value_name = "BACKEND")]
    io: IoBackend,
    /// Never compress responses (default: gzip/br for JSON and text when the client asks).
    #[arg(long)]
    no_compression: bool,
    /// COMPRESS_MIN_BYTES: smallest in-memory body compressed on the fly (a size: 1KiB, 1024).
    #[arg(long, value_name = "SIZE", value_parser = units::size,
          default_value_t = defaults::COMPRESS_MIN_BYTES as u64)]
    compress_min_bytes: u64,
    /// MAX_HEAD_BYTES: largest request head; a longer request line is 414, a larger head 431
    /// (a size: 16KiB, 16384).
    #[arg(long, value_name = "SIZE", value_parser = units::size,
          default_value_t = linerate_http1::MAX_HEAD_BYTES as u64)]
    max_head_bytes: u64,
    /// MAX_HEADERS: most header fields per request (431 beyond).
    #[arg(long, default_value_t = linerate_http1::MAX_HEADERS)]
    max_headers: usize,
    /// MAX_BODY_BYTES: largest body for buffering handlers (413 beyond; a size: 1MiB).
    #[arg(long, value_name = "SIZE", value_parser = units::size,
          default_value_t = defaults::MAX_BODY_BYTES)]
    max_body_bytes: u64,
    /// MAX_STREAM_BODY_BYTES: largest body for streaming handlers (413 beyond; a size: 1GiB).
    #[arg(long, value_name = "SIZE", value_parser = units::size,
          default_value_t = defaults::MAX_STREAM_BODY_BYTES)]
    max_stream_body_bytes: u64,
    /// HEADER_TIMEOUT: from a request's first byte to the end of its head (408 after), e.g. 10s.
    #[arg(long, value_parser = units::timeout, default_value = "10s")]
    header_timeout: Duration,
    /// BODY_TIMEOUT: longest gap between reads of a request body (408 after).
    #[arg(long, value_parser = units::timeout, default_value = "30s")]
    body_timeout: Duration,
    /// MIN_BODY_RATE: slowest average a request body may arrive at (bytes/s, e.g. 1KiB); it
    /// must be whole by BODY_TIMEOUT after it starts plus a second per MIN_BODY_RATE bytes
    /// (408 after). 0 turns the minimum off.
    #[arg(long, value_name = "SIZE", value_parser = units::size_or_zero,
          default_value_t = defaults::MIN_BODY_RATE)]
    min_body_rate: u64,
    /// KEEPALIVE_TIMEOUT: how long an idle keep-alive connection stays open.
    #[arg(long, value_parser = units::timeout, default_value = "60s")]
    keepalive_timeout: Duration,
    /// SEND_TIMEOUT: longest wait for a client to read a response; then the connection is
    /// reset, so its unsent data does not stay queued in the kernel.
    #[arg(long, value_parser = units::timeout, default_value = "30s")]
    send_timeout: Duration,
    /// MIN_SEND_RATE: slowest average a response that waits on its client may be read at
    /// (bytes/s, e.g. 1KiB); it must be out by SEND_TIMEOUT after the wait starts plus a
    /// second per MIN_SEND_RATE bytes sent since (then the connection is reset). 0 turns the
    /// minimum off.
    #[arg(long, value_name = "SIZE", value_parser = units::size_or_zero,
          default_value_t = defaults::MIN_SEND_RATE)]
    min_send_rate: u64,
    /// MAX_UNSENT_BYTES: most bytes a TCP connection leaves unsent in the kernel
    /// (TCP_NOTSENT_LOWAT), so clients that do not read cannot fill the host's TCP memory.
    /// 0: the kernel's default (no limit).
    #[arg(long, value_name = "SIZE", value_parser = units::size_or_zero,
          default_value_t = defaults::MAX_UNSENT_BYTES)]
    max_unsent_bytes: u64,
    /// MAX_REQUESTS_PER_CONN: requests per connection before it closes (default: unlimited).
    #[arg(long)]
    max_requests_per_conn: Option<u64>,
    /// Most connections one client address may have open at once, over every listener and
    /// worker (0: no limit); the next is closed before a byte is read. Default:
    /// MAX_CONNS_PER_CLIENT (256), loopback clients not counted; a value given here counts
    /// every address.
    #[arg(long, value_name = "N")]
    max_conns_per_client: Option<u32>,
    /// MAX_DEFERRED_PER_WORKER: requests one worker may have waiting on a deferred or async
    /// handler at once (the demo's `/delay/{ms}`, a database query); beyond, 503. HttpArena's
    /// async profile holds 32,000 connections waiting: give at least that divided by the workers.
    #[arg(long, value_name = "N", default_value_t = defaults::MAX_DEFERRED_PER_WORKER)]
    max_deferred_per_worker: usize,
    /// DRAIN_TIMEOUT: on SIGTERM/SIGINT, how long in-flight requests may take (0: exit
    /// without waiting).
    #[arg(long, value_parser = units::duration, default_value = "10s")]
    drain_timeout: Duration,
    /// SHUTDOWN_DELAY: on SIGTERM/SIGINT, how long `/healthz` answers 503 while the server
    /// still accepts and serves (a balancer moves traffic away meanwhile), before the drain.
    /// 0: drain at once.
    #[arg(long, value_parser = units::duration, default_value = "0s")]
    shutdown_delay: Duration,
    /// Offer the listening sockets to a binary upgrade's new process on this Unix socket
    /// (mode 0600; see --takeover).
    #[arg(long, value_name = "PATH")]
    upgrade_socket: Option<PathBuf>,
    /// Take the listening sockets over from the server offering them on this upgrade socket
    /// (its --upgrade-socket), serve them, then have that server stop accepting and drain.
    #[arg(long, value_name = "PATH")]
    takeover: Option<PathBuf>,
    /// Admin listener for `/metrics` (Prometheus text format) and `/healthz`, e.g.
    /// 127.0.0.1:9090. Off by default; never served on a site's listener.
    #[arg(long, value_name = "ADDR")]
    admin: Option<SocketAddr>,
    /// Access log line format: `combined` (nginx's, then the request time in µs), `json`, or
    /// a template of nginx-named fields, e.g. '$remote_addr "$request" $status $request_time'
    /// (every field: docs/config.md).
    #[arg(long, value_name = "FORMAT", value_parser = log_format, default_value = "combined")]
    access_log_format: LogFormat,
    /// Write an nginx `combined` access log to this file (`-` for stdout). Off by default.
    #[arg(long)]
    access_log: Option<PathBuf>,
    /// Serve static files from this directory (GET/HEAD, sendfile, ranges, conditional
    /// requests, precompressed .br/.gz siblings). Alone, it is the whole site: the demo's
    /// routes are mounted too only with `--app demo` (and then take precedence).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Proxy a path prefix to an HTTP/1.1 upstream: `/api=http://127.0.0.1:9000` (the path
    /// goes as it came), `/api=http://127.0.0.1:9000/` (the prefix is replaced by the URL's
    /// path, as nginx's proxy_pass), `/=unix:/run/app.sock`; or to an HTTP/2 one by prior
    /// knowledge (gRPC): `/=h2c://127.0.0.1:50051`, or over TLS with ALPN `h2`:
    /// `/=h2://api.internal:443` (verified against the system's roots, or --proxy-tls-ca).
    /// Repeatable; proxied prefixes come before the app's routes and the files.
    #[arg(long, value_name = "PREFIX=URL", value_parser = proxy_arg)]
    proxy: Vec<ProxyArg>,
    /// --proxy upstreams: the most time to establish a connection (then the next try, or
    /// 502 and the server counted as failing).
    #[arg(long, value_parser = units::timeout, value_name = "DURATION", default_value = "5s")]
    proxy_connect_timeout: Duration,
    /// --proxy upstreams: the most time a request waits to be sent, for the first byte of
    /// the answer (then 504), and between two reads of it (then the client is cut off); also
    /// how long an upgraded (WebSocket) tunnel may pass no byte.
    #[arg(long, value_parser = units::timeout, value_name = "DURATION", default_value = "60s")]
    proxy_timeout: Duration,
    /// --proxy upstreams: idle keep-alive connections each worker keeps per server (more
    /// than the exchanges in flight at once is never used; fewer closes and reopens
    /// connections under load).
    #[arg(long, value_name = "N", default_value_t = linerate_server::config::UPSTREAM_KEEPALIVE)]
    proxy_keepalive: usize,
    /// --proxy upstreams: connections each worker opens per server at most (0: no limit);
    /// requests over it wait for one to come free. Behind multiplexed (HTTP/2) clients, a
    /// bound near the upstream's own concurrency is the cheapest setting.
    #[arg(long, value_name = "N", default_value_t = linerate_server::config::UPSTREAM_MAX_CONNS)]
    proxy_max_conns: usize,
    /// --proxy `h2://` upstreams: verify their certificates against the CA certificates in
    /// this PEM file instead of the system's roots (a private CA, or a self-signed upstream).
    #[arg(long, value_name = "FILE")]
    proxy_tls_ca: Option<PathBuf>,
    /// --proxy mounts to HTTP/2 upstreams (h2c://, h2://) translate gRPC-Web: a browser's
    /// application/grpc-web(-text) call goes up as gRPC, its answer comes back as gRPC-Web
    /// (the config file's `grpc_web = true`).
    #[arg(long)]
    proxy_grpc_web: bool,
    /// --proxy mounts read a request's body whole before sending it up (nginx's default, and
    /// ours: a slow uploader holds no upstream connection, and the upstream gets a
    /// Content-Length), for a body that declares at most 1 MiB and is no gRPC call; other
    /// bodies go up as they arrive. Given for clarity only: it is the default.
    #[arg(long, conflicts_with = "no_proxy_request_buffering")]
    proxy_request_buffering: bool,
    /// --proxy mounts send every request body up as it arrives (caddy's, HAProxy's and
    /// Envoy's way): nothing is held, but a slow uploader holds an upstream connection.
    #[arg(long)]
    no_proxy_request_buffering: bool,
    /// --proxy mounts keep answers in an HTTP cache (RFC 9111) of this much memory, shared by
    /// the workers, e.g. `64MiB` (the config file's `cache = { … }` has the other settings).
    #[arg(long, value_name = "SIZE", value_parser = units::size)]
    proxy_cache: Option<u64>,
    /// --proxy-cache: a second tier every linerate pointed at it shares, behind each one's
    /// memory (`redis://HOST:PORT`, `valkey://HOST:PORT`, `memcached://HOST:PORT`); a tier
    /// that is down or slow is a miss, never a failed request.
    #[arg(long, value_name = "URL", requires = "proxy_cache")]
    proxy_cache_tier: Option<String>,
    /// --proxy-cache: what a request's `Cache-Control: no-cache` / `max-age` and `Pragma:
    /// no-cache` do: `ignore` (the default, as nginx and Varnish: they do not bypass the
    /// cache) or `revalidate` (RFC 9111 §5.2.1: validate first, collapsed per key).
    #[arg(long, value_name = "HOW", value_parser = ["ignore", "revalidate"], requires = "proxy_cache")]
    proxy_cache_client_no_cache: Option<String>,
    /// The application: `demo` (TechEmpower, HttpArena and conformance endpoints) or `none`
    /// (default: demo, or none when --root is given).
    #[arg(long, value_enum)]
    app: Option<AppKind>,
    /// The demo's `/json/{count}` dataset: a JSON array of items (HttpArena's
    /// /data/dataset.json), read and checked at start (default: the compiled-in 50 items).
    #[arg(long, value_name = "FILE")]
    dataset: Option<PathBuf>,
    /// PostgreSQL for the demo's database endpoints (TechEmpower's /db, /queries, /updates,
    /// /fortunes, /cached-queries; HttpArena's /async-db, /crud/items, /api/items, /api/me), e.g.
    /// postgres://user:password@127.0.0.1:5432/db (default: $DATABASE_URL; without either,
    /// those routes are not mounted). `scripts/pg.sh start` makes a seeded one.
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// Connections to the database in all (default: $DATABASE_MAX_CONN, else one per worker
    /// with the worker driver and 4 with the runtime one); queries in flight on one
    /// connection are pipelined.
    #[arg(long, value_name = "N")]
    database_connections: Option<usize>,
    /// Which thread drives the database connections: `runtime`, one set on a thread beside the
    /// workers; `worker`, each worker its share of them (at least one) driven by its own
    /// event loop, so a request never crosses threads.
    #[arg(long, value_enum, default_value = "worker", value_name = "DRIVER")]
    database_driver: DbDriver,
    /// A shared second cache tier behind the demo's /crud/items and /api/* memory caches, shared by every
    /// linerate pointed at it: redis://HOST:PORT (or valkey://) or memcached://HOST:PORT.
    /// It is used from the first request; while it is down or slow its calls are misses
    /// (logged once per outage), never errors. Needs --database-url.
    #[arg(long, value_name = "URL")]
    cache_tier: Option<String>,
    /// How long one call to --cache-tier may take, connecting included, before it counts as
    /// a miss.
    #[arg(long, value_name = "MS", default_value_t = 50)]
    cache_tier_timeout_ms: u64,
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
    /// Also serve cleartext HTTP/2 with prior knowledge (h2c) on this port (same IP as
    /// --addr). That port speaks only HTTP/2.
    #[arg(long, value_name = "PORT")]
    h2c_port: Option<u16>,
    /// --addr speaks only HTTP/1.1. By default a connection there that opens with the HTTP/2
    /// preface is HTTP/2 with prior knowledge (h2c), so one port serves HTTP/1.1 and gRPC
    /// (nginx's `http2 on` on a plain listener); with a configuration file, `h2c_preface` on
    /// a `[[listen]]` says it per listener.
    #[arg(long)]
    no_h2c_preface: bool,
    /// --addr answers every request with a 308 to the same URL over HTTPS, on --tls-port
    /// (443 without it: a TLS terminator in front).
    #[arg(long)]
    redirect_to_https: bool,
    /// Every connection starts with a PROXY protocol header (v1 or v2) from the L4 balancer
    /// in front (HAProxy's send-proxy-v2, an AWS NLB…), naming the client; a connection
    /// without one is closed. With a configuration file: on every one of its listeners.
    #[arg(long)]
    proxy_protocol: bool,
    /// Addresses (CIDR, comma-separated) of the proxies in front whose X-Forwarded-For or
    /// Forwarded names the client, e.g. 10.0.0.0/8,::1.
    #[arg(long, value_name = "CIDRS", value_delimiter = ',', value_parser = trusted_proxy)]
    trusted_proxies: Vec<linerate_server::access::IpRange>,
    /// The field the --trusted-proxies name the client in: X-Forwarded-For, Forwarded or
    /// X-Real-IP.
    #[arg(long, value_name = "FIELD", default_value = "X-Forwarded-For",
          value_parser = linerate_server::realip::RealIpField::parse)]
    real_ip_field: linerate_server::realip::RealIpField,
    /// Offer only HTTP/1.1 in TLS's ALPN (HTTP/2 is offered first by default).
    #[arg(long)]
    no_http2: bool,
    /// Also serve HTTP/3 over QUIC on --tls-port's UDP port (HTTPS answers announce it with
    /// Alt-Svc); with a config file, on every TLS listener.
    #[arg(long)]
    quic: bool,
    /// Keep TLS encryption in user space even where the kernel offers kTLS.
    #[arg(long)]
    no_ktls: bool,
    /// Bytes sent under one TLS 1.3 key before the server updates it (KeyUpdate), e.g. 1MiB;
    /// in the kernel too where it can take new keys, else the connection ends there.
    #[arg(long, value_name = "SIZE", value_parser = units::size,
          default_value_t = linerate_server::tls::TLS_KEY_UPDATE_BYTES)]
    tls_key_update: u64,
}

/// `--access-log-format`: a template is checked here, so a mistake is clap's one line
/// naming the flag.
fn log_format(s: &str) -> Result<LogFormat, String> {
    LogFormat::parse(s).map_err(|e| e.to_string())
}

/// How long a worker waits at start for its own database connections (`--database-driver
/// worker`) before it serves; the ones not open by then keep trying in the background.
const DB_WORKER_START: std::time::Duration = std::time::Duration::from_secs(5);

/// Which thread drives the database connections.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DbDriver {
    Runtime,
    Worker,
}

/// `--io`: the workers' I/O backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum IoBackend {
    Epoll,
    Uring,
}

impl From<IoBackend> for linerate_server::Io {
    fn from(b: IoBackend) -> Self {
        match b {
            IoBackend::Epoll => linerate_server::Io::Epoll,
            IoBackend::Uring => linerate_server::Io::Uring,
        }
    }
}

/// Which application `serve` mounts.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum AppKind {
    /// The demo: TechEmpower, HttpArena and conformance-suite endpoints.
    Demo,
    /// No routes: only the --root site (or 404 everywhere).
    None,
}

pub(crate) fn serve(a: ServeArgs) -> anyhow::Result<ExitCode> {
    if let Some(path) = &a.check_config {
        let f = crate::conf::load(path)?;
        println!("{}: ok ({})", path.display(), summary(&f));
        return Ok(ExitCode::SUCCESS);
    }
    // What `linerate_config_info` names: the file's bytes, else the flags.
    let mut config_hash = (
        super::config_hash::of_flags(std::env::args_os().skip(1)),
        "flags",
    );
    let file = match &a.config {
        Some(path) => {
            for flag in [
                "root",
                "root_prefix",
                "app",
                "proxy",
                "proxy_connect_timeout",
                "proxy_timeout",
                "proxy_keepalive",
                "proxy_max_conns",
                "proxy_tls_ca",
                "proxy_grpc_web",
                "proxy_request_buffering",
                "no_proxy_request_buffering",
                "proxy_cache",
                "proxy_cache_tier",
                "proxy_cache_client_no_cache",
            ] {
                if a.explicit.iter().any(|e| e == flag) {
                    bail!(
                        "--{} cannot be combined with --config (sites come from the file)",
                        flag.replace('_', "-")
                    );
                }
            }
            let text = crate::conf::read(path)?;
            config_hash = (super::config_hash::of_file(&text), "file");
            Some(crate::conf::parse(&text, path)?)
        }
        None => None,
    };
    let explicit = |flag: &str| a.explicit.iter().any(|e| e == flag);
    let file_log_level = file.as_ref().and_then(|f| f.log_level.clone());
    let log_level = match &file {
        Some(f) if !explicit("log_level") => f.log_level.clone().unwrap_or(a.log_level.clone()),
        _ => a.log_level.clone(),
    };
    if !["error", "warn", "info", "debug", "trace", "off"].contains(&log_level.as_str()) {
        bail!(
            "invalid --log-level {:?} (expected error, warn, info, debug or trace)",
            log_level
        );
    }
    init_tracing(&log_level);
    if a.workers == Some(0) {
        bail!("--workers must be at least 1");
    }
    if !a.root_prefix.starts_with('/') {
        bail!(
            "--root-prefix must start with '/' (got {:?})",
            a.root_prefix
        );
    }
    let app = match &file {
        Some(f) if f.demo => AppKind::Demo,
        Some(_) => AppKind::None,
        None => a.app.unwrap_or(if a.root.is_some() {
            AppKind::None
        } else {
            AppKind::Demo
        }),
    };
    let router = match (app, &a.dataset) {
        (AppKind::None, Some(_)) => bail!("--dataset needs the demo app (add --app demo)"),
        (AppKind::None, None) => linerate_server::Router::new(),
        // The gRPC services are added at bind, where a listener speaks HTTP/2.
        (AppKind::Demo, None) => crate::demo::http_routes(crate::demo::builtin_dataset()),
        (AppKind::Demo, Some(path)) => {
            let items = crate::demo::load_dataset(path)
                .map_err(|e| anyhow::anyhow!("invalid --dataset {}: {e}", path.display()))?;
            crate::demo::http_routes(items)
        }
    };
    // The database: its runtime lives as long as the server (it runs the queries).
    let database_url = a
        .database_url
        .clone()
        .or_else(|| std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()));
    let cache_tier = match &a.cache_tier {
        Some(_) if database_url.is_none() => {
            bail!("--cache-tier needs --database-url (the demo's /crud/items uses it)")
        }
        Some(url) => {
            if a.cache_tier_timeout_ms == 0 {
                bail!("--cache-tier-timeout-ms must be at least 1");
            }
            let mut tier = linerate_server::kv::TierConfig::parse(url)?;
            tier.timeout = std::time::Duration::from_millis(a.cache_tier_timeout_ms);
            Some(tier)
        }
        None => None,
    };
    let (router, db_runtime) = match database_url {
        Some(_) if app != AppKind::Demo => {
            bail!("--database-url needs the demo app (its database endpoints use it)")
        }
        Some(url) => {
            let driver = match a.database_driver {
                DbDriver::Runtime => crate::db::Driver::Runtime,
                DbDriver::Worker => crate::db::Driver::Worker,
            };
            let asked = match a.database_connections {
                Some(n) => Some(n),
                None => match std::env::var("DATABASE_MAX_CONN") {
                    Ok(v) => Some(v.parse().map_err(|_| {
                        anyhow::anyhow!("DATABASE_MAX_CONN must be a whole number (got {v:?})")
                    })?),
                    Err(_) => None,
                },
            };
            if asked == Some(0) {
                bail!("--database-connections must be at least 1");
            }
            // Unset: 4 on the runtime; one per worker with the worker driver (0 says so).
            let connections = match (asked, driver) {
                (Some(n), _) => n,
                (None, crate::db::Driver::Runtime) => 4,
                (None, crate::db::Driver::Worker) => 0,
            };
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("linerate-db")
                .enable_all()
                .build()
                .context("cannot start the database runtime")?;
            let db = std::sync::Arc::new(crate::db::Db::connect(
                &url,
                connections,
                driver,
                runtime.handle(),
                cache_tier,
            )?);
            let router = crate::db::mount(router, db.clone());
            (router, Some((runtime, db)))
        }
        None => (router, None),
    };
    // The runtime is held (not used) to the end of this function: it runs the queries.
    let (_db_runtime, db) = match db_runtime {
        Some((r, db)) => (Some(r), Some(db)),
        None => (None, None),
    };
    let flags = flags_config(&a)?;
    let server_files = flags.files.clone();
    let proxied = proxy_targets(&flags);
    let from_file = file.is_some();
    // Tracing: the file's `[tracing]`, then OpenTelemetry's variables for what it leaves out.
    let tracing = file
        .as_ref()
        .map(|f| f.tracing.clone())
        .unwrap_or_default()
        .or(linerate_server::trace::TracingSettings::from_env(|k| {
            std::env::var(k).ok()
        }))
        .build()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let demo_mounted = app == AppKind::Demo;
    let (mut config, user, places) = match file {
        Some(f) => {
            let mut places = f.places;
            if listening_flags(&a.explicit) {
                places.forget_listeners();
            }
            for what in ["cpus", "admin", "access_log"] {
                if explicit(what) {
                    places.forget(what);
                }
            }
            let config = overlay(f.server, flags.clone(), &a.explicit);
            (config, f.user, Some(places))
        }
        None => (flags.clone(), None, None),
    };
    config.tracing = tracing;
    // A start-up error about a part of the file names its FILE:LINE:COLUMN; one about a flag
    // names the flag.
    let start_error = |e: linerate_server::StartError| -> anyhow::Error {
        if let Some(found) = places.as_ref().and_then(|p| p.error_at(e.part, &e)) {
            return found.into();
        }
        match e.part {
            linerate_server::Part::Cpus => anyhow::anyhow!("--cpus: {e}"),
            _ => anyhow::anyhow!("{e}"),
        }
    };
    // SIGHUP: with a file, read it again and apply what can change live (sites,
    // certificates); without one, the certificates.
    let on_hup: Box<dyn Fn(&linerate_server::ControlHandle) + Send> = match &a.config {
        Some(path) => {
            let (path, explicit) = (path.clone(), a.explicit.clone());
            let running = std::sync::Mutex::new(Running {
                config: config.clone(),
                log_level: file_log_level.clone(),
                user: user.clone(),
            });
            Box::new(move |control| {
                let mut running = running.lock().unwrap_or_else(|e| e.into_inner());
                reload_file(
                    &path,
                    &flags,
                    &explicit,
                    &mut running,
                    demo_mounted,
                    control,
                )
            })
        }
        None => Box::new(linerate_server::reload_certificates),
    };
    // Every error names its address or path (listen address, certificate, root, access log),
    // and its place in the file when it came from one.
    let sites = config.sites.clone();
    let h2c_preface = config.h2c_preface && !from_file;
    // gRPC needs HTTP/2: with no listener that speaks it the demo serves none (said below)
    // rather than services no gRPC client could reach (`Server::bind` refuses those).
    let grpc_off = demo_mounted && !config.speaks_http2();
    let router = if demo_mounted && !grpc_off {
        crate::demo::with_grpc(router)
    } else {
        router
    };
    let mut server = match &a.takeover {
        // The old server's sockets first: a start that fails leaves it serving.
        Some(from) => {
            let taken = linerate_server::handoff::Taken::receive(from)?;
            Server::bind_taking_over(config, router, taken).map_err(start_error)?
        }
        None => Server::bind(config, router).map_err(start_error)?,
    };
    if let Some(start) = db
        .as_ref()
        .and_then(|db| crate::db::Db::worker_start(db, server.workers(), DB_WORKER_START))
    {
        server = server.with_worker_start(start);
    }
    if let Some(user) = &user {
        // The keeper keeps the configuration file readable for SIGHUP, beside what the server
        // itself names (certificates, keys, error pages, the access log).
        let keep = linerate_server::privsep::Keep {
            read: a.config.iter().cloned().collect(),
            append: Vec::new(),
        };
        server.drop_privileges(user, keep).map_err(start_error)?;
    }
    {
        let control = server.control();
        let info = control.node_info();
        info.set_build(env!("CARGO_PKG_VERSION"), env!("LINERATE_COMMIT"));
        info.applied(&config_hash.0, config_hash.1);
    }
    server
        .watch_signals_with(on_hup)
        .context("cannot watch signals")?;
    let url = format!("http://{}", server.local_addr());
    let https = server.tls_addr().map_or(String::new(), |t| {
        let how = if server.ktls() {
            "kernel TLS"
        } else {
            "user-space TLS"
        };
        if from_file {
            // Its listeners are listed with the sites.
            format!("  HTTPS: TLS 1.3/1.2, {how}\n")
        } else {
            format!("  HTTPS on https://{t} (TLS 1.3/1.2, {how})\n")
        }
    }) + &server.h2c_addr().map_or(String::new(), |a| {
        format!("  HTTP/2 cleartext (h2c, prior knowledge) on http://{a}\n")
    }) + if h2c_preface {
        "  HTTP/2 with prior knowledge (h2c) too on the same port\n"
    } else {
        ""
    } + &server
        .quic_addrs()
        .iter()
        .map(|a| format!("  HTTP/3 (QUIC) on https://{a} (udp)\n"))
        .collect::<String>();
    let db_line = db
        .as_ref()
        .map(|db| format!("  database: {}\n", db.describe(server.workers())));
    let routes = match app {
        AppKind::Demo if grpc_off => {
            demo_lines(&url, demo_host(&sites), db_line.as_deref()) + GRPC_OFF
        }
        AppKind::Demo => demo_lines(&url, demo_host(&sites), db_line.as_deref()),
        AppKind::None => String::new(),
    };
    let site = if from_file {
        listeners_and_sites(&server, &sites)
    } else {
        files_line(&url, server_files.as_ref()) + &proxy_lines(&url, &proxied)
    };
    let admin = server.admin_addr().map_or(String::new(), |a| {
        format!("  admin on http://{a}/metrics and /healthz\n")
    });
    // With a file, the first listener as configured (it may be a Unix socket or HTTPS).
    let first = match server.listening().first() {
        Some((addr, tls)) if from_file => listener_url(addr, *tls),
        _ => url.clone(),
    };
    let banner = format!(
        "linerate serving on {first} ({} worker{}{})\n{routes}{site}\
{https}{admin}Stop with Ctrl-C (graceful drain).\n",
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
    server.run().context("server failed")?;
    Ok(ExitCode::SUCCESS)
}

/// The banner's line for a demo whose gRPC services are not served: no listener speaks
/// HTTP/2.
const GRPC_OFF: &str = "  gRPC: not served (no listener speaks HTTP/2: leave out --no-h2c-preface, or set \
     h2c_preface = true on a [[listen]])\n";

/// The demo's endpoints as the banner lists them: method, path, what it answers.
const DEMO_ROUTES: &[(&str, &str, &str)] = &[
    ("GET", "/", "this list, as a page (POST / echoes the body)"),
    ("GET", "/json", "{\"message\":\"Hello, World!\"}"),
    ("GET", "/plaintext", "Hello, World!"),
    (
        "GET",
        "/baseline11?a=13&b=42",
        "55 (POST adds the body's integer)",
    ),
    ("GET", "/baseline2?a=13&b=42", "55 (HttpArena over HTTP/2)"),
    ("GET", "/pipeline", "ok"),
    (
        "GET",
        "/json/{count}?m=M",
        "first count (1-50) dataset items with totals",
    ),
    ("POST", "/upload", "number of body bytes received"),
    ("GET", "/delay/37", "37, after 37 ms (HttpArena's async)"),
    (
        "GET",
        "/echo",
        "the request's header fields (/cookie: its cookies; POST over HTTPS: the body)",
    ),
];

/// The database endpoints, listed when a database is configured.
const DB_ROUTES: &[(&str, &str, &str)] = &[
    ("GET", "/db", "a random world row from PostgreSQL"),
    (
        "GET",
        "/queries?queries=N",
        "N rows (1-500); /updates?queries=N changes them",
    ),
    (
        "GET",
        "/fortunes",
        "the fortune table as HTML; /cached-queries?count=N",
    ),
    (
        "GET",
        "/async-db?min=10&max=50&limit=50",
        "items by price (HttpArena)",
    ),
    (
        "GET",
        "/crud/items/{id}",
        "an item (also ?category=&page=&limit=, POST, PUT)",
    ),
    (
        "GET",
        "/api/items/{id}",
        "an item, cached 1 s; POST changes it; /api/me the token's user (HttpArena)",
    ),
];

/// The Host the demo answers on when the main address does not serve it: with a file, the
/// demo is mounted on sites; when the site answering an unknown Host (the default one) is
/// not among them, the first named demo site's first name.
fn demo_host(sites: &[linerate_server::Site]) -> Option<String> {
    if sites.is_empty() {
        return None;
    }
    let default = sites.iter().position(|s| s.default).unwrap_or(0);
    if sites[default].app {
        return None;
    }
    sites
        .iter()
        .find(|s| s.app)
        .and_then(|s| s.names.iter().find(|n| !n.starts_with('*')).cloned())
}

/// The banner's lines for the demo, one column for the URLs and one for what they answer:
/// full URLs on `url`, or, when the demo answers only on another Host, paths under a line
/// saying which Host (and how to reach it with curl).
fn demo_lines(url: &str, host: Option<String>, db: Option<&str>) -> String {
    let routes = DEMO_ROUTES
        .iter()
        .chain(if db.is_some() { DB_ROUTES } else { &[] });
    let (base, indent, mut out) = match &host {
        None => (url, "  ", String::new()),
        Some(h) => (
            "",
            "    ",
            format!("  demo routes for Host {h} (curl -H 'Host: {h}' {url}/json):\n"),
        ),
    };
    let width = routes
        .clone()
        .map(|(_, path, _)| base.len() + path.len())
        .max()
        .unwrap_or(0);
    for (method, path, what) in routes {
        let target = format!("{base}{path}");
        out += &format!("{indent}{method:<4} {target:<width$}  {what}\n");
    }
    if let Some(db) = db {
        out += db;
    }
    out
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
        cert: Some(linerate_server::config::CertPair { cert, key }),
        ktls: !a.no_ktls,
        key_update_bytes: a.tls_key_update,
        http2: !a.no_http2,
        options: Default::default(),
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

/// One `--proxy PREFIX=URL`.
#[derive(Clone, Debug)]
pub(crate) struct ProxyArg {
    prefix: String,
    addr: linerate_server::config::UpstreamAddr,
    rewrite: Option<String>,
    /// `http://` and `unix:` HTTP/1.1, `h2c://` HTTP/2 by prior knowledge, `h2://` HTTP/2
    /// over TLS.
    protocol: linerate_server::config::UpstreamProtocol,
    /// `h2://`: the host as written when it is a name (SNI and the certificate's name).
    server_name: Option<String>,
}

/// Parses `--proxy PREFIX=URL`: the prefix starts with `/` (`/` is everything); the URL is
/// `http://HOST:PORT[/PATH]` (a name is resolved now) or `unix:/PATH`.
fn proxy_arg(s: &str) -> Result<ProxyArg, String> {
    use linerate_server::config::{UpstreamAddr, UpstreamProtocol};
    let (prefix, url) = s
        .split_once('=')
        .ok_or("expected PREFIX=URL, e.g. /api=http://127.0.0.1:9000")?;
    if !prefix.starts_with('/') {
        return Err(format!("the prefix must start with '/' (got {prefix:?})"));
    }
    let prefix = prefix.trim_end_matches('/').to_string();
    if let Some(path) = url.strip_prefix("unix:") {
        if !path.starts_with('/') {
            return Err(format!("unix:{path}: the socket's path must be absolute"));
        }
        return Ok(ProxyArg {
            prefix,
            addr: UpstreamAddr::Unix(path.into()),
            rewrite: None,
            protocol: UpstreamProtocol::Http1,
            server_name: None,
        });
    }
    let (protocol, rest) = [
        ("http://", UpstreamProtocol::Http1),
        ("h2c://", UpstreamProtocol::H2c),
        ("h2://", UpstreamProtocol::H2),
    ]
    .into_iter()
    .find_map(|(scheme, p)| Some((p, url.strip_prefix(scheme)?)))
    .ok_or_else(|| {
        if url.starts_with("https://") {
            format!(
                "{url}: over TLS upstreams speak HTTP/2 (h2://HOST:PORT); HTTP/1.1 goes without \
                 TLS (http://, unix:)"
            )
        } else {
            format!(
                "{url}: expected http://HOST:PORT, h2c://HOST:PORT, h2://HOST:PORT or unix:/PATH"
            )
        }
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], Some(&rest[i..])),
        None => (rest, None),
    };
    if !authority.contains(':') || authority.ends_with(']') {
        return Err(format!("{url}: the upstream needs a port (HOST:PORT)"));
    }
    let addr = std::net::ToSocketAddrs::to_socket_addrs(authority)
        .map_err(|e| format!("{authority}: {e}"))?
        .next()
        .ok_or_else(|| format!("{authority}: no address"))?;
    let host = authority[..authority.rfind(':').unwrap_or(0)].trim_matches(['[', ']']);
    let server_name = (protocol == UpstreamProtocol::H2
        && host.parse::<std::net::IpAddr>().is_err())
    .then(|| host.to_string());
    Ok(ProxyArg {
        prefix,
        addr: UpstreamAddr::Tcp(addr),
        rewrite: path.map(|p| p.trim_end_matches('/').to_string()),
        protocol,
        server_name,
    })
}

/// The proxied prefixes and where they go, for the banner.
fn proxy_targets(config: &Config) -> Vec<(String, String)> {
    config
        .proxies
        .iter()
        .map(|p| {
            let to = config
                .upstreams
                .iter()
                .find(|u| u.name == p.upstream)
                .and_then(|u| u.servers.first())
                .map_or(p.upstream.clone(), |s| s.addr.to_string());
            (p.prefix.clone(), to)
        })
        .collect()
}

/// The banner's lines for the proxied prefixes.
fn proxy_lines(url: &str, targets: &[(String, String)]) -> String {
    targets
        .iter()
        .map(|(prefix, to)| format!("  ANY  {url}{prefix}/           proxied to {to}\n"))
        .collect()
}

/// The banner's line for the static site, if one is mounted.
fn files_line(url: &str, files: Option<&linerate_server::config::FilesMount>) -> String {
    files.map_or(String::new(), |m| {
        format!(
            "  GET  {url}{}/           files from {}\n",
            m.prefix,
            m.root.display()
        )
    })
}

/// The configuration the flags alone describe (every flag, given or default).
fn flags_config(a: &ServeArgs) -> anyhow::Result<Config> {
    use linerate_server::config::UpstreamProtocol;
    let tls = tls_config(a)?;
    if a.quic && tls.is_none() && a.config.is_none() {
        bail!("--quic needs --tls-port, --tls-cert and --tls-key (HTTP/3 runs over TLS 1.3)");
    }
    let files = a
        .root
        .clone()
        .map(|root| linerate_server::config::FilesMount {
            prefix: a.root_prefix.trim_end_matches('/').to_string(),
            root,
            ..Default::default()
        });
    let mut upstreams: Vec<linerate_server::config::Upstream> = Vec::new();
    let mut proxies = Vec::new();
    for p in &a.proxy {
        // `h2c://`, `h2://` and `http://` to one address are three upstreams.
        let name = match p.protocol {
            UpstreamProtocol::H2c => format!("h2c://{}", p.addr),
            UpstreamProtocol::H2 => format!("h2://{}", p.addr),
            UpstreamProtocol::Http1 => p.addr.to_string(),
        };
        if !upstreams.iter().any(|u| u.name == name) {
            let server = linerate_server::config::UpstreamServer {
                addr: p.addr.clone(),
                weight: 1,
            };
            let mut up = linerate_server::config::Upstream::new(&name, vec![server]);
            up.connect_timeout = a.proxy_connect_timeout;
            up.timeout = a.proxy_timeout;
            up.keepalive = a.proxy_keepalive;
            up.max_conns = a.proxy_max_conns;
            up.protocol = p.protocol;
            if p.protocol == UpstreamProtocol::H2 {
                up.tls_server_name = p.server_name.clone();
                up.tls_ca = a.proxy_tls_ca.clone();
                // A CA file that cannot be read is this flag's error, at start.
                linerate_server::tls::load_upstream_roots(up.tls_ca.as_deref())
                    .map_err(|e| anyhow::anyhow!("--proxy {}: {e}", name))?;
            }
            upstreams.push(up);
        }
        proxies.push(linerate_server::config::ProxyMount {
            grpc_web: a.proxy_grpc_web && p.protocol != UpstreamProtocol::Http1,
            prefix: p.prefix.clone(),
            upstream: name,
            rewrite: p.rewrite.clone(),
            request_buffering: !a.no_proxy_request_buffering,
            cache: a
                .proxy_cache
                .map(|size| linerate_server::config::ProxyCache {
                    size,
                    tier: a.proxy_cache_tier.clone(),
                    client_no_cache_revalidate: a.proxy_cache_client_no_cache.as_deref()
                        == Some("revalidate"),
                    ..Default::default()
                }),
            ..Default::default()
        });
    }
    if a.proxy_tls_ca.is_some() && !upstreams.iter().any(|u| u.protocol == UpstreamProtocol::H2) {
        bail!("--proxy-tls-ca is for upstreams over TLS: it needs an h2:// --proxy");
    }
    if a.proxy_grpc_web && !proxies.iter().any(|m| m.grpc_web) {
        bail!("--proxy-grpc-web translates to gRPC: it needs an HTTP/2 --proxy (h2c:// or h2://)");
    }
    let config = Config {
        addr: a.addr,
        files,
        upstreams,
        proxies,
        tls,
        h2c: a.h2c_port.map(|p| SocketAddr::new(a.addr.ip(), p)),
        h2c_preface: !a.no_h2c_preface,
        quic: a.quic,
        redirect_to_https: a.redirect_to_https,
        proxy_protocol: a.proxy_protocol,
        trusted_proxies: linerate_server::realip::TrustedProxies {
            ranges: a.trusted_proxies.clone(),
            field: a.real_ip_field,
        },
        cpus: a.cpus.clone().unwrap_or_default(),
        workers: a.workers.unwrap_or(0),
        pin: !a.no_pin,
        steering: !a.no_steering,
        io: a.io.into(),
        limits: linerate_http1::Limits {
            max_head_bytes: usize::try_from(a.max_head_bytes).unwrap_or(usize::MAX),
            max_headers: a.max_headers,
            ..Default::default()
        },
        max_body_bytes: a.max_body_bytes,
        max_stream_body_bytes: a.max_stream_body_bytes,
        header_timeout: a.header_timeout,
        body_timeout: a.body_timeout,
        min_body_rate: a.min_body_rate,
        keepalive_timeout: a.keepalive_timeout,
        send_timeout: a.send_timeout,
        min_send_rate: a.min_send_rate,
        max_unsent_bytes: a.max_unsent_bytes,
        max_requests_per_conn: a
            .max_requests_per_conn
            .unwrap_or(defaults::MAX_REQUESTS_PER_CONN),
        max_conns_per_client: a
            .max_conns_per_client
            .unwrap_or(defaults::MAX_CONNS_PER_CLIENT),
        count_loopback_clients: a.max_conns_per_client.is_some(),
        max_deferred_per_worker: a.max_deferred_per_worker,
        drain_timeout: a.drain_timeout,
        shutdown_delay: a.shutdown_delay,
        upgrade_socket: a.upgrade_socket.clone(),
        compression: linerate_server::config::Compression {
            enabled: !a.no_compression,
            min_bytes: usize::try_from(a.compress_min_bytes).unwrap_or(usize::MAX),
            ..Default::default()
        },
        access_log: a.access_log.clone().map(|p| {
            if p.as_os_str() == "-" {
                LogTarget::Stdout
            } else {
                LogTarget::File(p)
            }
        }),
        admin: a.admin,
        access_log_format: a.access_log_format.clone(),
        ..Config::default()
    };
    Ok(config)
}

/// Whether listening flags were given: then they replace the file's listeners.
fn listening_flags(explicit: &[String]) -> bool {
    [
        "addr",
        "tls_port",
        "tls_cert",
        "tls_key",
        "h2c_port",
        "no_h2c_preface",
        "redirect_to_https",
    ]
    .iter()
    .any(|f| explicit.iter().any(|e| e == f))
}

/// A `--trusted-proxies` entry: an address or CIDR range.
fn trusted_proxy(s: &str) -> Result<linerate_server::access::IpRange, String> {
    linerate_server::access::IpRange::parse(s)
}

/// `file` with the flags given on the command line (`explicit`) laid over it.
fn overlay(mut file: Config, flags: Config, explicit: &[String]) -> Config {
    let given = |id: &str| explicit.iter().any(|e| e == id);
    if listening_flags(explicit) {
        // Listening flags replace the file's listeners.
        file.listeners = flags.listen_list();
    }
    for l in &mut file.listeners {
        if given("proxy_protocol") {
            l.proxy_protocol = true;
        }
        if given("quic") && l.tls.is_some() && matches!(l.addr, linerate_server::ListenAddr::Tcp(_))
        {
            l.quic = true;
        }
        if let Some(t) = &mut l.tls {
            if given("no_ktls") {
                t.ktls = false;
            }
            if given("no_http2") {
                t.http2 = false;
            }
            if given("tls_key_update") {
                t.key_update_bytes = flags
                    .tls
                    .as_ref()
                    .map_or(t.key_update_bytes, |f| f.key_update_bytes);
            }
        }
    }
    macro_rules! take {
        ($($id:literal => $($field:ident).+),* $(,)?) => {
            $(if given($id) { file.$($field).+ = flags.$($field).+.clone(); })*
        };
    }
    take! {
        "workers" => workers,
        "cpus" => cpus,
        "no_pin" => pin,
        "no_steering" => steering,
        "io" => io,
        "no_compression" => compression.enabled,
        "compress_min_bytes" => compression.min_bytes,
        "max_head_bytes" => limits.max_head_bytes,
        "max_headers" => limits.max_headers,
        "max_body_bytes" => max_body_bytes,
        "max_stream_body_bytes" => max_stream_body_bytes,
        "header_timeout" => header_timeout,
        "body_timeout" => body_timeout,
        "min_body_rate" => min_body_rate,
        "keepalive_timeout" => keepalive_timeout,
        "send_timeout" => send_timeout,
        "min_send_rate" => min_send_rate,
        "max_unsent_bytes" => max_unsent_bytes,
        "max_requests_per_conn" => max_requests_per_conn,
        "max_conns_per_client" => max_conns_per_client,
        "max_conns_per_client" => count_loopback_clients,
        "max_deferred_per_worker" => max_deferred_per_worker,
        "drain_timeout" => drain_timeout,
        "shutdown_delay" => shutdown_delay,
        "upgrade_socket" => upgrade_socket,
        "access_log" => access_log,
        "access_log_format" => access_log_format,
        "admin" => admin,
        "trusted_proxies" => trusted_proxies.ranges,
        "real_ip_field" => trusted_proxies.field,
    }
    file
}

/// One line on what a good configuration file sets up.
fn summary(f: &crate::conf::FileConfig) -> String {
    let listeners: Vec<String> = f
        .server
        .listeners
        .iter()
        .map(|l| {
            let kind = match (&l.tls, l.quic) {
                (Some(_), true) => " (TLS, HTTP/3)",
                (Some(_), false) => " (TLS)",
                (None, _) => "",
            };
            format!("{}{kind}", l.addr)
        })
        .collect();
    let sites: Vec<String> = f
        .server
        .sites
        .iter()
        .map(|s| {
            let names = if s.names.is_empty() {
                "(no names)".to_string()
            } else {
                s.names.join(" ")
            };
            if s.default {
                format!("{names} [default]")
            } else {
                names
            }
        })
        .collect();
    format!(
        "{} listener{}: {}; {} site{}: {}",
        listeners.len(),
        if listeners.len() == 1 { "" } else { "s" },
        listeners.join(", "),
        sites.len(),
        if sites.len() == 1 { "" } else { "s" },
        sites.join("; ")
    ) + &upstreams_summary(&f.server)
}

/// `; N upstreams: name (servers)…` when the file has any.
fn upstreams_summary(c: &Config) -> String {
    if c.upstreams.is_empty() {
        return String::new();
    }
    let list: Vec<String> = c
        .upstreams
        .iter()
        .map(|u| {
            let servers: Vec<String> = u.servers.iter().map(|s| s.addr.to_string()).collect();
            format!("{} ({})", u.name, servers.join(", "))
        })
        .collect();
    format!(
        "; {} upstream{}: {}",
        list.len(),
        if list.len() == 1 { "" } else { "s" },
        list.join("; ")
    )
}

/// A listener as the banner shows it: `http://IP:PORT`, `https://IP:PORT` or `unix:PATH`.
fn listener_url(addr: &linerate_server::ListenAddr, tls: bool) -> String {
    match (addr, tls) {
        (linerate_server::ListenAddr::Unix(_), _) => addr.to_string(),
        (_, true) => format!("https://{addr}"),
        (_, false) => format!("http://{addr}"),
    }
}

/// The banner's lines for a configuration file: every listener but the first, then the sites.
fn listeners_and_sites(server: &Server, sites: &[linerate_server::Site]) -> String {
    let mut out = String::new();
    let h2c = server.h2c_listeners();
    for (addr, tls) in server.listening().iter().skip(1) {
        let only = if h2c.contains(addr) {
            " (HTTP/2 only: h2c, prior knowledge)"
        } else {
            ""
        };
        out += &format!("  also on {}{only}\n", listener_url(addr, *tls));
    }
    for s in sites {
        let names = if s.names.is_empty() {
            "(any name)".to_string()
        } else {
            s.names.join(" ")
        };
        let roots: Vec<String> = s
            .mounts
            .iter()
            .map(|m| format!("{}/ from {}", m.prefix, m.root.display()))
            .collect();
        out += &format!(
            "  site {names}{}: {}{}\n",
            if s.default { " [default]" } else { "" },
            if s.app { "demo routes; " } else { "" },
            if roots.is_empty() {
                "no files".to_string()
            } else {
                roots.join(", ")
            }
        );
    }
    out
}

/// What a reload compares the file with: the configuration in use (its sites and upstreams
/// as the last good reload left them) and the file's keys that only the binary reads.
struct Running {
    config: Config,
    log_level: Option<String>,
    user: Option<String>,
}

/// SIGHUP with a configuration file: read it again; swap in its sites and certificates (no
/// connection or request is dropped), and the listeners' TLS ticket keys; name each key
/// that changed, as applied now or needing
/// a restart (`cli/reload.rs`). A file with a mistake changes nothing. The CA is asked again
/// about the certificates it issued (renewal information, RFC 9773), so one it revoked is
/// replaced now.
fn reload_file(
    path: &std::path::Path,
    flags: &Config,
    explicit: &[String],
    running: &mut Running,
    demo_mounted: bool,
    control: &linerate_server::ControlHandle,
) {
    let read = crate::conf::read(path).and_then(|text| {
        Ok((
            super::config_hash::of_file(&text),
            crate::conf::parse(&text, path)?,
        ))
    });
    let (hash, f) = match read {
        Ok(read) => read,
        Err(e) => {
            control.node_info().reload_failed();
            tracing::error!("SIGHUP: {e}; the configuration in use stays");
            return;
        }
    };
    let new = overlay(f.server, flags.clone(), explicit);
    let mut changes = super::reload::changes(&running.config, &new);
    if f.log_level != running.log_level && !explicit.iter().any(|e| e == "log_level") {
        changes.restart.push("log_level".to_string());
    }
    if f.user != running.user {
        changes.restart.push("user".to_string());
    }
    // The exporter is started with the process: a changed [tracing] waits for a restart.
    let tracing = f
        .tracing
        .clone()
        .or(linerate_server::trace::TracingSettings::from_env(|k| {
            std::env::var(k).ok()
        }))
        .build()
        .ok()
        .flatten();
    if tracing != running.config.tracing {
        changes.restart.push("[tracing]".to_string());
    }
    if new.request_id_field != running.config.request_id_field {
        changes.restart.push("request_id_header".to_string());
    }
    if f.demo && !demo_mounted {
        changes
            .restart
            .push("app = \"demo\" (not mounted at start)".to_string());
    }
    // `linerate_restart_pending`: what this file changed that the process does not run yet
    // (compared with what it runs, so a change undone clears it).
    control.node_info().set_restart_pending(&changes.restart);
    control.ask_ca_again();
    match control.reload_sites(&new) {
        Ok(()) => {
            tracing::info!(
                sites = new.sites.len(),
                "SIGHUP: sites and certificates reloaded from {}",
                path.display()
            );
            if !changes.now.is_empty() {
                tracing::info!("SIGHUP: applied now: {}", changes.now.join(", "));
            }
            // The file read is the one in use from now on (less what waits for a restart).
            control.node_info().applied(&hash, "file");
            let c = &mut running.config;
            c.sites = new.sites;
            c.upstreams = new.upstreams;
            c.proxies = new.proxies;
            c.compression = new.compression;
            c.max_body_bytes = new.max_body_bytes;
            control.node_info().set_effective(c);
        }
        Err(e) => {
            control.node_info().reload_failed();
            tracing::error!("SIGHUP: sites and certificates not reloaded, those in use stay: {e}")
        }
    }
    // The listeners' ticket key files (their paths are the running configuration's).
    linerate_server::reload_ticket_keys(control);
    if !changes.restart.is_empty() {
        tracing::warn!(
            "SIGHUP: changed in {}, restart to apply (in use until then): {}",
            path.display(),
            changes.restart.join(", ")
        );
    }
}
