//! The io_uring backend: the [`Backend`] contract over completions, chosen with `serve
//! --io uring` (the epoll backend is the default).
//!
//! Where epoll costs a `recv` and a `send` per request on top of the wait, here a worker's
//! turn is one `io_uring_enter`: it submits every send the turn queued and every receive it
//! re-armed, and waits for the next completions. What it owns:
//! - **Receiving**: one receive in flight per connection while receiving is on, into a
//!   pooled buffer of [`RECV_BUF`] bytes that the `Received` completion lends; re-armed at the
//!   next wait. Turning receiving off does not cancel it: a completion that arrives while it
//!   is off is held and delivered when it is turned on again (the contract's backpressure).
//! - **Sending**: a send is always `Pending`: queued, handed to the kernel by the next wait,
//!   completed as `Sent` (a short send is queued again for the rest). A write shutdown asked
//!   for while a send is in flight waits for it (the FIN after every byte).
//! - **Accepting**: a multishot accept per listener; the peer's address from `getpeername`.
//! - **The rest**, rare, as the epoll backend does it, waiting on a one-shot poll where it
//!   would block: sendfile, connect, and the receive side of kernel TLS (its reads need the
//!   record type, so a readable poll is followed by a `recvmsg`).
//! - **Closing** cancels the socket's operations with the next submission and closes its
//!   descriptor after it, so none holds the socket open and no number is reused before;
//!   their completions come back with their buffers and are dropped.
//!
//! The ring and the ownership of buffers the kernel uses are `crate::sys::Ring`'s (the
//! crate's one `unsafe` module); this file has none.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use rustix::buffer::spare_capacity;
use rustix::io::Errno;
use rustix::net::{RecvFlags, Shutdown};

use super::backend::{Backend, Completion, Submitted, Token, UpAddr};
use super::sockops;
use crate::sys::{Cqe, Ring};

/// Bytes one receive may read (each armed connection holds a buffer this size).
pub(crate) const RECV_BUF: usize = 16 * 1024;
/// Submission queue slots (the completion queue has four times as many).
const RING_ENTRIES: u32 = 1024;
/// Receive buffers kept for reuse.
const POOLED: usize = 256;

// Operation kinds (`Ring::ACCEPT` is 1).
const RECV: u8 = 2;
const SEND: u8 = 3;
const WATCH: u8 = 4;
/// A one-shot poll for writability (sendfile, connect).
const POLL_OUT: u8 = 5;
/// A one-shot poll for readability (a kernel-TLS receive side).
const POLL_IN: u8 = 6;
const CANCEL: u8 = 7;

/// An operation waiting for the socket to take more (after a poll for writability).
enum Wait {
    File {
        file: Arc<OwnedFd>,
        offset: u64,
        len: u64,
    },
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    Connect,
}

#[derive(Default)]
struct Sock {
    fd: Option<OwnedFd>,
    token: Token,
    /// The worker wants bytes.
    recv_on: bool,
    /// A receive (or, for kernel TLS, a readable poll) is in flight.
    recv_armed: bool,
    /// A receive's completion that came while receiving was off.
    held: Option<Completion>,
    /// A send is in flight: how much of its buffer is sent, and its flags.
    sending: Option<(usize, i32)>,
    /// Shut the write side down once the send in flight completes.
    shut_after_send: bool,
    wait: Option<Box<Wait>>,
    /// The receive side is kernel TLS: read with the record type.
    records: bool,
}

struct Listener {
    sock: OwnedFd,
    armed: bool,
}

pub(crate) struct Uring {
    ring: Ring,
    cqes: Vec<Cqe>,
    at: usize,
    /// Completions made here rather than read from the ring (held receives let go).
    ready: VecDeque<Completion>,
    socks: Vec<Sock>,
    listeners: Vec<Listener>,
    /// Accepting stopped for want of resources, until `resume_accepting`.
    paused: bool,
    watched: Vec<(OwnedFd, Token, bool)>,
    pool: Vec<Vec<u8>>,
    /// Sockets whose receive is to be armed at the next wait.
    to_arm: Vec<u32>,
    /// Watched descriptors (not eventfds) to poll again at the next wait.
    rewatch: Vec<usize>,
    /// Descriptors closed once the next wait has submitted the cancellation of their
    /// operations (closed before, a number could be reused by a new socket first).
    closing: Vec<OwnedFd>,
}

