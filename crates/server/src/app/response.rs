//! The response a handler returns: status, content type, extra fields, body.
//!
//! Owns building responses and guarding them: field names must be tokens and values may not
//! hold CR, LF or NUL, so a handler cannot split a response, and trailer fields may not be
//! ones RFC 9110 §6.5.1 keeps out of trailers. Encoding to bytes is the dispatcher's job
//! (with `linerate_http1::ResponseHead`).
#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::cell::Cell;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use serde::Serialize;

/// A response body held in memory.
#[derive(Clone, Debug, Default)]
pub enum Body {
    #[default]
    Empty,
    /// Bytes that live for the whole program (no copy, no allocation).
    Static(&'static [u8]),
    /// Bytes made for this response.
    Owned(Vec<u8>),
    /// A byte range of an open file, sent with `sendfile` (never read into user space).
    File(FileBody),
    /// Produced over time by a [`BodyWriter`](crate::streaming::BodyWriter) (see
    /// [`Response::stream`]): chunked over HTTP/1.1, DATA frames over HTTP/2. Never
    /// compressed; the access log counts its bytes as 0.
    Stream(crate::streaming::StreamBody),
    /// A fresh answer from the proxy cache's store, made only by the cache's hit path for an
    /// HTTP/1.1 client and written by its connection whole: status, stored fields (rendered
    /// once per entry) and the answer's own (`proxy::cache::Fresh`). Not for handlers.
    #[doc(hidden)]
    Cached(Cached),
}

/// A stored answer carried by [`Body::Cached`]; only the proxy cache makes one. An `Arc`,
/// not a `Box`: its drop is a decrement inline and the rest out of line, so every other
/// answer's drop of its body stays inlined (a `Box` here made `Body`'s drop an out-of-line
/// call on every answer: ~14 instructions a pipelined /plaintext, callgrind).
#[doc(hidden)]
#[derive(Clone, Debug)]
pub struct Cached(pub(crate) std::sync::Arc<crate::proxy::cache::Fresh>);

impl Cached {
    /// The body's bytes, out of line so that [`Body::as_bytes`] stays small for every other
    /// answer.
    #[inline(never)]
    fn bytes(&self) -> &[u8] {
        self.0.body()
    }
}

/// `len` bytes of `file` from `offset`, sent from the page cache.
#[derive(Clone, Debug)]
pub struct FileBody {
    pub file: Arc<OwnedFd>,
    pub offset: u64,
    pub len: u64,
}

impl Body {
    /// The body's bytes in memory (none for a file body).
    #[inline(always)]
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Body::Empty | Body::File(_) | Body::Stream(_) => &[],
            Body::Static(b) => b,
            Body::Owned(v) => v,
            Body::Cached(c) => c.bytes(),
        }
    }

    /// The body's length on the wire.
    pub fn len(&self) -> u64 {
        match self {
            Body::File(f) => f.len,
            b => b.as_bytes().len() as u64,
        }
    }

    /// Whether the body is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The in-memory bytes, the length on the wire and whether a file follows, in one match
    /// (the encoder needs all three for every answer).
    #[inline(always)]
    pub(crate) fn parts(&self) -> (&[u8], u64, bool) {
        match self {
            Body::Static(b) => (b, b.len() as u64, false),
            Body::Owned(v) => (v, v.len() as u64, false),
            Body::Empty => (&[], 0, false),
            Body::File(f) => (&[], f.len, true),
            Body::Stream(_) => (&[], 0, false),
            Body::Cached(c) => {
                let b = c.bytes();
                (b, b.len() as u64, false)
            }
        }
    }
}

