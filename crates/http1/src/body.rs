//! Request body framing: Content-Length countdown and the chunked decoder (RFC 9112 §6, §7).
//!
//! Owns finding where body data is and where the body ends; it never copies data — each step
//! hands back a slice of the caller's input. The chunked decoder is an explicit state machine
//! fed any split of the input (one byte at a time included) and gives the same result for every
//! split. Trailer fields are kept apart from the head's fields, never merged into them.
#![forbid(unsafe_code)]

use std::ops::Range;

use memchr::memchr;

use crate::chars::{self, TCHAR};
use crate::error::ParseError;
use crate::head::Framing;
use crate::limits::Limits;

/// What one decode call found.
#[derive(Debug, PartialEq, Eq)]
pub struct Step<'a> {
    /// Bytes of the input this step used (framing and data); `consumed <= input.len()`.
    pub consumed: usize,
    /// Body data found in this step (a subslice of the input; may be empty).
    pub data: &'a [u8],
    /// The body ended: bytes after `consumed` belong to the next message.
    pub done: bool,
}

/// Decodes one request body.
#[derive(Debug)]
pub enum BodyDecoder {
    /// This many bytes remain.
    Length(u64),
    /// A chunked body.
    Chunked(ChunkedDecoder),
}

impl BodyDecoder {
    /// A decoder for `framing`, or `None` when there is no body.
    pub fn new(framing: Framing) -> Option<BodyDecoder> {
        match framing {
            Framing::None => None,
            Framing::Length(n) => Some(BodyDecoder::Length(n)),
            Framing::Chunked => Some(BodyDecoder::Chunked(ChunkedDecoder::new())),
        }
    }

    /// Decodes from `input`; see [`Step`].
    pub fn decode<'a>(&mut self, input: &'a [u8], limits: &Limits) -> Result<Step<'a>, ParseError> {
        match self {
            BodyDecoder::Length(remaining) => {
                let n = (*remaining).min(input.len() as u64) as usize;
                *remaining -= n as u64;
                Ok(Step {
                    consumed: n,
                    data: &input[..n],
                    done: *remaining == 0,
                })
            }
            BodyDecoder::Chunked(c) => c.decode(input, limits),
        }
    }

    /// The trailer fields of a finished chunked body (empty otherwise).
    pub fn trailers(&self) -> Trailers<'_> {
        match self {
            BodyDecoder::Chunked(c) => c.trailers(),
            BodyDecoder::Length(_) => Trailers {
                raw: &[],
                fields: &[],
            },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading chunk-size hex digits; `bool` says whether one was seen.
    Size(bool),
    /// BWS after the size, before `;` (RFC 9112 §7.1.1).
    SizeWs,
    /// Inside the chunk extensions, up to CR.
    Ext(Ext),
    /// Expecting LF after the chunk-size line's CR.
    SizeLf,
    /// Chunk data; `size` bytes remain.
    Data,
    /// Expecting CR after chunk data.
    DataCr,
    /// Expecting LF after chunk data.
    DataLf,
    /// Reading trailer field lines until an empty line.
    Trailer,
    /// The body has ended.
    Done,
}

/// Where in the chunk extensions a size line is (RFC 9112 §7.1.1):
/// `chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )`, a name a
/// token, a value a token or a quoted-string. Nothing else is accepted before the CRLF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ext {
    /// After `;`: BWS, then the name.
    BeforeName,
    Name,
    /// BWS after the name: `=` or `;` must follow.
    AfterName,
    /// After `=`: BWS, then the value.
    BeforeValue,
    Token,
    Quoted,
    /// After a backslash inside the quoted-string.
    QuotedPair,
    /// BWS after the value: `;` must follow.
    AfterValue,
}

