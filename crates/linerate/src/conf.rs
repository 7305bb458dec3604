//! The configuration file (`linerate serve --config FILE`, `--check-config FILE`): TOML read
//! into the server library's `Config` — listeners, sites, limits, logs — with every mistake
//! reported as one line `FILE:LINE:COLUMN: what is wrong`.
//!
//! Owns the file's format (docs/config.md documents it with a complete example) and its
//! checks: unknown keys, wrong types, bad addresses, durations and sizes, missing files and
//! directories, invalid field names or values, statuses, duplicate site names. Relative
//! paths are taken from the file's directory. It opens nothing for serving: the server does.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use linerate_load::units;

// DNS-01 through RFC 2136
mod acme_dns;
// OpenTelemetry tracing
mod tracing;
use linerate_server::config::{
    AcmeChallenge, AcmeConfig, AcmeEab, Balance, BasicAuth, CertFiles, CertPair, Compression,
    FilesMount, ForwardAuth, ForwardedStyle, HashKey, HealthCheck, JWT_LEEWAY_S, JwtAuth,
    JwtSecret, Managed, ProxyMount, RateKey, RateLimit, RateScope, Upstream, UpstreamAddr,
    UpstreamProtocol, UpstreamServer,
};
use linerate_server::{
    Config, FixedAnswer, HeaderRule, Listen, ListenAddr, Part, Redirect, Site, TlsConfig, UnixPerms,
};

/// What the file says, as the server library's configuration plus what only the binary
/// acts on.
#[derive(Debug)]
pub struct FileConfig {
    pub server: Config,
    /// Sites that mount the demo application (`app = "demo"`).
    pub demo: bool,
    /// Drop to this user after binding (when started as root).
    pub user: Option<String>,
    /// Error-log level.
    pub log_level: Option<String>,
    /// Where each part of `server` was written, so that a start-up error names its line.
    pub places: Places,
    /// `[tracing]` as written: OpenTelemetry's variables fill in what it leaves out (the
    /// server's `tracing` is set from both by `serve`).
    pub tracing: linerate_server::trace::TracingSettings,
}

/// A place in the file: 1-based line and column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Place {
    pub line: usize,
    pub column: usize,
}

/// Where the parts of the configuration were written (see [`Places::error_at`]).
#[derive(Debug, Default)]
pub struct Places {
    file: PathBuf,
    listeners: Vec<Place>,
    admin: Option<Place>,
    cpus: Option<Place>,
    access_log: Option<Place>,
    user: Option<Place>,
    sites: Vec<SitePlaces>,
    upstreams: Vec<Place>,
}

#[derive(Debug, Default)]
struct SitePlaces {
    at: Place,
    access_log: Option<Place>,
    roots: Vec<Place>,
    error_pages: Vec<Place>,
    redirects: Vec<Place>,
    proxies: Vec<Place>,
}

impl Places {
    /// `error` as `FILE:LINE:COLUMN: error` when `part` was written in the file.
    pub fn error_at(&self, part: Part, error: &dyn std::fmt::Display) -> Option<ConfError> {
        let site = |i: usize| self.sites.get(i);
        let place = match part {
            Part::Listener(i) => self.listeners.get(i).copied(),
            Part::Admin => self.admin,
            Part::Cpus => self.cpus,
            Part::AccessLog => self.access_log,
            Part::User => self.user,
            Part::Site(i) => site(i).map(|s| s.at),
            Part::SiteLog(i) => site(i).map(|s| s.access_log.unwrap_or(s.at)),
            Part::Root { site: i, mount } => site(i).and_then(|s| s.roots.get(mount).copied()),
            Part::ErrorPage { site: i, index } => {
                site(i).and_then(|s| s.error_pages.get(index).copied())
            }
            Part::Redirect { site: i, index } => {
                site(i).and_then(|s| s.redirects.get(index).copied())
            }
            Part::Proxy { site: i, index } => site(i).and_then(|s| s.proxies.get(index).copied()),
            Part::Upstream(i) => self.upstreams.get(i).copied(),
            _ => None,
        }?;
        Some(ConfError {
            path: self.file.clone(),
            line: place.line,
            column: place.column,
            message: error.to_string(),
        })
    }

    /// The listeners came from flags, not from the file: their places no longer apply.
    pub fn forget_listeners(&mut self) {
        self.listeners.clear();
    }

    /// The flags set the CPU list: its place no longer applies.
    pub fn forget(&mut self, what: &str) {
        match what {
            "cpus" => self.cpus = None,
            "admin" => self.admin = None,
            "access_log" => self.access_log = None,
            _ => {}
        }
    }
}

/// A mistake in the file, with where it is.
#[derive(Debug)]
pub struct ConfError {
    pub path: PathBuf,
    /// 1-based line and column (0: not known, the file as a whole).
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for ConfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.path.display(), self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: {}",
                self.path.display(),
                self.line,
                self.column,
                self.message
            )
        }
    }
}

impl std::error::Error for ConfError {}

/// The shortest `ticket_rotation`: each rotation is a lock and a write in the shared
/// storage, and every node reads the keys again.
const MIN_TICKET_ROTATION: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    workers: Option<Spanned<usize>>,
    cpus: Option<Spanned<String>>,
    /// The workers' I/O backend: "epoll" or "uring" (`serve --io`).
    io: Option<Spanned<String>>,
    user: Option<Spanned<String>>,
    log_level: Option<Spanned<String>>,
    access_log: Option<Spanned<String>>,
    access_log_format: Option<Spanned<String>>,
    compression: Option<bool>,
    /// Proxies whose X-Forwarded-For / Forwarded name the client (CIDR).
    #[serde(default)]
    trusted_proxies: Vec<Spanned<String>>,
    /// "X-Forwarded-For" (default), "Forwarded" or "X-Real-IP".
    real_ip_field: Option<Spanned<String>>,
    #[serde(default)]
    admin: RawAdmin,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    tls: RawTlsOptions,
    /// Automatic HTTPS: the ACME CA and where obtained certificates are kept.
    acme: Option<Spanned<RawAcme>>,
    /// What a fleet's nodes share: a directory or a Redis server.
    storage: Option<Spanned<RawStorage>>,
    // rollouts
    /// On SIGTERM, how long `/healthz` fails while the node still serves, before the drain.
    shutdown_delay: Option<Spanned<String>>,
    /// Where a binary upgrade's new process takes the listening sockets.
    upgrade_socket: Option<Spanned<String>>,
    /// OpenTelemetry tracing.
    tracing: Option<Spanned<tracing::RawTracing>>,
    /// The field proxied requests carry their request id in (`""`: none).
    request_id_header: Option<Spanned<String>>,
    #[serde(default)]
    listen: Vec<Spanned<RawListen>>,
    #[serde(default)]
    site: Vec<Spanned<RawSite>>,
    #[serde(default)]
    upstream: Vec<Spanned<RawUpstream>>,
}

/// `[[upstream]]`: a group of servers proxy mounts send to.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUpstream {
    name: Spanned<String>,
    /// `"HOST:PORT"`, `"[V6]:PORT"` or `"unix:/PATH"`, each optionally followed by
    /// ` weight=N`.
    servers: Spanned<Vec<Spanned<String>>>,
    max_conns: Option<usize>,
    keepalive: Option<usize>,
    idle_timeout: Option<Spanned<String>>,
    connect_timeout: Option<Spanned<String>>,
    timeout: Option<Spanned<String>>,
    tries: Option<Spanned<u32>>,
    max_fails: Option<u32>,
    fail_timeout: Option<Spanned<String>>,
    /// `"round_robin"`, `"least_conn"` or `"hash"` (with `hash_key`).
    balance: Option<Spanned<String>>,
    /// `"client"`, `"header:NAME"` or `"cookie:NAME"`.
    hash_key: Option<Spanned<String>>,
    health_check: Option<Spanned<RawHealth>>,
    /// `"h1"` (the default), `"h2c"` or `"h2"` (over TLS).
    protocol: Option<Spanned<String>>,
    /// `"h2"`: the name verified in the servers' certificates and sent as SNI.
    tls_server_name: Option<Spanned<String>>,
    /// `"h2"`: a PEM file of the CA certificates trusted instead of the system's roots.
    tls_ca: Option<Spanned<String>>,
}

/// `health_check = { path, interval, timeout, status, passes, fails }` of an upstream;
/// an HTTP/2 upstream's has `grpc_service` in place of `path` and `status`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHealth {
    path: Option<Spanned<String>>,
    grpc_service: Option<Spanned<String>>,
    interval: Option<Spanned<String>>,
    timeout: Option<Spanned<String>>,
    status: Option<Spanned<u16>>,
    passes: Option<Spanned<u32>>,
    fails: Option<Spanned<u32>>,
}

/// `[[site.proxy]]`: a path prefix sent to an upstream.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProxy {
    #[serde(default = "slash")]
    prefix: Spanned<String>,
    upstream: Spanned<String>,
    rewrite: Option<Spanned<String>>,
    host: Option<Spanned<String>>,
    forwarded: Option<Spanned<String>>,
    #[serde(default)]
    trust_forwarded: bool,
    #[serde(default = "yes")]
    request_buffering: bool,
    #[serde(default = "no_fields")]
    set_request: Spanned<BTreeMap<String, String>>,
    #[serde(default)]
    remove_request: Vec<String>,
    #[serde(default = "no_fields")]
    set_response: Spanned<BTreeMap<String, String>>,
    #[serde(default)]
    remove_response: Vec<String>,
    auth: Option<Spanned<RawAuth>>,
    upgrades: Option<Spanned<Vec<String>>>,
    cache: Option<Spanned<RawCache>>,
    /// gRPC-Web translated to gRPC for an HTTP/2 upstream.
    grpc_web: Option<Spanned<bool>>,
}

/// `cache = { size, max_object, heuristic, status, set_cookie, lock_timeout, tier,
/// tier_timeout, use_stale, stale_max, client_no_cache, key, query_drop, query_sort, valid,
/// ignore, convert_head, bypass, no_store, preset }` of a proxy mount (`cache = {}` takes
/// every default).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCache {
    size: Option<Spanned<String>>,
    max_object: Option<Spanned<String>>,
    #[serde(default)]
    heuristic: bool,
    /// The name in `Cache-Status`, or `false` for no field.
    status: Option<Spanned<toml::Value>>,
    /// `"never"` (the default) or `"explicit"` (dangerous: replays cookies).
    set_cookie: Option<Spanned<String>>,
    lock_timeout: Option<Spanned<String>>,
    /// A shared second tier: `redis://…`, `valkey://…` or `memcached://…`.
    tier: Option<Spanned<String>>,
    tier_timeout: Option<Spanned<String>>,
    // stale by policy
    /// nginx's `proxy_cache_use_stale` names: `error`, `timeout`, `updating`, `http_5xx`.
    use_stale: Option<Spanned<Vec<Spanned<String>>>>,
    /// How far past freshness any stale answer may be (Varnish's grace).
    stale_max: Option<Spanned<String>>,
    // what a client may force
    /// `"ignore"` (the default) or `"revalidate"`.
    client_no_cache: Option<Spanned<String>>,
    // the key
    /// `["host", "path", "query", "cookie:lang"]`: the key's parts.
    key: Option<Spanned<Vec<String>>>,
    /// `["utm_*", "fbclid"]`: query parameters left out of the key.
    query_drop: Option<Spanned<Vec<String>>>,
    /// The query's parameters sorted in the key.
    query_sort: Option<bool>,
    // TTL and origin fields
    /// `{ "200 301" = "10m", "404" = "1m", any = "30s" }`: lifetimes for answers without
    /// freshness.
    valid: Option<Spanned<std::collections::BTreeMap<String, Spanned<String>>>>,
    /// `["Cache-Control", "Expires", "Set-Cookie", "Vary"]`: origin fields not obeyed.
    ignore: Option<Spanned<Vec<String>>>,
    // HEAD fills as GET
    /// A HEAD on a cold key goes up as GET (the default).
    convert_head: Option<bool>,
    // bypass and no-store rules
    /// `[{ cookie = "sessionid" }, { path = "/admin/" }]`: not answered from the cache.
    bypass: Option<Vec<Spanned<RawCacheRule>>>,
    /// The same rules: answers not stored.
    no_store: Option<Vec<Spanned<RawCacheRule>>>,
    /// `"hardened"`: bypass and no_store on any Cookie and on Authorization.
    preset: Option<Spanned<String>>,
    // purge as operators use it
    /// Who may send `PURGE`: addresses or CIDR ranges (none: 405 for everyone).
    #[serde(default)]
    purge_from: Vec<Spanned<String>>,
}

/// A rule of a cache's `bypass` or `no_store`: one of `cookie`, `header`
/// (with an optional `value`), `path`, `method`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCacheRule {
    cookie: Option<String>,
    header: Option<String>,
    value: Option<String>,
    path: Option<String>,
    method: Option<String>,
}

