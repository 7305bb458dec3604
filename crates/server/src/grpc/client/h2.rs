//! The channel's HTTP/2 connection: a tokio task driving linerate's sans-I/O upstream
//! connection (`h2u::Conn`, the proxy's) over a TCP socket (h2c) or TLS over it (`tls.rs`),
//! with the calls as streams.
//!
//! Owns the socket, the clock and the wakeups: calls arrive on a queue and open streams as
//! the server's SETTINGS_MAX_CONCURRENT_STREAMS allows (the rest wait in order); each call's
//! body goes out as both send windows allow; answers go back per stream as they come, and
//! the receive windows reopen only as each call takes its bytes (`Credit`); a call whose
//! caller is gone is cancelled (RST_STREAM CANCEL, `h2u`'s reset budget applies). When the
//! connection ends, every call on it fails UNAVAILABLE, the queue closes, and the
//! [`Connector`] makes a new connection for the next call. It must not block a runtime
//! thread: every wait is a poll.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::{CallIo, CallWork, Credit, Down, Error, Transport, Up};
use crate::grpc::{Code, Status};
use crate::h1c::Transmit;
use crate::h2u::{self, Fields, OpenError, StreamError};

/// Bytes read from the socket at once.
const READ_CHUNK: usize = 16 * 1024;

/// The connection's byte stream: TCP, or TLS over it.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// Where a channel connects: `host:port`, the `:authority` it sends, and its TLS.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    host: String,
    port: u16,
    authority: String,
    https: bool,
    #[cfg(feature = "grpc-client-tls")]
    tls: Option<super::tls::Tls>,
}

