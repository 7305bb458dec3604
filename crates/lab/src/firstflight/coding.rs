//! Content-codings (RFC 9110 §8.4): naming what a response was sent as, and undoing gzip,
//! deflate and br so a page can be scanned for the resources it references.
//!
//! Decoding is only for the scan; byte counts are always taken before it. Output is capped at
//! [`MAX_DECODED_BYTES`] so a compression bomb costs at most that much memory.

use std::fmt;
use std::io::Read;

/// Most bytes a page is decoded to for the resource scan; the rest is not scanned.
pub const MAX_DECODED_BYTES: u64 = 16 * 1024 * 1024;
/// Working buffer of the brotli decoder.
const BROTLI_BUFFER: usize = 16 * 1024;

/// A content-coding that could not be undone.
#[derive(Debug)]
pub enum DecodeError {
    /// A coding this tool does not know (`compress`, `zstd` …).
    Unsupported(String),
    /// The bytes are not valid for the coding they are labelled with.
    Corrupt { coding: String, reason: String },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Unsupported(c) => write!(f, "content-coding {c:?} is not supported"),
            DecodeError::Corrupt { coding, reason } => write!(f, "corrupt {coding} body: {reason}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// The codings of a `Content-Encoding` value in the order they were applied, lower-cased;
/// `identity` and empty elements dropped.
pub fn codings(content_encoding: Option<&str>) -> Vec<String> {
    content_encoding
        .unwrap_or_default()
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty() && c != "identity")
        .collect()
}

/// How a response was sent, for reports: `identity`, `gzip`, `br`, `gzip, br` …
pub fn label(content_encoding: Option<&str>) -> String {
    let list = codings(content_encoding);
    if list.is_empty() {
        "identity".to_string()
    } else {
        list.join(", ")
    }
}

/// Undoes every coding in `content_encoding` (last applied, first undone), up to
/// [`MAX_DECODED_BYTES`] of output.
pub fn decode(content_encoding: Option<&str>, body: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut data = body.to_vec();
    for coding in codings(content_encoding).iter().rev() {
        data = decode_one(coding, &data)?;
    }
    Ok(data)
}

fn decode_one(coding: &str, body: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    let result = match coding {
        // RFC 9110 §8.4.1.3: x-gzip is gzip.
        "gzip" | "x-gzip" => flate2::read::MultiGzDecoder::new(body)
            .take(MAX_DECODED_BYTES)
            .read_to_end(&mut out),
        // RFC 9110 §8.4.1.2 says zlib; some servers send raw deflate, so fall back to it.
        "deflate" => {
            let zlib = flate2::read::ZlibDecoder::new(body)
                .take(MAX_DECODED_BYTES)
                .read_to_end(&mut out);
            if zlib.is_err() {
                out.clear();
                flate2::read::DeflateDecoder::new(body)
                    .take(MAX_DECODED_BYTES)
                    .read_to_end(&mut out)
            } else {
                zlib
            }
        }
        "br" => brotli_decompressor::Decompressor::new(body, BROTLI_BUFFER)
            .take(MAX_DECODED_BYTES)
            .read_to_end(&mut out),
        other => return Err(DecodeError::Unsupported(other.to_string())),
    };
    result.map_err(|e| DecodeError::Corrupt {
        coding: coding.to_string(),
        reason: e.to_string(),
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn label_table() {
        let rows: &[(Option<&str>, &str)] = &[
            (None, "identity"),
            (Some(""), "identity"),
            (Some("identity"), "identity"),
            (Some("GZIP"), "gzip"),
            (Some("gzip, br"), "gzip, br"),
        ];
        for &(value, want) in rows {
            assert_eq!(label(value), want, "{value:?}");
        }
    }

    #[test]
    fn decode_table() {
        let text = b"<html><script src=/a.js></script></html>".repeat(4);
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zlib.write_all(&text).unwrap();
        let zlib = zlib.finish().unwrap();
        let mut raw =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        raw.write_all(&text).unwrap();
        let raw = raw.finish().unwrap();
        // A brotli stream holding "hello" in one uncompressed meta-block (RFC 7932 §9.2).
        let br_hello: &[u8] = &[0x0b, 0x02, 0x80, b'h', b'e', b'l', b'l', b'o', 0x03];
        let rows: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
            ("identity", text.clone(), text.clone()),
            ("gzip", gzip(&text), text.clone()),
            ("x-gzip", gzip(&text), text.clone()),
            ("deflate", zlib, text.clone()),
            ("deflate", raw, text.clone()),
            ("br", br_hello.to_vec(), b"hello".to_vec()),
            ("br, gzip", gzip(br_hello), b"hello".to_vec()),
        ];
        for (coding, body, want) in rows {
            assert_eq!(decode(Some(coding), &body).unwrap(), want, "{coding}");
        }
    }

    #[test]
    fn decode_errors() {
        assert!(
            matches!(decode(Some("zstd"), b"x"), Err(DecodeError::Unsupported(c)) if c == "zstd")
        );
        assert!(matches!(
            decode(Some("gzip"), b"not gzip"),
            Err(DecodeError::Corrupt { .. })
        ));
    }

    #[test]
    fn decode_is_capped() {
        let zeros = vec![0u8; (MAX_DECODED_BYTES + 1000) as usize];
        let out = decode(Some("gzip"), &gzip(&zeros)).unwrap();
        assert_eq!(out.len() as u64, MAX_DECODED_BYTES);
    }
}
