//! Response head encoding and status reason phrases.
//!
//! Owns the bytes of a response head: status line, Server, Date, Content-Type, Content-Length,
//! Connection and caller fields, appended to the caller's buffer. It does not validate caller
//! fields: the server's response builder guarantees they hold no CR, LF or NUL.
#![forbid(unsafe_code)]

/// The interim response sent for `Expect: 100-continue`.
pub const CONTINUE_100: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The reason phrase for a status code ("" for codes without one; the phrase is optional
/// on the wire, RFC 9112 §4).
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// Whether a response with this status carries no content and no Content-Length
/// (RFC 9110 §8.6, §15.3.5: 1xx and 204; 304 repeats what a GET would send, so callers
/// pass its length explicitly if they want one).
#[inline(always)]
pub fn status_has_no_body(status: u16) -> bool {
    // 200 first: nearly every answer, and one compare instead of the range test's several.
    status != 200 && ((100..200).contains(&status) || status == 204 || status == 304)
}

/// The parts of a response head.
#[derive(Clone, Copy, Debug)]
pub struct ResponseHead<'a> {
    /// Status code, 100–999.
    pub status: u16,
    /// `Server` value, if any.
    pub server: Option<&'a [u8]>,
    /// The cached `Date` value (see [`crate::DateCache`]).
    pub date: &'a [u8],
    /// `Content-Type` value, if any.
    pub content_type: Option<&'a [u8]>,
    /// `Content-Length` value; omitted for statuses without content.
    pub content_length: u64,
    /// Add `Connection: close`.
    pub close: bool,
    /// Add `Connection: keep-alive` (for HTTP/1.0 clients that asked for it).
    pub keep_alive_10: bool,
}

impl ResponseHead<'_> {
    /// Appends the status line and the managed fields, without the blank line that ends the
    /// head, so the caller can add its own fields with [`write_field`] and then [`end_head`].
    pub fn write_start(&self, out: &mut Vec<u8>) {
        self.write(out, None);
    }

    /// Appends the whole response: the head with no other fields, the blank line, and `body`.
    pub fn write_with_body(&self, out: &mut Vec<u8>, body: &[u8]) {
        self.write(out, Some(body));
    }

    /// [`ResponseHead::write_with_body`] composing in the caller's [`HeadRoom`], which keeps
    /// its bytes between calls, instead of in zeroed room at the end of `out`: the head is
    /// copied once instead of its room being zeroed first (a 288-byte memset per response).
    #[inline(always)]
    pub fn write_with_body_in(&self, out: &mut Vec<u8>, body: &[u8], room: &mut HeadRoom) {
        let inline_body = (body.len() <= INLINE_BODY).then_some(body);
        if self.need(inline_body) > FAST_HEAD {
            self.write(out, Some(body));
            return;
        }
        let mut w = Cursor {
            buf: &mut room.0,
            at: 0,
        };
        self.compose(&mut w, true);
        if let Some(b) = inline_body {
            w.bytes(b);
        }
        let len = w.at;
        out.extend_from_slice(&room.0[..len]);
        if inline_body.is_none() {
            out.extend_from_slice(body);
        }
    }

    /// Bytes a head needs with its inline body, before the caller's fields.
    #[inline(always)]
    fn need(&self, inline_body: Option<&[u8]>) -> usize {
        HEAD_FIXED
            + self.server.map_or(0, <[u8]>::len)
            + self.date.len()
            + self.content_type.map_or(0, <[u8]>::len)
            + inline_body.map_or(0, <[u8]>::len)
    }

    /// Every head is composed here, per response, from its parts (TechEmpower's rules forbid
    /// keeping a rendered head); only the Date value is formatted once a second, by
    /// [`crate::DateCache`]. A head that fits [`FAST_HEAD`] (with a body up to
    /// [`INLINE_BODY`]) is written into zeroed room at the end of `out` that is then cut to
    /// length, through a [`Cursor`] whose writes need no bounds checks; a larger one is
    /// appended piece by piece.
    fn write(&self, out: &mut Vec<u8>, body: Option<&[u8]>) {
        let inline_body = body.filter(|b| b.len() <= INLINE_BODY);
        let need = self.need(inline_body);
        if need > FAST_HEAD {
            out.reserve(need);
            self.compose(out, body.is_some());
            out.extend_from_slice(body.unwrap_or_default());
            return;
        }
        let start = out.len();
        out.resize(start + ROOM, 0);
        let room: &mut [u8; ROOM] = (&mut out[start..start + ROOM]).try_into().unwrap();
        let mut w = Cursor { buf: room, at: 0 };
        self.compose(&mut w, body.is_some());
        if let Some(b) = inline_body {
            w.bytes(b);
        }
        let len = start + w.at;
        out.truncate(len);
        if let Some(b) = body
            && inline_body.is_none()
        {
            out.extend_from_slice(b);
        }
    }

    /// The head's pieces in order; `end` adds the blank line that ends it.
    #[inline(always)]
    fn compose(&self, w: &mut impl Pieces, end: bool) {
        if self.status == 200 {
            w.lit(b"HTTP/1.1 200 OK\r\n");
        } else {
            w.lit(b"HTTP/1.1 ");
            w.decimal(u64::from(self.status));
            w.lit(b" ");
            w.bytes(reason(self.status).as_bytes());
            w.lit(b"\r\n");
        }
        if let Some(server) = self.server {
            w.lit(b"Server: ");
            w.bytes(server);
            w.lit(b"\r\n");
        }
        w.lit(b"Date: ");
        w.bytes(self.date);
        if let Some(ct) = self.content_type {
            w.lit(b"\r\nContent-Type: ");
            w.bytes(ct);
        }
        if !status_has_no_body(self.status) {
            w.lit(b"\r\nContent-Length: ");
            w.decimal(self.content_length);
        }
        if self.close {
            w.lit(b"\r\nConnection: close");
        } else if self.keep_alive_10 {
            w.lit(b"\r\nConnection: keep-alive");
        }
        w.lit(b"\r\n");
        if end {
            w.lit(b"\r\n");
        }
    }
}

