//! Handlers that answer later: the owned request they receive, the [`Responder`] they answer
//! with from any thread, the async convenience, and the per-worker inbox answers travel back
//! through.
//!
//! Owns the hand-off only. A `Responder` reports exactly once — [`Responder::send`], or, if it
//! is dropped unanswered, a 500 — so the worker's count of outstanding answers is exact. When
//! the deferred timeout answers a request first (503), the worker gives it up (`Cancel`): an
//! `async` handler's future is dropped, and a thread can ask [`Responder::is_cancelled`]. The
//! inbox wakes its worker once per batch (the driver's eventfd, behind `Inbox::new`'s `wake`),
//! never once per answer under load. On a worker with a [`WorkerLocal`], an answer given on
//! the worker's own thread (a future on its executor, a handler that answers at once) wakes
//! nothing: the worker looks for those itself at the end of each turn
//! (`Inbox::pushed_here`).
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use atomic_waker::AtomicWaker;

use linerate_http1::{BodyDecoder, Method, RequestHead, Version};

use crate::request::{Params, Request};
use crate::response::Response;

/// A request head with its own copy of the bytes: what outlives the worker's buffers.
#[derive(Clone, Debug)]
pub(crate) struct OwnedHead {
    pub head: RequestHead,
    pub bytes: Vec<u8>,
}

/// Largest head buffer kept for reuse (one per thread: see `SPARE_HEAD_BYTES`).
const MAX_SPARE_HEAD_BYTES: usize = 16 * 1024;

thread_local! {
    /// The buffer of the last owned head dropped on this thread: the next copy made here
    /// reuses it (a worker's own futures drop their requests on its thread).
    static SPARE_HEAD_BYTES: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

impl OwnedHead {
    /// Copies the head's bytes; the parsed spans are kept, so nothing is parsed again.
    pub(crate) fn copy(head: &RequestHead, buf: &[u8]) -> OwnedHead {
        let mut bytes = SPARE_HEAD_BYTES.try_with(Cell::take).unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(buf);
        OwnedHead {
            head: head.clone(),
            bytes,
        }
    }
}

impl Drop for OwnedHead {
    fn drop(&mut self) {
        if self.bytes.capacity() <= MAX_SPARE_HEAD_BYTES {
            let bytes = std::mem::take(&mut self.bytes);
            // At the thread's exit the spare is gone: the buffer is simply freed.
            let _ = SPARE_HEAD_BYTES.try_with(|s| s.set(bytes));
        }
    }
}

/// A request read in place on the worker, for the crate's own handlers called at the head
/// (the tower adapter), which copy only what they keep, before the worker's buffers move on.
#[cfg_attr(not(feature = "tower"), allow(dead_code))]
pub(crate) struct HeadView<'a> {
    pub head: &'a RequestHead,
    /// The head's bytes (the spans in `head` point into them).
    pub buf: &'a [u8],
    pub peer: Option<SocketAddr>,
    pub client_cert: Option<&'a Arc<crate::tls::ClientCert>>,
    /// The request came over TLS (QUIC included).
    pub tls: bool,
}

/// A request a deferred handler owns: head, path parameters, query, fields, body and
/// trailers, free of the worker's buffers, so it can move to another thread.
pub struct OwnedRequest {
    pub(crate) head: OwnedHead,
    pub(crate) names: Arc<[String]>,
    pub(crate) params: Params,
    pub(crate) body: Vec<u8>,
    pub(crate) trailers: Option<BodyDecoder>,
    pub(crate) peer: Option<SocketAddr>,
    pub(crate) client_cert: Option<Arc<crate::tls::ClientCert>>,
    /// The request came over TLS (QUIC included).
    pub(crate) tls: bool,
    /// What the request's layers attached.
    pub(crate) ext: crate::layer::Extensions,
    /// The application's state (`Router::with_state`); `None` when it has none, so a
    /// request of a stateless application costs no reference count.
    pub(crate) state: Option<Arc<crate::layer::Extensions>>,
    /// Its trace context (tracing on).
    pub(crate) trace: Option<crate::trace::TraceContext>,
}

