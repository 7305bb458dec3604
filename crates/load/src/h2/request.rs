//! One request as HTTP/2 frames, encoded once before the run (RFC 9113 §8.3; HPACK, RFC 7541):
//! each field is a whole static-table entry or a literal without indexing (its name by
//! static-table index where it has one), so nothing enters the server's dynamic table and the
//! same bytes serve every stream; only the stream ids are patched in as a stream opens
//! (`Client::open`). The body is kept beside them for `Client` to send as flow control allows.
#![forbid(unsafe_code)]

use super::{FRAME_HEAD, MAX_FRAME, flag, head, kind};

/// One request as the frames that open its stream, encoded once before the run: the header
/// block (HEADERS, then CONTINUATIONs if it is longer than `MAX_FRAME`) with the stream ids
/// left zero and patched per stream, and the body, sent as DATA as flow control allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub(super) frames: Vec<u8>,
    /// Where each frame's stream id is in `frames`.
    pub(super) ids_at: Vec<usize>,
    pub(super) body: Vec<u8>,
}

/// A field as a literal without indexing, the name by its static-table index where it has
/// one (`linerate_hpack::field`): the server's table is never touched, so the block is the same
/// every time.
pub(super) fn literal(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    linerate_hpack::field(out, name.as_bytes(), value);
}

impl Request {
    /// Encodes `method` `scheme://authority path` with the user's `headers` (names lowercased;
    /// a `Host` becomes `:authority`, RFC 9113 §8.3.1) and `body`, adding `content-length` when
    /// there is a body and the user gave none. Connection-specific fields must already have
    /// been refused (`config` does that).
    pub fn new(
        method: &str,
        scheme: &str,
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
        let mut block = Vec::with_capacity(64);
        // Whole static entries are indexed (RFC 7541 §6.1); that touches no dynamic table.
        match method {
            "GET" => block.push(0x80 | 2),
            "POST" => block.push(0x80 | 3),
            m => literal(&mut block, ":method", m.as_bytes()),
        }
        match scheme {
            "http" => block.push(0x80 | 6),
            "https" => block.push(0x80 | 7),
            s => literal(&mut block, ":scheme", s.as_bytes()),
        }
        literal(&mut block, ":authority", authority.as_bytes());
        match path {
            "/" => block.push(0x80 | 4),
            p => literal(&mut block, ":path", p.as_bytes()),
        }
        for (n, v) in lower.iter().filter(|(n, _)| n != "host") {
            literal(&mut block, n, v.as_bytes());
        }
        if !body.is_empty() && !lower.iter().any(|(n, _)| n == "content-length") {
            literal(
                &mut block,
                "content-length",
                body.len().to_string().as_bytes(),
            );
        }
        let end_stream = if body.is_empty() { flag::END_STREAM } else { 0 };
        // The block is never empty (`:method` at least); frames over MAX_FRAME continue it.
        let pieces: Vec<&[u8]> = block.chunks(MAX_FRAME).collect();
        let mut frames = Vec::with_capacity(block.len() + pieces.len() * FRAME_HEAD);
        let mut ids_at = Vec::with_capacity(pieces.len());
        for (i, piece) in pieces.iter().enumerate() {
            let (k, mut flags) = match i {
                0 => (kind::HEADERS, end_stream),
                _ => (kind::CONTINUATION, 0),
            };
            if i + 1 == pieces.len() {
                flags |= flag::END_HEADERS;
            }
            ids_at.push(frames.len() + 5);
            head(&mut frames, piece.len(), k, flags, 0);
            frames.extend_from_slice(piece);
        }
        Request {
            frames,
            ids_at,
            body: body.to_vec(),
        }
    }

    /// The request's header block (frame headers left out).
    #[cfg(test)]
    pub(super) fn header_block(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for at in &self.ids_at {
            let start = at - 5;
            let len = u32::from_be_bytes([
                0,
                self.frames[start],
                self.frames[start + 1],
                self.frames[start + 2],
            ]);
            out.extend_from_slice(
                &self.frames[start + FRAME_HEAD..start + FRAME_HEAD + len as usize],
            );
        }
        out
    }
}
