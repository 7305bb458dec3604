//! Responses as a client reads them (the load generator, the lab's first-flight check): the
//! status line and fields (RFC 9112 §4, §5), how the body is delimited (§6.3), and the body
//! itself (Content-Length, chunked — the request side's [`ChunkedDecoder`] —, or to the close).
//!
//! Owns reading, never I/O: bytes in, facts and spans out. Strict where framing is at stake
//! (status line, Content-Length, Transfer-Encoding, chunk framing); lenient only where RFC 9112
//! lets a user agent be (a bare LF ending a head line, §2.2; obs-fold, §5.2). A proxy reads
//! with [`parse_response_strict`], which refuses those too, and any transfer coding but
//! `chunked` (a body it cannot decode, it cannot re-frame). Every error leaves the
//! connection's framing unknown: the caller closes it.
#![forbid(unsafe_code)]

use std::fmt;
use std::ops::Range;

use memchr::memchr;

use crate::body::{ChunkedDecoder, Step};
use crate::chars;
use crate::error::ParseError;
use crate::head::{Version, parse_content_length};
use crate::limits::Limits;

/// Longest response head (status line, fields, blank line) accepted.
pub const MAX_RESPONSE_HEAD_BYTES: usize = 64 * 1024;
/// Longest head the [`ResponseCounter`] remembers for its repeated-head fast path.
pub const HEAD_CACHE_BYTES: usize = 1024;

/// Why a response could not be read. After any of them the connection must close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResponseError {
    /// Not `HTTP/1.x SP 3DIGIT [SP reason-phrase]` (RFC 9112 §4), or a status under 100.
    StatusLine,
    /// A field line without a colon, a name that is not a token or is followed by whitespace
    /// (§5.1), a value with CR, NUL or other controls (RFC 9110 §5.5), or a continuation
    /// line before any field.
    FieldLine,
    /// The head is longer than [`MAX_RESPONSE_HEAD_BYTES`].
    HeadTooLarge,
    /// Content-Length that is not 1*DIGIT, overflows, or has differing values (§6.3 rule 5).
    ContentLength,
    /// Both Transfer-Encoding and Content-Length: "ought to be handled as an error"
    /// (§6.3 rule 3), since it is how responses are split.
    LengthAndEncoding,
    /// The chunked framing is broken (the decoder's error says how).
    Chunked(ParseError),
    /// The connection ended before the response did.
    CutOff,
    /// A line ended by a bare LF, read strictly (RFC 9112 §2.2: only a user agent may accept it).
    BareLf,
    /// obs-fold, read strictly (RFC 9112 §5.2: a proxy replaces it or answers 502).
    ObsFold,
    /// A transfer coding other than `chunked` alone, read strictly.
    TransferCoding,
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseError::StatusLine => f.write_str("malformed status line (expected HTTP/1.x)"),
            ResponseError::FieldLine => f.write_str("malformed header field line"),
            ResponseError::HeadTooLarge => {
                write!(f, "response head over {MAX_RESPONSE_HEAD_BYTES} bytes")
            }
            ResponseError::ContentLength => f.write_str("invalid or conflicting Content-Length"),
            ResponseError::LengthAndEncoding => {
                f.write_str("both Transfer-Encoding and Content-Length")
            }
            ResponseError::Chunked(e) => write!(f, "bad chunked framing: {e}"),
            ResponseError::CutOff => {
                f.write_str("connection closed before the end of the response")
            }
            ResponseError::BareLf => f.write_str("a line ended by a bare LF"),
            ResponseError::ObsFold => f.write_str("a folded field line (obs-fold)"),
            ResponseError::TransferCoding => f.write_str("a transfer coding other than chunked"),
        }
    }
}

impl std::error::Error for ResponseError {}

/// How a response body is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyLength {
    /// No body: 1xx, 204, 304, or the answer to HEAD (rule 1).
    Empty,
    /// Exactly this many bytes (rule 5).
    Length(u64),
    /// Chunked (rule 4: chunked is the final transfer coding).
    Chunked,
    /// To the close: other transfer codings, or no length at all (rules 4 and 8).
    UntilClose,
}

