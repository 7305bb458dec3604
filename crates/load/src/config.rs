//! A checked run configuration built from `LoadOptions`: URL resolved, files read, requests encoded.
//! Everything that can be wrong with the input is found here, before any connection is made,
//! and reported as one `ConfigError` line.
#![forbid(unsafe_code)]

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::h2;
use crate::h3;
use crate::options::LoadOptions;
use crate::request::{self, RawError, Template};
use crate::tls::{TlsChoice, TlsClient, TlsConfigError, Verify};
use crate::url::{self, Target, UrlError};
use crate::ws::{self, WsRun};

/// Most requests in flight on one connection.
pub const MAX_PIPELINE: usize = 1024;
/// Most concurrent streams on one HTTP/2 connection (`--max-concurrent-streams`).
pub const MAX_STREAMS: usize = 1024;
/// Most connections in total.
pub const MAX_CONNECTIONS: usize = 1_000_000;
/// Most worker threads.
pub const MAX_THREADS: usize = 1024;
/// Most runs for `--runs`.
pub const MAX_RUNS: usize = 1000;
/// Longest `--spin`: past this, spinning is just burning a core.
pub const MAX_SPIN: Duration = Duration::from_secs(1);
/// Run length when neither `--duration` nor `--requests` is given (wrk's default).
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// A complete, checked configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub target: Target,
    /// Set for `https://` targets.
    pub tls: Option<TlsClient>,
    /// Pre-encoded requests; connection i uses template i % len.
    pub templates: Vec<Template>,
    /// Set for `--http2`: connections speak HTTP/2 instead (`pipeline` is then 1).
    pub http2: Option<Http2>,
    /// Set for `--http3`: connections speak HTTP/3 over QUIC instead (`pipeline` is then 1,
    /// and `tls` holds the TLS 1.3 client QUIC uses).
    pub http3: Option<Http3>,
    /// Set for `--ws` (or a `ws[s]://` URL): connections upgrade to WebSocket, and the one
    /// template is the message they send (`pipeline` of them in flight).
    pub ws: Option<Ws>,
    pub threads: usize,
    pub connections: usize,
    pub pipeline: usize,
    /// None: until `requests` are answered.
    pub duration: Option<Duration>,
    pub requests: Option<u64>,
    /// Total requests per second, all threads together.
    pub rate: Option<f64>,
    pub timeout: Duration,
    pub warmup: Duration,
    pub runs: usize,
    /// CPUs to pin threads to, round-robin (empty: no pinning).
    pub cpus: Vec<usize>,
    pub reconnect: Option<u64>,
    /// Poll without sleeping this long after events (0: off).
    pub spin: Duration,
    pub latency_table: bool,
    pub json: bool,
    /// Responses other than 2xx/3xx leave the exit status 0 (see `report::verdict`).
    pub allow_status_errors: bool,
}

/// An HTTP/2 run.
#[derive(Clone, Debug)]
pub struct Http2 {
    /// Streams in flight per connection.
    pub streams: usize,
    /// The requests as HTTP/2 frames, index for index with `Config::templates`. A caller
    /// may set more than there are templates (a mix, as `lab arena`'s production-stack does):
    /// each stream then opens the next in turn by the connection's count of requests sent
    /// (h2load's `-i`); they must share one body, since flow control continues a body from
    /// the connection's template's request.
    pub requests: Vec<h2::Request>,
    /// `--grpc`: what each answer is held to; None for plain HTTP/2.
    pub grpc: Option<h2::grpc::Expect>,
}

/// The requests as `Config::templates`, `Config::http2` and `Http3::requests` hold them.
type Requests = (Vec<Template>, Option<Http2>, Option<Vec<h3::Request>>);

/// An HTTP/3 run.
#[derive(Clone, Debug)]
pub struct Http3 {
    /// Streams in flight per connection (fewer if the server's MAX_STREAMS allows fewer).
    pub streams: usize,
    /// The QUIC client every connection starts from.
    pub quic: h3::Quic,
    /// The requests as HTTP/3 stream bytes, index for index with `Config::templates`.
    pub requests: Vec<h3::Request>,
}

/// A WebSocket run.
#[derive(Clone, Debug)]
pub struct Ws {
    pub run: WsRun,
    /// The masking key of every frame this run sends (random per run).
    pub mask: [u8; 4],
}

