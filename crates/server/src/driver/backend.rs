//! The I/O backend boundary: operations that own their buffers, and their completions.
//!
//! The worker talks to the kernel only through a [`Backend`]: `epoll` (the default) or
//! `uring` (io_uring completions, `Config::io`), each meeting the contract below without a
//! change to the worker.
//!
//! The contract every backend meets:
//! - **Sockets are owned by the backend** once [`Backend::attach`]ed under a token, and
//!   closed by [`Backend::detach`] (which also cancels their operations and drops their
//!   buffers). A token names one connection; a completion for a detached token is never
//!   delivered.
//! - **Receiving is armed, not submitted per read**: while [`Backend::set_recv`] is on, each
//!   arrival of bytes is one [`Completion::Received`] whose buffer the backend lends
//!   (provided-buffer semantics); the worker gives it back with [`Backend::recycle`]. The end of
//!   the peer's data is [`Completion::Eof`]; a broken connection is [`Completion::Failed`].
//!   Turning receiving off means no `Received` is delivered for the token until it is on again.
//! - **A send owns its buffer** and sends all of it: [`Backend::send`] completes exactly once,
//!   either at once ([`Submitted::Done`] gives the buffer back) or later ([`Submitted::Pending`],
//!   then a `Sent` completion from [`Backend::next`]), or fails (`Failed`, now or later).
//!   [`Backend::sendfile`] sends at least one byte of the range (fewer than asked is normal;
//!   the worker asks again) and completes the same way.
//!   At most one send or sendfile is in flight per socket; the worker never submits another
//!   before the first completed.
//! - **Connecting** ([`Backend::connect`]) makes and owns an outbound socket; it completes at
//!   once, or later as [`Completion::Connected`] or `Failed`, and is then like any attached
//!   connection.
//! - **Waiting**: [`Backend::wait`] returns when a completion is ready or `timeout` passed;
//!   [`Backend::next`] then yields the completions one by one. Listeners accept in bursts and
//!   can be paused (for want of file descriptors) and resumed; eventfds are watched and yield
//!   [`Completion::Notified`] with their counter consumed.
#![forbid(unsafe_code)]

use std::io;
use std::net::SocketAddr;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

/// The worker's name for a connection: slot index in the low 32 bits, generation above.
pub(crate) type Token = u64;

/// Where an outbound connection goes (an upstream server).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "proxy"), allow(dead_code))]
pub(crate) enum UpAddr {
    Tcp(std::net::SocketAddr),
    Unix(std::path::PathBuf),
}

impl std::fmt::Display for UpAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpAddr::Tcp(a) => write!(f, "{a}"),
            UpAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// One finished operation.
#[derive(Debug)]
pub(crate) enum Completion {
    /// A connection arrived on listener `listener`.
    Accepted {
        listener: usize,
        sock: OwnedFd,
        peer: Option<SocketAddr>,
    },
    /// Accepting failed for want of resources (file descriptors, memory): every listener is
    /// paused until [`Backend::resume_accepting`].
    AcceptPaused(io::Error),
    /// A connection [`Backend::connect`] started is established.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    Connected { token: Token },
    /// Bytes arrived (`buf` is not empty; give it back with [`Backend::recycle`]).
    Received { token: Token, buf: Vec<u8> },
    /// A record other than application data (an alert, a handshake message) arrived on a
    /// socket whose receive side is kernel TLS: `buf` holds its plaintext followed by one
    /// byte, its content type (give `buf` back with [`Backend::recycle`]). The type rides in
    /// the buffer so that this rare variant has the same fields as `Received`: a separate
    /// field cost plain HTTP instructions per request in the completion loop.
    Record { token: Token, buf: Vec<u8> },
    /// The peer will send no more.
    Eof { token: Token },
    /// A send finished: every byte of `buf` is on its way.
    Sent { token: Token, buf: Vec<u8> },
    /// A sendfile finished: `n` bytes of the range are on their way.
    FileSent { token: Token, n: u64 },
    /// The connection is broken (reset, or an operation failed).
    Failed { token: Token },
    /// A watched eventfd was written.
    Notified { token: Token },
}