impl OwnedRequest {
    /// The borrowed view every accessor of [`Request`] works on.
    pub fn request(&self) -> Request<'_> {
        Request {
            head: &self.head.head,
            buf: &self.head.bytes,
            names: &self.names,
            params: &self.params,
            body: &self.body,
            trailers: self.trailers.as_ref(),
            ctx: self,
        }
    }
    /// The value of type `T` a [`Layer`](crate::Layer) attached to this request.
    pub fn extension<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.ext.get::<T>()
    }
    /// The values this request's layers attached, to attach more: how an async
    /// [`Around`](crate::Around) layer hands a value (the authenticated user) to the handler.
    pub fn extensions_mut(&mut self) -> &mut crate::layer::Extensions {
        &mut self.ext
    }
    /// The application's state of type `T` (see [`Request::state`], which panics alike).
    pub fn state<T: Send + Sync + 'static>(&self) -> &T {
        crate::request::state_of(crate::request::Context::state(self))
    }
    /// The method.
    pub fn method(&self) -> Method {
        self.head.head.method()
    }
    /// The HTTP version.
    pub fn version(&self) -> Version {
        self.head.head.version()
    }
    /// Whether the request came over TLS (HTTP/3's QUIC included).
    pub fn is_tls(&self) -> bool {
        self.tls
    }
    /// The path, still percent-encoded.
    pub fn path(&self) -> &str {
        self.head.head.path(&self.head.bytes)
    }
    /// The first query parameter named `name`, percent-decoded.
    pub fn query_param(&self, name: &str) -> Option<String> {
        self.request().query_param(name).map(|v| v.into_owned())
    }
    /// The path parameter captured for `{name}`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.request().param(name)
    }
    /// The first field named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.head.head.header(&self.head.bytes, name)
    }
    /// The body.
    pub fn body(&self) -> &[u8] {
        &self.body
    }
    /// Takes the body out.
    pub fn into_body(self) -> Vec<u8> {
        self.body
    }
}

impl crate::request::Context for OwnedRequest {
    fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }
    fn client_cert(&self) -> Option<&crate::tls::ClientCert> {
        self.client_cert.as_deref()
    }
    fn trace(&self) -> Option<crate::trace::TraceContext> {
        self.trace.clone()
    }
    fn extensions(&self) -> &crate::layer::Extensions {
        &self.ext
    }
    fn state(&self) -> &crate::layer::Extensions {
        self.state
            .as_deref()
            .unwrap_or(&crate::layer::NO_EXTENSIONS)
    }
}

/// What the worker needs to finish an answer that comes back: the request's
/// Accept-Encoding (for compression) and its access-log fields (when logging). Carried by
/// value in the `Responder` and its `Done` (no allocation of its own: what only some
/// configurations keep is boxed or `None`).
#[derive(Debug, Default)]
pub(crate) struct Meta {
    pub head: bool,
    /// The site that took the request (its compression and decorations apply).
    pub site: usize,
    /// When the request's head was in (µs; 0 unless metrics or the log are on).
    pub started: u64,
    /// The request's path, when the site decorates answers (fields by path).
    pub path: Option<Vec<u8>>,
    pub accept_encoding: Option<Vec<u8>>,
    pub log: Option<Box<LogMeta>>,
    /// The request's layers, whose `after` hooks see the answer (a deferred request's wait
    /// in the worker's [`Waiting`] instead, where its timeout finds them).
    pub layered: Option<Box<crate::layer::Layered>>,
    /// Whether the worker still waits for the answer (deferred requests only).
    pub cancel: Option<Arc<Cancel>>,
}

/// A deferred request the worker waits for, by (connection token, request id): what its
/// answer, or its timeout's 503, is finished with.
pub(crate) struct Waiting {
    pub cancel: Arc<Cancel>,
    /// The request's layers, whose `after` hooks see whichever answer comes first.
    pub layered: Option<Box<crate::layer::Layered>>,
}

/// Whether the worker still waits for a deferred answer. Shared by the request's
/// [`Responder`] and the worker, which gives up when the deferred timeout answers the request
/// (503) and wakes the future waiting in [`Responder::until_cancelled`]. The worker reuses
/// them (`Cancels`), so a deferred request allocates none.
#[derive(Debug, Default)]
pub(crate) struct Cancel {
    given_up: AtomicBool,
    waker: AtomicWaker,
}