impl BodyLength {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            BodyLength::Empty => "none",
            BodyLength::Length(_) => "content-length",
            BodyLength::Chunked => "chunked",
            BodyLength::UntilClose => "close",
        }
    }
}

/// A parsed response head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseInfo {
    pub status: u16,
    pub version: Version,
    /// The server closes after this response: `Connection: close`, or HTTP/1.0 without
    /// `keep-alive` (RFC 9112 §9.3). (A body that runs to the close ends the connection too;
    /// see [`ResponseInfo::closes`].)
    pub close: bool,
    /// How the body of a response to anything but HEAD is delimited.
    pub length: BodyLength,
    /// Bytes of the head on the wire, the blank line included.
    pub head_len: usize,
}

impl ResponseInfo {
    /// A 1xx other than 101: interim; the final response follows (RFC 9110 §15.2).
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }

    /// How the body is delimited for the request it answers (`head`: a HEAD request).
    pub fn body_length(&self, head: bool) -> BodyLength {
        if head { BodyLength::Empty } else { self.length }
    }

    /// Whether the connection ends with this response to the request it answers.
    pub fn closes(&self, head: bool) -> bool {
        self.close || self.body_length(head) == BodyLength::UntilClose
    }
}

/// One field line of a head: spans of its name and (trimmed) value. A continuation line
/// (obs-fold) has an empty `name` span; a user agent joins its value to the previous field's
/// with a space (RFC 9112 §5.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldSpan {
    pub name: Range<usize>,
    pub value: Range<usize>,
}

/// Parses the response head at the start of `buf`: `Ok(None)` while it is incomplete. When
/// `fields` is given, every field line's spans are appended to it (it is cleared first).
/// A head is judged only once its end has arrived, so however its bytes are split, the
/// verdict is the same (a reader carrying a split head looks for that end alone).
pub fn parse_response(
    buf: &[u8],
    fields: Option<&mut Vec<FieldSpan>>,
) -> Result<Option<ResponseInfo>, ResponseError> {
    parse(buf, fields, false)
}

/// [`parse_response`] as a proxy must read an upstream's response, as strictly as a server
/// reads requests: a bare LF ([`ResponseError::BareLf`]), obs-fold ([`ResponseError::ObsFold`])
/// and a transfer coding other than `chunked` alone ([`ResponseError::TransferCoding`]) are
/// errors, so no field or framing a user agent would guess at is ever forwarded.
pub fn parse_response_strict(
    buf: &[u8],
    fields: Option<&mut Vec<FieldSpan>>,
) -> Result<Option<ResponseInfo>, ResponseError> {
    parse(buf, fields, true)
}

fn parse(
    buf: &[u8],
    mut fields: Option<&mut Vec<FieldSpan>>,
    strict: bool,
) -> Result<Option<ResponseInfo>, ResponseError> {
    if let Some(f) = fields.as_deref_mut() {
        f.clear();
    }
    let scan = &buf[..buf.len().min(MAX_RESPONSE_HEAD_BYTES)];
    if let Some(verdict) = fast::parse(scan, fields.as_deref_mut(), strict) {
        return verdict.map(Some);
    }
    if let Some(f) = fields.as_deref_mut() {
        f.clear();
    }
    parse_lines(buf, fields, strict)
}

