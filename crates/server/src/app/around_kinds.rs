//! Async layers ([`Router::around`](crate::Router::around), `timeout`) over every kind of
//! route beside sync and `async` handlers: what ends such a chain ([`Kind`]), and the head
//! chain, which runs the layers on the request's head before its body flows.
//!
//! (A WebSocket route's chain, which ends in its accept function, is
//! `websocket/chained.rs`'s.)
//!
//! A deferred route's chain runs the deferred way (body read whole, then the chain, as for
//! sync handlers); a streamed-body route (`deferred_incoming`, a streaming [`BodySink`], a
//! gRPC method) becomes a `deferred_incoming` route whose chain runs at the head: the body
//! waits in its [`IncomingBody`] (bounded: the connection stops reading past its room) until
//! the last `next` hands it to the handler, and a layer that answers itself drops it (as for
//! a sync layer's early answer, an HTTP/1.1 connection whose body is still coming closes
//! after the answer, one whose body is in goes on; over HTTP/2 only the stream ends). Must
//! not block.
//!
//! [`BodySink`]: crate::BodySink
#![forbid(unsafe_code)]

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::app::around::{Chain, ResponseFuture, answer_channel, catch_panic, panicked};
use crate::app::deferred::{Cancel, HeadView, Inbox, Meta, OwnedRequest, Responder, Spawn};
use crate::app::dispatch::text_status;
use crate::app::incoming::IncomingBody;
use crate::app::response::Response;
use crate::app::router::{DeferredFn, Incoming, IncomingFn, SinkFactory};
use crate::runtime::OnWorker;
use linerate_http1::Version;

/// What ends a chain of a route that is neither a sync nor an `async` handler.
pub(crate) enum Kind {
    /// A deferred handler ([`Router::deferred`](crate::Router::deferred)): its body was read
    /// whole before the chain; it answers through a `Responder` of the chain's.
    Deferred(Box<DeferredFn>),
    /// A handler called at the head: the application's `deferred_incoming`, or the crate's
    /// own (a gRPC streaming method, a tower service).
    Incoming(Incoming),
    /// A streaming route's sink factory: its sink is fed on the worker's thread.
    Streaming(Arc<SinkFactory>),
    /// A unary gRPC method: its body read at the end of the chain.
    #[cfg(feature = "grpc")]
    GrpcUnary(Arc<crate::grpc::Unary>),
    /// A WebSocket route's accept function (`websocket/chained.rs`).
    #[cfg(feature = "websocket")]
    WebSocket(
        Arc<crate::websocket::WsAcceptFn>,
        crate::websocket::WsOptions,
    ),
}

impl Kind {
    /// Calls the handler with the request as the layers leave it; `body` is the body still
    /// to come (`None` for a chain run the deferred way).
    pub(crate) fn call(&self, req: OwnedRequest, body: Option<HeldBody>) -> ResponseFuture {
        let body = || body.map_or_else(empty_body, HeldBody::take);
        match self {
            Kind::Deferred(f) => {
                let (responder, answer) = local_responder();
                if catch_unwind(AssertUnwindSafe(|| f(req, responder))).is_err() {
                    tracing::error!("deferred handler panicked; answering 500");
                    crate::app::panics::count(crate::app::panics::Panic::Http);
                }
                Box::pin(answer)
            }
            Kind::Incoming(f) => {
                let (responder, answer) = local_responder();
                let called = match f {
                    Incoming::Owned(f) => {
                        catch_unwind(AssertUnwindSafe(|| f(req, body(), responder)))
                    }
                    Incoming::InPlace(f) => {
                        let view = HeadView {
                            head: &req.head.head,
                            buf: &req.head.bytes,
                            peer: req.peer,
                            client_cert: req.client_cert.as_ref(),
                            tls: req.tls,
                        };
                        catch_unwind(AssertUnwindSafe(|| f(view, body(), responder)))
                    }
                };
                if called.is_err() {
                    tracing::error!("deferred handler panicked; answering 500");
                    crate::app::panics::count(crate::app::panics::Panic::Http);
                }
                Box::pin(answer)
            }
            Kind::Streaming(factory) => streaming(factory.clone(), req, body()),
            #[cfg(feature = "grpc")]
            Kind::GrpcUnary(unary) => {
                Box::pin(crate::grpc::unary_in_chain(unary.clone(), req, body()))
            }
            #[cfg(feature = "websocket")]
            Kind::WebSocket(accept, options) => Box::pin(std::future::ready(
                crate::websocket::accept_in_chain(&**accept, options, req),
            )),
        }
    }
}

/// The body of a request whose chain ran the deferred way (it was read whole): none to come.
fn empty_body() -> IncomingBody {
    let (feed, body) = crate::app::incoming::incoming(Some(0), None);
    feed.end(std::iter::empty());
    body
}

/// A head chain's request body on its way to the handler. Dropped untaken (a layer answered
/// without `next`) before the whole body came in, it marks the answer to close the
/// connection: what an HTTP/1.1 connection does when a sync layer answers before a body it
/// has not read (RFC 9112 §9.6), instead of reading the rest of an upload nobody wants.
pub(crate) struct HeldBody {
    body: Option<IncomingBody>,
    cut: Arc<AtomicBool>,
}

impl HeldBody {
    fn take(mut self) -> IncomingBody {
        self.body.take().unwrap_or_else(empty_body)
    }
}

impl Drop for HeldBody {
    fn drop(&mut self) {
        if self.body.as_ref().is_some_and(|b| !b.arrived()) {
            self.cut.store(true, Ordering::Relaxed);
        }
    }
}

