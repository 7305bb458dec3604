//! Server configuration: addresses, workers, limits and timeouts, each a named default.
//!
//! Owns the numbers; the binary maps `--flags` of the same names onto this struct. Protocol
//! limits that the parser enforces come from `linerate_http1::Limits` and keep its names.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::time::Duration;

use linerate_http1::Limits;

/// Default listen address.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";
/// Largest request body a buffering handler receives; more is answered 413.
pub const MAX_BODY_BYTES: u64 = 1024 * 1024;
/// Largest request body a streaming handler receives; more is answered 413.
pub const MAX_STREAM_BODY_BYTES: u64 = 1 << 40;
/// Time from a request's first byte to the end of its head; then 408 and close.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest gap between two reads of a request body; then 408 and close.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Slowest average a request body may arrive at, in bytes per second: a body must be whole by
/// `BODY_TIMEOUT` after it starts plus one second per `MIN_BODY_RATE` bytes received (Apache's
/// `mod_reqtimeout` `MinRate`), so one byte per gap cannot hold a connection forever. 0: off.
pub const MIN_BODY_RATE: u64 = 1024;
/// How long an idle keep-alive connection stays open.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest a response may wait for the client to read it; then the connection is reset
/// (`SO_LINGER` 0), so its unsent data is freed at once rather than left queued as an orphan.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// Slowest average a waiting response may be read at, in bytes per second: once a send has
/// to wait for its client, the response must be out by `SEND_TIMEOUT` after that plus one
/// second per `MIN_SEND_RATE` bytes sent since, or the connection is reset. A reader that
/// takes a few bytes before each `SEND_TIMEOUT` passes cannot hold a connection forever
/// (a slow-read attack). 0: off.
pub const MIN_SEND_RATE: u64 = 1024;
/// Most bytes a TCP connection leaves unsent in the kernel (`TCP_NOTSENT_LOWAT` on the
/// listeners): the send buffer grows for what is in flight on the network, not for what a
/// client does not read, so 1,000 slow readers of a large file queue about 1,000 × this
/// rather than the whole autotuned send buffer each (megabytes: 1,000 of them put the host's
/// TCP memory at its limit). 0: the kernel's default (no limit); 4 GiB or more is the same.
pub const MAX_UNSENT_BYTES: u64 = 128 * 1024;
/// Requests served on one connection before it is closed (`Connection: close` on the last).
pub const MAX_REQUESTS_PER_CONN: u64 = u64::MAX;
/// Connections one client address may have open at once by default (an edge
/// default): a browser opens 6 per origin, so this leaves room for about 40 users behind
/// one NAT while bounding what one attacker's reconnects hold. By default loopback clients
/// are not counted (a local benchmark, sidecar or health check is the operator's own); a
/// limit set explicitly counts every address (`Config::count_loopback_clients`).
pub const MAX_CONNS_PER_CLIENT: u32 = 256;
/// Connections one worker opens to one upstream server at most by default (an edge
/// default; nginx has none): as many as it pools ([`UPSTREAM_KEEPALIVE`]), so that no mix
/// of clients makes a worker hold more upstream descriptors than that per server; requests
/// over it wait for one to come free (the connect timeout at most, then 503).
pub const UPSTREAM_MAX_CONNS: usize = UPSTREAM_KEEPALIVE;
/// On shutdown, how long in-flight requests may take before connections are closed.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// On SIGTERM/SIGINT, how long the server keeps accepting and serving while `/healthz`
/// answers 503, before it drains: 0, so that a lone server (no balancer watching its health)
/// stops at once, as before the setting existed.
pub const SHUTDOWN_DELAY: Duration = Duration::ZERO;
/// After a final response with close, how long unread input is drained so the kernel does
/// not answer it with a reset that destroys the response (lingering close).
pub const LINGER_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest a deferred request waits for its `Responder`; then 503 and the connection closes.
pub const DEFERRED_TIMEOUT: Duration = Duration::from_secs(30);
/// Answers one connection may have outstanding (deferred) or held behind an outstanding one
/// before it reads no more pipelined requests: one connection's share of backpressure.
pub const MAX_DEFERRED_PER_CONN: usize = 16;
/// Deferred requests one worker may have outstanding; beyond, 503 with `Retry-After`.
pub const MAX_DEFERRED_PER_WORKER: usize = 10_000;
/// Listen backlog.
pub const BACKLOG: i32 = 4096;
/// Smallest in-memory body compressed on the fly: below it the response fits one TCP segment
/// either way, so compressing saves no packet and still costs 7–21 µs of encoder set-up
/// (measurements in `compress`'s module doc).
pub const COMPRESS_MIN_BYTES: usize = 1024;
/// Largest in-memory body compressed on the fly: compressing runs on the worker, which serves
/// nobody else meanwhile, so a larger body goes out as it is (no `Vary` either: it never
/// varies). 256 KiB of JSON took at best 0.47 ms at gzip 1 and 0.68 ms at brotli 3 on the
/// development machine (`STALL_ONLY=1 cargo bench -p linerate --bench compress`, 550 and
/// 390 MB/s), so at the default levels a worker stalls under a millisecond per answer;
/// gzip 9 or a high brotli quality cost several times more for the same bytes.
pub const COMPRESS_MAX_BYTES: usize = 256 * 1024;
/// gzip level for dynamic compression (1 fastest … 9 smallest): 1, the best bytes × rate
/// trade-off measured, and the level HttpArena's compression profile runs everyone at.
pub const GZIP_LEVEL: u32 = 1;
/// Brotli quality for dynamic compression (0 fastest … 11 smallest): 3, the cheapest quality
/// within a few percent of gzip -9's size (5 and up cost 25× more with this encoder).
pub const BROTLI_QUALITY: u32 = 3;