/// A handler's response.
#[derive(Clone, Debug)]
pub struct Response {
    pub(crate) status: u16,
    pub(crate) content_type: Option<Cow<'static, str>>,
    pub(crate) headers: Vec<(Cow<'static, str>, Cow<'static, str>)>,
    pub(crate) body: Body,
    pub(crate) close: bool,
    /// Made from a [`Rejection`](crate::Rejection): an error renderer may re-render it.
    pub(crate) rejection: bool,
    /// Trailer fields sent after the body (RFC 9110 §6.5), boxed so an answer without them
    /// (nearly all) stays one pointer larger and pays one test.
    pub(crate) trailers: Option<Box<Trailers>>,
}

/// Trailer fields, (name, value) in the order they go out: what [`Response::trailer`] adds
/// and [`BodyWriter::end_with_trailers`](crate::streaming::BodyWriter::end_with_trailers)
/// takes.
pub type Trailers = Vec<Field>;

/// A field as an answer holds it: (name, value).
pub(crate) type Field = (Cow<'static, str>, Cow<'static, str>);

/// Largest buffer [`recycle`] keeps: one spare per thread, so an occasional large answer does
/// not pin its memory.
const MAX_SPARE_BYTES: usize = 16 * 1024;

thread_local! {
    /// This thread's spare body buffer (empty until a body is recycled).
    static SPARE: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Keeps the allocation of a body that has been encoded, for the next [`Response::json`] on
/// this thread. Buffers over [`MAX_SPARE_BYTES`] are freed instead.
#[inline(always)]
pub(crate) fn recycle(body: Body) {
    if let Body::Owned(v) = body
        && v.capacity() <= MAX_SPARE_BYTES
        && v.capacity() > 0
    {
        SPARE.set(v);
    }
}

/// Why a field was refused by [`Response::try_header`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidHeader;

impl std::fmt::Display for InvalidHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field name is not a token or value holds CR, LF or a control byte")
    }
}

impl std::error::Error for InvalidHeader {}

impl Response {
    /// An empty response with `status`.
    pub fn new(status: u16) -> Response {
        Response {
            status,
            content_type: None,
            headers: Vec::new(),
            body: Body::Empty,
            close: false,
            rejection: false,
            trailers: None,
        }
    }

    /// `200` with a content type and a body, built in place: the builder methods each move
    /// the ~90-byte value, and the common answers are on every request's path.
    #[inline(always)]
    fn ok(content_type: &'static str, body: Body) -> Response {
        Response {
            status: 200,
            content_type: Some(Cow::Borrowed(content_type)),
            headers: Vec::new(),
            body,
            close: false,
            rejection: false,
            trailers: None,
        }
    }

    /// `200 text/plain` with a static body.
    pub fn text(body: &'static str) -> Response {
        Response::ok("text/plain", Body::Static(body.as_bytes()))
    }

    /// `200 text/plain` with an owned body.
    pub fn text_owned(body: String) -> Response {
        Response::ok("text/plain", Body::Owned(body.into_bytes()))
    }

    /// `200 application/json` with `value` serialized by serde_json; a value that fails to
    /// serialize gives 500.
    ///
    /// The bytes go into a buffer the worker thread reuses: the dispatcher hands an in-memory
    /// body back with `recycle` once it is encoded, so a JSON answer costs no `malloc`/`free`
    /// pair (about 200 instructions per request under callgrind).
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Response {
        let mut v = SPARE.take();
        v.clear();
        match serde_json::to_writer(&mut v, value) {
            Ok(()) => Response::ok("application/json", Body::Owned(v)),
            Err(e) => {
                tracing::error!(error = %e, "response serialization failed");
                Response::new(500)
            }
        }
    }

    /// `200 application/json` whose body `write` appends to the buffer [`Response::json`]
    /// reuses, for a handler that writes its JSON itself (from a database row, without
    /// building the values first). The bytes must be JSON: nothing checks them.
    pub fn json_written(write: impl FnOnce(&mut Vec<u8>)) -> Response {
        let mut v = SPARE.take();
        v.clear();
        write(&mut v);
        Response::ok("application/json", Body::Owned(v))
    }