/// Where a head's pieces go: a [`Cursor`] (short heads) or the output itself (long ones).
trait Pieces {
    /// A literal.
    fn lit<const N: usize>(&mut self, s: &[u8; N]);
    /// A value.
    fn bytes(&mut self, s: &[u8]);
    /// A number in decimal.
    fn decimal(&mut self, v: u64);
}

impl Pieces for Vec<u8> {
    #[inline(always)]
    fn lit<const N: usize>(&mut self, s: &[u8; N]) {
        self.extend_from_slice(s);
    }
    #[inline(always)]
    fn bytes(&mut self, s: &[u8]) {
        self.extend_from_slice(s);
    }
    #[inline(always)]
    fn decimal(&mut self, v: u64) {
        self.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }
}

/// Bytes of a head beyond its Server, Date and Content-Type values: at most 146 (a 5-digit
/// status code with the longest reason phrase, field names, separators, a 20-digit
/// Content-Length, `Connection: keep-alive` and the blank line).
const HEAD_FIXED: usize = 160;

/// Largest head (with its inline body) written through a [`Cursor`].
const FAST_HEAD: usize = 240;

/// A cursor's position is taken modulo this before each write, so a fixed-size write of up
/// to 32 bytes is provably inside [`ROOM`] and compiles without a bounds check. Positions
/// never reach it: a head on this path is at most [`FAST_HEAD`] bytes.
const WINDOW: usize = 256;

/// Room zeroed at the end of the output for a [`Cursor`].
const ROOM: usize = WINDOW + 32;

/// Bodies up to this long are written with the head; longer ones are appended after it.
const INLINE_BODY: usize = 64;

/// "00" to "99".
const DIGIT_PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Room a caller keeps for composing heads in ([`ResponseHead::write_with_body_in`]); one per
/// thread that encodes, reused for every head. Its bytes between uses mean nothing.
pub struct HeadRoom([u8; ROOM]);

