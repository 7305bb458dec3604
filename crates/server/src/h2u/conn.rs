//! One HTTP/2 upstream connection's states and calls (see the module doc of `h2u`).
//!
//! Input: [`Conn::open`] (a request), [`Conn::send`] and [`Conn::trailers`] (its body),
//! [`Conn::cancel`], [`Conn::consumed`] (response bytes the caller has passed on),
//! [`Conn::ping`], [`Conn::goaway`], [`Conn::recv`] (the server's bytes), [`Conn::eof`],
//! [`Conn::on_timer`] and the transmit report [`Conn::sent`]. Output: calls into the
//! [`Events`], [`Conn::poll_transmit`] / [`Conn::take_output`], [`Conn::deadline`] and
//! [`Conn::wants_input`]. Times are the driver's milliseconds.
//!
//! Invariants: every stream opened hears exactly one ending ([`Events::end`] or
//! [`Events::failed`]); every header block the server sends is decoded, in order, so the HPACK
//! table stays in step; the server can never make this connection hold more than the windows
//! we announced (DATA are handed over as they arrive, the windows reopen only as the caller
//! reports them consumed); a connection error writes one GOAWAY and reads nothing more; at
//! most `cancel::RESET_BUDGET` of our resets are on streams the server may not have accepted
//! yet (the rest of a burst is abandoned until it has: `cancel.rs`).
#![forbid(unsafe_code)]

use super::cancel::{Cancel, Cancels};
use super::fields::{Fields, Malformed, Request, ResponseFields, encode_request, encode_trailers};
use crate::h1c::Transmit;
use crate::h2::frame::{self, Code, Head, flag, kind, setting};
use crate::h2::stream::{Calm, MAX_CONTINUATIONS, MAX_HEADER_BLOCK, Ring};
use linerate_hpack as hpack;

/// SETTINGS_INITIAL_WINDOW_SIZE we announce: what the server may send on one stream before
/// the caller has passed any of it on. It bounds what a slow downstream client makes one
/// stream hold.
pub(crate) const STREAM_WINDOW: u32 = 1 << 20;
/// The connection's receive window, raised from 65,535 at the start: what all streams
/// together may hold unconsumed.
pub(crate) const CONN_WINDOW: u32 = 16 << 20;
/// SETTINGS_MAX_HEADER_LIST_SIZE we announce; a response head or trailer block over it fails
/// its stream (RFC 9113 §10.5.1), and its fields are not kept past it.
pub(crate) const MAX_HEADER_LIST: u32 = 64 * 1024;
/// Streams assumed allowed once the server's SETTINGS came without
/// SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113 §6.5.2 leaves it unlimited, §5.1.2 asks for at
/// least 100).
pub(crate) const ASSUMED_MAX_STREAMS: u32 = 100;
/// Streams opened before the server's SETTINGS say how many it takes: one, so a new
/// connection's first request costs no round trip, and no more, so a server that allows
/// fewer than we would guess never has to refuse them (the caller keeps the others waiting
/// for [`Conn::settled`]).
pub(crate) const STREAMS_BEFORE_SETTINGS: usize = 1;
/// How long the server has to acknowledge our SETTINGS (RFC 9113 §6.5.3), and to answer a
/// PING of ours (ms).
pub(crate) const SETTINGS_TIMEOUT: u64 = 10_000;
pub(crate) const PING_TIMEOUT: u64 = 10_000;
/// DATA staged in the output at most: a request body waits (no room) beyond it, so a server
/// announcing huge windows cannot make the output grow without bound.
pub(crate) const OUT_HIGH_WATER: usize = 256 * 1024;
/// The largest stream id (2^31 - 1): once used, the connection takes no new stream.
const LAST_STREAM_ID: u32 = (1 << 31) - 1;

/// What we announce and how long we wait; [`Settings::default`] uses the named limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Settings {
    pub stream_window: u32,
    pub conn_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload we accept.
    pub max_frame: u32,
    pub max_header_list: u32,
    pub settings_timeout: u64,
    pub ping_timeout: u64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            stream_window: STREAM_WINDOW,
            conn_window: CONN_WINDOW,
            max_frame: frame::DEFAULT_MAX_FRAME as u32,
            max_header_list: MAX_HEADER_LIST,
            settings_timeout: SETTINGS_TIMEOUT,
            ping_timeout: PING_TIMEOUT,
        }
    }
}

/// Why the connection failed. Each stream still open hears it as [`StreamError::Connection`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConnError {
    /// The server broke the protocol: we sent GOAWAY with this code and closed.
    Protocol(Code),
    /// The server's GOAWAY carried this error code (not NO_ERROR); the stream was at or
    /// below its last stream id, so it may have been processed.
    GoAway(u32),
    /// The connection ended (EOF or a broken socket) before the stream did.
    Closed,
    /// Our SETTINGS or PING went unanswered in time.
    Timeout,
}

/// Why one stream failed. [`StreamError::retryable`] says whether the request may go to
/// another connection as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamError {
    /// The server did not process it: RST_STREAM(REFUSED_STREAM), or above the last stream
    /// id of its GOAWAY (RFC 9113 §8.7, §6.8).
    Refused,
    /// The connection closed before the stream's HEADERS were handed to the socket: the
    /// server never saw it (RFC 9113 §8.7's "not processed", known on this side).
    Unsent,
    /// The server reset the stream with this code (RFC 9113 §6.4).
    Reset(u32),
    /// The response was malformed (§8.1.1): we reset the stream with PROTOCOL_ERROR.
    Malformed(Malformed),
    /// The server broke a stream rule; we reset the stream with this code: FLOW_CONTROL_ERROR
    /// (more than the window, §6.9.1), STREAM_CLOSED (a frame after its END_STREAM, §5.1),
    /// PROTOCOL_ERROR (a WINDOW_UPDATE of 0, §6.9), FRAME_SIZE_ERROR (a PRIORITY not 5 bytes,
    /// §6.3).
    Protocol(Code),
    Connection(ConnError),
}

