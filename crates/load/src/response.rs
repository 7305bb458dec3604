//! Sans-I/O HTTP/1.1 response framer: finds where each response ends, nothing more.
//! It reads the status line, `Content-Length`, `Transfer-Encoding: chunked` and `Connection: close`
//! and skips bodies without copying them. It never touches a socket, so it is tested with input split
//! at every byte. Invariant: `feed` consumes at most one response per call.
#![forbid(unsafe_code)]

use std::fmt;
use std::sync::LazyLock;

use memchr::memmem;

/// Longest response head accepted (status line + headers + blank line).
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Longest head remembered for the repeated-head fast path.
pub const HEAD_CACHE_BYTES: usize = 1024;
/// Longest chunk-size line accepted (hex digits + extensions).
pub const MAX_CHUNK_LINE: usize = 1024;

/// One fully received response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// The server said `Connection: close` (or spoke HTTP/1.0 without keep-alive).
    pub close: bool,
}

/// Why a response could not be framed. Any of these closes the connection and counts as
/// a "malformed" error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    StatusLine,
    Header,
    ContentLength,
    Chunk,
    HeadTooLarge,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Malformed::StatusLine => "bad status line",
            Malformed::Header => "bad header line",
            Malformed::ContentLength => "bad Content-Length",
            Malformed::Chunk => "bad chunked framing",
            Malformed::HeadTooLarge => "response head too large",
        })
    }
}

impl std::error::Error for Malformed {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    /// Reading hex digits of a chunk size; `seen` says whether any digit came yet.
    Size {
        size: u64,
        seen: bool,
    },
    /// Skipping a chunk extension up to CR.
    Ext {
        size: u64,
    },
    /// Expecting LF after the size line's CR.
    SizeLf {
        size: u64,
    },
    Data {
        remaining: u64,
    },
    DataCr,
    DataLf,
    /// At the start of a trailer line (or the final CRLF).
    TrailerStart,
    /// Inside a trailer field line, up to CR.
    TrailerLine,
    TrailerLineLf,
    FinalLf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    Length { remaining: u64 },
    Chunked { chunk: Chunk, line: usize },
    UntilClose,
}

/// Frames responses from a byte stream. One per connection.
#[derive(Debug)]
pub struct ResponseParser {
    state: State,
    /// Head bytes carried over from an earlier read (empty when a head fits in one read).
    head: Vec<u8>,
    /// Response being received (set once its head is parsed).
    current: Response,
    /// The bytes of the last head parsed in place, and what they parsed to.
    /// INVARIANT: `cached` is `Some` only when `cache` holds one complete head.
    cache: Vec<u8>,
    cached: Option<Head>,
}

impl Default for ResponseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseParser {
    pub fn new() -> Self {
        ResponseParser {
            state: State::Head,
            head: Vec::new(),
            current: Response {
                status: 0,
                close: false,
            },
            cache: Vec::new(),
            cached: None,
        }
    }

    /// True when no part of a response has been received.
    pub fn is_idle(&self) -> bool {
        self.state == State::Head && self.head.is_empty()
    }

