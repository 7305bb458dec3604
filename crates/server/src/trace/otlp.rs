//! OTLP's trace messages (opentelemetry-proto's `trace/v1` and `collector/trace/v1`) written
//! as protobuf: a span straight from a request's facts into the worker's batch, and the
//! export request around batches. Only the fields this server fills are written.
//!
//! Hand-written rather than built from prost's generated structs: a span here is written
//! from borrowed bytes with no owned message in between (no `String` per attribute key and
//! value); the test below decodes what this writes with prost, and scripts/otel.sh sends it to the
//! OpenTelemetry Collector.
//! Owns the wire format; pure.
#![forbid(unsafe_code)]

/// Protobuf wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// `Span.SpanKind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Internal = 1,
    Server = 2,
    Client = 3,
}

/// An attribute's value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value<'a> {
    Str(&'a [u8]),
    Int(i64),
}

/// One span's fields.
pub(crate) struct Span<'a> {
    pub trace_id: &'a [u8; 16],
    pub span_id: &'a [u8; 8],
    pub parent: Option<&'a [u8; 8]>,
    pub trace_state: Option<&'a [u8]>,
    /// The name's parts, written one after another (`GET`, ` `, `/api`).
    pub name: &'a [&'a [u8]],
    pub kind: Kind,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: &'a [(&'a str, Value<'a>)],
    /// `Status.code` ERROR (else UNSET).
    pub error: bool,
    /// `Span.flags`: the W3C trace flags, and bits 8–9 saying whether the parent is remote.
    pub flags: u32,
}

/// `Span.flags`' bits 8 and 9: whether the parent is known to be remote, and is.
pub(crate) const PARENT_REMOTE: u32 = 0x300;
/// Bit 8 alone: known, and local.
pub(crate) const PARENT_LOCAL: u32 = 0x100;

/// Where the writer puts bytes: a `Vec` (the export's envelope, cold), or a [`Cursor`] over
/// room made once for a whole span (hot: no capacity test per byte).
pub(crate) trait Out {
    fn put(&mut self, b: u8);
    fn put_all(&mut self, b: &[u8]);
}

impl Out for Vec<u8> {
    #[inline(always)]
    fn put(&mut self, b: u8) {
        self.push(b);
    }
    #[inline(always)]
    fn put_all(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
}

/// A span's room, written from the front: made at its exact length (`span_len`), so a write
/// past it is a bug, which the slice's bounds catch.
pub(crate) struct Cursor<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl Out for Cursor<'_> {
    #[inline(always)]
    fn put(&mut self, b: u8) {
        self.buf[self.pos] = b;
        self.pos += 1;
    }
    #[inline(always)]
    fn put_all(&mut self, b: &[u8]) {
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }
}

#[inline(always)]
fn varint(out: &mut impl Out, mut v: u64) {
    // Most lengths and every tag but one are a byte.
    if v < 0x80 {
        out.put(v as u8);
        return;
    }
    while v >= 0x80 {
        out.put((v as u8) | 0x80);
        v >>= 7;
    }
    out.put(v as u8);
}

#[inline(always)]
fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[inline(always)]
fn tag(out: &mut impl Out, field: u32, wire: u8) {
    varint(out, u64::from(field << 3 | u32::from(wire)));
}

#[inline(always)]
fn bytes_field(out: &mut impl Out, field: u32, b: &[u8]) {
    tag(out, field, LEN);
    varint(out, b.len() as u64);
    out.put_all(b);
}

/// A length-delimited field of `len` bytes' header: its tag and length (the body follows).
#[inline(always)]
pub(crate) fn open(out: &mut impl Out, field: u32, len: usize) {
    tag(out, field, LEN);
    varint(out, len as u64);
}

/// The bytes a length-delimited field of a `len`-byte body takes with its tag (tags below 16).
#[inline(always)]
pub(crate) fn framed_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// `AnyValue`'s body length.
#[inline(always)]
fn any_len(v: &Value<'_>) -> usize {
    match v {
        Value::Str(s) => framed_len(s.len()),
        Value::Int(i) => 1 + varint_len(*i as u64),
    }
}

/// `KeyValue`'s body length.
#[inline(always)]
fn kv_len(key: &str, v: &Value<'_>) -> usize {
    framed_len(key.len()) + framed_len(any_len(v))
}

/// Writes a `KeyValue` as field `field` of its message.
#[inline(always)]
pub(crate) fn key_value(out: &mut impl Out, field: u32, key: &str, v: &Value<'_>) {
    open(out, field, kv_len(key, v));
    bytes_field(out, 1, key.as_bytes());
    open(out, 2, any_len(v));
    match v {
        Value::Str(s) => bytes_field(out, 1, s),
        Value::Int(i) => {
            tag(out, 3, VARINT);
            varint(out, *i as u64);
        }
    }
}

