//! The epoll backend: the [`Backend`] contract over level-triggered readiness.
//!
//! Owns the sockets and the syscalls on them. A send is tried at once and completes inline
//! when the socket takes every byte (the common case: one `send` per batch of answers); what
//! does not fit waits here, with its buffer, for `EPOLLOUT`. Receiving is armed by
//! registering `EPOLLIN`; each readiness report becomes one `recv` into the single scratch
//! buffer, lent to the worker as the `Received` completion — the worker holds no per-socket
//! read buffer. A short read means the socket is drained: level-triggered epoll reports it
//! again otherwise, so there is no second `recv` just to see EAGAIN.
#![forbid(unsafe_code)]

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use rustix::buffer::spare_capacity;
use rustix::event::{Timespec, epoll};
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendFlags, Shutdown, SocketFlags};

use super::backend::{Backend, Completion, Submitted, Token, UpAddr};
use super::sockops;

/// Bytes read from a socket at once (the scratch buffer lent by `Received`).
pub(crate) const RECV_BUF: usize = 64 * 1024;
/// Most events taken from the kernel per wait.
const EVENTS_PER_WAIT: usize = 256;
/// Connections accepted per listener event before other events get a turn.
const ACCEPTS_PER_EVENT: usize = 64;
/// Tokens at and above this are the backend's (listeners) or the worker's own (eventfds);
/// connection tokens stay below (their generation never reaches `u32::MAX`).
pub(crate) const RESERVED: Token = 0xffff_ffff_0000_0000;
/// Listener `i` is registered as `LISTENER + i`.
const LISTENER: Token = RESERVED | 0x1_0000;

/// A send or sendfile waiting for the socket to take more.
enum Op {
    Send {
        buf: Vec<u8>,
        pos: usize,
        flags: SendFlags,
    },
    File {
        file: Arc<OwnedFd>,
        offset: u64,
        len: u64,
    },
    /// A connect under way: writable means it finished (`SO_ERROR` says how).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    Connect,
}

/// One attached socket (24 bytes: every idle connection has one).
struct Sock {
    fd: Option<OwnedFd>,
    /// The interest registered with epoll; `IN` means receiving is armed.
    registered: epoll::EventFlags,
    token: Token,
    op: Option<Box<Op>>,
}

impl Sock {
    fn receiving(&self) -> bool {
        self.registered.contains(epoll::EventFlags::IN)
    }
}

struct Listener {
    sock: OwnedFd,
    registered: bool,
}

pub(crate) struct Epoll {
    ep: OwnedFd,
    raw: Vec<epoll::Event>,
    /// The next event of `raw` to turn into completions.
    at: usize,
    /// Whether the writable half of event `at` has been handled.
    out_done: bool,
    /// Connections accepted from event `at` so far.
    accepted: usize,
    socks: Vec<Sock>,
    listeners: Vec<Listener>,
    /// Watched descriptors: the fd, its token, and whether it is an eventfd to read.
    watched: Vec<(OwnedFd, Token, bool)>,
    scratch: Vec<u8>,
    /// Per socket slot: its receive side is kernel TLS, so it is read with `recvmsg` and the
    /// record type (kept apart from [`Sock`], which every idle connection pays for).
    records: Vec<bool>,
}

impl Epoll {
    pub(crate) fn new() -> io::Result<Epoll> {
        Ok(Epoll {
            ep: epoll::create(epoll::CreateFlags::CLOEXEC)?,
            raw: Vec::with_capacity(EVENTS_PER_WAIT),
            at: 0,
            out_done: false,
            accepted: 0,
            socks: Vec::new(),
            listeners: Vec::new(),
            watched: Vec::new(),
            scratch: Vec::with_capacity(RECV_BUF),
            records: Vec::new(),
        })
    }

    /// Registers the interest the socket's state asks for (`recv`: receiving armed), when it
    /// changed.
    fn update(ep: &OwnedFd, s: &mut Sock, recv: bool) -> bool {
        let mut want = epoll::EventFlags::empty();
        if recv {
            want |= epoll::EventFlags::IN | epoll::EventFlags::RDHUP;
        }
        if s.op.is_some() {
            want |= epoll::EventFlags::OUT;
        }
        if want == s.registered {
            return true;
        }
        let Some(fd) = &s.fd else { return false };
        let ok = epoll::modify(ep, fd, epoll::EventData::new_u64(s.token), want).is_ok();
        if ok {
            s.registered = want;
        }
        ok
    }

