//! gRPC in the content phase: a unary method's call once its body is in — read, handler
//! called, its future polled once on the worker and answered at once when ready (the
//! synchronous route's cost), else run on the worker's runtime and answered later — and the
//! UNIMPLEMENTED answer to a gRPC call no route takes. Streaming methods are
//! `deferred_incoming` routes (`grpc/run.rs`).
//!
//! Owns where a unary call runs; not the protocol (`crate::grpc`).
#![forbid(unsafe_code)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use linerate_http1::{Framing, Method, RequestHead};

use super::body::Sink;
use crate::app::ConnApp;
use crate::app::deferred::Responder;
use crate::app::dispatch::Pending;
use crate::app::request::Params;
use crate::app::router::Handler;
use crate::grpc::{self, Call, Code, MethodStats, Protocol, Status, Unary};
use crate::h1::{Decision, Exchange};

impl<'a> ConnApp<'a> {
    /// A unary method's request: called now when its body came with the head, else once it
    /// is read (`route_end`).
    #[cold]
    #[inline(never)]
    pub(crate) fn grpc(
        &mut self,
        index: usize,
        params: Params,
        req: Exchange<'_>,
        unary: &Arc<Unary>,
    ) -> Decision<Pending> {
        // A declared length past one message: RESOURCE_EXHAUSTED, as the prefix would be.
        if let Framing::Length(n) = req.head.framing()
            && n > (grpc::MAX_MESSAGE + linerate_grpc::frame::PREFIX_LEN) as u64
            && let Some(resp) = over_declared(n, req.head.header(req.buf, "content-type"))
        {
            if self.app.metrics {
                unary.1.ended(Some(self.started), Code::ResourceExhausted);
            }
            return self.respond(req.head, req.buf, resp);
        }
        match req.body {
            Some(body) => self.grpc_unary(req.id, req.head, req.buf, body, unary),
            None => {
                let sink = Sink::Grpc(Vec::new());
                self.read_body(index, params, req.head, req.buf, sink)
            }
        }
    }