/// Most time to establish a connection to an upstream server (nginx's
/// `proxy_connect_timeout` is 60 s; a server that does not answer a SYN in 5 s is down).
pub const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest an upstream may take to take the request's bytes, and from the request's last
/// byte to the response's first (the 504 a slow application gets), and between two reads of
/// the response (then the client's connection is cut: the answer had begun).
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a pooled upstream connection is kept without a request (below the 75 s of
/// common application servers' own keep-alive, so we close first).
pub const UPSTREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Idle keep-alive connections a worker keeps per upstream server (nginx's `keepalive`).
/// Pooled connections only ever number the most exchanges that were in flight at once, and
/// each costs about 1 KiB here (docs/benchmarks.md, "the upstream pool"); a pool smaller than
/// the load's concurrency closes and reopens connections all the time. 64, nginx's usual
/// value, did that behind 64 HTTP/2 clients with 32 streams each: 27k instead of 61k proxied
/// req/s on one core. So the default keeps up to 1024; `max_conns` bounds and queues instead.
pub const UPSTREAM_KEEPALIVE: usize = 1024;
/// Tries of one request across an upstream's servers (the first included), each only when
/// nothing of the request can have been processed (see `Upstream::tries`).
pub const UPSTREAM_TRIES: u32 = 2;

/// Failures of one server within [`UPSTREAM_FAIL_TIMEOUT`] that take it out of the rotation
/// for that long (nginx's `max_fails` 1: one failed connect, one timeout).
pub const UPSTREAM_MAX_FAILS: u32 = 1;
/// The window failures are counted in, and how long a failed server is left alone.
pub const UPSTREAM_FAIL_TIMEOUT: Duration = Duration::from_secs(10);

/// An upstream group: the servers a proxy mount sends requests to.
#[derive(Clone, Debug, PartialEq)]
pub struct Upstream {
    /// How proxy mounts name it.
    pub name: String,
    pub servers: Vec<UpstreamServer>,
    /// Connections one worker keeps open to one server at most (0: no limit;
    /// [`UPSTREAM_MAX_CONNS`] by default); requests over it wait for a connection to come
    /// free (up to the connect timeout, then 503).
    pub max_conns: usize,
    /// Idle keep-alive connections one worker keeps per server.
    pub keepalive: usize,
    pub idle_timeout: Duration,
    pub connect_timeout: Duration,
    /// Send, first byte and between reads (see [`UPSTREAM_TIMEOUT`]).
    pub timeout: Duration,
    /// Tries of a request: another try goes to the next server after a connect failure, or
    /// after a pooled connection closed before any response byte (idempotent methods only
    /// then: the upstream may have acted on it).
    pub tries: u32,
    /// Passive health: this many failures (a connect refused or timed out, a timeout, a
    /// reset or a malformed answer) within `fail_timeout` take a server out for
    /// `fail_timeout` (0: never). Each worker judges on its own.
    pub max_fails: u32,
    pub fail_timeout: Duration,
    /// How a server is picked for a request.
    pub balance: Balance,
    /// Active health checks (off when `None`).
    pub health: Option<HealthCheck>,
    /// The protocol its servers speak.
    pub protocol: UpstreamProtocol,
    /// Over TLS ([`UpstreamProtocol::H2`]): the name sent as SNI and verified in the
    /// server's certificate (`None`: the server's IP address is the name).
    pub tls_server_name: Option<String>,
    /// Over TLS: the CA certificates (PEM) the servers' chains must lead to, in place of
    /// the system's roots (`None`: the system's).
    pub tls_ca: Option<std::path::PathBuf>,
}

/// The protocol an upstream's servers speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum UpstreamProtocol {
    /// HTTP/1.1 with keep-alive connections, one exchange on a connection at a time.
    #[default]
    Http1,
    /// HTTP/2 without TLS, by prior knowledge (RFC 9113 §3.3): a few connections per worker
    /// and server, each carrying many requests at once (gRPC's upstreams). Needs `http2`.
    H2c,
    /// HTTP/2 over TLS, chosen by ALPN (`h2`, RFC 9113 §3.2; RFC 7301): pooled and
    /// multiplexed as [`UpstreamProtocol::H2c`]; a server whose ALPN answer is not `h2` is
    /// never spoken HTTP/2 to (its connection fails: 502). Needs `http2` and `tls`.
    H2,
}

/// Active health checks: every `interval` each worker sends `GET path` to each server on a
/// new connection; an answer with `status` within `timeout` is a pass, anything else a
/// failure. `fails` failures in a row take the server out (for every balancing method, as
/// passive health does); `passes` passes in a row bring it back. An HTTP/2 upstream's check
/// is gRPC's health service instead: a `grpc.health.v1.Health/Check` call naming
/// `grpc_service`, passed only by `grpc-status: 0` with the status SERVING (`path` and
/// `status` are then unused).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthCheck {
    pub path: String,
    /// HTTP/2 upstreams: the service the Check call names (`""`: the server as a whole).
    pub grpc_service: String,
    pub interval: Duration,
    pub timeout: Duration,
    pub status: u16,
    pub passes: u32,
    pub fails: u32,
}

impl Default for HealthCheck {
    fn default() -> HealthCheck {
        HealthCheck {
            path: "/".into(),
            grpc_service: String::new(),
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            status: 200,
            passes: 2,
            fails: 1,
        }
    }
}

/// How an upstream's server is picked. Every method skips servers taken out by passive
/// health (unless all are), and a retry avoids the server that just failed.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Balance {
    /// Smooth weighted round-robin (nginx's default).
    #[default]
    RoundRobin,
    /// The fewest requests in flight from this worker, per unit of weight (nginx's
    /// `least_conn`); ties go round-robin.
    LeastConn,
    /// A consistent hash of the key (nginx's `hash … consistent`): a request with the same
    /// key goes to the same server while it is up, and a server added or removed moves only
    /// its share of the keys. A request without the key goes round-robin.
    Hash(HashKey),
}

/// What a [`Balance::Hash`] hashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HashKey {
    /// The client's address.
    Client,
    /// A request field's value.
    Header(String),
    /// A cookie's value.
    Cookie(String),
}

impl Upstream {
    /// An upstream named `name` with these servers and the default settings.
    pub fn new(name: &str, servers: Vec<UpstreamServer>) -> Upstream {
        Upstream {
            name: name.to_string(),
            servers,
            max_conns: UPSTREAM_MAX_CONNS,
            keepalive: UPSTREAM_KEEPALIVE,
            idle_timeout: UPSTREAM_IDLE_TIMEOUT,
            connect_timeout: UPSTREAM_CONNECT_TIMEOUT,
            timeout: UPSTREAM_TIMEOUT,
            tries: UPSTREAM_TRIES,
            max_fails: UPSTREAM_MAX_FAILS,
            protocol: UpstreamProtocol::Http1,
            tls_server_name: None,
            tls_ca: None,
            fail_timeout: UPSTREAM_FAIL_TIMEOUT,
            balance: Balance::RoundRobin,
            health: None,
        }
    }
}

/// One server of an upstream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamServer {
    pub addr: UpstreamAddr,
    /// Its share of requests (weighted round-robin), at least 1.
    pub weight: u32,
}

/// Where an upstream server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpstreamAddr {
    Tcp(SocketAddr),
    Unix(std::path::PathBuf),
}

impl std::fmt::Display for UpstreamAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamAddr::Tcp(a) => write!(f, "{a}"),
            UpstreamAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// Which forwarding fields carry the client's address, scheme and host upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ForwardedStyle {
    /// `X-Forwarded-For`, `X-Forwarded-Proto`, `X-Forwarded-Host` (what most applications
    /// read).
    #[default]
    XForwarded,
    /// `Forwarded` (RFC 7239).
    Rfc7239,
    Both,
    None,
}

/// A path prefix whose requests go to an upstream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyMount {
    /// Path prefix without a trailing slash (`""` is everything), as for [`FilesMount`].
    pub prefix: String,
    /// The upstream's name.
    pub upstream: String,
    /// What replaces the prefix upstream (`None`: the path goes as it came; `Some("")` strips
    /// the prefix).
    pub rewrite: Option<String>,
    /// The `Host` the upstream gets (`None`: the client's).
    pub host: Option<String>,
    /// Which forwarding fields the upstream gets.
    pub forwarded: ForwardedStyle,
    /// Incoming `X-Forwarded-*`/`Forwarded` fields are extended (they come from a proxy of
    /// ours) rather than replaced.
    pub trust_forwarded: bool,
    /// Fields set on the request (replacing the client's of the same name), and removed.
    pub set_request: Vec<(String, String)>,
    pub remove_request: Vec<String>,
    /// Fields set on the answer (replacing the upstream's), and removed.
    pub set_response: Vec<(String, String)>,
    pub remove_response: Vec<String>,
    /// A check every request must pass first (nginx's `auth_request`, caddy's
    /// `forward_auth`).
    pub auth: Option<ForwardAuth>,
    /// Read a request's body whole before it goes up (nginx's `proxy_request_buffering on`:
    /// a slow uploader holds no upstream connection, and the upstream always gets a
    /// `Content-Length`). On by default (an edge default), for a body known to fit in
    /// [`REQUEST_BUFFER_BYTES`] (by its declared length, or, chunked, by the site's body
    /// limit) that is no gRPC call (a client-streaming or bidi call is a stream): the memory
    /// it holds is what the client sent. Any other body (larger, gRPC, an HTTP/2 or HTTP/3
    /// one of no declared length: a streaming upload; every body when off, as caddy,
    /// HAProxy and Envoy do) goes up as it arrives, at most 64 KiB held between the two
    /// connections (the client is read as fast as the upstream takes it).
    pub request_buffering: bool,
    /// The protocols a client's `Upgrade` may ask the upstream for (RFC 9110 §7.8; a 101
    /// makes a byte tunnel); others are not forwarded. [`DEFAULT_UPGRADES`] by default.
    pub upgrades: Vec<String>,
    /// An HTTP cache in front of the upstream (RFC 9111); off by default.
    pub cache: Option<ProxyCache>,
    /// gRPC-Web requests (`application/grpc-web`, `-text`) go upstream as gRPC and their
    /// answers come back as gRPC-Web (Envoy's `grpc_web` filter); needs an HTTP/2 upstream
    /// and the `grpc` feature. Off by default: the upstream then gets them as they came
    /// (one that serves gRPC-Web itself, as linerate does).
    pub grpc_web: bool,
}