    /// Sets the status.
    pub fn status(mut self, status: u16) -> Response {
        self.status = status;
        self
    }

    /// Sets Content-Type.
    pub fn content_type(mut self, value: impl Into<Cow<'static, str>>) -> Response {
        self.content_type = Some(value.into());
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: Body) -> Response {
        self.body = body;
        self
    }

    /// This response with a body produced over time, and the writer that produces it from
    /// any thread (see [`streaming`](crate::streaming)): return the response from any kind
    /// of handler and keep the writer.
    ///
    /// ```
    /// use linerate_server::Response;
    /// let (resp, body) = Response::new(200).content_type("text/plain").stream();
    /// std::thread::spawn(move || {
    ///     for i in 0..3 {
    ///         if body.write(format!("tick {i}\n")).is_err() {
    ///             return; // full or gone: a real producer waits with `wait_room`
    ///         }
    ///     }
    ///     body.end();
    /// });
    /// # drop(resp);
    /// ```
    pub fn stream(self) -> (Response, crate::streaming::BodyWriter) {
        let (body, writer) = crate::streaming::channel();
        (self.body(Body::Stream(body)), writer)
    }

    /// [`Response::stream`] for a body of `length` bytes known before they come: sent with
    /// `Content-Length` rather than chunked (see [`streaming::channel_sized`]).
    ///
    /// [`streaming::channel_sized`]: crate::streaming::channel_sized
    pub fn stream_sized(self, length: u64) -> (Response, crate::streaming::BodyWriter) {
        let (body, writer) = crate::streaming::channel_sized(length);
        (self.body(Body::Stream(body)), writer)
    }

    /// Adds a field; returns an error for a name that is not a token or a value with CR, LF
    /// or other controls. Content-Length, Transfer-Encoding, Connection and Date are managed
    /// by the server and refused here too.
    pub fn try_header(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<Cow<'static, str>>,
    ) -> Result<Response, InvalidHeader> {
        let (name, value) = (name.into(), value.into());
        check_field(&name, &value)?;
        self.headers.push((name, value));
        Ok(self)
    }

    /// Adds a field known to be valid (a literal); an invalid one is dropped and logged.
    pub fn header(mut self, name: &'static str, value: impl Into<Cow<'static, str>>) -> Response {
        let value = value.into();
        match check_field(name, &value) {
            Ok(()) => self.headers.push((Cow::Borrowed(name), value)),
            Err(e) => {
                tracing::error!(name, error = %e, "handler set an invalid response field; dropped")
            }
        }
        self
    }

    /// Adds a trailer field, sent after the body (RFC 9110 §6.5; gRPC's `grpc-status` and
    /// `grpc-message` go here): in a HEADERS frame after the last DATA over HTTP/2 and
    /// HTTP/3, after the last chunk over HTTP/1.1 (the answer is then chunked, without
    /// Content-Length). An HTTP/1.0 client, a HEAD request and a status without content get
    /// the answer without them, and so does a file body. A field that may not be a trailer
    /// (framing, routing, authentication, caching and content fields: RFC 9110 §6.5.1), or
    /// an invalid one, makes the answer the server's 500 (logged).
    ///
    /// ```
    /// use linerate_server::Response;
    /// let resp = Response::new(200)
    ///     .content_type("application/grpc")
    ///     .body(linerate_server::Body::Static(b"\0\0\0\0\0"))
    ///     .trailer("grpc-status", "0");
    /// assert_eq!(resp.trailers(), [("grpc-status".into(), "0".into())]);
    /// ```
    pub fn trailer(mut self, name: &'static str, value: impl Into<Cow<'static, str>>) -> Response {
        self.trailers
            .get_or_insert_with(Box::default)
            .push((Cow::Borrowed(name), value.into()));
        self
    }

