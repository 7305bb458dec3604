//! The driver: one worker thread's event loop. It owns the sockets (through its
//! [`Backend`]), the syscalls, the timers and the TLS transports, and feeds the connection
//! state machines (`crate::h1`), which call into the application (`crate::app`).
//!
//! Per completion: bytes received go to the connection (decrypted first over TLS); the
//! connection's answers are transmitted at once ([`pump`]); receiving is armed only while the
//! connection wants input (backpressure); its deadline is filed in the timer wheel. Deferred
//! answers arrive through the worker's inbox (an eventfd wakes the loop; where the worker has
//! local work, answers given on its own thread are taken at the end of the turn, with no
//! wake-up) and are handed to their connection, or counted and dropped when it is gone.
//! Workers share only read-only state ([`Shared`]): no locks and no shared atomics on the
//! request path.
#![forbid(unsafe_code)]

pub(crate) mod backend;
#[cfg(feature = "proxy")]
mod cache;
mod cancel;
#[cfg(feature = "tls")]
pub(crate) mod certs;
mod client_cert;
pub(crate) mod epoll;
#[cfg(feature = "tls")]
pub(crate) mod handshake;
#[cfg(feature = "http3")]
pub(crate) mod path_mtu;
pub(crate) mod preface;
pub(crate) mod proto;
#[cfg(feature = "http3")]
pub(crate) mod quic;
#[cfg(not(feature = "http3"))]
#[path = "quic_off.rs"]
pub(crate) mod quic;
pub(crate) mod sockops;
pub(crate) mod streams;
#[cfg(feature = "tls")]
pub(crate) mod ticket_keys;
#[cfg(feature = "proxy")]
mod tier_link;
pub(crate) mod timer;
#[cfg(feature = "tls")]
pub mod tls;
#[cfg(not(feature = "tls"))]
#[path = "tls_off.rs"]
pub mod tls;
mod transport;
#[cfg(feature = "http2")]
mod tunnels;
#[cfg(not(feature = "http2"))]
#[path = "tunnels_off.rs"]
mod tunnels;
#[cfg(feature = "proxy")]
mod upstream;
#[cfg(not(feature = "proxy"))]
#[path = "upstream_off.rs"]
mod upstream;
#[cfg(all(feature = "proxy", feature = "http2"))]
mod upstream_h2;
#[cfg(feature = "tls")]
pub(crate) mod upstream_tls;
#[cfg(not(feature = "tls"))]
#[path = "upstream_tls_off.rs"]
pub(crate) mod upstream_tls;
pub(crate) mod uring;
#[cfg(feature = "websocket")]
mod ws;
#[cfg(not(feature = "websocket"))]
#[path = "ws_off.rs"]
mod ws;

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use linerate_http1::{DateCache, HeadRoom, RequestHead};

use crate::app::deferred::Done;
use crate::app::sites::SiteSet;
use crate::app::{App, AppIo, ConnApp};
use crate::h1::{ConnConfig, Cx, Timer, Transmit};
use crate::pool::Pool;
use backend::{Backend, Completion, Token};
use epoll::RESERVED;
use proto::{Drive, Proto};
use timer::Wheel;
use tls::{Finished, Input, Outcome, Transport};

/// After EMFILE/ENFILE, accepting pauses this long.
const ACCEPT_BACKOFF_MS: u64 = 100;
/// Most file bytes sent for one connection per turn of the loop, so one fast reader of a
/// large file does not keep the worker from its other connections.
const FILE_BUDGET: u64 = 4 << 20;
/// Bytes the worker's output staging buffer starts with.
const OUT_BUF: usize = 64 * 1024;
/// Held input resumed at most this often per completion (each resume answers at least one
/// request or stops for a new reason, so this is only a guard).
const MAX_RESUMES: usize = 64;

/// The shutdown eventfd's token.
const WAKE_SHUTDOWN: Token = RESERVED | 1;
/// The deferred-answer inbox's eventfd token.
const WAKE_INBOX: Token = RESERVED | 2;
/// The site-reload eventfd's token.
const WAKE_RELOAD: Token = RESERVED | 3;
/// The worker-local reactor's token (its fd is readable when it has work).
const WAKE_LOCAL: Token = RESERVED | 4;
/// The first QUIC socket's token; QUIC listener `i` is `WAKE_QUIC + i`.
const WAKE_QUIC: Token = RESERVED | 16;
/// QUIC listeners a server may have (their tokens stay below the listeners').
const MAX_QUIC_LISTENERS: usize = 256;
/// The QUIC relay's token: datagrams other workers routed here (see `quic::Relay`).
const WAKE_QUIC_RELAY: Token = WAKE_QUIC + MAX_QUIC_LISTENERS as u64;

/// Where a reload leaves a worker's new sites.
pub(crate) type SitesMailbox = std::sync::Mutex<Option<Arc<SiteSet>>>;

/// Read-only state every worker shares.
pub(crate) struct Shared {
    pub app: App,
    pub conn: ConnConfig,
    /// Each listener's HTTPS configuration (`None`: plain HTTP), by listener id.
    pub listener_tls: Vec<Option<Arc<tls::ServerConfig>>>,
    /// Listeners that speak HTTP/2 with prior knowledge (h2c), by listener id.
    pub listener_h2c: Vec<bool>,
    /// Listeners that answer every request with a redirect to HTTPS on this port.
    pub listener_redirect: Vec<Option<u16>>,
    /// By listener: the UDP port HTTP/3 is served on beside it, announced with `Alt-Svc`.
    pub listener_alt_svc: Vec<Option<u16>>,
    /// Listeners whose connections start with a PROXY protocol header.
    pub listener_proxy: Vec<bool>,
    /// Cleartext HTTP/1.1 listeners where a connection opening with the HTTP/2 preface is
    /// HTTP/2 (`Listen::h2c_preface`; see `preface`).
    pub listener_h2c_preface: Vec<bool>,
    /// Open connections per client address (a per-client limit is set).
    pub client_conns: Option<Arc<crate::client_conns::ClientConns>>,
    /// The ciphers whose sessions are handed to the kernel after the handshake (kTLS, probed
    /// at start; none when it is off or absent).
    pub tls_policy: tls::TlsPolicy,
    pub drain_timeout: Duration,
    /// Set when a new process took the listening sockets (see [`crate::handoff`]): the drain
    /// leaves new QUIC clients to it.
    pub handed_over: Arc<std::sync::atomic::AtomicBool>,
    /// The new process's QUIC relays, set with `handed_over`: the drain forwards to them
    /// what it reads for no connection of its own.
    pub handoff_relays: Arc<std::sync::Mutex<Vec<OwnedFd>>>,
}

/// What one worker is given at start.
pub(crate) struct Setup {
    /// This worker's listening sockets, in the server's listener order (TCP ones are its own
    /// SO_REUSEPORT members; a Unix socket is shared by every worker).
    pub listeners: Vec<OwnedFd>,
    /// More sockets of a listener (its id beside each), accepted from as its own: the
    /// members of a taken-over SO_REUSEPORT group beyond one per worker (see
    /// [`crate::handoff`]), which would reset their queued connections if closed.
    pub extra_listeners: Vec<(OwnedFd, usize)>,
    /// Written on shutdown.
    pub shutdown: OwnedFd,
    /// Written by the inbox when deferred answers arrive.
    pub inbox_fd: OwnedFd,
    /// Written when a reload left new sites in `reload`.
    pub reload_fd: OwnedFd,
    pub reload: Arc<SitesMailbox>,
    pub sites: Arc<SiteSet>,
    /// The connections' limits and timeouts (each worker keeps its own copy).
    pub conn: ConnConfig,
    pub app: AppIo,
    /// The application's work on this worker's thread, run after every turn of the loop.
    pub local: Option<Box<dyn crate::WorkerLocal>>,
    /// This worker's tokio runtime (`crate::runtime`), installed on its thread.
    pub rt: Rc<crate::runtime::Local>,
    /// Open connections per client address, shared by the workers (a limit is set).
    pub client_conns: Option<Arc<crate::client_conns::ClientConns>>,
    /// This worker's UDP socket of each QUIC listener (none: no HTTP/3).
    pub quic: Vec<quic::QuicSetup>,
    /// Where datagrams for this worker's connections come from other workers (with QUIC
    /// and more than one worker).
    pub quic_relay: Option<quic::Relay>,
    /// This worker's index, and how many there are (QUIC's connection IDs name the worker).
    pub index: usize,
    pub workers: usize,
}

