//! Named parsing limits and their defaults.
//!
//! Owns the numbers that bound what a peer can make the parser hold or scan. The server's
//! configuration, `--help` and the docs use the same names. Time limits live in the server
//! crate: this crate never reads a clock.
#![forbid(unsafe_code)]

/// Largest request head (request line + header section + final CRLF), in bytes.
/// A request line that alone exceeds it is answered 414; a larger head 431.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Longest method token, in bytes. Every registered method (RFC 9110 §16.1, the IANA
/// registry's longest is 17 bytes) fits; a longer one is a method linerate does not implement
/// and is answered 501 as soon as the limit is passed (RFC 9112 §3), not 414.
pub const MAX_METHOD_BYTES: usize = 32;

/// Most header field lines in one request head; one more is answered 431.
pub const MAX_HEADERS: usize = 100;

/// Most bytes of chunk extensions (`;name=value`) on one chunk-size line; more is answered 400.
pub const CHUNK_EXT_LIMIT: usize = 1024;

/// Largest trailer section of a chunked body, in bytes; more is answered 431.
pub const MAX_TRAILER_BYTES: usize = 8 * 1024;

/// Most trailer field lines in one chunked body; one more is answered 431.
pub const MAX_TRAILERS: usize = 32;

/// The limits one parser instance enforces. `Default` gives the constants above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// See [`MAX_HEAD_BYTES`].
    pub max_head_bytes: usize,
    /// See [`MAX_HEADERS`].
    pub max_headers: usize,
    /// See [`CHUNK_EXT_LIMIT`].
    pub chunk_ext_limit: usize,
    /// See [`MAX_TRAILER_BYTES`].
    pub max_trailer_bytes: usize,
    /// See [`MAX_TRAILERS`].
    pub max_trailers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head_bytes: MAX_HEAD_BYTES,
            max_headers: MAX_HEADERS,
            chunk_ext_limit: CHUNK_EXT_LIMIT,
            max_trailer_bytes: MAX_TRAILER_BYTES,
            max_trailers: MAX_TRAILERS,
        }
    }
}
