//! One HTTP/3 server connection as a state machine (RFC 9114): the client's stream bytes
//! and the time in; stream writes, finishes, resets and STOP_SENDINGs out through [`Wire`],
//! and a deadline.
//!
//! Owns the control streams both ways (SETTINGS, GOAWAY), QPACK's streams (the client's
//! encoder stream into the decoder, Section Acknowledgments and Insert Count Increments out,
//! the client's decoder stream read), request streams (HEADERS, DATA, trailers, their order
//! and their ends), and the defences (a field section's size, bodies at once, rapid resets).
//! Requests go to the same [`Service`] as HTTP/1.1 and HTTP/2, as the HTTP/1.1 head
//! `h2::fields` writes, named by stream id; answers leave as soon as they are decided.
//!
//! Invariants: every field section is decoded in stream order as it arrives, so the QPACK
//! table stays in step (the server announces QPACK_BLOCKED_STREAMS 0, so a section that
//! would wait for inserts is QPACK_DECOMPRESSION_FAILED); a connection error is reported
//! once and nothing more is read; an answer's bytes go to the transport in order and the
//! stream is finished only after the last.
#![forbid(unsafe_code)]

use linerate_h3::frame::{self, Frame, FrameReader, Role, kind, setting, stream_type};
use linerate_h3::qpack::{Decoded, ListSize};
use linerate_h3::{Code, qpack, varint};
use linerate_http1::{BodyDecoder, Method, Parsed, RequestHead, Version, status_has_no_body};

use super::{DRAIN_BODY_BYTES, MAX_BODY_STREAMS, MAX_FIELD_SECTION, QPACK_CAPACITY};
use crate::h1::{Cx, Decision, Exchange, STREAM_ROOM, Service, StreamHead, Timer, status_response};
use crate::h2::answer_fields;
use crate::h2::fields::{RequestFields, Scratch, TrailerFields};
use crate::h2::stream::{BodyIn, Calm};
use crate::pool::Pool;
use crate::response::{Body, Field, Response};
use bytes::{Buf, Bytes};

/// File bytes read for one write to the transport.
const FILE_CHUNK: usize = 64 * 1024;
/// Reads at least this large get a buffer of their own, which the transport keeps instead of
/// copying; smaller ones are read into the stream's output and copied (the transport's copy
/// of them is one allocation either way, and a buffer of their own would add another: for a
/// 1 KiB answer, a glibc large-bin request and its `malloc_consolidate`, seen with perf).
const OWNED_READ: usize = 16 * 1024;

/// The QUIC connection's streams, as the HTTP/3 connection drives them.
pub(crate) trait Wire {
    /// Writes to stream `id`: the bytes taken, 0 when its flow control or the connection's
    /// send buffer is full (a stream the peer stopped takes everything, unsent).
    fn write(&mut self, id: u64, data: &[u8]) -> usize;
    /// Writes `data` to stream `id` as [`Wire::write`] does, leaving in `data` what was not
    /// taken; a transport that keeps buffers by reference takes them without a copy.
    fn write_owned(&mut self, id: u64, data: &mut Bytes) {
        let n = self.write(id, data);
        data.advance(n);
    }
    /// Ends stream `id` after what was written.
    fn finish(&mut self, id: u64);
    /// Abandons sending on stream `id` (RESET_STREAM).
    fn reset(&mut self, id: u64, code: Code);
    /// Abandons receiving on stream `id` (STOP_SENDING).
    fn stop(&mut self, id: u64, code: Code);
    /// Opens a unidirectional stream of ours.
    fn open_uni(&mut self) -> Option<u64>;
    /// Closes the connection with an application error (CONNECTION_CLOSE).
    fn close(&mut self, code: Code);
}

/// Where a request's answer stands.
enum Answer {
    /// Not decided: the body is being read, or the request has not arrived.
    Waiting,
    /// The application answers later (503 at this deadline, ms; `u64::MAX`: an upstream
    /// keeps the time).
    Deferred(u64),
    /// HEADERS and the DATA frame's head written; this body's bytes follow.
    Sending { body: Body, sent: u64 },
    /// HEADERS written; pieces come as DATA frames until `ended` (then the stream ends).
    Streaming { ended: bool },
    /// Everything is written and the stream finished.
    Done,
}

/// A stream reset with this code answers something the client sent (a malformed or
/// incomplete request, a body over the limits), not a failure of ours: the client made the
/// server throw the stream's work away (MadeYouReset).
fn blames_peer(code: Code) -> bool {
    matches!(
        code,
        Code::MessageError
            | Code::RequestRejected
            | Code::RequestIncomplete
            | Code::FrameUnexpected
            | Code::FrameError
    )
}

/// A request stream the client opened.
struct Stream<P> {
    id: u64,
    reader: FrameReader,
    /// The stream's end (FIN) arrived.
    remote_closed: bool,
    /// The request's HEADERS arrived and was handed on.
    started: bool,
    /// The request was HEAD: the answer has no DATA.
    head: bool,
    /// Answered before its body ended: the rest is dropped. Once the answer is out the
    /// stream drains ([`Stream::draining`]) until FIN, [`DRAIN_BODY_BYTES`] more or
    /// `linger_timeout`; then STOP_SENDING.
    discard: bool,
    /// While draining: the most `received` may reach before STOP_SENDING (`u64::MAX`: not
    /// draining yet).
    drain_limit: u64,
    /// Content-Length, checked against the DATA received (RFC 9114 §4.1.2).
    declared: Option<u64>,
    received: u64,
    body: Option<BodyIn<P>>,
    answer: Answer,
    /// Bytes for the transport, from `at`: frame heads, field sections, streamed pieces.
    out: Vec<u8>,
    at: usize,
    /// File bytes read and not taken by the transport yet (after `out`): each read is its
    /// own buffer, handed to the transport without a copy.
    parked: Bytes,
    /// When the request (or its body) must have moved again (ms), while it is read.
    deadline: u64,
}

impl<P> Stream<P> {
    fn new(id: u64, deadline: u64) -> Stream<P> {
        Stream {
            id,
            reader: FrameReader::new(Role::Request, MAX_FIELD_SECTION),
            remote_closed: false,
            started: false,
            head: false,
            discard: false,
            drain_limit: u64::MAX,
            declared: None,
            received: 0,
            body: None,
            answer: Answer::Waiting,
            out: Vec::new(),
            at: 0,
            parked: Bytes::new(),
            deadline,
        }
    }

