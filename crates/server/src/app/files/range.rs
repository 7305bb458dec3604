//! The Range header for one file (RFC 9110 §14): which bytes to send.
//!
//! Owns parsing `bytes=` range sets and clipping them to the representation's size. Only a
//! single range is honoured; a set of two or more ranges is answered with the whole file
//! (RFC 9110 §14.2 lets a server ignore Range), which spares a multipart/byteranges body.
#![forbid(unsafe_code)]

/// What to send for a Range value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeAnswer {
    /// Ignore the Range header: 200 with the whole representation.
    Full,
    /// 206 with `len` bytes from `offset` (`len >= 1`, within the size).
    Partial { offset: u64, len: u64 },
    /// 416 with `Content-Range: bytes */size`.
    Unsatisfiable,
}

/// Evaluates a Range field value against a representation of `size` bytes.
///
/// Syntax errors, other units and multi-range sets give [`RangeAnswer::Full`]; a zero-length
/// representation is always sent whole (RFC 9110 §14.1.1: no int-range can be satisfied and
/// a 416 would say nothing useful).
pub fn evaluate(value: &[u8], size: u64) -> RangeAnswer {
    let Some(set) = strip_unit(value) else {
        return RangeAnswer::Full;
    };
    let mut specs = set
        .split(|&b| b == b',')
        .map(trim)
        .filter(|s| !s.is_empty());
    let (Some(spec), None) = (specs.next(), specs.next()) else {
        return RangeAnswer::Full;
    };
    if size == 0 {
        return RangeAnswer::Full;
    }
    let Some(dash) = spec.iter().position(|&b| b == b'-') else {
        return RangeAnswer::Full;
    };
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    if first.is_empty() {
        // RFC 9110 §14.1.2: `suffix-range = "-" suffix-length`.
        let Some(n) = digits(last) else {
            return RangeAnswer::Full;
        };
        if n == 0 {
            return RangeAnswer::Unsatisfiable;
        }
        let len = n.min(size);
        return RangeAnswer::Partial {
            offset: size - len,
            len,
        };
    }
    // RFC 9110 §14.1.2: `int-range = first-pos "-" [ last-pos ]`.
    let Some(first) = digits(first) else {
        return RangeAnswer::Full;
    };
    let last = if last.is_empty() {
        u64::MAX
    } else {
        match digits(last) {
            // last-pos < first-pos makes the range invalid, so the field is ignored.
            Some(last) if last >= first => last,
            _ => return RangeAnswer::Full,
        }
    };
    if first >= size {
        return RangeAnswer::Unsatisfiable;
    }
    let last = last.min(size - 1);
    RangeAnswer::Partial {
        offset: first,
        len: last - first + 1,
    }
}

/// `bytes=` (the unit is case-insensitive, RFC 9110 §14.1); `None` for any other unit.
fn strip_unit(value: &[u8]) -> Option<&[u8]> {
    let (unit, rest) = value.split_first_chunk::<6>()?;
    unit.eq_ignore_ascii_case(b"bytes=").then_some(rest)
}

/// `1*DIGIT`, saturating: a position past u64::MAX is past any file.
fn digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|&c| c != b' ' && c != b'\t');
    let end = b.iter().rposition(|&c| c != b' ' && c != b'\t');
    match (start, end) {
        (Some(s), Some(e)) => &b[s..=e],
        _ => &[],
    }
}

/// The Content-Range value for a 206 (RFC 9110 §14.4).
pub fn content_range(offset: u64, len: u64, size: u64) -> String {
    format!("bytes {}-{}/{}", offset, offset + len - 1, size)
}

/// The Content-Range value for a 416 (RFC 9110 §14.4: `unsatisfied-range`).
pub fn unsatisfied_range(size: u64) -> String {
    format!("bytes */{size}")
}

#[cfg(test)]
mod tests {
    use super::RangeAnswer::{Full, Partial, Unsatisfiable};
    use super::*;

    fn part(offset: u64, len: u64) -> RangeAnswer {
        Partial { offset, len }
    }

    #[test]
    fn evaluate_table() {
        // Size 1000 unless stated.
        let rows: &[(&str, u64, RangeAnswer)] = &[
            // RFC 9110 §14.1.2: int-range, inclusive positions.
            ("bytes=0-0", 1000, part(0, 1)),
            ("bytes=0-499", 1000, part(0, 500)),
            ("bytes=500-999", 1000, part(500, 500)),
            // last-pos past the end is clipped.
            ("bytes=500-5000", 1000, part(500, 500)),
            ("bytes=999-", 1000, part(999, 1)),
            ("bytes=0-", 1000, part(0, 1000)),
            // Suffix ranges.
            ("bytes=-1", 1000, part(999, 1)),
            ("bytes=-500", 1000, part(500, 500)),
            ("bytes=-5000", 1000, part(0, 1000)),
            ("bytes=-0", 1000, Unsatisfiable),
            // RFC 9110 §14.1.1: first-pos at or past the end is unsatisfiable.
            ("bytes=1000-", 1000, Unsatisfiable),
            ("bytes=1000-2000", 1000, Unsatisfiable),
            ("bytes=99999999999999999999999-", 1000, Unsatisfiable),
            ("bytes=0-99999999999999999999999", 1000, part(0, 1000)),
            // The unit is case-insensitive; OWS around list elements.
            ("BYTES=0-1", 1000, part(0, 2)),
            ("bytes= 0-1 ", 1000, part(0, 2)),
            ("bytes=0-1,", 1000, part(0, 2)),
            // Invalid: ignored (200).
            ("bytes=5-4", 1000, Full),
            ("bytes=", 1000, Full),
            ("bytes=-", 1000, Full),
            ("bytes=a-b", 1000, Full),
            ("bytes=+1-2", 1000, Full),
            ("bytes=1 - 2", 1000, Full),
            ("bytes=1", 1000, Full),
            ("items=0-1", 1000, Full),
            ("bytes 0-1", 1000, Full),
            ("", 1000, Full),
            // Multi-range sets: the whole file (documented choice).
            ("bytes=0-1,5-6", 1000, Full),
            ("bytes=0-1, -1", 1000, Full),
            ("bytes=2000-,3000-", 1000, Full),
            // Zero-length representation: sent whole.
            ("bytes=0-", 0, Full),
            ("bytes=-1", 0, Full),
        ];
        for &(value, size, want) in rows {
            assert_eq!(evaluate(value.as_bytes(), size), want, "{value} / {size}");
        }
    }

    #[test]
    fn content_range_values() {
        assert_eq!(content_range(0, 1, 1000), "bytes 0-0/1000");
        assert_eq!(content_range(500, 500, 1000), "bytes 500-999/1000");
        assert_eq!(unsatisfied_range(1000), "bytes */1000");
    }
}
