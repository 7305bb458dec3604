//! The common case of reading a response head, in one pass with no line search: every line
//! CRLF-ended, every field `token ":" value` with no byte out of its class. Each field line is
//! one token scan to its colon and one vector scan of its value to its CR, where the line by
//! line reader (`super::parse`) searches each line for its LF and its colon, then checks the
//! name and value in passes of their own.
//!
//! Owns only that case: it answers a head it read whole and found regular, and gives up
//! (`None`) on anything else — a byte out of class, a bare LF or CR, obs-fold, a framing field
//! that is wrong, a head not yet whole — for the line by line reader to judge from the start,
//! so every verdict but the regular one is still that reader's alone.
#![forbid(unsafe_code)]

use memchr::memchr;

use super::{Facts, FieldSpan, ResponseError, ResponseInfo, status_line};
use crate::chars;

/// A regular head at the start of `scan`, read whole: its info (or the framing error its
/// fields make once they are all read, which the line by line reader finds too), with every
/// field's spans appended to `fields`. `None`: not regular, or not whole; nothing is decided.
pub(super) fn parse(
    scan: &[u8],
    mut fields: Option<&mut Vec<FieldSpan>>,
    strict: bool,
) -> Option<Result<ResponseInfo, ResponseError>> {
    let lf = memchr(b'\n', scan)?;
    if lf == 0 || scan[lf - 1] != b'\r' {
        return None;
    }
    let (status, version) = status_line(&scan[..lf - 1]).ok()?;
    let mut facts = Facts {
        close: version == crate::head::Version::Http10,
        http10: version == crate::head::Version::Http10,
        ..Facts::default()
    };
    let mut at = lf + 1;
    loop {
        if scan.get(at..at + 2)? == b"\r\n" {
            let length = facts.length(status);
            return Some(length.map(|length| ResponseInfo {
                status,
                version,
                close: facts.close,
                length,
                head_len: at + 2,
            }));
        }
        let colon = chars::scan(scan, at, &chars::TCHAR);
        if colon == at || *scan.get(colon)? != b':' {
            return None;
        }
        let v0 = colon + 1;
        let end = v0 + chars::field_value_len(&scan[v0..]);
        if scan.get(end..end + 2)? != b"\r\n" {
            return None;
        }
        // OWS around the value (RFC 9112 §5.1); the bytes are of the value's class already.
        let (mut v, mut e) = (v0, end);
        while v < e && matches!(scan[v], b' ' | b'\t') {
            v += 1;
        }
        while e > v && matches!(scan[e - 1], b' ' | b'\t') {
            e -= 1;
        }
        let (name, value) = (&scan[at..colon], &scan[v..e]);
        facts.any_field = true;
        facts.field(name, value).ok()?;
        if strict && chars::token_eq_lower(name, b"transfer-encoding") {
            facts.strict_coding(value).ok()?;
        }
        if let Some(f) = fields.as_deref_mut() {
            f.push(FieldSpan {
                name: at..colon,
                value: v..e,
            });
        }
        at = end + 2;
    }
}
