//! Field lists as the cache reads them: values by name (case-insensitive, every line), list
//! elements split outside quoted strings, HTTP dates, and the fields a cache never stores
//! (RFC 9111 §3.1). Works on any `(name, value)` pairs of bytes, borrowed or owned; no
//! allocation except where a value is copied for keeping.

use crate::Time;
use crate::shared::Shared;

/// One field as the caller hands it in: `(name, value)`, the value without its OWS.
pub type Field<'a> = (&'a [u8], &'a [u8]);

/// One field as the store keeps it: an entry's names and values share one block.
pub type OwnedField = (Shared, Shared);

/// Every value of the field `name` (ASCII case-insensitive), one per line, in order.
pub fn values<'f, N, V>(fields: &'f [(N, V)], name: &'f [u8]) -> impl Iterator<Item = &'f [u8]>
where
    N: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    fields
        .iter()
        .filter(move |(n, _)| n.as_ref().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_ref())
}

/// The first value of `name`, if any line has it.
pub fn first<'f, N, V>(fields: &'f [(N, V)], name: &[u8]) -> Option<&'f [u8]>
where
    N: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    fields
        .iter()
        .find(|(n, _)| n.as_ref().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_ref())
}

/// Whether any line carries `name`.
pub fn has<N: AsRef<[u8]>, V: AsRef<[u8]>>(fields: &[(N, V)], name: &[u8]) -> bool {
    fields
        .iter()
        .any(|(n, _)| n.as_ref().eq_ignore_ascii_case(name))
}

/// The elements of a comma-separated list value (RFC 9110 §5.6.1), OWS trimmed, empty ones
/// dropped; a comma inside a quoted string does not split.
pub fn elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = value;
    std::iter::from_fn(move || {
        loop {
            if rest.is_empty() {
                return None;
            }
            let end = element_end(rest);
            let element = trim(&rest[..end]);
            rest = if end < rest.len() {
                &rest[end + 1..]
            } else {
                &[]
            };
            if !element.is_empty() {
                return Some(element);
            }
        }
    })
}

/// Where the list element starting at `s[0]` ends: the index of the first comma outside a
/// quoted string, or `s.len()`.
pub(crate) fn element_end(s: &[u8]) -> usize {
    let mut quoted = false;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'\\' if quoted => i += 1,
            b'"' => quoted = !quoted,
            b',' if !quoted => return i,
            _ => {}
        }
        i += 1;
    }
    s.len()
}

/// `s` without leading and trailing OWS (SP, HTAB).
pub fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| !is_ows(*b)).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !is_ows(*b)).map_or(start, |e| e + 1);
    &s[start..end]
}

pub(crate) fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// A `tchar` (RFC 9110 §5.6.2): one load from a table made at compile time (the list's
/// scan cost ~15 compares for every `-` of a directive's name).
pub(crate) fn is_tchar(b: u8) -> bool {
    TCHAR[usize::from(b)]
}

const TCHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric();
        i += 1;
    }
    let others = b"!#$%&'*+-.^_`|~";
    let mut j = 0;
    while j < others.len() {
        t[others[j] as usize] = true;
        j += 1;
    }
    t
};

/// An HTTP date (RFC 9110 §5.6.7: IMF-fixdate, and the obsolete RFC 850 and asctime forms a
/// recipient must read), as seconds since the Unix epoch; `None` when it is none of them
/// (see [`crate::date`]).
pub fn parse_date(value: &[u8]) -> Option<Time> {
    crate::date::parse(trim(value))
}

/// Hop-by-hop fields a cache must not store or take from a 304 (RFC 9111 §3.1, RFC 9110
/// §7.6.1), and the proxy-specific ones it may drop (RFC 9111 §3.1: Proxy-Authenticate,
/// Proxy-Authentication-Info, Proxy-Authorization; Proxy-Connection is the obsolete
/// Connection). Names are lower case.
pub const NOT_STORED: &[&[u8]] = &[
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"te",
    b"transfer-encoding",
    b"upgrade",
    b"proxy-authenticate",
    b"proxy-authentication-info",
    b"proxy-authorization",
];

/// Whether the field `name` must be left out of what is stored from `fields`: a hop-by-hop
/// field, or one the Connection field names (RFC 9110 §7.6.1).
pub fn is_not_stored<N: AsRef<[u8]>, V: AsRef<[u8]>>(fields: &[(N, V)], name: &[u8]) -> bool {
    NOT_STORED.iter().any(|n| n.eq_ignore_ascii_case(name))
        || values(fields, b"connection")
            .flat_map(elements)
            .any(|n| n.eq_ignore_ascii_case(name))
}

