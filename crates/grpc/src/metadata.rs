//! Custom metadata (PROTOCOL-HTTP2.md, "Custom-Metadata"): which request fields are the
//! application's and which the transport's own, name and value checks, and `-bin` values
//! (base64: read padded or not, written without padding). Field by field: it keeps no map.

use std::fmt;

use base64::Engine as _;
use base64::alphabet::STANDARD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use crate::code::Code;

/// Reads `-bin` values: the standard alphabet, padding optional (PROTOCOL-HTTP2.md:
/// "Implementations MUST accept padded and un-padded values").
const READ_BIN: GeneralPurpose = GeneralPurpose::new(
    &STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Writes `-bin` values: "should emit un-padded values".
const WRITE_BIN: GeneralPurpose = GeneralPurpose::new(
    &STANDARD,
    GeneralPurposeConfig::new().with_encode_padding(false),
);

/// A metadata field this side refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetadataError {
    /// A `-bin` value that is not base64.
    BadBase64,
    /// An ASCII value with a byte outside 0x20–0x7E.
    BadValue,
    /// A name with a byte outside `0-9 a-z _ - .`.
    BadName,
}

impl MetadataError {
    /// The status a server ends the call with: INTERNAL, as grpc-go answers a field it
    /// cannot read (a malformed request, not the application's argument).
    pub const fn code(self) -> Code {
        Code::Internal
    }
}

impl fmt::Display for MetadataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MetadataError::BadBase64 => "a -bin metadata value is not base64",
            MetadataError::BadValue => "a metadata value has a byte outside 0x20-0x7E",
            MetadataError::BadName => "a metadata name has a byte outside 0-9 a-z _ - .",
        })
    }
}

impl std::error::Error for MetadataError {}

/// Whether a request field (its name lowercase, as HTTP/2 and HTTP/3 carry it) belongs to
/// the transport rather than to the application's metadata: pseudo-fields, `te`,
/// `content-type`, `user-agent` (PROTOCOL-HTTP2.md's Request-Headers), the `grpc-*` fields
/// the protocol defines, and HTTP/1.1's connection fields (a gRPC-Web request over HTTP/1.1).
/// Other `grpc-` names (`grpc-trace-bin`, `grpc-tags-bin`, `grpc-previous-rpc-attempts`) are
/// reserved for gRPC's own use but reach the application as metadata, as grpc-go passes them.
pub fn is_reserved(name: &[u8]) -> bool {
    if name.first() == Some(&b':') {
        return true;
    }
    matches!(
        name,
        b"te"
            | b"content-type"
            | b"user-agent"
            | b"grpc-timeout"
            | b"grpc-encoding"
            | b"grpc-accept-encoding"
            | b"grpc-message-type"
            | b"grpc-status"
            | b"grpc-message"
            | b"grpc-status-details-bin"
            | b"connection"
            | b"keep-alive"
            | b"proxy-connection"
            | b"transfer-encoding"
            | b"upgrade"
            | b"host"
            | b"content-length"
    )
}