    /// Its answer comes from work outside the connection (a deferred handler, an upstream
    /// exchange, a streamed body), which is given up when the stream ends first.
    fn awaits_work(&self) -> bool {
        matches!(
            self.answer,
            Answer::Deferred(_) | Answer::Streaming { ended: false }
        )
    }

    fn unsent(&self) -> usize {
        self.out.len() - self.at + self.parked.len()
    }

    /// Its answer is out and the client is still sending a body nobody reads.
    fn draining(&self) -> bool {
        self.discard && !self.remote_closed && matches!(self.answer, Answer::Done)
    }
}

/// What one of the client's unidirectional streams carries (§6.2).
enum UniKind {
    /// Its type is not read yet (`held` has its first bytes).
    Unknown,
    Control(Box<FrameReader>),
    /// QPACK's encoder stream: instructions for our decoder.
    Encoder,
    /// QPACK's decoder stream: acknowledgments for our (static-only) encoder.
    Decoder,
}

struct Uni {
    id: u64,
    kind: UniKind,
    /// Bytes not yet used: a type split across reads, or a decoder instruction.
    held: Vec<u8>,
}

/// Which of the client's critical streams have opened.
const SEEN_CONTROL: u8 = 1;
const SEEN_ENCODER: u8 = 2;
const SEEN_DECODER: u8 = 4;

/// One HTTP/3 connection. `P` is the service's per-request body state.
pub(crate) struct Conn<P> {
    /// Our control and QPACK decoder streams are open.
    started: bool,
    control: Option<u64>,
    qdecoder: Option<u64>,
    /// Bytes owed to those two streams.
    control_out: Vec<u8>,
    qdecoder_out: Vec<u8>,
    uni: Vec<Uni>,
    seen: u8,
    decoder: qpack::Decoder,
    scratch: Scratch,
    /// An encoded field section being composed.
    resp: Vec<u8>,
    /// The `date` and `server` fields every answer carries, encoded for the second they name.
    stamp: Stamp,
    streams: Vec<Stream<P>>,
    /// Resets and STOP_SENDINGs for streams already forgotten.
    actions: Vec<(u64, Action)>,
    /// Streams whose relayed body may be read again (their upstream has room).
    resumed: Vec<u64>,
    /// Output buffers of forgotten streams, for the worker's pool at the next flush.
    spare: Vec<Vec<u8>>,
    /// The lowest client-initiated bidirectional stream id not yet seen.
    next_id: u64,
    /// A connection error: reported once through [`Wire::close`], and nothing more is read.
    error: Option<Code>,
    error_sent: bool,
    /// Our GOAWAY: requests on this stream id and above are refused.
    goaway: Option<u64>,
    peer_goaway: bool,
    calm: Calm,
    /// Streams reset since the last flush for something the client sent (MadeYouReset): at
    /// the flush each counts against `calm` as the client's own resets do.
    faults: u32,
    /// Streams that ended before their answers since the last flush: their work is handed
    /// to the driver to give up ([`Cx::cancelled`]).
    cancelled: Vec<u64>,
    timer: Timer,
    deadline: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Reset(Code),
    Stop(Code),
}

impl<P> Conn<P> {
    pub(crate) fn new() -> Conn<P> {
        Conn {
            started: false,
            control: None,
            qdecoder: None,
            control_out: Vec::new(),
            qdecoder_out: Vec::new(),
            uni: Vec::new(),
            seen: 0,
            decoder: qpack::Decoder::new(QPACK_CAPACITY),
            scratch: Scratch::default(),
            resp: Vec::new(),
            stamp: Stamp::default(),
            streams: Vec::new(),
            actions: Vec::new(),
            resumed: Vec::new(),
            spare: Vec::new(),
            next_id: 0,
            error: None,
            error_sent: false,
            goaway: None,
            peer_goaway: false,
            calm: Calm::default(),
            faults: 0,
            cancelled: Vec::new(),
            timer: Timer::Idle,
            deadline: u64::MAX,
        }
    }

    pub(crate) fn deadline(&self) -> u64 {
        self.deadline
    }

    pub(crate) fn timer(&self) -> Timer {
        self.timer
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.streams.is_empty()
    }

    pub(crate) fn outstanding(&self) -> usize {
        self.streams
            .iter()
            .filter(|s| matches!(s.answer, Answer::Deferred(_)))
            .count()
    }

    /// The connection has ended at the HTTP/3 layer: an error, or a GOAWAY (either side's)
    /// with no request left. The transport closes it.
    pub(crate) fn is_done(&self) -> bool {
        self.error.is_some()
            || ((self.goaway.is_some() || self.peer_goaway) && self.streams.is_empty())
    }

    pub(crate) fn release(&mut self, pool: &mut Pool) {
        for s in &mut self.streams {
            pool.put(&mut s.out);
        }
        self.streams.clear();
        for mut b in self.spare.drain(..) {
            pool.put(&mut b);
        }
    }

    /// Opens our control stream (with our SETTINGS, §6.2.1) and QPACK decoder stream.
    fn start(&mut self, cx: &Cx, wire: &mut impl Wire) {
        self.started = true;
        let Some(control) = wire.open_uni() else {
            return self.conn_error(Code::StreamCreationError);
        };
        self.control = Some(control);
        varint::write(&mut self.control_out, stream_type::CONTROL);
        frame::write_settings(
            &mut self.control_out,
            &[
                (setting::QPACK_MAX_TABLE_CAPACITY, QPACK_CAPACITY as u64),
                // Sections that would wait for inserts are refused, so no request waits
                // on the encoder stream (RFC 9204 §2.1.2).
                (setting::QPACK_BLOCKED_STREAMS, 0),
                (
                    setting::MAX_FIELD_SECTION_SIZE,
                    cx.cfg.limits.max_head_bytes as u64,
                ),
            ],
        );
        if let Some(id) = wire.open_uni() {
            self.qdecoder = Some(id);
            varint::write(&mut self.qdecoder_out, stream_type::QPACK_DECODER);
        }
    }

    /// A connection error (§8): reported once; nothing more is read or answered.
    fn conn_error(&mut self, code: Code) {
        if self.error.is_none() {
            self.error = Some(code);
        }
    }

