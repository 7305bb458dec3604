//! The request-head parser: request line and header section (RFC 9112 §2–§6), strictly.
//!
//! Owns turning the bytes of one request head into spans plus the facts the server acts on
//! (method, version, body framing, keep-alive, Expect). It copies nothing and allocates only
//! when the reused header-span vector first grows. It never reads past the head: the returned
//! length is where the body (or the next pipelined request) begins. Parsing restarts from the
//! first byte on each call; callers avoid re-parsing by calling again only after a new LF.

use std::ops::Range;

use memchr::memchr;

use crate::chars::{self, HOST, TARGET, TCHAR};
use crate::error::ParseError;
use crate::limits::Limits;

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
        self.clear();
        // Never look past the head limit: a verdict must not depend on how many bytes beyond
        // it happen to have arrived (a bare LF past the limit is a 414/431, like its prefixes).
        let window = &buf[..buf.len().min(limits.max_head_bytes)];
        let mut pos = 0;
        // RFC 9112 §2.2: a server SHOULD ignore at least one empty line before the request line.
        if buf.starts_with(b"\r\n") {
            pos = 2;
        } else if buf.first() == Some(&b'\n') {
            return Err(ParseError::BareLf);
        }
        let Some(eol) = find_line_end(window, pos)? else {
            if buf.len() > limits.max_head_bytes {
                return Err(ParseError::UriTooLong);
            }
            return Ok(Parsed::Partial);
        };
        if eol + 2 > limits.max_head_bytes {
            return Err(ParseError::UriTooLong);
        }
        self.request_line(buf, pos, eol)?;
        pos = eol + 2;
        loop {
            let Some(eol) = find_line_end(window, pos)? else {
                if buf.len() > limits.max_head_bytes {
                    return Err(ParseError::HeadersTooLarge);
                }
                return Ok(Parsed::Partial);
            };
            if eol + 2 > limits.max_head_bytes {
                return Err(ParseError::HeadersTooLarge);
            }
            if eol == pos {
                self.finish()?;
                return Ok(Parsed::Complete(eol + 2));
            }
            if self.fields.len() == limits.max_headers {
                return Err(ParseError::TooManyHeaders);
            }
            self.field_line(buf, pos, eol)?;
            pos = eol + 2;
        }
    }

    /// RFC 9112 §3: `method SP request-target SP HTTP-version`.
    fn request_line(&mut self, buf: &[u8], start: usize, end: usize) -> Result<(), ParseError> {
        let line = &buf[start..end];
        let m = line
            .iter()
            .position(|&b| !TCHAR[b as usize])
            .unwrap_or(line.len());
        if m == 0 || line.get(m) != Some(&b' ') {
            return Err(ParseError::InvalidMethod);
        }
        self.method = Method::classify(&line[..m]);
        self.method_span = Span::new(start..start + m);

        let t0 = m + 1;
        let t = line[t0..]
            .iter()
            .position(|&b| !TARGET[b as usize])
            .map_or(line.len(), |i| t0 + i);
        if t == t0 {
            return Err(ParseError::InvalidTarget);
        }
        match line.get(t) {
            None => return Err(ParseError::InvalidVersion),
            Some(b' ') => {}
            Some(_) => return Err(ParseError::InvalidTarget),
        }
        let v = &line[t + 1..];
        let [b'H', b'T', b'T', b'P', b'/', major, b'.', minor] = *v else {
            return Err(ParseError::InvalidVersion);
        };
        if !major.is_ascii_digit() || !minor.is_ascii_digit() {
            return Err(ParseError::InvalidVersion);
        }
        if major != b'1' {
            return Err(ParseError::VersionNotSupported);
        }
        self.version = if minor == b'0' {
            Version::Http10
        } else {
            Version::Http11
        };
        self.target = Span::new(start + t0..start + t);
        self.classify_target(buf)
    }

    /// RFC 9112 §3.2: which form the target has, and where its path and query are.
    fn classify_target(&mut self, buf: &[u8]) -> Result<(), ParseError> {
        let t = self.target.of(buf);
        let base = self.target.start as usize;
        check_pct_encoding(t)?;
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

    /// RFC 9112 §5: `field-name ":" OWS field-value OWS`.
    fn field_line(&mut self, buf: &[u8], start: usize, end: usize) -> Result<(), ParseError> {
        let line = &buf[start..end];
        if matches!(line[0], b' ' | b'\t') {
            return Err(ParseError::ObsFold);
        }
        let n = line
            .iter()
            .position(|&b| !TCHAR[b as usize])
            .unwrap_or(line.len());
        match line.get(n) {
            Some(b':') if n > 0 => {}
            Some(b' ' | b'\t') if n > 0 => return Err(ParseError::WhitespaceBeforeColon),
            _ => return Err(ParseError::InvalidHeaderName),
        }
        let raw = &line[n + 1..];
        if !chars::is_field_value(raw) {
            return Err(ParseError::InvalidHeaderValue);
        }
        let lead = raw.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
        let value = chars::trim_ows(raw);
        let vstart = start + n + 1 + lead;
        let field = Field {
            name: Span::new(start..start + n),
            value: Span::new(vstart..vstart + value.len()),
        };
        self.fields.push(field);
        self.interpret(&line[..n], value, field.value)
    }

    /// Records the fields that decide framing, persistence and expectations.
    fn interpret(&mut self, name: &[u8], value: &[u8], span: Span) -> Result<(), ParseError> {
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => {
                if self.host.is_some() {
                    return Err(ParseError::DuplicateHost);
                }
                if !value.iter().all(|&b| HOST[b as usize]) {
                    return Err(ParseError::InvalidHost);
                }
                self.host = Some(span);
            }
            6 if name.eq_ignore_ascii_case(b"expect") => {
                if value.eq_ignore_ascii_case(b"100-continue") {
                    self.expect_continue = true;
                } else {
                    self.expect_other = true;
                }
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for opt in value.split(|&b| b == b',') {
                    let opt = chars::trim_ows(opt);
                    if opt.eq_ignore_ascii_case(b"close") {
                        self.conn_close = true;
                    } else if opt.eq_ignore_ascii_case(b"keep-alive") {
                        self.conn_keep_alive = true;
                    }
                }
            }
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                let n = parse_content_length(value)?;
                if self.content_length.is_some_and(|prev| prev != n) {
                    return Err(ParseError::InvalidContentLength);
                }
                self.content_length = Some(n);
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                self.transfer_encoding(value)?
            }
            _ => {}
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
    /// The request-target as sent.
    pub fn target<'b>(&self, buf: &'b [u8]) -> &'b str {
        ascii(self.target.of(buf))
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
    /// The query without its `?`, if the target has one.
    pub fn query<'b>(&self, buf: &'b [u8]) -> Option<&'b str> {
        self.query.map(|q| ascii(q.of(buf)))
    }
    /// The version semantics.
    pub fn version(&self) -> Version {
        self.version
    }
    /// How the body is delimited.
    pub fn framing(&self) -> Framing {
        self.framing
    }
    /// Whether the connection may stay open after this request (RFC 9112 §9.3).
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

/// Finds the CRLF that ends the line starting at `pos`; returns the index of its CR.
/// A LF not preceded by CR is an error wherever it is (RFC 9112 §2.2, strict).
#[inline]
fn find_line_end(buf: &[u8], pos: usize) -> Result<Option<usize>, ParseError> {
    match memchr(b'\n', &buf[pos..]) {
        None => Ok(None),
        Some(i) if i > 0 && buf[pos + i - 1] == b'\r' => Ok(Some(pos + i - 1)),
        Some(_) => Err(ParseError::BareLf),
    }
}

/// RFC 3986 §2.1: every `%` starts `%HEXDIG HEXDIG`.
fn check_pct_encoding(t: &[u8]) -> Result<(), ParseError> {
    let mut i = 0;
    while let Some(p) = memchr(b'%', &t[i..]) {
        let at = i + p;
        match t.get(at + 1..at + 3) {
            Some([a, b]) if a.is_ascii_hexdigit() && b.is_ascii_hexdigit() => i = at + 3,
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
    Ok(auth_start + auth_len)
}

/// RFC 9112 §6.3: `Content-Length = 1*DIGIT`; a list of identical values is accepted.
fn parse_content_length(value: &[u8]) -> Result<u64, ParseError> {
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