/// `span`'s body length: what [`span`] writes after its frame.
fn span_len(s: &Span<'_>) -> usize {
    let name_len: usize = s.name.iter().map(|p| p.len()).sum();
    framed_len(16)
        + framed_len(8)
        + s.trace_state.map_or(0, |t| framed_len(t.len()))
        + s.parent.map_or(0, |_| framed_len(8))
        + framed_len(name_len)
        + 2 // kind
        + 2 * 9 // the times
        + s.attributes
            .iter()
            .map(|(k, v)| framed_len(kv_len(k, v)))
            .sum::<usize>()
        + if s.error { framed_len(2) } else { 0 }
        + 6 // flags: field 16 takes a two-byte tag
}

/// Writes `span` as a `ScopeSpans.spans` entry (field 2, framed) onto `out`: its length
/// computed first, so that its room is made once and it is written in place.
pub(crate) fn span(out: &mut Vec<u8>, s: &Span<'_>) {
    let len = span_len(s);
    let start = out.len();
    out.resize(start + framed_len(len), 0);
    let b = &mut Cursor {
        buf: &mut out[start..],
        pos: 0,
    };
    open(b, 2, len);
    bytes_field(b, 1, s.trace_id);
    bytes_field(b, 2, s.span_id);
    if let Some(ts) = s.trace_state {
        bytes_field(b, 3, ts);
    }
    if let Some(p) = s.parent {
        bytes_field(b, 4, p);
    }
    let name_len: usize = s.name.iter().map(|p| p.len()).sum();
    open(b, 5, name_len);
    for p in s.name {
        b.put_all(p);
    }
    tag(b, 6, VARINT);
    varint(b, s.kind as u64);
    tag(b, 7, FIXED64);
    b.put_all(&s.start_ns.to_le_bytes());
    tag(b, 8, FIXED64);
    b.put_all(&s.end_ns.to_le_bytes());
    for (k, v) in s.attributes {
        key_value(b, 9, k, v);
    }
    if s.error {
        // Status { code = STATUS_CODE_ERROR (2) }.
        open(b, 15, 2);
        tag(b, 3, VARINT);
        varint(b, 2);
    }
    tag(b, 16, FIXED32);
    b.put_all(&s.flags.to_le_bytes());
    debug_assert_eq!(b.pos, b.buf.len(), "span_len agrees with what span writes");
}

/// The `Resource` message's body: its attributes.
pub(crate) fn resource(attributes: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in attributes {
        key_value(&mut out, 1, k, &Value::Str(v.as_bytes()));
    }
    out
}

/// The `InstrumentationScope` message's body.
pub(crate) fn scope(name: &str, version: &str) -> Vec<u8> {
    let mut out = Vec::new();
    bytes_field(&mut out, 1, name.as_bytes());
    bytes_field(&mut out, 2, version.as_bytes());
    out
}

/// The start of an `ExportTraceServiceRequest` of one resource and scope around `spans_len`
/// bytes of spans (a run of [`span`]'s entries, which follow it on the wire: the exporter
/// writes them from its queue, uncopied), into `out`.
pub(crate) fn export_prefix(out: &mut Vec<u8>, resource: &[u8], scope: &[u8], spans_len: usize) {
    let scope_spans = framed_len(scope.len()) + spans_len;
    let resource_spans = framed_len(resource.len()) + framed_len(scope_spans);
    out.clear();
    open(out, 1, resource_spans);
    open(out, 1, resource.len());
    out.extend_from_slice(resource);
    open(out, 2, scope_spans);
    open(out, 1, scope.len());
    out.extend_from_slice(scope);
}

