//! Message compression (doc/compression.md): the `grpc-encoding` a request names and the
//! `grpc-accept-encoding` list it offers (identity and gzip here), gzip for one message each
//! way, and decompression bounded by the message limit (a zip bomb costs at most that).
//! One message at a time: compression contexts are not kept across messages (the spec's rule).

use std::fmt;
use std::io::{Read as _, Write as _};

use crate::code::Code;
use crate::frame;

/// The `grpc-accept-encoding` this side sends: every encoding it reads.
pub const ACCEPT_ENCODING: &str = "identity,gzip";

/// A message encoding this side knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// No compression.
    Identity,
    /// gzip (RFC 1952).
    Gzip,
}

impl Encoding {
    /// Reads a `grpc-encoding` value (its tokens are case-insensitive in practice; grpc-go
    /// writes them lowercase). An encoding this side does not have is
    /// [`CompressError::Unsupported`]: UNIMPLEMENTED, answered with [`ACCEPT_ENCODING`]
    /// (compression.md: "the message will result in an UNIMPLEMENTED error status on the
    /// server. The server will include a grpc-accept-encoding header").
    pub fn parse(value: &[u8]) -> Result<Encoding, CompressError> {
        let value = value.trim_ascii();
        if value.eq_ignore_ascii_case(b"identity") {
            Ok(Encoding::Identity)
        } else if value.eq_ignore_ascii_case(b"gzip") {
            Ok(Encoding::Gzip)
        } else {
            Err(CompressError::Unsupported)
        }
    }

    /// The `grpc-encoding` value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Encoding::Identity => "identity",
            Encoding::Gzip => "gzip",
        }
    }

    /// Whether messages are compressed (Compressed-Flag 1 allowed on the call).
    pub const fn compresses(self) -> bool {
        !matches!(self, Encoding::Identity)
    }
}

/// Whether a `grpc-accept-encoding` value (a comma-separated list; absent means identity
/// only) lists `encoding`. Identity is always accepted.
pub fn accepts(accept_encoding: Option<&[u8]>, encoding: Encoding) -> bool {
    encoding == Encoding::Identity
        || accept_encoding.is_some_and(|list| {
            list.split(|&b| b == b',').any(|item| {
                item.trim_ascii()
                    .eq_ignore_ascii_case(encoding.as_str().as_bytes())
            })
        })
}

/// The encoding for the answer's messages: `wanted` (the application's choice) when the
/// client accepts it, else identity (compression.md: a server must not compress with an
/// encoding the client did not list).
pub fn response_encoding(accept_encoding: Option<&[u8]>, wanted: Encoding) -> Encoding {
    if accepts(accept_encoding, wanted) {
        wanted
    } else {
        Encoding::Identity
    }
}

/// A message that cannot be compressed or decompressed; each variant names its status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompressError {
    /// An encoding this side does not have: UNIMPLEMENTED, with `grpc-accept-encoding`.
    Unsupported,
    /// Decompressed, the message passes the limit: RESOURCE_EXHAUSTED (grpc-go: "received
    /// message after decompression larger than max").
    TooLarge {
        /// The limit.
        max: usize,
    },
    /// Not valid gzip (bad header, data or checksum, or cut short): INTERNAL (grpc-go:
    /// "failed to decompress the received message").
    Corrupt,
}

impl CompressError {
    /// The status the call ends with.
    pub const fn code(self) -> Code {
        match self {
            CompressError::Unsupported => Code::Unimplemented,
            CompressError::TooLarge { .. } => Code::ResourceExhausted,
            CompressError::Corrupt => Code::Internal,
        }
    }
}

impl fmt::Display for CompressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompressError::Unsupported => f.write_str("unsupported grpc-encoding"),
            CompressError::TooLarge { max } => {
                write!(
                    f,
                    "received message after decompression larger than max ({max})"
                )
            }
            CompressError::Corrupt => f.write_str("failed to decompress the received message"),
        }
    }
}

impl std::error::Error for CompressError {}

/// Appends `data` decompressed with `encoding` to `out`, refusing to produce more than `max`
/// bytes: output stops at `max + 1`, whatever the input claims.
pub fn decompress(
    encoding: Encoding,
    data: &[u8],
    max: usize,
    out: &mut Vec<u8>,
) -> Result<(), CompressError> {
    match encoding {
        Encoding::Identity if data.len() > max => Err(CompressError::TooLarge { max }),
        Encoding::Identity => {
            out.extend_from_slice(data);
            Ok(())
        }
        Encoding::Gzip => {
            let start = out.len();
            // bufread: the slice is the buffer, so no 32 KiB BufReader per message.
            let gz = flate2::bufread::GzDecoder::new(data);
            let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
            gz.take(limit)
                .read_to_end(out)
                .map_err(|_| CompressError::Corrupt)?;
            if out.len() - start > max {
                out.truncate(start);
                return Err(CompressError::TooLarge { max });
            }
            Ok(())
        }
    }
}

/// Appends `data` compressed with `encoding` to `out`.
pub fn compress(encoding: Encoding, data: &[u8], out: &mut Vec<u8>) {
    match encoding {
        Encoding::Identity => out.extend_from_slice(data),
        Encoding::Gzip => {
            let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
            // Writing into a Vec cannot fail.
            let _ = gz.write_all(data);
            let _ = gz.finish();
        }
    }
}