    /// Resets to the start of a response (after a reconnect).
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.head.clear();
    }

    /// Consumes bytes from `input`, up to the end of one response. Returns how many bytes were
    /// consumed and the response if it completed. `no_body` says the request was HEAD.
    pub fn feed(
        &mut self,
        input: &[u8],
        no_body: bool,
    ) -> Result<(usize, Option<Response>), Malformed> {
        match self.state {
            State::Head => self.feed_head(input, no_body),
            State::Length { remaining } => {
                let take = remaining.min(input.len() as u64);
                let left = remaining - take;
                if left == 0 {
                    self.state = State::Head;
                    Ok((take as usize, Some(self.current)))
                } else {
                    self.state = State::Length { remaining: left };
                    Ok((take as usize, None))
                }
            }
            State::Chunked { .. } => self.feed_chunked(input),
            State::UntilClose => Ok((input.len(), None)),
        }
    }

    /// The peer closed the connection. Returns the response that the close completes
    /// (a body delimited by close), or `None` when nothing was pending. Anything else was cut off.
    pub fn eof(&mut self) -> Result<Option<Response>, CutOff> {
        let r = match self.state {
            State::UntilClose => Ok(Some(self.current)),
            State::Head if self.head.is_empty() => Ok(None),
            _ => Err(CutOff),
        };
        self.reset();
        r
    }

    fn feed_head(
        &mut self,
        input: &[u8],
        no_body: bool,
    ) -> Result<(usize, Option<Response>), Malformed> {
        if self.head.is_empty() {
            // Fastest path: the same head bytes as the last response (a load test's usual case,
            // until the Date changes). The cached bytes end at their first CRLFCRLF, so a match
            // is exactly this response's head, and equal heads frame equally.
            if let Some(head) = self.cached
                && input.starts_with(&self.cache)
            {
                return Ok((self.cache.len(), self.start_body(&head, no_body)));
            }
            // Fast path: the whole head is in this read; parse it in place, in one pass.
            if let Some((consumed, head)) = scan_head(input)? {
                self.cached = None;
                if consumed <= HEAD_CACHE_BYTES {
                    self.cache.clear();
                    self.cache.extend_from_slice(&input[..consumed]);
                    self.cached = Some(head);
                }
                return Ok((consumed, self.start_body(&head, no_body)));
            }
            if input.len() > MAX_HEAD_BYTES {
                return Err(Malformed::HeadTooLarge);
            }
            self.head.extend_from_slice(input);
            return Ok((input.len(), None));
        }
        // Slow path: the head is split across reads; carry it until its end arrives.
        let old = self.head.len();
        let room = MAX_HEAD_BYTES + 4 - old;
        let take = input.len().min(room);
        self.head.extend_from_slice(&input[..take]);
        match HEAD_END.find(&self.head[old.saturating_sub(3)..]) {
            Some(at) => {
                let end = old.saturating_sub(3) + at + 4;
                let parsed = scan_head(&self.head[..end])?;
                let (_, head) = parsed.ok_or(Malformed::Header)?;
                self.head.clear();
                Ok((end - old, self.start_body(&head, no_body)))
            }
            None if self.head.len() > MAX_HEAD_BYTES => Err(Malformed::HeadTooLarge),
            None => Ok((take, None)),
        }
    }

    /// Picks the body framing for a parsed head.
    fn start_body(&mut self, parsed: &Head, no_body: bool) -> Option<Response> {
        self.current = Response {
            status: parsed.status,
            close: parsed.close,
        };
        // RFC 9110 §15.2: 1xx responses are interim; the final response follows.
        if (100..200).contains(&parsed.status) {
            self.state = State::Head;
            return None;
        }
        // RFC 9112 §6.3: HEAD, 204 and 304 responses have no body whatever the headers say.
        if no_body || parsed.status == 204 || parsed.status == 304 {
            self.state = State::Head;
            return Some(self.current);
        }
        if parsed.chunked {
            self.state = State::Chunked {
                chunk: Chunk::Size {
                    size: 0,
                    seen: false,
                },
                line: 0,
            };
            return None;
        }
        match parsed.content_length {
            Some(0) => {
                self.state = State::Head;
                Some(self.current)
            }
            Some(n) => {
                self.state = State::Length { remaining: n };
                None
            }
            None => {
                // RFC 9112 §6.3 rule 8: the body runs to the close.
                self.current.close = true;
                self.state = State::UntilClose;
                None
            }
        }
    }

    fn feed_chunked(&mut self, input: &[u8]) -> Result<(usize, Option<Response>), Malformed> {
        let State::Chunked {
            mut chunk,
            mut line,
        } = self.state
        else {
            unreachable!("feed_chunked outside Chunked")
        };
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            if let Chunk::Data { remaining } = chunk {
                // Skip body bytes in bulk rather than one at a time.
                let take = remaining.min((input.len() - i) as u64);
                i += take as usize;
                let left = remaining - take;
                chunk = if left == 0 {
                    Chunk::DataCr
                } else {
                    Chunk::Data { remaining: left }
                };
                continue;
            }
            chunk = match chunk {
                Chunk::Data { .. } => unreachable!("handled above"),
                Chunk::Size { size, seen } => {
                    line += 1;
                    if let Some(d) = hex_digit(b) {
                        let size = size
                            .checked_mul(16)
                            .and_then(|s| s.checked_add(u64::from(d)))
                            .ok_or(Malformed::Chunk)?;
                        Chunk::Size { size, seen: true }
                    } else if !seen {
                        return Err(Malformed::Chunk);
                    } else if b == b'\r' {
                        Chunk::SizeLf { size }
                    } else if b == b';' || b == b' ' || b == b'\t' {
                        Chunk::Ext { size }
                    } else {
                        return Err(Malformed::Chunk);
                    }
                }
                Chunk::Ext { size } => {
                    line += 1;
                    match b {
                        b'\r' => Chunk::SizeLf { size },
                        b'\n' => return Err(Malformed::Chunk),
                        _ => Chunk::Ext { size },
                    }
                }
                Chunk::SizeLf { size } => {
                    if b != b'\n' {
                        return Err(Malformed::Chunk);
                    }
                    line = 0;
                    if size == 0 {
                        Chunk::TrailerStart
                    } else {
                        Chunk::Data { remaining: size }
                    }
                }
                Chunk::DataCr => {
                    if b != b'\r' {
                        return Err(Malformed::Chunk);
                    }
                    Chunk::DataLf
                }
                Chunk::DataLf => {
                    if b != b'\n' {
                        return Err(Malformed::Chunk);
                    }
                    Chunk::Size {
                        size: 0,
                        seen: false,
                    }
                }
                Chunk::TrailerStart => match b {
                    b'\r' => Chunk::FinalLf,
                    b'\n' => return Err(Malformed::Chunk),
                    _ => {
                        line = 1;
                        Chunk::TrailerLine
                    }
                },
                Chunk::TrailerLine => {
                    line += 1;
                    match b {
                        b'\r' => Chunk::TrailerLineLf,
                        b'\n' => return Err(Malformed::Chunk),
                        _ => Chunk::TrailerLine,
                    }
                }
                Chunk::TrailerLineLf => {
                    if b != b'\n' {
                        return Err(Malformed::Chunk);
                    }
                    line = 0;
                    Chunk::TrailerStart
                }
                Chunk::FinalLf => {
                    if b != b'\n' {
                        return Err(Malformed::Chunk);
                    }
                    self.state = State::Head;
                    return Ok((i + 1, Some(self.current)));
                }
            };
            if line > MAX_CHUNK_LINE {
                return Err(Malformed::Chunk);
            }
            i += 1;
        }
        self.state = State::Chunked { chunk, line };
        Ok((i, None))
    }
}