/// A whole `ExportTraceServiceRequest` around `spans` (tests).
#[cfg(test)]
pub(crate) fn export_request(out: &mut Vec<u8>, resource: &[u8], scope: &[u8], spans: &[u8]) {
    export_prefix(out, resource, scope, spans.len());
    out.extend_from_slice(spans);
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    // opentelemetry-proto's messages (trace/v1/trace.proto, common/v1/common.proto,
    // collector/trace/v1/trace_service.proto), the fields read here, decoded by prost.
    #[derive(Clone, PartialEq, Message)]
    struct ExportTraceServiceRequest {
        #[prost(message, repeated, tag = "1")]
        resource_spans: Vec<ResourceSpans>,
    }
    #[derive(Clone, PartialEq, Message)]
    struct ResourceSpans {
        #[prost(message, optional, tag = "1")]
        resource: Option<Resource>,
        #[prost(message, repeated, tag = "2")]
        scope_spans: Vec<ScopeSpans>,
    }
    #[derive(Clone, PartialEq, Message)]
    struct Resource {
        #[prost(message, repeated, tag = "1")]
        attributes: Vec<KeyValue>,
    }
    #[derive(Clone, PartialEq, Message)]
    struct ScopeSpans {
        #[prost(message, optional, tag = "1")]
        scope: Option<Scope>,
        #[prost(message, repeated, tag = "2")]
        spans: Vec<PSpan>,
    }
    #[derive(Clone, PartialEq, Message)]
    struct Scope {
        #[prost(string, tag = "1")]
        name: String,
        #[prost(string, tag = "2")]
        version: String,
    }
    #[derive(Clone, PartialEq, Message)]
    struct PSpan {
        #[prost(bytes = "vec", tag = "1")]
        trace_id: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        span_id: Vec<u8>,
        #[prost(string, tag = "3")]
        trace_state: String,
        #[prost(bytes = "vec", tag = "4")]
        parent_span_id: Vec<u8>,
        #[prost(string, tag = "5")]
        name: String,
        #[prost(int32, tag = "6")]
        kind: i32,
        #[prost(fixed64, tag = "7")]
        start_time_unix_nano: u64,
        #[prost(fixed64, tag = "8")]
        end_time_unix_nano: u64,
        #[prost(message, repeated, tag = "9")]
        attributes: Vec<KeyValue>,
        #[prost(message, optional, tag = "15")]
        status: Option<Status>,
        #[prost(fixed32, tag = "16")]
        flags: u32,
    }
    #[derive(Clone, PartialEq, Message)]
    struct Status {
        #[prost(string, tag = "2")]
        message: String,
        #[prost(int32, tag = "3")]
        code: i32,
    }
    #[derive(Clone, PartialEq, Message)]
    struct KeyValue {
        #[prost(string, tag = "1")]
        key: String,
        #[prost(message, optional, tag = "2")]
        value: Option<AnyValue>,
    }
    #[derive(Clone, PartialEq, Message)]
    struct AnyValue {
        #[prost(string, optional, tag = "1")]
        string_value: Option<String>,
        #[prost(int64, optional, tag = "3")]
        int_value: Option<i64>,
    }

    #[test]
    fn varint_lengths() {
        for v in [0u64, 1, 127, 128, 16_383, 16_384, u64::MAX] {
            let mut b = Vec::new();
            varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v), "{v}");
        }
    }

    /// What this writes, read by prost against opentelemetry-proto's field numbers (the
    /// collector stage, scripts/otel.sh, reads it with the Collector's own).
    #[test]
    fn decoded_by_prost() {
        let mut spans = Vec::new();
        let long = vec![b'x'; 300];
        span(
            &mut spans,
            &Span {
                trace_id: &[1; 16],
                span_id: &[2; 8],
                parent: Some(&[3; 8]),
                trace_state: Some(b"rojo=1"),
                name: &[b"GET", b" ", b"/api"],
                kind: Kind::Server,
                start_ns: 1_700_000_000_000_000_000,
                end_ns: 1_700_000_000_000_123_456,
                attributes: &[
                    ("http.request.method", Value::Str(b"GET")),
                    ("http.response.status_code", Value::Int(503)),
                    ("url.path", Value::Str(&long)),
                ],
                error: true,
                flags: 1 | PARENT_REMOTE,
            },
        );
        span(
            &mut spans,
            &Span {
                trace_id: &[1; 16],
                span_id: &[4; 8],
                parent: Some(&[2; 8]),
                trace_state: None,
                name: &[b"GET"],
                kind: Kind::Client,
                start_ns: 5,
                end_ns: 6,
                attributes: &[],
                error: false,
                flags: 1 | PARENT_LOCAL,
            },
        );
        let mut req = Vec::new();
        export_request(
            &mut req,
            &resource(&[("service.name", "edge")]),
            &scope("linerate", "0.1.0"),
            &spans,
        );
        let m = ExportTraceServiceRequest::decode(req.as_slice()).unwrap();
        let rs = &m.resource_spans[0];
        let attr = &rs.resource.as_ref().unwrap().attributes[0];
        assert_eq!(attr.key, "service.name");
        let ss = &rs.scope_spans[0];
        assert_eq!(ss.scope.as_ref().unwrap().name, "linerate");
        assert_eq!(ss.spans.len(), 2);
        let s = &ss.spans[0];
        assert_eq!(s.trace_id, vec![1; 16]);
        assert_eq!(s.span_id, vec![2; 8]);
        assert_eq!(s.parent_span_id, vec![3; 8]);
        assert_eq!(s.trace_state, "rojo=1");
        assert_eq!(s.name, "GET /api");
        assert_eq!(s.kind, 2);
        assert_eq!(s.end_time_unix_nano - s.start_time_unix_nano, 123_456);
        assert_eq!(s.status.as_ref().unwrap().code, 2);
        assert_eq!(s.flags, 0x301);
        let v = |i: usize| s.attributes[i].value.clone().unwrap();
        assert_eq!(s.attributes[0].key, "http.request.method");
        assert_eq!(v(0).string_value.as_deref(), Some("GET"));
        assert_eq!(v(1).int_value, Some(503));
        assert_eq!(v(2).string_value, Some("x".repeat(300)));
        let c = &ss.spans[1];
        assert_eq!(
            (c.kind, c.name.as_str(), c.status.is_none()),
            (3, "GET", true)
        );
        assert_eq!(c.parent_span_id, vec![2; 8]);
    }
}
