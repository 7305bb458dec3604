//! The cached `Date` header value (RFC 9110 §6.6.1, IMF-fixdate).
//!
//! Owns formatting the date at most once per second. It is a plain value, one per worker
//! thread: no locks, no atomics, no `Sync` tricks. The caller supplies the clock.
#![forbid(unsafe_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const DATE_LEN: usize = 29;

/// A Date value refreshed when the second changes.
#[derive(Clone, Debug)]
pub struct DateCache {
    second: u64,
    value: [u8; DATE_LEN],
}

impl Default for DateCache {
    fn default() -> Self {
        DateCache::new(SystemTime::now())
    }
}

impl DateCache {
    /// A cache holding `now`.
    pub fn new(now: SystemTime) -> DateCache {
        let mut cache = DateCache {
            second: u64::MAX,
            value: [b' '; DATE_LEN],
        };
        cache.update(now);
        cache
    }

    /// Reformats if `now` is in a different second than the cached value; returns whether
    /// it changed.
    pub fn update(&mut self, now: SystemTime) -> bool {
        let second = now
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs();
        if second == self.second {
            return false;
        }
        self.second = second;
        let formatted = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(second));
        if formatted.len() == DATE_LEN {
            self.value.copy_from_slice(formatted.as_bytes());
        }
        true
    }

    /// The current value.
    pub fn get(&self) -> &[u8; DATE_LEN] {
        &self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_imf_fixdate_and_changes_only_with_the_second() {
        let t = UNIX_EPOCH + Duration::from_secs(784_111_777);
        let mut d = DateCache::new(t);
        assert_eq!(d.get(), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert!(!d.update(t + Duration::from_millis(999)));
        assert!(d.update(t + Duration::from_secs(1)));
        assert_eq!(d.get(), b"Sun, 06 Nov 1994 08:49:38 GMT");
    }
}
