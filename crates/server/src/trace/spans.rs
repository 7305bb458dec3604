//! A worker's spans: each recorded request's server span, and its upstream exchange's
//! client span, written as OTLP protobuf into the worker's batch from the facts of its
//! access-log record (OpenTelemetry's HTTP semantic conventions), and handed to the exporter
//! once per schedule delay or when the batch is full — never waiting for it.
//!
//! Owns the attribute mapping and the batch.
#![forbid(unsafe_code)]

use std::io::Write as _;
use std::net::IpAddr;

use linerate_http1::Version;

use super::RequestTrace;
use super::export::{Batch, Handle};
use super::otlp::{self, Kind, PARENT_LOCAL, PARENT_REMOTE, Value};
use crate::access_log::AccessEntry;
use crate::config::UpstreamAddr;

/// A batch is handed over once it holds this many bytes, whatever the delay.
const BATCH_BYTES: usize = 64 * 1024;
/// Most attributes a span carries here.
const MAX_ATTRIBUTES: usize = 14;

/// One worker's span batch.
pub(crate) struct Spans {
    handle: Handle,
    batch: Vec<u8>,
    count: usize,
    /// When the batch goes at the latest (the worker's ms clock; 0: empty).
    due_ms: u64,
    delay_ms: u64,
}

impl Spans {
    pub(crate) fn new(tracing: &super::Tracing) -> Spans {
        Spans {
            handle: tracing.handle.clone(),
            batch: Vec::new(),
            count: 0,
            due_ms: 0,
            delay_ms: tracing.schedule_delay_ms,
        }
    }

    /// The exporter's handle (a handler's spans go to it).
    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Writes the spans of the request `e` (recorded, with trace `t`) into the batch.
    pub(crate) fn record(&mut self, e: &AccessEntry<'_>, t: &RequestTrace) {
        let end_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let start_ns = end_ns.saturating_sub(e.request_time_us.unwrap_or(0) * 1000);
        let mut peer = IpText::default();
        let mut attrs: [(&str, Value<'_>); MAX_ATTRIBUTES] = [("", Value::Int(0)); MAX_ATTRIBUTES];
        let mut n = 0;
        macro_rules! put {
            ($k:expr, $v:expr) => {
                if n < MAX_ATTRIBUTES {
                    attrs[n] = ($k, $v);
                    n += 1;
                }
            };
        }
        let method = e.method.as_bytes();
        // The path before any query (memchr: `str::split_once`'s char searcher cost ~80
        // instructions a request, callgrind).
        let target = e.target.as_bytes();
        let path = memchr::memchr(b'?', target).map_or(target, |i| &target[..i]);
        put!("http.request.method", Value::Str(method));
        put!("url.path", Value::Str(path));
        // QUIC is always TLS (its connections are not marked as TLS ones are).
        let tls = e.tls || e.version == Version::Http3;
        put!(
            "url.scheme",
            Value::Str(if tls { b"https" } else { b"http" })
        );
        put!("http.response.status_code", Value::Int(i64::from(e.status)));
        put!(
            "network.protocol.version",
            Value::Str(protocol_version(e.version))
        );
        if let Some(h) = e.host {
            put!("server.address", Value::Str(h));
        }
        if let Some(p) = e.peer {
            put!("client.address", Value::Str(peer.of(p.ip())));
        }
        if let Some(ua) = e.user_agent {
            put!("user_agent.original", Value::Str(ua));
        }
        if let Some(r) = &t.route {
            put!("http.route", Value::Str(r.as_bytes()));
        }
        put!("http.response.body.size", Value::Int(e.bytes as i64));
        put!("linerate.request_id", Value::Str(t.request_id.text()));
        if let Some(c) = e.cache_status {
            put!("linerate.cache_status", Value::Str(c.as_str().as_bytes()));
        }
        if let Some(g) = e.grpc_status {
            put!("rpc.grpc.status_code", Value::Int(g.parse().unwrap_or(2)));
        }
        let route = t.route.as_deref().map(str::as_bytes);
        let name: &[&[u8]] = match route {
            Some(r) => &[method, b" ", r],
            None => &[method],
        };
        otlp::span(
            &mut self.batch,
            &otlp::Span {
                trace_id: &t.trace_id,
                span_id: &t.span_id,
                parent: t.parent.as_ref(),
                trace_state: t.tracestate.as_deref(),
                name,
                kind: Kind::Server,
                start_ns,
                end_ns,
                attributes: &attrs[..n],
                // A server span's error is the server's (5xx), not the client's (4xx).
                error: e.status >= 500,
                flags: u32::from(t.flags) | if t.parent.is_some() { PARENT_REMOTE } else { 0 },
            },
        );
        self.count += 1;
        if let (Some(u), Some(span)) = (e.upstream, t.upstream_span) {
            self.upstream_span(e, t, &u, &span, end_ns);
        }
    }

    /// The client span of `e`'s upstream exchange `u`.
    fn upstream_span(
        &mut self,
        e: &AccessEntry<'_>,
        t: &RequestTrace,
        u: &crate::access_log::UpstreamEntry<'_>,
        span: &[u8; 8],
        end_ns: u64,
    ) {
        let mut ip = IpText::default();
        let mut attrs: Vec<(&str, Value<'_>)> = Vec::with_capacity(5);
        attrs.push(("http.request.method", Value::Str(e.method.as_bytes())));
        let unix;
        match u.addr {
            UpstreamAddr::Tcp(a) => {
                attrs.push(("server.address", Value::Str(ip.of(a.ip()))));
                attrs.push(("server.port", Value::Int(i64::from(a.port()))));
            }
            UpstreamAddr::Unix(p) => {
                unix = p.to_string_lossy();
                attrs.push(("network.transport", Value::Str(b"unix")));
                attrs.push(("server.address", Value::Str(unix.as_bytes())));
            }
        }
        attrs.push(("http.response.status_code", Value::Int(i64::from(u.status))));
        otlp::span(
            &mut self.batch,
            &otlp::Span {
                trace_id: &t.trace_id,
                span_id: span,
                parent: Some(&t.span_id),
                trace_state: t.tracestate.as_deref(),
                name: &[e.method.as_bytes()],
                kind: Kind::Client,
                start_ns: end_ns.saturating_sub(u.time_us * 1000),
                end_ns,
                attributes: &attrs,
                // A client span's error is any 4xx or 5xx, or no answer.
                error: u.status >= 400,
                flags: u32::from(t.flags) | PARENT_LOCAL,
            },
        );
        self.count += 1;
    }

    /// Hands the batch over when it is due at `now_ms` (or full).
    pub(crate) fn hand_off(&mut self, now_ms: u64) {
        if self.count == 0 {
            return;
        }
        if self.due_ms == 0 {
            self.due_ms = now_ms + self.delay_ms;
        }
        if now_ms >= self.due_ms || self.batch.len() >= BATCH_BYTES {
            self.flush();
        }
    }

    /// When the batch is due to go (the worker's ms clock), when it holds spans.
    pub(crate) fn due(&self) -> Option<u64> {
        (self.count > 0 && self.due_ms > 0).then_some(self.due_ms)
    }

    /// Hands the batch over now (the worker is stopping).
    pub(crate) fn flush(&mut self) {
        if self.count == 0 {
            return;
        }
        let bytes = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH_BYTES / 4));
        self.handle.send(Batch {
            bytes,
            spans: std::mem::take(&mut self.count),
        });
        self.due_ms = 0;
    }
}

impl Drop for Spans {
    /// A worker that stops hands over what it recorded last.
    fn drop(&mut self) {
        self.flush();
    }
}

/// `network.protocol.version`'s value.
fn protocol_version(v: Version) -> &'static [u8] {
    match v {
        Version::Http10 => b"1.0",
        Version::Http11 => b"1.1",
        Version::Http2 => b"2",
        Version::Http3 => b"3",
    }
}

