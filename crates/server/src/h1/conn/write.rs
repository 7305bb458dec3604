//! Placing answers: into the output when nothing before them is outstanding, else into the
//! queue; releasing queued answers in order; the connection's held bytes (`Spill`).
#![forbid(unsafe_code)]

use super::{Conn, Facts, FileOut, Hold, InFlight, Reading, Spill, Tail, Writing};
use crate::h1::encode::{Encoded, Parts, Stamp, encode, encode_announcing};
use crate::h1::queue::Entry;
use crate::h1::service::Cx;
use crate::pool::Pool;
use crate::response::{Body, Field, FileBody, Response};

impl<P> Conn<P> {
    /// The buffer new output goes to: the worker's, unless earlier output is still here.
    #[inline(always)]
    pub(super) fn sink<'c>(&'c mut self, cx: &'c mut Cx) -> &'c mut Vec<u8> {
        if self.out_empty() && self.in_flight == InFlight::None {
            &mut cx.out
        } else {
            &mut self.spill().out
        }
    }

    pub(super) fn inbuf_empty(&self) -> bool {
        self.spill.as_ref().is_none_or(|s| s.inbuf.is_empty())
    }

    #[inline(always)]
    pub(super) fn out_empty(&self) -> bool {
        self.spill.as_ref().is_none_or(|s| s.out.is_empty())
    }

    #[inline(always)]
    pub(super) fn out_len(&self) -> usize {
        self.spill.as_ref().map_or(0, |s| s.out.len())
    }

    pub(super) fn spill(&mut self) -> &mut Spill {
        self.spill.get_or_insert_with(Box::default)
    }

    /// Gives the input buffer back to the pool.
    pub(super) fn drop_inbuf(&mut self, pool: &mut Pool) {
        if let Some(s) = self.spill.as_mut() {
            pool.put(&mut s.inbuf);
        }
        self.tidy();
    }

    /// Frees the spill when it holds nothing.
    pub(super) fn tidy(&mut self) {
        if self
            .spill
            .as_ref()
            .is_some_and(|s| s.inbuf.capacity() == 0 && s.out.capacity() == 0)
        {
            self.spill = None;
        }
    }

    /// Places an answer: into the output when nothing before it is outstanding, else into
    /// the queue behind what is.
    #[inline(always)]
    pub(super) fn place(&mut self, facts: Facts, resp: Response, cx: &mut Cx) {
        if self.queue.is_none() {
            self.place_now(facts, resp, cx);
        } else {
            let (bytes, file, _) = self.encode_own(facts, resp, cx);
            if let Some(q) = self.queue.as_mut() {
                q.push_ready(bytes, file);
            }
        }
    }

    /// Whether the answer closes the connection.
    #[inline(always)]
    pub(super) fn closes(facts: &Facts, cx: &Cx) -> bool {
        facts.ends || cx.draining
    }

    /// Encodes an answer into the output. One with trailer fields (few) goes out of line, so
    /// this path tests for them once and carries none.
    #[inline(always)]
    pub(super) fn place_now(&mut self, facts: Facts, resp: Response, cx: &mut Cx) {
        if resp.trailers.is_some() {
            return self.place_trailered(facts, resp, cx);
        }
        self.place_parts(facts, resp, None, cx);
    }

    #[cold]
    #[inline(never)]
    fn place_trailered(&mut self, facts: Facts, mut resp: Response, cx: &mut Cx) {
        let trailers = resp.trailers.take();
        self.place_parts(facts, resp, trailers.as_deref().map(Vec::as_slice), cx);
    }

