//! One upstream connection's states and calls (see the module doc of `h1c`).
//!
//! Input: [`Conn::connected`], [`Conn::start`] (a request), [`Conn::body`] and
//! [`Conn::body_end`] (its body), [`Conn::tunnel_send`], [`Conn::recv`] (response bytes),
//! [`Conn::eof`], [`Conn::broken`], [`Conn::on_timer`], [`Conn::resume`] and the transmit
//! reports [`Conn::sent`] / [`Conn::stalled`]. Output: calls into the [`Exchange`],
//! [`Conn::poll_transmit`] (what to send, or close), [`Conn::deadline`] (when to call
//! `on_timer`) and [`Conn::wants_input`]. Times are the driver's milliseconds.
//!
//! Invariants: an exchange hears exactly one ending ([`Exchange::end`] or
//! [`Exchange::failed`]); nothing it is given comes from a response that later proves
//! malformed in its head; a connection goes back to the pool ([`Conn::is_idle`]) only after a
//! whole response to a wholly sent request, with no byte left over.
#![forbid(unsafe_code)]

use linerate_http1::{
    BodyLength, FieldSpan, Limits, ResponseBody, ResponseError, ResponseInfo, parse_response_strict,
};

/// The largest output buffer a connection keeps for its next request once its bytes went
/// out ([`Conn::reuse_output`]): a request head fits many times over; one a request body
/// grew is freed, so a pooled connection holds little.
const KEPT_OUTPUT: usize = 4 * 1024;

/// The upstream's timeouts (milliseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timeouts {
    /// From the connect to the connection being established.
    pub connect: u64,
    /// Request bytes waiting for the upstream to take them.
    pub send: u64,
    /// From the request's last byte sent to the response's first byte.
    pub first_byte: u64,
    /// Between two reads of the response.
    pub read: u64,
    /// A pooled connection's life without a request.
    pub idle: u64,
    /// A tunnel (after 101) with no byte either way.
    pub tunnel: u64,
}

/// How the request's body goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReqBody {
    /// No body (the head says none).
    None,
    /// Exactly this many bytes (the head says `Content-Length`).
    Length(u64),
    /// Chunked (the head says `Transfer-Encoding: chunked`): each piece becomes a chunk.
    Chunked,
}

/// Which wait a timeout ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Connect,
    Send,
    FirstByte,
    Read,
}

/// Why an exchange failed. Each maps to what the proxy does: a 502 or 504 while nothing was
/// forwarded, else the client's connection closes (a partial answer is never completed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UpError {
    /// The connection could not be made (the driver reports it: refused, unreachable).
    Connect,
    /// A timeout passed in this phase.
    Timeout(Phase),
    /// The upstream closed or reset the connection before any byte of the response: a pooled
    /// connection it closed meanwhile, typically; the request may go to a fresh one.
    Closed,
    /// The response is malformed (strict reading): 502, the connection dropped.
    Malformed(ResponseError),
    /// The connection ended inside the response.
    CutOff,
    /// The upstream sent what was not asked for: a 101 to a request that did not ask to
    /// upgrade.
    Unsolicited,
}

impl UpError {
    /// Whether this failure counts against the server for passive health (`max_fails`), as
    /// nginx's default `proxy_next_upstream error timeout`: the server could not be reached,
    /// did not answer in time, or closed before answering. A malformed or unsolicited answer
    /// (nginx's `invalid_header`) is not: it is this request's answer, and a client that can
    /// make one path answer badly must not take healthy servers out one by one. An answer
    /// cut after it began is not either (the caller passes `answered`).
    pub(crate) fn counts_against_server(self, answered: bool) -> bool {
        !answered
            && matches!(
                self,
                UpError::Connect | UpError::Timeout(_) | UpError::Closed
            )
    }

    /// Whether nothing of a response arrived, so the request got no answer at all.
    #[allow(dead_code)] // for the Upgrade tunnel and streamed request bodies
    pub(crate) fn unanswered(self) -> bool {
        matches!(
            self,
            UpError::Connect | UpError::Closed | UpError::Timeout(_)
        )
    }
}

