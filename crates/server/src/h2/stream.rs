//! One HTTP/2 stream as the server keeps it while it is open (RFC 9113 §5.1), and the named
//! limits every connection enforces.
//!
//! A stream lives from its request HEADERS until its answer is sent and the client's side is
//! closed; then only its id is remembered (see `Ring`), so frames that arrive late can be told
//! from frames on streams that never were.
#![forbid(unsafe_code)]

use crate::response::{Body, Trailers};

/// SETTINGS_MAX_CONCURRENT_STREAMS the server announces: a HEADERS opening one more is refused
/// with RST_STREAM(REFUSED_STREAM).
pub const MAX_CONCURRENT_STREAMS: usize = 100;
/// Streams of one connection that may be sending request bodies larger than [`SMALL_BODY`]
/// at once; one more is refused with RST_STREAM(REFUSED_STREAM), which a client may retry: at
/// its HEADERS when it declares such a length, else when its DATA first takes it past
/// [`SMALL_BODY`] (before any handler has its whole body). Buffering handlers hold a body up to
/// the site's body limit, so this bounds what one connection can make the server hold (8 × 1
/// MiB by default, plus [`SMALL_BODY`] for each other open stream) where HTTP/1.1 reads one
/// body at a time.
pub const MAX_BODY_STREAMS: usize = 8;
/// A request body up to this size does not count among [`MAX_BODY_STREAMS`]: a connection may
/// send many small bodies at once (gRPC's unary calls: h2load `-m 100` sends each stream's
/// HEADERS before any DATA), and holds at most this much of each.
pub const SMALL_BODY: u64 = 16 * 1024;
/// SETTINGS_INITIAL_WINDOW_SIZE the server announces for request bodies. Bodies are handed to
/// the application as they arrive, so the window only paces the client, never memory.
pub(crate) const STREAM_WINDOW: i64 = 1 << 20;
/// The connection's receive window, raised from 65,535 once at the start.
pub(crate) const CONN_WINDOW: i64 = 16 << 20;
/// CONTINUATION frames one header block may use (a flood of empty ones is CVE-2024-27316):
/// more ends the connection with ENHANCE_YOUR_CALM.
pub const MAX_CONTINUATIONS: u32 = 16;
/// Bytes of one compressed header block (HEADERS and its CONTINUATIONs); more ends the
/// connection with ENHANCE_YOUR_CALM. The decoded list is bounded by `max_head_bytes` (431).
pub const MAX_HEADER_BLOCK: usize = 64 * 1024;
/// Streams whose work the client may have thrown away in one second before the connection
/// ends with ENHANCE_YOUR_CALM: those it resets (rapid reset, CVE-2023-44487) and those the
/// server resets for a frame the client sent (MadeYouReset, CVE-2025-8671: DATA on a
/// half-closed stream, a WINDOW_UPDATE of 0 or past 2^31-1, a PRIORITY on itself, a
/// stream over the limits), counted together. Resets of streams whose answer is whole
/// (RST_STREAM(NO_ERROR) ending a body nobody reads) and the server's own failures are
/// not counted.
pub const MAX_RESETS_PER_SEC: u32 = 200;
/// SETTINGS, PING, PRIORITY and empty DATA or HEADERS-less frames the client may send in one
/// second (each makes the server work or answer and moves no request forward): more ends the
/// connection with ENHANCE_YOUR_CALM.
pub const MAX_CONTROL_PER_SEC: u32 = 1000;
/// Extended CONNECT streams (RFC 8441: WebSocket) one connection may hold open at once; one
/// more is refused with RST_STREAM(REFUSED_STREAM). Each holds at most its stream window
/// (1 MiB) of the client's bytes its reader has not taken (the window is given back only as
/// it takes them), so this bounds what a connection whose handlers all paused can make the
/// server hold.
pub const MAX_TUNNEL_STREAMS: usize = 32;
/// Stream ids remembered after they close, to tell a late frame from a bad one.
pub(crate) const REMEMBERED: usize = 32;

/// A request whose body is being read for the application.
pub(crate) struct BodyIn<P> {
    pub pending: P,
    pub limit: u64,
    /// The request went upstream already ([`crate::h1::Decision::RelayBody`]): the answer is
    /// pending, and the body goes up as it comes.
    pub relayed: bool,
    /// The upstream has no room: no WINDOW_UPDATE for the stream until the driver says so,
    /// so the client sends at most the rest of its window ([`STREAM_WINDOW`]).
    pub held: bool,
}

