//! The proxy floor: the least a user-space HTTP/1.1 reverse proxy can cost on this kernel.
//!
//! One thread, level-triggered epoll. Every accepted client gets its own upstream connection,
//! opened at accept and kept for the client's life (a pool of exactly the clients' size, so no
//! request waits for a connection and none is ever opened per request). A readable side is
//! `recv`'d once into one buffer and `send` to its partner: a bodiless request costs four
//! socket calls (read client, write upstream, read upstream, write client) and nothing else. It
//! parses nothing and changes no byte, so it is only a floor for what a proxy must do, not a
//! proxy: it adds no `Via`, removes no hop-by-hop field and cannot balance.
//!
//! Invariant: bytes go out on the partner in the order they arrived, none dropped. A partial
//! `send` keeps the rest for the partner and stops reading the side that sent them until the
//! partner drains (backpressure), so memory per pair is bounded by one read (or, once a side
//! has hung up, by what its socket still held). A side's end
//! (FIN) is passed on as a half-close once what it sent has been written; the pair closes when
//! both sides have ended, or at once on an error or a reset.

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;
use rustix::event::{Timespec, epoll};
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendFlags, SocketFlags};
use socket2::{Domain, Protocol, Socket, Type};

use crate::floor::{LISTEN_BACKLOG, RECV_BUF_BYTES};

/// Proxy-floor configuration.
#[derive(Clone, Debug)]
pub struct RelayConfig {
    pub addr: SocketAddr,
    /// Where every client's bytes go.
    pub upstream: SocketAddr,
    pub cpu: Option<usize>,
}

/// How long `epoll_wait` sleeps before the stop flag is looked at again.
const POLL_TIMEOUT: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: 50_000_000,
};
/// Events taken per `epoll_wait`.
const MAX_EVENTS: usize = 1024;
/// The epoll token of the listener; a side's token is `pair << 1 | side`.
const LISTENER: u64 = u64::MAX;

/// A bound proxy floor, not yet relaying.
pub struct Relay {
    listener: Socket,
    epoll: OwnedFd,
    local_addr: SocketAddr,
    upstream: SocketAddr,
    cpu: Option<usize>,
}

impl Relay {
    /// Binds the listener and registers it with epoll. The upstream is not tried here: each
    /// client's accept connects to it, and a refused connect closes that client.
    pub fn bind(cfg: &RelayConfig) -> anyhow::Result<Relay> {
        let listener = Socket::new(
            Domain::for_address(cfg.addr),
            Type::STREAM.nonblocking().cloexec(),
            Some(Protocol::TCP),
        )
        .context("socket")?;
        listener.set_reuse_address(true).context("SO_REUSEADDR")?;
        listener
            .bind(&cfg.addr.into())
            .with_context(|| format!("bind {}", cfg.addr))?;
        listener.listen(LISTEN_BACKLOG).context("listen")?;
        let local_addr = listener
            .local_addr()
            .context("getsockname")?
            .as_socket()
            .context("listener has no IP address")?;
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC).context("epoll_create")?;
        epoll::add(
            &epoll,
            &listener,
            epoll::EventData::new_u64(LISTENER),
            epoll::EventFlags::IN,
        )
        .context("epoll_ctl(listener)")?;
        Ok(Relay {
            listener,
            epoll,
            local_addr,
            upstream: cfg.upstream,
            cpu: cfg.cpu,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Relays on the calling thread until `stop` is set (looked at at least every 50 ms).
    /// Every connection is closed on return.
    pub fn serve_until(self, stop: &AtomicBool) {
        if let Err(e) = self.serve(stop) {
            tracing::error!("proxy floor: {e}");
        }
    }

    fn serve(self, stop: &AtomicBool) -> anyhow::Result<()> {
        if let Some(cpu) = self.cpu {
            let mut set = rustix::thread::CpuSet::new();
            set.set(cpu);
            rustix::thread::sched_setaffinity(None, &set)
                .with_context(|| format!("pin to CPU {cpu}"))?;
        }
        let mut w = Worker {
            epoll: self.epoll,
            listener: self.listener,
            upstream: self.upstream,
            pairs: Vec::new(),
            free: Vec::new(),
            rbuf: vec![0; RECV_BUF_BYTES],
        };
        let mut events: Vec<epoll::Event> = Vec::with_capacity(MAX_EVENTS);
        while !stop.load(Ordering::Relaxed) {
            events.clear();
            match epoll::wait(
                &w.epoll,
                rustix::buffer::spare_capacity(&mut events),
                Some(&POLL_TIMEOUT),
            ) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => return Err(e).context("epoll_wait"),
            }
            for ev in &events {
                let (token, flags) = (ev.data.u64(), ev.flags);
                if token == LISTENER {
                    w.accept_all();
                } else {
                    w.on_event((token >> 1) as usize, (token & 1) as usize, flags);
                }
            }
        }
        Ok(())
    }
}

/// Runs the proxy floor until killed (or until the event loop fails).
pub fn run(cfg: &RelayConfig) -> anyhow::Result<()> {
    let relay = Relay::bind(cfg)?;
    tracing::info!(
        "proxy floor: listening on {}, relaying to {}",
        relay.local_addr(),
        cfg.upstream
    );
    relay.serve(&AtomicBool::new(false))
}

/// One side of a pair: its socket and the bytes waiting to be written to it.
struct Side {
    fd: OwnedFd,
    pending: Vec<u8>,
    sent: usize,
    /// This side has sent its FIN: it is not read again.
    ended: bool,
    /// Its partner's end was passed on (shutdown for writing): nothing more goes to it.
    shut: bool,
}

impl Side {
    fn new(fd: OwnedFd) -> Side {
        Side {
            fd,
            pending: Vec::new(),
            sent: 0,
            ended: false,
            shut: false,
        }
    }