impl StreamError {
    /// Safe to send again elsewhere, whatever the method: the server did nothing with it
    /// (RFC 9113 §8.7: it said so, or it never got it).
    pub(crate) fn retryable(self) -> bool {
        matches!(self, StreamError::Refused | StreamError::Unsent)
    }
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamError::Refused => f.write_str("refused by the upstream"),
            StreamError::Unsent => f.write_str("the connection closed before it was sent"),
            StreamError::Reset(c) => write!(f, "reset by the upstream (code {c:#x})"),
            StreamError::Malformed(m) => write!(f, "malformed response: {m}"),
            StreamError::Protocol(c) => write!(f, "the upstream broke a stream rule ({c:?})"),
            StreamError::Connection(ConnError::Protocol(c)) => {
                write!(f, "the upstream broke HTTP/2 ({c:?})")
            }
            StreamError::Connection(ConnError::GoAway(c)) => {
                write!(f, "the upstream went away (code {c:#x})")
            }
            StreamError::Connection(ConnError::Closed) => f.write_str("the connection closed"),
            StreamError::Connection(ConnError::Timeout) => {
                f.write_str("the upstream stopped answering")
            }
        }
    }
}

/// Why a stream could not open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpenError {
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS are open: wait for one to end, or use
    /// another connection.
    NoRoom,
    /// No new stream ever: a GOAWAY either way, stream ids used up, or closed.
    Closing,
    /// The head is larger than the server's SETTINGS_MAX_HEADER_LIST_SIZE.
    TooLarge,
}

/// The owner of the streams: hears each one's response, by stream id.
pub(crate) trait Events {
    /// A response head: an informational one (1xx, any number of them) or the final one. A
    /// final head with END_STREAM (gRPC's Trailers-Only) is followed by [`Events::end`] at
    /// once: its fields are the trailers too.
    fn head(&mut self, id: u32, status: u16, fields: &Fields);
    /// A piece of the response body, in order. Its bytes count against the windows until
    /// [`Conn::consumed`] says they were passed on.
    fn data(&mut self, id: u32, data: &[u8]);
    /// The response's trailer fields (the stream then ends).
    fn trailers(&mut self, id: u32, fields: &Fields);
    /// The response is whole.
    fn end(&mut self, id: u32);
    /// The stream failed; nothing more comes for it.
    fn failed(&mut self, id: u32, error: StreamError);
    /// A stream told "no room" by [`Conn::send`] may send again.
    fn writable(&mut self, id: u32);
    /// Our PING was answered.
    fn pong(&mut self);
    /// The server's GOAWAY: no new stream on this connection (streams it refused heard
    /// [`StreamError::Refused`] before this).
    fn goaway(&mut self);
}

/// Where reading a stream's response is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Recv {
    /// Before the final head (informational heads keep it here).
    Head,
    Body,
    /// END_STREAM came.
    Done,
}

/// An open stream.
#[derive(Debug)]
struct Stream {
    id: u32,
    /// What we may still send on it.
    send_window: i64,
    /// What the server may still send on it before a WINDOW_UPDATE.
    recv_window: i64,
    /// Consumed since the last WINDOW_UPDATE for it.
    recv_owed: i64,
    /// Handed to the caller and not yet consumed.
    unconsumed: i64,
    /// Our END_STREAM is written.
    sent_end: bool,
    recv: Recv,
    /// The response has no content whatever its head says (a HEAD request, 204, 304).
    no_content: bool,
    head_request: bool,
    declared: Option<u64>,
    received: u64,
    /// [`Conn::send`] took less than it was given: say [`Events::writable`] when room opens.
    blocked: bool,
}

/// A header block being collected from HEADERS and CONTINUATION frames.
struct Collect {
    stream: u32,
    end_stream: bool,
    frames: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Waiting for the server's first frame, its SETTINGS (RFC 9113 §3.4).
    Preface,
    Open,
    /// A GOAWAY is written (ours, graceful): close once no stream is open.
    Closing,
    /// Close once the output is out.
    Last,
    Closed,
}

/// One HTTP/2 connection to an upstream server.
pub(crate) struct Conn {
    state: State,
    settings: Settings,
    out: Vec<u8>,
    /// Output handed to the driver and not yet reported sent.
    in_flight: bool,
    /// Input not yet used (a partial frame).
    inbuf: Vec<u8>,
    decoder: hpack::Decoder,
    block: Vec<u8>,
    collect: Option<Collect>,
    /// A request or trailer header block being encoded.
    enc: Vec<u8>,
    fields: Fields,
    /// The server's settings.
    peer_max_streams: u32,
    peer_window: i64,
    peer_max_frame: usize,
    peer_max_list: usize,
    peer_table_size: u32,
    /// The server changed SETTINGS_HEADER_TABLE_SIZE: the next block starts with a size
    /// update (RFC 7541 §4.2).
    table_update: bool,
    send_window: i64,
    recv_window: i64,
    recv_owed: i64,
    streams: Vec<Stream>,
    /// Ended streams whose data the caller still holds: (id, bytes not yet consumed).
    draining: Vec<(u32, i64)>,
    /// The next stream id of ours.
    next_id: u32,
    /// Streams below this id had their HEADERS handed to the driver ([`Conn::take_output`]);
    /// those at or above it are still in `out`, unseen by the server.
    handed_below: u32,
    /// Ids that ended normally (a late DATA or HEADERS is STREAM_CLOSED) and ids we reset
    /// (late frames are ignored, RFC 9113 §5.4.2).
    closed: Ring,
    reset: Ring,
    /// Streams given up before their answer: the reset budget and the abandoned streams
    /// (`cancel.rs`), so a burst of cancellations never looks like a rapid-reset attack.
    cancels: Cancels,
    /// The server's GOAWAY came: no new stream.
    goaway_in: bool,
    calm: Calm,
    /// Our SETTINGS await their ACK until then (`u64::MAX`: acknowledged).
    settings_deadline: u64,
    /// Our PING in flight: its payload and deadline.
    ping: Option<([u8; 8], u64)>,
    pings: u64,
}

