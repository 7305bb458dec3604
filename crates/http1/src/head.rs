//! The request-head parser: request line and header section (RFC 9112 §2–§6), strictly.
//!
//! Owns turning the bytes of one request head into spans plus the facts the server acts on
//! (method, version, body framing, keep-alive, Expect). It copies nothing and allocates only
//! when the reused header-span vector first grows. It never reads past the head: the returned
//! length is where the body (or the next pipelined request) begins. Parsing restarts from the
//! first byte on each call; callers avoid re-parsing by calling again only after a new LF.
#![forbid(unsafe_code)]

use std::ops::Range;

use memchr::memchr;

use crate::chars::{self, Bytewise, HOST_CLASS, Scanner, TARGET_PLAIN_CLASS, TCHAR_CLASS};
use crate::error::ParseError;
use crate::limits::{Limits, MAX_METHOD_BYTES};

/// The request method. Methods are case-sensitive (RFC 9110 §9.1): `get` is `Other`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Options,
    Patch,
    Trace,
    Connect,
    /// A valid token that is not one of the above; the server answers 501.
    Other,
}

impl Method {
    fn classify(token: &[u8]) -> Method {
        match token {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"OPTIONS" => Method::Options,
            b"PATCH" => Method::Patch,
            b"TRACE" => Method::Trace,
            b"CONNECT" => Method::Connect,
            _ => Method::Other,
        }
    }

    /// The method's name as sent on the wire (`"OTHER"` is never returned for `Other`: use
    /// [`RequestHead::method_str`] for the actual token).
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
            Method::Patch => "PATCH",
            Method::Trace => "TRACE",
            Method::Connect => "CONNECT",
            Method::Other => "",
        }
    }
}

/// HTTP version semantics of the request. `HTTP/1.2`…`HTTP/1.9` are handled as 1.1
/// (RFC 9110 §6.2: a recipient of a higher minor version uses the highest it supports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
    /// A request the server read as HTTP/2 frames and hands on as this head
    /// ([`RequestHead::set_version`]); the parser never yields it.
    Http2,
    /// A request the server read as HTTP/3 frames (RFC 9114) and hands on as this head, as
    /// for [`Version::Http2`].
    Http3,
}

impl Version {
    /// The protocol as a request line (and an access log's `$server_protocol`) names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
            Version::Http2 => "HTTP/2.0",
            Version::Http3 => "HTTP/3.0",
        }
    }
}

/// How the request body is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body (no Content-Length and no Transfer-Encoding, or `Content-Length: 0`).
    None,
    /// Exactly this many bytes follow the head.
    Length(u64),
    /// A chunked body follows; decode it with [`crate::ChunkedDecoder`].
    Chunked,
}

/// The form of the request-target (RFC 9112 §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetForm {
    /// `/path?query`
    Origin,
    /// `http://authority/path?query`; the path and query are taken from it.
    Absolute,
    /// `host:port`, only with CONNECT.
    Authority,
    /// `*`, only with OPTIONS.
    Asterisk,
}

/// Result of a parse call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// The head is complete and this many bytes long (including a tolerated leading CRLF).
    Complete(usize),
    /// More bytes are needed.
    Partial,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Span {
    start: u32,
    end: u32,
}

impl Span {
    fn new(r: Range<usize>) -> Span {
        // Heads are bounded by Limits::max_head_bytes, far below u32::MAX.
        Span {
            start: r.start as u32,
            end: r.end as u32,
        }
    }
    fn of(self, buf: &[u8]) -> &[u8] {
        &buf[self.start as usize..self.end as usize]
    }
}

#[derive(Clone, Copy, Debug)]
struct Field {
    name: Span,
    value: Span,
}

/// The fields the parser itself interprets; every other field is only recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Known {
    Host,
    Expect,
    Connection,
    ContentLength,
    TransferEncoding,
    Other,
}

impl Known {
    /// Classifies a field name (a token): by length first, so most names cost one compare.
    #[inline(always)]
    fn of(name: &[u8]) -> Known {
        let is = |lit: &[u8]| chars::token_eq_lower(name, lit);
        match name.len() {
            4 if is(b"host") => Known::Host,
            6 if is(b"expect") => Known::Expect,
            10 if is(b"connection") => Known::Connection,
            14 if is(b"content-length") => Known::ContentLength,
            17 if is(b"transfer-encoding") => Known::TransferEncoding,
            _ => Known::Other,
        }
    }
}

