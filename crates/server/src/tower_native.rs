//! Tower layers on native routes ([`Router::tower_layer`]): a `tower::Layer` (tower-http's
//! compression, timeout, body limit, headers, trace, auth) wraps a router's own routes, the
//! rest of each route's chain being the [`NativeRoute`] service inside it.
//!
//! Owns the adapter both ways and nothing of the protocol: a tower layer is one more async
//! layer of the route's chain (`around.rs`), built once at start; its request is made by the
//! mount's code (`tower.rs`'s `request`), the native answer becomes an `http::Response<Body>`
//! here, and the layered answer goes back through `tower.rs`'s `convert`. A route under no
//! tower layer never runs this code, and the dispatcher does not know it exists.
#![forbid(unsafe_code)]

use std::convert::Infallible;
use std::future::{Future, poll_fn};
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body::{Frame, SizeHint};
use linerate_http1::{Limits, Parsed, RequestHead, Version};
use tower_service::Service;

use crate::around::{Around, Next, ResponseFuture};
use crate::deferred::{HeadView, OwnedHead, OwnedRequest, Spawn};
use crate::incoming::BodyError;
use crate::response::Response;
use crate::router::Router;
use crate::runtime::OnWorker;
use crate::streaming::Chan;
use crate::tower::{AnswerBody, Body, BoxError, Converted};

/// The largest request body a tower layer may hand a native route (what a request
/// decompression layer makes of the body the route took, say): past it the answer is 413.
pub const MAX_LAYERED_BODY_BYTES: usize = 64 << 20;

/// Bytes of a file answer read at a time when a tower layer reads it.
const FILE_PIECE_BYTES: u64 = 64 * 1024;

impl Router {
    /// Wraps each of this router's routes in the tower layer `layer` (`tower::Layer`, as
    /// tower-http's `CompressionLayer`, `TimeoutLayer`, `RequestBodyLimitLayer`,
    /// `SetResponseHeaderLayer`, `TraceLayer`, `ValidateRequestHeaderLayer`, or a
    /// `ServiceBuilder` of them): the service it wraps is the rest of the route's chain, a
    /// [`NativeRoute`] taking an `http::Request` of any body and answering an
    /// `http::Response<`[`Body`]`>`; the layered service answers an `http::Response` of any
    /// [`http_body::Body`] (a compressed one, say). Axum's `Router::layer` is this; linerate's
    /// own [`Router::layer`] takes its sync [`Layer`](crate::Layer) hooks, which stay as
    /// they are.
    ///
    /// A tower layer is an async layer ([`Router::around`]) in all but its trait, and takes
    /// its place in their order: **the last added is the outermost** (tower's order), a
    /// router's tower and async layers are outside those of the groups merged into it
    /// (`group(|g| g.get(…).tower_layer(L))` wraps one route), and the router's sync layers
    /// ([`Router::layer`]) are outside them all. In
    /// `.tower_layer(CompressionLayer::new()).around(auth).timeout(d)` the timeout is
    /// outermost, `auth` next, and compression sees the handler's answer first. A route under
    /// one is served the deferred way, as under [`Router::around`] (its body read whole, up to
    /// its limit, before the layer sees it; on a streaming or gRPC route, whose chain runs at the
    /// head, the layers see an empty body and the body flows to the handler after them); routes
    /// outside the group pay nothing.
    ///
    /// The layered service is made once (`layer.layer(NativeRoute)`) and cloned for each
    /// request, whose clone is polled ready, then called (axum does the same per request):
    /// state a layer shares between clones (a semaphore) is shared, state a clone owns is its
    /// own. What the route's handler sees: the fields and body as the layers left them (the
    /// method, path and query are the ones routed on, as axum's routing happens before its
    /// route layers), its path parameters, state and sync layers' [`Extensions`](crate::Extensions),
    /// and the `http::Extensions` the layers saw ([`OwnedRequest::extension`]`::<http::Extensions>()`).
    /// A layer's own answer (a 401, a 408) is sent as the layer made it.
    pub fn tower_layer<L, S, B>(self, layer: L) -> Router
    where
        L: ::tower_layer::Layer<NativeRoute, Service = S>,
        S: Service<http::Request<Body>, Response = http::Response<B>>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
        B: AnswerBody,
    {
        self.around(Tower {
            svc: layer.layer(NativeRoute::default()),
        })
    }
}