/// `auth = { upstream = "…", path = "/verify", pass = […], copy = […] }` of a proxy mount.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    upstream: Spanned<String>,
    #[serde(default = "slash")]
    path: Spanned<String>,
    #[serde(default)]
    pass: Vec<String>,
    #[serde(default)]
    copy: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawAdmin {
    addr: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_head_bytes: Option<Spanned<String>>,
    max_headers: Option<usize>,
    max_body_bytes: Option<Spanned<String>>,
    max_stream_body_bytes: Option<Spanned<String>>,
    max_requests_per_conn: Option<u64>,
    max_conns_per_client: Option<u32>,
    header_timeout: Option<Spanned<String>>,
    body_timeout: Option<Spanned<String>>,
    min_body_rate: Option<Spanned<String>>,
    keepalive_timeout: Option<Spanned<String>>,
    send_timeout: Option<Spanned<String>>,
    min_send_rate: Option<Spanned<String>>,
    max_unsent_bytes: Option<Spanned<String>>,
    drain_timeout: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTlsOptions {
    ktls: Option<bool>,
    /// Offer `h2` in ALPN (default true).
    http2: Option<bool>,
    key_update: Option<Spanned<String>>,
    // Defaults for every TLS listener (each can set its own in its `tls = {…}`).
    min_version: Option<Spanned<String>>,
    ciphers: Option<Spanned<Vec<String>>>,
    alpn: Option<Spanned<Vec<String>>>,
    session_cache: Option<Spanned<usize>>,
    session_tickets: Option<bool>,
    session_lifetime: Option<Spanned<String>>,
    client_ca: Option<Spanned<String>>,
    client_auth: Option<Spanned<String>>,
    // ticket keys
    /// nginx's `ssl_session_ticket_key` files, the first sealing.
    ticket_keys: Option<Spanned<Vec<Spanned<String>>>>,
    /// With `[storage]`: how often the fleet's shared key is replaced (`[tls]` only).
    ticket_rotation: Option<Spanned<String>>,
}

/// The handshake options of a listener's `tls = {…}` or of `[tls]`, borrowed.
#[derive(Default)]
struct HandshakeKeys<'a> {
    ocsp: Option<&'a Spanned<String>>,
    min_version: Option<&'a Spanned<String>>,
    ciphers: Option<&'a Spanned<Vec<String>>>,
    alpn: Option<&'a Spanned<Vec<String>>>,
    session_cache: Option<&'a Spanned<usize>>,
    session_tickets: Option<bool>,
    session_lifetime: Option<&'a Spanned<String>>,
    client_ca: Option<&'a Spanned<String>>,
    client_auth: Option<&'a Spanned<String>>,
    ticket_keys: Option<&'a Spanned<Vec<Spanned<String>>>>,
}

impl<'a> HandshakeKeys<'a> {
    fn of_listener(t: &'a RawListenTls) -> Self {
        HandshakeKeys {
            ocsp: t.ocsp.as_ref(),
            min_version: t.min_version.as_ref(),
            ciphers: t.ciphers.as_ref(),
            alpn: t.alpn.as_ref(),
            session_cache: t.session_cache.as_ref(),
            session_tickets: t.session_tickets,
            session_lifetime: t.session_lifetime.as_ref(),
            client_ca: t.client_ca.as_ref(),
            client_auth: t.client_auth.as_ref(),
            ticket_keys: t.ticket_keys.as_ref(),
        }
    }

    fn of_defaults(t: &'a RawTlsOptions) -> Self {
        HandshakeKeys {
            ocsp: None,
            min_version: t.min_version.as_ref(),
            ciphers: t.ciphers.as_ref(),
            alpn: t.alpn.as_ref(),
            session_cache: t.session_cache.as_ref(),
            session_tickets: t.session_tickets,
            session_lifetime: t.session_lifetime.as_ref(),
            client_ca: t.client_ca.as_ref(),
            client_auth: t.client_auth.as_ref(),
            ticket_keys: t.ticket_keys.as_ref(),
        }
    }
}

/// `[acme]`: the CA that issues the certificates of sites with `tls = "acme"`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAcme {
    directory: Option<Spanned<String>>,
    email: Option<Spanned<String>>,
    storage: Option<Spanned<String>>,
    ca_roots: Option<Spanned<String>>,
    challenge: Option<Spanned<String>>,
    eab_kid: Option<Spanned<String>>,
    eab_hmac_key: Option<Spanned<String>>,
    // DNS-01 through RFC 2136
    dns: Option<Spanned<acme_dns::RawAcmeDns>>,
}

/// `[storage]`: what a fleet's nodes share (exactly one of `dir` and `redis`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStorage {
    dir: Option<Spanned<String>>,
    redis: Option<Spanned<String>>,
    nodes: Option<Spanned<u32>>,
}

/// A TLS listener's `tls = { cert, key, … }`: its certificate (none when every name's is a
/// site's obtained by the server) and its handshake options (each falling back to `[tls]`'s).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawListenTls {
    cert: Option<Spanned<String>>,
    key: Option<Spanned<String>>,
    ocsp: Option<Spanned<String>>,
    min_version: Option<Spanned<String>>,
    ciphers: Option<Spanned<Vec<String>>>,
    alpn: Option<Spanned<Vec<String>>>,
    session_cache: Option<Spanned<usize>>,
    session_tickets: Option<bool>,
    session_lifetime: Option<Spanned<String>>,
    client_ca: Option<Spanned<String>>,
    client_auth: Option<Spanned<String>>,
    // ticket keys
    ticket_keys: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawListen {
    addr: Option<Spanned<String>>,
    unix: Option<Spanned<String>>,
    tls: Option<Spanned<RawListenTls>>,
    /// Cleartext HTTP/2 with prior knowledge only.
    h2c: Option<Spanned<bool>>,
    /// HTTP/1.1, and HTTP/2 with prior knowledge for a connection opening with its preface.
    h2c_preface: Option<Spanned<bool>>,
    /// Every request answered with a 308 to HTTPS.
    redirect_to_https: Option<Spanned<bool>>,
    /// Connections start with a PROXY protocol header.
    proxy_protocol: Option<Spanned<bool>>,
    /// HTTP/3 over QUIC on the same address's UDP port (TLS listeners).
    quic: Option<Spanned<bool>>,
    /// A Unix socket's owner, group and mode.
    owner: Option<Spanned<String>>,
    group: Option<Spanned<String>>,
    mode: Option<Spanned<String>>,
    // the public HTTPS port
    /// The port `redirect_to_https` names, as clients see it (a balancer's 443).
    https_port: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCert {
    cert: Spanned<String>,
    key: Spanned<String>,
    ocsp: Option<Spanned<String>>,
}

/// A site's `tls`: `{ cert, key, ocsp }`, or the word "acme" or "internal".
enum RawSiteTls {
    Files(RawCert),
    Managed(String),
}

impl<'de> Deserialize<'de> for RawSiteTls {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RawSiteTls, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = RawSiteTls;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("\"acme\", \"internal\" or { cert = \"…\", key = \"…\" }")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawSiteTls, E> {
                Ok(RawSiteTls::Managed(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<RawSiteTls, A::Error> {
                RawCert::deserialize(serde::de::value::MapAccessDeserializer::new(m))
                    .map(RawSiteTls::Files)
            }
        }
        d.deserialize_any(Either)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSite {
    #[serde(default)]
    names: Vec<Spanned<String>>,
    #[serde(default)]
    default: bool,
    app: Option<Spanned<String>>,
    index: Option<Spanned<String>>,
    #[serde(default)]
    dotfiles: bool,
    compression: Option<bool>,
    max_body_bytes: Option<Spanned<String>>,
    #[serde(default)]
    root: Vec<Spanned<RawRoot>>,
    #[serde(default)]
    redirect: Vec<Spanned<RawRedirect>>,
    #[serde(default, rename = "return")]
    returns: Vec<Spanned<RawReturn>>,
    #[serde(default)]
    proxy: Vec<Spanned<RawProxy>>,
    #[serde(default)]
    access: Vec<Spanned<RawAccess>>,
    #[serde(default)]
    rate_limit: Vec<Spanned<RawRateLimit>>,
    #[serde(default)]
    basic_auth: Vec<Spanned<RawBasicAuth>>,
    #[serde(default)]
    jwt: Vec<Spanned<RawJwt>>,
    /// The certificate for the site's names, chosen by SNI on every TLS listener: files, or
    /// "acme" / "internal" (obtained by the server).
    tls: Option<Spanned<RawSiteTls>>,
    #[serde(default)]
    headers: Vec<Spanned<RawHeaders>>,
    #[serde(default)]
    error_pages: BTreeMap<Spanned<String>, Spanned<String>>,
    /// Content types by extension: `types = { wasm = "application/wasm" }`.
    #[serde(default)]
    types: BTreeMap<Spanned<String>, Spanned<String>>,
    /// The site's own access log (instead of the server's), and its format.
    access_log: Option<Spanned<String>>,
    access_log_format: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoot {
    #[serde(default = "slash")]
    prefix: Spanned<String>,
    dir: Spanned<String>,
    /// Paths tried for a request that finds no file (`{path}`, `/index.html`, …).
    try_files: Option<Spanned<Vec<String>>>,
    /// List directories without an index.
    #[serde(default)]
    listing: bool,
}

fn no_fields() -> Spanned<BTreeMap<String, String>> {
    Spanned::new(0..0, BTreeMap::new())
}

fn yes() -> bool {
    true
}

fn slash() -> Spanned<String> {
    Spanned::new(0..0, "/".to_string())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAccess {
    #[serde(default = "slash")]
    prefix: Spanned<String>,
    rules: Spanned<Vec<Spanned<String>>>,
}

/// `[[site.rate_limit]]`: requests per key under a prefix.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRateLimit {
    #[serde(default = "slash")]
    prefix: Spanned<String>,
    /// `"10r/s"`, `"30r/m"`.
    rate: Spanned<String>,
    #[serde(default)]
    burst: u32,
    /// `"client"` (default) or `"header:NAME"`.
    key: Option<Spanned<String>>,
    // fleet-wide rate limits
    /// `"node"` (default) or `"fleet"` (counted in `[storage] redis`).
    scope: Option<Spanned<String>>,
    /// A fleet rule's rate on each node while Redis is down (default: `rate` ÷ `nodes`).
    local_rate: Option<Spanned<String>>,
    /// The rule's `rule` label in the metrics.
    name: Option<Spanned<String>>,
}

/// `[[site.basic_auth]]`: users of an htpasswd file under a prefix.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBasicAuth {
    #[serde(default = "slash")]
    prefix: Spanned<String>,
    htpasswd: Spanned<String>,
    realm: Option<String>,
}

/// `[[site.jwt]]`: HS256 bearer tokens under a prefix.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJwt {
    #[serde(default = "slash")]
    prefix: Spanned<String>,
    /// Exactly one of the two: a file, or an environment variable's name.
    secret_file: Option<Spanned<String>>,
    secret_env: Option<Spanned<String>>,
    realm: Option<String>,
    issuer: Option<String>,
    audience: Option<String>,
    #[serde(default)]
    require: Vec<String>,
    #[serde(default = "yes")]
    require_exp: bool,
    /// `"30s"` (the default), `"0s"`.
    leeway: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRedirect {
    /// Requests whose path starts with this, or (`path`) is exactly this.
    prefix: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    to: Spanned<String>,
    status: Option<Spanned<u16>>,
}

/// `[[site.return]]`: a fixed answer at a path or below a prefix.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReturn {
    prefix: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    status: Option<Spanned<u16>>,
    #[serde(default)]
    body: String,
    content_type: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHeaders {
    prefix: Option<Spanned<String>>,
    #[serde(default)]
    extensions: Vec<String>,
    fields: Spanned<BTreeMap<String, String>>,
    #[serde(default = "yes")]
    proxied: bool,
}

/// `redirect_to_https` without `https_port`, until every listener is read: then the first
/// TLS listener's port (443 with none: a TLS terminator in front). Never a port itself
/// (`https_port = 0` is refused).
const TLS_LISTENER_PORT: u16 = 0;

/// Reads and checks `path` (through the privilege keeper, so a server that dropped root
/// still reads a root-only file on SIGHUP).
pub fn load(path: &Path) -> Result<FileConfig, ConfError> {
    parse(&read(path)?, path)
}

/// The text of `path` as read (through the privilege keeper), before any check: what
/// [`parse`] takes and what the configuration's hash is of.
pub fn read(path: &Path) -> Result<String, ConfError> {
    linerate_server::privsep::read_to_string(path).map_err(|e| ConfError {
        path: path.to_path_buf(),
        line: 0,
        column: 0,
        message: format!("cannot read: {e}"),
    })
}

/// Checks `text`, the contents of `path` (relative paths in it are from `path`'s directory).
pub fn parse(text: &str, path: &Path) -> Result<FileConfig, ConfError> {
    let cx = Cx {
        text,
        path,
        dir: path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new(".")),
    };
    let raw: Raw = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        cx.err(span, e.message().trim_end().replace('\n', " "))
    })?;
    cx.build(raw)
}

struct Cx<'a> {
    text: &'a str,
    path: &'a Path,
    dir: &'a Path,
}

