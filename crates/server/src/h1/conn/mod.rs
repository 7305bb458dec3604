//! One HTTP/1.1 server connection as a state machine (see the module doc of `h1`): its
//! states and the driver-facing calls. Reading requests is in `read`, placing answers in
//! `write`.
//!
//! Input: [`Conn::recv`] (bytes), [`Conn::eof`], [`Conn::complete`] (a deferred answer),
//! [`Conn::on_timer`], [`Conn::drain`], and the transmit reports [`Conn::sent`] /
//! [`Conn::file_sent`] / [`Conn::shut`]. Output: calls into the [`Service`] for each request,
//! [`Conn::poll_transmit`] (what to send, shut down or close), [`Conn::deadline`] (when to call
//! `on_timer`) and [`Conn::wants_input`]. The time is the driver's, in milliseconds.
//!
//! Invariants: answers leave in request order (an answer decided before an earlier one waits
//! in the queue); a connection whose output is not yet transmitted reads nothing more, and
//! one with [`ConnConfig::max_deferred`] answers outstanding dispatches nothing more, so a
//! client that does not read, or a slow service, cannot make it buffer without bound; after a
//! response that closes, nothing more is read or answered.
#![forbid(unsafe_code)]

mod read;
mod stream;
mod tunnel;
mod write;

pub(in crate::h1) use stream::encode_chunked;
pub(crate) use stream::{STREAM_ROOM, StreamOut};

use linerate_http1::{BodyDecoder, RequestHead, Version, reason};

use super::encode;
use super::pace::SendPace;
use super::queue::Queue;
use super::service::{ConnConfig, Cx, Service};
use crate::pool::Pool;
use crate::response::{Body, FileBody, Response};

/// Stop dispatching pipelined requests once this much output waits to be transmitted (or is
/// held behind a deferred answer).
pub(crate) const OUT_HIGH_WATER: usize = 256 * 1024;
/// Most bytes discarded while lingering before the connection is simply closed.
const LINGER_MAX_BYTES: usize = 1 << 20;

/// Once a drain starts, how long (ms) an idle keep-alive connection waits for its next
/// request (answered with close) before it is closed ([`Conn::drain`]). A drain ends when
/// its last connection does, so this is what an idle client adds to a node's restart.
pub(crate) const DRAIN_IDLE_GRACE: u64 = 1000;

/// Which deadline the connection is under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    /// A new connection that has not sent a byte (or is still in its TLS handshake): close
    /// quietly after the header timeout, counted from the connection's start.
    Fresh,
    /// Between requests: close quietly.
    Idle,
    /// A request head has started: 408 (counted from its first byte).
    Head,
    /// A request body is being read: 408 after a gap this long.
    Body,
    /// Output is waiting for the client to read it: close.
    Send,
    /// An answer is deferred: 503 and close.
    Deferred,
    /// The write side is shut and input is being drained: close.
    Linger,
}

/// What to do with the socket next.
#[derive(Debug)]
pub(crate) enum Transmit<'a> {
    /// Send every byte of the buffer from [`Conn::take_output`], then report [`Conn::sent`].
    /// `more`: a file body follows (MSG_MORE lets them share segments).
    Bytes { more: bool },
    /// Send up to `len` bytes of `file` from `offset`, then report [`Conn::file_sent`].
    File {
        file: &'a FileBody,
        offset: u64,
        len: u64,
    },
    /// Everything is out and the connection ends: shut down the write side (after TLS's
    /// close_notify), then report [`Conn::shut`]. Input is drained until EOF (lingering
    /// close) so unread request bytes do not make the kernel reset the connection.
    Shutdown,
    /// Close the connection now.
    Close,
    /// Close the connection abortively (RST, `SO_LINGER` 0): a client that stopped reading
    /// for the send timeout must not leave its unsent data pinned in the kernel as an orphan
    /// (nginx's `reset_timedout_connection`).
    Reset,
    /// Nothing to transmit until more input, an answer or a timer.
    Idle,
}

/// The facts of one request that its answer needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Facts {
    pub id: u64,
    pub framing: encode::Framing,
    /// The connection ends with this request's answer: the request does not allow it to
    /// stay open, or it is the last one the connection serves (max requests per connection).
    pub ends: bool,
}

impl Facts {
    /// For an answer to bytes that did not parse as a request.
    const UNPARSED: Facts = Facts {
        id: 0,
        framing: encode::Framing {
            head: false,
            version: Version::Http11,
        },
        ends: true,
    };
}

