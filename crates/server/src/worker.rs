//! One worker: a pinned thread with its own listeners (HTTP, and HTTPS when configured),
//! event loop, connections, buffers and Date cache.
//!
//! Owns accepting, dispatching readiness events to connections, timers and the drain on
//! shutdown. Workers share only the read-only route table and configuration (an `Arc`
//! cloned once at start): no locks and no shared atomics on the request path.
#![forbid(unsafe_code)]

use std::net::{SocketAddr, TcpListener};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use linerate_http1::{DateCache, RequestHead};
use rustix::io::Errno;
use rustix::net::SocketFlags;

use crate::access_log::LogBuffer;
use crate::config::Config;
use crate::conn::{Conn, Next};
use crate::files::StaticFiles;
use crate::poller::{Event, Interest, Poller};
use crate::pool::Pool;
use crate::router::Router;
use crate::tls::Transport;

/// Bytes read from a socket at once into the worker's scratch buffer.
const READ_BUF: usize = 64 * 1024;
/// Connections accepted per listener event before other events get a turn.
const ACCEPTS_PER_EVENT: usize = 64;
/// How often deadlines are checked.
const SWEEP_EVERY: Duration = Duration::from_millis(100);
/// After EMFILE/ENFILE, accepting pauses this long.
const ACCEPT_BACKOFF_MS: u64 = 100;

const LISTENER: u64 = u64::MAX;
const WAKE: u64 = u64::MAX - 1;
const TLS_LISTENER: u64 = u64::MAX - 2;

/// Read-only state every worker shares.
pub(crate) struct Shared {
    pub(crate) router: Router,
    pub(crate) config: Config,
    pub(crate) server_name: Option<Vec<u8>>,
    /// The HTTPS configuration, when a TLS port is open.
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
    /// Hand TLS session keys to the kernel after each handshake (kTLS detected at start).
    pub(crate) ktls: bool,
}

/// One listening socket and whether its connections speak TLS.
struct Listener {
    sock: TcpListener,
    tls: bool,
    registered: bool,
}

impl Listener {
    fn token(&self) -> u64 {
        if self.tls { TLS_LISTENER } else { LISTENER }
    }
}

/// Per-worker resources a connection uses while it is being served.
pub(crate) struct Io {
    pub(crate) out: Vec<u8>,
    pub(crate) pool: Pool,
    pub(crate) date: DateCache,
    pub(crate) now_ms: u64,
    pub(crate) draining: bool,
    pub(crate) log: Option<LogBuffer>,
    /// This worker's static-file server (its own open-file cache), when a root is mounted.
    pub(crate) files: Option<StaticFiles>,
}

struct Slot {
    generation: u32,
    conn: Option<Conn>,
    registered: Interest,
}

pub(crate) struct Worker<P: Poller> {
    poller: P,
    /// The plain listener, then the TLS one; emptied on shutdown.
    listeners: Vec<Listener>,
    accept_paused_until: u64,
    wake: OwnedFd,
    slots: Vec<Slot>,
    free: Vec<usize>,
    live: usize,
    scratch: Vec<u8>,
    head: RequestHead,
    io: Io,
    started: Instant,
    drain_deadline: Option<u64>,
}

impl<P: Poller> Worker<P> {
    pub(crate) fn new(
        poller: P,
        listener: TcpListener,
        tls_listener: Option<TcpListener>,
        wake: OwnedFd,
        log: Option<LogBuffer>,
        files: Option<StaticFiles>,
    ) -> std::io::Result<Self> {
        let mut listeners = vec![Listener {
            sock: listener,
            tls: false,
            registered: true,
        }];
        if let Some(sock) = tls_listener {
            listeners.push(Listener {
                sock,
                tls: true,
                registered: true,
            });
        }
        for l in &listeners {
            poller.add(&l.sock, l.token(), Interest::Read)?;
        }
        poller.add(&wake, WAKE, Interest::Read)?;
        Ok(Worker {
            poller,
            listeners,
            accept_paused_until: 0,
            wake,
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
            scratch: Vec::with_capacity(READ_BUF),
            head: RequestHead::new(),
            io: Io {
                out: Vec::with_capacity(READ_BUF),
                pool: Pool::default(),
                date: DateCache::new(SystemTime::now()),
                now_ms: 0,
                draining: false,
                log,
                files,
            },
            started: Instant::now(),
            drain_deadline: None,
        })
    }

