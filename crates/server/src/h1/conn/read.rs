//! Reading requests: parsing heads from the input, handing them to the service, reading
//! bodies, deferring, and the answers the connection gives on its own (malformed requests,
//! limits).
#![forbid(unsafe_code)]

use linerate_http1::{BodyDecoder, CONTINUE_100, Framing, Method, ParseError, Parsed, RequestHead};

use super::{
    BodyIn, Conn, Facts, Hold, OUT_HIGH_WATER, Reading, Timer, Writing, encode, status_response,
};
use crate::h1::service::{Cx, Decision, Exchange, Service};

impl<P> Conn<P> {
    /// Whether input left after processing is kept.
    pub(super) fn keeps_input(&self) -> bool {
        matches!(
            self.reading,
            Reading::Head | Reading::Body(_) | Reading::Upgrade | Reading::Tunnel { .. }
        )
    }

    /// Keeps `input` for later: an upgrade's answer decides what it is.
    #[cold]
    pub(super) fn hold_input(&mut self, input: &[u8], cx: &mut Cx) {
        let spill = self.spill.get_or_insert_with(Default::default);
        if spill.inbuf.capacity() == 0 {
            spill.inbuf = cx.pool.get();
        }
        spill.inbuf.extend_from_slice(input);
        self.set_timer(cx);
    }

    /// Processes `inbuf` (which holds earlier input and maybe new bytes).
    pub(super) fn process_stash<S: Service<Pending = P>>(
        &mut self,
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        let mut buf = self
            .spill
            .as_mut()
            .map(|s| std::mem::take(&mut s.inbuf))
            .unwrap_or_default();
        let used = self.process(&buf, head, cx, svc);
        if used < buf.len() && self.keeps_input() {
            buf.drain(..used);
            self.spill().inbuf = buf;
        } else {
            cx.pool.put(&mut buf);
            self.tidy();
        }
    }

    /// Why another pipelined request may not be dispatched now, if it may not.
    #[inline(always)]
    pub(super) fn hold(&self, cx: &Cx) -> Hold {
        if self.tail.is_some() || cx.out.len() + self.out_len() > OUT_HIGH_WATER {
            return Hold::Output;
        }
        match &self.queue {
            Some(q) if !Self::queue_has_room(q, &cx.cfg) => Hold::Queue,
            _ => Hold::No,
        }
    }

    /// Parses and dispatches the requests in `buf`; returns how many bytes were used.
    pub(super) fn process<S: Service<Pending = P>>(
        &mut self,
        buf: &[u8],
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) -> usize {
        let mut pos = 0;
        while pos < buf.len() {
            match self.reading {
                Reading::Head => {}
                Reading::Body(_) => {
                    let used = self.feed_body(&buf[pos..], cx, svc);
                    if used == 0 {
                        break;
                    }
                    pos += used;
                    continue;
                }
                _ => break,
            }
            let hold = self.hold(cx);
            if hold != Hold::No {
                self.held = hold;
                break;
            }
            match head.parse(&buf[pos..], &cx.cfg.limits) {
                Err(e) => {
                    self.reject(e, crate::h1::request_line(&buf[pos..]), cx, svc);
                    break;
                }
                Ok(Parsed::Partial) => {
                    if self.timer != Timer::Head {
                        self.timer = Timer::Head;
                        self.deadline = cx.now + cx.cfg.header_timeout;
                    }
                    break;
                }
                Ok(Parsed::Complete(n)) => match self.dispatch(&buf[pos..], n, head, cx, svc) {
                    Some(used) => pos += used,
                    None => {
                        self.held = Hold::Body;
                        break;
                    }
                },
            }
        }
        pos
    }

