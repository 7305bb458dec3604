//! One load thread: an epoll loop over its own connections. It sends pre-encoded requests, frames
//! responses with `linerate_http1::ResponseCounter`, times each response from its own request's send (or intended send
//! with `--rate`) and counts it only once fully received. It shares nothing with other threads except
//! a progress cell it writes every tick; it must not block anywhere but in `epoll_wait`.
//! A phase that ends early (Ctrl-C, or a target that stops accepting connections) still returns
//! what it measured, marked with its `Interruption`.
//! https connections do their TLS handshake as part of connecting (not timed as a request) and go
//! through `Transport` for every read and write; plain ones take its `Plain` arm.
//! `--http2` connections hand their bytes to an `h2::Client` instead of the `ResponseCounter`
//! (chosen once per read, in `on_event`); they write through the same `unsent` buffer, which
//! then also carries the client's acknowledgements, and a request is timed from the writing of
//! its HEADERS to its END_STREAM.
//! `--ws` connections write their upgrade once open (`Phase::Upgrading`, not timed, like a TLS
//! handshake), then send pre-encoded messages through the same `send` as HTTP/1.1 requests
//! (`pipeline` in flight); `ws::Reader` counts the echoes, each timed from its message's send.
//! `--http3` connections are QUIC over a UDP socket each, driven by `quic` (a child of this
//! module, so the same `Worker`): their handshake is `Phase::Handshaking`, their timers a heap
//! beside the tick, and a request is timed from the opening of its stream to its end.
#![forbid(unsafe_code)]

mod quic;

pub use quic::preflight as quic_preflight;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::event::epoll;
use rustix::io::Errno;
use rustix::net::{self, AddressFamily, SocketFlags, SocketType};
use rustix::time::{
    ClockId, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
    timerfd_settime,
};

use crate::config::Config;
use crate::h2;
use crate::h3;
use crate::request::Template;
use crate::schedule::Schedule;
use crate::stats::{Interruption, ThreadStats, ns_to_us};
use crate::tls::{Handshake, IoFailure, SetupFailure, Transport};
use crate::ws;
use linerate_http1::{Counted as Response, ResponseCounter};

/// Bytes read per `recv`.
pub const RECV_BUFFER: usize = 64 * 1024;
/// Readiness events taken per `epoll_wait`.
pub const EVENTS_PER_WAIT: usize = 256;
/// How often timeouts are checked, failed connections retried and progress published.
pub const TICK: Duration = Duration::from_millis(10);
/// Timer slack in rate mode (ns): the kernel's default 50 µs would make sends late by that much.
pub const RATE_TIMER_SLACK_NS: u64 = 1;
/// `Worker::read`'s protocols.
const H1: u8 = 0;
const H2: u8 = 1;
const WS: u8 = 2;
/// Epoll token of the rate-mode timerfd (connection tokens are indices).
const TIMER_TOKEN: u64 = u64::MAX;
/// Connection attempts that may fail in a row (no success between) before the thread decides
/// the target went away and ends the phase (reported as interrupted, with what it measured).
pub const MAX_CONNECT_FAILURES_IN_ROW: u32 = 1000;

/// What one thread does in one phase.
#[derive(Clone, Debug)]
pub struct Plan {
    pub thread: usize,
    pub connections: usize,
    /// Global index of this thread's first connection (templates are assigned round-robin).
    pub first_connection: usize,
    /// Requests to resolve (answer or fail) before stopping.
    pub budget: Option<u64>,
    /// This thread's share of `--rate`.
    pub rate: Option<f64>,
    /// Stop this long after the phase start.
    pub duration: Option<Duration>,
}

/// Live counters a worker publishes for the progress line.
#[derive(Debug, Default)]
pub struct Progress {
    pub responses: AtomicU64,
    pub errors: AtomicU64,
}

/// Why a worker could not measure at all (a lost target is not one: see `Interruption`).
#[derive(Debug)]
pub enum WorkerError {
    Epoll(Errno),
    /// The rate-mode timer could not be created or registered.
    Timer(Errno),
}

impl fmt::Display for WorkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerError::Epoll(e) => write!(f, "epoll failed: {e}"),
            WorkerError::Timer(e) => write!(f, "cannot set up the rate timer (timerfd): {e}"),
        }
    }
}

/// The one line that says why connecting to `addr` was given up.
fn target_lost(addr: SocketAddr, last: &SetupFailure) -> String {
    format!(
        "cannot connect to {addr}: {last} ({MAX_CONNECT_FAILURES_IN_ROW} attempts in a row failed)"
    )
}

/// The flags that end a phase early, checked every tick.
#[derive(Clone, Copy, Debug)]
pub struct Stops<'a> {
    /// The caller's (Ctrl-C): shared by every phase.
    pub user: &'a AtomicBool,
    /// This phase's: set by a thread that lost the target, so its siblings end too.
    pub phase: &'a AtomicBool,
}

impl std::error::Error for WorkerError {}

/// Which class an error is counted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Read,
    Write,
    Timeout,
    Malformed,
    Tls,
}

/// A request's send times, kept until its response completes.
#[derive(Clone, Copy, Debug)]
struct Sent {
    sent_ns: u64,
    intended_ns: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No socket: waiting for the next tick to connect.
    Closed,
    Connecting {
        since_ns: u64,
    },
    /// TCP is up; the TLS handshake is under way (`since_ns`: the `connect()` call).
    Handshaking {
        since_ns: u64,
    },
    /// `--ws`: the upgrade request is sent and its 101 awaited (`since_ns`: the `connect()`).
    Upgrading {
        since_ns: u64,
    },
    Open,
}

