//! Sans-I/O HTTP/1.1 response framing for the firstflight client: where a head ends, what it
//! says, and where the body ends (RFC 9112 §6.3: Content-Length, chunked, or at close).
//!
//! Bytes in, offsets out; no sockets, so each rule is tested on byte strings. It must count
//! exactly: every offset is a position in the bytes as received, framing included. Lenient
//! where a client may be (bare LF line ends, obs-fold), strict where framing is ambiguous.

use std::fmt;

/// Longest response head (status line and fields) or trailer section accepted.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Longest chunk-size line (with extensions) accepted.
pub const MAX_CHUNK_LINE: usize = 4 * 1024;
/// Most hex digits in a chunk size: 15 fit a u64 with room to spare.
const MAX_CHUNK_SIZE_DIGITS: usize = 15;

/// Why a response could not be framed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The status line is not `HTTP/1.x NNN reason`.
    StatusLine,
    /// A field line without a colon, or with whitespace before it (RFC 9112 §5.1).
    FieldLine,
    /// The head or a trailer section is longer than [`MAX_HEAD_BYTES`].
    HeadTooLong,
    /// Content-Length is not digits, or several disagree (RFC 9112 §6.3 rule 5).
    ContentLength,
    /// A chunk-size line that is not hex, is too long or too large.
    ChunkSize,
    /// Chunk data not followed by CRLF.
    ChunkEnd,
    /// The peer closed before the body's end.
    Truncated { have: usize },
    /// 101 Switching Protocols to a plain GET.
    UnexpectedUpgrade,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::StatusLine => f.write_str("malformed status line (expected HTTP/1.x)"),
            FrameError::FieldLine => f.write_str("malformed header field line"),
            FrameError::HeadTooLong => write!(f, "response head over {MAX_HEAD_BYTES} bytes"),
            FrameError::ContentLength => f.write_str("invalid or conflicting Content-Length"),
            FrameError::ChunkSize => f.write_str("invalid chunk size line"),
            FrameError::ChunkEnd => f.write_str("chunk data not followed by CRLF"),
            FrameError::Truncated { have } => {
                write!(
                    f,
                    "connection closed before the end of the response ({have} bytes received)"
                )
            }
            FrameError::UnexpectedUpgrade => f.write_str("unexpected 101 Switching Protocols"),
        }
    }
}

impl std::error::Error for FrameError {}

/// A parsed response head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    /// Field names as sent; values trimmed, obs-folds joined with a space.
    pub fields: Vec<(String, String)>,
    /// Bytes of the head on the wire, the empty line included.
    pub len: usize,
}

/// How the body of a response is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// 1xx, 204, 304: no body whatever the fields say.
    Empty,
    Length(u64),
    Chunked,
    /// Read until the server closes.
    UntilClose,
}

impl Framing {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Framing::Empty => "none",
            Framing::Length(_) => "content-length",
            Framing::Chunked => "chunked",
            Framing::UntilClose => "close",
        }
    }
}

impl Head {
    /// The value of the first field named `name` (case-insensitive).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// All values of fields named `name`, comma-separated list elements split out.
    fn list(&self, name: &str) -> impl Iterator<Item = &str> {
        self.fields
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
    }

    /// 1xx other than 101: an interim response; the final one follows.
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }

    /// How the body of this response to a GET is framed.
    pub fn framing(&self) -> Result<Framing, FrameError> {
        // RFC 9112 §6.3 rule 1.
        if (100..200).contains(&self.status) || self.status == 204 || self.status == 304 {
            return Ok(Framing::Empty);
        }
        // Rule 4: chunked only if it is the final coding; otherwise the body runs to close.
        if self.field("transfer-encoding").is_some() {
            let last = self.list("transfer-encoding").last();
            return Ok(match last {
                Some(c) if c.eq_ignore_ascii_case("chunked") => Framing::Chunked,
                _ => Framing::UntilClose,
            });
        }
        // Rule 5: identical values (`42, 42` or repeated fields) are one length.
        let mut length = None;
        for v in self.list("content-length") {
            if !v.bytes().all(|b| b.is_ascii_digit()) {
                return Err(FrameError::ContentLength);
            }
            let n: u64 = v.parse().map_err(|_| FrameError::ContentLength)?;
            if length.is_some_and(|l| l != n) {
                return Err(FrameError::ContentLength);
            }
            length = Some(n);
        }
        if self.field("content-length").is_some() && length.is_none() {
            return Err(FrameError::ContentLength);
        }
        Ok(length.map_or(Framing::UntilClose, Framing::Length))
    }
}

