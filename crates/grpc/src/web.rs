//! gRPC-Web (doc/PROTOCOL-WEB.md): which protocol a request's content type names, the
//! `-text` request body's base64 decoded piece by piece (padded segments may follow each
//! other), and the answer's parts: messages framed as in gRPC, then a trailer frame (flag
//! 0x80) holding the status as `name:value\r\n` lines; base64 for `-text`. No HTTP fields are
//! sent from here: the caller writes them, and the messages through [`crate::frame`].

use std::fmt;

use base64::Engine as _;
use base64::alphabet::STANDARD;
use base64::engine::general_purpose;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use crate::code::Code;
use crate::frame;
use crate::status::Status;

/// The trailer frame's flag: the MSB of the first byte (PROTOCOL-WEB.md: "10000000b: an
/// uncompressed trailer (as part of the body)").
pub const TRAILER_FLAG: u8 = 0x80;

/// The protocol a request speaks, from its content type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// `application/grpc` or `application/grpc+proto` (PROTOCOL-HTTP2.md).
    Grpc,
    /// `application/grpc-web` or `application/grpc-web+proto`: gRPC's framing, the status
    /// in a trailer frame at the body's end.
    Web,
    /// `application/grpc-web-text` or `application/grpc-web-text+proto`: the same, base64.
    WebText,
}

impl Protocol {
    /// The protocol a `content-type` value names: the media type, case-insensitive,
    /// parameters ignored. `None` for anything else, other message formats (`+json`)
    /// included: this server reads protobuf only, and PROTOCOL-HTTP2.md has a server answer
    /// a content type it does not serve with HTTP 415.
    pub fn from_content_type(value: &[u8]) -> Option<Protocol> {
        if value == b"application/grpc" {
            // What nearly every client sends: no split, no case folding.
            return Some(Protocol::Grpc);
        }
        let media = value
            .split(|&b| b == b';')
            .next()
            .unwrap_or(b"")
            .trim_ascii();
        let is = |name: &str| media.eq_ignore_ascii_case(name.as_bytes());
        if is("application/grpc") || is("application/grpc+proto") {
            Some(Protocol::Grpc)
        } else if is("application/grpc-web") || is("application/grpc-web+proto") {
            Some(Protocol::Web)
        } else if is("application/grpc-web-text") || is("application/grpc-web-text+proto") {
            Some(Protocol::WebText)
        } else {
            None
        }
    }

    /// The answer's `content-type`.
    pub const fn content_type(self) -> &'static str {
        match self {
            Protocol::Grpc => "application/grpc",
            Protocol::Web => "application/grpc-web+proto",
            Protocol::WebText => "application/grpc-web-text+proto",
        }
    }

    /// Whether the status goes in the body (gRPC-Web) rather than in HTTP trailers.
    pub const fn is_web(self) -> bool {
        !matches!(self, Protocol::Grpc)
    }
}

/// A gRPC-Web body this side cannot read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebError {
    /// A `-text` body that is not base64 (a byte outside the alphabet, padding inside a
    /// quantum, a lone last character): INTERNAL, as a body that breaks the framing (Envoy
    /// answers HTTP 400 before the call starts; here the call has started).
    BadBase64,
}

impl WebError {
    /// The status the call ends with.
    pub const fn code(self) -> Code {
        Code::Internal
    }
}

impl fmt::Display for WebError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a grpc-web-text body is not base64")
    }
}

impl std::error::Error for WebError {}