    #[inline(always)]
    fn place_parts(
        &mut self,
        facts: Facts,
        resp: Response,
        trailers: Option<&[Field]>,
        cx: &mut Cx,
    ) {
        let Response {
            status,
            content_type,
            headers,
            body,
            close,
            ..
        } = resp;
        let close = close || Self::closes(&facts, cx);
        let (server, date) = (cx.cfg.server.as_deref(), cx.date.get());
        let parts = Parts {
            status,
            content_type: content_type.as_deref(),
            headers: &headers,
            body: &body,
            trailers,
        };
        let out = if self.out_empty() && self.in_flight == InFlight::None {
            &mut cx.out
        } else {
            &mut self.spill().out
        };
        let enc = match cx.alt_svc {
            None => encode(out, &mut cx.room, parts, facts.framing, close, server, date),
            alt_svc => {
                let stamp = Stamp {
                    server,
                    date,
                    alt_svc,
                };
                encode_announcing(out, &mut cx.room, parts, facts.framing, close, stamp)
            }
        };
        if headers.capacity() == 0 {
            // Owns nothing: skip the out-of-line drop glue of a Vec of Cow pairs.
            std::mem::forget(headers);
        }
        self.after_encode(enc, body, close, cx);
    }

    /// Encodes an answer into a buffer of its own (to wait in the queue).
    pub(super) fn encode_own(
        &mut self,
        facts: Facts,
        resp: Response,
        cx: &mut Cx,
    ) -> (Vec<u8>, Option<FileBody>, bool) {
        let close = resp.close || Self::closes(&facts, cx);
        let mut bytes = cx.pool.get();
        let parts = Parts {
            status: resp.status,
            content_type: resp.content_type.as_deref(),
            headers: &resp.headers,
            body: &resp.body,
            trailers: resp.trailers.as_deref().map(Vec::as_slice),
        };
        let (server, date) = (cx.cfg.server.as_deref(), cx.date.get());
        let (out, room, req) = (&mut bytes, &mut cx.room, facts.framing);
        let enc = match cx.alt_svc {
            None => encode(out, room, parts, req, close, server, date),
            alt_svc => {
                let stamp = Stamp {
                    server,
                    date,
                    alt_svc,
                };
                encode_announcing(out, room, parts, req, close, stamp)
            }
        };
        let file = match resp.body {
            Body::File(f) if enc.file => Some(f),
            body => {
                crate::response::recycle(body);
                None
            }
        };
        if close {
            self.close_after(cx);
        }
        (bytes, file, close)
    }

    #[inline(always)]
    pub(super) fn after_encode(&mut self, enc: Encoded, body: Body, close: bool, cx: &mut Cx) {
        match body {
            Body::File(f) if enc.file => {
                self.tail = Some(Box::new(Tail::File(FileOut { body: f, sent: 0 })))
            }
            body => crate::response::recycle(body),
        }
        if close {
            self.close_after(cx);
            if let Some(q) = self.queue.as_mut() {
                for mut b in q.truncate(0) {
                    cx.pool.put(&mut b);
                }
            }
        }
    }

    /// The answer just decided is the last: read and answer nothing more.
    pub(super) fn close_after(&mut self, cx: &mut Cx) {
        if self.writing == Writing::Open {
            self.writing = Writing::Last;
        }
        if matches!(
            self.reading,
            Reading::Head | Reading::Body(_) | Reading::Upgrade
        ) {
            self.reading = Reading::Stopped;
        }
        self.held = Hold::No;
        self.drop_inbuf(&mut cx.pool);
    }

    /// Moves ready answers at the front of the queue into the output, up to the next pending
    /// one, a file body or a streamed body still coming.
    pub(super) fn release_queue(&mut self, cx: &mut Cx) {
        while self.tail.is_none() {
            let Some(q) = self.queue.as_mut() else {
                return;
            };
            if q.len() == 0 {
                if let Some(q) = self.queue.take() {
                    cx.pool.put_queue(q);
                }
                return;
            }
            if q.front_pending().is_some() {
                return;
            }
            match q.pop() {
                Some(Entry::Ready { mut bytes, file }) => {
                    self.sink(cx).extend_from_slice(&bytes);
                    cx.pool.put(&mut bytes);
                    if let Some(body) = file {
                        self.tail = Some(Box::new(Tail::File(FileOut { body, sent: 0 })));
                    }
                }
                Some(Entry::Streaming { mut bytes, out }) => {
                    self.sink(cx).extend_from_slice(&bytes);
                    cx.pool.put(&mut bytes);
                    self.stream_reached_front(*out, cx);
                }
                _ => return,
            }
        }
    }
}