/// The service a tower layer wraps ([`Router::tower_layer`]): the rest of a native route's
/// chain (async layers inside the tower layer, then the handler). Takes an `http::Request`
/// of any [`http_body::Body`] (what the layers made of the request's), answers an
/// `http::Response<`[`Body`]`>`: the handler's status, fields, body (whole, a file, or a
/// [`Response::stream`] as it is written) and trailer fields. It never fails, and is always
/// ready.
#[derive(Clone, Copy, Debug, Default)]
pub struct NativeRoute {
    _private: (),
}

/// What travels from the tower layer's way in to its [`NativeRoute`] in the `http`
/// request's extensions: the native request (less its body) and the rest of its chain,
/// taken once. (`http::Extensions` holds `Clone` values, hence the shared slot.)
#[derive(Clone)]
struct Pass(Arc<Mutex<Option<(OwnedRequest, Next)>>>);

/// What a native answer carries through a tower layer that `http` has no place for.
#[derive(Clone, Copy, Debug)]
struct NativeFlags {
    /// The connection closes after it ([`Response::close`]).
    close: bool,
    /// A rejection, which an [`ErrorRenderer`](crate::ErrorRenderer) may render again.
    rejection: bool,
}

/// A tower layer's service over a native route, as one async layer of the route's chain.
struct Tower<S> {
    svc: S,
}

impl<S, B> Around for Tower<S>
where
    S: Service<http::Request<Body>, Response = http::Response<B>> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: AnswerBody,
{
    fn call(&self, mut req: OwnedRequest, next: Next) -> ResponseFuture {
        let head = req.method() == crate::Method::Head;
        let mut request = match http_request(&mut req) {
            Ok(request) => request,
            Err(why) => {
                tracing::debug!(why, "request not representable for a tower layer; 400");
                return Box::pin(std::future::ready(crate::app::dispatch::text_status(400)));
            }
        };
        let pass = Pass(Arc::new(Mutex::new(Some((req, next)))));
        request.extensions_mut().insert(pass);
        let mut svc = self.svc.clone();
        // The two halves are boxed apart: inline, the answer's conversion made this future
        // kilobytes large, and every move of it a memcpy of that size. The answer's body is
        // boxed the moment the layered service gives it: a layer's body may hold its
        // encoder's state inline (CompressionLayer's: about 6 KB), which each move of the
        // answer on its way out of the call would copy.
        Box::pin(async move {
            let called = Box::pin(async move {
                poll_fn(|cx| svc.poll_ready(cx))
                    .await
                    .map_err(Into::<BoxError>::into)?;
                let (parts, body) = svc
                    .call(request)
                    .await
                    .map_err(Into::<BoxError>::into)?
                    .into_parts();
                Ok::<_, BoxError>((parts, Box::pin(body)))
            });
            match called.await {
                Ok((parts, body)) => Box::pin(native_answer(parts, body, head)).await,
                Err(e) => {
                    tracing::error!(error = %e, "tower layer failed; answering 500");
                    crate::app::dispatch::text_status(500)
                }
            }
        })
    }
}

/// The `http` request of `req` (the mount's conversion), its body moved out into a [`Body`]
/// with its trailer fields; the sync layers' [`Extensions`](crate::Extensions) go along.
fn http_request(req: &mut OwnedRequest) -> Result<http::Request<Body>, &'static str> {
    let mut trailers = http::HeaderMap::new();
    if let Some(decoder) = &req.trailers {
        for (name, value) in decoder.trailers().iter() {
            // The parser admitted tokens and field values: both convert.
            if let (Ok(n), Ok(v)) = (
                http::HeaderName::from_bytes(name),
                http::HeaderValue::from_bytes(value),
            ) {
                trailers.append(n, v);
            }
        }
    }
    let body = NativeBody {
        kind: Kind::Whole(Some(Bytes::from(std::mem::take(&mut req.body)))),
        trailers: (!trailers.is_empty()).then(|| Box::new(trailers)),
    };
    let view = HeadView {
        head: &req.head.head,
        buf: &req.head.bytes,
        peer: req.peer,
        client_cert: req.client_cert.as_ref(),
        tls: req.tls,
    };
    let mut out = crate::tower::request(&view, Body::native(body), 0)?;
    if !req.ext.is_empty() {
        out.extensions_mut().insert(req.ext.clone());
    }
    Ok(out)
}

