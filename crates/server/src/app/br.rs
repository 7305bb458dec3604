//! The brotli encoder (RFC 7932), the `brotli` feature's whole share of the server: one-shot
//! for in-memory answers and file bodies, and a flushed stream for proxied answers. Owns the
//! window sizing; the decision to compress and the coding's negotiation are `compress`'s and
//! `compress_stream`'s, and are the same with or without this module (`br_off.rs`).
#![forbid(unsafe_code)]

use std::io::Write;

/// This build makes br answers.
pub const ENCODES: bool = true;

/// Largest brotli window (log2 bytes): the format's default, 4 MiB.
const BROTLI_MAX_LGWIN: u32 = 22;
/// Smallest brotli window the format allows (log2 bytes).
const BROTLI_MIN_LGWIN: u32 = 10;
/// Bytes the brotli window cannot use (RFC 7932 §9.1: window size is `(1 << WBITS) - 16`).
const BROTLI_WINDOW_GAP: usize = 16;
/// Largest brotli window for a stream (256 KiB): every compressed stream holds one, so it is
/// bounded as gzip's 32 KiB window and state are, whatever the answer's length.
const STREAM_MAX_LGWIN: u32 = 18;
/// The brotli writer's own output buffer.
const BROTLI_BUFFER: usize = 4096;

/// `body` as a brotli stream at `quality` (0–11), with the smallest window that holds the
/// whole body (less memory for both ends, same output).
pub fn compress(body: &[u8], quality: u32) -> Vec<u8> {
    let needed = body.len() + BROTLI_WINDOW_GAP;
    let lgwin = (usize::BITS - needed.leading_zeros()).clamp(BROTLI_MIN_LGWIN, BROTLI_MAX_LGWIN);
    let params = brotli::enc::BrotliEncoderParams {
        quality: quality.min(11) as i32,
        lgwin: lgwin as i32,
        size_hint: body.len(),
        ..Default::default()
    };
    let mut out = Vec::with_capacity(body.len() / 4 + 64);
    match brotli::BrotliCompress(&mut &body[..], &mut out, &params) {
        Ok(_) => out,
        // Reading a slice and writing a Vec cannot fail; an empty result is sent as identity.
        Err(_) => Vec::new(),
    }
}

/// A brotli stream fed one piece at a time, each flushed through.
#[cfg_attr(not(feature = "proxy"), allow(dead_code))]
pub struct Stream(brotli::CompressorWriter<Vec<u8>>);

#[cfg_attr(not(feature = "proxy"), allow(dead_code))]
impl Stream {
    /// A stream for a body of `length` when known (the window fits it, at most
    /// [`STREAM_MAX_LGWIN`]); always one here (`None` only where the build has no encoder).
    pub fn new(length: Option<u64>, quality: u32) -> Option<Stream> {
        let span = length.map_or(u64::MAX, |n| n + BROTLI_WINDOW_GAP as u64);
        let lgwin = (u64::BITS - span.leading_zeros()).clamp(BROTLI_MIN_LGWIN, STREAM_MAX_LGWIN);
        let params = brotli::enc::BrotliEncoderParams {
            quality: quality.min(11) as i32,
            lgwin: lgwin as i32,
            size_hint: length.unwrap_or(0) as usize,
            ..Default::default()
        };
        Some(Stream(brotli::CompressorWriter::with_params(
            Vec::new(),
            BROTLI_BUFFER,
            &params,
        )))
    }

    /// Compresses `piece` and flushes; the slice is valid until the next call.
    pub fn push(&mut self, piece: &[u8]) -> &[u8] {
        self.0.get_mut().clear();
        // Writing into a Vec cannot fail; neither can flushing into one.
        let _ = self.0.write_all(piece).and_then(|()| self.0.flush());
        self.0.get_ref()
    }

    /// The stream's last block.
    pub fn finish(mut self) -> Vec<u8> {
        self.0.get_mut().clear();
        self.0.into_inner()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn round_trips_every_quality() {
        let body: Vec<u8> = (0..20_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for quality in 0..=11 {
            let mut out = Vec::new();
            brotli::Decompressor::new(&compress(&body, quality)[..], 4096)
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(out, body, "br {quality}");
        }
        // Empty and tiny bodies still produce valid streams.
        for body in [&b""[..], b"x"] {
            let mut out = Vec::new();
            brotli::Decompressor::new(&compress(body, 4)[..], 4096)
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(out, body);
        }
    }
}