/// A parsed request head: spans into the caller's buffer plus the interpreted facts.
///
/// Reuse one per worker: [`RequestHead::parse`] clears it, and its header vector keeps its
/// capacity, so steady-state parsing does not allocate. Accessors take the same buffer that
/// was parsed.
#[derive(Clone, Debug)]
pub struct RequestHead {
    method: Method,
    method_span: Span,
    target: Span,
    form: TargetForm,
    path: Span,
    query: Option<Span>,
    version: Version,
    fields: Vec<Field>,
    framing: Framing,
    keep_alive: bool,
    expect_continue: bool,
    host: Option<Span>,
    // Interpretation state while parsing.
    content_length: Option<u64>,
    te: TeState,
    conn_close: bool,
    conn_keep_alive: bool,
    expect_other: bool,
    /// Present when this CPU can run the vector class scans (detected once, in `new`).
    #[cfg(target_arch = "x86_64")]
    simd: Option<crate::simd::Ssse3>,
}

#[derive(Clone, Copy, Debug, Default)]
struct TeState {
    seen: bool,
    chunked: bool,
    last_chunked: bool,
    unknown: bool,
}

impl Default for RequestHead {
    fn default() -> Self {
        RequestHead::new()
    }
}

impl RequestHead {
    /// An empty head with room for 16 fields.
    pub fn new() -> RequestHead {
        RequestHead {
            method: Method::Get,
            method_span: Span::default(),
            target: Span::default(),
            form: TargetForm::Origin,
            path: Span::default(),
            query: None,
            version: Version::Http11,
            fields: Vec::with_capacity(16),
            framing: Framing::None,
            keep_alive: true,
            expect_continue: false,
            host: None,
            content_length: None,
            te: TeState::default(),
            conn_close: false,
            conn_keep_alive: false,
            expect_other: false,
            #[cfg(target_arch = "x86_64")]
            simd: crate::simd::Ssse3::detect(),
        }
    }

    /// A head that never uses vector scans: the reference the fuzz targets and tests compare
    /// the vector parser with. Servers use [`RequestHead::new`].
    #[doc(hidden)]
    pub fn bytewise() -> RequestHead {
        RequestHead {
            #[cfg(target_arch = "x86_64")]
            simd: None,
            ..RequestHead::new()
        }
    }

    fn clear(&mut self) {
        self.fields.clear();
        self.query = None;
        self.host = None;
        self.content_length = None;
        self.te = TeState::default();
        self.conn_close = false;
        self.conn_keep_alive = false;
        self.expect_other = false;
        self.expect_continue = false;
        self.framing = Framing::None;
    }

    /// Parses the head at the start of `buf`.
    ///
    /// Returns `Complete(n)` when the head is the first `n` bytes of `buf`, `Partial` when more
    /// bytes are needed, or the error to answer with. `n <= buf.len()` always.
    pub fn parse(&mut self, buf: &[u8], limits: &Limits) -> Result<Parsed, ParseError> {
        #[cfg(target_arch = "x86_64")]
        if let Some(cpu) = self.simd {
            return cpu.parse(self, buf, limits);
        }
        self.parse_bytewise(buf, limits)
    }

    /// The bytewise parser, out of line so that `parse` stays a two-way jump.
    #[inline(never)]
    fn parse_bytewise(&mut self, buf: &[u8], limits: &Limits) -> Result<Parsed, ParseError> {
        self.parse_with(Bytewise, buf, limits)
    }

