//! The first-flight client's view of a response, read by `linerate_http1`'s response reader
//! (the same one the load generator counts with): the head with its fields as text, and a
//! body reader that keeps the content and says where the body ends in the bytes as received.
//!
//! Owns only what the report needs on top of the reader: field text (obs-folds joined with a
//! space, RFC 9112 §5.2), offsets into the wire buffer, and the errors a fetch can add (cut
//! off, an unexpected 101). Every offset counts the bytes as received, framing included.

use std::fmt;

use linerate_http1::{
    FieldSpan, Limits, MAX_RESPONSE_HEAD_BYTES, ResponseBody, ResponseError, ResponseInfo,
    parse_response,
};

pub use linerate_http1::BodyLength as Framing;

/// Longest chunk extension accepted (real servers send none; some send a short one).
const CHUNK_EXT_LIMIT: usize = 4 * 1024;

/// Why a response could not be framed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The response reader refused it.
    Response(ResponseError),
    /// The peer closed before the body's end.
    Truncated { have: usize },
    /// 101 Switching Protocols to a plain GET.
    UnexpectedUpgrade,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Response(e) => e.fmt(f),
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

impl From<ResponseError> for FrameError {
    fn from(e: ResponseError) -> Self {
        FrameError::Response(e)
    }
}

/// A parsed response head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    /// Field names as sent; values trimmed, obs-folds joined with a space.
    pub fields: Vec<(String, String)>,
    /// Bytes of the head on the wire, the empty line included.
    pub len: usize,
    /// What the shared reader said of it.
    info: ResponseInfo,
}

impl Head {
    /// The value of the first field named `name` (case-insensitive).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// 1xx other than 101: an interim response; the final one follows.
    pub fn is_interim(&self) -> bool {
        self.info.is_interim()
    }

    /// How the body of this response to a GET is framed (RFC 9112 §6.3).
    pub fn framing(&self) -> Framing {
        self.info.length
    }
}

/// Parses the head at the start of `buf`; `Ok(None)` while it is incomplete.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, FrameError> {
    let mut spans: Vec<FieldSpan> = Vec::new();
    let Some(info) = parse_response(buf, Some(&mut spans))? else {
        return Ok(None);
    };
    let text = |r: &std::ops::Range<usize>| String::from_utf8_lossy(&buf[r.clone()]).into_owned();
    let mut fields: Vec<(String, String)> = Vec::with_capacity(spans.len());
    for span in &spans {
        match fields.last_mut() {
            // A continuation line (obs-fold): its value joins the previous field's.
            Some((_, value)) if span.name.is_empty() => {
                value.push(' ');
                value.push_str(&text(&span.value));
            }
            _ => fields.push((text(&span.name), text(&span.value))),
        }
    }
    Ok(Some(Head {
        status: info.status,
        fields,
        len: info.head_len,
        info,
    }))
}

/// Follows a body through the bytes received so far and collects its content (chunk
/// framing removed, content-coding kept).
#[derive(Debug)]
pub struct BodyReader {
    body: ResponseBody,
    /// Offset in the wire buffer of the next unread byte.
    pos: usize,
    content: Vec<u8>,
    limits: Limits,
}

impl BodyReader {
    /// A reader for a body that starts at offset `start` of the wire buffer.
    pub fn new(framing: Framing, start: usize) -> BodyReader {
        BodyReader {
            body: ResponseBody::new(framing),
            pos: start,
            content: Vec::new(),
            limits: Limits {
                chunk_ext_limit: CHUNK_EXT_LIMIT,
                max_trailer_bytes: MAX_RESPONSE_HEAD_BYTES,
                ..Limits::default()
            },
        }
    }

    /// Reads what it can of `wire[pos..]`; `Some(end)` once the body is complete, `end` being
    /// the offset just after its last byte. Bytes after `end` are not this response's.
    pub fn advance(&mut self, wire: &[u8]) -> Result<Option<usize>, FrameError> {
        loop {
            if self.body.is_done() {
                return Ok(Some(self.pos));
            }
            let step = self.body.decode(&wire[self.pos..], &self.limits)?;
            self.content.extend_from_slice(step.data);
            self.pos += step.consumed;
            if step.done {
                return Ok(Some(self.pos));
            }
            if step.consumed == 0 || self.pos == wire.len() {
                return Ok(None);
            }
        }
    }

    /// The peer closed after `wire`: the end of a close-delimited body, an error for any
    /// other that is not complete.
    pub fn at_eof(&mut self, wire: &[u8]) -> Result<usize, FrameError> {
        match self.advance(wire)? {
            Some(end) => Ok(end),
            None => match self.body.eof() {
                Ok(()) => Ok(wire.len()),
                Err(_) => Err(FrameError::Truncated { have: wire.len() }),
            },
        }
    }

    /// The body's content: chunk framing removed, content-coding as sent.
    pub fn into_content(self) -> Vec<u8> {
        self.content
    }
}