/// A proxy mount's HTTP cache (RFC 9111, `docs/cache.md`): answers kept in memory, shared by
/// the workers, keyed by scheme, host, path and query (and the fields `Vary` names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyCache {
    /// The memory the stored answers may take, in bytes (S3-FIFO evicts past it).
    pub size: u64,
    /// The largest body stored, in bytes; a larger one streams through unstored.
    pub max_object: u64,
    /// Heuristic freshness (RFC 9111 §4.2.2) for answers without explicit freshness: off by
    /// default (an origin that says nothing has not agreed to stale answers).
    pub heuristic: bool,
    /// The name this cache gives itself in `Cache-Status` (RFC 9211); `None`: no field.
    pub status: Option<String>,
    /// Dangerous: store answers that set cookies on any explicit freshness or `public` (RFC
    /// 9111's reading) and replay their Set-Cookie to every visitor they answer. Off (the
    /// default, as nginx and Varnish): an answer that sets a cookie is never stored.
    pub set_cookie_explicit: bool,
    /// How long concurrent misses for one key wait on the first one's answer before going
    /// upstream themselves (nginx's `proxy_cache_lock_timeout`).
    pub lock_timeout: std::time::Duration,
    /// A shared second tier behind the memory store: `redis://HOST:PORT`,
    /// `valkey://HOST:PORT` or `memcached://HOST:PORT` (needs the `kv` feature).
    pub tier: Option<String>,
    /// The longest one call to the tier may take (then it is a miss).
    pub tier_timeout: std::time::Duration,
    // stale by policy
    /// The origin's failures that let a stored answer be served stale, and `updating`
    /// (answered from stale at once while one request refreshes it), as nginx's
    /// `proxy_cache_use_stale` names them: `error`, `timeout`, `updating`, `http_500`,
    /// `http_502`, `http_503`, `http_504`. Empty (the default): only what the origin grants.
    pub use_stale: Vec<String>,
    /// How far past freshness any stale answer may be (Varnish's grace); `None` (the
    /// default): no bound but each grant's own.
    pub stale_max: Option<std::time::Duration>,
    // what a client may force
    /// Heed a request's `Cache-Control: no-cache` / `max-age` and `Pragma: no-cache`: validate
    /// the stored answer first (RFC 9111 §5.2.1), collapsed with the key's other validations.
    /// Off (the default, as nginx and Varnish): they do not bypass the cache.
    pub client_no_cache_revalidate: bool,
    // the key
    /// The key's parts (`scheme`, `host`, `port`, `path`, `query`, `cookie:NAME`,
    /// `header:NAME`); empty: the default key (all five URL parts).
    pub key: Vec<String>,
    /// Query parameter names left out of the key (`*` a wildcard: `utm_*`).
    pub query_drop: Vec<String>,
    /// The query's parameters sorted in the key.
    pub query_sort: bool,
    // TTL and origin fields
    /// Lifetimes in seconds for answers without explicit freshness, by status
    /// (nginx's `proxy_cache_valid`).
    pub valid: Vec<(u16, u64)>,
    /// The lifetime for the other statuses cacheable by default (`any`).
    pub valid_any: Option<u64>,
    /// The origin fields not obeyed (lower case: `cache-control`, `expires`, `set-cookie`,
    /// `vary`); dangerous.
    pub ignore: Vec<String>,
    // HEAD fills as GET
    /// A HEAD on a cold key goes upstream as GET and its answer is stored (nginx's
    /// `proxy_cache_convert_head`, on by default there too).
    pub convert_head: bool,
    // bypass and no-store rules
    /// Requests not answered from the cache, whose answers are stored (nginx's
    /// `proxy_cache_bypass`); a preset's rules included.
    pub bypass: Vec<CacheRule>,
    /// Requests whose answers are not stored (nginx's `proxy_no_cache`); a preset's rules
    /// included.
    pub no_store: Vec<CacheRule>,
    // purge as operators use it
    /// The client addresses a `PURGE` request to the mount is taken from (Varnish's `acl
    /// purge`); empty (the default): `PURGE` is refused with 405 for everyone.
    pub purge_from: Vec<crate::access::IpRange>,
}

/// A rule of a cache's `bypass` or `no_store` list: what a request must have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheRule {
    /// The cookie of this name is sent.
    Cookie(String),
    /// A Cookie field is sent at all (`cookie = "*"`).
    AnyCookie,
    /// The field of this name (lower case) is sent, with this value when one is given.
    Header(String, Option<String>),
    /// The path starts with this.
    Path(String),
    /// The method is this one.
    Method(String),
}

impl CacheRule {
    /// The rules of the `hardened` preset, for an origin that reads cookies or credentials
    /// without saying `Vary` or `private`: a request with any Cookie or an Authorization is
    /// neither answered from the cache nor stored (Varnish's builtin `pass`).
    pub fn hardened() -> Vec<CacheRule> {
        vec![
            CacheRule::AnyCookie,
            CacheRule::Header("authorization".to_string(), None),
        ]
    }
}

impl Default for ProxyCache {
    fn default() -> ProxyCache {
        ProxyCache {
            size: 64 << 20,
            max_object: 1 << 20,
            heuristic: false,
            status: Some("linerate".to_string()),
            set_cookie_explicit: false,
            lock_timeout: std::time::Duration::from_secs(5),
            tier: None,
            tier_timeout: std::time::Duration::from_millis(50),
            use_stale: Vec::new(),
            stale_max: None,
            client_no_cache_revalidate: false,
            key: Vec::new(),
            query_drop: Vec::new(),
            query_sort: false,
            valid: Vec::new(),
            valid_any: None,
            ignore: Vec::new(),
            convert_head: true,
            bypass: Vec::new(),
            no_store: Vec::new(),
            // purge as operators use it
            purge_from: Vec::new(),
        }
    }
}

impl ProxyCache {
    /// Whether its memory store keeps an answer of `max_object` bytes with room for its
    /// head, key and variant (`linerate_cache::store::HEAD_ROOM`): a configuration where it
    /// cannot would stream every such answer through unstored, so it is refused.
    #[cfg(feature = "proxy")]
    pub fn holds_largest(&self) -> bool {
        linerate_cache::store::Limits {
            capacity: usize::try_from(self.size).unwrap_or(usize::MAX),
            max_object: usize::try_from(self.max_object).unwrap_or(usize::MAX),
            shards: 1,
        }
        .holds_largest()
    }

    /// Its key rules; `None`: the default key. An error says what is wrong.
    #[cfg(feature = "proxy")]
    pub fn key_rules(&self) -> Result<Option<linerate_cache::KeyRules>, String> {
        if self.key.is_empty() && self.query_drop.is_empty() && !self.query_sort {
            return Ok(None);
        }
        let default: Vec<String> = ["scheme", "host", "port", "path", "query"]
            .map(String::from)
            .to_vec();
        let parts = if self.key.is_empty() {
            &default
        } else {
            &self.key
        };
        linerate_cache::KeyRules::parse(parts, &self.query_drop, self.query_sort).map(Some)
    }

