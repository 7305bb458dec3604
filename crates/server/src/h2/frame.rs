//! HTTP/2 frames on the wire (RFC 9113 §4 and §6): the 9-byte frame header read from bytes,
//! and each frame the server sends written into an output buffer.
//!
//! Owns the byte layout only. Which frame may arrive when, and what it means, is the
//! connection's (`conn`); nothing here keeps state.
#![forbid(unsafe_code)]

/// The client connection preface (RFC 9113 §3.4).
pub(crate) const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Bytes in a frame header.
pub(crate) const HEAD_LEN: usize = 9;
/// The smallest SETTINGS_MAX_FRAME_SIZE and the default (RFC 9113 §6.5.2): the largest payload
/// the server accepts, since it never announces more.
pub(crate) const DEFAULT_MAX_FRAME: usize = 16_384;
/// The largest SETTINGS_MAX_FRAME_SIZE a peer may announce.
pub(crate) const MAX_MAX_FRAME: u32 = (1 << 24) - 1;
/// The largest flow-control window (RFC 9113 §6.9.1).
pub(crate) const MAX_WINDOW: i64 = (1 << 31) - 1;
/// Every window's size before SETTINGS change it (RFC 9113 §6.9.2).
pub(crate) const DEFAULT_WINDOW: i64 = 65_535;

/// Frame types (RFC 9113 §6).
pub(crate) mod kind {
    pub const DATA: u8 = 0;
    pub const HEADERS: u8 = 1;
    pub const PRIORITY: u8 = 2;
    pub const RST_STREAM: u8 = 3;
    pub const SETTINGS: u8 = 4;
    pub const PUSH_PROMISE: u8 = 5;
    pub const PING: u8 = 6;
    pub const GOAWAY: u8 = 7;
    pub const WINDOW_UPDATE: u8 = 8;
    pub const CONTINUATION: u8 = 9;
}

/// Frame flags.
pub(crate) mod flag {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS identifiers (RFC 9113 §6.5.2).
pub(crate) mod setting {
    pub const ENABLE_PUSH: u16 = 2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 3;
    pub const INITIAL_WINDOW_SIZE: u16 = 4;
    pub const MAX_FRAME_SIZE: u16 = 5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 6;
    /// RFC 8441 §3: the server takes extended CONNECT (`:protocol`), WebSocket over a stream.
    pub const ENABLE_CONNECT_PROTOCOL: u16 = 8;
}

/// Error codes (RFC 9113 §7): what a GOAWAY or RST_STREAM says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Code {
    NoError = 0x0,
    Protocol = 0x1,
    Internal = 0x2,
    FlowControl = 0x3,
    /// Our SETTINGS went unacknowledged (RFC 9113 §6.5.3); only the client (`h2u`) sends it.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))] // `h2u` is built with `proxy`
    SettingsTimeout = 0x4,
    StreamClosed = 0x5,
    FrameSize = 0x6,
    RefusedStream = 0x7,
    Cancel = 0x8,
    Compression = 0x9,
    EnhanceYourCalm = 0xb,
}

impl Code {
    /// A stream reset with this code answers something the peer sent (a malformed or
    /// misplaced frame, a window it broke, a stream over the limits), not a failure of ours
    /// nor the normal end of an answered stream: the peer made the server throw the stream's
    /// work away (MadeYouReset).
    pub(crate) fn blames_peer(self) -> bool {
        matches!(
            self,
            Code::Protocol
                | Code::FlowControl
                | Code::StreamClosed
                | Code::FrameSize
                | Code::RefusedStream
        )
    }
}

/// A frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    /// Payload length.
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    /// The stream identifier, reserved bit cleared (RFC 9113 §4.1: ignored on receipt).
    pub stream: u32,
}

impl Head {
    /// The header at the start of `b` (at least [`HEAD_LEN`] bytes).
    pub(crate) fn parse(b: &[u8]) -> Head {
        Head {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]) as usize,
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }

    pub(crate) fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// Appends a frame header.
