//! Counters a running server exposes: deferred answers outstanding, refused at the cap, timed
//! out, abandoned by their client, and arriving too late to be sent; and, when metrics are on
//! (an admin listener), requests by status class and answer kind, requests the connection
//! refused by status and the parse errors among them by kind, bytes in and out, open and idle connections, TLS handshakes completed
//! and failed, QUIC handshakes, Retries and packets sent and lost, and a request-duration histogram.
//!
//! Owns the counters only. Each worker writes its own (relaxed atomics that only it writes,
//! so a bump is a plain load and store, never a locked instruction; nothing is shared
//! between workers); [`StatsHandle::snapshot`] sums them from any thread at scrape time.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

use linerate_http1::ParseError;

/// Parse-error kinds counted: every [`ParseError`] (named by [`ParseError::name`]).
pub const PARSE_ERRORS: usize = ParseError::ALL.len();

/// Status classes counted: 1xx to 5xx.
pub const CLASSES: usize = 5;
/// What answered a request: a route's handler, the static files, or the server itself
/// (404 with nothing there, redirects, OPTIONS, 405, 501).
pub const KINDS: [&str; 3] = ["route", "file", "server"];
/// Statuses the connection answers by itself (a request it refused or timed out); any other
/// is counted as `other`.
pub const REFUSALS: [u16; 10] = [400, 408, 413, 414, 417, 431, 500, 501, 503, 505];
/// Upper bounds of the request-duration histogram's buckets, in microseconds (`+Inf` last).
pub const DURATION_BUCKETS_US: [u64; 16] = [
    25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    1_000_000, 2_500_000, 10_000_000,
];

/// Causes of a failed upstream exchange, counted per server: the connect failed or was
/// refused; a timeout; the connection closed or reset before any answer; the answer was
/// malformed (or not asked for); it was cut off after it began.
pub const UPSTREAM_ERRORS: [&str; 5] = ["connect", "timeout", "reset", "malformed", "cut"];

/// Why a connection was closed before its first request: a PROXY protocol header missing or
/// malformed on a listener that expects one; its client over the per-client connection limit.
pub const CONN_REFUSALS: [&str; 2] = ["proxy_header", "client_limit"];
/// Index of [`CONN_REFUSALS`]' "proxy_header".
pub(crate) const REFUSED_PROXY_HEADER: usize = 0;
/// Index of [`CONN_REFUSALS`]' "client_limit".
pub(crate) const REFUSED_CLIENT_LIMIT: usize = 1;

/// One site's counters in one worker (see [`Counters::set_sites`]).
#[derive(Debug, Default)]
pub(crate) struct SiteCounters {
    site: String,
    requests: [AtomicU64; CLASSES],
    bytes_out: AtomicU64,
}

impl SiteCounters {
    /// A request of this site answered with `status` and `bytes` of body.
    #[inline(always)]
    pub(crate) fn answered(&self, status: u16, bytes: u64) {
        bump(&self.requests[class(status)], 1);
        bump(&self.bytes_out, bytes);
    }
}

/// Counters for `labels` (a worker's sites, in order), carrying over the counts of the
/// sites in `old` with the same label (a reload keeps a site's count going).
pub(crate) fn site_counters(labels: &[String], old: &[SiteCounters]) -> Arc<[SiteCounters]> {
    labels
        .iter()
        .map(|l| {
            let c = SiteCounters {
                site: l.clone(),
                ..SiteCounters::default()
            };
            if let Some(o) = old.iter().find(|o| &o.site == l) {
                copy_all(&c.requests, &o.requests);
                c.bytes_out.store(o.bytes_out.load(Relaxed), Relaxed);
            }
            c
        })
        .collect()
}

