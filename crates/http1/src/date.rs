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
        self.value = fmt_http_date(second);
        true
    }

    /// The current value.
    pub fn get(&self) -> &[u8; DATE_LEN] {
        &self.value
    }
}

/// Formats an IMF-fixdate (RFC 9110 §5.6.7), e.g. `Fri, 20 Nov 2026 12:00:00 GMT`: the one
/// Date formatter of the workspace (the server's Date and Last-Modified, the floor's canned
/// answers).
pub fn fmt_http_date(secs: u64) -> [u8; DATE_LEN] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    put2(&mut out[5..7], day);
    out[8..11].copy_from_slice(MONTHS[(month - 1) as usize]);
    put2(&mut out[12..14], year / 100 % 100);
    put2(&mut out[14..16], year % 100);
    put2(&mut out[17..19], rem / 3600);
    put2(&mut out[20..22], rem / 60 % 60);
    put2(&mut out[23..25], rem % 60);
    out
}

fn put2(out: &mut [u8], v: u64) {
    out[0] = b'0' + (v / 10 % 10) as u8;
    out[1] = b'0' + (v % 10) as u8;
}

/// Days since 1970-01-01 to (year, month 1..=12, day 1..=31): Howard Hinnant's
/// `civil_from_days`, restricted to dates after the epoch. The workspace's one calendar
/// conversion (the lab's report timestamps use it too).
pub fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
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

    #[test]
    fn http_date_matches_imf_fixdate() {
        // Expected strings from Python's email.utils.formatdate(usegmt=True).
        let rows: [(u64, &str); 4] = [
            (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
            (951_868_799, "Tue, 29 Feb 2000 23:59:59 GMT"),
            (1_795_176_000, "Fri, 20 Nov 2026 12:00:00 GMT"),
            (4_107_542_400, "Mon, 01 Mar 2100 00:00:00 GMT"),
        ];
        for (secs, want) in rows {
            assert_eq!(std::str::from_utf8(&fmt_http_date(secs)).unwrap(), want);
        }
    }

    #[test]
    fn matches_the_httpdate_crate_over_four_centuries() {
        // Every 997th day from 1970 to 2400, at a time of day that walks the clock.
        for day in (0..157_000u64).step_by(997) {
            let secs = day * 86_400 + (day * 7_919) % 86_400;
            let want = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs));
            assert_eq!(
                std::str::from_utf8(&fmt_http_date(secs)).unwrap(),
                want,
                "{secs}"
            );
        }
    }
}
