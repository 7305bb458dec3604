//! The invariants the gRPC fuzz targets assert (`grpc_frames`, `grpc_web_text`), in one
//! place: the targets include this file, and `crates/grpc/tests/corpus.rs` includes it to run
//! the committed seeds through the same checks on stable. Not declared in lib.rs (which is
//! linerate-http1's); it uses only `std` and `linerate_grpc`.
//!
//! Owns what "correct" means for arbitrary bytes: no panic, progress on every call, the same
//! messages and verdict however the body is split, messages within the limit that re-encode
//! to the very bytes they came from, and inflation that never passes the limit.

// Each includer uses part: a target one check, the corpus test both.
#![allow(dead_code)]

use linerate_grpc::compress::{self, CompressError, Encoding};
use linerate_grpc::frame::{self, Decoder, FrameError};
use linerate_grpc::web::{self, TextDecoder, WebError};

/// Inputs up to this long are also fed one byte at a time.
const BYTEWISE_MAX: usize = 4096;

/// The messages (flag byte, bytes) a decoder gave, and its verdict at the body's end.
pub type Frames = (Vec<(u8, Vec<u8>)>, Result<(), FrameError>);

/// Feeds `pieces` to one decoder, as a driver does: a request's, or a gRPC-Web answer's
/// (`web`).
pub fn frames(pieces: &[&[u8]], max: usize, compression: bool, web: bool) -> Frames {
    let mut d = if web {
        Decoder::web_answer(max, compression)
    } else {
        Decoder::new(max, compression)
    };
    let mut got = Vec::new();
    for piece in pieces {
        let mut input = *piece;
        loop {
            let before = input.len();
            match d.next(&mut input) {
                Ok(Some(m)) => {
                    // Every message ends with a byte of this piece (its prefix's last byte at
                    // least): a message given without progress could repeat forever.
                    let flag = u8::from(m.compressed) | if m.trailers { 0x80 } else { 0 };
                    let message = (flag, m.data.to_vec());
                    assert!(input.len() < before, "a message without progress");
                    got.push(message);
                }
                Ok(None) => {
                    assert!(input.is_empty(), "None with input left");
                    break;
                }
                Err(e) => return (got, Err(e)),
            }
        }
    }
    (got, d.finish())
}

/// Checks `data` as a body: its first byte picks whether the call has a grpc-encoding (bit
/// 0), the limit (bit 1: 64 bytes, else the default), a gRPC-Web answer rather than a
/// request (bit 2) and a split point (the other bits); the rest is the body. Returns the
/// verdict.
pub fn check_frames(data: &[u8]) -> Result<(), FrameError> {
    let Some((&first, body)) = data.split_first() else {
        return Ok(());
    };
    let compression = first & 1 == 1;
    let max = if first & 2 == 0 {
        frame::DEFAULT_MAX_MESSAGE
    } else {
        64
    };
    let web = first & 4 != 0;
    let split = usize::from(first >> 3).min(body.len());
    let whole = frames(&[body], max, compression, web);
    let (a, b) = body.split_at(split);
    assert_eq!(
        frames(&[a, b], max, compression, web),
        whole,
        "split at {split}"
    );
    if body.len() <= BYTEWISE_MAX {
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(frames(&bytes, max, compression, web), whole, "byte by byte");
    }
    // Re-encoded, the messages are the very bytes of the body they came from.
    let mut again = Vec::new();
    for (flag, m) in &whole.0 {
        assert!(m.len() <= max, "a message over the limit");
        assert!(
            compression || flag & 1 == 0,
            "compressed without an encoding"
        );
        assert!(web || flag & 0x80 == 0, "a trailer frame in a request");
        let at = again.len();
        frame::encode_raw(m, flag & 1 == 1, &mut again);
        again[at] = *flag;
    }
    assert_eq!(again[..], body[..again.len()], "re-encoded messages differ");
    if whole.1.is_ok() {
        assert_eq!(again.len(), body.len(), "a clean end with bytes left");
    }
    // A trailer block reads as fields whose names hold no `:` and no line break.
    for (_, m) in whole.0.iter().filter(|(flag, _)| flag & 0x80 != 0) {
        for (name, value) in web::trailer_fields(m) {
            assert!(!name.contains(&b':') && !name.contains(&b'\n'), "{name:?}");
            assert!(!value.contains(&b'\n'), "{value:?}");
        }
    }
    // A compressed message inflates within the limit or is refused with nothing kept.
    for (_, m) in whole.0.iter().filter(|(flag, _)| flag & 1 == 1) {
        let mut out = Vec::new();
        match compress::decompress(Encoding::Gzip, m, max, &mut out) {
            Ok(()) => assert!(out.len() <= max),
            Err(CompressError::TooLarge { .. }) => assert!(out.is_empty()),
            Err(CompressError::Corrupt) => {}
            Err(CompressError::Unsupported) => panic!("gzip unsupported"),
        }
    }
    whole.1
}

/// Decodes a `-text` body fed in `pieces`.
pub fn text(pieces: &[&[u8]]) -> Result<Vec<u8>, WebError> {
    let mut d = TextDecoder::new();
    let mut out = Vec::new();
    for p in pieces {
        d.feed(p, &mut out)?;
    }
    d.finish(&mut out)?;
    Ok(out)
}

/// Checks `data` as a gRPC-Web `-text` request body: the same bytes or error whole, split
/// where its first byte says and a byte at a time; at most 3 bytes per 4 characters; what it
/// decodes to encodes and decodes back, and to the same characters when the body had no
/// padding and whole quanta; the decoded body then goes through the message decoder.
pub fn check_web_text(data: &[u8]) -> Result<Vec<u8>, WebError> {
    let whole = text(&[data]);
    let split = usize::from(data.first().copied().unwrap_or(0)).min(data.len());
    let (a, b) = data.split_at(split);
    assert_eq!(text(&[a, b]), whole, "split at {split}");
    if data.len() <= BYTEWISE_MAX {
        let bytes: Vec<&[u8]> = data.chunks(1).collect();
        assert_eq!(text(&bytes), whole, "byte by byte");
    }
    if let Ok(out) = &whole {
        assert!(
            out.len() <= data.len().div_ceil(4) * 3,
            "more bytes than base64 holds"
        );
        let mut enc = Vec::new();
        web::encode_text(out, &mut enc);
        assert_eq!(text(&[&enc]).as_ref(), Ok(out), "round trip");
        if data.len().is_multiple_of(4) && !data.contains(&b'=') {
            assert_eq!(enc, data, "canonical base64 re-encodes to itself");
        }
        let _ = frames(&[out], frame::DEFAULT_MAX_MESSAGE, false, false);
    }
    whole
}
