//! One WebSocket connection's server side (RFC 6455), sans I/O: the driver hands it input,
//! end of input and the time; it hands whole messages to its [`Handler`] and answers with
//! what to transmit ([`Transmit`]) and when to call again ([`Conn::deadline`]).
//!
//! It owns the protocol's rules: frames read in any split, unmasked as they are copied;
//! fragmentation with control frames between fragments; text checked as UTF-8 piece by
//! piece (an invalid byte fails the connection at once, 1007); pings answered; the close
//! handshake both ways with a timeout; the named limits (frame, message: 1009; output held:
//! reading stops); server pings on an idle connection and a close when none is answered;
//! permessage-deflate where it was agreed (RFC 7692: RSV1 on a message's first frame only,
//! inflated as it comes, the limit on the inflated size, text checked once inflated).
//! Buffers are the worker's pool's and held only while a frame, a message or output is
//! unfinished, so an idle connection holds none (but an inflater, when the client keeps its
//! compression context between messages).
#![forbid(unsafe_code)]

use linerate_ws::close;
use linerate_ws::deflate::{self, Agreed, Inflate};
use linerate_ws::frame::{self, FrameHead, Opcode};
use linerate_ws::utf8::Utf8;

use super::{Message, WsError, WsLimits};
use crate::h1::Transmit;
use crate::pool::Pool;

/// What the connection tells its application.
pub(crate) trait Handler {
    /// A whole message arrived; `out` sends on this connection.
    fn message(&mut self, msg: Message<'_>, out: &mut Sending);
    /// The connection ended: the client's close code (`None` for a close frame without
    /// one, or for a connection that ended without a close handshake).
    fn closed(&mut self, code: Option<u16>);
    /// The application takes no more messages for now: the driver stops reading, and an
    /// idle connection is not pinged meanwhile (its answer could not be read).
    fn paused(&self) -> bool {
        false
    }
}

/// The sending side: frames staged for the socket, and whether the server's close frame is
/// among them (after it, nothing more is sent: RFC 6455 §5.5.1).
#[derive(Debug, Default)]
pub(crate) struct Sending {
    out: Vec<u8>,
    close_sent: bool,
    /// The compressor's window where permessage-deflate was agreed (see
    /// [`super::deflate::write_message`]).
    deflate: Option<u8>,
}

impl Sending {
    /// Stages a text message; false once the connection is closing.
    pub(crate) fn text(&mut self, text: &str) -> bool {
        self.frame(Opcode::Text, text.as_bytes())
    }

    /// Stages a binary message; false once the connection is closing.
    pub(crate) fn binary(&mut self, data: &[u8]) -> bool {
        self.frame(Opcode::Binary, data)
    }

    /// Stages the server's close frame (once): `code` must be one a peer may send
    /// (1000–1003, 1007–1014, 3000–4999; otherwise 1011 is sent), the reason is cut to fit
    /// the 125 bytes of a control frame, at a character boundary.
    pub(crate) fn close(&mut self, code: u16, reason: &str) {
        if self.close_sent {
            return;
        }
        let code = if close::valid_code(code) {
            code
        } else {
            close::INTERNAL_ERROR
        };
        let mut end = reason.len().min(frame::MAX_CONTROL_PAYLOAD as usize - 2);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        frame::write_head(&mut self.out, true, false, Opcode::Close, 2 + end);
        self.out.extend_from_slice(&code.to_be_bytes());
        self.out.extend_from_slice(&reason.as_bytes()[..end]);
        self.close_sent = true;
    }

    /// Bytes staged and not yet taken by the driver.
    pub(crate) fn queued(&self) -> usize {
        self.out.len()
    }

    fn frame(&mut self, opcode: Opcode, payload: &[u8]) -> bool {
        if self.close_sent {
            return false;
        }
        super::deflate::write_message(&mut self.out, opcode, payload, self.deflate);
        true
    }