/// What submitting a send or sendfile did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Submitted<T> {
    /// Finished at once: the buffer back (send) or the bytes sent (sendfile).
    Done(T),
    /// Under way: its completion comes from [`Backend::next`].
    Pending,
    /// The connection is broken.
    Failed,
}

/// See the module doc for the contract.
pub(crate) trait Backend {
    /// Starts accepting from `listener`; its connections complete as `Accepted { listener: id }`.
    fn listen(&mut self, listener: OwnedFd, id: usize) -> io::Result<()>;
    /// Accepts one connection now if one is queued (for the drain on shutdown).
    fn accept_now(&mut self, id: usize) -> Option<(OwnedFd, Option<SocketAddr>)>;
    /// Closes every listener: queued connections not yet accepted are reset.
    fn close_listeners(&mut self);
    /// Resumes accepting after [`Completion::AcceptPaused`].
    fn resume_accepting(&mut self);
    /// Watches `fd` under `token`: an eventfd (`counter`: its count is read, which re-arms
    /// it), or a descriptor whose owner clears its readiness (an epoll instance: reading it
    /// would only fail).
    fn watch(&mut self, fd: OwnedFd, token: Token, counter: bool) -> io::Result<()>;
    /// Takes ownership of a connection's socket, with receiving on or off.
    fn attach(&mut self, sock: OwnedFd, token: Token, recv: bool) -> io::Result<()>;
    /// Opens a connection to `addr` and owns it under `token`, receiving off: at once
    /// ([`Submitted::Done`]) or later (a [`Completion::Connected`], or `Failed` when it could
    /// not be made); `Failed` now when it cannot even start (refused at once, no socket).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    fn connect(&mut self, addr: &UpAddr, token: Token) -> Submitted<()>;
    /// Closes a connection's socket and forgets its operations.
    fn detach(&mut self, token: Token);
    /// The socket, for the rare option set on an established connection (kTLS).
    fn fd(&self, token: Token) -> Option<BorrowedFd<'_>>;
    /// From now on the socket's receive side is kernel TLS: reads learn each record's type,
    /// and records other than application data complete as [`Completion::Record`].
    #[cfg_attr(not(feature = "tls"), allow(dead_code))] // Only kernel TLS asks for it.
    fn read_records(&mut self, token: Token);
    /// Turns receiving on or off.
    fn set_recv(&mut self, token: Token, on: bool);
    /// Receives now if bytes are waiting (for the drain on shutdown): `Received`, `Eof`,
    /// `Failed`, or `None` when nothing is there.
    fn recv_now(&mut self, token: Token) -> Option<Completion>;
    /// Sends all of `buf` (`more`: further data follows at once, MSG_MORE).
    fn send(&mut self, token: Token, buf: Vec<u8>, more: bool) -> Submitted<Vec<u8>>;
    /// Sends up to `len` bytes of `file` from `offset`.
    fn sendfile(
        &mut self,
        token: Token,
        file: &Arc<OwnedFd>,
        offset: u64,
        len: u64,
    ) -> Submitted<u64>;
    /// Shuts down the write side (FIN after everything sent).
    fn shutdown_write(&mut self, token: Token) -> io::Result<()>;
    /// Waits until a completion is ready or `timeout` passed (`None`: no limit).
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()>;
    /// Whether the last `wait` found anything (a completion may still be ready).
    fn found(&self) -> bool;
    /// The descriptor that is readable while completions are ready (the epoll instance),
    /// for a worker that waits inside its tokio runtime (`crate::runtime`).
    fn poll_fd(&self) -> BorrowedFd<'_>;
    /// The next completion since the last `wait`.
    fn next(&mut self) -> Option<Completion>;
    /// Gives back a buffer lent by `Received`.
    fn recycle(&mut self, buf: Vec<u8>);
}
