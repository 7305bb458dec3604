//! gRPC status codes (doc/statuscodes.md): the 17 codes and their numbers, reading a
//! `grpc-status` value, and the code a client gives an answer that is not gRPC, from its HTTP
//! status (doc/http-grpc-status-mapping.md). Numbers and names only: no messages, no fields.

use std::fmt;

/// A gRPC status code; the discriminants are the numbers on the wire (statuscodes.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Code {
    /// Not an error.
    Ok = 0,
    /// Cancelled, typically by the caller.
    Cancelled = 1,
    /// An error with no better code (also a `grpc-status` number not in this list).
    Unknown = 2,
    /// The client's argument is invalid whatever the system's state.
    InvalidArgument = 3,
    /// The deadline passed before the operation could finish.
    DeadlineExceeded = 4,
    /// Some requested entity was not found.
    NotFound = 5,
    /// The entity a client tried to create exists.
    AlreadyExists = 6,
    /// The caller may not do this (authenticated, but not allowed).
    PermissionDenied = 7,
    /// A resource is exhausted: a quota, or a message over the size limit.
    ResourceExhausted = 8,
    /// The system is not in the state the operation needs.
    FailedPrecondition = 9,
    /// Aborted, typically by a concurrency conflict.
    Aborted = 10,
    /// Past the valid range.
    OutOfRange = 11,
    /// Not implemented or not supported (an unknown method, an unsupported encoding).
    Unimplemented = 12,
    /// An invariant the protocol relies on is broken (a malformed message or field).
    Internal = 13,
    /// The service is unavailable for now; retrying may succeed.
    Unavailable = 14,
    /// Unrecoverable data loss or corruption.
    DataLoss = 15,
    /// The request has no valid authentication credentials.
    Unauthenticated = 16,
}

/// Every code, indexed by its number.
const ALL: [Code; 17] = [
    Code::Ok,
    Code::Cancelled,
    Code::Unknown,
    Code::InvalidArgument,
    Code::DeadlineExceeded,
    Code::NotFound,
    Code::AlreadyExists,
    Code::PermissionDenied,
    Code::ResourceExhausted,
    Code::FailedPrecondition,
    Code::Aborted,
    Code::OutOfRange,
    Code::Unimplemented,
    Code::Internal,
    Code::Unavailable,
    Code::DataLoss,
    Code::Unauthenticated,
];

/// `grpc-status` values, by number: written without formatting an integer per answer.
const DIGITS: [&str; 17] = [
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
];

/// The names statuscodes.md gives (as logs and `grpc-status` documentation spell them).
const NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

impl Code {
    /// The number on the wire.
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    /// The code numbered `n`; a number outside 0..=16 is [`Code::Unknown`] (as grpc-core
    /// reads it: a status this side cannot name is an unknown error).
    pub const fn from_i32(n: i32) -> Code {
        if n >= 0 && n < ALL.len() as i32 {
            ALL[n as usize]
        } else {
            Code::Unknown
        }
    }

    /// Reads a `grpc-status` value: ASCII decimal digits only (PROTOCOL-HTTP2.md: `Status →
    /// "grpc-status" 1*DIGIT`). `None` for anything else, which a client treats as INTERNAL
    /// (grpc-go: "malformed grpc-status"); a well-formed number outside 0..=16 is
    /// [`Code::Unknown`].
    pub fn parse(value: &[u8]) -> Option<Code> {
        if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
            return None;
        }
        // Leading zeros are digits too; past 10 of them the value is out of range anyway.
        let mut n: u64 = 0;
        for &d in value {
            n = (n * 10 + u64::from(d - b'0')).min(u64::from(u32::MAX));
        }
        Some(Code::from_i32(i32::try_from(n).unwrap_or(-1)))
    }

    /// The `grpc-status` value: the number in decimal.
    pub const fn as_str(self) -> &'static str {
        DIGITS[self as usize]
    }

    /// The name statuscodes.md gives it (`DEADLINE_EXCEEDED`).
    pub const fn name(self) -> &'static str {
        NAMES[self as usize]
    }

    /// A sentence saying what the code means, as tonic's `Code::description` words it.
    pub const fn description(self) -> &'static str {
        match self {
            Code::Ok => "The operation completed successfully",
            Code::Cancelled => "The operation was cancelled",
            Code::Unknown => "Unknown error",
            Code::InvalidArgument => "Client specified an invalid argument",
            Code::DeadlineExceeded => "Deadline expired before operation could complete",
            Code::NotFound => "Some requested entity was not found",
            Code::AlreadyExists => "Some entity that we attempted to create already exists",
            Code::PermissionDenied => {
                "The caller does not have permission to execute the specified operation"
            }
            Code::ResourceExhausted => "Some resource has been exhausted",
            Code::FailedPrecondition => {
                "The system is not in a state required for the operation's execution"
            }
            Code::Aborted => "The operation was aborted",
            Code::OutOfRange => "Operation was attempted past the valid range",
            Code::Unimplemented => "Operation is not implemented or not supported",
            Code::Internal => "Internal error",
            Code::Unavailable => "The service is currently unavailable",
            Code::DataLoss => "Unrecoverable data loss or corruption",
            Code::Unauthenticated => "The request does not have valid authentication credentials",
        }
    }

    /// The code a gRPC client gives an answer without `grpc-status` whose HTTP status is
    /// `status` (http-grpc-status-mapping.md): an intermediary's error page. For clients
    /// only ("Servers must not use this table to determine an HTTP status code"); a 1xx is
    /// skipped before this, and 200 without `grpc-status` is UNKNOWN, as every status the
    /// table does not list.
    pub const fn from_http_status(status: u16) -> Code {
        match status {
            400 | 431 => Code::Internal,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::Unimplemented,
            429 | 502 | 503 | 504 => Code::Unavailable,
            _ => Code::Unknown,
        }
    }
}

