//! HTTP/2 for the load generator, the client's side, sans I/O (RFC 9113; HPACK, RFC 7541).
//! `Client` owns one connection's protocol: the preface and SETTINGS, streams opened from a
//! `Request` (`request`: encoded once before the run), the server's frames turned into `Event`s
//! (responses, resets, refusals), flow control both ways, SETTINGS/PING acknowledgements. Bytes
//! in; bytes to write and events out. No sockets, no clock: each stream carries its caller's tag.
//! Invariant: every header block the server sends goes through the connection's one HPACK
//! decoder, in order, so its dynamic table stays in step with the server's.
//! `--grpc` (`Client::grpc`): each answer is also held to gRPC's rules (`grpc`) and reported
//! as `Event::Grpc`; DATA is then read rather than skipped. Plain runs pay one flag test per
//! header block and per DATA frame header for it.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::fmt;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Bytes in a frame header (RFC 9113 §4.1).
pub const FRAME_HEAD: usize = 9;
/// The largest frame payload the client accepts, and the largest frame of a request header
/// block: SETTINGS_MAX_FRAME_SIZE's default, which the client does not raise (RFC 9113 §6.5.2).
pub const MAX_FRAME: usize = 16_384;
/// SETTINGS_INITIAL_WINDOW_SIZE the client announces, and the connection window it opens at
/// the start: so large that the server never waits on the client for credit.
pub const RECV_WINDOW: i64 = 16 << 20;
/// Streams assumed allowed until the server's SETTINGS arrive: RFC 9113 §5.1.2 asks servers to
/// allow at least 100, and nghttp2 (h2load) assumes the same.
pub const ASSUMED_MAX_STREAMS: usize = 100;
/// The largest stream id (2^31 - 1); once it is used the connection is reopened.
pub const LAST_STREAM_ID: u32 = (1 << 31) - 1;
/// Most bytes of one response header block (HEADERS and its CONTINUATIONs).
pub const MAX_HEADER_BLOCK: usize = 64 * 1024;
/// The HPACK decoder's dynamic table limit: SETTINGS_HEADER_TABLE_SIZE's default, which the
/// client does not change.
pub const HEADER_TABLE_SIZE: usize = linerate_hpack::HEADER_TABLE_SIZE;
/// Every flow-control window before SETTINGS or WINDOW_UPDATE move it (RFC 9113 §6.9.2).
const DEFAULT_WINDOW: i64 = 65_535;
/// The largest flow-control window (RFC 9113 §6.9.1).
const MAX_WINDOW: i64 = (1 << 31) - 1;
/// The largest SETTINGS_MAX_FRAME_SIZE a peer may announce.
const MAX_MAX_FRAME: u32 = (1 << 24) - 1;

/// Frame types (RFC 9113 §6).
mod kind {
    pub const DATA: u8 = 0;
    pub const HEADERS: u8 = 1;
    pub const PRIORITY: u8 = 2;
    pub const RST_STREAM: u8 = 3;
    pub const SETTINGS: u8 = 4;
    pub const PUSH_PROMISE: u8 = 5;
    pub const PING: u8 = 6;
    pub const GOAWAY: u8 = 7;
    pub const WINDOW_UPDATE: u8 = 8;
    pub const CONTINUATION: u8 = 9;
}

/// Frame flags.
mod flag {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS identifiers (RFC 9113 §6.5.2).
mod setting {
    pub const ENABLE_PUSH: u16 = 2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 3;
    pub const INITIAL_WINDOW_SIZE: u16 = 4;
    pub const MAX_FRAME_SIZE: u16 = 5;
}

/// A connection error (RFC 9113 §5.4.1): the server broke the protocol, so nothing more on the
/// connection can be trusted and every request in flight on it is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum H2Error {
    /// A frame over `MAX_FRAME`, or of the wrong length for its type (FRAME_SIZE_ERROR).
    FrameSize(u8),
    /// A frame where the protocol allows none (PROTOCOL_ERROR): the rule broken.
    Protocol(&'static str),
    /// More DATA than the window allowed, or a window pushed past 2^31 - 1.
    FlowControl,
    /// A header block HPACK cannot decode (COMPRESSION_ERROR).
    Compression,
    /// A response whose first HEADERS carry no valid `:status`.
    Status,
}

impl fmt::Display for H2Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            H2Error::FrameSize(k) => write!(f, "a frame of type {k} has a bad length"),
            H2Error::Protocol(rule) => write!(f, "protocol error: {rule}"),
            H2Error::FlowControl => f.write_str("flow-control error"),
            H2Error::Compression => f.write_str("a header block could not be decoded (HPACK)"),
            H2Error::Status => f.write_str("a response has no valid :status"),
        }
    }
}

