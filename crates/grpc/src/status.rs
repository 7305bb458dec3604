//! A call's outcome, [`Status`], and the trailer fields that carry it (PROTOCOL-HTTP2.md,
//! "Responses"): `grpc-status`, `grpc-message` percent-encoded, `grpc-status-details-bin`
//! base64 without padding. Renders and reads field values only; which frame or header block
//! they go in is the caller's (native trailers, or gRPC-Web's trailer frame in [`crate::web`]).

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;

use crate::code::Code;
use crate::metadata::{self, Metadata};

/// The trailer field carrying the status code.
pub const GRPC_STATUS: &str = "grpc-status";
/// The trailer field carrying the message, percent-encoded.
pub const GRPC_MESSAGE: &str = "grpc-message";
/// The trailer field carrying an encoded `google.rpc.Status`, base64.
pub const GRPC_STATUS_DETAILS_BIN: &str = "grpc-status-details-bin";

/// How a call ended: a code, a message for the developer, optional details (an encoded
/// `google.rpc.Status`, opaque here) and custom metadata sent beside them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// The code.
    pub code: Code,
    /// Unicode text; percent-encoded only on the wire.
    pub message: String,
    /// Sent as `grpc-status-details-bin` when not empty.
    pub details: Bytes,
    /// Custom metadata sent with the status (a server's failed call: in its trailers, or
    /// the head of a trailers-only answer); a client reads a failed call's here.
    pub metadata: Metadata,
}

impl Status {
    /// A status with `code` and `message`, no details.
    pub fn new(code: Code, message: impl Into<String>) -> Status {
        Status {
            code,
            message: message.into(),
            details: Bytes::new(),
            metadata: Metadata::new(),
        }
    }

    /// `OK`, no message.
    pub const fn ok() -> Status {
        Status {
            code: Code::Ok,
            message: String::new(),
            details: Bytes::new(),
            metadata: Metadata::new(),
        }
    }

    /// `CANCELLED` with `message` (tonic's constructor of the same name).
    pub fn cancelled(message: impl Into<String>) -> Status {
        Status::new(Code::Cancelled, message)
    }

    /// `UNKNOWN` with `message` (tonic's constructor of the same name).
    pub fn unknown(message: impl Into<String>) -> Status {
        Status::new(Code::Unknown, message)
    }

    /// `INVALID_ARGUMENT` with `message` (tonic's constructor of the same name).
    pub fn invalid_argument(message: impl Into<String>) -> Status {
        Status::new(Code::InvalidArgument, message)
    }

    /// `DEADLINE_EXCEEDED` with `message` (tonic's constructor of the same name).
    pub fn deadline_exceeded(message: impl Into<String>) -> Status {
        Status::new(Code::DeadlineExceeded, message)
    }

    /// `NOT_FOUND` with `message` (tonic's constructor of the same name).
    pub fn not_found(message: impl Into<String>) -> Status {
        Status::new(Code::NotFound, message)
    }

    /// `ALREADY_EXISTS` with `message` (tonic's constructor of the same name).
    pub fn already_exists(message: impl Into<String>) -> Status {
        Status::new(Code::AlreadyExists, message)
    }

    /// `PERMISSION_DENIED` with `message` (tonic's constructor of the same name).
    pub fn permission_denied(message: impl Into<String>) -> Status {
        Status::new(Code::PermissionDenied, message)
    }

    /// `RESOURCE_EXHAUSTED` with `message` (tonic's constructor of the same name).
    pub fn resource_exhausted(message: impl Into<String>) -> Status {
        Status::new(Code::ResourceExhausted, message)
    }

    /// `FAILED_PRECONDITION` with `message` (tonic's constructor of the same name).
    pub fn failed_precondition(message: impl Into<String>) -> Status {
        Status::new(Code::FailedPrecondition, message)
    }

    /// `ABORTED` with `message` (tonic's constructor of the same name).
    pub fn aborted(message: impl Into<String>) -> Status {
        Status::new(Code::Aborted, message)
    }

    /// `OUT_OF_RANGE` with `message` (tonic's constructor of the same name).
    pub fn out_of_range(message: impl Into<String>) -> Status {
        Status::new(Code::OutOfRange, message)
    }

    /// `UNIMPLEMENTED` with `message` (tonic's constructor of the same name).
    pub fn unimplemented(message: impl Into<String>) -> Status {
        Status::new(Code::Unimplemented, message)
    }

    /// `INTERNAL` with `message` (tonic's constructor of the same name).
    pub fn internal(message: impl Into<String>) -> Status {
        Status::new(Code::Internal, message)
    }

