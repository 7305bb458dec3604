//! Answers whose body comes in pieces after the head (a proxied response now; the library's
//! streaming responses take the same path): the head placed like any answer, each piece
//! framed for this client as it comes (`Content-Length` when the length is known, else
//! chunked, or to the close for an HTTP/1.0 client), the end, and the cut-off.
//!
//! Backpressure is the caller's: it asks [`Conn::stream_room`] before it reads more, so an
//! answer holds at most [`STREAM_ROOM`] bytes plus one piece, whether it is sending or waiting
//! in the queue behind earlier answers. A body cut off never looks whole to the client: the
//! connection closes with the framing incomplete, or resets when the close itself would end
//! the body.
#![forbid(unsafe_code)]

use linerate_http1::{
    ResponseHead, Version, literal_field, reason, status_has_no_body, write_field,
};

use super::{Conn, InFlight, Reading, Tail, Writing};
use crate::h1::service::{Cx, StreamHead};
use crate::h1::{AltSvc, Stamp};
use crate::response::Field;

/// Bytes a streamed answer may hold before its source should wait (see
/// [`Conn::stream_room`]).
pub(crate) const STREAM_ROOM: usize = 64 * 1024;

/// How a streamed body is framed on this connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// No body goes out (HEAD, 1xx, 204, 304): pieces are dropped.
    None,
    /// `Content-Length`: this many bytes are still owed.
    Length(u64),
    Chunked,
    /// Delimited by the close (an HTTP/1.0 client and an unknown length).
    ToClose,
    /// After a 101: the tunnel's bytes, as they come; its end shuts the connection down.
    Tunnel,
}

/// A streamed answer after its head.
#[derive(Debug)]
pub(crate) struct StreamOut {
    pub id: u64,
    frame: Frame,
    /// Its end has come (it waits in the queue with its last bytes).
    ended: bool,
    /// It was cut off (it waits in the queue; the connection ends when it reaches the front).
    cut: bool,
}

impl<P> Conn<P> {
    /// The head of the deferred answer to request `id`; its body follows with
    /// [`Conn::stream_data`] and [`Conn::stream_end_with`]. `false` when it is too late (as for
    /// [`Conn::complete`]): the caller stops producing the body.
    pub(crate) fn start_stream(&mut self, id: u64, head: &StreamHead<'_>, cx: &mut Cx) -> bool {
        if !matches!(self.writing, Writing::Open | Writing::Last) {
            return false;
        }
        let Some((i, facts)) = self.queue.as_ref().and_then(|q| q.find_pending(id)) else {
            return false;
        };
        let mut close = Self::closes(&facts, cx);
        let frame = if head.status == 101 {
            // Only the upgrade request gets a 101: the last one read, since the input after
            // it is held ([`Reading::Upgrade`]). That input is now the tunnel's.
            if !matches!(self.reading, Reading::Upgrade) || id != self.requests {
                return false;
            }
            self.reading = Reading::Tunnel { eof: false };
            if self.writing == Writing::Open {
                self.writing = Writing::Last;
            }
            close = false;
            Frame::Tunnel
        } else if facts.framing.head || status_has_no_body(head.status) {
            Frame::None
        } else if let Some(n) = head.length {
            Frame::Length(n)
        } else if facts.framing.version == Version::Http11 {
            Frame::Chunked
        } else {
            close = true;
            Frame::ToClose
        };
        let out = StreamOut {
            id,
            frame,
            ended: false,
            cut: false,
        };
        let keep_alive_10 = !close && facts.framing.version == Version::Http10;
        if i == 0 && self.tail.is_none() {
            if let Some(q) = self.queue.as_mut() {
                q.pop();
            }
            let to_worker = self.out_empty() && self.in_flight == InFlight::None;
            let Cx {
                out: worker_out,
                date,
                cfg,
                alt_svc,
                ..
            } = cx;
            let sink = if to_worker {
                worker_out
            } else {
                &mut self.spill().out
            };
            let stamp = Stamp {
                server: cfg.server.as_deref(),
                date: date.get(),
                alt_svc: *alt_svc,
            };
            write_head(sink, head, frame, close, keep_alive_10, stamp);
            self.tail = Some(Box::new(Tail::Stream(out)));
            if close {
                self.close_after_streaming(id, cx);
                if let Some(q) = self.queue.as_mut() {
                    for mut b in q.truncate(0) {
                        cx.pool.put(&mut b);
                    }
                }
            }
        } else {
            let mut bytes = cx.pool.get();
            let stamp = Stamp {
                server: cx.cfg.server.as_deref(),
                date: cx.date.get(),
                alt_svc: cx.alt_svc,
            };
            write_head(&mut bytes, head, frame, close, keep_alive_10, stamp);
            if close {
                self.close_after_streaming(id, cx);
            }
            if let Some(q) = self.queue.as_mut() {
                q.fill_stream(i, bytes, Box::new(out));
                if close {
                    for mut b in q.truncate(i + 1) {
                        cx.pool.put(&mut b);
                    }
                }
            }
        }
        self.set_timer(cx);
        true
    }