impl Cx<'_> {
    fn err(&self, span: Range<usize>, message: impl Into<String>) -> ConfError {
        let Place { line, column } = self.place(span);
        ConfError {
            path: self.path.to_path_buf(),
            line,
            column,
            message: message.into(),
        }
    }

    /// The span from byte `at` of a string value, when the file spells the value as is (a
    /// literal string, or a basic one without escapes); else the whole value's span.
    fn within(&self, v: &Spanned<String>, at: usize) -> Range<usize> {
        let span = v.span();
        let raw = self
            .text
            .get(span.start + 1..span.end.saturating_sub(1).max(span.start + 1));
        if raw == Some(v.get_ref().as_str()) && at <= v.get_ref().len() {
            span.start + 1 + at..span.end
        } else {
            span
        }
    }

    fn place(&self, span: Range<usize>) -> Place {
        let at = span.start.min(self.text.len());
        let before = &self.text[..at];
        Place {
            line: before.matches('\n').count() + 1,
            column: before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1,
        }
    }

    /// A timeout: more than 0 (a zero would expire at once). `instead` says what to write
    /// for what a zero might have meant ("" when nothing).
    fn timeout(
        &self,
        v: &Spanned<String>,
        what: &str,
        instead: &str,
    ) -> Result<std::time::Duration, ConfError> {
        units::timeout(v.get_ref()).map_err(|e| self.err(v.span(), format!("{what}: {e}{instead}")))
    }

    /// A duration where 0 has a meaning of its own (the key's documentation says which).
    fn duration_or_zero(
        &self,
        v: &Spanned<String>,
        what: &str,
    ) -> Result<std::time::Duration, ConfError> {
        units::duration(v.get_ref()).map_err(|e| self.err(v.span(), format!("{what}: {e}")))
    }

    fn size(&self, v: &Spanned<String>, what: &str) -> Result<u64, ConfError> {
        // The error has its own example: one hint, not two.
        units::size(v.get_ref()).map_err(|e| self.err(v.span(), format!("{what}: {e}")))
    }

    fn size_or_zero(&self, v: &Spanned<String>, what: &str) -> Result<u64, ConfError> {
        units::size_or_zero(v.get_ref())
            .map_err(|e| self.err(v.span(), format!("{what}: {e} (or 0 for none)")))
    }

    /// A path from the file, relative to its directory.
    /// An `access_log` value: `-` for stdout, else a file.
    fn log_target(&self, v: &Spanned<String>) -> linerate_server::LogTarget {
        if v.get_ref() == "-" {
            linerate_server::LogTarget::Stdout
        } else {
            linerate_server::LogTarget::File(self.path(v))
        }
    }

    /// An `access_log_format` value; a template's mistake names its place in the value.
    fn log_format(
        &self,
        f: &Spanned<String>,
    ) -> Result<linerate_server::access_log::LogFormat, ConfError> {
        use linerate_server::access_log::{LogFormat, LogFormatError};
        LogFormat::parse(f.get_ref()).map_err(|e| match e {
            LogFormatError::Unknown => self.err(f.span(), format!("access_log_format {e}")),
            LogFormatError::Template(t) => {
                self.err(self.within(f, t.at()), format!("access_log_format: {t}"))
            }
        })
    }

    fn path(&self, v: &Spanned<String>) -> PathBuf {
        let p = Path::new(v.get_ref());
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.dir.join(p)
        }
    }

    fn existing_file(&self, v: &Spanned<String>, what: &str) -> Result<PathBuf, ConfError> {
        let p = self.path(v);
        // Through the keeper only when the system refuses (a reload after a drop).
        let meta = match std::fs::metadata(&p) {
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                linerate_server::privsep::open_read(&p).and_then(|f| f.metadata())
            }
            m => m,
        };
        match meta {
            Ok(m) if m.is_file() => Ok(p),
            Ok(_) => Err(self.err(v.span(), format!("{what} {} is not a file", p.display()))),
            Err(e) => Err(self.err(v.span(), format!("{what} {}: {e}", p.display()))),
        }
    }

    fn build(&self, raw: Raw) -> Result<FileConfig, ConfError> {
        let mut c = Config::default();
        let mut places = Places {
            file: self.path.to_path_buf(),
            ..Places::default()
        };
        if let Some(w) = &raw.workers {
            if *w.get_ref() == 0 {
                return Err(self.err(w.span(), "workers must be at least 1"));
            }
            c.workers = *w.get_ref();
        }
        if let Some(io) = &raw.io {
            c.io = match io.get_ref().as_str() {
                "epoll" => linerate_server::Io::Epoll,
                "uring" => linerate_server::Io::Uring,
                other => {
                    return Err(self.err(
                        io.span(),
                        format!("io: \"{other}\" is not a backend (\"epoll\" or \"uring\")"),
                    ));
                }
            };
        }
        if let Some(cpus) = &raw.cpus {
            c.cpus = units::cpus(cpus.get_ref())
                .map_err(|e| self.err(cpus.span(), format!("cpus: {e}")))?;
            // What start-up would find: a CPU this process may not run on.
            let allowed = linerate_server::allowed_cpus();
            if let Some(bad) = c.cpus.iter().find(|c| !allowed.contains(c)) {
                return Err(self.err(
                    cpus.span(),
                    format!(
                        "cpus: CPU {bad} is not available to this process (it may use {})",
                        units::format_cpu_list(&allowed)
                    ),
                ));
            }
            places.cpus = Some(self.place(cpus.span()));
        }
        if let Some(level) = &raw.log_level
            && !["error", "warn", "info", "debug", "trace", "off"]
                .contains(&level.get_ref().as_str())
        {
            return Err(self.err(
                level.span(),
                "log_level must be error, warn, info, debug, trace or off",
            ));
        }
        if let Some(log) = &raw.access_log {
            places.access_log = Some(self.place(log.span()));
            c.access_log = Some(self.log_target(log));
        }
        if let Some(f) = &raw.access_log_format {
            c.access_log_format = self.log_format(f)?;
        }
        if let Some(a) = &raw.admin.addr {
            places.admin = Some(self.place(a.span()));
            c.admin = Some(a.get_ref().parse::<SocketAddr>().map_err(|_| {
                self.err(
                    a.span(),
                    format!(
                        "invalid admin address {:?} (e.g. \"127.0.0.1:9090\")",
                        a.get_ref()
                    ),
                )
            })?);
        }
        c.compression = Compression {
            enabled: raw.compression.unwrap_or(true),
            ..Compression::default()
        };
        self.limits(&raw.limits, &mut c)?;
        for t in &raw.trusted_proxies {
            c.trusted_proxies.ranges.push(
                linerate_server::access::IpRange::parse(t.get_ref())
                    .map_err(|e| self.err(t.span(), format!("trusted_proxies: {e}")))?,
            );
        }
        if let Some(f) = &raw.real_ip_field {
            c.trusted_proxies.field = linerate_server::realip::RealIpField::parse(f.get_ref())
                .map_err(|e| self.err(f.span(), format!("real_ip_field: {e}")))?;
        }
        let ktls = raw.tls.ktls.unwrap_or(true);
        let http2 = raw.tls.http2.unwrap_or(true);
        let key_update = match &raw.tls.key_update {
            Some(v) => self.size(v, "key_update")?,
            None => linerate_server::tls::TLS_KEY_UPDATE_BYTES,
        };
        self.tls_options(None, &raw.tls)?;
        if raw.listen.is_empty() {
            return Err(self.err(0..0, "no [[listen]] section: say where to listen"));
        }
        // Sites whose certificates the server obtains: a TLS listener needs none of its own.
        let managed = raw.site.iter().any(|s| {
            matches!(
                s.get_ref().tls.as_ref().map(Spanned::get_ref),
                Some(RawSiteTls::Managed(_))
            )
        });
        c.acme = match &raw.acme {
            Some(a) => Some(self.acme(a)?),
            None if managed => Some(linerate_server::config::AcmeConfig::default()),
            None => None,
        };
        c.storage = match &raw.storage {
            Some(st) => Some(self.storage(st)?),
            None => None,
        };
        if let Some(v) = &raw.tls.ticket_rotation {
            c.ticket_rotation = self.ticket_rotation(v, c.storage.is_some())?;
        }
        // rollouts
        if let Some(v) = &raw.shutdown_delay {
            c.shutdown_delay = self.duration_or_zero(v, "shutdown_delay")?;
        }
        c.upgrade_socket = raw.upgrade_socket.as_ref().map(|p| self.path(p));
        let tracing = match &raw.tracing {
            Some(t) => self.tracing(t)?,
            None => Default::default(),
        };
        if let Some(v) = &raw.request_id_header {
            c.request_id_field = self.request_id_header(v)?;
        }
        for l in &raw.listen {
            let listen = self.listen(l, ktls, key_update, http2, &raw.tls, managed)?;
            // What start-up would find: two listeners on one address (or one port, where one
            // of them is the wildcard address of its family).
            if let Some(i) = c
                .listeners
                .iter()
                .position(|o| overlap(&o.addr, &listen.addr))
            {
                return Err(self.err(
                    l.span(),
                    format!(
                        "listener {} overlaps the one at line {} ({})",
                        listen.addr, places.listeners[i].line, c.listeners[i].addr
                    ),
                ));
            }
            places.listeners.push(self.place(l.span()));
            c.listeners.push(listen);
        }
        // redirect_to_https goes to the first TLS listener's port (443 with none here: a TLS
        // terminator in front).
        let https_port = c.listeners.iter().find_map(|l| match (&l.tls, &l.addr) {
            (Some(_), ListenAddr::Tcp(a)) => Some(a.port()),
            _ => None,
        });
        for l in c.listeners.iter_mut() {
            if l.redirect_to_https == Some(TLS_LISTENER_PORT) {
                l.redirect_to_https = Some(https_port.unwrap_or(443));
            }
        }
        if raw.site.is_empty() {
            return Err(self.err(0..0, "no [[site]] section: say what to serve"));
        }
        for u in &raw.upstream {
            let upstream = self.upstream(u)?;
            if c.upstreams.iter().any(|o| o.name == upstream.name) {
                return Err(self.err(
                    u.get_ref().name.span(),
                    format!("a second upstream named {:?}", upstream.name),
                ));
            }
            places.upstreams.push(self.place(u.span()));
            c.upstreams.push(upstream);
        }
        // a fleet rule's counts live in [storage] redis.
        if c.storage.as_ref().is_none_or(|st| st.redis.is_none()) {
            for s in &raw.site {
                for l in &s.get_ref().rate_limit {
                    if let Some(scope) = &l.get_ref().scope
                        && scope.get_ref() == "fleet"
                    {
                        return Err(self.err(
                            scope.span(),
                            "scope = \"fleet\" counts in the fleet's Redis: it needs [storage] redis = \"redis://…\"",
                        ));
                    }
                }
            }
        }
        let mut demo = false;
        let mut seen: Vec<(String, Range<usize>)> = Vec::new();
        let mut defaults = 0;
        let tls_listener = c.listeners.iter().any(|l| l.tls.is_some());
        let dns01 = c
            .acme
            .as_ref()
            .is_some_and(|a| a.challenge == AcmeChallenge::Dns01);
        for s in &raw.site {
            if let Some(t) = &s.get_ref().tls
                && !tls_listener
            {
                return Err(self.err(
                    t.span(),
                    "a site's certificate is chosen on a TLS listener, and no [[listen]] has tls",
                ));
            }
            let (site, at) = self.site(s, &mut seen, &c.upstreams, dns01)?;
            places.sites.push(at);
            demo |= site.app;
            if site.default {
                defaults += 1;
                if defaults > 1 {
                    return Err(self.err(s.span(), "more than one site says default = true"));
                }
            }
            c.sites.push(site);
        }
        if let Some(u) = &raw.user {
            // What the drop at start would find.
            linerate_server::privsep::user_exists(u.get_ref())
                .map_err(|e| self.err(u.span(), format!("user: {e}")))?;
            places.user = Some(self.place(u.span()));
        }
        Ok(FileConfig {
            server: c,
            demo,
            user: raw.user.map(Spanned::into_inner),
            log_level: raw.log_level.map(Spanned::into_inner),
            places,
            tracing,
        })
    }

    fn limits(&self, l: &RawLimits, c: &mut Config) -> Result<(), ConfError> {
        if let Some(v) = &l.max_head_bytes {
            c.limits.max_head_bytes = self.size(v, "max_head_bytes")? as usize;
        }
        if let Some(v) = l.max_headers {
            c.limits.max_headers = v;
        }
        if let Some(v) = &l.max_body_bytes {
            c.max_body_bytes = self.size(v, "max_body_bytes")?;
        }
        if let Some(v) = &l.max_stream_body_bytes {
            c.max_stream_body_bytes = self.size(v, "max_stream_body_bytes")?;
        }
        if let Some(v) = l.max_requests_per_conn {
            c.max_requests_per_conn = v;
        }
        if let Some(v) = l.max_conns_per_client {
            // Set: every address counts, loopback too (the default leaves it out).
            c.max_conns_per_client = v;
            c.count_loopback_clients = true;
        }
        if let Some(v) = &l.min_body_rate {
            c.min_body_rate = self.size_or_zero(v, "min_body_rate")?;
        }
        if let Some(v) = &l.min_send_rate {
            c.min_send_rate = self.size_or_zero(v, "min_send_rate")?;
        }
        if let Some(v) = &l.max_unsent_bytes {
            c.max_unsent_bytes = self.size_or_zero(v, "max_unsent_bytes")?;
        }
        let timeouts = [
            (
                &l.header_timeout,
                "header_timeout",
                &mut c.header_timeout,
                "",
            ),
            (&l.body_timeout, "body_timeout", &mut c.body_timeout, ""),
            (
                &l.keepalive_timeout,
                "keepalive_timeout",
                &mut c.keepalive_timeout,
                "; max_requests_per_conn = 1 closes each connection after its answer",
            ),
            (&l.send_timeout, "send_timeout", &mut c.send_timeout, ""),
        ];
        for (v, what, into, instead) in timeouts {
            if let Some(v) = v {
                *into = self.timeout(v, what, instead)?;
            }
        }
        // 0: exit at SIGTERM without waiting for requests in flight.
        if let Some(v) = &l.drain_timeout {
            c.drain_timeout = self.duration_or_zero(v, "drain_timeout")?;
        }
        Ok(())
    }

    /// `[storage]`: a shared directory or a Redis server, and the fleet's size.
    fn storage(
        &self,
        st: &Spanned<RawStorage>,
    ) -> Result<linerate_server::config::StorageConfig, ConfError> {
        let raw = st.get_ref();
        let (dir, redis) = match (&raw.dir, &raw.redis) {
            (Some(d), None) => (Some(self.path(d)), None),
            (None, Some(r)) => {
                let url = r.get_ref();
                // The server's own reading, so that what serve refuses is refused here.
                if let Err(why) = linerate_server::storage::redis_url::parse(url) {
                    return Err(self.err(r.span(), format!("redis: {why}")));
                }
                (None, Some(url.clone()))
            }
            (Some(_), Some(r)) => {
                return Err(self.err(
                    r.span(),
                    "[storage] takes dir or redis, not both: the fleet shares one store",
                ));
            }
            (None, None) => {
                return Err(self.err(
                    st.span(),
                    "[storage] needs dir = \"…\" (a directory every node mounts) or redis = \"redis://…\"",
                ));
            }
        };
        let nodes = match &raw.nodes {
            Some(n) if *n.get_ref() == 0 => {
                return Err(self.err(n.span(), "nodes must be at least 1"));
            }
            Some(n) => *n.get_ref(),
            None => 1,
        };
        Ok(linerate_server::config::StorageConfig { dir, redis, nodes })
    }

    /// `[acme]`: every key has a default but the EAB, which needs both its keys.
    fn acme(&self, a: &Spanned<RawAcme>) -> Result<AcmeConfig, ConfError> {
        let raw = a.get_ref();
        let mut c = AcmeConfig::default();
        if let Some(d) = &raw.directory {
            let url = d.get_ref();
            if !url.starts_with("https://") || url.len() <= "https://".len() {
                return Err(self.err(
                    d.span(),
                    format!(
                        "directory must be an https:// URL (an ACME CA's directory), not {url:?}"
                    ),
                ));
            }
            c.directory = url.clone();
        }
        if let Some(e) = &raw.email {
            let email = e.get_ref();
            let valid = email.split_once('@').is_some_and(|(user, host)| {
                !user.is_empty() && host.contains('.') && !email.contains(char::is_whitespace)
            });
            if !valid {
                return Err(self.err(
                    e.span(),
                    format!("email {email:?} is not an e-mail address"),
                ));
            }
            c.email = Some(email.clone());
        }
        if let Some(s) = &raw.storage {
            c.storage = self.path(s);
        }
        if let Some(r) = &raw.ca_roots {
            c.ca_roots = Some(self.existing_file(r, "ACME CA roots")?);
        }
        if let Some(ch) = &raw.challenge {
            c.challenge = match ch.get_ref().as_str() {
                "http-01" => AcmeChallenge::Http01,
                "tls-alpn-01" => AcmeChallenge::TlsAlpn01,
                "dns-01" => AcmeChallenge::Dns01,
                other => {
                    return Err(self.err(
                        ch.span(),
                        format!(
                            "challenge must be \"http-01\", \"tls-alpn-01\" or \"dns-01\", not {other:?}"
                        ),
                    ));
                }
            };
        }
        c.dns = self.acme_dns(raw.challenge.as_ref(), raw.dns.as_ref())?;
        c.eab = match (&raw.eab_kid, &raw.eab_hmac_key) {
            (Some(kid), Some(key)) => {
                use base64::Engine;
                let hmac_key = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(key.get_ref().trim_end_matches('='))
                    .map_err(|e| {
                        self.err(key.span(), format!("eab_hmac_key is not base64url: {e}"))
                    })?;
                Some(AcmeEab {
                    kid: kid.get_ref().clone(),
                    hmac_key,
                })
            }
            (None, None) => None,
            (Some(k), None) => return Err(self.err(k.span(), "eab_kid without eab_hmac_key")),
            (None, Some(k)) => return Err(self.err(k.span(), "eab_hmac_key without eab_kid")),
        };
        Ok(c)
    }

    fn listen(
        &self,
        l: &Spanned<RawListen>,
        ktls: bool,
        key_update_bytes: u64,
        http2: bool,
        defaults: &RawTlsOptions,
        managed: bool,
    ) -> Result<Listen, ConfError> {
        let raw = l.get_ref();
        let addr = match (&raw.addr, &raw.unix) {
            (Some(a), None) => {
                ListenAddr::Tcp(a.get_ref().parse::<SocketAddr>().map_err(|_| {
                    self.err(
                        a.span(),
                        format!(
                            "invalid listen address {:?} (e.g. \"0.0.0.0:80\", \"[::]:443\")",
                            a.get_ref()
                        ),
                    )
                })?)
            }
            (None, Some(u)) => ListenAddr::Unix(self.path(u)),
            (Some(_), Some(u)) => {
                return Err(self.err(u.span(), "a listener has addr or unix, not both"));
            }
            (None, None) => {
                return Err(self.err(
                    l.span(),
                    "a [[listen]] needs addr = \"IP:PORT\" or unix = \"PATH\"",
                ));
            }
        };
        let tls = match &raw.tls {
            None => None,
            Some(t) => {
                if matches!(addr, ListenAddr::Unix(_)) {
                    return Err(self.err(t.span(), "TLS on a Unix socket is not supported"));
                }
                let cert = match (&t.get_ref().cert, &t.get_ref().key) {
                    (Some(c), Some(k)) => Some(CertPair {
                        cert: self.existing_file(c, "certificate")?,
                        key: self.existing_file(k, "private key")?,
                    }),
                    (None, None) if managed => None,
                    (None, None) => {
                        return Err(self.err(
                            t.span(),
                            "a tls listener needs cert and key (they may be left out only when sites have tls = \"acme\" or \"internal\")",
                        ));
                    }
                    (Some(_), None) => return Err(self.err(t.span(), "cert without key")),
                    (None, Some(_)) => return Err(self.err(t.span(), "key without cert")),
                };
                let options = self.tls_options(Some(t.get_ref()), defaults)?;
                let tls = TlsConfig {
                    addr: match addr {
                        ListenAddr::Tcp(a) => a,
                        ListenAddr::Unix(_) => unreachable!("refused above"),
                    },
                    cert,
                    ktls,
                    key_update_bytes,
                    http2: if options.alpn.is_empty() {
                        http2
                    } else {
                        options.alpn.iter().any(|p| p == "h2")
                    },
                    options,
                };
                if let Err(e) = linerate_server::tls::server_config(&tls) {
                    return Err(self.err(t.span(), e.to_string()));
                }
                Some(tls)
            }
        };
        let h2c = match &raw.h2c {
            Some(h) if *h.get_ref() && tls.is_some() => {
                return Err(self.err(
                    h.span(),
                    "h2c is cleartext HTTP/2; a tls listener offers h2 through ALPN",
                ));
            }
            Some(h) => *h.get_ref(),
            None => false,
        };
        let h2c_preface = match &raw.h2c_preface {
            Some(h) if *h.get_ref() && (tls.is_some() || h2c) => {
                return Err(self.err(
                    h.span(),
                    "h2c_preface is for a cleartext HTTP/1.1 listener (a tls listener offers h2 through ALPN; an h2c one speaks only HTTP/2)",
                ));
            }
            Some(h) => *h.get_ref(),
            None => false,
        };
        let redirect_to_https = match &raw.redirect_to_https {
            Some(r)
                if *r.get_ref()
                    && (tls.is_some() || h2c || !matches!(addr, ListenAddr::Tcp(_))) =>
            {
                return Err(self.err(
                    r.span(),
                    "redirect_to_https is for a cleartext HTTP/1.1 TCP listener (addr, no tls, no h2c)",
                ));
            }
            // `https_port`, else the first TLS listener's, found once all are read.
            Some(r) if *r.get_ref() => Some(self.https_port(raw)?.unwrap_or(TLS_LISTENER_PORT)),
            _ => None,
        };
        if let Some(p) = &raw.https_port
            && redirect_to_https.is_none()
        {
            return Err(self.err(
                p.span(),
                "https_port is the port redirect_to_https names: set redirect_to_https = true",
            ));
        }
        let proxy_protocol = match &raw.proxy_protocol {
            Some(p) if *p.get_ref() && !matches!(addr, ListenAddr::Tcp(_)) => {
                return Err(self.err(p.span(), "proxy_protocol is for a TCP listener (addr)"));
            }
            Some(p) => *p.get_ref(),
            None => false,
        };
        let quic = match &raw.quic {
            Some(q) if *q.get_ref() && (tls.is_none() || !matches!(addr, ListenAddr::Tcp(_))) => {
                return Err(self.err(
                    q.span(),
                    "quic is for a TLS listener on an address (HTTP/3 runs over TLS 1.3)",
                ));
            }
            Some(q) => *q.get_ref(),
            None => false,
        };
        let unix_perms = self.unix_perms(raw, &addr)?;
        Ok(Listen {
            addr,
            tls,
            h2c,
            h2c_preface,
            unix_perms,
            redirect_to_https,
            proxy_protocol,
            quic,
        })
    }

    /// A listener's `https_port`: the port clients reach HTTPS on, which a
    /// redirect names (left out when 443), when the node's own TLS port is not what they
    /// see (a balancer in front).
    fn https_port(&self, raw: &RawListen) -> Result<Option<u16>, ConfError> {
        match &raw.https_port {
            Some(p) => match u16::try_from(*p.get_ref()) {
                Ok(port) if port != 0 => Ok(Some(port)),
                _ => Err(self.err(
                    p.span(),
                    format!("https_port must be 1 to 65535 (got {})", p.get_ref()),
                )),
            },
            None => Ok(None),
        }
    }

    /// A TLS listener's handshake options: its own keys, else `[tls]`'s, else the defaults.
    /// With no listener, checks `[tls]`'s own (so a mistake there is reported even before
    /// a TLS listener uses it).
    fn tls_options(
        &self,
        l: Option<&RawListenTls>,
        d: &RawTlsOptions,
    ) -> Result<linerate_server::config::TlsOptions, ConfError> {
        use linerate_server::config::{ClientAuth, TlsOptions, TlsVersion};
        let l = l.map_or_else(HandshakeKeys::default, HandshakeKeys::of_listener);
        let d = HandshakeKeys::of_defaults(d);
        let mut o = TlsOptions::default();
        if let Some(v) = l.min_version.or(d.min_version) {
            o.min_version = match v.get_ref().as_str() {
                "1.2" => TlsVersion::Tls12,
                "1.3" => TlsVersion::Tls13,
                other => {
                    return Err(self.err(
                        v.span(),
                        format!("min_version {other:?}: \"1.2\" or \"1.3\""),
                    ));
                }
            };
        }
        if let Some(v) = l.ciphers.or(d.ciphers) {
            if v.get_ref().is_empty() {
                return Err(self.err(v.span(), "ciphers: name at least one suite"));
            }
            let known = linerate_server::tls::cipher_suite_names();
            for c in v.get_ref() {
                if !known.iter().any(|k| k.eq_ignore_ascii_case(c)) {
                    return Err(self.err(
                        v.span(),
                        format!("unknown cipher suite {c:?} (known: {})", known.join(", ")),
                    ));
                }
            }
            o.ciphers = v.get_ref().clone();
        }
        if let Some(v) = l.alpn.or(d.alpn) {
            for p in v.get_ref() {
                if p != "h2" && p != "http/1.1" {
                    return Err(self.err(
                        v.span(),
                        format!("alpn: {p:?} is not served (\"h2\" and \"http/1.1\" are)"),
                    ));
                }
            }
            if v.get_ref().is_empty() {
                return Err(self.err(v.span(), "alpn: offer \"h2\", \"http/1.1\" or both"));
            }
            o.alpn = v.get_ref().clone();
        }
        if let Some(v) = l.session_cache.or(d.session_cache) {
            o.session_cache = *v.get_ref();
        }
        if let Some(v) = l.session_tickets.or(d.session_tickets) {
            o.session_tickets = v;
            o.session_tickets_off = !v;
        }
        if let Some(v) = l.session_lifetime.or(d.session_lifetime) {
            let d = self.timeout(v, "session_lifetime", "; session_cache = 0 resumes none")?;
            if !linerate_server::tls::session_lifetime_ok(d) {
                return Err(self.err(
                    v.span(),
                    "session_lifetime: more than 0 and at most 7 days (RFC 8446 §4.6.1)",
                ));
            }
            o.session_lifetime = d;
        }
        if let Some(v) = l.ocsp {
            o.ocsp = Some(self.existing_file(v, "OCSP response")?);
        }
        let ca = l.client_ca.or(d.client_ca);
        let auth = l.client_auth.or(d.client_auth);
        match (ca, auth) {
            (Some(ca), auth) => {
                let required = match auth.map(|a| a.get_ref().as_str()) {
                    None | Some("required") => true,
                    Some("optional") => false,
                    Some(other) => {
                        return Err(self.err(
                            auth.expect("matched").span(),
                            format!("client_auth {other:?}: \"required\" or \"optional\""),
                        ));
                    }
                };
                o.client_auth = Some(ClientAuth {
                    ca: self.existing_file(ca, "client CA bundle")?,
                    required,
                });
            }
            (None, Some(a)) => {
                return Err(self.err(
                    a.span(),
                    "client_auth needs client_ca: the CA bundle client certificates lead to",
                ));
            }
            (None, None) => {}
        }
        if let Some(v) = l.ticket_keys.or(d.ticket_keys) {
            if v.get_ref().is_empty() {
                return Err(self.err(
                    v.span(),
                    "ticket_keys: name at least one key file (`openssl rand 80 > ticket.key`)",
                ));
            }
            if l.session_tickets.or(d.session_tickets) == Some(false) {
                return Err(self.err(
                    v.span(),
                    "ticket_keys turns session tickets on: remove session_tickets = false",
                ));
            }
            o.ticket_keys = v
                .get_ref()
                .iter()
                .map(|k| self.ticket_key_file(k))
                .collect::<Result<_, _>>()?;
            o.session_tickets = true;
        }
        Ok(o)
    }

    /// `[tls] ticket_rotation`: at least [`MIN_TICKET_ROTATION`], and only for the keys a
    /// fleet keeps in `[storage]`.
    fn ticket_rotation(
        &self,
        v: &Spanned<String>,
        storage: bool,
    ) -> Result<std::time::Duration, ConfError> {
        if !storage {
            return Err(self.err(
                v.span(),
                "ticket_rotation is for the ticket keys a fleet keeps in [storage]: add [storage], or rotate ticket_keys files yourself",
            ));
        }
        let d = self.timeout(v, "ticket_rotation", "")?;
        if d < MIN_TICKET_ROTATION {
            return Err(self.err(v.span(), "ticket_rotation: at least 1m"));
        }
        Ok(d)
    }

    /// A TLS ticket key file: it exists and has one of nginx's sizes (80 bytes, or 48).
    fn ticket_key_file(&self, v: &Spanned<String>) -> Result<PathBuf, ConfError> {
        let p = self.existing_file(v, "ticket key")?;
        // Through the keeper only when the system refuses (a reload after a drop).
        let len = match std::fs::metadata(&p) {
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                linerate_server::privsep::open_read(&p).and_then(|f| f.metadata())
            }
            m => m,
        }
        .map_err(|e| self.err(v.span(), format!("ticket key {}: {e}", p.display())))?
        .len();
        if !linerate_server::tls::ticket_key_size_ok(len) {
            let why = linerate_server::tls::KeyFormatError::Size(len as usize);
            return Err(self.err(v.span(), format!("ticket key {}: {why}", p.display())));
        }
        Ok(p)
    }

    /// `owner`, `group` and `mode` of a Unix-socket listener; the names must exist.
    fn unix_perms(&self, raw: &RawListen, addr: &ListenAddr) -> Result<UnixPerms, ConfError> {
        let mut perms = UnixPerms::default();
        let keys = [&raw.owner, &raw.group, &raw.mode];
        if !matches!(addr, ListenAddr::Unix(_)) {
            if let Some(k) = keys.into_iter().flatten().next() {
                return Err(self.err(
                    k.span(),
                    "owner, group and mode are for a Unix-socket listener (unix = \"PATH\")",
                ));
            }
            return Ok(perms);
        }
        if let Some(m) = &raw.mode {
            let digits = m.get_ref().trim_start_matches("0o");
            perms.mode = u32::from_str_radix(digits, 8)
                .ok()
                .filter(|v| *v <= 0o777 && !digits.is_empty())
                .ok_or_else(|| {
                    self.err(
                        m.span(),
                        format!(
                            "mode must be octal permission bits such as \"0660\", not {:?}",
                            m.get_ref()
                        ),
                    )
                })?;
        }
        if let Some(o) = &raw.owner {
            linerate_server::privsep::owner_exists(o.get_ref())
                .map_err(|e| self.err(o.span(), format!("owner: {e}")))?;
            perms.owner = Some(o.get_ref().clone());
        }
        if let Some(g) = &raw.group {
            linerate_server::privsep::group_exists(g.get_ref())
                .map_err(|e| self.err(g.span(), format!("group: {e}")))?;
            perms.group = Some(g.get_ref().clone());
        }
        Ok(perms)
    }

    fn upstream(&self, u: &Spanned<RawUpstream>) -> Result<Upstream, ConfError> {
        let raw = u.get_ref();
        let name = raw.name.get_ref();
        if name.is_empty() {
            return Err(self.err(raw.name.span(), "an upstream needs a name"));
        }
        if raw.servers.get_ref().is_empty() {
            return Err(self.err(
                raw.servers.span(),
                format!("upstream {name:?} has no server"),
            ));
        }
        let mut servers = Vec::new();
        for s in raw.servers.get_ref() {
            servers.push(
                upstream_server(s.get_ref())
                    .map_err(|e| self.err(s.span(), format!("upstream server: {e}")))?,
            );
        }
        let mut up = Upstream::new(name, servers);
        if let Some(n) = raw.max_conns {
            up.max_conns = n;
        }
        if let Some(n) = raw.keepalive {
            up.keepalive = n;
        }
        if let Some(d) = &raw.idle_timeout {
            up.idle_timeout =
                self.timeout(d, "idle_timeout", "; keepalive = 0 pools no connection")?;
        }
        if let Some(d) = &raw.connect_timeout {
            up.connect_timeout = self.timeout(d, "connect_timeout", "")?;
        }
        if let Some(d) = &raw.timeout {
            up.timeout = self.timeout(d, "timeout", "")?;
        }
        if let Some(t) = &raw.tries {
            if *t.get_ref() == 0 {
                return Err(self.err(t.span(), "tries must be at least 1"));
            }
            up.tries = *t.get_ref();
        }
        if let Some(n) = raw.max_fails {
            up.max_fails = n;
        }
        if let Some(d) = &raw.fail_timeout {
            up.fail_timeout = self.timeout(
                d,
                "fail_timeout",
                "; max_fails = 0 turns passive health off",
            )?;
        }
        up.balance = self.balance(raw)?;
        if let Some(p) = &raw.protocol {
            up.protocol = match p.get_ref().as_str() {
                "h1" => UpstreamProtocol::Http1,
                "h2c" => UpstreamProtocol::H2c,
                "h2" => UpstreamProtocol::H2,
                other => {
                    return Err(self.err(
                        p.span(),
                        format!(
                            "protocol {other:?}: expected \"h1\", \"h2c\" or \"h2\" (HTTP/2 \
                             over TLS)"
                        ),
                    ));
                }
            };
        }
        if let Some(h) = &raw.health_check {
            up.health = Some(self.health(h, up.protocol)?);
        }
        self.upstream_tls(raw, &mut up)?;
        Ok(up)
    }

    /// An `"h2"` upstream's TLS: the name its servers are verified as (`tls_server_name`,
    /// else the host its servers are written with when that is a name, else each server's
    /// address), and its roots (`tls_ca`, else the system's), loaded now so that a bad file
    /// is this line's error.
    fn upstream_tls(&self, raw: &RawUpstream, up: &mut Upstream) -> Result<(), ConfError> {
        if up.protocol != UpstreamProtocol::H2 {
            if let Some(k) = raw.tls_server_name.as_ref().or(raw.tls_ca.as_ref()) {
                return Err(self.err(
                    k.span(),
                    "tls_server_name and tls_ca are for an upstream over TLS (protocol = \"h2\")",
                ));
            }
            return Ok(());
        }
        up.tls_server_name = match &raw.tls_server_name {
            Some(n) => {
                let name = n.get_ref();
                if !linerate_server::tls::upstream_server_name_ok(name) {
                    return Err(self.err(
                        n.span(),
                        format!("tls_server_name {name:?}: not a DNS name or an IP address"),
                    ));
                }
                Some(name.clone())
            }
            None => self.written_host(raw)?,
        };
        up.tls_ca = match &raw.tls_ca {
            Some(c) => Some(self.existing_file(c, "tls_ca")?),
            None => None,
        };
        if let Err(e) = linerate_server::tls::load_upstream_roots(up.tls_ca.as_deref()) {
            let span = raw.tls_ca.as_ref().map_or(raw.name.span(), |c| c.span());
            return Err(self.err(span, format!("tls_ca: {e}")));
        }
        Ok(())
    }

    /// The one host name an upstream's servers are written with (`None` when they are
    /// addresses); servers written with two names need `tls_server_name`.
    fn written_host(&self, raw: &RawUpstream) -> Result<Option<String>, ConfError> {
        let mut found: Option<String> = None;
        for s in raw.servers.get_ref() {
            let addr = s.get_ref().split_whitespace().next().unwrap_or("");
            let host = addr[..addr.rfind(':').unwrap_or(0)].trim_matches(['[', ']']);
            if addr.starts_with("unix:") {
                return Err(self.err(
                    s.span(),
                    "a Unix-socket server over TLS needs tls_server_name (the name its \
                     certificate is verified as)",
                ));
            }
            if host.parse::<std::net::IpAddr>().is_ok() {
                continue;
            }
            match &found {
                Some(f) if f != host => {
                    return Err(self.err(
                        s.span(),
                        format!(
                            "servers named {f:?} and {host:?}: set tls_server_name (the one name \
                             their certificates are verified as)"
                        ),
                    ));
                }
                _ => found = Some(host.to_string()),
            }
        }
        Ok(found)
    }

    /// An upstream's `health_check`: `GET path` for HTTP/1.1 servers, gRPC's health Check
    /// naming `grpc_service` for HTTP/2 ones (each refuses the other's keys).
    fn health(
        &self,
        h: &Spanned<RawHealth>,
        protocol: UpstreamProtocol,
    ) -> Result<HealthCheck, ConfError> {
        let raw = h.get_ref();
        let mut hc = HealthCheck::default();
        if protocol == UpstreamProtocol::Http1 {
            if let Some(g) = &raw.grpc_service {
                return Err(self.err(
                    g.span(),
                    "health_check grpc_service is for HTTP/2 upstreams (protocol = \"h2c\" or \
                     \"h2\"); an HTTP/1.1 upstream's check is GET path",
                ));
            }
        } else {
            for (key, span) in [
                ("path", raw.path.as_ref().map(|p| p.span())),
                ("status", raw.status.as_ref().map(|s| s.span())),
            ] {
                if let Some(span) = span {
                    return Err(self.err(
                        span,
                        format!(
                            "health_check {key} is for HTTP/1.1 upstreams; an HTTP/2 upstream's \
                             check is gRPC's health service (grpc_service = \"NAME\", \"\" for \
                             the whole server)"
                        ),
                    ));
                }
            }
            if let Some(g) = &raw.grpc_service {
                hc.grpc_service = g.get_ref().clone();
            }
        }
        if let Some(p) = &raw.path {
            let path = p.get_ref();
            if !path.starts_with('/') || path.bytes().any(|b| !b.is_ascii_graphic()) {
                return Err(self.err(
                    p.span(),
                    format!("health_check path {path:?}: expected an absolute path (\"/health\")"),
                ));
            }
            hc.path = path.clone();
        }
        if let Some(d) = &raw.interval {
            hc.interval = self.timeout(d, "health_check interval", "")?;
        }
        if let Some(d) = &raw.timeout {
            hc.timeout = self.timeout(d, "health_check timeout", "")?;
        }
        if let Some(s) = &raw.status {
            if !(100..=599).contains(s.get_ref()) {
                return Err(self.err(s.span(), "status must be 100 to 599"));
            }
            hc.status = *s.get_ref();
        }
        for (v, into, what) in [
            (&raw.passes, &mut hc.passes, "passes"),
            (&raw.fails, &mut hc.fails, "fails"),
        ] {
            if let Some(n) = v {
                if *n.get_ref() == 0 {
                    return Err(self.err(n.span(), format!("{what} must be at least 1")));
                }
                *into = *n.get_ref();
            }
        }
        Ok(hc)
    }

    /// `balance` and `hash_key` of an upstream.
    fn balance(&self, raw: &RawUpstream) -> Result<Balance, ConfError> {
        let method = raw.balance.as_ref();
        let name = method.map_or("round_robin", |m| m.get_ref().as_str());
        if name != "hash"
            && let Some(k) = &raw.hash_key
        {
            return Err(self.err(k.span(), "hash_key needs balance = \"hash\""));
        }
        match name {
            "round_robin" => Ok(Balance::RoundRobin),
            "least_conn" => Ok(Balance::LeastConn),
            "hash" => {
                let Some(k) = &raw.hash_key else {
                    let span = method.map(Spanned::span).unwrap_or_default();
                    return Err(self.err(
                        span,
                        "balance = \"hash\" needs a hash_key: \"client\", \"header:NAME\" or \"cookie:NAME\"",
                    ));
                };
                let key = k.get_ref();
                let named = |rest: &str| {
                    (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_graphic() && b != b':'))
                        .then(|| rest.to_string())
                };
                match key.split_once(':') {
                    None if key == "client" => Ok(Balance::Hash(HashKey::Client)),
                    Some(("header", rest)) if named(rest).is_some() => {
                        Ok(Balance::Hash(HashKey::Header(rest.to_string())))
                    }
                    Some(("cookie", rest)) if named(rest).is_some() => {
                        Ok(Balance::Hash(HashKey::Cookie(rest.to_string())))
                    }
                    _ => Err(self.err(
                        k.span(),
                        format!("hash_key {key:?}: expected \"client\", \"header:NAME\" or \"cookie:NAME\""),
                    )),
                }
            }
            other => Err(self.err(
                method.map(Spanned::span).unwrap_or_default(),
                format!("balance {other:?}: expected \"round_robin\", \"least_conn\" or \"hash\""),
            )),
        }
    }

    fn proxy(
        &self,
        p: &Spanned<RawProxy>,
        upstreams: &[Upstream],
    ) -> Result<ProxyMount, ConfError> {
        let raw = p.get_ref();
        let prefix = self.prefix(&raw.prefix)?;
        let name = raw.upstream.get_ref();
        if !upstreams.iter().any(|u| &u.name == name) {
            let known: Vec<&str> = upstreams.iter().map(|u| u.name.as_str()).collect();
            return Err(self.err(
                raw.upstream.span(),
                format!(
                    "no upstream named {name:?} (the [[upstream]] sections name {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        format!("{known:?}")
                    }
                ),
            ));
        }
        let forwarded = match raw.forwarded.as_ref().map(|f| (f, f.get_ref().as_str())) {
            None | Some((_, "x-forwarded")) => ForwardedStyle::XForwarded,
            Some((_, "forwarded")) => ForwardedStyle::Rfc7239,
            Some((_, "both")) => ForwardedStyle::Both,
            Some((_, "none")) => ForwardedStyle::None,
            Some((f, other)) => {
                return Err(self.err(
                    f.span(),
                    format!(
                        "forwarded must be \"x-forwarded\", \"forwarded\", \"both\" or \"none\", not {other:?}"
                    ),
                ));
            }
        };
        if let Some(r) = &raw.rewrite
            && !r.get_ref().is_empty()
        {
            self.prefix(r)?;
        }
        let grpc_web = raw.grpc_web.as_ref().is_some_and(|g| *g.get_ref());
        if let Some(g) = raw.grpc_web.as_ref().filter(|g| *g.get_ref())
            && upstreams
                .iter()
                .any(|u| &u.name == name && u.protocol == UpstreamProtocol::Http1)
        {
            return Err(self.err(
                g.span(),
                format!(
                    "grpc_web translates to gRPC, which needs an HTTP/2 upstream: upstream \
                     {name:?} speaks HTTP/1.1 (protocol = \"h2c\" or \"h2\")"
                ),
            ));
        }
        let fields =
            |map: &Spanned<BTreeMap<String, String>>| -> Result<Vec<(String, String)>, ConfError> {
                let mut out = Vec::new();
                for (name, value) in map.get_ref() {
                    if linerate_server::Response::new(200)
                        .try_header(name.clone(), value.clone())
                        .is_err()
                    {
                        return Err(self.err(
                        map.span(),
                        format!("invalid field {name:?}: {value:?} (a token name, a value without controls)"),
                    ));
                    }
                    out.push((name.clone(), value.clone()));
                }
                Ok(out)
            };
        Ok(ProxyMount {
            prefix: prefix.trim_end_matches('/').to_string(),
            upstream: name.clone(),
            rewrite: raw
                .rewrite
                .as_ref()
                .map(|r| r.get_ref().trim_end_matches('/').to_string()),
            host: raw.host.as_ref().map(|h| h.get_ref().clone()),
            forwarded,
            trust_forwarded: raw.trust_forwarded,
            request_buffering: raw.request_buffering,
            set_request: fields(&raw.set_request)?,
            remove_request: raw.remove_request.clone(),
            set_response: fields(&raw.set_response)?,
            remove_response: raw.remove_response.clone(),
            auth: match &raw.auth {
                Some(a) => Some(self.auth(a, upstreams)?),
                None => None,
            },
            upgrades: match &raw.upgrades {
                Some(u) => self.upgrades(u)?,
                None => ProxyMount::default().upgrades,
            },
            cache: match &raw.cache {
                Some(c) => Some(self.cache(c.get_ref())?),
                None => None,
            },
            grpc_web,
        })
    }

    /// `cache = { … }` of a proxy mount.
    fn cache(&self, raw: &RawCache) -> Result<linerate_server::config::ProxyCache, ConfError> {
        let mut c = linerate_server::config::ProxyCache::default();
        if let Some(v) = &raw.size {
            c.size = self.size(v, "cache size")?;
        }
        if let Some(v) = &raw.max_object {
            c.max_object = self.size(v, "cache max_object")?;
        } else if !c.holds_largest() {
            // A small store without a max_object of its own keeps the answers it can hold:
            // the default (1 MiB) would refuse `size = "1MiB"`, which was always taken. Under
            // the head's room, half the store (Cache-Status says when one did not fit).
            c.max_object = c.largest_held().max(c.size / 2);
        }
        // An answer of max_object bytes must fit in the memory store (once, sixteen shards
        // of size/16 held no answer over a sixteenth, and Cache-Status said `stored`).
        if let Some(max) = raw.max_object.as_ref().filter(|_| !c.holds_largest()) {
            let size = match &raw.size {
                Some(v) => format!("{:?}", v.get_ref()),
                None => "\"64MiB\" (the default)".to_string(),
            };
            return Err(self.err(
                max.span(),
                format!(
                    "cache max_object = {:?} cannot be stored in size = {size}: an answer takes \
                     its body and up to 128KiB of head and key; raise size or lower max_object",
                    max.get_ref(),
                ),
            ));
        }
        c.heuristic = raw.heuristic;
        match raw.status.as_ref().map(|s| (s, s.get_ref())) {
            None => {}
            Some((_, toml::Value::Boolean(false))) => c.status = None,
            Some((_, toml::Value::Boolean(true))) => {}
            Some((_, toml::Value::String(name)))
                if !name.is_empty()
                    && name.bytes().all(|b| {
                        b.is_ascii_alphanumeric() || b"-._:/*!#$%&'+^`|~".contains(&b)
                    }) =>
            {
                c.status = Some(name.clone());
            }
            Some((s, _)) => {
                return Err(self.err(
                    s.span(),
                    "cache status must be a name (a token, as \"edge-1\") or false".to_string(),
                ));
            }
        }
        match raw.set_cookie.as_ref().map(|s| (s, s.get_ref().as_str())) {
            None | Some((_, "never")) => {}
            Some((_, "explicit")) => c.set_cookie_explicit = true,
            // The former default stored answers with `public` or `s-maxage` and replayed their
            // cookie to every visitor: not kept under another meaning.
            Some((s, "shared")) => {
                return Err(self.err(
                    s.span(),
                    "cache set_cookie = \"shared\" is gone: it replayed one visitor's \
                     Set-Cookie to the next; leave it out (answers that set a cookie are not \
                     stored) or, knowing the danger, say \"explicit\""
                        .to_string(),
                ));
            }
            Some((s, other)) => {
                return Err(self.err(
                    s.span(),
                    format!("cache set_cookie must be \"never\" or \"explicit\", not {other:?}"),
                ));
            }
        }
        if let Some(v) = &raw.lock_timeout {
            c.lock_timeout = self.timeout(v, "cache lock_timeout", "")?;
        }
        if let Some(v) = &raw.tier {
            linerate_server::kv::TierConfig::parse(v.get_ref())
                .map_err(|e| self.err(v.span(), format!("cache tier: {e}")))?;
            c.tier = Some(v.get_ref().clone());
        }
        if let Some(v) = &raw.tier_timeout {
            c.tier_timeout = self.timeout(v, "cache tier_timeout", "")?;
        }
        // stale by policy
        for name in raw.use_stale.iter().flat_map(|l| l.get_ref()) {
            let known = [
                "error", "timeout", "updating", "http_500", "http_502", "http_503", "http_504",
            ];
            if !known.contains(&name.get_ref().as_str()) {
                return Err(self.err(
                    name.span(),
                    format!(
                        "cache use_stale: {:?} is not one of {}",
                        name.get_ref(),
                        known.map(|k| format!("{k:?}")).join(", ")
                    ),
                ));
            }
            if !c.use_stale.contains(name.get_ref()) {
                c.use_stale.push(name.get_ref().clone());
            }
        }
        if let Some(v) = &raw.stale_max {
            c.stale_max = Some(self.duration_or_zero(v, "cache stale_max")?);
        }
        // what a client may force
        match raw
            .client_no_cache
            .as_ref()
            .map(|s| (s, s.get_ref().as_str()))
        {
            None | Some((_, "ignore")) => {}
            Some((_, "revalidate")) => c.client_no_cache_revalidate = true,
            Some((s, other)) => {
                return Err(self.err(
                    s.span(),
                    format!(
                        "cache client_no_cache must be \"ignore\" or \"revalidate\", not {other:?}"
                    ),
                ));
            }
        }
        // the key
        if let Some(v) = &raw.key {
            c.key = v.get_ref().clone();
        }
        if let Some(v) = &raw.query_drop {
            c.query_drop = v.get_ref().clone();
        }
        c.query_sort = raw.query_sort.unwrap_or(false);
        if let Err(e) = c.key_rules() {
            let span = (raw.key.as_ref().map(Spanned::span))
                .or(raw.query_drop.as_ref().map(Spanned::span))
                .unwrap_or_default();
            return Err(self.err(span, format!("cache key: {e}")));
        }
        // TTL and origin fields
        if let Some(v) = &raw.valid {
            for (statuses, life) in v.get_ref() {
                let secs = self.duration_or_zero(life, "cache valid")?.as_secs();
                for s in statuses.split_ascii_whitespace() {
                    match s.parse::<u16>() {
                        _ if s == "any" => c.valid_any = Some(secs),
                        Ok(status @ 200..=599) if status != 206 && status != 304 => {
                            c.valid.push((status, secs));
                        }
                        _ => {
                            return Err(self.err(
                                v.span(),
                                format!(
                                    "cache valid: {s:?} is not a status a cache stores (200 to \
                                     599, not 206 or 304) or \"any\""
                                ),
                            ));
                        }
                    }
                }
            }
        }
        if let Some(v) = &raw.ignore {
            for f in v.get_ref() {
                let f = f.to_ascii_lowercase();
                if !["cache-control", "expires", "set-cookie", "vary"].contains(&f.as_str()) {
                    return Err(self.err(
                        v.span(),
                        format!(
                            "cache ignore: {f:?} is none of Cache-Control, Expires, Set-Cookie, \
                             Vary"
                        ),
                    ));
                }
                if !c.ignore.contains(&f) {
                    c.ignore.push(f);
                }
            }
        }
        // HEAD fills as GET
        if let Some(v) = raw.convert_head {
            c.convert_head = v;
        }
        // bypass and no-store rules
        match raw.preset.as_ref().map(|p| (p, p.get_ref().as_str())) {
            None => {}
            Some((_, "hardened")) => {
                c.bypass = linerate_server::config::CacheRule::hardened();
                c.no_store = linerate_server::config::CacheRule::hardened();
            }
            Some((p, other)) => {
                return Err(self.err(
                    p.span(),
                    format!("cache preset must be \"hardened\", not {other:?}"),
                ));
            }
        }
        for (list, into) in [
            (&raw.bypass, &mut c.bypass),
            (&raw.no_store, &mut c.no_store),
        ] {
            for r in list.iter().flatten() {
                let rule = self.cache_rule(r)?;
                if !into.contains(&rule) {
                    into.push(rule);
                }
            }
        }
        // purge as operators use it
        for r in &raw.purge_from {
            c.purge_from.push(
                linerate_server::access::IpRange::parse(r.get_ref())
                    .map_err(|e| self.err(r.span(), format!("cache purge_from: {e}")))?,
            );
        }
        Ok(c)
    }

    /// A rule of a cache's `bypass` or `no_store`: exactly one of `cookie`
    /// (a name, or `*` for any Cookie), `header` (with `value` or not), `path` (a prefix
    /// starting with `/`), `method` (a token).
    fn cache_rule(
        &self,
        r: &Spanned<RawCacheRule>,
    ) -> Result<linerate_server::config::CacheRule, ConfError> {
        use linerate_server::config::CacheRule;
        let raw = r.get_ref();
        let token = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        };
        let named = [&raw.cookie, &raw.header, &raw.path, &raw.method]
            .iter()
            .filter(|v| v.is_some())
            .count();
        let rule = match (named, raw) {
            (
                1,
                RawCacheRule {
                    cookie: Some(c),
                    value: None,
                    ..
                },
            ) if c == "*" => Some(CacheRule::AnyCookie),
            (
                1,
                RawCacheRule {
                    cookie: Some(c),
                    value: None,
                    ..
                },
            ) if token(c) => Some(CacheRule::Cookie(c.clone())),
            (
                1,
                RawCacheRule {
                    header: Some(h),
                    value,
                    ..
                },
            ) if token(h) => Some(CacheRule::Header(
                h.to_ascii_lowercase(),
                value.as_ref().map(|v| v.trim().to_string()),
            )),
            (
                1,
                RawCacheRule {
                    path: Some(p),
                    value: None,
                    ..
                },
            ) if p.starts_with('/') => Some(CacheRule::Path(p.clone())),
            (
                1,
                RawCacheRule {
                    method: Some(m),
                    value: None,
                    ..
                },
            ) if token(m) => Some(CacheRule::Method(m.clone())),
            _ => None,
        };
        rule.ok_or_else(|| {
            self.err(
                r.span(),
                "a cache rule is one of { cookie = \"NAME\" } (or \"*\": any cookie), \
                 { header = \"NAME\" } (with value = \"V\" or not), { path = \"/PREFIX\" }, \
                 { method = \"METHOD\" }"
                    .to_string(),
            )
        })
    }

    /// `upgrades` of a proxy mount: protocol names (RFC 9110 §7.8: tokens, no version).
    fn upgrades(&self, u: &Spanned<Vec<String>>) -> Result<Vec<String>, ConfError> {
        let token = |p: &str| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        };
        match u.get_ref().iter().find(|p| !token(p)) {
            Some(bad) => Err(self.err(
                u.span(),
                format!(
                    "upgrades: {bad:?} is not a protocol name (a token, such as \"websocket\")"
                ),
            )),
            None => Ok(u.get_ref().iter().map(|p| p.to_ascii_lowercase()).collect()),
        }
    }

    fn auth(&self, a: &Spanned<RawAuth>, upstreams: &[Upstream]) -> Result<ForwardAuth, ConfError> {
        let raw = a.get_ref();
        let name = raw.upstream.get_ref();
        let Some(up) = upstreams.iter().find(|u| &u.name == name) else {
            return Err(self.err(raw.upstream.span(), format!("no upstream named {name:?}")));
        };
        // Forward auth reads the verdict of an HTTP/1.1 exchange; an HTTP/2 upstream's answer
        // would go to the client as it came, and the request it guards never up.
        if up.protocol != linerate_server::config::UpstreamProtocol::Http1 {
            return Err(self.err(
                raw.upstream.span(),
                format!("auth upstream {name:?} must speak HTTP/1.1 (protocol = \"h1\")"),
            ));
        }
        let path = raw.path.get_ref();
        if !path.starts_with('/') || path.bytes().any(|b| !b.is_ascii_graphic()) {
            return Err(self.err(
                raw.path.span(),
                format!("auth path {path:?}: expected an absolute path (\"/verify\")"),
            ));
        }
        for f in raw.pass.iter().chain(&raw.copy) {
            if f.is_empty()
                || !f
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
            {
                return Err(self.err(a.span(), format!("auth field {f:?} is not a field name")));
            }
        }
        Ok(ForwardAuth {
            upstream: name.clone(),
            path: path.clone(),
            pass: raw.pass.clone(),
            copy: raw.copy.clone(),
        })
    }

    fn site(
        &self,
        s: &Spanned<RawSite>,
        seen: &mut Vec<(String, Range<usize>)>,
        upstreams: &[Upstream],
        dns01: bool,
    ) -> Result<(Site, SitePlaces), ConfError> {
        let raw = s.get_ref();
        let mut places = SitePlaces {
            at: self.place(s.span()),
            ..SitePlaces::default()
        };
        let mut site = Site {
            default: raw.default,
            dotfiles: raw.dotfiles,
            compression: raw.compression,
            max_body_bytes: match &raw.max_body_bytes {
                Some(v) => Some(self.size(v, "max_body_bytes")?),
                None => None,
            },
            ..Site::default()
        };
        for n in &raw.names {
            let name = n.get_ref().to_ascii_lowercase();
            let bare = name.strip_prefix("*.").unwrap_or(&name);
            let valid = !bare.is_empty()
                && bare.split('.').all(|l| {
                    !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                });
            if !valid {
                return Err(self.err(
                    n.span(),
                    format!(
                        "invalid site name {:?} (a host name, or *.suffix)",
                        n.get_ref()
                    ),
                ));
            }
            if let Some((_, first)) = seen.iter().find(|(s, _)| *s == name) {
                let other = self.err(first.clone(), "");
                return Err(self.err(
                    n.span(),
                    format!(
                        "site name {name:?} is already claimed at line {}",
                        other.line
                    ),
                ));
            }
            seen.push((name.clone(), n.span()));
            site.names.push(name);
        }
        if let Some(log) = &raw.access_log {
            places.access_log = Some(self.place(log.span()));
            site.access_log = Some(self.log_target(log));
        }
        if let Some(f) = &raw.access_log_format {
            places.access_log.get_or_insert(self.place(f.span()));
            site.access_log_format = Some(self.log_format(f)?);
        }
        if let Some(t) = &raw.tls {
            if site.names.is_empty() {
                return Err(self.err(
                    t.span(),
                    "a site's certificate is chosen by SNI from its names, and this site has none",
                ));
            }
            match t.get_ref() {
                RawSiteTls::Files(f) => {
                    let files = CertFiles {
                        cert: self.existing_file(&f.cert, "certificate")?,
                        key: self.existing_file(&f.key, "private key")?,
                        ocsp: match &f.ocsp {
                            Some(o) => Some(self.existing_file(o, "OCSP response")?),
                            None => None,
                        },
                    };
                    if let Err(e) = linerate_server::tls::check_pair(&files) {
                        return Err(self.err(t.span(), e.to_string()));
                    }
                    site.tls = Some(files);
                }
                RawSiteTls::Managed(kind) if kind == "internal" => {
                    site.managed = Some(Managed::Internal);
                }
                RawSiteTls::Managed(kind) if kind == "acme" => {
                    // A wildcard is validated by DNS-01 only (CAs offer no other challenge
                    // for it).
                    if let Some(w) = site
                        .names
                        .iter()
                        .find(|n| n.starts_with("*."))
                        .filter(|_| !dns01)
                    {
                        return Err(self.err(
                            t.span(),
                            format!(
                                "tls = \"acme\" cannot cover the wildcard {w:?} with this challenge (it needs DNS-01: [acme] challenge = \"dns-01\" with its dns table); or give its certificate as files, or use \"internal\""
                            ),
                        ));
                    }
                    site.managed = Some(Managed::Acme);
                }
                RawSiteTls::Managed(other) => {
                    return Err(self.err(
                        t.span(),
                        format!(
                            "tls must be \"acme\", \"internal\" or {{ cert = \"…\", key = \"…\" }}, not {other:?}"
                        ),
                    ));
                }
            }
        }
        site.app = match raw.app.as_ref().map(|a| a.get_ref().as_str()) {
            None | Some("none") => false,
            Some("demo") => true,
            Some(other) => {
                return Err(self.err(
                    raw.app.as_ref().expect("matched").span(),
                    format!("app must be \"demo\" or \"none\", not {other:?}"),
                ));
            }
        };
        if let Some(index) = &raw.index {
            let i = index.get_ref();
            if i.is_empty() || i.contains('/') || i == "." || i == ".." {
                return Err(self.err(
                    index.span(),
                    "index must be a file name (e.g. \"index.html\")",
                ));
            }
            site.index = i.clone();
        }
        for r in &raw.root {
            let r = r.get_ref();
            let prefix = self.prefix(&r.prefix)?;
            let dir = self.path(&r.dir);
            match std::fs::metadata(&dir) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(self.err(
                        r.dir.span(),
                        format!("root {} is not a directory", dir.display()),
                    ));
                }
                Err(e) => {
                    return Err(self.err(r.dir.span(), format!("root {}: {e}", dir.display())));
                }
            }
            places.roots.push(self.place(r.dir.span()));
            let mut try_files = Vec::new();
            if let Some(t) = &r.try_files {
                if t.get_ref().is_empty() {
                    return Err(self.err(t.span(), "try_files: name at least one path"));
                }
                for p in t.get_ref() {
                    let ok = (p.starts_with('/')
                        || p.starts_with(linerate_server::files::TRY_PATH))
                        && !p.bytes().any(|b| b.is_ascii_control() || b == b' ');
                    if !ok {
                        return Err(self.err(
                            t.span(),
                            format!(
                                "try_files: {p:?} is neither \"{{path}}…\" nor a path from the root (\"/index.html\")"
                            ),
                        ));
                    }
                }
                try_files = t.get_ref().clone();
            }
            site.mounts.push(FilesMount {
                prefix: prefix.trim_end_matches('/').to_string(),
                root: dir,
                try_files,
                listing: r.listing,
            });
        }
        for (ext, ty) in &raw.types {
            let e = ext.get_ref().trim_start_matches('.').to_ascii_lowercase();
            if e.is_empty()
                || !e
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err(self.err(
                    ext.span(),
                    format!("types: {:?} is not a file extension", ext.get_ref()),
                ));
            }
            let t = ty.get_ref();
            let valid = t
                .split(';')
                .next()
                .and_then(|m| m.trim().split_once('/'))
                .is_some_and(|(a, b)| {
                    !a.is_empty() && !b.is_empty() && !a.contains(' ') && !b.contains(' ')
                })
                && !t.bytes().any(|b| b.is_ascii_control());
            if !valid {
                return Err(self.err(
                    ty.span(),
                    format!("types: {t:?} is not a media type (\"type/subtype\")"),
                ));
            }
            site.types.push((e, t.clone()));
        }
        for rs in &raw.redirect {
            let r = rs.get_ref();
            let (prefix, exact) = self.rule_place("redirect", &r.prefix, &r.path, rs.span())?;
            let status = match &r.status {
                None => 301,
                Some(st) if [301, 302, 303, 307, 308].contains(st.get_ref()) => *st.get_ref(),
                Some(st) => {
                    return Err(self.err(
                        st.span(),
                        format!(
                            "redirect status must be 301, 302, 303, 307 or 308, not {}",
                            st.get_ref()
                        ),
                    ));
                }
            };
            let redirect = Redirect {
                prefix,
                exact,
                to: r.to.get_ref().clone(),
                status,
            };
            // The server's own check: a placeholder it does not know is refused here, not
            // sent literally in Location.
            redirect
                .check()
                .map_err(|e| self.err(r.to.span(), e.to_string()))?;
            places.redirects.push(self.place(r.to.span()));
            site.redirects.push(redirect);
        }
        for rs in &raw.returns {
            site.returns.push(self.fixed_answer(rs)?);
        }
        for a in &raw.access {
            let a = a.get_ref();
            let prefix = self.decoded_prefix(&a.prefix, "access")?;
            if site.access.iter().any(|o| o.prefix == prefix) {
                return Err(self.err(
                    a.prefix.span(),
                    format!(
                        "a second [[site.access]] for prefix {prefix:?}: list its rules in one"
                    ),
                ));
            }
            if a.rules.get_ref().is_empty() {
                return Err(self.err(
                    a.rules.span(),
                    "rules is empty: say who is allowed or denied (e.g. [\"allow 10.0.0.0/8\", \"deny all\"])",
                ));
            }
            let mut rules = Vec::new();
            for r in a.rules.get_ref() {
                rules.push(
                    linerate_server::access::Rule::parse(r.get_ref())
                        .map_err(|e| self.err(r.span(), e))?,
                );
            }
            site.access
                .push(linerate_server::access::Access { prefix, rules });
        }
        for l in &raw.rate_limit {
            let l = l.get_ref();
            let prefix = self.decoded_prefix(&l.prefix, "rate_limit")?;
            let interval_us = linerate_server::ratelimit::parse_rate(l.rate.get_ref())
                .map_err(|e| self.err(l.rate.span(), e))?;
            let key = match &l.key {
                None => RateKey::Client,
                Some(k) => match k.get_ref().split_once(':') {
                    None if k.get_ref() == "client" => RateKey::Client,
                    Some(("header", name))
                        if !name.is_empty()
                            && name
                                .bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)) =>
                    {
                        RateKey::Field(name.to_ascii_lowercase())
                    }
                    _ => {
                        return Err(self.err(
                            k.span(),
                            format!(
                                "key must be \"client\" or \"header:NAME\", not {:?}",
                                k.get_ref()
                            ),
                        ));
                    }
                },
            };
            let scope = match l.scope.as_ref().map(|s| (s, s.get_ref().as_str())) {
                None | Some((_, "node")) => RateScope::Node,
                Some((_, "fleet")) => RateScope::Fleet,
                Some((s, other)) => {
                    return Err(self.err(
                        s.span(),
                        format!("scope must be \"node\" or \"fleet\", not {other:?}"),
                    ));
                }
            };
            let local_interval_us = match &l.local_rate {
                None => None,
                Some(r) if scope == RateScope::Node => {
                    return Err(self.err(
                        r.span(),
                        "local_rate is a fleet rule's rate while Redis is down: it needs scope = \"fleet\"",
                    ));
                }
                Some(r) => Some(
                    linerate_server::ratelimit::parse_rate(r.get_ref())
                        .map_err(|e| self.err(r.span(), e))?,
                ),
            };
            let name = match &l.name {
                Some(n) if n.get_ref().is_empty() || n.get_ref().chars().any(char::is_control) => {
                    return Err(self.err(n.span(), "name must be a non-empty line of text"));
                }
                n => n.as_ref().map(|n| n.get_ref().clone()),
            };
            site.limits.push(RateLimit {
                prefix,
                interval_us,
                burst: l.burst,
                key,
                scope,
                local_interval_us,
                name,
            });
        }
        for a in &raw.basic_auth {
            let a = a.get_ref();
            let prefix = self.decoded_prefix(&a.prefix, "basic_auth")?;
            if site.auth.iter().any(|o| o.prefix == prefix) {
                return Err(self.err(
                    a.prefix.span(),
                    format!("a second [[site.basic_auth]] for prefix {prefix:?}"),
                ));
            }
            let htpasswd = self.existing_file(&a.htpasswd, "htpasswd")?;
            // What start-up would find: a file of users it can check.
            let text = linerate_server::privsep::read_to_string(&htpasswd).map_err(|e| {
                self.err(
                    a.htpasswd.span(),
                    format!("htpasswd {}: {e}", htpasswd.display()),
                )
            })?;
            linerate_server::basic_auth::Htpasswd::parse(&text).map_err(|e| {
                self.err(
                    a.htpasswd.span(),
                    format!("htpasswd {}: {e}", htpasswd.display()),
                )
            })?;
            site.auth.push(BasicAuth {
                prefix,
                realm: a.realm.clone().unwrap_or_else(|| "restricted".to_string()),
                htpasswd,
            });
        }
        for j in &raw.jwt {
            site.jwt.push(self.jwt(j, &site.jwt)?);
        }
        for p in &raw.proxy {
            site.proxies.push(self.proxy(p, upstreams)?);
            places.proxies.push(self.place(p.span()));
        }
        for h in &raw.headers {
            let h = h.get_ref();
            let prefix = match &h.prefix {
                Some(p) => Some(self.prefix(p)?),
                None => None,
            };
            let mut fields = Vec::new();
            for (name, value) in h.fields.get_ref() {
                if linerate_server::Response::new(200)
                    .try_header(name.clone(), value.clone())
                    .is_err()
                {
                    return Err(self.err(
                        h.fields.span(),
                        format!("invalid field {name:?}: {value:?} (a token name, a value without controls; Content-Length, Connection and the like are the server's)"),
                    ));
                }
                fields.push((name.clone(), value.clone()));
            }
            site.headers.push(HeaderRule {
                prefix,
                extensions: h
                    .extensions
                    .iter()
                    .map(|e| e.trim_start_matches('.').to_string())
                    .collect(),
                fields,
                not_proxied: !h.proxied,
            });
        }
        for (status, page) in &raw.error_pages {
            let code = status
                .get_ref()
                .parse::<u16>()
                .ok()
                .filter(|c| (400..600).contains(c))
                .ok_or_else(|| {
                    self.err(
                        status.span(),
                        format!(
                            "error page status must be 400 to 599, not {:?}",
                            status.get_ref()
                        ),
                    )
                })?;
            places.error_pages.push(self.place(page.span()));
            site.error_pages
                .push((code, self.existing_file(page, "error page")?));
        }
        Ok((site, places))
    }

    /// A `[[site.jwt]]`: its secret read and checked now (`--check-config` says what start-up
    /// would), never written into an error.
    fn jwt(&self, j: &Spanned<RawJwt>, earlier: &[JwtAuth]) -> Result<JwtAuth, ConfError> {
        let raw = j.get_ref();
        let prefix = self.decoded_prefix(&raw.prefix, "jwt")?;
        if earlier.iter().any(|o| o.prefix == prefix) {
            return Err(self.err(
                raw.prefix.span(),
                format!("a second [[site.jwt]] for prefix {prefix:?}"),
            ));
        }
        let (secret, at) = match (&raw.secret_file, &raw.secret_env) {
            (Some(f), None) => (
                JwtSecret::File(self.existing_file(f, "jwt secret_file")?),
                f.span(),
            ),
            (None, Some(v)) => (JwtSecret::Env(v.get_ref().clone()), v.span()),
            _ => {
                return Err(self.err(
                    j.span(),
                    "[[site.jwt]] needs one of secret_file or secret_env (the secret is never written in this file)",
                ));
            }
        };
        linerate_server::jwt::read_secret(&secret)
            .and_then(|bytes| linerate_server::jwt::check_secret(&bytes))
            .map_err(|e| self.err(at, format!("jwt: {e}")))?;
        let realm = raw
            .realm
            .clone()
            .unwrap_or_else(|| "restricted".to_string());
        if realm.chars().any(char::is_control) {
            return Err(self.err(j.span(), "jwt realm: a control character"));
        }
        for name in &raw.require {
            if name.is_empty() {
                return Err(self.err(j.span(), "jwt require: an empty claim name"));
            }
        }
        let leeway_s = match &raw.leeway {
            Some(v) => self.duration_or_zero(v, "jwt leeway")?.as_secs(),
            None => JWT_LEEWAY_S,
        };
        Ok(JwtAuth {
            prefix,
            realm,
            secret,
            issuer: raw.issuer.clone(),
            audience: raw.audience.clone(),
            require: raw.require.clone(),
            require_exp: raw.require_exp,
            leeway_s,
        })
    }

    /// A prefix matched against the path decoded once with its dot segments removed (access
    /// rules, rate limits, basic auth): written without %-escapes, // or dot segments.
    fn decoded_prefix(&self, p: &Spanned<String>, what: &str) -> Result<String, ConfError> {
        let prefix = self.prefix(p)?;
        if prefix.contains('%')
            || prefix.contains("//")
            || prefix.split('/').any(|seg| seg == "." || seg == "..")
        {
            return Err(self.err(
                p.span(),
                format!(
                    "{what} prefix {prefix:?} is matched against the decoded path: write it without %-escapes, // or dot segments"
                ),
            ));
        }
        Ok(prefix)
    }

    /// A `[[site.return]]`: where it answers, and a status that is an answer of its own (a
    /// 3xx would need a `Location`: that is `[[site.redirect]]`).
    fn fixed_answer(&self, rs: &Spanned<RawReturn>) -> Result<FixedAnswer, ConfError> {
        let r = rs.get_ref();
        let (prefix, exact) = self.rule_place("return", &r.prefix, &r.path, rs.span())?;
        let status = match &r.status {
            None => 200,
            Some(st) if (200..300).contains(st.get_ref()) || (400..600).contains(st.get_ref()) => {
                *st.get_ref()
            }
            Some(st) => {
                return Err(self.err(
                    st.span(),
                    format!(
                        "return status must be 200-299 or 400-599 (a redirect is \
                         [[site.redirect]]), not {}",
                        st.get_ref()
                    ),
                ));
            }
        };
        let content_type = match &r.content_type {
            None => "text/plain; charset=utf-8".to_string(),
            Some(t)
                if t.get_ref().contains('/')
                    && !t.get_ref().bytes().any(|b| b.is_ascii_control()) =>
            {
                t.get_ref().clone()
            }
            Some(t) => {
                return Err(self.err(
                    t.span(),
                    format!(
                        "content_type must be a media type (\"type/subtype\"), not {:?}",
                        t.get_ref()
                    ),
                ));
            }
        };
        Ok(FixedAnswer {
            prefix,
            exact,
            status,
            body: r.body.clone(),
            content_type,
        })
    }

    /// Where a `what` rule (a redirect, a fixed answer) applies: `prefix` (paths starting
    /// with it) or `path` (exactly it, nginx's `location =`), one of the two; whether exact.
    fn rule_place(
        &self,
        what: &str,
        prefix: &Option<Spanned<String>>,
        path: &Option<Spanned<String>>,
        rule: Range<usize>,
    ) -> Result<(String, bool), ConfError> {
        match (prefix, path) {
            (Some(p), None) => Ok((self.prefix(p)?, false)),
            (None, Some(p)) => Ok((self.prefix(p)?, true)),
            (Some(_), Some(p)) => Err(self.err(
                p.span(),
                format!(
                    "a {what} has prefix (paths starting with it) or path (exactly it), not both"
                ),
            )),
            (None, None) => Err(self.err(
                rule,
                format!("a {what} needs prefix = \"/old/\" or path = \"/\" (exactly that path)"),
            )),
        }
    }

    fn prefix(&self, p: &Spanned<String>) -> Result<String, ConfError> {
        let v = p.get_ref();
        if !v.starts_with('/')
            || v.bytes()
                .any(|b| b.is_ascii_control() || b == b' ' || b == b'?' || b == b'#')
        {
            return Err(self.err(
                p.span(),
                format!("prefix must be a path starting with '/', not {v:?}"),
            ));
        }
        Ok(v.clone())
    }
}

