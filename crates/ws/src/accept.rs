//! The opening handshake's proof (RFC 6455 §1.3, §4.2.2): `Sec-WebSocket-Accept` from the
//! client's `Sec-WebSocket-Key`. The server computes it to answer; a client, to check the 101.
#![forbid(unsafe_code)]

use base64::Engine as _;
use sha1::{Digest as _, Sha1};

/// The GUID RFC 6455 §1.3 appends to the key.
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// `Sec-WebSocket-Accept` for `key` (as sent, base64): base64 of the SHA-1 of the key and
/// the GUID.
pub fn accept(key: &[u8]) -> String {
    let mut ctx = Sha1::new();
    ctx.update(key);
    ctx.update(GUID);
    base64::engine::general_purpose::STANDARD.encode(ctx.finalize())
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc_example() {
        // RFC 6455 §1.3.
        assert_eq!(
            super::accept(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }
}