    /// [`Conn::close_after`] for the streamed answer to request `id`, except that a body of
    /// that request still arriving is read to its end: the answer may be made from it (an
    /// echo, a relayed upload) and would be cut short. Nothing after that body is read.
    fn close_after_streaming(&mut self, id: u64, cx: &mut Cx) {
        match &self.reading {
            Reading::Body(b) if b.facts.id == id => {
                if self.writing == Writing::Open {
                    self.writing = Writing::Last;
                }
            }
            _ => self.close_after(cx),
        }
    }

    /// An interim (1xx) answer to request `id` ahead of its final one, as a proxy relays an
    /// upstream's 103 Early Hints (RFC 9110 §15.2). `false` when it cannot go out: the
    /// request is not the next to be answered (an earlier answer is still being written, and
    /// pipelined answers leave in order), its answer has started, or its client speaks
    /// HTTP/1.0, which must not get one (§15.2).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn interim(
        &mut self,
        id: u64,
        status: u16,
        fields: &[(&[u8], &[u8])],
        cx: &mut Cx,
    ) -> bool {
        if !matches!(self.writing, Writing::Open | Writing::Last) || self.tail.is_some() {
            return false;
        }
        let Some((0, facts)) = self.queue.as_ref().and_then(|q| q.find_pending(id)) else {
            return false;
        };
        if facts.framing.version != Version::Http11 {
            return false;
        }
        let out = self.sink(cx);
        let mut b = itoa::Buffer::new();
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(b.format(status).as_bytes());
        out.push(b' ');
        out.extend_from_slice(reason(status).as_bytes());
        out.extend_from_slice(b"\r\n");
        for (name, value) in fields {
            write_field(out, name, value);
        }
        out.extend_from_slice(b"\r\n");
        self.set_timer(cx);
        true
    }

    /// A piece of the streamed answer `id`'s body. `false`: the answer is gone (the
    /// connection ended, or was cut): stop producing it.
    pub(crate) fn stream_data(&mut self, id: u64, data: &[u8], cx: &mut Cx) -> bool {
        if !matches!(self.writing, Writing::Open | Writing::Last) {
            return false;
        }
        if let Some(Tail::Stream(s)) = self.tail.as_deref_mut()
            && s.id == id
        {
            let frame = take_piece(&mut s.frame, data.len());
            put_piece(self.sink(cx), frame, data);
            return true;
        }
        let Some(q) = self.queue.as_mut() else {
            return false;
        };
        let Some((bytes, s)) = q.stream_mut(id) else {
            return false;
        };
        let before = bytes.len();
        let frame = take_piece(&mut s.frame, data.len());
        put_piece(bytes, frame, data);
        let n = bytes.len() - before;
        q.grew(n);
        true
    }

    /// Whether the streamed answer `id` can take another piece now (its held bytes are under
    /// [`STREAM_ROOM`]). An answer that is gone has room: the next piece learns it is gone.
    pub(crate) fn stream_room(&self, id: u64) -> bool {
        if let Some(Tail::Stream(s)) = self.tail.as_deref()
            && s.id == id
        {
            return self.out_len() < STREAM_ROOM;
        }
        let Some(q) = self.queue.as_ref() else {
            return true;
        };
        q.stream_len(id).is_none_or(|n| n < STREAM_ROOM)
    }

    /// The streamed answer `id`'s body is whole, with `trailers` after it in a chunked
    /// body's trailer section (RFC 9112 §7.1.2; any other framing has no place for them and
    /// ends without). A `Content-Length` body that got fewer bytes than it promised is cut
    /// off instead. `false` when the answer is gone.
    pub(crate) fn stream_end_with(&mut self, id: u64, trailers: &[Field], cx: &mut Cx) -> bool {
        if !matches!(self.writing, Writing::Open | Writing::Last) {
            return false;
        }
        if let Some(Tail::Stream(s)) = self.tail.as_deref()
            && s.id == id
        {
            match s.frame {
                Frame::Length(n) if n > 0 => {
                    self.cut_now(false, cx);
                    return true;
                }
                Frame::Chunked => last_chunk(self.sink(cx), trailers),
                Frame::ToClose => {
                    // The close ends the body: it was decided with the head.
                }
                _ => {}
            }
            self.tail = None;
            self.release_queue(cx);
            self.set_timer(cx);
            return true;
        }
        let Some(q) = self.queue.as_mut() else {
            return false;
        };
        let Some((bytes, s)) = q.stream_mut(id) else {
            return false;
        };
        match s.frame {
            Frame::Length(n) if n > 0 => s.cut = true,
            Frame::Chunked => {
                let before = bytes.len();
                last_chunk(bytes, trailers);
                let n = bytes.len() - before;
                q.grew(n);
            }
            _ => {}
        }
        if let Some((_, s)) = q.stream_mut(id) {
            s.ended = true;
        }
        true
    }

    /// The streamed answer `id` cannot be completed (its source failed after the head). What
    /// is already placed goes out; then the connection ends without completing the body, so
    /// the client cannot take it for whole. `false` when the answer is gone.
    pub(crate) fn stream_abort(&mut self, id: u64, cx: &mut Cx) -> bool {
        if !matches!(self.writing, Writing::Open | Writing::Last) {
            return false;
        }
        if let Some(Tail::Stream(s)) = self.tail.as_deref()
            && s.id == id
        {
            let reset = s.frame == Frame::ToClose;
            self.cut_now(reset, cx);
            return true;
        }
        let Some(q) = self.queue.as_mut() else {
            return false;
        };
        let Some((_, s)) = q.stream_mut(id) else {
            return false;
        };
        s.cut = true;
        s.ended = true;
        true
    }

    /// A streamed answer got to the front of the queue (its bytes so far are in the output).
    pub(super) fn stream_reached_front(&mut self, out: StreamOut, cx: &mut Cx) {
        if out.cut {
            let reset = out.frame == Frame::ToClose;
            self.cut_now(reset, cx);
        } else if !out.ended {
            self.tail = Some(Box::new(Tail::Stream(out)));
        }
    }

    /// Ends the connection after what is staged, leaving the streamed body at the front
    /// incomplete: nothing more is read or answered.
    fn cut_now(&mut self, reset: bool, cx: &mut Cx) {
        self.tail = None;
        self.close_after(cx);
        if let Some(q) = self.queue.take() {
            let mut q = q;
            for mut b in q.truncate(0) {
                cx.pool.put(&mut b);
            }
        }
        self.writing = if reset {
            Writing::CutReset
        } else {
            Writing::Cut
        };
        self.set_timer(cx);
    }
}