#[derive(Debug)]
struct Conn {
    sock: Option<OwnedFd>,
    transport: Transport,
    phase: Phase,
    parser: ResponseCounter,
    /// Requests sent and not yet answered, oldest first.
    inflight: VecDeque<Sent>,
    /// Requests sent on this connection (for `--reconnect`).
    sent_here: u64,
    template: usize,
    /// Request bytes the socket did not take yet; EPOLLOUT is armed while non-empty. HTTP/2
    /// also stages here what it is about to write (frames, acknowledgements).
    unsent: Vec<u8>,
    /// EPOLLOUT is armed (as last asked of epoll).
    want_out: bool,
    /// Queued in `Worker::ready` (rate mode).
    queued: bool,
    /// `--http2`: the protocol state; `inflight` and `parser` are then unused.
    h2: Option<Box<h2::Client<Sent>>>,
    /// `--ws`: the upgrade's answer so far, then the echoes' frames; `parser` is unused.
    ws: Option<Box<WsConn>>,
    /// `--http3`: the QUIC connection, while there is one; `inflight`, `parser`, `unsent`
    /// and `transport` are unused.
    h3: Option<Box<quic::QuicConn>>,
}

/// A WebSocket connection's reading state.
#[derive(Debug, Default)]
struct WsConn {
    /// The 101's head, until its blank line.
    head: Vec<u8>,
    reader: ws::Reader,
}

impl Conn {
    /// Requests sent and not answered.
    fn in_flight(&self) -> usize {
        if let Some(q) = &self.h3 {
            return q.client.in_flight();
        }
        match &self.h2 {
            Some(h) => h.in_flight(),
            None => self.inflight.len(),
        }
    }

    /// Another request may be sent now (rate mode).
    fn has_room(&self, pipeline: usize) -> bool {
        if let Some(q) = &self.h3 {
            return q.client.room() > 0;
        }
        match &self.h2 {
            Some(h) => h.room() > 0,
            None => self.unsent.is_empty() && self.inflight.len() < pipeline,
        }
    }
}

/// Runs one phase on the current thread; `stats.interrupted` says whether it ended early.
pub fn run(
    cfg: &Config,
    plan: &Plan,
    base: Instant,
    progress: &Progress,
    stops: Stops<'_>,
) -> Result<ThreadStats, WorkerError> {
    if plan.rate.is_some() {
        // Best effort: a failure only costs precision, which the latency figures then show.
        let _ =
            rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(RATE_TIMER_SLACK_NS));
    }
    let cpu_start = rustix::time::clock_gettime(ClockId::ThreadCPUTime);
    let epoll = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(WorkerError::Epoll)?;
    // Rate mode wakes on a timerfd: epoll_wait's own timeout is whole milliseconds (without
    // epoll_pwait2), which made every send up to 1 ms late and put that into the latencies.
    let timer = match plan.rate {
        Some(_) => {
            let t = timerfd_create(
                TimerfdClockId::Monotonic,
                TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
            )
            .map_err(WorkerError::Timer)?;
            epoll::add(
                &epoll,
                &t,
                epoll::EventData::new_u64(TIMER_TOKEN),
                epoll::EventFlags::IN,
            )
            .map_err(WorkerError::Timer)?;
            Some(t)
        }
        None => None,
    };
    let start_ns = elapsed_ns(base);
    let mut w = Worker {
        cfg,
        plan,
        base,
        epoll,
        timer,
        conns: Vec::with_capacity(plan.connections),
        buf: vec![0; RECV_BUFFER],
        stats: ThreadStats::new(plan.rate.is_some()),
        issued: 0,
        resolved: 0,
        ready: VecDeque::new(),
        schedule: plan.rate.map(|r| Schedule::new(start_ns, r)),
        failures_in_row: 0,
        last_failure: SetupFailure::Io(Errno::CONNREFUSED),
        refill_at: cfg.pipeline / 2,
        draining: false,
        spin_until: 0,
        h2_events: Vec::new(),
        h3_events: Vec::new(),
        quic_timers: BinaryHeap::new(),
        quic_due: Vec::new(),
        tx: Vec::new(),
        scratch: Vec::new(),
    };
    for i in 0..plan.connections {
        let template = (plan.first_connection + i) % cfg.templates.len();
        w.conns.push(Conn {
            sock: None,
            transport: Transport::Plain,
            phase: Phase::Closed,
            parser: ResponseCounter::new(),
            inflight: VecDeque::with_capacity(cfg.pipeline),
            sent_here: 0,
            template,
            unsent: Vec::new(),
            want_out: false,
            queued: false,
            h2: cfg.http2.as_ref().map(|h| {
                let c = h2::Client::new(h.streams);
                Box::new(match &h.grpc {
                    Some(expect) => c.grpc(expect.clone()),
                    None => c,
                })
            }),
            ws: cfg.ws.as_ref().map(|_| Box::default()),
            h3: None,
        });
        w.open(i, start_ns);
    }
    let end_ns = w.event_loop(start_ns, progress, stops)?;
    progress
        .responses
        .store(w.stats.responses, Ordering::Relaxed);
    progress
        .errors
        .store(w.stats.errors.total(), Ordering::Relaxed);
    let cpu_end = rustix::time::clock_gettime(ClockId::ThreadCPUTime);
    // Empty polls of --spin are not work: they are reported apart, not as CPU per request.
    w.stats.cpu_ns = timespec_ns(cpu_end)
        .saturating_sub(timespec_ns(cpu_start))
        .saturating_sub(w.stats.spin_ns);
    w.stats.wall_ns = elapsed_ns(base).saturating_sub(start_ns);
    w.stats.elapsed_ns = end_ns.saturating_sub(start_ns);
    // QUIC has no kernel state whose end tells the server (TCP's FIN does): close each
    // connection, so the server frees it now rather than at its idle timeout.
    for i in 0..w.conns.len() {
        w.close_quic(i);
    }
    Ok(w.stats)
}

