//! Routes: a route's handler called — buffered (its body read first when it did not come with
//! the head), streaming (its sink fed as the body arrives), or handed to `defer.rs` or
//! `websocket.rs` — with the route's layers, its body limit, and a panic or an unsendable
//! answer turned into a 500.
//!
//! Owns calling handlers; must not finish their answers (`headers.rs`).
#![forbid(unsafe_code)]

use std::panic::{AssertUnwindSafe, catch_unwind};

use linerate_http1::{BodyDecoder, Framing};

use super::body::Sink;
use crate::app::ConnApp;
use crate::app::around::panicked;
use crate::app::deferred::OwnedHead;
use crate::app::dispatch::Pending;
use crate::app::phase::headers::{guard, text_status};
use crate::app::request::{Params, Request};
use crate::app::response::Response;
use crate::app::router::{Handler, HandlerFn, Route};
use crate::h1::{Decision, Exchange};
use crate::stats::Kind;

impl<'a> ConnApp<'a> {
    /// Calls the route's handler, or arranges for its body to be read first.
    #[inline(always)]
    pub(crate) fn route<'b, const LAYERED: bool>(
        &mut self,
        index: usize,
        route: &'a Route,
        params: Params,
        req: Exchange<'b>,
    ) -> Decision<Pending> {
        let app = self.app;
        let head = req.head;
        self.kind = Kind::Route;
        if self.io.trace.recorded() {
            // Its span's `http.route`: the pattern (`/users/{id}`), as OpenTelemetry names it.
            self.io.trace.route = Some(route.pattern.clone());
        }
        if LAYERED
            && !route.layers.is_empty()
            && let Some(resp) =
                self.layers_before(&route.layers, Some((route, &params)), head, req.buf)
        {
            let resp = super::grpc::layer_answer(route.grpc, head, req.buf, resp);
            return self.answer(req.id, head, req.buf, resp);
        }
        let declared = match head.framing() {
            Framing::Length(len) => len,
            _ => 0,
        };
        let request = |body: &'b [u8]| Request {
            head,
            buf: req.buf,
            names: &route.names,
            params: &params,
            body,
            trailers: None,
            ctx: self,
        };
        match &route.handler {
            Handler::Buffered(h) => {
                if declared > 0 && declared > self.route_limit(route) {
                    return self.respond(head, req.buf, text_status(413).close());
                }
                match req.body {
                    Some(body) => {
                        let resp = call_buffered(h, &request(body));
                        self.answer(req.id, head, req.buf, resp)
                    }
                    None => {
                        let sink = Sink::Buffer(Vec::with_capacity(declared as usize));
                        self.read_body(index, params, head, req.buf, sink)
                    }
                }
            }
            Handler::Streaming(factory) => {
                if declared > route.body_limit.unwrap_or(app.max_stream_body_bytes) {
                    return self.respond(head, req.buf, text_status(413).close());
                }
                let request = request(&[]);
                let mut sink = match catch_unwind(AssertUnwindSafe(|| factory(&request))) {
                    Ok(sink) => sink,
                    Err(_) => return self.respond(head, req.buf, panicked("streaming handler")),
                };
                match req.body {
                    Some(body) => {
                        if !body.is_empty()
                            && catch_unwind(AssertUnwindSafe(|| sink.data(body))).is_err()
                        {
                            return self.respond(head, req.buf, panicked("streaming handler"));
                        }
                        let resp = call(move || sink.finish(&request));
                        self.answer(req.id, head, req.buf, resp)
                    }
                    None => self.read_body(index, params, head, req.buf, Sink::Stream(sink)),
                }
            }
            Handler::WebSocket(ws) => self.websocket(route, &params, req, ws),
            Handler::Grpc(unary) => self.grpc(index, params, req, unary),
            Handler::Incoming(f) => self.incoming(index, route, params, req, f),
            Handler::Deferred(f) => {
                if declared > 0 && declared > self.route_limit(route) {
                    return self.respond(head, req.buf, text_status(413).close());
                }
                match req.body {
                    Some(body) => {
                        let owned = OwnedHead::copy(head, req.buf);
                        self.defer(route, params, owned, (body.to_vec(), None), req.id, f)
                    }
                    None => {
                        let sink = Sink::Buffer(Vec::with_capacity(declared as usize));
                        self.read_body(index, params, head, req.buf, sink)
                    }
                }
            }
        }
    }

    /// A route's request whose body is in (read into a buffer, or fed to its sink): its
    /// handler is called, or handed the request (deferred).
    #[inline(always)]
    pub(crate) fn route_end(
        &mut self,
        id: u64,
        route: usize,
        params: Params,
        head: OwnedHead,
        sink: Sink,
        body: BodyDecoder,
    ) -> Decision<Pending> {
        let app = self.app;
        let Some(route) = app.router.at(route) else {
            return self.respond(&head.head, &head.bytes, text_status(500).close());
        };
        match (&route.handler, sink) {
            (Handler::Deferred(f), Sink::Buffer(v)) => {
                self.defer(route, params, head, (v, Some(body)), id, f)
            }
            (Handler::Grpc(unary), Sink::Grpc(v)) => {
                self.grpc_unary(id, &head.head, &head.bytes, &v, unary)
            }
            (Handler::Buffered(h), Sink::Buffer(v)) => {
                let request = Request {
                    head: &head.head,
                    buf: &head.bytes,
                    names: &route.names,
                    params: &params,
                    body: &v,
                    trailers: Some(&body),
                    ctx: self,
                };
                let resp = call(|| h(&request));
                self.answer(id, &head.head, &head.bytes, resp)
            }
            (_, Sink::Stream(sink)) => {
                let request = Request {
                    head: &head.head,
                    buf: &head.bytes,
                    names: &route.names,
                    params: &params,
                    body: &[],
                    trailers: Some(&body),
                    ctx: self,
                };
                let resp = call(move || sink.finish(&request));
                self.answer(id, &head.head, &head.bytes, resp)
            }
            _ => self.respond(&head.head, &head.bytes, text_status(500).close()),
        }
    }
}

/// Calls a handler; a panic becomes a 500 that closes the connection, and so does an answer
/// that would switch protocols without the API for it ([`guard`]).
#[inline(always)]
fn call(f: impl FnOnce() -> Response) -> Response {
    let checked = || {
        let mut resp = f();
        guard(&mut resp);
        resp
    };
    catch_unwind(AssertUnwindSafe(checked)).unwrap_or_else(|_| panicked("handler"))
}

/// Calls a buffered handler with [`call`]'s guard, out of line and in one place. Inlined
/// into the request path, the guard's copy was left out of line by the optimizer whenever
/// that path grew (the proxy mount check did it: +43 instructions per request, callgrind);
/// here it is inlined into this one small function, whose call costs a few.
#[inline(never)]
fn call_buffered(h: &HandlerFn, req: &Request<'_>) -> Response {
    call(|| h(req))
}