impl std::error::Error for H2Error {}

/// What became of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<T> {
    /// The response is complete (END_STREAM): its final status and its body bytes.
    Response { tag: T, status: u16, body: u64 },
    /// The server reset the stream (RST_STREAM, with this error code) before the response
    /// was complete.
    Reset { tag: T, code: u32 },
    /// The stream is above the last stream id of the server's GOAWAY: it was never processed.
    Refused { tag: T },
    /// `--grpc`: the call's answer is complete (END_STREAM): its HTTP status, whether it met
    /// gRPC's rules (`grpc::Answer::verdict`), and its whole messages.
    Grpc {
        tag: T,
        status: u16,
        verdict: Result<(), grpc::Fault>,
        messages: u32,
    },
}

/// Appends a frame header.
fn head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let l = (len as u32).to_be_bytes();
    let s = stream.to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags, s[0], s[1], s[2], s[3]]);
}

fn window_update(out: &mut Vec<u8>, stream: u32, inc: i64) {
    head(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&(inc as u32).to_be_bytes());
}

/// A frame header as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Head {
    len: usize,
    kind: u8,
    flags: u8,
    /// Reserved bit cleared (RFC 9113 §4.1: ignored on receipt).
    stream: u32,
}

impl Head {
    fn parse(b: &[u8]) -> Head {
        Head {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]) as usize,
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }

    fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// Where reading stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    /// Waiting for a frame header (its first bytes, if any, are in `pending`).
    Head,
    /// Inside an unpadded DATA frame: `left` payload bytes still to skip. They are counted when
    /// the frame header arrives, never copied.
    Data { stream: u32, left: usize, end: bool },
    /// Collecting the payload of any other frame (or padded DATA) into `pending`, unless it
    /// arrives whole.
    Payload(Head),
}

/// An open stream: its request sent (or its body still going out), its response not done.
#[derive(Debug)]
struct Stream<T> {
    id: u32,
    tag: T,
    /// The response is complete and reported; the stream lives on only to finish its body.
    answered: bool,
    /// The final status (0 until the response's HEADERS).
    status: u16,
    /// Response body bytes received.
    body: u64,
    /// Request body bytes not sent yet (flow control holds them back).
    left: usize,
    /// `--grpc`: the answer as gRPC sees it (untouched otherwise).
    grpc: grpc::Answer,
    send_window: i64,
    recv_window: i64,
    /// Bytes received since the last WINDOW_UPDATE for this stream.
    recv_owed: i64,
}

/// A header block being collected from HEADERS and CONTINUATION frames.
#[derive(Clone, Copy, Debug)]
struct Collect {
    stream: u32,
    end_stream: bool,
}

