//! WebSocket (RFC 6455), sans I/O: the server's side of a connection handed over from
//! HTTP/1.1 after a valid handshake. Bytes and time in; whole messages to a handler, and
//! what to transmit and when to be woken, out. No sockets, clocks or routing.
//!
//! Files: `handshake` (is a request an upgrade this server takes; `Sec-WebSocket-Accept`;
//! the permessage-deflate offer), `conn` (the state machine), `deflate` (server messages as
//! frames, compressed where agreed, by each thread's compressors), `tests` (byte tables). The
//! codec under them (frame headers, unmasking, UTF-8 piece by piece, close codes,
//! permessage-deflate's negotiation and inflater) is the `linerate-ws` crate.
#![forbid(unsafe_code)]
// The connection is driven by its byte tables only until the worker hands connections over
// (the handler API, next).
#![cfg_attr(not(test), allow(dead_code))]

mod conn;
pub(crate) mod deflate;
pub mod handshake;
#[cfg(test)]
mod tests;

pub use deflate::MIN_DEFLATE_BYTES;
pub(crate) use linerate_ws::Error as WsError;
pub use linerate_ws::close;

#[allow(unused_imports)]
pub(crate) use conn::{Conn, Handler, Sending};

/// The largest frame payload a client may send (16 MiB): a larger one fails the connection
/// with 1009. Autobahn's largest (case 9.1.6, 9.2.6) is 16 MiB.
pub const MAX_FRAME_BYTES: u64 = 16 << 20;
/// The largest message, all its fragments together (16 MiB): 1009 above it. A compressed
/// message's is its inflated size, refused as soon as inflating passes it.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;
/// Output held for a connection before the server stops reading from it (and before a
/// sender elsewhere is told it is full): 1 MiB.
pub const MAX_QUEUED_BYTES: usize = 1 << 20;
/// An idle connection is pinged after this long (ms); one that answers nothing within as
/// long again is closed.
pub const PING_AFTER_MS: u64 = 30_000;
/// How long the server waits for the client's close frame after sending its own, and for
/// the client's EOF after shutting its write side (ms).
pub const CLOSE_TIMEOUT_MS: u64 = 5_000;
/// How long output may wait on a client that does not read (ms).
pub const SEND_TIMEOUT_MS: u64 = 30_000;
/// A message's buffer is first sized for what its first frame declares, up to this much;
/// past it, it grows with what arrives.
const RESERVE_BYTES: usize = 64 << 10;

/// The limits and timeouts one connection enforces (times in milliseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WsLimits {
    pub max_frame: u64,
    pub max_message: usize,
    pub max_queued: usize,
    /// 0: never ping.
    pub ping_after: u64,
    pub close_timeout: u64,
    pub send_timeout: u64,
}

impl Default for WsLimits {
    fn default() -> Self {
        WsLimits {
            max_frame: MAX_FRAME_BYTES,
            max_message: MAX_MESSAGE_BYTES,
            max_queued: MAX_QUEUED_BYTES,
            ping_after: PING_AFTER_MS,
            close_timeout: CLOSE_TIMEOUT_MS,
            send_timeout: SEND_TIMEOUT_MS,
        }
    }
}

/// A whole message from the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// A text message (checked UTF-8).
    Text(&'a str),
    Binary(&'a [u8]),
}
