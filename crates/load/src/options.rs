//! What a load run is asked to do, as plain data: the options of `linerate load` (wrk-compatible
//! where wrk has the option), filled in by the binary's flags or by a caller such as
//! `lab compare`. Nothing here is checked; `config` checks the options together and reports
//! what is wrong as one `ConfigError`.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Duration;

/// Connections when none are asked for.
pub const DEFAULT_CONNECTIONS: usize = 64;
/// `--ws`: the payload of each message when none is asked for (HttpArena's echo-ws size).
pub const DEFAULT_MESSAGE_SIZE: usize = 32;
/// How long a request may go unanswered before it counts as a timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// The options of one load run; `Default` is `linerate load URL` with no flags but the URL.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Target URL, http:// or https:// (or ws:// or wss://, which ask for WebSocket).
    pub url: String,
    /// Worker threads [None: one per CPU, or one per CPU in `cpus`].
    pub threads: Option<usize>,
    /// Total connections, spread evenly over the threads.
    pub connections: usize,
    /// Run length [None: 10 s, or until `requests` are answered].
    pub duration: Option<Duration>,
    /// Extra request headers, `Name: value`.
    pub headers: Vec<String>,
    /// A request unanswered for this long counts as a timeout; its connection is reopened.
    pub timeout: Duration,
    /// Print the full latency percentile table.
    pub latency: bool,
    /// Requests in flight per connection (HTTP/1.1 pipelining).
    pub pipeline: usize,
    /// Speak HTTP/2: h2c with prior knowledge for `http://`, ALPN `h2` only for `https://`.
    pub http2: bool,
    /// Speak HTTP/3 (QUIC, ALPN `h3`): `https://` only.
    pub http3: bool,
    /// HTTP/2 and HTTP/3: streams in flight per connection (h2load's `-m`), the counterpart
    /// of `pipeline`.
    pub streams: usize,
    /// Speak WebSocket (RFC 6455): upgrade each connection, then send messages that the
    /// server echoes; `pipeline` is then the messages in flight per connection.
    pub ws: bool,
    /// `ws`: the payload bytes of each message.
    pub message_size: usize,
    /// `ws`: binary messages (otherwise text).
    pub binary: bool,
    /// Request method [None: GET, or POST with a body].
    pub method: Option<String>,
    /// Request body.
    pub body: Option<String>,
    /// Request body read from a file.
    pub body_file: Option<PathBuf>,
    /// Files of exact request bytes, dealt round-robin to connections (replace method, headers
    /// and body).
    pub raw: Vec<PathBuf>,
    /// Open a new connection after this many requests on one.
    pub reconnect: Option<u64>,
    /// Stop after exactly this many requests have been answered or failed.
    pub requests: Option<u64>,
    /// Constant total request rate (req/s); latency measured from intended send times.
    pub rate: Option<f64>,
    /// Load the server this long before measuring (not counted).
    pub warmup: Duration,
    /// Repeat the measurement this many times.
    pub runs: usize,
    /// Pin threads to these CPUs, round-robin (empty: no pinning).
    pub cpus: Vec<usize>,
    /// After events, poll this long without sleeping before blocking (zero: off).
    pub spin: Duration,
    /// https: do not verify the server's certificate.
    pub insecure: bool,
    /// https: trust only the CA certificates in this PEM file [None: the webpki roots].
    pub cacert: Option<PathBuf>,
    /// https: the one TLS version to offer [None: 1.3 and 1.2].
    pub tls_version: Option<TlsVersion>,
    /// https: the one cipher suite to offer, by its IANA name [None: rustls's defaults].
    pub tls_cipher: Option<String>,
    /// https: send a TLS 1.3 KeyUpdate (update requested) before every Nth send on a
    /// connection, to exercise a server's key updates.
    pub tls_key_update: Option<u32>,
    /// https: never resume a session (every handshake is a full one).
    pub tls_no_resume: bool,
    /// The report is wanted as JSON.
    pub json: bool,
    /// Responses other than 2xx/3xx (and with `grpc`, calls that fail gRPC's checks) do not
    /// fail the run (its exit status); they are still counted and reported.
    pub allow_status_errors: bool,
    /// Unary gRPC calls (implies `http2`): POST with `content-type: application/grpc` and
    /// `te: trailers`, the body (one length-prefixed message) from `body`/`body_file`; each
    /// answer must be HTTP 200, application/grpc, with `grpc-status: 0`.
    pub grpc: bool,
    /// `grpc`: each answer's DATA bytes must be exactly these, given in hex (spaces allowed).
    pub expect_body: Option<String>,
    /// `grpc`: each answer's DATA bytes must be exactly this file's.
    pub expect_body_file: Option<PathBuf>,
}

/// A TLS protocol version `--tls-version` can pin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsVersion {
    V12,
    V13,
}

impl Default for LoadOptions {
    fn default() -> LoadOptions {
        LoadOptions {
            url: String::new(),
            threads: None,
            connections: DEFAULT_CONNECTIONS,
            duration: None,
            headers: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            latency: false,
            pipeline: 1,
            http2: false,
            http3: false,
            streams: 1,
            ws: false,
            message_size: DEFAULT_MESSAGE_SIZE,
            binary: false,
            method: None,
            body: None,
            body_file: None,
            raw: Vec::new(),
            reconnect: None,
            requests: None,
            rate: None,
            warmup: Duration::ZERO,
            runs: 1,
            cpus: Vec::new(),
            spin: Duration::ZERO,
            insecure: false,
            cacert: None,
            tls_version: None,
            tls_cipher: None,
            tls_key_update: None,
            tls_no_resume: false,
            json: false,
            allow_status_errors: false,
            grpc: false,
            expect_body: None,
            expect_body_file: None,
        }
    }
}