    fn accept_one(&mut self, id: usize) -> Option<Completion> {
        loop {
            let l = self.listeners.get(id)?;
            if !l.registered {
                return None;
            }
            return match rustix::net::acceptfrom_with(
                &l.sock,
                SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            ) {
                Ok((sock, addr)) => Some(Completion::Accepted {
                    listener: id,
                    sock,
                    peer: addr.and_then(|a| SocketAddr::try_from(a).ok()),
                }),
                Err(Errno::AGAIN) => None,
                Err(Errno::INTR | Errno::CONNABORTED) => continue,
                Err(e @ (Errno::MFILE | Errno::NFILE | Errno::NOBUFS | Errno::NOMEM)) => {
                    for l in &mut self.listeners {
                        if l.registered && epoll::delete(&self.ep, &l.sock).is_ok() {
                            l.registered = false;
                        }
                    }
                    Some(Completion::AcceptPaused(e.into()))
                }
                Err(e) => {
                    tracing::error!(error = %e, "accept failed");
                    None
                }
            };
        }
    }

    /// A watched fd's event (`data`, its token): its count read when it is an eventfd.
    #[cold]
    fn notified(&self, data: u64) -> Option<Completion> {
        let (fd, token, counter) = self.watched.iter().find(|w| w.1 == data)?;
        if *counter {
            let _ = rustix::io::read(fd, &mut [0u8; 8]);
        }
        Some(Completion::Notified { token: *token })
    }

    /// Receives into the scratch buffer for `s` (`records`: its receive side is kernel TLS).
    #[inline(always)]
    fn recv(scratch: &mut Vec<u8>, s: &Sock, records: bool) -> Option<Completion> {
        let fd = s.fd.as_ref()?;
        let mut buf = std::mem::take(scratch);
        buf.clear();
        if buf.capacity() < RECV_BUF {
            buf.reserve(RECV_BUF);
        }
        if records {
            return Self::recv_record(scratch, s.token, fd, buf);
        }
        match rustix::net::recv(fd, spare_capacity(&mut buf), RecvFlags::empty()) {
            Ok((0, _)) => {
                *scratch = buf;
                Some(Completion::Eof { token: s.token })
            }
            Ok(_) => Some(Completion::Received {
                token: s.token,
                buf,
            }),
            Err(Errno::AGAIN | Errno::INTR) => {
                *scratch = buf;
                None
            }
            Err(_) => {
                *scratch = buf;
                Some(Completion::Failed { token: s.token })
            }
        }
    }

    /// One read from a kernel-TLS socket (`sockops::read_record`), the scratch buffer kept
    /// where it was not lent.
    #[cold]
    fn recv_record(
        scratch: &mut Vec<u8>,
        token: Token,
        fd: &OwnedFd,
        buf: Vec<u8>,
    ) -> Option<Completion> {
        match sockops::read_record(token, fd, buf) {
            Ok(c) => Some(c),
            Err((c, buf)) => {
                *scratch = buf;
                c
            }
        }
    }

    /// Moves the socket's waiting operation on; `Some` when it finished (or failed).
    fn progress(ep: &OwnedFd, s: &mut Sock) -> Option<Completion> {
        let token = s.token;
        let fd = s.fd.as_ref()?;
        let done = match s.op.as_deref_mut()? {
            Op::Connect => {
                let ok = matches!(rustix::net::sockopt::socket_error(fd), Ok(Ok(())));
                s.op = None;
                Self::update(ep, s, s.receiving());
                return Some(if ok {
                    Completion::Connected { token }
                } else {
                    Completion::Failed { token }
                });
            }
            Op::Send { buf, pos, flags } => loop {
                match rustix::net::send(fd, &buf[*pos..], *flags) {
                    Ok(n) => {
                        *pos += n;
                        if *pos == buf.len() {
                            break true;
                        }
                    }
                    Err(Errno::INTR) => {}
                    Err(Errno::AGAIN) => return None,
                    Err(_) => break false,
                }
            },
            Op::File { file, offset, len } => match sockops::sendfile(fd, file, *offset, *len) {
                Ok(0) => false,
                Ok(n) => {
                    let op = s.op.take();
                    Self::update(ep, s, s.receiving());
                    drop(op);
                    return Some(Completion::FileSent { token, n: n as u64 });
                }
                Err(Errno::AGAIN) => return None,
                Err(_) => false,
            },
        };
        let op = s.op.take();
        Self::update(ep, s, s.receiving());
        match (done, op.map(|o| *o)) {
            (true, Some(Op::Send { buf, .. })) => Some(Completion::Sent { token, buf }),
            _ => Some(Completion::Failed { token }),
        }
    }
}

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as i64,
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}

