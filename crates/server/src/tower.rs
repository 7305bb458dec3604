//! Serving a tower `Service<http::Request<Body>>` (an axum `Router`, a tower-http stack) on
//! the engine: [`Router::service`] mounts one under a path prefix, for every method;
//! [`router`] (or [`Router::from_service`]) makes a router of one alone, [`serve`] serves it. Enabled by the `tower` cargo
//! feature; axum is not a dependency (any service of the `http` 1 types fits).
//! [`Router::tower_layer`] wraps native routes in a tower `Layer` (tower-http's), the route
//! being the [`NativeRoute`] service inside it: its request is made, and the layered answer
//! sent, by the same code as a mount's (below); see that method for the order and what
//! crosses.
//!
//! Owns the translation both ways, nothing of the protocol: the engine reads and frames the
//! request (HTTP/1.1, HTTP/2, HTTP/3, TLS, sites, access rules, layers) and hands it here at
//! its head ([`Router::deferred_incoming`]); the service's future runs on the caller's
//! runtime through [`Spawn`]; its answer goes back through the request's [`Responder`].
//!
//! - **The request**: method, URI (scheme and authority from an absolute-form target, else
//!   Host or `:authority`, then the path with the mount's prefix taken off, as axum's `nest`
//!   does, and the query), version and every field, made on the worker from the parsed head:
//!   its bytes copied once, the URI's parts and the field values slices of that copy. Extensions: the client's [`SocketAddr`](std::net::SocketAddr) (read it in axum with
//!   `Extension<SocketAddr>`; behind trusted proxies, the client they name), the TLS client
//!   certificate as `Arc<`[`ClientCert`](crate::tls::ClientCert)`>` when one was verified, and [`OriginalUri`] (the
//!   URI before the prefix came off). The body is a [`Body`] that yields pieces as they
//!   arrive: the connection reads only as fast as the service takes (backpressure), up to
//!   `Config::max_stream_body_bytes`; a chunked body's trailer fields come as its last frame.
//! - **The answer**: status and fields, hop-by-hop fields dropped (RFC 9110 §7.6.1:
//!   Connection and those it names, Keep-Alive, Proxy-Connection, TE, Transfer-Encoding,
//!   Upgrade; Content-Length and Date are the engine's). A body that is over at once, or says
//!   its exact size and is at most [`INLINE_BODY_BYTES`], is sent whole with its
//!   Content-Length (and the site's compression may apply); any other is streamed piece by
//!   piece as the service produces it (with its Content-Length when it says its exact size,
//!   else chunked on HTTP/1.1; DATA frames on HTTP/2 and HTTP/3), the head going out before
//!   the first piece is ready; one that runs over or ends short of its size is cut off.
//!   HEAD requests reach the service; the engine sends the head only, with the
//!   Content-Length the service declared. Trailer fields follow the body (a chunked body's
//!   trailer section over HTTP/1.1, a HEADERS frame over HTTP/2 and HTTP/3), but for those
//!   that may not be trailers (RFC 9110 §6.5.1), which are dropped.
//! - **Failures**: a service error, a panic, or a body error before the head is a 500; a body
//!   error after it cuts the answer off (HTTP/1.1 closes with the chunked body incomplete,
//!   HTTP/2 and HTTP/3 reset the stream), so a client never takes it for whole.
//! - **Readiness**: `poll_ready` says ready before each `call`, on the same clone. hyper keeps
//!   a clone per connection and awaits its readiness there, holding that connection's next
//!   requests back. Here each worker keeps one clone and uses it for request after request:
//!   polled on the worker (its waker a no-op), and when ready, called there at once (so the
//!   synchronous part of `call` runs on the worker; the future it returns runs through
//!   [`Spawn`]). A clone that is not ready leaves with the request it was polled for, whose own
//!   task awaits its `poll_ready` (a place it took in a queue, a concurrency limit's, goes
//!   with it rather than waiting on a worker that may get no further request), and the next
//!   request gets a new clone: a clone that is not ready holds up no other request. A clone
//!   whose `poll_ready` fails, or that panics, is dropped (tower: a failed service is discarded).
//!
//! No deadline applies (as for a proxied request): wrap the service in a timeout layer if it
//! may wait long. A request still running counts against `Config::max_deferred_per_worker`.
//! A mount at `/` takes every path, so the site's static files answer none. Upgrades are not
//! carried through a service (its 101 is answered 500, as any handler's): serve WebSocket
//! with [`Router::ws`] beside the mount.
#![forbid(unsafe_code)]

use std::any::Any;
use std::borrow::Cow;
use std::cell::RefCell;
use std::future::{Future, poll_fn};
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes};
use http::uri::{Authority, PathAndQuery, Scheme};
use http_body::{Frame, SizeHint};
use tower_service::Service;