/// One HTTP/2 client connection. `T` is what the caller keeps per request (its send time).
pub struct Client<T> {
    /// Streams the caller allows in flight (`--max-concurrent-streams`).
    max_streams: usize,
    /// `--grpc`: what each answer is held to; None for plain HTTP/2.
    grpc: Option<grpc::Expect>,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (`ASSUMED_MAX_STREAMS` until known).
    peer_max_streams: usize,
    /// The server's SETTINGS arrived.
    peer_settings: bool,
    /// The server's SETTINGS_INITIAL_WINDOW_SIZE: each new stream's send window.
    peer_window: i64,
    /// The server's SETTINGS_MAX_FRAME_SIZE: the largest DATA frame sent.
    peer_max_frame: usize,
    /// Connection windows: what we may send, what the server may send.
    send_window: i64,
    recv_window: i64,
    recv_owed: i64,
    /// The id the next stream gets (odd, growing; past `LAST_STREAM_ID` when spent).
    next_id: u32,
    /// Open streams in id order, which is the order they were opened.
    streams: VecDeque<Stream<T>>,
    /// Streams whose response is not complete.
    in_flight: usize,
    /// Streams whose request body is not all sent.
    bodies: usize,
    /// The lowest last-stream-id of the server's GOAWAYs: no stream is opened after one.
    goaway: Option<u32>,
    read: Read,
    pending: Vec<u8>,
    block: Vec<u8>,
    collect: Option<Collect>,
    decoder: linerate_hpack::Decoder,
}

impl<T> fmt::Debug for Client<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("next_id", &self.next_id)
            .field("in_flight", &self.in_flight)
            .field("open", &self.streams.len())
            .field("goaway", &self.goaway)
            .finish_non_exhaustive()
    }
}

/// The workspace's HPACK decoder (crates/hpack): a Huffman-coded field costs it a few
/// hundred instructions where `loona-hpack` built a hash map for each one.
fn decoder() -> linerate_hpack::Decoder {
    linerate_hpack::Decoder::new()
}

impl<T: Copy> Client<T> {
    /// A connection that keeps at most `max_streams` requests in flight.
    pub fn new(max_streams: usize) -> Client<T> {
        Client {
            max_streams,
            grpc: None,
            peer_max_streams: ASSUMED_MAX_STREAMS,
            peer_settings: false,
            peer_window: DEFAULT_WINDOW,
            peer_max_frame: MAX_FRAME,
            send_window: DEFAULT_WINDOW,
            recv_window: DEFAULT_WINDOW,
            recv_owed: 0,
            next_id: 1,
            streams: VecDeque::new(),
            in_flight: 0,
            bodies: 0,
            goaway: None,
            read: Read::Head,
            pending: Vec::new(),
            block: Vec::new(),
            collect: None,
            decoder: decoder(),
        }
    }

    /// Forgets the connection (its socket is gone) so the next one starts fresh; keeps the
    /// buffers.
    pub fn reset(&mut self) {
        let mut streams = std::mem::take(&mut self.streams);
        let mut pending = std::mem::take(&mut self.pending);
        let mut block = std::mem::take(&mut self.block);
        streams.clear();
        pending.clear();
        block.clear();
        let grpc = self.grpc.take();
        *self = Client {
            streams,
            pending,
            block,
            grpc,
            ..Client::new(self.max_streams)
        };
    }

    /// Holds every answer to gRPC's rules and `expect` (`--grpc`): completions are then
    /// reported as `Event::Grpc`.
    pub fn grpc(mut self, expect: grpc::Expect) -> Client<T> {
        self.grpc = Some(expect);
        self
    }