/// A request whose body is being read.
struct BodyIn<P> {
    facts: Facts,
    decoder: BodyDecoder,
    pending: P,
    received: u64,
    limit: u64,
    /// When reading the body began (ms): with the minimum rate, it bounds the whole body.
    started: u64,
    /// The request went upstream already ([`Decision::RelayBody`]): its answer is pending in
    /// the queue, and the body is read while the upstream takes it.
    relayed: bool,
}

/// A file body being sent after the bytes before it.
struct FileOut {
    body: FileBody,
    sent: u64,
}

/// What follows an answer's bytes in the output, holding back the answers after it: a file
/// body, or a body that comes in pieces (`stream`).
enum Tail {
    File(FileOut),
    Stream(stream::StreamOut),
}

enum Reading<P> {
    /// Waiting for a request head (or the rest of one, in `inbuf`).
    Head,
    /// Reading a request body for the service.
    Body(Box<BodyIn<P>>),
    /// No more requests: the last answer is decided.
    Stopped,
    /// The peer finished sending: answer what is owed, then close.
    PeerClosed,
    /// The write side is shut: input is discarded until EOF.
    Linger { discarded: usize },
    /// An upgrade request went upstream: input after it is held, not parsed, until its
    /// answer (a 101 makes it [`Reading::Tunnel`]; any other answer closes).
    Upgrade,
    /// After a 101: input is the tunnel's, held in `inbuf` for the driver
    /// ([`Conn::tunnel_input`]); `eof`: the client sent its last byte.
    Tunnel { eof: bool },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writing {
    /// Answers go out as they are decided.
    Open,
    /// The last answer is decided: when all is transmitted, shut down (or close).
    Last,
    /// The write side is shut down.
    Shut,
    /// Close now.
    Closed,
    /// Reset now: the send timeout passed with output still unsent.
    Reset,
    /// A streamed body was cut off: send what is staged, then close without ending it (its
    /// framing left incomplete tells the client it is not whole).
    Cut,
    /// As `Cut`, for a body delimited by the close, which a FIN would pass off as whole:
    /// reset instead.
    CutReset,
}

/// What the transport holds for this connection right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InFlight {
    None,
    Bytes,
    File,
    Shutdown,
}

/// Why dispatching stopped with complete input left (see [`Conn::can_resume`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    No,
    /// Output is waiting to be transmitted (or a file body to be sent).
    Output,
    /// The connection has [`ConnConfig::max_deferred`] answers outstanding or held.
    Queue,
    /// The next request's body must be read, and answers before it are outstanding: an
    /// interim 100 or a body error must not overtake them.
    Body,
    /// A relayed body's upstream has no room: the driver wakes the connection
    /// ([`Conn::body_room`]).
    Relay,
}

/// What a connection holds between calls, rarely: allocated when needed and dropped when both
/// are empty, so an idle connection costs one pointer for them. Each buffer comes from the
/// worker's pool and goes back to it as soon as it is empty (capacity 0 means empty).
#[derive(Default)]
struct Spill {
    /// Input not yet used: a partial head or body frame, or requests held back.
    inbuf: Vec<u8>,
    /// Encoded output waiting for the transport while an earlier send is in flight.
    out: Vec<u8>,
}

/// One connection. `P` is the service's per-request body state.
pub(crate) struct Conn<P> {
    reading: Reading<P>,
    writing: Writing,
    in_flight: InFlight,
    /// Why processing of the held input stopped, when it was not for want of bytes.
    held: Hold,
    /// Bytes held between calls; `None` (8 bytes, not 48) for the idle connection.
    spill: Option<Box<Spill>>,
    /// A file body or a streamed body after the output; later answers wait until it is out.
    tail: Option<Box<Tail>>,
    /// Answers held behind a deferred one (allocated only when a request is deferred).
    queue: Option<Box<Queue>>,
    /// Requests read.
    requests: u64,
    timer: Timer,
    deadline: u64,
    /// The send timer's limits while an answer waits on the client.
    pace: SendPace,
}

impl<P> Conn<P> {
    /// A connection accepted at `now`.
    pub(crate) fn new(now: u64, cfg: &ConnConfig) -> Conn<P> {
        Conn {
            reading: Reading::Head,
            writing: Writing::Open,
            in_flight: InFlight::None,
            held: Hold::No,
            spill: None,
            tail: None,
            queue: None,
            requests: 0,
            timer: Timer::Fresh,
            deadline: now + cfg.header_timeout,
            pace: SendPace::default(),
        }
    }