use crate::around::catch_panic;
use crate::deferred::{HeadView, Responder, Spawn};
use crate::incoming::IncomingBody;
use crate::response::Response;
use crate::router::Router;
use crate::{Method, Version};

/// Errors of services and bodies, as logged.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub use crate::incoming::BodyError;
// tower layers on native routes.
pub use crate::tower_native::{MAX_LAYERED_BODY_BYTES, NativeRoute};

/// The largest answer body of known exact size sent whole (with Content-Length); a larger
/// one is streamed, so an answer never sits in memory twice.
pub const INLINE_BODY_BYTES: usize = 64 * 1024;

/// The methods a mount takes (CONNECT and unknown methods are answered 501 before routing).
const METHODS: [Method; 8] = [
    Method::Get,
    Method::Head,
    Method::Post,
    Method::Put,
    Method::Delete,
    Method::Options,
    Method::Patch,
    Method::Trace,
];

/// A body as a service sees it, an [`http_body::Body`] of [`Bytes`]: a mount's request body
/// (the pieces as they arrive), and under [`Router::tower_layer`] a native route's request
/// body (whole, with its trailer fields) and its answer's body (whole, a file read in
/// pieces, or a [`Response::stream`] as it is written, with its trailer fields).
#[derive(Debug)]
pub struct Body(Inner);

#[derive(Debug)]
enum Inner {
    /// A mount's request body, read as the client sends it.
    Incoming(IncomingBody),
    /// A native route's request or answer (`tower_native.rs`).
    Native(crate::tower_native::NativeBody),
}

/// An empty body (a tower layer's own answer, such as a timeout's, is made with one).
impl Default for Body {
    fn default() -> Self {
        Body(Inner::Native(Default::default()))
    }
}