    /// The largest `max_object` its `size` holds with room for a head
    /// (`linerate_cache::store::HEAD_ROOM`); 0 for a store smaller than that room.
    #[cfg(feature = "proxy")]
    pub fn largest_held(&self) -> u64 {
        self.size
            .saturating_sub(linerate_cache::store::HEAD_ROOM as u64)
    }
}

/// The largest declared body a proxy mount reads whole before it goes up
/// ([`ProxyMount::request_buffering`]); larger ones stream. The default body limit: with the
/// defaults every body that declares its length is read whole first.
pub const REQUEST_BUFFER_BYTES: u64 = MAX_BODY_BYTES;

/// The protocols a proxy mount tunnels unless configured otherwise: WebSocket only. h2c
/// (deprecated by RFC 9113 §3.1) would carry requests past the proxy's rules unseen.
pub const DEFAULT_UPGRADES: &[&str] = &["websocket"];

impl Default for ProxyMount {
    fn default() -> ProxyMount {
        ProxyMount {
            prefix: String::new(),
            upstream: String::new(),
            rewrite: None,
            host: None,
            forwarded: ForwardedStyle::default(),
            trust_forwarded: false,
            set_request: Vec::new(),
            remove_request: Vec::new(),
            set_response: Vec::new(),
            remove_response: Vec::new(),
            auth: None,
            request_buffering: true,
            upgrades: DEFAULT_UPGRADES.iter().map(|u| u.to_string()).collect(),
            cache: None,
            grpc_web: false,
        }
    }
}

/// Forward auth: before a request is forwarded, a `GET` of `path` goes to `upstream` with
/// the client's `pass` fields and `X-Forwarded-Method`/`-Uri`/`-Host`/`-Proto`/`-For`.
/// A 2xx answer lets the request go on, with the answer's `copy` fields set on it (the
/// client's own fields of those names are always removed); a 401 or 403 is the client's
/// answer as it came; anything else (another status, a failure) is a 500. Nothing is
/// cached: every request is checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForwardAuth {
    pub upstream: String,
    pub path: String,
    pub pass: Vec<String>,
    pub copy: Vec<String>,
}

impl ProxyMount {
    /// Whether `path` is below the mount.
    pub fn covers(&self, path: &[u8]) -> bool {
        match path.strip_prefix(self.prefix.as_bytes()) {
            Some(rest) => rest.is_empty() || rest[0] == b'/' || self.prefix.ends_with('/'),
            None => false,
        }
    }
}

/// How a worker talks to the kernel about its TCP connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Io {
    /// Readiness with epoll: a `recv` and a `send` per exchange (the default).
    #[default]
    Epoll,
    /// Completions with io_uring: a worker's turn is one `io_uring_enter`, which submits
    /// every send and receive the turn queued (`driver/uring.rs`). A worker whose kernel
    /// refuses a ring runs on epoll, saying so.
    Uring,
}

/// Everything the server needs to start.
#[derive(Clone, Debug)]
pub struct Config {
    /// Listen address; port 0 picks one (all workers share it).
    pub addr: SocketAddr,
    /// CPUs to run one pinned worker on each; empty means every CPU this process may use.
    pub cpus: Vec<usize>,
    /// Number of workers; 0 means one per CPU in `cpus`.
    pub workers: usize,
    /// Pin each worker to its CPU.
    pub pin: bool,
    /// Attach the CPU-steering cBPF program to the SO_REUSEPORT group (if the kernel allows).
    pub steering: bool,
    /// The I/O backend of every worker.
    pub io: Io,
    /// Parser limits (head size, header count, chunk extensions, trailers).
    pub limits: Limits,
    /// See [`MAX_BODY_BYTES`].
    pub max_body_bytes: u64,
    /// See [`MAX_STREAM_BODY_BYTES`].
    pub max_stream_body_bytes: u64,
    /// See [`HEADER_TIMEOUT`].
    pub header_timeout: Duration,
    /// See [`BODY_TIMEOUT`].
    pub body_timeout: Duration,
    /// See [`MIN_BODY_RATE`].
    pub min_body_rate: u64,
    /// See [`KEEPALIVE_TIMEOUT`].
    pub keepalive_timeout: Duration,
    /// See [`SEND_TIMEOUT`].
    pub send_timeout: Duration,
    /// See [`MIN_SEND_RATE`].
    pub min_send_rate: u64,
    /// See [`MAX_UNSENT_BYTES`].
    pub max_unsent_bytes: u64,
    /// See [`MAX_REQUESTS_PER_CONN`].
    pub max_requests_per_conn: u64,
    /// Most connections one client address may have open at once, over every TCP listener
    /// and worker (0: no limit; [`MAX_CONNS_PER_CLIENT`] by default); the next one is closed
    /// before a byte is read. The address is the socket's, or its PROXY protocol header's.
    pub max_conns_per_client: u32,
    /// Whether loopback addresses count against `max_conns_per_client`: not with the
    /// default limit (a local client is the operator's own), yes once a limit is set.
    pub count_loopback_clients: bool,
    /// See [`DRAIN_TIMEOUT`].
    pub drain_timeout: Duration,
    /// See [`LINGER_TIMEOUT`].
    pub linger_timeout: Duration,
    /// See [`DEFERRED_TIMEOUT`].
    pub deferred_timeout: Duration,
    /// See [`MAX_DEFERRED_PER_CONN`] (at least 1).
    pub max_deferred_per_conn: usize,
    /// See [`MAX_DEFERRED_PER_WORKER`].
    pub max_deferred_per_worker: usize,
    /// See [`BACKLOG`].
    pub backlog: i32,
    /// Value of the `Server` header; `None` sends none.
    pub server_name: Option<String>,
    /// Write an access log (`access_log_format`) to this sink: every site's requests, but
    /// those of a site with a log of its own ([`Site::access_log`]).
    pub access_log: Option<crate::access_log::LogTarget>,
    /// Static files served below a path prefix (routes take precedence); off by default.
    pub files: Option<FilesMount>,
    /// Dynamic gzip/br compression of in-memory response bodies (see `compress`).
    pub compression: Compression,
    /// HTTPS on a second port (same workers, same routes); off by default.
    pub tls: Option<TlsConfig>,
    /// HTTP/2 with prior knowledge (h2c) on this address; off by default. Such a listener
    /// speaks only HTTP/2: an HTTP/1.1 request there is a connection error.
    pub h2c: Option<SocketAddr>,
    /// `addr` also takes HTTP/2 with prior knowledge beside HTTP/1.1: see
    /// [`Listen::h2c_preface`]. On by default where the `http2` feature is built in, as
    /// `linerate serve` has it, so that gRPC clients reach a [`Router::grpc`] service on the
    /// one default port (HTTP/1.1 waits for nothing: `GET`'s first byte already differs).
    ///
    /// [`Router::grpc`]: crate::Router
    pub h2c_preface: bool,
    /// `tls` also serves HTTP/3 over QUIC on the same address's UDP port (and its HTTPS
    /// answers announce it with `Alt-Svc`): see [`Listen::quic`].
    pub quic: bool,
    /// `addr` answers every request with a 308 to HTTPS on `tls`'s port (443 without `tls`:
    /// a TLS terminator in front): see [`Listen::redirect_to_https`].
    pub redirect_to_https: bool,
    /// Every listener of `addr`, `tls` and `h2c` expects a PROXY protocol header: see
    /// [`Listen::proxy_protocol`].
    pub proxy_protocol: bool,
    /// The proxies in front of this server, whose `X-Forwarded-For` (or `Forwarded`, or
    /// `X-Real-IP`) names the client. None: the fields are never believed.
    pub trusted_proxies: crate::realip::TrustedProxies,
    /// The listeners, when given (a configuration file): they replace `addr`, `tls` and `h2c`.
    pub listeners: Vec<Listen>,
    /// The admin listener (`/metrics` in the Prometheus text format, `/healthz`), off by
    /// default; its own thread answers it, never a site. Metrics are counted only when it is on.
    pub admin: Option<SocketAddr>,
    /// The access log's line format.
    pub access_log_format: crate::access_log::LogFormat,
    /// Sites chosen by Host, when given (a configuration file): they replace `files`, and
    /// each says whether the application's routes are mounted in it.
    pub sites: Vec<Site>,
    /// Upstream groups, for proxy mounts.
    pub upstreams: Vec<Upstream>,
    /// Proxy mounts of the implicit site (without `sites`).
    pub proxies: Vec<ProxyMount>,
    /// Where certificates the server obtains itself are kept and which CA issues them: set
    /// when a site says `tls = "acme"` or `tls = "internal"` ([`Site::managed`]).
    pub acme: Option<AcmeConfig>,
    /// `[storage]`: what the nodes of a fleet share (ACME's account, certificates, locks and
    /// challenge answers; TLS ticket keys; fleet-wide rate limits); `None` on a lone node.
    pub storage: Option<StorageConfig>,
    // ticket keys
    /// With `storage`, how often the fleet's shared TLS ticket key is replaced by a new one
    /// ([`TICKET_ROTATION`] by default); listeners with `ticket_keys` use their files instead.
    pub ticket_rotation: Duration,
    // rollouts with zero failed requests
    /// See [`SHUTDOWN_DELAY`]: the balancer sees `/healthz` fail and moves traffic away while
    /// the node still accepts.
    pub shutdown_delay: Duration,
    /// A Unix socket (mode 0600) where a new process of a binary upgrade takes this server's
    /// listening sockets (see [`crate::handoff`]); `None`: no upgrade by handoff.
    pub upgrade_socket: Option<std::path::PathBuf>,
    /// OpenTelemetry tracing: a span per request exported to this collector; `None`: off.
    pub tracing: Option<crate::trace::TracingConfig>,
    /// The field a proxied request carries its request id in (`X-Request-Id` by default:
    /// [`crate::trace::REQUEST_ID_FIELD`]); `None`: not sent. A trusted proxy's (see
    /// `trusted_proxies`) `X-Request-Id` is taken as the request's id.
    pub request_id_field: Option<String>,
}