/// Counts a piece of `len` bytes against the framing; returns the framing to write it with
/// (a `Content-Length` body takes no more than it promised).
fn take_piece(frame: &mut Frame, len: usize) -> (Frame, usize) {
    match frame {
        Frame::Length(left) => {
            let n = (len as u64).min(*left);
            *left -= n;
            (Frame::Length(n), n as usize)
        }
        f => (*f, len),
    }
}

/// Writes a piece of body as `frame` says.
fn put_piece(out: &mut Vec<u8>, (frame, n): (Frame, usize), data: &[u8]) {
    match frame {
        Frame::None => {}
        Frame::Length(_) | Frame::ToClose | Frame::Tunnel => out.extend_from_slice(&data[..n]),
        Frame::Chunked => {
            if n == 0 {
                return; // an empty chunk would end the body
            }
            let mut hex = [0u8; 16];
            let mut at = hex.len();
            let mut v = n;
            loop {
                at -= 1;
                hex[at] = b"0123456789abcdef"[v & 15];
                v >>= 4;
                if v == 0 {
                    break;
                }
            }
            out.extend_from_slice(&hex[at..]);
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(&data[..n]);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// The last chunk and the trailer section that ends a chunked body (RFC 9112 §7.1.2).
fn last_chunk(out: &mut Vec<u8>, trailers: &[Field]) {
    out.extend_from_slice(b"0\r\n");
    for (name, value) in trailers {
        write_field(out, name.as_bytes(), value.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

/// An in-memory answer with trailer fields, for an HTTP/1.1 client: `head`'s status line
/// and fields, `fields`, `Transfer-Encoding: chunked` in place of the length, the body as
/// one chunk, and the trailer section. Out of line: few answers carry trailers.
#[cold]
#[inline(never)]
pub(in crate::h1) fn encode_chunked(
    out: &mut Vec<u8>,
    head: &ResponseHead<'_>,
    fields: &[Field],
    body: &[u8],
    trailers: &[Field],
) {
    let ct = head.content_type.map(|v| (&b"Content-Type"[..], v));
    let fields: Vec<(&[u8], &[u8])> = ct
        .into_iter()
        .chain(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))
        .collect();
    let stream_head = StreamHead {
        status: head.status,
        fields: &fields,
        length: None,
        date: Some(head.date),
    };
    let stamp = Stamp {
        server: head.server,
        date: head.date,
        alt_svc: None, // `encode_announcing` put it among the fields
    };
    write_head(out, &stream_head, Frame::Chunked, head.close, false, stamp);
    put_piece(out, (Frame::Chunked, body.len()), body);
    last_chunk(out, trailers);
}

/// A streamed answer's head: the status line, `Server` (unless the answer names its own),
/// `Date`, the answer's fields, the framing and the connection fields.
fn write_head(
    out: &mut Vec<u8>,
    head: &StreamHead<'_>,
    frame: Frame,
    close: bool,
    keep_alive_10: bool,
    stamp: Stamp<'_>,
) {
    if head.status == 200 {
        // The usual status line whole: one copy, no number formatted.
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    } else {
        let mut status = itoa::Buffer::new();
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(status.format(head.status).as_bytes());
        out.push(b' ');
        out.extend_from_slice(reason(head.status).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let names = |name: &[u8]| {
        head.fields
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    if let Some(server) = stamp.server
        && !names(b"server")
    {
        literal_field(out, b"Server", server);
    }
    literal_field(out, b"Date", head.date.unwrap_or(stamp.date));
    if let Some(port) = stamp.alt_svc
        && !names(b"alt-svc")
    {
        literal_field(out, b"Alt-Svc", AltSvc::h3(port).as_bytes());
    }
    for (name, value) in head.fields {
        write_field(out, name, value);
    }
    match frame {
        Frame::Length(n) => {
            let mut b = itoa::Buffer::new();
            literal_field(out, b"Content-Length", b.format(n).as_bytes());
        }
        Frame::Chunked => literal_field(out, b"Transfer-Encoding", b"chunked"),
        Frame::ToClose => {}
        // The source's `Upgrade` field is among the fields; `Connection` is this hop's.
        Frame::Tunnel => literal_field(out, b"Connection", b"upgrade"),
        Frame::None => {
            // A HEAD answer says what GET's would.
            if let Some(n) = head.length
                && !status_has_no_body(head.status)
            {
                let mut b = itoa::Buffer::new();
                literal_field(out, b"Content-Length", b.format(n).as_bytes());
            }
        }
    }
    if close {
        literal_field(out, b"Connection", b"close");
    } else if keep_alive_10 {
        literal_field(out, b"Connection", b"keep-alive");
    }
    out.extend_from_slice(b"\r\n");
}
