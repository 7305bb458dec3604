//! One request as HTTP/3 bytes, encoded once before the run, and one response read back
//! (RFC 9114 §4.1; QPACK, RFC 9204). The request is a HEADERS frame whose field section
//! refers only to the static table (nothing for the server's decoder to insert or block on),
//! then a DATA frame with the body: the same bytes open every stream. The response is read
//! by `linerate_h3::frame::FrameReader`'s request-stream rules (HEADERS first, DATA, trailers)
//! and its field sections go through the connection's one QPACK decoder, which the client
//! announces with no dynamic table. No QUIC here: bytes in, a status and a body length out.
#![forbid(unsafe_code)]

use linerate_h3::Code;
use linerate_h3::frame::{self, Frame, FrameReader, Role};
use linerate_h3::qpack::{self, Decoder};

use crate::h2::parse_status;

/// The largest response field section (HEADERS payload) read; a larger one fails the
/// connection (H3_EXCESSIVE_LOAD). The same as HTTP/2's `MAX_HEADER_BLOCK`.
pub const MAX_FIELD_SECTION: usize = crate::h2::MAX_HEADER_BLOCK;

/// One request as the bytes of its stream: HEADERS, then DATA when there is a body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub(super) bytes: Vec<u8>,
}

impl Request {
    /// Encodes `method https://authority path` with the user's `headers` (names lowercased;
    /// a `Host` becomes `:authority`, RFC 9114 §4.3.1) and `body`, adding `content-length`
    /// when there is a body and the user gave none. Connection-specific fields must already
    /// have been refused (RFC 9114 §4.2; `config` does that).
    pub fn new(
        method: &str,
        authority: &str,
        path: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Request {
        let lower: Vec<(String, &str)> = headers
            .iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v.as_str()))
            .collect();
        let authority = lower
            .iter()
            .find(|(n, _)| n == "host")
            .map_or(authority, |(_, v)| v);
        let mut section = Vec::with_capacity(64);
        qpack::encode::prefix(&mut section);
        qpack::encode::request(
            &mut section,
            method.as_bytes(),
            b"https",
            authority.as_bytes(),
            path.as_bytes(),
        );
        for (n, v) in lower.iter().filter(|(n, _)| n != "host") {
            qpack::encode::field(&mut section, n.as_bytes(), v.as_bytes());
        }
        if !body.is_empty() && !lower.iter().any(|(n, _)| n == "content-length") {
            qpack::encode::field(
                &mut section,
                b"content-length",
                body.len().to_string().as_bytes(),
            );
        }
        let mut bytes = Vec::with_capacity(section.len() + body.len() + 18);
        frame::write_head(&mut bytes, frame::kind::HEADERS, section.len() as u64);
        bytes.extend_from_slice(&section);
        if !body.is_empty() {
            frame::write_head(&mut bytes, frame::kind::DATA, body.len() as u64);
            bytes.extend_from_slice(body);
        }
        Request { bytes }
    }

    /// The stream's bytes: what every request stream writes, then finishes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// One response being read from its request stream.
pub struct Response {
    frames: FrameReader,
    /// The final status (0 until the final HEADERS).
    status: u16,
    /// DATA payload bytes so far.
    body: u64,
    /// A `grpc-status` in the final head (gRPC's trailers-only) or the trailers.
    grpc_status: Option<u32>,
}

impl Default for Response {
    fn default() -> Response {
        Response::new()
    }
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("body", &self.body)
            .finish_non_exhaustive()
    }
}

impl Response {
    pub fn new() -> Response {
        Response {
            frames: FrameReader::new(Role::Request, MAX_FIELD_SECTION),
            status: 0,
            body: 0,
            grpc_status: None,
        }
    }

    /// Reads the next bytes of the stream, in any split. Every field section is decoded by
    /// `decoder`, trailers included. An error is a connection error with that code.
    pub fn feed(&mut self, mut data: &[u8], decoder: &mut Decoder) -> Result<(), Code> {
        while !data.is_empty() {
            let (n, found) = self.frames.read(data)?;
            data = &data[n..];
            let mut interim = false;
            match found {
                None => {}
                Some(Frame::Data(d)) => self.body += d.len() as u64,
                Some(Frame::Headers(section)) => {
                    let mut status = None;
                    let mut first = true;
                    let mut grpc = None;
                    decoder
                        .decode(section, |name, value| {
                            // RFC 9114 §4.3: pseudo-header fields come first.
                            if first && name == b":status" {
                                status = parse_status(value);
                            } else if name == b"grpc-status" {
                                grpc = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
                            }
                            first = false;
                        })
                        .map_err(|e| e.code())?;
                    if grpc.is_some() {
                        self.grpc_status = grpc;
                    }
                    if self.status == 0 {
                        // RFC 9114 §4.3.2: every response carries a valid :status.
                        let s = status.ok_or(Code::MessageError)?;
                        // RFC 9114 §4.1: interim (1xx) responses precede the final one.
                        interim = s < 200;
                        if !interim {
                            self.status = s;
                        }
                    }
                    // Otherwise trailers: decoded (the decoder must see them), not used.
                }
                Some(Frame::HeadersTooLarge(_)) => return Err(Code::ExcessiveLoad),
                // A request stream's reader refuses control frames itself.
                Some(_) => return Err(Code::FrameUnexpected),
            }
            if interim {
                // The final response's HEADERS come next, as if the stream started again.
                self.frames = FrameReader::new(Role::Request, MAX_FIELD_SECTION);
            }
        }
        Ok(())
    }

    /// What has been read so far: the final status (0 until its HEADERS) and the DATA
    /// payload bytes.
    pub fn progress(&self) -> (u16, u64) {
        (self.status, self.body)
    }

    /// The `grpc-status` the answer carried (its trailers, or a trailers-only head).
    pub fn grpc_status(&self) -> Option<u32> {
        self.grpc_status
    }

    /// The stream ended: the final status and the body length, or the error (a frame cut
    /// short is H3_FRAME_ERROR, RFC 9114 §7.1; no final response is H3_MESSAGE_ERROR, §4.1.2).
    pub fn finish(&self) -> Result<(u16, u64), Code> {
        if !self.frames.at_boundary() {
            return Err(Code::FrameError);
        }
        if self.status == 0 {
            return Err(Code::MessageError);
        }
        Ok((self.status, self.body))
    }
}