/// A live connection.
struct Live {
    conn: Proto,
    transport: Transport,
    /// A TLS connection whose ALPN choice is not known yet (its handshake is under way).
    alpn: bool,
    /// When its timer-wheel entry fires (ms): a deadline at or after it needs no re-arming.
    armed: u64,
    /// Receiving is armed with the backend.
    receiving: bool,
    /// Counted as idle in the metrics (only kept while metrics are on).
    idle: bool,
    /// Every request gets a redirect to HTTPS on this port (its listener's
    /// `redirect_to_https`).
    to_https: Option<u16>,
    /// Its answers announce HTTP/3 on this UDP port (a TLS listener with `quic`).
    alt_svc: Option<u16>,
    /// Counted in the per-client connection table (under its peer address).
    counted: bool,
    /// Upstream connections carrying answers to this connection (proxied exchanges);
    /// boxed, so a connection that proxies nothing pays one pointer; kept, empty, between
    /// its proxied requests (two allocations less each).
    relays: Option<Box<upstream::Relays>>,
    /// The library's streamed answers on this connection (see `streams`).
    streams: Vec<Arc<crate::streaming::Chan>>,
}

/// What a connection owes before its protocol reads it: a PROXY protocol header still
/// arriving, and/or first bytes that may be the HTTP/2 preface (`preface`).
struct Preamble {
    /// The slot's generation when it was accepted (see [`Worker::token`]).
    generation: u32,
    /// The header's bytes so far, or the preface's start (empty until a read leaves either
    /// incomplete).
    buf: Vec<u8>,
    /// The PROXY protocol header is still owed.
    proxy: bool,
    /// Then the first bytes decide between HTTP/1.1 and HTTP/2 (`preface::sniff`).
    sniff: bool,
}

/// One entry of the slot table: a client connection (`live`) or an upstream one (`up`),
/// sharing the index space the backend and the wheel use.
struct Slot {
    generation: u32,
    live: Option<Live>,
    up: Option<Box<upstream::UpLive>>,
    /// An HTTP/2 upstream connection (`upstream_h2.rs`).
    #[cfg(all(feature = "proxy", feature = "http2"))]
    h2: Option<Box<upstream_h2::H2Live>>,
}

impl Slot {
    /// Whether an upstream connection (either protocol) holds it.
    fn upstream(&self) -> bool {
        #[cfg(all(feature = "proxy", feature = "http2"))]
        if self.h2.is_some() {
            return true;
        }
        self.up.is_some()
    }
}

/// The worker's buffers and clock ([`Cx`], lent to each connection in turn), its parser and
/// its application state.
struct Io {
    cx: Cx,
    head: RequestHead,
    /// Plaintext decrypted from one receive (TLS).
    plain: Vec<u8>,
    app: AppIo,
    /// The sites this worker answers from (a reload swaps them, between events).
    sites: Arc<SiteSet>,
}

impl Io {
    #[inline(always)]
    fn split<'a>(
        &'a mut self,
        sh: &'a Shared,
        peer: Option<&'a SocketAddr>,
        token: Token,
        tls: bool,
        to_https: Option<u16>,
    ) -> (
        &'a mut Cx,
        ConnApp<'a>,
        &'a mut RequestHead,
        &'a mut Vec<u8>,
    ) {
        let Io {
            cx,
            head,
            plain,
            app,
            sites,
        } = self;
        (
            cx,
            ConnApp {
                app: &sh.app,
                sites: &sites.sites,
                io: app,
                peer,
                token,
                site: 0,
                site_app: sites.sites.get(0),
                kind: crate::stats::Kind::Server,
                started: 0,
                tls,
                to_https,
            },
            head,
            plain,
        )
    }
}

pub(crate) struct Worker<B: Backend> {
    backend: B,
    slots: Vec<Slot>,
    /// The clients' addresses by slot, as `accept` (or the QUIC handshake) gave them: one
    /// store per connection, never a syscall per request (`Request::peer`, the access log,
    /// access rules and proxies read them).
    peers: Vec<Option<SocketAddr>>,
    free: Vec<u32>,
    live: usize,
    wheel: Wheel,
    io: Io,
    /// Listener ids `0..listeners` (see [`Shared::listener_tls`]).
    listeners: usize,
    /// The listener id of each extra socket ([`Setup::extra_listeners`]), accepted from
    /// under the backend ids `listeners..`.
    listener_of: Vec<usize>,
    /// Connections that used their file budget and go on next turn.
    ready: Vec<u32>,
    /// The slots whose wheel entries (`due`) or QUIC timers (`due_quic`) came due this turn
    /// (kept for their capacity).
    due: Vec<u32>,
    due_quic: Vec<u32>,
    done: Vec<Done>,
    /// The application's work on this thread (see [`crate::WorkerLocal`]).
    local: Option<Box<dyn crate::WorkerLocal>>,
    /// Its fd was reported readable this turn.
    local_ready: bool,
    /// The worker's tokio runtime, for [`crate::OnWorker`]'s futures.
    rt: Rc<crate::runtime::Local>,
    /// The inbox was made this thread's home (`Inbox::make_home`).
    homed: bool,
    /// The runtime's reactor watches the backend's epoll instance (`runtime::Local::watch`).
    watching: bool,
    /// The monotonic clock at start (ms); `io.now` counts from it.
    started: u64,
    accept_paused_until: Option<u64>,
    drain_deadline: Option<u64>,
    /// Where a reload leaves new sites for this worker.
    reload: Arc<SitesMailbox>,
    /// Upstream pools and waiting requests, per upstream.
    pools: upstream::Pools,
    /// Paused upstream exchanges whose client moved output (resumed at the end of the turn).
    up_ready: Vec<Token>,
    /// Streamed answers with something for their connections (read at the end of the turn).
    stream_ready: Vec<Arc<crate::streaming::Chan>>,
    /// Upstream exchanges whose client connection closed (closed at the end of the turn).
    orphans: Vec<Token>,
    /// Connections whose PROXY protocol header is still arriving, by slot (empty unless a
    /// listener expects one, so other servers test one length per receive).
    preambles: std::collections::HashMap<u32, Preamble>,
    /// Open connections per client address (a per-client limit is set).
    client_conns: Option<Arc<crate::client_conns::ClientConns>>,
    /// The sites have (or had, before a reload) upstreams: only then can a connection have
    /// relays or a call leave proxy jobs, so a server that proxies nothing tests one flag.
    proxying: bool,
    /// HTTP/2 upstream connections that opened streams while one client's requests were
    /// dispatched (`h2_batching`, during `start_jobs`): each transmits once after them, so a
    /// read of a hundred requests sends their HEADERS together, not a relay turn apiece.
    #[cfg(all(feature = "proxy", feature = "http2"))]
    h2_opened: Vec<u32>,
    #[cfg(all(feature = "proxy", feature = "http2"))]
    h2_batching: bool,
    /// HTTP/3: the QUIC listeners' sockets and endpoints (none without a QUIC listener).
    quic: Option<Box<quic::Quic>>,
}