/// One upstream server's counters in one worker (see [`Counters::set_upstreams`]).
#[derive(Debug, Default)]
pub(crate) struct UpCounters {
    upstream: String,
    server: String,
    requests: [AtomicU64; CLASSES],
    errors: [AtomicU64; UPSTREAM_ERRORS.len()],
    duration_buckets: [AtomicU64; DURATION_BUCKETS_US.len() + 1],
    duration_sum_us: AtomicU64,
    active: AtomicU64,
    idle: AtomicU64,
    /// Taken out by passive health until then (coarse monotonic ms; 0: never).
    down_until_ms: AtomicU64,
}

#[cfg_attr(not(feature = "proxy"), allow(dead_code))]
impl UpCounters {
    pub(crate) fn new(upstream: &str, server: String) -> UpCounters {
        UpCounters {
            upstream: upstream.to_string(),
            server,
            ..UpCounters::default()
        }
    }

    /// Counters for `server` of `upstream` that go on from the same server's counts in
    /// `old` (a reload keeps a server that is still there counting, as it keeps a site's):
    /// its answers, errors and histogram. Its connection gauges and health are the new
    /// pools' to publish.
    pub(crate) fn carried(upstream: &str, server: String, old: &[UpCounters]) -> UpCounters {
        let c = UpCounters::new(upstream, server);
        if let Some(o) = old
            .iter()
            .find(|o| o.upstream == c.upstream && o.server == c.server)
        {
            copy_all(&c.requests, &o.requests);
            copy_all(&c.errors, &o.errors);
            copy_all(&c.duration_buckets, &o.duration_buckets);
            c.duration_sum_us
                .store(o.duration_sum_us.load(Relaxed), Relaxed);
        }
        c
    }

    /// An exchange answered `status`, `us` microseconds after it was sent.
    pub(crate) fn answered(&self, status: u16, us: u64) {
        bump(&self.requests[class(status)], 1);
        timed(&self.duration_buckets, &self.duration_sum_us, us);
    }

    /// An exchange failed for [`UPSTREAM_ERRORS`]`[cause]`.
    pub(crate) fn failed(&self, cause: usize) {
        if let Some(a) = self.errors.get(cause) {
            bump(a, 1);
        }
    }

    /// This worker's connections to the server: busy with an exchange, and pooled.
    pub(crate) fn set_conns(&self, active: usize, idle: usize) {
        self.active.store(active as u64, Relaxed);
        self.idle.store(idle as u64, Relaxed);
    }

    /// Passive health took the server out until `ms` (coarse monotonic).
    pub(crate) fn down_until(&self, ms: u64) {
        self.down_until_ms.store(ms, Relaxed);
    }
}

/// One upstream server's metrics at one moment, summed over workers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpstreamMetrics {
    /// The upstream's name and the server's address.
    pub upstream: String,
    pub server: String,
    /// Exchanges answered, by the upstream's status class (1xx..5xx).
    pub requests: [u64; CLASSES],
    /// Exchanges failed, by [`UPSTREAM_ERRORS`].
    pub errors: [u64; UPSTREAM_ERRORS.len()],
    /// Exchanges by time from sent to answered (as [`Metrics::duration_buckets`]).
    pub duration_buckets: [u64; DURATION_BUCKETS_US.len() + 1],
    pub duration_sum_us: u64,
    /// Connections busy with an exchange, and pooled.
    pub active: u64,
    pub idle: u64,
    /// Workers whose passive health has the server out now.
    pub down_workers: u64,
}

/// What answered a request (see [`KINDS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Route = 0,
    File = 1,
    Server = 2,
}