/// Checks a metadata name: `Header-Name → 1*( %x30-39 / %x61-7A / "_" / "-" / ".")`
/// (PROTOCOL-HTTP2.md; lowercase only: HTTP/2 field names are).
pub fn check_name(name: &[u8]) -> Result<(), MetadataError> {
    let ok = !name.is_empty()
        && name
            .iter()
            .all(|&b| matches!(b, b'0'..=b'9' | b'a'..=b'z' | b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(MetadataError::BadName)
    }
}

/// Whether a metadata name is binary (`-bin`): its values are base64 on the wire.
pub fn is_binary(name: &[u8]) -> bool {
    name.ends_with(b"-bin")
}

/// Checks an ASCII metadata value: `ASCII-Value → 1*( %x20-%x7E ) ; space and printable
/// ASCII` (PROTOCOL-HTTP2.md). An empty value is accepted: HTTP allows it and grpc-go
/// passes it.
pub fn check_ascii_value(value: &[u8]) -> Result<(), MetadataError> {
    if value.iter().all(|&b| matches!(b, 0x20..=0x7E)) {
        Ok(())
    } else {
        Err(MetadataError::BadValue)
    }
}

/// Decodes a `-bin` value, padded or not. Several values joined by commas in one field (an
/// intermediary may join repeated fields so) are split first with [`bin_values`].
pub fn decode_bin(value: &[u8]) -> Result<Vec<u8>, MetadataError> {
    READ_BIN.decode(value).map_err(|_| MetadataError::BadBase64)
}

/// The values of a `-bin` field that an intermediary may have joined with `,` (base64 has no
/// commas, so the split is exact), each with optional whitespace around it trimmed.
pub fn bin_values(field: &[u8]) -> impl Iterator<Item = &[u8]> {
    field.split(|&b| b == b',').map(<[u8]>::trim_ascii)
}

/// Encodes a `-bin` value: base64, standard alphabet, no padding.
pub fn encode_bin(value: &[u8]) -> String {
    WRITE_BIN.encode(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_fields() {
        // PROTOCOL-HTTP2.md Request-Headers: Call-Definition (:method, :scheme, :path, te,
        // content-type, grpc-timeout, grpc-encoding, grpc-accept-encoding, user-agent,
        // grpc-message-type) is the transport's; Custom-Metadata is the rest.
        let reserved: &[&[u8]] = &[
            b":path",
            b":authority",
            b":method",
            b":scheme",
            b"te",
            b"content-type",
            b"user-agent",
            b"grpc-timeout",
            b"grpc-encoding",
            b"grpc-accept-encoding",
            b"grpc-message-type",
            b"grpc-status",
            b"grpc-message",
            b"grpc-status-details-bin",
            b"connection",
            b"host",
            b"content-length",
            b"transfer-encoding",
        ];
        for &name in reserved {
            assert!(is_reserved(name), "{}", String::from_utf8_lossy(name));
        }
        let metadata: &[&[u8]] = &[
            b"x-user-id",
            b"authorization",
            b"x-grpc-test-echo-initial",
            b"x-grpc-test-echo-trailing-bin",
            b"grpc-trace-bin",
            b"grpc-previous-rpc-attempts",
            b"accept",
            b"tem",
        ];
        for &name in metadata {
            assert!(!is_reserved(name), "{}", String::from_utf8_lossy(name));
        }
    }

    #[test]
    fn names_and_values() {
        // Header-Name → 1*( %x30-39 / %x61-7A / "_" / "-" / "."); ASCII-Value → %x20-%x7E.
        for name in [&b"x-a_b.c-9"[..], b"k"] {
            assert_eq!(check_name(name), Ok(()));
        }
        for name in [&b""[..], b"X-Upper", b"sp ace", b"colon:", b"\xc3\xa9"] {
            assert_eq!(check_name(name), Err(MetadataError::BadName));
        }
        for value in [&b""[..], b" spaces and ~ tilde ", b"!"] {
            assert_eq!(check_ascii_value(value), Ok(()));
        }
        for value in [&b"tab\t"[..], b"del\x7f", b"nl\n", b"\xc3\xa9", b"\x00"] {
            assert_eq!(check_ascii_value(value), Err(MetadataError::BadValue));
        }
        assert!(is_binary(b"x-trace-bin"));
        assert!(!is_binary(b"x-binary"));
    }

    #[test]
    fn binary_values() {
        // "Implementations MUST accept padded and un-padded values and should emit un-padded
        // values."
        let table: &[(&[u8], &[u8])] = &[
            (b"", b""),
            (b"AA", b"\x00"),
            (b"AA==", b"\x00"),
            // Padding is not counted: one "=" where two belong is read too.
            (b"AA=", b"\x00"),
            (b"q80", b"\xab\xcd"),
            (b"q80=", b"\xab\xcd"),
            (b"q83v", b"\xab\xcd\xef"),
            (b"3q2+7w", b"\xde\xad\xbe\xef"),
        ];
        for &(wire, bytes) in table {
            assert_eq!(decode_bin(wire).as_deref(), Ok(bytes), "{wire:?}");
        }
        assert_eq!(encode_bin(b"\xab\xcd"), "q80");
        assert_eq!(encode_bin(b"\xde\xad\xbe\xef"), "3q2+7w");
        for bad in [&b"A"[..], b"q8-_", b"q8 0", b"AA===", b"AB=="] {
            assert_eq!(decode_bin(bad), Err(MetadataError::BadBase64), "{bad:?}");
        }
        let split: Vec<_> = bin_values(b"q80, AA==,3q2+7w").collect();
        assert_eq!(split, [&b"q80"[..], b"AA==", b"3q2+7w"]);
    }
}
