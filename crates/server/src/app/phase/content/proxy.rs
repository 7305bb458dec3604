//! Proxy mounts: a request below one (after the site's redirects) framed for its upstream and
//! queued for the driver as a `Job` — with its whole body, or at once with its body following
//! through a pipe — behind a forward-auth subrequest when the mount has one. A caching mount
//! without forward auth looks in its store first, and a fresh whole hit for an HTTP/1.1
//! client is answered here as an ordinary answer (`Body::Cached`), with no job.
//!
//! Owns the upstream request's head and the job; must not touch a socket (the driver sends
//! it, `driver/upstream.rs`).
#![forbid(unsafe_code)]

use linerate_http1::{Framing, Method, RequestHead};

use super::body::Sink;
use crate::app::ConnApp;
use crate::app::dispatch::Pending;
use crate::app::phase::headers::text_status;
use crate::app::request::Params;
use crate::app::response::{Body, Cached, Response};
use crate::app::sites::SiteApp;
use crate::h1::{Decision, Exchange};
use crate::proxy::pipe::PipeOut;
use crate::stats::Kind;

impl<'a> ConnApp<'a> {
    /// The proxy mount of the site at hand that the request's path lies below, if any (every
    /// method but CONNECT goes up). Asked by the access phase's one out-of-line call.
    #[inline(always)]
    pub(crate) fn proxy_mount(&self, head: &RequestHead, buf: &[u8]) -> Option<usize> {
        self.site_app
            .proxy(head.path_bytes(buf))
            .filter(|_| head.method() != Method::Connect)
    }

    /// An HTTP/2 extended CONNECT to a proxied path: the proxy carries WebSocket as an
    /// HTTP/1.1 upgrade only, so 501 (the setting is not announced where paths are proxied;
    /// this answers one that a reload proxied since).
    #[cold]
    #[inline(never)]
    pub(crate) fn tunnel_not_proxied(&mut self, req: Exchange<'_>) -> Decision<Pending> {
        let why = "WebSocket over HTTP/2 is not proxied; use HTTP/1.1\n";
        self.respond(req.head, req.buf, Response::text(why).status(501))
    }

    /// A request below a proxy mount goes to the driver as a [`Job`](crate::proxy::job::Job):
    /// with its body when that came whole with the head; else at once, its body following
    /// as it arrives (up to the site's limit) through a pipe. An upgrade request's body, if
    /// it has one, is read whole first (nothing after it is HTTP).
    #[cold]
    #[inline(never)]
    pub(crate) fn proxy(&mut self, route: usize, req: Exchange<'_>) -> Decision<Pending> {
        let head = req.head;
        self.kind = Kind::Route;
        if self.io.trace.traced() {
            // Its span's `http.route`: the mount, whether the cache or the upstream answers.
            self.io.trace.route = Some(self.site_app.proxies[route].name.clone());
        }
        // A caching mount's `PURGE` is the cache's, never the upstream's; a
        // mount without a cache forwards it as any other method.
        if super::purge::is_purge(head, req.buf) && self.site_app.proxies[route].cache.is_some() {
            return self.purge(route, head, req.buf, req.id);
        }
        // Every method goes upstream (an application may speak WebDAV), after the site's
        // redirects.
        if let Some(resp) = self.rewrite(head, req.buf) {
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
            Some(body) => self.relay(route, head, req.buf, req.id, body.to_vec(), None, req.h1),
            // A gRPC-Web request the mount translates: its body whole first (a `-text` one
            // is decoded before it goes up; browsers send unary and server-streaming calls).
            None if buffers_body(self.site_app, route, head, req.buf)
                || head.header(req.buf, "upgrade").is_some()
                || web_request(self.site_app, route, head, req.buf).is_some() =>
            {
                let sink = Sink::Proxy(Vec::new());
                self.read_body(route, Params::default(), head, req.buf, sink)
            }
            None => {
                let (pipe_in, pipe_out) = crate::proxy::pipe::pipe();
                self.relay(
                    route,
                    head,
                    req.buf,
                    req.id,
                    Vec::new(),
                    Some(pipe_out),
                    false,
                );
                let sink = Sink::Relay(pipe_in);
                match self.read_body(route, Params::default(), head, req.buf, sink) {
                    Decision::ReadBody { limit, pending } => Decision::RelayBody { limit, pending },
                    other => other,
                }
            }
        }
    }