    /// [`RequestHead::parse`] with class scans run by `scanner` (see [`Scanner`]).
    #[inline(always)]
    pub(crate) fn parse_with<S: Scanner>(
        &mut self,
        scanner: S,
        buf: &[u8],
        limits: &Limits,
    ) -> Result<Parsed, ParseError> {
        self.clear();
        // Never look past the head limit: a verdict must not depend on how many bytes beyond
        // it happen to have arrived (a bare LF past the limit is a 414/431, like its prefixes).
        let window = &buf[..buf.len().min(limits.max_head_bytes)];
        let mut pos = 0;
        // RFC 9112 §2.2: a server SHOULD ignore at least one empty line before the request line.
        if buf.starts_with(b"\r\n") {
            pos = 2;
        } else if buf == b"\r" {
            return Ok(Parsed::Partial);
        } else if buf.first() == Some(&b'\n') {
            return Err(ParseError::BareLf);
        }
        let Some(next) = self.request_line(scanner, window, pos)? else {
            if buf.len() > limits.max_head_bytes {
                return Err(ParseError::UriTooLong);
            }
            return Ok(Parsed::Partial);
        };
        pos = next;
        // Field lines are scanned in one pass: the scan that validates a value also finds its
        // CRLF (a strict value holds no CR or LF), so no line is read twice.
        let incomplete = || {
            if buf.len() > limits.max_head_bytes {
                Err(ParseError::HeadersTooLarge)
            } else {
                Ok(Parsed::Partial)
            }
        };
        loop {
            // RFC 9110 §5.1: field-name = token, then ":" with no whitespace before it.
            let i = scanner.scan(window, pos, &TCHAR_CLASS);
            let Some(&stop) = window.get(i) else {
                return incomplete();
            };
            if stop != b':' || i == pos {
                match (stop, i == pos) {
                    (b'\r', true) => {
                        return match window.get(pos + 1) {
                            None => incomplete(),
                            Some(b'\n') => {
                                self.finish()?;
                                Ok(Parsed::Complete(pos + 2))
                            }
                            Some(_) => Err(ParseError::InvalidHeaderName),
                        };
                    }
                    (b' ' | b'\t', true) => return Err(ParseError::ObsFold),
                    (b' ' | b'\t', false) => return Err(ParseError::WhitespaceBeforeColon),
                    (b'\n', _) => return Err(ParseError::BareLf),
                    _ => return Err(ParseError::InvalidHeaderName),
                }
            }
            if self.fields.len() == limits.max_headers {
                return Err(ParseError::TooManyHeaders);
            }
            let known = Known::of(&window[pos..i]);
            // RFC 9110 §5.5: OWS, the value, OWS, CRLF. A strict value holds no CR or LF, so
            // the scan that validates it also finds the line end. A Host value is scanned with
            // the Host class first: where that scan reaches the value's end, it is valid.
            let mut v0 = i + 1;
            while let Some(b' ' | b'\t') = window.get(v0) {
                v0 += 1;
            }
            let mut j = v0;
            if known == Known::Host {
                j = scanner.scan(window, j, &HOST_CLASS);
            }
            let host_end = j;
            if window.get(j) != Some(&b'\r') {
                j += chars::field_value_len(&window[j..]);
            }
            let Some(&end) = window.get(j) else {
                return incomplete();
            };
            match end {
                b'\r' => match window.get(j + 1) {
                    None => return incomplete(),
                    Some(b'\n') => {}
                    Some(_) => return Err(ParseError::InvalidHeaderValue),
                },
                b'\n' => return Err(ParseError::BareLf),
                _ => return Err(ParseError::InvalidHeaderValue),
            }
            let mut e = j;
            while e > v0 && matches!(window[e - 1], b' ' | b'\t') {
                e -= 1;
            }
            let field = Field {
                name: Span::new(pos..i),
                value: Span::new(v0..e),
            };
            self.fields.push(field);
            if known != Known::Other {
                self.interpret(known, &window[v0..e], field.value, host_end >= e)?;
            }
            pos = j + 2;
        }
    }