    /// A control frame's echo (a pong), whatever the data messages' state.
    fn control(&mut self, opcode: Opcode, payload: &[u8]) {
        if !self.close_sent {
            frame::write_head(&mut self.out, true, false, opcode, payload.len());
            self.out.extend_from_slice(payload);
        }
    }
}

/// The frame being read.
#[derive(Clone, Copy, Debug)]
struct Reading {
    head: FrameHead,
    /// Payload bytes taken so far.
    taken: u64,
}

/// The data message being assembled.
#[derive(Debug)]
struct Assembling {
    text: bool,
    /// RSV1 on its first frame: its payload is inflated into `data` as it comes.
    compressed: bool,
    data: Vec<u8>,
    utf8: Utf8,
}

/// Where the connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Life {
    Open,
    /// The server's close frame is staged; the client's is awaited until the deadline.
    Closing {
        until: u64,
    },
    /// Both close frames were exchanged, or the connection failed: once the output is out,
    /// the write side is shut down (the server closes first, RFC 6455 §7.1.1).
    Done,
    /// The write side is shut: input is read and dropped until EOF or the deadline, so the
    /// close frame is not lost to a reset.
    Linger {
        until: u64,
    },
    /// Close the socket now.
    Gone,
}

pub(crate) struct Conn {
    limits: WsLimits,
    life: Life,
    /// Header bytes of a frame whose header is not all in (at most 13).
    stash: Vec<u8>,
    frame: Option<Reading>,
    msg: Option<Assembling>,
    /// A control frame's payload split across reads (at most 125 bytes).
    control: Vec<u8>,
    send: Sending,
    /// The driver holds the output it took ([`Conn::take_output`]) until [`Conn::sent`].
    in_flight: bool,
    /// When input last came, and whether a ping went out since.
    last_input: u64,
    pinged: bool,
    /// When output last moved (the send timeout counts from it while output waits).
    last_sent: u64,
    /// The handler heard that the connection ended.
    told: bool,
    /// permessage-deflate, where the handshake agreed to it.
    deflate: Option<Agreed>,
    /// The client's compressed messages' inflater: made for the first one, then kept while
    /// the client keeps its context between messages (dropped after each message when it
    /// agreed to `client_no_context_takeover`).
    inflate: Option<Box<Inflate>>,
}

impl Conn {
    /// A connection whose handshake has just been answered with a 101.
    pub(crate) fn new(now: u64, limits: WsLimits) -> Conn {
        Conn {
            limits,
            life: Life::Open,
            stash: Vec::new(),
            frame: None,
            msg: None,
            control: Vec::new(),
            send: Sending::default(),
            in_flight: false,
            last_input: now,
            pinged: false,
            last_sent: now,
            told: false,
            deflate: None,
            inflate: None,
        }
    }

    /// permessage-deflate as the handshake agreed (RFC 7692).
    pub(crate) fn with_deflate(mut self, agreed: Option<Agreed>) -> Conn {
        self.deflate = agreed;
        self.send.deflate = agreed.and_then(|a| a.compress_bits());
        self
    }

    /// The connection starts with `out` staged (the 101 and any answers before it).
    pub(crate) fn with_output(mut self, out: Vec<u8>) -> Conn {
        self.send.out = out;
        self
    }

    /// Input from the client: every byte is taken.
    pub(crate) fn recv<H: Handler>(
        &mut self,
        mut input: &[u8],
        now: u64,
        pool: &mut Pool,
        h: &mut H,
    ) {
        self.last_input = now;
        self.pinged = false;
        if let Life::Linger { .. } | Life::Done | Life::Gone = self.life {
            return;
        }
        while !input.is_empty() && matches!(self.life, Life::Open | Life::Closing { .. }) {
            let used = match self.step(input, now, pool, h) {
                Ok(used) => used,
                Err(e) => {
                    self.fail(e, pool, h);
                    return;
                }
            };
            input = &input[used..];
        }
    }