/// A connection closed in the middle of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutOff;

#[derive(Clone, Copy, Debug)]
struct Head {
    status: u16,
    close: bool,
    http10: bool,
    chunked: bool,
    content_length: Option<u64>,
}

/// The end of a response head (RFC 9112 §2.1), searched for only when a head is split.
static HEAD_END: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"\r\n\r\n"));

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Parses `HTTP/1.x SSS reason\r\n(name: value\r\n)*\r\n` from the start of `buf` in one pass.
/// Returns the bytes the head spans and the head, or `None` if its end is not in `buf` yet.
/// Only complete lines are judged, so a split head gives the same answer once whole.
fn scan_head(buf: &[u8]) -> Result<Option<(usize, Head)>, Malformed> {
    let Some(nl) = memchr::memchr(b'\n', buf) else {
        return Ok(None);
    };
    let line = buf[..nl].strip_suffix(b"\r").ok_or(Malformed::StatusLine)?;
    let mut out = status_line(line)?;
    let mut pos = nl + 1;
    loop {
        let Some(len) = memchr::memchr(b'\n', &buf[pos..]) else {
            return Ok(None);
        };
        let line = &buf[pos..pos + len];
        pos += len + 1;
        let line = line.strip_suffix(b"\r").ok_or(Malformed::Header)?;
        if line.is_empty() {
            return Ok(Some((pos, out)));
        }
        header_field(&mut out, line)?;
    }
}

/// RFC 9112 §4: status-line = HTTP-version SP status-code SP [ reason-phrase ]
fn status_line(line: &[u8]) -> Result<Head, Malformed> {
    let ok = line.len() >= 12
        && &line[..7] == b"HTTP/1."
        && line[7].is_ascii_digit()
        && line[8] == b' '
        && line[9..12].iter().all(u8::is_ascii_digit)
        && (line.len() == 12 || line[12] == b' ');
    if !ok {
        return Err(Malformed::StatusLine);
    }
    let status = line[9..12]
        .iter()
        .fold(0u16, |a, d| a * 10 + u16::from(d - b'0'));
    let http10 = line[7] == b'0';
    Ok(Head {
        status,
        close: http10,
        http10,
        chunked: false,
        content_length: None,
    })
}

/// Applies one `name: value` line; only the framing and connection fields matter.
fn header_field(out: &mut Head, line: &[u8]) -> Result<(), Malformed> {
    let colon = memchr::memchr(b':', line).ok_or(Malformed::Header)?;
    let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
    if name.is_empty() || name.iter().any(|b| b.is_ascii_whitespace()) {
        return Err(Malformed::Header);
    }
    if name.eq_ignore_ascii_case(b"content-length") {
        let n = parse_decimal(value).ok_or(Malformed::ContentLength)?;
        // RFC 9112 §6.3 rule 5: differing lengths are unrecoverable.
        if out.content_length.is_some_and(|old| old != n) {
            return Err(Malformed::ContentLength);
        }
        out.content_length = Some(n);
    } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
        let last = value
            .rsplit(|&b| b == b',')
            .next()
            .map(trim)
            .unwrap_or_default();
        out.chunked = last.eq_ignore_ascii_case(b"chunked");
    } else if name.eq_ignore_ascii_case(b"connection") {
        for token in value.split(|&b| b == b',').map(trim) {
            if token.eq_ignore_ascii_case(b"close") {
                out.close = true;
            } else if token.eq_ignore_ascii_case(b"keep-alive") && out.http10 {
                out.close = false;
            }
        }
    }
    Ok(())
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|b| *b != b' ' && *b != b'\t')
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| *b != b' ' && *b != b'\t')
        .map_or(start, |e| e + 1);
    &s[start..end]
}

fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 {
        return None;
    }
    s.iter().try_fold(0u64, |a, &d| {
        d.is_ascii_digit().then(|| a * 10 + u64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests;