impl Cancel {
    /// The answer is no longer wanted: wakes the handler's future, if one waits.
    pub(crate) fn give_up(&self) {
        self.given_up.store(true, Ordering::Release);
        self.waker.wake();
    }

    pub(crate) fn is_given_up(&self) -> bool {
        self.given_up.load(Ordering::Acquire)
    }

    /// Wakes `waker` on [`Cancel::give_up`]. Registered before the flag is read again, so a
    /// give-up between the two still wakes the task.
    pub(crate) fn register(&self, waker: &std::task::Waker) {
        self.waker.register(waker);
    }
}

/// Most `Cancel`s a worker keeps for reuse (as many as its deferred requests in flight at
/// once, up to this; the rest are freed).
const MAX_SPARE_CANCELS: usize = 256;

/// A worker's `Cancel`s, reused: one is handed out with each deferred request and taken back
/// when its answer (or its `Responder`'s drop) comes home, if nothing else holds it then.
#[derive(Debug, Default)]
pub(crate) struct Cancels(Vec<Arc<Cancel>>);

impl Cancels {
    /// A fresh `Cancel` (not given up, no waker).
    pub(crate) fn take(&mut self) -> Arc<Cancel> {
        self.0.pop().unwrap_or_default()
    }

    /// Takes `cancel` back for reuse once it is the last reference to it (its `Responder`
    /// is gone, and the worker's `Waiting` entry dropped its own).
    pub(crate) fn put(&mut self, mut cancel: Arc<Cancel>) {
        if self.0.len() < MAX_SPARE_CANCELS
            && let Some(c) = Arc::get_mut(&mut cancel)
        {
            *c = Cancel::default();
            self.0.push(cancel);
        }
    }
}

/// A request's access-log fields, owned.
#[derive(Debug)]
pub(crate) struct LogMeta {
    pub peer: Option<SocketAddr>,
    pub version: Version,
    pub tls: bool,
    /// Its method, target, `Referer`, `User-Agent` and host (see `AccessEntry::host`, kept
    /// only when a template writes `$host` or tracing records it), one after another: one
    /// allocation where one each cost ~800 instructions a proxied request (callgrind).
    text: Box<[u8]>,
    /// Where each of `text`'s five parts ends; a field the request lacked is `None`.
    ends: [Option<u32>; 5],
    /// The values of the fields templates name (`LogBuffer::kept`; empty when none does).
    pub fields: Box<[Option<Box<[u8]>>]>,
    /// What its mount's cache did with it, once the cache decided (`$upstream_cache_status`).
    pub cache: Option<crate::access_log::CacheOutcome>,
    /// Its ids and trace context (empty where the server draws none); boxed, so that a
    /// proxied job (which holds this inline) grows by a pointer only.
    pub trace: Box<crate::trace::RequestTrace>,
}

/// `LogMeta::text`'s parts, in order.
const METHOD: usize = 0;
const TARGET: usize = 1;
const REFERER: usize = 2;
const USER_AGENT: usize = 3;
const HOST: usize = 4;

impl LogMeta {
    /// Copies what `log`'s lines (and spans, with `trace` recorded) will need of the request
    /// in `head`.
    pub(crate) fn keep(
        log: &crate::access_log::LogBuffer,
        peer: Option<SocketAddr>,
        tls: bool,
        head: &RequestHead,
        buf: &[u8],
        trace: &crate::trace::RequestTrace,
    ) -> LogMeta {
        let host = if log.keeps_host() || trace.recorded() {
            crate::app::sites::request_host_bytes(head, buf)
        } else {
            None
        };
        let parts: [Option<&[u8]>; 5] = [
            Some(head.method_str(buf).as_bytes()),
            Some(head.target(buf).as_bytes()),
            head.header(buf, "referer"),
            head.header(buf, "user-agent"),
            host,
        ];
        let mut text = Vec::with_capacity(parts.iter().flatten().map(|p| p.len()).sum());
        let mut ends = [None; 5];
        for (end, part) in ends.iter_mut().zip(parts) {
            if let Some(p) = part {
                text.extend_from_slice(p);
                *end = Some(u32::try_from(text.len()).unwrap_or(u32::MAX));
            }
        }
        LogMeta {
            peer,
            version: head.version(),
            tls,
            text: text.into_boxed_slice(),
            ends,
            fields: log
                .kept()
                .iter()
                .map(|name| head.header(buf, name).map(Box::from))
                .collect(),
            cache: None,
            trace: Box::new(trace.clone()),
        }
    }