/// The line by line reader: every head [`fast::parse`] gives up on (and, in tests, any head,
/// as the reference the fast reader is held to).
fn parse_lines(
    buf: &[u8],
    mut fields: Option<&mut Vec<FieldSpan>>,
    strict: bool,
) -> Result<Option<ResponseInfo>, ResponseError> {
    // One pass, line by line: a head that ends within the limit has every byte in `scan`.
    // An error found before the head's end is held until that end is seen (`settle`), so the
    // verdict never depends on how the bytes were split.
    let scan = &buf[..buf.len().min(MAX_RESPONSE_HEAD_BYTES)];
    let settle =
        |at: usize, ended: bool, e: ResponseError| settle(scan, buf.len(), at, ended, strict, e);
    let mut at = 0;
    let mut status_version = None;
    let mut facts = Facts::default();
    loop {
        let Some(lf) = memchr(b'\n', &scan[at..]) else {
            return incomplete(buf.len());
        };
        let i = at + lf;
        let cr = i > at && scan[i - 1] == b'\r';
        let line = &scan[at..if cr { i - 1 } else { i }];
        let start = at;
        at = i + 1;
        let ended = line.is_empty();
        if strict && !cr {
            return settle(at, ended, ResponseError::BareLf);
        }
        let Some((status, version)) = status_version else {
            match status_line(line) {
                Ok((status, version)) => {
                    status_version = Some((status, version));
                    facts.close = version == Version::Http10;
                    facts.http10 = version == Version::Http10;
                }
                Err(e) => return settle(at, ended, e),
            }
            continue;
        };
        if ended {
            return match facts.length(status) {
                Ok(length) => Ok(Some(ResponseInfo {
                    status,
                    version,
                    close: facts.close,
                    length,
                    head_len: at,
                })),
                Err(e) => Err(e),
            };
        }
        if matches!(line[0], b' ' | b'\t') {
            if strict && facts.any_field {
                return settle(at, false, ResponseError::ObsFold);
            }
            // obs-fold (RFC 9112 §5.2): the value goes on; framing fields are never folded
            // by a server that means them, so only the span is kept.
            if !facts.any_field || !chars::is_field_value(line) {
                return settle(at, false, ResponseError::FieldLine);
            }
            if let Some(f) = fields.as_deref_mut() {
                let v = chars::trim_ows(line);
                let lead = line.len() - line.trim_ascii_start().len();
                f.push(FieldSpan {
                    name: start..start,
                    value: start + lead..start + lead + v.len(),
                });
            }
            continue;
        }
        let Some(colon) = memchr(b':', line) else {
            return settle(at, false, ResponseError::FieldLine);
        };
        let name = &line[..colon];
        let raw = &line[colon + 1..];
        if !chars::is_token(name) || !chars::is_field_value(raw) {
            return settle(at, false, ResponseError::FieldLine);
        }
        let value = chars::trim_ows(raw);
        facts.any_field = true;
        if let Err(e) = facts.field(name, value) {
            return settle(at, false, e);
        }
        if strict
            && chars::token_eq_lower(name, b"transfer-encoding")
            && let Err(e) = facts.strict_coding(value)
        {
            return settle(at, false, e);
        }
        if let Some(f) = fields.as_deref_mut() {
            let lead = raw.len() - raw.trim_ascii_start().len();
            let v0 = start + colon + 1 + lead;
            f.push(FieldSpan {
                name: start..start + colon,
                value: v0..v0 + value.len(),
            });
        }
    }
}

/// No end within the limit yet: wait for more, or refuse a head already over it.
fn incomplete(len: usize) -> Result<Option<ResponseInfo>, ResponseError> {
    if len > MAX_RESPONSE_HEAD_BYTES {
        Err(ResponseError::HeadTooLarge)
    } else {
        Ok(None)
    }
}

/// `e` was found in the line before `at` (`ended`: that line was the head's empty last
/// one). It is the verdict once the head's end is in `scan`, unless the head is too large or,
/// read strictly, a later line ends with a bare LF (which outranks every other error, as if
/// the whole head had been checked for bare LFs first).
fn settle(
    scan: &[u8],
    len: usize,
    mut at: usize,
    mut ended: bool,
    strict: bool,
    mut e: ResponseError,
) -> Result<Option<ResponseInfo>, ResponseError> {
    while !ended {
        let Some(lf) = memchr(b'\n', &scan[at..]) else {
            return incomplete(len);
        };
        let i = at + lf;
        let cr = i > at && scan[i - 1] == b'\r';
        if strict && !cr {
            e = ResponseError::BareLf;
        }
        ended = i == at || (cr && i == at + 1);
        at = i + 1;
    }
    Err(e)
}

