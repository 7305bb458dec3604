//! The application as one connection's [`Service`]: routes each request to its handler,
//! the static-file mount or an error status; collects bodies for buffering and deferred
//! handlers and streams them to sinks; hands deferred requests their [`Responder`];
//! compresses eligible answers and writes their access-log records.
//!
//! Owns what an answer is, never how it is framed or sent. A `ConnApp` lives for one call
//! from the driver: it borrows the shared [`App`] and the worker's [`AppIo`]; the only state
//! it keeps across calls is a [`Pending`] body, which the connection holds.
#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};

use linerate_http1::{BodyDecoder, Framing, Method, ParseError, RequestHead, TargetForm};

use super::access_log::{AccessEntry, Fields, RefusedEntry};
use super::deferred::{Cancel, LogMeta, Meta, OwnedHead, OwnedRequest, Responder, Waiting};
use super::files::{ALLOW, FileAnswer, HeadView, StaticFiles};
use super::incoming::Feed;
use super::layer::Layered;
use super::request::{Params, Request};
use super::response::{Body, FileBody, Response, Unsendable, checked};
use super::router::{
    BodySink, DeferredFn, Handler, HandlerFn, IncomingFn, Lookup, Route, add_method,
};
use super::sites::{SiteApp, Sites};
use super::{App, AppIo, body_bytes, compress};
use crate::config::FilesMount;
use crate::h1::{Decision, Exchange, Service};
use crate::proxy::pipe::{PipeIn, PipeOut};
use crate::stats::Kind;

/// A request whose body is being read: its route, and where the body goes. Boxed, so the
/// [`Decision`] every request returns stays the size of a `Response`.
pub(crate) struct Pending(Box<PendingBody>);

struct PendingBody {
    route: usize,
    site: usize,
    /// When the request's head was in (µs; 0 unless timing).
    started: u64,
    params: Params,
    head: OwnedHead,
    sink: Sink,
    /// The request's layers, whose hooks go on when the body is in.
    layered: Option<Box<Layered>>,
}

enum Sink {
    Buffer(Vec<u8>),
    Stream(Box<dyn BodySink>),
    /// A proxied request's body (`route` in [`PendingBody`] is the site's proxy route).
    Proxy(Vec<u8>),
    /// A proxied request's body going up as it arrives (the request went up already).
    Relay(PipeIn),
    /// A [`Router::deferred_incoming`](super::router::Router::deferred_incoming) handler's
    /// body, going to it as it arrives (the handler has the request already).
    Incoming(Feed),
}

/// What [`ConnApp::gate`] decided for a request it does not let go on.
enum Gate {
    /// Refused by the site's access rules.
    Answer(Decision<Pending>),
    /// Below this proxy mount.
    Proxy(usize),
}

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

impl ConnApp<'_> {
    /// The client of the request at hand: the connection's peer, or behind trusted proxies
    /// the one their field named (found when the request began).
    #[inline(always)]
    fn client(&self) -> Option<&SocketAddr> {
        if self.peer.is_none() || self.app.trusted.is_empty() {
            self.peer
        } else {
            self.io.real.as_ref()
        }
    }

    /// The client certificate the connection's TLS handshake verified (mTLS).
    #[inline(always)]
    fn client_cert(&self) -> Option<&crate::tls::ClientCert> {
        if self.tls {
            self.io.client_cert.as_deref()
        } else {
            None
        }
    }
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
}

/// The request as its layers' `before` hooks see it: no extensions (theirs are the `&mut`
/// beside it).
struct LayerView<'c, 'a>(&'c ConnApp<'a>);

impl crate::request::Context for LayerView<'_, '_> {
    fn peer(&self) -> Option<SocketAddr> {
        self.0.client().copied()
    }
    fn client_cert(&self) -> Option<&crate::tls::ClientCert> {
        self.0.client_cert()
    }
    fn extensions(&self) -> &crate::layer::Extensions {
        &crate::layer::NO_EXTENSIONS
    }
    fn state(&self) -> &crate::layer::Extensions {
        &self.0.app.router.state
    }
}