    /// The connection's first bytes: the preface, SETTINGS (no push; a 16 MiB stream window)
    /// and the connection window raised to the same.
    pub fn start(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(PREFACE);
        head(out, 12, kind::SETTINGS, 0, 0);
        for (id, v) in [
            (setting::ENABLE_PUSH, 0u32),
            (setting::INITIAL_WINDOW_SIZE, RECV_WINDOW as u32),
        ] {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&v.to_be_bytes());
        }
        window_update(out, 0, RECV_WINDOW - DEFAULT_WINDOW);
        self.recv_window = RECV_WINDOW;
    }

    /// Streams that may be opened now: ours and the server's limit, less those open, while
    /// ids last and no GOAWAY came.
    pub fn room(&self) -> usize {
        if self.spent() {
            return 0;
        }
        let ids = ((LAST_STREAM_ID - self.next_id) / 2 + 1) as usize;
        self.max_streams
            .min(self.peer_max_streams)
            .saturating_sub(self.streams.len())
            .min(ids)
    }

    /// No stream can ever be opened here again (a GOAWAY came, or the ids ran out): once
    /// idle, the connection is to be reopened.
    pub fn spent(&self) -> bool {
        self.goaway.is_some() || self.next_id > LAST_STREAM_ID
    }

    /// Requests whose response is not complete.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// No stream is open (every response complete and every body sent).
    pub fn is_idle(&self) -> bool {
        self.streams.is_empty()
    }

    /// The tag of the oldest open stream: the one a timeout looks at.
    pub fn oldest(&self) -> Option<&T> {
        self.streams.front().map(|s| &s.tag)
    }

    /// Opens a stream for `req`: its header frames, and as much body as the windows allow.
    /// The caller checks `room` first.
    pub fn open(&mut self, req: &Request, tag: T, out: &mut Vec<u8>) {
        debug_assert!(self.room() > 0, "open without room");
        let id = self.next_id;
        self.next_id += 2;
        let start = out.len();
        out.extend_from_slice(&req.frames);
        for at in &req.ids_at {
            out[start + at..start + at + 4].copy_from_slice(&id.to_be_bytes());
        }
        self.streams.push_back(Stream {
            id,
            tag,
            answered: false,
            status: 0,
            body: 0,
            left: req.body.len(),
            grpc: grpc::Answer::default(),
            send_window: self.peer_window,
            recv_window: RECV_WINDOW,
            recv_owed: 0,
        });
        self.in_flight += 1;
        if !req.body.is_empty() {
            self.bodies += 1;
            let idx = self.streams.len() - 1;
            self.push_body(idx, req, out);
        }
    }

    /// Handles the server's bytes: frames are parsed across any split of the input, answers
    /// (acknowledgements, window updates, body DATA) are appended to `out`, and what became of
    /// requests is pushed to `events`. An error ends the connection.
    pub fn recv(
        &mut self,
        mut input: &[u8],
        req: &Request,
        out: &mut Vec<u8>,
        events: &mut Vec<Event<T>>,
    ) -> Result<(), H2Error> {
        while !input.is_empty() {
            match self.read {
                Read::Data { stream, left, end } => {
                    let n = left.min(input.len());
                    input = &input[n..];
                    if n < left {
                        self.read = Read::Data {
                            stream,
                            left: left - n,
                            end,
                        };
                    } else {
                        self.read = Read::Head;
                        if end {
                            self.end_stream(stream, events);
                        }
                    }
                }
                Read::Head => {
                    let h = if self.pending.is_empty() && input.len() >= FRAME_HEAD {
                        let h = Head::parse(input);
                        input = &input[FRAME_HEAD..];
                        h
                    } else {
                        let n = (FRAME_HEAD - self.pending.len()).min(input.len());
                        self.pending.extend_from_slice(&input[..n]);
                        input = &input[n..];
                        if self.pending.len() < FRAME_HEAD {
                            continue;
                        }
                        let h = Head::parse(&self.pending);
                        self.pending.clear();
                        h
                    };
                    self.begin(h, req, out, events)?;
                }
                Read::Payload(h) => {
                    if self.pending.is_empty() && input.len() >= h.len {
                        self.read = Read::Head;
                        self.frame(h, &input[..h.len], req, out, events)?;
                        input = &input[h.len..];
                    } else {
                        let n = (h.len - self.pending.len()).min(input.len());
                        self.pending.extend_from_slice(&input[..n]);
                        input = &input[n..];
                        if self.pending.len() == h.len {
                            self.read = Read::Head;
                            let p = std::mem::take(&mut self.pending);
                            let r = self.frame(h, &p, req, out, events);
                            self.pending = p;
                            self.pending.clear();
                            r?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// A frame header is in: DATA is counted at once and its payload skipped as it comes;
    /// any other payload is collected.
    fn begin(
        &mut self,
        h: Head,
        req: &Request,
        out: &mut Vec<u8>,
        events: &mut Vec<Event<T>>,
    ) -> Result<(), H2Error> {
        if h.len > MAX_FRAME {
            return Err(H2Error::FrameSize(h.kind));
        }
        if let Some(c) = self.collect
            && (h.kind != kind::CONTINUATION || h.stream != c.stream)
        {
            return Err(H2Error::Protocol(
                "a header block is interrupted by another frame (RFC 9113 §6.10)",
            ));
        }
        // `--grpc` reads DATA (`frame`) to check it; a plain run only counts it.
        if h.kind == kind::DATA && !h.has(flag::PADDED) && self.grpc.is_none() {
            let end = h.has(flag::END_STREAM);
            self.data(h, h.len, out)?;
            if h.len > 0 {
                self.read = Read::Data {
                    stream: h.stream,
                    left: h.len,
                    end,
                };
            } else if end {
                self.end_stream(h.stream, events);
            }
            return Ok(());
        }
        if h.len == 0 {
            return self.frame(h, &[], req, out, events);
        }
        self.read = Read::Payload(h);
        Ok(())
    }

    fn find(&self, id: u32) -> Option<usize> {
        self.streams.binary_search_by_key(&id, |s| s.id).ok()
    }

    /// A DATA frame of `flen` bytes (padding included) carrying `body` bytes of body: checked
    /// against the windows, counted, and the credit given back once half a window is used.
    fn data(&mut self, h: Head, body: usize, out: &mut Vec<u8>) -> Result<(), H2Error> {
        if h.stream == 0 {
            return Err(H2Error::Protocol("DATA on stream 0 (RFC 9113 §6.1)"));
        }
        // The whole payload, padding included, counts against the windows (RFC 9113 §6.9.1).
        let flen = h.len as i64;
        if flen > self.recv_window {
            return Err(H2Error::FlowControl);
        }
        self.recv_window -= flen;
        self.recv_owed += flen;
        let Some(idx) = self.find(h.stream).filter(|&i| !self.streams[i].answered) else {
            return Err(H2Error::Protocol(
                "DATA on a stream that is not open (RFC 9113 §5.1)",
            ));
        };
        let s = &mut self.streams[idx];
        if s.status == 0 {
            return Err(H2Error::Protocol(
                "DATA before the response's HEADERS (RFC 9113 §8.1)",
            ));
        }
        if flen > s.recv_window {
            return Err(H2Error::FlowControl);
        }
        s.recv_window -= flen;
        s.recv_owed += flen;
        s.body += body as u64;
        if !h.has(flag::END_STREAM) && s.recv_owed >= RECV_WINDOW / 2 {
            window_update(out, s.id, s.recv_owed);
            s.recv_window += s.recv_owed;
            s.recv_owed = 0;
        }
        if self.recv_owed >= RECV_WINDOW / 2 {
            window_update(out, 0, self.recv_owed);
            self.recv_window += self.recv_owed;
            self.recv_owed = 0;
        }
        Ok(())
    }

    /// The server ended stream `id`: its response is complete. A stream whose body is still
    /// going out stays open until it is sent (the server may answer before reading it all).
    fn end_stream(&mut self, id: u32, events: &mut Vec<Event<T>>) {
        let Some(idx) = self.find(id) else {
            return;
        };
        let s = &mut self.streams[idx];
        s.answered = true;
        self.in_flight -= 1;
        events.push(match &self.grpc {
            None => Event::Response {
                tag: s.tag,
                status: s.status,
                body: s.body,
            },
            Some(expect) => Event::Grpc {
                tag: s.tag,
                status: s.status,
                verdict: s.grpc.verdict(s.status, expect),
                messages: s.grpc.messages(),
            },
        });
        if s.left == 0 {
            self.streams.remove(idx);
        }
    }

    /// Sends as much of stream `idx`'s body as the windows allow, END_STREAM on its last DATA.
    /// Returns true when the body is all sent.
    fn push_body(&mut self, idx: usize, req: &Request, out: &mut Vec<u8>) -> bool {
        let s = &mut self.streams[idx];
        while s.left > 0 {
            let n = (s.left as i64)
                .min(s.send_window)
                .min(self.send_window)
                .min(self.peer_max_frame as i64);
            if n <= 0 {
                return false;
            }
            let n = n as usize;
            let from = req.body.len() - s.left;
            s.left -= n;
            s.send_window -= n as i64;
            self.send_window -= n as i64;
            let end = if s.left == 0 { flag::END_STREAM } else { 0 };
            head(out, n, kind::DATA, end, s.id);
            out.extend_from_slice(&req.body[from..from + n]);
        }
        self.bodies -= 1;
        true
    }

    /// After the windows grew: sends what they held back, oldest stream first.
    fn push_bodies(&mut self, req: &Request, out: &mut Vec<u8>) {
        if self.bodies == 0 {
            return;
        }
        let mut idx = 0;
        while idx < self.streams.len() && self.send_window > 0 {
            if self.streams[idx].left > 0
                && self.push_body(idx, req, out)
                && self.streams[idx].answered
            {
                self.streams.remove(idx);
                continue;
            }
            idx += 1;
        }
    }

    /// Strips the padding of a HEADERS or DATA payload (RFC 9113 §6.1, §6.2).
    fn unpad(h: &Head, p: &[u8]) -> Result<(usize, usize), H2Error> {
        if !h.has(flag::PADDED) {
            return Ok((0, p.len()));
        }
        let pad = *p.first().ok_or(H2Error::FrameSize(h.kind))? as usize;
        if pad >= p.len() {
            return Err(H2Error::Protocol(
                "padding longer than the payload (RFC 9113 §6.1)",
            ));
        }
        Ok((1, p.len() - pad))
    }

    /// A whole frame other than unpadded DATA.
    fn frame(
        &mut self,
        h: Head,
        p: &[u8],
        req: &Request,
        out: &mut Vec<u8>,
        events: &mut Vec<Event<T>>,
    ) -> Result<(), H2Error> {
        match h.kind {
            kind::DATA => {
                let (from, to) = Self::unpad(&h, p)?;
                self.data(h, to - from, out)?;
                if let Some(expect) = &self.grpc
                    && let Some(idx) = self.find(h.stream)
                {
                    // `data` has checked that the stream is open.
                    self.streams[idx].grpc.data(&p[from..to], expect);
                }
                if h.has(flag::END_STREAM) {
                    self.end_stream(h.stream, events);
                }
                Ok(())
            }
            kind::HEADERS => {
                if h.stream == 0 {
                    return Err(H2Error::Protocol("HEADERS on stream 0 (RFC 9113 §6.2)"));
                }
                let (mut from, to) = Self::unpad(&h, p)?;
                if h.has(flag::PRIORITY) {
                    from += 5;
                    if from > to {
                        return Err(H2Error::FrameSize(h.kind));
                    }
                }
                self.block.clear();
                self.block.extend_from_slice(&p[from..to]);
                let c = Collect {
                    stream: h.stream,
                    end_stream: h.has(flag::END_STREAM),
                };
                if h.has(flag::END_HEADERS) {
                    self.headers(c, events)
                } else {
                    self.collect = Some(c);
                    Ok(())
                }
            }
            kind::CONTINUATION => {
                let Some(c) = self.collect else {
                    return Err(H2Error::Protocol(
                        "CONTINUATION without HEADERS before it (RFC 9113 §6.10)",
                    ));
                };
                if self.block.len() + p.len() > MAX_HEADER_BLOCK {
                    return Err(H2Error::Protocol("a response header block over 64 KiB"));
                }
                self.block.extend_from_slice(p);
                if h.has(flag::END_HEADERS) {
                    self.collect = None;
                    self.headers(c, events)
                } else {
                    Ok(())
                }
            }
            kind::RST_STREAM => {
                if h.stream == 0 {
                    return Err(H2Error::Protocol("RST_STREAM on stream 0 (RFC 9113 §6.4)"));
                }
                if p.len() != 4 {
                    return Err(H2Error::FrameSize(h.kind));
                }
                let code = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
                match self.find(h.stream) {
                    Some(idx) => {
                        let s = self.streams.remove(idx).expect("found");
                        if s.left > 0 {
                            self.bodies -= 1;
                        }
                        if !s.answered {
                            self.in_flight -= 1;
                            events.push(Event::Reset { tag: s.tag, code });
                        }
                        Ok(())
                    }
                    None if h.stream >= self.next_id || h.stream.is_multiple_of(2) => Err(
                        H2Error::Protocol("RST_STREAM on a stream never opened (RFC 9113 §6.4)"),
                    ),
                    // A stream already closed: nothing to do.
                    None => Ok(()),
                }
            }
            kind::SETTINGS => self.settings(h, p, req, out),
            kind::PUSH_PROMISE => Err(H2Error::Protocol(
                "PUSH_PROMISE after SETTINGS_ENABLE_PUSH = 0 (RFC 9113 §6.6)",
            )),
            kind::PING => {
                if p.len() != 8 {
                    return Err(H2Error::FrameSize(h.kind));
                }
                if h.stream != 0 {
                    return Err(H2Error::Protocol("PING on a stream (RFC 9113 §6.7)"));
                }
                if !h.has(flag::ACK) {
                    head(out, 8, kind::PING, flag::ACK, 0);
                    out.extend_from_slice(p);
                }
                Ok(())
            }
            kind::GOAWAY => {
                if h.stream != 0 {
                    return Err(H2Error::Protocol("GOAWAY on a stream (RFC 9113 §6.8)"));
                }
                if p.len() < 8 {
                    return Err(H2Error::FrameSize(h.kind));
                }
                let last = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff;
                let last = self.goaway.map_or(last, |g| g.min(last));
                self.goaway = Some(last);
                // Streams above `last` were never processed (RFC 9113 §6.8); they are the
                // newest, at the back.
                while self.streams.back().is_some_and(|s| s.id > last) {
                    let s = self.streams.pop_back().expect("checked");
                    if s.left > 0 {
                        self.bodies -= 1;
                    }
                    if !s.answered {
                        self.in_flight -= 1;
                        events.push(Event::Refused { tag: s.tag });
                    }
                }
                Ok(())
            }
            kind::WINDOW_UPDATE => {
                if p.len() != 4 {
                    return Err(H2Error::FrameSize(h.kind));
                }
                let inc = i64::from(u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff);
                if inc == 0 {
                    return Err(H2Error::Protocol("WINDOW_UPDATE of 0 (RFC 9113 §6.9)"));
                }
                let window = if h.stream == 0 {
                    &mut self.send_window
                } else {
                    match self.find(h.stream) {
                        Some(idx) => &mut self.streams[idx].send_window,
                        // A stream just closed: allowed (RFC 9113 §6.9).
                        None => return Ok(()),
                    }
                };
                *window += inc;
                if *window > MAX_WINDOW {
                    return Err(H2Error::FlowControl);
                }
                self.push_bodies(req, out);
                Ok(())
            }
            // Deprecated (RFC 9113 §5.3.2): nothing to do.
            kind::PRIORITY => Ok(()),
            // Unknown types are ignored (RFC 9113 §5.5).
            _ => Ok(()),
        }
    }

    /// A complete header block for `c.stream`: decoded (always: the table must stay in step),
    /// then the final status taken; 1xx heads are skipped, trailers end the stream. `--grpc`
    /// also takes gRPC's fields from the final head and the trailers.
    fn headers(&mut self, c: Collect, events: &mut Vec<Event<T>>) -> Result<(), H2Error> {
        let mut status: Option<u16> = None;
        let mut first = true;
        let mut fields = grpc::Fields::default();
        let decoded = match self.grpc {
            None => self.decoder.decode(&self.block, |name, value| {
                if first && name == b":status" {
                    status = parse_status(value);
                }
                first = false;
            }),
            Some(_) => self.decoder.decode(&self.block, |name, value| {
                if first && name == b":status" {
                    status = parse_status(value);
                }
                first = false;
                fields.field(name, value);
            }),
        };
        decoded.map_err(|_| H2Error::Compression)?;
        let grpc = self.grpc.is_some();
        let Some(idx) = self.find(c.stream).filter(|&i| !self.streams[i].answered) else {
            return Err(H2Error::Protocol(
                "HEADERS on a stream that is not open (RFC 9113 §5.1)",
            ));
        };
        let s = &mut self.streams[idx];
        if s.status == 0 {
            let status = status.ok_or(H2Error::Status)?;
            if status < 200 {
                // RFC 9113 §8.1: an interim response; the final one follows.
                return match c.end_stream {
                    true => Err(H2Error::Status),
                    false => Ok(()),
                };
            }
            s.status = status;
            if grpc {
                s.grpc.head(fields, c.end_stream);
            }
        } else if !c.end_stream {
            return Err(H2Error::Protocol(
                "trailers without END_STREAM (RFC 9113 §8.1)",
            ));
        } else if grpc {
            s.grpc.trailers(fields);
        }
        if c.end_stream {
            self.end_stream(c.stream, events);
        }
        Ok(())
    }

    /// The server's SETTINGS: applied, then acknowledged; a larger window lets held bodies go.
    fn settings(
        &mut self,
        h: Head,
        p: &[u8],
        req: &Request,
        out: &mut Vec<u8>,
    ) -> Result<(), H2Error> {
        if h.stream != 0 {
            return Err(H2Error::Protocol("SETTINGS on a stream (RFC 9113 §6.5)"));
        }
        if h.has(flag::ACK) {
            return match p.is_empty() {
                true => Ok(()),
                false => Err(H2Error::FrameSize(h.kind)),
            };
        }
        if !p.len().is_multiple_of(6) {
            return Err(H2Error::FrameSize(h.kind));
        }
        if !self.peer_settings {
            // The assumption holds only until the server says; a limit it does not name is
            // no limit (RFC 9113 §6.5.2).
            self.peer_settings = true;
            self.peer_max_streams = usize::MAX;
        }
        for e in p.chunks_exact(6) {
            let id = u16::from_be_bytes([e[0], e[1]]);
            let v = u32::from_be_bytes([e[2], e[3], e[4], e[5]]);
            match id {
                setting::MAX_CONCURRENT_STREAMS => self.peer_max_streams = v as usize,
                setting::INITIAL_WINDOW_SIZE => {
                    if i64::from(v) > MAX_WINDOW {
                        return Err(H2Error::FlowControl);
                    }
                    // RFC 9113 §6.9.2: open streams' windows move by the difference.
                    let delta = i64::from(v) - self.peer_window;
                    self.peer_window = i64::from(v);
                    for s in &mut self.streams {
                        s.send_window += delta;
                        if s.send_window > MAX_WINDOW {
                            return Err(H2Error::FlowControl);
                        }
                    }
                }
                setting::MAX_FRAME_SIZE => {
                    if !(MAX_FRAME as u32..=MAX_MAX_FRAME).contains(&v) {
                        return Err(H2Error::Protocol(
                            "SETTINGS_MAX_FRAME_SIZE out of range (RFC 9113 §6.5.2)",
                        ));
                    }
                    self.peer_max_frame = v as usize;
                }
                setting::ENABLE_PUSH if v > 1 => {
                    return Err(H2Error::Protocol(
                        "SETTINGS_ENABLE_PUSH not 0 or 1 (RFC 9113 §6.5.2)",
                    ));
                }
                // The encoder never indexes, so the table size needs nothing; the header list
                // size is advisory.
                _ => {}
            }
        }
        head(out, 0, kind::SETTINGS, flag::ACK, 0);
        self.push_bodies(req, out);
        Ok(())
    }
}

/// A `:status` value: three digits, at least 100 (RFC 9110 §15).
pub(crate) fn parse_status(v: &[u8]) -> Option<u16> {
    match v {
        [a, b, c] if v.iter().all(u8::is_ascii_digit) && *a >= b'1' => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => None,
    }
}

pub mod grpc;
mod request;
#[cfg(test)]
mod tests;

pub use request::Request;
