//! Targeted cache control (RFC 9213): `CDN-Cache-Control`, the field a CDN (a gateway cache
//! such as this one) obeys instead of `Cache-Control` and `Expires` when the field is present
//! and valid. Its value is a Structured Fields Dictionary (RFC 8941 §3.2); an invalid one is
//! ignored whole (RFC 9213 §2.1), and a directive of the wrong type (`max-age="10"`) counts as
//! absent.

use crate::cache_control::ResponseDirectives;
use crate::fields::values;

/// The directives of `fields`' `CDN-Cache-Control`, when it is present and a valid
/// Dictionary; `None`: the cache reads `Cache-Control` and `Expires` as usual.
pub fn cdn_directives<N: AsRef<[u8]>, V: AsRef<[u8]>>(
    fields: &[(N, V)],
) -> Option<ResponseDirectives> {
    let mut joined = Vec::new();
    for line in values(fields, b"cdn-cache-control") {
        if !joined.is_empty() {
            joined.push(b',');
        }
        joined.extend_from_slice(line);
    }
    if joined.is_empty() || !is_dictionary(&joined) {
        return None;
    }
    // Members whose value is not an Integer (or a bare key) have the wrong type for every
    // directive the cache reads: drop them, so the Cache-Control reader sees only the
    // well-typed ones.
    let typed: Vec<&[u8]> = split_members(&joined)
        .filter(|m| {
            let m = m.split(|&b| b == b';').next().unwrap_or_default();
            match m.iter().position(|&b| b == b'=') {
                None => true,
                Some(eq) => is_integer(&m[eq + 1..]),
            }
        })
        .collect();
    let value = typed.join(&b", "[..]);
    Some(ResponseDirectives::parse(&[(
        &b"cache-control"[..],
        &value[..],
    )]))
}

/// The members of a dictionary, trimmed (commas inside strings never occur in a value that
/// passed [`is_dictionary`] unless quoted: split by a quote-aware scan).
fn split_members(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut out = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, &b) in v.iter().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b',' if !quoted => {
                out.push(v[start..i].trim_ascii());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(v[start..].trim_ascii());
    out.into_iter()
}

/// RFC 8941 §3.2: `member *( OWS "," OWS member )`, each `key [ "=" bare-item ] *params`
/// (inner lists are accepted as a whole when their parentheses balance).
fn is_dictionary(v: &[u8]) -> bool {
    split_members(v).all(|m| {
        let mut parts = m.split(|&b| b == b';');
        let head = parts.next().unwrap_or_default();
        let params_ok = parts.all(|p| {
            let p = p.trim_ascii();
            match p.iter().position(|&b| b == b'=') {
                None => is_key(p),
                Some(eq) => is_key(&p[..eq]) && is_bare_item(&p[eq + 1..]),
            }
        });
        let head_ok = match head.iter().position(|&b| b == b'=') {
            None => is_key(head),
            Some(eq) => is_key(&head[..eq]) && is_bare_item(&head[eq + 1..]),
        };
        head_ok && params_ok
    })
}

/// `key = ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" )`
fn is_key(k: &[u8]) -> bool {
    match k.split_first() {
        Some((first, rest)) => {
            (first.is_ascii_lowercase() || *first == b'*')
                && rest
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-.*".contains(b))
        }
        None => false,
    }
}

/// `sf-integer = ["-"] 1*15DIGIT`
fn is_integer(v: &[u8]) -> bool {
    let d = v.strip_prefix(b"-").unwrap_or(v);
    (1..=15).contains(&d.len()) && d.iter().all(u8::is_ascii_digit)
}

/// An Integer, Decimal, String, Token, Byte Sequence or Boolean (RFC 8941 §3.3), or an
/// inner list.
fn is_bare_item(v: &[u8]) -> bool {
    let decimal = |v: &[u8]| {
        let d = v.strip_prefix(b"-").unwrap_or(v);
        match d.iter().position(|&b| b == b'.') {
            Some(dot) => {
                (1..=12).contains(&dot)
                    && (1..=3).contains(&(d.len() - dot - 1))
                    && d.iter()
                        .enumerate()
                        .all(|(i, b)| i == dot || b.is_ascii_digit())
            }
            None => false,
        }
    };
    match v.first() {
        None => false,
        Some(b'"') => {
            v.len() >= 2
                && v[v.len() - 1] == b'"'
                && v[1..v.len() - 1].iter().all(|&b| (0x20..0x7f).contains(&b))
        }
        Some(b':') => {
            v.len() >= 2
                && v[v.len() - 1] == b':'
                && v[1..v.len() - 1]
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(b))
        }
        Some(b'?') => v == b"?0" || v == b"?1",
        Some(b'(') => v.ends_with(b")"),
        Some(c) if c.is_ascii_alphabetic() || *c == b'*' => v[1..]
            .iter()
            .all(|b| crate::fields::is_tchar(*b) || b":/".contains(b)),
        Some(_) => is_integer(v) || decimal(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cdn(v: &str) -> Option<ResponseDirectives> {
        cdn_directives(&[("CDN-Cache-Control", v)])
    }

    /// RFC 9213 §2.1 and RFC 8941 §3.2, as cache-tests' cdn-* rows read them.
    #[test]
    fn valid_dictionaries_are_used_and_invalid_ones_ignored() {
        use crate::cache_control::Delta;
        assert_eq!(cdn("max-age=3600").unwrap().max_age, Delta::Secs(3600));
        assert_eq!(
            cdn("foobar, max-age=3600").unwrap().max_age,
            Delta::Secs(3600)
        );
        assert!(cdn("private").unwrap().private);
        assert!(cdn("no-store").unwrap().no_store);
        assert!(cdn("no-cache").unwrap().no_cache);
        // Not a dictionary: ignored whole.
        assert_eq!(cdn("max-age=10000, &&&&&"), None);
        assert_eq!(cdn("MaX-aGe=3600"), None);
        // A dictionary whose max-age is a String: that directive is absent.
        assert_eq!(cdn("max-age=\"10000\"").unwrap().max_age, Delta::Absent);
        assert_eq!(cdn_directives::<&str, &str>(&[]), None);
    }
}
