//! The test client's worker: the application (routes, sites, a deferred-answer inbox) and one
//! connection at a time, driven as `crate::driver` drives a socket's, with a [`Wire`] in the
//! socket's place.
//!
//! Owns the driver's role and nothing more: the same connection state machines
//! (`driver::proto::Proto` over `h1::Conn` and `h2::Conn`) call the same `app::ConnApp`; their
//! transmits are pumped to the wire (a file body is read from its range, as `sendfile` would
//! send it), deferred answers come back through the worker's `Inbox`, and timers fire on a real
//! clock. A wait never outlasts the connection's next deadline or the exchange's time limit,
//! so a deferred handler that never answers gets the server's 503 at the deferred timeout.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use linerate_http1::{DateCache, HeadRoom, RequestHead};

use super::client::Protocol;
use super::error::TestError;
use super::response::TestResponse;
use super::wire::Wire;
use crate::app::deferred::Inbox;
use crate::app::sites::SiteSet;
use crate::app::{App, AppIo, ConnApp};
use crate::config::Config;
use crate::driver::proto::{Boxed, Drive, Proto};
use crate::driver::streams;
use crate::h1::{Cx, Transmit};
use crate::pool::Pool;
use crate::response::FileBody;
use crate::router::Router;
use crate::start_error::StartError;
use crate::streaming::Chan;

/// Most transmits one pump makes before it calls the connection stuck (each moves bytes or
/// changes state; a 1 GiB body is a few thousand).
const MAX_TRANSMITS: usize = 1 << 20;

/// The peer address handlers see: the client is in process, so it is the loopback address
/// with no port.
const TEST_PEER: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// How a pump left the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    Open,
    /// The server ended its side: shut down or closed.
    Ended,
    /// The server reset the connection.
    Reset,
}

/// Wakes the engine when deferred answers arrive (the worker's eventfd, as a condvar, or the
/// waker of the engine parked in its runtime).
#[derive(Default)]
struct Bell {
    rung: Mutex<bool>,
    cv: Condvar,
    parked: Mutex<Option<std::task::Waker>>,
}

impl Bell {
    fn ring(&self) {
        *self.rung.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
        if let Some(w) = self.parked.lock().unwrap_or_else(|e| e.into_inner()).take() {
            w.wake();
        }
    }

    /// Consumes a ring, or leaves `waker` to be woken by the next.
    fn rung_or_wake(&self, waker: &std::task::Waker) -> bool {
        let mut rung = self.rung.lock().unwrap_or_else(|e| e.into_inner());
        if std::mem::take(&mut *rung) {
            return true;
        }
        *self.parked.lock().unwrap_or_else(|e| e.into_inner()) = Some(waker.clone());
        false
    }

