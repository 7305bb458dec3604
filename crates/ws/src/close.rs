//! Close frames (RFC 6455 §5.5.1, §7.4): reading a client's code and reason, checked, and
//! the codes the server sends. A code the RFC reserves or leaves unassigned is a protocol
//! error; a reason must be UTF-8.
#![forbid(unsafe_code)]

use crate::Error as WsError;

/// 1000: the purpose was fulfilled.
pub const NORMAL: u16 = 1000;
/// 1001: the server is going away (shutdown) or the client left.
pub const GOING_AWAY: u16 = 1001;
/// 1002: a protocol error.
pub const PROTOCOL_ERROR: u16 = 1002;
/// 1003: a message of a type the endpoint cannot accept.
pub const UNSUPPORTED: u16 = 1003;
/// 1007: a message's data did not match its type (text that is not UTF-8).
pub const INVALID_DATA: u16 = 1007;
/// 1008: a policy was violated.
pub const POLICY: u16 = 1008;
/// 1009: a message too big to process.
pub const TOO_BIG: u16 = 1009;
/// 1011: the server met a condition it did not expect (a handler panicked).
pub const INTERNAL_ERROR: u16 = 1011;

/// Whether a peer may send `code` in a close frame (RFC 6455 §7.4.1–§7.4.2, and the IANA
/// registry's 1012–1014). 1004 is reserved; 1005, 1006 and 1015 are never sent on the wire;
/// 1016–2999 are for later RFCs; 3000–3999 registered and 4000–4999 private codes are taken.
pub fn valid_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// A client's close frame, read: its code (none for an empty payload) and reason.
pub fn read(payload: &[u8]) -> Result<Option<(u16, &str)>, WsError> {
    match payload {
        [] => Ok(None),
        [_] => Err(WsError::Protocol("close frame of one byte")),
        [a, b, reason @ ..] => {
            let code = u16::from_be_bytes([*a, *b]);
            if !valid_code(code) {
                return Err(WsError::Protocol("close code not allowed"));
            }
            let reason = std::str::from_utf8(reason).map_err(|_| WsError::InvalidUtf8)?;
            Ok(Some((code, reason)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Autobahn 7.7 (codes to accept) and 7.9 (codes to refuse).
    #[test]
    fn codes() {
        for code in [
            1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999,
        ] {
            assert!(valid_code(code), "{code}");
        }
        for code in [
            0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
        ] {
            assert!(!valid_code(code), "{code}");
        }
    }

    #[test]
    fn payloads() {
        assert_eq!(read(b""), Ok(None));
        assert_eq!(
            read(&[0x03]),
            Err(WsError::Protocol("close frame of one byte"))
        );
        assert_eq!(read(&[0x03, 0xE8]), Ok(Some((1000, ""))));
        assert_eq!(read(b"\x03\xe9bye"), Ok(Some((1001, "bye"))));
        assert_eq!(
            read(b"\x03\xedx"),
            Err(WsError::Protocol("close code not allowed"))
        );
        assert_eq!(read(b"\x03\xe8\xce\xba\xff"), Err(WsError::InvalidUtf8));
    }
}