    /// Hands the request whose head is `buf[..n]` to the service; returns the bytes used
    /// (head and body), or `None` to leave it for later (its body must be read, and answers
    /// before it are still outstanding: an interim 100 or a body error must not overtake them).
    #[inline(always)]
    pub(super) fn dispatch<S: Service<Pending = P>>(
        &mut self,
        buf: &[u8],
        n: usize,
        head: &RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) -> Option<usize> {
        let framing = head.framing();
        let avail = &buf[n..];
        let body: Option<&[u8]> = match framing {
            Framing::None => Some(&[]),
            Framing::Length(len) if avail.len() as u64 >= len => Some(&avail[..len as usize]),
            _ => None,
        };
        if body.is_none() && self.queue.is_some() {
            return None;
        }
        self.requests += 1;
        let facts = Facts {
            id: self.requests,
            framing: encode::Framing {
                head: head.method() == Method::Head,
                version: head.version(),
            },
            ends: !head.keep_alive() || self.requests >= cx.cfg.max_requests,
        };
        let expect_continue = head.expect_continue();
        let decision = svc.request(Exchange {
            id: facts.id,
            head,
            buf: &buf[..n],
            body,
            protocol: None,
            h1: true,
        });
        let used = n + body.map_or(0, <[u8]>::len);
        match decision {
            Decision::Respond(resp) if body.is_none() => {
                Some(self.refused_before_body(facts, resp, framing, n, avail, cx))
            }
            Decision::Respond(resp) => {
                self.place(facts, resp, cx);
                Some(used)
            }
            Decision::Defer if body.is_some() => {
                self.defer(facts, cx.now + cx.cfg.deferred_timeout, cx);
                Some(used)
            }
            Decision::Relay { upgrade } if body.is_some() => {
                self.relayed(facts, upgrade, cx);
                Some(used)
            }
            Decision::Defer | Decision::Relay { .. } => {
                // A service must read a body before it defers; never hang on it.
                self.place(facts, status_response(500, "").close(), cx);
                Some(used)
            }
            Decision::RelayBody { limit, pending } => {
                self.relay_body(
                    facts,
                    framing,
                    limit,
                    pending,
                    expect_continue && avail.is_empty(),
                    cx,
                );
                Some(n)
            }
            Decision::ReadBody { limit, pending } => {
                let Some(decoder) = BodyDecoder::new(framing) else {
                    self.end_body(facts, pending, BodyDecoder::Length(0), cx, svc);
                    return Some(used);
                };
                if let Framing::Length(len) = framing
                    && len > limit
                {
                    let line = crate::h1::request_line(buf);
                    self.refuse_with(413, "", None, line, facts, Some(pending), cx, svc);
                    return Some(n);
                }
                let body = (decoder, pending, limit, false);
                self.read_body(facts, body, expect_continue && avail.is_empty(), cx);
                Some(n)
            }
        }
    }

    /// An answer given without the request's body, which did not come with its head (a
    /// refusal: 401, 405…); returns the bytes used. A body whole in the buffer (chunked, whose
    /// end is not known before decoding) is skipped and the connection goes on, as nginx's;
    /// one still coming closes it after the answer. Out of line: the answers that read no
    /// body pay nothing for it.
    #[cold]
    #[inline(never)]
    fn refused_before_body(
        &mut self,
        facts: Facts,
        mut resp: crate::response::Response,
        framing: Framing,
        n: usize,
        avail: &[u8],
        cx: &mut Cx,
    ) -> usize {
        let used = match whole_body(framing, avail, &cx.cfg.limits) {
            Some(len) => n + len,
            None => {
                resp.close = true;
                n
            }
        };
        self.place(facts, resp, cx);
        used
    }

