//! The worker's outbound side: connections to upstream servers, owned by the same loop,
//! backend, timer wheel and buffers as the client connections (no thread hop), each one an
//! `h1c::Conn` state machine; per-worker keep-alive pools; and the relay that carries one
//! proxied exchange from an upstream connection to the client's connection as a streamed
//! answer.
//!
//! Owns: choosing a server (smooth weighted round-robin, as nginx), the pools (a connection
//! goes back only after a complete exchange; one of an older upstream set after a reload is
//! closed instead), the tries (a connect failure goes to the next server; a pooled
//! connection the upstream closed before answering gets one more try on a fresh connection,
//! for idempotent methods), the 502/504 answers, and backpressure both ways: an upstream is
//! read only while the client's answer has room ([`crate::h1::STREAM_ROOM`]); a paused one is
//! resumed after the client's connection moved its output.
//!
//! Slots: an upstream connection takes a slot in the worker's slot table (so the backend's
//! and the wheel's dense indexes are shared); its token has [`UP`] set, which is how a
//! completion finds its way here at the cost of one bit test.
#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::collections::VecDeque;

use linerate_http1::{BodyLength, FieldSpan, ResponseInfo};

use super::backend::{Backend, Completion, Submitted, Token, UpAddr};
use super::{Shared, Worker};
use crate::app::access_log::UpstreamEntry;
use crate::app::compress_stream::{Plan, Rewrite, StreamEncoder};
use crate::app::deferred::LogMeta;
use crate::app::sites::SiteSet;
use crate::config::{HealthCheck, Upstream, UpstreamAddr, UpstreamProtocol};
use crate::h1::{Cx, StreamHead};
use crate::h1c::{self, ReqBody, Timeouts, UpError};
use crate::proxy::auth;
use crate::proxy::balance::{self, Ring, ServerLoad};
use crate::proxy::cache::{AfterHead, Exchange, Hit};
use crate::proxy::job::Job;
use crate::proxy::pipe::PipeOut;
use crate::proxy::reply;
use crate::stats::{Counters, UpCounters};

mod line;

/// MAX_FEEDS: rounds of moving a relayed body to its upstream in one pump (each at most
/// [`crate::h1::STREAM_ROOM`]): what one upload may move before the loop turns.
const MAX_FEEDS: u32 = 16;

/// Reloads whose upstream renames are kept: a job routed before more reloads than this
/// (each one a reload while it was in flight) finds no upstream, and is answered 502.
const KEPT_RENAMES: usize = 16;

/// The token bit that marks an upstream connection (the top of the generation).
pub(super) const UP: Token = 1 << 63;

/// Whether `token` is an upstream connection's: one bit test.
#[inline(always)]
pub(super) const fn is_up(token: Token) -> bool {
    token & UP != 0
}

/// The upstream connections carrying answers to one client connection.
#[derive(Default)]
pub(super) struct Relays(pub Vec<Token>);

/// An upstream connection in its slot.
pub(super) struct UpLive {
    conn: h1c::Conn,
    /// Its upstream (index into the sites' upstreams) and server.
    group: usize,
    server: usize,
    /// The pools' epoch it was made in: one from before a reload is not pooled again.
    epoch: u32,
    /// When its wheel entry fires (ms).
    armed: u64,
    receiving: bool,
    /// The exchange in flight.
    link: Option<Link>,
    /// An active health check's connection (never pooled, not counted in `max_conns`).
    probe: bool,
    /// Its token is in its server's idle list (so it is put there once, without a search
    /// of the list on every return).
    pooled: bool,
}

/// One proxied exchange, as the upstream connection carrying it knows it.
struct Link {
    /// The client's connection and the request's number on it.
    client: Token,
    id: u64,
    site: usize,
    route: usize,
    /// The request, kept until the response's first byte for another try.
    job: Option<Box<Job>>,
    /// Its body still arriving from the client, and whether all of it went out.
    pipe: Option<PipeOut>,
    body_done: bool,
    /// The client got the answer's head (a failure now cuts its connection).
    answered: bool,
    /// The client's answer is gone (it closed, or reset the stream): drop the exchange.
    gone: bool,
    /// The client's answer is full: reading waits for room.
    paused: bool,
    /// After a 101: the two connections are a byte tunnel (the client's bytes are moved
    /// by [`Worker::tunnel_pump`]).
    tunnel: bool,
    /// A forward-auth answer that is not the client's: its body is read and dropped (the
    /// connection stays reusable), and its end leaves the client alone.
    discard: bool,
    status: u16,
    bytes: u64,
    head_request: bool,
    started: u64,
    /// When the request went to this connection (µs, for the upstream's time).
    sent: u64,
    log: Option<LogMeta>,
    /// The coding the client chose, where the site compresses (`Job::coding`).
    coding: Option<crate::files::encoding::Encoding>,
    /// The answer's body is compressed as it is relayed.
    encoder: Option<StreamEncoder>,
    /// The client's path, when its site's `[[site.headers]]` may add fields to the answer.
    path: Option<Box<[u8]>>,
    /// Its mount's cache's state for it, from the answer's head on (before that it is the
    /// job's, which a retry takes along).
    cache: Option<Box<Exchange>>,
    /// A background validation: the answer goes to the store, never to the client.
    background: bool,
    /// A HEAD sent up as GET: the client's answer is the head alone, ended
    /// at once; the body is read for the store only, while the store keeps it, and the
    /// connection is closed once it does not (a HEAD never waits on a body it does not get).
    head_only: bool,
}

/// A worker's state per upstream: its servers' pools and the requests waiting for a
/// connection.
#[derive(Default)]
pub(super) struct Pools {
    groups: Vec<Group>,
    /// Per-server counters (when metrics are on), flat: group `g`'s server `s` is at
    /// `offsets[g] + s`.
    stats: std::sync::Arc<[UpCounters]>,
    offsets: Vec<usize>,
    /// Bumped by a reload (new upstream definitions).
    epoch: u32,
    /// When the next active health check is due (ms; `u64::MAX`: none configured).
    pub(super) next_check: u64,
    /// The relays' answer field list, kept empty between exchanges ([`emptied`]).
    fields: Vec<Field<'static>>,
    /// Requests waiting on another request's cache flight, by park number.
    pub(super) parked: std::collections::HashMap<u64, Box<Job>, ParkHash>,
    pub(super) next_park: u64,
    /// Second-tier questions of parked requests, sent at the turn's end (`cache.rs`).
    pub(super) tier_asks: Vec<super::cache::TierAsk>,
    /// This worker's own connections to Redis tiers (`tier_link.rs`).
    pub(super) links: super::tier_link::TierLinks,
    /// What each of the last reloads made of the upstream indexes: (the epoch it ended, old
    /// index to new). Jobs older than these go nowhere (502).
    renames: VecDeque<(u32, Vec<usize>)>,
    /// Requests that were waiting for a connection when a reload replaced the upstreams
    /// (`line.rs`): sent again at the next tick.
    #[allow(clippy::vec_box)] // jobs travel boxed: `dispatch` takes them so
    stranded: Vec<Box<Job>>,
    /// The HTTP/2 upstream connections open (tokens; `upstream_h2.rs`).
    #[cfg(feature = "http2")]
    pub(super) h2: Vec<Token>,
}

#[derive(Default)]
struct Group {
    servers: Vec<ServerState>,
    /// What picking a server reads, per server (beside `servers`).
    loads: Vec<ServerLoad>,
    /// The consistent-hash ring (empty unless the upstream balances by hash).
    ring: Ring,
    /// Requests waiting for a connection (every server at `max_conns`; `line.rs`).
    waiting: VecDeque<Box<Job>>,
    /// When this upstream's next active health check is due (ms).
    next_check: u64,
}

#[derive(Default)]
struct ServerState {
    /// Pooled connections (tokens; a stale one is skipped when popped).
    idle: Vec<Token>,
    /// Connections open (pooled or busy).
    conns: usize,
    /// Passive health: failures counted since `since` (ms); the server's [`ServerLoad`]
    /// says until when one taken out stays out.
    fails: u32,
    since: u64,
    /// Active health: a check is in flight; passes and failures in a row; taken out.
    probing: bool,
    passes: u32,
    check_fails: u32,
    checked_down: bool,
}

impl Group {
    /// Passive health counts a failure of server `si` at `now` (see [`ServerState::failed`]);
    /// the HTTP/1.1 and HTTP/2 relays both report here.
    fn failed(&mut self, si: usize, up: &Upstream, now: u64) {
        let others = (self.loads.iter().enumerate()).any(|(i, l)| i != si && l.down_until <= now);
        if let (Some(s), Some(load)) = (self.servers.get_mut(si), self.loads.get_mut(si)) {
            s.failed(load, up, si, now, !others);
        }
    }
}

impl ServerState {
    /// A failure of server `si` of `up` at `now`: after `max_fails` within the window the
    /// server is out for it, unless it is the `last` one in the rotation. Taking out the
    /// last would leave nothing to pick (the balancer then tries every server anyway, so it
    /// would only say "down" where nothing changed); nginx likewise never marks the only
    /// server of an upstream down, and where all its servers failed it clears them all.
    fn failed(&mut self, load: &mut ServerLoad, up: &Upstream, si: usize, now: u64, last: bool) {
        if up.max_fails == 0 {
            return;
        }
        let window = up.fail_timeout.as_millis() as u64;
        if now.saturating_sub(self.since) > window {
            self.since = now;
            self.fails = 0;
        }
        self.fails += 1;
        if self.fails >= up.max_fails && !self.checked_down {
            self.fails = 0;
            if last {
                tracing::debug!(upstream = %up.name, "passive health: the last server stays in");
                return;
            }
            load.down_until = now + window;
            // The same fields as the active checks' lines: which upstream, which server.
            let server = up
                .servers
                .get(si)
                .map_or_else(|| "-".to_string(), |s| s.addr.to_string());
            tracing::warn!(
                upstream = %up.name,
                %server,
                "passive health: server taken out for {window} ms after {} failures",
                up.max_fails
            );
        }
    }
}

