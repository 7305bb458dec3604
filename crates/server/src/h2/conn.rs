//! One HTTP/2 server connection as a state machine (RFC 9113): bytes and the time in, frames
//! to transmit and a deadline out, with the same driver-facing calls as `h1::Conn` — `recv`,
//! `eof`, `complete`, `on_timer`, `drain`, `poll_transmit`/`take_output`/`sent`, `shut`.
//!
//! Owns the preface, frame order, stream states, flow control in both directions, SETTINGS,
//! PING, GOAWAY and RST_STREAM, and the defences (concurrency, CONTINUATION count, header
//! list size, rapid reset, control floods, stalled windows). Requests go to the same
//! [`Service`] as HTTP/1.1, as the HTTP/1.1 head `fields` writes, tagged by stream id; answers
//! leave as soon as they are decided, in any order across streams.
//!
//! Invariants: every header block is decoded, even one that is refused, so the HPACK table
//! stays in step; a connection error writes one GOAWAY and reads nothing more; while a send
//! is in flight nothing more is read (a peer that does not read cannot make the server
//! buffer its acknowledgements), but flow-control-blocked DATA never stops reading.
#![forbid(unsafe_code)]

mod streamed;
mod tunnel;

use std::collections::VecDeque;

use linerate_http1::{BodyDecoder, Method, Parsed, RequestHead, Version, status_has_no_body};

use super::fields::{Malformed, RequestFields, Scratch, TrailerFields};
use super::frame::{self, Code, Head, flag, kind, setting};
use super::stream::{
    Answer, BodyIn, CONN_WINDOW, Calm, MAX_BODY_STREAMS, MAX_CONCURRENT_STREAMS, MAX_CONTINUATIONS,
    MAX_HEADER_BLOCK, MAX_TUNNEL_STREAMS, Ring, SMALL_BODY, STREAM_WINDOW, Stream,
};
use crate::h1::{Cx, Decision, Exchange, SendPace, Service, Timer, Transmit, status_response};
use crate::pool::Pool;
use crate::response::{Body, Field, FileBody, Response};
use linerate_hpack as hpack;

/// The highest stream id (2^31-1): a drain's first GOAWAY names it (RFC 9113 §6.8).
const MAX_STREAM_ID: u32 = 0x7fff_ffff;
/// The PING a drain sends after its first GOAWAY; its ACK ends the round trip.
const DRAIN_PING: &[u8; 8] = b"lr-drain";
/// How long a drain waits for that ACK (ms) before its final GOAWAY anyway.
const DRAIN_ROUND_TRIP_WAIT: u64 = 1000;

/// Most output staged at once from bodies (more is written as the transport takes it).
const OUT_HIGH_WATER: usize = 256 * 1024;
/// File payloads go out with `sendfile` (where the transport can) only when the peer takes
/// DATA frames at least this large. At the default 16 KiB a frame header and a sendfile per
/// 16 KiB cost as much CPU as reading the file into the frames and sending 256 KiB at once,
/// and the small pushes cut h2load's throughput (bench/h2_compare.py, docs/benchmarks.md).
const SENDFILE_MIN_FRAME: usize = 64 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the client's 24-byte preface.
    Preface,
    /// The preface is in; the next frame must be SETTINGS (RFC 9113 §3.4).
    Settings,
    Open,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writing {
    Open,
    /// The GOAWAY is written: shut down once the output is out.
    Last,
    /// Shut down: input is discarded until EOF.
    Shut,
    Closed,
    Reset,
}

/// A header block being collected from HEADERS and CONTINUATION frames.
struct Collect {
    stream: u32,
    end_stream: bool,
    frames: u32,
    /// The HEADERS frame made the stream depend on itself (RFC 9113 §5.3.1).
    self_dependent: bool,
}

/// One HTTP/2 connection. `P` is the service's per-request body state.
pub(crate) struct Conn<P> {
    phase: Phase,
    writing: Writing,
    /// A send of ours is with the transport.
    in_flight: bool,
    /// The server's SETTINGS are written (on the first input).
    started: bool,
    /// Input not yet used (a partial frame).
    inbuf: Vec<u8>,
    /// Output written while a send was in flight (else it goes to the worker's `cx.out`).
    out: Vec<u8>,
    /// DATA payloads the transport sends from their files (`sendfile`), in order after `out`,
    /// each followed by the output written after it (starting with the next frame's header).
    files: VecDeque<(FileBody, Vec<u8>)>,
    decoder: hpack::Decoder,
    scratch: Scratch,
    /// The incoming header block being collected.
    block: Vec<u8>,
    collect: Option<Collect>,
    /// A response header block being encoded.
    resp: Vec<u8>,
    /// The client's bytes on tunnel streams (RFC 8441) that their readers have not taken, by
    /// stream id (see `tunnel`).
    held: Vec<(u32, Vec<u8>)>,
    /// The peer's SETTINGS_MAX_FRAME_SIZE and SETTINGS_INITIAL_WINDOW_SIZE.
    max_frame: usize,
    initial_window: i64,
    /// Connection-level windows: what we may send, what the client may send.
    send_window: i64,
    recv_window: i64,
    recv_owed: i64,
    streams: Vec<Stream<P>>,
    /// The highest stream id the client has opened.
    last_stream: u32,
    /// Ids closed normally or reset by the client (a late DATA/HEADERS is STREAM_CLOSED).
    closed: Ring,
    /// Ids the server reset (late frames on them are ignored, RFC 9113 §5.4.2).
    reset: Ring,
    /// GOAWAY sent: streams above this id are not served.
    goaway: Option<u32>,
    /// A graceful drain's first GOAWAY (the highest id, RFC 9113 §6.8) is out with a PING:
    /// the final one, naming the last stream, goes when the PING's ACK comes back (a round
    /// trip: the client's streams sent before it saw the first are in), or at this time.
    drain_final: Option<u64>,
    /// The client sent GOAWAY: close once the open streams are done.
    peer_goaway: bool,
    /// The client's input ended: what is staged goes out, then the connection closes.
    peer_closed: bool,
    calm: Calm,
    timer: Timer,
    deadline: u64,
    /// The send timer's limits while answers wait on the client (its window or its reads).
    pace: SendPace,
}

impl<P> Conn<P> {
    /// A connection accepted at `now` (h2c with prior knowledge, or TLS that chose `h2`).
    pub(crate) fn new(now: u64, cx: &Cx) -> Conn<P> {
        Conn {
            phase: Phase::Preface,
            writing: Writing::Open,
            in_flight: false,
            started: false,
            inbuf: Vec::new(),
            out: Vec::new(),
            files: VecDeque::new(),
            decoder: hpack::Decoder::new(),
            scratch: Scratch::default(),
            block: Vec::new(),
            collect: None,
            resp: Vec::new(),
            held: Vec::new(),
            max_frame: frame::DEFAULT_MAX_FRAME,
            initial_window: frame::DEFAULT_WINDOW,
            send_window: frame::DEFAULT_WINDOW,
            recv_window: CONN_WINDOW,
            recv_owed: 0,
            streams: Vec::new(),
            last_stream: 0,
            closed: Ring::default(),
            reset: Ring::default(),
            goaway: None,
            drain_final: None,
            peer_goaway: false,
            peer_closed: false,
            calm: Calm::default(),
            timer: Timer::Fresh,
            deadline: now + cx.cfg.header_timeout,
            pace: SendPace::default(),
        }
    }

