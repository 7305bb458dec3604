//! Choosing a precompressed sibling (`.br`, `.gz`) from Accept-Encoding (RFC 9110 §12.5.3).
//!
//! Owns q-value parsing and the choice; it never compresses anything and never touches the
//! file system (the caller says which siblings exist). At equal q the server prefers br, then
//! gzip, then identity: smaller bytes first.
#![forbid(unsafe_code)]

/// A content coding this module can serve from a precompressed file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    Identity,
    Brotli,
    Gzip,
}

impl Encoding {
    /// The codings tried, in server preference order at equal q.
    pub const PREFERENCE: [Encoding; 3] = [Encoding::Brotli, Encoding::Gzip, Encoding::Identity];

    /// The precompressed codings, in the order siblings are looked up.
    pub const COMPRESSED: [Encoding; 2] = [Encoding::Brotli, Encoding::Gzip];

    /// What is appended to a file name to find this coding's sibling.
    pub fn suffix(self) -> &'static str {
        match self {
            Encoding::Identity => "",
            Encoding::Brotli => ".br",
            Encoding::Gzip => ".gz",
        }
    }

    /// The Content-Encoding value; `None` for identity, which is never sent.
    pub fn content_encoding(self) -> Option<&'static str> {
        match self {
            Encoding::Identity => None,
            Encoding::Brotli => Some("br"),
            Encoding::Gzip => Some("gzip"),
        }
    }
}

/// A q-value in thousandths: 0 refuses, 1000 is the default weight (RFC 9110 §12.4.2).
type Q = u16;
const Q_MAX: Q = 1000;
/// The weight of identity when Accept-Encoding neither lists it nor has `*`: acceptable,
/// below any coding the client did list.
const Q_UNLISTED_IDENTITY: Q = 1;

/// What one Accept-Encoding value says about the codings we care about.
#[derive(Default, Debug)]
struct Weights {
    br: Option<Q>,
    gzip: Option<Q>,
    identity: Option<Q>,
    star: Option<Q>,
}

impl Weights {
    fn parse(value: &[u8]) -> Weights {
        let mut w = Weights::default();
        for element in value.split(|&b| b == b',') {
            let mut parts = element.split(|&b| b == b';');
            let coding = trim(parts.next().unwrap_or_default());
            if coding.is_empty() {
                continue; // RFC 9110 §5.6.1: empty list elements are ignored.
            }
            let mut q = Some(Q_MAX);
            for param in parts {
                let param = trim(param);
                match param.split_first_chunk::<2>() {
                    Some((name, v)) if name.eq_ignore_ascii_case(b"q=") => q = parse_q(trim(v)),
                    _ => {}
                }
            }
            // An element with a malformed weight is ignored rather than guessed at.
            let Some(q) = q else { continue };
            let slot = if coding.eq_ignore_ascii_case(b"br") {
                &mut w.br
            } else if coding.eq_ignore_ascii_case(b"gzip") || coding.eq_ignore_ascii_case(b"x-gzip")
            {
                // RFC 9110 §8.4.1.3: x-gzip is equivalent to gzip.
                &mut w.gzip
            } else if coding.eq_ignore_ascii_case(b"identity") {
                &mut w.identity
            } else if coding == b"*" {
                &mut w.star
            } else {
                continue;
            };
            // The first mention of a coding wins.
            slot.get_or_insert(q);
        }
        w
    }

    /// The weight for `e`: its own entry, else `*`'s, else the default (RFC 9110 §12.5.3:
    /// an unlisted coding is not acceptable; identity is acceptable unless excluded, but an
    /// unlisted identity is the least preferred, so `br;q=0.5` still gets br).
    fn q(&self, e: Encoding) -> Q {
        let (own, default) = match e {
            Encoding::Brotli => (self.br, 0),
            Encoding::Gzip => (self.gzip, 0),
            Encoding::Identity => (self.identity, Q_UNLISTED_IDENTITY),
        };
        own.or(self.star).unwrap_or(default)
    }
}

/// The coding to serve. `accept` is the Accept-Encoding value (`None` when absent: identity,
/// the representation every client understands); `available` says which siblings exist.
/// When every available coding is refused, identity is served anyway (RFC 9110 §12.5.3
/// allows ignoring the field rather than answering 415).
pub fn choose(accept: Option<&[u8]>, available: impl Fn(Encoding) -> bool) -> Encoding {
    let Some(accept) = accept else {
        return Encoding::Identity;
    };
    let weights = Weights::parse(accept);
    let mut best = (Encoding::Identity, 0);
    for e in Encoding::PREFERENCE {
        let q = weights.q(e);
        // Strictly greater: an earlier (preferred) coding keeps a tie.
        if q > best.1 && (e == Encoding::Identity || available(e)) {
            best = (e, q);
        }
    }
    best.0
}