/// The fields of `fields` that a cache keeps (RFC 9111 §3.1), owned: their bytes copied into
/// one block ([`Shared`]), not one allocation each.
pub fn to_stored<N: AsRef<[u8]>, V: AsRef<[u8]>>(fields: &[(N, V)]) -> Vec<OwnedField> {
    // Sized for every field: those left out are few, and the block is sized once.
    let size = fields
        .iter()
        .map(|(n, v)| n.as_ref().len() + v.as_ref().len())
        .sum();
    let mut bytes = Vec::with_capacity(size);
    let mut spans = Vec::with_capacity(fields.len());
    for (n, v) in fields {
        let (n, v) = (n.as_ref(), v.as_ref());
        if is_not_stored(fields, n) {
            continue;
        }
        let name = bytes.len()..bytes.len() + n.len();
        bytes.extend_from_slice(n);
        let value = bytes.len()..bytes.len() + v.len();
        bytes.extend_from_slice(v);
        spans.push((name, value));
    }
    let block = Shared::new(bytes);
    spans
        .into_iter()
        .map(|(n, v)| (block.slice(n), block.slice(v)))
        .collect()
}

/// `n` in decimal, written at the end of `buf` (without `fmt`'s machinery: a hit's port and
/// Cache-Status numbers are written on every request).
pub(crate) fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_split_outside_quotes_and_drop_empty_ones() {
        // RFC 9110 §5.6.1: empty list elements are allowed and ignored.
        let got: Vec<&[u8]> = elements(b" a , ,b=\"x,y\" ,, c ").collect();
        assert_eq!(got, [&b"a"[..], b"b=\"x,y\"", b"c"]);
        let got: Vec<&[u8]> = elements(b"\"a\\\",b\", c").collect();
        assert_eq!(got, [&b"\"a\\\",b\""[..], b"c"]);
        assert_eq!(elements(b" , ").count(), 0);
    }

    #[test]
    fn dates_in_all_three_forms() {
        // RFC 9110 §5.6.7: the same instant in IMF-fixdate, RFC 850 and asctime.
        let t = Some(Time(784_111_777));
        assert_eq!(parse_date(b"Sun, 06 Nov 1994 08:49:37 GMT"), t);
        assert_eq!(parse_date(b"Sunday, 06-Nov-94 08:49:37 GMT"), t);
        assert_eq!(parse_date(b"Sun Nov  6 08:49:37 1994"), t);
        assert_eq!(parse_date(b"0"), None);
        assert_eq!(parse_date(b"\xff"), None);
    }

    #[test]
    fn hop_by_hop_and_connection_named_fields_are_not_stored() {
        // RFC 9111 §3.1 / RFC 9110 §7.6.1.
        let fields: [Field; 4] = [
            (b"Connection", b"close, X-Hop"),
            (b"x-hop", b"1"),
            (b"Keep-Alive", b"timeout=5"),
            (b"ETag", b"\"a\""),
        ];
        let kept = to_stored(&fields);
        assert_eq!(kept.len(), 1);
        assert_eq!(&*kept[0].0, b"ETag");
    }

    #[test]
    fn tchar_is_rfc_9110s_set_for_every_byte() {
        // RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "."
        //   / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
        for b in 0..=255u8 {
            let spec =
                b.is_ascii_digit() || b.is_ascii_alphabetic() || b"!#$%&'*+-.^_`|~".contains(&b);
            assert_eq!(is_tchar(b), spec, "byte {b:#04x}");
        }
    }

    #[test]
    fn stored_fields_share_one_block_and_keep_their_order() {
        let fields: &[Field] = &[
            (b"Connection", b"x-hop"),
            (b"Content-Type", b"text/plain"),
            (b"X-Hop", b"1"),
            (b"ETag", b"\"v1\""),
            (b"Keep-Alive", b"timeout=5"),
        ];
        let kept = to_stored(fields);
        let back: Vec<(&[u8], &[u8])> = kept.iter().map(|(n, v)| (&n[..], &v[..])).collect();
        assert_eq!(
            back,
            [
                (&b"Content-Type"[..], &b"text/plain"[..]),
                (&b"ETag"[..], &b"\"v1\""[..])
            ]
        );
        assert!(to_stored::<&[u8], &[u8]>(&[]).is_empty());
    }
}