    /// Frames the upstream request for a proxied request with its whole `body`, or with the
    /// body still to come through `pipe`, and queues it for the driver. `h1`: the client's
    /// connection is HTTP/1.1 and may be answered a fresh hit at once ([`Body::Cached`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn relay(
        &mut self,
        route: usize,
        head: &RequestHead,
        buf: &[u8],
        id: u64,
        mut body: Vec<u8>,
        pipe: Option<PipeOut>,
        h1: bool,
    ) -> Decision<Pending> {
        use crate::proxy::forward::{Client, request_head};
        let web = web_request(self.site_app, route, head, buf);
        if let Some(w) = web {
            match crate::proxy::grpc_web::request_body(w, body) {
                Some(grpc) => body = grpc,
                None => return self.respond(head, buf, text_status(400)),
            }
        }
        let r = &self.site_app.proxies[route];
        // A chain that is extended gets the hop we heard from (each proxy adds its peer); a
        // field that is replaced names the client, as found behind trusted proxies.
        let named = if r.request.trust_forwarded {
            self.peer
        } else {
            self.client()
        }
        .map(|p| p.ip());
        // A caching mount without forward auth looks in its store first: a hit needs no
        // upstream request framed (with forward auth, the driver looks after the check). A
        // request asking to upgrade is the upstream's to answer (a tunnel is never a stored
        // answer), so the cache leaves it alone.
        let caching = r
            .cache
            .as_ref()
            .filter(|_| head.header(buf, "upgrade").is_none());
        let mut cache = None;
        let content = crate::proxy::cache::has_body(head, &body, pipe.is_some());
        // A request with a body bypasses the cache: the driver plans it so (no look here).
        if let Some(c) = caching
            && r.auth.is_none()
            && !content
        {
            match crate::proxy::cache::plan_here(c, head, buf, self.tls) {
                crate::proxy::cache::Here::Hit(hit) => {
                    if h1
                        && pipe.is_none()
                        && let Some(vary) =
                            hit.fresh_vary(self.site_app, route, self.coding(head, buf))
                    {
                        let fresh = crate::proxy::cache::Fresh::new(hit, vary);
                        return self.answer_fresh(head, buf, fresh);
                    }
                    return self.relay_hit(route, head, buf, id, hit, pipe);
                }
                crate::proxy::cache::Here::Planned(x) => cache = Some(x),
            }
        }
        let len = match (&pipe, head.framing()) {
            // The length the client declared, or chunks as they come (HTTP/2 DATA without
            // a content-length, or a chunked HTTP/1.1 body).
            (Some(_), Framing::Length(n)) => Some(crate::h1c::ReqBody::Length(n)),
            (Some(_), _) => Some(crate::h1c::ReqBody::Chunked),
            (None, framing) => (!body.is_empty() || framing != Framing::None)
                .then_some(crate::h1c::ReqBody::Length(body.len() as u64)),
        };
        let mut out = self.io.spares.head(buf.len() + 160);
        // The upstream exchange's span is drawn for its traceparent.
        let traceparent = if self.io.trace.traced() {
            self.io.trace.upstream_traceparent(&mut self.io.ids)
        } else {
            None
        };
        let trace = &self.io.trace;
        let client = Client {
            addr: named,
            tls: self.tls,
            cert: self.client_cert(),
            ids: crate::proxy::forward::Ids {
                request_id: match (&self.app.request_id_field, trace.request_id.is_none()) {
                    (Some(f), false) => Some((f, trace.request_id.text())),
                    _ => None,
                },
                traceparent: traceparent.as_deref(),
                tracestate: trace.tracestate.as_deref(),
            },
        };
        let forwarded = request_head(head, buf, client, &r.request, len, &mut out);
        if web.is_some() {
            crate::proxy::grpc_web::request_head(&mut out);
        }
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
            unprocessed: 0,
            avoid_conn: None,
            key: r.hash_key.as_ref().and_then(|k| {
                crate::proxy::balance::request_key(k, head, buf, self.client().map(|p| p.ip()))
            }),
            started: self.started,
            log: self.log_meta(head, buf),
            coding: self.coding(head, buf),
            path: self
                .site_app
                .adds_proxied_fields()
                .then(|| head.path_bytes(buf).into()),
            then: None,
            // With forward auth, the cache plans it in the driver after the check: an
            // answer from the cache must pass the same check as one from upstream.
            cache: cache.or_else(|| {
                caching.map(|c| {
                    let req = crate::proxy::cache::CacheReq::copy(head, buf, self.tls, content);
                    Box::new(crate::proxy::cache::Exchange::new(c.clone(), req))
                })
            }),
            background: false,
            hit: None,
            web,
            epoch: 0,
            copy: None,
            waits_until: 0,
        };
        let job = match &r.auth {
            // The auth subrequest goes first, carrying the request it guards.
            Some(auth) => {
                let mut sub = Vec::with_capacity(256);
                // The check has no span of its own: it is a child of the request's.
                let traceparent = self.io.trace.server_traceparent();
                let client = Client {
                    ids: crate::proxy::forward::Ids {
                        traceparent: traceparent.as_deref(),
                        ..client.ids
                    },
                    ..client
                };
                crate::proxy::auth::subrequest(head, buf, client, auth, &mut sub);
                let blank = crate::proxy::job::Job::blank(
                    job.client,
                    job.id,
                    job.site,
                    job.route,
                    auth.upstream,
                );
                crate::proxy::job::Job {
                    head: sub,
                    started: job.started,
                    path: job.path.clone(),
                    copy: Some(auth.copy.clone()),
                    then: Some(Box::new(job)),
                    ..blank
                }
            }
            None => job,
        };
        let job = self.io.spares.boxed(job);
        self.io.jobs.push(job);
        Decision::Relay { upgrade }
    }
}