/// RFC 9110 §12.4.2: `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`.
fn parse_q(v: &[u8]) -> Option<Q> {
    let (int, frac) = match v.split_first()? {
        (b'0', rest) => (0, rest),
        (b'1', rest) => (1, rest),
        _ => return None,
    };
    let digits = match frac {
        [] => &[][..],
        [b'.', digits @ ..] if digits.len() <= 3 => digits,
        _ => return None,
    };
    let mut thousandths: Q = 0;
    let mut scale = 100;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        thousandths += Q::from(d - b'0') * scale;
        scale /= 10;
    }
    let q = int * Q_MAX + thousandths;
    (q <= Q_MAX).then_some(q)
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|&c| c != b' ' && c != b'\t');
    let end = b.iter().rposition(|&c| c != b' ' && c != b'\t');
    match (start, end) {
        (Some(s), Some(e)) => &b[s..=e],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::Encoding::{Brotli as Br, Gzip as Gz, Identity as Id};
    use super::*;

    #[test]
    fn choose_table() {
        // (Accept-Encoding, br sibling exists, gz sibling exists, expected)
        let rows: &[(Option<&str>, bool, bool, Encoding)] = &[
            // Absent field: identity.
            (None, true, true, Id),
            // RFC 9110 §12.5.3: an empty value means "no coding wanted".
            (Some(""), true, true, Id),
            (Some("gzip"), true, true, Gz),
            (Some("br"), true, true, Br),
            (Some("x-gzip"), true, true, Gz),
            (Some("GZIP"), true, true, Gz),
            // Equal q: br preferred over gzip.
            (Some("gzip, br"), true, true, Br),
            (Some("gzip, deflate, br, zstd"), true, true, Br),
            (Some("gzip, br"), false, true, Gz),
            (Some("gzip, br"), true, false, Br),
            (Some("gzip, br"), false, false, Id),
            // q=0 refuses (RFC 9110 §12.4.2).
            (Some("gzip;q=0, br"), true, true, Br),
            (Some("br;q=0, gzip"), true, true, Gz),
            (Some("br;q=0, gzip;q=0"), true, true, Id),
            (Some("br;q=0.000"), true, true, Id),
            // Higher q wins over server preference.
            (Some("br;q=0.5, gzip;q=0.8"), true, true, Gz),
            (Some("br;q=0.5, gzip"), true, true, Gz),
            (Some("br ; q=0.9 , gzip ; Q=0.1"), true, true, Br),
            (Some("br;q=1.0, gzip;q=1"), true, true, Br),
            // Identity weighed against codings.
            (Some("identity, br;q=0.5"), true, true, Id),
            (Some("br;q=0.5"), true, true, Br),
            (Some("br;q=0.001"), true, true, Br),
            (Some("br;q=0.5"), false, true, Id),
            (Some("br;q=0.5, identity;q=0"), true, true, Br),
            (Some("br;q=0.5, identity;q=0.4"), true, true, Br),
            // `*` matches codings not listed.
            (Some("*"), true, true, Br),
            (Some("*"), false, true, Gz),
            (Some("*;q=0.5, br;q=0"), true, true, Gz),
            (Some("*;q=0"), true, true, Id),
            (Some("*;q=0, identity"), true, true, Id),
            (Some("*;q=0, gzip;q=0.1"), true, true, Gz),
            // Unknown codings are ignored.
            (Some("deflate, zstd"), true, true, Id),
            // Malformed weights: the element is ignored.
            (Some("br;q=2, gzip"), true, true, Gz),
            (Some("br;q=0.1234, gzip;q=0.5"), true, true, Gz),
            (Some("br;q=abc"), true, true, Id),
            (Some("br;q=1.5, gzip;q=1.001"), true, true, Id),
            (Some(", ,br"), true, true, Br),
        ];
        for &(accept, br, gz, want) in rows {
            let got = choose(accept.map(str::as_bytes), |e| match e {
                Br => br,
                Gz => gz,
                Id => true,
            });
            assert_eq!(got, want, "{accept:?} br={br} gz={gz}");
        }
    }

    #[test]
    fn parse_q_table() {
        let rows: &[(&str, Option<Q>)] = &[
            ("0", Some(0)),
            ("1", Some(1000)),
            ("1.", Some(1000)),
            ("1.000", Some(1000)),
            ("0.5", Some(500)),
            ("0.05", Some(50)),
            ("0.001", Some(1)),
            ("0.0001", None),
            ("1.001", None),
            ("2", None),
            ("", None),
            ("-1", None),
            (".5", None),
        ];
        for &(v, want) in rows {
            assert_eq!(parse_q(v.as_bytes()), want, "{v}");
        }
    }
}