impl Ext {
    /// The next position after byte `b` (`None`: not the grammar). CR is handled by the caller.
    fn next(self, b: u8) -> Option<Ext> {
        let ws = b == b' ' || b == b'\t';
        let tchar = TCHAR[b as usize];
        Some(match self {
            Ext::BeforeName if ws => Ext::BeforeName,
            Ext::BeforeName | Ext::Name if tchar => Ext::Name,
            Ext::Name | Ext::AfterName if ws => Ext::AfterName,
            Ext::Name | Ext::AfterName if b == b'=' => Ext::BeforeValue,
            Ext::BeforeValue if ws => Ext::BeforeValue,
            Ext::BeforeValue if b == b'"' => Ext::Quoted,
            Ext::BeforeValue | Ext::Token if tchar => Ext::Token,
            Ext::Token | Ext::AfterValue if ws => Ext::AfterValue,
            Ext::Name | Ext::AfterName | Ext::Token | Ext::AfterValue if b == b';' => {
                Ext::BeforeName
            }
            Ext::Quoted if b == b'"' => Ext::AfterValue,
            Ext::Quoted if b == b'\\' => Ext::QuotedPair,
            // qdtext and quoted-pair: HTAB, SP, VCHAR, obs-text (RFC 9110 §5.6.4).
            Ext::Quoted | Ext::QuotedPair if ws || (b >= 0x21 && b != 0x7f) => Ext::Quoted,
            _ => return None,
        })
    }

    /// Whether the extensions may end (CR) here.
    fn complete(self) -> bool {
        matches!(self, Ext::Name | Ext::Token | Ext::AfterValue)
    }
}

/// The chunked transfer coding decoder (RFC 9112 §7.1).
#[derive(Debug)]
pub struct ChunkedDecoder {
    state: State,
    /// Chunk size being read, then the data bytes left in the chunk.
    size: u64,
    /// Extension bytes seen on the current size line.
    ext_len: usize,
    /// Raw trailer section (validated lines, CRLF included); allocated only if trailers exist.
    trailer: Vec<u8>,
    /// Start of the trailer line being read within `trailer`.
    line_start: usize,
    /// Name and value ranges of each trailer field within `trailer`.
    fields: Vec<(Range<usize>, Range<usize>)>,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder::new()
    }
}

impl ChunkedDecoder {
    /// A decoder at the start of a chunked body.
    pub fn new() -> ChunkedDecoder {
        ChunkedDecoder {
            state: State::Size(false),
            size: 0,
            ext_len: 0,
            trailer: Vec::new(),
            line_start: 0,
            fields: Vec::new(),
        }
    }