    /// Reads from `input` (not empty): a header, or payload of the frame being read.
    fn step<H: Handler>(
        &mut self,
        input: &[u8],
        now: u64,
        pool: &mut Pool,
        h: &mut H,
    ) -> Result<usize, WsError> {
        let Some(mut reading) = self.frame else {
            let used = self.head(input, pool)?;
            if let Some(r) = self.frame
                && r.head.len == 0
            {
                // No payload to wait for (an empty message, a ping without data).
                self.frame = None;
                self.frame_done(r.head, now, pool, h)?;
            }
            return Ok(used);
        };
        let left = reading.head.len - reading.taken;
        let n = (left.min(input.len() as u64)) as usize;
        let piece = &input[..n];
        let offset = reading.taken;
        reading.taken += n as u64;
        if reading.head.opcode.is_control() {
            let at = self.control.len();
            self.control.extend_from_slice(piece);
            frame::unmask(&mut self.control[at..], reading.head.mask, offset);
        } else if self.msg.as_ref().is_some_and(|m| m.compressed) {
            self.inflate_piece(piece, reading.head.mask, offset)?;
        } else {
            let msg = self
                .msg
                .as_mut()
                .expect("a data frame belongs to a message");
            let at = msg.data.len();
            msg.data.extend_from_slice(piece);
            frame::unmask(&mut msg.data[at..], reading.head.mask, offset);
            // A text message that arrives whole in one piece is checked once, when it is
            // handed on; one that comes in pieces is checked as each arrives (fail fast).
            let whole = at == 0 && reading.head.fin && reading.taken == reading.head.len;
            if msg.text && !whole {
                msg.utf8
                    .feed(&msg.data[at..])
                    .map_err(|_| WsError::InvalidUtf8)?;
            }
        }
        if reading.taken < reading.head.len {
            self.frame = Some(reading);
            return Ok(n);
        }
        self.frame = None;
        self.frame_done(reading.head, now, pool, h)?;
        Ok(n)
    }

    /// A piece of a compressed message's payload, unmasked (through a buffer on the
    /// stack: the input is the driver's) and inflated onto the message; its text checked as
    /// it inflates.
    fn inflate_piece(&mut self, piece: &[u8], mask: [u8; 4], offset: u64) -> Result<(), WsError> {
        let msg = self
            .msg
            .as_mut()
            .expect("a data frame belongs to a message");
        let inflate = self.inflate.get_or_insert_with(Box::default);
        let mut buf = [0u8; 2048];
        let mut offset = offset;
        for chunk in piece.chunks(buf.len()) {
            let plain = &mut buf[..chunk.len()];
            plain.copy_from_slice(chunk);
            frame::unmask(plain, mask, offset);
            offset += chunk.len() as u64;
            let at = msg.data.len();
            inflate.piece(plain, &mut msg.data, self.limits.max_message)?;
            if msg.text {
                msg.utf8
                    .feed(&msg.data[at..])
                    .map_err(|_| WsError::InvalidUtf8)?;
            }
        }
        Ok(())
    }

    /// Reads a frame header, from the stash and `input` or from `input` alone.
    fn head(&mut self, input: &[u8], pool: &mut Pool) -> Result<usize, WsError> {
        // RFC 7692 §6: RSV1 marks a compressed message where permessage-deflate was agreed.
        let rsv1_ok = self.deflate.is_some();
        let (head, used) = if self.stash.is_empty() {
            match frame::read_head(input, rsv1_ok, self.limits.max_frame)? {
                Some(head) => (head, head.size),
                None => {
                    self.stash.extend_from_slice(input);
                    return Ok(input.len());
                }
            }
        } else {
            let had = self.stash.len();
            let take = input.len().min(14 - had);
            self.stash.extend_from_slice(&input[..take]);
            match frame::read_head(&self.stash, rsv1_ok, self.limits.max_frame)? {
                Some(head) => {
                    self.stash = Vec::new();
                    (head, head.size - had)
                }
                None => return Ok(take),
            }
        };
        self.begin(head, pool)?;
        Ok(used)
    }