fn elapsed_ns(base: Instant) -> u64 {
    base.elapsed().as_nanos() as u64
}

fn timespec_ns(t: Timespec) -> u64 {
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

struct Worker<'a> {
    cfg: &'a Config,
    plan: &'a Plan,
    base: Instant,
    epoll: OwnedFd,
    /// Rate mode: the precise wake-up (see `run`).
    timer: Option<OwnedFd>,
    conns: Vec<Conn>,
    buf: Vec<u8>,
    stats: ThreadStats,
    /// Requests sent and not handed back (a `Connection: close` hands back those behind it).
    issued: u64,
    /// Requests answered or failed.
    resolved: u64,
    /// Rate mode: open connections with room for another request.
    ready: VecDeque<usize>,
    schedule: Option<Schedule>,
    failures_in_row: u32,
    last_failure: SetupFailure,
    /// `--spin`: poll without blocking until this time.
    spin_until: u64,
    /// Rate mode, past the deadline: waiting for the last answers, sending nothing.
    draining: bool,
    /// Closed-loop refill: top a connection up once its in-flight count falls to this.
    refill_at: usize,
    /// `--http2`: what a read made of requests, reused.
    h2_events: Vec<h2::Event<Sent>>,
    /// `--http3`: what a connection's input made of requests, reused.
    h3_events: Vec<h3::Event<Sent>>,
    /// `--http3`: each connection's next QUIC deadline (ns after `base`, conn index), the
    /// earliest first; entries a connection has since moved are stale (`quic`).
    quic_timers: BinaryHeap<Reverse<(u64, usize)>>,
    /// `--http3`: the connections whose timers came due, reused.
    quic_due: Vec<usize>,
    /// `--http3`: datagrams to send, and what the endpoint would answer on its own.
    tx: Vec<u8>,
    scratch: Vec<u8>,
}