impl Conn {
    /// A connection established at `now`: the preface, our SETTINGS and the connection window
    /// are written at once (RFC 9113 §3.4: the client speaks first, requests may follow
    /// before the server's SETTINGS).
    pub(crate) fn new(now: u64, mut settings: Settings) -> Conn {
        // §6.9.2: the connection window starts at 65,535 and SETTINGS cannot lower it.
        settings.conn_window = settings.conn_window.max(frame::DEFAULT_WINDOW as u32);
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(frame::PREFACE);
        frame::settings(
            &mut out,
            &[
                (setting::ENABLE_PUSH, 0),
                (setting::INITIAL_WINDOW_SIZE, settings.stream_window),
                (setting::MAX_FRAME_SIZE, settings.max_frame),
                (setting::MAX_HEADER_LIST_SIZE, settings.max_header_list),
            ],
        );
        let raise = i64::from(settings.conn_window) - frame::DEFAULT_WINDOW;
        if raise > 0 {
            frame::window_update(&mut out, 0, raise as u32);
        }
        Conn {
            state: State::Preface,
            settings,
            out,
            in_flight: false,
            inbuf: Vec::new(),
            decoder: hpack::Decoder::new(),
            block: Vec::new(),
            collect: None,
            enc: Vec::new(),
            fields: Fields::default(),
            peer_max_streams: ASSUMED_MAX_STREAMS,
            peer_window: frame::DEFAULT_WINDOW,
            peer_max_frame: frame::DEFAULT_MAX_FRAME,
            peer_max_list: usize::MAX,
            peer_table_size: hpack::HEADER_TABLE_SIZE as u32,
            table_update: false,
            send_window: frame::DEFAULT_WINDOW,
            recv_window: i64::from(settings.conn_window),
            recv_owed: 0,
            streams: Vec::new(),
            draining: Vec::new(),
            next_id: 1,
            handed_below: 1,
            closed: Ring::default(),
            reset: Ring::default(),
            cancels: Cancels::default(),
            goaway_in: false,
            calm: Calm::default(),
            settings_deadline: now.saturating_add(settings.settings_timeout),
            ping: None,
            pings: 0,
        }
    }

    // ----- the caller's side: requests out -----

    /// Whether [`Conn::open`] would take a request now.
    pub(crate) fn can_open(&self) -> bool {
        self.open_error().is_none()
    }

    fn open_error(&self) -> Option<OpenError> {
        if !matches!(self.state, State::Preface | State::Open)
            || self.goaway_in
            || self.next_id > LAST_STREAM_ID
        {
            return Some(OpenError::Closing);
        }
        let limit = if self.state == State::Preface {
            STREAMS_BEFORE_SETTINGS
        } else {
            self.peer_max_streams as usize
        };
        // Abandoned streams are open on the wire: the server counts them.
        (self.streams.len() + self.cancels.abandoned() >= limit).then_some(OpenError::NoRoom)
    }

    /// Whether the server's SETTINGS came (its SETTINGS_MAX_CONCURRENT_STREAMS is known);
    /// before, [`Conn::open`] takes [`STREAMS_BEFORE_SETTINGS`].
    pub(crate) fn settled(&self) -> bool {
        self.state != State::Preface
    }

    /// Whether stream `id` is still open (its body may go on; a stream whose response ended
    /// and that the server then reset, or that failed, is not).
    pub(crate) fn is_open(&self, id: u32) -> bool {
        self.find(id).is_some()
    }

