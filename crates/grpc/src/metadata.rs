//! Custom metadata (PROTOCOL-HTTP2.md, "Custom-Metadata"): which request fields are the
//! application's and which the transport's own, name and value checks, `-bin` values
//! (base64: read padded or not, written without padding), and [`Metadata`], a call's
//! entries in order (what a handler reads and sets, and a [`Status`] carries
//! as its trailers).

use std::borrow::Cow;
use std::fmt;

use base64::Engine as _;
use base64::alphabet::STANDARD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use crate::code::Code;
use crate::status::Status;

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

/// A metadata field this side cannot read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetadataError {
    /// A `-bin` value that is not base64: INTERNAL, as grpc-go answers it ("malformed binary
    /// metadata"), when the value is the request's; a peer's trailer is dropped instead.
    BadBase64,
}

impl MetadataError {
    /// The status a server ends the call with.
    pub const fn code(self) -> Code {
        Code::Internal
    }
}

impl fmt::Display for MetadataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a -bin metadata value is not base64")
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

/// Whether `name` is a metadata name: `Header-Name → 1*( %x30-39 / %x61-7A / "_" / "-" /
/// ".")` (PROTOCOL-HTTP2.md; lowercase only). For names an application sends: a request's
/// names were already judged as HTTP field names.
pub fn is_valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|&b| matches!(b, b'0'..=b'9' | b'a'..=b'z' | b'_' | b'-' | b'.'))
}

/// Whether a metadata name is binary (`-bin`): its values are base64 on the wire.
pub fn is_binary(name: &[u8]) -> bool {
    name.ends_with(b"-bin")
}

/// Whether `value` is an ASCII metadata value: `ASCII-Value → 1*( %x20-%x7E ) ; space and
/// printable ASCII` (PROTOCOL-HTTP2.md; an empty value is let through: HTTP allows it and
/// grpc-go passes it). A received value outside this that is a valid HTTP field value must
/// not fail the call ("Implementations must not error due to receiving an invalid
/// ASCII-Value that's a valid field-value in HTTP"): the caller drops it (so an application
/// echoing its metadata back cannot fail on it); a value an application sends is refused.
pub fn is_ascii_value(value: &[u8]) -> bool {
    value.iter().all(|&b| matches!(b, 0x20..=0x7E))
}

/// Decodes one `-bin` value, padded or not. A field may hold several joined by commas: split
/// it first with [`bin_values`].
pub fn decode_bin(value: &[u8]) -> Result<Vec<u8>, MetadataError> {
    READ_BIN.decode(value).map_err(|_| MetadataError::BadBase64)
}

/// The values of a `-bin` field, which may be several joined with `,` (PROTOCOL-HTTP2.md:
/// "Implementations must split Binary-Headers on "," before decoding the Base64-encoded
/// values"; base64 has no commas, so the split is exact), each with whitespace around it
/// trimmed.
pub fn bin_values(field: &[u8]) -> impl Iterator<Item = &[u8]> {
    field.split(|&b| b == b',').map(<[u8]>::trim_ascii)
}

/// Encodes a `-bin` value: base64, standard alphabet, no padding.
pub fn encode_bin(value: &[u8]) -> String {
    WRITE_BIN.encode(value)
}

/// A call's metadata: names lowercase, in order, a name possibly more than once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metadata {
    entries: Vec<(Cow<'static, str>, Value)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Value {
    Ascii(String),
    Binary(Vec<u8>),
}

/// A metadata name or value that cannot be sent: a name that is not lowercase token
/// characters, one gRPC reserves, an ASCII value outside 0x20–0x7E, or a binary value under
/// a name without `-bin` (or the reverse).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidMetadata;

impl fmt::Display for InvalidMetadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid gRPC metadata name or value")
    }
}

impl std::error::Error for InvalidMetadata {}

impl Metadata {
    /// No metadata.
    pub const fn new() -> Metadata {
        Metadata {
            entries: Vec::new(),
        }
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The first ASCII value of `name` (lowercase).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.entries.iter().find_map(|(n, v)| match v {
            Value::Ascii(s) if n == name => Some(s.as_str()),
            _ => None,
        })
    }

