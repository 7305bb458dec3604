//! Byte classes from the ABNF of RFC 9110 §5.6 and RFC 3986, as 256-entry lookup tables.
//!
//! Owns only classification; it knows nothing about lines or messages. Every table is built at
//! compile time so a lookup is one load, and the tables are the single place a byte class is
//! defined: the head parser, the chunked decoder and the server's header validation all use them.

/// Builds a `[bool; 256]` at compile time from a predicate written as a closure-like expression.
macro_rules! table {
    (|$b:ident| $e:expr) => {{
        let mut t = [false; 256];
        let mut i = 0;
        while i < 256 {
            let $b = i as u8;
            t[i] = $e;
            i += 1;
        }
        t
    }};
}

/// `tchar` (RFC 9110 §5.6.2): the bytes allowed in a token (method, field name, coding name).
pub(crate) static TCHAR: [bool; 256] = table!(|b| {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
});

/// Bytes allowed in a field value (RFC 9110 §5.5): VCHAR, obs-text, SP and HTAB.
/// Everything else — NUL, other controls, DEL, and CR/LF outside the line ending — is rejected.
pub(crate) static FIELD_VALUE: [bool; 256] = table!(|b| b == b'\t' || (b >= 0x20 && b != 0x7f));

/// Bytes allowed in a request-target (RFC 3986 §2: unreserved, sub-delims, gen-delims used by
/// origin-form and absolute-form, and `%` for pct-encoding). No fragment (`#`) and no bytes that
/// RFC 3986 excludes (`"`, `<`, `>`, `\`, `^`, backquote, `{`, `|`, `}`, space, controls, non-ASCII).
pub(crate) static TARGET: [bool; 256] = table!(|b| {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.' | b'_' | b'~' // unreserved
                | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=' // sub-delims
                | b':' | b'@' | b'/' | b'?' | b'[' | b']' | b'%'
        )
});

/// [`TARGET`] without `%` and `?`: the bytes a target scan passes without a second look.
pub(crate) static TARGET_PLAIN: [bool; 256] =
    table!(|b| TARGET[b as usize] && b != b'%' && b != b'?');

/// Bytes allowed in a Host field value (RFC 9110 §7.2: uri-host [":" port]).
pub(crate) static HOST: [bool; 256] = table!(|b| {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'%'
        )
});

/// Whether every byte of `s` is a tchar and `s` is non-empty.
#[inline]
pub(crate) fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| TCHAR[b as usize])
}

/// Whether every byte of `s` may appear in a field value.
#[inline]
pub(crate) fn is_field_value(s: &[u8]) -> bool {
    field_value_len(s) == s.len()
}

/// Length of the longest prefix of `s` made of field-value bytes: where a value scan stops
/// (at CR, LF, or an invalid byte). Eight bytes at a time while no byte needs a closer look.
#[inline]
pub(crate) fn field_value_len(s: &[u8]) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let mut i = 0;
    while let Some(c) = s.get(i..i + 8) {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let below_space = w.wrapping_sub(LO * 0x20) & !w & HI;
        let x = w ^ (LO * 0x7f);
        let is_del = x.wrapping_sub(LO) & !x & HI;
        if below_space | is_del != 0 {
            break;
        }
        i += 8;
    }
    while i < s.len() && FIELD_VALUE[s[i] as usize] {
        i += 1;
    }
    i
}

/// Strips optional whitespace (SP / HTAB, RFC 9110 §5.6.3) from both ends.
#[inline]
pub(crate) fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_value_matches_table_for_every_byte_in_every_lane() {
        for b in 0..=255u8 {
            for lane in 0..9 {
                let mut v = vec![b'a'; 9];
                v[lane] = b;
                assert_eq!(
                    is_field_value(&v),
                    FIELD_VALUE[b as usize],
                    "byte {b:#x} lane {lane}"
                );
            }
        }
    }

    #[test]
    fn field_value_len_stops_at_the_first_invalid_byte_in_every_lane() {
        for b in 0..=255u8 {
            for lane in 0..17 {
                let mut v = vec![b'a'; 17];
                v[lane] = b;
                let want = if FIELD_VALUE[b as usize] { 17 } else { lane };
                assert_eq!(field_value_len(&v), want, "byte {b:#x} lane {lane}");
            }
        }
    }

    #[test]
    fn trim_ows_strips_both_ends_only() {
        assert_eq!(trim_ows(b" \t a b\t "), b"a b");
        assert_eq!(trim_ows(b"   "), b"");
    }
}