/// Where the head that starts `buf` ends (just after its empty line: CRLF, or a bare LF), if
/// that end is in `buf` at or after `from` (an empty first line ends it at once: it is then a
/// bad status line).
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    if buf.starts_with(b"\r\n") {
        return Some(2);
    }
    if buf.starts_with(b"\n") {
        return Some(1);
    }
    let from = from.saturating_sub(2);
    let tail = &buf[from..];
    let crlf = memchr::memmem::find(tail, b"\n\r\n").map(|p| p + 3);
    let lf = memchr::memmem::find(tail, b"\n\n").map(|p| p + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(from + a.min(b)),
        (a, b) => a.or(b).map(|e| from + e),
    }
}

/// RFC 9112 §4: `HTTP-version SP status-code SP [ reason-phrase ]`; the space before an
/// empty reason is tolerated missing, as every client does.
fn status_line(line: &[u8]) -> Result<(u16, Version), ResponseError> {
    let ok = line.len() >= 12
        && line.starts_with(b"HTTP/1.")
        && line[7].is_ascii_digit()
        && line[8] == b' '
        && line[9..12].iter().all(u8::is_ascii_digit)
        && (line.len() == 12 || line[12] == b' ')
        && line.get(13..).is_none_or(chars::is_field_value);
    if !ok {
        return Err(ResponseError::StatusLine);
    }
    let status = line[9..12]
        .iter()
        .fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    if status < 100 {
        return Err(ResponseError::StatusLine);
    }
    let version = if line[7] == b'0' {
        Version::Http10
    } else {
        Version::Http11
    };
    Ok((status, version))
}

/// What the framing fields said.
#[derive(Default)]
struct Facts {
    http10: bool,
    close: bool,
    any_field: bool,
    content_length: Option<u64>,
    /// Transfer-Encoding was present; `chunked`: its final coding is chunked.
    encoded: bool,
    chunked: bool,
    /// Read strictly: a `Transfer-Encoding: chunked` line was seen.
    strict_chunked: bool,
}

impl Facts {
    /// `name` is a token (both readers check that first). Only three names frame a
    /// response: any other is passed over here, by its length, without a call (one per
    /// field cost ~30 instructions; callgrind, docs/benchmarks.md).
    #[inline(always)]
    fn field(&mut self, name: &[u8], value: &[u8]) -> Result<(), ResponseError> {
        match name.len() {
            10 | 14 | 17 => self.framing_field(name, value),
            _ => Ok(()),
        }
    }