impl ServerState {
    /// An active check's result: `check.fails` failures in a row take the server out until
    /// `check.passes` passes in a row bring it back. `true` when that changed.
    fn checked(&mut self, pass: bool, load: &mut ServerLoad, check: &HealthCheck) -> bool {
        self.probing = false;
        if pass {
            self.check_fails = 0;
            self.passes += 1;
            if self.checked_down && self.passes >= check.passes {
                self.checked_down = false;
                load.down_until = 0;
                return true;
            }
        } else {
            self.passes = 0;
            self.check_fails += 1;
            if !self.checked_down && self.check_fails >= check.fails {
                self.checked_down = true;
                load.down_until = u64::MAX;
                return true;
            }
        }
        false
    }
}

impl Pools {
    /// Brings `job`, routed before one or more reloads, up to this epoch: its upstream index
    /// becomes the new upstream's of the same name, through each reload in turn.
    fn bring_up_to_date(&self, job: &mut Job) {
        while job.epoch != self.epoch {
            let Some((_, to)) = self.renames.iter().find(|(e, _)| *e == job.epoch) else {
                job.upstream = usize::MAX;
                break;
            };
            job.upstream = to.get(job.upstream).copied().unwrap_or(usize::MAX);
            job.epoch = job.epoch.wrapping_add(1);
        }
        job.epoch = self.epoch;
        // Its servers' indexes are of the old set.
        job.failed_server = None;
    }

    /// Makes room for `sites`' upstreams (at the start, and after a reload emptied them);
    /// publishes their counters to `counters` when metrics are on. A server still there after
    /// a reload (same upstream name and address) keeps its counts.
    fn fit(&mut self, sites: &SiteSet, counters: Option<&Counters>) {
        if self.groups.len() == sites.upstreams.len() {
            return;
        }
        self.offsets.clear();
        let mut stats = Vec::new();
        for u in &sites.upstreams {
            self.offsets.push(stats.len());
            if counters.is_some() {
                stats.extend(
                    u.servers
                        .iter()
                        .map(|s| UpCounters::carried(&u.name, s.addr.to_string(), &self.stats)),
                );
            }
        }
        self.stats = stats.into();
        if let Some(c) = counters {
            c.set_upstreams(self.stats.clone());
        }
        self.groups = sites
            .upstreams
            .iter()
            .map(|u| Group {
                servers: (0..u.servers.len())
                    .map(|_| ServerState::default())
                    .collect(),
                loads: vec![ServerLoad::default(); u.servers.len()],
                ring: Ring::build(u),
                waiting: VecDeque::new(),
                next_check: 0,
            })
            .collect();
    }

    /// Server `si` of group `gi`'s counters, when metrics are on.
    pub(super) fn stats(&self, gi: usize, si: usize) -> Option<&UpCounters> {
        self.stats.get(self.offsets.get(gi)? + si)
    }

    /// Publishes server `si` of group `gi`'s connection counts.
    fn publish(&self, gi: usize, si: usize) {
        if let (Some(st), Some(g)) = (self.stats(gi, si), self.groups.get(gi))
            && let (Some(s), Some(l)) = (g.servers.get(si), g.loads.get(si))
        {
            st.set_conns(l.active, s.idle.len());
        }
    }

    /// Picks the server of group `gi` (upstream `up`) for `job`, as for every request.
    #[cfg(feature = "http2")]
    pub(super) fn pick(&mut self, gi: usize, up: &Upstream, now: u64, job: &Job) -> usize {
        let g = &mut self.groups[gi];
        balance::pick(up, &g.ring, &mut g.loads, now, job.failed_server, job.key)
    }

    /// Server `si` of group `gi` failed at `now` (passive health).
    #[cfg(feature = "http2")]
    pub(super) fn server_failed(&mut self, gi: usize, si: usize, up: &Upstream, now: u64) {
        if let Some(g) = self.groups.get_mut(gi) {
            g.failed(si, up, now);
        }
    }

    /// Server `si` of group `gi` has `delta` more exchanges in flight (`least_conn` reads
    /// them; the connection counts are published).
    #[cfg(feature = "http2")]
    pub(super) fn in_flight(&mut self, gi: usize, si: usize, delta: isize) {
        if let Some(load) = self.groups.get_mut(gi).and_then(|g| g.loads.get_mut(si)) {
            load.active = load.active.saturating_add_signed(delta);
        }
        self.publish(gi, si);
    }

    /// The epoch: bumped by each reload.
    #[cfg(feature = "http2")]
    pub(super) fn epoch(&self) -> u32 {
        self.epoch
    }

    /// A reload replaced the upstreams (`old` by `new`): the pooled connections, for the
    /// caller to close (busy ones finish their exchange and close then). Requests waiting for
    /// a connection go on at the next tick; jobs of the old epoch, wherever they are, go to
    /// the new upstream of their old one's name ([`Pools::bring_up_to_date`]).
    pub(super) fn reload(&mut self, old: &SiteSet, new: &SiteSet) -> Vec<Token> {
        self.epoch = self.epoch.wrapping_add(1);
        let mut idle = Vec::new();
        for g in &mut self.groups {
            for s in &mut g.servers {
                idle.append(&mut s.idle);
            }
        }
        for g in &mut self.groups {
            self.stranded.extend(g.waiting.drain(..));
        }
        // Old index to new, by name; none of that name: `usize::MAX`, no upstream, which
        // `dispatch` answers 502 as it does a route to none.
        let to: Vec<usize> = (old.upstreams.iter())
            .map(|o| (new.upstreams.iter()).position(|u| u.name == o.name))
            .map(|i| i.unwrap_or(usize::MAX))
            .collect();
        if self.renames.len() == KEPT_RENAMES {
            self.renames.pop_front();
        }
        self.renames.push_back((self.epoch.wrapping_sub(1), to));
        // Rebuilt for the new definitions at the next request or check (connections of the
        // old set still busy count against nothing once they close).
        self.groups.clear();
        self.next_check = 0;
        idle
    }
}

/// The upstream connection's timeouts, in milliseconds.
fn timeouts(up: &Upstream) -> Timeouts {
    let ms = |d: std::time::Duration| d.as_micros().div_ceil(1000) as u64;
    Timeouts {
        connect: ms(up.connect_timeout),
        send: ms(up.timeout),
        first_byte: ms(up.timeout),
        read: ms(up.timeout),
        idle: ms(up.idle_timeout),
        tunnel: ms(up.timeout),
    }
}

pub(super) fn up_addr(a: &UpstreamAddr) -> UpAddr {
    match a {
        UpstreamAddr::Tcp(a) => UpAddr::Tcp(*a),
        UpstreamAddr::Unix(p) => UpAddr::Unix(p.clone()),
    }
}

/// What the relay left for the driver to do after a call into the upstream connection.
#[derive(Default)]
struct After {
    /// The client's connection has output to move.
    client: Option<Token>,
    /// The exchange's job, done with (its answer's head is in): its box and head buffer
    /// go to the worker's spares.
    spent: Option<Box<Job>>,
    /// The exchange ended (either way): the client no longer waits on this connection.
    finished: Option<Token>,
    /// Try the request again (on a fresh connection when `fresh`).
    retry: Option<Box<Job>>,
    /// The server failed (passive health counts it).
    server_failed: bool,
    /// An active check's result.
    probe: Option<bool>,
    /// A client connection that stopped reading its relayed body for room, and the request:
    /// the exchange is over, so it reads on (and drops the rest).
    wake: Option<(Token, u64)>,
}

/// What feeding a relayed body to its upstream connection left to do.
enum Feed {
    Nothing,
    /// The client's connection has room to read again.
    Wake(Token, u64),
    /// The client's body failed (it was refused, or the client went): drop the exchange.
    Failed,
}

/// The upstream connection's view of the client side during one call.
struct Relay<'a> {
    link: &'a mut Option<Link>,
    slots: &'a mut [super::Slot],
    cx: &'a mut Cx,
    sites: &'a SiteSet,
    log: &'a mut Option<crate::app::access_log::LogBuffer>,
    counters: Option<&'a crate::stats::Counters>,
    /// The worker's per-site counters (empty unless metrics are on).
    site_counters: &'a [crate::stats::SiteCounters],
    /// The connection served an exchange before (a close before any byte may be the
    /// upstream's keep-alive timeout, not this request).
    reused: bool,
    tries: u32,
    /// The server this connection goes to (its index in the upstream).
    server: usize,
    /// Its counters, when metrics are on.
    stats: Option<&'a UpCounters>,
    /// Its address, for the access log; its upstream's name, for the error log.
    addr: Option<&'a UpstreamAddr>,
    upstream: &'a str,
    /// An active check's connection: the status that passes.
    probe: Option<u16>,
    after: &'a mut After,
    /// The answer's field list of the last exchange, empty, kept for its allocation.
    fields: Vec<Field<'static>>,
}

/// A field of a proxied answer: its name and value.
type Field<'a> = (&'a [u8], &'a [u8]);

/// `list` emptied, as a list of fields of another lifetime in the same allocation (the
/// standard library collects a mapped `into_iter` of a same-sized type in place): an answer's
/// field list is kept between exchanges that borrow different heads, without a `malloc` and a
/// `free` each (callgrind, docs/benchmarks.md's section on a miss's instructions).
fn emptied<'b>(mut list: Vec<Field<'_>>) -> Vec<Field<'b>> {
    list.clear();
    list.into_iter().map(|_| unreachable!("emptied")).collect()
}

/// The client connection of `token`, if it is still there.
fn client(slots: &mut [super::Slot], token: Token) -> Option<&mut super::Live> {
    let slot = slots.get_mut((token & 0xffff_ffff) as usize)?;
    if slot.generation != (token >> 32) as u32 {
        return None;
    }
    slot.live.as_mut()
}

/// Where a proxied answer is counted and logged: the worker's counters, the upstream's, the
/// site's access log. Both relays (HTTP/1.1 upstreams here, HTTP/2 ones in `upstream_h2.rs`)
/// account through it.
pub(super) struct Books<'a> {
    pub(super) sites: &'a SiteSet,
    pub(super) log: &'a mut Option<crate::app::access_log::LogBuffer>,
    pub(super) counters: Option<&'a crate::stats::Counters>,
    pub(super) site_counters: &'a [crate::stats::SiteCounters],
    pub(super) stats: Option<&'a UpCounters>,
    pub(super) addr: Option<&'a UpstreamAddr>,
}