impl Worker<'_> {
    fn now(&self) -> u64 {
        elapsed_ns(self.base)
    }

    /// Returns the time the phase ended.
    /// Returns early, at the next tick, once a stop flag is set (Ctrl-C, or a sibling thread
    /// lost the target), or once connecting has failed too often in a row; it then records why
    /// in `stats.interrupted`.
    fn event_loop(
        &mut self,
        start_ns: u64,
        progress: &Progress,
        stops: Stops<'_>,
    ) -> Result<u64, WorkerError> {
        let tick = TICK.as_nanos() as u64;
        let deadline = self.plan.duration.map(|d| start_ns + d.as_nanos() as u64);
        let mut next_tick = start_ns + tick;
        let mut events: Vec<epoll::Event> = Vec::with_capacity(EVENTS_PER_WAIT);
        let timeout = self.cfg.timeout.as_nanos() as u64;
        let spin = self.cfg.spin.as_nanos() as u64;
        loop {
            let mut now = self.now();
            if let Some(d) = deadline
                && now >= d
            {
                if self.schedule.is_none() {
                    return Ok(d);
                }
                // Rate mode: send nothing more, but let what was sent on schedule be answered
                // (within --timeout), so the achieved rate is not short by the last round trip.
                self.draining = true;
                if now >= d + timeout || self.conns.iter().all(|c| c.in_flight() == 0) {
                    return Ok(d);
                }
            }
            if self.plan.budget.is_some_and(|b| self.resolved >= b) {
                return Ok(now);
            }
            if self.failures_in_row >= MAX_CONNECT_FAILURES_IN_ROW {
                let why = target_lost(self.cfg.target.addr, &self.last_failure);
                self.stats.interrupted = Some(Interruption::TargetLost(why));
                stops.phase.store(true, Ordering::Relaxed);
                return Ok(now);
            }
            if now >= next_tick {
                if stops.user.load(Ordering::Relaxed) || stops.phase.load(Ordering::Relaxed) {
                    self.stats.interrupted = Some(Interruption::Stopped);
                    return Ok(now);
                }
                self.tick(now);
                progress
                    .responses
                    .store(self.stats.responses, Ordering::Relaxed);
                progress
                    .errors
                    .store(self.stats.errors.total(), Ordering::Relaxed);
                next_tick = now + tick;
            }
            let mut wake = next_tick;
            if let Some(d) = deadline {
                wake = wake.min(if self.draining { d + timeout } else { d });
            }
            if self.schedule.is_some() && !self.draining {
                self.issue_due(now);
                if let Some(s) = &self.schedule
                    && !self.ready.is_empty()
                    && self.budget_left() > 0
                {
                    wake = wake.min(s.next_due());
                }
                now = self.now();
            }
            if self.cfg.http3.is_some()
                && let Some(t) = self.next_quic_timer()
            {
                wake = wake.min(t);
            }
            // --spin: poll without sleeping for a while after the last events, so the server
            // does not pay to wake this thread for every response.
            let spinning = now < self.spin_until;
            let wait = if spinning {
                Duration::ZERO
            } else {
                Duration::from_nanos(wake.saturating_sub(now))
            };
            if let Err(e) = wait_precisely(&self.epoll, self.timer.as_ref(), &mut events, wait) {
                return Err(WorkerError::Epoll(e));
            }
            if !events.is_empty() {
                if spin > 0 {
                    self.spin_until = self.now() + spin;
                }
            } else if spinning {
                self.stats.spin_ns += self.now().saturating_sub(now);
            }
            for ev in &events {
                let flags = ev.flags;
                let token = ev.data.u64();
                if token == TIMER_TOKEN {
                    if let Some(t) = &self.timer {
                        // Clear the expiry so the level-triggered fd is not reported again.
                        let _ = rustix::io::read(t, &mut [0u8; 8]);
                    }
                    continue;
                }
                self.on_event(token as usize, flags);
            }
            if self.cfg.http3.is_some() {
                self.fire_quic_timers(self.now());
            }
        }
    }

    fn budget_left(&self) -> u64 {
        self.plan
            .budget
            .map_or(u64::MAX, |b| b.saturating_sub(self.issued))
    }

    fn template(&self, i: usize) -> &Template {
        &self.cfg.templates[self.conns[i].template]
    }

    /// Starts a connection attempt for conn `i` (whose old socket, if any, is already dropped).
    fn open(&mut self, i: usize, now: u64) {
        if self.cfg.http3.is_some() {
            return self.open_quic(i, now);
        }
        let addr = self.cfg.target.addr;
        let family = if addr.is_ipv4() {
            AddressFamily::INET
        } else {
            AddressFamily::INET6
        };
        let attempt = net::socket_with(
            family,
            SocketType::STREAM,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )
        .and_then(|fd| {
            net::sockopt::set_tcp_nodelay(&fd, true)?;
            match net::connect(&fd, &addr) {
                Ok(()) | Err(Errno::INPROGRESS) => Ok(fd),
                Err(e) => Err(e),
            }
        });
        self.stats.connects += 1;
        let fd = match attempt {
            Ok(fd) => fd,
            Err(e) => return self.connect_failed(i, e),
        };
        let transport = match Transport::new(self.cfg.tls.as_ref()) {
            Ok(t) => t,
            Err(f) => return self.setup_failed(i, f),
        };
        let data = epoll::EventData::new_u64(i as u64);
        if let Err(e) = epoll::add(
            &self.epoll,
            &fd,
            data,
            epoll::EventFlags::IN | epoll::EventFlags::OUT,
        ) {
            return self.connect_failed(i, e);
        }
        let c = &mut self.conns[i];
        c.sock = Some(fd);
        c.transport = transport;
        c.want_out = true;
        c.phase = Phase::Connecting { since_ns: now };
    }

    fn connect_failed(&mut self, i: usize, e: Errno) {
        self.setup_failed(i, SetupFailure::Io(e));
    }

    /// A connection attempt (TCP connect or TLS handshake) failed: count it and close.
    fn setup_failed(&mut self, i: usize, f: SetupFailure) {
        if f.is_tls() {
            self.stats.errors.tls += 1;
        } else {
            self.stats.errors.connect += 1;
        }
        self.failures_in_row += 1;
        self.last_failure = f;
        self.drop_socket(i);
    }

    /// Forgets conn `i`'s socket and request state; the next tick reconnects it.
    fn drop_socket(&mut self, i: usize) {
        self.close_quic(i);
        let c = &mut self.conns[i];
        c.sock = None;
        c.transport = Transport::Plain;
        c.phase = Phase::Closed;
        c.parser.reset();
        c.inflight.clear();
        c.unsent.clear();
        c.want_out = false;
        c.sent_here = 0;
        if let Some(h) = c.h2.as_deref_mut() {
            h.reset();
        }
        if let Some(w) = c.ws.as_deref_mut() {
            w.head.clear();
            w.reader.reset();
        }
    }

    /// Closes conn `i` and reconnects it at once.
    fn reopen(&mut self, i: usize, now: u64) {
        self.drop_socket(i);
        self.open(i, now);
    }

    /// Fails every request in flight on conn `i`, counting each in `class`, and reconnects.
    fn fail(&mut self, i: usize, class: Class, now: u64) {
        let lost = self.conns[i].in_flight() as u64;
        let counted = lost.max(1);
        let e = &mut self.stats.errors;
        match class {
            Class::Read => e.read += counted,
            Class::Write => e.write += counted,
            Class::Timeout => e.timeout += counted,
            Class::Malformed => e.malformed += counted,
            Class::Tls => e.tls += counted,
        }
        self.stats.failed += lost;
        self.resolved += lost;
        self.reopen(i, now);
    }

    fn on_event(&mut self, i: usize, flags: epoll::EventFlags) {
        if self.cfg.http3.is_some() {
            return self.on_event_quic(i, flags);
        }
        match self.conns[i].phase {
            Phase::Closed => {}
            Phase::Connecting { since_ns } => self.on_connected(i, since_ns),
            Phase::Handshaking { since_ns } => self.handshake(i, since_ns),
            Phase::Open | Phase::Upgrading { .. } => {
                if flags.contains(epoll::EventFlags::OUT)
                    && (!self.conns[i].unsent.is_empty() || self.conns[i].transport.wants_write())
                {
                    self.flush(i);
                }
                let c = &self.conns[i];
                if flags.intersects(
                    epoll::EventFlags::IN | epoll::EventFlags::HUP | epoll::EventFlags::ERR,
                ) && matches!(c.phase, Phase::Open | Phase::Upgrading { .. })
                {
                    // The protocol branch on HTTP/1.1's path: once per readiness event.
                    if c.h2.is_some() {
                        self.read::<H2>(i);
                    } else if c.ws.is_some() {
                        self.read::<WS>(i);
                    } else {
                        self.read::<H1>(i);
                    }
                }
            }
        }
    }

    fn on_connected(&mut self, i: usize, since_ns: u64) {
        let Some(fd) = self.conns[i].sock.as_ref() else {
            return;
        };
        if let Err(e) = net::sockopt::socket_error(fd).and_then(|r| r) {
            return self.connect_failed(i, e);
        }
        if self.conns[i].transport.is_handshaking() {
            self.conns[i].phase = Phase::Handshaking { since_ns };
            return self.handshake(i, since_ns);
        }
        if let Err(e) = self.interest(i, false) {
            return self.connect_failed(i, e);
        }
        let now = self.now();
        self.opened(i, since_ns, now);
    }

    /// Conn `i` is connected (and through its TLS handshake): requests may flow. An HTTP/2
    /// connection writes its preface and SETTINGS first.
    /// A WebSocket connection writes its upgrade and waits for the 101 (`since_ns`: its
    /// `connect()`, for the upgrade's timeout).
    fn opened(&mut self, i: usize, since_ns: u64, now: u64) {
        let cfg = self.cfg;
        let c = &mut self.conns[i];
        if let Some(w) = &cfg.ws {
            // Not a success yet: a server that refuses every upgrade must end the run.
            c.phase = Phase::Upgrading { since_ns };
            c.unsent.extend_from_slice(&w.run.upgrade);
            self.write_unsent(i, now);
            return;
        }
        self.failures_in_row = 0;
        c.phase = Phase::Open;
        match c.h2.as_deref_mut() {
            Some(h) => {
                h.start(&mut c.unsent);
                self.after_progress_h2(i, now);
            }
            None => self.after_progress(i, now),
        }
    }

    /// Waits for conn `i` to be readable, and writable too when `out`.
    fn interest(&mut self, i: usize, out: bool) -> Result<(), Errno> {
        let c = &mut self.conns[i];
        let fd = c.sock.as_ref().expect("connection has a socket");
        let flags = if out {
            epoll::EventFlags::IN | epoll::EventFlags::OUT
        } else {
            epoll::EventFlags::IN
        };
        epoll::modify(&self.epoll, fd, epoll::EventData::new_u64(i as u64), flags)?;
        c.want_out = out;
        Ok(())
    }

    /// https: advances conn `i`'s handshake; once done, the connection is open like a plain one.
    fn handshake(&mut self, i: usize, since_ns: u64) {
        let c = &mut self.conns[i];
        let fd = c
            .sock
            .as_ref()
            .expect("handshaking connection has a socket");
        match c.transport.handshake(fd) {
            Ok(Handshake::Pending { want_write }) => {
                if let Err(e) = self.interest(i, want_write) {
                    self.connect_failed(i, e);
                }
            }
            Ok(Handshake::Done { resumed }) => {
                let want_write = c.transport.wants_write();
                if let Err(e) = self.interest(i, want_write) {
                    return self.connect_failed(i, e);
                }
                let now = self.now();
                let t = &mut self.stats.tls;
                t.handshakes += 1;
                t.resumed += u64::from(resumed);
                t.setup_ns += now.saturating_sub(since_ns);
                self.opened(i, since_ns, now);
            }
            Err(f) => self.setup_failed(i, f),
        }
    }

    /// Reads what conn `i` has; `P` picks the protocol at compile time, so HTTP/1.1's loop
    /// carries nothing of the others'.
    fn read<const P: u8>(&mut self, i: usize) {
        let mut buf = std::mem::take(&mut self.buf);
        loop {
            let c = &mut self.conns[i];
            let fd = c.sock.as_ref().expect("open connection has a socket");
            let got = c.transport.recv(fd, &mut buf[..]);
            let now = self.now();
            match got {
                Ok(0) => {
                    match P {
                        H2 => self.on_eof_h2(i, now),
                        WS => self.on_eof_ws(i, now),
                        _ => self.on_eof(i, now),
                    }
                    break;
                }
                Ok(n) => {
                    // bytes_read counts what HTTP saw: plaintext, for https.
                    self.stats.bytes_read += n as u64;
                    let open = match P {
                        H2 => self.frame_h2(i, &buf[..n], now),
                        WS => self.frame_ws(i, &buf[..n], now),
                        _ => self.frame(i, &buf[..n], now),
                    };
                    if !open {
                        break;
                    }
                    // Level-triggered epoll wakes us again for what the socket still holds,
                    // but not for decrypted bytes a TLS session holds: those are read now.
                    if !self.conns[i].transport.has_buffered() {
                        if P == H2 {
                            self.after_progress_h2(i, now);
                        } else {
                            self.after_progress(i, now);
                        }
                        break;
                    }
                }
                Err(IoFailure::Io(Errno::AGAIN | Errno::INTR)) => break,
                Err(IoFailure::Io(_)) => {
                    self.fail(i, Class::Read, now);
                    break;
                }
                Err(IoFailure::Tls(_)) => {
                    self.fail(i, Class::Tls, now);
                    break;
                }
            }
        }
        self.buf = buf;
    }

    /// Frames and counts the responses in `data`. Returns false if the connection was closed.
    fn frame(&mut self, i: usize, mut data: &[u8], now: u64) -> bool {
        let no_body = self.template(i).head_only;
        while !data.is_empty() {
            match self.conns[i].parser.feed(data, no_body) {
                Ok((n, done)) => {
                    data = &data[n..];
                    if let Some(r) = done
                        && !self.complete(i, r, now)
                    {
                        return false;
                    }
                }
                Err(_) => {
                    self.fail(i, Class::Malformed, now);
                    return false;
                }
            }
        }
        true
    }

    /// Counts one complete response. Returns false if the connection was closed.
    fn complete(&mut self, i: usize, r: Response, now: u64) -> bool {
        let Some(sent) = self.conns[i].inflight.pop_front() else {
            // A response nobody asked for: the stream cannot be trusted any more.
            self.fail(i, Class::Malformed, now);
            return false;
        };
        self.record(r.status, sent, now);
        if r.close {
            // The server will not answer what was pipelined behind this response: those requests
            // go back to the budget rather than counting as errors.
            let back = self.conns[i].inflight.len() as u64;
            self.issued -= back;
            self.conns[i].inflight.clear();
            self.reopen(i, now);
            return false;
        }
        true
    }

    /// Counts a complete response of either HTTP version: its status and its latency.
    #[inline]
    fn record(&mut self, status: u16, sent: Sent, now: u64) {
        self.stats.count_status(status);
        if !(200..400).contains(&status) {
            self.stats.errors.status += 1;
        }
        self.record_answer(sent, now);
    }

    /// Counts one answer (a response, or a WebSocket echo) and its latency.
    #[inline]
    fn record_answer(&mut self, sent: Sent, now: u64) {
        self.stats.responses += 1;
        self.resolved += 1;
        let lat = ns_to_us(now.saturating_sub(sent.intended_ns));
        self.stats.latency.saturating_record(lat);
        if let Some(h) = self.stats.latency_uncorrected.as_mut() {
            h.saturating_record(ns_to_us(now.saturating_sub(sent.sent_ns)));
        }
    }

    /// HTTP/2: hands `data` to conn `i`'s protocol state and counts what it made of requests.
    /// Returns false if the connection was closed (the server broke the protocol).
    fn frame_h2(&mut self, i: usize, data: &[u8], now: u64) -> bool {
        let cfg = self.cfg;
        let mut events = std::mem::take(&mut self.h2_events);
        let c = &mut self.conns[i];
        let h = c.h2.as_deref_mut().expect("an HTTP/2 connection");
        let req = &cfg.http2.as_ref().expect("an HTTP/2 run").requests[c.template];
        let result = h.recv(data, req, &mut c.unsent, &mut events);
        for ev in events.drain(..) {
            match ev {
                h2::Event::Response { tag, status, .. } => self.record(status, tag, now),
                h2::Event::Grpc {
                    tag,
                    status,
                    verdict,
                    messages,
                } => {
                    self.stats.grpc.messages += u64::from(messages);
                    // A status other than 2xx/3xx is a status error (`record`); a 2xx/3xx
                    // that breaks gRPC's rules is a gRPC error.
                    if let Err(fault) = verdict
                        && (200..400).contains(&status)
                    {
                        self.stats.errors.grpc += 1;
                        self.stats.grpc.faults[fault.index()] += 1;
                    }
                    self.record(status, tag, now);
                }
                // A reset or refused stream is lost like a request on a lost connection:
                // counted, and the closed loop sends another.
                h2::Event::Reset { .. } | h2::Event::Refused { .. } => {
                    self.stats.errors.reset += 1;
                    self.stats.failed += 1;
                    self.resolved += 1;
                }
            }
        }
        self.h2_events = events;
        if result.is_err() {
            self.fail(i, Class::Malformed, now);
            return false;
        }
        true
    }

    /// WebSocket: the 101 first, then the echoes. Returns false if the connection was closed.
    fn frame_ws(&mut self, i: usize, mut data: &[u8], now: u64) -> bool {
        let cfg = self.cfg;
        let w = cfg.ws.as_ref().expect("a WebSocket run");
        if let Phase::Upgrading { .. } = self.conns[i].phase {
            let c = &mut self.conns[i];
            let conn = c.ws.as_deref_mut().expect("a WebSocket connection");
            // Where the head ends, searched from a little before the new bytes.
            let from = conn.head.len().saturating_sub(3);
            conn.head.extend_from_slice(data);
            let Some(end) = memchr::memmem::find(&conn.head[from..], b"\r\n\r\n") else {
                if conn.head.len() > ws::MAX_UPGRADE_HEAD {
                    self.upgrade_failed(i, ws::WsError::HeadTooLong);
                    return false;
                }
                return true;
            };
            let end = from + end + 4;
            if let Err(e) = ws::check_upgrade(&conn.head[..end], &w.run) {
                self.upgrade_failed(i, e);
                return false;
            }
            // What came after the head is the server's first frames.
            let after = conn.head.len() - end;
            data = &data[data.len() - after..];
            conn.head.clear();
            c.phase = Phase::Open;
            self.failures_in_row = 0;
        }
        while !data.is_empty() {
            let c = &mut self.conns[i];
            let conn = c.ws.as_deref_mut().expect("a WebSocket connection");
            let (n, ev) = match conn.reader.feed(data, &w.run, w.mask) {
                Ok(r) => r,
                Err(_) => {
                    self.fail(i, Class::Malformed, now);
                    return false;
                }
            };
            data = &data[n..];
            match ev {
                None => {}
                Some(ws::Event::Message) => {
                    let Some(sent) = c.inflight.pop_front() else {
                        // An echo of nothing: the stream cannot be trusted any more.
                        self.fail(i, Class::Malformed, now);
                        return false;
                    };
                    self.record_answer(sent, now);
                }
                Some(ws::Event::Pong(frame)) => {
                    c.unsent.extend_from_slice(&frame);
                    if !self.write_unsent(i, now) {
                        return false;
                    }
                }
                Some(ws::Event::Close(frame)) => {
                    // Answer the close (best effort), then as for a closed connection.
                    if let Some(fd) = c.sock.as_ref() {
                        let _ = c.transport.send(fd, &frame);
                    }
                    self.on_eof_ws(i, now);
                    return false;
                }
            }
        }
        true
    }

    /// WebSocket: the upgrade was refused or answered wrongly: counted (a refusal by its
    /// status) and the connection closed, as a failed setup; the next tick tries again.
    fn upgrade_failed(&mut self, i: usize, e: ws::WsError) {
        match e {
            ws::WsError::Refused(code) if code != 0 => {
                self.stats.count_status(code);
                self.stats.errors.status += 1;
            }
            _ => self.stats.errors.malformed += 1,
        }
        self.failures_in_row += 1;
        self.last_failure = SetupFailure::Upgrade(e);
        self.drop_socket(i);
    }

    /// WebSocket: the server closed the connection (or sent a close).
    fn on_eof_ws(&mut self, i: usize, now: u64) {
        match self.conns[i].phase {
            Phase::Upgrading { .. } => self.setup_failed(i, SetupFailure::UpgradeClosed),
            _ if self.conns[i].inflight.is_empty() => self.reopen(i, now),
            _ => self.fail(i, Class::Read, now),
        }
    }

    /// HTTP/2: the server closed the connection.
    fn on_eof_h2(&mut self, i: usize, now: u64) {
        if self.conns[i].in_flight() == 0 {
            self.reopen(i, now);
        } else {
            self.fail(i, Class::Read, now);
        }
    }

    fn on_eof(&mut self, i: usize, now: u64) {
        match self.conns[i].parser.eof() {
            Ok(Some(r)) => {
                self.complete(i, Response { close: true, ..r }, now);
            }
            Ok(None) if self.conns[i].inflight.is_empty() => self.reopen(i, now),
            Ok(None) | Err(_) => self.fail(i, Class::Read, now),
        }
    }

    /// After responses arrived, the connection opened or its output drained: the step for its
    /// protocol.
    fn progressed(&mut self, i: usize, now: u64) {
        if self.cfg.http3.is_some() {
            self.progressed_quic(i, now);
        } else if self.conns[i].h2.is_some() {
            self.after_progress_h2(i, now);
        } else {
            self.after_progress(i, now);
        }
    }

    /// HTTP/2: reconnect (when `--reconnect` is due or the connection can open no more
    /// streams, once idle), top the streams up, or queue for the rate; then write what the
    /// protocol state has to say (acknowledgements, window updates).
    fn after_progress_h2(&mut self, i: usize, now: u64) {
        let budget = self.budget_left();
        let c = &mut self.conns[i];
        let h = c.h2.as_deref().expect("an HTTP/2 connection");
        let reconnect_due = self.cfg.reconnect.is_some_and(|n| c.sent_here >= n);
        if reconnect_due || h.spent() {
            if h.is_idle() && c.unsent.is_empty() && !c.transport.wants_write() {
                return self.reopen(i, now);
            }
            self.write_unsent(i, now);
            return;
        }
        if self.schedule.is_some() {
            if !c.queued && h.room() > 0 {
                c.queued = true;
                self.ready.push_back(i);
            }
            self.write_unsent(i, now);
            return;
        }
        let mut k = h.room() as u64;
        if let Some(n) = self.cfg.reconnect {
            k = k.min(n - c.sent_here);
        }
        self.open_h2(i, k.min(budget) as usize, now, now);
    }

    /// HTTP/2: opens `k` streams on conn `i` and writes. Returns false if the connection failed.
    fn open_h2(&mut self, i: usize, k: usize, intended_ns: u64, now: u64) -> bool {
        let cfg = self.cfg;
        let c = &mut self.conns[i];
        let h = c.h2.as_deref_mut().expect("an HTTP/2 connection");
        let reqs = &cfg.http2.as_ref().expect("an HTTP/2 run").requests;
        let sent = Sent {
            sent_ns: now,
            intended_ns,
        };
        if reqs.len() == 1 {
            for _ in 0..k {
                h.open(&reqs[c.template], sent, &mut c.unsent);
            }
        } else {
            // A mix (`Http2::requests`): each stream opens the next in turn, as h2load's -i.
            for j in 0..k as u64 {
                let at = ((c.sent_here + j) % reqs.len() as u64) as usize;
                h.open(&reqs[at], sent, &mut c.unsent);
            }
        }
        c.sent_here += k as u64;
        self.issued += k as u64;
        self.write_unsent(i, now)
    }

    /// HTTP/2 and WebSocket: writes what conn `i` has to say, unless it waits for EPOLLOUT already (`flush`
    /// writes it then). Returns false if the connection failed.
    fn write_unsent(&mut self, i: usize, now: u64) -> bool {
        let c = &mut self.conns[i];
        if c.want_out || c.unsent.is_empty() {
            return true;
        }
        let fd = c.sock.as_ref().expect("open connection has a socket");
        match c.transport.send(fd, &c.unsent) {
            Ok(n) => {
                c.unsent.drain(..n);
            }
            Err(Errno::AGAIN | Errno::INTR) => {}
            Err(_) => {
                self.fail(i, Class::Write, now);
                return false;
            }
        }
        if (!c.unsent.is_empty() || c.transport.wants_write()) && self.interest(i, true).is_err() {
            self.fail(i, Class::Write, now);
            return false;
        }
        true
    }

    /// After responses arrived or the connection opened: reconnect, refill, or queue for the rate.
    fn after_progress(&mut self, i: usize, now: u64) {
        let c = &self.conns[i];
        if c.phase != Phase::Open {
            // A WebSocket upgrade still awaits its 101.
            return;
        }
        if let Some(n) = self.cfg.reconnect
            && c.sent_here >= n
        {
            if c.inflight.is_empty() && c.unsent.is_empty() {
                self.reopen(i, now);
            }
            return;
        }
        if self.schedule.is_some() {
            if !c.queued && c.unsent.is_empty() && c.inflight.len() < self.cfg.pipeline {
                self.conns[i].queued = true;
                self.ready.push_back(i);
            }
            return;
        }
        if c.inflight.len() > self.refill_at || !c.unsent.is_empty() {
            return;
        }
        let mut k = (self.cfg.pipeline - c.inflight.len()) as u64;
        if let Some(n) = self.cfg.reconnect {
            k = k.min(n - c.sent_here);
        }
        k = k.min(self.budget_left());
        if k > 0 {
            self.send(i, k as usize, now, now);
        }
    }

    /// Rate mode: sends every request whose intended time has come, while connections have room.
    fn issue_due(&mut self, now: u64) {
        let Some(mut due) = self.schedule.as_ref().map(Schedule::next_due) else {
            return;
        };
        while due <= now && self.budget_left() > 0 {
            let Some(i) = self.ready.pop_front() else {
                return;
            };
            self.conns[i].queued = false;
            let c = &self.conns[i];
            if c.phase != Phase::Open || !c.has_room(self.cfg.pipeline) {
                continue;
            }
            if self.cfg.reconnect.is_some_and(|n| c.sent_here >= n) {
                continue;
            }
            let sent_now = self.now();
            // QUIC may refuse the stream (the server's limit): the request then waits for
            // the next connection with room, still due at its intended time.
            if self.cfg.http3.is_some() && self.open_quic_streams(i, 1, due, sent_now) == 0 {
                continue;
            }
            if let Some(s) = self.schedule.as_mut() {
                s.advance();
            }
            let sent = if self.cfg.http3.is_some() {
                true
            } else if self.conns[i].h2.is_some() {
                self.open_h2(i, 1, due, sent_now)
            } else {
                self.send(i, 1, due, sent_now)
            };
            if sent {
                self.progressed(i, sent_now);
            }
            due = self.schedule.as_ref().map_or(u64::MAX, Schedule::next_due);
        }
    }

    /// Sends the first `k` requests of conn `i`'s template. Returns false if the connection failed.
    fn send(&mut self, i: usize, k: usize, intended_ns: u64, now: u64) -> bool {
        let t = self.conns[i].template;
        let bytes = self.cfg.templates[t].first(k);
        let c = &mut self.conns[i];
        let fd = c.sock.as_ref().expect("open connection has a socket");
        let written = match c.transport.send(fd, bytes) {
            Ok(n) => n,
            Err(Errno::AGAIN | Errno::INTR) => 0,
            Err(_) => {
                self.fail(i, Class::Write, now);
                return false;
            }
        };
        for _ in 0..k {
            c.inflight.push_back(Sent {
                sent_ns: now,
                intended_ns,
            });
        }
        c.sent_here += k as u64;
        self.issued += k as u64;
        if written < bytes.len() || c.transport.wants_write() {
            c.unsent.extend_from_slice(&bytes[written..]);
            if self.interest(i, true).is_err() {
                self.fail(i, Class::Write, now);
                return false;
            }
        }
        true
    }

    /// Writes what the socket did not take earlier: TLS records first, then request bytes.
    fn flush(&mut self, i: usize) {
        let now = self.now();
        let c = &mut self.conns[i];
        let fd = c.sock.as_ref().expect("open connection has a socket");
        if c.transport.flush(fd).is_err() {
            return self.fail(i, Class::Write, now);
        }
        if !c.unsent.is_empty() {
            match c.transport.send(fd, &c.unsent) {
                Ok(n) => {
                    c.unsent.drain(..n);
                }
                Err(Errno::AGAIN | Errno::INTR) => return,
                Err(_) => return self.fail(i, Class::Write, now),
            }
        }
        if c.unsent.is_empty() && !c.transport.wants_write() {
            if self.interest(i, false).is_err() {
                return self.fail(i, Class::Write, now);
            }
            self.progressed(i, now);
        }
    }

    /// Every `TICK`: time out stuck requests and connection attempts, retry closed connections.
    fn tick(&mut self, now: u64) {
        let timeout = self.cfg.timeout.as_nanos() as u64;
        for i in 0..self.conns.len() {
            match self.conns[i].phase {
                Phase::Closed => self.open(i, now),
                Phase::Connecting { since_ns } if now.saturating_sub(since_ns) >= timeout => {
                    self.connect_failed(i, Errno::TIMEDOUT);
                }
                Phase::Handshaking { since_ns } if now.saturating_sub(since_ns) >= timeout => {
                    self.setup_failed(i, SetupFailure::HandshakeTimeout);
                }
                Phase::Upgrading { since_ns } if now.saturating_sub(since_ns) >= timeout => {
                    self.setup_failed(i, SetupFailure::UpgradeTimeout);
                }
                Phase::Connecting { .. } | Phase::Handshaking { .. } | Phase::Upgrading { .. } => {}
                Phase::Open => {
                    let c = &self.conns[i];
                    let oldest = match (&c.h3, &c.h2) {
                        (Some(q), _) => q.client.oldest(),
                        (None, Some(h)) => h.oldest(),
                        (None, None) => c.inflight.front(),
                    };
                    let stuck = oldest.is_some_and(|s| now.saturating_sub(s.sent_ns) >= timeout);
                    if stuck {
                        self.fail(i, Class::Timeout, now);
                    }
                }
            }
        }
    }
}

/// Waits on `epoll` for events (into `events`, cleared first) at most `wait`: a timerfd in the
/// set (`timer`) is armed one-shot to the nanosecond for it, epoll's own millisecond timeout
/// staying as a backstop. An interrupted wait is an empty one. Used by the lab's cache client
/// too.
pub fn wait_precisely(
    epoll: &OwnedFd,
    timer: Option<&OwnedFd>,
    events: &mut Vec<epoll::Event>,
    wait: Duration,
) -> rustix::io::Result<()> {
    let ts = Timespec {
        tv_sec: wait.as_secs() as _,
        tv_nsec: wait.subsec_nanos() as _,
    };
    if let Some(t) = timer
        && !wait.is_zero()
    {
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: ts,
        };
        let _ = timerfd_settime(t, TimerfdTimerFlags::empty(), &spec);
    }
    events.clear();
    match epoll::wait(epoll, rustix::buffer::spare_capacity(events), Some(&ts)) {
        Ok(_) | Err(Errno::INTR) => Ok(()),
        Err(e) => Err(e),
    }
}