/// Appends one length-prefixed message holding `data` compressed with `encoding`
/// (Compressed-Flag 1), or as it is for identity (flag 0).
pub fn encode_message(encoding: Encoding, data: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; frame::PREFIX_LEN]);
    compress(encoding, data, out);
    frame::patch(out, start, encoding.compresses());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation() {
        // compression.md: grpc-encoding names the request's encoding; grpc-accept-encoding
        // lists what a peer reads.
        let table: &[(&[u8], Result<Encoding, CompressError>)] = &[
            (b"identity", Ok(Encoding::Identity)),
            (b"gzip", Ok(Encoding::Gzip)),
            (b"GZIP", Ok(Encoding::Gzip)),
            (b"deflate", Err(CompressError::Unsupported)),
            (b"snappy", Err(CompressError::Unsupported)),
            (b"gzip,identity", Err(CompressError::Unsupported)),
            (b"", Err(CompressError::Unsupported)),
        ];
        for &(value, want) in table {
            assert_eq!(Encoding::parse(value), want, "{value:?}");
        }
        assert_eq!(CompressError::Unsupported.code(), Code::Unimplemented);
        let accept: &[(Option<&[u8]>, Encoding, bool)] = &[
            (None, Encoding::Identity, true),
            (None, Encoding::Gzip, false),
            (Some(b"identity"), Encoding::Gzip, false),
            (Some(b"identity,deflate,gzip"), Encoding::Gzip, true),
            (Some(b"identity, gzip "), Encoding::Gzip, true),
            (Some(b"gzipx"), Encoding::Gzip, false),
        ];
        for &(list, enc, want) in accept {
            assert_eq!(accepts(list, enc), want, "{list:?} {enc:?}");
        }
        assert_eq!(
            response_encoding(Some(b"gzip"), Encoding::Gzip),
            Encoding::Gzip
        );
        assert_eq!(response_encoding(None, Encoding::Gzip), Encoding::Identity);
        assert_eq!(
            response_encoding(Some(b"gzip"), Encoding::Identity),
            Encoding::Identity
        );
    }

    #[test]
    fn gzip_round_trip_and_limits() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 7) as u8).collect();
        let mut packed = Vec::new();
        compress(Encoding::Gzip, &data, &mut packed);
        assert!(packed.len() < data.len() / 10);
        let mut out = vec![0xEE];
        decompress(Encoding::Gzip, &packed, data.len(), &mut out).unwrap();
        assert_eq!(out[1..], data[..]);
        // One byte under the size is over the limit; nothing of it is kept.
        let mut out = vec![0xEE];
        assert_eq!(
            decompress(Encoding::Gzip, &packed, data.len() - 1, &mut out),
            Err(CompressError::TooLarge {
                max: data.len() - 1
            })
        );
        assert_eq!(out, [0xEE]);
        assert_eq!(
            decompress(Encoding::Identity, b"abc", 2, &mut out),
            Err(CompressError::TooLarge { max: 2 })
        );
        let mut cut = Vec::new();
        for bad in [&b""[..], b"not gzip", &packed[..packed.len() - 4]] {
            assert_eq!(
                decompress(Encoding::Gzip, bad, 1 << 20, &mut cut),
                Err(CompressError::Corrupt)
            );
        }
        let mut flipped = packed.clone();
        let n = flipped.len();
        flipped[n - 5] ^= 1; // the CRC-32
        assert_eq!(
            decompress(Encoding::Gzip, &flipped, 1 << 20, &mut cut),
            Err(CompressError::Corrupt)
        );
    }

    #[test]
    fn a_zip_bomb_stops_at_the_limit() {
        // 4 MiB of zeros is ~4 KiB of gzip; a 16 KiB limit stops inflating at 16 KiB + 1.
        const MAX: usize = 16 << 10;
        let mut bomb = Vec::new();
        {
            let mut gz = flate2::write::GzEncoder::new(&mut bomb, flate2::Compression::fast());
            let zeros = vec![0u8; 1 << 20];
            for _ in 0..4 {
                gz.write_all(&zeros).unwrap();
            }
            gz.finish().unwrap();
        }
        let mut out = Vec::new();
        assert_eq!(
            decompress(Encoding::Gzip, &bomb, MAX, &mut out),
            Err(CompressError::TooLarge { max: MAX })
        );
        assert!(out.capacity() <= 4 * MAX, "{}", out.capacity());
    }

    #[test]
    fn compressed_message_frames() {
        let mut out = Vec::new();
        encode_message(Encoding::Gzip, b"hello hello hello", &mut out);
        assert_eq!(out[0], 1);
        let len = u32::from_be_bytes(out[1..5].try_into().unwrap()) as usize;
        assert_eq!(len, out.len() - 5);
        let mut d = frame::Decoder::new(1024, true);
        let mut input = &out[..];
        let m = d.next(&mut input).unwrap().unwrap();
        assert!(m.compressed);
        let mut plain = Vec::new();
        decompress(Encoding::Gzip, m.data, 1024, &mut plain).unwrap();
        assert_eq!(plain, b"hello hello hello");
        let mut out = Vec::new();
        encode_message(Encoding::Identity, b"hi", &mut out);
        assert_eq!(out, [0, 0, 0, 0, 2, b'h', b'i']);
    }
}