    /// Part `i` of `text`, when the request had it.
    fn part(&self, i: usize) -> Option<&[u8]> {
        let end = self.ends[i]? as usize;
        let start = self.ends[..i]
            .iter()
            .rev()
            .flatten()
            .next()
            .map_or(0, |&e| e as usize);
        self.text.get(start..end)
    }

    /// A part that came from a `&str` (the method, the target) as one again.
    fn str_part(&self, i: usize) -> &str {
        std::str::from_utf8(self.part(i).unwrap_or_default()).unwrap_or_default()
    }

    /// Its host, when kept.
    #[cfg(test)]
    pub(crate) fn host(&self) -> Option<&[u8]> {
        self.part(HOST)
    }

    /// Its line's facts, for an answer with `status` and `bytes` of body, `us` after the
    /// request's head was in, from a site whose first name is `server_name`.
    pub(crate) fn entry<'a>(
        &'a self,
        status: u16,
        bytes: usize,
        us: u64,
        server_name: &'a str,
        upstream: Option<crate::access_log::UpstreamEntry<'a>>,
    ) -> crate::access_log::AccessEntry<'a> {
        crate::access_log::AccessEntry {
            peer: self.peer,
            method: self.str_part(METHOD),
            target: self.str_part(TARGET),
            version: self.version,
            status,
            bytes,
            referer: self.part(REFERER),
            user_agent: self.part(USER_AGENT),
            request_time_us: Some(us),
            tls: self.tls,
            host: self.part(HOST),
            server_name,
            fields: crate::access_log::Fields::Kept(&self.fields),
            upstream,
            grpc_status: None,
            cache_status: self.cache,
            trace: (!self.trace.request_id.is_none()).then_some(&self.trace),
        }
    }
}

/// An answer on its way back to its worker.
pub(crate) struct Done {
    /// The connection (the driver's slot token).
    pub token: u64,
    /// The request's number on its connection.
    pub id: u64,
    /// `None`: the `Responder` was dropped without answering (500).
    pub resp: Option<Response>,
    pub meta: Meta,
    /// A WebSocket handshake accepted under async layers, `resp` its 101 (over HTTP/2 its
    /// 200): the driver hands the connection or stream over (`websocket/chained.rs`).
    pub upgrade: Option<Box<crate::websocket::Upgrade>>,
}

thread_local! {
    /// The address of the inbox whose worker runs on this thread (0: none).
    static HOME: Cell<usize> = const { Cell::new(0) };
}

/// One worker's incoming answers. Any thread pushes; the worker takes them in batches.
pub(crate) struct Inbox {
    queue: Mutex<Vec<Done>>,
    /// Streamed bodies with something for the worker to take (see `streaming`).
    streams: Mutex<Vec<Arc<crate::streaming::Chan>>>,
    /// Requests (connection token, request id) whose handler took the body the connection
    /// held for room: it may read on (see `incoming`).
    rooms: Mutex<Vec<(u64, u64)>>,
    /// Proxied requests parked on another request's cache flight that landed (their park
    /// numbers): they look in the cache again (see `proxy::cache`).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    landed: Mutex<Vec<u64>>,
    /// Proxied requests parked on a question to the cache's second tier, and its answer.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    tiered: Mutex<Vec<(u64, Option<Vec<u8>>)>>,
    /// A wake-up is on its way and not yet consumed: later pushes need not send another.
    armed: AtomicBool,
    /// The wake-up was due from the worker's own thread, and left to the worker to notice
    /// (read and written on that thread only).
    here: AtomicBool,
    wake: Box<dyn Fn() + Send + Sync>,
}