    /// The bytes the request fields' buffers hold.
    #[cfg(test)]
    pub(crate) fn scratch_held(&self) -> usize {
        self.scratch.held()
    }

    pub(crate) fn timer(&self) -> Timer {
        self.timer
    }

    /// When the connection's next timer fires: its state's, or a drain's final GOAWAY.
    pub(crate) fn deadline(&self) -> u64 {
        self.deadline.min(self.drain_final.unwrap_or(u64::MAX))
    }

    /// Reading goes on unless a send is stalled (or the connection is ending without
    /// lingering). Flow-control waits never stop it: the WINDOW_UPDATE must be read.
    pub(crate) fn wants_input(&self) -> bool {
        match self.writing {
            Writing::Shut => true,
            Writing::Closed | Writing::Reset => false,
            Writing::Open | Writing::Last => !self.in_flight && self.out.is_empty(),
        }
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.phase == Phase::Open
            && self.writing == Writing::Open
            && self.streams.is_empty()
            && self.collect.is_none()
            && self.inbuf.is_empty()
            && self.out.is_empty()
            && self.files.is_empty()
            && !self.in_flight
    }

    pub(crate) fn outstanding(&self) -> usize {
        self.streams
            .iter()
            .filter(|s| matches!(s.answer, Answer::Deferred(_)))
            .count()
    }

    pub(crate) fn release(&mut self, pool: &mut Pool) {
        pool.put(&mut self.inbuf);
        pool.put(&mut self.out);
        for (_, mut after) in self.files.drain(..) {
            pool.put(&mut after);
        }
        for (_, mut held) in self.held.drain(..) {
            pool.put(&mut held);
        }
        self.streams.clear();
    }

    fn output<'a>(&'a mut self, cx: &'a mut Cx) -> &'a mut Vec<u8> {
        sink(&mut self.out, &mut self.files, self.in_flight, cx)
    }

    /// Bytes arrived.
    pub(crate) fn recv<S: Service<Pending = P>>(
        &mut self,
        input: &[u8],
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        if self.peer_closed {
            return;
        }
        match self.writing {
            Writing::Open => {}
            Writing::Last if self.goaway.is_some() && !self.errored() => {}
            _ => return, // after a connection error, or lingering: discarded
        }
        if !self.started {
            self.started = true;
            let list = cx.cfg.limits.max_head_bytes as u32;
            let settings = [
                (
                    setting::MAX_CONCURRENT_STREAMS,
                    MAX_CONCURRENT_STREAMS as u32,
                ),
                (setting::INITIAL_WINDOW_SIZE, STREAM_WINDOW as u32),
                (setting::MAX_HEADER_LIST_SIZE, list),
                (setting::ENABLE_PUSH, 0),
                (setting::ENABLE_CONNECT_PROTOCOL, 1),
            ];
            // RFC 8441 §3: announced only where a WebSocket route can take the stream.
            let n = if cx.cfg.extended_connect { 5 } else { 4 };
            let out = self.output(cx);
            frame::settings(out, &settings[..n]);
            frame::window_update(out, 0, (CONN_WINDOW - frame::DEFAULT_WINDOW) as u32);
        }
        if self.inbuf.is_empty() {
            let used = self.frames(input, head, cx, svc);
            if used < input.len() && self.reading() {
                let mut stash = cx.pool.get();
                stash.extend_from_slice(&input[used..]);
                self.inbuf = stash;
            }
        } else {
            let mut buf = std::mem::take(&mut self.inbuf);
            buf.extend_from_slice(input);
            let used = self.frames(&buf, head, cx, svc);
            if used < buf.len() && self.reading() {
                buf.drain(..used);
                self.inbuf = buf;
            } else {
                cx.pool.put(&mut buf);
            }
        }
        self.window_updates(cx);
        self.end_if_done();
        self.set_timer(cx);
    }

    /// Frames are still read (no connection error, not shut down).
    fn reading(&self) -> bool {
        !self.peer_closed
            && (matches!(self.writing, Writing::Open)
                || (self.writing == Writing::Last && !self.errored()))
    }

    /// The GOAWAY written was for an error (nothing more is read).
    fn errored(&self) -> bool {
        self.goaway == Some(u32::MAX)
    }

    /// Handles every complete frame at the start of `buf`; returns the bytes used.
    fn frames<S: Service<Pending = P>>(
        &mut self,
        buf: &[u8],
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) -> usize {
        let mut pos = 0;
        if self.phase == Phase::Preface {
            let n = buf.len().min(frame::PREFACE.len());
            if buf[..n] != frame::PREFACE[..n] {
                // RFC 9113 §3.4: an invalid preface is a connection error (an HTTP/1.1
                // request on an h2c port ends here, unanswered in HTTP/1.1).
                self.conn_error(Code::Protocol, cx);
                return buf.len();
            }
            if n < frame::PREFACE.len() {
                return 0;
            }
            pos = n;
            self.phase = Phase::Settings;
        }
        while self.reading() && buf.len() - pos >= frame::HEAD_LEN {
            let h = Head::parse(&buf[pos..]);
            if h.len > frame::DEFAULT_MAX_FRAME {
                // RFC 9113 §4.2: larger than the SETTINGS_MAX_FRAME_SIZE we allow.
                self.conn_error(Code::FrameSize, cx);
                return buf.len();
            }
            let end = pos + frame::HEAD_LEN + h.len;
            if end > buf.len() {
                break;
            }
            self.frame(h, &buf[pos + frame::HEAD_LEN..end], head, cx, svc);
            pos = end;
        }
        if !self.reading() {
            return buf.len();
        }
        pos
    }

    fn frame<S: Service<Pending = P>>(
        &mut self,
        h: Head,
        p: &[u8],
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        if self.phase == Phase::Settings {
            if h.kind != kind::SETTINGS || h.has(flag::ACK) {
                return self.conn_error(Code::Protocol, cx);
            }
            self.phase = Phase::Open;
        }
        if let Some(c) = &self.collect
            && (h.kind != kind::CONTINUATION || h.stream != c.stream)
        {
            // RFC 9113 §6.10: a header block is contiguous.
            return self.conn_error(Code::Protocol, cx);
        }
        match h.kind {
            kind::DATA => self.data(h, p, cx, svc),
            kind::HEADERS => self.headers(h, p, head, cx, svc),
            kind::CONTINUATION => self.continuation(h, p, head, cx, svc),
            kind::PRIORITY => self.priority(h, p, cx),
            kind::RST_STREAM => self.rst_stream(h, p, cx, svc),
            kind::SETTINGS => self.settings(h, p, cx),
            kind::PING => self.ping(h, p, cx),
            kind::GOAWAY => {
                if h.stream != 0 {
                    return self.conn_error(Code::Protocol, cx);
                }
                if p.len() < 8 {
                    return self.conn_error(Code::FrameSize, cx);
                }
                self.peer_goaway = true;
            }
            kind::WINDOW_UPDATE => self.window_update(h, p, cx),
            // RFC 9113 §8.4: clients cannot push.
            kind::PUSH_PROMISE => self.conn_error(Code::Protocol, cx),
            // RFC 9113 §5.5: unknown frame types are ignored.
            _ => {}
        }
    }