impl<B: Backend> Worker<B> {
    pub(crate) fn new(mut backend: B, setup: Setup) -> std::io::Result<Self> {
        let listeners = setup.listeners.len();
        for (id, l) in setup.listeners.into_iter().enumerate() {
            backend.listen(l, id)?;
        }
        let mut listener_of = Vec::with_capacity(setup.extra_listeners.len());
        for (l, id) in setup.extra_listeners {
            backend.listen(l, listeners + listener_of.len())?;
            listener_of.push(id);
        }
        backend.watch(setup.shutdown, WAKE_SHUTDOWN, true)?;
        backend.watch(setup.inbox_fd, WAKE_INBOX, true)?;
        backend.watch(setup.reload_fd, WAKE_RELOAD, true)?;
        if let Some(local) = &setup.local {
            backend.watch(local.fd().try_clone_to_owned()?, WAKE_LOCAL, false)?;
        }
        let proxying = !setup.sites.upstreams.is_empty();
        let started = crate::sys::coarse_ms(libc::CLOCK_MONOTONIC_COARSE);
        let quic = if setup.quic.is_empty() {
            None
        } else {
            let q = quic::Quic::new(setup.quic, setup.quic_relay, setup.index, setup.workers)?;
            if let Some(fd) = q.relay_fd()? {
                backend.watch(fd, WAKE_QUIC_RELAY, false)?;
            }
            for (i, fd) in q
                .sockets()?
                .into_iter()
                .enumerate()
                .take(MAX_QUIC_LISTENERS)
            {
                backend.watch(fd, WAKE_QUIC + i as u64, false)?;
            }
            Some(Box::new(q))
        };
        let mut worker = Worker {
            backend,
            slots: Vec::new(),
            peers: Vec::new(),
            free: Vec::new(),
            live: 0,
            wheel: Wheel::new(0),
            io: Io {
                cx: Cx {
                    now: 0,
                    cfg: setup.conn,
                    out: Vec::with_capacity(OUT_BUF),
                    room: HeadRoom::default(),
                    pool: Pool::default(),
                    date: DateCache::new(SystemTime::now()),
                    draining: false,
                    sendfile: true,
                    alt_svc: None,
                    cancelled: Vec::new(),
                },
                head: RequestHead::new(),
                plain: Vec::new(),
                app: setup.app,
                sites: setup.sites,
            },
            reload: setup.reload,
            listeners,
            listener_of,
            ready: Vec::new(),
            due: Vec::new(),
            due_quic: Vec::new(),
            done: Vec::new(),
            local: setup.local,
            local_ready: false,
            rt: setup.rt,
            homed: false,
            watching: false,
            started,
            accept_paused_until: None,
            drain_deadline: None,
            pools: upstream::Pools::default(),
            up_ready: Vec::new(),
            stream_ready: Vec::new(),
            orphans: Vec::new(),
            preambles: std::collections::HashMap::new(),
            client_conns: setup.client_conns,
            proxying,
            #[cfg(all(feature = "proxy", feature = "http2"))]
            h2_opened: Vec::new(),
            #[cfg(all(feature = "proxy", feature = "http2"))]
            h2_batching: false,
            quic,
        };
        // A QUIC connection's packets go out in the `extras` part of `with`.
        worker.io.app.extras = proxying || worker.quic.is_some();
        if worker.io.app.counters_on {
            let sites = worker.io.sites.clone();
            worker.count_sites(&sites);
        }
        Ok(worker)
    }

    /// Runs until shutdown has drained every connection (or the drain timeout passed).
    pub(crate) fn run(&mut self, sh: &Shared) -> std::io::Result<()> {
        if let Some(log) = self.io.app.log.as_mut() {
            log.set_time(self.io.cx.date.get());
        }
        if self.local.is_some() {
            // Its futures answer on this thread: see `run_local`.
            self.io.app.inbox.make_home();
            self.homed = true;
        }
        loop {
            #[cfg(feature = "proxy")]
            if self.io.app.extras && !self.pools.tier_asks.is_empty() {
                self.tier_flush();
            }
            let timeout = self.timeout();
            if crate::runtime::Local::used() {
                self.wait_in_runtime(timeout)?;
            } else {
                self.backend.wait(timeout)?;
            }
            self.tick();
            while let Some(c) = self.backend.next() {
                self.complete(c, sh);
            }
            if !self.up_ready.is_empty() {
                self.resume_relays(sh);
            }
            if !self.stream_ready.is_empty() {
                self.pump_streams(sh);
            }
            if !self.orphans.is_empty() {
                self.drop_orphans(sh);
            }
            if self.wheel.due(self.io.cx.now) {
                self.expire(sh);
            }
            if self.io.app.extras {
                // Proxying or QUIC: one test for a worker that does neither.
                if self.proxying && self.io.cx.now >= self.pools.next_check {
                    self.health_checks(sh);
                }
                if let Some(q) = &self.quic
                    && q.timer_due(Instant::now())
                {
                    self.quic_timers(sh);
                }
            }
            if !self.ready.is_empty() {
                for idx in std::mem::take(&mut self.ready) {
                    self.with(self.token(idx), sh, |_, _| {});
                }
            }
            if self.homed {
                self.run_local(sh);
            }
            if let Some(t) = self.accept_paused_until
                && self.io.cx.now >= t
            {
                self.accept_paused_until = None;
                self.backend.resume_accepting();
            }
            if let Some(log) = self.io.app.log.as_mut() {
                log.hand_off();
                if let Some(spans) = log.spans.as_mut() {
                    spans.hand_off(self.io.cx.now);
                }
            }
            if let Some(deadline) = self.drain_deadline {
                if self.live == 0 {
                    return Ok(());
                }
                if self.io.cx.now >= deadline {
                    tracing::warn!(
                        open = self.live,
                        "drain timeout: closing remaining connections"
                    );
                    for idx in 0..self.slots.len() as u32 {
                        self.close(idx);
                    }
                    if let Some(log) = self.io.app.log.as_mut() {
                        log.hand_off();
                    }
                    return Ok(());
                }
            }
        }
    }

    /// The worker-local work, then the answers given on this thread (by that work, or by a
    /// handler that answered at once), which woke nothing: taken here, in the turn that made
    /// them, until neither has more (an answer can release a pipelined request whose
    /// handler starts more local work). Only a worker with local work skips the eventfd for
    /// its own answers; on the others that test would cost every turn (7 instructions per
    /// /json request, callgrind) for a pattern that is rare there.
    #[inline(never)]
    fn run_local(&mut self, sh: &Shared) {
        loop {
            if let Some(local) = self.local.as_mut() {
                local.run(std::mem::take(&mut self.local_ready));
            }
            if !self.io.app.inbox.pushed_here() {
                return;
            }
            self.answers(sh);
        }
    }