    /// Feeds body bytes to the request being read; returns the bytes used.
    pub(super) fn feed_body<S: Service<Pending = P>>(
        &mut self,
        input: &[u8],
        cx: &mut Cx,
        svc: &mut S,
    ) -> usize {
        let Reading::Body(b) = &mut self.reading else {
            return 0;
        };
        if self.held == Hold::Relay {
            return 0; // the upstream has no room: the input waits
        }
        let mut pos = 0;
        loop {
            let step = match b.decoder.decode(&input[pos..], &cx.cfg.limits) {
                Ok(step) => step,
                Err(e) if b.relayed => {
                    tracing::debug!(error = %e, "rejecting a relayed request body");
                    self.refuse_relayed(e.status(), &e.to_string(), Some(e), cx, svc);
                    return input.len();
                }
                Err(e) => {
                    let facts = b.facts;
                    let line = svc.request_line_of(&b.pending);
                    let pending = self.stop_reading();
                    tracing::debug!(error = %e, "rejecting request body");
                    let why = e.to_string();
                    self.refuse_with(e.status(), &why, Some(e), &line, facts, pending, cx, svc);
                    return input.len();
                }
            };
            pos += step.consumed;
            if !step.data.is_empty() {
                b.received += step.data.len() as u64;
                if b.received > b.limit && b.relayed {
                    self.refuse_relayed(413, "", None, cx, svc);
                    return input.len();
                }
                if b.received > b.limit {
                    let facts = b.facts;
                    let line = svc.request_line_of(&b.pending);
                    let pending = self.stop_reading();
                    self.refuse_with(413, "", None, &line, facts, pending, cx, svc);
                    return input.len();
                }
                if let Err(resp) = svc.data(&mut b.pending, step.data) {
                    let facts = b.facts;
                    self.reading = Reading::Stopped;
                    self.place(facts, resp.close(), cx);
                    return input.len();
                }
            }
            if step.done {
                let Reading::Body(b) = std::mem::replace(&mut self.reading, Reading::Head) else {
                    unreachable!("matched above");
                };
                let BodyIn {
                    facts,
                    decoder,
                    pending,
                    relayed,
                    ..
                } = *b;
                if relayed {
                    // The answer is the upstream's, pending already.
                    let _ = svc.end(facts.id, pending, decoder);
                    if self.writing != Writing::Open {
                        // Its answer, streaming already, closes the connection
                        // (`close_after_streaming`): nothing after this body is read.
                        self.reading = Reading::Stopped;
                        self.drop_inbuf(&mut cx.pool);
                    }
                } else {
                    self.end_body(facts, pending, decoder, cx, svc);
                }
                return pos;
            }
            if b.relayed && !svc.room(&b.pending) {
                self.held = Hold::Relay;
                return pos;
            }
            if pos == input.len() {
                return pos;
            }
        }
    }

    /// The body has been read: the service answers now or defers.
    pub(super) fn end_body<S: Service<Pending = P>>(
        &mut self,
        facts: Facts,
        pending: P,
        body: BodyDecoder,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        match svc.end(facts.id, pending, body) {
            Decision::Respond(resp) => self.place(facts, resp, cx),
            Decision::Defer => self.defer(facts, cx.now + cx.cfg.deferred_timeout, cx),
            Decision::Relay { upgrade } => self.relayed(facts, upgrade, cx),
            Decision::ReadBody { .. } | Decision::RelayBody { .. } => {
                self.place(facts, status_response(500, "").close(), cx)
            }
        }
    }

    /// The request went upstream before its body arrived: its answer is pending from now on
    /// (it may come before the body ends), and the body is read while the upstream has room.
    #[cold]
    #[inline(never)]
    fn relay_body(
        &mut self,
        facts: Facts,
        framing: Framing,
        limit: u64,
        pending: P,
        expect_continue: bool,
        cx: &mut Cx,
    ) {
        self.queue
            .get_or_insert_with(|| cx.pool.get_queue())
            .push_pending(facts, u64::MAX);
        // The application refused a length over the limit before sending the request up;
        // a chunked body's limit is counted as it comes.
        let decoder = BodyDecoder::new(framing).unwrap_or(BodyDecoder::Length(0));
        self.read_body(facts, (decoder, pending, limit, true), expect_continue, cx);
    }

    /// Starts reading a request's body: `(decoder, pending, limit, relayed)` as in
    /// [`BodyIn`]; `continue_100`: the client waits for a 100 before sending it.
    fn read_body(
        &mut self,
        facts: Facts,
        (decoder, pending, limit, relayed): (BodyDecoder, P, u64, bool),
        continue_100: bool,
        cx: &mut Cx,
    ) {
        if continue_100 {
            // RFC 9110 §10.1.1: the client waits for this before sending the body.
            self.sink(cx).extend_from_slice(CONTINUE_100);
        }
        self.reading = Reading::Body(Box::new(BodyIn {
            facts,
            decoder,
            pending,
            received: 0,
            limit,
            started: cx.now,
            relayed,
        }));
    }