    /// RFC 9112 §3: `method SP request-target SP HTTP-version CRLF`, scanned in one pass.
    /// Returns where the field lines start, or `None` when more bytes are needed.
    #[inline(always)]
    fn request_line<S: Scanner>(
        &mut self,
        scanner: S,
        w: &[u8],
        start: usize,
    ) -> Result<Option<usize>, ParseError> {
        let i = if w[start..].starts_with(b"GET ") {
            self.method = Method::Get;
            start + 3
        } else {
            let i = scanner.scan(w, start, &TCHAR_CLASS);
            if i - start > MAX_METHOD_BYTES {
                return Err(ParseError::MethodTooLong);
            }
            match w.get(i) {
                None => return Ok(None),
                Some(b' ') if i > start => {}
                Some(b'\n') => return Err(ParseError::BareLf),
                Some(_) => return Err(ParseError::InvalidMethod),
            }
            self.method = Method::classify(&w[start..i]);
            if self.method == Method::Connect {
                // RFC 9110 §9.3.6: a client may send a tunnel's bytes right behind its
                // CONNECT. Whatever the answer, what follows is not known to be a request:
                // the connection ends with it (GET, the common method, never comes here).
                self.conn_close = true;
            }
            i
        };
        self.method_span = Span::new(start..i);

        let t0 = i + 1;
        let (mut j, mut pct, mut query) = (t0, false, None);
        loop {
            j = scanner.scan(w, j, &TARGET_PLAIN_CLASS);
            match w.get(j) {
                Some(b'%') => pct = true,
                Some(b'?') if query.is_none() => query = Some(j),
                Some(b'?') => {}
                // Browsers send a query's backslash raw (WHATWG URL: not in the query
                // percent-encode set); in a path it is refused below.
                Some(b'\\') if query.is_some() => {}
                _ => break,
            }
            j += 1;
        }
        match w.get(j) {
            None => return Ok(None),
            Some(b' ') if j > t0 => {}
            Some(b'\r') if j > t0 => {
                // `GET /` CRLF: a request line without a version (HTTP/0.9) is refused.
                return match w.get(j + 1) {
                    None => Ok(None),
                    Some(b'\n') => Err(ParseError::InvalidVersion),
                    Some(_) => Err(ParseError::InvalidTarget),
                };
            }
            Some(b'\n') => return Err(ParseError::BareLf),
            Some(_) => return Err(ParseError::InvalidTarget),
        }
        self.target = Span::new(t0..j);

        // HTTP-version = "HTTP/" DIGIT "." DIGIT, then CRLF: ten bytes.
        let v0 = j + 1;
        if w.get(v0..v0 + 10) == Some(&b"HTTP/1.1\r\n"[..]) {
            self.version = Version::Http11;
        } else if self.other_version(w, v0)?.is_none() {
            return Ok(None);
        }
        if pct {
            check_pct_encoding(&w[t0..query.unwrap_or(j)])?;
        }
        if w[t0] == b'/' {
            // Origin-form, the common case: path and query are known from the scan.
            self.form = TargetForm::Origin;
            match query {
                Some(q) => {
                    self.path = Span::new(t0..q);
                    self.query = Some(Span::new(q + 1..j));
                }
                None => self.path = self.target,
            }
        } else {
            self.classify_target(w)?;
        }
        Ok(Some(v0 + 10))
    }

    /// `HTTP-version CRLF` at `v0` when it is not the common `HTTP/1.1`: another minor
    /// version, a version to refuse, or a partial one. `Ok(None)`: more bytes are needed.
    fn other_version(&mut self, w: &[u8], v0: usize) -> Result<Option<()>, ParseError> {
        let Some(v) = w.get(v0..v0 + 10) else {
            // Judge what has arrived so far, so garbage is refused without waiting.
            let have = &w[v0.min(w.len())..];
            let pattern = b"HTTP/0.0";
            let fits = have.iter().zip(pattern).all(|(&b, &p)| {
                if p == b'0' {
                    b.is_ascii_digit()
                } else {
                    b == p
                }
            });
            return match (fits, have.get(8)) {
                (false, _) => Err(ParseError::InvalidVersion),
                (true, None | Some(b'\r')) => Ok(None),
                (true, Some(b'\n')) => Err(ParseError::BareLf),
                (true, Some(_)) => Err(ParseError::InvalidVersion),
            };
        };
        let [b'H', b'T', b'T', b'P', b'/', major, b'.', minor, cr, lf] = *v else {
            return Err(ParseError::InvalidVersion);
        };
        if !major.is_ascii_digit() || !minor.is_ascii_digit() {
            return Err(ParseError::InvalidVersion);
        }
        match (cr, lf) {
            (b'\r', b'\n') => {}
            (b'\n', _) => return Err(ParseError::BareLf),
            _ => return Err(ParseError::InvalidVersion),
        }
        if major != b'1' {
            return Err(ParseError::VersionNotSupported);
        }
        self.version = if minor == b'0' {
            Version::Http10
        } else {
            Version::Http11
        };
        Ok(Some(()))
    }