    /// The wait of a worker whose tokio runtime was handed futures ([`crate::OnWorker`]):
    /// while the runtime has tasks, events are taken without waiting, and with some (or
    /// answers waiting) the runtime takes one turn; with none, the worker waits inside the
    /// runtime (its epoll instance watched by tokio's reactor), which runs what is ready
    /// before it blocks (futures woken outside it: a request's query to send), so tokio's
    /// timers and sockets wake it as its own events do. Its epoll instance is read again
    /// after that wait only when tokio saw it readable. With no task, the worker waits as
    /// any other.
    #[inline(never)]
    fn wait_in_runtime(&mut self, timeout: Option<Duration>) -> std::io::Result<()> {
        if !self.homed {
            // Answers its futures give on this thread wake nothing: see `run_local`.
            self.io.app.inbox.make_home();
            self.homed = true;
        }
        if !self.watching {
            self.rt.watch(self.backend.poll_fd())?;
            self.watching = true;
        }
        if !self.rt.busy() {
            return self.backend.wait(timeout);
        }
        self.backend.wait(Some(Duration::ZERO))?;
        if self.backend.found()
            || timeout == Some(Duration::ZERO)
            || self.io.app.inbox.pushed_here()
        {
            self.rt.turn();
            return Ok(());
        }
        let inbox = self.io.app.inbox.clone();
        if self.rt.park(timeout, |_| inbox.pushed_here()) {
            self.backend.wait(Some(Duration::ZERO))?;
        }
        Ok(())
    }

    /// How long the next wait may last.
    #[inline(always)]
    fn timeout(&self) -> Option<Duration> {
        if !self.ready.is_empty() || !self.stream_ready.is_empty() {
            return Some(Duration::ZERO);
        }
        let mut at = self.wheel.next_due().unwrap_or(u64::MAX);
        // Spans waiting go out on time on a worker that has gone quiet.
        if let Some(due) = self
            .io
            .app
            .log
            .as_ref()
            .and_then(|l| l.spans.as_ref()?.due())
        {
            at = at.min(due);
        }
        if self.accept_paused_until.is_some() || self.drain_deadline.is_some() {
            let other = [self.accept_paused_until, self.drain_deadline];
            at = other.into_iter().flatten().fold(at, u64::min);
        }
        if self.io.app.extras {
            return self.extras_timeout(at);
        }
        (at != u64::MAX).then(|| Duration::from_millis(at.saturating_sub(self.io.cx.now)))
    }

    /// [`Worker::timeout`] on a worker that proxies or serves QUIC, given the wheel's next
    /// deadline (ms): the upstreams' checks, and QUIC's timers (their own 1 ms wheel, on the
    /// precise clock).
    #[inline(never)]
    fn extras_timeout(&self, mut at: u64) -> Option<Duration> {
        if self.proxying {
            if !self.up_ready.is_empty() {
                // A relay woke a client that read more for its upstream: move it now.
                return Some(Duration::ZERO);
            }
            at = at.min(self.pools.next_check);
        }
        let wait =
            (at != u64::MAX).then(|| Duration::from_millis(at.saturating_sub(self.io.cx.now)));
        let quic = self.quic.as_ref().and_then(|q| q.next_timer());
        match (wait, quic) {
            (w, None) => w,
            (w, Some(t)) => {
                let t = t.saturating_duration_since(Instant::now());
                Some(w.map_or(t, |w| w.min(t)))
            }
        }
    }

    /// QUIC's timers that came due: each connection whose timer has come moves
    /// (`H3Live::on_timer`, which files its next); one whose timer moved later is filed
    /// again.
    fn quic_timers(&mut self, sh: &Shared) {
        let now = Instant::now();
        let mut due = std::mem::take(&mut self.due_quic);
        if let Some(q) = self.quic.as_mut() {
            q.expire(now, &mut due);
        }
        for &idx in &due {
            let Some(Live {
                conn: Proto::Boxed(proto::Boxed::H3(h)),
                ..
            }) = self
                .slots
                .get_mut(idx as usize)
                .and_then(|s| s.live.as_mut())
            else {
                continue;
            };
            if let Some(q) = self.quic.as_mut() {
                q.fired(h, now);
            }
            if h.quic_due(now) {
                self.with(self.token(idx), sh, |live, p| {
                    live.conn.on_timer(p.cx, &mut p.svc)
                });
            }
        }
        due.clear();
        self.due_quic = due;
    }

    /// Reads the clocks once per turn of the loop. The coarse clocks (the kernel's tick,
    /// 1–4 ms) are enough for deadlines kept in 8 ms ticks and a Date to the second, and
    /// cost a fraction of the precise ones (no TSC read), on a path every request takes.
    fn tick(&mut self) {
        self.io.cx.now =
            crate::sys::coarse_ms(libc::CLOCK_MONOTONIC_COARSE).saturating_sub(self.started);
        let wall = crate::sys::coarse_ms(libc::CLOCK_REALTIME_COARSE);
        if self
            .io
            .cx
            .date
            .update(UNIX_EPOCH + Duration::from_millis(wall))
            && let Some(log) = self.io.app.log.as_mut()
        {
            log.set_time(self.io.cx.date.get());
        }
    }

    #[inline(always)]
    fn complete(&mut self, c: Completion, sh: &Shared) {
        match c {
            Completion::Accepted {
                listener,
                sock,
                peer,
            } => self.accept(listener, sock, peer, sh),
            Completion::AcceptPaused(e) => {
                crate::log_limit::warn_limited!("accept failed", "", error = %e, "accept failed; pausing accepts");
                self.accept_paused_until = Some(self.io.cx.now + ACCEPT_BACKOFF_MS);
            }
            // An upstream connection's token has the UP bit: tested in each arm, after the
            // variant, so that a client's completion pays one bit test.
            c @ Completion::Connected { .. } => self.up_event(c, sh),
            Completion::Received { token, buf } => {
                if upstream::is_up(token) {
                    return self.up_event(Completion::Received { token, buf }, sh);
                }
                if sh.app.metrics {
                    self.io.app.counters.bytes_in(buf.len());
                }
                if self.preambles.is_empty() {
                    self.with(token, sh, |live, p| p.received(live, &buf));
                } else {
                    self.received_early(token, &buf, sh);
                }
                self.backend.recycle(buf);
            }
            Completion::Record { token, buf } => self.record(token, buf, sh),
            c @ Completion::Eof { token } => {
                if upstream::is_up(token) {
                    return self.up_event(c, sh);
                }
                if !self.preambles.is_empty() {
                    self.sniff_ended(token, sh);
                }
                self.with(token, sh, |live, p| live.conn.eof(p.cx, &mut p.svc));
            }
            c @ (Completion::Sent { token, .. } | Completion::FileSent { token, .. }) => {
                if upstream::is_up(token) {
                    return self.up_event(c, sh);
                }
                self.with(token, sh, |live, p| p.sent(live, c));
            }
            c @ Completion::Failed { token } => {
                if upstream::is_up(token) {
                    return self.up_event(c, sh);
                }
                if let Some(idx) = self.index(token) {
                    self.close(idx);
                }
            }
            Completion::Notified { token } if token == WAKE_SHUTDOWN => self.begin_drain(sh),
            Completion::Notified { token } if token == WAKE_RELOAD => self.swap_sites(),
            // Its work runs at the end of the turn.
            Completion::Notified { token } if token == WAKE_LOCAL => self.local_ready = true,
            Completion::Notified { token }
                if (WAKE_QUIC..WAKE_QUIC + MAX_QUIC_LISTENERS as u64).contains(&token) =>
            {
                self.quic_receive(Some((token - WAKE_QUIC) as usize), sh)
            }
            Completion::Notified { token } if token == WAKE_QUIC_RELAY => {
                self.quic_receive(None, sh)
            }
            Completion::Notified { .. } => self.answers(sh),
        }
    }