/// [`Code::from_i32`]: a number outside 0..=16 is UNKNOWN.
impl From<i32> for Code {
    fn from(n: i32) -> Code {
        Code::from_i32(n)
    }
}

/// The number on the wire.
impl From<Code> for i32 {
    fn from(code: Code) -> i32 {
        i32::from(code.as_u8())
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_are_statuscodes_md() {
        // statuscodes.md: the table of codes, numbers and names.
        let table = [
            (Code::Ok, 0, "OK"),
            (Code::Cancelled, 1, "CANCELLED"),
            (Code::Unknown, 2, "UNKNOWN"),
            (Code::InvalidArgument, 3, "INVALID_ARGUMENT"),
            (Code::DeadlineExceeded, 4, "DEADLINE_EXCEEDED"),
            (Code::NotFound, 5, "NOT_FOUND"),
            (Code::AlreadyExists, 6, "ALREADY_EXISTS"),
            (Code::PermissionDenied, 7, "PERMISSION_DENIED"),
            (Code::ResourceExhausted, 8, "RESOURCE_EXHAUSTED"),
            (Code::FailedPrecondition, 9, "FAILED_PRECONDITION"),
            (Code::Aborted, 10, "ABORTED"),
            (Code::OutOfRange, 11, "OUT_OF_RANGE"),
            (Code::Unimplemented, 12, "UNIMPLEMENTED"),
            (Code::Internal, 13, "INTERNAL"),
            (Code::Unavailable, 14, "UNAVAILABLE"),
            (Code::DataLoss, 15, "DATA_LOSS"),
            (Code::Unauthenticated, 16, "UNAUTHENTICATED"),
        ];
        for (code, n, name) in table {
            assert_eq!(code.as_u8(), n);
            assert_eq!(code.name(), name);
            assert_eq!(code.to_string(), name);
            assert_eq!(code.as_str(), n.to_string());
            assert_eq!(Code::from_i32(i32::from(n)), code);
            assert_eq!(Code::parse(n.to_string().as_bytes()), Some(code));
        }
    }

    #[test]
    fn grpc_status_values() {
        // PROTOCOL-HTTP2.md: Status → "grpc-status" 1*DIGIT ; 0-9
        let table: &[(&[u8], Option<Code>)] = &[
            (b"0", Some(Code::Ok)),
            (b"007", Some(Code::PermissionDenied)),
            (b"17", Some(Code::Unknown)),
            (b"99999999999999999999", Some(Code::Unknown)),
            (b"", None),
            (b"-1", None),
            (b"+1", None),
            (b" 1", None),
            (b"1 ", None),
            (b"0x1", None),
            (b"OK", None),
        ];
        for &(value, want) in table {
            assert_eq!(
                Code::parse(value),
                want,
                "{:?}",
                String::from_utf8_lossy(value)
            );
        }
        assert_eq!(Code::from_i32(-1), Code::Unknown);
        assert_eq!(Code::from_i32(17), Code::Unknown);
    }

    #[test]
    fn http_status_mapping() {
        // http-grpc-status-mapping.md: the table, and "other: UNKNOWN".
        let table = [
            (400, Code::Internal),
            (401, Code::Unauthenticated),
            (403, Code::PermissionDenied),
            (404, Code::Unimplemented),
            (429, Code::Unavailable),
            (431, Code::Internal),
            (502, Code::Unavailable),
            (503, Code::Unavailable),
            (504, Code::Unavailable),
            (200, Code::Unknown),
            (301, Code::Unknown),
            (405, Code::Unknown),
            (500, Code::Unknown),
        ];
        for (status, code) in table {
            assert_eq!(Code::from_http_status(status), code, "{status}");
        }
    }
}