/// How often a fleet's shared ticket key is replaced by default: caddy's STEK interval. A
/// key that leaks opens the sessions of at most its 12 h (and those resumed from them);
/// with the default 24 h session lifetime, three keys are in the storage at most.
pub const TICKET_ROTATION: Duration = Duration::from_secs(12 * 60 * 60);

/// Where a fleet's nodes keep what they share, on an engine the operator already runs: a
/// directory every node mounts (NFS, CephFS…) or a Redis (or Valkey) server. Exactly one of
/// `dir` and `redis` is set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageConfig {
    /// A shared directory (atomic writes by rename, lock files with an expiry).
    pub dir: Option<std::path::PathBuf>,
    /// A Redis server, as `redis://HOST:PORT[/DB]` (locks by `SET NX PX`, changes announced
    /// by pub/sub).
    pub redis: Option<String>,
    /// How many nodes the fleet has (at least 1): while the shared store cannot be reached,
    /// a fleet-wide limit falls back to its share of the limit on each node.
    pub nodes: u32,
}

/// Let's Encrypt's production directory: the ACME CA used unless another is named.
pub const ACME_DIRECTORY: &str = "https://acme-v02.api.letsencrypt.org/directory";
/// Where obtained certificates, their keys and the ACME account are kept by default.
pub const ACME_STORAGE: &str = "/var/lib/linerate/acme";

/// Automatic HTTPS: the ACME CA (RFC 8555) that issues the certificates of sites with
/// `tls = "acme"`, and the storage shared with the local CA of `tls = "internal"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcmeConfig {
    /// The CA's directory URL ([`ACME_DIRECTORY`] by default).
    pub directory: String,
    /// The account's contact (`mailto:`), for the CA's expiry and incident mail.
    pub email: Option<String>,
    /// The account, certificates and keys (directories 0700, keys 0600).
    pub storage: std::path::PathBuf,
    /// PEM roots to trust for the directory's own HTTPS, in place of the public ones (a
    /// private CA such as step-ca, or Pebble in tests).
    pub ca_roots: Option<std::path::PathBuf>,
    /// How the CA checks that this server answers for a name.
    pub challenge: AcmeChallenge,
    /// External Account Binding (RFC 8555 §7.3.4), for a CA that asks for one.
    pub eab: Option<AcmeEab>,
    // DNS-01 through RFC 2136
    /// The zone's primary server that takes the `_acme-challenge` TXT records as RFC 2136
    /// updates signed with TSIG; set exactly when `challenge` is [`AcmeChallenge::Dns01`].
    pub dns: Option<DnsUpdateConfig>,
}

impl Default for AcmeConfig {
    fn default() -> AcmeConfig {
        AcmeConfig {
            directory: ACME_DIRECTORY.to_string(),
            email: None,
            storage: ACME_STORAGE.into(),
            ca_roots: None,
            challenge: AcmeChallenge::Http01,
            eab: None,
            dns: None,
        }
    }
}

/// The ACME challenge answered for every name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcmeChallenge {
    /// A token under `/.well-known/acme-challenge/` on port 80 (any cleartext listener,
    /// `redirect_to_https` ones included).
    Http01,
    /// A certificate for the `acme-tls/1` protocol on port 443 (RFC 8737).
    TlsAlpn01,
    /// A TXT record at `_acme-challenge.NAME`, put in the zone by an RFC 2136 update
    /// ([`AcmeConfig::dns`]): the only one that covers wildcards, and that needs no node
    /// behind a balancer to be reached.
    Dns01,
}

/// Where and how DNS-01's TXT records are put (RFC 2136 dynamic updates, TSIG-signed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsUpdateConfig {
    /// The zone's primary (address and port; 53 when the file gives none).
    pub server: std::net::SocketAddr,
    /// The zone the records are put in; `None`: the name being validated (the record's
    /// parent, `fleet.test` for `_acme-challenge.fleet.test` and for `*.fleet.test`).
    pub zone: Option<String>,
    /// The TSIG key the updates are signed with (RFC 8945).
    pub key: crate::acme::dns::key::TsigKey,
    /// Every message over TCP; otherwise UDP, and TCP when an answer is truncated.
    pub tcp: bool,
}

/// An External Account Binding: the key id and the MAC key the CA gave.
#[derive(Clone, PartialEq, Eq)]
pub struct AcmeEab {
    pub kid: String,
    pub hmac_key: Vec<u8>,
}

impl std::fmt::Debug for AcmeEab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key itself never (logs, `GET /config`): its place is marked.
        f.debug_struct("AcmeEab")
            .field("kid", &self.kid)
            .field("hmac_key", &crate::config_view::REDACTED)
            .finish()
    }
}

/// Who issues a site's certificate when the server obtains it itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Managed {
    /// The ACME CA of [`Config::acme`].
    Acme,
    /// The server's own local CA (caddy's `tls internal`), for names no public CA issues.
    Internal,
}