    /// Bytes (and perhaps the end) of stream `id` arrived. `fin` with no bytes is the end
    /// alone.
    pub(crate) fn recv<S: Service<Pending = P>>(
        &mut self,
        id: u64,
        data: &[u8],
        fin: bool,
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        if self.error.is_some() {
            return;
        }
        match id & 3 {
            0 => self.request_bytes(id, data, fin, head, cx, svc),
            2 => self.uni_bytes(id, data, fin),
            // The client cannot send on streams we opened (the transport refuses it).
            _ => {}
        }
        self.set_timer(cx);
    }

    /// The bytes the request fields' buffers hold.
    #[cfg(test)]
    pub(crate) fn scratch_held(&self) -> usize {
        self.scratch.held()
    }

    fn find(&self, id: u64) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    fn request_bytes<S: Service<Pending = P>>(
        &mut self,
        id: u64,
        data: &[u8],
        fin: bool,
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        let idx = match self.find(id) {
            Some(idx) => idx,
            None if id >= self.next_id => {
                self.next_id = id + 4;
                if self.goaway.is_some_and(|g| id >= g) {
                    // §5.2: after our GOAWAY, a new request is refused unprocessed.
                    self.actions
                        .push((id, Action::Reset(Code::RequestRejected)));
                    self.actions.push((id, Action::Stop(Code::RequestRejected)));
                    return;
                }
                self.streams
                    .push(Stream::new(id, cx.now + cx.cfg.header_timeout));
                self.streams.len() - 1
            }
            // A stream already answered and forgotten: what is left of it is dropped.
            None => return,
        };
        let mut reader = std::mem::replace(
            &mut self.streams[idx].reader,
            FrameReader::new(Role::Request, 0),
        );
        let mut pos = 0;
        let mut alive = true;
        while alive && pos < data.len() && self.error.is_none() {
            let (used, got) = match reader.read(&data[pos..]) {
                Ok(r) => r,
                Err(code) => {
                    self.conn_error(code);
                    break;
                }
            };
            pos += used;
            let last = fin && pos == data.len();
            match got {
                None if used == 0 => break,
                None => {}
                Some(Frame::Headers(section)) => {
                    alive = self.section(id, section, last, head, cx, svc);
                }
                Some(Frame::HeadersTooLarge(_)) => {
                    alive = self.too_large(id, cx, svc);
                }
                Some(Frame::Data(piece)) => alive = self.data(id, piece, cx, svc),
                // The reader refuses every other known frame on a request stream.
                Some(_) => {}
            }
        }
        if self.error.is_some() {
            return;
        }
        let Some(idx) = self.find(id) else {
            return;
        };
        let at_boundary = reader.at_boundary();
        self.streams[idx].reader = reader;
        if fin && alive {
            if !at_boundary {
                // §7.1: a frame cut by the stream's end.
                return self.conn_error(Code::FrameError);
            }
            self.end_stream(idx, cx, svc);
        }
    }

    /// A HEADERS frame's field section on request stream `id`: the request, or its
    /// trailers. `false` when the stream is gone.
    fn section<S: Service<Pending = P>>(
        &mut self,
        id: u64,
        section: &[u8],
        last: bool,
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) -> bool {
        let Some(idx) = self.find(id) else {
            return false;
        };
        if self.streams[idx].started {
            let mut t = TrailerFields::default();
            if !self.decode(id, section, |n, v| t.field(n, v)) {
                return false;
            }
            if !last || t.error.is_some() {
                // §4.1: trailers end the message; a malformed one is H3_MESSAGE_ERROR.
                self.stream_error(idx, Code::MessageError);
                return false;
            }
            return true; // the stream's end follows (`last`)
        }
        let mut fields = RequestFields::new(&mut self.scratch, false);
        // Past max_head_bytes (our SETTINGS_MAX_FIELD_SECTION_SIZE) no more fields are
        // written down: a QPACK bomb is never expanded.
        let limit = cx.cfg.limits.max_head_bytes;
        let decoded = (self.decoder)
            .decode_within(section, limit, |n, v| fields.field(n, v))
            .ok();
        let checked = fields.finish();
        let Some(Decoded {
            required_insert_count: required,
            list,
        }) = decoded
        else {
            self.conn_error(Code::QpackDecompressionFailed);
            return false;
        };
        if required > 0
            && let Some(_) = self.qdecoder
        {
            qpack::write_section_ack(&mut self.qdecoder_out, id);
        }
        if !last && self.no_room_for_body() {
            self.stream_error(idx, Code::RequestRejected);
            return false;
        }
        self.streams[idx].started = true;
        let over = list == ListSize::Over;
        let declared = match checked {
            Ok(declared) => declared,
            // The fields past the limit were not read: the 431 below answers it.
            Err(_) if over => None,
            Err(_) => {
                // §4.1.2: a malformed request is a stream error of type H3_MESSAGE_ERROR.
                self.stream_error(idx, Code::MessageError);
                return false;
            }
        };
        let s = &mut self.streams[idx];
        s.declared = declared;
        s.remote_closed = last;
        s.deadline = if last {
            u64::MAX
        } else {
            cx.now + cx.cfg.body_timeout
        };
        if last && declared.is_some_and(|d| d != 0) {
            self.stream_error(idx, Code::MessageError);
            return false;
        }
        if over {
            self.own_answer(idx, 431, None, cx, svc);
            return self.find(id).is_some();
        }
        match head.parse(&self.scratch.head, &cx.cfg.limits) {
            Ok(Parsed::Complete(_)) => {}
            Ok(Parsed::Partial) => {
                self.own_answer(idx, 400, None, cx, svc);
                return self.find(id).is_some();
            }
            Err(e) => {
                self.own_answer(idx, e.status(), Some(e), cx, svc);
                return self.find(id).is_some();
            }
        }
        head.set_version(Version::Http3);
        self.streams[idx].head = head.method() == Method::Head;
        let decision = svc.request(Exchange {
            id,
            head,
            buf: &self.scratch.head,
            body: last.then_some(&[][..]),
            protocol: None,
            h1: false,
        });
        self.decide(idx, decision, cx, svc);
        self.find(id).is_some()
    }

    /// Decodes a section that is not a request's (trailers), keeping QPACK in step. `false`
    /// after a connection error.
    fn decode(&mut self, id: u64, section: &[u8], field: impl FnMut(&[u8], &[u8])) -> bool {
        match self.decoder.decode(section, field) {
            Ok(d) => {
                if d.required_insert_count > 0 && self.qdecoder.is_some() {
                    qpack::write_section_ack(&mut self.qdecoder_out, id);
                }
                true
            }
            Err(_) => {
                self.conn_error(Code::QpackDecompressionFailed);
                false
            }
        }
    }

