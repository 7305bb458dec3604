//! The application as one connection's [`Service`]: each request walks the phases of
//! `app/phase/` in order, and this file is that order — `request` below reads top to bottom
//! as the sequence (accept → site → access → layers → rewrite → content → headers → log);
//! `data`, `room` and `end` carry a body still to come back to its content handler.
//!
//! Owns the sequence, never a phase's decision: each is its phase's file. A `ConnApp` lives
//! for one call from the driver: it borrows the shared [`App`] and the worker's [`AppIo`]; the
//! only state it keeps across calls is a [`Pending`] body, which the connection holds.
//!
//! Where new work plugs in: a content handler (gRPC next) is a file in `phase/content/` and
//! one arm of `ConnApp::content`; a phase (a cache lookup) is one call in `dispatch`, between
//! the rewrite and the content, and its store one step of `ConnApp::respond` (headers).
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};

use linerate_http1::{BodyDecoder, Method, ParseError};

use super::phase::access::Gate;
use super::phase::content::body::{PendingBody, Sink};
use super::phase::headers::unstream;
use super::response::Response;
use super::sites::{SiteApp, Sites};
use super::{App, AppIo};
use crate::h1::{Decision, Exchange, Service};
use crate::stats::Kind;

pub(crate) use super::phase::content::body::Pending;
// The server's own answers and the handler guard, where the rest of the crate finds them.
pub(crate) use super::phase::headers::{generated, guard, text_status};

/// The application, serving one connection for the length of one driver call.
pub(crate) struct ConnApp<'a> {
    pub app: &'a App,
    /// The worker's sites (swapped between events by a reload, never during a call).
    pub sites: &'a Sites,
    pub io: &'a mut AppIo,
    /// The connection's peer: the socket's address (kept at accept), or its PROXY protocol
    /// header's; `None` on a Unix socket. The request's client is [`ConnApp::client`].
    pub peer: Option<&'a SocketAddr>,
    /// The driver's name for the connection: where deferred answers go.
    pub token: u64,
    /// The site answering the request at hand (see `sites`), and the site itself.
    pub site: usize,
    pub site_app: &'a SiteApp,
    /// What answers the request at hand (metrics).
    pub kind: Kind,
    /// When its head was in (µs, `sys::monotonic_us`), when metrics or the log are on.
    pub started: u64,
    /// The connection came over TLS (for `X-Forwarded-Proto`).
    pub tls: bool,
    /// Its listener redirects every request to HTTPS on this port.
    pub to_https: Option<u16>,
}

impl crate::request::Context for ConnApp<'_> {
    fn peer(&self) -> Option<SocketAddr> {
        self.client().copied()
    }
    fn client_cert(&self) -> Option<&crate::tls::ClientCert> {
        ConnApp::client_cert(self)
    }
    fn extensions(&self) -> &crate::layer::Extensions {
        &self.io.layered.ext
    }
    fn state(&self) -> &crate::layer::Extensions {
        &self.app.router.state
    }
    fn trace(&self) -> Option<crate::trace::TraceContext> {
        self.trace_context()
    }
}