impl Inbox {
    /// An inbox whose pushes call `wake` (once per batch).
    pub(crate) fn new(wake: Box<dyn Fn() + Send + Sync>) -> Inbox {
        Inbox {
            queue: Mutex::new(Vec::new()),
            streams: Mutex::new(Vec::new()),
            rooms: Mutex::new(Vec::new()),
            landed: Mutex::new(Vec::new()),
            tiered: Mutex::new(Vec::new()),
            armed: AtomicBool::new(false),
            here: AtomicBool::new(false),
            wake,
        }
    }

    /// Called by the worker on its thread: pushes made on this thread from now on do not
    /// wake it (an eventfd write, and its read in the next turn); the worker asks
    /// [`Inbox::pushed_here`] at the end of each turn instead.
    pub(crate) fn make_home(self: &Arc<Inbox>) {
        HOME.with(|h| h.set(Arc::as_ptr(self) as usize));
    }

    /// A push on the worker's own thread left the wake-up to it: take the inbox now.
    #[inline]
    pub(crate) fn pushed_here(&self) -> bool {
        self.here.load(Ordering::Relaxed)
    }

    /// The first push since the worker last took: wake it, unless this is its own thread.
    fn wake_up(&self) {
        if HOME.with(Cell::get) == self as *const Inbox as usize {
            self.here.store(true, Ordering::Relaxed);
            // A worker parked in its runtime (a task of its own answered) goes back to its loop.
            crate::runtime::wake_parked();
        } else {
            (self.wake)();
        }
    }

    fn push(&self, done: Done) {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(done);
        if !self.armed.swap(true, Ordering::SeqCst) {
            self.wake_up();
        }
    }

    /// A streamed body has pieces (or its end) for the worker.
    pub(crate) fn push_stream(&self, chan: Arc<crate::streaming::Chan>) {
        self.streams
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(chan);
        if !self.armed.swap(true, Ordering::SeqCst) {
            self.wake_up();
        }
    }

    /// A request body held for room was taken by its handler (see `incoming`).
    pub(crate) fn push_room(&self, token: u64, id: u64) {
        self.rooms
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((token, id));
        if !self.armed.swap(true, Ordering::SeqCst) {
            self.wake_up();
        }
    }

    /// A request parked on a cache flight may look in the cache again.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn push_landed(&self, park: u64) {
        self.landed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(park);
        if !self.armed.swap(true, Ordering::SeqCst) {
            self.wake_up();
        }
    }

    /// The second tier answered the request parked as `park`.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn push_tiered(&self, park: u64, stored: Option<Vec<u8>>) {
        self.push_tiered_many(std::iter::once((park, stored)));
    }

    /// The second tier answered the requests parked as these (one call's answers: one lock,
    /// and at most one wake).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn push_tiered_many(&self, answers: impl Iterator<Item = (u64, Option<Vec<u8>>)>) {
        self.tiered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(answers);
        if !self.armed.swap(true, Ordering::SeqCst) {
            self.wake_up();
        }
    }

    /// Moves every second-tier answer into `into` (after [`Inbox::take`]).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn take_tiered(&self, into: &mut Vec<(u64, Option<Vec<u8>>)>) {
        let mut q = self.tiered.lock().unwrap_or_else(|e| e.into_inner());
        into.append(&mut q);
    }

    /// Moves every parked request whose flight landed into `into` (after [`Inbox::take`],
    /// which consumed the wake-up).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn take_landed(&self, into: &mut Vec<u64>) {
        let mut q = self.landed.lock().unwrap_or_else(|e| e.into_inner());
        into.append(&mut q);
    }

    /// Moves every request that may read its body again into `into` (after
    /// [`Inbox::take`], which consumed the wake-up).
    pub(crate) fn take_rooms(&self, into: &mut Vec<(u64, u64)>) {
        let mut q = self.rooms.lock().unwrap_or_else(|e| e.into_inner());
        into.append(&mut q);
    }

    /// Moves every streamed body waiting for the worker into `into` (after [`Inbox::take`],
    /// which consumed the wake-up).
    pub(crate) fn take_streams(&self, into: &mut Vec<Arc<crate::streaming::Chan>>) {
        let mut q = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        into.append(&mut q);
    }

    /// Moves every waiting answer into `into`. The worker calls this after consuming the
    /// wake-up, so an answer pushed meanwhile either is taken here or wakes it again.
    pub(crate) fn take(&self, into: &mut Vec<Done>) {
        self.here.store(false, Ordering::Relaxed);
        self.armed.store(false, Ordering::SeqCst);
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        into.append(&mut q);
    }
}

