//! The request a handler sees: a borrowed view of the parsed head, path parameters, query,
//! body and trailers.
//!
//! Owns read-only access for handlers; it never copies the head. Query values are
//! percent-decoded on request (`application/x-www-form-urlencoded` rules); path and target are
//! returned as sent.
#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::net::SocketAddr;

use linerate_http1::{BodyDecoder, Method, RequestHead, Version};

/// Most path parameters one route may capture.
pub const MAX_PARAMS: usize = 8;

/// Captured path parameters: spans of the path, in pattern order.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Params {
    pub(crate) len: usize,
    pub(crate) spans: [(u16, u16); MAX_PARAMS],
}

/// A request as given to a handler.
pub struct Request<'a> {
    pub(crate) head: &'a RequestHead,
    pub(crate) buf: &'a [u8],
    pub(crate) names: &'a [String],
    pub(crate) params: &'a Params,
    pub(crate) body: &'a [u8],
    /// The finished body decoder, which holds the trailers of a chunked body.
    pub(crate) trailers: Option<&'a BodyDecoder>,
    /// The connection's facts and the layers' values, read only when a handler asks.
    pub(crate) ctx: &'a dyn Context,
}

/// Where a request's connection facts (its client, its TLS client certificate) and its
/// layers' values come from: the connection's application while a handler runs on the
/// worker, or an owned request's own copies. Behind one pointer, so a request that never
/// asks costs one store for all three (three fields cost 8 instructions per request more
/// on /json, callgrind).
pub(crate) trait Context {
    fn peer(&self) -> Option<SocketAddr>;
    fn client_cert(&self) -> Option<&crate::tls::ClientCert>;
    fn extensions(&self) -> &crate::layer::Extensions;
    /// The application's state ([`Router::with_state`](crate::Router::with_state)).
    fn state(&self) -> &crate::layer::Extensions;
    /// The request's trace context, when tracing is on.
    fn trace(&self) -> Option<crate::trace::TraceContext> {
        None
    }
}

impl<'a> Request<'a> {
    /// The method.
    pub fn method(&self) -> Method {
        self.head.method()
    }
    /// The method token as sent.
    pub fn method_str(&self) -> &'a str {
        self.head.method_str(self.buf)
    }
    /// The HTTP version.
    pub fn version(&self) -> Version {
        self.head.version()
    }
    /// The request-target as sent.
    pub fn target(&self) -> &'a str {
        self.head.target(self.buf)
    }
    /// The path, still percent-encoded.
    pub fn path(&self) -> &'a str {
        self.head.path(self.buf)
    }
    /// The raw query string (without `?`).
    pub fn query(&self) -> Option<&'a str> {
        self.head.query(self.buf)
    }
    /// The first query parameter named `name`, percent-decoded ('+' is a space).
    pub fn query_param(&self, name: &str) -> Option<Cow<'a, str>> {
        self.query()?.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode_component(k).as_deref() == Some(name))
                .then(|| decode_component(v))
                .flatten()
        })
    }
    /// The path parameter captured for `{name}` (still percent-encoded).
    pub fn param(&self, name: &str) -> Option<&'a str> {
        let i = self.names.iter().position(|n| n == name)?;
        if i >= self.params.len {
            return None;
        }
        let (s, e) = self.params.spans[i];
        self.path().get(s as usize..e as usize)
    }
    /// The first field named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.head.header(self.buf, name)
    }
    /// All fields in order.
    pub fn headers(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + '_ {
        self.head.headers(self.buf)
    }
    /// The request body (empty for streaming routes, which get it through their sink).
    pub fn body(&self) -> &'a [u8] {
        self.body
    }
    /// Trailer fields of a chunked body; never merged into [`Request::header`].
    pub fn trailer(&self, name: &str) -> Option<&'a [u8]> {
        self.trailers.and_then(|d| d.trailers().get(name))
    }
    /// The peer's address.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.ctx.peer()
    }
    /// The request's OpenTelemetry trace context, when tracing is on: its trace and server
    /// span, for spans of the handler's own ([`TraceContext::span`](crate::trace::TraceContext::span))
    /// and the `traceparent` of its outgoing calls; and its request id.
    pub fn trace(&self) -> Option<crate::trace::TraceContext> {
        self.ctx.trace()
    }
    /// The client certificate the TLS handshake verified against the listener's
    /// `client_ca` (mTLS): its subject and alternative names. `None` over plain HTTP, or
    /// where client certificates are optional and the client sent none.
    pub fn client_cert(&self) -> Option<&'a crate::tls::ClientCert> {
        self.ctx.client_cert()
    }
    /// The value of type `T` a [`Layer`](crate::Layer) attached to this request (an
    /// authenticated user, a request id), if any.
    pub fn extension<T: Send + Sync + 'static>(&self) -> Option<&'a T> {
        self.ctx.extensions().get::<T>()
    }
    /// The application's state of type `T`, given with
    /// [`Router::with_state`](crate::Router::with_state).
    ///
    /// # Panics
    /// When the router was given no state of type `T`: a programming error, which the
    /// handler's panic rail answers 500 with a log line naming the type.
    pub fn state<T: Send + Sync + 'static>(&self) -> &'a T {
        state_of(self.ctx.state())
    }
}

/// The state of type `T` in `state`, or the panic [`Request::state`] documents.
pub(crate) fn state_of<T: Send + Sync + 'static>(state: &crate::layer::Extensions) -> &T {
    match state.get::<T>() {
        Some(t) => t,
        None => panic!(
            "no state of type {} (give it with Router::with_state)",
            std::any::type_name::<T>()
        ),
    }
}

/// Percent-decodes a query component as the WHATWG URL Standard's form decoding does (`+` is
/// a space; a `%` not followed by two hex digits stays a `%`, as browsers send `?d=100%`);
/// `None` if the result is not UTF-8.
fn decode_component(s: &str) -> Option<Cow<'_, str>> {
    percent_decode(s, true)
}

/// Percent-decodes `s` (`%XX`; a `%` without two hex digits stays a `%`), with `+` as a space
/// when `plus_is_space` (form encoding) or as itself (a path segment); `None` if the result is
/// not UTF-8.
pub(crate) fn percent_decode(s: &str, plus_is_space: bool) -> Option<Cow<'_, str>> {
    if !s.bytes().any(|b| b == b'%' || (plus_is_space && b == b'+')) {
        return Some(Cow::Borrowed(s));
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' if plus_is_space => out.push(b' '),
            b'%' => match (b.get(i + 1), b.get(i + 2)) {
                (Some(&h), Some(&l)) if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => {
                    let hex = |d: u8| (d as char).to_digit(16).unwrap_or(0) as u8;
                    out.push(hex(h) << 4 | hex(l));
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok().map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_components_decode() {
        assert_eq!(decode_component("a%20b+c").as_deref(), Some("a b c"));
        assert_eq!(decode_component("plain").as_deref(), Some("plain"));
        // WHATWG URL §5.1 (form decoding) and §1.3 (percent-decode): a `%` without two hex
        // digits is itself, as browsers send `?d=100%` unencoded.
        assert_eq!(decode_component("%zz").as_deref(), Some("%zz"));
        assert_eq!(decode_component("100%").as_deref(), Some("100%"));
        assert_eq!(decode_component("5%2").as_deref(), Some("5%2"));
        assert_eq!(decode_component("%41%").as_deref(), Some("A%"));
        assert_eq!(decode_component("%ff"), None); // not UTF-8
    }
}
