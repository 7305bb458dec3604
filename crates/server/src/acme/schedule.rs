//! When a managed certificate is renewed, and when a failed attempt is tried again.
//!
//! Owns the arithmetic only (times in, times out), so it is tested by table: renewal when a
//! third of the lifetime is left (Let's Encrypt's and caddy's advice), up to a thirtieth of
//! the lifetime earlier at random so that many servers started together do not ask the CA
//! at once; failures back off exponentially from [`RETRY_FIRST`] to [`RETRY_MAX`].
//!
//! Where the CA publishes renewal information (ARI, RFC 9773), its suggested window can
//! bring a renewal forward (a revoked certificate gets a window that has already begun): a
//! uniform point in the window ([`in_window`]), asked about again after the CA's
//! Retry-After held between [`RENEWAL_INFO_MIN`] and [`RENEWAL_INFO_MAX`].
#![forbid(unsafe_code)]

use std::time::{Duration, SystemTime};

/// The wait after a first failed attempt (CA down, validation failed).
pub const RETRY_FIRST: Duration = Duration::from_secs(10);
/// The longest wait between attempts (Let's Encrypt counts failed validations per hour).
pub const RETRY_MAX: Duration = Duration::from_secs(6 * 3600);
/// The local CA's leaf lifetime (renewed as any other, at two thirds).
pub const LOCAL_LIFETIME: Duration = Duration::from_secs(7 * 86_400);

/// The shortest wait between two questions about one certificate's renewal window, and
/// the longest (RFC 9773 §4.3.2's example limits on the CA's Retry-After).
pub const RENEWAL_INFO_MIN: Duration = Duration::from_secs(60);
pub const RENEWAL_INFO_MAX: Duration = Duration::from_secs(86_400);

/// When a certificate valid from `not_before` to `not_after` is renewed; `jitter` in
/// `[0, 1)` moves it up to a thirtieth of the lifetime earlier.
pub fn renew_at(not_before: SystemTime, not_after: SystemTime, jitter: f64) -> SystemTime {
    let lifetime = not_after
        .duration_since(not_before)
        .unwrap_or(Duration::ZERO);
    let early = lifetime / 3 + lifetime.mul_f64(jitter.clamp(0.0, 1.0) / 30.0);
    not_after.checked_sub(early).unwrap_or(not_before)
}

/// The renewal time within the CA's suggested window `[start, end]`: `jitter` in `[0, 1)`
/// picks the point uniformly (RFC 9773 §4.2); a window whose end precedes its start is its
/// start.
pub fn in_window(start: SystemTime, end: SystemTime, jitter: f64) -> SystemTime {
    let width = end.duration_since(start).unwrap_or(Duration::ZERO);
    start + width.mul_f64(jitter.clamp(0.0, 1.0))
}

/// The wait before the renewal window is asked about again: the CA's `retry_after`, held
/// between [`RENEWAL_INFO_MIN`] and [`RENEWAL_INFO_MAX`].
pub fn renewal_info_again(retry_after: Duration) -> Duration {
    retry_after.clamp(RENEWAL_INFO_MIN, RENEWAL_INFO_MAX)
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
    fn the_ca_window_gives_a_uniform_point_and_its_retry_after_is_held_in_bounds() {
        let t = |s: u64| UNIX_EPOCH + Duration::from_secs(s);
        let cases = [
            // (start, end, jitter, renew at)
            (t(1000), t(2000), 0.0, t(1000)),
            (t(1000), t(2000), 0.5, t(1500)),
            (t(1000), t(2000), 0.999, t(1999)),
            (t(1000), t(1000), 0.7, t(1000)),
            // Reversed: its start.
            (t(2000), t(1000), 0.5, t(2000)),
        ];
        for (start, end, j, want) in cases {
            let got = in_window(start, end, j);
            let diff = got.duration_since(want).unwrap_or_else(|e| e.duration());
            assert!(
                diff < Duration::from_secs(1),
                "{start:?}..{end:?} {j}: {got:?}"
            );
        }
        let s = Duration::from_secs;
        for (asked, want) in [
            (s(0), s(60)),
            (s(59), s(60)),
            (s(6 * 3600), s(6 * 3600)),
            (s(86_400), s(86_400)),
            (s(30 * 86_400), s(86_400)),
        ] {
            assert_eq!(renewal_info_again(asked), want, "{asked:?}");
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