    /// A field section over [`MAX_FIELD_SECTION`]: skipped unread, so answered 431 (or, as
    /// trailers, the message is malformed). `false` when the stream is gone.
    fn too_large<S: Service<Pending = P>>(&mut self, id: u64, cx: &mut Cx, svc: &mut S) -> bool {
        let Some(idx) = self.find(id) else {
            return false;
        };
        // The section was not decoded: the encoder learns its references are released
        // (RFC 9204 §4.4.2).
        if self.qdecoder.is_some() {
            qpack::write_stream_cancellation(&mut self.qdecoder_out, id);
        }
        if self.streams[idx].started {
            self.stream_error(idx, Code::MessageError);
            return false;
        }
        self.streams[idx].started = true;
        self.scratch.head.clear();
        self.own_answer(idx, 431, None, cx, svc);
        self.find(id).is_some()
    }

    /// The streams reset since the last flush for the client's faults count against the
    /// rapid-reset limit (MadeYouReset, CVE-2025-8671: a frame that makes the server reset
    /// a stream abandons as much work as the client's own RESET_STREAM), and the work of the
    /// streams that ended before their answers goes to the driver to give up.
    fn settle(&mut self, cx: &mut Cx) {
        for _ in 0..std::mem::take(&mut self.faults) {
            if !self.calm.reset(cx.now) {
                self.conn_error(Code::ExcessiveLoad);
                break;
            }
        }
        cx.cancelled.append(&mut self.cancelled);
    }

    /// Stream `idx` cannot go on: its sending side is reset and its receiving side stopped
    /// with `code`, and it is forgotten.
    fn stream_error(&mut self, idx: usize, code: Code) {
        let s = self.streams.swap_remove(idx);
        if blames_peer(code) {
            // The client's fault: its work is given up, and the reset counts as its own.
            if s.awaits_work() {
                self.cancelled.push(s.id);
            }
            self.faults += 1;
        }
        self.actions.push((s.id, Action::Reset(code)));
        if !s.remote_closed {
            self.actions.push((s.id, Action::Stop(code)));
        }
        self.forget(s);
    }

    fn forget(&mut self, mut s: Stream<P>) {
        if s.out.capacity() > 0 {
            s.out.clear();
            self.spare.push(std::mem::take(&mut s.out));
        }
    }

    /// A stream that will send a body cannot open: [`MAX_BODY_STREAMS`] bodies are being
    /// read.
    fn no_room_for_body(&self) -> bool {
        self.streams
            .iter()
            .filter(|s| s.started && !s.remote_closed && !s.discard)
            .count()
            >= MAX_BODY_STREAMS
    }

    /// A piece of a DATA frame on request stream `id`. `false` when the stream is gone.
    fn data<S: Service<Pending = P>>(
        &mut self,
        id: u64,
        data: &[u8],
        cx: &mut Cx,
        svc: &mut S,
    ) -> bool {
        let Some(idx) = self.find(id) else {
            return false;
        };
        let s = &mut self.streams[idx];
        // Counted even when dropped (an early answer's body): its end checks the length.
        s.received += data.len() as u64;
        if s.discard {
            if s.draining() && s.received > s.drain_limit {
                self.stop_draining(idx);
                return false;
            }
            return true;
        }
        if s.declared.is_some_and(|d| s.received > d) {
            self.stream_error(idx, Code::MessageError);
            return false;
        }
        s.deadline = cx.now + cx.cfg.body_timeout;
        let Some(b) = s.body.as_mut() else {
            return true;
        };
        let over = s.received > b.limit;
        let answer = if over {
            Some(status_response(413, "").close())
        } else {
            let refused = svc.data(&mut b.pending, data).err();
            // A relayed body whose upstream is full: the stream is not read again until it
            // has room ([`Conn::body_room`]), so QUIC's stream window holds the client.
            b.held |= b.relayed && !svc.room(&b.pending);
            refused
        };
        let Some(mut resp) = answer else {
            return true;
        };
        let relayed = b.relayed;
        let body = s.body.take();
        if relayed && !matches!(s.answer, Answer::Deferred(_)) {
            // The upstream's answer has begun: it is cut, never completed.
            svc.answered(resp.status, None, 0, b"");
            self.stream_error(idx, Code::InternalError);
            return false;
        }
        if over && let Some(body) = body {
            svc.refused(body.pending, &mut resp);
        }
        s.discard = true;
        svc.answered(resp.status, None, resp.body.len(), b"");
        self.answer(idx, resp, cx);
        self.find(id).is_some()
    }

    /// The client finished sending on stream `idx`.
    fn end_stream<S: Service<Pending = P>>(&mut self, idx: usize, cx: &mut Cx, svc: &mut S) {
        let s = &mut self.streams[idx];
        if s.remote_closed && s.started {
            return self.done_if_finished(idx, cx.now, cx.cfg.linger_timeout);
        }
        s.remote_closed = true;
        s.deadline = u64::MAX;
        if !s.started {
            // §4.1: the stream ended before its request was whole.
            return self.stream_error(idx, Code::RequestIncomplete);
        }
        if s.declared.is_some_and(|d| d != s.received) {
            return self.stream_error(idx, Code::MessageError);
        }
        let id = s.id;
        if let Some(b) = s.body.take() {
            let decision = svc.end(id, b.pending, BodyDecoder::Length(0));
            if b.relayed {
                // The answer is the upstream's, pending or under way already.
                return self.done_if_finished(idx, cx.now, cx.cfg.linger_timeout);
            }
            return self.decide(idx, decision, cx, svc);
        }
        self.done_if_finished(idx, cx.now, cx.cfg.linger_timeout);
    }