/// One worker's counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    outstanding: AtomicU64,
    refused: AtomicU64,
    timed_out: AtomicU64,
    late: AtomicU64,
    abandoned: AtomicU64,
    requests: [[AtomicU64; KINDS.len()]; CLASSES],
    refusals: [AtomicU64; REFUSALS.len() + 1],
    parse_errors: [AtomicU64; PARSE_ERRORS],
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    open: AtomicU64,
    idle: AtomicU64,
    handshakes: AtomicU64,
    handshake_failures: AtomicU64,
    quic_handshakes: AtomicU64,
    quic_failures: AtomicU64,
    quic_retries: AtomicU64,
    quic_routed: AtomicU64,
    quic_sent: AtomicU64,
    quic_lost: AtomicU64,
    conn_refusals: [AtomicU64; CONN_REFUSALS.len()],
    rate_limited: AtomicU64,
    rate_limit_full: AtomicU64,
    duration_buckets: [AtomicU64; DURATION_BUCKETS_US.len() + 1],
    duration_sum_us: AtomicU64,
    /// This worker's upstream servers' counters: the worker keeps its own `Arc` and swaps
    /// this one when its upstreams change (a reload), so a count never takes the lock.
    upstreams: RwLock<Arc<[UpCounters]>>,
    /// This worker's sites' counters, kept the same way.
    sites: RwLock<Arc<[SiteCounters]>>,
}

/// The index of `status`'s class (1xx → 0 … 5xx → 4).
#[inline(always)]
fn class(status: u16) -> usize {
    (status / 100).clamp(1, 5) as usize - 1
}

/// Counts a duration of `us` in a histogram (bucket bounds [`DURATION_BUCKETS_US`]) and its
/// sum.
#[inline(always)]
fn timed(buckets: &[AtomicU64], sum: &AtomicU64, us: u64) {
    let b = DURATION_BUCKETS_US
        .iter()
        .position(|&le| us <= le)
        .unwrap_or(DURATION_BUCKETS_US.len());
    bump(&buckets[b], 1);
    bump(sum, us);
}

/// Adds each counter of `from` to the total beside it in `into`.
fn add_all(into: &mut [u64], from: &[AtomicU64]) {
    for (v, a) in into.iter_mut().zip(from) {
        *v += a.load(Relaxed);
    }
}

/// Each counter of `into` set to the one beside it in `from` (counts carried over a reload).
fn copy_all(into: &[AtomicU64], from: &[AtomicU64]) {
    for (n, v) in into.iter().zip(from) {
        n.store(v.load(Relaxed), Relaxed);
    }
}

/// `a += n` by the one thread that writes `a`: a plain load and store.
#[inline(always)]
fn bump(a: &AtomicU64, n: u64) {
    a.store(a.load(Relaxed).wrapping_add(n), Relaxed);
}

impl Counters {
    pub(crate) fn set_outstanding(&self, n: usize) {
        self.outstanding.store(n as u64, Relaxed);
    }
    pub(crate) fn refused(&self) {
        self.refused.fetch_add(1, Relaxed);
    }
    pub(crate) fn timed_out(&self) {
        self.timed_out.fetch_add(1, Relaxed);
    }
    pub(crate) fn late(&self) {
        self.late.fetch_add(1, Relaxed);
    }
    pub(crate) fn abandoned(&self, n: usize) {
        self.abandoned.fetch_add(n as u64, Relaxed);
    }

    /// A request answered with `status` by `kind`, `us` microseconds after its head was in.
    pub(crate) fn answered(&self, status: u16, kind: Kind, us: u64) {
        bump(&self.requests[class(status)][kind as usize], 1);
        timed(&self.duration_buckets, &self.duration_sum_us, us);
    }

    /// The connection answered `status` by itself (a refused or timed-out request), for
    /// `error` when the request was malformed.
    pub(crate) fn refusal(&self, status: u16, error: Option<ParseError>) {
        if let Some(e) = error {
            bump(&self.parse_errors[e.index()], 1);
        }
        let i = REFUSALS
            .iter()
            .position(|&s| s == status)
            .unwrap_or(REFUSALS.len());
        bump(&self.refusals[i], 1);
        bump(&self.requests[class(status)][Kind::Server as usize], 1);
    }