/// Adds a caching mount's `Cache-Status` to the proxy's own error answer.
fn with_cache_status(resp: &mut crate::Response, value: Option<Vec<u8>>) {
    if let Some(v) = value.and_then(|v| String::from_utf8(v).ok()) {
        resp.headers
            .push((Cow::Borrowed("Cache-Status"), Cow::Owned(v)));
    }
}

/// The `detail` of the Cache-Status on the proxy's own answer when `error` left it none.
fn failure_detail(error: UpError) -> &'static str {
    match error {
        UpError::Connect | UpError::Timeout(h1c::Phase::Connect) => "connect-failed",
        UpError::Timeout(_) => "timeout",
        UpError::Closed => "closed",
        UpError::Malformed(_) => "malformed-answer",
        UpError::CutOff => "cut-off",
        UpError::Unsolicited => "unsolicited-answer",
    }
}

/// An exchange as it ended: its site, when its head came in and went up (µs), whether the
/// upstream's answer began and its status (0: none came), its access-log record.
pub(super) struct Ended<'a> {
    pub(super) site: usize,
    pub(super) started: u64,
    pub(super) sent: u64,
    pub(super) answered: bool,
    pub(super) up_status: u16,
    pub(super) log: Option<&'a LogMeta>,
    /// A proxied gRPC call's `grpc-status`, from its upstream's trailers (or Trailers-Only
    /// head), for the access log.
    pub(super) grpc_status: Option<&'static str>,
}

impl Books<'_> {
    /// Counts the client's answer (`status`, `bytes`) and the upstream's, and logs it.
    pub(super) fn account(self, status: u16, bytes: u64, e: Ended<'_>) {
        let now = crate::sys::monotonic_us();
        let us = now.saturating_sub(e.started);
        let up_us = now.saturating_sub(e.sent);
        if let Some(c) = self.counters {
            c.answered(status, crate::stats::Kind::Route, us);
            if let Some(s) = self.site_counters.get(e.site) {
                s.answered(status, bytes);
            }
        }
        if let Some(st) = self.stats
            && e.answered
        {
            st.answered(e.up_status, up_us);
        }
        let site = self.sites.sites.get(e.site);
        if let (Some(log), Some(m)) = (self.log.as_mut(), e.log) {
            let sink = site.log;
            let upstream = self.addr.map(|addr| UpstreamEntry {
                addr,
                // No answer came (a failure before its head): the status the proxy gave.
                status: if e.up_status == 0 {
                    status
                } else {
                    e.up_status
                },
                time_us: up_us,
            });
            let mut entry = m.entry(status, bytes as usize, us, &site.server_name, upstream);
            entry.grpc_status = e.grpc_status;
            log.push(sink, &entry);
        }
    }
}

impl Relay<'_> {
    /// The server's address for the error log (`-` when the reload removed it).
    fn server_name(&self) -> String {
        self.addr.map_or_else(|| "-".to_string(), |a| a.to_string())
    }

    /// Logs and counts the exchange's answer.
    fn account(&mut self, status: u16, bytes: u64, link: &Link) {
        let ended = Ended {
            site: link.site,
            started: link.started,
            sent: link.sent,
            answered: link.answered,
            up_status: link.status,
            log: link.log.as_ref(),
            grpc_status: None,
        };
        let books = Books {
            sites: self.sites,
            log: &mut *self.log,
            counters: self.counters,
            site_counters: self.site_counters,
            stats: self.stats,
            addr: self.addr,
        };
        books.account(status, bytes, ended);
    }
}

impl Relay<'_> {
    /// The exchange is over while its body may still be arriving: the client's connection
    /// reads the rest and drops it (woken if it waited for room).
    fn close_pipe(&mut self, pipe: Option<PipeOut>, client: Token, id: u64) {
        if pipe.is_some_and(|p| p.close()) {
            self.after.wake = Some((client, id));
        }
    }

    /// Answers the client with `status` (the site's error page when it has one), with the
    /// mount cache's `Cache-Status` when it has one, and logs it.
    fn answer_error(&mut self, status: u16, link: &Link, cache_status: Option<Vec<u8>>) {
        let site = self.sites.sites.iter().nth(link.site);
        let mut resp = site
            .and_then(|s| s.error_page(status))
            .unwrap_or_else(|| crate::h1::status_response(status, ""));
        with_cache_status(&mut resp, cache_status);
        if let (Some(site), Some(path)) = (site, &link.path) {
            for (name, value) in site.proxied_fields(path) {
                resp.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
                let field = (Cow::Owned(name.to_string()), Cow::Owned(value.to_string()));
                resp.headers.push(field);
            }
        }
        let bytes = if link.head_request {
            0
        } else {
            resp.body.len()
        };
        if let Some(live) = client(self.slots, link.client) {
            // The client's listener announces HTTP/3 on every answer (set only here: the
            // driver's `with` sets it for calls it makes, and this is not one).
            self.cx.alt_svc = live.alt_svc;
            live.conn.complete(link.id, resp, self.cx);
            self.cx.alt_svc = None;
        }
        self.after.client = Some(link.client);
        self.account(status, bytes, link);
    }
}

impl Relay<'_> {
    /// Answers the exchange's client from the store (a validation freshened the entry, or
    /// the upstream failed and a stale answer may be used), and logs it.
    fn answer_hit(&mut self, hit: Hit) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        if let Some(m) = link.log.as_mut() {
            m.cache = Some(hit.outcome);
        }
        let site = self.sites.sites.iter().nth(link.site);
        let mut fields = super::cache::hit_fields(&hit, site, link.route, link.path.as_deref());
        let coding = link
            .coding
            .zip(site)
            .map(|(c, s)| (c, &s.compression, super::cache::mount_store(s, link.route)));
        let mut bytes = 0;
        if let Some(live) = client(self.slots, link.client) {
            self.cx.alt_svc = live.alt_svc;
            let cx = &mut *self.cx;
            bytes = super::cache::send_hit(
                &mut live.conn,
                link.id,
                &hit,
                &mut fields,
                link.head_request,
                coding,
                cx,
            );
            self.cx.alt_svc = None;
            link.answered = true;
        }
        self.after.client = Some(link.client);
        if let Some(l) = self.link.take() {
            self.account(hit.status, bytes, &l);
            *self.link = Some(l);
        }
    }
}