    /// Forgets stream `idx` once both sides are done. An answer that is out while the client
    /// is still sending its body starts the drain: §4.1.2 allows STOP_SENDING(H3_NO_ERROR) at
    /// once, but a client that has not finished writing may drop the answer (as curl does
    /// over HTTP/2), so the rest is read and dropped first, within
    /// [`DRAIN_BODY_BYTES`] and `linger_timeout`.
    fn done_if_finished(&mut self, idx: usize, now: u64, linger: u64) {
        let s = &mut self.streams[idx];
        if !matches!(s.answer, Answer::Done) {
            return;
        }
        if s.remote_closed {
            let s = self.streams.swap_remove(idx);
            self.forget(s);
        } else if s.discard && s.drain_limit == u64::MAX {
            if s.declared
                .is_some_and(|d| d.saturating_sub(s.received) > DRAIN_BODY_BYTES)
            {
                // A declared body that the drain would cut anyway: asked to stop at once.
                return self.stop_draining(idx);
            }
            s.drain_limit = s.received + DRAIN_BODY_BYTES;
            s.deadline = now.saturating_add(linger);
        }
    }

    /// The drain of stream `idx` is over without the body's end: §4.1.2's
    /// STOP_SENDING(H3_NO_ERROR); the answer is whole already.
    fn stop_draining(&mut self, idx: usize) {
        let s = self.streams.swap_remove(idx);
        self.actions.push((s.id, Action::Stop(Code::NoError)));
        self.forget(s);
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
        let line = crate::h1::request_line(&self.scratch.head);
        let line = match line.strip_suffix(b" HTTP/1.1") {
            Some(start) => [start, b" HTTP/3"].concat(),
            None => line.to_vec(),
        };
        svc.answered(status, error, resp.body.len(), &line);
        let s = &mut self.streams[idx];
        if !s.remote_closed {
            s.discard = true;
        }
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

    /// Writes `resp`'s HEADERS (and the head of one DATA frame for its whole body) for
    /// stream `idx`; the body's bytes follow as the transport takes them.
    fn answer(&mut self, idx: usize, resp: Response, cx: &mut Cx) {
        let s = &self.streams[idx];
        let no_body = status_has_no_body(resp.status);
        let send_body = !s.head && !no_body && !resp.body.is_empty();
        let r = &mut self.resp;
        let names_server = crate::h1::names_server(&resp.headers);
        section_start(r, resp.status, names_server, &mut self.stamp, cx);
        let mut grpc = false;
        if let Some(ct) = &resp.content_type {
            qpack::encode::field(r, b"content-type", ct.as_bytes());
            grpc = answer_fields::is_grpc(ct.as_bytes());
        }
        if !no_body && !grpc {
            let mut n = itoa::Buffer::new();
            qpack::encode::field(r, b"content-length", n.format(resp.body.len()).as_bytes());
        }
        // RFC 9114 §4.2.
        answer_fields::each(
            resp.headers
                .iter()
                .map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            false,
            |n, v| qpack::encode::field(r, n, v),
        );
        let s = &mut self.streams[idx];
        push_frame(s, kind::HEADERS, r, cx);
        if let Some(trailers) = &resp.trailers
            && !s.head
            && !no_body
            && !matches!(resp.body, Body::File(_))
        {
            // RFC 9114 §4.1: HEADERS, DATA, then the trailers' HEADERS, then the stream's end.
            if !resp.body.is_empty() {
                push_frame(s, kind::DATA, resp.body.as_bytes(), cx);
            }
            push_trailers(s, &mut self.resp, trailers, cx);
            crate::response::recycle(resp.body);
            s.answer = Answer::Streaming { ended: true };
        } else {
            s.answer = if send_body {
                frame::write_head(&mut s.out, kind::DATA, resp.body.len());
                Answer::Sending {
                    body: resp.body,
                    sent: 0,
                }
            } else {
                crate::response::recycle(resp.body);
                Answer::Streaming { ended: true }
            };
        }
        if let Some(b) = s.body.take() {
            // Answered before the body ended (a refusal): the rest is dropped.
            drop(b);
            s.discard = true;
        }
    }

    /// The stream whose answer to request `id` is still to come (none once the connection
    /// failed).
    fn deferred(&self, id: u64) -> Option<usize> {
        if self.error.is_some() {
            return None;
        }
        self.streams
            .iter()
            .position(|s| s.id == id && matches!(s.answer, Answer::Deferred(_)))
    }

    /// The deferred answer to stream `id`; `false` when the stream is gone.
    pub(crate) fn complete(&mut self, id: u64, resp: Response, cx: &mut Cx) -> bool {
        let Some(idx) = self.deferred(id) else {
            return false;
        };
        self.answer(idx, resp, cx);
        self.set_timer(cx);
        true
    }

    /// Whether stream `id` is read: not while its relayed body waits for room upstream
    /// (what the client sends meanwhile stays in QUIC's buffers, within the stream's window).
    pub(crate) fn reading(&self, id: u64) -> bool {
        self.find(id)
            .is_none_or(|i| !self.streams[i].body.as_ref().is_some_and(|b| b.held))
    }

    /// The upstream that stream `id`'s relayed body goes to has room again: the stream is
    /// read again (the driver takes it from [`Conn::resumed`]).
    pub(crate) fn body_room(&mut self, id: u64) {
        if let Some(i) = self.find(id)
            && let Some(b) = self.streams[i].body.as_mut()
            && b.held
        {
            b.held = false;
            self.resumed.push(id);
        }
    }

    /// A stream to read again now (see [`Conn::body_room`]).
    pub(crate) fn resumed(&mut self) -> Option<u64> {
        self.resumed.pop()
    }

    /// The head of stream `id`'s deferred answer, whose body follows in pieces
    /// ([`Conn::stream_data`], [`Conn::stream_end_with`]). `false` when the stream is gone.
    pub(crate) fn start_stream(&mut self, id: u64, head: &StreamHead<'_>, cx: &mut Cx) -> bool {
        let Some(idx) = self.deferred(id) else {
            return false;
        };
        let no_body = status_has_no_body(head.status);
        let send_body = !self.streams[idx].head && !no_body;
        let r = &mut self.resp;
        let names_server = head
            .fields
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(b"server"));
        match head.date {
            // A stored answer's own Date (then `server` as `section_start` writes it).
            Some(date) => {
                r.clear();
                qpack::encode::prefix(r);
                qpack::encode::status(r, head.status);
                qpack::encode::field(r, b"date", date);
                if let (Some(server), false) = (cx.cfg.server.as_deref(), names_server) {
                    qpack::encode::field(r, b"server", server);
                }
            }
            None => section_start(r, head.status, names_server, &mut self.stamp, cx),
        }
        if let Some(n) = head.length.filter(|_| !no_body) {
            let mut b = itoa::Buffer::new();
            qpack::encode::field(r, b"content-length", b.format(n).as_bytes());
        }
        // RFC 9114 §4.2; the length is the one written above.
        answer_fields::each(head.fields.iter().copied(), true, |n, v| {
            qpack::encode::field(r, n, v)
        });
        push_frame(&mut self.streams[idx], kind::HEADERS, r, cx);
        self.streams[idx].answer = Answer::Streaming { ended: !send_body };
        self.set_timer(cx);
        true
    }