    /// When [`Conn::on_timer`] is due (the driver's clock).
    pub(crate) fn deadline(&self) -> u64 {
        self.deadline
    }

    /// Which deadline that is.
    pub(crate) fn timer(&self) -> Timer {
        self.timer
    }

    /// Whether the driver should keep receiving for this connection.
    pub(crate) fn wants_input(&self, cfg: &ConnConfig) -> bool {
        match self.reading {
            Reading::Linger { .. } => true,
            Reading::Head => self.held == Hold::No && self.output_calm(cfg),
            // Reading a relayed body makes no output: only the upstream's room holds it.
            Reading::Body(ref b) => self.held == Hold::No && (b.relayed || self.output_calm(cfg)),
            Reading::Stopped | Reading::PeerClosed | Reading::Upgrade => false,
            Reading::Tunnel { eof } => !eof && self.tunnel_has_room(),
        }
    }

    /// Nothing waits to go out, and the queue has room: another request may be read.
    #[inline(always)]
    fn output_calm(&self, cfg: &ConnConfig) -> bool {
        self.in_flight == InFlight::None
            && self.out_empty()
            && self.tail.is_none()
            && self
                .queue
                .as_ref()
                .is_none_or(|q| Self::queue_has_room(q, cfg))
    }

    /// Processing stopped for backpressure and can go on now: call [`Conn::resume`].
    pub(crate) fn can_resume(&self, cfg: &ConnConfig) -> bool {
        let output_out =
            self.in_flight == InFlight::None && self.out_empty() && self.tail.is_none();
        match self.held {
            Hold::No | Hold::Relay => false,
            Hold::Output => output_out,
            Hold::Queue => {
                output_out
                    && self
                        .queue
                        .as_ref()
                        .is_none_or(|q| Self::queue_has_room(q, cfg))
            }
            Hold::Body => output_out && self.queue.is_none(),
        }
    }

    fn queue_has_room(q: &Queue, cfg: &ConnConfig) -> bool {
        q.len() < cfg.max_deferred && q.bytes() < OUT_HIGH_WATER
    }