    /// Runs until shutdown has drained every connection (or the drain timeout passed).
    pub(crate) fn run(&mut self, sh: &Shared) -> std::io::Result<()> {
        let mut events: Vec<Event> = Vec::with_capacity(256);
        let mut next_sweep = 0;
        if let Some(log) = self.io.log.as_mut() {
            log.set_time(self.io.date.get());
        }
        loop {
            self.poller.wait(&mut events, Some(SWEEP_EVERY))?;
            self.io.now_ms = self.started.elapsed().as_millis() as u64;
            if self.io.date.update(SystemTime::now())
                && let Some(log) = self.io.log.as_mut()
            {
                log.set_time(self.io.date.get());
            }
            for ev in &events {
                match ev.token {
                    LISTENER => {
                        self.accept(sh, false);
                    }
                    TLS_LISTENER => {
                        self.accept(sh, true);
                    }
                    WAKE => self.begin_drain(sh),
                    token => self.conn_event(token, ev, sh),
                }
            }
            if self.io.now_ms >= next_sweep {
                next_sweep = self.io.now_ms + SWEEP_EVERY.as_millis() as u64;
                self.sweep(sh);
            }
            if let Some(log) = self.io.log.as_mut() {
                log.hand_off();
            }
            if let Some(deadline) = self.drain_deadline {
                if self.live == 0 {
                    return Ok(());
                }
                if self.io.now_ms >= deadline {
                    tracing::warn!(
                        open = self.live,
                        "drain timeout: closing remaining connections"
                    );
                    for i in 0..self.slots.len() {
                        self.close(i);
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Accepts up to [`ACCEPTS_PER_EVENT`] connections from the plain or the TLS listener;
    /// returns how many.
    fn accept(&mut self, sh: &Shared, tls: bool) -> usize {
        let mut accepted = 0;
        for _ in 0..ACCEPTS_PER_EVENT {
            let Some(listener) = self.listeners.iter().find(|l| l.tls == tls) else {
                return accepted;
            };
            if !listener.registered {
                return accepted;
            }
            let (sock, peer) = match rustix::net::acceptfrom_with(
                &listener.sock,
                SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            ) {
                Ok((sock, addr)) => (sock, addr.and_then(|a| SocketAddr::try_from(a).ok())),
                Err(Errno::AGAIN) => return accepted,
                Err(Errno::INTR | Errno::CONNABORTED) => continue,
                Err(e @ (Errno::MFILE | Errno::NFILE | Errno::NOBUFS | Errno::NOMEM)) => {
                    tracing::warn!(error = %e, "accept failed; pausing accepts");
                    for l in &mut self.listeners {
                        if l.registered && self.poller.delete(&l.sock).is_ok() {
                            l.registered = false;
                        }
                    }
                    self.accept_paused_until = self.io.now_ms + ACCEPT_BACKOFF_MS;
                    return accepted;
                }
                Err(e) => {
                    tracing::error!(error = %e, "accept failed");
                    return accepted;
                }
            };
            if let Err(e) = rustix::net::sockopt::set_tcp_nodelay(&sock, true) {
                tracing::debug!(error = %e, "TCP_NODELAY failed");
            }
            let peer = if self.io.log.is_some() { peer } else { None };
            let transport = match (&sh.tls, tls) {
                (Some(config), true) => match Transport::tls(config, sh.ktls) {
                    Ok(t) => t,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot start a TLS session");
                        continue;
                    }
                },
                _ => Transport::Plain,
            };
            let conn = Conn::new(sock, transport, peer, &self.io, sh);
            let idx = match self.free.pop() {
                Some(i) => i,
                None => {
                    self.slots.push(Slot {
                        generation: 0,
                        conn: None,
                        registered: Interest::Read,
                    });
                    self.slots.len() - 1
                }
            };
            let slot = &mut self.slots[idx];
            slot.generation = slot.generation.wrapping_add(1);
            let token = (u64::from(slot.generation) << 32) | idx as u64;
            if let Err(e) = self.poller.add(&conn.sock, token, Interest::Read) {
                tracing::error!(error = %e, "cannot register connection");
                self.free.push(idx);
                continue;
            }
            slot.registered = Interest::Read;
            slot.conn = Some(conn);
            self.live += 1;
            accepted += 1;
        }
        accepted
    }

    fn conn_event(&mut self, token: u64, ev: &Event, sh: &Shared) {
        let idx = (token & 0xffff_ffff) as usize;
        let generation = (token >> 32) as u32;
        let Some(slot) = self.slots.get_mut(idx) else {
            return;
        };
        if slot.generation != generation {
            return; // stale event for a slot that was closed and reused in this batch
        }
        let Some(conn) = slot.conn.as_mut() else {
            return;
        };
        let mut next = Next::Keep;
        if ev.writable {
            next = conn.on_writable(&mut self.head, &mut self.io, sh);
        }
        if next == Next::Keep && (ev.readable || ev.closed) {
            next = conn.on_readable(&mut self.scratch, &mut self.head, &mut self.io, sh);
        }
        // Each call takes input out of TLS's buffer, so this ends.
        while next == Next::Keep && conn.has_buffered_input() {
            next = conn.on_readable(&mut self.scratch, &mut self.head, &mut self.io, sh);
        }
        self.after(idx, next);
    }

    /// Applies an event's outcome: close, or switch between read and write interest.
    fn after(&mut self, idx: usize, next: Next) {
        if next == Next::Close {
            self.close(idx);
            return;
        }
        let slot = &mut self.slots[idx];
        let Some(conn) = slot.conn.as_ref() else {
            return;
        };
        let want = if conn.wants_write() {
            Interest::Write
        } else {
            Interest::Read
        };
        if want != slot.registered {
            let token = (u64::from(slot.generation) << 32) | idx as u64;
            if self.poller.modify(&conn.sock, token, want).is_err() {
                self.close(idx);
                return;
            }
            self.slots[idx].registered = want;
        }
    }

    fn close(&mut self, idx: usize) {
        if let Some(mut conn) = self.slots[idx].conn.take() {
            let _ = self.poller.delete(&conn.sock);
            conn.release(&mut self.io);
            self.free.push(idx);
            self.live -= 1;
        }
    }

    /// Fires expired deadlines and resumes paused accepting.
    fn sweep(&mut self, sh: &Shared) {
        let now = self.io.now_ms;
        for idx in 0..self.slots.len() {
            let Some(conn) = self.slots[idx].conn.as_mut() else {
                continue;
            };
            if conn.deadline <= now {
                let next = conn.on_timeout(&mut self.io, sh);
                self.after(idx, next);
            }
        }
        if now >= self.accept_paused_until {
            for l in &mut self.listeners {
                if !l.registered && self.poller.add(&l.sock, l.token(), Interest::Read).is_ok() {
                    l.registered = true;
                }
            }
        }
    }

    /// Shutdown: stop accepting, close idle connections cleanly, let busy ones finish.
    fn begin_drain(&mut self, sh: &Shared) {
        let mut counter = [0u8; 8];
        let _ = rustix::io::read(&self.wake, &mut counter);
        if self.drain_deadline.is_some() {
            return;
        }
        self.drain_deadline = Some(self.io.now_ms + sh.config.drain_timeout.as_millis() as u64);
        self.io.draining = true;
        // Connections already in this listener's accept queue got in: take them before the
        // listener closes (closing it would reset them).
        while self.accept(sh, false) > 0 {}
        while self.accept(sh, true) > 0 {}
        for l in std::mem::take(&mut self.listeners) {
            if l.registered {
                let _ = self.poller.delete(&l.sock);
            }
        }
        for idx in 0..self.slots.len() {
            let Some(conn) = self.slots[idx].conn.as_mut() else {
                continue;
            };
            let next = conn.begin_drain(&mut self.scratch, &mut self.head, &mut self.io, sh);
            self.after(idx, next);
        }
    }
}