    /// An interim (1xx) head on stream `id` before its final one (RFC 9114 §4.1: a HEADERS
    /// frame ahead of the final one), as a proxy relays an upstream's 103 Early Hints.
    /// `false` when the stream is gone or its final head has gone out.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn interim(
        &mut self,
        id: u64,
        status: u16,
        fields: &[(&[u8], &[u8])],
        cx: &mut Cx,
    ) -> bool {
        let Some(idx) = self.deferred(id) else {
            return false;
        };
        let r = &mut self.resp;
        r.clear();
        qpack::encode::prefix(r);
        qpack::encode::status(r, status);
        answer_fields::each(fields.iter().copied(), true, |n, v| {
            qpack::encode::field(r, n, v)
        });
        push_frame(&mut self.streams[idx], kind::HEADERS, r, cx);
        self.set_timer(cx);
        true
    }

    fn streaming(&self, id: u64) -> Option<usize> {
        if self.error.is_some() {
            return None;
        }
        self.streams
            .iter()
            .position(|s| s.id == id && matches!(s.answer, Answer::Streaming { ended: false }))
    }

    /// A piece of stream `id`'s streamed body, one DATA frame. `false`: the stream is gone
    /// (stop producing it).
    pub(crate) fn stream_data(&mut self, id: u64, data: &[u8], cx: &mut Cx) -> bool {
        let Some(idx) = self.streaming(id) else {
            return false;
        };
        if !data.is_empty() {
            push_frame(&mut self.streams[idx], kind::DATA, data, cx);
        }
        true
    }

    /// Whether stream `id` can take another piece now. A stream that is gone has room: the
    /// next piece learns it is gone.
    pub(crate) fn stream_room(&self, id: u64) -> bool {
        self.streaming(id)
            .is_none_or(|idx| self.streams[idx].unsent() < STREAM_ROOM)
    }

    /// Stream `id`'s streamed body is whole: the stream ends after what is held, and after
    /// a HEADERS frame carrying `trailers` when there are any (RFC 9114 §4.1). `false` when
    /// the stream is gone.
    pub(crate) fn stream_end_with(&mut self, id: u64, trailers: &[Field], cx: &mut Cx) -> bool {
        let Some(idx) = self.streaming(id) else {
            return false;
        };
        if !trailers.is_empty() {
            push_trailers(&mut self.streams[idx], &mut self.resp, trailers, cx);
        }
        self.streams[idx].answer = Answer::Streaming { ended: true };
        self.set_timer(cx);
        true
    }

    /// Stream `id`'s streamed body cannot be completed: the stream is reset
    /// (H3_INTERNAL_ERROR), so the client cannot take what it got for whole. `false` when
    /// the stream is gone.
    pub(crate) fn stream_abort(&mut self, id: u64, cx: &mut Cx) -> bool {
        let Some(idx) = self.streaming(id) else {
            return false;
        };
        self.stream_error(idx, Code::InternalError);
        self.set_timer(cx);
        true
    }

    /// The client reset its side of stream `id` (RESET_STREAM): the request is abandoned,
    /// and so is its answer.
    pub(crate) fn reset<S: Service<Pending = P>>(&mut self, id: u64, cx: &mut Cx, svc: &mut S) {
        if self.error.is_some() {
            return;
        }
        if id & 3 == 2 {
            if self.uni.iter().any(|u| {
                u.id == id
                    && matches!(
                        u.kind,
                        UniKind::Control(_) | UniKind::Encoder | UniKind::Decoder
                    )
            }) {
                return self.conn_error(Code::ClosedCriticalStream);
            }
            self.uni.retain(|u| u.id != id);
            return;
        }
        if id >= self.next_id {
            self.next_id = id + 4;
        }
        if let Some(idx) = self.find(id) {
            let s = self.streams.swap_remove(idx);
            if matches!(s.answer, Answer::Deferred(_)) {
                svc.answered(499, None, 0, b"");
            }
            if s.awaits_work() {
                self.cancelled.push(id);
            }
            if !s.started && self.qdecoder.is_some() {
                qpack::write_stream_cancellation(&mut self.qdecoder_out, id);
            }
            if !matches!(s.answer, Answer::Done) {
                self.actions
                    .push((id, Action::Reset(Code::RequestCancelled)));
            }
            self.forget(s);
        } else if id & 3 == 0 {
            // Cancelled before its HEADERS were read, or after its answer was forgotten:
            // our half is closed too, or the transport keeps the stream (and its credit,
            // RFC 9000 §4.6) for good. A half already closed makes this a no-op.
            self.actions
                .push((id, Action::Reset(Code::RequestCancelled)));
        }
        if !self.calm.reset(cx.now) {
            self.conn_error(Code::ExcessiveLoad);
        }
        self.set_timer(cx);
    }

    /// The client asked us to stop sending on stream `id` (STOP_SENDING): its answer is
    /// abandoned (the transport resets it).
    pub(crate) fn stopped<S: Service<Pending = P>>(&mut self, id: u64, cx: &mut Cx, svc: &mut S) {
        if let Some(idx) = self.find(id) {
            let s = self.streams.swap_remove(idx);
            if matches!(s.answer, Answer::Deferred(_)) {
                svc.answered(499, None, 0, b"");
            }
            if s.awaits_work() {
                self.cancelled.push(id);
            }
            self.actions
                .push((id, Action::Reset(Code::RequestCancelled)));
            if !s.remote_closed {
                self.actions
                    .push((id, Action::Stop(Code::RequestCancelled)));
            }
            self.forget(s);
        } else if id & 3 == 0 {
            // A request stream not (or no longer) known: both halves closed, as above, so
            // its HEADERS, if they come, are not read and the stream's credit comes back.
            self.actions
                .push((id, Action::Reset(Code::RequestCancelled)));
            self.actions
                .push((id, Action::Stop(Code::RequestCancelled)));
        }
        self.set_timer(cx);
    }

    /// Bytes on one of the client's unidirectional streams (§6.2).
    fn uni_bytes(&mut self, id: u64, data: &[u8], fin: bool) {
        let idx = match self.uni.iter().position(|u| u.id == id) {
            Some(i) => i,
            None => {
                self.uni.push(Uni {
                    id,
                    kind: UniKind::Unknown,
                    held: Vec::new(),
                });
                self.uni.len() - 1
            }
        };
        let mut input = data;
        let joined: Vec<u8>;
        if matches!(self.uni[idx].kind, UniKind::Unknown) {
            let u = &mut self.uni[idx];
            u.held.extend_from_slice(data);
            let Some((ty, n)) = varint::read(&u.held) else {
                if fin {
                    // Ended before its type: nothing to do with it.
                    self.uni.swap_remove(idx);
                }
                return;
            };
            let mut held = std::mem::take(&mut u.held);
            held.drain(..n);
            joined = held;
            let (kind, bit) = match ty {
                stream_type::CONTROL => (
                    UniKind::Control(Box::new(FrameReader::new(Role::Control, 0))),
                    SEEN_CONTROL,
                ),
                stream_type::QPACK_ENCODER => (UniKind::Encoder, SEEN_ENCODER),
                stream_type::QPACK_DECODER => (UniKind::Decoder, SEEN_DECODER),
                // §6.2.2: only servers push.
                stream_type::PUSH => return self.conn_error(Code::StreamCreationError),
                _ => {
                    // §6.2.3: unknown (and reserved) types are not read.
                    self.actions
                        .push((id, Action::Stop(Code::StreamCreationError)));
                    self.uni.swap_remove(idx);
                    return;
                }
            };
            if self.seen & bit != 0 {
                // §6.2.1, RFC 9204 §4.2: one of each.
                return self.conn_error(Code::StreamCreationError);
            }
            self.seen |= bit;
            self.uni[idx].kind = kind;
            input = &joined;
        }
        let u = &mut self.uni[idx];
        match &mut u.kind {
            UniKind::Control(reader) => {
                let mut pos = 0;
                while pos < input.len() {
                    let (used, got) = match reader.read(&input[pos..]) {
                        Ok(r) => r,
                        Err(code) => return self.conn_error(code),
                    };
                    pos += used;
                    match got {
                        None if used == 0 => break,
                        // §7.2.4: the client's settings; its QPACK table size does not
                        // matter to an encoder that never inserts.
                        Some(Frame::Settings(_)) | None | Some(Frame::MaxPushId(_)) => {}
                        Some(Frame::Goaway(_)) => self.peer_goaway = true,
                        // §7.2.3: no push was promised, so no id can be cancelled.
                        Some(Frame::CancelPush(_)) => return self.conn_error(Code::IdError),
                        Some(_) => return self.conn_error(Code::FrameUnexpected),
                    }
                }
            }
            UniKind::Encoder => {
                if let Err(code) = self.decoder.encoder_stream(input) {
                    return self.conn_error(code);
                }
                if self.qdecoder.is_some() {
                    self.decoder.write_increment(&mut self.qdecoder_out);
                }
            }
            UniKind::Decoder => {
                u.held.extend_from_slice(input);
                match qpack::read_decoder_stream(&u.held) {
                    Ok(n) => {
                        u.held.drain(..n);
                    }
                    Err(code) => return self.conn_error(code),
                }
            }
            UniKind::Unknown => {}
        }
        if fin {
            // §6.2.1, RFC 9204 §4.2: closing a critical stream ends the connection.
            self.conn_error(Code::ClosedCriticalStream);
        }
    }

    /// Moves what is owed to the transport: our control and QPACK streams' bytes, each
    /// answer's bytes in order (file bodies read as the transport takes them), finishes,
    /// resets and STOP_SENDINGs, and a connection error.
    pub(crate) fn flush(&mut self, cx: &mut Cx, wire: &mut impl Wire) {
        self.settle(cx);
        if !self.started && self.error.is_none() {
            self.start(cx, wire);
        }
        if let Some(code) = self.error {
            if !self.error_sent {
                self.error_sent = true;
                wire.close(code);
            }
            return;
        }
        if let Some(id) = self.control {
            write_all(wire, id, &mut self.control_out);
        }
        if let Some(id) = self.qdecoder {
            write_all(wire, id, &mut self.qdecoder_out);
        }
        let mut i = 0;
        while i < self.streams.len() {
            let s = &mut self.streams[i];
            let failed = send(s, wire);
            if failed {
                tracing::warn!("static file read failed while sending over HTTP/3");
                self.stream_error(i, Code::InternalError);
                continue;
            }
            let before = self.streams.len();
            if matches!(self.streams[i].answer, Answer::Done) {
                self.done_if_finished(i, cx.now, cx.cfg.linger_timeout);
            }
            if self.streams.len() == before {
                i += 1;
            }
        }
        for (id, a) in self.actions.drain(..) {
            match a {
                Action::Reset(code) => wire.reset(id, code),
                Action::Stop(code) => wire.stop(id, code),
            }
        }
        while let Some(mut b) = self.spare.pop() {
            cx.pool.put(&mut b);
        }
        self.set_timer(cx);
    }

    /// Graceful shutdown: GOAWAY naming the first request not served (§5.2); the open
    /// ones finish, then the connection closes.
    pub(crate) fn drain(&mut self, cx: &mut Cx) {
        if self.goaway.is_none() && self.error.is_none() {
            frame::write_goaway(&mut self.control_out, self.next_id);
            self.goaway = Some(self.next_id);
        }
        self.set_timer(cx);
    }

    pub(crate) fn on_timer<S: Service<Pending = P>>(&mut self, cx: &mut Cx, svc: &mut S) {
        if cx.now < self.deadline {
            return;
        }
        let now = cx.now;
        let mut i = self.streams.len();
        while i > 0 {
            i -= 1;
            let s = &self.streams[i];
            let status = match s.answer {
                Answer::Deferred(at) if at <= now => 503,
                Answer::Waiting if s.deadline <= now && !s.started => {
                    // The request did not come whole in time.
                    self.stream_error(i, Code::RequestIncomplete);
                    continue;
                }
                Answer::Waiting if s.deadline <= now => 408,
                Answer::Done if s.draining() && s.deadline <= now => {
                    self.stop_draining(i);
                    continue;
                }
                _ => continue,
            };
            let why = if status == 503 {
                "the answer did not come in time"
            } else {
                "request not received in time"
            };
            let mut resp = status_response(status, why);
            if status == 503 {
                svc.timed_out(self.streams[i].id, &mut resp);
            }
            svc.answered(status, None, resp.body.len(), b"");
            let s = &mut self.streams[i];
            s.body = None;
            s.deadline = u64::MAX;
            if !s.remote_closed {
                s.discard = true;
            }
            self.answer(i, resp, cx);
        }
        self.set_timer(cx);
    }

    fn set_timer(&mut self, _cx: &Cx) {
        let next = self
            .streams
            .iter()
            .filter_map(|s| match s.answer {
                Answer::Deferred(at) => Some((Timer::Deferred, at)),
                Answer::Waiting if s.deadline != u64::MAX => Some((Timer::Body, s.deadline)),
                Answer::Done if s.draining() => Some((Timer::Body, s.deadline)),
                _ => None,
            })
            .min_by_key(|(_, at)| *at);
        // Idle connections and unread answers are QUIC's to time out (its idle timeout).
        (self.timer, self.deadline) = next.unwrap_or((Timer::Idle, u64::MAX));
    }
}