    /// Streams open (counted against the server's SETTINGS_MAX_CONCURRENT_STREAMS).
    pub(crate) fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Opens a stream for `req`: its HEADERS (and CONTINUATIONs past the server's frame size)
    /// are written, with END_STREAM when `end_stream` (no body). Returns the stream id.
    pub(crate) fn open(&mut self, req: &Request<'_>, end_stream: bool) -> Result<u32, OpenError> {
        if let Some(e) = self.open_error() {
            return Err(e);
        }
        let size = encode_request(&mut self.enc, req, self.table_update);
        if size > self.peer_max_list {
            return Err(OpenError::TooLarge);
        }
        self.table_update = false;
        let id = self.next_id;
        self.next_id += 2;
        frame::headers(
            &mut self.out,
            id,
            &self.enc,
            end_stream,
            self.peer_max_frame,
        );
        let head_request = req.method == b"HEAD";
        self.streams.push(Stream {
            id,
            send_window: self.peer_window,
            recv_window: i64::from(self.settings.stream_window),
            recv_owed: 0,
            unconsumed: 0,
            sent_end: end_stream,
            recv: Recv::Head,
            no_content: head_request,
            head_request,
            declared: None,
            received: 0,
            blocked: false,
        });
        Ok(id)
    }

    fn find(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    /// Body bytes stream `id` may send now: within both send windows and the output's
    /// high-water mark; 0 once its body ended or it is gone.
    pub(crate) fn send_room(&self, id: u32) -> usize {
        let Some(s) = self.find(id).map(|i| &self.streams[i]) else {
            return 0;
        };
        if s.sent_end || !self.writing() {
            return 0;
        }
        let window = s.send_window.min(self.send_window).max(0) as usize;
        window.min(OUT_HIGH_WATER.saturating_sub(self.out.len()))
    }

    /// Sends what fits of `data` on stream `id` as DATA (END_STREAM with the last byte when
    /// `end`); returns the bytes taken. Less than all: the rest waits for
    /// [`Events::writable`]. An empty `data` with `end` ends the body.
    pub(crate) fn send(&mut self, id: u32, data: &[u8], end: bool) -> usize {
        let room = self.send_room(id);
        let Some(idx) = self.find(id) else {
            return 0;
        };
        if self.streams[idx].sent_end || !self.writing() {
            return 0;
        }
        let n = data.len().min(room);
        let ends = end && n == data.len();
        if n == 0 && !ends {
            self.streams[idx].blocked = true;
            return 0;
        }
        let mut rest = &data[..n];
        loop {
            let take = rest.len().min(self.peer_max_frame);
            let last = take == rest.len();
            frame::data(&mut self.out, id, &rest[..take], ends && last);
            rest = &rest[take..];
            if last {
                break;
            }
        }
        self.send_window -= n as i64;
        let s = &mut self.streams[idx];
        s.send_window -= n as i64;
        s.blocked = n < data.len();
        if ends {
            s.sent_end = true;
            self.done_if_closed(idx);
        }
        n
    }

    /// Ends stream `id`'s body with trailer fields (HEADERS with END_STREAM, RFC 9113 §8.1).
    pub(crate) fn trailers(&mut self, id: u32, fields: &[(&[u8], &[u8])]) {
        let Some(idx) = self.find(id) else {
            return;
        };
        if self.streams[idx].sent_end || !self.writing() {
            return;
        }
        encode_trailers(&mut self.enc, fields, self.table_update);
        self.table_update = false;
        frame::headers(&mut self.out, id, &self.enc, true, self.peer_max_frame);
        self.streams[idx].sent_end = true;
        self.done_if_closed(idx);
    }

    /// Gives up stream `id` (the client went away, a deadline passed): RST_STREAM(CANCEL),
    /// at once or, for a stream without its response head beyond the reset budget, once the
    /// server has accepted it (`cancel.rs`); meanwhile it is abandoned, open but unheard.
    /// Its unconsumed bytes return to the connection window; no event follows.
    pub(crate) fn cancel(&mut self, id: u32) {
        let Some(idx) = self.find(id) else {
            self.drained(id);
            return;
        };
        let s = self.streams.swap_remove(idx);
        self.give_back_conn(s.unconsumed);
        if !self.writing() {
            self.reset.push(id);
        } else if self.cancels.cancel(id, s.recv == Recv::Head, s.sent_end) == Cancel::Reset {
            self.reset.push(id);
            frame::rst(&mut self.out, id, Code::Cancel);
        } else if self.cancels.too_many(self.peer_max_streams) {
            // Abandoned streams would starve the connection: it takes no new stream and
            // closes once its live streams are done, ending them with it.
            self.goaway();
        }
        self.end_if_done();
    }

    /// The server's application answered on stream `id` (`ends`: the answer ended it), so
    /// it accepted it and every stream below: an abandoned `id` is reset or, closed both
    /// ways, forgotten; abandoned streams the budget now allows are reset.
    fn answered(&mut self, id: u32, ends: bool) {
        if id.is_multiple_of(2) || id >= self.next_id {
            return; // an idle stream: a connection error, not an answer
        }
        match self.cancels.answered(id, ends) {
            Some(true) => self.reset.push(id),
            Some(false) => self.reset_abandoned(id),
            None => {}
        }
        while let Some(id) = self.cancels.next_reset() {
            self.reset_abandoned(id);
        }
    }

    fn reset_abandoned(&mut self, id: u32) {
        self.reset.push(id);
        if self.writing() {
            frame::rst(&mut self.out, id, Code::Cancel);
        }
    }

    /// `n` bytes of stream `id`'s DATA were passed on: the windows reopen by them, once half a
    /// window is owed (stream) or half the connection's.
    pub(crate) fn consumed(&mut self, id: u32, n: usize) {
        let n = n as i64;
        let writing = self.writing();
        if let Some(idx) = self.find(id) {
            let s = &mut self.streams[idx];
            let n = n.min(s.unconsumed);
            s.unconsumed -= n;
            if s.recv != Recv::Done {
                s.recv_owed += n;
                if s.recv_owed >= i64::from(self.settings.stream_window) / 2 && writing {
                    let owed = std::mem::take(&mut s.recv_owed);
                    s.recv_window += owed;
                    frame::window_update(&mut self.out, id, owed as u32);
                }
            }
            self.give_back_conn(n);
        } else if let Some(i) = self.draining.iter().position(|d| d.0 == id) {
            let n = n.min(self.draining[i].1);
            self.draining[i].1 -= n;
            if self.draining[i].1 == 0 {
                self.draining.swap_remove(i);
            }
            self.give_back_conn(n);
        }
    }

    /// Stream `id`'s held bytes are dropped: back to the connection window at once.
    fn drained(&mut self, id: u32) {
        if let Some(i) = self.draining.iter().position(|d| d.0 == id) {
            let (_, n) = self.draining.swap_remove(i);
            self.give_back_conn(n);
        }
    }

    fn give_back_conn(&mut self, n: i64) {
        self.recv_owed += n;
        if self.recv_owed >= i64::from(self.settings.conn_window) / 2 && self.writing() {
            let owed = std::mem::take(&mut self.recv_owed);
            self.recv_window += owed;
            frame::window_update(&mut self.out, 0, owed as u32);
        }
    }

    /// Sends a PING (a health check, a keepalive) unless one is unanswered; its answer is
    /// [`Events::pong`], its absence by [`Settings::ping_timeout`] fails the connection.
    pub(crate) fn ping(&mut self, now: u64) -> bool {
        if self.ping.is_some() || !self.writing() {
            return false;
        }
        self.pings += 1;
        let data = self.pings.to_be_bytes();
        frame::ping(&mut self.out, &data);
        self.ping = Some((data, now.saturating_add(self.settings.ping_timeout)));
        true
    }

    /// Closes gracefully: GOAWAY(NO_ERROR), no new stream; the open ones finish, then the
    /// connection closes.
    pub(crate) fn goaway(&mut self) {
        if matches!(self.state, State::Preface | State::Open) {
            // RFC 9113 §6.8: the last stream id is the server's (it opens none here).
            frame::goaway(&mut self.out, 0, Code::NoError);
            self.state = State::Closing;
            self.end_if_done();
        }
    }

    // ----- the driver's side -----

    /// Frames may still be written.
    fn writing(&self) -> bool {
        matches!(self.state, State::Preface | State::Open | State::Closing)
    }

    /// Whether to read from the socket now: not while much output waits to go out (a server
    /// that does not read cannot make us buffer the acknowledgements it asks for).
    pub(crate) fn wants_input(&self) -> bool {
        self.writing() && self.out.len() < OUT_HIGH_WATER
    }

    /// No stream open and nothing held: the connection can go back to a pool.
    pub(crate) fn is_idle(&self) -> bool {
        self.streams.is_empty() && self.can_open()
    }

    /// What to do next.
    pub(crate) fn poll_transmit(&self) -> Transmit {
        if self.in_flight {
            return Transmit::Idle;
        }
        if !self.out.is_empty() && self.state != State::Closed {
            return Transmit::Bytes;
        }
        match self.state {
            State::Last | State::Closed => Transmit::Close,
            _ => Transmit::Idle,
        }
    }

    /// The output to send (after [`Transmit::Bytes`]).
    pub(crate) fn take_output(&mut self) -> Vec<u8> {
        self.in_flight = true;
        self.handed_below = self.next_id;
        std::mem::take(&mut self.out)
    }

    /// The output handed over is sent: streams waiting on the output's room may go on.
    pub(crate) fn sent(&mut self, ev: &mut impl Events) {
        self.in_flight = false;
        self.wake_writers(ev);
    }

    /// When to call [`Conn::on_timer`] (`u64::MAX`: never).
    pub(crate) fn deadline(&self) -> u64 {
        if !self.writing() {
            return u64::MAX;
        }
        let ping = self.ping.map_or(u64::MAX, |(_, at)| at);
        self.settings_deadline.min(ping)
    }

    /// A deadline passed: SETTINGS unacknowledged is a connection error (SETTINGS_TIMEOUT,
    /// RFC 9113 §6.5.3); a PING unanswered ends the connection (the server is gone).
    pub(crate) fn on_timer(&mut self, now: u64, ev: &mut impl Events) {
        if !self.writing() {
            return;
        }
        if now >= self.settings_deadline {
            self.conn_error(Code::SettingsTimeout, ConnError::Timeout, ev);
        } else if self.ping.is_some_and(|(_, at)| now >= at) {
            self.fail_all(ConnError::Timeout, true, ev);
            self.close();
        }
    }

    /// The server sends nothing more (EOF), or the connection broke: every open stream fails,
    /// [`StreamError::Unsent`] where its HEADERS never left (the output is dropped).
    pub(crate) fn eof(&mut self, ev: &mut impl Events) {
        self.fail_all(ConnError::Closed, true, ev);
        self.close();
    }

    fn close(&mut self) {
        self.state = State::Closed;
        self.out = Vec::new();
        self.inbuf = Vec::new();
        self.collect = None;
        self.draining.clear();
        self.cancels.clear();
    }

    /// Bytes from the server.
    pub(crate) fn recv(&mut self, data: &[u8], now: u64, ev: &mut impl Events) {
        if !self.writing() {
            return;
        }
        if self.inbuf.is_empty() {
            let used = self.frames(data, now, ev);
            if used < data.len() && self.writing() {
                self.inbuf.extend_from_slice(&data[used..]);
            }
        } else {
            let mut buf = std::mem::take(&mut self.inbuf);
            buf.extend_from_slice(data);
            let used = self.frames(&buf, now, ev);
            if used < buf.len() && self.writing() {
                buf.drain(..used);
                self.inbuf = buf;
            }
        }
        self.wake_writers(ev);
        self.end_if_done();
    }

    /// Handles every complete frame at the start of `buf`; returns the bytes used.
    fn frames(&mut self, buf: &[u8], now: u64, ev: &mut impl Events) -> usize {
        let mut pos = 0;
        while self.writing() && buf.len() - pos >= frame::HEAD_LEN {
            let h = Head::parse(&buf[pos..]);
            if h.len > self.settings.max_frame as usize {
                // RFC 9113 §4.2: larger than the SETTINGS_MAX_FRAME_SIZE we announced.
                self.conn_error(Code::FrameSize, ConnError::Protocol(Code::FrameSize), ev);
                break;
            }
            let end = pos + frame::HEAD_LEN + h.len;
            if end > buf.len() {
                return pos;
            }
            self.frame(h, &buf[pos + frame::HEAD_LEN..end], now, ev);
            pos = end;
        }
        if self.writing() { pos } else { buf.len() }
    }

    fn frame(&mut self, h: Head, p: &[u8], now: u64, ev: &mut impl Events) {
        if self.state == State::Preface {
            if h.kind != kind::SETTINGS || h.has(flag::ACK) {
                // RFC 9113 §3.4: the server's preface is a SETTINGS frame.
                return self.protocol_error(ev);
            }
            self.state = State::Open;
        }
        if let Some(c) = &self.collect
            && (h.kind != kind::CONTINUATION || h.stream != c.stream)
        {
            // RFC 9113 §6.10: a header block is contiguous.
            return self.protocol_error(ev);
        }
        match h.kind {
            kind::DATA => self.data(h, p, now, ev),
            kind::HEADERS => self.headers(h, p, ev),
            kind::CONTINUATION => self.continuation(h, p, ev),
            kind::PRIORITY => self.priority(h, p, now, ev),
            kind::RST_STREAM => self.rst_stream(h, p, ev),
            kind::SETTINGS => self.settings(h, p, now, ev),
            kind::PING => self.ping_frame(h, p, now, ev),
            kind::GOAWAY => self.goaway_frame(h, p, ev),
            kind::WINDOW_UPDATE => self.window_update(h, p, ev),
            // RFC 9113 §6.5.2, §8.4: we sent ENABLE_PUSH 0, so a push is a PROTOCOL_ERROR.
            kind::PUSH_PROMISE => self.protocol_error(ev),
            // §5.5: unknown frame types are ignored.
            _ => {}
        }
    }

    fn protocol_error(&mut self, ev: &mut impl Events) {
        self.conn_error(Code::Protocol, ConnError::Protocol(Code::Protocol), ev);
    }

    /// A connection error: GOAWAY with `code`, every open stream failed, nothing more read;
    /// the connection closes once the GOAWAY is out.
    fn conn_error(&mut self, code: Code, why: ConnError, ev: &mut impl Events) {
        if !self.writing() {
            return;
        }
        frame::goaway(&mut self.out, 0, code);
        // Nothing is written after the GOAWAY (no window given back for failed streams).
        self.state = State::Last;
        // The output still goes out before the GOAWAY: its streams may reach the server.
        self.fail_all(why, false, ev);
        self.inbuf = Vec::new();
        self.collect = None;
        self.draining.clear();
        self.cancels.clear();
    }

    /// Every open stream fails for `why`; when the output is `dropped` (never sent), those
    /// whose HEADERS were still in it fail as [`StreamError::Unsent`].
    fn fail_all(&mut self, why: ConnError, dropped: bool, ev: &mut impl Events) {
        while let Some(last) = self.streams.len().checked_sub(1) {
            let error = if dropped && self.streams[last].id >= self.handed_below {
                StreamError::Unsent
            } else {
                StreamError::Connection(why)
            };
            self.drop_stream(last, error, ev);
        }
    }

    /// Stream `idx` leaves the table for `why`. One still reading its response hears it, and
    /// the bytes it held return to the connection window (the caller drops them); one whose
    /// response ended heard [`Events::end`] already, so it hears nothing more and its bytes
    /// stay owed until consumed.
    fn drop_stream(&mut self, idx: usize, why: StreamError, ev: &mut impl Events) {
        let s = self.streams.swap_remove(idx);
        if s.recv == Recv::Done {
            if s.unconsumed > 0 {
                self.draining.push((s.id, s.unconsumed));
            }
        } else {
            self.give_back_conn(s.unconsumed);
            ev.failed(s.id, why);
        }
    }

    /// Stream `id` fails with `why`: RST_STREAM(`code`) and forgotten; its unconsumed bytes
    /// return to the connection window.
    fn stream_error(&mut self, id: u32, code: Code, why: StreamError, ev: &mut impl Events) {
        frame::rst(&mut self.out, id, code);
        self.reset.push(id);
        if let Some(idx) = self.find(id) {
            self.drop_stream(idx, why, ev);
        }
    }

    fn malformed(&mut self, id: u32, why: Malformed, ev: &mut impl Events) {
        self.stream_error(id, Code::Protocol, StreamError::Malformed(why), ev);
    }

    /// A frame names stream `id`, which is not open: idle (never opened: ours above the next
    /// id, or the server's even ids, which only a push could open) is a connection error
    /// (RFC 9113 §5.1); closed after END_STREAM both ways is STREAM_CLOSED; reset by us, or
    /// too long ago to tell, is ignored (§5.4.2).
    fn not_open(&mut self, id: u32, ev: &mut impl Events) {
        if id.is_multiple_of(2) || id >= self.next_id {
            self.protocol_error(ev);
        } else if self.closed.contains(id) && !self.reset.contains(id) {
            self.conn_error(
                Code::StreamClosed,
                ConnError::Protocol(Code::StreamClosed),
                ev,
            );
        }
    }

    /// Strips padding (RFC 9113 §6.1, §6.2); `None`: the padding is longer than the payload.
    fn unpad(h: &Head, p: &[u8]) -> Option<(usize, usize)> {
        if !h.has(flag::PADDED) {
            return Some((0, p.len()));
        }
        let pad = *p.first()? as usize;
        (pad < p.len()).then(|| (1, p.len() - pad))
    }

    fn data(&mut self, h: Head, p: &[u8], now: u64, ev: &mut impl Events) {
        if h.stream == 0 {
            return self.protocol_error(ev);
        }
        // The whole payload, padding included, counts against the windows (§6.9.1).
        let flen = p.len() as i64;
        if flen > self.recv_window {
            let code = Code::FlowControl;
            return self.conn_error(code, ConnError::Protocol(code), ev);
        }
        self.recv_window -= flen;
        let Some((from, to)) = Self::unpad(&h, p) else {
            return self.protocol_error(ev);
        };
        let data = &p[from..to];
        let end = h.has(flag::END_STREAM);
        if data.is_empty() && !end && !self.calm.control(now) {
            let code = Code::EnhanceYourCalm;
            return self.conn_error(code, ConnError::Protocol(code), ev);
        }
        let Some(idx) = self.find(h.stream) else {
            // Never handed over: the connection window reopens at once.
            self.give_back_conn(flen);
            if !self.cancels.is_clear() {
                // DATA is the server's application at work on it: accepted.
                self.answered(h.stream, end);
            }
            return self.not_open(h.stream, ev);
        };
        // Padding is never handed over: owed back at once.
        self.give_back_conn(flen - data.len() as i64);
        let s = &mut self.streams[idx];
        let id = s.id;
        let malformed = |m| Some((Code::Protocol, StreamError::Malformed(m)));
        let refused = match s.recv {
            Recv::Done => Some((
                Code::StreamClosed,
                StreamError::Protocol(Code::StreamClosed),
            )),
            Recv::Head => malformed(Malformed::UnexpectedData),
            Recv::Body if flen > s.recv_window => {
                Some((Code::FlowControl, StreamError::Protocol(Code::FlowControl)))
            }
            Recv::Body => {
                s.recv_window -= flen;
                // The padding of a stream's DATA is owed back with its next update.
                s.recv_owed += flen - data.len() as i64;
                s.received += data.len() as u64;
                if !data.is_empty() && s.no_content {
                    malformed(Malformed::UnexpectedData)
                } else if s.declared.is_some_and(|d| s.received > d) {
                    malformed(Malformed::LengthMismatch)
                } else {
                    None
                }
            }
        };
        if let Some((code, why)) = refused {
            // Never handed over: back to the connection window at once.
            self.give_back_conn(data.len() as i64);
            return self.stream_error(id, code, why, ev);
        }
        let s = &mut self.streams[idx];
        if !data.is_empty() {
            s.unconsumed += data.len() as i64;
            ev.data(id, data);
        }
        if end {
            self.recv_end(idx, ev);
        }
    }

    /// The server's END_STREAM on stream `idx`: the response is whole unless its length
    /// says otherwise (§8.1.1).
    fn recv_end(&mut self, idx: usize, ev: &mut impl Events) {
        let s = &mut self.streams[idx];
        let id = s.id;
        if !s.no_content && s.declared.is_some_and(|d| d != s.received) {
            return self.malformed(id, Malformed::LengthMismatch, ev);
        }
        s.recv = Recv::Done;
        ev.end(id);
        self.done_if_closed(idx);
    }

    /// Stream `idx` is done both ways: it is forgotten (its unconsumed bytes are still owed
    /// back as the caller consumes them). A server that answered before our body ended may
    /// also reset it with NO_ERROR (§8.1); until then the body may still go out.
    fn done_if_closed(&mut self, idx: usize) {
        let s = &self.streams[idx];
        if s.sent_end && s.recv == Recv::Done {
            let s = self.streams.swap_remove(idx);
            self.closed.push(s.id);
            if s.unconsumed > 0 {
                self.draining.push((s.id, s.unconsumed));
            }
            self.end_if_done();
        }
    }

    fn headers(&mut self, h: Head, p: &[u8], ev: &mut impl Events) {
        if h.stream == 0 {
            return self.protocol_error(ev);
        }
        if h.stream.is_multiple_of(2) || h.stream >= self.next_id {
            // §5.1: the server opens no stream (no push); ours above the next id are idle.
            return self.protocol_error(ev);
        }
        let Some((mut from, to)) = Self::unpad(&h, p) else {
            return self.protocol_error(ev);
        };
        if h.has(flag::PRIORITY) {
            if to < from + 5 {
                let code = Code::FrameSize;
                return self.conn_error(code, ConnError::Protocol(code), ev);
            }
            from += 5; // §5.3.2: deprecated, ignored
        }
        self.block.clear();
        self.block.extend_from_slice(&p[from..to]);
        self.collect = Some(Collect {
            stream: h.stream,
            end_stream: h.has(flag::END_STREAM),
            frames: 1,
        });
        if h.has(flag::END_HEADERS) {
            self.header_block(ev);
        }
    }

    fn continuation(&mut self, h: Head, p: &[u8], ev: &mut impl Events) {
        let Some(c) = self.collect.as_mut() else {
            return self.protocol_error(ev);
        };
        c.frames += 1;
        if c.frames > MAX_CONTINUATIONS + 1 || self.block.len() + p.len() > MAX_HEADER_BLOCK {
            // An endless CONTINUATION chain (CVE-2024-27316's shape) costs at most
            // MAX_HEADER_BLOCK bytes.
            let code = Code::EnhanceYourCalm;
            return self.conn_error(code, ConnError::Protocol(code), ev);
        }
        self.block.extend_from_slice(p);
        if h.has(flag::END_HEADERS) {
            self.header_block(ev);
        }
    }

    /// A whole header block is in: a response head (informational or final), trailers, or a
    /// block for a stream no longer open (decoded all the same, for the HPACK table).
    fn header_block(&mut self, ev: &mut impl Events) {
        let Some(c) = self.collect.take() else {
            return;
        };
        let id = c.stream;
        let limit = self.settings.max_header_list as usize;
        if !self.cancels.is_clear() {
            // A header block is the server's application answering: it accepted `id`.
            self.answered(id, c.end_stream);
        }
        let Some(idx) = self.find(id) else {
            if self.decoder.decode(&self.block, |_, _| {}).is_err() {
                let code = Code::Compression;
                return self.conn_error(code, ConnError::Protocol(code), ev);
            }
            return self.not_open(id, ev);
        };
        let recv = self.streams[idx].recv;
        let mut rf = ResponseFields::new(&mut self.fields, recv == Recv::Body, limit);
        if self
            .decoder
            .decode(&self.block, |n, v| rf.field(n, v))
            .is_err()
        {
            // §4.3: the tables may now differ: a connection error.
            let code = Code::Compression;
            return self.conn_error(code, ConnError::Protocol(code), ev);
        }
        let checked = rf.finish();
        match recv {
            Recv::Done => self.stream_error(
                id,
                Code::StreamClosed,
                StreamError::Protocol(Code::StreamClosed),
                ev,
            ),
            Recv::Head => {
                let checked = match checked {
                    Ok(c) => c,
                    Err(e) => return self.malformed(id, e, ev),
                };
                if checked.status < 200 {
                    if c.end_stream {
                        // §8.1: an informational head never ends the stream.
                        return self.malformed(id, Malformed::HeadersOrder, ev);
                    }
                    ev.head(id, checked.status, &self.fields);
                    return;
                }
                let s = &mut self.streams[idx];
                s.recv = Recv::Body;
                s.declared = checked.content_length;
                s.no_content = s.head_request || matches!(checked.status, 204 | 304);
                ev.head(id, checked.status, &self.fields);
                if c.end_stream {
                    self.recv_end(idx, ev);
                }
            }
            Recv::Body => {
                if !c.end_stream {
                    // §8.1: a second HEADERS is trailers, which end the stream.
                    return self.malformed(id, Malformed::HeadersOrder, ev);
                }
                if let Err(e) = checked {
                    return self.malformed(id, e, ev);
                }
                let s = &self.streams[idx];
                if !s.no_content && s.declared.is_some_and(|d| d != s.received) {
                    return self.malformed(id, Malformed::LengthMismatch, ev);
                }
                ev.trailers(id, &self.fields);
                self.recv_end(idx, ev);
            }
        }
    }

    fn priority(&mut self, h: Head, p: &[u8], now: u64, ev: &mut impl Events) {
        if h.stream == 0 {
            return self.protocol_error(ev);
        }
        if !self.calm.control(now) {
            let code = Code::EnhanceYourCalm;
            return self.conn_error(code, ConnError::Protocol(code), ev);
        }
        if p.len() != 5 && self.find(h.stream).is_some() {
            // §6.3: a stream error of type FRAME_SIZE_ERROR.
            let why = StreamError::Protocol(Code::FrameSize);
            self.stream_error(h.stream, Code::FrameSize, why, ev);
        }
        // Otherwise ignored: RFC 9113 deprecates the priority tree.
    }

    fn rst_stream(&mut self, h: Head, p: &[u8], ev: &mut impl Events) {
        if h.stream == 0 {
            return self.protocol_error(ev);
        }
        if p.len() != 4 {
            let code = Code::FrameSize;
            return self.conn_error(code, ConnError::Protocol(code), ev);
        }
        if h.stream.is_multiple_of(2) || h.stream >= self.next_id {
            return self.protocol_error(ev); // §6.4: an idle stream
        }
        let code = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
        let Some(idx) = self.find(h.stream) else {
            if self.cancels.reset_by_server(h.stream) {
                self.reset.push(h.stream);
            }
            return;
        };
        self.closed.push(h.stream);
        // §8.1: after a whole answer, the server needs no more of our body (NO_ERROR): the
        // caller heard `end` already and hears nothing more.
        let why = if code == Code::RefusedStream as u32 {
            StreamError::Refused
        } else {
            StreamError::Reset(code)
        };
        self.drop_stream(idx, why, ev);
    }

    fn settings(&mut self, h: Head, p: &[u8], now: u64, ev: &mut impl Events) {
        if h.stream != 0 {
            return self.protocol_error(ev);
        }
        if h.has(flag::ACK) {
            if !p.is_empty() {
                let code = Code::FrameSize;
                return self.conn_error(code, ConnError::Protocol(code), ev);
            }
            self.settings_deadline = u64::MAX;
            return;
        }
        if !p.len().is_multiple_of(6) {
            let code = Code::FrameSize;
            return self.conn_error(code, ConnError::Protocol(code), ev);
        }
        if !self.calm.control(now) {
            let code = Code::EnhanceYourCalm;
            return self.conn_error(code, ConnError::Protocol(code), ev);
        }
        for e in p.chunks_exact(6) {
            let id = u16::from_be_bytes([e[0], e[1]]);
            let v = u32::from_be_bytes([e[2], e[3], e[4], e[5]]);
            match id {
                HEADER_TABLE_SIZE if v != self.peer_table_size => {
                    self.peer_table_size = v;
                    self.table_update = true;
                }
                // §6.5.2: a server MUST NOT set ENABLE_PUSH to anything but 0.
                setting::ENABLE_PUSH if v != 0 => return self.protocol_error(ev),
                setting::MAX_CONCURRENT_STREAMS => self.peer_max_streams = v,
                setting::INITIAL_WINDOW_SIZE => {
                    if i64::from(v) > frame::MAX_WINDOW {
                        let code = Code::FlowControl;
                        return self.conn_error(code, ConnError::Protocol(code), ev);
                    }
                    // §6.9.2: open streams' send windows move by the difference (and may go
                    // below zero).
                    let delta = i64::from(v) - self.peer_window;
                    self.peer_window = i64::from(v);
                    for s in &mut self.streams {
                        s.send_window += delta;
                        if s.send_window > frame::MAX_WINDOW {
                            let code = Code::FlowControl;
                            return self.conn_error(code, ConnError::Protocol(code), ev);
                        }
                    }
                }
                setting::MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME as u32..=frame::MAX_MAX_FRAME).contains(&v) {
                        return self.protocol_error(ev);
                    }
                    self.peer_max_frame = v as usize;
                }
                setting::MAX_HEADER_LIST_SIZE => self.peer_max_list = v as usize,
                // §6.5.2: unknown settings (and ENABLE_CONNECT_PROTOCOL) are ignored.
                _ => {}
            }
        }
        frame::settings_ack(&mut self.out);
    }