    /// A connection error: GOAWAY with `code`, then shut down; nothing more is read.
    fn conn_error(&mut self, code: Code, cx: &mut Cx) {
        if self.errored() {
            return;
        }
        let last = self.last_stream;
        frame::goaway(self.output(cx), last, code);
        self.goaway = Some(u32::MAX);
        self.writing = Writing::Last;
        self.collect = None;
        // Open streams are abandoned: the work on their answers is given up (a deferred
        // answer that comes anyway is dropped).
        self.abandon_all(cx);
    }

    /// Every open stream is dropped, and the work on their answers given up.
    fn abandon_all(&mut self, cx: &mut Cx) {
        for s in self.streams.drain(..) {
            if s.awaits_work() {
                cx.cancelled.push(u64::from(s.id));
            }
        }
    }

    /// A stream error: RST_STREAM with `code`; the stream is forgotten. A reset the client
    /// caused gives up the work on its answer and counts against [`MAX_RESETS_PER_SEC`] as
    /// the client's own resets do (MadeYouReset, CVE-2025-8671: a frame that makes the
    /// server reset a stream abandons as much work as the client's RST_STREAM). A reset of
    /// ours (a file that cannot be read, an upstream that failed mid-answer) comes from
    /// work that has failed already, and may come outside the driver's call for this
    /// connection: nothing is listed.
    fn stream_error(&mut self, id: u32, code: Code, cx: &mut Cx) {
        frame::rst(self.output(cx), id, code);
        self.reset.push(id);
        if let Some(idx) = self.find(id) {
            let s = self.streams.remove(idx);
            if code.blames_peer() && s.awaits_work() {
                cx.cancelled.push(u64::from(id));
            }
        }
        if code.blames_peer() && !self.calm.reset(cx.now) {
            self.conn_error(Code::EnhanceYourCalm, cx);
        }
    }