    /// RFC 9112 §3.2: which form the target has, and where its path and query are.
    fn classify_target(&mut self, buf: &[u8]) -> Result<(), ParseError> {
        let t = self.target.of(buf);
        let base = self.target.start as usize;
        let (form, path_start) = if t[0] == b'/' {
            (TargetForm::Origin, 0)
        } else if t == b"*" {
            if self.method != Method::Options {
                return Err(ParseError::InvalidTarget);
            }
            self.form = TargetForm::Asterisk;
            self.path = self.target;
            return Ok(());
        } else if self.method == Method::Connect {
            self.form = TargetForm::Authority;
            self.path = self.target;
            return Ok(());
        } else {
            (TargetForm::Absolute, absolute_path_start(t)?)
        };
        self.form = form;
        let rest = &t[path_start..];
        match memchr(b'?', rest) {
            Some(q) => {
                self.path = Span::new(base + path_start..base + path_start + q);
                self.query = Some(Span::new(base + path_start + q + 1..base + t.len()));
            }
            None => self.path = Span::new(base + path_start..base + t.len()),
        }
        Ok(())
    }

    /// Records the fields that decide framing, persistence and expectations. `host_ok`: the
    /// value is all Host bytes (only asked of a Host field).
    fn interpret(
        &mut self,
        known: Known,
        value: &[u8],
        span: Span,
        host_ok: bool,
    ) -> Result<(), ParseError> {
        match known {
            Known::Host => {
                if self.host.is_some() {
                    return Err(ParseError::DuplicateHost);
                }
                // RFC 9110 §4.2.1: an http(s) URI with an empty host is invalid and MUST be
                // rejected; an empty Host names no authority, and this server serves no other.
                if !host_ok || value.is_empty() {
                    return Err(ParseError::InvalidHost);
                }
                self.host = Some(span);
            }
            Known::Expect => {
                if value.eq_ignore_ascii_case(b"100-continue") {
                    self.expect_continue = true;
                } else {
                    self.expect_other = true;
                }
            }
            Known::Connection => {
                for opt in value.split(|&b| b == b',') {
                    let opt = chars::trim_ows(opt);
                    if opt.eq_ignore_ascii_case(b"close") {
                        self.conn_close = true;
                    } else if opt.eq_ignore_ascii_case(b"keep-alive") {
                        self.conn_keep_alive = true;
                    }
                }
            }
            Known::ContentLength => {
                let n = parse_content_length(value)?;
                if self.content_length.is_some_and(|prev| prev != n) {
                    return Err(ParseError::InvalidContentLength);
                }
                self.content_length = Some(n);
            }
            Known::TransferEncoding => self.transfer_encoding(value)?,
            Known::Other => {}
        }
        Ok(())
    }

    /// RFC 9112 §6.1: `Transfer-Encoding = #transfer-coding`; lines combine in order.
    fn transfer_encoding(&mut self, value: &[u8]) -> Result<(), ParseError> {
        let mut any = false;
        for element in value.split(|&b| b == b',') {
            let element = chars::trim_ows(element);
            if element.is_empty() {
                continue; // RFC 9110 §5.6.1: empty list elements are ignored.
            }
            let coding = chars::trim_ows(element.split(|&b| b == b';').next().unwrap_or(b""));
            if !chars::is_token(coding) {
                return Err(ParseError::InvalidTransferEncoding);
            }
            any = true;
            self.te.seen = true;
            if coding.eq_ignore_ascii_case(b"chunked") {
                if self.te.chunked {
                    return Err(ParseError::ChunkedNotFinal);
                }
                self.te.chunked = true;
                self.te.last_chunked = true;
            } else {
                self.te.last_chunked = false;
                self.te.unknown = true;
            }
        }
        if !any {
            return Err(ParseError::InvalidTransferEncoding);
        }
        Ok(())
    }