    fn ping_frame(&mut self, h: Head, p: &[u8], now: u64, ev: &mut impl Events) {
        if h.stream != 0 {
            return self.protocol_error(ev);
        }
        if p.len() != 8 {
            let code = Code::FrameSize;
            return self.conn_error(code, ConnError::Protocol(code), ev);
        }
        if h.has(flag::ACK) {
            if self.ping.is_some_and(|(d, _)| d[..] == *p) {
                self.ping = None;
                ev.pong();
            }
            return;
        }
        if !self.calm.control(now) {
            let code = Code::EnhanceYourCalm;
            return self.conn_error(code, ConnError::Protocol(code), ev);
        }
        frame::ping_ack(&mut self.out, p);
    }

    fn goaway_frame(&mut self, h: Head, p: &[u8], ev: &mut impl Events) {
        if h.stream != 0 {
            return self.protocol_error(ev);
        }
        if p.len() < 8 {
            let code = Code::FrameSize;
            return self.conn_error(code, ConnError::Protocol(code), ev);
        }
        let last = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff;
        let code = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
        self.cancels.going_away(last);
        // §6.8: streams above `last` were not processed (safe to retry); with an error code
        // the others end too, without it they finish.
        let mut i = 0;
        while i < self.streams.len() {
            let s = &self.streams[i];
            let why = if s.id > last {
                StreamError::Refused
            } else if code != Code::NoError as u32 {
                StreamError::Connection(ConnError::GoAway(code))
            } else {
                i += 1;
                continue;
            };
            self.reset.push(s.id);
            self.drop_stream(i, why, ev);
        }
        if !self.goaway_in {
            self.goaway_in = true;
            ev.goaway();
        }
        self.end_if_done();
    }