impl Body {
    /// A native route's body (`tower_native.rs`).
    pub(crate) fn native(body: crate::tower_native::NativeBody) -> Body {
        Body(Inner::Native(body))
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let body = match &mut self.0 {
            Inner::Incoming(body) => body,
            Inner::Native(body) => return body.poll_frame(cx),
        };
        match body.poll_chunk(cx) {
            Poll::Ready(None) => {
                let mut fields = http::HeaderMap::new();
                for (name, value) in body.take_trailers() {
                    // The parser admitted tokens and field values: both convert.
                    if let (Ok(n), Ok(v)) = (
                        http::HeaderName::from_bytes(&name),
                        http::HeaderValue::from_bytes(&value),
                    ) {
                        fields.append(n, v);
                    }
                }
                Poll::Ready((!fields.is_empty()).then(|| Ok(Frame::trailers(fields))))
            }
            other => other.map(|piece| piece.map(|r| r.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Inner::Incoming(body) => body.is_end(),
            Inner::Native(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Inner::Incoming(body) => match body.remaining() {
                Some(n) => SizeHint::with_exact(n),
                None => SizeHint::default(),
            },
            Inner::Native(body) => body.size_hint(),
        }
    }
}

/// What a mount serves: a tower service of `http` requests with a [`Body`], answering with
/// an [`AnswerBody`], cloned for each worker and for each request that finds its worker's
/// clone not ready (hence `Clone`, and `Sync` since every worker clones the one it was given:
/// an axum `Router` is, and so are tower-http's layers over one). Implemented for every such
/// service.
pub trait HttpService<B>:
    Service<
        http::Request<Body>,
        Response = http::Response<B>,
        Error: Into<BoxError>,
        Future: Send + 'static,
    > + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S, B> HttpService<B> for S where
    S: Service<
            http::Request<Body>,
            Response = http::Response<B>,
            Error: Into<BoxError>,
            Future: Send + 'static,
        > + Clone
        + Send
        + Sync
        + 'static
{
}

/// An answer's body a mount can send: any [`http_body::Body`] that may move to the runtime's
/// threads. Implemented for every such body.
pub trait AnswerBody: http_body::Body<Data: Send, Error: Into<BoxError>> + Send + 'static {}

impl<B> AnswerBody for B where B: http_body::Body<Data: Send, Error: Into<BoxError>> + Send + 'static
{}

/// The request's URI before the mount's prefix was taken off (an extension on every request;
/// the service's own URI is the rest).
#[derive(Clone, Debug)]
pub struct OriginalUri(pub http::Uri);

/// What every route of one mount shares.
struct Mount<S, Sp> {
    svc: S,
    spawn: Sp,
    /// Bytes of the path the mount's prefix takes off (0 at `/`).
    strip: usize,
}

impl Router {
    /// Mounts `svc` at `prefix` (`/` for every path) for every method: a request to
    /// `prefix` or below goes to the service with the prefix taken off its path (`/api/users`
    /// under `/api` reaches it as `/users`, and `/api` as `/`), as axum's `nest` does; its
    /// future runs through `spawn` (for tokio: `move |f| { handle.spawn(f); }`). Routes of
    /// this router with more specific patterns answer first, whatever the order: a path one
    /// of them matches is theirs, for every method (another method there is their 405).
    ///
    /// # Panics
    /// If `prefix` does not start with `/`, ends with one (other than `/` itself), or holds
    /// a `{` or `}`: a programming error caught at start-up.
    pub fn service<S, B>(mut self, prefix: &str, svc: S, spawn: impl Spawn) -> Router
    where
        S: HttpService<B>,
        B: AnswerBody,
    {
        assert!(
            prefix.starts_with('/')
                && (prefix == "/" || !prefix.ends_with('/'))
                && !prefix.contains(['{', '}']),
            "service prefix {prefix:?} must start with '/', not end with one, and hold no braces"
        );
        let root = prefix == "/";
        let mount = Arc::new(Mount {
            svc,
            spawn,
            strip: if root { 0 } else { prefix.len() },
        });
        let patterns = if root {
            vec!["/{*rest}".to_string()]
        } else {
            vec![prefix.to_string(), format!("{prefix}/{{*rest}}")]
        };
        for pattern in &patterns {
            for method in METHODS {
                let mount = mount.clone();
                self = self.incoming_in_place(method, pattern, move |req, body, res| {
                    mount.call::<B>(req, body, res)
                });
            }
        }
        self
    }

    /// A router that sends every request to `svc` (see [`Router::service`]).
    pub fn from_service<S, B>(svc: S, spawn: impl Spawn) -> Router
    where
        S: HttpService<B>,
        B: AnswerBody,
    {
        Router::new().service("/", svc, spawn)
    }
}

/// [`Router::from_service`]: a router that sends every request to `svc`.
pub fn router<S, B>(svc: S, spawn: impl Spawn) -> Router
where
    S: HttpService<B>,
    B: AnswerBody,
{
    Router::from_service(svc, spawn)
}

/// Serves `svc` alone with `config` until SIGINT or SIGTERM (a graceful shutdown): what
/// [`router`], [`Server::bind`](crate::Server::bind) and
/// [`run_until_signal`](crate::Server::run_until_signal) do together.
pub fn serve<S, B>(config: crate::Config, svc: S, spawn: impl Spawn) -> std::io::Result<()>
where
    S: HttpService<B>,
    B: AnswerBody,
{
    crate::Server::bind(config, router(svc, spawn))?.run_until_signal()
}

thread_local! {
    /// This thread's clone of each mount's service, ready to be polled for the next request
    /// (see the module doc's readiness): one per worker. A mount that is gone leaves its
    /// entry until the next mount seen on this thread prunes it.
    static CLONES: RefCell<Vec<Kept>> = const { RefCell::new(Vec::new()) };
}

/// A worker's clone of one mount's service.
struct Kept {
    /// The mount (its address is the key; held weakly, so the address stays its own).
    mount: Weak<dyn Any + Send + Sync>,
    /// Out while a request polls and calls it (or gone with a request that awaits it).
    svc: Option<Box<dyn Any>>,
}

impl<S, Sp> Mount<S, Sp>
where
    S: Clone + Send + Sync + 'static,
    Sp: Spawn,
{
    /// This thread's clone of the service, taken out (a new one when there is none).
    fn take_clone(self: &Arc<Self>) -> Box<dyn Any> {
        let key = Arc::as_ptr(self) as *const ();
        let kept = CLONES.with(|c| {
            let mut c = c.borrow_mut();
            let k = c
                .iter_mut()
                .find(|k| k.mount.as_ptr() as *const () == key)?;
            k.svc.take()
        });
        kept.unwrap_or_else(|| Box::new(self.svc.clone()))
    }

    /// Keeps `svc` as this thread's clone of the service.
    fn keep(self: &Arc<Self>, svc: Box<dyn Any>) {
        let key = Arc::as_ptr(self) as *const ();
        CLONES.with(|c| {
            let mut c = c.borrow_mut();
            if let Some(k) = c.iter_mut().find(|k| k.mount.as_ptr() as *const () == key) {
                k.svc = Some(svc);
                return;
            }
            c.retain(|k| k.mount.strong_count() > 0);
            let mount: Weak<Self> = Arc::downgrade(self);
            c.push(Kept {
                mount: mount as Weak<dyn Any + Send + Sync>,
                svc: Some(svc),
            });
        });
    }

    /// On the worker: the request made, the worker's clone of the service polled and, when
    /// ready, called; the answer's future spawned.
    fn call<B: AnswerBody>(self: &Arc<Self>, view: HeadView<'_>, body: IncomingBody, res: Responder)
    where
        S: HttpService<B>,
    {
        let head = view.head.method() == Method::Head;
        let req = match request(&view, Body(Inner::Incoming(body)), self.strip) {
            Ok(req) => req,
            Err(why) => {
                tracing::debug!(why, "request not representable for the service; 400");
                return res.send(crate::app::dispatch::text_status(400));
            }
        };
        let mut kept = self.take_clone();
        let Some(svc) = kept.downcast_mut::<S>() else {
            unreachable!("a mount's clones are of its service's type")
        };
        let mut cx = Context::from_waker(Waker::noop());
        let called = match catch_unwind(AssertUnwindSafe(|| svc.poll_ready(&mut cx))) {
            Ok(Poll::Ready(Ok(()))) => catch_unwind(AssertUnwindSafe(|| svc.call(req))),
            Ok(Poll::Ready(Err(e))) => {
                let e: BoxError = e.into();
                tracing::error!(error = %e, "service failed; answering 500");
                return res.send(crate::app::dispatch::text_status(500));
            }
            Ok(Poll::Pending) => {
                // It waits in the request's own task, with whatever place its poll took.
                let Ok(svc) = kept.downcast::<S>() else {
                    unreachable!("a mount's clones are of its service's type")
                };
                let mut svc = *svc;
                let fut = async move {
                    poll_fn(|cx| svc.poll_ready(cx))
                        .await
                        .map_err(Into::<BoxError>::into)?;
                    svc.call(req).await.map_err(Into::<BoxError>::into)
                };
                return self.spawn.spawn(Box::pin(answer(Box::pin(fut), res, head)));
            }
            Err(e) => Err(e),
        };
        let Ok(fut) = called else {
            tracing::error!("service panicked; answering 500");
            return res.send(crate::app::dispatch::text_status(500).close());
        };
        self.keep(kept);
        let fut = async move { fut.await.map_err(Into::<BoxError>::into) };
        self.spawn.spawn(Box::pin(answer(Box::pin(fut), res, head)));
    }
}

/// Awaits the service's answer (a panic caught: a 500 that closes) and sends it. The
/// service's future comes boxed: held inline (twice: as the argument and as awaited), it made
/// this future pass 1 KiB, an allocation for which glibc's malloc sweeps its fast bins
/// (`malloc_consolidate`) every time; two smaller ones cost less (callgrind).
async fn answer<B: AnswerBody>(
    fut: Pin<Box<impl Future<Output = Result<http::Response<B>, BoxError>>>>,
    res: Responder,
    head: bool,
) {
    match catch_panic(fut).await {
        Some(Ok(resp)) => send(res, resp, head).await,
        Some(Err(e)) => {
            tracing::error!(error = %e, "service failed; answering 500");
            res.send(crate::app::dispatch::text_status(500));
        }
        None => {
            tracing::error!("service panicked; answering 500");
            res.send(crate::app::dispatch::text_status(500).close());
        }
    }
}

/// The `http` request for `view` with `body`, its path without the mount's first `strip`
/// bytes. The head's bytes are copied once; the URI's parts and the field values are slices
/// of that copy. A mount's requests and those of native routes under a tower layer
/// (`tower_native.rs`) are made here.
pub(crate) fn request(
    view: &HeadView<'_>,
    body: Body,
    strip: usize,
) -> Result<http::Request<Body>, &'static str> {
    let head = view.head;
    let bytes = Bytes::copy_from_slice(view.buf);
    let buf = &bytes[..];
    let path = head.path(buf);
    let rest = match path.get(strip..) {
        Some("") | None => "/",
        Some(rest) => rest,
    };
    let query = head.query(buf);
    // RFC 9112 §3.2.2: an absolute-form target's authority overrides Host (as sites do).
    let host = match head.target_form() {
        linerate_http1::TargetForm::Absolute => {
            crate::app::sites::absolute_authority(head.target(buf).as_bytes())
        }
        _ => head.host(buf),
    };
    let (scheme, authority) = match host.filter(|h| !h.is_empty()) {
        Some(host) => {
            let scheme = if view.tls {
                Scheme::HTTPS
            } else {
                Scheme::HTTP
            };
            let authority = Authority::from_maybe_shared(share(&bytes, host)).map_err(|_| "URI")?;
            (Some(scheme), Some(authority))
        }
        None => (None, None),
    };
    let method = match head.method() {
        Method::Get => http::Method::GET,
        Method::Head => http::Method::HEAD,
        Method::Post => http::Method::POST,
        Method::Put => http::Method::PUT,
        Method::Delete => http::Method::DELETE,
        Method::Options => http::Method::OPTIONS,
        Method::Patch => http::Method::PATCH,
        Method::Trace => http::Method::TRACE,
        _ => http::Method::from_bytes(head.method_str(buf).as_bytes()).map_err(|_| "method")?,
    };
    let mut fields = http::HeaderMap::with_capacity(head.header_count());
    for (name, value) in head.headers(buf) {
        let name = http::HeaderName::from_bytes(name).map_err(|_| "field name")?;
        let value = http::HeaderValue::from_maybe_shared(share(&bytes, value))
            .map_err(|_| "field value")?;
        fields.append(name, value);
    }
    let uri = uri(&bytes, scheme.clone(), authority.clone(), rest, query)?;
    let original = if strip == 0 {
        uri.clone()
    } else {
        self::uri(&bytes, scheme, authority, path, query)?
    };
    let mut out = http::Request::new(body);
    *out.method_mut() = method;
    *out.uri_mut() = uri;
    *out.version_mut() = match head.version() {
        Version::Http10 => http::Version::HTTP_10,
        Version::Http11 => http::Version::HTTP_11,
        Version::Http2 => http::Version::HTTP_2,
        Version::Http3 => http::Version::HTTP_3,
    };
    *out.headers_mut() = fields;
    let ext = out.extensions_mut();
    if let Some(peer) = view.peer {
        ext.insert(peer);
    }
    if let Some(cert) = view.client_cert {
        ext.insert(cert.clone());
    }
    ext.insert(OriginalUri(original));
    Ok(out)
}

/// The URI of `path` and `query` (slices of `bytes`, or not: the path may be a `/` of
/// our own), with `scheme` and `authority` when the request named its host.
fn uri(
    bytes: &Bytes,
    scheme: Option<Scheme>,
    authority: Option<Authority>,
    path: &str,
    query: Option<&str>,
) -> Result<http::Uri, &'static str> {
    // `path?query` as the request sent it, when both lie in `bytes` that way; else joined.
    let sent = match (span(bytes, path.as_bytes()), query) {
        (Some(p), None) => Some(p),
        (Some(p), Some(q)) => span(bytes, q.as_bytes())
            .filter(|q| q.start == p.end + 1)
            .map(|q| p.start..q.end),
        (None, _) => None,
    };
    let path_and_query = match sent {
        Some(range) => PathAndQuery::from_maybe_shared(bytes.slice(range)),
        None => match query {
            Some(q) => PathAndQuery::try_from(format!("{path}?{q}")),
            None => PathAndQuery::try_from(path),
        },
    }
    .map_err(|_| "URI")?;
    let mut parts = http::uri::Parts::default();
    parts.scheme = scheme;
    parts.authority = authority;
    parts.path_and_query = Some(path_and_query);
    http::Uri::from_parts(parts).map_err(|_| "URI")
}

/// Where `s` lies in `bytes`, when it is a slice of them.
fn span(bytes: &[u8], s: &[u8]) -> Option<Range<usize>> {
    let start = (s.as_ptr() as usize).checked_sub(bytes.as_ptr() as usize)?;
    (start + s.len() <= bytes.len()).then_some(start..start + s.len())
}

/// `s` as a slice of `bytes` (no copy), or copied when it is not one.
fn share(bytes: &Bytes, s: &[u8]) -> Bytes {
    match span(bytes, s) {
        Some(range) => bytes.slice(range),
        None => Bytes::copy_from_slice(s),
    }
}

/// Fields the service may not set: hop-by-hop (RFC 9110 §7.6.1) or the engine's own;
/// `connection` is the answer's Connection fields.
fn dropped<'v>(
    name: &http::HeaderName,
    mut connection: impl Iterator<Item = &'v http::HeaderValue>,
) -> bool {
    use http::header::*;
    matches!(
        *name,
        CONNECTION | TE | TRANSFER_ENCODING | UPGRADE | CONTENT_LENGTH | DATE
    ) || name == "keep-alive"
        || name == "proxy-connection"
        || connection.any(|v| {
            v.to_str().is_ok_and(|v| {
                v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case(name.as_str()))
            })
        })
}