    /// Adds a trailer field ([`Response::trailer`]); returns an error for an invalid field
    /// (as [`Response::try_header`]) or a name that may not be a trailer (RFC 9110 §6.5.1).
    pub fn try_trailer(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<Cow<'static, str>>,
    ) -> Result<Response, InvalidHeader> {
        let (name, value) = (name.into(), value.into());
        check_trailer(&name, &value)?;
        self.trailers
            .get_or_insert_with(Box::default)
            .push((name, value));
        Ok(self)
    }

    /// The trailer fields, in the order they go out (empty for most answers).
    pub fn trailers(&self) -> &[(Cow<'static, str>, Cow<'static, str>)] {
        self.trailers.as_deref().map_or(&[], Vec::as_slice)
    }

    /// Closes the connection after this response.
    pub fn close(mut self) -> Response {
        self.close = true;
        self
    }

    /// The status code.
    pub fn status_code(&self) -> u16 {
        self.status
    }

    /// The body bytes in memory (none for a file body: see [`Response::body_ref`]).
    pub fn body_bytes(&self) -> &[u8] {
        self.body.as_bytes()
    }

    /// The body, whatever its kind.
    pub fn body_ref(&self) -> &Body {
        &self.body
    }

    /// The Content-Type, if one is set.
    pub fn content_type_value(&self) -> Option<&str> {
        self.content_type.as_deref()
    }

    /// The first field named `name` (case-insensitive), Content-Type included. The fields the
    /// server writes itself (Content-Length, Date, Connection, Server) are not here.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// Every field in the order it goes out: Content-Type first when set, then the others as
    /// they were added.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        let content_type = self.content_type.as_deref().map(|v| ("Content-Type", v));
        content_type
            .into_iter()
            .chain(self.headers.iter().map(|(n, v)| (n.as_ref(), v.as_ref())))
    }

    /// Whether the connection closes after this response.
    pub fn closes(&self) -> bool {
        self.close
    }

    /// Sets the status in place (for a [`Layer`](crate::Layer)'s `after`).
    pub fn set_status(&mut self, status: u16) {
        self.status = status;
    }

    /// Sets a field in place, replacing every field of that name (Content-Type included);
    /// refused as [`Response::try_header`] refuses.
    pub fn set_header(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<Cow<'static, str>>,
    ) -> Result<(), InvalidHeader> {
        let (name, value) = (name.into(), value.into());
        if name.eq_ignore_ascii_case("content-type") {
            if !linerate_http1::is_valid_field_value(value.as_bytes()) {
                return Err(InvalidHeader);
            }
            self.content_type = Some(value);
            return Ok(());
        }
        check_field(&name, &value)?;
        self.remove_header(&name);
        self.headers.push((name, value));
        Ok(())
    }

    /// Removes every field named `name` (case-insensitive), Content-Type included.
    pub fn remove_header(&mut self, name: &str) {
        if name.eq_ignore_ascii_case("content-type") {
            self.content_type = None;
        }
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    }
}

/// Why a handler's answer cannot go out as it is (see [`checked`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unsendable {
    /// A status outside 200–999: an informational status (101 included) is not a final
    /// answer, and a status must be three digits.
    Status,
    /// An `Upgrade` field on an answer other than 426: switching protocols needs an API that
    /// hands the connection over, which the handler did not use.
    Upgrade,
    /// A trailer field that is invalid or may not be a trailer (RFC 9110 §6.5.1).
    Trailer,
}

/// A handler's answer as the server sends it: unchanged, or `None` with the reason when it
/// would switch protocols (101, `Upgrade`) without the connection being handed over, or
/// carry a status that is no final answer. The caller answers 500 instead, so the client
/// never reads its next bytes as a protocol it never got (RFC 9110 §15.2, §7.8).
#[inline(always)]
pub(crate) fn checked(resp: &Response) -> Result<(), Unsendable> {
    if !(200..=999).contains(&resp.status) {
        return Err(Unsendable::Status);
    }
    // RFC 9110 §15.5.22: a 426 says which protocols with `Upgrade`.
    if resp.status != 426
        && resp
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("upgrade"))
    {
        return Err(Unsendable::Upgrade);
    }
    if let Some(t) = &resp.trailers
        && t.iter().any(|(n, v)| check_trailer(n, v).is_err())
    {
        return Err(Unsendable::Trailer);
    }
    Ok(())
}