impl std::fmt::Display for UpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpError::Connect => f.write_str("connect failed"),
            UpError::Timeout(Phase::Connect) => f.write_str("connect timed out"),
            UpError::Timeout(Phase::Send) => f.write_str("sending the request timed out"),
            UpError::Timeout(Phase::FirstByte) => f.write_str("no response in time"),
            UpError::Timeout(Phase::Read) => f.write_str("the response stalled"),
            UpError::Closed => f.write_str("closed before answering"),
            UpError::Malformed(e) => write!(f, "malformed response: {e}"),
            UpError::CutOff => f.write_str("closed inside the response"),
            UpError::Unsolicited => f.write_str("an answer that was not asked for"),
        }
    }
}

/// The owner of the request in flight: it hears the response.
pub(crate) trait Exchange {
    /// An interim (1xx) response other than 100 Continue and 101, before the final one (RFC
    /// 9110 §15.2: a proxy forwards them; the client's own 100 came from this server): `head`
    /// is its bytes as received and `fields` their spans in it.
    fn interim(&mut self, info: &ResponseInfo, head: &[u8], fields: &[FieldSpan]);
    /// The final response's head (never a 1xx but 101, which only an upgrade request gets):
    /// `head` is its bytes as received and `fields` their spans in it.
    fn head(&mut self, info: &ResponseInfo, head: &[u8], fields: &[FieldSpan]);
    /// A piece of the body (after a 101, of the tunnel), in order. `false`: no more for now;
    /// the connection holds the rest until [`Conn::resume`].
    fn data(&mut self, data: &[u8]) -> bool;
    /// The response ended (after a 101: the upstream closed its side of the tunnel).
    fn end(&mut self);
    /// The exchange failed; nothing more comes.
    fn failed(&mut self, error: UpError);
}

/// The request body's framing as it goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BodyOut {
    /// All of it is in the output.
    Done,
    /// This many bytes are still to come.
    Length(u64),
    Chunked,
}

/// Where reading the response is.
#[derive(Debug)]
enum Reading {
    Head,
    Body {
        body: ResponseBody,
        /// The connection ends with this response.
        closes: bool,
    },
}

/// A request in flight.
#[derive(Debug)]
struct Busy {
    out: BodyOut,
    reading: Reading,
    /// A HEAD request: its answer has no body whatever the head says.
    head_request: bool,
    /// The request asked to upgrade: a 101 is its answer.
    upgrade: bool,
    /// A byte of the response arrived.
    answered: bool,
}

#[derive(Debug)]
enum State {
    /// Connecting; a request may already wait in the output.
    Connecting {
        busy: Option<Busy>,
    },
    /// In the pool, or just connected with nothing to send.
    Idle,
    Busy(Busy),
    /// After a 101: bytes pass both ways as they are.
    Tunnel,
    Closed,
}

/// Which deadline the connection is under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timer {
    None,
    Connect,
    Send,
    FirstByte,
    Read,
    Idle,
    Tunnel,
}

/// One connection to an upstream server.
pub(crate) struct Conn {
    state: State,
    timeouts: Timeouts,
    /// Bytes for the upstream not yet handed to the driver.
    out: Vec<u8>,
    /// Output handed to the driver and not yet reported sent.
    in_flight: bool,
    /// Response bytes held: a head split over reads, or what an exchange could not take.
    inbuf: Vec<u8>,
    /// The exchange said it was full: hold input until [`Conn::resume`].
    paused: bool,
    /// The upstream sent its last byte (EOF); what is held still goes to the exchange first.
    ended: bool,
    fields: Vec<FieldSpan>,
    timer: Timer,
    deadline: u64,
    /// Exchanges completed on this connection (a reused connection is older than 0).
    exchanges: u32,
    /// A tunnel whose client side ended: close once the output is out.
    closing: bool,
}