/// The layered service's answer as the engine sends it (`tower.rs`'s `convert`); a
/// streamed body goes on being read on the worker's runtime after the answer is returned.
async fn native_answer<B: AnswerBody>(
    parts: http::response::Parts,
    mut body: Pin<Box<B>>,
    head: bool,
) -> Response {
    let flags = parts.extensions.get::<NativeFlags>().copied();
    // A body a layer encoded is no longer the one an error renderer would replace.
    let encoded = parts.headers.contains_key(http::header::CONTENT_ENCODING);
    let mut out = match crate::tower::convert(parts, body.as_mut(), head).await {
        Converted::Whole(out) => out,
        Converted::Streamed(out, rest) => {
            OnWorker.spawn(Box::pin(async move { rest.pump(body.as_mut()).await }));
            out
        }
    };
    if let Some(flags) = flags {
        out.close |= flags.close;
        out.rejection = flags.rejection && !encoded;
    }
    out
}

impl<ReqB> Service<http::Request<ReqB>> for NativeRoute
where
    ReqB: http_body::Body + Send + 'static,
    ReqB::Data: Send,
    ReqB::Error: Into<BoxError>,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<ReqB>) -> Self::Future {
        Box::pin(async move { Ok(http_answer(native(req).await)) })
    }
}

/// Runs the rest of the chain on the request as the layers left it.
async fn native<ReqB>(req: http::Request<ReqB>) -> Response
where
    ReqB: http_body::Body + Send + 'static,
    ReqB::Error: Into<BoxError>,
{
    let (mut parts, body) = req.into_parts();
    let taken = parts.extensions.remove::<Pass>().and_then(|Pass(slot)| {
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        slot.take()
    });
    let Some((mut req, next)) = taken else {
        // A layer called the route with a request it made itself, or twice.
        tracing::error!("a tower layer called a native route with a request not its own; 500");
        return crate::app::dispatch::text_status(500);
    };
    match collect(body).await {
        Ok(body) => req.body = body,
        Err(status) => {
            let mut resp = crate::app::dispatch::text_status(status);
            resp.rejection = true;
            return resp;
        }
    }
    if !same_fields(&req, &parts.headers) && refield(&mut req, &parts.headers).is_err() {
        tracing::error!("a tower layer set request fields the parser refuses; 500");
        return crate::app::dispatch::text_status(500);
    }
    req.ext.insert(parts.extensions);
    next.run(req).await
}

/// The body the layers hand on, whole; or the status that refuses it: 413 past a body
/// limit layer's limit (`LengthLimitError`) or [`MAX_LAYERED_BODY_BYTES`], else 400.
async fn collect<B>(body: B) -> Result<Vec<u8>, u16>
where
    B: http_body::Body,
    B::Error: Into<BoxError>,
{
    let mut body = std::pin::pin!(body);
    let mut whole: Vec<u8> = Vec::new();
    while let Some(frame) = poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let frame = frame.map_err(|e| -> u16 {
            let e: BoxError = e.into();
            if e.is::<http_body_util::LengthLimitError>() {
                413
            } else {
                tracing::debug!(error = %e, "request body failed in a tower layer; 400");
                400
            }
        })?;
        let Ok(mut data) = frame.into_data() else {
            continue; // trailers: the handler reads those the request came with
        };
        if whole.len() + data.remaining() > MAX_LAYERED_BODY_BYTES {
            return Err(413);
        }
        if whole.is_empty() {
            // The usual single piece (ours, whole) goes back without a copy.
            whole = Vec::from(data.copy_to_bytes(data.remaining()));
            continue;
        }
        while data.has_remaining() {
            let chunk = data.chunk();
            whole.extend_from_slice(chunk);
            let n = chunk.len();
            data.advance(n);
        }
    }
    Ok(whole)
}

/// Whether `fields` are the request's own, in order (the layers changed none).
fn same_fields(req: &OwnedRequest, fields: &http::HeaderMap) -> bool {
    let head = &req.head.head;
    head.header_count() == fields.len()
        && head
            .headers(&req.head.bytes)
            .zip(fields.iter())
            .all(|((n, v), (name, value))| {
                n.eq_ignore_ascii_case(name.as_str().as_bytes()) && v == value.as_bytes()
            })
}