#[cfg(test)]
mod tests {
    use linerate_http1::ParseError;

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
        let e = FrameError::Response;
        let rows: &[(&[u8], FrameError)] = &[
            (b"HTTP/2 200 OK\r\n\r\n", e(ResponseError::StatusLine)),
            (b"HTTP/1.1 2000 OK\r\n\r\n", e(ResponseError::StatusLine)),
            (b"HTTP/1.1 099 OK\r\n\r\n", e(ResponseError::StatusLine)),
            (b"SSH-2.0-OpenSSH\r\n\r\n", e(ResponseError::StatusLine)),
            // RFC 9112 §5.1: no whitespace between field name and colon.
            (
                b"HTTP/1.1 200 OK\r\nA : b\r\n\r\n",
                e(ResponseError::FieldLine),
            ),
            (
                b"HTTP/1.1 200 OK\r\nnocolon\r\n\r\n",
                e(ResponseError::FieldLine),
            ),
            (
                b"HTTP/1.1 200 OK\r\n folded-first\r\n\r\n",
                e(ResponseError::FieldLine),
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
        let long = vec![b'a'; MAX_RESPONSE_HEAD_BYTES + 1];
        assert_eq!(
            parse_head(&long),
            Err(FrameError::Response(ResponseError::HeadTooLarge))
        );
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
        let cl = FrameError::Response(ResponseError::ContentLength);
        let rows: &[(&str, Result<Framing, FrameError>)] = &[
            ("200 OK\r\nContent-Length: 10", Ok(Framing::Length(10))),
            ("200 OK\r\nContent-Length: 10, 10", Ok(Framing::Length(10))), // rule 5
            (
                "200 OK\r\nContent-Length: 10\r\nContent-Length: 10",
                Ok(Framing::Length(10)),
            ),
            ("200 OK\r\nContent-Length: 10, 11", Err(cl.clone())),
            ("200 OK\r\nContent-Length: -1", Err(cl.clone())),
            ("200 OK\r\nContent-Length: +1", Err(cl.clone())),
            ("200 OK\r\nContent-Length:", Err(cl.clone())),
            ("200 OK\r\nTransfer-Encoding: chunked", Ok(Framing::Chunked)),
            (
                "200 OK\r\nTransfer-Encoding: gzip, Chunked",
                Ok(Framing::Chunked),
            ),
            // Rule 3: both "ought to be handled as an error" (the shared reader is strict).
            (
                "200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5",
                Err(FrameError::Response(ResponseError::LengthAndEncoding)),
            ),
            // Rule 4: chunked not final → read to close.
            (
                "200 OK\r\nTransfer-Encoding: chunked, gzip",
                Ok(Framing::UntilClose),
            ),
            ("200 OK", Ok(Framing::UntilClose)), // rule 8
            ("204 No Content\r\nContent-Length: 5", Ok(Framing::Empty)), // rule 1
            ("304 Not Modified\r\nContent-Length: 5", Ok(Framing::Empty)),
            ("103 Early Hints\r\nLink: </a.css>", Ok(Framing::Empty)),
        ];
        for (fields, want) in rows {
            let got = parse_head(format!("HTTP/1.1 {fields}\r\n\r\n").as_bytes())
                .map(|h| h.expect("complete head").framing());
            assert_eq!(&got, want, "{fields}");
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
                b"3;ext=1\r\nabc\r\n2 ;x\r\nde\r\n0\r\n\r\n",
                29,
                b"abcde",
            ),
            (
                Framing::Chunked,
                b"A\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n",
                32,
                b"0123456789",
            ),
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
        let chunk = |e| FrameError::Response(ResponseError::Chunked(e));
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
            (
                Framing::Chunked,
                b"zz\r\n",
                chunk(ParseError::InvalidChunkSize),
            ),
            (
                Framing::Chunked,
                b"\r\n",
                chunk(ParseError::InvalidChunkSize),
            ),
            (
                Framing::Chunked,
                b"5x\r\nhello\r\n",
                chunk(ParseError::InvalidChunkSize),
            ),
            (
                Framing::Chunked,
                b"10000000000000000\r\n",
                chunk(ParseError::ChunkSizeOverflow),
            ),
            (
                Framing::Chunked,
                b"5\r\nhelloXX",
                chunk(ParseError::InvalidChunkData),
            ),
            // RFC 9112 §7.1: chunk lines end in CRLF (the bare-LF leniency of §2.2 is for
            // the start line and fields only), and BWS after a size needs an extension.
            (
                Framing::Chunked,
                b"5\nhello\n0\n\n",
                chunk(ParseError::InvalidChunkSize),
            ),
            (
                Framing::Chunked,
                b"2 \r\nde\r\n0\r\n\r\n",
                chunk(ParseError::InvalidChunkSize),
            ),
        ];
        for (framing, wire, want) in rows {
            assert_eq!(
                read_body(*framing, wire, wire.len(), true),
                Err(want.clone()),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
        let endless = vec![b'1'; 4097];
        assert_eq!(
            BodyReader::new(Framing::Chunked, 0).advance(&endless),
            Err(chunk(ParseError::ChunkSizeOverflow))
        );
    }

    #[test]
    fn body_starts_after_the_head() {
        let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
        let h = head(wire);
        let mut reader = BodyReader::new(h.framing(), h.len);
        assert_eq!(reader.advance(wire), Ok(Some(wire.len())));
        assert_eq!(reader.into_content(), b"ok");
    }
}