/// What to do with the socket next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transmit {
    /// Send every byte of [`Conn::take_output`], then report [`Conn::sent`].
    Bytes,
    /// Close the connection.
    Close,
    /// Nothing to send until a call changes that.
    Idle,
}

impl Conn {
    /// A connection being made at `now`.
    pub(crate) fn new(now: u64, timeouts: Timeouts) -> Conn {
        Conn {
            state: State::Connecting { busy: None },
            timeouts,
            out: Vec::new(),
            in_flight: false,
            inbuf: Vec::new(),
            paused: false,
            ended: false,
            fields: Vec::new(),
            timer: Timer::Connect,
            deadline: now + timeouts.connect,
            exchanges: 0,
            closing: false,
        }
    }

    /// The connection is established.
    pub(crate) fn connected(&mut self, now: u64) {
        if let State::Connecting { busy } = &mut self.state {
            self.state = match busy.take() {
                Some(b) => State::Busy(b),
                None => State::Idle,
            };
            self.set_timer(now);
        }
    }

    /// Whether a request may start: connecting with none queued, or idle.
    pub(crate) fn is_free(&self) -> bool {
        matches!(self.state, State::Idle | State::Connecting { busy: None })
    }

    /// The connect is still under way.
    pub(crate) fn is_connecting(&self) -> bool {
        matches!(self.state, State::Connecting { .. })
    }