/// Makes the request's head again with `fields` (the request line as routed), parsed as the
/// connection parsed it, so every accessor of the handler's request sees them.
fn refield(req: &mut OwnedRequest, fields: &http::HeaderMap) -> Result<(), ()> {
    let (head, buf) = (&req.head.head, &req.head.bytes);
    let mut text = Vec::with_capacity(buf.len() + 64);
    text.extend_from_slice(head.method_bytes(buf));
    text.push(b' ');
    text.extend_from_slice(head.target_bytes(buf));
    text.extend_from_slice(match head.version() {
        Version::Http10 => b" HTTP/1.0\r\n",
        _ => b" HTTP/1.1\r\n",
    });
    for (name, value) in fields {
        text.extend_from_slice(name.as_str().as_bytes());
        text.extend_from_slice(b": ");
        text.extend_from_slice(value.as_bytes());
        text.extend_from_slice(b"\r\n");
    }
    text.extend_from_slice(b"\r\n");
    let mut parsed = RequestHead::new();
    match parsed.parse(&text, &Limits::default()) {
        Ok(Parsed::Complete(_)) => {}
        _ => return Err(()),
    }
    // The path is the routed one, so the parameters' spans in it still hold.
    parsed.set_version(head.version());
    req.head = OwnedHead {
        head: parsed,
        bytes: text,
    };
    Ok(())
}

/// A native answer as an `http::Response<Body>`: status, content type and fields (one a
/// handler could not have set valid is dropped, with a log line), body and trailer fields;
/// close and rejection ride along as an extension.
fn http_answer(resp: Response) -> http::Response<Body> {
    let mut trailers = http::HeaderMap::new();
    for (name, value) in resp.trailers.iter().flat_map(|t| t.iter()) {
        if let Some((n, v)) = field(name, value) {
            trailers.append(n, v);
        }
    }
    let body = NativeBody::of(
        resp.body,
        (!trailers.is_empty()).then(|| Box::new(trailers)),
    );
    let mut out = http::Response::new(Body::native(body));
    *out.status_mut() =
        http::StatusCode::from_u16(resp.status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    let fields = out.headers_mut();
    if let Some(ct) = &resp.content_type
        && let Some((n, v)) = field("content-type", ct)
    {
        fields.insert(n, v);
    }
    for (name, value) in &resp.headers {
        match field(name, value) {
            Some((n, v)) => {
                fields.append(n, v);
            }
            None => tracing::debug!(%name, "answer field not valid for http; dropped"),
        }
    }
    if resp.close || resp.rejection {
        out.extensions_mut().insert(NativeFlags {
            close: resp.close,
            rejection: resp.rejection,
        });
    }
    out
}

/// `name: value` as `http`'s types, if they are valid there.
fn field(name: &str, value: &str) -> Option<(http::HeaderName, http::HeaderValue)> {
    Some((
        http::HeaderName::from_bytes(name.as_bytes()).ok()?,
        http::HeaderValue::from_str(value).ok()?,
    ))
}

/// A native route's request or answer body as a tower layer reads it (inside [`Body`]).
pub(crate) struct NativeBody {
    kind: Kind,
    /// Sent after the data, as a last frame (boxed: most bodies have none, and a body is
    /// moved through every layer's future).
    trailers: Option<Box<http::HeaderMap>>,
}

enum Kind {
    /// In memory; `None` once taken.
    Whole(Option<Bytes>),
    /// A file's range, read a piece at a time (from the page cache, on the runtime's thread).
    File {
        file: std::fs::File,
        offset: u64,
        left: u64,
    },
    /// A [`Response::stream`]'s channel, read as it is written; `left` is what a body of
    /// known length still owes.
    Stream {
        chan: Reader,
        left: Option<u64>,
    },
    /// Cut off (a streamed body aborted, a file that could not be read).
    Failed,
    Over,
}

/// A streamed answer's channel as the tower adapter reads it; dropped, it tells the writer
/// the answer is gone.
struct Reader(Arc<Chan>);

impl Drop for Reader {
    fn drop(&mut self) {
        self.0.gone();
    }
}

impl std::fmt::Debug for NativeBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            Kind::Whole(_) => "whole",
            Kind::File { .. } => "file",
            Kind::Stream { .. } => "stream",
            Kind::Failed => "failed",
            Kind::Over => "over",
        };
        write!(f, "NativeBody({kind})")
    }
}

