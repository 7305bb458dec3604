//! The gzip encoder (RFC 1952, deflate by flate2 over zlib-rs), the `gzip` feature's whole
//! share of the server: one-shot for in-memory answers and file bodies, and a flushed stream
//! for proxied answers. The decision to compress and the coding's negotiation are
//! `compress`'s and `compress_stream`'s, and are the same with or without this module
//! (`gz_off.rs`).
#![forbid(unsafe_code)]

use std::io::Write;

/// This build makes gzip answers.
pub const ENCODES: bool = true;

/// `body` as a gzip member at `level` (0–9).
pub fn compress(body: &[u8], level: u32) -> Vec<u8> {
    let out = Vec::with_capacity(body.len() / 4 + 64);
    let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::new(level.min(9)));
    // Writing into a Vec cannot fail.
    enc.write_all(body)
        .and_then(|()| enc.finish())
        .unwrap_or_default()
}

/// A gzip member fed one piece at a time, each flushed through.
#[cfg_attr(not(feature = "proxy"), allow(dead_code))]
pub struct Stream(flate2::write::GzEncoder<Vec<u8>>);

#[cfg_attr(not(feature = "proxy"), allow(dead_code))]
impl Stream {
    /// A stream at `level` (0–9); always one here (`None` only where the build has no
    /// encoder).
    pub fn new(level: u32) -> Option<Stream> {
        let level = flate2::Compression::new(level.min(9));
        Some(Stream(flate2::write::GzEncoder::new(Vec::new(), level)))
    }

    /// Compresses `piece` and flushes; the slice is valid until the next call.
    pub fn push(&mut self, piece: &[u8]) -> &[u8] {
        self.0.get_mut().clear();
        // Writing into a Vec cannot fail; neither can flushing into one.
        let _ = self.0.write_all(piece).and_then(|()| self.0.flush());
        self.0.get_ref()
    }

    /// The member's trailer.
    pub fn finish(mut self) -> Vec<u8> {
        self.0.get_mut().clear();
        self.0.finish().unwrap_or_default()
    }
}