/// Reads the body's last, unpadded quantum (2 or 3 characters).
const UNPADDED: GeneralPurpose = GeneralPurpose::new(
    &STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A `-text` request body's base64, decoded as it arrives: the pieces may split anywhere, and
/// the body may be several padded segments one after the other (PROTOCOL-WEB.md: a sender
/// may base64 and flush whenever it needs to, "with potential padding"). Each 4-character
/// quantum decodes on its own, so a quantum ending in padding simply ends a segment.
/// Holds at most 3 characters between pieces.
#[derive(Clone, Debug, Default)]
pub struct TextDecoder {
    pending: [u8; 4],
    have: u8,
}

impl TextDecoder {
    /// A decoder at the body's start.
    pub fn new() -> TextDecoder {
        TextDecoder::default()
    }

    /// Appends what `input` decodes to onto `out`. An error is final.
    pub fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), WebError> {
        if self.have > 0 {
            let have = usize::from(self.have);
            let take = (4 - have).min(input.len());
            self.pending[have..have + take].copy_from_slice(&input[..take]);
            input = &input[take..];
            if have + take < 4 {
                self.have = (have + take) as u8;
                return Ok(());
            }
            self.have = 0;
            let quantum = self.pending;
            decode_run(&quantum, out)?;
        }
        let whole = input.len() / 4 * 4;
        let (mut quanta, rest) = input.split_at(whole);
        while !quanta.is_empty() {
            // A run ends after the first quantum holding padding (or at the end).
            let end = quanta
                .iter()
                .position(|&b| b == b'=')
                .map_or(quanta.len(), |p| (p / 4 + 1) * 4);
            let (run, after) = quanta.split_at(end);
            decode_run(run, out)?;
            quanta = after;
        }
        self.pending[..rest.len()].copy_from_slice(rest);
        self.have = rest.len() as u8;
        Ok(())
    }

    /// The body has ended: a last quantum of 2 or 3 characters without its padding is read
    /// (lenient: the unpadded form PROTOCOL-HTTP2.md accepts for `-bin` values); a lone
    /// character is an error.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), WebError> {
        let have = usize::from(std::mem::take(&mut self.have));
        if have == 0 {
            return Ok(());
        }
        UNPADDED
            .decode_vec(&self.pending[..have], out)
            .map_err(|_| WebError::BadBase64)
    }
}

/// Decodes whole quanta, only the last of which may hold padding.
fn decode_run(run: &[u8], out: &mut Vec<u8>) -> Result<(), WebError> {
    general_purpose::STANDARD
        .decode_vec(run, out)
        .map_err(|_| WebError::BadBase64)
}

/// Appends the trailer frame that ends a gRPC-Web answer, or that is all of a trailers-only
/// one: flag 0x80, the length, then `grpc-status`, `grpc-message`, `grpc-status-details-bin`
/// and the application's trailing `metadata` (see [`encode_trailer_fields`]).
///
/// A trailers-only answer may instead carry these in its HTTP header block (PROTOCOL-WEB.md:
/// "Trailers may be sent together with response headers, with no message in the body"); the
/// frame works with every client, so the caller may send it in both cases.
pub fn encode_trailers(status: &Status, metadata: &[(&str, &[u8])], out: &mut Vec<u8>) {
    let start = begin_trailers(out);
    status.fields(|name, value| trailer_line(name.as_bytes(), value, out));
    for &(name, value) in metadata {
        trailer_line(name.as_bytes(), value, out);
    }
    end_trailers(out, start);
}

/// Appends a trailer frame holding `fields` as they are (a translating proxy's case: the
/// upstream's HTTP trailers, `grpc-status` and all) as `name:value\r\n` lines, names
/// lowercased (PROTOCOL-WEB.md: "Key-value pairs encoded as a HTTP/1 headers block (without
/// the terminating newline)"; "use lower-case header/trailer names"). Values go as given: a
/// `-bin` value stays base64 (PROTOCOL-WEB.md skips that for `-text`, but there the whole
/// frame is base64 and a raw value could hold CR LF, which would break the block).
pub fn encode_trailer_fields<'f>(
    fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
    out: &mut Vec<u8>,
) {
    let start = begin_trailers(out);
    for (name, value) in fields {
        trailer_line(name, value, out);
    }
    end_trailers(out, start);
}

fn begin_trailers(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; frame::PREFIX_LEN]);
    start
}

fn trailer_line(name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.extend(name.iter().map(u8::to_ascii_lowercase));
    out.push(b':');
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

fn end_trailers(out: &mut [u8], start: usize) {
    frame::patch(out, start, false);
    out[start] = TRAILER_FLAG;
}

/// The fields of a trailer frame's block (from [`frame::Decoder::web_answer`]), as a client
/// reads them: lines split at CR LF (or a bare LF), each at its first `:`, the value's
/// surrounding spaces and tabs trimmed (the spec's example writes `key1: foo`). Names come as
/// sent (compare them without case); empty lines and lines without `:` are skipped.
pub fn trailer_fields(block: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    block.split(|&b| b == b'\n').filter_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        Some((line[..colon].trim_ascii(), line[colon + 1..].trim_ascii()))
    })
}

/// Appends `bytes` base64-encoded with padding: one flush of a `-text` answer. Each flush is
/// padded on its own, which PROTOCOL-WEB.md allows ("the implementation may send
/// base64-encoded 'chunks' with potential padding whenever the runtime needs to flush").
pub fn encode_text(bytes: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + bytes.len().div_ceil(3) * 4, 0);
    // The size is exact, so this cannot fail.
    let _ = general_purpose::STANDARD.encode_slice(bytes, &mut out[start..]);
}

#[cfg(test)]
mod tests;