    fn find(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    /// Strips padding (RFC 9113 §6.1, §6.2); `None`: the padding is longer than the payload.
    fn unpad(h: &Head, p: &[u8]) -> Option<(usize, usize)> {
        if !h.has(flag::PADDED) {
            return Some((0, p.len()));
        }
        let pad = *p.first()? as usize;
        (pad < p.len()).then(|| (1, p.len() - pad))
    }

    fn data<S: Service<Pending = P>>(&mut self, h: Head, p: &[u8], cx: &mut Cx, svc: &mut S) {
        if h.stream == 0 {
            return self.conn_error(Code::Protocol, cx);
        }
        // The whole payload, padding included, counts against the windows (RFC 9113 §6.9.1).
        let flen = p.len() as i64;
        if flen > self.recv_window {
            return self.conn_error(Code::FlowControl, cx);
        }
        self.recv_window -= flen;
        self.recv_owed += flen;
        let Some((from, to)) = Self::unpad(&h, p) else {
            return self.conn_error(Code::Protocol, cx);
        };
        let data = &p[from..to];
        let end = h.has(flag::END_STREAM);
        if data.is_empty() && !end && !self.calm.control(cx.now) {
            return self.conn_error(Code::EnhanceYourCalm, cx);
        }
        let Some(idx) = self.find(h.stream) else {
            return self.unknown_stream(h.stream, cx);
        };
        let s = &mut self.streams[idx];
        if s.remote_closed {
            return self.stream_error(h.stream, Code::StreamClosed, cx);
        }
        if flen > s.recv_window {
            return self.stream_error(h.stream, Code::FlowControl, cx);
        }
        s.recv_window -= flen;
        s.recv_owed += flen;
        let was_large = s.large_body();
        s.received += data.len() as u64;
        if s.declared.is_some_and(|d| s.received > d) {
            return self.stream_error(h.stream, Code::Protocol, cx);
        }
        if !s.tunnel && !end && !was_large && s.large_body() {
            // Its body just outgrew SMALL_BODY: it counts among MAX_BODY_STREAMS from now, or,
            // one too many, is refused (no handler has had its whole body).
            if self.large_bodies() > MAX_BODY_STREAMS {
                return self.stream_error(h.stream, Code::RefusedStream, cx);
            }
        }
        let s = &mut self.streams[idx];
        if s.draining() {
            if end {
                self.end_stream(idx, cx, svc);
            } else if !s.can_end_within_window() {
                self.stream_error(h.stream, Code::NoError, cx);
            }
            return;
        }
        if s.tunnel && s.body.is_none() {
            // The tunnel's bytes are owed back only as its reader takes them
            // (`tunnel_used`): a reader that stops holds the client to one window.
            s.recv_owed -= data.len() as i64;
            let id = s.id;
            self.hold(id, data, cx);
            if end {
                self.end_stream(idx, cx, svc);
            }
            return;
        }
        s.body_deadline = cx.now + cx.cfg.body_timeout;
        if let Some(b) = s.body.as_mut() {
            let over = s.received > b.limit;
            let answer = if over {
                Some(status_response(413, "").close())
            } else if !data.is_empty() {
                let refused = svc.data(&mut b.pending, data).err();
                b.held |= b.relayed && !svc.room(&b.pending);
                refused
            } else {
                None
            };
            if let Some(mut resp) = answer {
                let relayed = b.relayed;
                let body = s.body.take();
                if relayed && !matches!(s.answer, Answer::Deferred(_)) {
                    // The upstream's answer has begun: it is cut, never completed.
                    svc.answered(resp.status, None, 0, b"");
                    return self.stream_error(h.stream, Code::Internal, cx);
                }
                if over && let Some(body) = body {
                    svc.refused(body.pending, &mut resp);
                }
                s.discard = true;
                svc.answered(resp.status, None, resp.body.len(), b"");
                self.answer(idx, resp, cx);
                return;
            }
        }
        if end {
            self.end_stream(idx, cx, svc);
        }
    }

    /// The client finished sending on stream `idx`.
    fn end_stream<S: Service<Pending = P>>(&mut self, idx: usize, cx: &mut Cx, svc: &mut S) {
        let s = &mut self.streams[idx];
        s.remote_closed = true;
        s.body_deadline = u64::MAX;
        if s.declared.is_some_and(|d| d != s.received) {
            // RFC 9113 §8.1.1: a Content-Length that is not the body's length is malformed.
            let id = s.id;
            return self.stream_error(id, Code::Protocol, cx);
        }
        if let Some(b) = s.body.take() {
            let id = s.id;
            if b.relayed {
                // The answer is the upstream's, pending or under way already.
                let _ = svc.end(u64::from(id), b.pending, BodyDecoder::Length(0));
                if self.streams[idx].closed() {
                    self.finish(idx, cx);
                }
                return;
            }
            let decision = svc.end(u64::from(id), b.pending, BodyDecoder::Length(0));
            self.decide(idx, decision, cx, svc);
        } else if s.closed() {
            self.finish(idx, cx);
        }
    }

    /// A frame for a stream that is not open: idle, closed, or reset.
    fn unknown_stream(&mut self, id: u32, cx: &mut Cx) {
        if id > self.last_stream {
            // RFC 9113 §5.1: only HEADERS (and PRIORITY) may name an idle stream.
            self.conn_error(Code::Protocol, cx);
        } else if !self.reset.contains(id) {
            // §5.1: after END_STREAM or the client's RST_STREAM, frames are STREAM_CLOSED.
            self.conn_error(Code::StreamClosed, cx);
        }
    }

    fn headers<S: Service<Pending = P>>(
        &mut self,
        h: Head,
        p: &[u8],
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        if h.stream == 0 || h.stream.is_multiple_of(2) {
            return self.conn_error(Code::Protocol, cx);
        }
        let Some((mut from, to)) = Self::unpad(&h, p) else {
            return self.conn_error(Code::Protocol, cx);
        };
        let mut self_dependent = false;
        if h.has(flag::PRIORITY) {
            if to < from + 5 {
                return self.conn_error(Code::FrameSize, cx);
            }
            let dep = u32::from_be_bytes([p[from], p[from + 1], p[from + 2], p[from + 3]]);
            self_dependent = dep & 0x7fff_ffff == h.stream;
            from += 5;
        }
        self.block.clear();
        self.block.extend_from_slice(&p[from..to]);
        self.collect = Some(Collect {
            stream: h.stream,
            end_stream: h.has(flag::END_STREAM),
            frames: 1,
            self_dependent,
        });
        if h.has(flag::END_HEADERS) {
            self.header_block(head, cx, svc);
        }
    }

    fn continuation<S: Service<Pending = P>>(
        &mut self,
        h: Head,
        p: &[u8],
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        let Some(c) = self.collect.as_mut() else {
            return self.conn_error(Code::Protocol, cx);
        };
        c.frames += 1;
        if c.frames > MAX_CONTINUATIONS + 1 || self.block.len() + p.len() > MAX_HEADER_BLOCK {
            return self.conn_error(Code::EnhanceYourCalm, cx);
        }
        self.block.extend_from_slice(p);
        if h.has(flag::END_HEADERS) {
            self.header_block(head, cx, svc);
        }
    }

    /// A whole header block is in: a new request, trailers, or a frame to refuse.
    fn header_block<S: Service<Pending = P>>(
        &mut self,
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        let Some(c) = self.collect.take() else {
            return;
        };
        let id = c.stream;
        if let Some(idx) = self.find(id) {
            let mut t = TrailerFields::default();
            if self
                .decoder
                .decode(&self.block, |n, v| t.field(n, v))
                .is_err()
            {
                return self.conn_error(Code::Compression, cx);
            }
            if self.streams[idx].remote_closed {
                return self.stream_error(id, Code::StreamClosed, cx);
            }
            if !c.end_stream || t.error.is_some() || c.self_dependent {
                // RFC 9113 §8.1: a second HEADERS is trailers, which end the stream.
                return self.stream_error(id, Code::Protocol, cx);
            }
            return self.end_stream(idx, cx, svc);
        }
        if id <= self.last_stream {
            if self.decoder.decode(&self.block, |_, _| {}).is_err() {
                return self.conn_error(Code::Compression, cx);
            }
            if self.reset.contains(id) {
                return;
            }
            // §5.1.1: ids only grow; a HEADERS on a closed stream is STREAM_CLOSED.
            let code = if self.closed.contains(id) {
                Code::StreamClosed
            } else {
                Code::Protocol
            };
            return self.conn_error(code, cx);
        }
        self.last_stream = id;
        let mut fields = RequestFields::new(&mut self.scratch, cx.cfg.extended_connect);
        // Past max_head_bytes (our SETTINGS_MAX_HEADER_LIST_SIZE) the fields are decoded,
        // the table kept in step, but no more are written down: an HPACK bomb costs its own
        // bytes, never the list it expands to.
        let limit = cx.cfg.limits.max_head_bytes;
        let Ok(list) = (self.decoder).decode_within(&self.block, limit, |n, v| fields.field(n, v))
        else {
            return self.conn_error(Code::Compression, cx);
        };
        let checked = fields.finish();
        if self.goaway.is_some_and(|last| id > last) {
            return; // §6.8: streams after our GOAWAY's id are not served
        }
        if c.self_dependent {
            return self.stream_error(id, Code::Protocol, cx);
        }
        let tunnel = !self.scratch.protocol.is_empty();
        let large = checked
            .as_ref()
            .is_ok_and(|d| d.is_some_and(|d| d > SMALL_BODY));
        if self.streams.len() >= MAX_CONCURRENT_STREAMS
            || (!c.end_stream && self.no_room_for(tunnel, large))
        {
            return self.stream_error(id, Code::RefusedStream, cx);
        }
        let over = list == hpack::ListSize::Over;
        let declared = match checked {
            Ok(d) => d,
            // The fields past the limit were not read: the 431 below answers it.
            Err(_) if over => None,
            Err(Malformed::HostMismatch) | Err(_) => {
                return self.stream_error(id, Code::Protocol, cx);
            }
        };
        let mut s = Stream::new(id, self.initial_window);
        s.remote_closed = c.end_stream;
        s.declared = declared;
        s.body_deadline = if c.end_stream || tunnel {
            u64::MAX
        } else {
            cx.now + cx.cfg.body_timeout
        };
        s.tunnel = tunnel;
        if c.end_stream && declared.is_some_and(|d| d != 0) {
            return self.stream_error(id, Code::Protocol, cx);
        }
        self.streams.push(s);
        let idx = self.streams.len() - 1;
        if over {
            // RFC 9113 §10.5.1: a list over SETTINGS_MAX_HEADER_LIST_SIZE may get a 431.
            return self.own_answer(idx, 431, None, cx, svc);
        }
        let parsed = head.parse(&self.scratch.head, &cx.cfg.limits);
        match parsed {
            Ok(Parsed::Complete(_)) => {}
            Ok(Parsed::Partial) => return self.own_answer(idx, 400, None, cx, svc),
            Err(e) => return self.own_answer(idx, e.status(), Some(e), cx, svc),
        }
        head.set_version(Version::Http2);
        self.streams[idx].head = head.method() == Method::Head;
        let decision = svc.request(Exchange {
            id: u64::from(id),
            head,
            buf: &self.scratch.head,
            body: c.end_stream.then_some(&[][..]),
            protocol: tunnel.then_some(&self.scratch.protocol[..]),
            h1: false,
        });
        self.decide(idx, decision, cx, svc);
    }

    /// A stream that will send DATA cannot open: it declares a body over [`SMALL_BODY`] and
    /// [`MAX_BODY_STREAMS`] such bodies are being read, or, for a tunnel,
    /// [`MAX_TUNNEL_STREAMS`] tunnels are open.
    fn no_room_for(&self, tunnel: bool, large: bool) -> bool {
        if tunnel {
            let open = self.streams.iter().filter(|s| s.tunnel).count();
            open >= MAX_TUNNEL_STREAMS
        } else {
            large && self.large_bodies() >= MAX_BODY_STREAMS
        }
    }

    /// Bodies being read that are (or are declared) over [`SMALL_BODY`].
    fn large_bodies(&self) -> usize {
        self.streams
            .iter()
            .filter(|s| !s.tunnel && !s.remote_closed && !s.discard && s.large_body())
            .count()
    }

    /// The connection answers a request itself (a malformed one, a limit).
    fn own_answer<S: Service<Pending = P>>(
        &mut self,
        idx: usize,
        status: u16,
        error: Option<linerate_http1::ParseError>,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        let resp = status_response(status, "");
        // The access log shows the request as HTTP/2 sent it: the line written from its
        // pseudo-header fields, with its own version.
        let line = crate::h1::request_line(&self.scratch.head);
        let line = match line.strip_suffix(b" HTTP/1.1") {
            Some(start) => [start, b" HTTP/2.0"].concat(),
            // Cut at MAX_LOGGED_LINE (or empty): as it is, no version claimed.
            None => line.to_vec(),
        };
        svc.answered(status, error, resp.body.len(), &line);
        self.streams[idx].discard = true;
        self.answer(idx, resp, cx);
    }

    fn decide<S: Service<Pending = P>>(
        &mut self,
        idx: usize,
        decision: Decision<P>,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        match decision {
            Decision::Respond(resp) => {
                let s = &mut self.streams[idx];
                if !s.remote_closed {
                    s.discard = true;
                }
                self.answer(idx, resp, cx);
            }
            Decision::ReadBody { limit, pending } => {
                let s = &mut self.streams[idx];
                if s.declared.is_some_and(|d| d > limit) {
                    s.discard = true;
                    let mut resp = status_response(413, "");
                    svc.refused(pending, &mut resp);
                    return self.answer(idx, resp, cx);
                }
                s.body = Some(BodyIn {
                    pending,
                    limit,
                    relayed: false,
                    held: false,
                });
            }
            Decision::RelayBody { limit, pending } => {
                // The application refused a declared length over the limit before the
                // request went up; what comes is counted against it as it arrives.
                let s = &mut self.streams[idx];
                s.body = Some(BodyIn {
                    pending,
                    limit,
                    relayed: true,
                    held: false,
                });
                s.answer = Answer::Deferred(u64::MAX);
            }
            Decision::Defer => {
                self.streams[idx].answer = Answer::Deferred(cx.now + cx.cfg.deferred_timeout);
            }
            Decision::Relay { .. } => self.streams[idx].answer = Answer::Deferred(u64::MAX),
        }
    }

    /// Writes `resp`'s HEADERS and as much of its body as the windows allow.
    fn answer(&mut self, idx: usize, resp: Response, cx: &mut Cx) {
        let s = &mut self.streams[idx];
        let no_body = status_has_no_body(resp.status);
        let send_body = !s.head && !no_body && !resp.body.is_empty();
        let r = &mut self.resp;
        r.clear();
        hpack::status(r, resp.status);
        hpack::field(r, b"date", cx.date.get());
        if let Some(server) = &cx.cfg.server
            && !crate::h1::names_server(&resp.headers)
        {
            hpack::field(r, b"server", server);
        }
        if let Some(port) = cx.alt_svc
            && !crate::h1::names_field(&resp.headers, "alt-svc")
        {
            hpack::field(r, b"alt-svc", crate::h1::AltSvc::h3(port).as_bytes());
        }
        let mut grpc = false;
        if let Some(ct) = &resp.content_type {
            hpack::field(r, b"content-type", ct.as_bytes());
            grpc = super::answer_fields::is_grpc(ct.as_bytes());
        }
        if !no_body && !grpc {
            let mut n = itoa::Buffer::new();
            hpack::field(r, b"content-length", n.format(resp.body.len()).as_bytes());
        }
        // RFC 9113 §8.2.1, §8.2.2.
        super::answer_fields::each(
            resp.headers
                .iter()
                .map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            false,
            |n, v| hpack::field(r, n, v),
        );
        let id = s.id;
        let max_frame = self.max_frame;
        if resp.trailers.is_some() && !s.head && !no_body && !matches!(resp.body, Body::File(_)) {
            // RFC 9113 §8.1: HEADERS, the DATA, then the trailers' HEADERS with END_STREAM.
            let out = sink(&mut self.out, &mut self.files, self.in_flight, cx);
            frame::headers(out, id, &self.resp, false, max_frame);
            let mut buf = Vec::new();
            if !resp.body.is_empty() {
                buf = cx.pool.get();
                buf.extend_from_slice(resp.body.as_bytes());
            }
            crate::response::recycle(resp.body);
            self.streams[idx].answer = Answer::Streaming {
                buf,
                ended: true,
                trailers: resp.trailers,
            };
            self.send_data(idx, cx);
            if self.streams[idx].answer_done() {
                self.finish(idx, cx);
            }
            return;
        }
        let out = sink(&mut self.out, &mut self.files, self.in_flight, cx);
        frame::headers(out, id, &self.resp, !send_body, max_frame);
        let s = &mut self.streams[idx];
        s.answer = if send_body {
            Answer::Sending {
                body: resp.body,
                sent: 0,
            }
        } else {
            crate::response::recycle(resp.body);
            Answer::Done
        };
        if send_body {
            self.send_data(idx, cx);
        }
        if self.streams[idx].answer_done() {
            self.finish(idx, cx);
        }
    }

    /// Writes DATA for stream `idx` while the windows and the staging limit allow.
    fn send_data(&mut self, idx: usize, cx: &mut Cx) {
        let max_frame = self.max_frame;
        loop {
            let conn_window = self.send_window;
            let queued: u64 = self.files.iter().map(|(f, a)| f.len + a.len() as u64).sum();
            let out_len = self.out.len().max(cx.out.len()) + queued as usize;
            let s = &mut self.streams[idx];
            let (body, sent) = match &mut s.answer {
                Answer::Sending { body, sent } => (body, sent),
                Answer::Streaming { .. } => {
                    if out_len >= OUT_HIGH_WATER {
                        return;
                    }
                    return self.send_streamed(idx, cx);
                }
                _ => return,
            };
            let left = body.len() - *sent;
            let n = (left as i64)
                .min(conn_window)
                .min(s.send_window)
                .min(max_frame as i64);
            if n <= 0 || out_len >= OUT_HIGH_WATER {
                return;
            }
            let n = n as usize;
            let last = n as u64 == left;
            let by_sendfile =
                cx.sendfile && max_frame >= SENDFILE_MIN_FRAME && matches!(body, Body::File(_));
            let out = sink(&mut self.out, &mut self.files, self.in_flight, cx);
            let flags = if last { flag::END_STREAM } else { 0 };
            frame::head(out, n, kind::DATA, flags, s.id);
            match body {
                Body::File(f) if by_sendfile => {
                    // The payload follows the header straight from the page cache; what is
                    // written next goes after it.
                    let payload = FileBody {
                        file: f.file.clone(),
                        offset: f.offset + *sent,
                        len: n as u64,
                    };
                    self.files.push_back((payload, Vec::new()));
                }
                Body::File(f) => {
                    let at = out.len();
                    if read_file(f, *sent, n, out).is_err() {
                        // The file cannot be read: the stream ends with INTERNAL_ERROR (its
                        // length was already promised).
                        out.truncate(at - frame::HEAD_LEN);
                        let id = s.id;
                        tracing::warn!("static file read failed while sending over HTTP/2");
                        return self.stream_error(id, Code::Internal, cx);
                    }
                }
                b => {
                    let start = *sent as usize;
                    out.extend_from_slice(&b.as_bytes()[start..start + n]);
                }
            }
            *sent += n as u64;
            s.send_window -= n as i64;
            self.send_window -= n as i64;
            if last {
                s.answer = Answer::Done;
                return;
            }
        }
    }

    /// Stream `idx`'s answer is out: forget the stream, or, when the client is still sending a
    /// body nobody will read, drain it.
    ///
    /// RFC 9113 §8.1 allows RST_STREAM(NO_ERROR) at once, but a client that has not finished
    /// writing may then drop the whole answer (curl 7.88: "Stream error in the HTTP/2 framing
    /// layer" for a 401 to a POST). So the rest of the body is read and dropped, as
    /// HTTP/1.1's lingering close does and nginx does: while it can end within the window the
    /// stream has left (no WINDOW_UPDATE is given for it, so at most [`STREAM_WINDOW`]) and
    /// for `linger_timeout`. Past either bound the stream is reset with NO_ERROR.
    fn finish(&mut self, idx: usize, cx: &mut Cx) {
        let s = &mut self.streams[idx];
        let id = s.id;
        if s.remote_closed {
            self.closed.push(id);
            self.streams.swap_remove(idx);
        } else if s.discard {
            if s.can_end_within_window() {
                s.body = None;
                s.body_deadline = cx.now + cx.cfg.linger_timeout;
            } else {
                self.stream_error(id, Code::NoError, cx);
            }
        }
    }

    /// Sends what flow control held back; `true` when anything was written.
    fn produce(&mut self, cx: &mut Cx) -> bool {
        let before = self.out.len() + cx.out.len();
        let mut i = 0;
        while i < self.streams.len() && self.send_window > 0 {
            if matches!(
                self.streams[i].answer,
                Answer::Sending { .. } | Answer::Streaming { .. }
            ) {
                self.send_data(i, cx);
                if i < self.streams.len() && self.streams[i].answer_done() {
                    let len = self.streams.len();
                    self.finish(i, cx);
                    if self.streams.len() < len {
                        continue;
                    }
                }
            }
            i += 1;
        }
        self.end_if_done();
        self.out.len() + cx.out.len() > before
    }

    fn priority(&mut self, h: Head, p: &[u8], cx: &mut Cx) {
        if h.stream == 0 {
            return self.conn_error(Code::Protocol, cx);
        }
        if !self.calm.control(cx.now) {
            return self.conn_error(Code::EnhanceYourCalm, cx);
        }
        if p.len() != 5 {
            return self.stream_error(h.stream, Code::FrameSize, cx);
        }
        let dep = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff;
        if dep == h.stream {
            self.stream_error(h.stream, Code::Protocol, cx);
        }
        // Otherwise ignored: RFC 9113 deprecates the priority tree.
    }

    fn rst_stream<S: Service<Pending = P>>(&mut self, h: Head, p: &[u8], cx: &mut Cx, svc: &mut S) {
        if h.stream == 0 {
            return self.conn_error(Code::Protocol, cx);
        }
        if p.len() != 4 {
            return self.conn_error(Code::FrameSize, cx);
        }
        if h.stream > self.last_stream {
            return self.conn_error(Code::Protocol, cx);
        }
        if let Some(idx) = self.find(h.stream) {
            let s = self.streams.swap_remove(idx);
            if matches!(s.answer, Answer::Deferred(_)) {
                svc.answered(499, None, 0, b"");
            }
            if s.awaits_work() {
                cx.cancelled.push(u64::from(h.stream));
            }
            self.closed.push(h.stream);
            // A client ending the body of a stream whose answer is whole (§8.1: it may stop
            // sending once it has the answer) abandons no work: not a rapid reset.
            if !s.draining() && !self.calm.reset(cx.now) {
                self.conn_error(Code::EnhanceYourCalm, cx);
            }
        } else if self.closed.contains(h.stream) && p != [0; 4] && !self.calm.reset(cx.now) {
            // A stream answered in the read that opened it, then reset (rapid reset of a
            // cheap path): the answer was thrown away all the same. A legitimate client meets
            // this only when its cancel crosses our last frame.
            self.conn_error(Code::EnhanceYourCalm, cx);
        }
    }

    fn settings(&mut self, h: Head, p: &[u8], cx: &mut Cx) {
        if h.stream != 0 {
            return self.conn_error(Code::Protocol, cx);
        }
        if h.has(flag::ACK) {
            if !p.is_empty() {
                self.conn_error(Code::FrameSize, cx);
            }
            return;
        }
        if !p.len().is_multiple_of(6) {
            return self.conn_error(Code::FrameSize, cx);
        }
        if !self.calm.control(cx.now) {
            return self.conn_error(Code::EnhanceYourCalm, cx);
        }
        for e in p.chunks_exact(6) {
            let id = u16::from_be_bytes([e[0], e[1]]);
            let v = u32::from_be_bytes([e[2], e[3], e[4], e[5]]);
            match id {
                setting::ENABLE_PUSH if v > 1 => return self.conn_error(Code::Protocol, cx),
                setting::INITIAL_WINDOW_SIZE => {
                    if i64::from(v) > frame::MAX_WINDOW {
                        return self.conn_error(Code::FlowControl, cx);
                    }
                    // RFC 9113 §6.9.2: open streams' windows move by the difference.
                    let delta = i64::from(v) - self.initial_window;
                    self.initial_window = i64::from(v);
                    for s in &mut self.streams {
                        s.send_window += delta;
                        if s.send_window > frame::MAX_WINDOW {
                            return self.conn_error(Code::FlowControl, cx);
                        }
                    }
                }
                setting::MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME as u32..=frame::MAX_MAX_FRAME).contains(&v) {
                        return self.conn_error(Code::Protocol, cx);
                    }
                    self.max_frame = v as usize;
                }
                // The encoder never indexes, so the peer's table size needs nothing; the
                // others are advisory to a server.
                _ => {}
            }
        }
        frame::settings_ack(self.output(cx));
        self.produce(cx);
    }

    fn ping(&mut self, h: Head, p: &[u8], cx: &mut Cx) {
        if p.len() != 8 {
            return self.conn_error(Code::FrameSize, cx);
        }
        if h.stream != 0 {
            return self.conn_error(Code::Protocol, cx);
        }
        if h.has(flag::ACK) {
            // The drain's round trip (the only PING this server sends).
            if self.drain_final.is_some() && p == DRAIN_PING {
                self.final_goaway(cx);
            }
            return;
        }
        if !self.calm.control(cx.now) {
            return self.conn_error(Code::EnhanceYourCalm, cx);
        }
        frame::ping_ack(self.output(cx), p);
    }

    fn window_update(&mut self, h: Head, p: &[u8], cx: &mut Cx) {
        if p.len() != 4 {
            return self.conn_error(Code::FrameSize, cx);
        }
        let inc = i64::from(u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff);
        if h.stream == 0 {
            if inc == 0 {
                return self.conn_error(Code::Protocol, cx);
            }
            self.send_window += inc;
            if self.send_window > frame::MAX_WINDOW {
                return self.conn_error(Code::FlowControl, cx);
            }
        } else {
            if h.stream > self.last_stream {
                return self.conn_error(Code::Protocol, cx);
            }
            let Some(idx) = self.find(h.stream) else {
                return; // a closed stream: allowed for a while (§6.9)
            };
            if inc == 0 {
                return self.stream_error(h.stream, Code::Protocol, cx);
            }
            let s = &mut self.streams[idx];
            s.send_window += inc;
            if s.send_window > frame::MAX_WINDOW {
                return self.stream_error(h.stream, Code::FlowControl, cx);
            }
        }
        self.produce(cx);
    }

    /// Gives the client back the window its consumed DATA used, once half a window is owed.
    fn window_updates(&mut self, cx: &mut Cx) {
        if !self.reading() {
            return;
        }
        if self.recv_owed >= CONN_WINDOW / 2 {
            let n = self.recv_owed;
            self.recv_window += n;
            self.recv_owed = 0;
            frame::window_update(self.output(cx), 0, n as u32);
        }
        for i in 0..self.streams.len() {
            let s = &mut self.streams[i];
            if !s.remote_closed
                && !s.discard
                && s.recv_owed >= STREAM_WINDOW / 2
                && !s.body.as_ref().is_some_and(|b| b.held)
            {
                let (id, n) = (s.id, s.recv_owed);
                s.recv_window += n;
                s.recv_owed = 0;
                frame::window_update(self.output(cx), id, n as u32);
            }
        }
    }

    /// The upstream that stream `id`'s relayed body goes to has room again: its window is
    /// given back as it is owed.
    pub(crate) fn body_room(&mut self, id: u64, cx: &mut Cx) {
        let Some(idx) = u32::try_from(id).ok().and_then(|id| self.find(id)) else {
            return;
        };
        if let Some(b) = self.streams[idx].body.as_mut()
            && b.held
        {
            b.held = false;
            self.window_updates(cx);
        }
    }

    /// After our GOAWAY (drain) or the client's, the connection ends once no stream is open.
    fn end_if_done(&mut self) {
        if self.writing == Writing::Open
            && (self.goaway.is_some() || self.peer_goaway)
            && self.drain_final.is_none()
            && self.streams.is_empty()
        {
            self.writing = Writing::Last;
        }
    }

    /// The peer sends nothing more. Answers already written go out (a client may half-close
    /// after its last request, as a TLS close_notify does); streams still waiting for an answer
    /// are dropped (their deferred answers, when they come, find no stream); then the
    /// connection closes.
    pub(crate) fn eof<S: Service<Pending = P>>(&mut self, cx: &mut Cx, svc: &mut S) {
        if self.writing == Writing::Shut {
            self.writing = Writing::Closed;
        } else {
            for s in &self.streams {
                if matches!(s.answer, Answer::Deferred(_)) {
                    svc.answered(499, None, 0, b"");
                }
            }
            self.abandon_all(cx);
            self.collect = None;
            self.peer_closed = true;
            if matches!(self.writing, Writing::Open | Writing::Last) {
                self.writing = Writing::Last;
            }
        }
        self.set_timer(cx);
    }

    /// The deferred answer to stream `id`; `false` when the stream is gone.
    pub(crate) fn complete(&mut self, id: u64, resp: Response, cx: &mut Cx) -> bool {
        if !matches!(self.writing, Writing::Open | Writing::Last) || self.errored() {
            return false;
        }
        let Some(idx) = self
            .streams
            .iter()
            .position(|s| u64::from(s.id) == id && matches!(s.answer, Answer::Deferred(_)))
        else {
            return false;
        };
        self.answer(idx, resp, cx);
        self.end_if_done();
        self.set_timer(cx);
        true
    }

    pub(crate) fn on_timer<S: Service<Pending = P>>(&mut self, cx: &mut Cx, svc: &mut S) {
        if self.drain_final.is_some_and(|at| cx.now >= at) {
            // No ACK came back within the wait: the final GOAWAY anyway.
            self.final_goaway(cx);
            self.set_timer(cx);
        }
        if cx.now < self.deadline {
            return;
        }
        match self.timer {
            Timer::Fresh | Timer::Linger => self.writing = Writing::Closed,
            Timer::Head => self.conn_error(Code::Protocol, cx),
            Timer::Idle => {
                if !self.errored() && self.goaway.is_none() {
                    let last = self.last_stream;
                    frame::goaway(self.output(cx), last, Code::NoError);
                    self.goaway = Some(self.last_stream);
                }
                self.writing = Writing::Last;
            }
            Timer::Send => self.writing = Writing::Reset,
            Timer::Deferred | Timer::Body => {
                let now = cx.now;
                let late: Vec<(usize, u16)> = self
                    .streams
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| match s.answer {
                        Answer::Deferred(at) if at <= now => Some((i, 503)),
                        Answer::Waiting if s.body_deadline <= now => Some((i, 408)),
                        _ => None,
                    })
                    .collect();
                // Draining past linger_timeout: RFC 9113 §8.1's RST_STREAM(NO_ERROR).
                let drained: Vec<u32> = self
                    .streams
                    .iter()
                    .filter(|s| s.draining() && s.body_deadline <= now)
                    .map(|s| s.id)
                    .collect();
                for (i, status) in late.into_iter().rev() {
                    let why = if status == 503 {
                        "the answer did not come in time"
                    } else {
                        "request not received in time"
                    };
                    let mut resp = status_response(status, why);
                    if status == 503 {
                        svc.timed_out(u64::from(self.streams[i].id), &mut resp);
                    }
                    svc.answered(status, None, resp.body.len(), b"");
                    let s = &mut self.streams[i];
                    s.body = None;
                    s.body_deadline = u64::MAX;
                    if !s.remote_closed {
                        s.discard = true;
                    }
                    self.answer(i, resp, cx);
                }
                for id in drained {
                    self.stream_error(id, Code::NoError, cx);
                }
                self.end_if_done();
            }
        }
        self.set_timer(cx);
    }

    /// Graceful shutdown, as RFC 9113 §6.8 describes it: a first GOAWAY with the highest
    /// stream id (new requests are refused, and a request already on its way is still
    /// served) and a PING; when its ACK is back, a round trip later, the final GOAWAY naming
    /// the last stream served. Open streams finish; then the connection closes.
    pub(crate) fn drain(&mut self, cx: &mut Cx) {
        if self.writing == Writing::Open && self.goaway.is_none() && self.phase == Phase::Open {
            let out = self.output(cx);
            frame::goaway(out, MAX_STREAM_ID, Code::NoError);
            frame::ping(out, DRAIN_PING);
            self.goaway = Some(MAX_STREAM_ID);
            self.drain_final = Some(cx.now + DRAIN_ROUND_TRIP_WAIT);
        } else if self.writing == Writing::Open && self.goaway.is_none() {
            // Before the preface is read: nothing is on its way yet.
            let last = self.last_stream;
            frame::goaway(self.output(cx), last, Code::NoError);
            self.goaway = Some(last);
        }
        self.end_if_done();
        self.set_timer(cx);
    }

    /// A drain's final GOAWAY: streams above the last one the client opened are not served.
    fn final_goaway(&mut self, cx: &mut Cx) {
        self.drain_final = None;
        if self.writing == Writing::Open && !self.errored() {
            let last = self.last_stream;
            frame::goaway(self.output(cx), last, Code::NoError);
            self.goaway = Some(last);
        }
        self.end_if_done();
    }

    pub(crate) fn poll_transmit(&mut self, cx: &mut Cx) -> Transmit<'_> {
        match self.writing {
            Writing::Closed => return Transmit::Close,
            Writing::Reset => return Transmit::Reset,
            Writing::Shut => return Transmit::Idle,
            _ => {}
        }
        if self.in_flight {
            return Transmit::Idle;
        }
        if !self.out.is_empty() || !cx.out.is_empty() {
            return Transmit::Bytes {
                more: !self.files.is_empty(),
            };
        }
        if self.files.is_empty() {
            if self.writing == Writing::Open && self.produce(cx) {
                return Transmit::Bytes {
                    more: !self.files.is_empty(),
                };
            }
            return match self.writing {
                Writing::Last if self.peer_closed => Transmit::Close,
                Writing::Last => Transmit::Shutdown,
                _ => Transmit::Idle,
            };
        }
        let (f, _) = self.files.front().expect("checked above");
        Transmit::File {
            file: f,
            offset: f.offset,
            len: f.len,
        }
    }

    /// Keeps what the last write staged in the worker's `cx.out` as this connection's own
    /// output. For a caller that writes to several connections before transmitting any (an
    /// HTTP/2 upstream relaying answers to many clients): staged bytes left in `cx.out`
    /// would go out on whichever connection transmits next.
    pub(crate) fn keep_output(&mut self, cx: &mut Cx) {
        if cx.out.is_empty() {
            return;
        }
        // `sink` stages in `cx.out` only while ours is empty: the swap keeps the order.
        if self.out.is_empty() {
            std::mem::swap(&mut self.out, &mut cx.out);
        } else {
            self.out.extend_from_slice(&cx.out);
            cx.out.clear();
        }
        if cx.out.capacity() == 0 {
            cx.out = cx.pool.get();
        }
    }

    pub(crate) fn take_output(&mut self, cx: &mut Cx) -> Vec<u8> {
        self.in_flight = true;
        if self.out.is_empty() {
            std::mem::take(&mut cx.out)
        } else {
            std::mem::take(&mut self.out)
        }
    }

    /// Every byte taken with `take_output` (`n` of them) is on its way.
    pub(crate) fn sent(&mut self, n: u64, cx: &mut Cx) {
        self.in_flight = false;
        if self.timer == Timer::Send {
            self.deadline = self.pace.progress(n, cx);
        }
        self.set_timer(cx);
    }

    pub(crate) fn stalled(&mut self, cx: &Cx) {
        self.set_timer(cx);
        if self.timer == Timer::Send
            && let Some(at) = self.pace.stall(cx)
        {
            self.deadline = at;
        }
    }

    /// The file payload [`Transmit::File`] asked for is with the transport.
    pub(crate) fn file_taken(&mut self) {
        self.in_flight = true;
    }

    /// `n` more bytes of the file payload are out; once all are, what was written behind it
    /// goes next.
    pub(crate) fn file_sent(&mut self, n: u64, cx: &mut Cx) {
        self.in_flight = false;
        if let Some((f, _)) = self.files.front_mut() {
            f.offset += n;
            f.len -= n.min(f.len);
            if f.len == 0 {
                let (_, after) = self.files.pop_front().expect("checked above");
                // `out` went out before the payload: what followed it is next.
                cx.pool.put(&mut self.out);
                self.out = after;
            }
        }
        self.sent(n, cx);
    }

    pub(crate) fn shutdown_taken(&mut self) {
        self.in_flight = true;
    }

    pub(crate) fn shut(&mut self, cx: &mut Cx) {
        self.in_flight = false;
        self.writing = Writing::Shut;
        self.set_timer(cx);
    }

    fn set_timer(&mut self, cx: &Cx) {
        let cfg = &cx.cfg;
        // Looked for only when nothing is staged: a relay writing to many streams has output
        // staged from its first write on, and then skips the walk over every stream.
        let blocked = || {
            self.streams.iter().any(|s| match &s.answer {
                Answer::Sending { .. } => true,
                Answer::Streaming { buf, ended, .. } => !buf.is_empty() || *ended,
                _ => false,
            })
        };
        let (timer, deadline) = if self.writing == Writing::Shut {
            if self.timer == Timer::Linger {
                return;
            }
            (Timer::Linger, cx.now + cfg.linger_timeout)
        } else if self.in_flight || !self.out.is_empty() || !self.files.is_empty() || blocked() {
            if self.timer == Timer::Send {
                return; // restarted only by progress
            }
            (Timer::Send, self.pace.start(cx))
        } else if let Some((t, at)) = self
            .streams
            .iter()
            .filter_map(|s| match s.answer {
                Answer::Deferred(at) => Some((Timer::Deferred, at)),
                // Waiting for its next piece: whoever sends it keeps the time.
                Answer::Streaming { .. } => Some((Timer::Deferred, u64::MAX)),
                Answer::Waiting if s.body_deadline != u64::MAX => {
                    Some((Timer::Body, s.body_deadline))
                }
                Answer::Done if s.draining() => Some((Timer::Body, s.body_deadline)),
                _ => None,
            })
            .min_by_key(|(_, at)| *at)
        {
            (t, at)
        } else if self.collect.is_some() {
            if self.timer == Timer::Head {
                return;
            }
            (Timer::Head, cx.now + cfg.header_timeout)
        } else if self.phase != Phase::Open {
            return; // the preface's timer runs from the connection's start
        } else {
            if self.timer == Timer::Idle {
                return; // idle since the last stream ended, not since the last frame
            }
            (Timer::Idle, cx.now + cfg.keepalive_timeout)
        };
        self.timer = timer;
        self.deadline = deadline;
    }
}