#[inline(always)]
pub(crate) fn head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let l = (len as u32).to_be_bytes();
    let s = stream.to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags, s[0], s[1], s[2], s[3]]);
}

/// SETTINGS with these values.
pub(crate) fn settings(out: &mut Vec<u8>, values: &[(u16, u32)]) {
    head(out, values.len() * 6, kind::SETTINGS, 0, 0);
    for (id, v) in values {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

pub(crate) fn settings_ack(out: &mut Vec<u8>) {
    head(out, 0, kind::SETTINGS, flag::ACK, 0);
}

pub(crate) fn ping_ack(out: &mut Vec<u8>, data: &[u8]) {
    head(out, 8, kind::PING, flag::ACK, 0);
    out.extend_from_slice(data);
}

/// A PING of ours: the client's keepalive (`h2u`), and a server's drain (its round trip).
pub(crate) fn ping(out: &mut Vec<u8>, data: &[u8; 8]) {
    head(out, 8, kind::PING, 0, 0);
    out.extend_from_slice(data);
}

/// DATA carrying `data` (at most the peer's frame size; the caller splits).
#[cfg_attr(not(feature = "proxy"), allow(dead_code))] // `h2u` is built with `proxy`
pub(crate) fn data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool) {
    let es = if end_stream { flag::END_STREAM } else { 0 };
    head(out, data.len(), kind::DATA, es, stream);
    out.extend_from_slice(data);
}

pub(crate) fn goaway(out: &mut Vec<u8>, last: u32, code: Code) {
    head(out, 8, kind::GOAWAY, 0, 0);
    out.extend_from_slice(&last.to_be_bytes());
    out.extend_from_slice(&(code as u32).to_be_bytes());
}

pub(crate) fn rst(out: &mut Vec<u8>, stream: u32, code: Code) {
    head(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&(code as u32).to_be_bytes());
}

pub(crate) fn window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    head(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

/// A header block as HEADERS and, when it is longer than `max_frame`, CONTINUATION frames.
pub(crate) fn headers(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) {
    let es = if end_stream { flag::END_STREAM } else { 0 };
    let mut chunks = block.chunks(max_frame);
    let first = chunks.next().unwrap_or(&[]);
    let rest = chunks.len();
    let eh = if rest == 0 { flag::END_HEADERS } else { 0 };
    head(out, first.len(), kind::HEADERS, es | eh, stream);
    out.extend_from_slice(first);
    for (i, c) in chunks.enumerate() {
        let eh = if i + 1 == rest { flag::END_HEADERS } else { 0 };
        head(out, c.len(), kind::CONTINUATION, eh, stream);
        out.extend_from_slice(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_round_trip_clears_the_reserved_bit() {
        let mut out = Vec::new();
        head(&mut out, 0x12345, kind::DATA, flag::END_STREAM, 7);
        out[5] |= 0x80; // RFC 9113 §4.1: the reserved bit is ignored on receipt
        let h = Head::parse(&out);
        assert_eq!(
            h,
            Head {
                len: 0x12345,
                kind: kind::DATA,
                flags: flag::END_STREAM,
                stream: 7
            }
        );
    }

    #[test]
    fn long_header_blocks_continue() {
        let mut out = Vec::new();
        headers(&mut out, 1, &[7; 10], true, 4);
        let h = Head::parse(&out);
        assert_eq!(
            (h.len, h.kind, h.flags),
            (4, kind::HEADERS, flag::END_STREAM)
        );
        let c1 = Head::parse(&out[13..]);
        assert_eq!((c1.len, c1.kind, c1.flags), (4, kind::CONTINUATION, 0));
        let c2 = Head::parse(&out[26..]);
        assert_eq!(
            (c2.len, c2.kind, c2.flags),
            (2, kind::CONTINUATION, flag::END_HEADERS)
        );
        assert_eq!(out.len(), 9 * 3 + 10);
    }
}