impl<'a> ConnApp<'a> {
    /// The coding the client's Accept-Encoding chooses for a proxied answer on a site that
    /// compresses (`None`: the site does not). A HEAD answer has no body to compress: it
    /// only learns that answers vary.
    fn coding(&self, head: &RequestHead, buf: &[u8]) -> Option<crate::files::encoding::Encoding> {
        self.site_app
            .compression
            .enabled
            .then(|| match head.method() {
                Method::Head => crate::files::encoding::Encoding::Identity,
                _ => crate::files::encoding::choose(
                    head.header(buf, "accept-encoding"),
                    crate::compress::encodable,
                ),
            })
    }

    /// `fresh` as this request's answer ([`Body::Cached`], which its HTTP/1.1 connection
    /// writes from the entry's head rendered once), logged and counted as the driver's hit
    /// is (`Worker::answer_job`).
    fn answer_fresh(
        &mut self,
        head: &RequestHead,
        buf: &[u8],
        fresh: crate::proxy::cache::Fresh,
    ) -> Decision<Pending> {
        let status = fresh.status();
        let resp = Response {
            body: Body::Cached(Cached(std::sync::Arc::new(fresh))),
            ..Response::new(status)
        };
        if self.app.timing {
            self.account(head, buf, &resp);
        }
        Decision::Respond(resp)
    }

    /// A request the mount's cache answered: a job that carries the answer, for the driver to
    /// write into this connection (nothing goes upstream).
    #[cold]
    #[inline(never)]
    fn relay_hit(
        &mut self,
        route: usize,
        head: &RequestHead,
        buf: &[u8],
        id: u64,
        hit: crate::proxy::cache::Hit,
        pipe: Option<PipeOut>,
    ) -> Decision<Pending> {
        let r = &self.site_app.proxies[route];
        let blank = crate::proxy::job::Job::blank(self.token, id, self.site, route, r.upstream);
        let job = self.io.spares.boxed(crate::proxy::job::Job {
            pipe,
            forwarded: crate::proxy::forward::Forwarded {
                body: crate::h1c::ReqBody::None,
                head_request: head.method() == Method::Head,
                upgrade: false,
            },
            started: self.started,
            log: self.log_meta(head, buf),
            path: self
                .site_app
                .adds_proxied_fields()
                .then(|| head.path_bytes(buf).into()),
            hit: Some(Box::new(hit)),
            // As for a miss: the hit is compressed for a client that takes a coding.
            coding: self.coding(head, buf),
            ..blank
        });
        self.io.jobs.push(job);
        Decision::Relay { upgrade: false }
    }
}

/// The gRPC-Web form of a request to proxy route `route` of `site`, when the mount
/// translates gRPC-Web (`grpc_web`) and the request is one.
fn web_request(
    site: &SiteApp,
    route: usize,
    head: &RequestHead,
    buf: &[u8],
) -> Option<crate::proxy::grpc_web::Web> {
    site.proxies
        .get(route)
        .filter(|r| r.mount.grpc_web)
        .and_then(|_| crate::proxy::grpc_web::web_of(head.header(buf, "content-type")))
}

/// Whether proxy route `route` of `site` reads this request's body whole before sending it
/// up: the mount buffers (the default), the body is no gRPC call, and it is known to fit in
/// [`REQUEST_BUFFER_BYTES`]: by its declared length, or, for a chunked one, by the site's
/// body limit. An HTTP/2 or HTTP/3 body that declares no length is a stream by choice (a
/// browser's streaming `fetch` upload sends none): it goes up as it comes.
fn buffers_body(site: &SiteApp, route: usize, head: &RequestHead, buf: &[u8]) -> bool {
    use crate::config::REQUEST_BUFFER_BYTES;
    let buffering = site
        .proxies
        .get(route)
        .is_some_and(|r| r.mount.request_buffering);
    let fits = match head.framing() {
        Framing::Length(n) => n <= REQUEST_BUFFER_BYTES,
        Framing::Chunked => site.max_body_bytes <= REQUEST_BUFFER_BYTES,
        _ => false,
    };
    buffering && fits && !head.header(buf, "content-type").is_some_and(is_grpc_call)
}

/// A gRPC call's content type (gRPC-Web's is not one), which may be a stream of messages:
/// never read whole. gRPC comes over HTTP/2 or HTTP/3 only, so a build without HTTP/2 sees
/// none.
fn is_grpc_call(content_type: &[u8]) -> bool {
    #[cfg(feature = "http2")]
    return crate::h2::answer_fields::is_grpc(content_type);
    #[cfg(not(feature = "http2"))]
    {
        let _ = content_type;
        false
    }
}