/// One `servers` entry: `HOST:PORT`, `[V6]:PORT` or `unix:/PATH`, then optionally
/// ` weight=N`. A host name is resolved now (its first address).
fn upstream_server(s: &str) -> Result<UpstreamServer, String> {
    let mut words = s.split_whitespace();
    let addr = words.next().ok_or("empty server")?;
    if addr.contains("://") {
        // A URL is what --proxy takes; here it would reach a DNS lookup of "http".
        return Err(format!(
            "{addr}: not HOST:PORT (write the address without a scheme, e.g. \"127.0.0.1:9000\")"
        ));
    }
    let mut weight = 1;
    for w in words {
        match w.strip_prefix("weight=").map(str::parse::<u32>) {
            Some(Ok(n)) if n > 0 => weight = n,
            _ => return Err(format!("{w:?}: expected weight=N (N at least 1)")),
        }
    }
    let addr = if let Some(path) = addr.strip_prefix("unix:") {
        if !path.starts_with('/') {
            return Err(format!("{addr}: a Unix socket's path must be absolute"));
        }
        UpstreamAddr::Unix(path.into())
    } else {
        if !addr.contains(':') || addr.ends_with(']') {
            return Err(format!(
                "{addr}: expected HOST:PORT, [V6]:PORT or unix:/PATH"
            ));
        }
        let found = std::net::ToSocketAddrs::to_socket_addrs(addr)
            .map_err(|e| format!("{addr}: {e}"))?
            .next()
            .ok_or_else(|| format!("{addr}: no address"))?;
        UpstreamAddr::Tcp(found)
    };
    Ok(UpstreamServer { addr, weight })
}

/// Whether two listeners would claim the same socket: the same Unix path, or the same TCP
/// port where the addresses are equal or one is its family's wildcard (port 0 is always free).
fn overlap(a: &ListenAddr, b: &ListenAddr) -> bool {
    match (a, b) {
        (ListenAddr::Unix(x), ListenAddr::Unix(y)) => x == y,
        (ListenAddr::Tcp(x), ListenAddr::Tcp(y)) => {
            x.port() != 0
                && x.port() == y.port()
                && x.is_ipv4() == y.is_ipv4()
                && (x.ip() == y.ip() || x.ip().is_unspecified() || y.ip().is_unspecified())
        }
        _ => false,
    }
}