impl Service for ConnApp<'_> {
    type Pending = Pending;

    /// The phases, in order. Each returns early when it answers; a request that reaches the
    /// end of `dispatch` has been answered by its content.
    #[inline(always)]
    fn request(&mut self, req: Exchange<'_>) -> Decision<Pending> {
        let head = req.head;
        // accept: the clock and the client (phase/accept.rs).
        self.accept(head, req.buf);
        // site: which site answers (phase/site.rs); an HTTPS-only listener redirects.
        self.pick_site(head, req.buf);
        if let Some(port) = self.to_https {
            return self.redirect_to_https(port, req);
        }
        // access: refusals, and proxy mounts (phase/access.rs): one test for a site with
        // neither.
        if self.site_app.gated
            && let Some(gate) = self.gate(head, req.buf)
        {
            return match gate {
                Gate::Answer(decided) => decided,
                Gate::Proxy(_) if req.protocol.is_some() => self.tunnel_not_proxied(req),
                Gate::Proxy(route) => self.proxy(route, req),
            };
        }
        // layers, rewrite, content: `dispatch`, twice instantiated so that a router without
        // layers runs none of their code. headers and log follow every answer
        // (`ConnApp::respond`, phase/headers.rs and phase/log.rs).
        if self.app.layered {
            return self.dispatch_layered(req);
        }
        self.dispatch::<false>(req)
    }

    fn data(&mut self, pending: &mut Pending, data: &[u8]) -> Result<(), Response> {
        let pending = &mut *pending.0;
        match &mut pending.sink {
            Sink::Buffer(v) | Sink::Proxy(v) => v.extend_from_slice(data),
            Sink::Relay(pipe) => {
                pipe.put(data);
            }
            Sink::Incoming(feed) => feed.put(data),
            Sink::Grpc(v) => {
                v.extend_from_slice(data);
                let head = &pending.head;
                if let Some(resp) =
                    crate::grpc::over_limit(v, || head.head.header(&head.bytes, "content-type"))
                {
                    self.grpc_over_limit(pending.route, pending.started);
                    return Err(resp);
                }
            }
            Sink::Stream(s) => {
                if catch_unwind(AssertUnwindSafe(|| s.data(data))).is_err() {
                    tracing::error!("body sink panicked; answering 500");
                    crate::app::panics::count(crate::app::panics::Panic::Http);
                    let resp = text_status(500);
                    if self.app.timing {
                        self.account(&pending.head.head, &pending.head.bytes, &resp);
                    }
                    return Err(resp);
                }
            }
        }
        Ok(())
    }

    fn room(&self, pending: &Pending) -> bool {
        match &pending.0.sink {
            Sink::Relay(pipe) => pipe.has_room(),
            Sink::Incoming(feed) => feed.has_room(),
            _ => true,
        }
    }

    fn end(&mut self, id: u64, pending: Pending, body: BodyDecoder) -> Decision<Pending> {
        let PendingBody {
            route,
            site,
            started,
            params,
            head,
            sink,
            layered,
        } = *pending.0;
        if let Some(layered) = layered {
            self.io.layered = layered;
        }
        self.site = site;
        self.site_app = self.sites.get(site);
        self.started = started;
        self.kind = Kind::Route;
        let sink = match sink {
            Sink::Proxy(body) => {
                return self.relay(route, &head.head, &head.bytes, id, body, None, false);
            }
            Sink::Relay(pipe) => {
                // Trailers are not forwarded (the upstream's chunked body ends without them).
                pipe.end();
                return Decision::Relay { upgrade: false };
            }
            Sink::Incoming(feed) => {
                // The handler has the request: its answer is pending already.
                feed.end(body.trailers().iter());
                return Decision::Relay { upgrade: false };
            }
            sink => sink,
        };
        self.route_end(id, route, params, head, sink, body)
    }

    fn answered(
        &mut self,
        status: u16,
        error: Option<ParseError>,
        body_bytes: u64,
        request_line: &[u8],
    ) {
        self.log_refusal(status, error, body_bytes, request_line);
    }

    fn request_line_of(&self, pending: &Pending) -> Vec<u8> {
        crate::h1::request_line(&pending.0.head.bytes).to_vec()
    }

    /// A deferred request's deadline passed: its layers see the connection's 503 (as a
    /// rejection, so an error renderer renders it), and its handler is given up (an `async`
    /// one's future is dropped; a late answer is dropped by the connection).
    #[cold]
    fn timed_out(&mut self, id: u64, resp: &mut Response) {
        let Some(waiting) = self.io.waiting.remove(&(self.token, id)) else {
            return;
        };
        waiting.cancel.give_up();
        if let Some(layered) = waiting.layered {
            resp.rejection = true;
            layered.after(resp);
            unstream(resp);
        }
    }

    /// A body the connection refused (413 past the limit, 400 malformed): the request's
    /// layers see the answer, as a rejection (so an error renderer renders it).
    fn refused(&mut self, pending: Pending, resp: &mut Response) {
        if let Some(layered) = pending.0.layered {
            resp.rejection = true;
            layered.after(resp);
        }
    }
}

impl<'a> ConnApp<'a> {
    /// A request of a router with layers: [`ConnApp::dispatch`] with them. Out of line, so
    /// a router without layers runs none of their code.
    #[inline(never)]
    fn dispatch_layered(&mut self, req: Exchange<'_>) -> Decision<Pending> {
        self.dispatch::<true>(req)
    }

    /// The request past its site's access phase: the router's layers (`LAYERED`), the
    /// methods the server answers itself (OPTIONS, 501), the rewrite phase, then the content.
    #[inline(always)]
    fn dispatch<const LAYERED: bool>(&mut self, req: Exchange<'_>) -> Decision<Pending> {
        let app = self.app;
        let head = req.head;
        // layers: the router's `before` hooks (phase/layers.rs).
        if LAYERED
            && !app.router.layers.is_empty()
            && self.site_app.app
            && let Some(resp) = self.layers_before(&app.router.layers, None, head, req.buf)
        {
            // A gRPC call refused by a layer gets the status it means (phase/content/grpc.rs).
            let grpc = app.router.has_grpc();
            let resp = crate::app::phase::content::grpc::layer_answer(grpc, head, req.buf, resp);
            return self.answer(req.id, head, req.buf, resp);
        }
        // Methods that no resource serves go before the rewrite (phase/content/methods.rs,
        // phase/content/websocket.rs).
        match head.method() {
            Method::Connect if req.protocol.is_some() => {
                return self.extended_connect::<LAYERED>(req);
            }
            Method::Other | Method::Connect => {
                return self.respond(head, req.buf, text_status(501));
            }
            Method::Options => return self.options(req),
            _ => {}
        }
        // rewrite: the site's redirects and fixed returns (phase/rewrite.rs).
        if let Some(resp) = self.rewrite(head, req.buf) {
            return self.respond(head, req.buf, resp);
        }
        // content: a route, the files, 404 or 405 (phase/content/mod.rs).
        self.content::<LAYERED>(req)
    }
}