    /// A frame's header is in: check it against the message state (RFC 6455 §5.4).
    fn begin(&mut self, head: FrameHead, pool: &mut Pool) -> Result<(), WsError> {
        match head.opcode {
            Opcode::Continuation => {
                let Some(msg) = &self.msg else {
                    return Err(WsError::Protocol(
                        "continuation frame with no message begun",
                    ));
                };
                // RFC 7692 §6: only a message's first frame says it is compressed.
                if head.rsv1 {
                    return Err(WsError::Protocol("RSV1 set on a continuation frame"));
                }
                // A compressed message's limit is on what it inflates to (checked as it
                // inflates); its frames are bounded by the frame limit.
                if !msg.compressed
                    && msg.data.len() as u64 + head.len > self.limits.max_message as u64
                {
                    return Err(WsError::TooBig);
                }
            }
            Opcode::Text | Opcode::Binary => {
                if self.msg.is_some() {
                    return Err(WsError::Protocol("new message before the last one ended"));
                }
                if !head.rsv1 && head.len > self.limits.max_message as u64 {
                    return Err(WsError::TooBig);
                }
                // Room for what was declared, up to a bound: a client that declares a large
                // frame and sends it slowly holds only what it sent.
                let mut data = pool.get();
                data.reserve((head.len as usize).min(super::RESERVE_BYTES));
                self.msg = Some(Assembling {
                    text: head.opcode == Opcode::Text,
                    compressed: head.rsv1,
                    data,
                    utf8: Utf8::default(),
                });
            }
            Opcode::Close | Opcode::Ping | Opcode::Pong => {}
        }
        self.frame = Some(Reading { head, taken: 0 });
        Ok(())
    }

    /// A frame's payload is all in.
    fn frame_done<H: Handler>(
        &mut self,
        head: FrameHead,
        now: u64,
        pool: &mut Pool,
        h: &mut H,
    ) -> Result<(), WsError> {
        match head.opcode {
            Opcode::Ping => {
                // RFC 6455 §5.5.3: a pong with the ping's data, as soon as practical.
                if self.send.out.capacity() == 0 {
                    self.send.out = pool.get();
                }
                self.send.control(Opcode::Pong, &self.control);
                self.control = Vec::new();
            }
            Opcode::Pong => self.control = Vec::new(),
            Opcode::Close => {
                let code = close::read(&self.control)?.map(|(code, _)| code);
                self.control = Vec::new();
                // RFC 6455 §5.5.1: answer with a close frame, echoing the code.
                self.send.close(code.unwrap_or(close::NORMAL), "");
                self.life = Life::Done;
                self.tell(code, h);
                // Whatever the handler staged before is sent; a message still being
                // assembled is dropped.
                if let Some(mut msg) = self.msg.take() {
                    pool.put(&mut msg.data);
                }
            }
            Opcode::Text | Opcode::Binary | Opcode::Continuation => {
                if !head.fin {
                    return Ok(());
                }
                let mut msg = self.msg.take().expect("a data frame belongs to a message");
                if msg.compressed {
                    self.inflate_end(&mut msg)?;
                }
                if msg.text {
                    msg.utf8.finish().map_err(|_| WsError::InvalidUtf8)?;
                }
                if let Life::Open = self.life {
                    let message = if msg.text {
                        // The whole message's check (its pieces' passed as they came).
                        Message::Text(
                            std::str::from_utf8(&msg.data).map_err(|_| WsError::InvalidUtf8)?,
                        )
                    } else {
                        Message::Binary(&msg.data)
                    };
                    // The answer is staged in a pooled buffer, not one grown from nothing
                    // (a malloc and a realloc per message); an idle connection still holds
                    // none.
                    if self.send.out.capacity() == 0 {
                        self.send.out = pool.get();
                    }
                    h.message(message, &mut self.send);
                    if self.send.out.is_empty() {
                        pool.put(&mut self.send.out);
                    }
                    if self.send.close_sent {
                        self.life = Life::Closing {
                            until: now + self.limits.close_timeout,
                        };
                    }
                }
                // Closing: the server said its last word; messages are dropped.
                pool.put(&mut msg.data);
            }
        }
        Ok(())
    }