    /// Refuses the relayed body being read (malformed, over its limit, too slow): the
    /// upstream exchange is dropped (the pending body's end, dropped unfinished, tells the
    /// driver) and the client gets `status`, or a cut answer when the upstream's had begun;
    /// the connection closes after it.
    pub(super) fn refuse_relayed<S: Service<Pending = P>>(
        &mut self,
        status: u16,
        why: &str,
        error: Option<ParseError>,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        let Reading::Body(b) = std::mem::replace(&mut self.reading, Reading::Stopped) else {
            return;
        };
        self.held = Hold::No;
        self.drop_inbuf(&mut cx.pool);
        let line = svc.request_line_of(&b.pending);
        let facts = b.facts;
        drop(b);
        let resp = status_response(status, why).close();
        let send_body = if facts.framing.head {
            0
        } else {
            resp.body.len()
        };
        svc.answered(status, error, send_body, &line);
        if !self.complete(facts.id, resp, cx) {
            self.stream_abort(facts.id, cx);
        }
    }

    /// The answer comes later; 503 at `deadline` (`u64::MAX`: never).
    pub(super) fn defer(&mut self, facts: Facts, deadline: u64, cx: &mut Cx) {
        self.queue
            .get_or_insert_with(|| cx.pool.get_queue())
            .push_pending(facts, deadline);
        if facts.ends {
            // No request after this one will be read; its answer decides the close.
            self.reading = Reading::Stopped;
            self.drop_inbuf(&mut cx.pool);
        }
    }

    /// The answer comes from an upstream, which keeps the time. After an upgrade request
    /// nothing more is parsed: a 101 answer makes the connection a tunnel, and any other
    /// closes it (what the client sent after it is not known to be HTTP).
    #[cold]
    #[inline(never)]
    fn relayed(&mut self, facts: Facts, upgrade: bool, cx: &mut Cx) {
        if !upgrade {
            return self.defer(facts, u64::MAX, cx);
        }
        let facts = Facts {
            ends: true,
            ..facts
        };
        self.queue
            .get_or_insert_with(|| cx.pool.get_queue())
            .push_pending(facts, u64::MAX);
        self.reading = Reading::Upgrade;
    }

    /// Answers a request the connection refuses on its own; the connection closes after it.
    #[allow(clippy::too_many_arguments)] // each one a fact of the answer
    pub(super) fn own_answer<S: Service<Pending = P>>(
        &mut self,
        status: u16,
        why: &str,
        error: Option<ParseError>,
        request_line: &[u8],
        facts: Facts,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        self.refuse_with(status, why, error, request_line, facts, None, cx, svc);
    }

    /// [`Conn::own_answer`] for a request whose body was being read into `pending`: the
    /// service finishes the answer first ([`Service::refused`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn refuse_with<S: Service<Pending = P>>(
        &mut self,
        status: u16,
        why: &str,
        error: Option<ParseError>,
        request_line: &[u8],
        facts: Facts,
        pending: Option<P>,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        let mut resp = status_response(status, why).close();
        if let Some(pending) = pending {
            svc.refused(pending, &mut resp);
        }
        let send_body = if facts.framing.head {
            0
        } else {
            resp.body.len()
        };
        svc.answered(status, error, send_body, request_line);
        self.place(facts, resp, cx);
    }

    /// Stops reading the request at hand; the pending body it was read into, if any.
    fn stop_reading(&mut self) -> Option<P> {
        match std::mem::replace(&mut self.reading, Reading::Stopped) {
            Reading::Body(b) => Some(b.pending),
            _ => None,
        }
    }

    pub(super) fn reject<S: Service<Pending = P>>(
        &mut self,
        e: ParseError,
        request_line: &[u8],
        cx: &mut Cx,
        svc: &mut S,
    ) {
        tracing::debug!(error = %e, status = e.status(), "rejecting request");
        self.own_answer(
            e.status(),
            &e.to_string(),
            Some(e),
            request_line,
            Facts::UNPARSED,
            cx,
            svc,
        );
    }
}

/// The length of a request body (its framing included) that `avail` holds whole and that
/// decodes without error; `None` when it is cut or malformed.
fn whole_body(framing: Framing, avail: &[u8], limits: &linerate_http1::Limits) -> Option<usize> {
    let mut decoder = BodyDecoder::new(framing)?;
    let mut pos = 0;
    loop {
        let step = decoder.decode(&avail[pos..], limits).ok()?;
        pos += step.consumed;
        if step.done {
            return Some(pos);
        }
        if step.consumed == 0 || pos == avail.len() {
            return None;
        }
    }
}