    fn window_update(&mut self, h: Head, p: &[u8], ev: &mut impl Events) {
        if p.len() != 4 {
            let code = Code::FrameSize;
            return self.conn_error(code, ConnError::Protocol(code), ev);
        }
        let inc = i64::from(u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff);
        if h.stream == 0 {
            if inc == 0 {
                return self.protocol_error(ev); // §6.9
            }
            self.send_window += inc;
            if self.send_window > frame::MAX_WINDOW {
                let code = Code::FlowControl;
                return self.conn_error(code, ConnError::Protocol(code), ev);
            }
            return;
        }
        if h.stream.is_multiple_of(2) || h.stream >= self.next_id {
            return self.protocol_error(ev); // §5.1: an idle stream
        }
        let Some(idx) = self.find(h.stream) else {
            return; // a closed stream: allowed for a while (§6.9)
        };
        if inc == 0 {
            let why = StreamError::Protocol(Code::Protocol);
            return self.stream_error(h.stream, Code::Protocol, why, ev);
        }
        let s = &mut self.streams[idx];
        s.send_window += inc;
        if s.send_window > frame::MAX_WINDOW {
            let why = StreamError::Protocol(Code::FlowControl);
            self.stream_error(h.stream, Code::FlowControl, why, ev);
        }
    }

    /// Streams told "no room" that have room now hear [`Events::writable`].
    fn wake_writers(&mut self, ev: &mut impl Events) {
        if !self.streams.iter().any(|s| s.blocked) {
            return;
        }
        let mut i = 0;
        while i < self.streams.len() {
            let id = self.streams[i].id;
            if self.streams[i].blocked && self.send_room(id) > 0 {
                self.streams[i].blocked = false;
                ev.writable(id);
            }
            i += 1;
        }
    }

    /// After a GOAWAY either way, the connection ends once no stream is open.
    fn end_if_done(&mut self) {
        if self.streams.is_empty() {
            if self.state == State::Closing {
                self.state = State::Last;
            } else if self.goaway_in && self.state == State::Open {
                frame::goaway(&mut self.out, 0, Code::NoError);
                self.state = State::Last;
            }
        }
    }
}

/// SETTINGS_HEADER_TABLE_SIZE (RFC 9113 §6.5.2): the server's decoder's table, which our
/// encoder (never indexing) only has to acknowledge with a size update.
const HEADER_TABLE_SIZE: u16 = 1;