/// The next line of `buf` from `at`: `(line without CRLF or LF, offset after it)`, or `None`
/// when no LF has arrived yet.
fn line(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let lf = memchr::memchr(b'\n', &buf[at..])?;
    let raw = &buf[at..at + lf];
    Some((raw.strip_suffix(b"\r").unwrap_or(raw), at + lf + 1))
}

/// Parses the head at the start of `buf`; `Ok(None)` while it is incomplete.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, FrameError> {
    let Some((status_line, mut at)) = line(buf, 0) else {
        return if buf.len() > MAX_HEAD_BYTES {
            Err(FrameError::HeadTooLong)
        } else {
            Ok(None)
        };
    };
    let status = parse_status_line(status_line)?;
    let mut fields: Vec<(String, String)> = Vec::new();
    loop {
        let Some((field, next)) = line(buf, at) else {
            return if buf.len() > MAX_HEAD_BYTES {
                Err(FrameError::HeadTooLong)
            } else {
                Ok(None)
            };
        };
        if next > MAX_HEAD_BYTES {
            return Err(FrameError::HeadTooLong);
        }
        at = next;
        if field.is_empty() {
            break;
        }
        if field[0] == b' ' || field[0] == b'\t' {
            // obs-fold (RFC 9112 §5.2): a user agent replaces it with a space.
            let Some((_, value)) = fields.last_mut() else {
                return Err(FrameError::FieldLine);
            };
            value.push(' ');
            value.push_str(String::from_utf8_lossy(field).trim());
            continue;
        }
        let colon = memchr::memchr(b':', field).ok_or(FrameError::FieldLine)?;
        let name = &field[..colon];
        if name.is_empty() || name.iter().any(|b| b.is_ascii_whitespace()) {
            return Err(FrameError::FieldLine);
        }
        fields.push((
            String::from_utf8_lossy(name).into_owned(),
            String::from_utf8_lossy(&field[colon + 1..])
                .trim()
                .to_string(),
        ));
    }
    Ok(Some(Head {
        status,
        fields,
        len: at,
    }))
}

fn parse_status_line(line: &[u8]) -> Result<u16, FrameError> {
    // `HTTP/1.x SP 3DIGIT [SP reason]`
    let ok = line.len() >= 12
        && line.starts_with(b"HTTP/1.")
        && line[7].is_ascii_digit()
        && line[8] == b' '
        && line[9..12].iter().all(u8::is_ascii_digit)
        && (line.len() == 12 || line[12] == b' ');
    if !ok {
        return Err(FrameError::StatusLine);
    }
    let status = line[9..12]
        .iter()
        .fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    if status < 100 {
        return Err(FrameError::StatusLine);
    }
    Ok(status)
}

/// Where the body reader is (RFC 9112 §7.1 for the chunked states).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Length { remaining: u64 },
    ChunkSize,
    ChunkData { remaining: u64 },
    ChunkDataEnd,
    Trailer { start: usize },
    UntilClose,
    Done,
}

/// Follows a body through the bytes received so far and collects its content (chunk
/// framing removed, content-coding kept).
#[derive(Debug)]
pub struct BodyReader {
    state: State,
    /// Offset in the wire buffer of the next unread byte.
    pos: usize,
    content: Vec<u8>,
}

impl BodyReader {
    /// A reader for a body that starts at offset `start` of the wire buffer.
    pub fn new(framing: Framing, start: usize) -> BodyReader {
        let state = match framing {
            Framing::Empty | Framing::Length(0) => State::Done,
            Framing::Length(n) => State::Length { remaining: n },
            Framing::Chunked => State::ChunkSize,
            Framing::UntilClose => State::UntilClose,
        };
        BodyReader {
            state,
            pos: start,
            content: Vec::new(),
        }
    }