impl<P> Default for Conn<P> {
    fn default() -> Self {
        Conn::new()
    }
}

/// The `date` and `server` fields as QPACK encodes them, kept for the second `date` names:
/// every answer in that second copies them instead of encoding them again. (A reload that
/// renames the server shows on a connection's answers from the next second.)
#[derive(Default)]
struct Stamp {
    date: [u8; linerate_http1::DATE_LEN],
    bytes: Vec<u8>,
}

/// Starts an answer's field section in `r`: the prefix, `:status`, `date`, and `server`
/// unless the answer names its own.
fn section_start(r: &mut Vec<u8>, status: u16, names_server: bool, stamp: &mut Stamp, cx: &Cx) {
    r.clear();
    qpack::encode::prefix(r);
    qpack::encode::status(r, status);
    let date = cx.date.get();
    if names_server {
        return qpack::encode::field(r, b"date", date);
    }
    if stamp.bytes.is_empty() || stamp.date != *date {
        stamp.date = *date;
        stamp.bytes.clear();
        qpack::encode::field(&mut stamp.bytes, b"date", date);
        if let Some(server) = cx.cfg.server.as_deref() {
            qpack::encode::field(&mut stamp.bytes, b"server", server);
        }
    }
    r.extend_from_slice(&stamp.bytes);
}