/// Completes one deferred request, from any thread. `Send` and `'static`: move it into a
/// thread pool, a callback or a future. Dropping it without [`Responder::send`] answers 500.
pub struct Responder {
    ticket: Option<Ticket>,
}

struct Ticket {
    inbox: Arc<Inbox>,
    token: u64,
    id: u64,
    meta: Meta,
}

impl Responder {
    pub(crate) fn new(inbox: Arc<Inbox>, token: u64, id: u64, meta: Meta) -> Responder {
        Responder {
            ticket: Some(Ticket {
                inbox,
                token,
                id,
                meta,
            }),
        }
    }

    /// Whether the request's deadline passed (`Config::deferred_timeout`): it was answered
    /// 503, an answer now would be dropped, and work still to do for it may stop.
    pub fn is_cancelled(&self) -> bool {
        self.cancel().is_some_and(|c| c.is_given_up())
    }

    /// Runs `fut` to its output, or until the request's deadline passes (`None`: `fut` is
    /// dropped unfinished, as soon as the worker answers 503). [`Router::route_async`]
    /// (`get_async`…) runs every handler future in it.
    ///
    /// [`Router::route_async`]: crate::Router::route_async
    pub async fn until_cancelled<F: Future>(&self, fut: F) -> Option<F::Output> {
        let mut fut = std::pin::pin!(fut);
        let cancel = self.cancel();
        std::future::poll_fn(|cx| {
            if cancel.is_some_and(|c| c.is_given_up()) {
                return Poll::Ready(None);
            }
            if let Poll::Ready(out) = fut.as_mut().poll(cx) {
                return Poll::Ready(Some(out));
            }
            // Only a future that waits registers (most answer in their first poll): then the
            // flag is read again, so a give-up since the first read still wakes it.
            match cancel {
                Some(c) => {
                    c.register(cx.waker());
                    if c.is_given_up() {
                        Poll::Ready(None)
                    } else {
                        Poll::Pending
                    }
                }
                None => Poll::Pending,
            }
        })
        .await
    }

    fn cancel(&self) -> Option<&Arc<Cancel>> {
        self.ticket.as_ref().and_then(|t| t.meta.cancel.as_ref())
    }

    /// The request's give-up flag, for a future that outlives this `Responder` (a streaming
    /// gRPC call's, whose sink takes it): `None` where nothing gives the request up.
    #[cfg_attr(not(feature = "grpc"), allow(dead_code))]
    pub(crate) fn cancel_handle(&self) -> Option<Arc<Cancel>> {
        self.cancel().cloned()
    }

    /// Sends the answer. It goes out in request order on its connection; if the client has
    /// gone, or the request's deadline passed (it was answered 503), it is dropped.
    pub fn send(mut self, resp: impl crate::extract::IntoResponse) {
        let resp = resp.into_response();
        if let Some(t) = self.ticket.take() {
            t.inbox.push(Done {
                token: t.token,
                id: t.id,
                resp: Some(resp),
                meta: t.meta,
                upgrade: None,
            });
        }
    }

    /// Answers with an accepted WebSocket handshake's 101 (or 200) and the upgrade the
    /// worker carries out as the answer arrives (`websocket/chained.rs`).
    #[cfg(feature = "websocket")]
    pub(crate) fn send_upgrade(mut self, resp: Response, up: crate::websocket::Upgrade) {
        if let Some(t) = self.ticket.take() {
            t.inbox.push(Done {
                token: t.token,
                id: t.id,
                resp: Some(resp),
                meta: t.meta,
                upgrade: Some(Box::new(up)),
            });
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            t.inbox.push(Done {
                token: t.token,
                id: t.id,
                resp: None,
                meta: t.meta,
                upgrade: None,
            });
        }
    }
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder")
            .field("id", &self.ticket.as_ref().map(|t| t.id))
            .finish()
    }
}