/// The `deferred_incoming` handler of a streamed-body route under async layers: the chain
/// runs on the worker's runtime from the request's head. On a gRPC route an answer of its
/// layers that is not a gRPC answer becomes the status it means (`grpc/layered.rs`).
pub(crate) fn head_chain(chain: Chain) -> Box<IncomingFn> {
    let chain = Arc::new(chain);
    Box::new(move |req, body, res| {
        let chain = chain.clone();
        #[cfg(feature = "grpc")]
        let protocol = chain
            .grpc
            .then(|| crate::grpc::call_protocol(req.header("content-type")))
            .flatten();
        // HTTP/2 and HTTP/3 end the stream alone; an HTTP/1.1 connection must close.
        let http1 = matches!(req.version(), Version::Http10 | Version::Http11);
        let cut = Arc::new(AtomicBool::new(false));
        let body = HeldBody {
            body: Some(body),
            cut: cut.clone(),
        };
        OnWorker.spawn(Box::pin(async move {
            let mut resp = catch_panic(chain.run_at_head(req, body))
                .await
                .unwrap_or_else(|| panicked("layer"));
            if http1 && cut.load(Ordering::Relaxed) {
                resp = resp.close();
            }
            #[cfg(feature = "grpc")]
            let resp = match protocol {
                Some(p) => crate::grpc::layer_answer(p, resp),
                None => resp,
            };
            res.send(resp);
        }));
    })
}

/// A streaming route's handler at the end of a chain: its sink made and fed on the worker's
/// thread (a [`BodySink`](crate::BodySink) need not be `Send`), as fast as it takes the
/// pieces; its answer comes back to the chain. Dropped by the chain (a timeout), it stops.
fn streaming(
    factory: Arc<SinkFactory>,
    req: OwnedRequest,
    mut body: IncomingBody,
) -> ResponseFuture {
    let (tx, rx) = answer_channel();
    let fed = async move {
        let request = req.request();
        let Ok(mut sink) = catch_unwind(AssertUnwindSafe(|| factory(&request))) else {
            return panicked("streaming handler");
        };
        while let Some(piece) = body.chunk().await {
            let Ok(piece) = piece else {
                // Cut off: the connection has answered (413) or is gone.
                return text_status(400).close();
            };
            if catch_unwind(AssertUnwindSafe(|| sink.data(&piece))).is_err() {
                return panicked("streaming handler");
            }
        }
        catch_unwind(AssertUnwindSafe(move || sink.finish(&request)))
            .unwrap_or_else(|_| panicked("streaming handler"))
    };
    let spawned = crate::runtime::spawn_local(async move {
        if let Some(resp) = tx.until_unwanted(fed).await {
            tx.send(resp);
        }
    });
    if !spawned {
        tracing::error!("a streaming route's chain ran off its worker; answering 500");
        return Box::pin(std::future::ready(text_status(500).close()));
    }
    Box::pin(rx)
}

/// A [`Responder`] whose answer comes back to the chain (through an inbox of its own)
/// instead of the worker, and the future that waits for it: dropped unanswered (a route
/// timeout), it gives the request up, as the worker's deadline would
/// ([`Responder::is_cancelled`], [`Responder::until_cancelled`]).
fn local_responder() -> (Responder, LocalAnswer) {
    let waker: Arc<Mutex<Option<Waker>>> = Arc::default();
    let wake = waker.clone();
    let inbox = Arc::new(Inbox::new(Box::new(move || {
        let w = wake.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = w {
            w.wake();
        }
    })));
    let cancel = Arc::new(Cancel::default());
    let meta = Meta {
        cancel: Some(cancel.clone()),
        ..Meta::default()
    };
    let responder = Responder::new(inbox.clone(), 0, 0, meta);
    let answer = LocalAnswer {
        inbox,
        waker,
        cancel,
        done: false,
    };
    (responder, answer)
}

struct LocalAnswer {
    inbox: Arc<Inbox>,
    waker: Arc<Mutex<Option<Waker>>>,
    cancel: Arc<Cancel>,
    done: bool,
}

impl LocalAnswer {
    fn take(&mut self) -> Option<Response> {
        let mut got = Vec::new();
        self.inbox.take(&mut got);
        let done = got.pop()?;
        self.done = true;
        Some(done.resp.unwrap_or_else(|| {
            tracing::error!("a deferred handler dropped its Responder; answering 500");
            text_status(500)
        }))
    }
}

impl Future for LocalAnswer {
    type Output = Response;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        if let Some(resp) = self.take() {
            return Poll::Ready(resp);
        }
        *self.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
        // An answer pushed before the waker was in woke nobody: look again.
        match self.take() {
            Some(resp) => Poll::Ready(resp),
            None => Poll::Pending,
        }
    }
}

impl Drop for LocalAnswer {
    fn drop(&mut self) {
        if !self.done {
            self.cancel.give_up();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: Future>(fut: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(fut)
    }

    #[test]
    fn a_local_responder_answers_its_future_from_another_thread_and_its_drop_gives_up() {
        let (responder, answer) = local_responder();
        std::thread::spawn(move || responder.send(Response::text("later")));
        let resp = block_on(answer);
        assert_eq!(resp.body_bytes(), b"later");

        let (responder, answer) = local_responder();
        assert!(!responder.is_cancelled());
        drop(answer);
        assert!(responder.is_cancelled(), "the chain gave the request up");

        let (responder, answer) = local_responder();
        drop(responder);
        let resp = block_on(answer);
        assert_eq!(resp.status_code(), 500);
    }
}
