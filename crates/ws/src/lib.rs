//! WebSocket (RFC 6455), sans I/O: the codec the server's connection state machine
//! (`linerate-server`'s `ws`) is built on. Bytes in, facts out; no sockets, clocks or
//! buffers of its own.
//!
//! - [`frame`]: a client frame's header read strictly (masking required, reserved bits and
//!   opcodes refused, control frames whole and small, the frame limit), a server frame's
//!   header written with the minimal length, and unmasking at any offset.
//! - [`utf8`]: text checked piece by piece, failing at the first byte no continuation can
//!   make valid (RFC 6455 §8.1 asks for it; Autobahn's 6.x cases test it).
//! - [`close`]: close codes a peer may send, and close payloads read.
//! - [`deflate`]: permessage-deflate (RFC 7692): offers read and answered, a client's
//!   messages inflated piece by piece within the message limit, the server's compressed.
//!
//! Written here rather than taken from `tungstenite`, whose codec reads from `io::Read` into
//! buffers it owns: the server reads frames straight from its worker's receive buffer and
//! keeps no buffer for an idle connection (the goal: 1 KiB per idle WebSocket).
#![forbid(unsafe_code)]

/// The README's examples, compiled and run with the other doctests (`cargo test --doc`), so
/// that they cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub mod accept;
pub mod close;
pub mod deflate;
pub mod frame;
pub mod utf8;

/// Why a connection fails; each maps to the close code it is failed with (RFC 6455 §7.4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// A frame or sequence the RFC forbids: 1002.
    Protocol(&'static str),
    /// Text (or a close reason) that is not UTF-8: 1007.
    InvalidUtf8,
    /// A frame or message over its limit (a compressed message: once inflated): 1009.
    TooBig,
    /// A compressed message that is not valid DEFLATE (RFC 7692 §7.2.2): 1007, its data
    /// does not match its type.
    InvalidDeflate,
}

impl Error {
    /// The close code the connection is failed with.
    pub fn code(self) -> u16 {
        match self {
            Error::Protocol(_) => close::PROTOCOL_ERROR,
            Error::InvalidUtf8 | Error::InvalidDeflate => close::INVALID_DATA,
            Error::TooBig => close::TOO_BIG,
        }
    }

    /// The close frame's reason.
    pub fn reason(self) -> &'static str {
        match self {
            Error::Protocol(why) => why,
            Error::InvalidUtf8 => "text is not UTF-8",
            Error::TooBig => "message too big",
            Error::InvalidDeflate => "compressed data is not valid DEFLATE",
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (close code {})", self.reason(), self.code())
    }
}

impl std::error::Error for Error {}
