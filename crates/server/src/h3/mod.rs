//! The HTTP/3 server connection, sans I/O (RFC 9114, QPACK RFC 9204): one state machine per
//! QUIC connection, serving the same [`Service`](crate::h1::Service) as HTTP/1.1 and HTTP/2.
//!
//! QUIC itself (packets, loss recovery, flow control, the handshake) is quinn-proto's,
//! driven by `driver::quic`; this side sees streams: their bytes in, and writes, finishes,
//! resets and STOP_SENDINGs out through [`Wire`]. Framing and QPACK are the `linerate-h3`
//! crate; a request's fields are checked and written as the HTTP/1.1 head the application
//! reads by `h2::fields`, so HTTP/3 is exactly as strict as HTTP/2 about them.
//!
//! Files: `conn` (the state machine), `tests`. Limits shared with HTTP/2 keep HTTP/2's
//! values: a client may reset [`crate::http2::MAX_RESETS_PER_SEC`] streams a second before
//! the connection ends with H3_EXCESSIVE_LOAD (rapid reset, CVE-2023-44487).

mod conn;
#[cfg(test)]
mod tests;

pub(crate) use conn::{Conn, Wire};

/// Bytes of one encoded field section (a HEADERS payload) the connection holds to decode;
/// a longer one is answered 431 unread. The decoded list is bounded by `max_head_bytes`.
pub const MAX_FIELD_SECTION: usize = 64 * 1024;
/// Request streams of one connection that may be sending bodies at once; one more is
/// refused with H3_REQUEST_REJECTED, which a client may retry (RFC 9114 §4.1.1). As for
/// HTTP/2 ([`crate::http2::MAX_BODY_STREAMS`]).
pub const MAX_BODY_STREAMS: usize = crate::h2::MAX_BODY_STREAMS;
/// Bytes of a request body read and dropped after an answer given before the body ended (an
/// early answer: 401, 413, a refusal); past them the stream is asked to stop with
/// STOP_SENDING(H3_NO_ERROR) (RFC 9114 §4.1.2), as it is after `linger_timeout`. The bounds of
/// HTTP/2's stream window and HTTP/1.1's lingering close.
pub const DRAIN_BODY_BYTES: u64 = 1 << 20;
/// Request streams the client may open at once (QUIC's MAX_STREAMS for bidirectional
/// streams, enforced by the transport): as HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS.
pub const MAX_CONCURRENT_STREAMS: usize = crate::h2::MAX_CONCURRENT_STREAMS;
/// Unidirectional streams the client may open at once: its control stream, its QPACK
/// encoder and decoder streams, and room for the reserved (grease) types it may add.
pub const MAX_UNI_STREAMS: usize = 16;
/// SETTINGS_QPACK_MAX_TABLE_CAPACITY the server announces: the client's encoder may keep a
/// dynamic table of this size (HPACK's default), which bounds what it makes us hold.
pub const QPACK_CAPACITY: usize = 4096;
