//! The response a handler returns: status, content type, extra fields, body.
//!
//! Owns building responses and guarding them: field names must be tokens and values may not
//! hold CR, LF or NUL, so a handler cannot split a response. Encoding to bytes is the
//! dispatcher's job (with `linerate_http1::ResponseHead`).
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
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Body::Empty | Body::File(_) => &[],
            Body::Static(b) => b,
            Body::Owned(v) => v,
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
}

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
    /// body back with [`recycle`] once it is encoded, so a JSON answer costs no `malloc`/`free`
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

    /// Closes the connection after this response.
    pub fn close(mut self) -> Response {
        self.close = true;
        self
    }

    /// The status code.
    pub fn status_code(&self) -> u16 {
        self.status
    }

    /// The body bytes.
    pub fn body_bytes(&self) -> &[u8] {
        self.body.as_bytes()
    }
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