    /// In the pool: established, no request, nothing held.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(self.state, State::Idle)
    }

    /// It served an exchange before this one (an upstream may have closed it meanwhile).
    pub(crate) fn reused(&self) -> bool {
        self.exchanges > 0
    }

    /// Sends a request: `head` as framed by the caller (its body fields saying `body`), then
    /// the body through [`Conn::body`]. Only when [`Conn::is_free`].
    pub(crate) fn start(
        &mut self,
        head: &[u8],
        body: ReqBody,
        head_request: bool,
        upgrade: bool,
        now: u64,
    ) {
        debug_assert!(self.is_free(), "a request while another is in flight");
        self.out.extend_from_slice(head);
        let busy = Busy {
            out: match body {
                ReqBody::None | ReqBody::Length(0) => BodyOut::Done,
                ReqBody::Length(n) => BodyOut::Length(n),
                ReqBody::Chunked => BodyOut::Chunked,
            },
            reading: Reading::Head,
            head_request,
            upgrade,
            answered: false,
        };
        self.state = match self.state {
            State::Connecting { .. } => State::Connecting { busy: Some(busy) },
            _ => State::Busy(busy),
        };
        self.set_timer(now);
    }

    /// A piece of the request's body (a `Length` body is given exactly its bytes in all).
    pub(crate) fn body(&mut self, data: &[u8]) {
        let (Some(b), out) = self.busy_and_out() else {
            return; // the exchange ended (the upstream answered early and closed)
        };
        match &mut b.out {
            BodyOut::Length(left) => {
                let n = (data.len() as u64).min(*left);
                *left -= n;
                if *left == 0 {
                    b.out = BodyOut::Done;
                }
                out.extend_from_slice(&data[..n as usize]);
            }
            BodyOut::Chunked if !data.is_empty() => {
                let mut hex = [0u8; 16];
                let size = fmt_hex(data.len(), &mut hex);
                out.extend_from_slice(size);
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(data);
                out.extend_from_slice(b"\r\n");
            }
            BodyOut::Chunked | BodyOut::Done => {}
        }
    }

    /// The request's body ended.
    #[allow(dead_code)] // for the Upgrade tunnel and streamed request bodies
    pub(crate) fn body_end(&mut self) {
        let (Some(b), out) = self.busy_and_out() else {
            return;
        };
        if b.out == BodyOut::Chunked {
            out.extend_from_slice(b"0\r\n\r\n");
        }
        b.out = BodyOut::Done;
    }

    /// Bytes for the upstream side of a tunnel.
    pub(crate) fn tunnel_send(&mut self, data: &[u8]) {
        if matches!(self.state, State::Tunnel) && !self.closing {
            self.out.extend_from_slice(data);
        }
    }

    /// The client's side of the tunnel ended: the exchange ends now, and the connection
    /// closes once the bytes already given are out (nothing more is read).
    pub(crate) fn tunnel_close(&mut self, ex: &mut impl Exchange) {
        if !matches!(self.state, State::Tunnel) || self.closing {
            return;
        }
        self.closing = true;
        self.inbuf = Vec::new();
        if self.out.is_empty() && !self.in_flight {
            self.close();
        }
        ex.end();
    }

    /// Output bytes not yet handed over (the caller stops reading the client while this is
    /// large).
    pub(crate) fn out_len(&self) -> usize {
        self.out.len()
    }

    /// The request in flight (if any) and the output, borrowed apart.
    fn busy_and_out(&mut self) -> (Option<&mut Busy>, &mut Vec<u8>) {
        let busy = match &mut self.state {
            State::Busy(b) | State::Connecting { busy: Some(b) } => Some(b),
            _ => None,
        };
        (busy, &mut self.out)
    }

    /// What to do next.
    pub(crate) fn poll_transmit(&self) -> Transmit {
        match self.state {
            State::Closed => Transmit::Close,
            State::Connecting { .. } => Transmit::Idle,
            State::Tunnel if self.closing && self.out.is_empty() && !self.in_flight => {
                Transmit::Close
            }
            _ if !self.out.is_empty() && !self.in_flight => Transmit::Bytes,
            _ => Transmit::Idle,
        }
    }

    /// The output to send (after [`Transmit::Bytes`]).
    pub(crate) fn take_output(&mut self) -> Vec<u8> {
        self.in_flight = true;
        std::mem::take(&mut self.out)
    }

    /// The buffer [`Conn::take_output`] gave, back from the driver once its bytes went out:
    /// kept, emptied, for the next request's head (without it each pooled exchange
    /// allocated its output and freed it after the send: callgrind, docs/benchmarks.md's
    /// section on a miss's instructions). Dropped when output was written meanwhile or it grew
    /// past [`KEPT_OUTPUT`].
    pub(crate) fn reuse_output(&mut self, mut buf: Vec<u8>) {
        if self.out.capacity() == 0 && buf.capacity() <= KEPT_OUTPUT {
            buf.clear();
            self.out = buf;
        }
    }

    /// The output handed over is sent.
    pub(crate) fn sent(&mut self, now: u64) {
        self.in_flight = false;
        self.set_timer(now);
    }

    /// The output handed over waits for the upstream to take it.
    pub(crate) fn stalled(&mut self, now: u64) {
        if self.timer != Timer::Send {
            self.timer = Timer::Send;
            self.deadline = now + self.timeouts.send;
        }
    }

    /// Whether to read from the socket now.
    pub(crate) fn wants_input(&self) -> bool {
        match self.state {
            State::Idle => true,
            State::Busy(_) => !self.paused,
            State::Tunnel => !self.paused && !self.closing,
            State::Connecting { .. } | State::Closed => false,
        }
    }

    /// When to call [`Conn::on_timer`] (`u64::MAX`: never).
    pub(crate) fn deadline(&self) -> u64 {
        if self.timer == Timer::None {
            u64::MAX
        } else {
            self.deadline
        }
    }

    /// The deadline after a change at `now`.
    fn set_timer(&mut self, now: u64) {
        let (timer, after) = match &self.state {
            State::Connecting { .. } => return, // fixed at the start
            State::Closed => (Timer::None, 0),
            State::Idle => (Timer::Idle, self.timeouts.idle),
            State::Tunnel => (Timer::Tunnel, self.timeouts.tunnel),
            _ if self.in_flight => {
                // The send timer runs from the stall ([`Conn::stalled`]).
                if self.timer == Timer::Send {
                    return;
                }
                (Timer::Send, self.timeouts.send)
            }
            State::Busy(_) if self.paused => (Timer::None, 0),
            State::Busy(b) if !b.answered => (Timer::FirstByte, self.timeouts.first_byte),
            State::Busy(_) => (Timer::Read, self.timeouts.read),
        };
        self.timer = timer;
        self.deadline = now.saturating_add(after);
    }

    /// A deadline passed (the driver calls this at or after [`Conn::deadline`]).
    pub(crate) fn on_timer(&mut self, now: u64, ex: &mut impl Exchange) {
        if now < self.deadline() {
            return;
        }
        let phase = match self.timer {
            Timer::None => return,
            Timer::Idle => {
                self.close();
                return;
            }
            Timer::Tunnel => {
                self.close();
                ex.end();
                return;
            }
            Timer::Connect => Phase::Connect,
            Timer::Send => Phase::Send,
            Timer::FirstByte => Phase::FirstByte,
            Timer::Read => Phase::Read,
        };
        self.fail(UpError::Timeout(phase), ex);
    }

    /// The connect failed.
    pub(crate) fn connect_failed(&mut self, ex: &mut impl Exchange) {
        self.fail(UpError::Connect, ex);
    }

    /// Response bytes arrived.
    pub(crate) fn recv(&mut self, data: &[u8], now: u64, ex: &mut impl Exchange) {
        match self.state {
            State::Busy(_) | State::Tunnel => {}
            State::Idle => {
                // Nothing was asked: an upstream talking out of turn is not reused.
                self.close();
                return;
            }
            State::Connecting { .. } | State::Closed => return,
        }
        if self.inbuf.is_empty() {
            let used = self.process(data, ex);
            if used < data.len() && self.holds_input() {
                self.inbuf.extend_from_slice(&data[used..]);
            }
        } else {
            self.inbuf.extend_from_slice(data);
            self.process_held(ex);
        }
        self.set_timer(now);
    }

    /// After the upstream's EOF, once every byte before it went to the exchange: the end of a
    /// body that runs to the close (or of a tunnel), else the response was cut off.
    fn after_end(&mut self, ex: &mut impl Exchange) {
        if !self.ended || self.paused || !self.inbuf.is_empty() {
            return;
        }
        match &self.state {
            State::Busy(b) => match &b.reading {
                Reading::Body {
                    body: ResponseBody::UntilClose,
                    ..
                } => self.finish(false, ex),
                _ if b.answered => self.fail(UpError::CutOff, ex),
                _ => self.fail(UpError::Closed, ex),
            },
            State::Tunnel => {
                self.close();
                ex.end();
            }
            _ => self.close(),
        }
    }

    /// The exchange can take more: go on with what was held.
    pub(crate) fn resume(&mut self, now: u64, ex: &mut impl Exchange) {
        if !self.paused {
            return;
        }
        self.paused = false;
        self.process_held(ex);
        self.after_end(ex);
        self.set_timer(now);
    }

    fn process_held(&mut self, ex: &mut impl Exchange) {
        let held = std::mem::take(&mut self.inbuf);
        let used = self.process(&held, ex);
        if used < held.len() && self.holds_input() {
            let mut rest = held;
            rest.drain(..used);
            self.inbuf = rest;
        }
    }

    /// Whether input left over is kept (a head in pieces, a paused exchange).
    fn holds_input(&self) -> bool {
        matches!(self.state, State::Busy(_) | State::Tunnel)
    }

    /// Reads `input` into the exchange; returns the bytes used.
    fn process(&mut self, input: &[u8], ex: &mut impl Exchange) -> usize {
        let mut pos = 0;
        loop {
            if self.paused {
                return pos;
            }
            let b = match &mut self.state {
                State::Tunnel => {
                    if pos < input.len() && !ex.data(&input[pos..]) {
                        self.paused = true;
                    }
                    return input.len();
                }
                State::Busy(b) => b,
                _ => return pos,
            };
            if pos == input.len() {
                return pos;
            }
            b.answered = true;
            match &mut b.reading {
                Reading::Head => {
                    let parsed = parse_response_strict(&input[pos..], Some(&mut self.fields));
                    let info = match parsed {
                        Ok(Some(info)) => info,
                        Ok(None) => return pos,
                        Err(e) => {
                            self.fail(UpError::Malformed(e), ex);
                            return input.len();
                        }
                    };
                    let head = &input[pos..pos + info.head_len];
                    pos += info.head_len;
                    if info.is_interim() {
                        // 100 Continue is not forwarded: the client's own 100 came from this
                        // server when its body was read.
                        if info.status != 100 {
                            ex.interim(&info, head, &self.fields);
                        }
                        continue;
                    }
                    if info.status == 101 {
                        if !b.upgrade {
                            self.fail(UpError::Unsolicited, ex);
                            return input.len();
                        }
                        ex.head(&info, head, &self.fields);
                        self.state = State::Tunnel;
                        continue;
                    }
                    let length = info.body_length(b.head_request);
                    let closes = info.closes(b.head_request);
                    ex.head(&info, head, &self.fields);
                    b.reading = Reading::Body {
                        body: ResponseBody::new(length),
                        closes,
                    };
                    if length == BodyLength::Empty || length == BodyLength::Length(0) {
                        self.finish(input.len() > pos, ex);
                        return input.len();
                    }
                }
                Reading::Body { body, .. } => {
                    // The chunked decoder's limits (chunk extensions, trailers) are the ones
                    // requests get.
                    let step = match body.decode(&input[pos..], &Limits::default()) {
                        Ok(step) => step,
                        Err(e) => {
                            self.fail(UpError::Malformed(e), ex);
                            return input.len();
                        }
                    };
                    pos += step.consumed;
                    if !step.data.is_empty() && !ex.data(step.data) {
                        self.paused = true;
                    }
                    if step.done {
                        self.finish(input.len() > pos, ex);
                        return input.len();
                    }
                    if step.consumed == 0 {
                        return pos;
                    }
                }
            }
        }
    }

    /// The response is whole. The connection goes back to the pool unless it ends with this
    /// response, the request's body is not all out, or bytes came after the response.
    fn finish(&mut self, extra: bool, ex: &mut impl Exchange) {
        let State::Busy(b) = &self.state else {
            return;
        };
        let closes = matches!(b.reading, Reading::Body { closes: true, .. });
        self.paused = false;
        self.inbuf.clear();
        if closes || extra || self.ended || b.out != BodyOut::Done {
            self.close();
        } else {
            self.exchanges += 1;
            self.state = State::Idle;
        }
        ex.end();
    }

    /// The upstream will send nothing more.
    pub(crate) fn eof(&mut self, ex: &mut impl Exchange) {
        match self.state {
            State::Busy(_) | State::Tunnel => {
                self.ended = true;
                self.after_end(ex);
            }
            _ => self.close(),
        }
    }

    /// The connection broke (reset, a send failed).
    pub(crate) fn broken(&mut self, ex: &mut impl Exchange) {
        match &self.state {
            State::Busy(b) => {
                let error = if b.answered {
                    UpError::CutOff
                } else {
                    UpError::Closed
                };
                self.fail(error, ex);
            }
            State::Connecting { busy: Some(_) } => self.fail(UpError::Connect, ex),
            State::Tunnel => {
                self.close();
                ex.end();
            }
            _ => self.close(),
        }
    }

    /// Ends the exchange in flight with `error` (if there is one) and closes.
    fn fail(&mut self, error: UpError, ex: &mut impl Exchange) {
        let had = matches!(
            self.state,
            State::Busy(_) | State::Connecting { busy: Some(_) }
        );
        self.close();
        if had {
            ex.failed(error);
        }
    }

    fn close(&mut self) {
        self.state = State::Closed;
        self.ended = true;
        self.timer = Timer::None;
        self.paused = false;
        self.inbuf = Vec::new();
        self.out = Vec::new();
    }
}

/// `n` in lowercase hex, written into `buf`; the digits written.
fn fmt_hex(mut n: usize, buf: &mut [u8; 16]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b"0123456789abcdef"[n & 15];
        n >>= 4;
        if n == 0 {
            return &buf[i..];
        }
    }
}