    /// Checks that need the whole header section, then decides framing and persistence.
    fn finish(&mut self) -> Result<(), ParseError> {
        let v11 = self.version == Version::Http11;
        if v11 && self.host.is_none() {
            return Err(ParseError::MissingHost);
        }
        self.framing = if self.te.seen {
            if !v11 {
                return Err(ParseError::TransferEncodingOnHttp10);
            }
            if self.content_length.is_some() {
                return Err(ParseError::ContentLengthWithTransferEncoding);
            }
            if !self.te.last_chunked {
                return Err(ParseError::ChunkedNotFinal);
            }
            if self.te.unknown {
                return Err(ParseError::UnsupportedTransferCoding);
            }
            Framing::Chunked
        } else {
            match self.content_length {
                None | Some(0) => Framing::None,
                Some(n) => Framing::Length(n),
            }
        };
        if v11 {
            if self.expect_other {
                return Err(ParseError::UnsupportedExpectation);
            }
            self.keep_alive = !self.conn_close;
        } else {
            // RFC 9110 §10.1.1: Expect is ignored on HTTP/1.0.
            self.expect_continue = false;
            self.keep_alive = self.conn_keep_alive && !self.conn_close;
        }
        Ok(())
    }

    /// The method.
    pub fn method(&self) -> Method {
        self.method
    }
    /// The method token as sent.
    pub fn method_str<'b>(&self, buf: &'b [u8]) -> &'b str {
        ascii(self.method_span.of(buf))
    }
    /// The method token as sent, as bytes (no UTF-8 check): what a proxy copies.
    pub fn method_bytes<'b>(&self, buf: &'b [u8]) -> &'b [u8] {
        self.method_span.of(buf)
    }
    /// The request-target as sent.
    pub fn target<'b>(&self, buf: &'b [u8]) -> &'b str {
        ascii(self.target.of(buf))
    }
    /// The request-target as bytes (no UTF-8 check): what a cache keys on.
    pub fn target_bytes<'b>(&self, buf: &'b [u8]) -> &'b [u8] {
        self.target.of(buf)
    }
    /// The target's form.
    pub fn target_form(&self) -> TargetForm {
        self.form
    }
    /// The path (still pct-encoded). `/` for an absolute-form target with an empty path.
    pub fn path<'b>(&self, buf: &'b [u8]) -> &'b str {
        let p = ascii(self.path.of(buf));
        if p.is_empty() { "/" } else { p }
    }
    /// The path as bytes (no UTF-8 check): what routers match on.
    pub fn path_bytes<'b>(&self, buf: &'b [u8]) -> &'b [u8] {
        let p = self.path.of(buf);
        if p.is_empty() { b"/" } else { p }
    }
    /// The query without its `?`, if the target has one.
    pub fn query<'b>(&self, buf: &'b [u8]) -> Option<&'b str> {
        self.query.map(|q| ascii(q.of(buf)))
    }
    /// The query as bytes (no UTF-8 check), if the target has one: what a proxy copies.
    pub fn query_bytes<'b>(&self, buf: &'b [u8]) -> Option<&'b [u8]> {
        self.query.map(|q| q.of(buf))
    }
    /// The version semantics.
    pub fn version(&self) -> Version {
        self.version
    }
    /// Marks a head written from an HTTP/2 request ([`Version::Http2`]) after parsing it, so
    /// handlers and logs see the protocol the request came in.
    pub fn set_version(&mut self, version: Version) {
        self.version = version;
    }
    /// How the body is delimited.
    pub fn framing(&self) -> Framing {
        self.framing
    }
    /// Whether the connection may stay open after this request (RFC 9112 §9.3); never after
    /// a CONNECT, whose following bytes may be its tunnel's (RFC 9110 §9.3.6).
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }
    /// Whether the client waits for `100 Continue` before sending the body.
    pub fn expect_continue(&self) -> bool {
        self.expect_continue
    }
    /// The Host value, if present.
    pub fn host<'b>(&self, buf: &'b [u8]) -> Option<&'b [u8]> {
        self.host.map(|h| h.of(buf))
    }
    /// Number of field lines.
    pub fn header_count(&self) -> usize {
        self.fields.len()
    }
    /// All fields in order, values with surrounding whitespace removed.
    pub fn headers<'a, 'b: 'a>(
        &'a self,
        buf: &'b [u8],
    ) -> impl Iterator<Item = (&'b [u8], &'b [u8])> + 'a {
        self.fields
            .iter()
            .map(move |f| (f.name.of(buf), f.value.of(buf)))
    }
    /// The first field named `name` (ASCII case-insensitive).
    pub fn header<'b>(&self, buf: &'b [u8], name: &str) -> Option<&'b [u8]> {
        self.fields
            .iter()
            .find(|f| f.name.of(buf).eq_ignore_ascii_case(name.as_bytes()))
            .map(|f| f.value.of(buf))
    }
}