    /// Reads what it can of `wire[pos..]`; `Some(end)` once the body is complete, `end` being
    /// the offset just after its last byte. Bytes after `end` are not this response's.
    pub fn advance(&mut self, wire: &[u8]) -> Result<Option<usize>, FrameError> {
        loop {
            match self.state {
                State::Done => return Ok(Some(self.pos)),
                State::UntilClose => {
                    self.content.extend_from_slice(&wire[self.pos..]);
                    self.pos = wire.len();
                    return Ok(None);
                }
                State::Length { remaining } | State::ChunkData { remaining } => {
                    let avail = (wire.len() - self.pos) as u64;
                    let take = avail.min(remaining);
                    let end = self.pos + take as usize;
                    self.content.extend_from_slice(&wire[self.pos..end]);
                    self.pos = end;
                    let remaining = remaining - take;
                    self.state = match (self.state, remaining) {
                        (State::Length { .. }, 0) => State::Done,
                        (State::Length { .. }, r) => State::Length { remaining: r },
                        (_, 0) => State::ChunkDataEnd,
                        (_, r) => State::ChunkData { remaining: r },
                    };
                    if remaining > 0 {
                        return Ok(None);
                    }
                }
                State::ChunkSize => {
                    let Some((size_line, next)) = line(wire, self.pos) else {
                        return self.need_line(wire, MAX_CHUNK_LINE, FrameError::ChunkSize);
                    };
                    if next - self.pos > MAX_CHUNK_LINE {
                        return Err(FrameError::ChunkSize);
                    }
                    let size = parse_chunk_size(size_line)?;
                    self.pos = next;
                    self.state = if size == 0 {
                        State::Trailer { start: next }
                    } else {
                        State::ChunkData { remaining: size }
                    };
                }
                State::ChunkDataEnd => {
                    let rest = &wire[self.pos..];
                    if rest.starts_with(b"\r\n") {
                        self.pos += 2;
                    } else if rest.starts_with(b"\n") {
                        self.pos += 1;
                    } else if rest.is_empty() || rest == b"\r" {
                        return Ok(None);
                    } else {
                        return Err(FrameError::ChunkEnd);
                    }
                    self.state = State::ChunkSize;
                }
                State::Trailer { start } => {
                    let Some((field, next)) = line(wire, self.pos) else {
                        return if wire.len() - start > MAX_HEAD_BYTES {
                            Err(FrameError::HeadTooLong)
                        } else {
                            Ok(None)
                        };
                    };
                    if next - start > MAX_HEAD_BYTES {
                        return Err(FrameError::HeadTooLong);
                    }
                    self.pos = next;
                    if field.is_empty() {
                        self.state = State::Done;
                    }
                }
            }
        }
    }

    /// An unterminated line: wait for more unless it is already too long.
    fn need_line(
        &self,
        wire: &[u8],
        max: usize,
        err: FrameError,
    ) -> Result<Option<usize>, FrameError> {
        if wire.len() - self.pos > max {
            Err(err)
        } else {
            Ok(None)
        }
    }

    /// The peer closed after `wire`: the end of a close-delimited body, an error for any
    /// other that is not complete.
    pub fn at_eof(&mut self, wire: &[u8]) -> Result<usize, FrameError> {
        match self.advance(wire)? {
            Some(end) => Ok(end),
            None if self.state == State::UntilClose => {
                self.state = State::Done;
                Ok(wire.len())
            }
            None => Err(FrameError::Truncated { have: wire.len() }),
        }
    }

    /// The body's content: chunk framing removed, content-coding as sent.
    pub fn into_content(self) -> Vec<u8> {
        self.content
    }
}