/// Work a worker thread does beside HTTP, driven by the worker's own event loop: an
/// application's reactor (say, a database client's sockets and the futures waiting on them),
/// so what a handler starts there never crosses threads. Made on the worker's thread at start
/// by the factory given to [`Server::with_worker_local`](crate::Server::with_worker_local).
pub trait WorkerLocal {
    /// Readable when [`run`](WorkerLocal::run) has work (the worker watches it,
    /// level-triggered, and never reads it: `run` clears what made it readable, as an epoll
    /// instance's wait does).
    fn fd(&self) -> std::os::fd::BorrowedFd<'_>;
    /// Does what is ready without blocking: called after every turn of the worker's loop
    /// (so also right after handlers that started local work ran); `fd_ready` says whether
    /// [`fd`](WorkerLocal::fd) was reported readable in that turn.
    fn run(&mut self, fd_ready: bool);
}

/// Makes a worker's [`WorkerLocal`] on its thread, given the worker's index.
pub type WorkerLocalFactory =
    Arc<dyn Fn(usize) -> std::io::Result<Box<dyn WorkerLocal>> + Send + Sync + 'static>;

/// A future an async handler's answer is computed in.
pub type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Runs an async handler's future: [`OnWorker`](crate::OnWorker) on the worker's own tokio
/// runtime, or any runtime of the caller's. Implemented for every `Fn(BoxFuture)`, e.g.
/// `move |f| { handle.spawn(f); }` with a tokio `runtime::Handle`.
pub trait Spawn: Send + Sync + 'static {
    fn spawn(&self, fut: BoxFuture);
}

