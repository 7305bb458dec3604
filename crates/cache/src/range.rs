//! Ranges served from a stored whole (RFC 9110 §14): one byte range of a `Range: bytes=…`
//! request against a stored 200's length — the part to send with its Content-Range, a 416,
//! or the whole when the field is absent, malformed, names another unit or several ranges
//! (§14.2 lets a server ignore Range). Partial responses are never stored.

use crate::fields::{Field, trim, values};

/// How to answer a GET's Range from a stored 200 of `len` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeAnswer {
    /// 200 with the whole body.
    Whole,
    /// 206 with bytes `start..=end` and `Content-Range: bytes start-end/len` (§14.4).
    Part { start: u64, end: u64 },
    /// 416 with `Content-Range: bytes */len` (§15.5.17): no byte of the range exists.
    Unsatisfiable,
}

impl RangeAnswer {
    /// The Content-Range value for a 206 or 416 answer on a body of `len` bytes.
    pub fn content_range(&self, len: u64) -> Option<String> {
        match *self {
            RangeAnswer::Whole => None,
            RangeAnswer::Part { start, end } => Some(format!("bytes {start}-{end}/{len}")),
            RangeAnswer::Unsatisfiable => Some(format!("bytes */{len}")),
        }
    }
}

/// The answer to `request`'s Range for a stored 200 of `len` bytes.
pub fn range(request: &[Field<'_>], status: u16, len: u64) -> RangeAnswer {
    let mut lines = values(request, b"range");
    let (Some(line), None) = (lines.next(), lines.next()) else {
        return RangeAnswer::Whole;
    };
    if status != 200 {
        return RangeAnswer::Whole;
    }
    let line = trim(line);
    let Some(eq) = line.iter().position(|b| *b == b'=') else {
        return RangeAnswer::Whole;
    };
    if !line[..eq].eq_ignore_ascii_case(b"bytes") {
        return RangeAnswer::Whole;
    }
    let spec = trim(&line[eq + 1..]);
    if spec.contains(&b',') {
        return RangeAnswer::Whole;
    }
    let Some(dash) = spec.iter().position(|b| *b == b'-') else {
        return RangeAnswer::Whole;
    };
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    let number = |s: &[u8]| -> Option<u64> {
        if s.is_empty() || s.len() > 19 || !s.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(s).ok()?.parse().ok()
    };
    match (first.is_empty(), number(first), number(last)) {
        // suffix-range: the last N bytes (§14.1.2).
        (true, _, Some(0)) => RangeAnswer::Unsatisfiable,
        (true, _, Some(_)) if len == 0 => RangeAnswer::Unsatisfiable,
        (true, _, Some(n)) => RangeAnswer::Part {
            start: len.saturating_sub(n),
            end: len - 1,
        },
        (false, Some(start), None) if last.is_empty() => {
            if start >= len {
                RangeAnswer::Unsatisfiable
            } else {
                RangeAnswer::Part {
                    start,
                    end: len - 1,
                }
            }
        }
        (false, Some(start), Some(end)) if start <= end => {
            if start >= len {
                RangeAnswer::Unsatisfiable
            } else {
                RangeAnswer::Part {
                    start,
                    end: end.min(len - 1),
                }
            }
        }
        // first > last, or not numbers: invalid, ignored (§14.1.2, §14.2).
        _ => RangeAnswer::Whole,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RangeAnswer::*;

    #[test]
    fn range_table() {
        let rows: &[(&[Field], u64, RangeAnswer, &str)] = &[
            (&[], 100, Whole, "no Range"),
            (
                &[(b"Range", b"bytes=0-9")],
                100,
                Part { start: 0, end: 9 },
                "RFC 9110 §14.1.2: first-last",
            ),
            (
                &[(b"Range", b"bytes=90-")],
                100,
                Part { start: 90, end: 99 },
                "§14.1.2: first-",
            ),
            (
                &[(b"Range", b"bytes=-10")],
                100,
                Part { start: 90, end: 99 },
                "§14.1.2: suffix",
            ),
            (
                &[(b"Range", b"bytes=-1000")],
                100,
                Part { start: 0, end: 99 },
                "§14.1.2: suffix longer than the body",
            ),
            (
                &[(b"Range", b"bytes=50-1000")],
                100,
                Part { start: 50, end: 99 },
                "§14.1.2: last past the end",
            ),
            (
                &[(b"Range", b"BYTES=0-0")],
                100,
                Part { start: 0, end: 0 },
                "§14.1: unit case-insensitive",
            ),
            (
                &[(b"Range", b"bytes=100-")],
                100,
                Unsatisfiable,
                "§14.1.2: first past the end",
            ),
            (
                &[(b"Range", b"bytes=-0")],
                100,
                Unsatisfiable,
                "§14.1.2: empty suffix",
            ),
            (
                &[(b"Range", b"bytes=-5")],
                0,
                Unsatisfiable,
                "§14.1.2: an empty body",
            ),
            (
                &[(b"Range", b"bytes=9-0")],
                100,
                Whole,
                "§14.1.2: first > last is invalid, ignored",
            ),
            (
                &[(b"Range", b"bytes=0-1,5-6")],
                100,
                Whole,
                "§14.2: several ranges may be ignored",
            ),
            (
                &[(b"Range", b"items=0-1")],
                100,
                Whole,
                "§14.2: another unit",
            ),
            (&[(b"Range", b"bytes=a-b")], 100, Whole, "invalid"),
            (
                &[(b"Range", b"bytes=99999999999999999999-")],
                100,
                Whole,
                "not a u64: invalid",
            ),
            (
                &[(b"Range", b"bytes=0-1"), (b"Range", b"bytes=2-3")],
                100,
                Whole,
                "two fields",
            ),
        ];
        for (req, len, want, rule) in rows {
            assert_eq!(range(req, 200, *len), *want, "{req:?} of {len} ({rule})");
        }
        assert_eq!(
            range(&[(b"Range", b"bytes=0-9")], 404, 100),
            Whole,
            "only a 200 is split"
        );
        assert_eq!(
            Part { start: 0, end: 9 }.content_range(100).as_deref(),
            Some("bytes 0-9/100")
        );
        assert_eq!(
            Unsatisfiable.content_range(100).as_deref(),
            Some("bytes */100")
        );
    }
}
