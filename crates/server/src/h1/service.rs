//! The connection's two neighbours, as it sees them: the driver's side of every call ([`Cx`]:
//! the time, the worker's buffers, the limits) and the application ([`Service`]: what to do
//! with each request).
#![forbid(unsafe_code)]

use linerate_http1::{BodyDecoder, DateCache, HeadRoom, Limits, ParseError, RequestHead};

use crate::pool::Pool;
use crate::response::Response;

/// The limits and timeouts a connection enforces (times in milliseconds).
#[derive(Clone, Debug)]
pub(crate) struct ConnConfig {
    pub limits: Limits,
    pub header_timeout: u64,
    pub body_timeout: u64,
    /// Bytes per second a body must average (0: no minimum; see `config::MIN_BODY_RATE`).
    pub min_body_rate: u64,
    pub keepalive_timeout: u64,
    pub send_timeout: u64,
    /// Bytes per second a waiting response must average (0: no minimum; see
    /// `config::MIN_SEND_RATE`).
    pub min_send_rate: u64,
    pub linger_timeout: u64,
    pub deferred_timeout: u64,
    pub max_requests: u64,
    /// Answers one connection may have outstanding or held (deferred ones and those queued
    /// behind them) before it dispatches no more requests.
    pub max_deferred: usize,
    /// `Server` value.
    pub server: Option<Vec<u8>>,
    /// HTTP/2 connections announce SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441) and take
    /// WebSocket over a stream: set only when the router has a WebSocket route and no path is
    /// proxied, since browsers take the setting as a promise
    /// (`server::announces_extended_connect`).
    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub extended_connect: bool,
}

/// The driver's side of every call: the time, the worker's buffers, the configuration. One
/// per worker, lent to each connection in turn (so nothing is assembled per event). The
/// worker's request-head parser, reused so parsing allocates nothing, is passed beside it.
pub(crate) struct Cx {
    /// Milliseconds on the driver's monotonic clock.
    pub now: u64,
    pub cfg: ConnConfig,
    /// The worker's output staging buffer: empty when a call starts, and emptied (taken by
    /// [`Conn::take_output`]) before the driver turns to another connection.
    pub out: Vec<u8>,
    /// Where response heads are composed before they are copied out.
    pub room: HeadRoom,
    pub pool: Pool,
    /// The `Date` value, formatted once a second.
    pub date: DateCache,
    /// The server is shutting down: every answer closes its connection.
    pub draining: bool,
    /// The connection at hand's transport sends file ranges itself (plain TCP, or kernel
    /// TLS): HTTP/2 sends DATA payloads of file bodies with `sendfile` then. Set by the driver
    /// before each call.
    pub sendfile: bool,
    /// The connection at hand came over TLS on a listener that serves HTTP/3 on this UDP
    /// port: its answers announce it with `Alt-Svc`. Set by the driver before each call.
    pub alt_svc: Option<u16>,
    /// Requests of the connection at hand whose streams ended before their answers did
    /// (reset by either side, or the connection failed): the driver gives up their work
    /// after the call (`driver/cancel.rs`). Empty when a call starts.
    pub cancelled: Vec<u64>,
}

/// A request head as the service sees it.
pub(crate) struct Exchange<'a> {
    /// The request's number on this connection (1, 2, …): how a deferred answer names it.
    pub id: u64,
    pub head: &'a RequestHead,
    /// The head's bytes (the spans in `head` point into them).
    pub buf: &'a [u8],
    /// The whole body when it arrived with the head (empty when there is none); `None` when
    /// it is still to be read.
    pub body: Option<&'a [u8]>,
    /// An HTTP/2 extended CONNECT's `:protocol` (RFC 8441: `websocket`): the stream is to
    /// become a tunnel for it. `None` for every other request.
    pub protocol: Option<&'a [u8]>,
    /// The request came on an HTTP/1.1 connection (HTTP/1.0 or 1.1 on the wire), whose
    /// answer may be a [`Body::Cached`](crate::response::Body::Cached): only `h1::Conn`
    /// writes one.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub h1: bool,
}