/// `name` as a `'static` string when it is one of the fields answers commonly carry (no
/// copy), else copied.
fn field_name(name: &http::HeaderName) -> Cow<'static, str> {
    Cow::Borrowed(match name.as_str() {
        "access-control-allow-credentials" => "access-control-allow-credentials",
        "access-control-allow-headers" => "access-control-allow-headers",
        "access-control-allow-methods" => "access-control-allow-methods",
        "access-control-allow-origin" => "access-control-allow-origin",
        "access-control-expose-headers" => "access-control-expose-headers",
        "access-control-max-age" => "access-control-max-age",
        "allow" => "allow",
        "cache-control" => "cache-control",
        "content-disposition" => "content-disposition",
        "content-encoding" => "content-encoding",
        "content-language" => "content-language",
        "etag" => "etag",
        "expires" => "expires",
        "last-modified" => "last-modified",
        "link" => "link",
        "location" => "location",
        "retry-after" => "retry-after",
        "set-cookie" => "set-cookie",
        "vary" => "vary",
        "www-authenticate" => "www-authenticate",
        "x-content-type-options" => "x-content-type-options",
        "x-request-id" => "x-request-id",
        other => return Cow::Owned(other.to_string()),
    })
}

/// `value` as a `'static` string when it is a Content-Type answers commonly carry (no
/// copy), else copied.
fn content_type(value: &str) -> Cow<'static, str> {
    Cow::Borrowed(match value {
        "application/json" => "application/json",
        "text/plain; charset=utf-8" => "text/plain; charset=utf-8",
        "text/html; charset=utf-8" => "text/html; charset=utf-8",
        "application/octet-stream" => "application/octet-stream",
        other => return Cow::Owned(other.to_string()),
    })
}