    /// `UNAVAILABLE` with `message` (tonic's constructor of the same name).
    pub fn unavailable(message: impl Into<String>) -> Status {
        Status::new(Code::Unavailable, message)
    }

    /// `DATA_LOSS` with `message` (tonic's constructor of the same name).
    pub fn data_loss(message: impl Into<String>) -> Status {
        Status::new(Code::DataLoss, message)
    }

    /// `UNAUTHENTICATED` with `message` (tonic's constructor of the same name).
    pub fn unauthenticated(message: impl Into<String>) -> Status {
        Status::new(Code::Unauthenticated, message)
    }

    /// A status with `code`, `message` and `details` (an encoded `google.rpc.Status`, sent as
    /// `grpc-status-details-bin`), as tonic's `Status::with_details`.
    pub fn with_details(code: Code, message: impl Into<String>, details: Bytes) -> Status {
        Status {
            code,
            message: message.into(),
            details,
            metadata: Metadata::new(),
        }
    }

    /// The code (the same as the `code` field; tonic's accessor).
    pub const fn code(&self) -> Code {
        self.code
    }

    /// The message (the same as the `message` field; tonic's accessor).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The details, empty when there are none (the `details` field; tonic's accessor).
    pub fn details(&self) -> &[u8] {
        &self.details
    }