/// A site: the answers for the Host names it claims.
#[derive(Clone, Debug, Default)]
pub struct Site {
    /// Names it answers: exact (`example.com`) or a leading wildcard (`*.example.com`: any
    /// name ending in `.example.com`), compared without case and without the port.
    pub names: Vec<String>,
    /// It answers requests whose Host no site claims (else the first site does, as nginx's
    /// first server block).
    pub default: bool,
    /// The routes given to `Server::bind` are mounted (they take precedence over files).
    pub app: bool,
    /// Static roots below path prefixes (the longest matching prefix serves).
    pub mounts: Vec<FilesMount>,
    /// The file served for a directory (`index.html` when empty).
    pub index: String,
    /// Serve dotfiles (see `FilesOptions::dotfiles`); denied by default.
    pub dotfiles: bool,
    /// Redirects, tried in order before anything else.
    pub redirects: Vec<Redirect>,
    /// Fixed answers (nginx's `return 200 "…"`), tried in order after the redirects.
    pub returns: Vec<FixedAnswer>,
    /// Fields added to answers, by path prefix or file extension.
    pub headers: Vec<HeaderRule>,
    /// A file's contents answered in place of the server's own body for a status.
    pub error_pages: Vec<(u16, std::path::PathBuf)>,
    /// Dynamic compression here (`None`: the server's setting). Off for a site that mixes
    /// secrets and reflected input over HTTPS (BREACH).
    pub compression: Option<bool>,
    /// Largest body for buffering and deferred handlers here (`None`: the server's
    /// `max_body_bytes`). Limits read before the Host is known (head size, header count,
    /// timeouts) stay server-wide.
    pub max_body_bytes: Option<u64>,
    /// Path prefixes proxied to upstreams (the longest matching prefix; before routes and
    /// files).
    pub proxies: Vec<ProxyMount>,
    /// IP allow/deny rules by path prefix (the longest matching prefix's rules decide;
    /// before redirects, proxies, routes and files): 403 for a client they deny.
    pub access: Vec<crate::access::Access>,
    /// Request-rate limits by path prefix: every rule whose prefix covers the path applies
    /// (after the access rules, before basic auth and everything else): 429 over the rate.
    pub limits: Vec<RateLimit>,
    /// HTTP basic auth by path prefix (the longest matching prefix's rule; after the rate
    /// limits): 401 without a right user and password.
    pub auth: Vec<BasicAuth>,
    /// Edge JWT checks by path prefix (the longest matching prefix's rule; after basic
    /// auth): 401 without a valid HS256 bearer token.
    pub jwt: Vec<JwtAuth>,
    /// The certificate a TLS listener answers with when the client's SNI is one of `names`
    /// (exact names first, then the longest wildcard); the listener's own is the default.
    pub tls: Option<CertFiles>,
    /// The server obtains and renews the site's certificate itself (in place of `tls`).
    pub managed: Option<Managed>,
    /// Content types by file extension (lowercase, no dot) for its static files, before the
    /// built-in table.
    pub types: Vec<(String, String)>,
    /// Its own access log: its requests are written there instead of the server's
    /// `access_log` (nginx's `access_log` in a server block).
    pub access_log: Option<crate::access_log::LogTarget>,
    /// Its log's format (`None`: the server's `access_log_format`). Set alone, the site's
    /// lines go to the server's log in this format.
    pub access_log_format: Option<crate::access_log::LogFormat>,
}

/// A request-rate limit (nginx's `limit_req … burst=N nodelay`): each key may make a
/// request every `interval_us`, and `burst` more at once; beyond, 429 with `Retry-After`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// The paths it covers (matched against the decoded path, as access rules are).
    pub prefix: String,
    /// Microseconds between requests at the rate (`ratelimit::parse_rate`).
    pub interval_us: u64,
    pub burst: u32,
    pub key: RateKey,
    // fleet-wide rate limits
    /// Where its counts live: this node, or the fleet's Redis (`[storage] redis`).
    pub scope: RateScope,
    /// A fleet rule's local share while Redis is down (µs between requests per node); `None`:
    /// the rate times `[storage] nodes`.
    pub local_interval_us: Option<u64>,
    /// Its `rule` label in the metrics (and its keys' namespace in Redis); `None`: `SITE
    /// PREFIX`.
    pub name: Option<String>,
}

/// Where a rate limit's counts live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RateScope {
    /// On each node: each node lets the rate through (today's limit).
    #[default]
    Node,
    /// In the `[storage] redis` server, for the whole fleet, taken in small leases.
    Fleet,
}

/// Whose requests a rate limit counts together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RateKey {
    /// The client's address (after a PROXY header or trusted proxies).
    Client,
    /// A request field's value (an API key); a request without it is not limited.
    Field(String),
}

/// HTTP basic auth for a path prefix, against an htpasswd file of bcrypt hashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BasicAuth {
    pub prefix: String,
    /// Named in the 401's challenge (browsers show it).
    pub realm: String,
    pub htpasswd: std::path::PathBuf,
}

/// An edge JWT check for a path prefix (`crate::jwt`): every request below it needs
/// `Authorization: Bearer` with an HS256 token made with the secret, verified each time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JwtAuth {
    pub prefix: String,
    /// Named in the 401's challenge.
    pub realm: String,
    /// Where the secret is (never the secret itself, so this can be logged).
    pub secret: JwtSecret,
    /// `iss` must be exactly this.
    pub issuer: Option<String>,
    /// `aud` must be this, or an array holding it.
    pub audience: Option<String>,
    /// Claims that must be present (`sub`, …).
    pub require: Vec<String>,
    /// A token without `exp` is refused (the default).
    pub require_exp: bool,
    /// Seconds of clock difference forgiven on `exp` and `nbf`.
    pub leeway_s: u64,
}

/// Seconds of clock difference a JWT check forgives on `exp` and `nbf` unless configured
/// otherwise (RFC 7519 §4.1.4 allows "a small leeway"): a token made by an issuer whose
/// clock runs a little ahead is not refused for its `nbf` the moment it arrives.
pub const JWT_LEEWAY_S: u64 = 30;

/// Where a JWT check's secret is read from: its raw bytes, less one trailing newline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JwtSecret {
    File(std::path::PathBuf),
    /// An environment variable's name.
    Env(String),
}

/// A certificate chain and its key, as PEM files.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CertFiles {
    /// PEM certificate chain, leaf first.
    pub cert: std::path::PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) matching the leaf certificate.
    pub key: std::path::PathBuf,
    /// A DER OCSP response for the leaf, stapled to every handshake that asks for one
    /// (read again on reload, as the pair is: a cron job's fresh response goes out after a
    /// SIGHUP).
    pub ocsp: Option<std::path::PathBuf>,
}

/// A certificate chain and its key, as PEM files.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CertPair {
    /// PEM certificate chain, leaf first.
    pub cert: std::path::PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) matching the leaf certificate.
    pub key: std::path::PathBuf,
}

/// A redirect: a request whose path starts with `prefix` is answered `status` with a
/// `Location` made from `to`, where `{path}` is the request's path, `{rest}` the part after
/// the prefix, `{query}` `?` and the query (or nothing), and `{host}` the host the request
/// named (lowercase, without its port: nginx's `$host`). [`Redirect::check`] says whether
/// `to` is valid; the server refuses to start with one that is not.
#[derive(Clone, Debug)]
pub struct Redirect {
    pub prefix: String,
    /// The path must be `prefix` exactly (nginx's `location = /`), not merely start with it.
    pub exact: bool,
    pub to: String,
    /// 301, 302, 303, 307 or 308.
    pub status: u16,
}

/// A fixed answer: a request whose path starts with `prefix` (or is exactly it) is answered
/// `status` with `body` of `content_type`, as nginx's `return 200 "text"` and caddy's `respond`.
#[derive(Clone, Debug)]
pub struct FixedAnswer {
    pub prefix: String,
    /// The path must be `prefix` exactly (nginx's `location = /`).
    pub exact: bool,
    /// 200–599 less the redirects' 3xx (those are `Redirect`s, which carry a `Location`).
    pub status: u16,
    pub body: String,
    pub content_type: String,
}

/// Fields added to every answer whose path starts with `prefix` (when given) and ends in one
/// of `extensions` (when any are given), proxied answers included unless `not_proxied`.
#[derive(Clone, Debug, Default)]
pub struct HeaderRule {
    pub prefix: Option<String>,
    pub extensions: Vec<String>,
    pub fields: Vec<(String, String)>,
    /// Left off answers from an upstream (`proxied = false`), whose application sets its own.
    pub not_proxied: bool,
}

