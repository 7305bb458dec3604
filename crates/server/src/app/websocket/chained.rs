//! A WebSocket route under async layers ([`Router::around`](crate::Router::around),
//! `timeout`): its chain runs on the worker's runtime at the handshake's head, its accept
//! function at the chain's end, and an accepted handshake travels back to the worker with the
//! answer (the 101, over HTTP/2 the 200), which the layers' after-code sees as any answer.
//!
//! Owns the per-request slot that carries the accepted [`Upgrade`] past the layers: the
//! accept function's end fills it, the runner takes it and sends it with the answer
//! ([`Responder::send_upgrade`]), and the driver hands the connection (or stream) over when
//! the answer arrives. An answer that is not the accept function's (a layer's 401, a route
//! timeout's 503, a status a layer changed) goes out as an ordinary answer and drops the
//! handler unopened. Must not block: the chain runs on the worker's thread.
#![forbid(unsafe_code)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

use super::{Upgrade, WsAcceptFn, WsOptions, accepted_fields, check};
use crate::app::around::{Chain, catch_panic, panicked};
use crate::app::dispatch::text_status;
use crate::deferred::{OwnedRequest, Spawn};
use crate::response::Response;
use crate::router::DeferredFn;
use crate::runtime::OnWorker;

/// Where the accept function's end leaves the handshake it accepted, for the runner: put in
/// the request's extensions under a type no layer can name.
#[derive(Default)]
struct Accepted(Mutex<Option<(u16, Upgrade)>>);

impl Accepted {
    fn put(&self, status: u16, up: Upgrade) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((status, up));
    }

    fn take(&self) -> Option<(u16, Upgrade)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// The deferred handler a WebSocket route under async layers becomes: the chain run on the
/// worker's runtime; its answer sent back with the accepted upgrade when it is the accept
/// function's answer still (its status unchanged), as an ordinary answer otherwise.
pub(crate) fn under_layers(chain: Chain) -> Box<DeferredFn> {
    let chain = Arc::new(chain);
    Box::new(move |mut req, res| {
        let chain = chain.clone();
        let slot = Arc::new(Accepted::default());
        req.extensions_mut().insert(slot.clone());
        OnWorker.spawn(Box::pin(async move {
            let resp = catch_panic(chain.run(req))
                .await
                .unwrap_or_else(|| panicked("layer"));
            match slot.take() {
                Some((status, up)) if resp.status == status => res.send_upgrade(resp, up),
                _ => res.send(resp),
            }
        }));
    })
}

/// The end of a WebSocket route's chain: the handshake checked again on the request as the
/// layers leave it, and the route's accept function asked with it (the layers' extensions
/// in it). Accepted, the answer is the 101 (over HTTP/2 the 200) with the handshake's fields
/// (`Sec-WebSocket-Accept`, the chosen subprotocol and extension), and the upgrade waits in
/// the request's slot; refused, the accept function's answer.
pub(crate) fn accept_in_chain(
    accept: &WsAcceptFn,
    options: &WsOptions,
    req: OwnedRequest,
) -> Response {
    let Some(slot) = req.extension::<Arc<Accepted>>().cloned() else {
        tracing::error!("a WebSocket route's chain ran without its runner; answering 500");
        return text_status(500).close();
    };
    let mut hs = match check(&req.head.head, &req.head.bytes, options) {
        Ok(hs) => hs,
        Err(refusal) => return refusal,
    };
    let status = if hs.offer.http2 { 200 } else { 101 };
    let request = req.request();
    let handler = match catch_unwind(AssertUnwindSafe(|| accept(&request, &mut hs))) {
        Ok(Ok(handler)) => handler,
        Ok(Err(resp)) => return resp,
        Err(_) => {
            tracing::error!("WebSocket accept function panicked; answering 500");
            return text_status(500).close();
        }
    };
    let (fields, deflate) = accepted_fields(hs);
    let mut resp = Response::new(status);
    resp.headers
        .extend(fields.into_iter().map(|(n, v)| (n.into(), v.into())));
    slot.put(
        status,
        Upgrade {
            // The driver sets it: the request's number (or stream) is the answer's.
            id: 0,
            handler,
            // The answer's fields as the layers leave them, taken by the driver.
            fields: Vec::new(),
            limits: options.limits,
            deflate,
        },
    );
    resp
}