    pub(crate) fn bytes_in(&self, n: usize) {
        bump(&self.bytes_in, n as u64);
    }
    pub(crate) fn bytes_out(&self, n: u64) {
        bump(&self.bytes_out, n);
    }
    pub(crate) fn set_open(&self, n: usize) {
        self.open.store(n as u64, Relaxed);
    }
    /// One more (`true`) or one fewer idle connection.
    pub(crate) fn idle(&self, more: bool) {
        let v = self.idle.load(Relaxed);
        self.idle
            .store(if more { v + 1 } else { v.saturating_sub(1) }, Relaxed);
    }
    /// The worker's upstream servers are these now.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn set_upstreams(&self, up: Arc<[UpCounters]>) {
        *self.upstreams.write().unwrap_or_else(|e| e.into_inner()) = up;
    }

    /// The worker's sites are these now.
    pub(crate) fn set_sites(&self, sites: Arc<[SiteCounters]>) {
        *self.sites.write().unwrap_or_else(|e| e.into_inner()) = sites;
    }

    /// A request refused by a rate limit (429).
    pub(crate) fn rate_limited(&self) {
        bump(&self.rate_limited, 1);
    }

    /// A request a rate limit let through uncounted: its table was full.
    pub(crate) fn rate_limit_full(&self) {
        bump(&self.rate_limit_full, 1);
    }

    /// A connection closed before its first request, for [`CONN_REFUSALS`]`[why]`.
    pub(crate) fn conn_refused(&self, why: usize) {
        if let Some(a) = self.conn_refusals.get(why) {
            bump(a, 1);
        }
    }

    /// A QUIC connection ended: its handshake had completed or not, and its packets sent and
    /// declared lost.
    #[cfg(feature = "http3")]
    pub(crate) fn quic_closed(&self, handshake_done: bool, sent: u64, lost: u64) {
        if handshake_done {
            bump(&self.quic_handshakes, 1);
        } else {
            bump(&self.quic_failures, 1);
        }
        bump(&self.quic_sent, sent);
        bump(&self.quic_lost, lost);
    }

    /// The worker's Retry packets, and datagrams it routed to the worker owning their
    /// connection, so far (its running totals).
    pub(crate) fn set_quic_totals(&self, retries: u64, routed: u64) {
        self.quic_retries.store(retries, Relaxed);
        self.quic_routed.store(routed, Relaxed);
    }

    /// A TLS connection closed: its handshake had completed, or not.
    pub(crate) fn tls_closed(&self, handshake_done: bool) {
        if handshake_done {
            bump(&self.handshakes, 1);
        } else {
            bump(&self.handshake_failures, 1);
        }
    }
}

/// The metrics at one moment, summed over workers (only counted while metrics are on).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metrics {
    /// Requests by status class (1xx..5xx) and [`KINDS`].
    pub requests: [[u64; KINDS.len()]; CLASSES],
    /// Requests the connection refused, by [`REFUSALS`] (then any other status).
    pub refusals: [u64; REFUSALS.len() + 1],
    /// Malformed requests by kind, indexed as [`ParseError::ALL`].
    pub parse_errors: [u64; PARSE_ERRORS],
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub connections_open: u64,
    pub connections_idle: u64,
    /// TLS connections closed after their handshake completed, and before.
    pub tls_handshakes: u64,
    pub tls_handshake_failures: u64,
    /// QUIC (HTTP/3) connections, counted as each ends: handshakes completed, and not.
    pub quic_handshakes: u64,
    pub quic_handshake_failures: u64,
    /// Retry packets sent to validate client addresses (past `http3::RETRY_ABOVE`
    /// handshakes in progress on a worker).
    pub quic_retries: u64,
    /// Datagrams that reached a worker other than their connection's, routed to it.
    pub quic_routed: u64,
    /// QUIC packets sent, and declared lost (RFC 9002 §6), by connections that ended.
    pub quic_packets_sent: u64,
    pub quic_packets_lost: u64,
    /// Connections closed before their first request, by [`CONN_REFUSALS`].
    pub connections_refused: [u64; CONN_REFUSALS.len()],
    /// Requests refused by a rate limit (429).
    pub rate_limited: u64,
    /// Requests a rate limit let through uncounted because its table was full.
    pub rate_limit_full: u64,
    /// Requests per duration bucket (not cumulative; the last is over every bound).
    pub duration_buckets: [u64; DURATION_BUCKETS_US.len() + 1],
    pub duration_sum_us: u64,
    /// Per upstream server, in configuration order.
    pub upstreams: Vec<UpstreamMetrics>,
    /// Per site, in configuration order.
    pub sites: Vec<SiteMetrics>,
}