/// Sends the service's answer: its head, then its body whole or streamed (see [`convert`]).
async fn send<B: AnswerBody>(res: Responder, resp: http::Response<B>, head: bool) {
    let (parts, body) = resp.into_parts();
    let mut body = std::pin::pin!(body);
    match convert(parts, body.as_mut(), head).await {
        Converted::Whole(out) => res.send(out),
        Converted::Streamed(out, rest) => {
            res.send(out);
            rest.pump(body).await;
        }
    }
}

/// What [`convert`] made of a service's answer.
pub(crate) enum Converted {
    /// The whole answer: its body was over, or small, or it failed (a 500).
    Whole(Response),
    /// The answer with a streamed body, and what goes on to feed it ([`Rest::pump`]) once
    /// the answer is sent.
    Streamed(Response, Rest),
}

/// The rest of a streamed answer: its writer, and the pieces read before the head went.
pub(crate) struct Rest {
    writer: crate::streaming::BodyWriter,
    first: Vec<u8>,
    /// A HEAD request's answer of a declared length: nothing more is written.
    head_only: bool,
}

/// The answer `parts` and `body` make, as the engine sends it: status and fields (the
/// hop-by-hop and the engine's own dropped), then the body whole (over at once, or of known
/// size up to [`INLINE_BODY_BYTES`]) or streamed. To a HEAD request (`head`), the length the
/// service declared is kept (RFC 9110 §9.3.2: the fields GET would have). The body is polled
/// here until the head can go; a [`Converted::Streamed`] answer's [`Rest`] reads the rest.
pub(crate) async fn convert<B: AnswerBody>(
    parts: http::response::Parts,
    mut body: Pin<&mut B>,
    head: bool,
) -> Converted {
    let mut out = Response::new(parts.status.as_u16());
    let connection = parts.headers.get_all(http::header::CONNECTION);
    for (name, value) in &parts.headers {
        if dropped(name, connection.iter()) {
            continue;
        }
        let Ok(value) = std::str::from_utf8(value.as_bytes()) else {
            tracing::debug!(%name, "service set a field value that is not UTF-8; dropped");
            continue;
        };
        if name == http::header::CONTENT_TYPE {
            out = out.content_type(content_type(value));
            continue;
        }
        out = match out.try_header(field_name(name), value.to_string()) {
            Ok(out) => out,
            Err(e) => {
                // `try_header` consumed the answer: rebuild it is not possible, so refuse.
                tracing::error!(%name, error = %e, "service set an invalid field; answering 500");
                return Converted::Whole(crate::app::dispatch::text_status(500));
            }
        };
    }
    if head {
        let declared = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if let Some(n) = declared {
            // A streamed answer of that length: the engine sends its head only.
            let (out, writer) = out.stream_sized(n);
            let rest = Rest {
                writer,
                first: Vec::new(),
                head_only: true,
            };
            return Converted::Streamed(out, rest);
        }
    }
    if body.is_end_stream() {
        return Converted::Whole(out);
    }
    let exact = body.size_hint().exact();
    let small = exact.is_some_and(|n| n <= INLINE_BODY_BYTES as u64);
    let mut whole = Vec::new();
    let mut trailers = None;
    // Pieces that are ready now: all of a small body of known size, else as long as they
    // come without waiting (the head goes out before a piece the service is still making).
    loop {
        let frame = poll_fn(|cx| match body.as_mut().poll_frame(cx) {
            Poll::Pending if !small => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
            Poll::Ready(f) => Poll::Ready(Some(f.map(|r| r.map_err(Into::<BoxError>::into)))),
        })
        .await;
        match frame {
            Some(Some(Ok(frame))) => {
                match frame.into_data() {
                    Ok(mut data) => {
                        while data.has_remaining() {
                            let chunk = data.chunk();
                            whole.extend_from_slice(chunk);
                            let n = chunk.len();
                            data.advance(n);
                        }
                    }
                    Err(frame) => trailers = frame.into_trailers().ok(),
                }
                if body.is_end_stream() {
                    let out = out.body(crate::Body::Owned(whole));
                    return Converted::Whole(with_trailers(out, trailers.as_ref()));
                }
                if !small && whole.len() > INLINE_BODY_BYTES {
                    break;
                }
            }
            Some(None) => {
                let out = out.body(crate::Body::Owned(whole));
                return Converted::Whole(with_trailers(out, trailers.as_ref()));
            }
            Some(Some(Err(e))) => {
                tracing::error!(error = %e, "service's answer body failed; answering 500");
                return Converted::Whole(crate::app::dispatch::text_status(500));
            }
            None => break,
        }
    }
    // A body that said its exact size keeps it (Content-Length); the writer cuts it off if
    // it then runs over or ends short.
    let (out, writer) = match exact {
        Some(n) => out.stream_sized(n),
        None => out.stream(),
    };
    let rest = Rest {
        writer,
        first: whole,
        head_only: false,
    };
    Converted::Streamed(out, rest)
}