    /// A compressed message's payload is all in: the tail inflated (RFC 7692 §7.2.2), and
    /// the inflater dropped when the client keeps no context.
    fn inflate_end(&mut self, msg: &mut Assembling) -> Result<(), WsError> {
        let inflate = self.inflate.get_or_insert_with(Box::default);
        let at = msg.data.len();
        inflate.finish(&mut msg.data, self.limits.max_message)?;
        if msg.text {
            msg.utf8
                .feed(&msg.data[at..])
                .map_err(|_| WsError::InvalidUtf8)?;
        }
        if self.deflate.is_some_and(|a| a.client_no_context_takeover) {
            self.inflate = None;
        }
        Ok(())
    }

    /// Fails the connection (RFC 6455 §7.1.7): a close frame with the error's code, then
    /// the socket closes once it is out.
    fn fail<H: Handler>(&mut self, e: WsError, pool: &mut Pool, h: &mut H) {
        self.send.close(e.code(), e.reason());
        self.life = Life::Done;
        self.frame = None;
        if let Some(mut msg) = self.msg.take() {
            pool.put(&mut msg.data);
        }
        self.tell(None, h);
    }

    fn tell<H: Handler>(&mut self, code: Option<u16>, h: &mut H) {
        if !self.told {
            self.told = true;
            h.closed(code);
        }
    }

    /// The client sent its last byte.
    pub(crate) fn eof<H: Handler>(&mut self, h: &mut H) {
        match self.life {
            Life::Linger { .. } => self.life = Life::Gone,
            // Closing without a close frame from the client (RFC 6455 §7.1.5: 1006).
            Life::Open | Life::Closing { .. } => {
                self.life = Life::Gone;
                self.tell(None, h);
            }
            Life::Done | Life::Gone => {}
        }
    }

    /// The server closes: a close frame with `code` (1001 for a shutdown), then the
    /// client's is awaited for the close timeout.
    pub(crate) fn close(&mut self, code: u16, reason: &str, now: u64) {
        if self.life == Life::Open {
            self.send.close(code, reason);
            self.life = Life::Closing {
                until: now + self.limits.close_timeout,
            };
        }
    }

    /// The time passed [`Conn::deadline`].
    pub(crate) fn on_timer<H: Handler>(&mut self, now: u64, h: &mut H) {
        if now < self.deadline() {
            return;
        }
        match self.life {
            _ if self.output_waits() => {
                // The client stopped reading for the send timeout.
                self.life = Life::Gone;
                self.tell(None, h);
            }
            Life::Open if h.paused() => {
                // Not read because the application is full, not because the client is
                // silent: its liveness is checked once reading resumes.
                self.last_input = now;
                self.pinged = false;
            }
            Life::Open if self.pinged => {
                // No answer to the ping: nobody is there to read a close frame either.
                self.life = Life::Gone;
                self.tell(None, h);
            }
            Life::Open => {
                self.send.control(Opcode::Ping, b"");
                self.pinged = true;
                self.last_input = now;
            }
            Life::Closing { .. } => {
                self.life = Life::Done;
                self.tell(None, h);
            }
            Life::Linger { .. } => self.life = Life::Gone,
            Life::Done | Life::Gone => {}
        }
    }

    /// When to call [`Conn::on_timer`] (`u64::MAX`: never).
    pub(crate) fn deadline(&self) -> u64 {
        if self.output_waits() {
            return self.last_sent + self.limits.send_timeout;
        }
        match self.life {
            Life::Open if self.limits.ping_after == 0 => u64::MAX,
            Life::Open => self.last_input + self.limits.ping_after,
            Life::Closing { until } | Life::Linger { until } => until,
            Life::Done | Life::Gone => u64::MAX,
        }
    }