/// Where the answer stands.
pub(crate) enum Answer {
    /// Not decided: the body is being read, or the request is still being parsed.
    Waiting,
    /// The application answers later (503 at this deadline, ms).
    Deferred(u64),
    /// HEADERS sent; this body is going out as flow control allows.
    Sending { body: Body, sent: u64 },
    /// HEADERS sent; the body comes in pieces (`buf` holds what flow control held back) until
    /// `ended`; then `trailers` in a HEADERS frame with END_STREAM, when the answer has any
    /// (an in-memory answer with trailers takes this way too, its body in `buf`). Boxed, one
    /// word, so a stream stays the size it was.
    Streaming {
        buf: Vec<u8>,
        ended: bool,
        trailers: Option<Box<Trailers>>,
    },
    /// Everything is sent.
    Done,
}

/// An open stream.
pub(crate) struct Stream<P> {
    pub id: u32,
    /// END_STREAM arrived (half-closed remote).
    pub remote_closed: bool,
    /// The request was HEAD: the answer has no DATA.
    pub head: bool,
    /// Answered before its body ended: the rest of the body is dropped. Once the answer is
    /// out the stream is *draining* ([`Stream::draining`]) until the client ends its body.
    pub discard: bool,
    pub send_window: i64,
    /// What the client may still send on it before a WINDOW_UPDATE.
    pub recv_window: i64,
    /// Bytes consumed since the last WINDOW_UPDATE for it.
    pub recv_owed: i64,
    /// Content-Length, checked against the DATA received (RFC 9113 §8.1.1).
    pub declared: Option<u64>,
    pub received: u64,
    pub body: Option<BodyIn<P>>,
    pub answer: Answer,
    /// When the body must have moved again (ms; 408 after), while it is being read.
    pub body_deadline: u64,
    /// An extended CONNECT (RFC 8441): its DATA are a byte stream for the protocol it names,
    /// held by the connection until the protocol's reader takes them (`Conn::tunnel_input`).
    /// A flag, so a stream stays the size it was (its bytes are held beside the streams).
    pub tunnel: bool,
}

impl<P> Stream<P> {
    /// Whether its body is (or is declared) over [`SMALL_BODY`]: it counts among
    /// [`MAX_BODY_STREAMS`].
    pub(crate) fn large_body(&self) -> bool {
        self.received > SMALL_BODY || self.declared.is_some_and(|d| d > SMALL_BODY)
    }

    pub(crate) fn new(id: u32, send_window: i64) -> Stream<P> {
        Stream {
            id,
            remote_closed: false,
            head: false,
            discard: false,
            send_window,
            recv_window: STREAM_WINDOW,
            recv_owed: 0,
            declared: None,
            received: 0,
            body: None,
            answer: Answer::Waiting,
            body_deadline: u64::MAX,
            tunnel: false,
        }
    }

    /// The stream is finished on both sides.
    pub(crate) fn closed(&self) -> bool {
        self.remote_closed && matches!(self.answer, Answer::Done)
    }

    /// Its answer is out and the client is still sending a body nobody reads: the rest is read
    /// and dropped until END_STREAM (`Conn::finish`).
    pub(crate) fn draining(&self) -> bool {
        self.discard && !self.remote_closed && matches!(self.answer, Answer::Done)
    }

    /// The client can still end its body without a WINDOW_UPDATE (none is given for a body
    /// that is dropped): a declared length's rest fits in the window left (a body all in
    /// ends with an empty DATA or trailers, which take none), or, with no length, some
    /// window is left.
    pub(crate) fn can_end_within_window(&self) -> bool {
        let left = u64::try_from(self.recv_window).unwrap_or(0);
        match self.declared {
            Some(d) => d.saturating_sub(self.received) <= left,
            None => left > 0,
        }
    }
}

/// The last [`REMEMBERED`] stream ids of a kind.
#[derive(Default)]
pub(crate) struct Ring {
    ids: [u32; REMEMBERED],
    next: usize,
}

impl Ring {
    pub(crate) fn push(&mut self, id: u32) {
        self.ids[self.next % REMEMBERED] = id;
        self.next += 1;
    }

    pub(crate) fn contains(&self, id: u32) -> bool {
        id != 0 && self.ids.contains(&id)
    }
}

/// Counts of frames that cost the server and move nothing forward, per one-second window.
#[derive(Default)]
pub(crate) struct Calm {
    since: u64,
    resets: u32,
    control: u32,
}

impl Calm {
    fn roll(&mut self, now: u64) {
        if now.saturating_sub(self.since) >= 1000 {
            *self = Calm {
                since: now,
                ..Calm::default()
            };
        }
    }

    /// One more stream reset by the client, or by the server for the client's fault;
    /// `false` once over the limit.
    pub(crate) fn reset(&mut self, now: u64) -> bool {
        self.roll(now);
        self.resets += 1;
        self.resets <= MAX_RESETS_PER_SEC
    }

    /// One more control frame; `false` once over the limit.
    pub(crate) fn control(&mut self, now: u64) -> bool {
        self.roll(now);
        self.control += 1;
        self.control <= MAX_CONTROL_PER_SEC
    }
}