/// The trailer fields of `map` an answer may carry: those that are valid and may be
/// trailers (RFC 9110 §6.5.1); any other is dropped, with a log line.
fn trailer_fields(map: &http::HeaderMap) -> crate::Trailers {
    let mut fields = Vec::with_capacity(map.len());
    for (name, value) in map {
        let value = std::str::from_utf8(value.as_bytes());
        let Some(value) = value
            .ok()
            .filter(|v| crate::response::check_trailer(name.as_str(), v).is_ok())
        else {
            tracing::debug!(%name, "service's answer has a trailer field it may not have; dropped");
            continue;
        };
        fields.push((field_name(name), Cow::Owned(value.to_string())));
    }
    fields
}

/// `out` with the trailer fields of `map` ([`trailer_fields`]).
fn with_trailers(mut out: Response, map: Option<&http::HeaderMap>) -> Response {
    if let Some(map) = map {
        let fields = trailer_fields(map);
        if !fields.is_empty() {
            out.trailers = Some(Box::new(fields));
        }
    }
    out
}

impl Rest {
    /// Writes the rest of `body` into the answer sent with this writer: what was read
    /// before the head went, then each piece as it comes. A body error cuts the answer off.
    pub(crate) async fn pump<B: AnswerBody>(self, mut body: Pin<&mut B>) {
        let Rest {
            writer,
            first,
            head_only,
        } = self;
        if head_only {
            return drop(writer);
        }
        if !first.is_empty() && writer.send(&first).await.is_err() {
            return; // the client is gone (or the size was wrong): the body is dropped unfinished
        }
        drop(first);
        let mut trailers = None;
        loop {
            let frame = poll_fn(|cx| body.as_mut().poll_frame(cx))
                .await
                .map(|r| r.map_err(Into::<BoxError>::into));
            match frame {
                Some(Ok(frame)) => {
                    let mut data = match frame.into_data() {
                        Ok(data) => data,
                        Err(frame) => {
                            trailers = frame.into_trailers().ok();
                            continue;
                        }
                    };
                    while data.has_remaining() {
                        let chunk = data.chunk();
                        if writer.send(chunk).await.is_err() {
                            return;
                        }
                        let n = chunk.len();
                        data.advance(n);
                    }
                }
                None => {
                    let fields = trailers.as_ref().map(trailer_fields).unwrap_or_default();
                    if fields.is_empty() {
                        return writer.end();
                    }
                    // Checked already: none is refused.
                    return writer.end_with_trailers(fields).unwrap_or(());
                }
                Some(Err(e)) => {
                    tracing::error!(error = %e, "service's answer body failed; cutting it off");
                    return writer.abort();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `http` request the adapter makes of `raw` under a mount that takes `strip` bytes.
    fn made(raw: &str, strip: usize, tls: bool) -> http::Request<Body> {
        let mut head = linerate_http1::RequestHead::new();
        let n = match head.parse(raw.as_bytes(), &Default::default()) {
            Ok(linerate_http1::Parsed::Complete(n)) => n,
            other => panic!("{raw:?}: {other:?}"),
        };
        let view = HeadView {
            head: &head,
            buf: &raw.as_bytes()[..n],
            peer: None,
            client_cert: None,
            tls,
        };
        let (_feed, body) = crate::app::incoming::incoming(Some(0), None);
        request(&view, Body(Inner::Incoming(body)), strip).expect("representable")
    }

    #[test]
    fn the_request_uri_is_the_target_without_the_prefix_with_scheme_and_authority() {
        // (request, prefix length, TLS, the service's URI, OriginalUri)
        let cases = [
            (
                "GET /a/b?x=1 HTTP/1.1\r\nHost: h.test\r\n\r\n",
                0,
                false,
                "http://h.test/a/b?x=1",
                "http://h.test/a/b?x=1",
            ),
            (
                "GET /api/users/1 HTTP/1.1\r\nHost: h.test:8443\r\n\r\n",
                4,
                true,
                "https://h.test:8443/users/1",
                "https://h.test:8443/api/users/1",
            ),
            // The mount's own path is `/` to the service (as axum's `nest`), its query kept.
            (
                "GET /api?q=%20 HTTP/1.1\r\nHost: h.test\r\n\r\n",
                4,
                false,
                "http://h.test/?q=%20",
                "http://h.test/api?q=%20",
            ),
            (
                "GET /api HTTP/1.1\r\nHost: h.test\r\n\r\n",
                4,
                false,
                "http://h.test/",
                "http://h.test/api",
            ),
            // RFC 9112 §3.2.2: an absolute-form target's authority is the host.
            (
                "GET http://abs.test/p?k HTTP/1.1\r\nHost: h.test\r\n\r\n",
                0,
                false,
                "http://abs.test/p?k",
                "http://abs.test/p?k",
            ),
            (
                "GET http://abs.test HTTP/1.1\r\nHost: h.test\r\n\r\n",
                0,
                false,
                "http://abs.test/",
                "http://abs.test/",
            ),
            // HTTP/1.0 without Host: the path alone.
            ("GET /old?v HTTP/1.0\r\n\r\n", 0, false, "/old?v", "/old?v"),
        ];
        for (raw, strip, tls, want, original) in cases {
            let req = made(raw, strip, tls);
            assert_eq!(req.uri().to_string(), want, "{raw:?}");
            let got = req
                .extensions()
                .get::<OriginalUri>()
                .map(|o| o.0.to_string());
            assert_eq!(got.as_deref(), Some(original), "{raw:?}");
        }
    }

    #[test]
    fn the_request_carries_method_version_and_every_field_in_order() {
        let raw = "PUT /u HTTP/1.1\r\nHost: h.test\r\nX-Id: a\r\nAccept: */*\r\nx-id: b\r\nContent-Length: 0\r\n\r\n";
        let req = made(raw, 0, false);
        assert_eq!(req.method(), http::Method::PUT);
        assert_eq!(req.version(), http::Version::HTTP_11);
        let ids: Vec<_> = req.headers().get_all("x-id").iter().collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(req.headers()["accept"], "*/*");
        assert_eq!(req.headers()["host"], "h.test");
        assert_eq!(req.headers().len(), 5);
    }

    #[test]
    fn common_answer_field_names_and_content_types_are_not_copied() {
        for name in [
            "vary",
            "access-control-allow-origin",
            "x-request-id",
            "set-cookie",
        ] {
            let got = field_name(&http::HeaderName::from_static(name));
            assert!(matches!(got, Cow::Borrowed(n) if n == name), "{name}");
        }
        let got = field_name(&http::HeaderName::from_static("x-other"));
        assert!(matches!(got, Cow::Owned(ref n) if n == "x-other"));
        assert!(matches!(
            content_type("application/json"),
            Cow::Borrowed("application/json")
        ));
        assert!(matches!(content_type("text/csv"), Cow::Owned(ref v) if v == "text/csv"));
    }

    #[test]
    fn hop_by_hop_fields_and_those_connection_names_are_dropped() {
        // RFC 9110 §7.6.1.
        let conn = [http::HeaderValue::from_static("close, x-secret")];
        let cases = [
            ("connection", true),
            ("keep-alive", true),
            ("proxy-connection", true),
            ("te", true),
            ("transfer-encoding", true),
            ("upgrade", true),
            ("x-secret", true),
            // The engine's own.
            ("content-length", true),
            ("date", true),
            ("content-type", false),
            ("set-cookie", false),
            ("vary", false),
        ];
        for (name, want) in cases {
            let name = http::HeaderName::from_static(name);
            assert_eq!(dropped(&name, conn.iter()), want, "{name}");
        }
    }
}