    /// Datagrams arrived on QUIC listener `ep` (`None`: routed here by other workers): each
    /// goes to its connection (a new client's gets a slot), then every connection they
    /// reached moves once (`with`).
    fn quic_receive(&mut self, ep: Option<usize>, sh: &Shared) {
        let Some(mut q) = self.quic.take() else {
            return;
        };
        let mut budget = quic::RECV_BUDGET;
        loop {
            let got = match ep {
                Some(ep) => q.receive(ep, &mut budget),
                None => q.receive_relayed(&mut budget),
            };
            match got {
                None => break,
                Some((_, quic::Received::Nothing)) => {}
                Some((_, quic::Received::Event(slot, ev))) => {
                    if let Some(Some(Live {
                        conn: Proto::Boxed(proto::Boxed::H3(h)),
                        ..
                    })) = self.slots.get_mut(slot as usize).map(|s| s.live.as_mut())
                    {
                        h.quic.handle_event(ev);
                        q.touch(h, slot);
                    }
                }
                Some((ep, quic::Received::New(incoming, now))) => {
                    if let Some((live, peer)) = q.accept(ep, *incoming, now) {
                        self.admit_quic(&mut q, live, peer, sh);
                    }
                }
            }
        }
        if self.io.app.counters_on {
            self.io.app.counters.set_quic_totals(q.retries, q.routed);
        }
        let touched = std::mem::take(&mut q.touched);
        self.quic = Some(q);
        for &slot in &touched {
            self.with(self.token(slot), sh, |_, _| {});
        }
        if let Some(q) = self.quic.as_mut() {
            let mut touched = touched;
            touched.clear();
            if q.touched.is_empty() {
                q.touched = touched;
            }
        }
    }

    /// A new QUIC connection takes a slot like an accepted TCP one.
    fn admit_quic(
        &mut self,
        q: &mut quic::Quic,
        mut h: quic::H3Live,
        peer: SocketAddr,
        sh: &Shared,
    ) {
        let (idx, _token) = self.alloc_slot(false);
        q.bind(&mut h, idx);
        keep_peer(&mut self.peers, idx, Some(peer));
        self.slots[idx as usize].live = Some(Live {
            conn: Proto::Boxed(proto::Boxed::H3(Box::new(h))),
            transport: Transport::Plain,
            alpn: false,
            armed: u64::MAX,
            receiving: false,
            idle: false,
            to_https: None,
            alt_svc: None,
            counted: false,
            relays: None,
            streams: Vec::new(),
        });
        self.live += 1;
        if sh.app.metrics {
            self.io.app.counters.set_open(self.live);
        }
    }

    /// The slot index of a live connection's token.
    fn index(&self, token: Token) -> Option<u32> {
        let idx = (token & 0xffff_ffff) as u32;
        let slot = self.slots.get(idx as usize)?;
        (slot.generation == (token >> 32) as u32 && slot.live.is_some()).then_some(idx)
    }

    /// The token of the connection in slot `idx`.
    fn token(&self, idx: u32) -> Token {
        let generation = self.slots.get(idx as usize).map_or(0, |s| s.generation);
        (u64::from(generation) << 32) | u64::from(idx)
    }

    /// Bytes received while some connection owes its PROXY protocol header or its first
    /// bytes' verdict: the header's part is taken, the preface's start held, the rest goes
    /// to the connection.
    #[cold]
    #[inline(never)]
    fn received_early(&mut self, token: Token, buf: &[u8], sh: &Shared) {
        let data = match self.preamble(token, buf) {
            Some(n) => &buf[n..],
            None => buf,
        };
        if !data.is_empty() && !self.sniffed(token, data, sh) {
            self.with(token, sh, |live, p| p.received(live, data));
        }
    }

    /// Bytes for a connection that may still owe its PROXY protocol header: `None` when it
    /// does not (the bytes are the connection's), else how many of `data` the header took
    /// (all of them while it is incomplete, or when a bad one closed the connection). A
    /// header's source address replaces the connection's peer address.
    fn preamble(&mut self, token: Token, data: &[u8]) -> Option<usize> {
        use linerate_http1::proxy_protocol::{Source, parse};
        let idx = (token & 0xffff_ffff) as u32;
        let pre = self
            .preambles
            .get_mut(&idx)
            .filter(|p| p.generation == (token >> 32) as u32 && p.proxy)?;
        let had = pre.buf.len();
        let verdict = if had == 0 {
            parse(data)
        } else {
            pre.buf.extend_from_slice(data);
            parse(&pre.buf)
        };
        match verdict {
            Ok(None) => {
                if had == 0 {
                    pre.buf.extend_from_slice(data);
                }
                Some(data.len())
            }
            Ok(Some((source, len))) => {
                if pre.sniff {
                    // The first bytes after the header decide the protocol.
                    pre.proxy = false;
                    pre.buf = Vec::new();
                } else {
                    self.preambles.remove(&idx);
                }
                if let Some(peer) = self.peers.get_mut(idx as usize) {
                    match source {
                        Source::Addr(a) => *peer = Some(a),
                        Source::Unix => *peer = None,
                        Source::Connection => {}
                    }
                }
                if !self.count_client(idx) {
                    self.close(idx);
                    return Some(data.len());
                }
                // The header began in an earlier read, so it ends inside this one.
                Some(len - had)
            }
            Err(e) => {
                tracing::debug!(error = %e, "closing a connection without a valid PROXY header");
                self.io
                    .app
                    .counters
                    .conn_refused(crate::stats::REFUSED_PROXY_HEADER);
                self.close(idx);
                Some(data.len())
            }
        }
    }

    /// Counts the connection in slot `idx` under its client's address when a per-client
    /// limit is set; `false` when the client is at the limit (counted as refused).
    fn count_client(&mut self, idx: u32) -> bool {
        let Some(table) = &self.client_conns else {
            return true;
        };
        let Some(ip) = self
            .peers
            .get(idx as usize)
            .copied()
            .flatten()
            .map(|p| p.ip())
        else {
            return true;
        };
        let Some(live) = self
            .slots
            .get_mut(idx as usize)
            .and_then(|s| s.live.as_mut())
        else {
            return true;
        };
        if !table.counts(ip) {
            return true;
        }
        if table.open(ip) {
            live.counted = true;
            return true;
        }
        tracing::debug!(client = %ip, "closing a connection over the per-client limit");
        self.io
            .app
            .counters
            .conn_refused(crate::stats::REFUSED_CLIENT_LIMIT);
        false
    }

    /// A kernel-TLS control record: rare, so kept out of the completion loop's inlined code.
    #[cold]
    #[inline(never)]
    fn record(&mut self, token: Token, mut buf: Vec<u8>, sh: &Shared) {
        let kind = buf.pop().unwrap_or(0);
        self.with(token, sh, |live, p| p.record(live, kind, &buf));
        self.backend.recycle(buf);
    }