    /// Waits until rung or `at_most` passed, and consumes the ring.
    fn wait(&self, at_most: Duration) {
        let end = Instant::now() + at_most;
        let mut rung = self.rung.lock().unwrap_or_else(|e| e.into_inner());
        while !*rung {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            rung = self
                .cv
                .wait_timeout(rung, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *rung = false;
    }
}

/// One in-process worker.
pub(crate) struct Engine {
    app: App,
    sites: Arc<SiteSet>,
    io: AppIo,
    cx: Cx,
    head: RequestHead,
    bell: Arc<Bell>,
    /// `cx.now` counts milliseconds from here.
    epoch: Instant,
    /// The worker's tokio runtime, installed on the calling thread for each exchange (see
    /// `crate::runtime`): [`crate::OnWorker`]'s futures run on it.
    rt: std::rc::Rc<crate::runtime::Local>,
    /// The last connection's token (each exchange has its own, so a late answer for an
    /// earlier one is counted and dropped, as a worker drops one for a closed connection).
    token: u64,
    /// The connection's streamed answers (`driver::streams`), with their request ids.
    streams: Vec<(Arc<Chan>, u64)>,
}

impl Engine {
    /// The worker's state for `config` (its sites, static roots, limits and timeouts).
    pub(crate) fn new(config: &Config, mut router: Router) -> Result<Engine, StartError> {
        router
            .finish()
            .map_err(|e| StartError::invalid(crate::Part::Routes, e.to_string()))?;
        let sites = Arc::new(SiteSet::build(config)?);
        sites.check_roots()?;
        let bell = Arc::new(Bell::default());
        let ring = bell.clone();
        let extended_connect = crate::server::announces_extended_connect(config, &router);
        let app = App::new(router, config, None);
        let io = AppIo {
            files: sites.for_worker(),
            log: None,
            inbox: Arc::new(Inbox::new(Box::new(move || ring.ring()))),
            outstanding: 0,
            waiting: Default::default(),
            cancels: Default::default(),
            counters: Arc::default(),
            counters_on: app.metrics,
            static_gz: Default::default(),
            grpc_lines: Vec::new(),
            sent_lines: Vec::new(),
            jobs: Vec::new(),
            spares: Default::default(),
            real: None,
            client_cert: None,
            site_counters: Arc::new([]),
            layered: Default::default(),
            upgrades: Vec::new(),
            extras: false,
            ids: crate::trace::context::Ids::new(),
            trace: Default::default(),
        };
        let cx = Cx {
            now: 0,
            cfg: crate::h1::ConnConfig {
                extended_connect,
                ..config.conn()
            },
            out: Vec::new(),
            room: HeadRoom::default(),
            pool: Pool::default(),
            date: DateCache::new(SystemTime::now()),
            draining: false,
            sendfile: true,
            alt_svc: None,
            cancelled: Vec::new(),
        };
        Ok(Engine {
            app,
            sites,
            io,
            cx,
            head: RequestHead::new(),
            bell,
            epoch: Instant::now(),
            rt: crate::runtime::Local::new()
                .map_err(|e| StartError::invalid(crate::Part::Other, format!("runtime: {e}")))?,
            token: 0,
            streams: Vec::new(),
        })
    }

    /// The engine's worker runtime.
    pub(crate) fn runtime(&self) -> std::rc::Rc<crate::runtime::Local> {
        self.rt.clone()
    }

    /// Serves one exchange on a new connection: the wire's bytes in, the server's bytes back
    /// to it, until its response is whole, the connection ends, or `limit` passes.
    pub(crate) fn exchange(
        &mut self,
        protocol: Protocol,
        wire: &mut dyn Wire,
        limit: Duration,
    ) -> Result<TestResponse, TestError> {
        self.tick();
        self.token += 1;
        let mut conn = match protocol {
            Protocol::Http1 => Proto::h1(self.cx.now, &self.cx),
            #[cfg(feature = "http2")]
            Protocol::Http2 => Proto::h2(self.cx.now, &self.cx),
        };
        let rt = self.rt.clone();
        let result = rt.serving(|| self.run(&mut conn, wire, Instant::now() + limit, limit));
        for (chan, _) in self.streams.drain(..) {
            chan.gone();
        }
        conn.release(&mut self.cx.pool);
        self.cx.out.clear();
        self.io.jobs.clear();
        result
    }

    fn run(
        &mut self,
        conn: &mut Proto,
        wire: &mut dyn Wire,
        give_up: Instant,
        limit: Duration,
    ) -> Result<TestResponse, TestError> {
        loop {
            self.tick();
            self.answers(conn);
            if self.cx.now >= conn.deadline() {
                let (cx, _, mut svc) = self.parts();
                conn.on_timer(cx, &mut svc);
            }
            if wants_input(conn, &self.cx) && wire.has_output() {
                let input = wire.outgoing();
                let (cx, head, mut svc) = self.parts();
                conn.recv(&input, head, cx, &mut svc);
            }
            if !self.io.jobs.is_empty() {
                return Err(TestError::Proxied);
            }
            let link = self.pump(conn, wire)?;
            if let Some(resp) = wire.response() {
                return Ok(resp);
            }
            if link != Link::Open {
                wire.closed(link == Link::Reset)?;
                return wire.response().ok_or(TestError::Closed {
                    reset: link == Link::Reset,
                });
            }
            if wire.has_output() && wants_input(conn, &self.cx) {
                continue;
            }
            if self
                .streams
                .iter()
                .any(|(c, id)| c.pending() && conn.stream_room(*id))
            {
                continue; // the wire took output: a streamed answer has room again
            }
            let now = Instant::now();
            if now >= give_up {
                return Err(TestError::Timeout(limit));
            }
            // One more millisecond: the clock reads whole milliseconds, rounded down.
            let due = conn
                .deadline()
                .saturating_sub(self.cx.now)
                .saturating_add(1);
            let wait = Duration::from_millis(due).min(give_up - now);
            if crate::runtime::Local::used() && self.rt.busy() {
                let bell = &self.bell;
                self.rt.park(Some(wait), |w| bell.rung_or_wake(w));
            } else {
                self.bell.wait(wait);
            }
        }
    }

    /// Reads the clock and the Date, as the worker does once per turn of its loop.
    fn tick(&mut self) {
        self.cx.now = self.epoch.elapsed().as_millis() as u64;
        self.cx.date.update(SystemTime::now());
    }

    /// The connection's share of the worker for one call, as `driver::Io::split` lends it.
    fn parts(&mut self) -> (&mut Cx, &mut RequestHead, ConnApp<'_>) {
        let Engine {
            app,
            sites,
            io,
            cx,
            head,
            token,
            ..
        } = self;
        let svc = ConnApp {
            app,
            sites: &sites.sites,
            io,
            peer: Some(&TEST_PEER),
            token: *token,
            site: 0,
            site_app: sites.sites.get(0),
            kind: crate::stats::Kind::Server,
            started: 0,
            tls: false,
            to_https: None,
        };
        (cx, head, svc)
    }

    /// Deferred answers that came back go to the connection, as `Worker::answers` hands them
    /// over (a streamed one's head placed, its pieces moved while the connection has room); one for an earlier exchange's connection is finished (counted) and dropped.
    fn answers(&mut self, conn: &mut Proto) {
        let mut done = Vec::new();
        self.io.inbox.take(&mut done);
        for d in done {
            let (token, id, resp, head, upgrade) = self.io.finish(&self.app, &self.sites.sites, d);
            if token != self.token {
                continue;
            }
            if let Some(mut up) = upgrade {
                // A handshake accepted under async layers: answered as one accepted in the
                // call is (`pump`).
                up.id = id;
                self.io.upgrades.push(*up);
                continue;
            }
            let key = (token, id);
            let inbox = &self.io.inbox;
            if let Some(chan) = streams::start(conn, key, resp, head, inbox, &mut self.cx) {
                self.streams.push((chan, id));
            }
        }
        // Bodies held for room that their handlers took: reading goes on, as
        // `Worker::body_rooms` does.
        let mut rooms = Vec::new();
        self.io.inbox.take_rooms(&mut rooms);
        for (token, id) in rooms {
            if token == self.token {
                let (cx, head, mut svc) = self.parts();
                conn.body_room(id, head, cx, &mut svc);
            }
        }
        // Every streamed answer is read each turn (the worker reads those queued to it).
        let mut queued = Vec::new();
        self.io.inbox.take_streams(&mut queued);
        let cx = &mut self.cx;
        self.streams
            .retain(|(chan, id)| streams::pump(conn, chan, *id, cx));
    }

    /// Transmits what the connection has to send, as `Parts::pump` does.
    fn pump(&mut self, conn: &mut Proto, wire: &mut dyn Wire) -> Result<Link, TestError> {
        for up in std::mem::take(&mut self.io.upgrades) {
            // The test client speaks no WebSocket: an accepted handshake is answered 501
            // (`TestServer` and a WebSocket client test the route).
            let why = "the test client does not speak WebSocket; use TestServer\n";
            let resp = crate::Response::text(why).status(501).close();
            conn.complete(up.id, resp, &mut self.cx);
        }
        let (cx, head, mut svc) = self.parts();
        match conn {
            Proto::H1(c) => pump_with(c, cx, head, &mut svc, wire),
            Proto::Boxed(Boxed::H2(c)) => pump_with(&mut **c, cx, head, &mut svc, wire),
            Proto::Boxed(Boxed::Ws(c)) => pump_with(&mut **c, cx, head, &mut svc, wire),
            // The test client speaks HTTP/1.1 and HTTP/2 over its in-memory pipe, never QUIC.
            Proto::Boxed(Boxed::H3(_)) => Ok(Link::Ended),
        }
    }
}

fn wants_input(conn: &Proto, cx: &Cx) -> bool {
    match conn {
        Proto::H1(c) => Drive::wants_input(c, cx),
        Proto::Boxed(Boxed::H2(c)) => Drive::wants_input(&**c, cx),
        Proto::Boxed(Boxed::Ws(c)) => Drive::wants_input(&**c, cx),
        Proto::Boxed(Boxed::H3(_)) => false,
    }
}

fn pump_with<C: Drive>(
    c: &mut C,
    cx: &mut Cx,
    head: &mut RequestHead,
    svc: &mut ConnApp<'_>,
    wire: &mut dyn Wire,
) -> Result<Link, TestError> {
    for _ in 0..MAX_TRANSMITS {
        match c.poll_transmit(cx) {
            Transmit::Bytes { .. } => {
                let mut buf = c.take_output(cx);
                let n = buf.len() as u64;
                let read = wire.incoming(&buf);
                buf.clear();
                if cx.out.capacity() == 0 {
                    cx.out = buf;
                }
                c.sent(n, cx);
                read?;
            }
            Transmit::File { file, offset, len } => {
                let bytes = read_range(file, offset, len)?;
                c.file_taken();
                c.file_sent(len, cx);
                wire.incoming(&bytes)?;
            }
            Transmit::Shutdown => {
                c.shutdown_taken();
                c.shut(cx);
                return Ok(Link::Ended);
            }
            Transmit::Close => return Ok(Link::Ended),
            Transmit::Reset => return Ok(Link::Reset),
            Transmit::Idle => {
                if !c.can_resume(cx) {
                    return Ok(Link::Open);
                }
                c.resume(head, cx, svc);
            }
        }
    }
    Err(TestError::Stuck)
}

/// `len` bytes of a file body from `offset`: what `sendfile` would put on the wire.
fn read_range(file: &FileBody, offset: u64, len: u64) -> Result<Vec<u8>, TestError> {
    let f = std::fs::File::from(file.file.try_clone().map_err(TestError::File)?);
    let mut buf = vec![0; len as usize];
    f.read_exact_at(&mut buf, offset).map_err(TestError::File)?;
    Ok(buf)
}