impl Target {
    /// `http://host[:port][/]` (port 80 when left out), or `https://` (443; feature
    /// `grpc-client-tls`) verified as `tls` says (the system's roots without one).
    pub(crate) fn parse(uri: &str, tls: Option<&TlsChoice>) -> Result<Target, Error> {
        let (rest, https) = if let Some(rest) = uri.strip_prefix("http://") {
            (rest, false)
        } else if let Some(rest) = uri.strip_prefix("https://") {
            (rest, true)
        } else {
            return Err(Error::InvalidUri(format!(
                "{uri:?}: the scheme must be http:// or https://"
            )));
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.is_empty() || authority.contains(['/', '?', '#', '@', ' ']) {
            return Err(Error::InvalidUri(format!("{uri:?}: not host[:port]")));
        }
        let default_port = if https { 443 } else { 80 };
        let (host, port) = match authority.rsplit_once(':') {
            // `[::1]:50051`, `host:50051`; a bare IPv6 literal has its port outside brackets.
            Some((h, p)) if !h.is_empty() && !p.contains(']') => {
                let port = p
                    .parse::<u16>()
                    .map_err(|_| Error::InvalidUri(format!("{uri:?}: bad port {p:?}")))?;
                (h, port)
            }
            _ => (authority, default_port),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        #[cfg(feature = "grpc-client-tls")]
        let tls = match (https, tls) {
            (false, None) => None,
            (false, Some(_)) => {
                return Err(Error::InvalidUri(format!(
                    "{uri:?}: TLS settings for an http:// URI"
                )));
            }
            (true, given) => Some(super::tls::Tls::new(
                &given.cloned().unwrap_or_default(),
                host,
            )?),
        };
        #[cfg(not(feature = "grpc-client-tls"))]
        if https || tls.is_some() {
            return Err(Error::TlsUnsupported);
        }
        Ok(Target {
            host: host.to_string(),
            port,
            authority: authority.to_string(),
            https,
            #[cfg(feature = "grpc-client-tls")]
            tls,
        })
    }

    async fn connect(&self) -> std::io::Result<Box<dyn Io>> {
        let stream = TcpStream::connect((self.host.as_str(), self.port)).await?;
        stream.set_nodelay(true)?;
        #[cfg(feature = "grpc-client-tls")]
        if let Some(tls) = &self.tls {
            return Ok(Box::new(tls.handshake(stream).await?));
        }
        Ok(Box::new(stream))
    }
}

/// A channel's TLS settings as given (feature `grpc-client-tls`; none without it).
#[cfg(feature = "grpc-client-tls")]
pub(crate) type TlsChoice = super::tls::ClientTlsConfig;
#[cfg(not(feature = "grpc-client-tls"))]
pub(crate) type TlsChoice = std::convert::Infallible;

/// The channel's transport: the live connection's queue, and how to make the next one.
pub(crate) struct Connector {
    target: Arc<Target>,
    live: Mutex<Option<mpsc::UnboundedSender<CallIo>>>,
}

impl Connector {
    /// Connects now (the first connection's errors are the caller's).
    pub(crate) async fn connect(target: Target) -> Result<Connector, Error> {
        let target = Arc::new(target);
        let stream = target.connect().await.map_err(Error::Connect)?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(Driver::new(stream, rx, target.clone()).run());
        Ok(Connector {
            target,
            live: Mutex::new(Some(tx)),
        })
    }

    /// Connects on the first call.
    pub(crate) fn lazy(target: Target) -> Connector {
        Connector {
            target: Arc::new(target),
            live: Mutex::new(None),
        }
    }
}

impl Transport for Connector {
    fn start(&self, call: CallIo) -> CallWork {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let call = match live.as_ref() {
            Some(tx) => match tx.send(call) {
                Ok(()) => return None,
                // The connection ended: its queue is closed. Connect again.
                Err(mpsc::error::SendError(call)) => call,
            },
            None => call,
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            call.fail(Status::new(
                Code::Unavailable,
                "no tokio runtime to connect on",
            ));
            return None;
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(call);
        *live = Some(tx);
        let target = self.target.clone();
        rt.spawn(async move {
            let mut rx = rx;
            match target.connect().await {
                Ok(stream) => Driver::new(stream, rx, target).run().await,
                Err(e) => {
                    tracing::debug!(error = %e, "gRPC client: connect failed");
                    rx.close();
                    while let Ok(call) = rx.try_recv() {
                        call.fail(Status::new(Code::Unavailable, format!("connect: {e}")));
                    }
                }
            }
        });
        None
    }
}

/// A call on the connection.
struct Slot {
    id: u32,
    up: mpsc::Receiver<Up>,
    down: mpsc::UnboundedSender<Down>,
    alive: tokio::sync::oneshot::Sender<()>,
    credit: Arc<Credit>,
    /// A body piece the connection has not taken all of yet.
    pending: Option<Bytes>,
    /// The body's end is to be sent after `pending`.
    end_pending: bool,
    /// The body ended (END_STREAM sent).
    sent_end: bool,
    /// The stream ended (its answer whole, or failed): the slot goes.
    done: bool,
}

/// One connection's task.
struct Driver {
    io: Box<dyn Io>,
    conn: h2u::Conn,
    calls: mpsc::UnboundedReceiver<CallIo>,
    /// Calls waiting for a stream.
    waiting: VecDeque<CallIo>,
    slots: Vec<Slot>,
    target: Arc<Target>,
    epoch: Instant,
    /// Output handed over by the connection, and how much of it is written.
    out: Vec<u8>,
    written: usize,
    rbuf: Box<[u8]>,
    timer: Pin<Box<tokio::time::Sleep>>,
    timer_at: u64,
    /// No more calls will come (every channel is gone).
    calls_closed: bool,
}

impl Driver {
    fn new(io: Box<dyn Io>, calls: mpsc::UnboundedReceiver<CallIo>, target: Arc<Target>) -> Driver {
        Driver {
            io,
            conn: h2u::Conn::new(0, h2u::Settings::default()),
            calls,
            waiting: VecDeque::new(),
            slots: Vec::new(),
            target,
            epoch: Instant::now(),
            out: Vec::new(),
            written: 0,
            rbuf: vec![0; READ_CHUNK].into_boxed_slice(),
            timer: Box::pin(tokio::time::sleep(Duration::from_secs(3600))),
            timer_at: u64::MAX,
            calls_closed: false,
        }
    }

    async fn run(mut self) {
        std::future::poll_fn(|cx| self.poll(cx)).await;
        // The connection is over: whatever is left fails, and the queue closes so that the
        // next call connects again.
        self.calls.close();
        let gone = || Status::new(Code::Unavailable, "the connection closed");
        for slot in self.slots.drain(..) {
            if !slot.done {
                let _ = slot.down.send(Down::Failed(gone()));
            }
        }
        for call in self.waiting.drain(..) {
            call.fail(gone());
        }
        while let Ok(call) = self.calls.try_recv() {
            call.fail(gone());
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Runs everything that is ready; `Ready` once the connection is over.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        // A bound on one turn's rounds, so a busy connection yields to the runtime now and
        // then (tokio's budget does the same for its own futures).
        for _ in 0..64 {
            let mut progress = false;
            // New calls.
            while !self.calls_closed {
                match self.calls.poll_recv(cx) {
                    Poll::Ready(Some(call)) => {
                        self.waiting.push_back(call);
                        progress = true;
                    }
                    Poll::Ready(None) => self.calls_closed = true,
                    Poll::Pending => break,
                }
            }
            progress |= self.open_waiting();
            progress |= self.poll_calls(cx);
            // The clock.
            let deadline = self.conn.deadline();
            if deadline != u64::MAX && self.now() >= deadline {
                let now = self.now();
                let mut ev = Ev::new(&mut self.slots);
                self.conn.on_timer(now, &mut ev);
                progress = true;
            }
            // Output.
            match self.poll_write(cx) {
                Poll::Ready(Ok(true)) => progress = true,
                Poll::Ready(Ok(false)) => {}
                Poll::Ready(Err(())) => return Poll::Ready(()),
                Poll::Pending => {}
            }
            // Input.
            if self.conn.wants_input() {
                let mut buf = ReadBuf::new(&mut self.rbuf);
                match Pin::new(&mut *self.io).poll_read(cx, &mut buf) {
                    Poll::Ready(Ok(())) if buf.filled().is_empty() => {
                        let mut ev = Ev::new(&mut self.slots);
                        self.conn.eof(&mut ev);
                        return Poll::Ready(());
                    }
                    Poll::Ready(Ok(())) => {
                        let n = buf.filled().len();
                        let now = self.now();
                        let mut ev = Ev::new(&mut self.slots);
                        self.conn.recv(&self.rbuf[..n], now, &mut ev);
                        progress = true;
                    }
                    Poll::Ready(Err(e)) => {
                        tracing::debug!(error = %e, "gRPC client: read failed");
                        let mut ev = Ev::new(&mut self.slots);
                        self.conn.eof(&mut ev);
                        return Poll::Ready(());
                    }
                    Poll::Pending => {}
                }
            }
            self.slots.retain(|s| !s.done);
            if self.conn.poll_transmit() == Transmit::Close && self.out.is_empty() {
                let mut ev = Ev::new(&mut self.slots);
                self.conn.eof(&mut ev);
                return Poll::Ready(());
            }
            if self.calls_closed && self.slots.is_empty() && self.waiting.is_empty() {
                return Poll::Ready(()); // no channel left: the socket closes with the task
            }
            if !progress {
                self.arm_timer(cx);
                return Poll::Pending;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    fn arm_timer(&mut self, cx: &mut Context<'_>) {
        let deadline = self.conn.deadline();
        if deadline == u64::MAX {
            return;
        }
        if deadline != self.timer_at {
            self.timer_at = deadline;
            let at = self.epoch + Duration::from_millis(deadline);
            self.timer
                .as_mut()
                .reset(tokio::time::Instant::from_std(at));
        }
        if self.timer.as_mut().poll(cx).is_ready() {
            cx.waker().wake_by_ref();
        }
    }

    /// Opens streams for waiting calls while the server takes more.
    fn open_waiting(&mut self) -> bool {
        let mut opened = false;
        while let Some(call) = self.waiting.front() {
            if call.down.is_closed() {
                self.waiting.pop_front(); // its caller gave up before it began
                continue;
            }
            let fields: Vec<(&[u8], &[u8])> = call
                .fields
                .iter()
                .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
                .collect();
            let req = h2u::Request {
                method: b"POST",
                scheme: if self.target.https { b"https" } else { b"http" },
                authority: self.target.authority.as_bytes(),
                path: call.path.as_bytes(),
                fields: &fields,
            };
            let opened_id = self.conn.open(&req, false);
            let id = match opened_id {
                Ok(id) => id,
                Err(OpenError::NoRoom) => break,
                Err(OpenError::Closing) => {
                    if let Some(call) = self.waiting.pop_front() {
                        call.fail(Status::new(Code::Unavailable, "the connection is closing"));
                    }
                    continue;
                }
                Err(OpenError::TooLarge) => {
                    if let Some(call) = self.waiting.pop_front() {
                        call.fail(Status::new(
                            Code::Internal,
                            "the call's metadata is larger than the server takes",
                        ));
                    }
                    continue;
                }
            };
            let Some(call) = self.waiting.pop_front() else {
                break;
            };
            self.slots.push(Slot {
                id,
                up: call.up,
                down: call.down,
                alive: call.alive,
                credit: call.credit,
                pending: None,
                end_pending: false,
                sent_end: false,
                done: false,
            });
            opened = true;
        }
        opened
    }

    /// Each call: cancelled when its caller is gone, its consumed bytes reported, its body
    /// sent as far as the windows allow.
    fn poll_calls(&mut self, cx: &mut Context<'_>) -> bool {
        let mut progress = false;
        for slot in &mut self.slots {
            if slot.done {
                continue;
            }
            if slot.alive.poll_closed(cx).is_ready() {
                self.conn.cancel(slot.id);
                slot.done = true;
                progress = true;
                continue;
            }
            let taken = slot.credit.take(cx.waker());
            if taken > 0 {
                self.conn.consumed(slot.id, taken);
                progress = true;
            }
            while !slot.sent_end {
                if let Some(piece) = &mut slot.pending {
                    let n = self.conn.send(slot.id, piece, false);
                    if n < piece.len() {
                        let _ = piece.split_to(n);
                        break; // `Events::writable` says when more fits
                    }
                    slot.pending = None;
                    progress = true;
                    continue;
                }
                if slot.end_pending {
                    self.conn.send(slot.id, &[], true);
                    slot.sent_end = true;
                    progress = true;
                    break;
                }
                if self.conn.send_room(slot.id) == 0 && self.conn.is_open(slot.id) {
                    break;
                }
                match slot.up.poll_recv(cx) {
                    Poll::Ready(Some(Up::Data(piece))) => slot.pending = Some(piece),
                    // A queue dropped without its end ends the body all the same.
                    Poll::Ready(Some(Up::End) | None) => slot.end_pending = true,
                    Poll::Pending => break,
                }
            }
        }
        progress
    }

    /// Writes the connection's output; `Ok(true)`: some went out.
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool, ()>> {
        let mut wrote = false;
        loop {
            if self.written == self.out.len() {
                if !self.out.is_empty() {
                    self.out.clear();
                    self.written = 0;
                    let mut ev = Ev::new(&mut self.slots);
                    self.conn.sent(&mut ev);
                }
                if self.conn.poll_transmit() != Transmit::Bytes {
                    return Poll::Ready(Ok(wrote));
                }
                self.out = self.conn.take_output();
                self.written = 0;
            }
            match Pin::new(&mut *self.io).poll_write(cx, &self.out[self.written..]) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                    let mut ev = Ev::new(&mut self.slots);
                    self.conn.eof(&mut ev);
                    return Poll::Ready(Err(()));
                }
                Poll::Ready(Ok(n)) => {
                    self.written += n;
                    wrote = true;
                }
                Poll::Pending => {
                    return if wrote {
                        Poll::Ready(Ok(true))
                    } else {
                        Poll::Pending
                    };
                }
            }
        }
    }
}

/// The connection's events, delivered to the calls.
struct Ev<'a> {
    slots: &'a mut Vec<Slot>,
}

impl<'a> Ev<'a> {
    fn new(slots: &'a mut Vec<Slot>) -> Ev<'a> {
        Ev { slots }
    }

    fn slot(&mut self, id: u32) -> Option<&mut Slot> {
        self.slots.iter_mut().find(|s| s.id == id && !s.done)
    }
}

fn owned(fields: &Fields) -> Vec<(Vec<u8>, Vec<u8>)> {
    fields
        .iter()
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect()
}

impl h2u::Events for Ev<'_> {
    fn head(&mut self, id: u32, status: u16, fields: &Fields) {
        if status < 200 {
            return; // informational
        }
        if let Some(s) = self.slot(id) {
            let _ = s.down.send(Down::Head(status, owned(fields)));
        }
    }

    fn data(&mut self, id: u32, data: &[u8]) {
        if let Some(s) = self.slot(id) {
            let _ = s.down.send(Down::Data(Bytes::copy_from_slice(data)));
        }
    }

    fn trailers(&mut self, id: u32, fields: &Fields) {
        if let Some(s) = self.slot(id) {
            let _ = s.down.send(Down::Trailers(owned(fields)));
        }
    }

    fn end(&mut self, id: u32) {
        if let Some(s) = self.slot(id) {
            let _ = s.down.send(Down::End);
            s.done = true;
        }
    }

    fn failed(&mut self, id: u32, error: StreamError) {
        if let Some(s) = self.slot(id) {
            let _ = s.down.send(Down::Failed(stream_status(error)));
            s.done = true;
        }
    }

    fn writable(&mut self, _id: u32) {
        // The driver's loop tries every body again on its next round.
    }

    fn pong(&mut self) {}

    fn goaway(&mut self) {}
}

/// A failed stream's status (PROTOCOL-HTTP2.md, "Errors": RST_STREAM codes).
pub(super) fn stream_status(error: StreamError) -> Status {
    let code = match error {
        StreamError::Refused | StreamError::Unsent | StreamError::Connection(_) => {
            Code::Unavailable
        }
        StreamError::Reset(0x7) => Code::Unavailable, // REFUSED_STREAM
        StreamError::Reset(0x8) => Code::Cancelled,   // CANCEL
        StreamError::Reset(0xb) => Code::ResourceExhausted, // ENHANCE_YOUR_CALM
        StreamError::Reset(0xc) => Code::PermissionDenied, // INADEQUATE_SECURITY
        StreamError::Reset(_) | StreamError::Malformed(_) | StreamError::Protocol(_) => {
            Code::Internal
        }
    };
    Status::new(code, error.to_string())
}
