//! Request ids and OpenTelemetry tracing: W3C Trace Context in (`context.rs`) and out (the
//! proxy's upstream request), the sampling decision (`sampler.rs`), a server span per
//! request and a client span per upstream exchange written as OTLP protobuf on the worker
//! (`spans.rs`, `otlp.rs`), and one exporter thread posting batches to the collector
//! (`export.rs`), configured by OpenTelemetry's variables and `[tracing]` (`config.rs`).
//!
//! A request's ids are drawn in the accept phase (`RequestTrace::begin`) when the server
//! needs them (tracing on, an access log, or a proxy mount), carried with the request to its
//! answer, and read by the log phase's record of it: the span is written from the same
//! facts as the access-log line, at the same moment.
#![forbid(unsafe_code)]

use std::sync::Arc;

pub mod config;
pub(crate) mod context;
pub(crate) mod export;
pub mod handler;
pub(crate) mod otlp;
pub mod sampler;
pub(crate) mod spans;

pub use config::{Endpoint, SettingError, TracingConfig, TracingSettings};
pub use export::TraceStats;
pub use handler::{AttributeValue, Span, TraceContext};
pub use sampler::Sampler;

use context::{Ids, Parent, RequestId};
use linerate_http1::RequestHead;

/// The field a request id goes upstream in by default (Envoy's, Heroku's, and what nginx's
/// `proxy_set_header X-Request-Id $request_id` writes).
pub const REQUEST_ID_FIELD: &str = "X-Request-Id";

/// A request's ids and trace context, from its accept phase to its log record.
#[derive(Clone, Debug, Default)]
pub(crate) struct RequestTrace {
    /// Its id (`$request_id`); none when ids are off for the server.
    pub request_id: RequestId,
    /// Its trace: the client's, or new. Zero when tracing is off.
    pub trace_id: [u8; 16],
    /// Its server span.
    pub span_id: [u8; 8],
    /// The client's span, when it sent a valid `traceparent`.
    pub parent: Option<[u8; 8]>,
    /// The trace flags it carries on (the sampled bit: the decision made here).
    pub flags: u8,
    /// The client's `tracestate`, passed on when valid.
    pub tracestate: Option<Box<[u8]>>,
    /// The span of its upstream exchange, once it goes upstream.
    pub upstream_span: Option<[u8; 8]>,
    /// What took it (`http.route`): the route's pattern, or the proxy or files mount's
    /// path prefix.
    pub route: Option<Arc<str>>,
}

impl RequestTrace {
    /// Sets these ids to the request `head`'s: a request id (a trusted client's, when
    /// `trusted` and it sent a usable one) and, with `sampler` (tracing on), its trace
    /// context and sampling decision. In place: a request's ids are drawn on the hot path.
    #[inline]
    pub(crate) fn begin(
        &mut self,
        ids: &mut Ids,
        head: &RequestHead,
        buf: &[u8],
        trusted: bool,
        sampler: Option<&Sampler>,
    ) {
        let theirs = if trusted {
            head.header(buf, "x-request-id")
        } else {
            None
        };
        self.request_id.set(ids.hex32(), theirs);
        let Some(sampler) = sampler else {
            // Tracing off: the trace fields are never set.
            return;
        };
        self.begin_trace(ids, head, buf, sampler);
    }

    /// The trace context part of [`RequestTrace::begin`].
    fn begin_trace(&mut self, ids: &mut Ids, head: &RequestHead, buf: &[u8], sampler: &Sampler) {
        let parent = head
            .header(buf, "traceparent")
            .and_then(context::parse_traceparent);
        let (trace_id, parent_span, parent_flags) = match parent {
            Some(Parent {
                trace_id,
                span_id,
                flags,
            }) => (trace_id, Some(span_id), Some(flags)),
            None => (ids.id128(), None, None),
        };
        let sampled = sampler.sampled(&trace_id, parent_flags);
        self.trace_id = trace_id;
        self.span_id = ids.span_id();
        self.parent = parent_span;
        self.flags = (parent_flags.unwrap_or(0) & !context::SAMPLED)
            | if sampled { context::SAMPLED } else { 0 };
        self.tracestate = parent_span
            .and_then(|_| head.header(buf, "tracestate"))
            .filter(|v| context::tracestate_ok(v))
            .map(Box::from);
        self.upstream_span = None;
        self.route = None;
    }

    /// Tracing is on for the server (a trace id was set).
    pub(crate) fn traced(&self) -> bool {
        self.trace_id != [0; 16]
    }

    /// Its spans are recorded and exported.
    pub(crate) fn recorded(&self) -> bool {
        self.traced() && self.flags & context::SAMPLED != 0
    }

    /// The `traceparent` its upstream request carries: this trace, the upstream exchange's
    /// span (drawn now), the flags.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn upstream_traceparent(&mut self, ids: &mut Ids) -> Option<Vec<u8>> {
        if !self.traced() {
            return None;
        }
        let span = *self.upstream_span.get_or_insert_with(|| ids.span_id());
        let mut v = Vec::with_capacity(55);
        context::write_traceparent(&mut v, &self.trace_id, &span, self.flags);
        Some(v)
    }

    /// A `traceparent` naming the request's own (server) span, for a subrequest that has no
    /// span of its own (forward auth's check).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn server_traceparent(&self) -> Option<Vec<u8>> {
        if !self.traced() {
            return None;
        }
        let mut v = Vec::with_capacity(55);
        context::write_traceparent(&mut v, &self.trace_id, &self.span_id, self.flags);
        Some(v)
    }

    /// The request id's text (the JSON log's `request_id`), when one was drawn.
    pub(crate) fn request_id_text(&self) -> Option<String> {
        (!self.request_id.is_none()).then(|| self.request_id.to_text())
    }

    /// The trace id as 32 hex digits (the JSON log's `trace_id`), when traced.
    pub(crate) fn trace_id_hex(&self) -> Option<String> {
        self.traced().then(|| {
            let mut v = Vec::with_capacity(32);
            context::hex_into(&mut v, &self.trace_id);
            String::from_utf8(v).unwrap_or_default()
        })
    }
}

/// The server's side of tracing: the exporter's handle (each worker's `Spans` holds a
/// clone) and its thread.
pub(crate) struct Tracing {
    pub handle: export::Handle,
    pub schedule_delay_ms: u64,
    thread: std::thread::JoinHandle<()>,
}

impl Tracing {
    /// Starts the exporter for `config`.
    pub(crate) fn start(
        config: &TracingConfig,
        stats: Arc<TraceStats>,
    ) -> std::io::Result<Tracing> {
        let (handle, thread) = export::start(config, stats)?;
        Ok(Tracing {
            handle,
            schedule_delay_ms: config.schedule_delay.as_millis() as u64,
            thread,
        })
    }

    /// Waits for the exporter to send what it holds, once the workers (and their handles)
    /// are gone.
    pub(crate) fn finish(self) {
        self.handle.end();
        drop(self.handle);
        let _ = self.thread.join();
    }
}
