//! Invalidation (RFC 9111 §4.4): after a non-error answer to an unsafe method, the target URI
//! and the Location and Content-Location URIs of the same origin are no longer to be served
//! from the cache. Returns the keys; the store removes them.

use crate::facts::Method;
use crate::fields::{Field, first, trim};
use crate::key::Key;

/// The keys an answer with `status` to a request with `method` for `target` invalidates
/// (§4.4): none for safe methods or error answers (only 2xx and 3xx invalidate); otherwise the
/// target, and Location / Content-Location when they resolve to the target's origin (§4.4:
/// "MUST NOT" for another host, which would let one origin purge another's entries).
pub fn invalidated(method: Method, status: u16, target: &Key, response: &[Field<'_>]) -> Vec<Key> {
    if method != Method::Unsafe || !(200..400).contains(&status) {
        return Vec::new();
    }
    let mut keys = vec![target.clone()];
    for name in [&b"location"[..], b"content-location"] {
        let resolved = first(response, name).and_then(|r| resolve(target, r));
        if let Some(k) = resolved.filter(|k| !keys.contains(k)) {
            keys.push(k);
        }
    }
    keys
}

/// `reference` resolved against `base` (RFC 3986 §5.2, without dot segments: a reference with
/// `.` or `..` segments resolves to nothing rather than to a guess), kept only when it is of
/// `base`'s origin.
pub fn resolve(base: &Key, reference: &[u8]) -> Option<Key> {
    let reference = trim(reference);
    let reference = &reference[..reference
        .iter()
        .position(|b| *b == b'#')
        .unwrap_or(reference.len())];
    if reference
        .split(|b| *b == b'/' || *b == b'?')
        .any(|s| s == b"." || s == b"..")
    {
        return None;
    }
    let origin = base.origin();
    let scheme_end = origin.windows(3).position(|w| w == b"://")?;
    let scheme = &origin[..scheme_end];
    let authority = &origin[scheme_end + 3..];
    let key = if let Some(rest) = reference.strip_prefix(b"//") {
        let mut absolute = scheme.to_vec();
        absolute.extend_from_slice(b"://");
        absolute.extend_from_slice(rest);
        Key::new(scheme, authority, &absolute).ok()?
    } else if reference.first() == Some(&b'/') {
        Key::new(scheme, authority, reference).ok()?
    } else if reference
        .windows(3)
        .position(|w| w == b"://")
        .is_some_and(|i| {
            reference[..i]
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b))
        })
    {
        // Absolute: Key::new refuses it unless scheme and authority are the base's.
        Key::new(scheme, authority, reference).ok()?
    } else {
        // A relative path: merged with the base path's directory (RFC 3986 §5.2.3).
        let base_bytes = base.as_bytes();
        let path = &base_bytes[origin.len()..];
        let path = &path[..path.iter().position(|b| *b == b'?').unwrap_or(path.len())];
        let dir = &path[..path.iter().rposition(|b| *b == b'/').map_or(0, |i| i + 1)];
        let mut merged = dir.to_vec();
        if reference.first() == Some(&b'?') {
            merged = path.to_vec();
        }
        merged.extend_from_slice(reference);
        Key::new(scheme, authority, &merged).ok()?
    };
    (key.origin() == origin).then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Key {
        let (scheme, rest) = s.split_once("://").unwrap();
        let slash = rest.find('/').unwrap();
        Key::new(
            scheme.as_bytes(),
            &rest.as_bytes()[..slash],
            &rest.as_bytes()[slash..],
        )
        .unwrap()
    }

    #[test]
    fn invalidation_table() {
        let target = k("http://a.example/items/1?x");
        type Row<'a> = (&'a str, u16, &'a [Field<'a>], &'a [&'a str], &'a str);
        let rows: &[Row] = &[
            (
                "POST",
                200,
                &[],
                &["http://a.example/items/1?x"],
                "§4.4: the target",
            ),
            ("PUT", 204, &[], &["http://a.example/items/1?x"], "§4.4"),
            (
                "DELETE",
                301,
                &[],
                &["http://a.example/items/1?x"],
                "§4.4: 3xx is non-error",
            ),
            (
                "FOO",
                200,
                &[],
                &["http://a.example/items/1?x"],
                "§4.4: unknown methods are unsafe",
            ),
            ("POST", 404, &[], &[], "§4.4: not after an error"),
            ("POST", 500, &[], &[], "§4.4: not after an error"),
            ("GET", 200, &[], &[], "§4.4: safe"),
            ("OPTIONS", 200, &[], &[], "§4.4: safe"),
            (
                "POST",
                201,
                &[
                    (b"Location", b"/items/2"),
                    (b"Content-Location", b"http://a.example/items/1/v"),
                ],
                &[
                    "http://a.example/items/1?x",
                    "http://a.example/items/2",
                    "http://a.example/items/1/v",
                ],
                "§4.4: Location and Content-Location",
            ),
            (
                "POST",
                201,
                &[(b"Location", b"http://b.example/items/2")],
                &["http://a.example/items/1?x"],
                "§4.4: not another origin",
            ),
            (
                "POST",
                201,
                &[(b"Location", b"https://a.example/items/2")],
                &["http://a.example/items/1?x"],
                "§4.4: scheme is origin",
            ),
            (
                "POST",
                201,
                &[(b"Location", b"//b.example/x")],
                &["http://a.example/items/1?x"],
                "§4.4: scheme-relative elsewhere",
            ),
            (
                "POST",
                201,
                &[(b"Location", b"2")],
                &["http://a.example/items/1?x", "http://a.example/items/2"],
                "RFC 3986 §5.2.3: merged",
            ),
            (
                "POST",
                201,
                &[(b"Location", b"../x")],
                &["http://a.example/items/1?x"],
                "dot segments: nothing",
            ),
        ];
        for (method, status, fields, want, rule) in rows {
            let got = invalidated(Method::of(method.as_bytes()), *status, &target, fields);
            let got: Vec<&str> = got
                .iter()
                .map(|k| std::str::from_utf8(k.as_bytes()).unwrap())
                .collect();
            assert_eq!(got, *want, "{method} {status} {fields:?} ({rule})");
        }
    }
}