/// Appends a frame of `kind` carrying `payload` to stream `s`'s output.
fn push_frame<P>(s: &mut Stream<P>, kind: u64, payload: &[u8], cx: &mut Cx) {
    if s.out.capacity() == 0 {
        s.out = cx.pool.get();
    }
    frame::write_head(&mut s.out, kind, payload.len() as u64);
    s.out.extend_from_slice(payload);
}

/// Appends a HEADERS frame carrying `trailers` (QPACK-encoded in `r`, like a head: names
/// lowercase, no pseudo-fields, no connection-specific fields) to stream `s`'s output.
fn push_trailers<P>(s: &mut Stream<P>, r: &mut Vec<u8>, trailers: &[Field], cx: &mut Cx) {
    r.clear();
    qpack::encode::prefix(r);
    answer_fields::each(
        trailers.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
        false,
        |n, v| qpack::encode::field(r, n, v),
    );
    push_frame(s, kind::HEADERS, r, cx);
}

/// Writes as much of `buf` to stream `id` as the transport takes; the rest stays.
fn write_all(wire: &mut impl Wire, id: u64, buf: &mut Vec<u8>) {
    if !buf.is_empty() {
        let n = wire.write(id, buf);
        buf.drain(..n);
    }
}

/// Writes stream `s`'s answer as far as the transport takes it, and finishes the stream
/// after its last byte. `true` when a file body could not be read.
fn send<P>(s: &mut Stream<P>, wire: &mut impl Wire) -> bool {
    loop {
        // The body's next piece joins the frame heads while little waits, so a small answer
        // is one write (one copy and one allocation in the transport, not one per piece).
        if s.parked.is_empty() && s.out.len() - s.at < OWNED_READ && fill(s).is_err() {
            return true;
        }
        if s.at < s.out.len() {
            s.at += wire.write(s.id, &s.out[s.at..]);
            if s.at < s.out.len() {
                return false;
            }
            s.out.clear();
            s.at = 0;
        }
        if !s.parked.is_empty() {
            wire.write_owned(s.id, &mut s.parked);
            if !s.parked.is_empty() {
                return false;
            }
        }
        match &s.answer {
            Answer::Sending { body, sent } if *sent < body.len() => {}
            Answer::Sending { .. } | Answer::Streaming { ended: true } => {
                wire.finish(s.id);
                s.answer = Answer::Done;
                return false;
            }
            _ => return false,
        }
    }
}

/// Takes the next piece of stream `s`'s body: a small one into its output (after what is
/// there), a large one into `parked`, handed to the transport without a copy (a file read
/// of [`OWNED_READ`] or more into a buffer of its own; an in-memory body as it is). A file
/// is read [`FILE_CHUNK`] at a time, only as the transport takes it.
fn fill<P>(s: &mut Stream<P>) -> std::io::Result<()> {
    let Answer::Sending { body, sent } = &mut s.answer else {
        return Ok(());
    };
    let len = body.len();
    if *sent >= len {
        return Ok(());
    }
    match body {
        Body::File(f) => {
            let n = (len - *sent).min(FILE_CHUNK as u64) as usize;
            if n >= OWNED_READ {
                let mut chunk = Vec::new();
                crate::h2::read_file(f, *sent, n, &mut chunk)?;
                s.parked = Bytes::from(chunk);
            } else {
                crate::h2::read_file(f, *sent, n, &mut s.out)?;
            }
            *sent += n as u64;
        }
        b => {
            let from = *sent as usize;
            if len - *sent < OWNED_READ as u64 {
                s.out.extend_from_slice(&b.as_bytes()[from..]);
            } else {
                s.parked = match std::mem::take(b) {
                    Body::Owned(v) => Bytes::from(v).slice(from..),
                    Body::Static(v) => Bytes::from_static(&v[from..]),
                    _ => Bytes::new(),
                };
            }
            *sent = len;
        }
    }
    Ok(())
}
