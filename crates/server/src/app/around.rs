//! Middleware that can wait: [`Around`] layers (`async fn(req, next) -> Response`) that run
//! code before and after the rest of a route's chain, may answer themselves, and may await
//! anything (a timer, a database); the route timeout; and the chain a route under them becomes.
//!
//! Owns building one route's chain and running it on the worker's runtime ([`OnWorker`]) as
//! a deferred handler, so the dispatcher knows nothing of it and a route without async layers
//! never runs this code. It must not block: the chain runs on the worker's thread.
#![forbid(unsafe_code)]

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;

use crate::app::around_kinds::{HeldBody, Kind};
use crate::app::dispatch::text_status;
use crate::deferred::{OwnedRequest, Spawn};
use crate::extract::IntoResponse;
use crate::response::Response;
use crate::router::{DeferredFn, HandlerFn};
use crate::runtime::OnWorker;

/// The answer an [`Around`] layer or [`Next::run`] computes.
pub type ResponseFuture = Pin<Box<dyn Future<Output = Response> + Send + 'static>>;

/// An async layer: gets the request (its body read) and the rest of the chain, and answers.
/// It may run code before [`Next::run`] and after it (on the response it returns), answer
/// without calling it (a 401), and await anything meanwhile. Implemented for every
/// `Fn(OwnedRequest, Next) -> impl Future<Output = impl IntoResponse>`; give one to
/// [`Router::around`](crate::Router::around).
pub trait Around: Send + Sync + 'static {
    /// Answers `req`, calling `next` (or not).
    fn call(&self, req: OwnedRequest, next: Next) -> ResponseFuture;
}

impl<F, Fut, R> Around for F
where
    F: Fn(OwnedRequest, Next) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: IntoResponse,
{
    fn call(&self, req: OwnedRequest, next: Next) -> ResponseFuture {
        let fut = self(req, next);
        Box::pin(async move { fut.await.into_response() })
    }
}

/// The rest of a route's chain, as an [`Around`] layer sees it: the layers inside it, then
/// the handler.
pub struct Next {
    chain: Arc<Chain>,
    at: usize,
    /// The request's body still to come, for a route whose chain runs at the head (see
    /// `around_kinds`): handed to its handler by the last `next`, dropped by a layer that
    /// answers itself (its answer then closes an HTTP/1.1 connection whose body is still
    /// coming, as a sync layer's early answer does).
    body: Option<HeldBody>,
}

impl Next {
    /// Runs the rest of the chain on `req`. Dropping the future drops what is inside (an
    /// `async` handler's future included), which is how a timeout stops them. A panic
    /// inside is a 500 here, which the layers outside see.
    pub fn run(self, req: OwnedRequest) -> ResponseFuture {
        match self.chain.layers.get(self.at) {
            Some(layer) => {
                let next = Next {
                    chain: self.chain.clone(),
                    at: self.at + 1,
                    body: self.body,
                };
                // The layer's own future, wrapped rather than moved into another: the request
                // is moved once, into the layer, and the wrapper is a pointer's size.
                match catch_unwind(AssertUnwindSafe(|| layer.call(req, next))) {
                    Ok(fut) => Box::pin(Caught(fut, "layer")),
                    Err(_) => Box::pin(std::future::ready(panicked("layer"))),
                }
            }
            None => self.chain.endpoint.call(req, self.body),
        }
    }

    /// Whether the chain ends in a gRPC method (its timeouts end the call DEADLINE_EXCEEDED).
    fn ends_in_grpc(&self) -> bool {
        self.chain.grpc
    }
}

impl std::fmt::Debug for Next {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Next({} layers left)", self.chain.layers.len() - self.at)
    }
}

/// An `async` handler as registered (`route_async`), kept so that a chain can call it.
pub(crate) type AsyncFn = dyn Fn(OwnedRequest) -> ResponseFuture + Send + Sync;

/// What ends a chain: the route's handler.
pub(crate) enum Endpoint {
    /// A sync handler, called on the worker's thread with the owned request's view.
    Sync(Box<HandlerFn>),
    /// An `async` handler, run by its own spawner (its answer comes back to the chain), or
    /// in the chain's own future where that spawner is [`OnWorker`], the chain's: the same
    /// runtime and thread, without a second task and the channel back.
    Async(Option<Arc<dyn Spawn>>, Arc<AsyncFn>),
    /// Any other kind of route (deferred, streamed body, gRPC): `around_kinds.rs`.
    Kind(Kind),
}