impl Default for HeadRoom {
    fn default() -> Self {
        HeadRoom([0; ROOM])
    }
}

impl std::fmt::Debug for HeadRoom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeadRoom")
    }
}

/// Writes the pieces of a head into room zeroed for it (or a [`HeadRoom`]).
struct Cursor<'a> {
    buf: &'a mut [u8; ROOM],
    at: usize,
}

impl Cursor<'_> {
    /// Where the next piece goes (see [`WINDOW`]).
    #[inline(always)]
    fn pos(&self) -> usize {
        self.at % WINDOW
    }
}

impl Pieces for Cursor<'_> {
    /// A literal: a fixed-size copy.
    #[inline(always)]
    fn lit<const N: usize>(&mut self, s: &[u8; N]) {
        let at = self.pos();
        self.buf[at..at + N].copy_from_slice(s);
        self.at = at + N;
    }

    /// A value: 4 to 32 bytes as two overlapping fixed-size copies (never past its end),
    /// others with `copy_from_slice`.
    #[inline(always)]
    fn bytes(&mut self, s: &[u8]) {
        let n = s.len();
        let at = self.pos();
        let d = &mut self.buf[at..];
        if (16..=32).contains(&n) {
            d[..16].copy_from_slice(&s[..16]);
            d[n - 16..n].copy_from_slice(&s[n - 16..]);
        } else if (8..16).contains(&n) {
            d[..8].copy_from_slice(&s[..8]);
            d[n - 8..n].copy_from_slice(&s[n - 8..]);
        } else if (4..8).contains(&n) {
            d[..4].copy_from_slice(&s[..4]);
            d[n - 4..n].copy_from_slice(&s[n - 4..]);
        } else {
            d[..n].copy_from_slice(s);
        }
        self.at = at + n;
    }

    /// `v` in decimal: up to four digits from a table of digit pairs, longer through `itoa`.
    #[inline(always)]
    fn decimal(&mut self, v: u64) {
        let at = self.pos();
        let pair = |p: u64| {
            let i = 2 * p as usize;
            [DIGIT_PAIRS[i], DIGIT_PAIRS[i + 1]]
        };
        if v < 10 {
            self.buf[at] = b'0' + v as u8;
            self.at = at + 1;
        } else if v < 100 {
            self.buf[at..at + 2].copy_from_slice(&pair(v));
            self.at = at + 2;
        } else if v < 1000 {
            self.buf[at] = b'0' + (v / 100) as u8;
            self.buf[at + 1..at + 3].copy_from_slice(&pair(v % 100));
            self.at = at + 3;
        } else if v < 10_000 {
            self.buf[at..at + 2].copy_from_slice(&pair(v / 100));
            self.buf[at + 2..at + 4].copy_from_slice(&pair(v % 100));
            self.at = at + 4;
        } else {
            self.bytes(itoa::Buffer::new().format(v).as_bytes());
        }
    }
}