fn slot(token: Token) -> usize {
    (token & 0xffff_ffff) as usize
}

/// The socket `token` names, while it is open.
fn open(socks: &mut [Sock], token: Token) -> Option<&mut Sock> {
    socks
        .get_mut(slot(token))
        .filter(|s| s.token == token && s.fd.is_some())
}

impl Uring {
    pub(crate) fn new() -> io::Result<Uring> {
        Ok(Uring {
            ring: Ring::new(RING_ENTRIES)?,
            cqes: Vec::with_capacity(RING_ENTRIES as usize),
            at: 0,
            ready: VecDeque::new(),
            socks: Vec::new(),
            listeners: Vec::new(),
            paused: false,
            watched: Vec::new(),
            pool: Vec::new(),
            to_arm: Vec::new(),
            rewatch: Vec::new(),
            closing: Vec::new(),
        })
    }

    fn sock(&mut self, token: Token) -> Option<&mut Sock> {
        open(&mut self.socks, token)
    }

    fn buffer(&mut self) -> Vec<u8> {
        self.pool
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(RECV_BUF))
    }

    /// Arms the receives the turn asked for.
    fn arm(&mut self) {
        for idx in std::mem::take(&mut self.to_arm) {
            let Some(s) = self.socks.get(idx as usize) else {
                continue;
            };
            if !s.recv_on || s.recv_armed || s.held.is_some() {
                continue;
            }
            let Some(fd) = s.fd.as_ref() else { continue };
            let token = s.token;
            if s.records {
                self.ring
                    .poll(fd.as_fd(), libc::POLLIN as u32, false, token, POLL_IN);
            } else {
                let buf = self
                    .pool
                    .pop()
                    .unwrap_or_else(|| Vec::with_capacity(RECV_BUF));
                let fd = self.socks[idx as usize].fd.as_ref().map(|f| f.as_fd());
                if let Some(fd) = fd {
                    self.ring.recv(fd, buf, token, RECV);
                }
            }
            self.socks[idx as usize].recv_armed = true;
        }
    }

    fn arm_accept(&mut self, id: usize) {
        if let Some(l) = self.listeners.get_mut(id)
            && !l.armed
        {
            l.armed = true;
            let fd = l.sock.as_fd();
            self.ring.accept(fd, id as u64);
        }
    }

    fn give(&mut self, mut buf: Vec<u8>) {
        if self.pool.len() < POOLED && buf.capacity() >= RECV_BUF {
            buf.clear();
            self.pool.push(buf);
        }
    }

    /// One completion of the ring, as the contract's completion (`None`: nothing for the
    /// worker).
    fn translate(&mut self, c: Cqe) -> Option<Completion> {
        match c.kind {
            Ring::ACCEPT => self.accepted(c),
            RECV => {
                let token = c.tag;
                let mut buf = c.buf;
                let Some(s) = open(&mut self.socks, token) else {
                    if let Some(b) = buf {
                        self.give(b);
                    }
                    return None;
                };
                s.recv_armed = false;
                let done = match c.res {
                    n if n > 0 => {
                        // Receiving stays armed: the next receive goes in with the next wait.
                        self.to_arm.push(slot(token) as u32);
                        Completion::Received {
                            token,
                            buf: buf.take().unwrap_or_default(),
                        }
                    }
                    0 => Completion::Eof { token },
                    e if e == -libc::ECANCELED => {
                        self.to_arm.push(slot(token) as u32);
                        if let Some(b) = buf {
                            self.give(b);
                        }
                        return None;
                    }
                    _ => Completion::Failed { token },
                };
                let on = s.recv_on;
                let out = if on {
                    Some(done)
                } else {
                    s.held = Some(done);
                    None
                };
                if let Some(b) = buf {
                    self.give(b);
                }
                out
            }
            SEND => {
                let token = c.tag;
                let buf = c.buf.unwrap_or_default();
                let s = open(&mut self.socks, token)?;
                let (from, flags) = s.sending?;
                let fd = s.fd.as_ref()?.as_fd();
                if c.res <= 0 {
                    if c.res == -libc::EINTR || c.res == -libc::EAGAIN {
                        self.ring.send(fd, buf, from, flags, token, SEND);
                        return None;
                    }
                    s.sending = None;
                    return Some(Completion::Failed { token });
                }
                let from = from + c.res as usize;
                if from < buf.len() {
                    s.sending = Some((from, flags));
                    self.ring.send(fd, buf, from, flags, token, SEND);
                    return None;
                }
                s.sending = None;
                if std::mem::take(&mut s.shut_after_send) {
                    let _ = rustix::net::shutdown(fd, Shutdown::Write);
                }
                Some(Completion::Sent { token, buf })
            }
            WATCH => {
                let (fd, token, counter) = self.watched.get(c.tag as usize)?;
                let token = *token;
                if *counter {
                    let _ = rustix::io::read(fd, &mut [0u8; 8]);
                    if !c.more {
                        self.ring
                            .poll(fd.as_fd(), libc::POLLIN as u32, true, c.tag, WATCH);
                    }
                } else {
                    // Its owner may leave it readable (a budget): polled again, once, at the
                    // next wait, as level-triggered epoll would report it again.
                    self.rewatch.push(c.tag as usize);
                }
                Some(Completion::Notified { token })
            }
            POLL_OUT => {
                let s = open(&mut self.socks, c.tag)?;
                Self::progress(&mut self.ring, s)
            }
            POLL_IN => {
                let token = c.tag;
                let s = self.sock(token)?;
                s.recv_armed = false;
                let got = Self::recv_inline(s, Vec::with_capacity(RECV_BUF));
                let on = s.recv_on;
                match got {
                    None => {
                        if on {
                            self.to_arm.push(slot(token) as u32);
                        }
                        None
                    }
                    Some(done) if !on => {
                        s.held = Some(done);
                        None
                    }
                    Some(done) => Some(done),
                }
            }
            _ => None,
        }
    }

    fn accepted(&mut self, c: Cqe) -> Option<Completion> {
        let id = c.tag as usize;
        if !c.more
            && let Some(l) = self.listeners.get_mut(id)
        {
            l.armed = false;
        }
        if let Some(sock) = c.fd {
            if !c.more && !self.paused {
                self.arm_accept(id);
            }
            let peer = rustix::net::getpeername(&sock)
                .ok()
                .flatten()
                .and_then(|a| SocketAddr::try_from(a).ok());
            return Some(Completion::Accepted {
                listener: id,
                sock,
                peer,
            });
        }
        match -c.res {
            e @ (libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
                self.paused = true;
                for l in &self.listeners {
                    if l.armed {
                        self.ring.cancel_fd(l.sock.as_fd(), 0, CANCEL);
                    }
                }
                Some(Completion::AcceptPaused(io::Error::from_raw_os_error(e)))
            }
            libc::ECANCELED => None,
            e => {
                if e != libc::EINTR && e != libc::ECONNABORTED && e != libc::EAGAIN {
                    tracing::error!(error = %io::Error::from_raw_os_error(e), "accept failed");
                }
                if !self.paused {
                    self.arm_accept(id);
                }
                None
            }
        }
    }

    /// One read now (kernel TLS, or the drain on shutdown); `None` when nothing is there.
    fn recv_inline(s: &Sock, mut buf: Vec<u8>) -> Option<Completion> {
        let token = s.token;
        let fd = s.fd.as_ref()?;
        if s.records {
            return sockops::read_record(token, fd, buf).map_or_else(|(c, _)| c, Some);
        }
        match rustix::net::recv(fd, spare_capacity(&mut buf), RecvFlags::empty()) {
            Ok((0, _)) => Some(Completion::Eof { token }),
            Ok(_) => Some(Completion::Received { token, buf }),
            Err(Errno::AGAIN | Errno::INTR) => None,
            Err(_) => Some(Completion::Failed { token }),
        }
    }

    /// Moves a waiting sendfile or connect on after its poll; `Some` when it finished.
    fn progress(ring: &mut Ring, s: &mut Sock) -> Option<Completion> {
        let token = s.token;
        let fd = s.fd.as_ref()?;
        let done = match s.wait.as_deref()? {
            Wait::Connect => {
                let ok = matches!(rustix::net::sockopt::socket_error(fd), Ok(Ok(())));
                s.wait = None;
                return Some(if ok {
                    Completion::Connected { token }
                } else {
                    Completion::Failed { token }
                });
            }
            Wait::File { file, offset, len } => match sockops::sendfile(fd, file, *offset, *len) {
                Ok(0) => Completion::Failed { token },
                Ok(n) => Completion::FileSent { token, n: n as u64 },
                Err(Errno::AGAIN) => {
                    ring.poll(fd.as_fd(), libc::POLLOUT as u32, false, token, POLL_OUT);
                    return None;
                }
                Err(_) => Completion::Failed { token },
            },
        };
        s.wait = None;
        Some(done)
    }
}