    /// Read to its end and written to its end: only its partner is still at work.
    fn finished(&self) -> bool {
        self.ended && self.shut
    }
}

/// A client (side 0) and its upstream connection (side 1); `side ^ 1` is a side's partner.
type Pair = [Side; 2];

struct Worker {
    epoll: OwnedFd,
    listener: Socket,
    upstream: SocketAddr,
    /// Pair slab, indexed by `token >> 1`.
    pairs: Vec<Option<Pair>>,
    free: Vec<usize>,
    rbuf: Vec<u8>,
}

impl Worker {
    fn accept_all(&mut self) {
        loop {
            let client = match rustix::net::accept_with(
                &self.listener,
                SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            ) {
                Ok(fd) => fd,
                Err(Errno::INTR | Errno::CONNABORTED) => continue,
                Err(Errno::AGAIN) => return,
                Err(e) => {
                    tracing::warn!("proxy floor: accept: {e}");
                    return;
                }
            };
            // A blocking connect: on loopback it completes at once, and it is paid per client,
            // never per request.
            let upstream = match std::net::TcpStream::connect(self.upstream)
                .and_then(|s| s.set_nonblocking(true).map(|()| s))
            {
                Ok(s) => OwnedFd::from(s),
                Err(e) => {
                    tracing::warn!("proxy floor: connect {}: {e}", self.upstream);
                    continue;
                }
            };
            for fd in [&client, &upstream] {
                if let Err(e) = rustix::net::sockopt::set_tcp_nodelay(fd, true) {
                    tracing::warn!("proxy floor: TCP_NODELAY: {e}");
                }
            }
            let idx = self.free.pop().unwrap_or_else(|| {
                self.pairs.push(None);
                self.pairs.len() - 1
            });
            let pair: Pair = [Side::new(client), Side::new(upstream)];
            let added = pair.iter().enumerate().try_for_each(|(side, s)| {
                epoll::add(
                    &self.epoll,
                    &s.fd,
                    epoll::EventData::new_u64(token(idx, side)),
                    epoll::EventFlags::IN,
                )
            });
            if let Err(e) = added {
                tracing::warn!("proxy floor: epoll_ctl(add): {e}");
                self.free.push(idx);
                continue;
            }
            self.pairs[idx] = Some(pair);
        }
    }

    fn on_event(&mut self, idx: usize, side: usize, flags: epoll::EventFlags) {
        let Some(pair) = self.pairs.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        let state = |p: &Pair| {
            [
                p[0].pending.is_empty(),
                p[1].pending.is_empty(),
                p[0].ended,
                p[1].ended,
            ]
        };
        let before = state(pair);
        let mut ok = !flags.contains(epoll::EventFlags::ERR);
        if ok && flags.contains(epoll::EventFlags::OUT) {
            ok = flush(pair, side);
        }
        let hup = flags.contains(epoll::EventFlags::HUP);
        // Read only while the partner has nothing waiting: that is the backpressure. A hang-up
        // cannot be masked, so what a hung-up side still holds is taken at once (no more can
        // come, so that is bounded by its receive buffer).
        if ok
            && !pair[side].ended
            && pair[side ^ 1].pending.is_empty()
            && (flags.contains(epoll::EventFlags::IN) || hup)
        {
            ok = relay(pair, side, &mut self.rbuf);
        }
        // `relay` stops when the partner cannot take more; after a hang-up the rest is taken
        // now, or the pair would be closed below with it unread (the echo test lost half its
        // bytes that way when the client's buffer filled just as the upstream hung up).
        if ok && hup && !pair[side].ended {
            ok = take_rest(pair, side, &mut self.rbuf);
        }
        // A hang-up is reported whatever the interest: it is the normal end of a finished side
        // (which then leaves the epoll set), otherwise a reset that ends the pair.
        if hup && ok {
            ok = pair[side].finished();
        }
        let done = pair[0].ended && pair[1].ended && state(pair)[..2] == [true, true];
        // epoll_ctl calls only when a side starts or stops waiting or ends: never per request.
        if !ok || done || ((hup || state(pair) != before) && !self.interest(idx)) {
            self.close(idx);
        }
    }