impl h1c::Exchange for Relay<'_> {
    fn interim(&mut self, info: &ResponseInfo, head: &[u8], spans: &[FieldSpan]) {
        let Some(link) = self.link.as_ref() else {
            return;
        };
        // A forward-auth check's and a background refresh's interim answers are this hop's.
        let auth = link.job.as_ref().is_some_and(|j| j.then.is_some());
        if auth || link.discard || link.background || link.gone {
            return;
        }
        let default = reply::Policy::default();
        let policy = self
            .sites
            .sites
            .iter()
            .nth(link.site)
            .and_then(|s| s.proxies.get(link.route))
            .map_or(&default, |r| &r.response);
        let fields: Vec<(&[u8], &[u8])> = reply::fields(head, spans, info, policy).collect();
        let cx = &mut *self.cx;
        if let Some(live) = client(self.slots, link.client)
            && live.conn.interim(link.id, info.status, &fields, cx)
        {
            self.after.client = Some(link.client);
        }
    }

    fn head(&mut self, info: &ResponseInfo, head: &[u8], spans: &[FieldSpan]) {
        if let Some(want) = self.probe {
            self.after.probe.get_or_insert(info.status == want);
        }
        let Some(link) = self.link.as_mut() else {
            return;
        };
        let mut job = link.job.take();
        if let Some(then) = job.as_mut().and_then(|j| j.then.take()) {
            // A forward-auth answer.
            match auth::verdict(info.status) {
                auth::Verdict::Allow => {
                    let mut then = then;
                    // The list the request was routed by (not looked up again: a reload may
                    // have moved the mounts since).
                    if let Some(copy) = job.as_ref().and_then(|j| j.copy.as_deref()) {
                        auth::copy_fields(&mut then.head, head, spans, copy);
                        if let Some(x) = then.cache.as_mut() {
                            x.authorized(copy, auth::copied(head, spans, copy));
                        }
                    }
                    let job = then;
                    link.discard = true;
                    self.after.retry = Some(job);
                    return;
                }
                auth::Verdict::Refuse => {
                    // The client's answer, as it came (below); the request is not sent.
                    let mut then = then;
                    link.log = then.log.take();
                    link.head_request = then.forwarded.head_request;
                    let (client, id) = (link.client, link.id);
                    self.close_pipe(then.pipe.take(), client, id);
                }
                auth::Verdict::Error => {
                    let mut then = then;
                    let (client, id) = (link.client, link.id);
                    self.close_pipe(then.pipe.take(), client, id);
                    let Some(link) = self.link.as_mut() else {
                        return;
                    };
                    tracing::warn!(
                        status = info.status,
                        "forward auth answered neither 2xx nor 401/403"
                    );
                    link.discard = true;
                    link.log = then.log;
                    link.head_request = then.forwarded.head_request;
                    if let Some(l) = self.link.take() {
                        self.answer_error(500, &l, None);
                        *self.link = Some(l);
                    }
                    return;
                }
            }
        }
        let Some(link) = self.link.as_mut() else {
            return;
        };
        link.cache = job.as_mut().and_then(|j| j.cache.take());
        let mut cache_fields = Vec::new();
        if let Some(x) = link.cache.as_mut() {
            let length = match info.length {
                BodyLength::Length(n) => Some(n),
                BodyLength::Empty => Some(0),
                BodyLength::Chunked | BodyLength::UntilClose => None,
            };
            let after = x.after_head(info.status, head, spans, length);
            if link.background {
                // Only the store hears the answer; its body, if stored, is collected as it is
                // read and dropped.
                link.discard = true;
                link.status = info.status;
                return;
            }
            match after {
                AfterHead::Relay(extra) => cache_fields = extra,
                AfterHead::Answer(hit) => {
                    // The upstream's body (a 304's is empty) is read and dropped.
                    link.discard = true;
                    link.status = hit.status;
                    return self.answer_hit(hit);
                }
                AfterHead::Refetch => {
                    if let Some(mut job) = job {
                        crate::proxy::cache::strip_validators(&mut job.head);
                        job.cache = link.cache.take();
                        link.discard = true;
                        self.after.retry = Some(job);
                    }
                    return;
                }
            }
        }
        let default = reply::Policy::default();
        let site = self.sites.sites.iter().nth(link.site);
        let policy = site
            .and_then(|s| s.proxies.get(link.route))
            .map_or(&default, |r| &r.response);
        let mut fields = emptied(std::mem::take(&mut self.fields));
        fields.extend(reply::fields(head, spans, info, policy));
        // A caching mount's answer: the origin's tags are the cache's, never the client's
        // (as Fastly strips `Surrogate-Key`); they are stored all the same.
        if link.cache.is_some() {
            fields.retain(|(n, _)| !linerate_cache::tags::is_tag_field(n));
        }
        if let Some(path) = &link.path
            && let Some(site) = site
        {
            // The site's fields replace the upstream's of the same name, as on every answer
            // of the site; the mount's own `set_response`/`remove_response` win over them.
            let mut added = site.proxied_fields(path);
            added.retain(|(n, _)| !policy.names(n.as_bytes()));
            fields.retain(|(n, _)| {
                !added
                    .iter()
                    .any(|(a, _)| n.eq_ignore_ascii_case(a.as_bytes()))
            });
            fields.extend(added.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
        }
        for (n, v) in &policy.set {
            fields.push((n.as_bytes(), v.as_bytes()));
        }
        let mut length = match info.length {
            BodyLength::Length(n) => Some(n),
            BodyLength::Empty => Some(0),
            BodyLength::Chunked | BodyLength::UntilClose => None,
        };
        // The site's compression (a request from a site that compresses carries its coding).
        let plan = match (site, link.coding) {
            (Some(s), Some(_)) => crate::app::compress_stream::plan(
                link.coding,
                info.status,
                &fields,
                length,
                &s.compression,
            ),
            _ => Plan::AsIs,
        };
        let rewrite = (plan != Plan::AsIs).then(|| Rewrite::new(plan, &fields));
        if let Some(r) = &rewrite {
            fields.retain(|(n, _)| r.keeps(n));
            if let Some(etag) = &r.etag {
                fields.push((b"ETag", etag));
            }
            if let (Some(name), Plan::Encode(coding), Some(s)) = (r.encoding, plan, site) {
                link.encoder = StreamEncoder::new(coding, length, &s.compression);
                fields.push((b"Content-Encoding", name.as_bytes()));
                length = None;
            }
            if r.vary {
                fields.push((b"Vary", b"Accept-Encoding"));
            }
        }
        fields.push((b"Via", reply::via(info.version).as_bytes()));
        fields.extend(cache_fields.iter().map(|(n, v)| (*n, &v[..])));
        let stream_head = StreamHead {
            status: info.status,
            fields: &fields,
            length,
            date: None,
        };
        link.status = info.status;
        let cx = &mut *self.cx;
        let started = client(self.slots, link.client).is_some_and(|live| {
            // The client's listener announces HTTP/3 on every answer, proxied ones too.
            cx.alt_svc = live.alt_svc;
            let started = live.conn.start_stream(link.id, &stream_head, cx);
            cx.alt_svc = None;
            started
        });
        if started {
            link.answered = true;
            link.tunnel = info.status == 101;
            self.after.client = Some(link.client);
        } else {
            link.gone = true;
        }
        self.after.spent = job;
        self.fields = emptied(fields);
        if started && link.head_only {
            // The HEAD client's answer is whole with its head.
            if let Some(live) = client(self.slots, link.client) {
                live.conn.stream_end(link.id, self.cx);
            }
            // Nothing to keep: the body is not read.
            link.gone = !link.cache.as_ref().is_some_and(|x| x.storing());
            if let Some(l) = self.link.take() {
                self.account(l.status, 0, &l);
                *self.link = Some(l);
            }
        }
    }

    fn data(&mut self, data: &[u8]) -> bool {
        let Some(link) = self.link.as_mut() else {
            return false;
        };
        if let Some(x) = link.cache.as_mut() {
            x.data(data);
        }
        if link.head_only {
            // Read for the store alone; past max_object, not read on.
            link.gone = !link.cache.as_ref().is_some_and(|x| x.storing());
            return !link.gone;
        }
        if link.discard {
            return true;
        }
        if link.gone {
            return false;
        }
        let Some(live) = client(self.slots, link.client) else {
            link.gone = true;
            return false;
        };
        let piece = match link.encoder.as_mut() {
            Some(e) => e.push(data),
            None => data,
        };
        if !piece.is_empty() && !live.conn.stream_data(link.id, piece, self.cx) {
            link.gone = true;
            return false;
        }
        link.bytes += piece.len() as u64;
        self.after.client = Some(link.client);
        let room = live.conn.stream_room(link.id);
        link.paused = !room;
        room
    }

    fn end(&mut self) {
        let Some(mut link) = self.link.take() else {
            return;
        };
        if let Some(x) = link.cache.as_mut() {
            x.end();
        }
        self.close_pipe(link.pipe.take(), link.client, link.id);
        if link.discard || link.head_only {
            // A forward-auth answer: the client's answer is the request's, or was given; a
            // HEAD's answer was whole with its head (and accounted then).
            self.after.finished = Some(link.client);
            return;
        }
        if let Some(live) = client(self.slots, link.client) {
            if let Some(tail) = link.encoder.take().map(StreamEncoder::finish)
                && !tail.is_empty()
                && !link.gone
                && live.conn.stream_data(link.id, &tail, self.cx)
            {
                link.bytes += tail.len() as u64;
            }
            live.conn.stream_end(link.id, self.cx);
        }
        self.after.client = Some(link.client);
        self.after.finished = Some(link.client);
        let (status, bytes) = (link.status, if link.head_request { 0 } else { link.bytes });
        self.account(status, bytes, &link);
    }

    fn failed(&mut self, error: UpError) {
        if self.probe.is_some() {
            self.after.probe.get_or_insert(false);
        }
        let Some(mut link) = self.link.take() else {
            return;
        };
        self.after.finished = Some(link.client);
        self.after.client = Some(link.client);
        self.after.server_failed = error.counts_against_server(link.answered);
        if let Some(st) = self.stats {
            st.failed(match error {
                UpError::Connect | UpError::Timeout(h1c::Phase::Connect) => 0,
                UpError::Timeout(_) => 1,
                UpError::Closed => 2,
                UpError::Malformed(_) | UpError::Unsolicited => 3,
                UpError::CutOff => 4,
            });
        }
        if link.discard {
            // A forward-auth answer whose verdict was acted on already.
            return;
        }
        let auth = link.job.as_ref().is_some_and(|j| j.then.is_some());
        // A body that went up in part cannot be sent again: no other try.
        let body_sent = link.pipe.as_ref().is_some_and(|p| p.taken() > 0);
        if !link.answered && !link.gone {
            let mut cache = None;
            if let Some(mut job) = link.job.take() {
                let stale = self.reused && error == UpError::Closed && !job.fresh && !body_sent;
                let again = !body_sent
                    && match error {
                        UpError::Connect | UpError::Timeout(h1c::Phase::Connect) => true,
                        UpError::Closed => job.idempotent,
                        _ => false,
                    };
                if (stale && job.idempotent) || (again && job.tries + 1 < self.tries) {
                    // The body still arriving goes with the next try.
                    job.pipe = link.pipe.take();
                }
                if stale {
                    // Not the server's failure: its keep-alive ended meanwhile.
                    self.after.server_failed = false;
                }
                if stale && job.idempotent {
                    // A pooled connection the upstream closed meanwhile: one more try on a
                    // fresh one, not counted against the tries.
                    job.fresh = true;
                    job.log = link.log.take();
                    self.after.retry = Some(job);
                    return;
                }
                if again && job.tries + 1 < self.tries {
                    job.tries += 1;
                    job.failed_server = Some(self.server);
                    job.log = link.log.take();
                    self.after.retry = Some(job);
                    return;
                }
                if let Some(then) = job.then.take() {
                    link.log = then.log;
                    link.head_request = then.forwarded.head_request;
                }
                cache = job.cache.take();
            }
            self.close_pipe(link.pipe.take(), link.client, link.id);
            let timeout = matches!(error, UpError::Timeout(_));
            if let Some(hit) = cache.as_mut().and_then(|x| x.failed(timeout)) {
                // stale-if-error (RFC 5861 §4): the stored answer instead of the error.
                crate::log_limit::warn_limited!("upstream exchange failed, stale used", self.upstream, upstream = %self.upstream, server = %self.server_name(), error = %error, "upstream exchange failed; a stale answer was used");
                link.status = hit.status;
                *self.link = Some(link);
                self.answer_hit(hit);
                *self.link = None;
                return;
            }
            let status = match error {
                // Forward auth that cannot answer is the server's failure (nginx's too).
                _ if auth => 500,
                UpError::Timeout(_) => 504,
                _ => 502,
            };
            // The request's id (kept with its log record: an access log or tracing on) ties
            // this line to its access-log line, its span and the application's log.
            let request_id = link.log.as_ref().and_then(|m| m.trace.request_id_text());
            crate::log_limit::warn_limited!("upstream exchange failed", self.upstream, upstream = %self.upstream, server = %self.server_name(), error = %error, status, auth, request_id = request_id.as_deref().unwrap_or("-"), "upstream exchange failed");
            let cache_status = cache
                .as_ref()
                .filter(|_| !auth)
                .and_then(|x| x.error_status(failure_detail(error)));
            self.answer_error(status, &link, cache_status);
        } else {
            let request_id = link.log.as_ref().and_then(|m| m.trace.request_id_text());
            crate::log_limit::warn_limited!("upstream exchange cut", self.upstream, upstream = %self.upstream, server = %self.server_name(), error = %error, request_id = request_id.as_deref().unwrap_or("-"), "upstream exchange failed after its answer began");
            self.close_pipe(link.pipe.take(), link.client, link.id);
            if let Some(live) = client(self.slots, link.client) {
                live.conn.stream_abort(link.id, self.cx);
            }
            // The answer is cut: logged as nginx does, with the status the client saw.
            let (status, bytes) = (link.status, link.bytes);
            self.account(status, bytes, &link);
        }
    }
}