/// RFC 3986 §2.1 in a path: every `%` starts `%HEXDIG HEXDIG`, and none decodes to NUL, CR
/// or LF (the path names files and routes). A query is the application's: browsers send a
/// `%` there as typed (`?d=100%`, WHATWG URL §1.3), and it is passed on as sent. Called only
/// for a target with a `%`.
#[cold]
fn check_pct_encoding(path: &[u8]) -> Result<(), ParseError> {
    let mut i = 0;
    while let Some(p) = memchr(b'%', &path[i..]) {
        let at = i + p;
        match path.get(at + 1..at + 3) {
            Some([a, b]) if a.is_ascii_hexdigit() && b.is_ascii_hexdigit() => {
                if *a == b'0' && matches!(b, b'0' | b'a' | b'A' | b'd' | b'D') {
                    return Err(ParseError::EncodedControlInPath);
                }
                i = at + 3
            }
            _ => return Err(ParseError::InvalidTarget),
        }
    }
    Ok(())
}

/// RFC 9112 §3.2.2: `absolute-URI` with an `http` or `https` scheme and an authority.
/// Returns where the path-abempty starts.
fn absolute_path_start(t: &[u8]) -> Result<usize, ParseError> {
    let Some(colon) = memchr(b':', t) else {
        return Err(ParseError::InvalidTarget);
    };
    let scheme = &t[..colon];
    if !(scheme.eq_ignore_ascii_case(b"http") || scheme.eq_ignore_ascii_case(b"https")) {
        return Err(ParseError::InvalidTarget);
    }
    let Some(rest) = t[colon + 1..].strip_prefix(b"//") else {
        return Err(ParseError::InvalidTarget);
    };
    let auth_start = colon + 3;
    let auth_len = rest
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(rest.len());
    let authority = &rest[..auth_len];
    if authority.is_empty() || authority.contains(&b'@') {
        // RFC 9110 §4.2.4: userinfo is deprecated in http(s) URIs; a sender must not generate it.
        return Err(ParseError::InvalidTarget);
    }
    // The authority obeys Host's rules (RFC 9110 §7.2: uri-host [":" port]): the target's
    // wider byte set (browsers' `{ | }` in paths and queries) is not a host's.
    if !authority.iter().all(|&b| chars::HOST[b as usize]) {
        return Err(ParseError::InvalidTarget);
    }
    Ok(auth_start + auth_len)
}

/// RFC 9112 §6.3: `Content-Length = 1*DIGIT`; a list of identical values is accepted. Both
/// roles read it through this (requests here, responses in `response`).
pub(crate) fn parse_content_length(value: &[u8]) -> Result<u64, ParseError> {
    // The usual value, one number of at most 19 digits (under 10^19, so no overflow): read
    // without the list's splitting and the checked arithmetic.
    if (1..=19).contains(&value.len()) && value.iter().all(u8::is_ascii_digit) {
        return Ok(value.iter().fold(0, |n, &b| n * 10 + u64::from(b - b'0')));
    }
    let mut result = None;
    for member in value.split(|&b| b == b',') {
        let member = chars::trim_ows(member);
        if member.is_empty() {
            return Err(ParseError::InvalidContentLength);
        }
        let mut n: u64 = 0;
        for &b in member {
            if !b.is_ascii_digit() {
                return Err(ParseError::InvalidContentLength);
            }
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(b - b'0')))
                .ok_or(ParseError::InvalidContentLength)?;
        }
        match result {
            None => result = Some(n),
            Some(prev) if prev == n => {}
            Some(_) => return Err(ParseError::InvalidContentLength),
        }
    }
    result.ok_or(ParseError::InvalidContentLength)
}

/// The parser only keeps spans over bytes it has checked to be ASCII (tokens, targets) or
/// field values; field values may hold obs-text, so this falls back to "" rather than panic.
fn ascii(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or("")
}