/// Appends `name: value\r\n`.
#[inline]
pub fn write_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.reserve(name.len() + value.len() + 4);
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// [`write_field`] for a name given as a literal, inlined so that the name's copy needs no
/// call to `memcpy` (~30 instructions a field: the proxy's answer heads, callgrind,
/// docs/benchmarks.md's section on a miss's instructions and syscalls). `write_field` itself
/// stays a call: inlined everywhere, the server's own answers cost more.
#[inline(always)]
pub fn literal_field(out: &mut Vec<u8>, name: &'static [u8], value: &[u8]) {
    out.reserve(name.len() + value.len() + 4);
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends the blank line that ends a head.
#[inline]
pub fn end_head(out: &mut Vec<u8>) {
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_has_length_and_close() {
        let mut out = Vec::new();
        ResponseHead {
            status: 200,
            server: Some(b"linerate"),
            date: b"Thu, 19 Nov 2026 10:00:00 GMT",
            content_type: Some(b"text/plain"),
            content_length: 13,
            close: true,
            keep_alive_10: false,
        }
        .write_start(&mut out);
        end_head(&mut out);
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nServer: linerate\r\nDate: Thu, 19 Nov 2026 10:00:00 GMT\r\n\
Content-Type: text/plain\r\nContent-Length: 13\r\nConnection: close\r\n\r\n"
        );
    }

    /// The head as a plain concatenation, the reference the cursor writer must equal.
    fn reference(h: &ResponseHead<'_>, body: &[u8]) -> Vec<u8> {
        let mut s = format!("HTTP/1.1 {} {}\r\n", h.status, reason(h.status));
        if h.status == 200 {
            s = "HTTP/1.1 200 OK\r\n".to_string();
        }
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
        if let Some(server) = h.server {
            s += &format!("Server: {}\r\n", text(server));
        }
        s += &format!("Date: {}\r\n", text(h.date));
        if let Some(ct) = h.content_type {
            s += &format!("Content-Type: {}\r\n", text(ct));
        }
        if !status_has_no_body(h.status) {
            s += &format!("Content-Length: {}\r\n", h.content_length);
        }
        if h.close {
            s += "Connection: close\r\n";
        } else if h.keep_alive_10 {
            s += "Connection: keep-alive\r\n";
        }
        s += "\r\n";
        let mut out = s.into_bytes();
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn composed_heads_equal_a_plain_concatenation() {
        let long = "x".repeat(100);
        let values: Vec<Option<&[u8]>> = [
            None,
            Some(""),
            Some("a"),
            Some("abcd"),
            Some("linerate"),
            Some("text/plain"),
            Some("application/json"),
            Some("0123456789abcdef0"),
            Some("application/javascript; charset=utf-8"),
            Some(&long[..24]),
            Some(&long[..50]),
            Some(long.as_str()),
        ]
        .iter()
        .map(|v| v.map(str::as_bytes))
        .collect();
        let bodies: Vec<Vec<u8>> = [0, 1, 3, 4, 7, 8, 13, 16, 27, 32, 33, 64, 65, 300]
            .iter()
            .map(|&n| (0..n).map(|i| b'a' + (i % 26) as u8).collect())
            .collect();
        let lengths = [
            0,
            7,
            9,
            10,
            99,
            100,
            999,
            1000,
            9999,
            10_000,
            123_456_789,
            u64::MAX,
        ];
        let mut cases = 0;
        let mut room = HeadRoom::default();
        for status in [200, 100, 204, 301, 304, 404, 431, 500, 599, 999, 65535] {
            for (i, &server) in values.iter().enumerate() {
                let ct = values[(i * 7 + status as usize) % values.len()];
                for (k, &content_length) in lengths.iter().enumerate() {
                    let head = ResponseHead {
                        status,
                        server,
                        date: b"Thu, 19 Nov 2026 10:00:00 GMT",
                        content_type: ct,
                        content_length,
                        close: k % 3 == 0,
                        keep_alive_10: k % 3 == 1,
                    };
                    let body = &bodies[(k + i) % bodies.len()];
                    let mut out = b"earlier output".to_vec();
                    head.write_with_body(&mut out, body);
                    let mut want = b"earlier output".to_vec();
                    want.extend(reference(&head, body));
                    assert_eq!(out, want, "{head:?}");

                    // The same through a reused room holding an earlier head's bytes.
                    let mut out = b"earlier output".to_vec();
                    head.write_with_body_in(&mut out, body, &mut room);
                    assert_eq!(out, want, "{head:?} (in a room)");

                    let mut out = Vec::new();
                    head.write_start(&mut out);
                    end_head(&mut out);
                    assert_eq!(out, reference(&head, b""), "{head:?}");
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 11 * 12 * 12);
    }

    #[test]
    fn no_content_length_on_204_and_1xx() {
        for status in [100, 204] {
            let mut out = Vec::new();
            ResponseHead {
                status,
                server: None,
                date: b"d",
                content_type: None,
                content_length: 0,
                close: false,
                keep_alive_10: false,
            }
            .write_start(&mut out);
            assert!(
                !out.windows(14).any(|w| w == b"Content-Length"),
                "status {status}"
            );
        }
    }
}