impl<B: Backend> Worker<B> {
    /// Sends the proxied requests decided during the last call into a client connection.
    #[cold]
    #[inline(never)]
    pub(super) fn start_jobs(&mut self, sh: &Shared) {
        let mut jobs = std::mem::take(&mut self.io.app.jobs);
        for mut job in jobs.drain(..) {
            // Routed by this epoch's sites (the content phase ran in this turn).
            job.epoch = self.pools.epoch;
            if let Some(then) = job.then.as_mut() {
                then.epoch = self.pools.epoch;
            }
            // A hit the content phase found is answered here, its box kept for the next job.
            if let Some(hit) = job.hit.take() {
                self.answer_job(&mut job, *hit, sh);
                self.io.app.spares.put(job);
                continue;
            }
            self.dispatch(job, sh);
        }
        if self.io.app.jobs.is_empty() {
            self.io.app.jobs = jobs;
        }
    }

    /// Sends `job` to a server of its upstream: on a pooled connection, a new one, or into
    /// the waiting line when every connection allowed is busy.
    pub(super) fn dispatch(&mut self, mut job: Box<Job>, sh: &Shared) {
        if let Some(hit) = job.hit.take() {
            return self.answer_job(&mut job, *hit, sh);
        }
        if job.epoch != self.pools.epoch {
            // A reload came since it was routed: its upstream is the new one of that name.
            self.pools.bring_up_to_date(&mut job);
        }
        if job.cache.as_ref().is_some_and(|c| !c.planned) {
            if let Some(job) = self.cache_before(job, sh) {
                self.dispatch(job, sh);
            }
            return;
        }
        let sites = self.io.sites.clone();
        let counters = self.io.app.counters_on.then_some(&*self.io.app.counters);
        self.pools.fit(&sites, counters);
        let Some(up) = sites.upstreams.get(job.upstream) else {
            return self.refuse(job, 502, sh);
        };
        if up.protocol != UpstreamProtocol::Http1 {
            #[cfg(feature = "http2")]
            return self.dispatch_h2(job, up, sh);
            // Refused at start (`features::check`) without `http2`.
            #[cfg(not(feature = "http2"))]
            return self.refuse(job, 502, sh);
        }
        if job.pipe.is_some() && !job.body.is_empty() {
            // A try an HTTP/2 upstream refused, with its body's start and the pipe of its
            // rest (`upstream_h2.rs`), and a reload made the upstream HTTP/1.1 since.
            return self.refuse(job, 502, sh);
        }
        let gi = job.upstream;
        let now = self.io.cx.now;
        let group = &mut self.pools.groups[gi];
        let server = balance::pick(
            up,
            &group.ring,
            &mut group.loads,
            now,
            job.failed_server,
            job.key,
        );
        if !job.fresh {
            while let Some(token) = self.pools.groups[gi].servers[server].idle.pop() {
                let Some(idx) = self.up_index(token) else {
                    continue;
                };
                let Some(u) = self.slots[idx as usize].up.as_mut() else {
                    continue;
                };
                u.pooled = false;
                if u.conn.is_idle() && u.link.is_none() {
                    return self.begin(idx, job, sh);
                }
            }
        }
        let state = &mut self.pools.groups[gi].servers[server];
        if up.max_conns > 0 && state.conns >= up.max_conns {
            return self.wait_for_conn(gi, up, job);
        }
        let (idx, token) = self.alloc_slot(true);
        let mut conn = h1c::Conn::new(now, timeouts(up));
        match self
            .backend
            .connect(&up_addr(&up.servers[server].addr), token)
        {
            Submitted::Done(()) => conn.connected(now),
            Submitted::Pending => {}
            Submitted::Failed => {
                crate::log_limit::warn_limited!("upstream connect failed", &up.name, upstream = %up.name, server = %up.servers[server].addr, "upstream connect failed");
                self.backend.detach(token);
                self.free.push(idx);
                self.pools.groups[gi].failed(server, up, now);
                let mut job = job;
                job.failed_server = Some(server);
                if job.tries + 1 < up.tries {
                    job.tries += 1;
                    return self.dispatch(job, sh);
                }
                return self.refuse(job, 502, sh);
            }
        }
        self.pools.groups[gi].servers[server].conns += 1;
        self.slots[idx as usize].up = Some(Box::new(UpLive {
            conn,
            group: gi,
            server,
            epoch: self.pools.epoch,
            armed: u64::MAX,
            receiving: false,
            link: None,
            probe: false,
            pooled: false,
        }));
        self.begin(idx, job, sh);
    }

    /// Answers a job that cannot be sent anywhere, and logs it (with the server whose
    /// connection failed last, when one did).
    pub(super) fn refuse(&mut self, mut job: Box<Job>, status: u16, sh: &Shared) {
        let sites = &self.io.sites;
        let site = sites.sites.get(job.site);
        let mut resp = site
            .error_page(status)
            .unwrap_or_else(|| crate::h1::status_response(status, ""));
        // No server could be tried, or none could be connected to.
        let detail = if job.failed_server.is_some() {
            "connect-failed"
        } else {
            "no-server"
        };
        with_cache_status(
            &mut resp,
            job.cache.as_ref().and_then(|x| x.error_status(detail)),
        );
        if let (Some(log), Some(m)) = (self.io.app.log.as_mut(), job.log.as_ref()) {
            let sink = site.log;
            let addr = job
                .failed_server
                .and_then(|s| sites.upstreams.get(job.upstream)?.servers.get(s));
            let upstream = addr.map(|s| UpstreamEntry {
                addr: &s.addr,
                status,
                // The connection was refused at once.
                time_us: 0,
            });
            let us = crate::sys::monotonic_us().saturating_sub(job.started);
            let bytes = if job.forwarded.head_request {
                0
            } else {
                resp.body.len() as usize
            };
            log.push(
                sink,
                &m.entry(status, bytes, us, &site.server_name, upstream),
            );
        }
        let (client, id) = (job.client, job.id);
        let wake = job.pipe.take().is_some_and(|p| p.close());
        self.with(client, sh, |live, p| {
            live.conn.complete(id, resp, p.cx);
            if wake {
                live.conn.body_room(id, p.head, p.cx, &mut p.svc);
            }
        });
    }

    /// Starts `job`'s exchange on the free upstream connection in slot `idx`.
    fn begin(&mut self, idx: u32, mut job: Box<Job>, sh: &Shared) {
        let now = self.io.cx.now;
        // It has its connection: a later try that waits again waits its own time.
        job.waits_until = 0;
        let token = self.token(idx);
        let Some(up) = self.slots[idx as usize].up.as_mut() else {
            return;
        };
        if let Some(load) = self
            .pools
            .groups
            .get_mut(up.group)
            .and_then(|g| g.loads.get_mut(up.server))
        {
            load.active += 1;
        }
        let (gi, si) = (up.group, up.server);
        self.pools.publish(gi, si);
        let Some(up) = self.slots[idx as usize].up.as_mut() else {
            return;
        };
        let pipe = job.pipe.take();
        let head_only =
            job.forwarded.head_request && job.cache.as_ref().is_some_and(|x| x.head_as_get());
        if head_only && job.head.starts_with(b"HEAD ") {
            job.head.splice(..4, *b"GET");
        }
        let body = match job.forwarded.body {
            // A buffered chunked body goes up with its length; one still arriving goes as
            // the head says (its declared length, or chunked).
            ReqBody::Chunked if pipe.is_none() => ReqBody::Length(job.body.len() as u64),
            b => b,
        };
        up.conn.start(
            &job.head,
            body,
            job.forwarded.head_request && !head_only,
            job.forwarded.upgrade,
            now,
        );
        if !job.body.is_empty() {
            up.conn.body(&job.body);
        }
        up.link = Some(Link {
            client: job.client,
            id: job.id,
            site: job.site,
            route: job.route,
            answered: false,
            body_done: pipe.is_none(),
            pipe,
            gone: false,
            paused: false,
            tunnel: false,
            discard: false,
            status: 0,
            bytes: 0,
            head_request: job.forwarded.head_request,
            head_only,
            started: job.started,
            sent: crate::sys::monotonic_us(),
            log: job.log.take(),
            coding: job.coding,
            encoder: None,
            path: job.path.clone(),
            cache: None,
            background: job.background,
            job: Some(job),
        });
        let client = up.link.as_ref().map_or(0, |l| l.client);
        let background = up.link.as_ref().is_some_and(|l| l.background);
        if !background && let Some(live) = client_live(&mut self.slots, client) {
            live.relays
                .get_or_insert_with(Default::default)
                .0
                .push(token);
        }
        self.pump_up(idx, sh);
    }

    /// The slot index of a live upstream connection's token.
    fn up_index(&self, token: Token) -> Option<u32> {
        let idx = (token & 0xffff_ffff) as u32;
        let slot = self.slots.get(idx as usize)?;
        (slot.generation == (token >> 32) as u32 && slot.up.is_some()).then_some(idx)
    }

    /// A completion for an upstream connection.
    #[cold]
    #[inline(never)]
    pub(super) fn up_event(&mut self, c: Completion, sh: &Shared) {
        if !self.pools.links.is_empty()
            && let Completion::Connected { token }
            | Completion::Received { token, .. }
            | Completion::Eof { token }
            | Completion::Sent { token, .. }
            | Completion::Failed { token } = &c
            && let Some(i) = self.pools.links.of(*token)
        {
            return self.link_event(i, c, sh);
        }
        #[cfg(feature = "http2")]
        if let Completion::Connected { token }
        | Completion::Received { token, .. }
        | Completion::Eof { token }
        | Completion::Sent { token, .. }
        | Completion::Failed { token } = &c
            && self.is_h2((token & 0xffff_ffff) as u32)
        {
            return self.h2_event(c, sh);
        }
        match c {
            Completion::Connected { token } => {
                self.on_up(token, sh, &mut |conn, now, _| conn.connected(now));
            }
            Completion::Received { token, buf } => {
                self.on_up(token, sh, &mut |conn, now, ex| conn.recv(&buf, now, ex));
                self.backend.recycle(buf);
            }
            Completion::Eof { token } => self.on_up(token, sh, &mut |conn, _, ex| conn.eof(ex)),
            Completion::Sent { token, buf } => {
                let mut buf = Some(buf);
                self.on_up(token, sh, &mut |conn, now, _| {
                    if let Some(b) = buf.take() {
                        conn.reuse_output(b);
                    }
                    conn.sent(now)
                });
                if self.is_tunnel(token) {
                    // Room upstream: the client's held bytes can follow.
                    self.up_ready.push(token);
                }
            }
            Completion::Failed { token } => self.on_up(token, sh, &mut |conn, _, ex| {
                if conn.is_connecting() {
                    conn.connect_failed(ex)
                } else {
                    conn.broken(ex)
                }
            }),
            _ => {}
        }
    }