/// One site's metrics at one moment, summed over workers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SiteMetrics {
    /// The site's first name (`_` for one without names).
    pub site: String,
    /// Requests it answered by status class (1xx … 5xx): routes, files, redirects and its
    /// checks' refusals; not what the connection refused before a site was chosen.
    pub requests: [u64; CLASSES],
    /// Body bytes of its answers.
    pub bytes_out: u64,
}

/// The server's counters at one moment, summed over workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Deferred requests whose `Responder` has not reported back.
    pub deferred_outstanding: u64,
    /// Deferred requests answered 503 because their worker had `max_deferred_per_worker`
    /// outstanding.
    pub deferred_refused: u64,
    /// Deferred requests answered 503 because no answer came within `deferred_timeout`.
    pub deferred_timed_out: u64,
    /// Answers that came back after their client left, their deadline passed or an earlier
    /// answer closed the connection: dropped.
    pub late_answers_dropped: u64,
    /// Deferred requests whose client closed the connection before the answer came (logged
    /// as 499, as nginx does).
    pub deferred_abandoned: u64,
}

/// Reads a server's counters from any thread.
#[derive(Clone, Debug)]
pub struct StatsHandle {
    pub(crate) workers: Arc<Vec<Arc<Counters>>>,
    /// The proxy mounts' caches, as the sites have them now (a reload replaces them).
    pub(crate) caches: Caches,
    /// The router's gRPC methods' call counters.
    pub(crate) grpc: crate::grpc::CallStats,
    /// What tells this node apart.
    pub(crate) info: std::sync::Arc<crate::node_info::NodeInfo>,
    /// Every TLS listener's certificates (their expiry, read at scrape time).
    pub(crate) certs: Vec<std::sync::Arc<crate::tls::CertStore>>,
    /// Tracing's exporter counts, when tracing is on.
    pub(crate) tracing: Option<Arc<crate::trace::TraceStats>>,
}

/// A proxy mount's cache as the admin listener sees it: its counters, and purges.
pub(crate) trait CacheAdmin: Send + Sync + std::fmt::Debug {
    /// `site prefix`, as the metrics label it.
    fn label(&self) -> &str;
    fn counts(&self) -> CacheCounts;
    /// Removes what `ask` names (a URL's answers, every variant, under every scheme and
    /// port it can be keyed under; every answer below a URL; every answer), here and from
    /// its shared tier; `None` when a URL is not an http(s) URL.
    fn purge(&self, ask: &PurgeAsk) -> Option<Purged>;
    /// Up to `max` stored answers whose URL starts with `prefix` (every one when `None`),
    /// as JSON (`proxy::cache_list`); `None` when `prefix` is not an http(s) URL.
    fn list(&self, prefix: Option<&str>, max: usize) -> Option<serde_json::Value>;
    /// The cache itself, for a reload that keeps it (`proxy::cache_admin::carry_over`).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    fn shared(&self) -> Arc<dyn std::any::Any + Send + Sync>;
}

