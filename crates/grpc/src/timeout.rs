//! `grpc-timeout` (PROTOCOL-HTTP2.md: `Timeout → "grpc-timeout" TimeoutValue TimeoutUnit`,
//! at most 8 digits and one of H M S m u n): read into a `Duration`, and written with the
//! finest unit whose value fits in 8 digits. Values only; the deadline's clock is the caller's.

use std::fmt;
use std::time::Duration;

use crate::code::Code;

/// The most digits a `TimeoutValue` has (PROTOCOL-HTTP2.md: "positive integer as ASCII
/// string of at most 8 digits").
pub const MAX_DIGITS: usize = 8;

/// The largest `TimeoutValue`.
const MAX_VALUE: u64 = 99_999_999;

/// A `grpc-timeout` value this side cannot read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutError {
    /// Not 1 to 8 ASCII digits followed by one unit letter.
    Malformed,
}

impl TimeoutError {
    /// INTERNAL: grpc-go's server ends the call with `codes.Internal, "malformed
    /// grpc-timeout"` (internal/transport/http2_server.go, handler_server.go); the spec does
    /// not say.
    pub const fn code(self) -> Code {
        Code::Internal
    }
}

impl fmt::Display for TimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("malformed grpc-timeout")
    }
}

impl std::error::Error for TimeoutError {}

/// Reads a `grpc-timeout` value. "0n" and other zero values are read (grpc-go does: a call
/// whose deadline has passed already); a sign, a space, a 9th digit or an unknown unit is
/// [`TimeoutError::Malformed`].
pub fn parse(value: &[u8]) -> Result<Duration, TimeoutError> {
    let Some((&unit, digits)) = value.split_last() else {
        return Err(TimeoutError::Malformed);
    };
    if digits.is_empty() || digits.len() > MAX_DIGITS || !digits.iter().all(u8::is_ascii_digit) {
        return Err(TimeoutError::Malformed);
    }
    let n = digits
        .iter()
        .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
    Ok(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return Err(TimeoutError::Malformed),
    })
}

/// A formatted `grpc-timeout` value: up to 8 digits and a unit, on the stack.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Timeout {
    buf: [u8; MAX_DIGITS + 1],
    len: u8,
}

impl Timeout {
    /// The value's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }

    /// The value as text.
    pub fn as_str(&self) -> &str {
        // Digits and a unit letter only, all ASCII.
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }
}

impl fmt::Debug for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Writes `d` with the finest unit whose value fits in 8 digits, rounded up so that the
/// peer's deadline is never earlier than ours (as grpc-go's encodeTimeout). Past 99,999,999
/// hours it is clamped to that.
pub fn format(d: Duration) -> Timeout {
    let nanos = d.as_nanos();
    const UNITS: [(u128, u8); 6] = [
        (1, b'n'),
        (1_000, b'u'),
        (1_000_000, b'm'),
        (1_000_000_000, b'S'),
        (60_000_000_000, b'M'),
        (3_600_000_000_000, b'H'),
    ];
    let (value, unit) = UNITS
        .iter()
        .map(|&(size, unit)| (nanos.div_ceil(size), unit))
        .find(|&(v, _)| v <= u128::from(MAX_VALUE))
        .unwrap_or((u128::from(MAX_VALUE), b'H'));
    let mut buf = [0u8; MAX_DIGITS + 1];
    let mut digits = [0u8; MAX_DIGITS];
    let mut v = value as u64;
    let mut n = 0;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..n {
        buf[i] = digits[n - 1 - i];
    }
    buf[n] = unit;
    Timeout {
        buf,
        len: (n + 1) as u8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_table() {
        // PROTOCOL-HTTP2.md: TimeoutValue → {positive integer as ASCII string of at most 8
        // digits}; TimeoutUnit → Hour / Minute / Second / Millisecond / Microsecond /
        // Nanosecond = "H" / "M" / "S" / "m" / "u" / "n".
        let ok: &[(&[u8], Duration)] = &[
            (b"1H", Duration::from_secs(3600)),
            (b"2M", Duration::from_secs(120)),
            (b"3S", Duration::from_secs(3)),
            (b"250m", Duration::from_millis(250)),
            (b"7u", Duration::from_micros(7)),
            (b"99999999n", Duration::from_nanos(99_999_999)),
            (b"99999999H", Duration::from_secs(99_999_999 * 3600)),
            (b"00000001S", Duration::from_secs(1)),
            (b"0n", Duration::ZERO),
        ];
        for &(value, want) in ok {
            assert_eq!(
                parse(value),
                Ok(want),
                "{:?}",
                String::from_utf8_lossy(value)
            );
        }
        let bad: &[&[u8]] = &[
            b"",
            b"S",
            b"1",
            b"123456789S",
            b"1s",
            b"1h",
            b"1x",
            b"-1S",
            b"+1S",
            b" 1S",
            b"1S ",
            b"1.5S",
            b"1 S",
            b"\xff\xffS",
        ];
        for &value in bad {
            assert_eq!(parse(value), Err(TimeoutError::Malformed), "{:?}", value);
        }
        assert_eq!(TimeoutError::Malformed.code(), Code::Internal);
    }

    #[test]
    fn format_table() {
        // The finest unit that fits 8 digits, rounded up (grpc-go encodeTimeout).
        let table = [
            (Duration::ZERO, "0n"),
            (Duration::from_nanos(1), "1n"),
            (Duration::from_nanos(99_999_999), "99999999n"),
            (Duration::from_nanos(100_000_000), "100000u"),
            (Duration::from_nanos(100_000_001), "100001u"),
            (Duration::from_secs(1), "1000000u"),
            (Duration::from_secs(100), "100000m"),
            (Duration::from_secs(100_000), "100000S"),
            (Duration::from_secs(100_000_000), "1666667M"),
            (Duration::from_secs(99_999_999 * 60 + 1), "1666667H"),
            (Duration::from_secs(99_999_999 * 3600), "99999999H"),
            (Duration::MAX, "99999999H"),
        ];
        for (d, want) in table {
            let got = format(d);
            assert_eq!(got.as_str(), want, "{d:?}");
            assert!(
                parse(got.as_bytes()).unwrap() >= d.min(Duration::from_secs(99_999_999 * 3600))
            );
        }
    }
}