    /// A deadline of the upstream connection in slot `idx` passed.
    pub(super) fn up_timer(&mut self, idx: u32, sh: &Shared) {
        #[cfg(feature = "http2")]
        if self.is_h2(idx) {
            return self.h2_timer(idx, sh);
        }
        let token = self.token(idx);
        if let Some(up) = self.slots[idx as usize].up.as_mut() {
            up.armed = u64::MAX;
            if up.conn.deadline() > self.io.cx.now {
                return self.settle_up(idx);
            }
        }
        self.on_up(token, sh, &mut |conn, now, ex| conn.on_timer(now, ex));
    }

    /// Runs `f` on the upstream connection of `token` with its exchange's relay, then does
    /// what that left to do. `f` is a `dyn`: generic, this (about 20 KB) was compiled once
    /// per caller's closure, nine times.
    fn on_up(
        &mut self,
        token: Token,
        sh: &Shared,
        f: &mut dyn FnMut(&mut h1c::Conn, u64, &mut Relay<'_>),
    ) {
        let Some(idx) = self.up_index(token) else {
            return;
        };
        let Some(mut up) = self.slots[idx as usize].up.take() else {
            return;
        };
        let mut after = After::default();
        let tries = self.io.sites.upstreams.get(up.group).map_or(1, |u| u.tries);
        let now = self.io.cx.now;
        let fields = std::mem::take(&mut self.pools.fields);
        let kept = {
            let counters = sh.app.metrics.then_some(&*self.io.app.counters);
            let mut relay = Relay {
                link: &mut up.link,
                slots: &mut self.slots,
                cx: &mut self.io.cx,
                sites: &self.io.sites,
                log: &mut self.io.app.log,
                counters,
                site_counters: &self.io.app.site_counters,
                reused: up.conn.reused(),
                tries,
                server: up.server,
                stats: self.pools.stats(up.group, up.server),
                addr: self
                    .io
                    .sites
                    .upstreams
                    .get(up.group)
                    .and_then(|u| u.servers.get(up.server))
                    .map(|s| &s.addr),
                upstream: self
                    .io
                    .sites
                    .upstreams
                    .get(up.group)
                    .map_or("-", |u| u.name.as_str()),
                probe: up.probe.then(|| {
                    self.io
                        .sites
                        .upstreams
                        .get(up.group)
                        .and_then(|u| u.health.as_ref())
                        .map_or(200, |h| h.status)
                }),
                after: &mut after,
                fields,
            };
            f(&mut up.conn, now, &mut relay);
            relay.fields
        };
        self.pools.fields = kept;
        if let Some(job) = after.spent.take() {
            self.io.app.spares.put(job);
        }
        if up.probe {
            let (gi, si) = (up.group, up.server);
            self.slots[idx as usize].up = Some(up);
            if let Some(pass) = after.probe {
                self.check_done(gi, si, pass);
                return self.close_up(idx); // no second verdict: the check is done
            }
            return self.pump_up(idx, sh);
        }
        let gone = up.link.as_ref().is_some_and(|l| l.gone);
        if let Some(g) = self.pools.groups.get_mut(up.group)
            && up.server < g.loads.len()
        {
            if after.server_failed
                && let Some(conf) = self.io.sites.upstreams.get(up.group)
            {
                g.failed(up.server, conf, now);
            }
            let load = &mut g.loads[up.server];
            if after.finished.is_some() {
                load.active = load.active.saturating_sub(1);
            }
            if after.server_failed
                && let Some(st) = self.pools.stats(up.group, up.server)
            {
                let load = &self.pools.groups[up.group].loads[up.server];
                if load.down_until > now {
                    st.down_until(self.started + load.down_until);
                }
            }
            self.pools.publish(up.group, up.server);
        }
        self.slots[idx as usize].up = Some(up);
        if let Some(client) = after.finished
            && let Some(live) = client_live(&mut self.slots, client)
            && let Some(r) = live.relays.as_mut()
        {
            // Kept when empty: the connection's next proxied request reuses it.
            r.0.retain(|&t| t != token);
        }
        if let Some(client) = after.client {
            self.with(client, sh, |_, _| {});
        }
        if let Some((client, id)) = after.wake {
            self.with(client, sh, |live, p| {
                live.conn.body_room(id, p.head, p.cx, &mut p.svc);
            });
        }
        if let Some(job) = after.retry {
            self.dispatch(job, sh);
        }
        if gone {
            // The client's answer is gone: the rest of the response is not read.
            return self.close_up(idx);
        }
        self.pump_up(idx, sh);
    }

    /// Transmits what the upstream connection has to send; pools it after a whole exchange;
    /// closes it when it is done.
    fn pump_up(&mut self, idx: u32, sh: &Shared) {
        let token = self.token(idx);
        let mut feeds = 0;
        loop {
            // A relayed body: each send done at once makes room for more of it, up to
            // MAX_FEEDS rounds; the rest goes on next turn, so one upload cannot hold the loop.
            if feeds == MAX_FEEDS {
                feeds += 1;
                self.up_ready.push(token);
            } else if feeds < MAX_FEEDS {
                feeds += 1;
                match self.feed_body(idx) {
                    Feed::Nothing => {}
                    Feed::Wake(client, id) => self.with(client, sh, |live, p| {
                        live.conn.body_room(id, p.head, p.cx, &mut p.svc);
                    }),
                    Feed::Failed => return self.close_up(idx),
                }
            }
            let Some(up) = self.slots[idx as usize].up.as_mut() else {
                return;
            };
            match up.conn.poll_transmit() {
                h1c::Transmit::Bytes => {
                    let buf = up.conn.take_output();
                    match self.backend.send(token, buf, false) {
                        Submitted::Done(buf) => {
                            up.conn.reuse_output(buf);
                            up.conn.sent(self.io.cx.now);
                        }
                        Submitted::Pending => {
                            up.conn.stalled(self.io.cx.now);
                            break;
                        }
                        Submitted::Failed => {
                            return self.on_up(token, sh, &mut |conn, _, ex| conn.broken(ex));
                        }
                    }
                }
                h1c::Transmit::Close => return self.close_up(idx),
                h1c::Transmit::Idle => break,
            }
        }
        let Some(up) = self.slots[idx as usize].up.as_mut() else {
            return;
        };
        if up.link.is_none() && up.conn.is_idle() && !up.probe {
            let (gi, si) = (up.group, up.server);
            let current = up.epoch == self.pools.epoch;
            // A connection of the set a reload replaced serves nothing of the new one's.
            if let Some(job) = (self.pools.groups.get_mut(gi))
                .filter(|_| current)
                .and_then(|g| g.waiting.pop_front())
            {
                return self.begin(idx, job, sh);
            }
            let keep = self.io.sites.upstreams.get(gi).map_or(0, |u| u.keepalive);
            match self
                .pools
                .groups
                .get_mut(gi)
                .and_then(|g| g.servers.get_mut(si))
            {
                Some(s) if current && s.idle.len() < keep => {
                    if !up.pooled {
                        up.pooled = true;
                        s.idle.push(token);
                    }
                    self.pools.publish(gi, si);
                }
                _ => return self.close_up(idx),
            }
        }
        self.settle_up(idx);
    }

    /// Moves what arrived of the exchange's request body into the upstream connection's
    /// output, as much as it has room for ([`crate::h1::STREAM_ROOM`]); nothing while it
    /// connects, so that a failed connect leaves the body whole for another try.
    fn feed_body(&mut self, idx: u32) -> Feed {
        let Some(up) = self.slots[idx as usize].up.as_mut() else {
            return Feed::Nothing;
        };
        let conn = &mut up.conn;
        let Some(link) = up.link.as_mut() else {
            return Feed::Nothing;
        };
        let Some(pipe) = link.pipe.as_ref().filter(|_| !link.body_done) else {
            return Feed::Nothing;
        };
        if conn.is_connecting() {
            return Feed::Nothing;
        }
        let room = crate::h1::STREAM_ROOM.saturating_sub(conn.out_len());
        let taken = pipe.take(room, |piece| conn.body(piece));
        if taken.failed {
            return Feed::Failed;
        }
        if taken.ended {
            conn.body_end();
            link.body_done = true;
        }
        if taken.wake {
            Feed::Wake(link.client, link.id)
        } else {
            Feed::Nothing
        }
    }

    /// Arms receiving and the timer as the upstream connection's state asks.
    fn settle_up(&mut self, idx: u32) {
        let token = self.token(idx);
        let Some(up) = self.slots[idx as usize].up.as_mut() else {
            return;
        };
        let want = up.conn.wants_input() && !up.link.as_ref().is_some_and(|l| l.paused);
        if want != up.receiving {
            up.receiving = want;
            self.backend.set_recv(token, want);
        }
        let deadline = up.conn.deadline();
        if deadline < up.armed {
            up.armed = self.wheel.arm(idx, deadline);
        }
    }

    /// Closes the upstream connection in slot `idx` (an exchange still on it is dropped: its
    /// client is gone).
    pub(super) fn close_up(&mut self, idx: u32) {
        let token = self.token(idx);
        let Some(up) = self.slots[idx as usize].up.take() else {
            return;
        };
        self.backend.detach(token);
        self.wheel.cancel(idx);
        if up.probe {
            // A check that ended without a verdict (a timeout, a reset) failed.
            self.free.push(idx);
            return self.check_done(up.group, up.server, false);
        }
        // A connection of the set a reload replaced counts in none of the new set's books.
        if up.epoch == self.pools.epoch
            && let Some(g) = self.pools.groups.get_mut(up.group)
        {
            if let Some(s) = g.servers.get_mut(up.server) {
                s.conns = s.conns.saturating_sub(1);
                s.idle.retain(|&t| t != token);
            }
            if up.link.is_some()
                && let Some(load) = g.loads.get_mut(up.server)
            {
                load.active = load.active.saturating_sub(1);
            }
            if !g.waiting.is_empty() {
                // Room for a request of the line: it goes on at this turn's tick (`line.rs`).
                self.pools.next_check = 0;
            }
        }
        self.pools.publish(up.group, up.server);
        if let Some(link) = &up.link
            && let Some(live) = client_live(&mut self.slots, link.client)
            && let Some(r) = live.relays.as_mut()
        {
            r.0.retain(|&t| t != token);
        }
        self.free.push(idx);
    }

    /// Starts the active health checks that are due; sets when the next ones are.
    pub(super) fn health_checks(&mut self, sh: &Shared) {
        let sites = self.io.sites.clone();
        let counters = self.io.app.counters_on.then_some(&*self.io.app.counters);
        self.pools.fit(&sites, counters);
        let now = self.io.cx.now;
        let mut next = self.expire_flights().min(self.serve_lines(&sites, sh));
        if !self.pools.links.is_empty() {
            next = next.min(self.link_deadlines(sh));
        }
        for (gi, up) in sites.upstreams.iter().enumerate() {
            let Some(check) = up.health.as_ref() else {
                continue;
            };
            let due = self.pools.groups.get(gi).map_or(u64::MAX, |g| g.next_check);
            if due <= now {
                for si in 0..up.servers.len() {
                    if self.pools.groups[gi].servers[si].probing {
                        continue;
                    }
                    // An HTTP/2 upstream's check is gRPC's health service (`upstream_h2.rs`).
                    match up.protocol {
                        UpstreamProtocol::Http1 => self.start_probe(gi, si, up, check, sh),
                        #[cfg(feature = "http2")]
                        UpstreamProtocol::H2c | UpstreamProtocol::H2 => {
                            self.pools.groups[gi].servers[si].probing = true;
                            self.start_grpc_probe(gi, si, up, check, sh);
                        }
                        #[cfg(not(feature = "http2"))]
                        _ => {}
                    }
                }
                self.pools.groups[gi].next_check = now + check.interval.as_millis() as u64;
            }
            next = next.min(self.pools.groups[gi].next_check);
        }
        self.pools.next_check = next;
    }

    /// Sends an active check to server `si` of upstream `gi` on a new connection.
    fn start_probe(
        &mut self,
        gi: usize,
        si: usize,
        up: &Upstream,
        check: &HealthCheck,
        sh: &Shared,
    ) {
        let now = self.io.cx.now;
        let t = check.timeout.as_millis().max(1) as u64;
        let timeouts = Timeouts {
            connect: t,
            send: t,
            first_byte: t,
            read: t,
            idle: t,
            tunnel: t,
        };
        let (idx, token) = self.alloc_slot(true);
        let mut conn = h1c::Conn::new(now, timeouts);
        let server = &up.servers[si];
        // In flight from here: a connect refused at once is a failed check too.
        self.pools.groups[gi].servers[si].probing = true;
        match self.backend.connect(&up_addr(&server.addr), token) {
            Submitted::Done(()) => conn.connected(now),
            Submitted::Pending => {}
            Submitted::Failed => {
                self.backend.detach(token);
                self.free.push(idx);
                return self.check_done(gi, si, false);
            }
        }
        let host = match &server.addr {
            UpstreamAddr::Tcp(a) => a.to_string(),
            UpstreamAddr::Unix(_) => "localhost".into(),
        };
        let head = format!(
            "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: linerate-health-check\r\nConnection: close\r\n\r\n",
            check.path
        );
        conn.start(head.as_bytes(), ReqBody::None, false, false, now);
        self.slots[idx as usize].up = Some(Box::new(UpLive {
            conn,
            group: gi,
            server: si,
            epoch: self.pools.epoch,
            armed: u64::MAX,
            receiving: false,
            link: None,
            probe: true,
            pooled: false,
        }));
        self.pump_up(idx, sh);
    }

    /// An active check of server `si` of upstream `gi` ended: it passed or not.
    pub(super) fn check_done(&mut self, gi: usize, si: usize, pass: bool) {
        let Some(check) = self
            .io
            .sites
            .upstreams
            .get(gi)
            .and_then(|u| u.health.clone())
        else {
            return;
        };
        let Some(g) = self.pools.groups.get_mut(gi) else {
            return;
        };
        let (Some(s), Some(load)) = (g.servers.get_mut(si), g.loads.get_mut(si)) else {
            return;
        };
        if !s.probing {
            return;
        }
        if s.checked(pass, load, &check) {
            let up = &self.io.sites.upstreams[gi];
            let (upstream, server) = (&up.name, &up.servers[si].addr);
            if s.checked_down {
                tracing::warn!(%upstream, %server, "active health check failed {} times: server taken out", check.fails);
            } else {
                tracing::info!(%upstream, %server, "active health check passed {} times: server back", check.passes);
            }
            let down = if s.checked_down { u64::MAX } else { 0 };
            if let Some(st) = self.pools.stats(gi, si) {
                st.down_until(down);
            }
        }
    }

    /// Whether the upstream connection of `token` carries a tunnel.
    fn is_tunnel(&self, token: Token) -> bool {
        self.up_index(token)
            .and_then(|idx| self.slots[idx as usize].up.as_ref())
            .and_then(|u| u.link.as_ref())
            .is_some_and(|l| l.tunnel)
    }

    /// Moves the client's held tunnel bytes to the upstream connection in slot `idx`, as
    /// much as its output has room for ([`crate::h1::STREAM_ROOM`]); ends the tunnel's
    /// upstream side when the client's has ended.
    fn tunnel_pump(&mut self, idx: u32, sh: &Shared) {
        let token = self.token(idx);
        let Some(mut up) = self.slots[idx as usize].up.take() else {
            return;
        };
        let Some(client_token) = up.link.as_ref().map(|l| l.client) else {
            self.slots[idx as usize].up = Some(up);
            return;
        };
        let room = crate::h1::STREAM_ROOM.saturating_sub(up.conn.out_len());
        let (moved, ended) = match client(&mut self.slots, client_token) {
            Some(live) => {
                let moved = match live.conn.tunnel_input() {
                    Some(input) => {
                        let n = input.len().min(room);
                        up.conn.tunnel_send(&input[..n]);
                        n
                    }
                    None => 0,
                };
                live.conn.tunnel_used(moved, &mut self.io.cx.pool);
                (moved, live.conn.tunnel_ended())
            }
            // The client is gone: so is the tunnel.
            None => (0, true),
        };
        self.slots[idx as usize].up = Some(up);
        if moved > 0 {
            // The client's input has room again: receiving resumes.
            self.with(client_token, sh, |_, _| {});
        }
        if ended {
            self.on_up(token, sh, &mut |conn, _, ex| conn.tunnel_close(ex));
        } else {
            self.pump_up(idx, sh);
        }
    }

    /// Upstream exchanges waiting for their client's room, after the client moved output,
    /// and tunnels with client bytes to move.
    pub(super) fn resume_relays(&mut self, sh: &Shared) {
        for token in std::mem::take(&mut self.up_ready) {
            #[cfg(feature = "http2")]
            if self.h2_token(token).is_some_and(|idx| {
                self.resume_h2(idx, sh);
                true
            }) {
                continue;
            }
            let Some(idx) = self.up_index(token) else {
                continue;
            };
            let Some(up) = self.slots[idx as usize].up.as_ref() else {
                continue;
            };
            if up
                .link
                .as_ref()
                .is_some_and(|l| !l.body_done && l.pipe.as_ref().is_some_and(PipeOut::ready))
            {
                // The client's connection read more of the body.
                self.pump_up(idx, sh);
            }
            let Some(up) = self.slots[idx as usize].up.as_ref() else {
                continue;
            };
            if up.link.as_ref().is_some_and(|l| l.tunnel) {
                self.tunnel_pump(idx, sh);
                if !self.slots[idx as usize]
                    .up
                    .as_ref()
                    .and_then(|u| u.link.as_ref())
                    .is_some_and(|l| l.paused)
                {
                    continue;
                }
            }
            let Some(up) = self.slots[idx as usize].up.as_ref() else {
                continue;
            };
            let Some(link) = up.link.as_ref().filter(|l| l.paused) else {
                continue;
            };
            let (client, id) = (link.client, link.id);
            let room = match client_live(&mut self.slots, client) {
                Some(live) => live.conn.stream_room(id),
                None => true, // the resume learns it is gone
            };
            if !room {
                continue;
            }
            if let Some(l) = self.slots[idx as usize]
                .up
                .as_mut()
                .and_then(|u| u.link.as_mut())
            {
                l.paused = false;
            }
            self.on_up(token, sh, &mut |conn, now, ex| conn.resume(now, ex));
        }
    }

    /// Request `id` of client connection `client` was cancelled (`driver/cancel.rs`): its
    /// exchange is given up wherever it is. Routed this turn, waiting for a connection, or
    /// parked on a cache flight: dropped unsent. In flight on an HTTP/1.1 connection: the
    /// connection is closed (the upstream sees the request abandoned, as nginx's client
    /// abort does), whose cache fill ends with it (its flight's waiters look again); on an
    /// HTTP/2 connection its stream is cancelled. A background validation has no client
    /// and is kept.
    pub(super) fn cancel_exchange(&mut self, client: Token, id: u64, sh: &Shared) {
        let mine = |j: &Job| j.client == client && j.id == id && !j.background;
        let mut i = 0;
        while i < self.io.app.jobs.len() {
            if mine(&self.io.app.jobs[i]) {
                let job = self.io.app.jobs.remove(i);
                self.io.app.spares.put(job);
            } else {
                i += 1;
            }
        }
        for g in &mut self.pools.groups {
            g.waiting.retain(|j| !mine(j));
        }
        self.pools.parked.retain(|_, j| !mine(j));
        let Some(relays) = client_live(&mut self.slots, client)
            .and_then(|live| live.relays.as_ref())
            .map(|r| r.0.clone())
        else {
            return;
        };
        for token in relays {
            #[cfg(feature = "http2")]
            if let Some(idx) = self.h2_token(token) {
                self.cancel_h2(idx, client, id, sh);
                continue;
            }
            let _ = sh;
            let Some(idx) = self.up_index(token) else {
                continue;
            };
            let ours = (self.slots[idx as usize].up.as_ref())
                .and_then(|u| u.link.as_ref())
                .is_some_and(|l| l.client == client && l.id == id && !l.background);
            if ours {
                self.close_up(idx);
            }
        }
    }

    /// The client connections closed this turn left upstream exchanges behind: close them.
    pub(super) fn drop_orphans(&mut self, sh: &Shared) {
        for token in std::mem::take(&mut self.orphans) {
            #[cfg(feature = "http2")]
            if let Some(idx) = self.h2_token(token) {
                // Only the streams of the client that closed end.
                self.resume_h2(idx, sh);
                continue;
            }
            let _ = sh;
            if let Some(idx) = self.up_index(token) {
                // A HEAD's fill (sent up as GET) whose head went is the store's: it reads on.
                let filling = (self.slots[idx as usize].up.as_ref())
                    .and_then(|u| u.link.as_ref())
                    .is_some_and(|l| l.head_only && l.answered);
                if !filling {
                    self.close_up(idx);
                }
            }
        }
    }

    /// A reload replaced the upstreams: pooled connections close now.
    pub(super) fn reload_upstreams(&mut self, old: &SiteSet) {
        let sites = self.io.sites.clone();
        for token in self.pools.reload(old, &sites) {
            if let Some(idx) = self.up_index(token) {
                self.close_up(idx);
            }
        }
    }
}

/// The client connection of `token`, if it is still there.
fn client_live(slots: &mut [super::Slot], token: Token) -> Option<&mut super::Live> {
    client(slots, token)
}

/// The parked requests' map's hasher: park numbers are the worker's own sequence, never a
/// client's bytes, so a multiply spreads them enough (SipHash cost ~100 instructions for
/// each of a tier hit's two lookups, callgrind).
#[derive(Clone, Copy, Default)]
pub(super) struct ParkHash;

impl std::hash::BuildHasher for ParkHash {
    type Hasher = ParkHasher;