/// Why the command line was refused.
#[derive(Debug)]
pub enum ConfigError {
    Url(UrlError),
    Zero(&'static str),
    TooMany(&'static str, usize),
    FewerConnectionsThanThreads {
        connections: usize,
        threads: usize,
    },
    Header(String),
    Method(String),
    Rate(f64),
    SpinTooLong(Duration),
    Read(PathBuf, std::io::Error),
    Raw(PathBuf, RawError),
    Tls(TlsConfigError),
    /// `--insecure` or `--cacert` with an `http://` URL.
    TlsOptionWithoutHttps(&'static str),
    /// Two options that cannot be given together (the flags' names).
    Conflict(&'static str, &'static str),
    /// `--pipeline` above 1 with `--http2`.
    PipelineWithHttp2,
    /// `--max-concurrent-streams` above 1 without `--http2` or `--http3`.
    StreamsWithoutHttp2,
    /// `--pipeline` above 1 with `--http3`.
    PipelineWithHttp3,
    /// `--http3` with an `http://` URL.
    Http3WithoutHttps,
    /// A connection-specific header with `--http2` (its name).
    Http2Header(String),
    /// A connection-specific header with `--http3` (its name).
    Http3Header(String),
    /// `--message-size` or `--binary` without `--ws`.
    MessageWithoutWs(&'static str),
    /// A header the WebSocket upgrade writes itself (its name).
    WsHeader(String),
    /// The random key or mask could not be drawn.
    Random,
    /// `--expect-body` or `--expect-body-file` without `--grpc` (the flag's name).
    ExpectWithoutGrpc(&'static str),
    /// `--expect-body` is not hex.
    ExpectHex(String),
    /// `--grpc` without a request message.
    GrpcWithoutBody,
    /// `--grpc`'s body is not whole length-prefixed messages (where it came from).
    GrpcBody(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Url(e) => e.fmt(f),
            ConfigError::Zero(what) => write!(f, "{what} must be at least 1"),
            ConfigError::TooMany(what, max) => write!(f, "{what} must be at most {max}"),
            ConfigError::FewerConnectionsThanThreads {
                connections,
                threads,
            } => {
                write!(
                    f,
                    "{connections} connections cannot be spread over {threads} threads; use -c >= -t"
                )
            }
            ConfigError::Header(h) => write!(f, "invalid header {h:?} (expected `Name: value`)"),
            ConfigError::Method(m) => write!(f, "invalid method {m:?}"),
            ConfigError::Rate(r) => write!(
                f,
                "invalid rate {r} (expected a positive number of requests per second)"
            ),
            ConfigError::SpinTooLong(d) => {
                write!(f, "--spin {d:?} is too long (at most {MAX_SPIN:?})")
            }
            ConfigError::Read(p, e) => write!(f, "cannot read {}: {e}", p.display()),
            ConfigError::Raw(p, e) => {
                write!(f, "{} is not a raw HTTP/1.1 request: {e}", p.display())
            }
            ConfigError::Tls(e) => e.fmt(f),
            ConfigError::TlsOptionWithoutHttps(opt) => {
                write!(f, "{opt} applies to https:// URLs only")
            }
            ConfigError::Conflict(a, b) => write!(f, "{a} cannot be used with {b}"),
            ConfigError::PipelineWithHttp2 => f.write_str(
                "--pipeline is HTTP/1.1 pipelining; with --http2 use --max-concurrent-streams N \
                 for N requests in flight per connection",
            ),
            ConfigError::StreamsWithoutHttp2 => f.write_str(
                "--max-concurrent-streams applies to HTTP/2 and HTTP/3 only; add --http2 or \
                 --http3, or use --pipeline N for HTTP/1.1",
            ),
            ConfigError::PipelineWithHttp3 => f.write_str(
                "--pipeline is HTTP/1.1 pipelining; with --http3 use --max-concurrent-streams N \
                 for N requests in flight per connection",
            ),
            ConfigError::Http3WithoutHttps => f.write_str(
                "--http3 needs an https:// URL: HTTP/3 runs over QUIC, which is always TLS",
            ),
            ConfigError::MessageWithoutWs(opt) => {
                write!(f, "{opt} applies to WebSocket runs only; add --ws")
            }
            ConfigError::WsHeader(name) => write!(
                f,
                "header {name:?} is part of the WebSocket upgrade, which --ws writes itself"
            ),
            ConfigError::Random => f.write_str("cannot draw random bytes for the WebSocket key"),
            ConfigError::Http2Header(name) => write!(
                f,
                "header {name:?} is connection-specific, which HTTP/2 forbids (RFC 9113 §8.2.2)"
            ),
            ConfigError::ExpectWithoutGrpc(opt) => {
                write!(f, "{opt} applies to gRPC runs only; add --grpc")
            }
            ConfigError::ExpectHex(v) => write!(
                f,
                "--expect-body {v:?} is not hex bytes (e.g. \"00 00 00 00 02 08 03\")"
            ),
            ConfigError::GrpcWithoutBody => f.write_str(
                "--grpc needs the request message: --body-file FILE holding one length-prefixed \
                 frame (flag byte, 4-byte length, the protobuf bytes)",
            ),
            ConfigError::GrpcBody(from) => write!(
                f,
                "{from} is not whole gRPC messages (each a flag byte 0 or 1, a 4-byte \
                 big-endian length, then that many bytes)"
            ),
            ConfigError::Http3Header(name) => write!(
                f,
                "header {name:?} is connection-specific, which HTTP/3 forbids (RFC 9114 §4.2)"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Checks `args`, resolves the URL, reads the files, encodes the requests.
    pub fn from_options(args: &LoadOptions) -> Result<Config, ConfigError> {
        // gRPC runs over HTTP/2 (`--grpc` implies `--http2`).
        if args.grpc && args.http3 {
            return Err(ConfigError::Conflict("--grpc", "--http3"));
        }
        let grpc_args;
        let args = if args.grpc && !args.http2 {
            grpc_args = LoadOptions {
                http2: true,
                ..args.clone()
            };
            &grpc_args
        } else {
            args
        };
        let target = url::parse(&args.url).map_err(ConfigError::Url)?;
        Self::conflicts(args, args.ws || target.websocket)?;
        if args.http3 && !target.https {
            return Err(ConfigError::Http3WithoutHttps);
        }
        let cpus = args.cpus.clone();
        let default_threads = if cpus.is_empty() {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            cpus.len()
        };
        let threads = args
            .threads
            .unwrap_or(default_threads.min(args.connections.max(1)));
        check_range("--threads", threads, MAX_THREADS)?;
        check_range("--connections", args.connections, MAX_CONNECTIONS)?;
        check_range("--pipeline", args.pipeline, MAX_PIPELINE)?;
        check_range("--max-concurrent-streams", args.streams, MAX_STREAMS)?;
        if args.ws || target.websocket {
            check_range("--message-size", args.message_size, ws::MAX_MESSAGE_SIZE)?;
        }
        check_range("--runs", args.runs, MAX_RUNS)?;
        if args.connections < threads {
            return Err(ConfigError::FewerConnectionsThanThreads {
                connections: args.connections,
                threads,
            });
        }
        if args.requests == Some(0) {
            return Err(ConfigError::Zero("--requests"));
        }
        if args.reconnect == Some(0) {
            return Err(ConfigError::Zero("--reconnect"));
        }
        if args.spin > MAX_SPIN {
            return Err(ConfigError::SpinTooLong(args.spin));
        }
        if args.timeout.is_zero() {
            return Err(ConfigError::Zero("--timeout"));
        }
        if args.duration.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::Zero("--duration"));
        }
        if let Some(r) = args.rate
            && !(r.is_finite() && r > 0.0)
        {
            return Err(ConfigError::Rate(r));
        }
        let tls = Self::tls(args, &target)?;
        let (templates, http2, http3, ws) = if args.ws || target.websocket {
            let (t, w) = Self::websocket(args, &target)?;
            (t, None, None, Some(w))
        } else {
            let (t, h2, h3) = Self::templates(args, &target)?;
            let http3 = match (h3, &tls) {
                (Some(requests), Some(tls)) => Some(Http3 {
                    streams: args.streams,
                    quic: h3::Quic::new(tls.config.clone(), &target.host)
                        .map_err(|_| ConfigError::Tls(TlsConfigError::NoQuicInitialSuite))?,
                    requests,
                }),
                _ => None,
            };
            (t, h2, http3, None)
        };
        let duration = match (args.duration, args.requests) {
            (Some(d), _) => Some(d),
            (None, Some(_)) => None,
            (None, None) => Some(DEFAULT_DURATION),
        };
        Ok(Config {
            target,
            tls,
            templates,
            http2,
            http3,
            ws,
            threads,
            connections: args.connections,
            pipeline: args.pipeline,
            duration,
            requests: args.requests,
            rate: args.rate,
            timeout: args.timeout,
            warmup: args.warmup,
            runs: args.runs,
            cpus,
            reconnect: args.reconnect,
            spin: args.spin,
            latency_table: args.latency,
            json: args.json,
            allow_status_errors: args.allow_status_errors,
        })
    }

    /// What the command line's clap definition also refuses, for callers that are not it.
    fn conflicts(args: &LoadOptions, ws: bool) -> Result<(), ConfigError> {
        if args.body.is_some() && args.body_file.is_some() {
            return Err(ConfigError::Conflict("--body", "--body-file"));
        }
        if args.insecure && args.cacert.is_some() {
            return Err(ConfigError::Conflict("--insecure", "--cacert"));
        }
        if args.http2 && args.pipeline > 1 {
            return Err(ConfigError::PipelineWithHttp2);
        }
        if args.http2 && args.http3 {
            return Err(ConfigError::Conflict("--http2", "--http3"));
        }
        if args.http3 && args.pipeline > 1 {
            return Err(ConfigError::PipelineWithHttp3);
        }
        if !args.http2 && !args.http3 && args.streams > 1 {
            return Err(ConfigError::StreamsWithoutHttp2);
        }
        if ws {
            let other = [
                (args.http2, "--http2"),
                (args.http3, "--http3"),
                (!args.raw.is_empty(), "--raw"),
                (args.method.is_some(), "--method"),
                (args.body.is_some(), "--body"),
                (args.body_file.is_some(), "--body-file"),
            ];
            if let Some((_, name)) = other.into_iter().find(|(given, _)| *given) {
                return Err(ConfigError::Conflict("--ws", name));
            }
        } else if args.binary {
            return Err(ConfigError::MessageWithoutWs("--binary"));
        } else if args.message_size != crate::options::DEFAULT_MESSAGE_SIZE {
            return Err(ConfigError::MessageWithoutWs("--message-size"));
        }
        if args.grpc {
            let other = [
                (args.http3, "--http3"),
                (!args.raw.is_empty(), "--raw"),
                (
                    args.method
                        .as_deref()
                        .is_some_and(|m| !m.eq_ignore_ascii_case("POST")),
                    "--method other than POST",
                ),
            ];
            if let Some((_, name)) = other.into_iter().find(|(given, _)| *given) {
                return Err(ConfigError::Conflict("--grpc", name));
            }
        } else if args.expect_body.is_some() {
            return Err(ConfigError::ExpectWithoutGrpc("--expect-body"));
        } else if args.expect_body_file.is_some() {
            return Err(ConfigError::ExpectWithoutGrpc("--expect-body-file"));
        }
        if args.expect_body.is_some() && args.expect_body_file.is_some() {
            return Err(ConfigError::Conflict("--expect-body", "--expect-body-file"));
        }
        if args.http2 && !args.raw.is_empty() {
            // Raw files are HTTP/1.1 bytes.
            return Err(ConfigError::Conflict("--raw", "--http2"));
        }
        if args.http3 && !args.raw.is_empty() {
            return Err(ConfigError::Conflict("--raw", "--http3"));
        }
        if args.http3 {
            // QUIC is TLS 1.3 only (RFC 9001 §4.2), and updates its keys itself (§6), with no
            // TLS KeyUpdate message.
            if args.tls_version == Some(crate::options::TlsVersion::V12) {
                return Err(ConfigError::Conflict("--tls-version 1.2", "--http3"));
            }
            if args.tls_key_update.is_some() {
                return Err(ConfigError::Conflict("--tls-key-update", "--http3"));
            }
        }
        if !args.raw.is_empty() {
            let other = [
                (args.method.is_some(), "--method"),
                (!args.headers.is_empty(), "--header"),
                (args.body.is_some(), "--body"),
                (args.body_file.is_some(), "--body-file"),
            ];
            if let Some((_, name)) = other.into_iter().find(|(given, _)| *given) {
                return Err(ConfigError::Conflict("--raw", name));
            }
        }
        Ok(())
    }

    fn tls(args: &LoadOptions, target: &Target) -> Result<Option<TlsClient>, ConfigError> {
        if !target.https {
            let given = [
                (args.insecure, "--insecure"),
                (args.cacert.is_some(), "--cacert"),
                (args.tls_version.is_some(), "--tls-version"),
                (args.tls_cipher.is_some(), "--tls-cipher"),
                (args.tls_key_update.is_some(), "--tls-key-update"),
                (args.tls_no_resume, "--tls-no-resume"),
            ];
            return match given.into_iter().find(|(g, _)| *g) {
                Some((_, name)) => Err(ConfigError::TlsOptionWithoutHttps(name)),
                None => Ok(None),
            };
        }
        if args.tls_key_update == Some(0) {
            return Err(ConfigError::Zero("--tls-key-update"));
        }
        let verify = match (args.insecure, &args.cacert) {
            (true, _) => Verify::Insecure,
            (false, Some(p)) => Verify::CaFile(p.clone()),
            (false, None) => Verify::WebPkiRoots,
        };
        let choice = TlsChoice {
            http2: args.http2,
            http3: args.http3,
            version: args.tls_version,
            cipher: args.tls_cipher.clone(),
            key_update_every: args.tls_key_update,
            no_resume: args.tls_no_resume,
        };
        TlsClient::new(&target.host, verify, choice)
            .map(Some)
            .map_err(ConfigError::Tls)
    }

    /// The requests: HTTP/1.1 templates, and with `--http2` or `--http3` the same requests
    /// in that protocol.
    fn templates(args: &LoadOptions, target: &Target) -> Result<Requests, ConfigError> {
        if !args.raw.is_empty() {
            let templates = args
                .raw
                .iter()
                .map(|p| {
                    let bytes = std::fs::read(p).map_err(|e| ConfigError::Read(p.clone(), e))?;
                    request::check_raw(&bytes).map_err(|e| ConfigError::Raw(p.clone(), e))?;
                    Ok(Template::new(&bytes, args.pipeline))
                })
                .collect::<Result<_, _>>()?;
            return Ok((templates, None, None));
        }
        let body = match (&args.body, &args.body_file) {
            (Some(b), _) => b.as_bytes().to_vec(),
            (None, Some(p)) => std::fs::read(p).map_err(|e| ConfigError::Read(p.clone(), e))?,
            (None, None) => Vec::new(),
        };
        let has_body = args.body.is_some() || args.body_file.is_some();
        let method = args
            .method
            .clone()
            .unwrap_or_else(|| if has_body { "POST" } else { "GET" }.to_string());
        // RFC 9110 §9.1: method = token.
        if method.is_empty() || !method.bytes().all(is_tchar) {
            return Err(ConfigError::Method(method));
        }
        let mut headers = args
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let grpc = if args.grpc {
            Some(Self::grpc(args, &body, &mut headers)?)
        } else {
            None
        };
        let one = request::encode(&method, &target.path, &target.authority, &headers, &body);
        let http2 = if args.http2 {
            if let Some((name, _)) = headers.iter().find(|(n, v)| !http2_allows(n, v)) {
                return Err(ConfigError::Http2Header(name.clone()));
            }
            let scheme = if target.https { "https" } else { "http" };
            Some(Http2 {
                streams: args.streams,
                requests: vec![h2::Request::new(
                    &method,
                    scheme,
                    &target.authority,
                    &target.path,
                    &headers,
                    &body,
                )],
                grpc,
            })
        } else {
            None
        };
        let http3 = if args.http3 {
            // RFC 9114 §4.2: the same connection-specific fields as HTTP/2 are malformed.
            if let Some((name, _)) = headers.iter().find(|(n, v)| !http2_allows(n, v)) {
                return Err(ConfigError::Http3Header(name.clone()));
            }
            Some(vec![h3::Request::new(
                &method,
                &target.authority,
                &target.path,
                &headers,
                &body,
            )])
        } else {
            None
        };
        Ok((vec![Template::new(&one, args.pipeline)], http2, http3))
    }

    /// `--grpc`: the body checked as gRPC messages, the fields gRPC asks for added where the
    /// user gave none (`content-type: application/grpc`, `te: trailers`), and the answer
    /// expected.
    fn grpc(
        args: &LoadOptions,
        body: &[u8],
        headers: &mut Vec<(String, String)>,
    ) -> Result<h2::grpc::Expect, ConfigError> {
        let from = match &args.body_file {
            Some(p) => p.display().to_string(),
            None => "--body".to_string(),
        };
        if args.body.is_none() && args.body_file.is_none() {
            return Err(ConfigError::GrpcWithoutBody);
        }
        if !whole_messages(body) {
            return Err(ConfigError::GrpcBody(from));
        }
        for (name, value) in [("content-type", "application/grpc"), ("te", "trailers")] {
            if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                headers.push((name.to_string(), value.to_string()));
            }
        }
        let expected = match (&args.expect_body, &args.expect_body_file) {
            (Some(hex), _) => {
                Some(parse_hex(hex).ok_or_else(|| ConfigError::ExpectHex(hex.clone()))?)
            }
            (None, Some(p)) => Some(std::fs::read(p).map_err(|e| ConfigError::Read(p.clone(), e))?),
            (None, None) => None,
        };
        Ok(h2::grpc::Expect {
            body: expected.map(std::sync::Arc::from),
        })
    }

    /// `--ws`: the upgrade request and the message, encoded once with a random key and mask.
    fn websocket(args: &LoadOptions, target: &Target) -> Result<(Vec<Template>, Ws), ConfigError> {
        let headers = args
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        const OWN: [&str; 5] = [
            "host",
            "upgrade",
            "connection",
            "sec-websocket-key",
            "sec-websocket-version",
        ];
        if let Some((name, _)) = headers
            .iter()
            .find(|(n, _)| OWN.iter().any(|o| n.eq_ignore_ascii_case(o)))
        {
            return Err(ConfigError::WsHeader(name.clone()));
        }
        let mut random = [0u8; 20];
        aws_lc_rs::rand::fill(&mut random).map_err(|_| ConfigError::Random)?;
        let nonce: [u8; 16] = random[..16].try_into().expect("16 bytes");
        let mask: [u8; 4] = random[16..].try_into().expect("4 bytes");
        let (run, message) = WsRun::new(
            &target.path,
            &target.authority,
            &headers,
            args.message_size,
            args.binary,
            nonce,
            mask,
        );
        Ok((
            vec![Template::new(&message, args.pipeline)],
            Ws { run, mask },
        ))
    }

    /// Connections of thread `t`: an even share, the first threads taking the remainder.
    pub fn connections_of(&self, t: usize) -> usize {
        self.connections / self.threads + usize::from(t < self.connections % self.threads)
    }

    /// Index of thread `t`'s first connection among all connections (for template round-robin).
    pub fn first_connection_of(&self, t: usize) -> usize {
        (0..t).map(|i| self.connections_of(i)).sum()
    }
}

fn check_range(what: &'static str, v: usize, max: usize) -> Result<(), ConfigError> {
    if v == 0 {
        Err(ConfigError::Zero(what))
    } else if v > max {
        Err(ConfigError::TooMany(what, max))
    } else {
        Ok(())
    }
}

/// RFC 9113 §8.2.2: no connection-specific field in HTTP/2, and `TE` only as `trailers`.
fn http2_allows(name: &str, value: &str) -> bool {
    const CONNECTION_SPECIFIC: [&str; 5] = [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
    ];
    if name.eq_ignore_ascii_case("te") {
        return value.eq_ignore_ascii_case("trailers");
    }
    !CONNECTION_SPECIFIC
        .iter()
        .any(|c| name.eq_ignore_ascii_case(c))
}

/// Bytes that are whole gRPC messages: each a compressed flag of 0 or 1, a 4-byte big-endian
/// length and that many bytes (gRPC over HTTP/2's Length-Prefixed-Message).
fn whole_messages(mut b: &[u8]) -> bool {
    while !b.is_empty() {
        let Some(p) = b.get(..h2::grpc::PREFIX) else {
            return false;
        };
        let len = u32::from_be_bytes([p[1], p[2], p[3], p[4]]) as usize;
        if p[0] > 1 || b.len() - h2::grpc::PREFIX < len {
            return false;
        }
        b = &b[h2::grpc::PREFIX + len..];
    }
    true
}

/// Hex digits in pairs, spaces between them allowed (`00 00 00 00 02 08 03`).
fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) || !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    digits
        .chunks(2)
        .map(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 16).ok())
        .collect()
}

/// RFC 9110 §5.6.2 tchar.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn parse_header(h: &str) -> Result<(String, String), ConfigError> {
    let bad = || ConfigError::Header(h.to_string());
    let (name, value) = h.split_once(':').ok_or_else(bad)?;
    let value = value.trim();
    if name.is_empty()
        || !name.bytes().all(is_tchar)
        || value.bytes().any(|b| b == b'\r' || b == b'\n')
    {
        return Err(bad());
    }
    Ok((name.to_string(), value.to_string()))
}