impl Service for ConnApp<'_> {
    type Pending = Pending;

    #[inline(always)]
    fn request(&mut self, req: Exchange<'_>) -> Decision<Pending> {
        let app = self.app;
        let head = req.head;
        if app.timing {
            self.started = crate::sys::monotonic_us();
            self.kind = Kind::Server;
        }
        // The common server, with no trusted proxies, tests one register here.
        if !app.trusted.is_empty()
            && let Some(hop) = self.peer
        {
            self.io.real = Some(app.trusted.client(*hop, head.headers(req.buf)));
        }
        self.site = self.sites.pick(head, req.buf);
        self.site_app = self.sites.get(self.site);
        if let Some(port) = self.to_https {
            return self.redirect_to_https(port, req);
        }
        // Access rules and proxy mounts: one test for a site with neither.
        if self.site_app.gated
            && let Some(gate) = self.gate(head, req.buf)
        {
            return match gate {
                Gate::Answer(decided) => decided,
                Gate::Proxy(_) if req.protocol.is_some() => self.tunnel_not_proxied(req),
                Gate::Proxy(route) => self.proxy(route, req),
            };
        }
        if app.layered {
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
            Sink::Stream(s) => {
                if catch_unwind(AssertUnwindSafe(|| s.data(data))).is_err() {
                    tracing::error!("body sink panicked; answering 500");
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
        let app = self.app;
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
            Sink::Proxy(body) => return self.relay(route, &head.head, &head.bytes, id, body, None),
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
        let Some(route) = app.router.at(route) else {
            return self.respond(&head.head, &head.bytes, text_status(500).close());
        };
        match (&route.handler, sink) {
            (Handler::Deferred(f), Sink::Buffer(v)) => {
                self.defer(route, params, head, (v, Some(body)), id, f)
            }
            (Handler::Buffered(h), Sink::Buffer(v)) => {
                let request = Request {
                    head: &head.head,
                    buf: &head.bytes,
                    names: &route.names,
                    params: &params,
                    body: &v,
                    trailers: Some(&body),
                    ctx: self,
                };
                let resp = call(|| h(&request));
                self.answer(id, &head.head, &head.bytes, resp)
            }
            (_, Sink::Stream(sink)) => {
                let request = Request {
                    head: &head.head,
                    buf: &head.bytes,
                    names: &route.names,
                    params: &params,
                    body: &[],
                    trailers: Some(&body),
                    ctx: self,
                };
                let resp = call(move || sink.finish(&request));
                self.answer(id, &head.head, &head.bytes, resp)
            }
            _ => self.respond(&head.head, &head.bytes, text_status(500).close()),
        }
    }

    fn answered(
        &mut self,
        status: u16,
        error: Option<ParseError>,
        body_bytes: u64,
        request_line: &[u8],
    ) {
        if self.app.metrics {
            self.io.counters.refusal(status, error);
        }
        // Refused before a site took it: the default site's log (nginx's default server).
        let site = self.sites.default_site();
        if let (Some(log), Some(sink)) = (self.io.log.as_mut(), site.log) {
            log.push_refusal(
                sink,
                &RefusedEntry {
                    peer: self.peer.copied(),
                    line: request_line,
                    status,
                    bytes: body_bytes as usize,
                    tls: self.tls,
                    server_name: &site.server_name,
                },
            );
        }
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

    /// The request past its site's checks: the router's layers (`LAYERED`), OPTIONS and
    /// 501, redirects, then a route, the files or 404/405.
    #[inline(always)]
    fn dispatch<const LAYERED: bool>(&mut self, req: Exchange<'_>) -> Decision<Pending> {
        let app = self.app;
        let head = req.head;
        if LAYERED
            && !app.router.layers.is_empty()
            && self.site_app.app
            && let Some(resp) = self.layers_before(&app.router.layers, None, head, req.buf)
        {
            return self.answer(req.id, head, req.buf, resp);
        }
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
        let site = self.site_app;
        let path = head.path_bytes(req.buf);
        if let Some(resp) = site.redirect(head, req.buf) {
            return self.respond(head, req.buf, resp);
        }
        let mut params = Params::default();
        if site.app
            && let Some((index, route)) = app.router.first_match(path, &mut params)
        {
            if route.method == head.method() {
                return self.route::<LAYERED>(index, route, params, req);
            }
            return match app
                .router
                .lookup_method(index, head.method(), path, &mut params)
            {
                Lookup::Found(index, route) => self.route::<LAYERED>(index, route, params, req),
                Lookup::NotFound => self.files(head, req.buf),
                Lookup::MethodNotAllowed(allow) => self.not_allowed(head, req.buf, allow),
            };
        }
        self.files(head, req.buf)
    }

    /// An HTTP/2 extended CONNECT to a proxied path: the proxy carries WebSocket as an
    /// HTTP/1.1 upgrade only, so 501 (the setting is not announced where paths are proxied;
    /// this answers one that a reload proxied since).
    #[cold]
    #[inline(never)]
    fn tunnel_not_proxied(&mut self, req: Exchange<'_>) -> Decision<Pending> {
        let why = "WebSocket over HTTP/2 is not proxied; use HTTP/1.1\n";
        self.respond(req.head, req.buf, Response::text(why).status(501))
    }

    /// An HTTP/2 extended CONNECT (RFC 8441): `:protocol websocket` to a WebSocket route's
    /// path opens it as a handshake would; the same path without a WebSocket route is 404
    /// or 405 (its `Allow` naming what it takes), another protocol 501.
    #[cold]
    #[inline(never)]
    fn extended_connect<const LAYERED: bool>(&mut self, req: Exchange<'_>) -> Decision<Pending> {
        let (app, head) = (self.app, req.head);
        if req.protocol != Some(b"websocket") {
            return self.respond(head, req.buf, text_status(501));
        }
        let path = head.path_bytes(req.buf);
        let mut params = Params::default();
        let lookup = if self.site_app.app {
            app.router.lookup(Method::Get, path, &mut params)
        } else {
            Lookup::NotFound
        };
        match lookup {
            Lookup::Found(index, route) if matches!(route.handler, Handler::WebSocket(_)) => {
                self.route::<LAYERED>(index, route, params, req)
            }
            Lookup::Found(..) | Lookup::MethodNotAllowed(_) => {
                let allow = app.router.allowed(Some(path)).join(", ");
                self.not_allowed(head, req.buf, allow)
            }
            Lookup::NotFound => self.respond(head, req.buf, text_status(404)),
        }
    }

    /// OPTIONS (RFC 9110 §9.3.7): a route registered for it answers; otherwise the server
    /// does — `204` with `Allow` for a path something serves, `200` with every method the
    /// server takes for `OPTIONS *`, `404` for a path nothing serves.
    #[cold]
    #[inline(never)]
    fn options(&mut self, req: Exchange<'_>) -> Decision<Pending> {
        let (app, head) = (self.app, req.head);
        let site = self.site_app;
        let asterisk = head.target_form() == TargetForm::Asterisk;
        let path = head.path_bytes(req.buf);
        if !asterisk && site.app {
            let mut params = Params::default();
            if let Lookup::Found(index, route) =
                app.router.lookup(Method::Options, path, &mut params)
            {
                return self.route::<true>(index, route, params, req);
            }
        }
        let mut allow = if site.app {
            app.router.allowed((!asterisk).then_some(path))
        } else {
            Vec::new()
        };
        if (asterisk && !site.mounts.is_empty()) || site.mount(path).is_some() {
            add_method(&mut allow, "GET");
            add_method(&mut allow, "HEAD");
        }
        let resp = if allow.is_empty() && !asterisk {
            text_status(404)
        } else {
            add_method(&mut allow, "OPTIONS");
            Response::new(if asterisk { 200 } else { 204 })
                .try_header("Allow", allow.join(", "))
                .unwrap_or_else(|_| text_status(500))
        };
        self.respond(head, req.buf, resp)
    }

    /// No route: the site's static files answer, or 404. Out of line, so the routes' path
    /// through `request` stays small enough for the compiler to inline what it calls.
    #[inline(never)]
    fn files(&mut self, head: &RequestHead, buf: &[u8]) -> Decision<Pending> {
        let site = self.site_app;
        let resp = match site.mount(head.path_bytes(buf)) {
            Some((i, mount, rest)) => {
                self.kind = Kind::File;
                let files = &self.io.files[self.site][i];
                let resp = file_response(files, mount, head, buf, rest);
                if site.compression.enabled && matches!(resp.body, Body::File(_)) {
                    let accept = || head.header(buf, "accept-encoding");
                    self.io.static_gz.apply(resp, accept, &site.compression)
                } else {
                    resp
                }
            }
            None => text_status(404),
        };
        self.respond(head, buf, resp)
    }

    /// A path routes serve, but not with this method: 405 with `Allow`.
    #[cold]
    #[inline(never)]
    fn not_allowed(&mut self, head: &RequestHead, buf: &[u8], allow: String) -> Decision<Pending> {
        let resp = text_status(405)
            .try_header("Allow", allow)
            .unwrap_or_else(|_| text_status(405));
        self.respond(head, buf, resp)
    }

    /// Runs `layers`' `before` hooks for the request at hand (a router's, with `route`
    /// `None`, or a group's, with its route's parameters), after any that already ran; their
    /// answer, if one answers. Out of line: a router without layers never calls it.
    #[cold]
    #[inline(never)]
    fn layers_before(
        &mut self,
        layers: &[std::sync::Arc<dyn crate::layer::Layer>],
        route: Option<(&Route, &Params)>,
        head: &RequestHead,
        buf: &[u8],
    ) -> Option<Response> {
        let no_params = Params::default();
        let (names, params): (&[String], &Params) = match route {
            Some((r, p)) => (&r.names, p),
            None => (&[], &no_params),
        };
        // A group's layers go on after the router's; a router's begin a new pass.
        let mut layered = if route.is_some() {
            std::mem::take(&mut *self.io.layered)
        } else {
            Layered::default()
        };
        layered.active = true;
        let request = Request {
            head,
            buf,
            names,
            params,
            body: &[],
            trailers: None,
            // Layers are handed theirs as `&mut`.
            ctx: &LayerView(self),
        };
        let answer = catch_unwind(AssertUnwindSafe(|| layered.before(layers, &request)))
            .unwrap_or_else(|_| {
                tracing::error!("layer panicked; answering 500");
                Some(text_status(500).close())
            });
        *self.io.layered = layered;
        answer
    }

    /// The body limit for buffering and deferred handlers on this request's site.
    fn max_body(&self) -> u64 {
        self.site_app.max_body_bytes
    }

    /// The body limit of `route` (a buffering or deferred one): its own
    /// ([`Router::body_limit`](crate::Router::body_limit)), or the site's.
    fn route_limit(&self, route: &Route) -> u64 {
        route.body_limit.unwrap_or(self.site_app.max_body_bytes)
    }

    /// Calls the route's handler, or arranges for its body to be read first.
    #[inline(always)]
    fn route<'b, const LAYERED: bool>(
        &mut self,
        index: usize,
        route: &'a Route,
        params: Params,
        req: Exchange<'b>,
    ) -> Decision<Pending> {
        let app = self.app;
        let head = req.head;
        self.kind = Kind::Route;
        if LAYERED
            && !route.layers.is_empty()
            && let Some(resp) =
                self.layers_before(&route.layers, Some((route, &params)), head, req.buf)
        {
            return self.answer(req.id, head, req.buf, resp);
        }
        let declared = match head.framing() {
            Framing::Length(len) => len,
            _ => 0,
        };
        let request = |body: &'b [u8]| Request {
            head,
            buf: req.buf,
            names: &route.names,
            params: &params,
            body,
            trailers: None,
            ctx: self,
        };
        match &route.handler {
            Handler::Buffered(h) => {
                if declared > 0 && declared > self.route_limit(route) {
                    return self.respond(head, req.buf, text_status(413).close());
                }
                match req.body {
                    Some(body) => {
                        let resp = call_buffered(h, &request(body));
                        self.answer(req.id, head, req.buf, resp)
                    }
                    None => {
                        let sink = Sink::Buffer(Vec::with_capacity(declared as usize));
                        self.read_body(index, params, head, req.buf, sink)
                    }
                }
            }
            Handler::Streaming(factory) => {
                if declared > route.body_limit.unwrap_or(app.max_stream_body_bytes) {
                    return self.respond(head, req.buf, text_status(413).close());
                }
                let request = request(&[]);
                let mut sink = match catch_unwind(AssertUnwindSafe(|| factory(&request))) {
                    Ok(sink) => sink,
                    Err(_) => return self.respond(head, req.buf, text_status(500)),
                };
                match req.body {
                    Some(body) => {
                        if !body.is_empty()
                            && catch_unwind(AssertUnwindSafe(|| sink.data(body))).is_err()
                        {
                            return self.respond(head, req.buf, text_status(500).close());
                        }
                        let resp = call(move || sink.finish(&request));
                        self.answer(req.id, head, req.buf, resp)
                    }
                    None => self.read_body(index, params, head, req.buf, Sink::Stream(sink)),
                }
            }
            Handler::WebSocket(ws) => self.websocket(route, &params, req, ws),
            Handler::Incoming(f) => self.incoming(index, route, params, req, f),
            Handler::Deferred(f) => {
                if declared > 0 && declared > self.route_limit(route) {
                    return self.respond(head, req.buf, text_status(413).close());
                }
                match req.body {
                    Some(body) => {
                        let owned = OwnedHead::copy(head, req.buf);
                        self.defer(route, params, owned, (body.to_vec(), None), req.id, f)
                    }
                    None => {
                        let sink = Sink::Buffer(Vec::with_capacity(declared as usize));
                        self.read_body(index, params, head, req.buf, sink)
                    }
                }
            }
        }
    }

    /// A WebSocket route's request: the handshake checked, the route's accept function
    /// asked, and on success the connection handed over (the driver places the 101 once this
    /// call returns: `AppIo::upgrade`). Out of line: no other route runs its code.
    #[cold]
    #[inline(never)]
    fn websocket(
        &mut self,
        route: &Route,
        params: &Params,
        req: Exchange<'_>,
        ws: &crate::websocket::WsRoute,
    ) -> Decision<Pending> {
        let head = req.head;
        // A handshake carries no body (RFC 6455 §4.1: a GET); one that does is refused
        // rather than read. Over HTTP/2 the stream stays open: what follows is the tunnel's.
        let http2 = req.protocol.is_some();
        let bodiless = matches!(head.framing(), Framing::None | Framing::Length(0));
        let mut hs = match crate::websocket::check(head, req.buf, &ws.options) {
            Ok(hs) if http2 || (bodiless && req.body.is_some()) => hs,
            Ok(_) => return self.respond(head, req.buf, text_status(400).close()),
            Err(refusal) => return self.respond(head, req.buf, refusal),
        };
        let request = Request {
            head,
            buf: req.buf,
            names: &route.names,
            params,
            body: &[],
            trailers: None,
            ctx: self,
        };
        let accepted = catch_unwind(AssertUnwindSafe(|| (ws.accept)(&request, &mut hs)));
        let handler = match accepted {
            Ok(Ok(handler)) => handler,
            Ok(Err(resp)) => return self.answer(req.id, head, req.buf, resp),
            Err(_) => {
                tracing::error!("WebSocket accept function panicked; answering 500");
                return self.respond(head, req.buf, text_status(500).close());
            }
        };
        let (mut fields, deflate) = crate::websocket::accepted_fields(hs);
        // The 101 (over HTTP/2 the 200) passes through the route's layers like any answer (a
        // request id, CORS fields); what they add goes out with it.
        let mut resp = Response::new(if http2 { 200 } else { 101 });
        if self.app.layered && self.io.layered.active {
            self.io.layered.run_after(&mut resp);
            fields.extend(
                resp.headers
                    .iter()
                    .map(|(n, v)| (n.to_string(), v.to_string())),
            );
        }
        if self.app.timing {
            self.account(head, req.buf, &resp);
        }
        self.io.extras = true;
        self.io.upgrades.push(crate::websocket::Upgrade {
            id: req.id,
            handler,
            fields,
            limits: ws.options.limits,
            deflate,
        });
        Decision::Relay { upgrade: true }
    }

    /// The body is still to come: the connection reads it into `sink`.
    fn read_body(
        &mut self,
        route: usize,
        params: Params,
        head: &RequestHead,
        buf: &[u8],
        sink: Sink,
    ) -> Decision<Pending> {
        // `route` is a route of the router for a handler's body, a proxy route for the rest.
        let own = || self.app.router.at(route).and_then(|r| r.body_limit);
        let limit = match sink {
            Sink::Stream(_) | Sink::Incoming(_) => own().unwrap_or(self.app.max_stream_body_bytes),
            Sink::Buffer(_) => own().unwrap_or_else(|| self.max_body()),
            Sink::Proxy(_) | Sink::Relay(_) => self.max_body(),
        };
        Decision::ReadBody {
            limit,
            pending: Pending(Box::new(PendingBody {
                route,
                site: self.site,
                started: self.started,
                params,
                head: OwnedHead::copy(head, buf),
                sink,
                layered: self.io.layered.take(),
            })),
        }
    }

    /// A site with access rules or proxy mounts: the refusal of a client its rules do not
    /// let in, or the proxying of a request below a mount (every method but CONNECT); `None`
    /// when the request goes on to the redirects, routes and files. Out of line: a site with
    /// neither pays only the test of `gated`.
    #[cold]
    #[inline(never)]
    fn gate(&mut self, head: &RequestHead, buf: &[u8]) -> Option<Gate> {
        // The CA's HTTP-01 validation, before the site's rules (a site behind basic auth
        // or an allow list must still prove itself).
        if let Some(resp) = self.http01(head, buf) {
            return Some(Gate::Answer(self.respond(head, buf, resp)));
        }
        if self.site_app.checks {
            use super::sites::Refusal;
            let peer = self.client().map(|p| p.ip());
            let counters = &self.io.counters;
            let admitted = self.site_app.admit(
                head.path_bytes(buf),
                peer,
                |name| head.header(buf, name),
                || counters.rate_limit_full(),
            );
            if let Err(refusal) = admitted {
                let resp = match refusal {
                    Refusal::BadPath => text_status(400),
                    Refusal::Denied => text_status(403),
                    Refusal::Limited { retry_after_s } => {
                        counters.rate_limited();
                        text_status(429).header("Retry-After", retry_after_s.to_string())
                    }
                    Refusal::Unauthorized(challenge) => {
                        text_status(401).header("WWW-Authenticate", challenge)
                    }
                };
                return Some(Gate::Answer(self.respond(head, buf, resp)));
            }
        }
        self.site_app
            .proxy(head.path_bytes(buf))
            .filter(|_| head.method() != Method::Connect)
            .map(Gate::Proxy)
    }

    /// A request on a listener that sends everything to HTTPS. The answer is not the site's:
    /// its fields are for its HTTPS answers (HSTS over plain HTTP is forbidden, RFC 6797
    /// §7.2, and an `immutable` Cache-Control would pin the redirect), so none are added.
    #[cold]
    #[inline(never)]
    fn redirect_to_https(&mut self, port: u16, req: Exchange<'_>) -> Decision<Pending> {
        let resp = match self.http01(req.head, req.buf) {
            Some(answer) => answer,
            None => self.site_app.https_redirect(req.head, req.buf, port),
        };
        if self.app.timing {
            self.account(req.head, req.buf, &resp);
        }
        Decision::Respond(resp)
    }

    /// The key authorization of an HTTP-01 challenge in flight, for a GET or HEAD of
    /// `/.well-known/acme-challenge/TOKEN` (RFC 8555 §8.3); `None` for anything else, which
    /// goes on as any request (an operator's own files there included).
    #[cold]
    #[inline(never)]
    fn http01(&self, head: &RequestHead, buf: &[u8]) -> Option<Response> {
        let challenges = self.app.http01.as_ref()?;
        if !matches!(head.method(), Method::Get | Method::Head) {
            return None;
        }
        let path = head.path_bytes(buf);
        let token = path.strip_prefix(crate::acme::HTTP01_PREFIX.as_bytes())?;
        let key_authorization = challenges.http01(std::str::from_utf8(token).ok()?)?;
        Some(Response::text_owned(key_authorization).content_type("application/octet-stream"))
    }

    /// A request below a proxy mount goes to the driver as a [`Job`](crate::proxy::job::Job):
    /// with its body when that came whole with the head; else at once, its body following
    /// as it arrives (up to the site's limit) through a pipe. An upgrade request's body, if
    /// it has one, is read whole first (nothing after it is HTTP).
    #[cold]
    #[inline(never)]
    fn proxy(&mut self, route: usize, req: Exchange<'_>) -> Decision<Pending> {
        let head = req.head;
        self.kind = Kind::Route;
        // Every method goes upstream (an application may speak WebDAV), after the site's
        // redirects.
        if let Some(resp) = self.site_app.redirect(head, req.buf) {
            return self.respond(head, req.buf, resp);
        }
        if crate::proxy::forward::has_dot_segment(head.path_bytes(req.buf)) {
            return self.respond(head, req.buf, text_status(400));
        }
        if let Framing::Length(n) = head.framing()
            && n > self.max_body()
        {
            return self.respond(head, req.buf, text_status(413).close());
        }
        match req.body {
            Some(body) => self.relay(route, head, req.buf, req.id, body.to_vec(), None),
            None if buffers_bodies(self.site_app, route)
                || head.header(req.buf, "upgrade").is_some() =>
            {
                let sink = Sink::Proxy(Vec::new());
                self.read_body(route, Params::default(), head, req.buf, sink)
            }
            None => {
                let (pipe_in, pipe_out) = crate::proxy::pipe::pipe();
                self.relay(route, head, req.buf, req.id, Vec::new(), Some(pipe_out));
                let sink = Sink::Relay(pipe_in);
                match self.read_body(route, Params::default(), head, req.buf, sink) {
                    Decision::ReadBody { limit, pending } => Decision::RelayBody { limit, pending },
                    other => other,
                }
            }
        }
    }

    /// Frames the upstream request for a proxied request with its whole `body`, or with the
    /// body still to come through `pipe`, and queues it for the driver.
    fn relay(
        &mut self,
        route: usize,
        head: &RequestHead,
        buf: &[u8],
        id: u64,
        body: Vec<u8>,
        pipe: Option<PipeOut>,
    ) -> Decision<Pending> {
        use crate::proxy::forward::{Client, request_head};
        let r = &self.site_app.proxies[route];
        // A chain that is extended gets the hop we heard from (each proxy adds its peer); a
        // field that is replaced names the client, as found behind trusted proxies.
        let named = if r.request.trust_forwarded {
            self.peer
        } else {
            self.client()
        };
        let client = Client {
            addr: named.map(|p| p.ip()),
            tls: self.tls,
            cert: self.client_cert(),
        };
        let len = match (&pipe, head.framing()) {
            // The length the client declared, or chunks as they come (HTTP/2 DATA without
            // a content-length, or a chunked HTTP/1.1 body).
            (Some(_), Framing::Length(n)) => Some(crate::h1c::ReqBody::Length(n)),
            (Some(_), _) => Some(crate::h1c::ReqBody::Chunked),
            (None, framing) => (!body.is_empty() || framing != Framing::None)
                .then_some(crate::h1c::ReqBody::Length(body.len() as u64)),
        };
        let mut out = Vec::with_capacity(buf.len() + 160);
        let forwarded = request_head(head, buf, client, &r.request, len, &mut out);
        let upgrade = forwarded.upgrade;
        let method = head.method();
        let job = crate::proxy::job::Job {
            client: self.token,
            id,
            site: self.site,
            route,
            upstream: r.upstream,
            head: out,
            body,
            pipe,
            forwarded,
            // RFC 9110 §9.2.2.
            idempotent: matches!(
                method,
                Method::Get
                    | Method::Head
                    | Method::Options
                    | Method::Put
                    | Method::Delete
                    | Method::Trace
            ),
            tries: 0,
            fresh: false,
            failed_server: None,
            key: r.hash_key.as_ref().and_then(|k| {
                crate::proxy::balance::request_key(k, head, buf, self.client().map(|p| p.ip()))
            }),
            started: self.started,
            log: self.log_meta(head, buf),
            // A HEAD answer has no body to compress: it only learns that answers vary.
            coding: self.site_app.compression.enabled.then(|| match method {
                Method::Head => crate::files::encoding::Encoding::Identity,
                _ => crate::files::encoding::choose(
                    head.header(buf, "accept-encoding"),
                    crate::compress::encodable,
                ),
            }),
            path: self
                .site_app
                .adds_proxied_fields()
                .then(|| head.path_bytes(buf).into()),
            then: None,
        };
        let job = match &r.auth {
            // The auth subrequest goes first, carrying the request it guards.
            Some(auth) => {
                let mut sub = Vec::with_capacity(256);
                crate::proxy::auth::subrequest(head, buf, client, auth, &mut sub);
                crate::proxy::job::Job {
                    client: job.client,
                    id: job.id,
                    site: job.site,
                    route: job.route,
                    upstream: auth.upstream,
                    head: sub,
                    body: Vec::new(),
                    pipe: None,
                    forwarded: crate::proxy::forward::Forwarded {
                        body: crate::h1c::ReqBody::None,
                        head_request: false,
                        upgrade: false,
                    },
                    idempotent: true,
                    tries: 0,
                    fresh: false,
                    failed_server: None,
                    key: None,
                    started: job.started,
                    log: None,
                    coding: None,
                    path: job.path.clone(),
                    then: Some(Box::new(job)),
                }
            }
            None => job,
        };
        self.io.jobs.push(job);
        Decision::Relay { upgrade }
    }

    /// What the worker needs to finish an answer that comes back later (see `Meta`); the
    /// request's layers move into it.
    fn meta(&mut self, h: &RequestHead, buf: &[u8]) -> Box<Meta> {
        let site = self.site_app;
        Box::new(Meta {
            head: h.method() == Method::Head,
            site: self.site,
            started: self.started,
            path: site.decorates.then(|| h.path_bytes(buf).to_vec()),
            accept_encoding: site
                .compression
                .enabled
                .then(|| h.header(buf, "accept-encoding").map(<[u8]>::to_vec))
                .flatten(),
            log: self.log_meta(h, buf),
            layered: self.io.layered.take(),
            cancel: None,
        })
    }

    /// What the access log needs of a request answered later, when its site logs.
    fn log_meta(&self, h: &RequestHead, buf: &[u8]) -> Option<LogMeta> {
        self.site_app.log?;
        let log = self.io.log.as_ref()?;
        Some(LogMeta::keep(log, self.client().copied(), self.tls, h, buf))
    }

    /// Hands a request with its whole body to a deferred handler.
    #[allow(clippy::too_many_arguments)]
    fn defer(
        &mut self,
        route: &Route,
        params: Params,
        head: OwnedHead,
        (body, trailers): (Vec<u8>, Option<BodyDecoder>),
        id: u64,
        f: &DeferredFn,
    ) -> Decision<Pending> {
        if self.io.outstanding >= self.app.max_deferred_per_worker {
            self.io.counters.refused();
            let resp = text_status(503).header("Retry-After", "1");
            return self.respond(&head.head, &head.bytes, resp);
        }
        let mut meta = self.meta(&head.head, &head.bytes);
        let ext = meta
            .layered
            .as_ref()
            .map(|l| l.ext.clone())
            .unwrap_or_default();
        // The worker keeps the request's layers, for the answer or the timeout's 503.
        let cancel = std::sync::Arc::new(Cancel::default());
        meta.cancel = Some(cancel.clone());
        let layered = meta.layered.take();
        self.io
            .waiting
            .insert((self.token, id), Waiting { cancel, layered });
        self.io.outstanding += 1;
        self.io.counters.set_outstanding(self.io.outstanding);
        let responder = Responder::new(self.io.inbox.clone(), self.token, id, meta);
        let req = OwnedRequest {
            head,
            names: route.names.clone(),
            params,
            body,
            trailers,
            peer: self.client().copied(),
            client_cert: if self.tls {
                self.io.client_cert.clone()
            } else {
                None
            },
            tls: self.tls,
            ext,
            state: self.app.stateful.then(|| self.app.router.state.clone()),
        };
        if catch_unwind(AssertUnwindSafe(|| f(req, responder))).is_err() {
            // Unwinding dropped the Responder: its 500 is on the way.
            tracing::error!("deferred handler panicked; answering 500");
        }
        Decision::Defer
    }

    /// A [`Handler::Incoming`] route's request: its handler is called now, with the body
    /// that came with the head or, while the body is still to come, the end the connection
    /// feeds as it reads (`Decision::RelayBody`: the answer may come before the body ends).
    /// No deadline: a proxied request's way (the handler keeps its own time). Out of line:
    /// no other route runs its code.
    #[cold]
    #[inline(never)]
    fn incoming(
        &mut self,
        index: usize,
        route: &Route,
        params: Params,
        req: Exchange<'_>,
        f: &IncomingFn,
    ) -> Decision<Pending> {
        let head = req.head;
        let declared = match head.framing() {
            Framing::Length(len) => Some(len),
            Framing::None => Some(0),
            _ => None,
        };
        if declared.unwrap_or(0) > self.app.max_stream_body_bytes {
            return self.respond(head, req.buf, text_status(413).close());
        }
        if self.io.outstanding >= self.app.max_deferred_per_worker {
            self.io.counters.refused();
            let resp = text_status(503).header("Retry-After", "1");
            return self.respond(head, req.buf, resp);
        }
        let link = req
            .body
            .is_none()
            .then(|| (self.io.inbox.clone(), self.token, req.id));
        let (feed, body) = super::incoming::incoming(declared, link);
        let meta = self.meta(head, req.buf);
        let ext = meta
            .layered
            .as_ref()
            .map(|l| l.ext.clone())
            .unwrap_or_default();
        self.io.outstanding += 1;
        self.io.counters.set_outstanding(self.io.outstanding);
        let responder = Responder::new(self.io.inbox.clone(), self.token, req.id, meta);
        let owned = OwnedRequest {
            head: OwnedHead::copy(head, req.buf),
            names: route.names.clone(),
            params,
            body: Vec::new(),
            trailers: None,
            peer: self.client().copied(),
            client_cert: if self.tls {
                self.io.client_cert.clone()
            } else {
                None
            },
            tls: self.tls,
            ext,
            state: self.app.stateful.then(|| self.app.router.state.clone()),
        };
        let feed = match req.body {
            Some(whole) => {
                feed.put(whole);
                feed.end(std::iter::empty());
                None
            }
            None => Some(feed),
        };
        if catch_unwind(AssertUnwindSafe(|| f(owned, body, responder))).is_err() {
            // Unwinding dropped the Responder: its 500 is on the way.
            tracing::error!("deferred handler panicked; answering 500");
        }
        let Some(feed) = feed else {
            return Decision::Relay { upgrade: false };
        };
        match self.read_body(index, params, head, req.buf, Sink::Incoming(feed)) {
            Decision::ReadBody { limit, pending } => Decision::RelayBody { limit, pending },
            other => other,
        }
    }

    /// A handler's (or a layer's) answer to request `id`: [`ConnApp::respond`], or a
    /// streamed body's way. Only these can be streamed: the server's own answers never are,
    /// so their path has no test for it, and neither has [`ConnApp`] the request's number.
    #[inline(always)]
    fn answer(
        &mut self,
        id: u64,
        head: &RequestHead,
        buf: &[u8],
        resp: Response,
    ) -> Decision<Pending> {
        if let Body::Stream(_) = resp.body {
            return self.respond_stream(id, head, buf, resp);
        }
        self.respond(head, buf, resp)
    }

    /// An answer decided now: compressed when eligible, logged. A layer's `after` hook or
    /// an error page that turns it into a streamed body is refused with a 500 (they answer
    /// what is decided, not a body produced later).
    #[inline(always)]
    fn respond(&mut self, head: &RequestHead, buf: &[u8], mut resp: Response) -> Decision<Pending> {
        if self.app.layered && self.io.layered.active {
            self.io.layered.run_after(&mut resp);
            unstream(&mut resp);
        }
        let site = self.site_app;
        if site.decorates {
            resp = site.decorate(head.path_bytes(buf), resp, generated);
            unstream(&mut resp);
        }
        // HEAD is compressed too, so its Content-Length matches GET's (RFC 9110 §9.3.2).
        // Eligibility first: most responses (small, binary, files) never look up the field.
        if compress::eligible(&resp, &site.compression) {
            let accept = head.header(buf, "accept-encoding");
            resp = compress::negotiate(resp, accept, &site.compression);
        }
        if self.app.timing {
            self.account(head, buf, &resp);
        }
        Decision::Respond(resp)
    }

    /// A handler answered with a streamed body: it goes the deferred answers' way (through
    /// the worker's inbox, where `Worker::answers` places its head and starts taking its
    /// pieces), so one path finishes every streamed answer.
    #[cold]
    #[inline(never)]
    fn respond_stream(
        &mut self,
        id: u64,
        head: &RequestHead,
        buf: &[u8],
        resp: Response,
    ) -> Decision<Pending> {
        let meta = self.meta(head, buf);
        self.io.outstanding += 1;
        self.io.counters.set_outstanding(self.io.outstanding);
        Responder::new(self.io.inbox.clone(), self.token, id, meta).send(resp);
        Decision::Defer
    }

    /// Counts the answer (metrics) and writes its access-log line, with the time since the
    /// request's head was in.
    #[inline(never)]
    fn account(&mut self, head: &RequestHead, buf: &[u8], resp: &Response) {
        let us = crate::sys::monotonic_us().saturating_sub(self.started);
        if self.app.metrics {
            self.io.counters.answered(resp.status, self.kind, us);
            if let Some(s) = self.io.site_counters.get(self.site) {
                s.answered(
                    resp.status,
                    body_bytes(head.method() == Method::Head, resp) as u64,
                );
            }
        }
        let peer = self.client().copied();
        let site = self.site_app;
        if let (Some(log), Some(sink)) = (self.io.log.as_mut(), site.log) {
            log.push(
                sink,
                &AccessEntry {
                    peer,
                    method: head.method_str(buf),
                    target: head.target(buf),
                    version: head.version(),
                    status: resp.status,
                    bytes: body_bytes(head.method() == Method::Head, resp),
                    referer: head.header(buf, "referer"),
                    user_agent: head.header(buf, "user-agent"),
                    request_time_us: Some(us),
                    tls: self.tls,
                    host: super::sites::request_host_bytes(head, buf),
                    server_name: &site.server_name,
                    fields: Fields::Head(head, buf),
                    upstream: None,
                },
            );
        }
    }
}

/// Calls a handler; a panic becomes a 500 that closes the connection, and so does an answer
/// that would switch protocols without the API for it ([`guard`]).
#[inline(always)]
fn call(f: impl FnOnce() -> Response) -> Response {
    let checked = || {
        let mut resp = f();
        guard(&mut resp);
        resp
    };
    catch_unwind(AssertUnwindSafe(checked)).unwrap_or_else(|_| {
        tracing::error!("handler panicked; answering 500");
        text_status(500).close()
    })
}

/// Replaces a handler's answer that cannot go out ([`checked`]) with a 500 that closes the
/// connection, and one log line: a 101 sent as a plain answer would leave the client speaking
/// a protocol this connection never switched to. A 200 without extra fields (most answers)
/// is let through on two comparisons; the rest is checked out of line (checked inline, the
/// request path of /json grew by 33 instructions, callgrind).
#[inline(always)]
pub(crate) fn guard(resp: &mut Response) {
    if resp.status != 200 || !resp.headers.is_empty() {
        guard_slow(resp);
    }
}

#[inline(never)]
fn guard_slow(resp: &mut Response) {
    if let Err(why) = checked(resp) {
        *resp = unsendable(resp.status, why);
    }
}

#[cold]
#[inline(never)]
fn unsendable(status: u16, why: Unsendable) -> Response {
    match why {
        Unsendable::Status => tracing::error!(
            status,
            "handler answered with a status that is not a final answer (switching protocols needs an API that hands the connection over, which handlers do not have yet); answering 500"
        ),
        Unsendable::Upgrade => tracing::error!(
            status,
            "handler set Upgrade on an answer other than 426 (switching protocols needs an API that hands the connection over, which handlers do not have yet); answering 500"
        ),
    }
    text_status(500).close()
}

/// A streamed body where only a decided answer can go (a layer's `after` hook, an error
/// page) becomes a 500 with one log line: sent as it is, it would look like a complete,
/// empty answer. Its writer learns `Gone` when the body is dropped.
#[inline(always)]
fn unstream(resp: &mut Response) {
    if let Body::Stream(_) = resp.body {
        unstreamed(resp);
    }
}

#[cold]
#[inline(never)]
fn unstreamed(resp: &mut Response) {
    tracing::error!(
        status = resp.status,
        "a layer or an error page answered with a streamed body, which only a handler can; answering 500"
    );
    *resp = text_status(500).close();
}

/// Calls a buffered handler with [`call`]'s guard, out of line and in one place. Inlined
/// into the request path, the guard's copy was left out of line by the optimizer whenever
/// that path grew (the proxy mount check did it: +43 instructions per request, callgrind);
/// here it is inlined into this one small function, whose call costs a few.
#[inline(never)]
fn call_buffered(h: &HandlerFn, req: &Request<'_>) -> Response {
    call(|| h(req))
}

/// A response whose body is the status line's reason.
pub(crate) fn text_status(status: u16) -> Response {
    Response::text(status_body(status)).status(status)
}

/// Whether `resp`'s body is the one [`text_status`] generates for its status (an error page
/// may replace it; a handler's own body stays).
pub(crate) fn generated(resp: &Response) -> bool {
    matches!(&resp.body, Body::Static(b) if *b == status_body(resp.status).as_bytes())
}

/// The body [`text_status`] sends for `status`.
fn status_body(status: u16) -> &'static str {
    match status {
        400 => "Bad Request\n",
        401 => "Unauthorized\n",
        403 => "Forbidden\n",
        404 => "Not Found\n",
        405 => "Method Not Allowed\n",
        413 => crate::h1::TOO_LARGE,
        429 => "Too Many Requests\n",
        500 => "Internal Server Error\n",
        501 => "Not Implemented\n",
        503 => "Service Unavailable\n",
        _ => "",
    }
}

