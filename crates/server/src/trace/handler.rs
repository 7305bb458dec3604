//! What an application's handler sees of tracing: the request's [`TraceContext`] (its trace,
//! its server span, whether it is sampled, its request id), from which it makes spans of its
//! own ([`TraceContext::span`], children of the server span, or of each other) and the
//! `traceparent` an outgoing call of its own carries. A handler's spans go to the same
//! exporter as the server's, from whatever thread ends them; a request not sampled makes
//! spans that record nothing.
//!
//! Owns the handler-facing API; the wire format is `otlp.rs`'s.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use super::context::{self, Ids};
use super::export::{Batch, Handle};
use super::otlp::{self, Kind, PARENT_LOCAL, Value};

thread_local! {
    /// The span ids of this thread's handler spans.
    static IDS: RefCell<Ids> = RefCell::new(Ids::new());
}

/// A request's trace context, as a handler reads it ([`crate::Request::trace`]).
#[derive(Clone)]
pub struct TraceContext {
    trace_id: [u8; 16],
    /// The span new spans are children of (the request's server span, or a handler span).
    span_id: [u8; 8],
    flags: u8,
    request_id: String,
    /// Where spans go; `None` when the request is not recorded.
    exporter: Option<Handle>,
}

impl std::fmt::Debug for TraceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceContext")
            .field("trace_id", &self.trace_id())
            .field("span_id", &self.span_id())
            .field("sampled", &self.sampled())
            .field("request_id", &self.request_id)
            .finish()
    }
}

impl TraceContext {
    pub(crate) fn new(
        trace: &super::RequestTrace,
        exporter: Option<&Handle>,
    ) -> Option<TraceContext> {
        trace.traced().then(|| TraceContext {
            trace_id: trace.trace_id,
            span_id: trace.span_id,
            flags: trace.flags,
            request_id: trace.request_id.to_text(),
            exporter: exporter.filter(|_| trace.recorded()).cloned(),
        })
    }

    /// The trace id, 32 lowercase hex digits.
    pub fn trace_id(&self) -> String {
        hex(&self.trace_id)
    }

    /// The current span's id (the request's server span, or the handler span this context
    /// is of), 16 lowercase hex digits.
    pub fn span_id(&self) -> String {
        hex(&self.span_id)
    }

    /// Whether the request is sampled: its spans are exported.
    pub fn sampled(&self) -> bool {
        self.flags & context::SAMPLED != 0
    }

    /// The request's id (`X-Request-Id`, the access log's `request_id`).
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// The W3C `traceparent` naming the current span: what an outgoing call made under it
    /// carries (a gRPC call's metadata, an HTTP request's field), so the service it calls
    /// makes its spans children of this one.
    pub fn traceparent(&self) -> String {
        let mut v = Vec::with_capacity(55);
        context::write_traceparent(&mut v, &self.trace_id, &self.span_id, self.flags);
        String::from_utf8(v).unwrap_or_default()
    }

    /// A span of the handler's named `name`, starting now, child of the current span. It is
    /// exported when it ends ([`Span::end`], or its drop).
    pub fn span(&self, name: impl Into<String>) -> Span {
        Span {
            parent: self.clone(),
            span_id: IDS.with(|ids| ids.borrow_mut().span_id()),
            name: name.into(),
            kind: Kind::Internal,
            start: SystemTime::now(),
            attributes: Vec::new(),
            error: false,
            ended: false,
        }
    }
}

/// An attribute's value on a handler's span.
#[derive(Clone, Debug, PartialEq)]
pub enum AttributeValue {
    Str(String),
    Int(i64),
}

impl From<&str> for AttributeValue {
    fn from(v: &str) -> Self {
        AttributeValue::Str(v.to_string())
    }
}

impl From<String> for AttributeValue {
    fn from(v: String) -> Self {
        AttributeValue::Str(v)
    }
}

impl From<i64> for AttributeValue {
    fn from(v: i64) -> Self {
        AttributeValue::Int(v)
    }
}

/// A handler's span, open until [`Span::end`] (or its drop).
pub struct Span {
    parent: TraceContext,
    span_id: [u8; 8],
    name: String,
    kind: Kind,
    start: SystemTime,
    attributes: Vec<(String, AttributeValue)>,
    error: bool,
    ended: bool,
}

impl Span {
    /// Sets an attribute (OpenTelemetry's semantic conventions name most: `db.system.name`,
    /// `db.query.text`, `rpc.method`…).
    pub fn attribute(&mut self, key: impl Into<String>, value: impl Into<AttributeValue>) {
        self.attributes.push((key.into(), value.into()));
    }

    /// Marks it a call to another service (kind CLIENT): its `traceparent` goes with the call.
    pub fn client(mut self) -> Span {
        self.kind = Kind::Client;
        self
    }