/// Fields a sender must not put in a trailer section, as RFC 9110 §6.5.1 lists their kinds:
/// framing (and the connection's own fields), routing, request modifiers (controls,
/// conditionals, ranges), authentication, response control data (§10.2, caching) and what
/// says how to process the content. A recipient may merge trailers into the head, so any of
/// these would change what the head said.
const NOT_TRAILERS: &[&str] = &[
    // framing, and the fields of one connection
    "content-length",
    "transfer-encoding",
    "te",
    "trailer",
    "connection",
    "keep-alive",
    "proxy-connection",
    "upgrade",
    // routing
    "host",
    // request modifiers
    "cache-control",
    "expect",
    "max-forwards",
    "pragma",
    "range",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
    "if-range",
    // authentication
    "authorization",
    "proxy-authorization",
    "www-authenticate",
    "proxy-authenticate",
    "set-cookie",
    "cookie",
    // response control data
    "age",
    "date",
    "expires",
    "location",
    "retry-after",
    "vary",
    "warning",
    // how to process the content
    "content-encoding",
    "content-type",
    "content-range",
];

/// A trailer field as [`check_field`] checks a field, and not one of [`NOT_TRAILERS`]
/// (pseudo-fields are no tokens, so they fail the name's check).
pub(crate) fn check_trailer(name: &str, value: &str) -> Result<(), InvalidHeader> {
    if NOT_TRAILERS.iter().any(|n| name.eq_ignore_ascii_case(n)) {
        return Err(InvalidHeader);
    }
    check_field(name, value)
}