/// Where a listener listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAddr {
    /// A TCP address (IPv4 or IPv6; an IPv6 one is IPv6-only, so `0.0.0.0` and `[::]` on
    /// the same port are two listeners).
    Tcp(SocketAddr),
    /// A Unix stream socket at this path.
    Unix(std::path::PathBuf),
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddr::Tcp(a) => write!(f, "{a}"),
            ListenAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// One listener: an address, and HTTPS with its own certificate or plain HTTP.
#[derive(Clone, Debug)]
pub struct Listen {
    pub addr: ListenAddr,
    /// HTTPS with this certificate and key (its `addr` is not used: `Listen::addr` is).
    pub tls: Option<TlsConfig>,
    /// Cleartext HTTP/2 with prior knowledge only (never with `tls`).
    pub h2c: bool,
    /// A cleartext HTTP/1.1 listener that also takes HTTP/2 with prior knowledge: a
    /// connection whose first bytes are the HTTP/2 client preface (RFC 9113 §3.4) is HTTP/2,
    /// any other is HTTP/1.1 from its first byte that differs (so HTTP/1.1 waits for
    /// nothing). What nginx's `http2 on` does on a plain listener, and how one port serves
    /// HTTP/1.1 and gRPC. Off by default; never with `tls` (ALPN chooses there) or `h2c`;
    /// needs the `http2` feature.
    pub h2c_preface: bool,
    /// A Unix socket's owner, group and mode (ignored for TCP).
    pub unix_perms: UnixPerms,
    /// Answer every request here with a 308 to the same host, path and query over HTTPS on
    /// this port (caddy's HTTP→HTTPS redirect): for a cleartext TCP listener beside a TLS one,
    /// so that the sites themselves apply only over HTTPS and a redirect cannot loop.
    pub redirect_to_https: Option<u16>,
    /// Every connection starts with a PROXY protocol header (v1 or v2, from an L4 balancer
    /// such as HAProxy's `send-proxy-v2`), whose source address is the client's from then on
    /// (logs, access rules, limits, forwarded fields); a connection without a valid one is
    /// closed (TCP listeners only).
    pub proxy_protocol: bool,
    /// Also serve HTTP/3 over QUIC (RFC 9114) on the same address's UDP port, with the same
    /// certificates, sites and limits (TLS listeners only); HTTPS answers over TCP carry
    /// `Alt-Svc: h3=":PORT"` so browsers move to it.
    pub quic: bool,
}

/// Who may connect to a Unix-socket listener: the socket file's owner, group and mode, set
/// once it is bound (as root, before any privilege drop).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnixPerms {
    /// A user name or numeric id; `None` keeps the user that bound it.
    pub owner: Option<String>,
    /// A group name or numeric id; `None` keeps the group that bound it.
    pub group: Option<String>,
    /// Permission bits. Connecting needs write permission, so the default
    /// ([`UNIX_SOCKET_MODE`], as nginx sets) lets every local user connect, as they can to a
    /// TCP port on 127.0.0.1; `0o660` with `group` limits it to one group.
    pub mode: u32,
}

/// UNIX_SOCKET_MODE: a Unix-socket listener's mode unless configured (`rw-rw-rw-`).
pub const UNIX_SOCKET_MODE: u32 = 0o666;

impl Default for UnixPerms {
    fn default() -> UnixPerms {
        UnixPerms {
            owner: None,
            group: None,
            mode: UNIX_SOCKET_MODE,
        }
    }
}

impl Listen {
    /// Whether this listener can speak HTTP/2 or HTTP/3 to a client, as gRPC needs: h2c, the
    /// h2c preface beside HTTP/1.1, TLS offering `h2` in ALPN, or QUIC.
    pub fn speaks_http2(&self) -> bool {
        let alpn_h2 = |t: &TlsConfig| {
            if t.options.alpn.is_empty() {
                t.http2
            } else {
                t.options.alpn.iter().any(|p| p == "h2")
            }
        };
        self.h2c || self.h2c_preface || self.quic || self.tls.as_ref().is_some_and(alpn_h2)
    }
}

impl Config {
    /// Whether some listener speaks HTTP/2 or HTTP/3 ([`Listen::speaks_http2`]): gRPC's
    /// clients reach the router's gRPC services only then, and
    /// [`Server::bind`](crate::Server::bind) refuses a router that has some otherwise.
    pub fn speaks_http2(&self) -> bool {
        self.listen_list().iter().any(Listen::speaks_http2)
    }

    /// Some request is logged: the server or a site has an access log.
    pub(crate) fn logs(&self) -> bool {
        self.access_log.is_some() || self.sites.iter().any(|s| s.access_log.is_some())
    }

    /// Some request is proxied: the implicit site or a site has a proxy mount.
    pub(crate) fn proxies(&self) -> bool {
        !self.proxies.is_empty() || self.sites.iter().any(|s| !s.proxies.is_empty())
    }

    /// The listeners to bind: `listeners` when given, else `addr` and, with `tls`, its port.
    pub fn listen_list(&self) -> Vec<Listen> {
        if !self.listeners.is_empty() {
            return self.listeners.clone();
        }
        let mut out = vec![Listen {
            addr: ListenAddr::Tcp(self.addr),
            tls: None,
            h2c: false,
            h2c_preface: self.h2c_preface,
            unix_perms: UnixPerms::default(),
            redirect_to_https: self
                .redirect_to_https
                .then(|| self.tls.as_ref().map_or(443, |t| t.addr.port())),
            proxy_protocol: self.proxy_protocol,
            quic: false,
        }];
        if let Some(t) = &self.tls {
            out.push(Listen {
                addr: ListenAddr::Tcp(t.addr),
                tls: Some(t.clone()),
                h2c: false,
                h2c_preface: false,
                unix_perms: UnixPerms::default(),
                redirect_to_https: None,
                proxy_protocol: self.proxy_protocol,
                quic: self.quic,
            });
        }
        if let Some(addr) = self.h2c {
            out.push(Listen {
                addr: ListenAddr::Tcp(addr),
                tls: None,
                h2c: true,
                h2c_preface: false,
                unix_perms: UnixPerms::default(),
                redirect_to_https: None,
                proxy_protocol: self.proxy_protocol,
                quic: false,
            });
        }
        out
    }
}

/// Dynamic response compression: which bodies, and how hard to try.
#[derive(Clone, Debug)]
pub struct Compression {
    /// Compress when the client asks; off means never (and no `Vary` is added).
    pub enabled: bool,
    /// See [`COMPRESS_MIN_BYTES`].
    pub min_bytes: usize,
    /// See [`COMPRESS_MAX_BYTES`].
    pub max_bytes: usize,
    /// See [`GZIP_LEVEL`].
    pub gzip_level: u32,
    /// See [`BROTLI_QUALITY`].
    pub brotli_quality: u32,
}

impl Default for Compression {
    fn default() -> Self {
        Compression {
            enabled: true,
            min_bytes: COMPRESS_MIN_BYTES,
            max_bytes: COMPRESS_MAX_BYTES,
            gzip_level: GZIP_LEVEL,
            brotli_quality: BROTLI_QUALITY,
        }
    }
}

/// HTTPS: where to listen and the PEM files holding the certificate chain and its key.
#[derive(Clone, Debug)]
pub struct TlsConfig {
    /// HTTPS listen address; port 0 picks one.
    pub addr: SocketAddr,
    /// Its own certificate, for clients whose SNI names no site's; none when every name's
    /// certificate is a site's (obtained by the server itself: a name without one is then
    /// refused at the handshake).
    pub cert: Option<CertPair>,
    /// Hand session keys to the kernel after the handshake when it supports kTLS, so file
    /// bodies go out with `sendfile`; user-space encryption otherwise.
    pub ktls: bool,
    /// Bytes sent under one TLS 1.3 key before the server updates it (KeyUpdate), in user
    /// space and in the kernel alike ([`crate::tls::TLS_KEY_UPDATE_BYTES`] by default).
    pub key_update_bytes: u64,
    /// Offer HTTP/2 in ALPN (`h2`, then `http/1.1`); `false` offers only `http/1.1`.
    pub http2: bool,
    /// Versions, suites, resumption, OCSP and client certificates.
    pub options: TlsOptions,
}

