//! The accept phase: a request begins. Its clock starts (when metrics, the access log or
//! tracing are on), its client is found (the connection's peer, or behind trusted proxies
//! the one their field names), and its ids are drawn: its request id and, with tracing, its
//! trace context and sampling decision (`trace::RequestTrace::begin`).
//!
//! Owns who the client is ([`ConnApp::client`], [`ConnApp::client_cert`]); must not answer.
#![forbid(unsafe_code)]

use std::net::SocketAddr;

use linerate_http1::RequestHead;

use crate::app::ConnApp;
use crate::stats::Kind;

impl<'a> ConnApp<'a> {
    /// Starts the request at hand: its clock, and its client behind trusted proxies.
    #[inline(always)]
    pub(crate) fn accept(&mut self, head: &RequestHead, buf: &[u8]) {
        let app = self.app;
        if app.timing {
            self.started = crate::sys::monotonic_us();
            self.kind = Kind::Server;
        }
        // The common server, with no trusted proxies, tests one register here.
        if !app.trusted.is_empty()
            && let Some(hop) = self.peer
        {
            self.io.real = Some(app.trusted.client(*hop, head.headers(buf)));
        }
        if app.ids {
            self.begin_trace(head, buf);
        }
    }

    /// Draws the request's ids (out of line: most servers draw none).
    #[inline(never)]
    fn begin_trace(&mut self, head: &RequestHead, buf: &[u8]) {
        let app = self.app;
        // A request id is taken from a client only when it is a proxy this server trusts.
        let trusted =
            !app.trusted.is_empty() && self.peer.is_some_and(|hop| app.trusted.trusts(hop.ip()));
        self.io
            .trace
            .begin(&mut self.io.ids, head, buf, trusted, app.sampler.as_ref());
    }

    /// The client of the request at hand: the connection's peer, or behind trusted proxies
    /// the one their field named (found when the request began).
    #[inline(always)]
    pub(crate) fn client(&self) -> Option<&SocketAddr> {
        if self.peer.is_none() || self.app.trusted.is_empty() {
            self.peer
        } else {
            self.io.real.as_ref()
        }
    }

    /// The request at hand's trace context, for its handler (tracing on).
    pub(crate) fn trace_context(&self) -> Option<crate::trace::TraceContext> {
        let spans = self.io.log.as_ref().and_then(|l| l.spans.as_ref());
        crate::trace::TraceContext::new(&self.io.trace, spans.map(|s| s.handle()))
    }

    /// The client certificate the connection's TLS handshake verified (mTLS).
    #[inline(always)]
    pub(crate) fn client_cert(&self) -> Option<&crate::tls::ClientCert> {
        if self.tls {
            self.io.client_cert.as_deref()
        } else {
            None
        }
    }
}
