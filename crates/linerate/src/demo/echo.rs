//! `POST /echo`: over TLS, HttpArena's `8gbit` echo (the body back, byte for byte, as
//! `application/octet-stream`, streamed); in cleartext, the request's header fields one per
//! line, which Http11Probe's conformance suite reads.
//!
//! Owns the echo's copying only. The body is never held whole: each piece the connection
//! decodes goes back out as it comes ([`IncomingBody`] to [`BodyWriter`]), both ends with their
//! own backpressure (64 KiB each way), so a slow reader slows the uploader, not memory.
//!
//! [`BodyWriter`]: linerate_server::streaming::BodyWriter
#![forbid(unsafe_code)]

use linerate_server::{IncomingBody, OnWorker, OwnedRequest, Responder, Response, Spawn};

/// The handler (`Router::deferred_incoming`: called at the head, before the body).
pub(crate) fn echo(req: OwnedRequest, mut body: IncomingBody, res: Responder) {
    if !req.is_tls() {
        // Http11Probe's `/echo` (cleartext): the fields, once the body is read (and dropped),
        // so that a malformed body is still the connection's own 400, as on a buffered route.
        let fields = super::echo_headers(&req.request());
        drop(req);
        OnWorker.spawn(Box::pin(async move {
            loop {
                match body.chunk().await {
                    Some(Ok(_)) => {}
                    None => return res.send(fields),
                    // Cut off: the connection answered it (400, 413) or the client left.
                    Some(Err(_)) => return,
                }
            }
        }));
        return;
    }
    let answer = Response::new(200).content_type("application/octet-stream");
    // A declared length is answered with the same Content-Length (HttpArena's framing both
    // ways); a chunked body is answered chunked.
    let (answer, out) = match body.remaining() {
        Some(len) => answer.stream_sized(len),
        None => answer.stream(),
    };
    drop(req);
    res.send(answer);
    OnWorker.spawn(Box::pin(async move {
        loop {
            match body.chunk().await {
                Some(Ok(piece)) => {
                    if out.send(&piece).await.is_err() {
                        return; // The client left: nothing to answer.
                    }
                }
                // Cut off (the client left, a malformed or oversized body): so is the answer,
                // never a short body that looks whole.
                Some(Err(_)) => return out.abort(),
                None => return out.end(),
            }
        }
    }));
}