    /// Between requests with nothing buffered, owed or outstanding.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(self.reading, Reading::Head)
            && self.writing == Writing::Open
            && self.inbuf_empty()
            && self.in_flight == InFlight::None
            && self.out_empty()
            && self.tail.is_none()
            && self.queue.is_none()
    }

    /// Deferred answers still awaited from the service.
    pub(crate) fn outstanding(&self) -> usize {
        self.queue.as_ref().map_or(0, |q| q.pending())
    }

    /// Gives pooled buffers back before the connection is dropped.
    pub(crate) fn release(&mut self, pool: &mut Pool) {
        if let Some(mut s) = self.spill.take() {
            pool.put(&mut s.inbuf);
            pool.put(&mut s.out);
        }
        if let Some(mut q) = self.queue.take() {
            for mut b in q.truncate(0) {
                pool.put(&mut b);
            }
        }
        self.tail = None;
    }

    /// Bytes arrived.
    pub(crate) fn recv<S: Service<Pending = P>>(
        &mut self,
        input: &[u8],
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        match &mut self.reading {
            Reading::Linger { discarded } => {
                *discarded += input.len();
                if *discarded > LINGER_MAX_BYTES {
                    self.writing = Writing::Closed;
                }
                return;
            }
            Reading::Stopped | Reading::PeerClosed => return,
            Reading::Upgrade | Reading::Tunnel { .. } => {
                self.hold_input(input, cx);
                return;
            }
            Reading::Head | Reading::Body(_) => {}
        }
        if self.inbuf_empty() {
            let used = self.process(input, head, cx, svc);
            if used < input.len() && self.keeps_input() {
                let mut stash = cx.pool.get();
                stash.extend_from_slice(&input[used..]);
                self.spill().inbuf = stash;
            }
        } else {
            self.spill().inbuf.extend_from_slice(input);
            self.process_stash(head, cx, svc);
        }
        self.set_timer(cx);
    }

    /// Goes on with input held back for backpressure (see [`Conn::can_resume`]).
    pub(crate) fn resume<S: Service<Pending = P>>(
        &mut self,
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        self.held = Hold::No;
        if !self.inbuf_empty() && self.keeps_input() {
            self.process_stash(head, cx, svc);
        }
        self.set_timer(cx);
    }

    /// The upstream a relayed body goes to has room again: reading goes on.
    pub(crate) fn body_room<S: Service<Pending = P>>(
        &mut self,
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        if self.held == Hold::Relay {
            self.resume(head, cx, svc);
        }
    }

    /// The peer will send nothing more. A request cut short can never complete: what is
    /// owed is answered, then the connection closes — unless answers are still outstanding
    /// with the service: then the client is taken to be gone (as nginx does, status 499 in the
    /// log) and the connection closes now; their answers will be dropped when they come.
    pub(crate) fn eof<S: Service<Pending = P>>(&mut self, cx: &mut Cx, svc: &mut S) {
        match self.reading {
            Reading::Linger { .. } => self.writing = Writing::Closed,
            // What it sent still goes through the tunnel; the driver ends the other side.
            Reading::Tunnel { .. } => self.reading = Reading::Tunnel { eof: true },
            _ => {
                self.reading = Reading::PeerClosed;
                self.held = Hold::No;
                self.drop_inbuf(&mut cx.pool);
                let pending = self.queue.as_ref().map_or(0, |q| q.pending());
                if pending > 0 {
                    for _ in 0..pending {
                        svc.answered(499, None, 0, b"");
                    }
                    self.writing = Writing::Closed;
                }
            }
        }
        self.set_timer(cx);
    }

    /// The deferred answer to request `id`. `false` when it is too late: the request timed
    /// out, or an answer before it closed the connection.
    pub(crate) fn complete(&mut self, id: u64, resp: Response, cx: &mut Cx) -> bool {
        if matches!(self.writing, Writing::Closed | Writing::Reset) {
            return false;
        }
        let Some(q) = self.queue.as_mut() else {
            return false;
        };
        let Some((i, facts)) = q.find_pending(id) else {
            return false;
        };
        if i == 0 && self.tail.is_none() {
            q.pop();
            self.place_now(facts, resp, cx);
            self.release_queue(cx);
        } else {
            let (bytes, file, last) = self.encode_own(facts, resp, cx);
            let q = self.queue.as_mut().expect("checked above");
            q.fill(i, bytes, file);
            if last {
                for mut b in q.truncate(i + 1) {
                    cx.pool.put(&mut b);
                }
            }
        }
        self.set_timer(cx);
        true
    }

    /// The deadline passed (the driver calls this at or after [`Conn::deadline`]).
    pub(crate) fn on_timer<S: Service<Pending = P>>(&mut self, cx: &mut Cx, svc: &mut S) {
        if cx.now < self.deadline {
            return;
        }
        match self.timer {
            Timer::Fresh | Timer::Idle | Timer::Linger => {
                self.writing = Writing::Closed;
            }
            Timer::Send => self.writing = Writing::Reset,
            Timer::Body if matches!(&self.reading, Reading::Body(b) if b.relayed) => {
                self.refuse_relayed(408, "request not received in time", None, cx, svc);
            }
            Timer::Head | Timer::Body => {
                self.reading = Reading::Stopped;
                self.drop_inbuf(&mut cx.pool);
                self.held = Hold::No;
                self.own_answer(
                    408,
                    "request not received in time",
                    None,
                    b"",
                    Facts::UNPARSED,
                    cx,
                    svc,
                );
            }
            Timer::Deferred => {
                let Some(facts) = self.queue.as_ref().and_then(|q| q.front_pending()) else {
                    self.set_timer(cx);
                    return;
                };
                let mut resp = status_response(503, "the answer did not come in time").close();
                svc.timed_out(facts.id, &mut resp);
                svc.answered(503, None, resp.body.len(), b"");
                if let Some(q) = self.queue.as_mut() {
                    q.pop();
                }
                self.place_now(facts, resp, cx);
                self.release_queue(cx);
            }
        }
        self.set_timer(cx);
    }

    /// Graceful shutdown reached this connection: a busy one's next answer closes it
    /// ([`Cx::draining`]). An idle keep-alive one gets its next request answered (with
    /// close) if it comes within [`DRAIN_IDLE_GRACE`], and is closed at its end otherwise:
    /// a client that sent its next request as the drain began (one that sends back to back
    /// does so microseconds after each answer) would find the connection closed under that
    /// request, which a client behind a balancer that does not retry loses. A fresh one,
    /// whose first request has not come yet, gets that request answered (with close) or
    /// its header timeout: its client connected as the drain began (or was in the accept
    /// queue), and its request is on the way.
    pub(crate) fn drain(&mut self, cx: &mut Cx) {
        if self.is_idle() && self.requests > 0 {
            self.timer = Timer::Idle;
            self.deadline = self.deadline.min(cx.now + DRAIN_IDLE_GRACE);
            return;
        }
        self.set_timer(cx);
    }

    /// What to transmit next. Bytes are taken with [`Conn::take_output`].
    pub(crate) fn poll_transmit(&mut self, cx: &Cx) -> Transmit<'_> {
        match self.writing {
            Writing::Closed => return Transmit::Close,
            Writing::Reset => return Transmit::Reset,
            _ => {}
        }
        if self.in_flight != InFlight::None {
            return Transmit::Idle;
        }
        if !self.out_empty() || !cx.out.is_empty() {
            return Transmit::Bytes {
                more: matches!(self.tail.as_deref(), Some(Tail::File(_))),
            };
        }
        match self.tail.as_deref() {
            Some(Tail::File(f)) => {
                return Transmit::File {
                    file: &f.body,
                    offset: f.body.offset + f.sent,
                    len: f.body.len - f.sent,
                };
            }
            Some(Tail::Stream(_)) => return Transmit::Idle,
            None => {}
        }
        if self.queue.is_some() {
            return Transmit::Idle;
        }
        match (self.writing, &self.reading) {
            (Writing::Cut, _) => Transmit::Close,
            (Writing::CutReset, _) => Transmit::Reset,
            (Writing::Open | Writing::Last, Reading::PeerClosed) => Transmit::Close,
            (Writing::Last, Reading::Tunnel { eof: true }) => Transmit::Close,
            (Writing::Last, _) => Transmit::Shutdown,
            _ => Transmit::Idle,
        }
    }

    /// Keeps what the last write staged in the worker's `cx.out` as this connection's own
    /// output (see `h2::Conn::keep_output`: a relay writing to several connections before
    /// transmitting any).
    pub(crate) fn keep_output(&mut self, cx: &mut Cx) {
        if cx.out.is_empty() {
            return;
        }
        // `sink` stages in `cx.out` only while ours is empty: the swap keeps the order.
        let out = &mut self.spill().out;
        if out.is_empty() {
            std::mem::swap(out, &mut cx.out);
        } else {
            out.extend_from_slice(&cx.out);
            cx.out.clear();
        }
        if cx.out.capacity() == 0 {
            cx.out = cx.pool.get();
        }
    }

    /// Hands over the bytes [`Transmit::Bytes`] asked to send. `cx.out` is left empty (with
    /// no capacity when it was the one taken).
    pub(crate) fn take_output(&mut self, cx: &mut Cx) -> Vec<u8> {
        self.in_flight = InFlight::Bytes;
        if self.out_empty() {
            std::mem::take(&mut cx.out)
        } else {
            let out = std::mem::take(&mut self.spill().out);
            self.tidy();
            out
        }
    }

    /// Everything answered so far has been sent: no output held or staged, none in flight, no
    /// file or streamed body going, no answer queued.
    pub(crate) fn drained(&self, cx: &Cx) -> bool {
        self.in_flight == InFlight::None
            && self.tail.is_none()
            && self.queue.is_none()
            && self.out_empty()
            && cx.out.is_empty()
    }

    /// Every byte taken with [`Conn::take_output`] (`n` of them) is on its way.
    pub(crate) fn sent(&mut self, n: u64, cx: &mut Cx) {
        self.in_flight = InFlight::None;
        self.progress(n, cx);
    }

    /// What [`Transmit`] asked for could not go out at once: the client is not reading.
    pub(crate) fn stalled(&mut self, cx: &Cx) {
        self.set_timer(cx);
        if self.timer == Timer::Send
            && let Some(at) = self.pace.stall(cx)
        {
            self.deadline = at;
        }
    }

    /// The file body [`Transmit::File`] asked for: `n` more bytes are out.
    pub(crate) fn file_sent(&mut self, n: u64, cx: &mut Cx) {
        self.in_flight = InFlight::None;
        if let Some(Tail::File(f)) = self.tail.as_deref_mut() {
            f.sent += n;
            if f.sent >= f.body.len {
                self.tail = None;
                self.release_queue(cx);
            }
        }
        self.progress(n, cx);
    }

    /// Output moved (`n` bytes): a send timer's gap starts again from now, within its
    /// minimum rate ([`SendPace`]). Without one, the timer already fits the state (the bytes
    /// were sent in the same call that staged them).
    #[inline(always)]
    fn progress(&mut self, n: u64, cx: &Cx) {
        if self.timer == Timer::Send {
            self.deadline = self.pace.progress(n, cx);
            self.set_timer(cx);
        }
    }

    /// A file send [`Transmit::File`] asked for is in flight.
    pub(crate) fn file_taken(&mut self) {
        self.in_flight = InFlight::File;
    }

    /// A shutdown [`Transmit::Shutdown`] asked for is in flight (TLS's close_notify).
    pub(crate) fn shutdown_taken(&mut self) {
        self.in_flight = InFlight::Shutdown;
    }

    /// The write side is shut down: drain input until EOF.
    pub(crate) fn shut(&mut self, cx: &mut Cx) {
        self.in_flight = InFlight::None;
        self.writing = Writing::Shut;
        self.reading = Reading::Linger { discarded: 0 };
        self.set_timer(cx);
    }

    /// Picks the deadline for the state the connection is now in.
    /// A body's deadline: a gap limit, and a whole-body limit that grows with the bytes
    /// received.
    fn body_deadline(b: &BodyIn<P>, cx: &Cx) -> u64 {
        let cfg = &cx.cfg;
        let gap = cx.now + cfg.body_timeout;
        let total = match cfg.min_body_rate {
            0 => u64::MAX,
            rate => b.started + cfg.body_timeout + b.received.saturating_mul(1000) / rate,
        };
        gap.min(total)
    }

    fn set_timer(&mut self, cx: &Cx) {
        let cfg = &cx.cfg;
        let (timer, deadline) = if self.writing == Writing::Shut {
            if self.timer == Timer::Linger {
                return;
            }
            (Timer::Linger, cx.now + cfg.linger_timeout)
        } else if self.in_flight != InFlight::None
            || !self.out_empty()
            || matches!(self.tail.as_deref(), Some(Tail::File(_)))
        {
            // Bytes staged in `cx.out` are transmitted before the driver moves on: they do
            // not count until the transmit stalls (`stalled`).
            if self.timer == Timer::Send {
                return; // restarted only by progress (`sent`, `file_sent`)
            }
            (Timer::Send, self.pace.start(cx))
        } else if let Some(at) = self.queue.as_ref().and_then(|q| q.front_deadline()) {
            match &self.reading {
                // A relayed body keeps the body's times while the client is read; while the
                // upstream has no room, its send timeout keeps the time.
                Reading::Body(b) if b.relayed && self.held != Hold::Relay => {
                    (Timer::Body, Self::body_deadline(b, cx))
                }
                _ => (Timer::Deferred, at),
            }
        } else if self.tail.is_some() {
            // A streamed body is waiting for its next piece: whoever sends it keeps the time
            // (the upstream's read timeout ends it with `stream_abort`).
            (Timer::Deferred, u64::MAX)
        } else if let Reading::Body(b) = &self.reading {
            (Timer::Body, Self::body_deadline(b, cx))
        } else if !self.inbuf_empty() && matches!(self.reading, Reading::Head) {
            if self.timer == Timer::Head {
                return; // the head timer runs from the request's first byte
            }
            (Timer::Head, cx.now + cfg.header_timeout)
        } else if self.timer == Timer::Fresh && self.requests == 0 {
            return; // the first request's timer runs from the connection's start
        } else {
            (Timer::Idle, cx.now + cfg.keepalive_timeout)
        };
        self.timer = timer;
        self.deadline = deadline;
    }
}

/// The body of every 413: a request body over its limit, declared or found while it was
/// read, refused by the connection (HTTP/1.1, /2 or /3) or by the application. One message,
/// so that clients and error renderers see one (it once read three ways).
pub(crate) const TOO_LARGE: &str = "Content Too Large\n";

/// A plain-text response whose body names the status (and why, when given); a 413 is
/// always [`TOO_LARGE`].
pub(crate) fn status_response(status: u16, why: &str) -> Response {
    if status == 413 {
        return Response::text(TOO_LARGE).status(413);
    }
    let body = if why.is_empty() {
        format!("{status} {}\n", reason(status))
    } else {
        format!("{status} {}: {why}\n", reason(status))
    };
    Response::new(status)
        .content_type("text/plain")
        .body(Body::Owned(body.into_bytes()))
}