impl Backend for Uring {
    fn listen(&mut self, listener: OwnedFd, id: usize) -> io::Result<()> {
        debug_assert_eq!(id, self.listeners.len());
        self.listeners.push(Listener {
            sock: listener,
            armed: false,
        });
        self.arm_accept(id);
        Ok(())
    }

    fn accept_now(&mut self, id: usize) -> Option<(OwnedFd, Option<SocketAddr>)> {
        sockops::accept_now(&self.listeners.get(id)?.sock)
    }

    fn close_listeners(&mut self) {
        let listeners = std::mem::take(&mut self.listeners);
        for l in &listeners {
            if l.armed {
                self.ring.cancel_fd(l.sock.as_fd(), 0, CANCEL);
            }
        }
        // Now, not with the next wait: the worker may not wait again (its last turn), and an
        // accept left armed would hold the listener open, taking connections, after it.
        self.ring.submit();
        drop(listeners);
    }

    fn resume_accepting(&mut self) {
        self.paused = false;
        for id in 0..self.listeners.len() {
            self.arm_accept(id);
        }
    }

    fn watch(&mut self, fd: OwnedFd, token: Token, counter: bool) -> io::Result<()> {
        let id = self.watched.len() as u64;
        // An eventfd's count is read here, so each write is one report (multishot); any
        // other descriptor is polled once per report.
        self.ring
            .poll(fd.as_fd(), libc::POLLIN as u32, counter, id, WATCH);
        self.watched.push((fd, token, counter));
        Ok(())
    }