/// The buffer output goes to: behind the last pending file payload, the bytes that follow
/// it; else ours while it holds bytes or a send is in flight (order is kept); else the
/// worker's `cx.out`.
fn sink<'a>(
    out: &'a mut Vec<u8>,
    files: &'a mut VecDeque<(FileBody, Vec<u8>)>,
    in_flight: bool,
    cx: &'a mut Cx,
) -> &'a mut Vec<u8> {
    let buf = if let Some((_, after)) = files.back_mut() {
        after
    } else if in_flight || !out.is_empty() {
        out
    } else {
        return &mut cx.out;
    };
    if buf.capacity() == 0 {
        *buf = cx.pool.get();
    }
    buf
}

/// Appends trailer fields as a HEADERS frame with END_STREAM (RFC 9113 §8.1: no
/// pseudo-headers; names lowercase, connection-specific fields left out, as in a head).
pub(crate) fn trailers_frame(out: &mut Vec<u8>, id: u32, trailers: &[Field], max_frame: usize) {
    let mut block = Vec::new();
    super::answer_fields::each(
        trailers.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
        false,
        |n, v| hpack::field(&mut block, n, v),
    );
    frame::headers(out, id, &block, true, max_frame);
}

impl<P> Stream<P> {
    fn answer_done(&self) -> bool {
        matches!(self.answer, Answer::Done)
    }

    /// Its answer comes from work outside the connection (a deferred handler, an upstream
    /// exchange, a streamed body), which is given up when the stream ends first.
    fn awaits_work(&self) -> bool {
        matches!(self.answer, Answer::Deferred(_) | Answer::Streaming { .. })
    }
}

/// Appends `n` bytes of a file body from `at` to `out`. HTTP/2 frames file bodies as DATA, so
/// `sendfile` cannot carry them: a frame header precedes every piece, and over TLS the
/// plaintext is encrypted in user space anyway. The read goes into the buffer's spare
/// capacity (`sys::pread_append`), not zeroed first.
pub(crate) fn read_file(
    f: &crate::response::FileBody,
    at: u64,
    n: usize,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    let mut done = 0;
    while done < n {
        let got =
            crate::sys::pread_append(f.file.as_fd(), out, n - done, f.offset + at + done as u64)?;
        if got == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        done += got;
    }
    Ok(())
}
