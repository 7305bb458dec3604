//! Running a call on the worker's tokio runtime: a streaming call from its head, a unary
//! call whose future waited at its first poll; each under the call's deadline (its future
//! dropped past it: DEADLINE_EXCEEDED) and a panic's guard (INTERNAL unless the router says
//! otherwise: [`Router::grpc_panic_status`](crate::Router::grpc_panic_status)).
//!
//! Owns when a call ends; not what its answer looks like (`answer.rs`, `stream.rs`).
#![forbid(unsafe_code)]

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use super::call::{Call, deadline_exceeded};
use super::method::{StreamFn, UnaryFuture};
use super::stream::{RawSink, RawStream};
use super::{Code, MethodStats, Protocol, web};
use crate::app::around::catch_panic;
use crate::app::deferred::{Cancel, HeadView, Responder, Spawn};
use crate::app::incoming::IncomingBody;

/// A streaming method's handler at the request's head: reads the call, then runs it.
pub(crate) fn streaming(
    f: Arc<StreamFn>,
    stats: Arc<MethodStats>,
) -> impl Fn(HeadView<'_>, IncomingBody, Responder) + Send + Sync + 'static {
    move |view, body, responder| {
        let started = stats.start();
        let call = match Call::read(view.head, view.buf, view.peer) {
            Ok(c) => c,
            Err((code, refused)) => {
                if let Some(code) = code {
                    stats.ended(started, code);
                }
                return responder.send(refused);
            }
        };
        // Under an async layer's route timeout (`around_kinds.rs`), the call is given up when
        // the timeout answers: its future is dropped then, as past its own deadline.
        let given_up = responder.cancel_handle();
        let sink = RawSink::new(
            responder,
            call.deadline,
            call.head.protocol,
            stats.clone(),
            started,
        );
        if call.expired() {
            return sink.finish(Err(deadline_exceeded()));
        }
        let input = RawStream::new(body, &call.head);
        let deadline = call.deadline;
        let fut = f(call, input, sink);
        let stats = stats.clone();
        crate::OnWorker.spawn(Box::pin(async move {
            // Past the deadline, or on a panic, the future (and the sink in it) is dropped:
            // the sink's drop ends the call with DEADLINE_EXCEEDED or the panic status.
            let run = until(deadline, catch_panic(fut));
            let ran = match &given_up {
                Some(cancel) => until_given_up(cancel, run).await,
                None => Some(run.await),
            };
            match ran {
                Some(Some(Some((outcome, sink)))) => sink.finish(outcome),
                Some(Some(None)) => {
                    stats.count_panic();
                }
                Some(None) | None => {}
            }
        }));
    }
}

/// A unary call whose future waited: run on the worker's runtime, answered through
/// `responder`.
pub(crate) fn unary_later(
    fut: UnaryFuture,
    deadline: Option<Instant>,
    protocol: Protocol,
    stats: Arc<MethodStats>,
    started: Option<u64>,
    responder: Responder,
) {
    crate::OnWorker.spawn(Box::pin(async move {
        let result = match until(deadline, catch_panic(fut)).await {
            Some(Some(result)) => result,
            Some(None) => Err(stats.panicked()),
            None => Err(deadline_exceeded()),
        };
        let code = result.as_ref().map_or_else(|s| s.code, |_| Code::Ok);
        stats.ended(started, code);
        responder.send(web::unary_answer(protocol, result));
    }));
}

/// `fut`'s output, or `None` once `cancel` is given up (the future dropped unfinished).
async fn until_given_up<F: Future>(cancel: &Cancel, fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        if cancel.is_given_up() {
            return Poll::Ready(None);
        }
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        // Registered, then read again: a give-up in between still wakes this task.
        cancel.register(cx.waker());
        if cancel.is_given_up() {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    })
    .await
}

/// `fut`'s output, or `None` once `deadline` passed (the future dropped unfinished).
async fn until<F: Future>(deadline: Option<Instant>, fut: F) -> Option<F::Output> {
    match deadline {
        None => Some(fut.await),
        Some(d) => tokio::time::timeout_at(d.into(), fut).await.ok(),
    }
}
