//! Serving a tower `Service<http::Request<Body>>` (an axum `Router`, a tower-http stack) on
//! the engine: [`Router::service`] mounts one under a path prefix, for every method;
//! [`router`] (or [`Router::from_service`]) makes a router of one alone, [`serve`] serves it. Enabled by the `tower` cargo
//! feature; axum is not a dependency (any service of the `http` 1 types fits).
//!
//! Owns the translation both ways, nothing of the protocol: the engine reads and frames the
//! request (HTTP/1.1, HTTP/2, HTTP/3, TLS, sites, access rules, layers) and hands it here at
//! its head ([`Router::deferred_incoming`]); the service's future runs on the caller's
//! runtime through [`Spawn`]; its answer goes back through the request's [`Responder`].
//!
//! - **The request**: method, URI (scheme and authority from Host or `:authority`, then the
//!   path with the mount's prefix taken off, as axum's `nest` does, and the query), version
//!   and every field. Extensions: the client's [`SocketAddr`](std::net::SocketAddr) (read it in axum with
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
//!   Content-Length the service declared. Response trailers are dropped.
//! - **Failures**: a service error, a panic, or a body error before the head is a 500; a body
//!   error after it cuts the answer off (HTTP/1.1 closes with the chunked body incomplete,
//!   HTTP/2 and HTTP/3 reset the stream), so a client never takes it for whole.
//! - **Readiness**: each request gets a clone of the service (as hyper does), whose
//!   `poll_ready` is awaited before `call`.
//!
//! No deadline applies (as for a proxied request): wrap the service in a timeout layer if it
//! may wait long. A request still running counts against `Config::max_deferred_per_worker`.
//! A mount at `/` takes every path, so the site's static files answer none. Upgrades are not
//! carried through a service (its 101 is answered 500, as any handler's): serve WebSocket
//! with [`Router::ws`] beside the mount.
#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body::{Frame, SizeHint};
use tower_service::Service;

use crate::around::catch_panic;
use crate::deferred::{OwnedRequest, Responder, Spawn};
use crate::incoming::IncomingBody;
use crate::response::Response;
use crate::router::Router;
use crate::{Method, Version};

/// Errors of services and bodies, as logged.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub use crate::incoming::BodyError;

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

