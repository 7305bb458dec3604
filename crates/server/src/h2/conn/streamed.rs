//! Answers whose body comes in pieces after the head (a proxied response; the library's
//! streaming responses next): HEADERS when the head is known, then DATA as pieces come and
//! flow control allows, END_STREAM at the end, RST_STREAM(INTERNAL_ERROR) when the source
//! fails after the head (the client must not take a cut body for whole).
//!
//! Backpressure: a stream holds what the windows held back in its own buffer, and its source
//! asks [`Conn::stream_room`] before it reads more, so a slow client (or one that keeps its
//! windows shut) holds at most [`STREAM_ROOM`] plus one piece per stream.
#![forbid(unsafe_code)]

use linerate_hpack as hpack;
use linerate_http1::status_has_no_body;

use super::{Conn, Writing, sink, trailers_frame};
use crate::h1::{Cx, STREAM_ROOM, StreamHead};
use crate::h2::frame::{self, Code, flag, kind};
use crate::h2::stream::Answer;
use crate::response::Field;

impl<P> Conn<P> {
    /// The stream waiting for `id`'s streamed answer (deferred, or streaming).
    fn streamed(&self, id: u64, deferred: bool) -> Option<usize> {
        if !matches!(self.writing, Writing::Open | Writing::Last) || self.errored() {
            return None;
        }
        self.streams.iter().position(|s| {
            u64::from(s.id) == id
                && match s.answer {
                    Answer::Deferred(_) => deferred,
                    Answer::Streaming { .. } => !deferred,
                    _ => false,
                }
        })
    }

    /// The head of stream `id`'s deferred answer; its body follows with
    /// [`Conn::stream_data`] and [`Conn::stream_end`]. `false` when the stream is gone.
    pub(crate) fn start_stream(&mut self, id: u64, head: &StreamHead<'_>, cx: &mut Cx) -> bool {
        let Some(idx) = self.streamed(id, true) else {
            return false;
        };
        let no_body = status_has_no_body(head.status);
        let send_body = !self.streams[idx].head && !no_body;
        let r = &mut self.resp;
        r.clear();
        hpack::status(r, head.status);
        hpack::field(r, b"date", head.date.unwrap_or(&cx.date.get()[..]));
        let names = |name: &[u8]| {
            head.fields
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        if let Some(server) = &cx.cfg.server
            && !names(b"server")
        {
            hpack::field(r, b"server", server);
        }
        if let Some(port) = cx.alt_svc
            && !names(b"alt-svc")
        {
            hpack::field(r, b"alt-svc", crate::h1::AltSvc::h3(port).as_bytes());
        }
        if let Some(n) = head.length.filter(|_| !no_body) {
            let mut b = itoa::Buffer::new();
            hpack::field(r, b"content-length", b.format(n).as_bytes());
        }
        // RFC 9113 §8.2.1, §8.2.2; the length is the one written above.
        crate::h2::answer_fields::each(head.fields.iter().copied(), true, |n, v| {
            hpack::field(r, n, v)
        });
        let sid = self.streams[idx].id;
        let max_frame = self.max_frame;
        let out = sink(&mut self.out, &mut self.files, self.in_flight, cx);
        frame::headers(out, sid, &self.resp, !send_body, max_frame);
        if send_body {
            self.streams[idx].answer = Answer::Streaming {
                buf: Vec::new(),
                ended: false,
                trailers: None,
            };
        } else {
            // No DATA will follow: the pieces that come are dropped (`stream_data` finds no
            // streaming answer, which tells the source to stop).
            self.streams[idx].answer = Answer::Done;
            self.finish(idx, cx);
        }
        self.end_if_done();
        self.set_timer(cx);
        true
    }

    /// An interim (1xx) head on stream `id` before its final one (RFC 9113 §8.1: a HEADERS
    /// frame without END_STREAM), as a proxy relays an upstream's 103 Early Hints. `false`
    /// when the stream is gone or its final head has gone out.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn interim(
        &mut self,
        id: u64,
        status: u16,
        fields: &[(&[u8], &[u8])],
        cx: &mut Cx,
    ) -> bool {
        let Some(idx) = self.streamed(id, true) else {
            return false;
        };
        let r = &mut self.resp;
        r.clear();
        hpack::status(r, status);
        crate::h2::answer_fields::each(fields.iter().copied(), true, |n, v| hpack::field(r, n, v));
        let sid = self.streams[idx].id;
        let max_frame = self.max_frame;
        let out = sink(&mut self.out, &mut self.files, self.in_flight, cx);
        frame::headers(out, sid, &self.resp, false, max_frame);
        self.set_timer(cx);
        true
    }

    /// A piece of stream `id`'s body. `false`: the stream is gone (reset, or the connection
    /// ended): stop producing it.
    pub(crate) fn stream_data(&mut self, id: u64, data: &[u8], cx: &mut Cx) -> bool {
        let taken = self.stream_piece(id, data, cx);
        if taken {
            self.set_timer(cx);
        }
        taken
    }