    /// Runs `f` on the connection named by `token` (nothing if it is gone), then transmits
    /// what it has to send and files its deadline; closes it when it is done.
    #[inline(always)]
    fn with(&mut self, token: Token, sh: &Shared, f: impl FnOnce(&mut Live, &mut Parts<'_, B>)) {
        let idx = (token & 0xffff_ffff) as u32;
        let Some(slot) = self.slots.get_mut(idx as usize) else {
            return;
        };
        if slot.generation != (token >> 32) as u32 {
            return; // the connection this was for is gone
        }
        let Some(live) = slot.live.as_mut() else {
            return;
        };
        let peer = self.peers.get(idx as usize).and_then(Option::as_ref);
        let tls = !matches!(live.transport, Transport::Plain);
        if tls {
            // Read through `ConnApp::client_cert` only while `tls` holds.
            self.io.app.client_cert = live.transport.client_cert();
            // Cleared again at the end: a cleartext connection never sets it.
            self.io.cx.alt_svc = live.alt_svc;
        }
        // Cancellations are listed only during a call and taken right after it (`cancel.rs`).
        debug_assert!(
            self.io.cx.cancelled.is_empty(),
            "a cancellation outside a call"
        );
        let (cx, svc, head, plain) = self.io.split(sh, peer, token, tls, live.to_https);
        let mut svc = svc;
        if let Proto::Boxed(b) = &mut live.conn {
            match b {
                proto::Boxed::H2(_) => cx.sendfile = !live.transport.decrypts(),
                // QUIC is TLS 1.3, with the listener's client certificate rules.
                proto::Boxed::H3(h) => {
                    svc.tls = true;
                    svc.io.client_cert = h.client_cert();
                }
                proto::Boxed::Ws(_) => {}
            }
        }
        let mut p = Parts {
            backend: &mut self.backend,
            cx,
            svc,
            head,
            plain,
            token,
            fine: true,
        };
        f(live, &mut p);
        let mut keep = p.fine && p.pump(live, &mut self.ready, idx);
        let extras = p.svc.io.extras;
        if extras {
            // Set from the start on a worker with QUIC listeners, so that a TCP worker's
            // common path never tests for HTTP/3.
            if let Proto::Boxed(proto::Boxed::H3(h)) = &mut live.conn
                && let Some(q) = self.quic.as_mut()
            {
                keep = keep && q.drive(h, p.head, p.cx, &mut p.svc);
            }
            if !p.svc.io.upgrades.is_empty() {
                // A WebSocket route accepted a handshake: its 101 goes out, and the
                // connection speaks WebSocket from here on (taken even from a connection
                // that closes, so the next one starts without it).
                let handed = ws::hand_over(live, &mut p);
                keep = keep && handed && p.pump(live, &mut self.ready, idx);
            }
            if let Some(relays) = &live.relays {
                // Output moved: paused upstream exchanges may have room again (and a
                // tunnel's client bytes may go up).
                self.up_ready.extend_from_slice(&relays.0);
            }
            if !live.streams.is_empty() {
                // A stream its client reset (HTTP/2): its writer learns now, not at its next
                // write (an idle one, a health Watch or an event stream, may write no more).
                let conn = &live.conn;
                let mut reset = Vec::new();
                live.streams.retain(|c| {
                    let at = c.at();
                    let live = at.is_none_or(|(_, id)| conn.awaits(id));
                    if !live {
                        c.gone();
                        reset.extend(at);
                    }
                    live
                });
                for at in reset {
                    if !self.io.app.grpc_lines.is_empty() {
                        (self.io.app).grpc_line_end(&self.io.sites.sites, at, None);
                    }
                }
                // Output moved (or the writer's end came): read what waits while there is
                // room.
                let pending = live.streams.iter().filter(|c| c.pending()).cloned();
                self.stream_ready.extend(pending);
            }
        }
        if sh.app.metrics {
            let idle = live.conn.is_idle();
            if idle != live.idle {
                live.idle = idle;
                self.io.app.counters.idle(idle);
            }
        }
        if tls {
            self.io.cx.alt_svc = None;
        }
        if !keep {
            // Output staged for a connection that closes is dropped here: the staging buffer
            // is the worker's, and the next connection must start with it empty.
            self.io.cx.out.clear();
            self.close(idx);
        } else if live.conn.deadline() < live.armed {
            live.armed = self.wheel.arm(idx, live.conn.deadline());
        }
        if !self.io.cx.cancelled.is_empty() {
            // Before the jobs start: a request routed and cancelled in one read never goes
            // upstream.
            self.cancel_work(token, sh);
        }
        if extras && self.proxying && !self.io.app.jobs.is_empty() {
            #[cfg(all(feature = "proxy", feature = "http2"))]
            let batch = self.h2_batch_start();
            self.start_jobs(sh);
            #[cfg(all(feature = "proxy", feature = "http2"))]
            if batch {
                self.h2_batch_end(sh);
            }
        }
    }

    fn accept(&mut self, listener: usize, sock: OwnedFd, peer: Option<SocketAddr>, sh: &Shared) {
        // An extra socket of a taken-over group serves its listener's settings.
        let listener = match listener.checked_sub(self.listeners) {
            Some(extra) => self.listener_of[extra],
            None => listener,
        };
        // A Unix-socket connection has no peer address and no Nagle to turn off.
        if peer.is_some()
            && let Err(e) = rustix::net::sockopt::set_tcp_nodelay(&sock, true)
        {
            tracing::debug!(error = %e, "TCP_NODELAY failed");
        }
        let transport = match sh.listener_tls.get(listener) {
            Some(Some(config)) => match Transport::tls(config, sh.tls_policy) {
                Ok(t) => t,
                Err(e) => {
                    tracing::error!(error = %e, "cannot start a TLS session");
                    return;
                }
            },
            _ => Transport::Plain,
        };
        let (idx, token) = self.alloc_slot(false);
        let slot = &mut self.slots[idx as usize];
        if let Err(e) = self.backend.attach(sock, token, true) {
            tracing::error!(error = %e, "cannot register connection");
            self.free.push(idx);
            return;
        }
        let tls = matches!(transport, Transport::Tls(_));
        let conn = if sh.listener_h2c.get(listener).copied().unwrap_or(false) {
            Proto::h2(self.io.cx.now, &self.io.cx)
        } else {
            Proto::h1(self.io.cx.now, &self.io.cx)
        };
        let armed = self.wheel.arm(idx, conn.deadline());
        let proxy = sh.listener_proxy.get(listener).copied().unwrap_or(false);
        let sniff = sh
            .listener_h2c_preface
            .get(listener)
            .copied()
            .unwrap_or(false);
        if proxy || sniff {
            // The header and the preface share the connection's first deadline (the header
            // timeout).
            let generation = (token >> 32) as u32;
            let buf = Vec::new();
            self.preambles.insert(
                idx,
                Preamble {
                    generation,
                    buf,
                    proxy,
                    sniff,
                },
            );
        }
        keep_peer(&mut self.peers, idx, peer);
        slot.live = Some(Live {
            conn,
            transport,
            alpn: tls,
            armed,
            receiving: true,
            idle: false,
            to_https: sh.listener_redirect.get(listener).copied().flatten(),
            alt_svc: sh.listener_alt_svc.get(listener).copied().flatten(),
            counted: false,
            relays: None,
            streams: Vec::new(),
        });
        self.live += 1;
        if sh.app.metrics {
            self.io.app.counters.set_open(self.live);
        }
        // A connection with a PROXY header is counted once the header names its client.
        if self.client_conns.is_some()
            && !self.preambles.get(&idx).is_some_and(|p| p.proxy)
            && !self.count_client(idx)
        {
            self.close(idx);
        }
    }

    /// Takes a free slot for a client connection or an upstream one (`up`) and gives it a
    /// new generation: its token names only what lives there now.
    fn alloc_slot(&mut self, up: bool) -> (u32, Token) {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    live: None,
                    up: None,
                    #[cfg(all(feature = "proxy", feature = "http2"))]
                    h2: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[idx as usize];
        // Client generations stay below 2^31 and upstream ones above ([`upstream::UP`] is
        // the token's top bit); u32::MAX is never used: tokens at RESERVED and above are not
        // sockets'.
        let next = slot.generation.wrapping_add(1) & 0x7fff_ffff;
        let next = next.max(1);
        slot.generation = if up {
            (next | 0x8000_0000).min(u32::MAX - 1)
        } else {
            next
        };
        let token = (u64::from(slot.generation) << 32) | u64::from(idx);
        (idx, token)
    }

    fn close(&mut self, idx: u32) {
        let Some(slot) = self.slots.get_mut(idx as usize) else {
            return;
        };
        if let Some(mut live) = slot.live.take() {
            if !self.preambles.is_empty() {
                self.preambles.remove(&idx);
            }
            if live.counted
                && let Some(table) = &self.client_conns
                && let Some(Some(peer)) = self.peers.get(idx as usize)
            {
                table.close(peer.ip());
            }
            if let Some(relays) = live.relays.take() {
                self.orphans.extend_from_slice(&relays.0);
            }
            let mut gone = Vec::new();
            for chan in live.streams.drain(..) {
                chan.gone();
                gone.extend(chan.at());
            }
            for at in gone {
                // A streamed gRPC answer cut off: its access-log line, without a status.
                if !self.io.app.grpc_lines.is_empty() {
                    (self.io.app).grpc_line_end(&self.io.sites.sites, at, None);
                }
            }
            let token = (u64::from(slot.generation) << 32) | u64::from(idx);
            if !self.io.app.sent_lines.is_empty() {
                // Its large answers' lines, sent or cut off.
                (self.io.app).lines_sent(&self.io.sites.sites, token);
            }
            if let Proto::Boxed(proto::Boxed::H3(h)) = &mut live.conn
                && let Some(q) = self.quic.as_mut()
            {
                q.forget(h);
                if self.io.app.counters_on {
                    h.count_close(&self.io.app.counters);
                }
            }
            let outstanding = live.conn.outstanding();
            if outstanding > 0 {
                self.io.app.counters.abandoned(outstanding);
            }
            self.backend.detach(token);
            if self.io.app.counters_on {
                let c = &self.io.app.counters;
                if live.idle {
                    c.idle(false);
                }
                if let Some(done) = live.transport.handshake_done() {
                    c.tls_closed(done);
                }
                c.set_open(self.live - 1);
            }
            live.conn.release(&mut self.io.cx.pool);
            self.wheel.cancel(idx);
            self.free.push(idx);
            self.live -= 1;
        }
    }

    /// Fires the deadlines that passed.
    fn expire(&mut self, sh: &Shared) {
        let mut due = std::mem::take(&mut self.due);
        self.wheel.expire(self.io.cx.now, &mut due);
        for &idx in &due {
            let now = self.io.cx.now;
            let Some(live) = self
                .slots
                .get_mut(idx as usize)
                .and_then(|s| s.live.as_mut())
            else {
                if self.slots.get(idx as usize).is_some_and(Slot::upstream) {
                    self.up_timer(idx, sh);
                }
                continue;
            };
            // Its entry is gone from the wheel.
            live.armed = u64::MAX;
            if live.conn.deadline() > now {
                // `u64::MAX` is no deadline (an answer its upstream keeps the time of).
                if live.conn.deadline() != u64::MAX {
                    live.armed = self.wheel.arm(idx, live.conn.deadline());
                }
                continue;
            }
            if live.conn.timer() == Timer::Deferred {
                // Counted before the 503 goes out, so whoever sees the 503 sees the count.
                self.io.app.counters.timed_out();
            }
            self.with(self.token(idx), sh, |live, p| {
                live.conn.on_timer(p.cx, &mut p.svc)
            });
        }
        due.clear();
        self.due = due;
    }

    /// Deferred answers came back: each goes to its connection, in its place.
    fn answers(&mut self, sh: &Shared) {
        let mut done = std::mem::take(&mut self.done);
        self.io.app.inbox.take(&mut done);
        for d in done.drain(..) {
            let (token, id, resp, head, upgrade) =
                self.io.app.finish(&sh.app, &self.io.sites.sites, d);
            if let Some(up) = upgrade {
                self.with(token, sh, |live, p| {
                    ws::accepted_late(live, *up, id, resp, p)
                });
                continue;
            }
            if let crate::Body::Stream(_) = resp.body {
                self.start_stream(token, id, resp, head, sh);
                continue;
            }
            let mut taken = false;
            self.with(token, sh, |live, p| {
                taken = live.conn.complete(id, resp, p.cx);
            });
            if !taken {
                self.io.app.counters.late();
            }
        }
        self.done = done;
        self.body_rooms(sh);
        if self.proxying {
            self.cache_landed(sh);
        }
        self.pump_streams(sh);
    }

    /// Request bodies held for room whose handlers took what was held: their connections
    /// read on (see `app::incoming`).
    fn body_rooms(&mut self, sh: &Shared) {
        let mut rooms = Vec::new();
        self.io.app.inbox.take_rooms(&mut rooms);
        for (token, id) in rooms {
            self.with(token, sh, |live, p| {
                live.conn.body_room(id, p.head, p.cx, &mut p.svc);
            });
        }
    }

    /// Shutdown: stop accepting, close idle connections cleanly, let busy ones finish.
    /// A reload left new sites: answer from them from the next event on. Requests already
    /// read keep their answers' rules by site index (a stale one falls back to the default);
    /// a proxied one's upstream follows its name (`upstream.rs`, `Pools::bring_up_to_date`).
    #[cold]
    fn swap_sites(&mut self) {
        let new = self.reload.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(sites) = new {
            self.io.app.files = sites.for_worker();
            if self.io.app.counters_on {
                self.count_sites(&sites);
            }
            self.proxying |= !sites.upstreams.is_empty();
            self.io.app.extras |= self.proxying;
            let old = std::mem::replace(&mut self.io.sites, sites);
            self.reload_upstreams(&old);
        }
    }

    /// Per-site counters for `sites`, each site's count carried over by its label.
    fn count_sites(&mut self, sites: &SiteSet) {
        let c = crate::stats::site_counters(&sites.sites.labels(), &self.io.app.site_counters);
        self.io.app.counters.set_sites(c.clone());
        self.io.app.site_counters = c;
    }

    fn begin_drain(&mut self, sh: &Shared) {
        if self.drain_deadline.is_some() {
            return;
        }
        self.drain_deadline = Some(self.io.cx.now + sh.drain_timeout.as_millis() as u64);
        self.io.cx.draining = true;
        if let Some(q) = self.quic.as_mut() {
            let handed_over = sh.handed_over.load(std::sync::atomic::Ordering::Relaxed);
            let forward = if handed_over {
                let relays = sh.handoff_relays.lock().unwrap_or_else(|e| e.into_inner());
                relays
                    .iter()
                    .filter_map(|r| r.try_clone().ok())
                    .map(std::os::unix::net::UnixDatagram::from)
                    .collect()
            } else {
                Vec::new()
            };
            q.drain(handed_over, forward);
        }
        // Connections already in the accept queue got in: take them before the listeners
        // close (closing them would reset those connections).
        for id in 0..self.listeners + self.listener_of.len() {
            while let Some((sock, peer)) = self.backend.accept_now(id) {
                self.accept(id, sock, peer, sh);
            }
        }
        self.backend.close_listeners();
        for idx in 0..self.slots.len() as u32 {
            let slot = &self.slots[idx as usize];
            let Some(live) = slot.live.as_ref() else {
                continue;
            };
            if live.conn.is_idle() {
                // A request that already arrived is answered (with close) rather than lost.
                let token = (u64::from(slot.generation) << 32) | u64::from(idx);
                if let Some(c) = self.backend.recv_now(token) {
                    self.complete(c, sh);
                }
            }
            self.with(self.token(idx), sh, |live, p| live.conn.drain(p.cx));
        }
    }
}

/// The worker's parts a connection works with during one completion.
struct Parts<'a, B: Backend> {
    backend: &'a mut B,
    cx: &'a mut Cx,
    svc: ConnApp<'a>,
    head: &'a mut RequestHead,
    plain: &'a mut Vec<u8>,
    token: Token,
    /// Cleared when the connection must close.
    fine: bool,
}