    /// The custom metadata sent with the status (the `metadata` field; tonic's accessor).
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The custom metadata, to add to (tonic's accessor).
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// The trailer fields, in order: `grpc-status` always, `grpc-message` and
    /// `grpc-status-details-bin` when not empty (the [`metadata`](Status::metadata) is the
    /// caller's to send after them). The values are borrowed for the call only:
    /// nothing is allocated for a status without a message to escape or details.
    pub fn fields(&self, mut field: impl FnMut(&'static str, &[u8])) {
        field(GRPC_STATUS, self.code.as_str().as_bytes());
        if !self.message.is_empty() {
            field(GRPC_MESSAGE, encode_message(&self.message).as_bytes());
        }
        if !self.details.is_empty() {
            field(
                GRPC_STATUS_DETAILS_BIN,
                metadata::encode_bin(&self.details).as_bytes(),
            );
        }
    }

    /// Reads a status from its trailer fields as a client gets them (`None` when absent).
    /// A missing or malformed `grpc-status` is INTERNAL, as grpc-go reads it; the message is
    /// decoded leniently ([`decode_message`]); details that are not base64 are dropped.
    pub fn from_fields(
        status: Option<&[u8]>,
        message: Option<&[u8]>,
        details: Option<&[u8]>,
    ) -> Status {
        let Some(code) = status.and_then(Code::parse) else {
            let shown = String::from_utf8_lossy(status.unwrap_or(b""));
            return Status::new(Code::Internal, format!("malformed grpc-status: {shown:?}"));
        };
        let message = message
            .map(|m| decode_message(m).into_owned())
            .unwrap_or_default();
        let details = details
            .and_then(|d| metadata::decode_bin(d).ok())
            .map(Bytes::from)
            .unwrap_or_default();
        Status {
            code,
            message,
            details,
            metadata: Metadata::new(),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.code)
        } else {
            write!(f, "{}: {}", self.code, self.message)
        }
    }
}

impl std::error::Error for Status {}

/// Bytes sent as they are in `grpc-message` (PROTOCOL-HTTP2.md: `Percent-Byte-Unencoded →
/// 1*( %x20-%x24 / %x26-%x7E ) ; space and VCHAR, except %`); every other byte of the UTF-8
/// text is `%` and two hex digits.
const fn unencoded(b: u8) -> bool {
    matches!(b, 0x20..=0x24 | 0x26..=0x7E)
}

/// Percent-encodes a status message for `grpc-message`; borrowed when nothing needs escaping
/// (the usual case: ASCII text without `%`).
pub fn encode_message(message: &str) -> Cow<'_, str> {
    let bytes = message.as_bytes();
    let Some(first) = bytes.iter().position(|&b| !unencoded(b)) else {
        return Cow::Borrowed(message);
    };
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(bytes.len() + 16);
    out.push_str(&message[..first]);
    for &b in &bytes[first..] {
        if unencoded(b) {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
    }
    Cow::Owned(out)
}

/// Decodes a `grpc-message` value leniently, as PROTOCOL-HTTP2.md requires ("When decoding
/// invalid values, implementations MUST NOT error or throw away the message"): a `%` not
/// followed by two hex digits is kept as it is, and bytes that are not UTF-8 after decoding
/// become U+FFFD.
pub fn decode_message(value: &[u8]) -> Cow<'_, str> {
    if !value.contains(&b'%') {
        return String::from_utf8_lossy(value);
    }
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        let b = value[i];
        if b == b'%'
            && let (Some(hi), Some(lo)) = (
                value.get(i + 1).and_then(|&h| hex(h)),
                value.get(i + 2).and_then(|&l| hex(l)),
            )
        {
            out.push(hi << 4 | lo);
            i += 3;
            continue;
        }
        out.push(b);
        i += 1;
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(status: &Status) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        status.fields(|name, value| out.push((name, String::from_utf8(value.to_vec()).unwrap())));
        out
    }

    #[test]
    fn message_encoding() {
        // PROTOCOL-HTTP2.md: Status-Message → "grpc-message" Percent-Encoded;
        // Percent-Byte-Unencoded → 1*( %x20-%x24 / %x26-%x7E ); Percent-Byte-Encoded →
        // "%" 2HEXDIGIT ; 0-9 A-F; the message is UTF-8, then percent-encoded.
        let table = [
            ("", ""),
            ("plain text, ok! ~ {}", "plain text, ok! ~ {}"),
            ("100%", "100%25"),
            ("tab\there", "tab%09here"),
            ("line\r\nbreak", "line%0D%0Abreak"),
            ("\u{7f}", "%7F"),
            ("é", "%C3%A9"),
            ("\u{1F600}", "%F0%9F%98%80"),
            // The interop special_status_message case's text.
            (
                "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n",
                "%09%0Atest with whitespace%0D%0Aand Unicode BMP %E2%98%BA and non-BMP %F0%9F%98%88%09%0A",
            ),
        ];
        for (text, wire) in table {
            assert_eq!(encode_message(text), wire, "{text:?}");
            assert_eq!(decode_message(wire.as_bytes()), text, "{wire:?}");
        }
        assert!(matches!(encode_message("no escapes"), Cow::Borrowed(_)));
    }

    #[test]
    fn message_decoding_is_lenient() {
        // PROTOCOL-HTTP2.md: "When decoding invalid values, implementations MUST NOT error or
        // throw away the message ... decode valid portions while leaving broken
        // %-encodings as-is or replacing them with a replacement character".
        let table: &[(&[u8], &str)] = &[
            (b"%", "%"),
            (b"%4", "%4"),
            (b"%zz then %41", "%zz then A"),
            (b"50% off", "50% off"),
            (b"%c3%a9", "é"),
            (b"%C3", "\u{FFFD}"),
            (b"%FF%41", "\u{FFFD}A"),
            (b"raw \xff byte", "raw \u{FFFD} byte"),
            (b"%%41", "%A"),
        ];
        for &(wire, text) in table {
            assert_eq!(
                decode_message(wire),
                text,
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }

    #[test]
    fn trailer_fields() {
        // PROTOCOL-HTTP2.md: Trailers → Status [Status-Message] *Custom-Metadata;
        // grpc-status-details-bin is binary metadata: base64, emitted unpadded.
        assert_eq!(rendered(&Status::ok()), [("grpc-status", "0".to_string())]);
        let mut s = Status::new(Code::InvalidArgument, "bad 100%");
        assert_eq!(
            rendered(&s),
            [
                ("grpc-status", "3".into()),
                ("grpc-message", "bad 100%25".into())
            ]
        );
        s.details = Bytes::from_static(b"\x08\x03\x12\x01x");
        assert_eq!(
            rendered(&s)[2],
            ("grpc-status-details-bin", "CAMSAXg".to_string())
        );
    }

    #[test]
    fn status_from_fields() {
        let s = Status::from_fields(Some(b"5"), Some(b"not%20here"), Some(b"CAMSAXg="));
        assert_eq!(s.code, Code::NotFound);
        assert_eq!(s.message, "not here");
        assert_eq!(&s.details[..], b"\x08\x03\x12\x01x");
        // grpc-go (http2_client.go): a grpc-status that is not a number is INTERNAL; so is
        // none at all (the server ended the call without a status).
        assert_eq!(
            Status::from_fields(Some(b"x"), None, None).code,
            Code::Internal
        );
        assert_eq!(Status::from_fields(None, None, None).code, Code::Internal);
        assert_eq!(
            Status::from_fields(Some(b"0"), None, Some(b"!!")).details,
            Bytes::new()
        );
        assert_eq!(
            Status::new(Code::Aborted, "why").to_string(),
            "ABORTED: why"
        );
    }
}