/// What the service does with a request.
pub(crate) enum Decision<P> {
    /// Answer now. A body that was not read (see [`Exchange::body`]) closes the connection
    /// after the answer, since the next request's start is unknown.
    Respond(Response),
    /// Read the body (up to `limit` bytes, 413 beyond) into `pending`; then
    /// [`Service::end`] decides.
    ReadBody { limit: u64, pending: P },
    /// The answer comes later through [`Conn::complete`] (503 and close at the deadline).
    Defer,
    /// The answer comes later from an upstream exchange ([`Conn::complete`] or a streamed
    /// answer), which keeps its own time (its timeouts end it with a 502 or 504): no
    /// deadline here. `upgrade`: the request asked to upgrade and went upstream asking it,
    /// so nothing after it is read as HTTP until its answer: a 101 makes the connection a
    /// byte tunnel, any other answer closes it.
    Relay { upgrade: bool },
    /// The request went upstream before its body arrived: read the body (up to `limit`, 413
    /// beyond) into `pending`, which sends it on as it comes, while the answer comes as for
    /// [`Decision::Relay`] (even before the body ends). While [`Service::room`] says no, the
    /// connection reads no more of it, until the driver wakes it. [`Service::end`]'s
    /// decision for it is not used.
    RelayBody { limit: u64, pending: P },
}

/// The application, as the connection sees it.
pub(crate) trait Service {
    /// Per-request state while its body is read.
    type Pending;
    /// A request head arrived: answer it, read its body, or defer it.
    fn request(&mut self, req: Exchange<'_>) -> Decision<Self::Pending>;
    /// A piece of the body of the request being read, in order. `Err` answers at once (and
    /// closes: the rest of the body is not read).
    fn data(&mut self, pending: &mut Self::Pending, data: &[u8]) -> Result<(), Response>;
    /// Whether a body read for [`Decision::RelayBody`] may take more now.
    fn room(&self, pending: &Self::Pending) -> bool;
    /// The body ended; `body` holds its trailers. Answer now or defer.
    fn end(
        &mut self,
        id: u64,
        pending: Self::Pending,
        body: BodyDecoder,
    ) -> Decision<Self::Pending>;
    /// The connection answered on its own (a malformed request — `error` says how —, a
    /// timeout, a limit): for the access log and the metrics. `request_line` is the refused
    /// request's line as it arrived (cut at [`MAX_LOGGED_LINE`]), empty when there is none.
    fn answered(
        &mut self,
        status: u16,
        error: Option<ParseError>,
        body_bytes: u64,
        request_line: &[u8],
    );
    /// The request line of the request whose body is being read into `pending` (for the
    /// access line when its body is refused); empty when the service kept none.
    fn request_line_of(&self, pending: &Self::Pending) -> Vec<u8>;
    /// The connection refuses the request whose body was being read into `pending` (too
    /// large, or malformed) with `resp`: the service may finish that answer as it finishes
    /// its own (the application's layers see it). By default it goes out as it is.
    fn refused(&mut self, pending: Self::Pending, resp: &mut Response) {
        let _ = (pending, resp);
    }
    /// Deferred request `id` got no answer within the deferred timeout: the connection
    /// answers it `resp` (a 503). The service finishes that answer as it would the handler's
    /// (its layers see it) and gives up on the handler, whose answer would come too late.
    fn timed_out(&mut self, id: u64, resp: &mut Response) {
        let _ = (id, resp);
    }
}

/// MAX_LOGGED_LINE: the most of a refused request's line handed to the access log.
pub(crate) const MAX_LOGGED_LINE: usize = 2048;

/// The request line at the start of `input` (after the one empty line RFC 9112 §2.2 lets a
/// client send first), up to its CR or LF, at most [`MAX_LOGGED_LINE`] bytes: what the access
/// log shows of a request refused before it parsed.
pub(crate) fn request_line(input: &[u8]) -> &[u8] {
    let input = input.strip_prefix(b"\r\n").unwrap_or(input);
    let input = &input[..input.len().min(MAX_LOGGED_LINE)];
    let end = memchr::memchr2(b'\r', b'\n', input).unwrap_or(input.len());
    &input[..end]
}

/// The head of an answer whose body comes in pieces after it (a proxied response; the
/// library's streaming responses are the same path): the connection frames the body for its
/// client (`Content-Length` when `length` is known, else chunked over HTTP/1.1, DATA frames
/// over HTTP/2).
pub(crate) struct StreamHead<'a> {
    pub status: u16,
    /// The fields, as they go out: names as given (HTTP/2 lowercases them), values byte for
    /// byte. Never framing or connection fields: the caller has removed those.
    pub fields: &'a [(&'a [u8], &'a [u8])],
    /// The body's length, when known before it comes.
    pub length: Option<u64>,
    /// The answer's own `Date` (a stored answer's, which a cache does not update); `None`:
    /// the connection writes the current one.
    pub date: Option<&'a [u8]>,
}