    /// [`Facts::field`] for a name of a framing field's length.
    fn framing_field(&mut self, name: &[u8], value: &[u8]) -> Result<(), ResponseError> {
        let is = |lit: &[u8]| chars::token_eq_lower(name, lit);
        match name.len() {
            14 if is(b"content-length") => {
                // §6.3 rule 5, read as a request's is; differing field lines are an error too.
                let n = parse_content_length(value).map_err(|_| ResponseError::ContentLength)?;
                if self.content_length.is_some_and(|old| old != n) {
                    return Err(ResponseError::ContentLength);
                }
                self.content_length = Some(n);
            }
            17 if is(b"transfer-encoding") => {
                self.encoded = true;
                // The final coding decides; a later field line's codings come after.
                if let Some(last) = value
                    .rsplit(|&b| b == b',')
                    .map(chars::trim_ows)
                    .find(|c| !c.is_empty())
                {
                    self.chunked = last.eq_ignore_ascii_case(b"chunked");
                }
            }
            10 if is(b"connection") => {
                for token in value.split(|&b| b == b',').map(chars::trim_ows) {
                    if token.eq_ignore_ascii_case(b"close") {
                        self.close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") && self.http10 {
                        self.close = false;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Read strictly, Transfer-Encoding is `chunked` alone, once: a proxy re-frames the body
    /// for its client and can do that only for codings it decodes.
    fn strict_coding(&mut self, value: &[u8]) -> Result<(), ResponseError> {
        if self.strict_chunked || !value.eq_ignore_ascii_case(b"chunked") {
            return Err(ResponseError::TransferCoding);
        }
        self.strict_chunked = true;
        Ok(())
    }

    /// RFC 9112 §6.3, in its order.
    fn length(&self, status: u16) -> Result<BodyLength, ResponseError> {
        if (100..200).contains(&status) || status == 204 || status == 304 {
            return Ok(BodyLength::Empty);
        }
        if self.encoded {
            if self.content_length.is_some() {
                return Err(ResponseError::LengthAndEncoding);
            }
            return Ok(if self.chunked {
                BodyLength::Chunked
            } else {
                BodyLength::UntilClose
            });
        }
        Ok(match self.content_length {
            Some(0) => BodyLength::Empty,
            Some(n) => BodyLength::Length(n),
            None => BodyLength::UntilClose,
        })
    }
}

/// Reads one response body from any split of its bytes.
#[derive(Debug)]
pub enum ResponseBody {
    /// This many bytes remain.
    Length(u64),
    Chunked(ChunkedDecoder),
    /// Everything until the connection closes.
    UntilClose,
    /// The body has ended (or there was none).
    Done,
}

impl ResponseBody {
    pub fn new(length: BodyLength) -> ResponseBody {
        match length {
            BodyLength::Empty | BodyLength::Length(0) => ResponseBody::Done,
            BodyLength::Length(n) => ResponseBody::Length(n),
            BodyLength::Chunked => ResponseBody::Chunked(ChunkedDecoder::new()),
            BodyLength::UntilClose => ResponseBody::UntilClose,
        }
    }

    /// Decodes from `input` (data slices point into it; nothing is copied). `done`: the body
    /// ended, and bytes after `consumed` are the next response's.
    #[inline]
    pub fn decode<'a>(
        &mut self,
        input: &'a [u8],
        limits: &Limits,
    ) -> Result<Step<'a>, ResponseError> {
        match self {
            ResponseBody::Length(left) => {
                let n = (*left).min(input.len() as u64) as usize;
                *left -= n as u64;
                let done = *left == 0;
                if done {
                    *self = ResponseBody::Done;
                }
                Ok(Step {
                    consumed: n,
                    data: &input[..n],
                    done,
                })
            }
            ResponseBody::Chunked(c) => {
                let step = c.decode(input, limits).map_err(ResponseError::Chunked)?;
                if step.done {
                    *self = ResponseBody::Done;
                }
                Ok(step)
            }
            ResponseBody::UntilClose => Ok(Step {
                consumed: input.len(),
                data: input,
                done: false,
            }),
            ResponseBody::Done => Ok(Step {
                consumed: 0,
                data: &[],
                done: true,
            }),
        }
    }

    /// Whether the body has ended.
    pub fn is_done(&self) -> bool {
        matches!(self, ResponseBody::Done)
    }

    /// The connection closed: the end of a body that runs to the close, an error for any
    /// other that has not ended.
    pub fn eof(&mut self) -> Result<(), ResponseError> {
        match self {
            ResponseBody::Done => Ok(()),
            ResponseBody::UntilClose => {
                *self = ResponseBody::Done;
                Ok(())
            }
            _ => Err(ResponseError::CutOff),
        }
    }
}

/// One response, counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counted {
    pub status: u16,
    /// The server closes after it.
    pub close: bool,
}

/// Where a [`ResponseCounter`] is.
#[derive(Debug)]
enum Counting {
    Head,
    Body(ResponseBody),
}

/// Frames responses on one connection and counts them, keeping nothing of them: the load
/// generator's reader (count-only). Heads are parsed in place when a read holds them whole;
/// a head split across reads is carried until its end arrives. A load test's responses
/// usually repeat the same head until the Date changes: a head equal to the last one is
/// recognised by one comparison and framed as it was.
#[derive(Debug)]
pub struct ResponseCounter {
    state: Counting,
    /// Head bytes carried over from an earlier read.
    carry: Vec<u8>,
    current: Counted,
    /// The last head parsed in place, and what it said.
    /// INVARIANT: `cached` is `Some` only when `cache` holds exactly that one complete head.
    cache: Vec<u8>,
    cached: Option<ResponseInfo>,
    limits: Limits,
}

impl Default for ResponseCounter {
    fn default() -> Self {
        ResponseCounter::new()
    }
}

impl ResponseCounter {
    pub fn new() -> ResponseCounter {
        ResponseCounter {
            state: Counting::Head,
            carry: Vec::new(),
            current: Counted {
                status: 0,
                close: false,
            },
            cache: Vec::new(),
            cached: None,
            limits: Limits::default(),
        }
    }

    /// No part of a response has been received.
    pub fn is_idle(&self) -> bool {
        matches!(self.state, Counting::Head) && self.carry.is_empty()
    }

    /// Back to the start of a response (a new connection).
    pub fn reset(&mut self) {
        self.state = Counting::Head;
        self.carry.clear();
    }

    /// Consumes bytes of `input` up to the end of at most one response; returns how many,
    /// and the response when it ended. `head`: the request was HEAD (no body follows).
    #[inline]
    pub fn feed(
        &mut self,
        input: &[u8],
        head: bool,
    ) -> Result<(usize, Option<Counted>), ResponseError> {
        match &mut self.state {
            Counting::Head => self.feed_head(input, head),
            Counting::Body(body) => {
                let step = body.decode(input, &self.limits)?;
                if step.done {
                    self.state = Counting::Head;
                    return Ok((step.consumed, Some(self.current)));
                }
                Ok((step.consumed, None))
            }
        }
    }

    /// The connection closed: the response this completes (one that ran to the close), or
    /// `None` when none was under way; an error for one cut off.
    pub fn eof(&mut self) -> Result<Option<Counted>, ResponseError> {
        let r = match &mut self.state {
            Counting::Head if self.carry.is_empty() => Ok(None),
            Counting::Head => Err(ResponseError::CutOff),
            Counting::Body(body) => body.eof().map(|()| Some(self.current)),
        };
        self.reset();
        r
    }

    fn feed_head(
        &mut self,
        input: &[u8],
        head: bool,
    ) -> Result<(usize, Option<Counted>), ResponseError> {
        if self.carry.is_empty() {
            if let Some(info) = self.cached
                && input.starts_with(&self.cache)
            {
                return Ok((self.cache.len(), self.start(info, head)));
            }
            if let Some(info) = parse_response(input, None)? {
                self.cached = None;
                if info.head_len <= HEAD_CACHE_BYTES {
                    self.cache.clear();
                    self.cache.extend_from_slice(&input[..info.head_len]);
                    self.cached = Some(info);
                }
                return Ok((info.head_len, self.start(info, head)));
            }
            self.carry.extend_from_slice(input);
            return Ok((input.len(), None));
        }
        // The head is split across reads: carry it until its end arrives, and parse it only
        // then (parsing on every piece would be quadratic in a head sent a byte at a time).
        let old = self.carry.len();
        let take = input
            .len()
            .min(MAX_RESPONSE_HEAD_BYTES + 1 - old.min(MAX_RESPONSE_HEAD_BYTES));
        self.carry.extend_from_slice(&input[..take]);
        if head_end(&self.carry, old).is_none() {
            if self.carry.len() > MAX_RESPONSE_HEAD_BYTES {
                return Err(ResponseError::HeadTooLarge);
            }
            return Ok((take, None));
        }
        match parse_response(&self.carry, None)? {
            Some(info) => {
                let used = info.head_len - old;
                self.carry.clear();
                Ok((used, self.start(info, head)))
            }
            None if self.carry.len() > MAX_RESPONSE_HEAD_BYTES => Err(ResponseError::HeadTooLarge),
            None => Ok((take, None)),
        }
    }

    /// Starts the body of a parsed head; returns the response when it has none.
    #[inline]
    fn start(&mut self, info: ResponseInfo, head: bool) -> Option<Counted> {
        self.current = Counted {
            status: info.status,
            close: info.closes(head),
        };
        if info.is_interim() {
            // RFC 9110 §15.2: interim; the final response follows and is the one counted.
            return None;
        }
        match ResponseBody::new(info.body_length(head)) {
            ResponseBody::Done => Some(self.current),
            body => {
                self.state = Counting::Body(body);
                None
            }
        }
    }
}

mod fast;
#[cfg(test)]
mod tests;