impl Backend for Epoll {
    fn listen(&mut self, listener: OwnedFd, id: usize) -> io::Result<()> {
        epoll::add(
            &self.ep,
            &listener,
            epoll::EventData::new_u64(LISTENER + id as u64),
            epoll::EventFlags::IN,
        )?;
        // Ids are handed out in order from 0 (the server's listeners, in configuration order).
        debug_assert_eq!(id, self.listeners.len());
        self.listeners.push(Listener {
            sock: listener,
            registered: true,
        });
        Ok(())
    }

    fn accept_now(&mut self, id: usize) -> Option<(OwnedFd, Option<SocketAddr>)> {
        sockops::accept_now(&self.listeners.get(id)?.sock)
    }

    fn close_listeners(&mut self) {
        for l in self.listeners.drain(..) {
            if l.registered {
                let _ = epoll::delete(&self.ep, &l.sock);
            }
        }
    }

    fn resume_accepting(&mut self) {
        for (id, l) in self.listeners.iter_mut().enumerate() {
            if !l.registered
                && epoll::add(
                    &self.ep,
                    &l.sock,
                    epoll::EventData::new_u64(LISTENER + id as u64),
                    epoll::EventFlags::IN,
                )
                .is_ok()
            {
                l.registered = true;
            }
        }
    }

    fn watch(&mut self, fd: OwnedFd, token: Token, counter: bool) -> io::Result<()> {
        epoll::add(
            &self.ep,
            &fd,
            epoll::EventData::new_u64(token),
            epoll::EventFlags::IN,
        )?;
        self.watched.push((fd, token, counter));
        Ok(())
    }

    fn attach(&mut self, sock: OwnedFd, token: Token, recv: bool) -> io::Result<()> {
        let interest = if recv {
            epoll::EventFlags::IN | epoll::EventFlags::RDHUP
        } else {
            epoll::EventFlags::empty()
        };
        epoll::add(&self.ep, &sock, epoll::EventData::new_u64(token), interest)?;
        let idx = (token & 0xffff_ffff) as usize;
        if self.socks.len() <= idx {
            self.socks.resize_with(idx + 1, || Sock {
                fd: None,
                registered: epoll::EventFlags::empty(),
                token: 0,
                op: None,
            });
        }
        if self.records.len() <= idx {
            self.records.resize(idx + 1, false);
        }
        self.records[idx] = false;
        self.socks[idx] = Sock {
            fd: Some(sock),
            registered: interest,
            token,
            op: None,
        };
        Ok(())
    }

    fn connect(&mut self, addr: &UpAddr, token: Token) -> Submitted<()> {
        let Some((sock, pending)) = sockops::connect(addr) else {
            return Submitted::Failed;
        };
        if self.attach(sock, token, false).is_err() {
            return Submitted::Failed;
        }
        if !pending {
            return Submitted::Done(());
        }
        let ep = &self.ep;
        let s = &mut self.socks[(token & 0xffff_ffff) as usize];
        s.op = Some(Box::new(Op::Connect));
        if !Self::update(ep, s, false) {
            return Submitted::Failed;
        }
        Submitted::Pending
    }

    fn detach(&mut self, token: Token) {
        let ep = &self.ep;
        if let Some(s) = self.socks.get_mut((token & 0xffff_ffff) as usize)
            && s.token == token
            && let Some(fd) = s.fd.take()
        {
            let _ = epoll::delete(ep, &fd);
            s.op = None;
            s.registered = epoll::EventFlags::empty();
        }
    }