    /// Whether the last chunk and the trailer section have been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The trailer fields, once the body is done.
    pub fn trailers(&self) -> Trailers<'_> {
        Trailers {
            raw: &self.trailer,
            fields: &self.fields,
        }
    }

    /// Decodes from `input` until data is found, the input ends, or the body ends.
    pub fn decode<'a>(&mut self, input: &'a [u8], limits: &Limits) -> Result<Step<'a>, ParseError> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            match self.state {
                State::Size(seen) => match b {
                    b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                        let digit = (b as char).to_digit(16).unwrap_or(0) as u64;
                        if self.size > u64::MAX >> 4 {
                            return Err(ParseError::ChunkSizeOverflow);
                        }
                        self.size = self.size << 4 | digit;
                        self.state = State::Size(true);
                    }
                    _ if !seen => return Err(ParseError::InvalidChunkSize),
                    b'\r' => self.state = State::SizeLf,
                    b';' => self.state = State::Ext(Ext::BeforeName),
                    b' ' | b'\t' => self.state = State::SizeWs,
                    _ => return Err(ParseError::InvalidChunkSize),
                },
                State::SizeWs => match b {
                    b' ' | b'\t' => {}
                    b';' => self.state = State::Ext(Ext::BeforeName),
                    _ => return Err(ParseError::InvalidChunkSize),
                },
                State::Ext(at) => {
                    if b == b'\r' && at.complete() {
                        self.state = State::SizeLf;
                    } else if let Some(next) = at.next(b) {
                        self.ext_len += 1;
                        if self.ext_len > limits.chunk_ext_limit {
                            return Err(ParseError::InvalidChunkExtension);
                        }
                        self.state = State::Ext(next);
                    } else {
                        return Err(ParseError::InvalidChunkExtension);
                    }
                }
                State::SizeLf => {
                    if b != b'\n' {
                        return Err(ParseError::InvalidChunkSize);
                    }
                    self.ext_len = 0;
                    self.state = if self.size == 0 {
                        State::Trailer
                    } else {
                        State::Data
                    };
                }
                State::Data => {
                    let n = self.size.min((input.len() - i) as u64) as usize;
                    self.size -= n as u64;
                    if self.size == 0 {
                        self.state = State::DataCr;
                    }
                    return Ok(Step {
                        consumed: i + n,
                        data: &input[i..i + n],
                        done: false,
                    });
                }
                State::DataCr => {
                    if b != b'\r' {
                        return Err(ParseError::InvalidChunkData);
                    }
                    self.state = State::DataLf;
                }
                State::DataLf => {
                    if b != b'\n' {
                        return Err(ParseError::InvalidChunkData);
                    }
                    self.state = State::Size(false);
                }
                State::Trailer => {
                    let rest = &input[i..];
                    // Fast path: no trailers, the common case, needs no allocation.
                    if self.trailer.is_empty() && rest.starts_with(b"\r\n") {
                        self.state = State::Done;
                        return Ok(Step {
                            consumed: i + 2,
                            data: &[],
                            done: true,
                        });
                    }
                    let (take, line_done) = match memchr(b'\n', rest) {
                        Some(p) => (p + 1, true),
                        None => (rest.len(), false),
                    };
                    if self.trailer.len() + take > limits.max_trailer_bytes {
                        return Err(ParseError::TrailersTooLarge);
                    }
                    self.trailer.extend_from_slice(&rest[..take]);
                    i += take;
                    if line_done && self.trailer_line(limits)? {
                        self.state = State::Done;
                        return Ok(Step {
                            consumed: i,
                            data: &[],
                            done: true,
                        });
                    }
                    continue;
                }
                State::Done => {
                    return Ok(Step {
                        consumed: i,
                        data: &[],
                        done: true,
                    });
                }
            }
            i += 1;
        }
        Ok(Step {
            consumed: i,
            data: &[],
            done: self.state == State::Done,
        })
    }

    /// Checks the trailer line that just ended; returns true for the empty line that ends
    /// the trailer section.
    fn trailer_line(&mut self, limits: &Limits) -> Result<bool, ParseError> {
        let start = self.line_start;
        let end = self.trailer.len();
        let line = &self.trailer[start..end];
        let Some(content) = line.strip_suffix(b"\r\n") else {
            return Err(ParseError::BareLf);
        };
        if content.is_empty() {
            self.trailer.truncate(start);
            return Ok(true);
        }
        if matches!(content[0], b' ' | b'\t') {
            return Err(ParseError::InvalidTrailer);
        }
        let n = content
            .iter()
            .position(|&b| !TCHAR[b as usize])
            .unwrap_or(content.len());
        if n == 0 || content.get(n) != Some(&b':') {
            return Err(ParseError::InvalidTrailer);
        }
        let raw = &content[n + 1..];
        if !chars::is_field_value(raw) {
            return Err(ParseError::InvalidTrailer);
        }
        if self.fields.len() == limits.max_trailers {
            return Err(ParseError::TrailersTooLarge);
        }
        let lead = raw.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
        let value_len = chars::trim_ows(raw).len();
        let vstart = start + n + 1 + lead;
        self.fields
            .push((start..start + n, vstart..vstart + value_len));
        self.line_start = end;
        Ok(false)
    }
}

/// Trailer fields of a chunked body, in order.
#[derive(Clone, Copy, Debug)]
pub struct Trailers<'a> {
    raw: &'a [u8],
    fields: &'a [(Range<usize>, Range<usize>)],
}

impl<'a> Trailers<'a> {
    /// Number of trailer fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
    /// The fields as (name, value).
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let raw = self.raw;
        self.fields
            .iter()
            .map(move |(n, v)| (&raw[n.clone()], &raw[v.clone()]))
    }
    /// The first field named `name` (ASCII case-insensitive).
    pub fn get(&self, name: &str) -> Option<&'a [u8]> {
        self.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }
}