/// What an admin purge names (`POST /purge?url=…`, `?prefix=…`, `?all`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PurgeAsk {
    /// One URL's answers (`http://host/path?query`), every variant, scheme and port.
    Url(String),
    /// Every answer whose URL starts with this one (under either scheme and every port).
    Prefix(String),
    /// Every answer of every proxy cache, on every edge sharing its tier.
    All,
    /// Every answer an origin tagged so (`Surrogate-Key`, `Cache-Tag`), on every edge
    /// sharing the tier.
    Tag(String),
    /// A soft purge (`&soft`) of a URL's answers (every variant, scheme and port) or, with
    /// `tag`, of every answer tagged so: made stale, not removed.
    Soft {
        url: Option<String>,
        tag: Option<String>,
    },
}

/// What a purge did: answers removed from memory here, and what could not reach a shared
/// tier (down or slow), kept and applied when it is back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Purged {
    pub removed: usize,
    /// For each cache whose tier was not reached: what is pending there, for people.
    pub pending: Vec<String>,
}

/// The proxy caches, shared with the admin listener.
pub(crate) type Caches = Arc<std::sync::Mutex<Vec<Arc<dyn CacheAdmin>>>>;

/// One proxy cache's counters at scrape time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheCounts {
    pub hits: u64,
    pub misses: u64,
    pub stale: u64,
    pub revalidated: u64,
    pub bypass: u64,
    pub stored: u64,
    pub evictions: u64,
    /// Bytes and answers held now.
    pub bytes: u64,
    pub objects: u64,
    /// Requests waiting on another request's upstream answer for the same key now.
    pub waiting: u64,
    /// The shared second tier's counters, when the cache has one.
    pub tier: Option<TierCounts>,
}

/// A cache's shared second tier's counters at scrape time (a real miss told
/// from a call skipped while the tier is down; timeouts and outages counted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TierCounts {
    pub hits: u64,
    /// Gets the tier answered with nothing usable (absent, expired): real misses.
    pub misses: u64,
    /// Gets answered as misses without asking: the tier was down.
    pub skipped: u64,
    /// Calls that failed or ran past the timeout (their gets are misses too).
    pub errors: u64,
    /// Of those, the calls that ran past the timeout.
    pub timeouts: u64,
    /// Up → down transitions.
    pub outages: u64,
    /// Answers stored.
    pub stored: u64,
}

impl StatsHandle {
    /// Each proxy cache's label and counters now.
    pub fn caches(&self) -> Vec<(String, CacheCounts)> {
        let caches = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        caches
            .iter()
            .map(|c| (c.label().to_string(), c.counts()))
            .collect()
    }

    /// Every proxy cache's stored answers under `prefix` (see `CacheAdmin::list`):
    /// `{"caches": [{"cache": LABEL, "entries": [...], "truncated": bool}]}`; `None` when
    /// `prefix` is not an http(s) URL.
    pub fn list_caches(&self, prefix: Option<&str>, max: usize) -> Option<serde_json::Value> {
        let caches = self
            .caches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut out = Vec::new();
        for c in caches.iter() {
            let mut one = c.list(prefix, max)?;
            if let Some(o) = one.as_object_mut() {
                o.insert("cache".into(), c.label().into());
            }
            out.push(one);
        }
        Some(serde_json::json!({ "caches": out }))
    }

    /// Purges what `ask` names from every proxy cache and its shared tier: how many
    /// answers went from memory, and what waits for a tier that was not reached; `None`
    /// when a URL is not an http(s) URL.
    pub fn purge(&self, ask: &PurgeAsk) -> Option<Purged> {
        // Not held while a purge waits for a tier (a reload may swap the list meanwhile).
        let caches = self
            .caches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut all = Purged::default();
        for c in caches.iter() {
            let one = c.purge(ask)?;
            all.removed += one.removed;
            all.pending.extend(one.pending);
        }
        Some(all)
    }

