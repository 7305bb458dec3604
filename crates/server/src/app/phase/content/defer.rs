//! Handlers that answer later: a deferred handler handed the request with its whole body and a
//! [`Responder`], and a `deferred_incoming` one (a tower service's way) called at the head,
//! its body fed as it arrives; both under the per-worker cap of outstanding requests.
//!
//! Owns the hand-over (the owned request, the worker's `Waiting` entry with the request's
//! layers); must not wait: the answer comes back through the worker's inbox.
#![forbid(unsafe_code)]

use std::panic::{AssertUnwindSafe, catch_unwind};

use linerate_http1::{BodyDecoder, Framing};

use super::body::Sink;
use crate::app::ConnApp;
use crate::app::deferred::{HeadView, OwnedHead, OwnedRequest, Responder, Waiting};
use crate::app::dispatch::Pending;
use crate::app::phase::headers::text_status;
use crate::app::request::Params;
use crate::app::router::{DeferredFn, Incoming, Route};
use crate::h1::{Decision, Exchange};

impl<'a> ConnApp<'a> {
    /// The request a handler that answers later owns: its head, route parameters, body and
    /// trailer fields, and the layers' values, with this connection's peer, client
    /// certificate (over TLS) and the application's state.
    pub(super) fn owned_request(
        &self,
        route: &Route,
        params: Params,
        head: OwnedHead,
        (body, trailers): (Vec<u8>, Option<BodyDecoder>),
        ext: crate::layer::Extensions,
    ) -> OwnedRequest {
        OwnedRequest {
            head,
            names: route.names.clone(),
            params,
            body,
            trailers,
            peer: self.client().copied(),
            client_cert: if self.tls {
                self.io.client_cert.clone()
            } else {
                None
            },
            tls: self.tls,
            ext,
            state: self.app.stateful.then(|| self.app.router.state.clone()),
            trace: self.trace_context(),
        }
    }

    /// Hands a request with its whole body to a deferred handler.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn defer(
        &mut self,
        route: &Route,
        params: Params,
        head: OwnedHead,
        (body, trailers): (Vec<u8>, Option<BodyDecoder>),
        id: u64,
        f: &DeferredFn,
    ) -> Decision<Pending> {
        if self.io.outstanding >= self.app.max_deferred_per_worker {
            self.io.counters.refused();
            let resp = text_status(503).header("Retry-After", "1");
            return self.respond(&head.head, &head.bytes, resp);
        }
        let mut meta = self.meta(&head.head, &head.bytes);
        let ext = meta
            .layered
            .as_ref()
            .map(|l| l.ext.clone())
            .unwrap_or_default();
        // The worker keeps the request's layers, for the answer or the timeout's 503.
        let cancel = self.io.cancels.take();
        meta.cancel = Some(cancel.clone());
        let layered = meta.layered.take();
        self.io
            .waiting
            .insert((self.token, id), Waiting { cancel, layered });
        self.io.outstanding += 1;
        self.io.counters.set_outstanding(self.io.outstanding);
        let responder = Responder::new(self.io.inbox.clone(), self.token, id, meta);
        let req = self.owned_request(route, params, head, (body, trailers), ext);
        if catch_unwind(AssertUnwindSafe(|| f(req, responder))).is_err() {
            // Unwinding dropped the Responder: its 500 is on the way.
            tracing::error!("deferred handler panicked; answering 500");
            crate::app::panics::count(crate::app::panics::Panic::Http);
        }
        Decision::Defer
    }

    /// A [`Handler::Incoming`] route's request: its handler is called now, with the body
    /// that came with the head or, while the body is still to come, the end the connection
    /// feeds as it reads (`Decision::RelayBody`: the answer may come before the body ends).
    /// No deadline: a proxied request's way (the handler keeps its own time). Out of line:
    /// no other route runs its code.
    #[cold]
    #[inline(never)]
    pub(crate) fn incoming(
        &mut self,
        index: usize,
        route: &Route,
        params: Params,
        req: Exchange<'_>,
        f: &Incoming,
    ) -> Decision<Pending> {
        let head = req.head;
        let declared = match head.framing() {
            Framing::Length(len) => Some(len),
            Framing::None => Some(0),
            _ => None,
        };
        if declared.unwrap_or(0) > self.app.max_stream_body_bytes {
            return self.respond(head, req.buf, text_status(413).close());
        }
        if self.io.outstanding >= self.app.max_deferred_per_worker {
            self.io.counters.refused();
            #[cfg(feature = "grpc")]
            if route.grpc
                && let Some(resp) = crate::grpc::busy(head.header(req.buf, "content-type"))
            {
                return self.respond(head, req.buf, resp);
            }
            let resp = text_status(503).header("Retry-After", "1");
            return self.respond(head, req.buf, resp);
        }
        let link = req
            .body
            .is_none()
            .then(|| (self.io.inbox.clone(), self.token, req.id));
        let (feed, body) = crate::app::incoming::incoming(declared, link);
        let meta = self.meta(head, req.buf);
        let ext = meta
            .layered
            .as_ref()
            .map(|l| l.ext.clone())
            .unwrap_or_default();
        self.io.outstanding += 1;
        self.io.counters.set_outstanding(self.io.outstanding);
        let responder = Responder::new(self.io.inbox.clone(), self.token, req.id, meta);
        let feed = match req.body {
            Some(whole) => {
                feed.put(whole);
                feed.end(std::iter::empty());
                None
            }
            None => Some(feed),
        };
        let client_cert = if self.tls {
            self.io.client_cert.as_ref()
        } else {
            None
        };
        let called = match f {
            Incoming::Owned(f) => {
                let head = OwnedHead::copy(head, req.buf);
                let owned = self.owned_request(route, params, head, (Vec::new(), None), ext);
                catch_unwind(AssertUnwindSafe(|| f(owned, body, responder)))
            }
            Incoming::InPlace(f) => {
                let view = HeadView {
                    head,
                    buf: req.buf,
                    peer: self.client().copied(),
                    client_cert,
                    tls: self.tls,
                };
                catch_unwind(AssertUnwindSafe(|| f(view, body, responder)))
            }
        };
        if called.is_err() {
            // Unwinding dropped the Responder: its 500 is on the way.
            tracing::error!("deferred handler panicked; answering 500");
            crate::app::panics::count(crate::app::panics::Panic::Http);
        }
        let Some(feed) = feed else {
            return Decision::Relay { upgrade: false };
        };
        match self.read_body(index, params, head, req.buf, Sink::Incoming(feed)) {
            Decision::ReadBody { limit, pending } => Decision::RelayBody { limit, pending },
            other => other,
        }
    }
}