/// A request body as a service sees it: an [`http_body::Body`] of the pieces as they arrive.
#[derive(Debug)]
pub struct Body(IncomingBody);

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.0.poll_chunk(cx) {
            Poll::Ready(None) => {
                let mut fields = http::HeaderMap::new();
                for (name, value) in self.0.take_trailers() {
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
        self.0.is_end()
    }

    fn size_hint(&self) -> SizeHint {
        match self.0.remaining() {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}

/// What a mount serves: a tower service of `http` requests with a [`Body`], answering with
/// an [`AnswerBody`], cloned for each request (hence `Clone`, and `Sync` since every worker
/// clones the one it was given: an axum `Router` is, and so are tower-http's layers over
/// one). Implemented for every such service.
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
                self = self.deferred_incoming(method, pattern, move |req, body, res| {
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

impl<S, Sp: Spawn> Mount<S, Sp> {
    /// On the worker: the request made, the service cloned, its future spawned.
    fn call<B: AnswerBody>(&self, req: OwnedRequest, body: IncomingBody, res: Responder)
    where
        S: HttpService<B>,
    {
        let head = req.method() == Method::Head;
        let req = match request(&req, body, self.strip) {
            Ok(req) => req,
            Err(why) => {
                tracing::debug!(why, "request not representable for the service; 400");
                return res.send(crate::app::dispatch::text_status(400));
            }
        };
        let mut svc = self.svc.clone();
        self.spawn.spawn(Box::pin(async move {
            let answer = catch_panic(async move {
                poll_fn(|cx| svc.poll_ready(cx))
                    .await
                    .map_err(Into::<BoxError>::into)?;
                svc.call(req).await.map_err(Into::<BoxError>::into)
            });
            match answer.await {
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
        }));
    }
}

/// The `http` request for `req`, its body to come through `body`, its path without the
/// mount's first `strip` bytes.
fn request(
    req: &OwnedRequest,
    body: IncomingBody,
    strip: usize,
) -> Result<http::Request<Body>, &'static str> {
    let head = &req.head.head;
    let buf = &req.head.bytes;
    let path = head.path(buf);
    let rest = match path.get(strip..) {
        Some("") | None => "/",
        Some(rest) => rest,
    };
    let query = head.query(buf);
    let path_and_query = |path: &str| match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    let scheme = if req.is_tls() { "https" } else { "http" };
    let uri = |path: &str| -> Result<http::Uri, &'static str> {
        let mut b = http::Uri::builder();
        if let Some(host) = head.host(buf).filter(|h| !h.is_empty()) {
            b = b.scheme(scheme).authority(host);
        }
        b.path_and_query(path_and_query(path))
            .build()
            .map_err(|_| "URI")
    };
    let mut out = http::Request::builder()
        .method(http::Method::from_bytes(head.method_str(buf).as_bytes()).map_err(|_| "method")?)
        .uri(uri(rest)?)
        .version(match head.version() {
            Version::Http10 => http::Version::HTTP_10,
            Version::Http11 => http::Version::HTTP_11,
            Version::Http2 => http::Version::HTTP_2,
            Version::Http3 => http::Version::HTTP_3,
        })
        .body(Body(body))
        .map_err(|_| "head")?;
    let fields = out.headers_mut();
    fields.reserve(head.header_count());
    for (name, value) in head.headers(buf) {
        let name = http::HeaderName::from_bytes(name).map_err(|_| "field name")?;
        let value = http::HeaderValue::from_bytes(value).map_err(|_| "field value")?;
        fields.append(name, value);
    }
    let original = if strip == 0 {
        out.uri().clone()
    } else {
        uri(path)?
    };
    let ext = out.extensions_mut();
    if let Some(peer) = req.peer {
        ext.insert(peer);
    }
    if let Some(cert) = &req.client_cert {
        ext.insert(cert.clone());
    }
    ext.insert(OriginalUri(original));
    Ok(out)
}

/// Fields the service may not set: hop-by-hop (RFC 9110 §7.6.1) or the engine's own.
fn dropped(name: &http::HeaderName, connection: &[http::HeaderValue]) -> bool {
    use http::header::*;
    matches!(
        *name,
        CONNECTION | TE | TRANSFER_ENCODING | UPGRADE | CONTENT_LENGTH | DATE
    ) || name == "keep-alive"
        || name == "proxy-connection"
        || connection.iter().any(|v| {
            v.to_str().is_ok_and(|v| {
                v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case(name.as_str()))
            })
        })
}

/// Sends the service's answer: its head, then its body whole or streamed. To a HEAD
/// request (`head`), the length the service declared is kept (RFC 9110 §9.3.2: the fields
/// GET would have).
async fn send<B: AnswerBody>(res: Responder, resp: http::Response<B>, head: bool) {
    let (parts, body) = resp.into_parts();
    let mut out = Response::new(parts.status.as_u16());
    let connection: Vec<http::HeaderValue> = parts
        .headers
        .get_all(http::header::CONNECTION)
        .iter()
        .cloned()
        .collect();
    for (name, value) in &parts.headers {
        if dropped(name, &connection) {
            continue;
        }
        let Ok(value) = std::str::from_utf8(value.as_bytes()) else {
            tracing::debug!(%name, "service set a field value that is not UTF-8; dropped");
            continue;
        };
        if name == http::header::CONTENT_TYPE {
            out = out.content_type(value.to_string());
            continue;
        }
        out = match out.try_header(Cow::Owned(name.as_str().to_string()), value.to_string()) {
            Ok(out) => out,
            Err(e) => {
                // `try_header` consumed the answer: rebuild it is not possible, so refuse.
                tracing::error!(%name, error = %e, "service set an invalid field; answering 500");
                return res.send(crate::app::dispatch::text_status(500));
            }
        };
    }
    let mut body = Box::pin(body);
    if head {
        let declared = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if let Some(n) = declared {
            // A streamed answer of that length: the engine sends its head only.
            let (out, writer) = out.stream_sized(n);
            res.send(out);
            return drop(writer);
        }
    }
    if body.is_end_stream() {
        return res.send(out);
    }
    let exact = body.size_hint().exact();
    let small = exact.is_some_and(|n| n <= INLINE_BODY_BYTES as u64);
    let mut whole = Vec::new();
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
                if let Ok(mut data) = frame.into_data() {
                    while data.has_remaining() {
                        let chunk = data.chunk();
                        whole.extend_from_slice(chunk);
                        let n = chunk.len();
                        data.advance(n);
                    }
                }
                if body.is_end_stream() {
                    return res.send(out.body(crate::Body::Owned(whole)));
                }
                if !small && whole.len() > INLINE_BODY_BYTES {
                    break;
                }
            }
            Some(None) => return res.send(out.body(crate::Body::Owned(whole))),
            Some(Some(Err(e))) => {
                tracing::error!(error = %e, "service's answer body failed; answering 500");
                return res.send(crate::app::dispatch::text_status(500));
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
    res.send(out);
    if !whole.is_empty() && writer.send(&whole).await.is_err() {
        return; // the client is gone (or the size was wrong): the body is dropped unfinished
    }
    drop(whole);
    loop {
        let frame = poll_fn(|cx| body.as_mut().poll_frame(cx))
            .await
            .map(|r| r.map_err(Into::<BoxError>::into));
        match frame {
            Some(Ok(frame)) => {
                let Ok(mut data) = frame.into_data() else {
                    continue; // trailers: not sent
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
            None => return writer.end(),
            Some(Err(e)) => {
                tracing::error!(error = %e, "service's answer body failed; cutting it off");
                return writer.abort();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert_eq!(dropped(&name, &conn), want, "{name}");
        }
    }
}