    /// The first binary value of `name` (a `-bin` name, lowercase), decoded.
    pub fn get_bin(&self, name: &str) -> Option<&[u8]> {
        self.entries.iter().find_map(|(n, v)| match v {
            Value::Binary(b) if n == name => Some(b.as_slice()),
            _ => None,
        })
    }

    /// Adds an ASCII value.
    pub fn insert(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<String>,
    ) -> Result<(), InvalidMetadata> {
        let (name, value) = (name.into(), value.into());
        if !sendable_name(&name) || is_binary(name.as_bytes()) {
            return Err(InvalidMetadata);
        }
        if !is_ascii_value(value.as_bytes()) {
            return Err(InvalidMetadata);
        }
        self.entries.push((name, Value::Ascii(value)));
        Ok(())
    }

    /// Adds a binary value under a `-bin` name (sent base64-encoded).
    pub fn insert_bin(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<Vec<u8>>,
    ) -> Result<(), InvalidMetadata> {
        let name = name.into();
        if !sendable_name(&name) || !is_binary(name.as_bytes()) {
            return Err(InvalidMetadata);
        }
        self.entries.push((name, Value::Binary(value.into())));
        Ok(())
    }

    /// The entries: name and value, ASCII values as `Ok(&str)`, binary ones as `Err(&[u8])`.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Result<&str, &[u8]>)> {
        self.entries.iter().map(|(n, v)| {
            let v = match v {
                Value::Ascii(s) => Ok(s.as_str()),
                Value::Binary(b) => Err(b.as_slice()),
            };
            (n.as_ref(), v)
        })
    }

    /// Takes one of a request's fields (name lowercase) if it is metadata: reserved ones
    /// are left out, `-bin` values decoded (each comma-separated value one entry), ASCII
    /// values outside 0x20–0x7E dropped (the spec: they must not fail the call). A `-bin`
    /// value that is not base64 is INTERNAL.
    pub fn take_field(&mut self, name: &[u8], value: &[u8]) -> Result<(), Status> {
        if is_reserved(name) || !is_valid_name(name) {
            return Ok(());
        }
        let name = String::from_utf8_lossy(name).into_owned();
        if is_binary(name.as_bytes()) {
            for v in bin_values(value) {
                let bytes = decode_bin(v).map_err(|_| {
                    Status::new(Code::Internal, format!("metadata {name}: not base64"))
                })?;
                self.entries
                    .push((Cow::Owned(name.clone()), Value::Binary(bytes)));
            }
        } else if is_ascii_value(value) {
            let value = String::from_utf8_lossy(value).into_owned();
            self.entries.push((Cow::Owned(name), Value::Ascii(value)));
        }
        Ok(())
    }

    /// The entries as fields to send: binary values base64-encoded (unpadded).
    pub fn fields(&self) -> impl Iterator<Item = (Cow<'static, str>, Cow<'static, str>)> {
        self.entries.iter().map(|(n, v)| {
            let v = match v {
                Value::Ascii(s) => Cow::Owned(s.clone()),
                Value::Binary(b) => Cow::Owned(encode_bin(b)),
            };
            (n.clone(), v)
        })
    }
}

/// A name a handler may set: lowercase token characters, not reserved by gRPC or HTTP.
fn sendable_name(name: &str) -> bool {
    let b = name.as_bytes();
    is_valid_name(b) && !is_reserved(b)
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
            assert!(is_valid_name(name), "{name:?}");
        }
        for name in [&b""[..], b"X-Upper", b"sp ace", b"colon:", b"\xc3\xa9"] {
            assert!(!is_valid_name(name), "{name:?}");
        }
        for value in [&b""[..], b" spaces and ~ tilde ", b"!"] {
            assert!(is_ascii_value(value), "{value:?}");
        }
        for value in [&b"tab\t"[..], b"del\x7f", b"nl\n", b"\xc3\xa9", b"\x00"] {
            assert!(!is_ascii_value(value), "{value:?}");
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
        // "Implementations must split Binary-Headers on "," before decoding".
        let split: Vec<_> = bin_values(b"q80, AA==,3q2+7w").collect();
        assert_eq!(split, [&b"q80"[..], b"AA==", b"3q2+7w"]);
    }
}