    /// Marks it failed (status ERROR).
    pub fn error(&mut self) {
        self.error = true;
    }

    /// Its context: spans made from it are its children, and its `traceparent` names it.
    pub fn context(&self) -> TraceContext {
        TraceContext {
            span_id: self.span_id,
            ..self.parent.clone()
        }
    }

    /// Ends it now and hands it to the exporter (when the request is sampled).
    pub fn end(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        let Some(exporter) = &self.parent.exporter else {
            return;
        };
        let ns = |t: SystemTime| {
            t.duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        };
        let attributes: Vec<(&str, Value<'_>)> = self
            .attributes
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    AttributeValue::Str(s) => Value::Str(s.as_bytes()),
                    AttributeValue::Int(i) => Value::Int(*i),
                };
                (k.as_str(), v)
            })
            .collect();
        let mut bytes = Vec::new();
        otlp::span(
            &mut bytes,
            &otlp::Span {
                trace_id: &self.parent.trace_id,
                span_id: &self.span_id,
                parent: Some(&self.parent.span_id),
                trace_state: None,
                name: &[self.name.as_bytes()],
                kind: self.kind,
                start_ns: ns(self.start),
                end_ns: ns(SystemTime::now()),
                attributes: &attributes,
                error: self.error,
                flags: u32::from(self.parent.flags) | PARENT_LOCAL,
            },
        );
        exporter.send(Batch { bytes, spans: 1 });
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        self.finish();
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut v = Vec::with_capacity(bytes.len() * 2);
    context::hex_into(&mut v, bytes);
    String::from_utf8(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{RequestTrace, Sampler};
    use linerate_http1::RequestHead;

    fn trace(traceparent: &str) -> RequestTrace {
        let req = format!("GET / HTTP/1.1\r\nHost: a\r\ntraceparent: {traceparent}\r\n\r\n");
        let mut head = RequestHead::new();
        head.parse(req.as_bytes(), &Default::default()).unwrap();
        let mut t = RequestTrace::default();
        let sampler = Sampler::parse(None, None).unwrap();
        t.begin(
            &mut Ids::new(),
            &head,
            req.as_bytes(),
            false,
            Some(&sampler),
        );
        t
    }

    #[test]
    fn a_handlers_spans_are_children_and_exported() {
        let (handle, rx) = super::super::export::test_handle();
        let t = trace("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let cx = TraceContext::new(&t, Some(&handle)).unwrap();
        assert_eq!(cx.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(cx.span_id(), hex(&t.span_id));
        assert!(cx.sampled());
        assert_eq!(cx.request_id().len(), 32);
        assert_eq!(
            cx.traceparent(),
            format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01", hex(&t.span_id))
        );
        let mut outer = cx.span("load cart");
        outer.attribute("db.system.name", "postgresql");
        let inner = outer.context().span("SELECT carts").client();
        // The inner span's context names it; its parent is the outer span.
        assert!(inner.context().traceparent().contains(&hex(&inner.span_id)));
        let (outer_id, inner_id) = (outer.span_id, inner.span_id);
        inner.end();
        drop(outer);
        // Every handle gone: the channel ends once what was sent is through.
        drop((cx, handle));
        let got: Vec<Batch> = rx.iter().collect();
        assert_eq!(got.len(), 2, "each span once");
        let (first, second) = (&got[0], &got[1]);
        assert_eq!((first.spans, second.spans), (1, 1));
        let has = |b: &Batch, needle: &[u8]| b.bytes.windows(needle.len()).any(|w| w == needle);
        assert!(has(first, b"SELECT carts") && has(first, &inner_id) && has(first, &outer_id));
        assert!(has(second, b"load cart") && has(second, &t.span_id) && has(second, b"postgresql"));
    }

    /// The library's gRPC client carries the context it is given.
    #[cfg(feature = "grpc")]
    #[test]
    fn a_grpc_call_carries_the_traceparent() {
        let t = trace("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let cx = TraceContext::new(&t, None).unwrap();
        let span = cx.span("call inventory").client();
        let mut req = crate::grpc::Request::new(());
        req.set_trace(&span.context());
        assert_eq!(
            req.metadata().get("traceparent"),
            Some(
                format!(
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01",
                    hex(&span.span_id)
                )
                .as_str()
            )
        );
    }

    #[test]
    fn a_request_sampled_out_records_nothing() {
        let (handle, rx) = super::super::export::test_handle();
        let t = trace("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
        let cx = TraceContext::new(&t, Some(&handle)).unwrap();
        assert!(!cx.sampled());
        assert!(cx.traceparent().ends_with("-00"));
        cx.span("work").end();
        // Tracing off: no context at all.
        assert!(TraceContext::new(&RequestTrace::default(), Some(&handle)).is_none());
        drop((cx, handle));
        assert_eq!(rx.iter().count(), 0);
    }
}
