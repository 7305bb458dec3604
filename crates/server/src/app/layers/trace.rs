//! [`Trace`]: a `tracing` span per request (target `linerate::request`), with the access
//! log's fields: method, target, version, client and the request id when the request comes
//! in; status, body bytes and duration (µs) recorded when its answer is made, with one `info`
//! event in the span. Handlers may enter the span ([`TraceSpan`]) so their own events carry
//! its fields. The request id is the one [`RequestId`](super::RequestId) sends back in
//! `X-Request-Id`, whichever of the two layers is outermost (`request_id.rs`).
#![forbid(unsafe_code)]

use std::time::Instant;

use tracing::field::Empty;

use crate::layer::{Extensions, Layer};
use crate::request::Request;
use crate::response::Response;

/// The tracing layer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Trace;

/// The request's span and when it began, for handlers: `req.extension::<TraceSpan>()`.
#[derive(Debug)]
pub struct TraceSpan {
    /// The request's span.
    pub span: tracing::Span,
    started: Instant,
}

impl Layer for Trace {
    fn before(&self, req: &Request<'_>, ext: &mut Extensions) -> Option<Response> {
        let request_id = super::request_id::request_id(req, ext);
        let span = tracing::info_span!(
            target: "linerate::request",
            "request",
            method = req.method_str(),
            target = req.target(),
            version = req.version().as_str(),
            client = req.peer().map(|p| p.ip().to_string()),
            referer = req.header("referer").map(String::from_utf8_lossy).as_deref(),
            user_agent = req.header("user-agent").map(String::from_utf8_lossy).as_deref(),
            request_id,
            status = Empty,
            bytes = Empty,
            duration_us = Empty,
        );
        ext.insert(TraceSpan {
            span,
            started: Instant::now(),
        });
        None
    }

    fn after(&self, ext: &Extensions, resp: &mut Response) {
        let Some(t) = ext.get::<TraceSpan>() else {
            return;
        };
        let us = t.started.elapsed().as_micros() as u64;
        t.span.record("status", resp.status_code());
        t.span.record("bytes", resp.body_ref().len());
        t.span.record("duration_us", us);
        t.span.in_scope(|| {
            tracing::info!(
                target: "linerate::request",
                status = resp.status_code(),
                duration_us = us,
                "answered"
            )
        });
    }
}