impl<B: Backend> Parts<'_, B> {
    /// Bytes arrived: plaintext goes straight to the connection; ciphertext through TLS.
    #[inline(always)]
    fn received(&mut self, live: &mut Live, data: &[u8]) {
        if !live.transport.decrypts() {
            live.conn.recv(data, self.head, self.cx, &mut self.svc);
            return;
        }
        self.plain.clear();
        let input = live.transport.receive(data, self.plain);
        if live.alpn {
            self.negotiated(live);
        }
        if !self.plain.is_empty() {
            live.conn
                .recv(self.plain, self.head, self.cx, &mut self.svc);
        }
        match input {
            Ok(Input::More) => {}
            Ok(Input::End) => live.conn.eof(self.cx, &mut self.svc),
            Err(()) => {
                // Send the alert rustls queued, then close.
                let _ = live
                    .transport
                    .flush(self.backend, self.token, &mut self.cx.pool);
                self.fine = false;
                return;
            }
        }
        if live
            .transport
            .flush(self.backend, self.token, &mut self.cx.pool)
            .is_err()
        {
            self.fine = false;
        }
    }

    /// The TLS handshake may have finished: when ALPN chose `h2`, the connection becomes
    /// HTTP/2 before it reads a byte of plaintext (and before a hand-off to kernel TLS).
    #[cold]
    fn negotiated(&mut self, live: &mut Live) {
        if let Some(h2) = live.transport.negotiated_h2() {
            if live.transport.negotiated_acme() {
                // Nothing but the handshake is exchanged: the connection ends here.
                self.fine = false;
                return;
            }
            live.alpn = false;
            live.transport.identify();
            self.svc.io.client_cert = live.transport.client_cert();
            if h2 {
                live.conn.upgrade(self.cx.now, self.cx);
            }
        }
    }

    /// A control record (alert, handshake message) arrived on a kernel-TLS socket.
    #[cold]
    fn record(&mut self, live: &mut Live, kind: u8, data: &[u8]) {
        match live.transport.record(self.backend, self.token, kind, data) {
            Ok(Input::More) => {}
            Ok(Input::End) => live.conn.eof(self.cx, &mut self.svc),
            Err(()) => self.fine = false,
        }
    }

    /// The send timeout passed with output unsent: `SO_LINGER` 0, so the close that follows
    /// resets the connection and the kernel frees its send queue at once instead of keeping
    /// it as an orphan (1000 such readers of a 1 MiB file pinned 2.17 GiB of TCP memory).
    #[cold]
    fn reset(&mut self) {
        if let Some(fd) = self.backend.fd(self.token) {
            let _ = rustix::net::sockopt::set_socket_linger(fd, Some(std::time::Duration::ZERO));
        }
    }

    /// A send the connection (or TLS) asked for finished.
    fn sent(&mut self, live: &mut Live, c: Completion) {
        match live
            .transport
            .completed(self.backend, self.token, c, &mut self.cx.pool)
        {
            Finished::Nothing => {}
            Finished::Bytes(buf) => {
                let n = buf.len() as u64;
                self.give_back(buf);
                live.conn.sent(n, self.cx);
            }
            Finished::File(n) => {
                self.count_out(n);
                live.conn.file_sent(n, self.cx)
            }
            Finished::Shut => live.conn.shut(self.cx),
            Finished::Failed => self.fine = false,
        }
    }

    /// Bytes sent (metrics).
    #[inline(always)]
    fn count_out(&self, n: u64) {
        if self.svc.app.metrics {
            self.svc.io.counters.bytes_out(n);
        }
    }

    /// A send buffer came back: it is the worker's staging buffer again if that one was
    /// handed out, else it goes to the pool.
    #[inline(always)]
    fn give_back(&mut self, mut buf: Vec<u8>) {
        self.count_out(buf.len() as u64);
        if self.cx.out.capacity() == 0 {
            buf.clear();
            self.cx.out = buf;
        } else {
            self.cx.pool.put(&mut buf);
        }
    }

    /// Transmits what the connection has to send, resumes input held back for
    /// backpressure, and arms receiving as the connection wants. `false`: close it.
    #[inline(always)]
    fn pump(&mut self, live: &mut Live, ready: &mut Vec<u32>, idx: u32) -> bool {
        // One dispatch on the protocol per pump, then a loop compiled for each.
        let Live {
            conn,
            transport,
            receiving,
            ..
        } = live;
        match conn {
            Proto::H1(c) => self.pump_with(c, transport, receiving, ready, idx),
            Proto::Boxed(proto::Boxed::H2(c)) => {
                self.pump_with(&mut **c, transport, receiving, ready, idx)
            }
            Proto::Boxed(proto::Boxed::Ws(c)) => {
                self.pump_with(&mut **c, transport, receiving, ready, idx)
            }
            // Its packets go out through the worker's UDP socket (`Worker::with`).
            Proto::Boxed(proto::Boxed::H3(_)) => true,
        }
    }

    #[inline(always)]
    fn pump_with<C: Drive>(
        &mut self,
        conn: &mut C,
        transport: &mut Transport,
        receiving: &mut bool,
        ready: &mut Vec<u32>,
        idx: u32,
    ) -> bool {
        let mut budget = FILE_BUDGET;
        let mut resumes = 0;
        loop {
            match conn.poll_transmit(self.cx) {
                Transmit::Bytes { more } => {
                    let buf = conn.take_output(self.cx);
                    match transport.send(self.backend, self.token, buf, more, &mut self.cx.pool) {
                        Outcome::Done(buf) => {
                            let n = buf.len() as u64;
                            self.give_back(buf);
                            conn.sent(n, self.cx);
                        }
                        Outcome::InFlight => {
                            if self.cx.out.capacity() == 0 {
                                self.cx.out = self.cx.pool.get();
                            }
                            conn.stalled(self.cx);
                            break;
                        }
                        Outcome::Failed => return false,
                    }
                }
                Transmit::File { file, offset, len } => {
                    let file = file.file.clone();
                    let range = (offset, len.min(budget));
                    match transport.sendfile(
                        self.backend,
                        self.token,
                        &file,
                        range,
                        &mut self.cx.pool,
                    ) {
                        Outcome::Done(n) => {
                            self.count_out(n);
                            conn.file_sent(n, self.cx);
                            budget = budget.saturating_sub(n);
                            if budget == 0 {
                                ready.push(idx);
                                break;
                            }
                        }
                        Outcome::InFlight => {
                            conn.file_taken();
                            conn.stalled(self.cx);
                            break;
                        }
                        Outcome::Failed => return false,
                    }
                }
                Transmit::Shutdown => {
                    match transport.shutdown(self.backend, self.token, &mut self.cx.pool) {
                        Outcome::Done(()) => conn.shut(self.cx),
                        Outcome::InFlight => {
                            conn.shutdown_taken();
                            break;
                        }
                        Outcome::Failed => return false,
                    }
                }
                Transmit::Close => return false,
                Transmit::Reset => {
                    self.reset();
                    return false;
                }
                Transmit::Idle => {
                    if resumes < MAX_RESUMES && conn.can_resume(self.cx) {
                        resumes += 1;
                        conn.resume(self.head, self.cx, &mut self.svc);
                        continue;
                    }
                    break;
                }
            }
        }
        if !self.svc.io.sent_lines.is_empty() && conn.drained(self.cx) {
            self.svc.io.lines_sent(self.svc.sites, self.token);
        }
        let want = conn.wants_input(self.cx);
        if want != *receiving {
            *receiving = want;
            self.backend.set_recv(self.token, want);
        }
        true
    }
}

/// Keeps the address of the client in slot `idx` (`None` on a Unix socket): one store per
/// connection, so every request can be told its peer without a syscall.
#[inline]
fn keep_peer(peers: &mut Vec<Option<SocketAddr>>, idx: u32, peer: Option<SocketAddr>) {
    let idx = idx as usize;
    if peers.len() <= idx {
        peers.resize(idx + 1, None);
    }
    peers[idx] = peer;
}