impl Endpoint {
    fn call(&self, req: OwnedRequest, body: Option<HeldBody>) -> ResponseFuture {
        match self {
            Endpoint::Sync(h) => {
                let resp = catch_unwind(AssertUnwindSafe(|| h(&req.request())))
                    .unwrap_or_else(|_| panicked("handler"));
                Box::pin(std::future::ready(resp))
            }
            Endpoint::Async(None, f) => match catch_unwind(AssertUnwindSafe(|| f(req))) {
                Ok(fut) => Box::pin(Caught(fut, "async handler")),
                Err(_) => Box::pin(std::future::ready(panicked("async handler"))),
            },
            Endpoint::Async(Some(spawn), f) => {
                let slot = Arc::new(Mutex::new(Slot::default()));
                let tx = Tx(slot.clone());
                let f = f.clone();
                spawn.spawn(Box::pin(async move {
                    let handler = catch_panic(async move { f(req).await });
                    if let Some(out) = tx.until_unwanted(handler).await {
                        tx.send(out.unwrap_or_else(|| panicked("async handler")));
                    }
                }));
                Box::pin(Rx(slot))
            }
            Endpoint::Kind(kind) => kind.call(req, body),
        }
    }
}

/// A route's async layers (outermost first) and its handler.
pub(crate) struct Chain {
    pub(crate) layers: Vec<Arc<dyn Around>>,
    pub(crate) endpoint: Endpoint,
    /// The route is a gRPC method's: its timeouts answer DEADLINE_EXCEEDED, and an answer
    /// from its layers that is not a gRPC answer becomes one (`around_kinds.rs`).
    pub(crate) grpc: bool,
}

impl Chain {
    /// The deferred handler that runs this chain on the worker's runtime. Given up by the
    /// deferred timeout (503), the chain's future is dropped; a panic in a layer is a 500.
    pub(crate) fn into_deferred(self) -> Box<DeferredFn> {
        let chain = Arc::new(self);
        Box::new(move |req, res| {
            // The chain's future is made here, on the worker's thread in its runtime's context
            // (where the spawn below would first poll it anyway), so that the spawned future
            // holds a pointer to it rather than the request: kept under glibc's small-chunk
            // cache's limit (1,032 bytes), its allocation takes the fast path.
            let next = Next {
                chain: chain.clone(),
                at: 0,
                body: None,
            };
            let run = next.run(req);
            OnWorker.spawn(Box::pin(async move {
                match res.until_cancelled(catch_panic(run)).await {
                    Some(Some(resp)) => res.send(resp),
                    Some(None) => res.send(panicked("layer")),
                    None => {}
                }
            }));
        })
    }
}

impl Chain {
    /// The head chain's way in (`around_kinds.rs`): runs the whole chain on `req`, its body
    /// still to come in `body`.
    pub(crate) fn run_at_head(
        self: &Arc<Chain>,
        req: OwnedRequest,
        body: HeldBody,
    ) -> ResponseFuture {
        let next = Next {
            chain: self.clone(),
            at: 0,
            body: Some(body),
        };
        next.run(req)
    }

    /// Runs the whole chain on `req`, whose body (if any) is in it: a WebSocket route's way
    /// in (`websocket/chained.rs`).
    #[cfg_attr(not(feature = "websocket"), allow(dead_code))]
    pub(crate) fn run(self: &Arc<Chain>, req: OwnedRequest) -> ResponseFuture {
        let next = Next {
            chain: self.clone(),
            at: 0,
            body: None,
        };
        next.run(req)
    }
}

/// The answer to a panic: 500, closing the connection, with one log line.
pub(crate) fn panicked(what: &str) -> Response {
    tracing::error!("{what} panicked; answering 500");
    crate::app::panics::count(crate::app::panics::Panic::Http);
    text_status(500).close()
}

/// The route timeout ([`Router::timeout`](crate::Router::timeout)): the rest of the chain
/// has the time given to answer; past it, its future is dropped and the answer is a 503 (a
/// rejection, so an error renderer renders it), which the layers outside see.
pub(crate) struct Timeout(pub(crate) Duration);

