//! When a managed certificate is renewed, and when a failed attempt is tried again.
//!
//! Owns the arithmetic only (times in, times out), so it is tested by table: renewal when a
//! third of the lifetime is left (Let's Encrypt's and caddy's advice), up to a thirtieth of
//! the lifetime earlier at random so that many servers started together do not ask the CA
//! at once; failures back off exponentially from [`RETRY_FIRST`] to [`RETRY_MAX`].
#![forbid(unsafe_code)]

use std::time::{Duration, SystemTime};

/// The wait after a first failed attempt (CA down, validation failed).
pub const RETRY_FIRST: Duration = Duration::from_secs(10);
/// The longest wait between attempts (Let's Encrypt counts failed validations per hour).
pub const RETRY_MAX: Duration = Duration::from_secs(6 * 3600);
/// The local CA's leaf lifetime (renewed as any other, at two thirds).
pub const LOCAL_LIFETIME: Duration = Duration::from_secs(7 * 86_400);

/// When a certificate valid from `not_before` to `not_after` is renewed; `jitter` in
/// `[0, 1)` moves it up to a thirtieth of the lifetime earlier.
pub fn renew_at(not_before: SystemTime, not_after: SystemTime, jitter: f64) -> SystemTime {
    let lifetime = not_after
        .duration_since(not_before)
        .unwrap_or(Duration::ZERO);
    let early = lifetime / 3 + lifetime.mul_f64(jitter.clamp(0.0, 1.0) / 30.0);
    not_after.checked_sub(early).unwrap_or(not_before)
}

/// The wait after `failures` failed attempts in a row (1 after the first).
pub fn retry_after(failures: u32) -> Duration {
    let shift = failures.saturating_sub(1).min(20);
    RETRY_FIRST
        .checked_mul(1 << shift)
        .map_or(RETRY_MAX, |d| d.min(RETRY_MAX))
}

/// A uniform number in `[0, 1)` from the system's random source.
pub fn jitter() -> f64 {
    let mut b = [0u8; 4];
    if aws_lc_rs::rand::fill(&mut b).is_err() {
        return 0.0;
    }
    f64::from(u32::from_le_bytes(b)) / (f64::from(u32::MAX) + 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn renewal_comes_with_a_third_left_and_jitter_only_moves_it_earlier() {
        let day = 86_400;
        let t = |s: u64| UNIX_EPOCH + Duration::from_secs(s);
        let cases = [
            // (not_before, not_after, jitter, renew at)
            (t(0), t(90 * day), 0.0, t(60 * day)),
            (t(0), t(90 * day), 0.999_999, t(57 * day)),
            (t(100), t(130), 0.0, t(120)),
            (t(0), t(6 * day), 0.5, t(4 * day - day / 10)),
            // A certificate whose dates are reversed is renewed at once.
            (t(50), t(10), 0.0, t(10)),
        ];
        for (nb, na, j, want) in cases {
            let got = renew_at(nb, na, j);
            let diff = got.duration_since(want).unwrap_or_else(|e| e.duration());
            assert!(diff < Duration::from_secs(1), "{nb:?}..{na:?} {j}: {got:?}");
        }
    }

    #[test]
    fn failures_back_off_exponentially_up_to_the_cap() {
        let s = Duration::from_secs;
        let want = [
            (1, s(10)),
            (2, s(20)),
            (3, s(40)),
            (12, s(20_480)),
            (13, s(6 * 3600)),
            (u32::MAX, s(6 * 3600)),
        ];
        for (n, d) in want {
            assert_eq!(retry_after(n), d, "{n}");
        }
        for _ in 0..100 {
            let j = jitter();
            assert!((0.0..1.0).contains(&j));
        }
    }
}