    /// The counters now, summed over workers.
    pub fn snapshot(&self) -> Stats {
        let mut s = Stats::default();
        for c in self.workers.iter() {
            s.deferred_outstanding += c.outstanding.load(Relaxed);
            s.deferred_refused += c.refused.load(Relaxed);
            s.deferred_timed_out += c.timed_out.load(Relaxed);
            s.late_answers_dropped += c.late.load(Relaxed);
            s.deferred_abandoned += c.abandoned.load(Relaxed);
        }
        s
    }

    /// The gRPC calls' counters now, as `/metrics` text (empty without gRPC services).
    pub fn grpc_metrics(&self) -> String {
        let mut o = String::new();
        self.grpc.render(&mut o);
        o
    }

    /// The metrics now, summed over workers.
    pub fn metrics(&self) -> Metrics {
        let mut m = Metrics::default();
        let add = |into: &mut u64, a: &AtomicU64| *into += a.load(Relaxed);
        for c in self.workers.iter() {
            for (row, crow) in m.requests.iter_mut().zip(&c.requests) {
                add_all(row, crow);
            }
            add_all(&mut m.refusals, &c.refusals);
            add_all(&mut m.parse_errors, &c.parse_errors);
            add_all(&mut m.duration_buckets, &c.duration_buckets);
            add_all(&mut m.connections_refused, &c.conn_refusals);
            add(&mut m.rate_limited, &c.rate_limited);
            add(&mut m.rate_limit_full, &c.rate_limit_full);
            add(&mut m.bytes_in, &c.bytes_in);
            add(&mut m.bytes_out, &c.bytes_out);
            add(&mut m.connections_open, &c.open);
            add(&mut m.connections_idle, &c.idle);
            add(&mut m.tls_handshakes, &c.handshakes);
            add(&mut m.tls_handshake_failures, &c.handshake_failures);
            add(&mut m.quic_handshakes, &c.quic_handshakes);
            add(&mut m.quic_handshake_failures, &c.quic_failures);
            add(&mut m.quic_retries, &c.quic_retries);
            add(&mut m.quic_routed, &c.quic_routed);
            add(&mut m.quic_packets_sent, &c.quic_sent);
            add(&mut m.quic_packets_lost, &c.quic_lost);
            add(&mut m.duration_sum_us, &c.duration_sum_us);
            let ups = c
                .upstreams
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let now = crate::sys::coarse_ms(libc::CLOCK_MONOTONIC_COARSE);
            for u in ups.iter() {
                // Matched by name: during a reload workers may hold different sets.
                let i = match m
                    .upstreams
                    .iter()
                    .position(|x| x.upstream == u.upstream && x.server == u.server)
                {
                    Some(i) => i,
                    None => {
                        m.upstreams.push(UpstreamMetrics {
                            upstream: u.upstream.clone(),
                            server: u.server.clone(),
                            ..UpstreamMetrics::default()
                        });
                        m.upstreams.len() - 1
                    }
                };
                let x = &mut m.upstreams[i];
                add_all(&mut x.requests, &u.requests);
                add_all(&mut x.errors, &u.errors);
                add_all(&mut x.duration_buckets, &u.duration_buckets);
                add(&mut x.duration_sum_us, &u.duration_sum_us);
                add(&mut x.active, &u.active);
                add(&mut x.idle, &u.idle);
                x.down_workers += u64::from(u.down_until_ms.load(Relaxed) > now);
            }
            let sites = c.sites.read().unwrap_or_else(|e| e.into_inner()).clone();
            for s in sites.iter() {
                // By name, as upstreams: workers may hold different sets during a reload.
                let i = match m.sites.iter().position(|x| x.site == s.site) {
                    Some(i) => i,
                    None => {
                        m.sites.push(SiteMetrics {
                            site: s.site.clone(),
                            ..SiteMetrics::default()
                        });
                        m.sites.len() - 1
                    }
                };
                add_all(&mut m.sites[i].requests, &s.requests);
                add(&mut m.sites[i].bytes_out, &s.bytes_out);
            }
        }
        m
    }
}