impl Around for Timeout {
    fn call(&self, req: OwnedRequest, next: Next) -> ResponseFuture {
        let limit = self.0;
        // A gRPC call's route timeout ends it as its client's `grpc-timeout` would.
        // (A request that is not a gRPC call by its content type gets the HTTP answer.)
        let grpc = next
            .ends_in_grpc()
            .then(|| req.header("content-type").map(<[u8]>::to_vec))
            .filter(|ct| is_grpc_call(ct.as_deref()));
        Box::pin(async move {
            match tokio::time::timeout(limit, next.run(req)).await {
                Ok(resp) => resp,
                Err(_) => match grpc {
                    #[cfg(feature = "grpc")]
                    Some(content_type) => crate::grpc::timed_out(content_type.as_deref()),
                    _ => {
                        let mut resp = text_status(503);
                        resp.rejection = true;
                        resp
                    }
                },
            }
        })
    }
}

/// Whether a request with `content_type` is a gRPC call (none without the feature).
fn is_grpc_call(content_type: Option<&[u8]>) -> bool {
    #[cfg(feature = "grpc")]
    return crate::grpc::call_protocol(content_type).is_some();
    #[cfg(not(feature = "grpc"))]
    {
        let _ = content_type;
        false
    }
}

/// `fut`'s output, or `None` when a poll of it panicked: the panic is caught on the runtime's
/// thread, so the answer is the sync handlers' 500 and its log line rather than a dropped
/// `Responder` (no allocation: the future stays pinned in the caller's).
pub(crate) async fn catch_panic<F: Future>(fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(
        |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(out)) => Poll::Ready(Some(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(None),
        },
    )
    .await
}

/// A layer's or handler's answer (named by the `&str`), a panic in a poll of it the 500 of
/// [`panicked`] (what [`catch_panic`] does, for a future already boxed).
struct Caught(ResponseFuture, &'static str);

impl Future for Caught {
    type Output = Response;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Response> {
        match catch_unwind(AssertUnwindSafe(|| self.0.as_mut().poll(cx))) {
            Ok(polled) => polled,
            Err(_) => Poll::Ready(panicked(self.1)),
        }
    }
}

/// An `async` handler's answer on its way back to its chain, from the spawner's runtime: a
/// one-shot channel whose receiver, dropped, stops the handler's future.
#[derive(Default)]
struct Slot {
    answer: Option<Response>,
    /// The sender is gone (with or without an answer).
    closed: bool,
    /// The receiver is gone: the answer is no longer wanted.
    unwanted: bool,
    rx: Option<Waker>,
    tx: Option<Waker>,
}

fn lock(slot: &Mutex<Slot>) -> std::sync::MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) struct Tx(Arc<Mutex<Slot>>);

/// A one-shot channel for an answer computed elsewhere (a streaming route's sink on the
/// worker, a deferred handler's `Responder`): the receiver is the chain's future.
pub(crate) fn answer_channel() -> (Tx, Rx) {
    let slot = Arc::new(Mutex::new(Slot::default()));
    (Tx(slot.clone()), Rx(slot))
}

impl Tx {
    /// Runs `fut` until it ends, or until the receiver is dropped (`None`: `fut` dropped).
    pub(crate) async fn until_unwanted<F: Future>(&self, fut: F) -> Option<F::Output> {
        let mut fut = std::pin::pin!(fut);
        std::future::poll_fn(|cx| {
            {
                let mut s = lock(&self.0);
                if s.unwanted {
                    return Poll::Ready(None);
                }
                s.tx = Some(cx.waker().clone());
            }
            fut.as_mut().poll(cx).map(Some)
        })
        .await
    }

    pub(crate) fn send(self, resp: Response) {
        lock(&self.0).answer = Some(resp);
    }
}

impl Drop for Tx {
    fn drop(&mut self) {
        let waker = {
            let mut s = lock(&self.0);
            s.closed = true;
            s.rx.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

pub(crate) struct Rx(Arc<Mutex<Slot>>);

impl Future for Rx {
    type Output = Response;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Response> {
        let mut s = lock(&self.0);
        if let Some(resp) = s.answer.take() {
            return Poll::Ready(resp);
        }
        if s.closed {
            // The spawner dropped the future unfinished (its runtime shut down).
            drop(s);
            tracing::error!("an async handler's future was dropped unfinished; answering 500");
            return Poll::Ready(text_status(500).close());
        }
        s.rx = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Rx {
    fn drop(&mut self) {
        let waker = {
            let mut s = lock(&self.0);
            s.unwanted = true;
            s.tx.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}