    fn build_hasher(&self) -> ParkHasher {
        ParkHasher(0)
    }
}

/// [`ParkHash`]'s hasher: Fibonacci hashing of the one `u64` written.
#[derive(Default)]
pub(super) struct ParkHasher(u64);

impl std::hash::Hasher for ParkHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Balance;

    fn upstream(weights: &[u32]) -> Upstream {
        crate::proxy::balance::tests::upstream(weights, Balance::RoundRobin)
    }

    fn group(n: usize) -> Group {
        Group {
            servers: (0..n).map(|_| ServerState::default()).collect(),
            loads: vec![ServerLoad::default(); n],
            ring: Ring::default(),
            waiting: VecDeque::new(),
            next_check: 0,
        }
    }

    /// The pick the driver makes for a request without a hash key.
    fn pick(g: &mut Group, up: &Upstream, now: u64, avoid: Option<usize>) -> usize {
        balance::pick(up, &g.ring, &mut g.loads, now, avoid, None)
    }

    /// Server `i` of `g` failed at `now`.
    fn fail(g: &mut Group, i: usize, up: &Upstream, now: u64) {
        g.failed(i, up, now);
    }

    #[test]
    fn weighted_round_robin_is_smooth_and_exact() {
        let up = upstream(&[5, 1, 1]);
        let mut g = group(3);
        let order: Vec<usize> = (0..7).map(|_| pick(&mut g, &up, 0, None)).collect();
        assert_eq!(order, [0, 0, 1, 0, 2, 0, 0], "nginx's sequence for 5:1:1");
        let up = upstream(&[1, 1]);
        let mut g = group(2);
        let order: Vec<usize> = (0..4).map(|_| pick(&mut g, &up, 0, None)).collect();
        assert_eq!(order, [0, 1, 0, 1]);
    }