    /// Sets each side's epoll interest from the pair's state: OUT while bytes wait to be
    /// written to it, IN while its partner has none waiting. False if epoll refused.
    fn interest(&self, idx: usize) -> bool {
        let Some(pair) = self.pairs[idx].as_ref() else {
            return true;
        };
        (0..2).all(|side| {
            if pair[side].finished() {
                // Not an error if it already left.
                let _ = epoll::delete(&self.epoll, &pair[side].fd);
                return true;
            }
            let mut f = epoll::EventFlags::empty();
            if !pair[side].pending.is_empty() {
                f |= epoll::EventFlags::OUT;
            }
            if pair[side ^ 1].pending.is_empty() && !pair[side].ended {
                f |= epoll::EventFlags::IN;
            }
            epoll::modify(
                &self.epoll,
                &pair[side].fd,
                epoll::EventData::new_u64(token(idx, side)),
                f,
            )
            .is_ok()
        })
    }

    fn close(&mut self, idx: usize) {
        // Dropping both fds closes them and removes them from the epoll set.
        if self.pairs[idx].take().is_some() {
            self.free.push(idx);
        }
    }
}

fn token(idx: usize, side: usize) -> u64 {
    (idx as u64) << 1 | side as u64
}

/// Reads what `side` has (one `recv`, more only while each fills the buffer) and sends it to
/// the partner; what the partner does not take waits in its `pending`. An end is passed on to
/// the partner as a half-close once nothing waits for it. False when the pair must close (an
/// error).
fn relay(pair: &mut Pair, side: usize, rbuf: &mut [u8]) -> bool {
    loop {
        let n = match rustix::net::recv(&pair[side].fd, &mut *rbuf, RecvFlags::empty()) {
            Ok((_, 0)) => {
                pair[side].ended = true;
                return pass_end(pair, side);
            }
            Ok((_, n)) => n,
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return true,
            Err(_) => return false,
        };
        let to = &mut pair[side ^ 1];
        let sent = match send_all(&to.fd, &rbuf[..n]) {
            Some(sent) => sent,
            None => return false,
        };
        if sent < n {
            to.pending.extend_from_slice(&rbuf[sent..n]);
            to.sent = 0;
            return true;
        }
        if n < rbuf.len() {
            return true;
        }
    }
}

/// Reads all a hung-up side still holds into its partner's `pending`, to its end. False on an
/// error.
fn take_rest(pair: &mut Pair, side: usize, rbuf: &mut [u8]) -> bool {
    loop {
        match rustix::net::recv(&pair[side].fd, &mut *rbuf, RecvFlags::empty()) {
            Ok((_, 0)) => {
                pair[side].ended = true;
                return true;
            }
            Ok((_, n)) => pair[side ^ 1].pending.extend_from_slice(&rbuf[..n]),
            Err(Errno::INTR) => {}
            Err(_) => return false,
        }
    }
}

/// Half-closes `from`'s partner once `from` has ended and all it sent has been written.
fn pass_end(pair: &mut Pair, from: usize) -> bool {
    let to = &pair[from ^ 1];
    if !pair[from].ended || !to.pending.is_empty() {
        return true;
    }
    let ok = rustix::net::shutdown(&to.fd, rustix::net::Shutdown::Write).is_ok();
    pair[from ^ 1].shut = true;
    ok
}

/// Sends as much of `bytes` as the socket takes now; `None` on an error.
fn send_all(fd: &OwnedFd, bytes: &[u8]) -> Option<usize> {
    let mut sent = 0;
    while sent < bytes.len() {
        match rustix::net::send(fd, &bytes[sent..], SendFlags::NOSIGNAL) {
            Ok(n) => sent += n,
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) => break,
            Err(_) => return None,
        }
    }
    Some(sent)
}

/// Writes what waits for `side`, then passes on its partner's end if that was all. False on an
/// error.
fn flush(pair: &mut Pair, side: usize) -> bool {
    let to = &mut pair[side];
    let Some(n) = send_all(&to.fd, &to.pending[to.sent..]) else {
        return false;
    };
    to.sent += n;
    if to.sent < to.pending.len() {
        return true;
    }
    to.pending.clear();
    to.sent = 0;
    pass_end(pair, side ^ 1)
}
