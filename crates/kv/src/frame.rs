//! The bytes a second tier holds for one value: a version byte, the expiry as Unix
//! milliseconds (big-endian u64), then the value. The server's own TTL is only a bound
//! (memcached counts whole seconds); the expiry in the value makes a 200 ms TTL mean 200 ms
//! on every edge and engine. Encoding and decoding only.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

const VERSION: u8 = 1;
/// The header's length.
pub const HEADER: usize = 9;

/// Now, as Unix milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `value` framed to expire `ttl` after `now_ms`.
pub fn encode(value: &[u8], ttl: Duration, now_ms: u64) -> Vec<u8> {
    let expiry = now_ms.saturating_add(ttl.as_millis().min(u64::MAX as u128) as u64);
    let mut out = Vec::with_capacity(HEADER + value.len());
    out.push(VERSION);
    out.extend_from_slice(&expiry.to_be_bytes());
    out.extend_from_slice(value);
    out
}

/// The value and how long it has left, if `stored` is a frame that has not expired at
/// `now_ms` (anything else, including another program's bytes, is a miss).
pub fn decode(stored: &[u8], now_ms: u64) -> Option<(Duration, &[u8])> {
    if stored.len() < HEADER || stored[0] != VERSION {
        return None;
    }
    let expiry = u64::from_be_bytes(stored[1..HEADER].try_into().ok()?);
    (expiry > now_ms).then(|| (Duration::from_millis(expiry - now_ms), &stored[HEADER..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_lives_exactly_its_ttl() {
        let f = encode(b"abc", Duration::from_millis(200), 1_000);
        assert_eq!(
            decode(&f, 1_000),
            Some((Duration::from_millis(200), &b"abc"[..]))
        );
        assert_eq!(
            decode(&f, 1_199),
            Some((Duration::from_millis(1), &b"abc"[..]))
        );
        assert_eq!(decode(&f, 1_200), None);
    }

    #[test]
    fn foreign_bytes_are_a_miss() {
        assert_eq!(decode(b"", 0), None);
        assert_eq!(decode(b"plain value", 0), None);
        let mut f = encode(b"x", Duration::from_secs(1), 0);
        f[0] = 2;
        assert_eq!(decode(&f, 0), None);
        assert_eq!(
            decode(&encode(b"", Duration::from_secs(1), 0), 0).map(|v| v.1),
            Some(&b""[..])
        );
    }
}