    #[test]
    fn a_failed_server_is_left_alone_for_the_fail_timeout_unless_all_are_down() {
        let up = upstream(&[1, 1]);
        let mut g = group(2);
        fail(&mut g, 0, &up, 1_000);
        let window = up.fail_timeout.as_millis() as u64;
        let order: Vec<usize> = (0..4).map(|_| pick(&mut g, &up, 1_500, None)).collect();
        assert_eq!(order, [1, 1, 1, 1]);
        // Back after the window.
        let back: Vec<usize> = (0..4)
            .map(|_| pick(&mut g, &up, 1_000 + window, None))
            .collect();
        assert!(back.contains(&0), "{back:?}");
        // Every server down: all are tried rather than none.
        fail(&mut g, 0, &up, 50_000);
        fail(&mut g, 1, &up, 50_000);
        let all: Vec<usize> = (0..2).map(|_| pick(&mut g, &up, 50_001, None)).collect();
        assert_eq!(all.len(), 2);
        // The server a try just failed on is avoided when another is up.
        let mut g = group(2);
        assert_eq!(pick(&mut g, &up, 0, Some(0)), 1);
        assert_eq!(pick(&mut g, &up, 0, Some(0)), 1);
    }

    #[test]
    fn passive_health_never_takes_out_the_last_server_in_the_rotation() {
        // The only server: a failure (a refused connect, a timeout) leaves it in, as nginx
        // ignores max_fails for an upstream of one server.
        let up = upstream(&[1]);
        let window = up.fail_timeout.as_millis() as u64;
        let mut g = group(1);
        for t in 0..3 {
            fail(&mut g, 0, &up, 1_000 + t);
        }
        assert_eq!(g.loads[0].down_until, 0, "the only server stays in");
        // Two: the first to fail goes out, the other is then the last and stays.
        let up = upstream(&[1, 1]);
        let mut g = group(2);
        fail(&mut g, 0, &up, 1_000);
        assert_eq!(g.loads[0].down_until, 1_000 + window);
        fail(&mut g, 1, &up, 1_001);
        assert_eq!(g.loads[1].down_until, 0, "the last one in stays");
        let order: Vec<usize> = (0..4).map(|_| pick(&mut g, &up, 1_002, None)).collect();
        assert_eq!(order, [1, 1, 1, 1], "and takes the requests");
        // Once the first is back, the second may go out.
        let back = 1_000 + window + 1;
        fail(&mut g, 1, &up, back);
        assert_eq!(g.loads[1].down_until, back + window);
        // A server the active checks took out leaves the other as the last.
        let mut g = group(2);
        g.loads[0].down_until = u64::MAX;
        g.servers[0].checked_down = true;
        fail(&mut g, 1, &up, 5);
        assert_eq!(g.loads[1].down_until, 0);
    }

    #[test]
    fn active_checks_take_out_after_fails_in_a_row_and_bring_back_after_passes() {
        let check = HealthCheck {
            passes: 2,
            fails: 2,
            ..HealthCheck::default()
        };
        let mut s = ServerState::default();
        let mut load = ServerLoad::default();
        let mut run = |s: &mut ServerState, pass: bool| {
            s.probing = true;
            s.checked(pass, &mut load, &check)
        };
        assert!(!run(&mut s, false), "one failure is not enough");
        assert!(!run(&mut s, true), "a pass resets the failures");
        assert!(!run(&mut s, false));
        assert!(run(&mut s, false), "two in a row: out");
        assert!(s.checked_down);
        assert!(!run(&mut s, true));
        assert!(!run(&mut s, false), "a failure resets the passes");
        assert!(!run(&mut s, true));
        assert!(run(&mut s, true), "two passes in a row: back");
        assert!(!s.checked_down && !s.probing);
        // While out by checks, passive failures do not shorten it.
        let up = upstream(&[1]);
        let mut load = ServerLoad {
            down_until: u64::MAX,
            ..ServerLoad::default()
        };
        s.checked_down = true;
        s.failed(&mut load, &up, 0, 5, false);
        assert_eq!(load.down_until, u64::MAX);
    }

    #[test]
    fn an_answers_field_list_keeps_its_allocation_from_one_exchange_to_the_next() {
        let head = b"X-A: 1".to_vec();
        let mut list: Vec<Field<'_>> = Vec::with_capacity(40);
        list.push((&head[..3], &head[5..]));
        let (at, capacity) = (list.as_ptr() as usize, list.capacity());
        let kept: Vec<Field<'static>> = emptied(list);
        drop(head);
        assert!(kept.is_empty());
        assert_eq!(
            (kept.as_ptr() as usize, kept.capacity()),
            (at, capacity),
            "a new allocation"
        );
        let other = b"Y: 2".to_vec();
        let mut again = emptied(kept);
        again.push((&other[..1], &other[3..]));
        assert_eq!(again.as_ptr() as usize, at);
        assert_eq!(again, [(&b"Y"[..], &b"2"[..])]);
    }

    #[test]
    fn a_job_routed_before_reloads_follows_its_upstreams_name_through_each() {
        // Epoch 0 had [app, jwt]; reload 1 put `other` first ([other, app, jwt]); reload 2
        // removed `jwt` ([other, app]).
        let mut pools = Pools {
            epoch: 2,
            ..Pools::default()
        };
        pools.renames.push_back((0, vec![1, 2]));
        pools.renames.push_back((1, vec![0, 1, usize::MAX]));
        let job = |epoch: u32, upstream: usize| Job {
            epoch,
            failed_server: Some(0),
            ..Job::blank(1, 1, 0, 0, upstream)
        };
        for (epoch, upstream, want) in [
            (0, 0, 1),          // app, through both
            (0, 1, usize::MAX), // jwt, gone at the second
            (1, 0, 0),          // other
            (1, 2, usize::MAX), // jwt
            (2, 1, 1),          // current: unchanged
        ] {
            let mut j = job(epoch, upstream);
            pools.bring_up_to_date(&mut j);
            assert_eq!(
                (j.upstream, j.epoch),
                (want, 2),
                "epoch {epoch} index {upstream}"
            );
        }
        let mut j = job(1, 0);
        pools.bring_up_to_date(&mut j);
        assert_eq!(
            j.failed_server, None,
            "the old set's server indexes mean nothing now"
        );
        // Older than the renames kept: no upstream.
        pools.renames.pop_front();
        let mut j = job(0, 0);
        pools.bring_up_to_date(&mut j);
        assert_eq!(j.upstream, usize::MAX);
    }
}