/// A TLS listener's handshake options beyond its certificate. The default is what rustls
/// recommends: TLS 1.2 and 1.3, its AEAD suites, a 256-entry session cache, no tickets, no
/// client certificates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsOptions {
    /// The oldest version offered.
    pub min_version: TlsVersion,
    /// Cipher suites by IANA name, in the server's order of preference; empty: rustls's
    /// defaults. [`crate::tls::cipher_suite_names`] lists the ones known.
    pub ciphers: Vec<String>,
    /// ALPN protocols in the server's order of preference (`h2`, `http/1.1`); empty: by
    /// [`TlsConfig::http2`].
    pub alpn: Vec<String>,
    /// Sessions remembered for resumption (TLS 1.2 session IDs, TLS 1.3 tickets that name
    /// an entry); 0 remembers none.
    pub session_cache: usize,
    /// Stateless session tickets (keys rotated every 6 h, the previous one kept) in place of
    /// the cache.
    pub session_tickets: bool,
    /// How long a session can be resumed, by the cache or a ticket; tickets are bounded by
    /// their key rotation too (12 h at most).
    pub session_lifetime: Duration,
    /// The listener's own certificate's OCSP response (DER), as [`CertFiles::ocsp`].
    pub ocsp: Option<std::path::PathBuf>,
    /// Client certificates (mTLS).
    pub client_auth: Option<ClientAuth>,
    // ticket keys
    /// Session ticket keys shared by a fleet, nginx's `ssl_session_ticket_key` files (80
    /// bytes, or 48 for AES-128): the first seals new tickets, every one opens them; read
    /// again on SIGHUP. Not empty: tickets are on, sealed with these keys in place of
    /// rustls's own.
    pub ticket_keys: Vec<std::path::PathBuf>,
    /// `session_tickets = false` was said: no tickets, not even the fleet's (which
    /// `[storage]` turns on for a listener without `ticket_keys`).
    pub session_tickets_off: bool,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            min_version: TlsVersion::Tls12,
            ciphers: Vec::new(),
            alpn: Vec::new(),
            session_cache: TLS_SESSION_CACHE,
            session_tickets: false,
            session_lifetime: TLS_SESSION_LIFETIME,
            ocsp: None,
            client_auth: None,
            ticket_keys: Vec::new(),
            session_tickets_off: false,
        }
    }
}

/// Sessions a listener's cache remembers by default (rustls's default).
pub const TLS_SESSION_CACHE: usize = 256;
/// How long a session can be resumed by default (the lifetime rustls announces for TLS 1.3
/// tickets from its cache).
pub const TLS_SESSION_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);
/// The longest session lifetime TLS 1.3 allows (RFC 8446 §4.6.1: seven days).
pub const TLS_MAX_SESSION_LIFETIME: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// A TLS protocol version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// Client certificates asked for in the handshake, verified against a CA bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientAuth {
    /// PEM CA certificates a client's chain must lead to (read again on reload).
    pub ca: std::path::PathBuf,
    /// A client without a certificate is refused in the handshake; otherwise it is let in
    /// without an identity (a wrong certificate is refused either way).
    pub required: bool,
}

/// A directory served as static files below a path prefix.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilesMount {
    /// Path prefix without a trailing slash (`""` mounts at `/`, `"/static"` at `/static/`).
    pub prefix: String,
    pub root: std::path::PathBuf,
    /// nginx's `try_files`: paths tried in order for a request that finds no file, each
    /// `{path}` (the request's path below the prefix) with text around it, or a path from
    /// the root (`/index.html`: a single-page app's fallback). Empty: `{path}` alone.
    pub try_files: Vec<String>,
    /// A directory without its index is listed (HTML, or JSON for a client that asks for
    /// it); off: 404.
    pub listing: bool,
}

impl FilesMount {
    /// The part of `path` below the mount (starting with `/`, or empty for the bare prefix),
    /// or `None` when `path` is not below it.
    pub fn strip<'a>(&self, path: &'a [u8]) -> Option<&'a [u8]> {
        let rest = path.strip_prefix(self.prefix.as_bytes())?;
        (rest.is_empty() || rest[0] == b'/').then_some(rest)
    }
}

impl Config {
    /// The connection state machine's share: limits and timeouts in milliseconds.
    pub(crate) fn conn(&self) -> crate::h1::ConnConfig {
        // Round up: as_millis truncates, and a sub-millisecond timeout must not become 0.
        let ms = |d: Duration| d.as_micros().div_ceil(1000) as u64;
        crate::h1::ConnConfig {
            limits: self.limits,
            header_timeout: ms(self.header_timeout),
            body_timeout: ms(self.body_timeout),
            min_body_rate: self.min_body_rate,
            keepalive_timeout: ms(self.keepalive_timeout),
            send_timeout: ms(self.send_timeout),
            min_send_rate: self.min_send_rate,
            linger_timeout: ms(self.linger_timeout),
            deferred_timeout: ms(self.deferred_timeout),
            max_requests: self.max_requests_per_conn,
            max_deferred: self.max_deferred_per_conn.max(1),
            server: self.server_name.as_ref().map(|s| s.as_bytes().to_vec()),
            // Decided where the server is built (`server::announces_extended_connect`).
            extended_connect: false,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            addr: DEFAULT_ADDR.parse().expect("valid default address"),
            cpus: Vec::new(),
            workers: 0,
            pin: true,
            steering: true,
            io: Io::Epoll,
            limits: Limits::default(),
            max_body_bytes: MAX_BODY_BYTES,
            max_stream_body_bytes: MAX_STREAM_BODY_BYTES,
            header_timeout: HEADER_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
            min_body_rate: MIN_BODY_RATE,
            keepalive_timeout: KEEPALIVE_TIMEOUT,
            send_timeout: SEND_TIMEOUT,
            min_send_rate: MIN_SEND_RATE,
            max_unsent_bytes: MAX_UNSENT_BYTES,
            max_requests_per_conn: MAX_REQUESTS_PER_CONN,
            max_conns_per_client: MAX_CONNS_PER_CLIENT,
            count_loopback_clients: false,
            drain_timeout: DRAIN_TIMEOUT,
            linger_timeout: LINGER_TIMEOUT,
            deferred_timeout: DEFERRED_TIMEOUT,
            max_deferred_per_conn: MAX_DEFERRED_PER_CONN,
            max_deferred_per_worker: MAX_DEFERRED_PER_WORKER,
            backlog: BACKLOG,
            server_name: Some("linerate".to_string()),
            access_log: None,
            files: None,
            compression: Compression::default(),
            tls: None,
            h2c: None,
            h2c_preface: cfg!(feature = "http2"),
            quic: false,
            redirect_to_https: false,
            proxy_protocol: false,
            trusted_proxies: Default::default(),
            listeners: Vec::new(),
            sites: Vec::new(),
            upstreams: Vec::new(),
            proxies: Vec::new(),
            admin: None,
            access_log_format: crate::access_log::LogFormat::Combined,
            acme: None,
            storage: None,
            ticket_rotation: TICKET_ROTATION,
            shutdown_delay: SHUTDOWN_DELAY,
            upgrade_socket: None,
            tracing: None,
            request_id_field: Some(crate::trace::REQUEST_ID_FIELD.to_string()),
        }
    }
}