    fn attach(&mut self, sock: OwnedFd, token: Token, recv: bool) -> io::Result<()> {
        let idx = slot(token);
        if self.socks.len() <= idx {
            self.socks.resize_with(idx + 1, Sock::default);
        }
        self.socks[idx] = Sock {
            fd: Some(sock),
            token,
            recv_on: recv,
            ..Sock::default()
        };
        if recv {
            self.to_arm.push(idx as u32);
        }
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
        let s = &mut self.socks[slot(token)];
        s.wait = Some(Box::new(Wait::Connect));
        if let Some(fd) = s.fd.as_ref() {
            self.ring
                .poll(fd.as_fd(), libc::POLLOUT as u32, false, token, POLL_OUT);
        }
        Submitted::Pending
    }

    fn detach(&mut self, token: Token) {
        let Some(s) = self.sock(token) else { return };
        let busy = s.recv_armed || s.sending.is_some() || s.wait.is_some();
        let fd = s.fd.take();
        *s = Sock::default();
        if let Some(fd) = fd
            && busy
        {
            self.ring.cancel_fd(fd.as_fd(), 0, CANCEL);
            self.closing.push(fd);
        }
    }

    fn fd(&self, token: Token) -> Option<BorrowedFd<'_>> {
        let s = self.socks.get(slot(token))?;
        if s.token != token {
            return None;
        }
        s.fd.as_ref().map(|f| f.as_fd())
    }

    fn read_records(&mut self, token: Token) {
        if let Some(s) = self.sock(token) {
            s.records = true;
        }
    }

    #[inline]
    fn set_recv(&mut self, token: Token, on: bool) {
        let Some(s) = self.sock(token) else { return };
        if s.recv_on == on {
            return;
        }
        s.recv_on = on;
        if !on {
            return;
        }
        let rearm = match s.held.take() {
            Some(c) => {
                let more = matches!(c, Completion::Received { .. } | Completion::Record { .. });
                self.ready.push_back(c);
                more
            }
            None => !s.recv_armed,
        };
        if rearm {
            self.to_arm.push(slot(token) as u32);
        }
    }

    fn recv_now(&mut self, token: Token) -> Option<Completion> {
        let buf = self.buffer();
        let s = self.sock(token)?;
        if let Some(c) = s.held.take() {
            return Some(c);
        }
        Self::recv_inline(s, buf)
    }

    #[inline]
    fn send(&mut self, token: Token, buf: Vec<u8>, more: bool) -> Submitted<Vec<u8>> {
        let Some(s) = open(&mut self.socks, token) else {
            return Submitted::Failed;
        };
        if s.sending.is_some() || s.wait.is_some() {
            return Submitted::Failed;
        }
        let mut flags = libc::MSG_NOSIGNAL;
        if more {
            flags |= libc::MSG_MORE;
        }
        if buf.is_empty() {
            return Submitted::Done(buf);
        }
        s.sending = Some((0, flags));
        let Some(fd) = s.fd.as_ref().map(|f| f.as_fd()) else {
            return Submitted::Failed;
        };
        self.ring.send(fd, buf, 0, flags, token, SEND);
        Submitted::Pending
    }

    fn sendfile(
        &mut self,
        token: Token,
        file: &Arc<OwnedFd>,
        offset: u64,
        len: u64,
    ) -> Submitted<u64> {
        let Some(s) = open(&mut self.socks, token) else {
            return Submitted::Failed;
        };
        if s.sending.is_some() || s.wait.is_some() {
            return Submitted::Failed;
        }
        let Some(fd) = s.fd.as_ref() else {
            return Submitted::Failed;
        };
        match sockops::sendfile(fd, file, offset, len) {
            Ok(0) => Submitted::Failed,
            Ok(n) => Submitted::Done(n as u64),
            Err(Errno::AGAIN) => {
                self.ring
                    .poll(fd.as_fd(), libc::POLLOUT as u32, false, token, POLL_OUT);
                s.wait = Some(Box::new(Wait::File {
                    file: file.clone(),
                    offset,
                    len,
                }));
                Submitted::Pending
            }
            Err(_) => Submitted::Failed,
        }
    }

    fn shutdown_write(&mut self, token: Token) -> io::Result<()> {
        let s = self
            .sock(token)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))?;
        if s.sending.is_some() {
            s.shut_after_send = true;
            return Ok(());
        }
        let fd = s.fd.as_ref().expect("sock() found it open");
        Ok(rustix::net::shutdown(fd, Shutdown::Write)?)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.cqes.clear();
        self.at = 0;
        if !self.to_arm.is_empty() {
            self.arm();
        }
        for id in std::mem::take(&mut self.rewatch) {
            if let Some((fd, _, _)) = self.watched.get(id) {
                self.ring
                    .poll(fd.as_fd(), libc::POLLIN as u32, false, id as u64, WATCH);
            }
        }
        let timeout = if self.ready.is_empty() {
            timeout
        } else {
            Some(Duration::ZERO)
        };
        let waited = self.ring.submit_and_wait(timeout);
        if !self.ring.unsubmitted() {
            // The cancellations are the kernel's now.
            self.closing.clear();
        }
        waited?;
        self.ring.reap(&mut self.cqes);
        Ok(())
    }

    fn found(&self) -> bool {
        !self.cqes.is_empty() || !self.ready.is_empty()
    }

    fn poll_fd(&self) -> BorrowedFd<'_> {
        self.ring.fd()
    }

    #[inline]
    fn next(&mut self) -> Option<Completion> {
        loop {
            if let Some(c) = self.ready.pop_front() {
                return Some(c);
            }
            if self.at >= self.cqes.len() {
                return None;
            }
            // Taken out of the batch (its buffer moves into the completion).
            let c = std::mem::replace(
                &mut self.cqes[self.at],
                Cqe {
                    tag: 0,
                    kind: 0,
                    res: 0,
                    more: false,
                    buf: None,
                    fd: None,
                },
            );
            self.at += 1;
            if let Some(done) = self.translate(c) {
                return Some(done);
            }
        }
    }

    #[inline]
    fn recycle(&mut self, buf: Vec<u8>) {
        self.give(buf);
    }
}