    fn fd(&self, token: Token) -> Option<BorrowedFd<'_>> {
        let s = self.socks.get((token & 0xffff_ffff) as usize)?;
        if s.token != token {
            return None;
        }
        s.fd.as_ref().map(|f| f.as_fd())
    }

    #[inline]
    fn set_recv(&mut self, token: Token, on: bool) {
        let ep = &self.ep;
        let Some(s) = self.socks.get_mut((token & 0xffff_ffff) as usize) else {
            return;
        };
        if s.token != token || s.receiving() == on {
            return;
        }
        Self::update(ep, s, on);
    }

    fn recv_now(&mut self, token: Token) -> Option<Completion> {
        let idx = (token & 0xffff_ffff) as usize;
        let s = self.socks.get(idx)?;
        if s.token != token {
            return None;
        }
        Self::recv(&mut self.scratch, s, self.records[idx])
    }

    fn read_records(&mut self, token: Token) {
        let idx = (token & 0xffff_ffff) as usize;
        if self.socks.get(idx).is_some_and(|s| s.token == token) {
            self.records[idx] = true;
        }
    }

    #[inline(always)]
    fn send(&mut self, token: Token, buf: Vec<u8>, more: bool) -> Submitted<Vec<u8>> {
        let ep = &self.ep;
        let Some(s) = self.socks.get_mut((token & 0xffff_ffff) as usize) else {
            return Submitted::Failed;
        };
        let Some(fd) = s.fd.as_ref().filter(|_| s.token == token && s.op.is_none()) else {
            return Submitted::Failed;
        };
        let flags = if more {
            SendFlags::NOSIGNAL | SendFlags::MORE
        } else {
            SendFlags::NOSIGNAL
        };
        let mut pos = 0;
        while pos < buf.len() {
            match rustix::net::send(fd, &buf[pos..], flags) {
                Ok(n) => pos += n,
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => {
                    s.op = Some(Box::new(Op::Send { buf, pos, flags }));
                    if !Self::update(ep, s, s.receiving()) {
                        return Submitted::Failed;
                    }
                    return Submitted::Pending;
                }
                Err(_) => return Submitted::Failed,
            }
        }
        Submitted::Done(buf)
    }

    fn sendfile(
        &mut self,
        token: Token,
        file: &Arc<OwnedFd>,
        offset: u64,
        len: u64,
    ) -> Submitted<u64> {
        let ep = &self.ep;
        let Some(s) = self.socks.get_mut((token & 0xffff_ffff) as usize) else {
            return Submitted::Failed;
        };
        let Some(fd) = s.fd.as_ref().filter(|_| s.token == token && s.op.is_none()) else {
            return Submitted::Failed;
        };
        match sockops::sendfile(fd, file, offset, len) {
            // The file shrank: the promised Content-Length can no longer be met.
            Ok(0) => Submitted::Failed,
            Ok(n) => Submitted::Done(n as u64),
            Err(Errno::AGAIN) => {
                s.op = Some(Box::new(Op::File {
                    file: file.clone(),
                    offset,
                    len,
                }));
                if !Self::update(ep, s, s.receiving()) {
                    return Submitted::Failed;
                }
                Submitted::Pending
            }
            Err(_) => Submitted::Failed,
        }
    }

    fn shutdown_write(&mut self, token: Token) -> io::Result<()> {
        let fd = self
            .fd(token)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))?;
        Ok(rustix::net::shutdown(fd, Shutdown::Write)?)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.raw.clear();
        self.at = 0;
        self.out_done = false;
        self.accepted = 0;
        let ts = timeout.map(timespec);
        match epoll::wait(&self.ep, spare_capacity(&mut self.raw), ts.as_ref()) {
            Ok(_) | Err(Errno::INTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn found(&self) -> bool {
        !self.raw.is_empty()
    }

    fn poll_fd(&self) -> BorrowedFd<'_> {
        self.ep.as_fd()
    }

    #[inline(always)]
    fn next(&mut self) -> Option<Completion> {
        while self.at < self.raw.len() {
            let ev = self.raw[self.at];
            let data = ev.data.u64();
            let flags = ev.flags;
            if data >= RESERVED {
                if data >= LISTENER {
                    let id = (data - LISTENER) as usize;
                    if self.accepted < ACCEPTS_PER_EVENT
                        && let Some(c) = self.accept_one(id)
                    {
                        self.accepted += 1;
                        return Some(c);
                    }
                    self.at += 1;
                    self.accepted = 0;
                    continue;
                }
                self.at += 1;
                if let Some(c) = self.notified(data) {
                    return Some(c);
                }
                continue;
            }
            let idx = (data & 0xffff_ffff) as usize;
            let ep = &self.ep;
            let Some(s) = self
                .socks
                .get_mut(idx)
                .filter(|s| s.token == data && s.fd.is_some())
            else {
                self.at += 1;
                self.out_done = false;
                continue;
            };
            let broken = flags.intersects(epoll::EventFlags::ERR | epoll::EventFlags::HUP);
            if !self.out_done {
                self.out_done = true;
                if s.op.is_some()
                    && (flags.contains(epoll::EventFlags::OUT) || broken)
                    && let Some(c) = Self::progress(ep, s)
                {
                    return Some(c);
                }
            }
            self.at += 1;
            self.out_done = false;
            if s.receiving()
                && (broken || flags.intersects(epoll::EventFlags::IN | epoll::EventFlags::RDHUP))
            {
                let records = self.records[(s.token & 0xffff_ffff) as usize];
                if let Some(c) = Self::recv(&mut self.scratch, s, records) {
                    return Some(c);
                }
            } else if broken && s.op.is_none() {
                // Reset while nothing was asked of it: the connection is gone (level-triggered
                // epoll would report it again and again otherwise).
                return Some(Completion::Failed { token: s.token });
            }
        }
        None
    }

    #[inline]
    fn recycle(&mut self, buf: Vec<u8>) {
        if self.scratch.capacity() == 0 {
            self.scratch = buf;
        }
    }
}
