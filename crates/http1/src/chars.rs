//! Byte classes from the ABNF of RFC 9110 §5.6 and RFC 3986, as 256-entry lookup tables.
//!
//! Owns only classification; it knows nothing about lines or messages. Every table is built at
//! compile time so a lookup is one load, and the tables are the single place a byte class is
//! defined: the head parser, the chunked decoder and the server's header validation all use them.
//! The nibble tables of a [`Class`] (for the vector scans in `simd.rs`) are derived from them at
//! compile time, and the byte-at-a-time scans here are the reference those scans are tested
//! against.
#![forbid(unsafe_code)]

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

/// Bytes allowed in a request-target's path and query: RFC 3986 §2's (unreserved,
/// sub-delims, the gen-delims of origin-form and absolute-form, `%`), and the bytes the WHATWG
/// URL Standard's percent-encode sets leave unencoded, so that every browser sends them raw
/// (§1.3: `^`, backquote, `{`, `|`, `}` in paths and queries) and nginx, h2o and caddy accept:
/// a URL a browser can load is not refused. Still refused: controls, DEL, SP, `"`, `<`, `>`,
/// `#` (a fragment never travels), non-ASCII (browsers percent-encode all of these), and `\`
/// outside the query (the parser's own rule: browsers turn it into `/` in paths, and a path
/// with one is a traversal attempt on some file systems). docs/conformance.md lists them.
pub(crate) static TARGET: [bool; 256] = table!(|b| {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.' | b'_' | b'~' // unreserved
                | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=' // sub-delims
                | b':' | b'@' | b'/' | b'?' | b'[' | b']' | b'%'
                | b'^' | b'`' | b'{' | b'|' | b'}' // WHATWG: left unencoded by browsers
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
/// (at CR, LF, or an invalid byte). Sixteen bytes at a time with SSE2 on x86_64
/// ([`crate::simd`]), then eight at a time: a word flags the bytes below SP and DEL; its
/// lowest flag is exact, and only a flagged HTAB (allowed) makes the scan go on.
#[inline]
pub(crate) fn field_value_len(s: &[u8]) -> usize {
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    while let Some(c) = s.get(i..i + 16) {
        let stops = crate::simd::value_stops(c.try_into().unwrap());
        if stops != 0 {
            return i + stops.trailing_zeros() as usize;
        }
        i += 16;
    }
    while let Some(c) = s.get(i..i + 8) {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let below_space = w.wrapping_sub(LO * 0x20) & !w & HI;
        let x = w ^ (LO * 0x7f);
        let is_del = x.wrapping_sub(LO) & !x & HI;
        let flagged = below_space | is_del;
        if flagged != 0 {
            let k = i + (flagged.trailing_zeros() / 8) as usize;
            if s[k] != b'\t' {
                return k;
            }
            i = k + 1;
            continue;
        }
        i += 8;
    }
    while i < s.len() && FIELD_VALUE[s[i] as usize] {
        i += 1;
    }
    i
}

/// Index of the first byte at or after `i` that is not in `class` (or `s.len()`).
///
/// A byte loop unrolled by eight: one bounds check per eight bytes, then a load, a table load
/// and a branch per byte. Measured with callgrind (`examples/parse_count.rs`) against the plain
/// byte loop, against joining eight table loads with AND before finding the stop byte-wise,
/// and against packing the eight class bits into a word for `trailing_zeros`: the short runs
/// of a request head (methods, names, hosts) stop inside their first eight bytes, where this
/// does the least work.
#[inline(always)]
pub(crate) fn scan(s: &[u8], mut i: usize, class: &[bool; 256]) -> usize {
    while let Some(c) = s.get(i..i + 8) {
        for (k, &b) in c.iter().enumerate() {
            if !class[b as usize] {
                return i + k;
            }
        }
        i += 8;
    }
    while i < s.len() && class[s[i] as usize] {
        i += 1;
    }
    i
}

/// A byte class in the two forms scans use: its 256-entry table, and nibble tables for a
/// sixteen-byte vector lookup (`crate::simd`). Byte `b` is in the class exactly when
/// `lo[b & 15] & hi[b >> 4] != 0`: `hi[k]` is bit `k` for the eight ASCII rows and 0 above,
/// and bit `k` of `lo[l]` says whether `16k + l` is in the class. Only classes without
/// non-ASCII bytes have this form; [`Class::new`] refuses others at compile time.
pub(crate) struct Class {
    pub(crate) table: &'static [bool; 256],
    pub(crate) lo: [u8; 16],
    pub(crate) hi: [u8; 16],
}

impl Class {
    const fn new(table: &'static [bool; 256]) -> Class {
        let mut lo = [0u8; 16];
        let mut hi = [0u8; 16];
        let mut b = 0;
        while b < 256 {
            if table[b] {
                assert!(b < 0x80, "a vector class holds ASCII bytes only");
                lo[b & 15] |= 1 << (b >> 4);
            }
            b += 1;
        }
        let mut k = 0;
        while k < 8 {
            hi[k] = 1 << k;
            k += 1;
        }
        Class { table, lo, hi }
    }
}

/// [`TCHAR`] as a [`Class`].
pub(crate) static TCHAR_CLASS: Class = Class::new(&TCHAR);
/// [`TARGET_PLAIN`] as a [`Class`].
pub(crate) static TARGET_PLAIN_CLASS: Class = Class::new(&TARGET_PLAIN);
/// [`HOST`] as a [`Class`].
pub(crate) static HOST_CLASS: Class = Class::new(&HOST);

/// How the head parser runs its class scans: byte by byte ([`Bytewise`]), or sixteen bytes at
/// a time where the CPU allows (`crate::simd::Ssse3`). The parser is generic over it, so each
/// kind is compiled into its own copy of the parser.
pub(crate) trait Scanner: Copy {
    /// Index of the first byte at or after `i` that is not in `class` (or `s.len()`).
    fn scan(self, s: &[u8], i: usize, class: &Class) -> usize;
}

/// Class scans with the tables, one byte at a time ([`scan`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bytewise;

impl Scanner for Bytewise {
    #[inline(always)]
    fn scan(self, s: &[u8], i: usize, class: &Class) -> usize {
        scan(s, i, class.table)
    }
}

/// Whether `name` (already known to be a token) equals `lit`, ignoring ASCII case. Every byte
/// of `lit` must have bit 0x20 set (lowercase letters, digits, `-`).
///
/// `b | 0x20` folds an upper-case letter onto its lower case; the only other bytes that fold
/// onto a byte of `lit` are controls, which a token cannot hold. Compared a word at a time
/// (the last word overlapping), so a field name costs a few instructions.
#[inline(always)]
pub(crate) fn token_eq_lower(name: &[u8], lit: &[u8]) -> bool {
    let n = name.len();
    if n != lit.len() {
        return false;
    }
    let w64 = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().unwrap());
    let w32 = |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().unwrap());
    if n >= 8 {
        let mut i = 0;
        while i + 8 <= n {
            if w64(name, i) | (LO * 0x20) != w64(lit, i) {
                return false;
            }
            i += 8;
        }
        i == n || w64(name, n - 8) | (LO * 0x20) == w64(lit, n - 8)
    } else if n >= 4 {
        w32(name, 0) | 0x2020_2020 == w32(lit, 0)
            && w32(name, n - 4) | 0x2020_2020 == w32(lit, n - 4)
    } else {
        name.iter().zip(lit).all(|(&a, &b)| a | 0x20 == b)
    }
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

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
        // 41 bytes: two 16-byte vectors, an 8-byte word and a byte tail; every byte in every
        // position, alone and followed by a second invalid byte.
        for b in 0..=255u8 {
            for lane in 0..41 {
                let mut v = vec![b'a'; 41];
                v[lane] = b;
                let want = if FIELD_VALUE[b as usize] { 41 } else { lane };
                assert_eq!(field_value_len(&v), want, "byte {b:#x} lane {lane}");
                if lane + 1 < v.len() {
                    v[lane + 1] = b'\r';
                    let want = if FIELD_VALUE[b as usize] {
                        lane + 1
                    } else {
                        lane
                    };
                    assert_eq!(field_value_len(&v), want, "byte {b:#x} lane {lane} then CR");
                }
                for len in [lane, lane + 1] {
                    let short = &v[..len.min(v.len())];
                    let want = short.iter().position(|&c| !FIELD_VALUE[c as usize]);
                    assert_eq!(field_value_len(short), want.unwrap_or(short.len()));
                }
            }
        }
    }

    #[test]
    fn scan_stops_at_the_first_byte_outside_the_class_in_every_lane() {
        for b in 0..=255u8 {
            for lane in 0..19 {
                let mut v = vec![b'a'; 19];
                v[lane] = b;
                let want = if TCHAR[b as usize] { 19 } else { lane };
                assert_eq!(scan(&v, 0, &TCHAR), want, "byte {b:#x} lane {lane}");
                assert_eq!(scan(&v, lane.min(3), &TCHAR), want.max(lane.min(3)));
            }
        }
    }

    #[test]
    fn nibble_tables_hold_exactly_each_class() {
        for class in [&TCHAR_CLASS, &TARGET_PLAIN_CLASS, &HOST_CLASS] {
            for b in 0..=255usize {
                let nibbles = class.lo[b & 15] & class.hi[b >> 4] != 0;
                assert_eq!(nibbles, class.table[b], "byte {b:#x}");
            }
        }
    }

    /// Every byte in every lane of a 40-byte run (two vectors and a byte tail), from every
    /// start up to 20: the vector scan stops where the table scan does.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_scans_stop_where_table_scans_do() {
        let Some(cpu) = crate::simd::Ssse3::detect() else {
            eprintln!("no SSSE3 on this CPU: vector scans not tested");
            return;
        };
        for class in [&TCHAR_CLASS, &TARGET_PLAIN_CLASS, &HOST_CLASS] {
            for b in 0..=255u8 {
                for lane in 0..40 {
                    let mut v = vec![b'a'; 40];
                    v[lane] = b;
                    for start in 0..20 {
                        let want = Bytewise.scan(&v, start, class);
                        assert_eq!(cpu.scan(&v, start, class), want, "{b:#x} {lane} {start}");
                        let short = &v[..lane + 1];
                        let want = Bytewise.scan(short, start.min(lane), class);
                        assert_eq!(cpu.scan(short, start.min(lane), class), want);
                    }
                }
            }
        }
    }

    #[test]
    fn token_eq_lower_folds_case_and_nothing_else() {
        assert!(token_eq_lower(b"Content-Length", b"content-length"));
        assert!(token_eq_lower(b"HOST", b"host"));
        assert!(!token_eq_lower(b"hosts", b"host"));
        assert!(!token_eq_lower(b"h0st", b"host"));
        // Every length up to 20, a difference in every position: found.
        let lit = b"abcdefghij-klmnopqrs";
        for n in 1..=lit.len() {
            let l = &lit[..n];
            assert!(token_eq_lower(&l.to_ascii_uppercase(), l), "{n}");
            for at in 0..n {
                let mut other = l.to_vec();
                other[at] = b'x';
                if other != l {
                    assert!(!token_eq_lower(&other, l), "{n} {at}");
                }
            }
        }
        // Every token byte that folds onto a byte of a literal is that byte in either case.
        for b in 0..=255u8 {
            for l in b"abcdefghijklmnopqrstuvwxyz-".iter() {
                if TCHAR[b as usize] && b | 0x20 == *l {
                    assert_eq!(b.to_ascii_lowercase(), *l, "{b:#x}");
                }
            }
        }
    }

    #[test]
    fn trim_ows_strips_both_ends_only() {
        assert_eq!(trim_ows(b" \t a b\t "), b"a b");
        assert_eq!(trim_ows(b"   "), b"");
    }
}