impl<F: Fn(BoxFuture) + Send + Sync + 'static> Spawn for F {
    fn spawn(&self, fut: BoxFuture) {
        self(fut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn inbox() -> (Arc<Inbox>, Arc<AtomicUsize>) {
        let wakes = Arc::new(AtomicUsize::new(0));
        let w = wakes.clone();
        let inbox = Arc::new(Inbox::new(Box::new(move || {
            w.fetch_add(1, Ordering::SeqCst);
        })));
        (inbox, wakes)
    }

    #[test]
    fn a_batch_wakes_once_and_a_dropped_responder_reports_without_an_answer() {
        let (inbox, wakes) = inbox();
        for id in 1..=3 {
            Responder::new(inbox.clone(), 7, id, Meta::default()).send(Response::new(200));
        }
        drop(Responder::new(inbox.clone(), 7, 4, Meta::default()));
        assert_eq!(wakes.load(Ordering::SeqCst), 1);
        let mut got = Vec::new();
        inbox.take(&mut got);
        let ids: Vec<_> = got.iter().map(|d| (d.id, d.resp.is_some())).collect();
        assert_eq!(ids, [(1, true), (2, true), (3, true), (4, false)]);
        // Taken: the next push wakes again.
        Responder::new(inbox.clone(), 7, 5, Meta::default()).send(Response::new(200));
        assert_eq!(wakes.load(Ordering::SeqCst), 2);
    }

    /// Answers request `id` of connection 7 from a thread of its own, and waits for it.
    fn answer_from_another_thread(inbox: &Arc<Inbox>, id: u64) {
        let inbox = inbox.clone();
        std::thread::spawn(move || {
            Responder::new(inbox, 7, id, Meta::default()).send(Response::new(200))
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_push_on_the_workers_own_thread_wakes_nothing_and_is_left_for_it_to_take() {
        let (inbox, wakes) = inbox();
        inbox.make_home();
        Responder::new(inbox.clone(), 7, 1, Meta::default()).send(Response::new(200));
        drop(Responder::new(inbox.clone(), 7, 2, Meta::default()));
        assert_eq!(wakes.load(Ordering::SeqCst), 0);
        assert!(inbox.pushed_here());
        // A push from another thread meanwhile finds the inbox armed: the worker's own
        // take, due this turn, collects it too.
        answer_from_another_thread(&inbox, 3);
        assert_eq!(wakes.load(Ordering::SeqCst), 0);
        let mut got = Vec::new();
        inbox.take(&mut got);
        assert_eq!(got.iter().map(|d| d.id).collect::<Vec<_>>(), [1, 2, 3]);
        assert!(!inbox.pushed_here());
        // Taken: a push from another thread wakes the worker again.
        answer_from_another_thread(&inbox, 4);
        assert_eq!(wakes.load(Ordering::SeqCst), 1);
        assert!(!inbox.pushed_here());
    }

    /// A waker that counts its wakes (its clones show in its `Arc`'s count).
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl std::task::Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn deferred_responder(inbox: &Arc<Inbox>, cancel: &Arc<Cancel>) -> Responder {
        let meta = Meta {
            cancel: Some(cancel.clone()),
            ..Meta::default()
        };
        Responder::new(inbox.clone(), 7, 1, meta)
    }

    #[test]
    fn a_give_up_wakes_the_future_waiting_in_until_cancelled_and_drops_it() {
        let (inbox, _) = inbox();
        let cancel = Arc::new(Cancel::default());
        let res = deferred_responder(&inbox, &cancel);
        let wakes = Arc::new(Wakes::default());
        let waker = std::task::Waker::from(wakes.clone());
        let mut cx = std::task::Context::from_waker(&waker);
        let mut fut = std::pin::pin!(res.until_cancelled(std::future::pending::<()>()));
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert!(
            fut.as_mut().poll(&mut cx).is_pending(),
            "polled again: one waker kept"
        );
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0);
        cancel.give_up();
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "the give-up woke it");
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(None));
        assert!(res.is_cancelled());
    }

    #[test]
    fn a_future_that_answers_in_its_first_poll_registers_no_waker() {
        // Most async handlers answer at once: registering their waker (a clone) was
        // wasted work on every one of them.
        let (inbox, _) = inbox();
        let cancel = Arc::new(Cancel::default());
        let res = deferred_responder(&inbox, &cancel);
        let wakes = Arc::new(Wakes::default());
        let waker = std::task::Waker::from(wakes.clone());
        let mut cx = std::task::Context::from_waker(&waker);
        let mut fut = std::pin::pin!(res.until_cancelled(async { 5 }));
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(Some(5)));
        // The test's `Arc` and the waker's: no clone was kept.
        assert_eq!(Arc::strong_count(&wakes), 2);
    }

    #[test]
    fn a_cancel_is_reused_only_once_nothing_else_holds_it_and_comes_back_fresh() {
        let mut cancels = Cancels::default();
        let held = cancels.take();
        held.give_up();
        let other = held.clone();
        cancels.put(held);
        assert!(cancels.0.is_empty(), "still held elsewhere: not reused");
        cancels.put(other);
        assert_eq!(cancels.0.len(), 1);
        let again = cancels.take();
        assert!(!again.is_given_up(), "reused fresh");
        assert!(cancels.0.is_empty());
    }

    #[test]
    fn an_owned_head_dropped_on_a_thread_lends_its_buffer_to_the_next_copy_there() {
        let raw = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
        let mut head = RequestHead::new();
        head.parse(raw, &Default::default()).unwrap();
        let first = OwnedHead::copy(&head, raw);
        let at = first.bytes.as_ptr();
        drop(first);
        // Had the buffer been freed, the allocator would hand its memory out here.
        let taken = raw.to_vec();
        let second = OwnedHead::copy(&head, raw);
        assert_ne!(taken.as_ptr(), at);
        assert_eq!(second.bytes.as_ptr(), at, "the same buffer, not a new one");
        assert_eq!(second.bytes, raw);
        assert_eq!(second.head.path(&second.bytes), "/a");
    }

    #[test]
    fn answers_from_many_threads_all_arrive() {
        let (inbox, _) = inbox();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let inbox = inbox.clone();
                std::thread::spawn(move || {
                    for i in 0..250 {
                        Responder::new(inbox.clone(), t, i, Meta::default())
                            .send(Response::new(200));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut got = Vec::new();
        inbox.take(&mut got);
        assert_eq!(got.len(), 1000);
    }
}