    /// [`Conn::stream_data`] without the timer's update: for a caller that moves pieces on
    /// many streams, then settles the timer once (`Conn::tunnels_moved`).
    pub(super) fn stream_piece(&mut self, id: u64, data: &[u8], cx: &mut Cx) -> bool {
        let Some(idx) = self.streamed(id, false) else {
            return false;
        };
        if let Answer::Streaming { buf, .. } = &mut self.streams[idx].answer {
            if buf.capacity() == 0 {
                *buf = cx.pool.get();
            }
            buf.extend_from_slice(data);
        }
        self.send_data(idx, cx);
        true
    }

    /// Whether stream `id` can take another piece now. A stream that is gone has room: the
    /// next piece learns it is gone.
    /// Whether request `id` still waits for its answer, or is receiving it: `false` once the
    /// client reset its stream or the connection failed (a proxy then gives up its upstream
    /// stream).
    pub(crate) fn awaits(&self, id: u64) -> bool {
        self.streamed(id, true)
            .or_else(|| self.streamed(id, false))
            .is_some()
    }

    pub(crate) fn stream_room(&self, id: u64) -> bool {
        self.streamed(id, false).is_none_or(|idx| {
            matches!(&self.streams[idx].answer, Answer::Streaming { buf, .. } if buf.len() < STREAM_ROOM)
        })
    }

    /// Stream `id`'s body is whole: END_STREAM once what is held is out. `false` when the
    /// stream is gone.
    pub(crate) fn stream_end(&mut self, id: u64, cx: &mut Cx) -> bool {
        self.stream_end_with(id, &[], cx)
    }

    /// [`Conn::stream_end`] with trailer fields: after the last DATA (once the windows let
    /// it go), a HEADERS frame with END_STREAM carries them (RFC 9113 §8.1).
    pub(crate) fn stream_end_with(&mut self, id: u64, fields: &[Field], cx: &mut Cx) -> bool {
        let Some(idx) = self.streamed(id, false) else {
            return false;
        };
        if let Answer::Streaming {
            ended, trailers, ..
        } = &mut self.streams[idx].answer
        {
            *ended = true;
            if !fields.is_empty() {
                *trailers = Some(Box::new(fields.to_vec()));
            }
        }
        self.send_data(idx, cx);
        if self.streams[idx].answer_done() {
            self.finish(idx, cx);
        }
        self.end_if_done();
        self.set_timer(cx);
        true
    }

    /// Stream `id`'s body cannot be completed: RST_STREAM(INTERNAL_ERROR), so the client
    /// cannot take what it got for whole. `false` when the stream is gone.
    pub(crate) fn stream_abort(&mut self, id: u64, cx: &mut Cx) -> bool {
        let Some(idx) = self.streamed(id, false) else {
            return false;
        };
        if let Answer::Streaming { buf, .. } = &mut self.streams[idx].answer {
            cx.pool.put(buf);
        }
        let sid = self.streams[idx].id;
        self.stream_error(sid, Code::Internal, cx);
        self.end_if_done();
        self.set_timer(cx);
        true
    }

    /// Writes DATA from stream `idx`'s held pieces while the windows allow (the caller checked
    /// the staging limit); END_STREAM with the last byte once the body ended.
    pub(super) fn send_streamed(&mut self, idx: usize, cx: &mut Cx) {
        let max_frame = self.max_frame as i64;
        loop {
            let conn_window = self.send_window;
            let s = &mut self.streams[idx];
            let Answer::Streaming {
                buf,
                ended,
                trailers,
            } = &mut s.answer
            else {
                return;
            };
            let n = (buf.len() as i64)
                .min(conn_window)
                .min(s.send_window)
                .min(max_frame)
                .max(0) as usize;
            let last = *ended && n == buf.len();
            if n == 0 && !last {
                return;
            }
            let out = sink(&mut self.out, &mut self.files, self.in_flight, cx);
            // With trailers, their HEADERS ends the stream (and no empty DATA comes before).
            let flags = if last && trailers.is_none() {
                flag::END_STREAM
            } else {
                0
            };
            if n > 0 || flags != 0 {
                frame::head(out, n, kind::DATA, flags, s.id);
                out.extend_from_slice(&buf[..n]);
            }
            buf.drain(..n);
            s.send_window -= n as i64;
            self.send_window -= n as i64;
            if last {
                if let Some(fields) = trailers.take() {
                    // Not flow-controlled: it waits for the DATA before it, not for window.
                    trailers_frame(out, s.id, &fields, max_frame as usize);
                }
                cx.pool.put(buf);
                s.answer = Answer::Done;
                return;
            }
            if buf.is_empty() {
                return;
            }
        }
    }
}