/// An address's text, written on the stack.
struct IpText {
    buf: [u8; 48],
}

impl Default for IpText {
    fn default() -> Self {
        IpText { buf: [0; 48] }
    }
}

impl IpText {
    /// `ip`'s text (an IPv4-mapped IPv6 address as IPv4). IPv4 by hand: `Display` cost
    /// ~70 instructions an address (callgrind).
    fn of(&mut self, ip: IpAddr) -> &[u8] {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        match ip {
            IpAddr::V4(v4) => {
                let mut n = 0;
                for (i, o) in v4.octets().into_iter().enumerate() {
                    if i > 0 {
                        self.buf[n] = b'.';
                        n += 1;
                    }
                    if o >= 100 {
                        self.buf[n] = b'0' + o / 100;
                        n += 1;
                    }
                    if o >= 10 {
                        self.buf[n] = b'0' + o / 10 % 10;
                        n += 1;
                    }
                    self.buf[n] = b'0' + o % 10;
                    n += 1;
                }
                &self.buf[..n]
            }
            IpAddr::V6(v6) => {
                let mut w = &mut self.buf[..];
                let _ = write!(w, "{v6}");
                let left = w.len();
                &self.buf[..48 - left]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An HTTP/3 request's span says https; a client's IPv4-mapped address is written as
    /// IPv4; the query is not recorded; the batch goes when due, not before.
    #[test]
    fn an_http3_requests_span() {
        let (handle, rx) = super::super::export::test_handle();
        let mut spans = Spans {
            handle,
            batch: Vec::new(),
            count: 0,
            due_ms: 0,
            delay_ms: 100,
        };
        let t = RequestTrace {
            trace_id: [1; 16],
            span_id: [2; 8],
            flags: 1,
            ..RequestTrace::default()
        };
        let e = AccessEntry {
            peer: Some("[::ffff:192.0.2.7]:443".parse().unwrap()),
            method: "GET",
            target: "/a?b=c",
            version: Version::Http3,
            status: 200,
            bytes: 5,
            referer: None,
            user_agent: None,
            request_time_us: Some(10),
            tls: false,
            host: Some(b"shop.example"),
            server_name: "",
            fields: crate::access_log::Fields::Kept(&[]),
            upstream: None,
            grpc_status: None,
            cache_status: None,
            trace: Some(&t),
        };
        spans.record(&e, &t);
        let has = |needle: &[u8]| spans.batch.windows(needle.len()).any(|w| w == needle);
        assert!(has(b"https") && has(b"192.0.2.7") && has(b"shop.example"));
        assert!(!has(b"b=c"), "the query is not recorded");
        spans.hand_off(1000);
        assert_eq!(spans.due(), Some(1100));
        spans.hand_off(1099);
        assert_eq!(spans.count, 1, "not due yet");
        spans.hand_off(1100);
        assert_eq!(spans.count, 0);
        drop(spans);
        assert_eq!(rx.iter().map(|b| b.spans).sum::<usize>(), 1);
    }
}
