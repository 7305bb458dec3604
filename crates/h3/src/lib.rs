//! HTTP/3 (RFC 9114) below the request: the wire of its streams, and QPACK (RFC 9204), sans
//! I/O. Bytes in, frames, fields and error codes out; no sockets, no QUIC, no clocks.
//!
//! - [`varint`]: QUIC's variable-length integers (RFC 9000 §16), which every frame and stream
//!   type is made of.
//! - [`frame`]: frame and stream types, [`frame::FrameReader`] (one stream's frames read
//!   strictly in any split: DATA passed through in pieces, HEADERS and control frames held
//!   whole up to a limit, unknown and reserved types skipped, HTTP/2's types refused),
//!   [`frame::Settings`], and the frames the server writes.
//! - [`qpack`]: the field-section decoder with its dynamic table (fed by the peer's encoder
//!   stream, acknowledged on our decoder stream) and a stateless encoder.
//!
//! Errors are [`Code`]s: the HTTP/3 and QPACK error codes (RFC 9114 §8.1, RFC 9204 §6) that
//! the connection sends, so each failure says what goes on the wire.
#![forbid(unsafe_code)]

/// The README's examples, compiled and run with the other doctests (`cargo test --doc`), so
/// that they cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub mod frame;
pub mod qpack;
pub mod varint;

/// An HTTP/3 or QPACK error code: what a stream reset, a STOP_SENDING or a CONNECTION_CLOSE
/// carries (RFC 9114 §8.1, RFC 9204 §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u64)]
pub enum Code {
    NoError = 0x100,
    GeneralProtocolError = 0x101,
    InternalError = 0x102,
    StreamCreationError = 0x103,
    ClosedCriticalStream = 0x104,
    FrameUnexpected = 0x105,
    FrameError = 0x106,
    ExcessiveLoad = 0x107,
    IdError = 0x108,
    SettingsError = 0x109,
    MissingSettings = 0x10a,
    RequestRejected = 0x10b,
    RequestCancelled = 0x10c,
    RequestIncomplete = 0x10d,
    MessageError = 0x10e,
    ConnectError = 0x10f,
    VersionFallback = 0x110,
    QpackDecompressionFailed = 0x200,
    QpackEncoderStreamError = 0x201,
    QpackDecoderStreamError = 0x202,
}

impl Code {
    /// The code's value on the wire.
    pub fn value(self) -> u64 {
        self as u64
    }
}