impl Default for NativeBody {
    fn default() -> Self {
        NativeBody {
            kind: Kind::Over,
            trailers: None,
        }
    }
}

impl NativeBody {
    /// The body of a native answer.
    fn of(body: crate::Body, trailers: Option<Box<http::HeaderMap>>) -> NativeBody {
        let kind = match body {
            crate::Body::Empty => Kind::Over,
            crate::Body::Static(b) => Kind::Whole(Some(Bytes::from_static(b))),
            crate::Body::Owned(v) => Kind::Whole(Some(Bytes::from(v))),
            crate::Body::File(f) => match f.file.try_clone() {
                Ok(fd) => Kind::File {
                    file: std::fs::File::from(fd),
                    offset: f.offset,
                    left: f.len,
                },
                Err(e) => {
                    tracing::error!(error = %e, "file answer not readable for a tower layer");
                    Kind::Failed
                }
            },
            crate::Body::Stream(s) => match s.adopt() {
                Some(chan) => Kind::Stream {
                    chan: Reader(chan),
                    left: s.length(),
                },
                None => Kind::Failed, // a clone of it went out already
            },
            b @ crate::Body::Cached(_) => Kind::Whole(Some(Bytes::copy_from_slice(b.as_bytes()))),
        };
        NativeBody { kind, trailers }
    }

    pub(crate) fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match &mut self.kind {
            Kind::Whole(b) => {
                if let Some(b) = b.take().filter(|b| !b.is_empty()) {
                    return Poll::Ready(Some(Ok(Frame::data(b))));
                }
            }
            Kind::File { file, offset, left } if *left > 0 => {
                let mut piece = vec![0; (*left).min(FILE_PIECE_BYTES) as usize];
                return match file.read_at(&mut piece, *offset) {
                    Ok(n) if n > 0 => {
                        piece.truncate(n);
                        *offset += n as u64;
                        *left -= n as u64;
                        Poll::Ready(Some(Ok(Frame::data(Bytes::from(piece)))))
                    }
                    // Shorter than its length (truncated meanwhile), or unreadable.
                    _ => {
                        self.kind = Kind::Failed;
                        Poll::Ready(Some(Err(BodyError)))
                    }
                };
            }
            Kind::File { .. } => {}
            Kind::Stream { chan, left } => match chan.0.poll_take(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(piece))) => {
                    if let Some(left) = left {
                        *left = left.saturating_sub(piece.len() as u64);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(piece)))));
                }
                Poll::Ready(Some(Err(_))) => {
                    self.kind = Kind::Failed;
                    return Poll::Ready(Some(Err(BodyError)));
                }
                Poll::Ready(None) => {
                    let mut fields = http::HeaderMap::new();
                    for (name, value) in chan.0.take_trailers().into_iter().flat_map(|t| *t) {
                        if let Some((n, v)) = field(&name, &value) {
                            fields.append(n, v);
                        }
                    }
                    if !fields.is_empty() {
                        self.trailers = Some(Box::new(fields));
                    }
                }
            },
            Kind::Failed => return Poll::Ready(Some(Err(BodyError))),
            Kind::Over => {}
        }
        self.kind = Kind::Over;
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(*t))))
    }

    pub(crate) fn is_end_stream(&self) -> bool {
        self.trailers.is_none()
            && match &self.kind {
                Kind::Whole(b) => b.as_ref().is_none_or(Bytes::is_empty),
                Kind::File { left, .. } => *left == 0,
                Kind::Over => true,
                Kind::Stream { .. } | Kind::Failed => false,
            }
    }

    pub(crate) fn size_hint(&self) -> SizeHint {
        let exact = match &self.kind {
            Kind::Whole(b) => b.as_ref().map_or(0, |b| b.len() as u64),
            Kind::File { left, .. } => *left,
            Kind::Stream { left: Some(n), .. } => *n,
            Kind::Stream { left: None, .. } | Kind::Failed => return SizeHint::default(),
            Kind::Over => 0,
        };
        SizeHint::with_exact(exact)
    }
}