/// `chunk-size [ chunk-ext ]`: hex digits, then optional `;ext` (RFC 9112 §7.1.1), BWS allowed.
fn parse_chunk_size(line: &[u8]) -> Result<u64, FrameError> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || digits > MAX_CHUNK_SIZE_DIGITS {
        return Err(FrameError::ChunkSize);
    }
    let rest = &line[digits..];
    let rest_ok = rest.iter().all(|b| *b == b' ' || *b == b'\t')
        || rest
            .iter()
            .position(|b| *b == b';')
            .is_some_and(|semi| rest[..semi].iter().all(|b| *b == b' ' || *b == b'\t'));
    if !rest_ok {
        return Err(FrameError::ChunkSize);
    }
    let hex = std::str::from_utf8(&line[..digits]).map_err(|_| FrameError::ChunkSize)?;
    u64::from_str_radix(hex, 16).map_err(|_| FrameError::ChunkSize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(bytes: &[u8]) -> Head {
        parse_head(bytes).unwrap().expect("complete head")
    }

    #[test]
    fn head_length_counts_every_byte() {
        let rows: &[&[u8]] = &[
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\nContent-Length: 2\n\n",
            b"HTTP/1.0 404 \r\n\r\n",
            b"HTTP/1.1 204\r\n\r\n",
        ];
        for &bytes in rows {
            let mut with_body = bytes.to_vec();
            with_body.extend_from_slice(b"hi");
            assert_eq!(
                head(&with_body).len,
                bytes.len(),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn head_incomplete_and_errors() {
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nA: b\r\n"), Ok(None));
        assert_eq!(parse_head(b"HTTP/1.1 20"), Ok(None));
        let rows: &[(&[u8], FrameError)] = &[
            (b"HTTP/2 200 OK\r\n\r\n", FrameError::StatusLine),
            (b"HTTP/1.1 2000 OK\r\n\r\n", FrameError::StatusLine),
            (b"HTTP/1.1 099 OK\r\n\r\n", FrameError::StatusLine),
            (b"SSH-2.0-OpenSSH\r\n\r\n", FrameError::StatusLine),
            // RFC 9112 §5.1: no whitespace between field name and colon.
            (b"HTTP/1.1 200 OK\r\nA : b\r\n\r\n", FrameError::FieldLine),
            (b"HTTP/1.1 200 OK\r\nnocolon\r\n\r\n", FrameError::FieldLine),
            (
                b"HTTP/1.1 200 OK\r\n folded-first\r\n\r\n",
                FrameError::FieldLine,
            ),
        ];
        for (bytes, want) in rows {
            assert_eq!(
                parse_head(bytes).as_ref(),
                Err(want),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        let long = vec![b'a'; MAX_HEAD_BYTES + 1];
        assert_eq!(parse_head(&long), Err(FrameError::HeadTooLong));
    }

    #[test]
    fn obs_fold_is_joined() {
        // RFC 9112 §5.2: a user agent replaces obs-fold with SP.
        let h = head(b"HTTP/1.1 200 OK\r\nX-A: one\r\n  two\r\n\r\n");
        assert_eq!(h.field("x-a"), Some("one two"));
    }

    #[test]
    fn framing_table() {
        // (status and fields, framing) — RFC 9112 §6.3.
        let rows: &[(&str, Result<Framing, FrameError>)] = &[
            ("200 OK\r\nContent-Length: 10", Ok(Framing::Length(10))),
            ("200 OK\r\nContent-Length: 10, 10", Ok(Framing::Length(10))), // rule 5
            (
                "200 OK\r\nContent-Length: 10\r\nContent-Length: 10",
                Ok(Framing::Length(10)),
            ),
            (
                "200 OK\r\nContent-Length: 10, 11",
                Err(FrameError::ContentLength),
            ),
            (
                "200 OK\r\nContent-Length: -1",
                Err(FrameError::ContentLength),
            ),
            (
                "200 OK\r\nContent-Length: +1",
                Err(FrameError::ContentLength),
            ),
            ("200 OK\r\nContent-Length:", Err(FrameError::ContentLength)),
            ("200 OK\r\nTransfer-Encoding: chunked", Ok(Framing::Chunked)),
            (
                "200 OK\r\nTransfer-Encoding: gzip, Chunked",
                Ok(Framing::Chunked),
            ),
            // Rule 3: TE overrides CL.
            (
                "200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5",
                Ok(Framing::Chunked),
            ),
            // Rule 4: chunked not final → read to close.
            (
                "200 OK\r\nTransfer-Encoding: chunked, gzip",
                Ok(Framing::UntilClose),
            ),
            ("200 OK", Ok(Framing::UntilClose)), // rule 7
            ("204 No Content\r\nContent-Length: 5", Ok(Framing::Empty)), // rule 1
            ("304 Not Modified\r\nContent-Length: 5", Ok(Framing::Empty)),
            ("103 Early Hints\r\nLink: </a.css>", Ok(Framing::Empty)),
        ];
        for (fields, want) in rows {
            let h = head(format!("HTTP/1.1 {fields}\r\n\r\n").as_bytes());
            assert_eq!(&h.framing(), want, "{fields}");
        }
        assert!(head(b"HTTP/1.1 103 Early Hints\r\n\r\n").is_interim());
        assert!(!head(b"HTTP/1.1 101 Switching\r\n\r\n").is_interim());
    }

    /// Runs a body through the reader fed `step` bytes at a time; returns (end, content).
    fn read_body(
        framing: Framing,
        body: &[u8],
        step: usize,
        eof: bool,
    ) -> Result<(usize, Vec<u8>), FrameError> {
        let mut reader = BodyReader::new(framing, 0);
        let mut have = 0;
        while have < body.len() {
            have = (have + step).min(body.len());
            if let Some(end) = reader.advance(&body[..have])? {
                return Ok((end, reader.into_content()));
            }
        }
        let end = if eof {
            reader.at_eof(body)?
        } else {
            reader
                .advance(body)?
                .ok_or(FrameError::Truncated { have })?
        };
        Ok((end, reader.into_content()))
    }

    #[test]
    fn body_table() {
        // (framing, bytes on the wire, where the body ends, content) — fed whole, and one
        // byte at a time.
        let rows: &[(Framing, &[u8], usize, &[u8])] = &[
            (Framing::Length(5), b"hello", 5, b"hello"),
            (Framing::Length(5), b"helloEXTRA", 5, b"hello"),
            (Framing::Length(0), b"", 0, b""),
            (Framing::Empty, b"", 0, b""),
            (Framing::Chunked, b"5\r\nhello\r\n0\r\n\r\n", 15, b"hello"),
            (
                Framing::Chunked,
                b"5\r\nhello\r\n0\r\n\r\nNEXT",
                15,
                b"hello",
            ),
            (
                Framing::Chunked,
                b"3;ext=1\r\nabc\r\n2 \r\nde\r\n0\r\n\r\n",
                27,
                b"abcde",
            ),
            (
                Framing::Chunked,
                b"A\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n",
                32,
                b"0123456789",
            ),
            (Framing::Chunked, b"5\nhello\n0\n\n", 11, b"hello"),
            (Framing::UntilClose, b"until close", 11, b"until close"),
        ];
        for (framing, wire, end, content) in rows {
            let eof = *framing == Framing::UntilClose;
            for step in [wire.len().max(1), 1] {
                let got = read_body(*framing, wire, step, eof);
                assert_eq!(
                    got,
                    Ok((*end, content.to_vec())),
                    "{framing:?} {:?} step {step}",
                    String::from_utf8_lossy(wire)
                );
            }
        }
    }

    #[test]
    fn body_errors_table() {
        let rows: &[(Framing, &[u8], FrameError)] = &[
            (
                Framing::Length(10),
                b"short",
                FrameError::Truncated { have: 5 },
            ),
            (
                Framing::Chunked,
                b"5\r\nhel",
                FrameError::Truncated { have: 6 },
            ),
            (Framing::Chunked, b"zz\r\n", FrameError::ChunkSize),
            (Framing::Chunked, b"\r\n", FrameError::ChunkSize),
            (Framing::Chunked, b"5x\r\nhello\r\n", FrameError::ChunkSize),
            (
                Framing::Chunked,
                b"1000000000000000\r\n",
                FrameError::ChunkSize,
            ),
            (Framing::Chunked, b"5\r\nhelloXX", FrameError::ChunkEnd),
        ];
        for (framing, wire, want) in rows {
            assert_eq!(
                read_body(*framing, wire, wire.len(), true),
                Err(want.clone()),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
        let endless = vec![b'1'; MAX_CHUNK_LINE + 1];
        assert_eq!(
            BodyReader::new(Framing::Chunked, 0).advance(&endless),
            Err(FrameError::ChunkSize)
        );
    }

    #[test]
    fn body_starts_after_the_head() {
        let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
        let h = head(wire);
        let mut reader = BodyReader::new(h.framing().unwrap(), h.len);
        assert_eq!(reader.advance(wire), Ok(Some(wire.len())));
        assert_eq!(reader.into_content(), b"ok");
    }
}