    /// A unary call with its whole body: answered now when the handler's future is ready at
    /// its first poll, else run on the worker's runtime (`Decision::Relay`: the call keeps
    /// its own deadline).
    #[cold]
    #[inline(never)]
    pub(crate) fn grpc_unary(
        &mut self,
        id: u64,
        head: &RequestHead,
        buf: &[u8],
        body: &[u8],
        unary: &Arc<Unary>,
    ) -> Decision<Pending> {
        let stats = &unary.1;
        let call = match Call::read(head, buf, self.client().copied()) {
            Ok(c) => c,
            Err((code, refused)) => return self.grpc_end(id, head, buf, stats, code, refused),
        };
        // gRPC-Web: the same call, its answer in the request's protocol (`grpc/web.rs`).
        let protocol = call.head.protocol;
        let fail = |s: Status| (Some(s.code), grpc::failed(protocol, &s));
        if call.expired() {
            let (code, resp) = fail(grpc::deadline_exceeded());
            return self.grpc_end(id, head, buf, stats, code, resp);
        }
        let text;
        let body = if protocol == Protocol::WebText {
            text = match grpc::decode_text(body) {
                Ok(t) => t,
                Err(s) => {
                    let (code, resp) = fail(s);
                    return self.grpc_end(id, head, buf, stats, code, resp);
                }
            };
            &text[..]
        } else {
            body
        };
        let deadline = call.deadline;
        let call_head = call.head;
        let called = grpc::read_unary(body, &call_head, |bytes| {
            catch_unwind(AssertUnwindSafe(|| (unary.0)(call, bytes)))
        });
        let mut fut = match called {
            Ok(Ok(Ok(fut))) => fut,
            Ok(Ok(Err(status))) | Err(status) => {
                let (code, resp) = fail(status);
                return self.grpc_end(id, head, buf, stats, code, resp);
            }
            Ok(Err(_)) => {
                let (code, resp) = fail(stats.panicked());
                return self.grpc_end(id, head, buf, stats, code, resp);
            }
        };
        let mut cx = Context::from_waker(Waker::noop());
        match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut cx))) {
            Ok(Poll::Ready(result)) => {
                if self.app.metrics {
                    let code = result.as_ref().map_or_else(|s| s.code, |_| Code::Ok);
                    stats.ended(Some(self.started), code);
                }
                self.answer(id, head, buf, grpc::unary_answer(protocol, result))
            }
            Err(_) => {
                let (code, resp) = fail(stats.panicked());
                self.grpc_end(id, head, buf, stats, code, resp)
            }
            Ok(Poll::Pending) => {
                if self.io.outstanding >= self.app.max_deferred_per_worker {
                    self.io.counters.refused();
                    let busy = Status::new(Code::ResourceExhausted, "too many calls waiting");
                    let (code, resp) = fail(busy);
                    return self.grpc_end(id, head, buf, stats, code, resp);
                }
                self.io.outstanding += 1;
                self.io.counters.set_outstanding(self.io.outstanding);
                let meta = self.meta(head, buf);
                let responder = Responder::new(self.io.inbox.clone(), self.token, id, meta);
                let started = self.app.metrics.then_some(self.started);
                grpc::unary_later(fut, deadline, protocol, stats.clone(), started, responder);
                Decision::Relay { upgrade: false }
            }
        }
    }

    /// A unary call's answer, the call counted with `code` (`None`: not a gRPC call, HTTP
    /// 415) when metrics are on.
    #[inline(always)]
    fn grpc_end(
        &mut self,
        id: u64,
        head: &RequestHead,
        buf: &[u8],
        stats: &MethodStats,
        code: Option<Code>,
        resp: crate::response::Response,
    ) -> Decision<Pending> {
        if self.app.metrics
            && let Some(code) = code
        {
            stats.ended(Some(self.started), code);
        }
        self.answer(id, head, buf, resp)
    }

    /// A unary call whose body's prefix was over the limit as it arrived (`dispatch.rs`):
    /// counted RESOURCE_EXHAUSTED.
    #[cold]
    pub(crate) fn grpc_over_limit(&self, route: usize, started: u64) {
        if self.app.metrics
            && let Some(Handler::Grpc(unary)) = self.app.router.at(route).map(|r| &r.handler)
        {
            unary.1.ended(Some(started), Code::ResourceExhausted);
        }
    }

    /// A request no route takes: a gRPC call, on a router serving gRPC, is UNIMPLEMENTED
    /// (its service or method is not here); anything else goes to the static files.
    #[inline(always)]
    pub(crate) fn unrouted(&mut self, head: &RequestHead, buf: &[u8]) -> Decision<Pending> {
        if self.app.router.grpc.any() {
            return self.grpc_unimplemented(head, buf);
        }
        self.files(head, buf)
    }

    #[cold]
    #[inline(never)]
    fn grpc_unimplemented(&mut self, head: &RequestHead, buf: &[u8]) -> Decision<Pending> {
        let content_type = head.header(buf, "content-type");
        // gRPC's content types (`+json` too: its method is as unknown), or gRPC-Web's.
        let protocol = match grpc::protocol_of(content_type) {
            Some(p) => p,
            None if grpc::is_grpc(content_type) => Protocol::Grpc,
            None => return self.files(head, buf),
        };
        if head.method() != Method::Post {
            return self.files(head, buf);
        }
        let path = String::from_utf8_lossy(head.path_bytes(buf));
        let status = Status::new(Code::Unimplemented, format!("unknown method {path}"));
        let resp = grpc::failed(protocol, &status);
        if self.app.metrics {
            let unknown = &self.app.router.grpc.calls.unknown;
            unknown.ended(Some(self.started), Code::Unimplemented);
        }
        self.respond(head, buf, resp)
    }
}

/// A sync layer's early answer (its `before` answered) to a gRPC call: the status it means,
/// trailers-only (`grpc/layered.rs`), when `grpc` says the request is one (a gRPC method's
/// route, or a call in a gRPC content type on a router serving gRPC); else as it is.
#[cold]
#[inline(never)]
pub(crate) fn layer_answer(
    grpc: bool,
    head: &RequestHead,
    buf: &[u8],
    resp: crate::response::Response,
) -> crate::response::Response {
    if !grpc {
        return resp;
    }
    match grpc::call_protocol(head.header(buf, "content-type")) {
        Some(protocol) => grpc::layer_answer(protocol, resp),
        None => resp,
    }
}

/// The answer to a unary call whose declared length is past one message and its prefix
/// (RESOURCE_EXHAUSTED, as the prefix would be), in the call's protocol; `None` for a
/// `-text` body within the same message's base64.
#[cold]
#[inline(never)]
fn over_declared(n: u64, content_type: Option<&[u8]>) -> Option<crate::response::Response> {
    let protocol = grpc::protocol_of(content_type).unwrap_or(Protocol::Grpc);
    if protocol == Protocol::WebText && n <= grpc::UNARY_BODY_LIMIT {
        return None;
    }
    let status = Status::new(Code::ResourceExhausted, "the call's body is over the limit");
    Some(grpc::failed(protocol, &status))
}