fn check_field(name: &str, value: &str) -> Result<(), InvalidHeader> {
    let managed = ["content-length", "transfer-encoding", "connection", "date"]
        .iter()
        .any(|m| name.eq_ignore_ascii_case(m));
    if managed
        || !linerate_http1::is_valid_field_name(name.as_bytes())
        || !linerate_http1::is_valid_field_value(value.as_bytes())
    {
        return Err(InvalidHeader);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_that_would_switch_protocols_are_unsendable() {
        let cases: &[(Response, Result<(), Unsendable>)] = &[
            (Response::new(200), Ok(())),
            (Response::new(999), Ok(())),
            (Response::new(101), Err(Unsendable::Status)),
            (Response::new(103), Err(Unsendable::Status)),
            (Response::new(100), Err(Unsendable::Status)),
            (Response::new(0), Err(Unsendable::Status)),
            (Response::new(1000), Err(Unsendable::Status)),
            (
                Response::new(101).header("Upgrade", "websocket"),
                Err(Unsendable::Status),
            ),
            (
                Response::new(200).header("upgrade", "websocket"),
                Err(Unsendable::Upgrade),
            ),
            (Response::new(426).header("Upgrade", "websocket"), Ok(())),
            (Response::new(204).header("X-Upgrade", "no"), Ok(())),
        ];
        for (resp, want) in cases {
            assert_eq!(checked(resp), *want, "{resp:?}");
        }
    }

    #[test]
    fn fields_read_back_as_they_go_out() {
        let resp = Response::json(&[1])
            .header("X-A", "1")
            .header("x-b", "2")
            .close();
        assert_eq!(resp.status_code(), 200);
        assert_eq!(
            resp.fields().collect::<Vec<_>>(),
            [
                ("Content-Type", "application/json"),
                ("X-A", "1"),
                ("x-b", "2")
            ]
        );
        assert_eq!(resp.field("content-type"), Some("application/json"));
        assert_eq!(resp.field("X-B"), Some("2"));
        assert_eq!(resp.field("x-c"), None);
        assert_eq!(resp.content_type_value(), Some("application/json"));
        assert!(matches!(resp.body_ref(), Body::Owned(b) if b == b"[1]"));
        assert!(resp.closes());
        assert!(!Response::new(204).closes());
    }

    #[test]
    fn json_written_fills_the_recycled_buffer() {
        let first = Response::json_written(|b| b.extend_from_slice(b"{\"a\":1}"));
        assert_eq!(first.content_type_value(), Some("application/json"));
        let Body::Owned(v) = first.body else {
            panic!("an owned body")
        };
        assert_eq!(v, b"{\"a\":1}");
        let at = v.as_ptr();
        recycle(Body::Owned(v));
        let second = Response::json_written(|b| {
            assert!(b.is_empty(), "the spare buffer is cleared first");
            b.extend_from_slice(b"[]")
        });
        assert!(matches!(second.body_ref(), Body::Owned(b) if b == b"[]" && b.as_ptr() == at));
    }

    #[test]
    fn fields_change_in_place() {
        let mut resp = Response::text("x")
            .header("Vary", "Origin")
            .header("vary", "Cookie");
        resp.set_header("Vary", "Accept").unwrap();
        resp.set_header("content-type", "text/html").unwrap();
        resp.set_header("X-New", "1").unwrap();
        assert!(resp.set_header("X-Bad", "a\r\nb").is_err());
        assert!(resp.set_header("Content-Length", "1").is_err());
        resp.set_status(201);
        assert_eq!(
            resp.fields().collect::<Vec<_>>(),
            [
                ("Content-Type", "text/html"),
                ("Vary", "Accept"),
                ("X-New", "1")
            ]
        );
        resp.remove_header("x-new");
        resp.remove_header("Content-Type");
        assert_eq!(resp.fields().collect::<Vec<_>>(), [("Vary", "Accept")]);
        assert_eq!(resp.status_code(), 201);
    }

    /// RFC 9110 §6.5.1: framing, routing, request modifiers, authentication, response
    /// control data and content fields may not be trailers; pseudo-fields are no tokens.
    #[test]
    fn fields_that_may_not_be_trailers_are_refused() {
        #[rustfmt::skip]
        let refused = [
            "Content-Length", "transfer-encoding", "Trailer", "TE", "host", "Connection",
            "upgrade", "authorization", "www-authenticate", "cache-control", "expires",
            "location", "vary", "content-encoding", "Content-Type", "content-range", "date",
            ":status", "grpc status", "",
        ];
        for name in refused {
            assert!(
                Response::new(200).try_trailer(name, "1").is_err(),
                "{name:?}"
            );
            // `trailer` takes a literal as it is; the guard refuses it when the answer goes.
            let resp = Response::new(200).trailer("ok", "1").trailer(name, "1");
            assert_eq!(checked(&resp), Err(Unsendable::Trailer), "{name:?}");
        }
        assert!(Response::new(200).try_trailer("x", "a\r\nb").is_err());
        assert_eq!(
            checked(&Response::new(200).trailer("grpc-message", "bad\nvalue")),
            Err(Unsendable::Trailer)
        );
        let ok = Response::new(200)
            .try_trailer("grpc-status", "0")
            .unwrap()
            .trailer("Server-Timing", "db;dur=1")
            .trailer("grpc-message", "");
        assert_eq!(checked(&ok), Ok(()));
        assert_eq!(ok.trailers().len(), 3);
        assert!(Response::new(200).trailers().is_empty());
    }

    #[test]
    fn header_injection_is_refused() {
        assert!(
            Response::new(200)
                .try_header("X-A", "a\r\nSet-Cookie: x")
                .is_err()
        );
        assert!(Response::new(200).try_header("X A", "a").is_err());
        assert!(
            Response::new(200)
                .try_header("Content-Length", "5")
                .is_err()
        );
        assert!(Response::new(200).try_header("X-A", "fine value").is_ok());
    }
}