    fn output_waits(&self) -> bool {
        (self.in_flight || !self.send.out.is_empty()) && self.life != Life::Gone
    }

    /// Whether the driver should read: not while the output held reaches its limit (the
    /// client is slowed, not buffered without bound) or once input is only dropped.
    pub(crate) fn wants_input(&self) -> bool {
        match self.life {
            Life::Open | Life::Closing { .. } => self.send.out.len() < self.limits.max_queued,
            Life::Linger { .. } => true,
            Life::Done | Life::Gone => false,
        }
    }

    /// Whether messages are still handed to the application (the close handshake has not
    /// begun).
    pub(crate) fn is_open(&self) -> bool {
        self.life == Life::Open
    }

    /// What to do with the socket next.
    pub(crate) fn poll_transmit(&self) -> Transmit<'static> {
        if self.life == Life::Gone {
            return Transmit::Close;
        }
        if self.in_flight {
            return Transmit::Idle;
        }
        if !self.send.out.is_empty() {
            return Transmit::Bytes { more: false };
        }
        match self.life {
            Life::Done => Transmit::Shutdown,
            _ => Transmit::Idle,
        }
    }

    /// Hands over the bytes [`Transmit::Bytes`] asked to send.
    pub(crate) fn take_output(&mut self, pool: &mut Pool) -> Vec<u8> {
        self.in_flight = true;
        std::mem::replace(&mut self.send.out, pool.get())
    }

    /// The output taken is on its way.
    pub(crate) fn sent(&mut self, now: u64, pool: &mut Pool) {
        self.in_flight = false;
        self.last_sent = now;
        if self.send.out.is_empty() {
            // An idle connection holds no buffer.
            pool.put(&mut self.send.out);
        }
    }

    /// The write side is shut down: input is dropped until EOF.
    pub(crate) fn shut(&mut self, now: u64) {
        self.life = Life::Linger {
            until: now + self.limits.close_timeout,
        };
    }

    /// Whether frames from a sender elsewhere can be taken now (open, output under its
    /// limit).
    pub(crate) fn sendable(&self) -> bool {
        self.life == Life::Open && self.send.out.len() < self.limits.max_queued
    }

    /// Frames encoded by a sender elsewhere (whole frames, in order); `false` once the
    /// connection is closing (they are dropped).
    pub(crate) fn push_frames(&mut self, frames: &[u8], pool: &mut Pool) -> bool {
        if self.life != Life::Open || self.send.close_sent {
            return false;
        }
        if self.send.out.capacity() == 0 {
            self.send.out = pool.get();
        }
        self.send.out.extend_from_slice(frames);
        true
    }

    /// Messages can be sent from elsewhere (another connection's handler, another thread's
    /// handle): `None` once the connection is closing.
    pub(crate) fn sending(&mut self) -> Option<&mut Sending> {
        (self.life == Life::Open).then_some(&mut self.send)
    }

    /// Bytes of buffers the connection holds beyond its own size (none while idle, but an
    /// inflater the client's compression context keeps).
    pub(crate) fn held(&self) -> usize {
        self.stash.capacity()
            + self.control.capacity()
            + self.send.out.capacity()
            + self.msg.as_ref().map_or(0, |m| m.data.capacity())
            + self.inflate.as_ref().map_or(0, |_| deflate::INFLATE_BYTES)
    }

    /// The buffers go back to the pool (the connection is dropped); the handler hears of
    /// the end if it has not.
    pub(crate) fn release<H: Handler>(&mut self, pool: &mut Pool, h: &mut H) {
        self.tell(None, h);
        self.inflate = None;
        pool.put(&mut self.send.out);
        if let Some(mut msg) = self.msg.take() {
            pool.put(&mut msg.data);
        }
    }
}