/// The static-file mount's answer to a request below it (`rest`: the path under the prefix).
fn file_response(
    files: &StaticFiles,
    mount: &FilesMount,
    head: &RequestHead,
    req: &[u8],
    rest: &[u8],
) -> Response {
    if rest.is_empty() {
        // `/static` → `/static/`, so relative links in its index resolve below the mount.
        return redirect(format!("{}/", mount.prefix));
    }
    let fields = |resp: Response, headers: super::files::Headers| {
        headers.into_iter().fold(resp, |mut r, (name, value)| {
            if name.eq_ignore_ascii_case("content-type") {
                r.content_type = Some(Cow::Owned(value));
            } else if !name.eq_ignore_ascii_case("content-length") {
                // Written from the body's length; the module's fields are generated, not input.
                r.headers.push((Cow::Borrowed(name), Cow::Owned(value)));
            }
            r
        })
    };
    match files.resolve(head.method(), rest, &HeadView { head, buf: req }) {
        FileAnswer::Send {
            status,
            headers,
            file,
            offset,
            len,
            ..
        } => {
            fields(Response::new(status), headers).body(Body::File(FileBody { file, offset, len }))
        }
        FileAnswer::NotModified { headers } => fields(Response::new(304), headers),
        FileAnswer::PreconditionFailed { headers } => fields(Response::new(412), headers),
        FileAnswer::RangeNotSatisfiable { headers } => fields(Response::new(416), headers),
        FileAnswer::Redirect { location } => redirect(location),
        FileAnswer::Listing { content_type, body } => Response::new(200)
            .content_type(content_type)
            .body(Body::Owned(body.into_bytes())),
        FileAnswer::BadRequest => text_status(400),
        FileAnswer::Forbidden => text_status(403),
        FileAnswer::NotFound => text_status(404),
        FileAnswer::MethodNotAllowed => text_status(405)
            .try_header("Allow", ALLOW)
            .unwrap_or_else(|_| text_status(405)),
        FileAnswer::Error(e) => {
            tracing::warn!(error = %e, "static file could not be served");
            text_status(500)
        }
    }
}

/// `301` to `location`.
fn redirect(location: String) -> Response {
    text_status(301)
        .try_header("Location", location)
        .unwrap_or_else(|_| text_status(400))
}

/// Whether proxy route `route` of `site` reads bodies whole before sending them up.
fn buffers_bodies(site: &SiteApp, route: usize) -> bool {
    site.proxies
        .get(route)
        .is_some_and(|r| r.mount.request_buffering)
}
